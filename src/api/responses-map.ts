// Responses <-> chat IR mapping, and the same-API body for OpenAI-family
// targets. Everything here is pure: it never mutates its input (a fallback
// calls it again for the next target) and does no I/O.
//
// Shapes: OpenAI Responses API reference
// (https://platform.openai.com/docs/api-reference/responses/object);
// finish_reason and usage mapping as docs/responses.md describes it.
import { randomHex } from '../random.js';
import type { ModelConfig } from '../config/schema.js';
import type {
  ChatRequest,
  ChatMessage,
  ChatCompletion,
  ChatUsage,
  ContentPart,
  FunctionTool,
  ToolChoice,
  ResponseFormat,
  ReasoningDetail,
  NormalizationEntry,
  FinishReason,
} from '../types.js';
import { errors } from '../errors.js';
import { WEB_SEARCH_TYPES, isItemReference } from './responses-schema.js';

// ---------------------------------------------------------------- types

export interface Part {
  type: string;
  text?: string;
  refusal?: string;
  image_url?: string | null;
  file_id?: string | null;
  detail?: string | null;
  annotations?: unknown[];
  [k: string]: unknown;
}

/** An input or output item in the Responses wire shape. */
export interface Item {
  type: string;
  id?: string | null;
  role?: string;
  content?: string | Part[] | null;
  status?: string | null;
  call_id?: string;
  name?: string;
  arguments?: string;
  output?: string | Part[];
  summary?: { type: 'summary_text'; text: string }[];
  encrypted_content?: string | null;
  [k: string]: unknown;
}

/** The validated request body (see responses-schema.ts). */
export interface ResponsesRequest {
  model: string;
  input: string | Item[];
  instructions?: string | null;
  temperature?: number | null;
  top_p?: number | null;
  max_output_tokens?: number | null;
  stop?: string | string[] | null;
  stream?: boolean | null;
  stream_options?: Record<string, unknown> | null;
  tools?: Record<string, unknown>[] | null;
  tool_choice?: string | { type: 'function'; name?: string; function?: { name: string } } | null;
  parallel_tool_calls?: boolean | null;
  text?: { format?: Record<string, unknown> | null; verbosity?: string | null } | null;
  reasoning?: { effort?: string | null; summary?: string | null; generate_summary?: string | null } | null;
  previous_response_id?: string | null;
  store?: boolean | null;
  truncation?: 'auto' | 'disabled' | null;
  metadata?: Record<string, string> | null;
  user?: string | null;
  native_fields?: Record<string, unknown>;
  extra?: { normalize?: boolean; [k: string]: unknown };
  [k: string]: unknown;
}

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress';

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; [k: string]: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number; [k: string]: number };
  total_tokens: number;
}

export type ResponseObject = Record<string, unknown> & {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  model: string;
  output: Item[];
  usage: ResponsesUsage | null;
};

// ---------------------------------------------------------------- ids

/** OpenAI-style ids: prefix, underscore, 50 hex characters (`resp_…`, `msg_…`, `fc_…`, `rs_…`). */
export function newId(prefix: 'resp' | 'msg' | 'fc' | 'rs' | 'call'): string {
  return `${prefix}_${randomHex(25)}`;
}

// ---------------------------------------------------------------- reasoning

// Reasoning produced through the chat IR (Anthropic thinking blocks with their
// signature, Gemini thought signatures, ...) goes back to the client as a
// `reasoning` item whose `encrypted_content` carries the provider's signed
// blocks, so that the client can send the item back on the next turn and the
// gateway restores them as `reasoning_details` (docs/responses.md "Reasoning from other providers").
// It is opaque to clients as OpenAI's own encrypted_content is; the prefix
// tells the two apart (OpenAI's is Fernet, starting `gAAAAA`).
export const GATEWAY_REASONING_PREFIX = 'mgw1:';

export function encodeReasoning(details: ReasoningDetail[]): string {
  return GATEWAY_REASONING_PREFIX + Buffer.from(JSON.stringify(details), 'utf8').toString('base64url');
}

export function isGatewayReasoning(item: Item): boolean {
  return item.type === 'reasoning' && typeof item.encrypted_content === 'string' && item.encrypted_content.startsWith(GATEWAY_REASONING_PREFIX);
}

