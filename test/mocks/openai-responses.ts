// A strict mock of OpenAI's Responses API (POST /v1/responses), to plug into
// startOpenAIMock({ routes }). It rejects what the real API rejects, with the
// real error bodies: unknown parameters (`stop` included: the Responses API has
// none), nested function tools (tools are flat there), `temperature`/`top_p`
// on reasoning models (shared/fixtures/openai-responses/reasoning-model-temperature-error.json),
// `reasoning` on non-reasoning models, item ids with the wrong prefix,
// encrypted reasoning it did not make, reasoning items it does not know,
// tool outputs without their call, and `previous_response_id` values it did
// not create itself. It answers in the recorded formats (JSON objects and
// `event:` + JSON streams with `sequence_number` and `obfuscation`,
// shared/fixtures/openai-responses/*.chunks.txt).
import { randomBytes } from 'node:crypto';
import { sse, type Handler, type Reply, type Recorded } from './server.js';
import { openAIError, isReasoningModel, DEFAULT_OPENAI_MODELS } from './openai.js';

const PARAMS = new Set([
  'model', 'input', 'instructions', 'temperature', 'top_p', 'max_output_tokens', 'stream', 'stream_options', 'tools', 'tool_choice',
  'parallel_tool_calls', 'text', 'reasoning', 'previous_response_id', 'store', 'truncation', 'metadata', 'user', 'include', 'background',
  'service_tier', 'prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'max_tool_calls', 'top_logprobs', 'conversation', 'prompt',
]);
/** POST /v1/responses/input_tokens takes the prompt only (https://platform.openai.com/docs/api-reference/responses/input-tokens). */
const COUNT_PARAMS = new Set(['model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'reasoning', 'truncation', 'previous_response_id', 'conversation', 'personality']);
const INCLUDE = new Set([
  'reasoning.encrypted_content', 'message.output_text.logprobs', 'web_search_call.action.sources', 'web_search_call.results',
  'code_interpreter_call.outputs', 'computer_call_output.output.image_url', 'file_search_call.results', 'message.input_image.image_url',
]);
const ITEM_KEYS: Record<string, Set<string>> = {
  message: new Set(['type', 'role', 'content', 'id', 'status']),
  function_call: new Set(['type', 'id', 'call_id', 'name', 'arguments', 'status']),
  function_call_output: new Set(['type', 'id', 'call_id', 'output', 'status']),
  reasoning: new Set(['type', 'id', 'summary', 'encrypted_content', 'content', 'status']),
  web_search_call: new Set(['type', 'id', 'status', 'action']),
};
const ID_PREFIX: Record<string, string> = { message: 'msg', function_call: 'fc', reasoning: 'rs', web_search_call: 'ws' };
const PART_KEYS: Record<string, Set<string>> = {
  input_text: new Set(['type', 'text']),
  input_image: new Set(['type', 'image_url', 'file_id', 'detail']),
  input_file: new Set(['type', 'file_id', 'file_data', 'file_url', 'filename']),
  output_text: new Set(['type', 'text', 'annotations', 'logprobs']),
  refusal: new Set(['type', 'refusal']),
};
const TOOL_KEYS: Record<string, Set<string>> = {
  function: new Set(['type', 'name', 'description', 'parameters', 'strict']),
  web_search_preview: new Set(['type', 'search_context_size', 'user_location']),
  web_search: new Set(['type', 'search_context_size', 'user_location', 'filters']),
};

const bad = (message: string, param: string | null, code: string | null = 'invalid_value', status = 400): Reply => openAIError(status, message, 'invalid_request_error', param, code);
const unknownParam = (p: string) => bad(`Unknown parameter: '${p}'.`, p, 'unknown_parameter');
const missing = (p: string) => bad(`Missing required parameter: '${p}'.`, p, 'missing_required_parameter');
const hex = (n: number) => randomBytes(n).toString('hex');
const obf = () => randomBytes(4).toString('base64url').slice(0, 2 + Math.floor(Math.random() * 8));

export interface StoredMockResponse {
  id: string;
  items: any[];  
}

export interface ResponsesMock {
  handler: Handler;
  /** POST /v1/responses/input_tokens: validates as the create endpoint does, with the counting endpoint's fields. */
  countHandler: Handler;
  /** Responses this mock created and stored (store !== false), by id. */
  stored: Map<string, StoredMockResponse>;
  /** Reasoning item ids this mock created. */
  reasoningIds: Set<string>;
}

 

function validateItem(it: any, i: number, callIds: Set<string>, mock: ResponsesMock): Reply | undefined {
  const at = `input[${i}]`;
  if (!it || typeof it !== 'object') return bad(`Invalid type for '${at}': expected an object.`, at, 'invalid_type');
  const type = it.type ?? (it.role !== undefined ? 'message' : undefined);
  const keys = ITEM_KEYS[type];
  if (!keys) return bad(`Invalid value: '${it.type}'. Supported values are: 'message', 'function_call', 'function_call_output', 'reasoning', 'web_search_call' and others.`, `${at}.type`);
  for (const k of Object.keys(it)) if (!keys.has(k)) return unknownParam(`${at}.${k}`);
  if (it.id != null && ID_PREFIX[type] && !String(it.id).startsWith(ID_PREFIX[type]))
    return bad(`Invalid '${at}.id': '${it.id}'. Expected an ID that begins with '${ID_PREFIX[type]}'.`, `${at}.id`);
  switch (type) {
    case 'message': {
      if (!['user', 'assistant', 'system', 'developer'].includes(it.role))
        return bad(`Invalid value: '${it.role}'. Supported values are: 'user', 'assistant', 'system', and 'developer'.`, `${at}.role`);
      if (typeof it.content === 'string') return undefined;
      if (!Array.isArray(it.content)) return missing(`${at}.content`);
      const allowed = it.role === 'assistant' ? ['output_text', 'refusal'] : ['input_text', 'input_image', 'input_file'];
      for (const [j, p] of it.content.entries()) {
        const pat = `${at}.content[${j}]`;
        if (!allowed.includes(p?.type)) return bad(`Invalid value: '${p?.type}'. Supported values are: ${allowed.map((x) => `'${x}'`).join(', ')}.`, `${pat}.type`);
        for (const k of Object.keys(p)) if (!PART_KEYS[p.type].has(k)) return unknownParam(`${pat}.${k}`);
        if (p.type === 'input_image' && !p.image_url && !p.file_id) return missing(`${pat}.image_url`);
      }
      return undefined;
    }
    case 'function_call':
      for (const f of ['call_id', 'name', 'arguments']) if (typeof it[f] !== 'string') return missing(`${at}.${f}`);
      callIds.add(it.call_id);
      return undefined;
    case 'function_call_output':
      if (typeof it.call_id !== 'string') return missing(`${at}.call_id`);
      if (it.output === undefined) return missing(`${at}.output`);
      if (!callIds.has(it.call_id)) return bad(`No tool call found for function call output with call_id ${it.call_id}.`, 'input', null);
      return undefined;
    case 'reasoning':
      if (!Array.isArray(it.summary)) return missing(`${at}.summary`);
      if (it.encrypted_content != null) {
        if (!String(it.encrypted_content).startsWith('gAAAAA')) return bad(`The encrypted content for item ${it.id} could not be verified.`, null, 'invalid_encrypted_content');
      } else if (!mock.reasoningIds.has(it.id)) return bad(`Item with id '${it.id}' not found.`, 'input', null, 404);
      return undefined;
    default:
      return undefined;
  }
}

function validate(body: any, models: Set<string>, mock: ResponsesMock, counting = false): Reply | undefined {
  if (!body || typeof body !== 'object') return bad('We could not parse the JSON body of your request.', null, null);
  for (const k of Object.keys(body)) if (!(counting ? COUNT_PARAMS : PARAMS).has(k)) return unknownParam(k);
  if (typeof body.model !== 'string') return missing('model');
  if (!models.has(body.model)) return bad(`The requested model '${body.model}' does not exist.`, 'model', 'model_not_found');
  if (body.input === undefined && !counting) return missing('input');
  if (body.stream_options != null && !body.stream) return bad("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options', null);
  if (body.max_output_tokens != null && body.max_output_tokens < 16)
    return bad(`Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got ${body.max_output_tokens} instead.`, 'max_output_tokens', 'integer_below_min_value');
  if (body.previous_response_id != null && !mock.stored.has(body.previous_response_id))
    return bad(`Previous response with id '${body.previous_response_id}' not found.`, 'previous_response_id', 'previous_response_not_found');
  for (const inc of body.include ?? []) if (!INCLUDE.has(inc)) return bad(`Invalid value: '${inc}'.`, 'include');
  if (isReasoningModel(body.model)) {
    // Recorded: shared/fixtures/openai-responses/reasoning-model-temperature-error.json (code null).
    for (const p of ['temperature', 'top_p']) if (body[p] != null) return bad(`Unsupported parameter: '${p}' is not supported with this model.`, p, null);
  } else if (body.reasoning?.effort != null || body.reasoning?.summary != null) {
    return bad("Unsupported parameter: 'reasoning.effort' is not supported with this model.", 'reasoning.effort', 'unsupported_parameter');
  }
  for (const [i, t] of (body.tools ?? []).entries()) {
    const keys = TOOL_KEYS[t?.type];
    if (!keys) return bad(`Invalid value: '${t?.type}'. Supported values are: 'function', 'file_search', 'web_search', 'web_search_preview' and others.`, `tools[${i}].type`);
    if (t.type === 'function' && typeof t.name !== 'string') return missing(`tools[${i}].name`);
    for (const k of Object.keys(t)) if (!keys.has(k)) return unknownParam(`tools[${i}].${k}`);
  }
  const tc = body.tool_choice;
  if (tc && typeof tc === 'object') {
    if (tc.type === 'function' && typeof tc.name !== 'string') return missing('tool_choice.name');
    for (const k of Object.keys(tc)) if (!['type', 'name'].includes(k)) return unknownParam(`tool_choice.${k}`);
  } else if (tc != null && !['auto', 'none', 'required'].includes(tc)) return bad(`Invalid value: '${tc}'. Supported values are: 'none', 'auto', and 'required'.`, 'tool_choice');
  const f = body.text?.format;
  if (f?.type === 'json_schema') {
    if (typeof f.name !== 'string') return missing('text.format.name');
    if (!f.schema) return missing('text.format.schema');
  }
  const callIds = new Set<string>();
  if (body.previous_response_id) for (const it of mock.stored.get(body.previous_response_id)!.items) if (it.type === 'function_call') callIds.add(it.call_id);
  if (typeof body.input !== 'string' && body.input != null) {
    if (!Array.isArray(body.input)) return bad("Invalid type for 'input': expected one of a string or array of input items.", 'input', 'invalid_type');
    for (const [i, it] of body.input.entries()) {
      const r = validateItem(it, i, callIds, mock);
      if (r) return r;
    }
  }
  return undefined;
}

function textOfContent(c: any): string {
  if (typeof c === 'string') return c;
  return (c ?? []).filter((p: any) => p.type === 'input_text' || p.type === 'output_text').map((p: any) => p.text).join(' ');
}

/** What the mock model says: deterministic, from the conversation (as the chat mock's plan()). */
function plan(body: any, items: any[]) {
  const last = items[items.length - 1];
  const functions = (body.tools ?? []).filter((t: any) => t.type === 'function');
  const search = (body.tools ?? []).some((t: any) => t.type === 'web_search' || t.type === 'web_search_preview');
  const forced = body.tool_choice && typeof body.tool_choice === 'object' ? body.tool_choice.name : undefined;
  let userText = '';
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if ((it.type ?? 'message') === 'message' && it.role === 'user') {
      userText = textOfContent(it.content);
      break;
    }
  }
  const lastIsUser = (last?.type ?? 'message') === 'message' && last?.role === 'user';
  if (functions.length && body.tool_choice !== 'none' && lastIsUser && (forced || body.tool_choice === 'required' || /use the tool|weather/i.test(userText))) {
    return { call: { name: forced ?? functions[0].name, arguments: JSON.stringify({ city: 'Paris' }) } };
  }
  if (last?.type === 'function_call_output') return { text: `tool said ${typeof last.output === 'string' ? last.output : textOfContent(last.output)}`, search: false };
  const fmt = body.text?.format?.type;
  if (fmt === 'json_object' || fmt === 'json_schema') return { text: JSON.stringify({ answer: userText }), search: false };
  return { text: `Echo: ${userText}`, search };
}

export interface ResponsesMockOptions {
  models?: string[];
  /**
   * A service-side output filter (Azure's content filter): when it returns
   * true for a request, the answer stops after its first word with
   * `status: "incomplete"` and `incomplete_details.reason: "content_filter"`
   * (the reason OpenAI's Response schema has for it).
   */
  filterOutput?: (body: any) => boolean;
}

export function createResponsesMock(opts: ResponsesMockOptions = {}): ResponsesMock {
  const models = new Set(opts.models ?? DEFAULT_OPENAI_MODELS);
  const mock: ResponsesMock = { stored: new Map(), reasoningIds: new Set(), handler: undefined as unknown as Handler, countHandler: undefined as unknown as Handler };
  mock.countHandler = (req: Recorded): Reply => {
    if (req.method !== 'POST') return bad(`Invalid URL (${req.method} ${req.path})`, null, null, 404);
    const body = req.body;
    const invalid = validate(body, models, mock, true);
    if (invalid) return invalid;
    const input: any[] = body.input == null ? [] : typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
    const history = body.previous_response_id ? mock.stored.get(body.previous_response_id)!.items : [];
    const n = JSON.stringify([body.instructions ?? '', body.tools ?? [], ...history, ...input]).length >> 2;
    return { status: 200, headers: { 'x-request-id': `req_${hex(16)}` }, json: { object: 'response.input_tokens', input_tokens: n } };
  };
  mock.handler = (req: Recorded): Reply => {
    if (req.method !== 'POST') return bad(`Invalid URL (${req.method} ${req.path})`, null, null, 404);
    const body = req.body;
    const invalid = validate(body, models, mock);
    if (invalid) return invalid;
    const input: any[] = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
    const history = body.previous_response_id ? mock.stored.get(body.previous_response_id)!.items : [];
    const items = [...history, ...input];
    const p = plan(body, items);
    const reasoning = isReasoningModel(body.model);
    const id = `resp_${hex(25)}`;
    const created = Math.floor(Date.now() / 1000);
    const served = `${body.model}-2025-04-14`;

    const output: any[] = [];
    if (reasoning) {
      const rs: any = { id: `rs_${hex(25)}`, type: 'reasoning', summary: body.reasoning?.summary ? [{ type: 'summary_text', text: `**Thinking**\n\nThe user wrote ${input.length} item(s).` }] : [] };
      if ((body.include ?? []).includes('reasoning.encrypted_content')) rs.encrypted_content = `gAAAAAB${randomBytes(48).toString('base64url')}`;
      mock.reasoningIds.add(rs.id);
      output.push(rs);
    }
    let status = 'completed';
    let incomplete: { reason: string } | null = null;
    if (p.search) output.push({ id: `ws_${hex(25)}`, type: 'web_search_call', status: 'completed', action: { type: 'search', query: 'mock query' } });
    if (p.call) {
      output.push({ id: `fc_${hex(25)}`, type: 'function_call', status: 'completed', arguments: p.call.arguments, call_id: `call_${randomBytes(12).toString('base64url')}`, name: p.call.name });
    } else {
      let text = p.text!;
      if (body.max_output_tokens != null && text.length > body.max_output_tokens * 4) {
        text = text.slice(0, body.max_output_tokens * 4);
        status = 'incomplete';
        incomplete = { reason: 'max_output_tokens' };
      }
      if (opts.filterOutput?.(body)) {
        text = text.split(' ')[0];
        status = 'incomplete';
        incomplete = { reason: 'content_filter' };
      }
      const annotations = p.search ? [{ type: 'url_citation', start_index: 0, end_index: Math.min(4, text.length), title: 'Mock source', url: 'https://example.com/source' }] : [];
      output.push({ id: `msg_${hex(25)}`, type: 'message', status: status === 'completed' ? 'completed' : 'incomplete', content: [{ type: 'output_text', annotations, logprobs: [], text }], role: 'assistant' });
    }
    const inputTokens = JSON.stringify(items).length >> 2;
    const outputTokens = (JSON.stringify(output).length >> 3) + (reasoning ? 64 : 0);
    const response: any = {
      id,
      object: 'response',
      created_at: created,
      status,
      background: false,
      billing: { payer: 'developer' },
      error: null,
      incomplete_details: incomplete,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      max_tool_calls: body.max_tool_calls ?? null,
      model: served,
      output,
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      previous_response_id: body.previous_response_id ?? null,
      prompt_cache_key: null,
      prompt_cache_retention: null,
      reasoning: { effort: body.reasoning?.effort ?? (reasoning ? 'medium' : null), summary: body.reasoning?.summary ?? null },
      safety_identifier: null,
      service_tier: 'default',
      store: body.store ?? true,
      temperature: body.temperature ?? 1,
      text: { format: body.text?.format ?? { type: 'text' }, verbosity: 'medium' },
      tool_choice: body.tool_choice ?? 'auto',
      tools: body.tools ?? [],
      top_logprobs: 0,
      top_p: body.top_p ?? 1,
      truncation: body.truncation ?? 'disabled',
      usage: {
        input_tokens: inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: reasoning ? 64 : 0 },
        total_tokens: inputTokens + outputTokens,
      },
      user: null,
      metadata: body.metadata ?? {},
    };
    if (body.store !== false) mock.stored.set(id, { id, items: [...items, ...output] });
    if (!body.stream) return { status: 200, headers: { 'x-request-id': `req_${hex(16)}` }, json: response };
    return { status: 200, sse: streamFrames(response, body.stream_options?.include_obfuscation !== false) };
  };
  return mock;
}

/** The recorded event sequence for a finished response object. */
function streamFrames(final: any, obfuscate: boolean): string[] {
  let seq = 0;
  const frames: string[] = [];
  const emit = (type: string, fields: Record<string, unknown>, delta = false) =>
    frames.push(sse({ type, sequence_number: seq++, ...fields, ...(delta && obfuscate ? { obfuscation: obf() } : {}) }, type));
  const progress = { ...final, status: 'in_progress', output: [], usage: null, incomplete_details: null };
  emit('response.created', { response: progress });
  emit('response.in_progress', { response: progress });
  final.output.forEach((item: any, output_index: number) => {
    if (item.type === 'message') {
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } });
      const part = item.content[0];
      const base = { item_id: item.id, output_index, content_index: 0 };
      emit('response.content_part.added', { ...base, part: { ...part, text: '' } });
      for (const word of part.text.split(/(?<= )/)) emit('response.output_text.delta', { ...base, delta: word, logprobs: [] }, true);
      part.annotations.forEach((annotation: unknown, annotation_index: number) => emit('response.output_text.annotation.added', { ...base, annotation_index, annotation }));
      emit('response.output_text.done', { ...base, text: part.text, logprobs: [] });
      emit('response.content_part.done', { ...base, part });
    } else if (item.type === 'function_call') {
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } });
      for (let i = 0; i < item.arguments.length; i += 5) emit('response.function_call_arguments.delta', { item_id: item.id, output_index, delta: item.arguments.slice(i, i + 5) }, true);
      emit('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: item.arguments });
    } else if (item.type === 'reasoning') {
      emit('response.output_item.added', { output_index, item: { ...item, summary: [] } });
      item.summary.forEach((s: any, summary_index: number) => {
        const base = { item_id: item.id, output_index, summary_index };
        emit('response.reasoning_summary_part.added', { ...base, part: { type: 'summary_text', text: '' } });
        emit('response.reasoning_summary_text.delta', { ...base, delta: s.text }, true);
        emit('response.reasoning_summary_text.done', { ...base, text: s.text });
        emit('response.reasoning_summary_part.done', { ...base, part: s });
      });
    } else if (item.type === 'web_search_call') {
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress' } });
      for (const phase of ['in_progress', 'searching', 'completed']) emit(`response.web_search_call.${phase}`, { output_index, item_id: item.id });
    }
    emit('response.output_item.done', { output_index, item });
  });
  emit(final.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });
  return frames;
}
