// A strict mock of Cohere's v2 Chat API (POST /v2/chat,
// https://docs.cohere.com/v2/reference/chat), for the custom-provider
// example (examples/custom-provider). It checks what Cohere checks: the
// Bearer key, the known request fields (an OpenAI-only field is refused),
// the model, the message roles and their fields, a tool message answering a
// tool call the assistant made, the tools' shape, `tool_choice`
// REQUIRED|NONE, `response_format`, `safety_mode`; errors are Cohere's
// `{ id, message }`. It answers in Cohere's shapes: `message.content[]`,
// `tool_plan`, `tool_calls`, `finish_reason` COMPLETE|TOOL_CALL|MAX_TOKENS,
// `usage.billed_units` and `usage.tokens`; a stream is SSE with `event:` lines
// and Cohere's event types (message-start, content-start/-delta/-end,
// tool-plan-delta, tool-call-start/-delta/-end, message-end).
import { randomUUID } from 'node:crypto';
import { startMock, sse, type MockServer, type Recorded, type Reply } from './server.js';

export const COHERE_KEY = 'co-test-key-0123456789abcdef';
export const COHERE_MODELS = new Set(['command-a-03-2025', 'command-r7b-12-2024', 'command-r-plus-08-2024']);

const FIELDS = new Set([
  'model', 'messages', 'stream', 'tools', 'strict_tools', 'documents', 'citation_options', 'response_format', 'safety_mode',
  'max_tokens', 'stop_sequences', 'temperature', 'seed', 'frequency_penalty', 'presence_penalty', 'k', 'p', 'logprobs',
  'tool_choice', 'thinking', 'priority',
]);
const MESSAGE_FIELDS: Record<string, Set<string>> = {
  system: new Set(['role', 'content']),
  user: new Set(['role', 'content']),
  assistant: new Set(['role', 'content', 'tool_calls', 'tool_plan', 'citations']),
  tool: new Set(['role', 'tool_call_id', 'content']),
};

const err = (status: number, message: string): Reply => ({ status, json: { id: randomUUID(), message } });
const invalid = (message: string) => err(400, `invalid request: ${message}`);

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p: any) => (p?.type === 'text' ? p.text : '')).join(' ');
  return '';
}

export function validateCohere(body: any): Reply | undefined {
  if (!body || typeof body !== 'object') return invalid('body must be a JSON object');
  for (const k of Object.keys(body)) if (!FIELDS.has(k)) return invalid(`unknown field: parameter ${k} is not a valid field`);
  if (typeof body.model !== 'string') return invalid('model is required');
  if (!COHERE_MODELS.has(body.model)) return err(404, `model '${body.model}' not found, make sure the correct model ID was used and that you have access to the model.`);
  if (!Array.isArray(body.messages) || body.messages.length === 0) return invalid('messages must contain at least one message');
  const callIds = new Set<string>();
  for (const [i, m] of body.messages.entries()) {
    const allowed = MESSAGE_FIELDS[m?.role];
    if (!allowed) return invalid(`messages[${i}].role must be one of system, user, assistant, tool`);
    for (const k of Object.keys(m)) if (!allowed.has(k)) return invalid(`messages[${i}]: unknown field ${k}`);
    if (m.role === 'user') {
      if (typeof m.content !== 'string' && !Array.isArray(m.content)) return invalid(`messages[${i}].content must be a string or an array`);
      if (Array.isArray(m.content)) for (const p of m.content) if (p?.type !== 'text' && p?.type !== 'image_url') return invalid(`messages[${i}].content: unknown content type ${p?.type}`);
    }
    if (m.role === 'assistant') {
      if (m.content === undefined && !m.tool_calls?.length) return invalid(`messages[${i}]: an assistant message needs content or tool_calls`);
      for (const tc of m.tool_calls ?? []) {
        if (typeof tc.id !== 'string' || tc.type !== 'function' || typeof tc.function?.name !== 'string' || typeof tc.function?.arguments !== 'string')
          return invalid(`messages[${i}].tool_calls: each needs id, type "function" and function {name, arguments}`);
        callIds.add(tc.id);
      }
    }
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string') return invalid(`messages[${i}].tool_call_id is required`);
      if (!callIds.has(m.tool_call_id)) return invalid(`messages[${i}].tool_call_id ${m.tool_call_id} does not match a tool call of a previous assistant message`);
    }
  }
  for (const [i, t] of (body.tools ?? []).entries()) {
    if (t?.type !== 'function' || typeof t.function?.name !== 'string' || typeof t.function?.parameters !== 'object') return invalid(`tools[${i}] must be {type: "function", function: {name, parameters}}`);
  }
  if (body.tool_choice !== undefined && body.tool_choice !== 'REQUIRED' && body.tool_choice !== 'NONE') return invalid('tool_choice must be REQUIRED or NONE');
  if (body.tool_choice !== undefined && !body.tools?.length) return invalid('tool_choice requires tools');
  if (body.response_format !== undefined && !['text', 'json_object'].includes(body.response_format?.type)) return invalid('response_format.type must be text or json_object');
  if (body.safety_mode !== undefined && !['CONTEXTUAL', 'STRICT', 'OFF'].includes(body.safety_mode)) return invalid('safety_mode must be CONTEXTUAL, STRICT or OFF');
  if (body.p !== undefined && (body.p < 0.01 || body.p > 0.99)) return invalid('p must be between 0.01 and 0.99');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') return invalid('stream must be a boolean');
  return undefined;
}

