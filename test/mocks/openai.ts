// A strict mock of OpenAI's Chat Completions API. It answers in the recorded
// formats (shared/fixtures/openai-chat: JSON bodies, chunk streams with
// `obfuscation`, usage chunk, [DONE]) and rejects what the real API rejects:
// bad key, unknown model, unknown parameters, unknown message fields,
// `max_tokens`/non-default `temperature`/sampling knobs on reasoning models
// (shared/fixtures/openai-chat/reasoning-model-legacy-parameter-error.json),
// `stream_options` without `stream`.
import { randomBytes } from 'node:crypto';
import { startMock, sse, type Handler, type MockServer, type Recorded, type Reply } from './server.js';

export const OPENAI_KEY = 'sk-test-openai-0123456789';

const CHAT_PARAMS = new Set([
  'model', 'messages', 'temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stream', 'stream_options',
  'frequency_penalty', 'presence_penalty', 'stop', 'seed', 'logprobs', 'top_logprobs', 'tools', 'tool_choice',
  'parallel_tool_calls', 'response_format', 'reasoning_effort', 'user', 'n', 'service_tier', 'store', 'metadata',
  'logit_bias', 'verbosity', 'prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'modalities',
  'web_search_options', 'prediction', 'audio',
]);
const MESSAGE_FIELDS: Record<string, Set<string>> = {
  system: new Set(['role', 'content', 'name']),
  developer: new Set(['role', 'content', 'name']),
  user: new Set(['role', 'content', 'name']),
  assistant: new Set(['role', 'content', 'name', 'tool_calls', 'refusal', 'audio', 'function_call', 'annotations']),
  tool: new Set(['role', 'content', 'tool_call_id']),
};

export const isReasoningModel = (m: string) => /^(o\d|gpt-5)/.test(m);

export function openAIError(status: number, message: string, type: string, param: string | null, code: string | null): Reply {
  return { status, json: { error: { message, type, param, code } } };
}