export function decodeReasoning(encrypted: string, param: string): ReasoningDetail[] {
  try {
    const parsed = JSON.parse(Buffer.from(encrypted.slice(GATEWAY_REASONING_PREFIX.length), 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(parsed) && parsed.every((d) => d && typeof d === 'object' && typeof (d as { type?: unknown }).type === 'string')) return parsed as ReasoningDetail[];
  } catch {
    /* fall through */
  }
  throw errors.invalid(`Invalid '${param}': the reasoning item's encrypted_content was altered; send it back exactly as the gateway returned it.`, param, 'invalid_encrypted_content');
}

export function reasoningItem(texts: string[], details: ReasoningDetail[], id = newId('rs')): Item {
  return {
    id,
    type: 'reasoning',
    summary: texts.filter(Boolean).map((text) => ({ type: 'summary_text' as const, text })),
    encrypted_content: encodeReasoning(details),
  };
}

// ---------------------------------------------------------------- input

/** `input` as a list of items (a string is one user message). Missing `type` on messages is filled in. */
export function normalizeInput(input: string | Item[]): Item[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return input.map((it) => (it.type ? it : { ...it, type: isItemReference(it) ? 'item_reference' : 'message' }));
}

/** Where an item came from, for error messages: `input[3]`, or the stored conversation. */
export type Where = (index: number) => string;

function textOf(parts: string | Part[], where: string, allow: 'input' | 'output'): string {
  if (typeof parts === 'string') return parts;
  return parts
    .map((p, j) => {
      if (p.type === 'input_text' || p.type === 'output_text') return p.text ?? '';
      if (p.type === 'refusal') return p.refusal ?? '';
      throw errors.invalid(`Invalid '${where}[${j}]': only text parts are supported here on this model (got '${p.type}').`, `${where}[${j}]`, 'unsupported_content');
    })
    .join(allow === 'output' ? '' : '\n');
}

function userParts(content: string | Part[], where: string): string | ContentPart[] {
  if (typeof content === 'string') return content;
  return content.map((p, j): ContentPart => {
    const at = `${where}[${j}]`;
    if (p.type === 'input_text') return { type: 'text', text: p.text ?? '' };
    if (p.type === 'input_image') {
      if (!p.image_url)
        throw errors.invalid(`Invalid '${at}.file_id': an image given by 'file_id' lives in OpenAI's file store and can only be sent to an OpenAI-family model; send 'image_url' (a URL or a data URL) instead.`, `${at}.file_id`, 'unsupported_content');
      const detail = p.detail ?? undefined;
      return { type: 'image_url', image_url: { url: p.image_url, ...(detail ? { detail: detail as 'auto' | 'low' | 'high' | 'original' } : {}) } };
    }
    throw errors.invalid(`Invalid '${at}': '${p.type}' parts can only be sent to an OpenAI-family model.`, at, 'unsupported_content');
  });
}

export interface MessagesResult {
  messages: ChatMessage[];
  notes: NormalizationEntry[];
}

/**
 * Items to chat IR messages. Consecutive assistant-side items (reasoning,
 * assistant messages, function calls) form one assistant message, as the
 * chat format has one message per assistant turn; a function_call_output is
 * a `tool` message. OpenAI's own reasoning items (encrypted for OpenAI only)
 * and hosted web-search records cannot be replayed to another provider and
 * are dropped with a note.
 */
export function itemsToMessages(items: Item[], instructions: string | null | undefined, where: Where): MessagesResult {
  const messages: ChatMessage[] = [];
  const notes: NormalizationEntry[] = [];
  if (instructions) messages.push({ role: 'system', content: instructions });
  let openAI = 0;
  let searches = 0;
  let asst: (ChatMessage & { content: string | null }) | undefined;
  const flush = () => {
    if (!asst) return;
    if (asst.content === null && asst.refusal) asst.content = asst.refusal;
    delete asst.refusal;
    if ((asst.content !== null && asst.content !== '') || asst.tool_calls?.length) messages.push(asst);
    asst = undefined;
  };
  const open = () => (asst ??= { role: 'assistant', content: null });

  items.forEach((it, i) => {
    const at = where(i);
    switch (it.type) {
      case 'message': {
        const content = it.content ?? '';
        if (it.role === 'assistant') {
          const a = open();
          if (typeof content === 'string') a.content = (a.content ?? '') + content;
          else
            for (const p of content) {
              if (p.type === 'refusal') a.refusal = (a.refusal ?? '') + (p.refusal ?? '');
              else a.content = (a.content ?? '') + (p.text ?? '');
            }
          return;
        }
        flush();
        if (it.role === 'user') messages.push({ role: 'user', content: userParts(content, `${at}.content`) });
        else messages.push({ role: it.role as 'system' | 'developer', content: textOf(content, `${at}.content`, 'input') });
        return;
      }
      case 'function_call': {
        const a = open();
        (a.tool_calls ??= []).push({ id: it.call_id!, type: 'function', function: { name: it.name!, arguments: it.arguments ?? '' } });
        return;
      }
      case 'function_call_output':
        flush();
        messages.push({ role: 'tool', tool_call_id: it.call_id!, content: textOf(it.output ?? '', `${at}.output`, 'input') });
        return;
      case 'reasoning': {
        if (!isGatewayReasoning(it)) {
          openAI++;
          return;
        }
        const a = open();
        const text = (it.summary ?? []).map((s) => s.text).join('\n\n');
        if (text) a.reasoning_content = a.reasoning_content ? `${a.reasoning_content}\n\n${text}` : text;
        const details = decodeReasoning(it.encrypted_content!, `${at}.encrypted_content`);
        if (details.length) a.reasoning_details = [...(a.reasoning_details ?? []), ...details];
        return;
      }
      case 'web_search_call':
        searches++;
        return;
    }
  });
  flush();
  if (openAI) notes.push({ param: 'input', action: 'strip', before: `${openAI} reasoning item(s)`, reason: "OpenAI's encrypted reasoning can only be read by OpenAI models" });
  if (searches) notes.push({ param: 'input', action: 'strip', before: `${searches} web_search_call item(s)`, reason: 'hosted web search records are informational; the answer text that used them is kept' });
  return { messages, notes };
}

// ---------------------------------------------------------------- request

/** A function tool in the flat Responses shape, whichever shape the client sent. */
export function flatTool(t: Record<string, unknown>): Record<string, unknown> {
  if (t.type !== 'function' || t.function === undefined) return t;
  const { function: fn, ...rest } = t as { function: Record<string, unknown> };
  return { ...rest, ...fn, type: 'function' };
}

export function flatToolChoice(tc: ResponsesRequest['tool_choice']): ResponsesRequest['tool_choice'] {
  if (tc && typeof tc === 'object' && tc.function) return { type: 'function', name: tc.function.name };
  return tc;
}

export const isWebSearchTool = (t: Record<string, unknown>) => (WEB_SEARCH_TYPES as readonly unknown[]).includes(t.type);

/** Fields this module maps (or the gateway consumes); anything else is stripped on translated paths. */
const TRANSLATED = new Set([
  'model', 'input', 'instructions', 'temperature', 'top_p', 'max_output_tokens', 'stop', 'stream', 'tools', 'tool_choice',
  'parallel_tool_calls', 'text', 'reasoning', 'user', 'native_fields',
  // consumed by the gateway itself
  'previous_response_id', 'store', 'truncation', 'metadata', 'include', 'extra', 'fallbacks', 'debug', 'background',
]);

export interface TranslateOptions {
  model: ModelConfig;
  stream: boolean;
  where: Where;
}

/** A Responses request and its (history-expanded, truncated) items as a chat IR request. */
export function toChatRequest(body: ResponsesRequest, items: Item[], o: TranslateOptions): { request: ChatRequest; notes: NormalizationEntry[] } {
  const { messages, notes } = itemsToMessages(items, body.instructions, o.where);
  const req: ChatRequest = { model: body.model, messages };
  if (body.temperature != null) req.temperature = body.temperature;
  if (body.top_p != null) req.top_p = body.top_p;
  if (body.max_output_tokens != null) req.max_completion_tokens = body.max_output_tokens;
  if (body.stop != null) req.stop = body.stop;
  if (o.stream) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  if (body.tools?.length) {
    const fns: FunctionTool[] = [];
    body.tools.forEach((raw, i) => {
      if (isWebSearchTool(raw)) {
        if (!o.model.capabilities.web_search)
          throw errors.invalid(
            `Invalid 'tools[${i}]': the model '${o.model.id}' has no web search (capabilities.web_search is not set in its catalog entry); remove the '${raw.type}' tool or use a model that has it.`,
            `tools[${i}]`,
            'unsupported_tool',
          );
        const { type: _t, ...options } = raw;
        req.web_search = Object.keys(options).length ? { enabled: true, options } : { enabled: true };
        return;
      }
      const t = flatTool(raw) as { name: string; description?: string | null; parameters?: Record<string, unknown> | null; strict?: boolean | null };
      const fn: FunctionTool['function'] = { name: t.name };
      if (t.description != null) fn.description = t.description;
      if (t.parameters != null) fn.parameters = t.parameters;
      if (t.strict != null) fn.strict = t.strict;
      fns.push({ type: 'function', function: fn });
    });
    if (fns.length) req.tools = fns;
  }
  const tc = flatToolChoice(body.tool_choice);
  // Chat forbids tool_choice without tools (e.g. when web search was the only tool).
  if (tc != null && req.tools) req.tool_choice = (typeof tc === 'string' ? tc : { type: 'function', function: { name: tc.name! } }) as ToolChoice;
  if (body.parallel_tool_calls != null && req.tools) req.parallel_tool_calls = body.parallel_tool_calls;
  const format = body.text?.format as ({ type: string; name?: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string | null } | null | undefined);
  if (format && format.type !== 'text') {
    if (format.type === 'json_object') req.response_format = { type: 'json_object' };
    else {
      const js: Extract<ResponseFormat, { type: 'json_schema' }>['json_schema'] = { name: format.name!, schema: format.schema };
      if (format.strict != null) js.strict = format.strict;
      if (format.description != null) js.description = format.description;
      req.response_format = { type: 'json_schema', json_schema: js };
    }
  }
  if (body.text?.verbosity != null) notes.push({ param: 'text.verbosity', action: 'strip', before: body.text.verbosity, reason: `${o.model.id} is served through the chat format, which has no verbosity control` });
  const effort = body.reasoning?.effort;
  if (effort != null) req.reasoning_effort = effort;
  const summary = body.reasoning?.summary ?? body.reasoning?.generate_summary;
  if (summary != null) {
    if (o.model.capabilities.reasoning_summary) req.reasoning_summary = summary;
    else notes.push({ param: 'reasoning.summary', action: 'strip', before: summary, reason: `${o.model.id} has no reasoning summary mode (capabilities.reasoning_summary)` });
  }
  if (body.user != null) req.user = body.user;
  if (body.native_fields) req.native_fields = body.native_fields;
  for (const [k, v] of Object.entries(body)) {
    if (TRANSLATED.has(k) || v === undefined || v === null) continue;
    if (k === 'stream_options') continue; // obfuscation is an OpenAI transport detail; the gateway's own stream has none
    notes.push({ param: k, action: 'strip', before: v, reason: `${o.model.id} is served through the chat format, which has no '${k}'` });
  }
  return { request: req, notes };
}

export interface NativeOptions {
  /** The provider's own model name. */
  upstreamModel: string;
  model: ModelConfig;
  /** Replacement input (history expanded and/or truncated); undefined keeps the client's. */
  items?: Item[];
  normalize: boolean;
}

const GATEWAY_ONLY = ['extra', 'fallbacks', 'debug', 'native_fields'] as const;

/**
 * The same-API body for an OpenAI-family target: the client's body with the
 * model patched, gateway-only fields removed and `native_fields` merged at the
 * top level. Function tools go out flat (the Responses wire shape, which the
 * OpenAI API requires). When the conversation was expanded from the gateway's
 * store, `input` carries it and `previous_response_id` is dropped (the id is
 * the gateway's, not OpenAI's). Gateway-made reasoning items are dropped: only
 * the provider that signed them can read them.
 */
export function toNativeBody(body: ResponsesRequest, o: NativeOptions): { body: Record<string, unknown>; notes: NormalizationEntry[] } {
  const notes: NormalizationEntry[] = [];
  const out: Record<string, unknown> = { ...body, model: o.upstreamModel };
  for (const f of GATEWAY_ONLY) delete out[f];
  if (body.native_fields) Object.assign(out, body.native_fields);
  const items = o.items ?? (Array.isArray(body.input) ? body.input : undefined);
  if (o.items) {
    out.input = o.items;
    delete out.previous_response_id;
  }
  if (items?.some(isGatewayReasoning)) {
    const kept = items.filter((it) => !isGatewayReasoning(it));
    notes.push({ param: 'input', action: 'strip', before: `${items.length - kept.length} reasoning item(s)`, reason: 'reasoning signed by another provider family cannot be read by OpenAI models' });
    out.input = kept;
  }
  if (body.tools?.some((t) => t.type === 'function' && t.function !== undefined)) out.tools = body.tools.map(flatTool);
  if (body.tool_choice && typeof body.tool_choice === 'object' && body.tool_choice.function) out.tool_choice = flatToolChoice(body.tool_choice);
  if (o.normalize) {
    const caps = o.model.capabilities;
    // OpenAI reasoning models reject sampling knobs on the Responses API
    // (400 "Unsupported parameter: 'temperature' is not supported with this model."),
    // and non-reasoning models reject `reasoning`.
    if (caps.reasoning) {
      for (const f of ['temperature', 'top_p'] as const) {
        if (out[f] != null) {
          notes.push({ param: f, action: 'strip', before: out[f], reason: `${o.model.id} is a reasoning model and does not support ${f}` });
          delete out[f];
        }
      }
    } else if (out.reasoning != null && !caps.thinking) {
      notes.push({ param: 'reasoning', action: 'strip', before: out.reasoning, reason: `${o.model.id} is not a reasoning model` });
      delete out.reasoning;
    }
  }
  return { body: out, notes };
}

// ---------------------------------------------------------------- result

export type ResponseEcho = Record<string, unknown>;

/** The request parameters a response object echoes (as OpenAI's does), with OpenAI's defaults. */
export function responseEcho(body: ResponsesRequest): ResponseEcho {
  const format = body.text?.format ?? { type: 'text' };
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? body.reasoning?.generate_summary ?? null },
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: { format, ...(body.text?.verbosity ? { verbosity: body.text.verbosity } : {}) },
    tool_choice: flatToolChoice(body.tool_choice) ?? 'auto',
    tools: (body.tools ?? []).map(flatTool),
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? 'disabled',
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}

