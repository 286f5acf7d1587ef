// Anthropic Messages API <-> chat IR, for targets that do not serve the
// Messages API themselves (https://docs.anthropic.com/en/api/messages;
// shared/fixtures/WIRE-FORMATS.md section 4). Pure: the request is never
// mutated (a fallback maps it again for the next target); every change that
// is not a plain rename is returned as a note (debug.normalizations).
//
// Signed reasoning. A target that is not served natively returns its
// reasoning state (Gemini thought signatures, Claude-on-Converse thinking
// blocks...) as IR `reasoning_details`. The client gets it as a `thinking`
// block whose `signature` is the gateway's: `mgw1.<family>.<base64url JSON of
// the details>`. On a later turn such a block is restored as
// `reasoning_details` only when the target is of the family that signed it;
// anywhere else it is dropped with a note, as is a provider's own signature
// sent to a translated target: a foreign signature is never sent on.
import { randomBase62 } from '../random.js';
import type { ChatCompletion, ChatMessage, ChatRequest, ChatUsage, ContentPart, FinishReason, FunctionTool, NormalizationEntry, ReasoningDetail, TextPart, ToolCall } from '../types.js';
import { errors, clip } from '../errors.js';
import { EXTENSION_FIELDS } from './common.js';

type Note = (e: NormalizationEntry) => void;
// Blocks as validated by messages-schema.ts (loose objects).
type Block = { type: string; [k: string]: unknown };
type AnthropicCacheControl = { type: 'ephemeral'; ttl?: '5m' | '1h' } | null | undefined;

