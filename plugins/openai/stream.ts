// Chat chunks from OpenAI and OpenAI-compatible servers, made uniform.
// Compatible servers deviate (docs/providers-openai.md):
// tool-call `id` may be "", `index` may start at 1 or be missing, a whole call
// may come in one chunk, reasoning may come as `delta.reasoning`, the
// finish_reason chunk may be repeated, and `[DONE]` may be missing.
import { randomBytes } from 'node:crypto';
import type { ChatChunk, ChatCompletion } from '../../src/types.js';
import type { SSEEvent } from '../../src/sse.js';
import { UpstreamError, parseEventJson, statusType, MappedEvents, type EventMapper } from '../../src/provider.js';

export function toolCallId(): string {
  return 'call_' + randomBytes(12).toString('hex');
}

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
    const chunk = parseEventJson<ChatChunk & { error?: { message?: string; type?: string; code?: string } }>(ev.data);
    if (chunk.error) {
      throw new UpstreamError(500, { message: chunk.error.message ?? 'upstream stream error', type: chunk.error.type ?? statusType(500), param: null, code: chunk.error.code ?? null });
    }
    if (!Array.isArray(chunk.choices)) chunk.choices = [];
    let drop = chunk.choices.length > 0;
    for (const choice of chunk.choices) {
      const d = (choice.delta ?? {}) as ChatChunk['choices'][number]['delta'] & { reasoning?: string };
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

/** Non-stream compat fixes on a completion. */
export function fixCompletion(body: ChatCompletion): ChatCompletion {
  for (const c of body.choices ?? []) {
    const m = c.message as typeof c.message & { reasoning?: string };
    if (!m) continue;
    if (m.reasoning !== undefined && m.reasoning_content === undefined) {
      m.reasoning_content = m.reasoning;
      delete m.reasoning;
    }
    m.tool_calls?.forEach((tc) => {
      if (!tc.id) tc.id = toolCallId();
    });
  }
  return body;
}
