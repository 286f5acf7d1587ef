// Non-stream answers from OpenAI and OpenAI-compatible servers, made uniform
// (the same-API fast path forwards the rest as it is). Compatible servers
// deviate (docs/providers-openai.md): reasoning may come as
// `message.reasoning`, and a tool call's `id` may be missing or "".
import { randomHex } from '../../../src/random.js';
import type { ChatCompletion } from '../../../src/types.js';
import type { WireMessage } from './wire.js';

/** A tool call id for a call the server sent without one. */
export function toolCallId(): string {
  return 'call_' + randomHex(12);
}

/** Non-stream compat fixes on a completion. */
export function fixCompletion(body: ChatCompletion): ChatCompletion {
  for (const c of body.choices ?? []) {
    const m = c.message as WireMessage;
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
