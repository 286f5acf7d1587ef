// A provider plugin for Cohere's v2 Chat API (https://docs.cohere.com/v2/reference/chat),
// written outside the gateway's own plugins and importing only its published
// API, `model-gateway/plugin` (plus valibot for the provider block's schema).
// Plain JavaScript with JSDoc types: gateway.yaml loads it as it is, and
// `tsc -p examples/custom-provider` checks it against the published types.
//
// Clients keep speaking OpenAI Chat Completions; this plugin translates the
// request (Cohere's own message and tool shapes, `p`/`k`, `stop_sequences`,
// `tool_choice: REQUIRED|NONE`), the answer (`message.content[]`,
// `finish_reason: COMPLETE|MAX_TOKENS|TOOL_CALL…`, `usage.tokens`) and the
// stream (Cohere's SSE event types: message-start, content-delta,
// tool-call-start/-delta, message-end). Auth is a Bearer key.
import * as v from 'valibot';
import { upstreamJson, upstreamEvents, joinUrl, parseEventJson, statusType, MappedEvents, UpstreamError, errors } from 'model-gateway/plugin';

/** @typedef {import('model-gateway/plugin').ProviderPlugin} ProviderPlugin */
/** @typedef {import('model-gateway/plugin').ProviderCall<import('model-gateway/plugin').ChatRequest>} ChatCall */
/** @typedef {import('model-gateway/plugin').ChatRequest} ChatRequest */
/** @typedef {import('model-gateway/plugin').ChatMessage} ChatMessage */
/** @typedef {import('model-gateway/plugin').ChatCompletion} ChatCompletion */
/** @typedef {import('model-gateway/plugin').ChatChunk} ChatChunk */
/** @typedef {import('model-gateway/plugin').ChatUsage} ChatUsage */
/** @typedef {import('model-gateway/plugin').FinishReason} FinishReason */
/** @typedef {import('model-gateway/plugin').SSEEvent} SSEEvent */
/** @typedef {import('model-gateway/plugin').ErrorMapper} ErrorMapper */
/** @typedef {import('model-gateway/plugin').NormalizationEntry} NormalizationEntry */
/** @typedef {import('model-gateway/plugin').EventMapper<ChatChunk>} ChunkMapper */

/** Cohere's own keys of a provider block: the safety mode sent with every request. */
const CohereOptions = v.strictObject({
  safety_mode: v.optional(v.picklist(['CONTEXTUAL', 'STRICT', 'OFF'])),
});

/** @typedef {{ safety_mode?: 'CONTEXTUAL' | 'STRICT' | 'OFF' }} Options */

/**
 * Cohere's finish reasons (https://docs.cohere.com/v2/reference/chat, `finish_reason`).
 * @type {Record<string, FinishReason>}
 */
const FINISH = { COMPLETE: 'stop', STOP_SEQUENCE: 'stop', MAX_TOKENS: 'length', TOOL_CALL: 'tool_calls', ERROR_TOXIC: 'content_filter' };

/**
 * @param {string | undefined} reason
 * @returns {FinishReason}
 */
function finishReason(reason) {
  if (reason === 'ERROR' || reason === 'ERROR_LIMIT') throw new UpstreamError(502, { message: `Cohere stopped with ${reason}`, type: 'api_error', param: null, code: 'upstream_error' });
  return FINISH[reason ?? ''] ?? 'stop';
}

/**
 * Text of an OpenAI content value (a string, or parts of which the text ones count).
 * @param {ChatMessage['content']} content
 * @returns {string}
 */
function textOf(content) {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
}

/**
 * One OpenAI message as Cohere's v2 message (https://docs.cohere.com/v2/reference/chat, `messages`).
 * @param {ChatMessage} m
 * @param {number} i
 * @returns {Record<string, unknown>}
 */