/**
 * The codes OpenAI's schema allows for a response's `error.code`
 * (ResponseError in the OpenAPI spec; the openai SDK's `ResponseError`).
 */
export const RESPONSE_ERROR_CODES: ReadonlySet<string> = new Set([
  'server_error', 'rate_limit_exceeded', 'invalid_prompt', 'data_residency_mismatch', 'bio_policy', 'vector_store_timeout',
  'invalid_image', 'invalid_image_format', 'invalid_base64_image', 'invalid_image_url', 'image_too_large', 'image_too_small',
  'image_parse_error', 'image_content_policy_violation', 'invalid_image_mode', 'image_file_too_large',
  'unsupported_image_media_type', 'empty_image_file', 'failed_to_download_image', 'image_file_not_found',
]);

/**
 * A failure as a response object's `error`: a code the schema allows (a rate
 * limit, a prompt the provider refused, anything else a server error), with
 * the gateway's or the provider's own code kept in the message. The `error`
 * event before `response.failed` carries the envelope as it is (its code is
 * free-form there).
 */
export function responseError(err: { code?: string | null; type?: string; message: string }): { code: string; message: string } {
  if (err.code && RESPONSE_ERROR_CODES.has(err.code)) return { code: err.code, message: err.message };
  const code = err.type === 'rate_limit_error' ? 'rate_limit_exceeded' : err.type === 'invalid_request_error' ? 'invalid_prompt' : 'server_error';
  const detail = err.code ?? err.type;
  return { code, message: detail && detail !== code ? `${err.message} (${detail})` : err.message };
}

