// Azure's chat answers are OpenAI's with content-filter annotations
// (https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter):
// `prompt_filter_results` on the completion and `content_filter_results` on
// each choice (and on each generated image). They are not part of the OpenAI
// API, so they are dropped here (and from stream chunks, stream.ts); what the
// filter decided reaches the client as OpenAI does it: `finish_reason:
// "content_filter"` (passed through), or a 400 (errors.ts).
import type { ChatCompletion } from '../../../src/types.js';
import type { Annotated } from './wire.js';

/** Remove the annotations of a completion or chunk, in place. */
export function strip(o: Annotated): void {
  if (o.prompt_filter_results !== undefined) delete o.prompt_filter_results;
  for (const c of o.choices ?? []) if (c.content_filter_results !== undefined) delete c.content_filter_results;
}

export function withoutFilterResults(body: ChatCompletion): ChatCompletion {
  strip(body as unknown as Annotated);
  return body;
}

/** Azure annotates each generated image (`content_filter_results`, `prompt_filter_results`). */
export function imagesWithoutFilterResults(body: Record<string, unknown>): Record<string, unknown> {
  if (Array.isArray(body.data))
    for (const d of body.data as Record<string, unknown>[]) {
      delete d.content_filter_results;
      delete d.prompt_filter_results;
    }
  return body;
}