function toCohereMessage(m, i) {
  switch (m.role) {
    case 'system':
    case 'developer':
      return { role: 'system', content: textOf(m.content) };
    case 'user':
      if (typeof m.content === 'string') return { role: 'user', content: m.content };
      return {
        role: 'user',
        content: (m.content ?? []).map((p) => (p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image_url', image_url: { url: p.image_url.url } })),
      };
    case 'assistant': {
      /** @type {Record<string, unknown>} */
      const out = { role: 'assistant' };
      const text = textOf(m.content);
      if (text) out.content = text;
      if (m.tool_calls?.length) out.tool_calls = m.tool_calls.map((tc) => ({ id: tc.id, type: 'function', function: { name: tc.function.name, arguments: tc.function.arguments } }));
      return out;
    }
    case 'tool':
      return { role: 'tool', tool_call_id: m.tool_call_id, content: textOf(m.content) };
    default:
      throw errors.invalid(`messages[${i}].role '${m.role}' is not supported by Cohere`, `messages[${i}].role`);
  }
}

/**
 * The IR (an OpenAI chat request) as Cohere's v2 chat body. Pure.
 * @param {ChatRequest} r
 * @param {boolean} stream
 * @param {Options} o
 * @param {(e: NormalizationEntry) => void} note
 */
export function toCohere(r, stream, o, note) {
  if ((r.n ?? 1) > 1) throw errors.invalid("Cohere generates one choice: 'n' must be 1", 'n');
  /** @type {Record<string, unknown>} */
  const body = { model: r.model, messages: r.messages.map(toCohereMessage), stream };
  let tools = r.tools;
  if (r.tool_choice === 'required') body.tool_choice = 'REQUIRED';
  else if (r.tool_choice === 'none') body.tool_choice = 'NONE';
  else if (r.tool_choice && typeof r.tool_choice === 'object') {
    // Cohere cannot name the tool to call: require a call, offering only that tool.
    const name = r.tool_choice.function.name;
    tools = tools?.filter((t) => t.function.name === name);
    body.tool_choice = 'REQUIRED';
    note({ param: 'tool_choice', action: 'override', before: r.tool_choice, after: 'REQUIRED', reason: `Cohere cannot force one named tool: only '${name}' was offered, with tool_choice REQUIRED` });
  }
  if (tools?.length) body.tools = tools.map((t) => ({ type: 'function', function: { name: t.function.name, description: t.function.description, parameters: t.function.parameters ?? { type: 'object', properties: {} } } }));
  const maxTokens = r.max_completion_tokens ?? r.max_tokens;
  if (maxTokens != null) body.max_tokens = maxTokens;
  if (r.temperature != null) body.temperature = r.temperature;
  if (r.top_p != null) body.p = r.top_p;
  if (r.stop != null) body.stop_sequences = typeof r.stop === 'string' ? [r.stop] : r.stop;
  if (r.seed != null) body.seed = r.seed;
  if (r.frequency_penalty != null) body.frequency_penalty = r.frequency_penalty;
  if (r.presence_penalty != null) body.presence_penalty = r.presence_penalty;
  if (r.response_format?.type === 'json_object') body.response_format = { type: 'json_object' };
  else if (r.response_format?.type === 'json_schema') body.response_format = { type: 'json_object', json_schema: r.response_format.json_schema.schema ?? { type: 'object' } };
  if (o.safety_mode) body.safety_mode = o.safety_mode;
  if (r.native_fields) Object.assign(body, r.native_fields);
  return body;
}

/**
 * Cohere's usage (`usage.tokens`, else `usage.billed_units`) as OpenAI's.
 * @param {{ tokens?: { input_tokens?: number, output_tokens?: number }, billed_units?: { input_tokens?: number, output_tokens?: number } } | undefined} u
 * @returns {ChatUsage}
 */
function usageOf(u) {
  const t = u?.tokens ?? u?.billed_units ?? {};
  const prompt = t.input_tokens ?? 0;
  const completion = t.output_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } };
}

/**
 * A Cohere chat response as a chat completion.
 * @param {any} res
 * @param {string} model
 * @returns {ChatCompletion}
 */
export function fromCohere(res, model) {
  const msg = res.message ?? {};
  const text = (msg.content ?? []).filter((/** @type {any} */ c) => c.type === 'text').map((/** @type {any} */ c) => c.text).join('');
  const toolCalls = (msg.tool_calls ?? []).map((/** @type {any} */ tc) => ({ id: tc.id, type: /** @type {const} */ ('function'), function: { name: tc.function.name, arguments: tc.function.arguments ?? '{}' } }));
  return {
    id: res.id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text || (toolCalls.length ? null : ''), refusal: null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        finish_reason: finishReason(res.finish_reason),
        logprobs: null,
      },
    ],
    usage: usageOf(res.usage),
  };
}

