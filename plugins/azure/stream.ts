// Azure's chat answers are OpenAI's with content-filter annotations
// (https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter):
// `prompt_filter_results` on the completion (in a stream, a first chunk of
// its own with `choices: []`, an empty `id` and `model`), and
// `content_filter_results` on each choice (in a stream, possibly trailing
// chunks that carry nothing else, when the filter runs asynchronously). They
// are not part of the OpenAI API, so they are dropped here; what the filter
// decided reaches the client as OpenAI does it: `finish_reason:
// "content_filter"` (passed through), or a 400 (errors.ts).
import type { ChatChunk, ChatCompletion } from '../../src/types.js';
import type { SSEEvent } from '../../src/sse.js';
import type { EventMapper } from '../../src/provider.js';
import { OpenAIChunkMapper } from '../openai/stream.js';

type Annotated = { prompt_filter_results?: unknown; choices?: { content_filter_results?: unknown }[] };

function strip(o: Annotated): void {
  if (o.prompt_filter_results !== undefined) delete o.prompt_filter_results;
  for (const c of o.choices ?? []) if (c.content_filter_results !== undefined) delete c.content_filter_results;
}

/** A chunk that carried only annotations: nothing for the client. */
function annotationOnly(c: ChatChunk): boolean {
  if (c.usage) return false;
  if (c.choices.length === 0) return true;
  return c.choices.every((ch) => !ch.finish_reason && (!ch.delta || Object.keys(ch.delta).length === 0) && !ch.logprobs);
}

/** The OpenAI chunk mapping (plugins/openai/stream.ts), then Azure's annotations removed. */
export class AzureChunkMapper implements EventMapper<ChatChunk> {
  private readonly inner = new OpenAIChunkMapper();
  private readonly mapped: ChatChunk[] = [];

  step(ev: SSEEvent, out: ChatChunk[]): boolean {
    const done = this.inner.step(ev, this.mapped);
    this.flush(out);
    return done;
  }

  end(out: ChatChunk[]): void {
    (this.inner as EventMapper<ChatChunk>).end(this.mapped);
    this.flush(out);
  }

  private flush(out: ChatChunk[]): void {
    for (const c of this.mapped) {
      strip(c as unknown as Annotated);
      if (!annotationOnly(c)) out.push(c);
    }
    this.mapped.length = 0;
  }
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