interface Plan {
  text?: string;
  call?: { id: string; name: string; arguments: string };
  finish: 'COMPLETE' | 'TOOL_CALL' | 'MAX_TOKENS';
}

function plan(body: any): Plan {
  const last = body.messages[body.messages.length - 1];
  if (last.role === 'tool') return { text: `tool said ${text(last.content)}`, finish: 'COMPLETE' };
  const user = text(last.content);
  if (body.tools?.length && body.tool_choice !== 'NONE' && (body.tool_choice === 'REQUIRED' || /weather|use the tool/i.test(user))) {
    const name = body.tools[0].function.name;
    return { call: { id: `${name}_${randomUUID().slice(0, 8)}`, name, arguments: JSON.stringify({ city: 'Paris' }) }, finish: 'TOOL_CALL' };
  }
  let out = body.response_format?.type === 'json_object' ? JSON.stringify({ answer: user }) : `Echo: ${user}`;
  let finish: Plan['finish'] = 'COMPLETE';
  if (body.max_tokens !== undefined && out.length > body.max_tokens * 4) {
    out = out.slice(0, body.max_tokens * 4);
    finish = 'MAX_TOKENS';
  }
  return { text: out, finish };
}

function chatReply(body: any): Reply {
  const p = plan(body);
  const id = randomUUID();
  const inTok = JSON.stringify(body.messages).length >> 2;
  const outTok = ((p.text ?? p.call?.arguments ?? '').length >> 2) + 1;
  const usage = { billed_units: { input_tokens: inTok, output_tokens: outTok }, tokens: { input_tokens: inTok + 12, output_tokens: outTok + 2 } };
  const toolPlan = p.call ? `I will call ${p.call.name} to answer.` : undefined;
  if (!body.stream) {
    return {
      status: 200,
      json: {
        id,
        finish_reason: p.finish,
        message: {
          role: 'assistant',
          ...(p.text !== undefined ? { content: [{ type: 'text', text: p.text }] } : {}),
          ...(p.call ? { tool_plan: toolPlan, tool_calls: [{ id: p.call.id, type: 'function', function: { name: p.call.name, arguments: p.call.arguments } }] } : {}),
        },
        usage,
      },
    };
  }
  const frames: string[] = [];
  const ev = (type: string, data: Record<string, unknown>) => frames.push(sse({ type, ...data }, type));
  ev('message-start', { id, delta: { message: { role: 'assistant', content: [], tool_plan: '', tool_calls: [], citations: [] } } });
  if (p.call) {
    for (const w of toolPlan!.split(/(?<= )/)) ev('tool-plan-delta', { delta: { message: { tool_plan: w } } });
    ev('tool-call-start', { index: 0, delta: { message: { tool_calls: { id: p.call.id, type: 'function', function: { name: p.call.name, arguments: '' } } } } });
    const a = p.call.arguments;
    for (let i = 0; i < a.length; i += 4) ev('tool-call-delta', { index: 0, delta: { message: { tool_calls: { function: { arguments: a.slice(i, i + 4) } } } } });
    ev('tool-call-end', { index: 0 });
  } else {
    ev('content-start', { index: 0, delta: { message: { content: { type: 'text', text: '' } } } });
    for (const w of p.text!.split(/(?<= )/)) ev('content-delta', { index: 0, delta: { message: { content: { text: w } } } });
    ev('content-end', { index: 0 });
  }
  ev('message-end', { delta: { finish_reason: p.finish, usage } });
  return { status: 200, sse: frames };
}

export async function startCohereMock(opts: { sseDelayMs?: number } = {}): Promise<MockServer> {
  return startMock((req: Recorded) => {
    if (req.headers.authorization !== `Bearer ${COHERE_KEY}`) return err(401, 'invalid api token');
    if (req.method !== 'POST' || req.path !== '/v2/chat') return err(404, `${req.method} ${req.path} not found`);
    if (!String(req.headers['content-type'] ?? '').includes('application/json')) return invalid('content-type must be application/json');
    const bad = validateCohere(req.body);
    if (bad) return bad;
    const reply = chatReply(req.body);
    return opts.sseDelayMs && reply.sse ? { ...reply, sseDelayMs: opts.sseDelayMs } : reply;
  });
}