/**
 * Cohere's error body is `{ id?, message }` (https://docs.cohere.com/reference/errors).
 * @type {ErrorMapper}
 */
export const cohereError = (status, body, text) => {
  const b = /** @type {{ message?: unknown } | undefined} */ (body);
  const message = typeof b?.message === 'string' ? b.message : text.slice(0, 500) || `HTTP ${status}`;
  return { error: { message, type: statusType(status), param: null, code: null } };
};

/**
 * Cohere's stream events, one step each (src EventMapper contract): chunks
 * in the OpenAI shape, `true` at message-end.
 * @implements {ChunkMapper}
 */
export class CohereChunkMapper {
  /**
   * @param {string} model
   * @param {boolean} includeUsage
   */
  constructor(model, includeUsage) {
    this.model = model;
    this.includeUsage = includeUsage;
    this.id = '';
    this.created = Math.floor(Date.now() / 1000);
    /** Cohere's tool-call index -> the OpenAI index (0-based, in order of appearance). */
    /** @type {Map<number, number>} */
    this.tools = new Map();
  }

  /**
   * @param {import('model-gateway/plugin').ChunkDelta} delta
   * @param {FinishReason | null} [finish]
   * @returns {ChatChunk}
   */
  chunk(delta, finish = null) {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] };
  }

  /**
   * @param {SSEEvent} ev
   * @param {ChatChunk[]} out
   */
  step(ev, out) {
    /** @type {any} */
    const e = parseEventJson(ev.data);
    const msg = e.delta?.message;
    switch (e.type) {
      case 'message-start':
        this.id = e.id ?? 'cohere';
        out.push(this.chunk({ role: 'assistant', content: '' }));
        return false;
      case 'content-delta':
        if (msg?.content?.text) out.push(this.chunk({ content: msg.content.text }));
        return false;
      case 'tool-call-start': {
        const index = this.tools.size;
        this.tools.set(e.index ?? index, index);
        const tc = msg?.tool_calls ?? {};
        out.push(this.chunk({ tool_calls: [{ index, id: tc.id, type: 'function', function: { name: tc.function?.name ?? '', arguments: tc.function?.arguments ?? '' } }] }));
        return false;
      }
      case 'tool-call-delta': {
        const args = msg?.tool_calls?.function?.arguments;
        if (args) out.push(this.chunk({ tool_calls: [{ index: this.tools.get(e.index) ?? 0, function: { arguments: args } }] }));
        return false;
      }
      case 'message-end': {
        out.push(this.chunk({}, finishReason(e.delta?.finish_reason)));
        if (this.includeUsage) out.push({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: usageOf(e.delta?.usage) });
        return true;
      }
      default:
        // content-start/-end, tool-plan-delta (the model's plan, not an answer), tool-call-end, citations, debug.
        return false;
    }
  }

  end() {
    throw new UpstreamError(502, { message: 'the Cohere stream ended before message-end', type: 'api_error', param: null, code: 'invalid_upstream_response' });
  }
}

/** @returns {ProviderPlugin} */
export default function cohere() {
  return {
    kind: 'provider',
    name: 'cohere',
    families: {
      cohere: {
        defaultBaseUrl: 'https://api.cohere.com',
        env: { api_key: 'COHERE_API_KEY', base_url: 'COHERE_BASE_URL' },
        schema: CohereOptions,
      },
    },
    /** @param {ChatCall} call */
    async chat(call) {
      const options = /** @type {Options} */ (call.provider.options);
      const body = toCohere(call.request, call.stream, options, call.note);
      const o = {
        url: joinUrl(call.provider.base_url.replace(/\/v2\/?$/, ''), '/v2/chat'),
        headers: { authorization: `Bearer ${call.provider.api_key}` },
        body,
        mapError: cohereError,
      };
      if (call.stream) {
        const events = await upstreamEvents(call, o);
        return { kind: 'stream', chunks: new MappedEvents(events, new CohereChunkMapper(call.request.model, !!call.request.stream_options?.include_usage)) };
      }
      return { kind: 'json', body: fromCohere(await upstreamJson(call, o), call.request.model) };
    },
  };
}
