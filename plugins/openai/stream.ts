// Chat chunks from OpenAI and OpenAI-compatible servers, made uniform.
// Compatible servers deviate (shared/fixtures/WIRE-FORMATS.md section 6):
// tool-call `id` may be "", `index` may start at 1 or be missing, a whole call
// may come in one chunk, reasoning may come as `delta.reasoning`, the
// finish_reason chunk may be repeated, and `[DONE]` may be missing.
import { randomBytes } from 'node:crypto';
import type { ChatChunk, ChatCompletion } from '../../src/types.js';
import type { SSEEvent } from '../../src/sse.js';
import { UpstreamError, parseEventJson, statusType } from '../../src/provider.js';

export function toolCallId(): string {
  return 'call_' + randomBytes(12).toString('hex');
}

export async function* openAIChunks(events: AsyncIterable<SSEEvent>): AsyncGenerator<ChatChunk> {
  // Per choice: upstream tool index -> stable 0-based index and id.
  const toolIndex = new Map<string, { index: number; id: string }>();
  const nextIndex = new Map<number, number>();
  const finished = new Set<number>();
  for await (const ev of events) {
    if (ev.data === '[DONE]') return;
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
          let slot = toolIndex.get(key);
          if (!slot) {
            const n = nextIndex.get(choice.index) ?? 0;
            nextIndex.set(choice.index, n + 1);
            slot = { index: n, id: tc.id || toolCallId() };
            toolIndex.set(key, slot);
            tc.id = slot.id;
            tc.type = 'function';
          } else if (tc.id === '') delete tc.id;
          tc.index = slot.index;
        }
      }
      // xAI repeats the finish_reason chunk: forward it once.
      const empty = !d.content && !d.tool_calls && !d.reasoning_content && !d.refusal && !d.role;
      if (choice.finish_reason && finished.has(choice.index) && empty) continue;
      if (choice.finish_reason) finished.add(choice.index);
      drop = false;
    }
    if (drop && !chunk.usage) continue;
    yield chunk;
  }
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