export interface MessagesRequest {
  model: string;
  max_tokens?: number;
  messages: { role: 'user' | 'assistant'; content: string | Block[] }[];
  system?: string | Block[];
  tools?: Block[];
  tool_choice?: { type: 'auto' | 'any' | 'tool' | 'none'; name?: string; disable_parallel_tool_use?: boolean };
  thinking?: { type: string; budget_tokens?: number };
  metadata?: { user_id?: string | null };
  stop_sequences?: string[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  native_fields?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface MessageObject {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Block[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  usage: MessagesUsage;
  [k: string]: unknown;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal' | 'pause_turn';

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

// ---------------------------------------------------------------- ids and signatures

/** Anthropic-style ids: `msg_01` then 22 base62 characters. */
export function messageId(): string {
  return 'msg_01' + randomBase62(22);
}

export const SIGNATURE_PREFIX = 'mgw1.';

/** The signature of a thinking block made by the gateway from a translated target's reasoning. */
export function gatewaySignature(family: string, details: ReasoningDetail[]): string {
  return `${SIGNATURE_PREFIX}${family}.${Buffer.from(JSON.stringify(details), 'utf8').toString('base64url')}`;
}

/** A gateway signature's family and details; undefined for a provider's own (or an altered) signature. */
export function readSignature(signature: string): { family: string; details: ReasoningDetail[] } | undefined {
  if (!signature.startsWith(SIGNATURE_PREFIX)) return undefined;
  const dot = signature.indexOf('.', SIGNATURE_PREFIX.length);
  if (dot === -1) return undefined;
  try {
    const details = JSON.parse(Buffer.from(signature.slice(dot + 1), 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(details) || !details.every((d) => d && typeof d === 'object' && typeof (d as { type?: unknown }).type === 'string')) return undefined;
    return { family: signature.slice(SIGNATURE_PREFIX.length, dot), details: details as ReasoningDetail[] };
  } catch {
    return undefined;
  }
}

export const isGatewaySigned = (b: Block): boolean => b.type === 'thinking' && typeof b.signature === 'string' && b.signature.startsWith(SIGNATURE_PREFIX);

// ---------------------------------------------------------------- same-API body

/**
 * Claude with thinking on requires the assistant turn whose tool calls the
 * last user turn answers to start with its signed thinking block. When that
 * turn came from another model (a session switched models mid tool loop), it
 * has none Claude can read, and the request can only go with thinking off
 * for this turn. The index of that assistant turn, when the request ends
 * with tool results.
 */
function toolLoopTurn(messages: MessagesRequest['messages']): number | undefined {
  const last = messages[messages.length - 1];
  const prev = messages[messages.length - 2];
  const loop = last?.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result');
  return loop && prev?.role === 'assistant' ? messages.length - 2 : undefined;
}

const startsWithThinking = (content: string | Block[]) => Array.isArray(content) && (content[0]?.type === 'thinking' || content[0]?.type === 'redacted_thinking');

const THINKING_OFF_REASON =
  'the assistant turn this tool result answers has no thinking block Claude can read (it came from another model or provider), and Claude requires one there while thinking is on: thinking is off for this turn';

/**
 * The body for a target that serves the Messages API: the client's body
 * with the model patched, the gateway's own fields removed and
 * `native_fields` merged at the top level. Patched, not rebuilt: blocks,
 * cache_control, thinking and tools go as they came, except thinking blocks
 * the gateway signed for another family, which that provider would reject.
 */
export function nativeBody(body: MessagesRequest, upstreamModel: string, note: Note, fields?: readonly string[]): Record<string, unknown> {
  let out: Record<string, unknown> = { ...body, model: upstreamModel };
  for (const f of EXTENSION_FIELDS) delete out[f];
  delete out.native_fields;
  if (body.native_fields) Object.assign(out, body.native_fields);
  if (fields) out = Object.fromEntries(Object.entries(out).filter(([k]) => fields.includes(k)));
  let dropped = 0;
  const messages = body.messages.map((m) => {
    if (m.role !== 'assistant' || typeof m.content === 'string' || !m.content.some(isGatewaySigned)) return m;
    const kept = m.content.filter((b) => !isGatewaySigned(b));
    dropped += m.content.length - kept.length;
    return { ...m, content: kept };
  });
  if (dropped) {
    out.messages = messages;
    note({ param: 'messages', action: 'strip', before: `${dropped} thinking block(s)`, reason: 'thinking signed for another provider family cannot be read by this model' });
  }
  const loop = toolLoopTurn(messages);
  if (loop !== undefined && !startsWithThinking(messages[loop].content) && out.thinking && (out.thinking as { type?: string }).type !== 'disabled') {
    note({ param: 'thinking', action: 'strip', before: out.thinking, reason: THINKING_OFF_REASON });
    delete out.thinking;
  }
  return out;
}

// ---------------------------------------------------------------- request

export interface TranslateOptions {
  /** The target's provider family: decides which signed reasoning it can read and where top_k goes. */
  family: string;
  stream: boolean;
  /** The deployment's model id (Claude on Bedrock takes a native top_k). */
  upstreamModel?: string;
  /** The catalog's max_output_tokens for the target: a larger max_tokens (sized for Claude) is lowered to it. */
  maxOutput?: number;
}

/** Top-level fields this mapping reads (or the gateway consumes); any other is dropped with a note. */
const KNOWN = new Set([
  'model', 'max_tokens', 'messages', 'system', 'tools', 'tool_choice', 'thinking', 'metadata', 'stop_sequences', 'stream',
  'temperature', 'top_p', 'top_k', 'native_fields', ...EXTENSION_FIELDS,
]);

/** A target served by the Gemini mapping (the Gemini API, Google's models on Vertex AI). */
const geminiTarget = (o: TranslateOptions) => o.family === 'google' || (o.family === 'vertex' && !/^claude-/.test(o.upstreamModel ?? ''));

/**
 * Where a target takes a native top_k, under which native field: Gemini's
 * generationConfig.topK (Gemini API and Vertex AI), Claude's own top_k on
 * Bedrock (a model field, sent in additionalModelRequestFields).
 */
function topKField(o: TranslateOptions): string | undefined {
  if (geminiTarget(o)) return 'topK';
  if (o.family === 'bedrock' && /anthropic\.claude/.test(o.upstreamModel ?? '')) return 'top_k';
  return undefined;
}

/** thinking.budget_tokens -> reasoning_effort (the budgets the anthropic family maps back: plugins/providers/anthropic/request.ts). */
export function effortFor(budget: number): 'low' | 'medium' | 'high' {
  if (budget < 4096) return 'low';
  if (budget < 16384) return 'medium';
  return 'high';
}

function cacheControl(cc: AnthropicCacheControl): { cache_control?: { type: 'ephemeral'; ttl?: string } } {
  if (!cc) return {};
  return { cache_control: { type: 'ephemeral', ...(cc.ttl ? { ttl: cc.ttl === '1h' ? '3600s' : '300s' } : {}) } };
}

function textPart(b: Block): TextPart {
  return { type: 'text', text: String(b.text), ...cacheControl(b.cache_control as AnthropicCacheControl) };
}

function imagePart(b: Block, at: string): ContentPart {
  const s = b.source as { type: string; media_type?: string; data?: string; url?: string };
  const cc = cacheControl(b.cache_control as AnthropicCacheControl);
  if (s.type === 'base64') return { type: 'image_url', image_url: { url: `data:${s.media_type};base64,${s.data}` }, ...cc };
  if (s.type === 'url') return { type: 'image_url', image_url: { url: String(s.url) }, ...cc };
  throw errors.invalid(`Invalid '${at}.source': an image given by 'file_id' lives in Anthropic's Files API and can only be sent to a Claude model; send it as base64 or a URL.`, `${at}.source`, 'unsupported_content');
}

/**
 * A document block: its text when it is text; a PDF (base64 or URL) as a
 * media part for a target that reads PDFs there (Gemini takes them as inline
 * or file data); anywhere else a PDF has no place in the chat IR.
 */
function documentParts(b: Block, at: string, pdf: boolean): ContentPart[] {
  const s = b.source as { type: string; data?: unknown; content?: unknown; media_type?: unknown; url?: unknown };
  const cc = cacheControl(b.cache_control as AnthropicCacheControl);
  if (s.type === 'text' && typeof s.data === 'string') return [{ type: 'text', text: s.data, ...cc }];
  if (s.type === 'content') {
    const blocks = typeof s.content === 'string' ? [{ type: 'text', text: s.content }] : Array.isArray(s.content) ? (s.content as Block[]) : [];
    return blocks.map((c, k) => (c.type === 'text' ? textPart(c) : c.type === 'image' ? imagePart(c, `${at}.source.content[${k}]`) : unsupported(c, `${at}.source.content[${k}]`)));
  }
  if (pdf && s.type === 'base64' && typeof s.data === 'string') return [{ type: 'image_url', image_url: { url: `data:${String(s.media_type ?? 'application/pdf')};base64,${s.data}` }, ...cc }];
  if (pdf && s.type === 'url' && typeof s.url === 'string') return [{ type: 'image_url', image_url: { url: s.url }, ...cc }];
  throw errors.invalid(`Invalid '${at}.source': a '${clip(s.type)}' document can only be sent to a Claude or Gemini model; send its text as a text block instead.`, `${at}.source`, 'unsupported_content');
}

function unsupported(b: Block, at: string): never {
  throw errors.invalid(`Invalid '${at}': a '${clip(b.type)}' block can only be sent to a Claude model.`, `${at}.type`, 'unsupported_content');
}

function userPart(b: Block, at: string, pdf: boolean): ContentPart[] {
  if (b.type === 'text') return [textPart(b)];
  if (b.type === 'image') return [imagePart(b, at)];
  if (b.type === 'document') return documentParts(b, at, pdf);
  return unsupported(b, at);
}

/** A tool_result as a tool message, and the images it holds (a tool message carries text only). */
function toolResult(b: Block, at: string, note: Note, pdf: boolean): { message: ChatMessage; images: ContentPart[] } {
  const content = b.content as string | Block[] | undefined;
  const texts: TextPart[] = [];
  const images: ContentPart[] = [];
  if (typeof content === 'string') texts.push({ type: 'text', text: content });
  else
    (content ?? []).forEach((c, k) => {
      for (const p of userPart(c, `${at}.content[${k}]`, pdf)) (p.type === 'text' ? texts : images).push(p);
    });
  if (b.is_error === true) {
    texts.unshift({ type: 'text', text: 'Error:' });
    note({ param: `${at}.is_error`, action: 'rename', before: 'is_error', after: "text 'Error:' before the result", reason: 'a chat tool message has no error flag' });
  }
  if (images.length) note({ param: `${at}.content`, action: 'override', before: 'image in tool_result', after: 'image in a user message after the tool results', reason: 'a chat tool message carries text only' });
  const plain = texts.every((p) => !p.cache_control);
  const message: ChatMessage = { role: 'tool', tool_call_id: String(b.tool_use_id), content: plain ? texts.map((p) => p.text).join('\n') : texts };
  const cc = cacheControl(b.cache_control as AnthropicCacheControl).cache_control;
  if (cc) message.cache_control = cc;
  return { message, images };
}

interface ReasoningState {
  family: string;
  dropped: number;
  where: string | undefined;
  /** Message indexes whose signed reasoning was restored. */
  signedAt: Set<number>;
}

function assistantMessage(content: string | Block[], i: number, r: ReasoningState, note: Note): ChatMessage | undefined {
  if (typeof content === 'string') return content ? { role: 'assistant', content } : undefined;
  const parts: TextPart[] = [];
  const calls: ToolCall[] = [];
  const details: ReasoningDetail[] = [];
  const thinking: string[] = [];
  let records = 0;
  content.forEach((b, j) => {
    const at = `messages[${i}].content[${j}]`;
    switch (b.type) {
      case 'text':
        if (b.text) parts.push(textPart(b));
        return;
      case 'tool_use':
        calls.push({ id: String(b.id), type: 'function', function: { name: String(b.name), arguments: JSON.stringify(b.input ?? {}) } });
        return;
      case 'thinking':
      case 'redacted_thinking': {
        const signed = b.type === 'thinking' ? readSignature(String(b.signature)) : undefined;
        if (signed && signed.family === r.family) {
          details.push(...signed.details);
          if (b.thinking) thinking.push(String(b.thinking));
          return;
        }
        r.dropped++;
        r.where ??= at;
        return;
      }
      case 'server_tool_use':
      case 'web_search_tool_result':
        records++;
        return;
      default:
        unsupported(b, at);
    }
  });
  if (details.length) r.signedAt.add(i);
  if (records) note({ param: `messages[${i}].content`, action: 'strip', before: `${records} server tool block(s)`, reason: 'records of a tool Anthropic ran itself cannot be replayed to this model; the text that used them is kept' });
  if (!parts.length && !calls.length && !details.length) return undefined;
  const plain = parts.every((p) => !p.cache_control);
  const m: ChatMessage = { role: 'assistant', content: parts.length ? (plain ? parts.map((p) => p.text).join('') : parts) : null };
  if (calls.length) m.tool_calls = calls;
  if (details.length) m.reasoning_details = details;
  if (thinking.length) m.reasoning_content = thinking.join('\n\n');
  return m;
}

function userMessages(content: string | Block[], i: number, note: Note, pdf: boolean): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const out: ChatMessage[] = [];
  const parts: ContentPart[] = [];
  content.forEach((b, j) => {
    const at = `messages[${i}].content[${j}]`;
    if (b.type === 'tool_result') {
      const { message, images } = toolResult(b, at, note, pdf);
      out.push(message);
      parts.push(...images);
    } else parts.push(...userPart(b, at, pdf));
  });
  // Anthropic puts a turn's tool results first; the chat IR wants tool messages right after the assistant's calls.
  // One plain text block is a string; several blocks stay parts (their boundaries kept).
  if (parts.length) out.push({ role: 'user', content: parts.length === 1 && parts[0].type === 'text' && !parts[0].cache_control ? parts[0].text : parts });
  return out;
}

function mapTools(body: MessagesRequest, req: ChatRequest): void {
  const tools: FunctionTool[] = [];
  (body.tools ?? []).forEach((t, i) => {
    const type = t.type as string | undefined | null;
    if (!type || type === 'custom') {
      const fn: FunctionTool['function'] = { name: String(t.name), parameters: t.input_schema as Record<string, unknown> };
      if (typeof t.description === 'string') fn.description = t.description;
      tools.push({ type: 'function', function: fn, ...cacheControl(t.cache_control as AnthropicCacheControl) });
      return;
    }
    if (type.startsWith('web_search_')) {
      const options: Record<string, unknown> = {};
      for (const k of ['allowed_domains', 'blocked_domains', 'user_location', 'max_uses']) if (t[k] != null) options[k] = t[k];
      req.web_search = { enabled: true, options };
      return;
    }
    throw errors.invalid(`Invalid 'tools[${i}].type': the server tool '${clip(type)}' runs on Anthropic's side and can only be sent to a Claude model.`, `tools[${i}].type`, 'unsupported_tool');
  });
  if (tools.length) req.tools = tools;
  const tc = body.tool_choice;
  if (!tc) return;
  if (tc.type === 'auto') req.tool_choice = 'auto';
  else if (tc.type === 'any') req.tool_choice = 'required';
  else if (tc.type === 'none') req.tool_choice = 'none';
  else req.tool_choice = { type: 'function', function: { name: String(tc.name) } };
  if (tc.disable_parallel_tool_use) req.parallel_tool_calls = false;
}

/** A Messages request as the chat IR for a target of `o.family`. */
export function toChatRequest(body: MessagesRequest, o: TranslateOptions): { request: ChatRequest; notes: NormalizationEntry[] } {
  const notes: NormalizationEntry[] = [];
  const note: Note = (e) => notes.push(e);
  const messages: ChatMessage[] = [];
  if (typeof body.system === 'string') {
    if (body.system) messages.push({ role: 'system', content: body.system });
  } else if (body.system?.length) messages.push({ role: 'system', content: body.system.map(textPart) });

  const reasoning: ReasoningState = { family: o.family, dropped: 0, where: undefined, signedAt: new Set() };
  const pdf = geminiTarget(o); // Gemini reads PDFs as inline or file data
  body.messages.forEach((m, i) => {
    if (m.role === 'assistant') {
      const a = assistantMessage(m.content, i, reasoning, note);
      if (a) messages.push(a);
    } else messages.push(...userMessages(m.content, i, note, pdf));
  });
  if (reasoning.dropped)
    note({ param: reasoning.where ?? 'messages', action: 'strip', before: `${reasoning.dropped} thinking block(s)`, reason: `thinking signed by another provider cannot be read by a model of the ${o.family} family` });

  const req: ChatRequest = { model: body.model, messages };
  if (body.max_tokens != null) {
    req.max_tokens = body.max_tokens;
    // Claude Code sizes max_tokens for Claude (32000 and more); another model may allow fewer.
    if (o.maxOutput !== undefined && body.max_tokens > o.maxOutput) {
      req.max_tokens = o.maxOutput;
      note({ param: 'max_tokens', action: 'override', before: body.max_tokens, after: o.maxOutput, reason: `the model allows at most ${o.maxOutput} output tokens (the catalog's max_output_tokens)` });
    }
  }
  mapTools(body, req);
  if (body.stop_sequences?.length) req.stop = [...body.stop_sequences];
  if (body.temperature != null) req.temperature = body.temperature;
  if (body.top_p != null) req.top_p = body.top_p;
  const native: Record<string, unknown> = { ...(body.native_fields ?? {}) };
  if (body.top_k != null) {
    const field = topKField(o);
    if (field) {
      if (native.top_k === undefined && native.topK === undefined) native[field] = body.top_k;
    } else note({ param: 'top_k', action: 'strip', before: body.top_k, reason: `models of the ${o.family} family take no top_k` });
  }
  if (Object.keys(native).length) req.native_fields = native;
  if (body.metadata?.user_id) req.user = body.metadata.user_id;
  // Claude on Bedrock holds the tool loop to the same rule as Anthropic (toolLoopTurn).
  const loop = toolLoopTurn(body.messages);
  const loopLostThinking = o.family === 'bedrock' && /anthropic\.claude/.test(o.upstreamModel ?? '') && loop !== undefined && !reasoning.signedAt.has(loop);
  if (loopLostThinking && body.thinking && body.thinking.type !== 'disabled') {
    note({ param: 'thinking', action: 'strip', before: body.thinking, reason: THINKING_OFF_REASON });
  } else if (body.thinking?.type === 'enabled' && typeof body.thinking.budget_tokens === 'number') {
    req.reasoning_effort = effortFor(body.thinking.budget_tokens);
    note({ param: 'thinking', action: 'rename', before: { type: 'enabled', budget_tokens: body.thinking.budget_tokens }, after: { reasoning_effort: req.reasoning_effort }, reason: 'a translated target takes a reasoning effort, not a token budget' });
  } else if (body.thinking && body.thinking.type !== 'disabled') {
    note({ param: 'thinking', action: 'strip', before: body.thinking, reason: `thinking of type '${body.thinking.type}' has no counterpart on this model` });
  }
  if (o.stream) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  for (const [k, v] of Object.entries(body)) if (!KNOWN.has(k) && v !== undefined) note({ param: k, action: 'strip', before: v, reason: `'${k}' has no counterpart on this model` });
  return { request: req, notes };
}

// ---------------------------------------------------------------- result

export function stopReason(finish: FinishReason | null | undefined): StopReason {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

/** IR usage in Anthropic's terms: input_tokens excludes cache reads and writes. */
export function usageFromChat(u: Partial<ChatUsage> | null | undefined): MessagesUsage {
  const prompt = u?.prompt_tokens ?? 0;
  const read = u?.prompt_tokens_details?.cached_tokens ?? 0;
  const write = u?.prompt_tokens_details?.cache_write_tokens ?? 0;
  return { input_tokens: Math.max(0, prompt - read - write), output_tokens: u?.completion_tokens ?? 0, cache_creation_input_tokens: write, cache_read_input_tokens: read };
}

/** Tool-call arguments as the object a tool_use block carries. */
export function toolInput(args: string): Record<string, unknown> {
  if (!args.trim()) return {};
  try {
    const v = JSON.parse(args) as unknown;
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* below */
  }
  // Not an object (a model that wrote broken JSON): kept whole rather than lost.
  return { _raw_arguments: args };
}

/** A chat completion as a Messages result; `family` signs the reasoning it carries. */
export function fromChatCompletion(c: ChatCompletion, model: string, family: string): MessageObject {
  const choice = c.choices?.[0];
  const msg = choice?.message;
  const content: Block[] = [];
  if (msg?.reasoning_content || msg?.reasoning_details?.length)
    content.push({ type: 'thinking', thinking: msg.reasoning_content ?? '', signature: gatewaySignature(family, msg.reasoning_details ?? []) });
  const text = typeof msg?.content === 'string' ? msg.content : '';
  if (text) content.push({ type: 'text', text });
  else if (msg?.refusal) content.push({ type: 'text', text: msg.refusal });
  for (const tc of msg?.tool_calls ?? []) content.push({ type: 'tool_use', id: tc.id, name: tc.function.name, input: toolInput(tc.function.arguments) });
  return {
    id: messageId(),
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stopReason(choice?.finish_reason),
    stop_sequence: null,
    usage: usageFromChat(c.usage),
  };
}
