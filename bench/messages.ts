// Messages API rows: POST /v1/messages (Anthropic's API, what Claude Code
// speaks) translated to an OpenAI upstream, small and as a Claude Code-style
// request of about 400 KB (system blocks, 22 tools with JSON Schemas, a long
// tool_use / tool_result history: test/fixtures/claude-code-session.ts).
// Beside it, the plain proxy forwards the same conversation already written
// as the chat request the gateway sends upstream, so the ratio is what the
// gateway's validation and translation of a 400 KB request cost.
import { claudeCodeRequest, longHistory } from '../test/fixtures/claude-code-session.js';
import { toChatRequest, type MessagesRequest } from '../src/api/messages-map.js';

/** About 400 KB, as a long Claude Code session reaches. */
export const CLAUDE_CODE_BYTES = 400_000;

/** The Claude Code-style Messages body (not streamed, no thinking: the upstream is a plain chat model). */
export function claudeCodeBody(model: string, tokens: number): Record<string, unknown> {
  return { ...claudeCodeRequest(model, longHistory(CLAUDE_CODE_BYTES), { thinking: false, stream: false }), max_tokens: tokens };
}

/** The chat request the gateway sends upstream for it, for the plain proxy's row. */
export function claudeCodeChatBody(model: string, tokens: number): string {
  const { request } = toChatRequest(claudeCodeBody(model, tokens) as unknown as MessagesRequest, { family: 'openai', stream: false });
  return JSON.stringify(request);
}

/** A copy without `cache_control` (an OpenAI upstream caches on its own: the gateway sends no marks). */
function unmarked(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(unmarked);
  if (!v || typeof v !== 'object') return v;
  return Object.fromEntries(Object.entries(v).filter(([k]) => k !== 'cache_control').map(([k, x]) => [k, unmarked(x)]));
}

/** What the mock must have received for the Claude Code row: every tool, every turn, the tool results. */
export function checkClaudeCodeUpstream(received: unknown, upstreamModel: string, tokens: number): string | null {
  return checkChatUpstream(received, JSON.parse(claudeCodeChatBody(upstreamModel, tokens)), upstreamModel);
}

/** What the mock must have received for a Messages request translated to an OpenAI upstream (`body`, the client's JSON text). */
export function checkMessagesUpstream(received: unknown, body: string, upstreamModel: string): string | null {
  const { request } = toChatRequest(JSON.parse(body) as MessagesRequest, { family: 'openai', stream: false });
  return checkChatUpstream(received, request, upstreamModel);
}

function checkChatUpstream(received: unknown, expected: unknown, upstreamModel: string): string | null {
  const want = expected as { messages: unknown[]; tools: unknown[] };
  const got = received as { model?: string; messages?: { role: string }[]; tools?: unknown[] } | undefined;
  if (!got || got.model !== upstreamModel) return `the mock received model ${got?.model}, expected ${upstreamModel}`;
  if (got.tools?.length !== want.tools.length) return `upstream has ${got.tools?.length ?? 'no'} tools, expected ${want.tools.length}`;
  const tool = want.tools.findIndex((x, i) => JSON.stringify(unmarked(got.tools![i])) !== JSON.stringify(unmarked(x)));
  if (tool !== -1) return `upstream tools[${tool}] differs from the translation: ${JSON.stringify(got.tools[tool]).slice(0, 160)}`;
  if (got.messages?.length !== want.messages.length) return `upstream has ${got.messages?.length ?? 'no'} messages, expected ${want.messages.length}`;
  const diff = want.messages.findIndex((m, i) => JSON.stringify(unmarked(got.messages![i])) !== JSON.stringify(unmarked(m)));
  if (diff !== -1) return `upstream messages[${diff}] differs from the translation: ${JSON.stringify(got.messages[diff]).slice(0, 160)}`;
  return null;
}
