// Chat chunks from OpenAI and OpenAI-compatible servers, made uniform.
// Compatible servers deviate (docs/providers-openai.md):
// tool-call `id` may be "", `index` may start at 1 or be missing, a whole call
// may come in one chunk, reasoning may come as `delta.reasoning`, the
// finish_reason chunk may be repeated, and `[DONE]` may be missing.
import type { ChatChunk } from '../../../src/types.js';
import type { SSEEvent } from '../../../src/sse.js';
import { parseEventJson, MappedEvents, type EventMapper } from '../../../src/stream/mapped.js';
import { toolCallId } from './response.js';
import { streamError } from './errors.js';
import type { WireChunk, WireDelta } from './wire.js';

/** The chunks of an OpenAI(-compatible) stream, made uniform event by event (see OpenAIChunkMapper). */
export function openAIChunks(events: AsyncIterable<SSEEvent>): MappedEvents<ChatChunk> {
  return new MappedEvents(events, new OpenAIChunkMapper());
}

export class OpenAIChunkMapper implements EventMapper<ChatChunk> {
  // Per choice: upstream tool index -> stable 0-based index and id.
  private readonly toolIndex = new Map<string, { index: number; id: string }>();
  private readonly nextIndex = new Map<number, number>();
  private readonly finished = new Set<number>();

  step(ev: SSEEvent, out: ChatChunk[]): boolean {
    if (ev.data === '[DONE]') return true;
    const chunk = parseEventJson<WireChunk>(ev.data);
    if (chunk.error) throw streamError(chunk.error);
    if (!Array.isArray(chunk.choices)) chunk.choices = [];
    let drop = chunk.choices.length > 0;
    for (const choice of chunk.choices) {
      const d = (choice.delta ?? {}) as WireDelta;
      choice.delta = d;
      if (d.reasoning !== undefined && d.reasoning_content === undefined) {
        d.reasoning_content = d.reasoning;
        delete d.reasoning;
      }
      if (d.tool_calls) {
        for (let i = 0; i < d.tool_calls.length; i++) {
          const tc = d.tool_calls[i];
          const upstreamIdx = tc.index ?? (tc.id ? `id:${tc.id}` : `pos:${i}`);
          const key = `${choice.index}|${upstreamIdx}`;
          let slot = this.toolIndex.get(key);
          if (!slot) {
            const n = this.nextIndex.get(choice.index) ?? 0;
            this.nextIndex.set(choice.index, n + 1);
            slot = { index: n, id: tc.id || toolCallId() };
            this.toolIndex.set(key, slot);
            tc.id = slot.id;
            tc.type = 'function';
          } else if (tc.id === '') delete tc.id;
          tc.index = slot.index;
        }
      }
      // xAI repeats the finish_reason chunk: forward it once.
      const empty = !d.content && !d.tool_calls && !d.reasoning_content && !d.refusal && !d.role;
      if (choice.finish_reason && this.finished.has(choice.index) && empty) continue;
      if (choice.finish_reason) this.finished.add(choice.index);
      drop = false;
    }
    if (drop && !chunk.usage) return false;
    out.push(chunk);
    return false;
  }

  /** `[DONE]` may be missing (some compatible servers): the end of the body ends the stream. */
  end(): void {}
}