/** A response object in OpenAI's field order. */
export function responseShell(
  echo: ResponseEcho,
  f: { id: string; created_at: number; model: string; status: ResponseStatus; output: Item[]; usage: ResponsesUsage | null; error?: { code: string; message: string } | null; incomplete_details?: { reason: string } | null },
): ResponseObject {
  const { instructions, max_output_tokens, ...rest } = echo;
  return {
    id: f.id,
    object: 'response',
    created_at: f.created_at,
    status: f.status,
    background: false,
    error: f.error ?? null,
    incomplete_details: f.incomplete_details ?? null,
    instructions,
    max_output_tokens,
    model: f.model,
    output: f.output,
    ...rest,
    usage: f.usage,
  } as ResponseObject;
}

/** Chat usage as Responses usage; cache writes and web searches (the IR's extensions) carried when not 0. */
export function usageFromChat(u: Partial<ChatUsage> | null | undefined): ResponsesUsage {
  const input = u?.prompt_tokens ?? 0;
  const output = u?.completion_tokens ?? 0;
  const out: ResponsesUsage = {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u?.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u?.total_tokens ?? input + output,
  };
  const writes = u?.prompt_tokens_details?.cache_write_tokens;
  if (writes) (out.input_tokens_details as Record<string, number>).cache_write_tokens = writes;
  if (u?.server_tool_use?.web_search_requests) (out as unknown as Record<string, unknown>).server_tool_use = { ...u.server_tool_use };
  return out;
}