export function authError(req: Recorded, key: string): Reply | undefined {
  const h = req.headers.authorization;
  if (h !== `Bearer ${key}`)
    return openAIError(401, `Incorrect API key provided: ${h ? 'sk-***' : 'none'}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', null, 'invalid_api_key');
  return undefined;
}

export function validateChat(body: any, models: Set<string>): Reply | undefined {
  if (!body || typeof body !== 'object') return openAIError(400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null, null);
  for (const k of Object.keys(body)) if (!CHAT_PARAMS.has(k)) return openAIError(400, `Unrecognized request argument supplied: ${k}`, 'invalid_request_error', k, 'unknown_parameter');
  if (typeof body.model !== 'string') return openAIError(400, "you must provide a model parameter", 'invalid_request_error', 'model', null);
  if (!models.has(body.model)) return openAIError(404, `The model \`${body.model}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model', 'model_not_found');
  if (!Array.isArray(body.messages) || body.messages.length === 0) return openAIError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.", 'invalid_request_error', 'messages', 'empty_array');
  for (const [i, m] of body.messages.entries()) {
    const allowed = MESSAGE_FIELDS[m?.role];
    if (!allowed) return openAIError(400, `Invalid value: '${m?.role}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function' and 'developer'.`, 'invalid_request_error', `messages[${i}].role`, 'invalid_value');
    for (const k of Object.keys(m)) if (!allowed.has(k)) return openAIError(400, `Unrecognized request argument supplied: messages[${i}].${k}`, 'invalid_request_error', `messages[${i}].${k}`, 'unknown_parameter');
    if (m.role === 'tool' && typeof m.tool_call_id !== 'string') return openAIError(400, `Missing required parameter: 'messages[${i}].tool_call_id'.`, 'invalid_request_error', `messages[${i}].tool_call_id`, 'missing_required_parameter');
  }
  if (body.stream_options != null && !body.stream) return openAIError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'invalid_request_error', 'stream_options', null);
  if (isReasoningModel(body.model)) {
    if (body.max_tokens != null) return { status: 400, json: { error: { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: 'invalid_request_error', param: 'max_tokens', code: 'unsupported_parameter' } } };
    if (body.temperature != null && body.temperature !== 1) return openAIError(400, `Unsupported value: 'temperature' does not support ${body.temperature} with this model. Only the default (1) value is supported.`, 'invalid_request_error', 'temperature', 'unsupported_value');
    for (const p of ['top_p', 'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'logit_bias'])
      if (body[p] != null) return openAIError(400, `Unsupported parameter: '${p}' is not supported with this model.`, 'invalid_request_error', p, 'unsupported_parameter');
  }
  return undefined;
}

function lastUserText(messages: any[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === 'tool') return `tool said ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`;
    if (m.role === 'user') return typeof m.content === 'string' ? m.content : m.content.filter((p: any) => p.type === 'text').map((p: any) => p.text).join(' ');
  }
  return '';
}

const id = (p: string, n = 12) => p + randomBytes(n).toString('base64url').slice(0, n * 2);

/** What the mock model "says": deterministic, derived from the conversation. */
export function plan(body: any): { text: string | null; toolCall?: { id: string; name: string; arguments: string } } {
  const last = body.messages[body.messages.length - 1];
  const tools = body.tools ?? [];
  const forced = body.tool_choice && typeof body.tool_choice === 'object' ? body.tool_choice.function.name : undefined;
  if (tools.length && body.tool_choice !== 'none' && last.role === 'user' && (forced || body.tool_choice === 'required' || /use the tool|weather/i.test(lastUserText(body.messages)))) {
    const name = forced ?? tools[0].function.name;
    return { text: null, toolCall: { id: id('call_'), name, arguments: JSON.stringify({ city: 'Paris' }) } };
  }
  if (body.response_format?.type === 'json_object' || body.response_format?.type === 'json_schema') return { text: JSON.stringify({ answer: lastUserText(body.messages) }) };
  return { text: `Echo: ${lastUserText(body.messages)}` };
}

export function chatReply(body: any, served: string): Reply {
  const p = plan(body);
  const created = Math.floor(Date.now() / 1000);
  const cid = id('chatcmpl-', 14);
  const promptTokens = JSON.stringify(body.messages).length >> 2;
  const completionTokens = ((p.text ?? p.toolCall?.arguments ?? '').length >> 2) + 1;
  const reasoning = isReasoningModel(body.model) ? 64 : 0;
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens + reasoning,
    total_tokens: promptTokens + completionTokens + reasoning,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
  const finish = p.toolCall ? 'tool_calls' : 'stop';
  const n = body.n ?? 1;
  if (!body.stream) {
    return {
      status: 200,
      headers: { 'x-request-id': id('req_') },
      json: {
        id: cid,
        object: 'chat.completion',
        created,
        model: served,
        choices: Array.from({ length: n }, (_, index) => ({
          index,
          message: { role: 'assistant', content: p.text, refusal: null, annotations: [], ...(p.toolCall ? { tool_calls: [{ id: p.toolCall.id, type: 'function', function: { name: p.toolCall.name, arguments: p.toolCall.arguments } }] } : {}) },
          logprobs: body.logprobs ? { content: [{ token: 'Echo', logprob: -0.1, bytes: [69, 99, 104, 111], top_logprobs: [] }], refusal: null } : null,
          finish_reason: finish,
        })),
        usage,
        service_tier: 'default',
        system_fingerprint: 'fp_mock0001',
      },
    };
  }
  const base = { id: cid, object: 'chat.completion.chunk', created, model: served, service_tier: 'default', system_fingerprint: 'fp_mock0001' };
  const chunk = (delta: unknown, finish_reason: string | null = null) => sse({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason }], usage: null, obfuscation: randomBytes(3).toString('hex') });
  const frames: string[] = [];
  if (p.toolCall) {
    frames.push(chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: p.toolCall.id, type: 'function', function: { name: p.toolCall.name, arguments: '' } }], refusal: null }));
    const a = p.toolCall.arguments;
    for (let i = 0; i < a.length; i += 5) frames.push(chunk({ tool_calls: [{ index: 0, function: { arguments: a.slice(i, i + 5) } }] }));
  } else {
    frames.push(chunk({ role: 'assistant', content: '', refusal: null }));
    for (const word of (p.text ?? '').split(/(?<= )/)) frames.push(chunk({ content: word }));
  }
  frames.push(chunk({}, finish));
  if (body.stream_options?.include_usage) frames.push(sse({ ...base, choices: [], usage, obfuscation: 'x' }));
  frames.push('data: [DONE]\n\n');
  return { status: 200, sse: frames };
}

export interface OpenAIMockOptions {
  key?: string;
  models?: string[];
  /** Extra routes (path -> handler), e.g. /v1/responses or /v1/images/generations. */
  routes?: Record<string, Handler>;
}

export const DEFAULT_OPENAI_MODELS = ['gpt-4.1-mini', 'gpt-4.1', 'gpt-4o-mini', 'gpt-5-mini', 'gpt-5', 'o3-mini', 'gpt-image-1'];

export async function startOpenAIMock(opts: OpenAIMockOptions = {}): Promise<MockServer> {
  const key = opts.key ?? OPENAI_KEY;
  const models = new Set(opts.models ?? DEFAULT_OPENAI_MODELS);
  return startMock((req) => {
    const auth = authError(req, key);
    if (auth) return auth;
    const extra = opts.routes?.[req.path];
    if (extra) return extra(req);
    if (req.method === 'POST' && req.path === '/v1/chat/completions') {
      const bad = validateChat(req.body, models);
      if (bad) return bad;
      return chatReply(req.body, `${req.body.model}-2025-04-14`);
    }
    return openAIError(404, `Invalid URL (${req.method} ${req.path})`, 'invalid_request_error', null, null);
  });
}
