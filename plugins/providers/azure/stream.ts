// Azure's chat chunks are OpenAI's with content-filter annotations
// (response.ts says which): in a stream, `prompt_filter_results` comes as a
// first chunk of its own with `choices: []`, an empty `id` and `model`, and
// `content_filter_results` possibly as trailing chunks that carry nothing
// else, when the filter runs asynchronously. Those chunks are dropped, the
// annotations of the others removed.
import type { ChatChunk } from '../../../src/types.js';
import type { SSEEvent } from '../../../src/sse.js';
import type { EventMapper } from '../../../src/stream/mapped.js';
import { OpenAIChunkMapper } from '../openai/stream.js';
import { strip } from './response.js';
import type { Annotated } from './wire.js';

/** A chunk that carried only annotations: nothing for the client. */
function annotationOnly(c: ChatChunk): boolean {
  if (c.usage) return false;
  if (c.choices.length === 0) return true;
  return c.choices.every((ch) => !ch.finish_reason && (!ch.delta || Object.keys(ch.delta).length === 0) && !ch.logprobs);
}

/** The OpenAI chunk mapping (plugins/providers/openai/stream.ts), then Azure's annotations removed. */
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