/** Native usage with the detail fields filled in (spec 2.2: present even when 0). */
export function fillUsage(response: Record<string, unknown>): void {
  const u = response.usage as Partial<ResponsesUsage> | null | undefined;
  if (!u || typeof u !== 'object') return;
  u.input_tokens_details = { ...u.input_tokens_details, cached_tokens: u.input_tokens_details?.cached_tokens ?? 0 };
  u.output_tokens_details = { ...u.output_tokens_details, reasoning_tokens: u.output_tokens_details?.reasoning_tokens ?? 0 };
}

/** finish_reason to status and incomplete_details (docs/responses.md). */
export function statusOf(finish: FinishReason | null | undefined): { status: ResponseStatus; incomplete_details: { reason: string } | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

interface ChatAnnotation {
  type: string;
  url_citation?: { start_index: number; end_index: number; url: string; title?: string };
}

/** Chat `message.annotations` (url_citation, from search-capable models) in the Responses shape. */
export function mapAnnotations(a: unknown): unknown[] {
  if (!Array.isArray(a)) return [];
  return (a as ChatAnnotation[])
    .filter((x) => x?.type === 'url_citation' && x.url_citation)
    .map((x) => ({ type: 'url_citation', start_index: x.url_citation!.start_index, end_index: x.url_citation!.end_index, url: x.url_citation!.url, title: x.url_citation!.title ?? '' }));
}

export function outputTextPart(text: string, annotations: unknown[] = []): Part {
  return { type: 'output_text', annotations, logprobs: [], text };
}

/** A chat completion from a translated target as a Responses object. */
export function fromChatCompletion(c: ChatCompletion, echo: ResponseEcho, model: string, id = newId('resp')): ResponseObject {
  const choice = c.choices?.[0];
  const msg = choice?.message ?? { role: 'assistant' as const, content: null };
  const { status, incomplete_details } = statusOf(choice?.finish_reason);
  const output: Item[] = [];
  // Reasoning with text comes first, as it was produced; signed blocks without
  // text go last, where a stream delivers them (see responses-stream.ts).
  const reasoning = msg.reasoning_content || msg.reasoning_details?.length ? reasoningItem([msg.reasoning_content ?? ''], msg.reasoning_details ?? []) : undefined;
  if (reasoning && msg.reasoning_content) output.push(reasoning);
  const text = typeof msg.content === 'string' ? msg.content : '';
  const calls = msg.tool_calls ?? [];
  if (text || msg.refusal || !calls.length) {
    output.push({
      id: newId('msg'),
      type: 'message',
      status: status === 'incomplete' ? 'incomplete' : 'completed',
      content: msg.refusal && !text ? [{ type: 'refusal', refusal: msg.refusal }] : [outputTextPart(text, mapAnnotations((msg as { annotations?: unknown }).annotations))],
      role: 'assistant',
    });
  }
  for (const tc of calls) {
    output.push({ id: newId('fc'), type: 'function_call', status: 'completed', arguments: tc.function.arguments, call_id: tc.id, name: tc.function.name });
  }
  if (reasoning && !msg.reasoning_content) output.push(reasoning);
  return responseShell(echo, { id, created_at: c.created ?? Math.floor(Date.now() / 1000), model, status, output, usage: usageFromChat(c.usage), incomplete_details });
}
