// Chat IR -> Gemini generateContent request (and, when the caller marks a
// prompt-cache prefix, the cachedContents body for it).
//
// Pure: the IR request is never mutated; a fallback calls this again. Every
// change the mapping makes to what the caller asked is recorded with `note`.
// References: https://ai.google.dev/api/generate-content,
// https://ai.google.dev/gemini-api/docs/function-calling,
// https://ai.google.dev/gemini-api/docs/thinking,
// https://ai.google.dev/gemini-api/docs/thought-signatures,
// https://ai.google.dev/gemini-api/docs/caching,
// and docs/providers-google.md.
import type { ChatRequest, ChatMessage, ContentPart, NormalizationEntry, CacheControl } from '../../../src/types.js';
import type { ModelConfig } from '../../../src/config/schema.js';
import { errors, clip } from '../../../src/errors.js';
import type {
  GeminiContent,
  GeminiPart,
  GeminiTool,
  GeminiToolConfig,
  GeminiGenerationConfig,
  GeminiThinkingConfig,
  GenerateContentRequest,
  CachedContentCreate,
} from './wire.js';

type Note = (e: NormalizationEntry) => void;
type Level = NonNullable<GeminiThinkingConfig['thinkingLevel']>;

/** Sentinel Google documents for function calls that carry no signature (history from another model). */
export const SKIP_SIGNATURE = 'skip_thought_signature_validator';

export const DEFAULT_CACHE_TTL = '600s';

// ---------------------------------------------------------------------------
// What differs between Gemini models (by the upstream model name).

export interface Traits {
  /** Gemini 2.5 takes a token budget with a model-specific range; Gemini 3 takes a level. */
  thinking?: { kind: 'budget'; min: number; max: number; canDisable: boolean } | { kind: 'level'; levels: Level[] };
  /** presencePenalty / frequencyPenalty: only Gemini 1.5 and 2.0 accept them ("Penalty is not enabled for models/gemini-2.5-flash"). */
  penalties: boolean;
  /** Gemini 3 rejects function-call history without thoughtSignature. */
  signaturesRequired: boolean;
}

export function traits(model: string): Traits {
  const name = model.replace(/^models\//, '');
  const m = /^gemini-(\d+)(?:\.(\d+))?/.exec(name);
  if (!m) return { penalties: true, signaturesRequired: false };
  const version = Number(m[1]) + Number(m[2] ?? 0) / 10;
  if (version >= 3) {
    // Gemini 3 Pro offers low|high, Flash minimal|low|medium|high; neither can turn thinking off.
    const levels: Level[] = /-pro/.test(name) ? ['low', 'high'] : ['minimal', 'low', 'medium', 'high'];
    return { thinking: { kind: 'level', levels }, penalties: false, signaturesRequired: true };
  }
  if (version >= 2.5) {
    // Budget ranges from https://ai.google.dev/gemini-api/docs/thinking#set-budget
    if (/-image/.test(name)) return { penalties: false, signaturesRequired: false };
    const thinking = /-pro/.test(name)
      ? { kind: 'budget' as const, min: 128, max: 32768, canDisable: false }
      : /-flash-lite/.test(name)
        ? { kind: 'budget' as const, min: 512, max: 24576, canDisable: true }
        : { kind: 'budget' as const, min: 1, max: 24576, canDisable: true };
    return { thinking, penalties: false, signaturesRequired: false };
  }
  return { penalties: true, signaturesRequired: false };
}

// reasoning_effort -> thinking. Budgets are the gateway's choice (documented in docs/providers-google.md).
export const EFFORT_BUDGET: Record<string, number> = { none: 0, minimal: 512, low: 1024, medium: 8192, high: 24576, xhigh: 32768 };
const EFFORT_LEVEL: Record<string, Level> = { none: 'minimal', minimal: 'minimal', low: 'low', medium: 'medium', high: 'high', xhigh: 'high' };
const LEVEL_ORDER: Level[] = ['minimal', 'low', 'medium', 'high'];

// ---------------------------------------------------------------------------
// Fields.

/** IR fields Gemini has no equivalent for: removed, with a note. */
const UNSUPPORTED: Record<string, string> = {
  logit_bias: 'Gemini has no token bias',
  parallel_tool_calls: 'Gemini decides on parallel function calls itself',
  service_tier: 'Gemini has no per-request service tier',
  store: 'Gemini does not store chat completions',
  metadata: 'Gemini has no request metadata',
  user: 'Gemini has no end-user identifier',
};

/** IR fields this mapping consumes. Anything else is removed with a note: Gemini rejects unknown fields. */
const MAPPED = new Set([
  'model', 'messages', 'temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stream', 'stream_options',
  'frequency_penalty', 'presence_penalty', 'stop', 'seed', 'logprobs', 'top_logprobs', 'tools', 'tool_choice',
  'response_format', 'reasoning_effort', 'n', 'native_fields', 'web_search', 'reasoning_summary',
]);

/** GenerationConfig fields (camelCase): a native field with one of these names goes inside generationConfig. */
const GENERATION_FIELDS = new Set([
  'temperature', 'topP', 'topK', 'candidateCount', 'maxOutputTokens', 'stopSequences', 'seed', 'presencePenalty',
  'frequencyPenalty', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'responseModalities', 'responseLogprobs',
  'logprobs', 'thinkingConfig', 'speechConfig', 'imageConfig', 'mediaResolution', 'enableEnhancedCivicAnswers',
  'audioTimestamp', 'routingConfig', 'modelSelectionConfig',
]);

/** What a cached content holds and a generate call that uses one must not set. */
const CACHE_HELD = new Set(['tools', 'toolConfig', 'systemInstruction']);

export const camel = (k: string) => k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

// ---------------------------------------------------------------------------
// Messages.

const MIME_BY_EXT: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif', heic: 'image/heic',
  heif: 'image/heif', bmp: 'image/bmp', pdf: 'application/pdf', mp4: 'video/mp4', mov: 'video/quicktime', webm: 'video/webm',
  mpeg: 'video/mpeg', mp3: 'audio/mp3', wav: 'audio/wav', ogg: 'audio/ogg', flac: 'audio/flac', txt: 'text/plain',
};

/** The MIME type of a file URL, from its extension (Gemini wants one on fileData); image/jpeg when unknown. */
export function guessMime(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'image/jpeg';
  }
  if (/(^|\.)youtube\.com$|^youtu\.be$/.test(u.hostname)) return 'video/mp4';
  const ext = /\.([a-z0-9]+)$/i.exec(u.pathname)?.[1]?.toLowerCase();
  return (ext && MIME_BY_EXT[ext]) || 'image/jpeg';
}

function imagePart(url: string, param: string): GeminiPart {
  if (url.startsWith('data:')) {
    const m = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s.exec(url);
    if (!m || !/;base64$/i.test(m[2])) throw errors.invalid(`${param} must be a base64 data URL (data:<mime>;base64,...) or an http(s) URL`, param, 'invalid_image_url');
    return { inlineData: { mimeType: m[1] || 'image/jpeg', data: m[3] } };
  }
  if (/^(https?|gs):\/\//i.test(url)) return { fileData: { mimeType: guessMime(url), fileUri: url } };
  throw errors.invalid(`${param} must be a base64 data URL or an http(s) URL`, param, 'invalid_image_url');
}

function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

/** A tool result as a functionResponse.response: the parsed object when it is one, else {content}. */
function toolResponse(content: ChatMessage['content']): Record<string, unknown> {
  const text = textOf(content);
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* plain text */
  }
  return { content: text };
}

interface Signatures {
  byCall: Map<string, string>;
  text?: string;
}

/**
 * The thoughtSignatures a client sent back on an assistant message, from
 * `reasoning_details` (what this gateway returns) or from the tool call's
 * `extra_content.google.thought_signature` (what Gemini's own OpenAI-compatible
 * endpoint returns).
 */
function signaturesOf(m: ChatMessage): Signatures {
  const out: Signatures = { byCall: new Map() };
  for (const d of m.reasoning_details ?? []) {
    if (d.type !== 'thought_signature' || typeof d.signature !== 'string' || !d.signature) continue;
    if (typeof d.tool_call_id === 'string') out.byCall.set(d.tool_call_id, d.signature);
    else out.text ??= d.signature;
  }
  for (const tc of m.tool_calls ?? []) {
    const s = (tc as { extra_content?: { google?: { thought_signature?: unknown } } }).extra_content?.google?.thought_signature;
    if (typeof s === 'string' && s && !out.byCall.has(tc.id)) out.byCall.set(tc.id, s);
  }
  return out;
}

function parseArgs(args: string, param: string): Record<string, unknown> {
  if (args.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    throw errors.invalid(`${param} must be a JSON object (Gemini takes function call arguments as an object)`, param, 'invalid_tool_arguments');
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw errors.invalid(`${param} must be a JSON object`, param, 'invalid_tool_arguments');
  return v as Record<string, unknown>;
}

interface MapCtx {
  note: Note;
  traits: Traits;
  /** tool_call_id -> function name, over the whole conversation. */
  toolNames: Map<string, string>;
  /** System messages become user text (a cached content holds the systemInstruction). */
  systemAsUser: boolean;
  notedSentinel: boolean;
}

function userParts(m: ChatMessage, i: number, c: MapCtx): GeminiPart[] {
  if (typeof m.content === 'string') return m.content ? [{ text: m.content }] : [];
  const parts: GeminiPart[] = [];
  (m.content ?? []).forEach((p: ContentPart, j) => {
    if (p.type === 'text') {
      if (p.text) parts.push({ text: p.text });
      return;
    }
    const param = `messages[${i}].content[${j}].image_url`;
    parts.push(imagePart(p.image_url.url, `${param}.url`));
    if (p.image_url.detail && p.image_url.detail !== 'auto')
      c.note({ param: `${param}.detail`, action: 'strip', before: p.image_url.detail, reason: 'Gemini has no per-image detail setting (generationConfig.mediaResolution applies to the whole request)' });
  });
  return parts;
}

function assistantParts(m: ChatMessage, i: number, c: MapCtx): GeminiPart[] {
  const sigs = signaturesOf(m);
  const parts: GeminiPart[] = [];
  const text = textOf(m.content);
  // Thought summaries (reasoning_content) are not sent back: Gemini does not use
  // them as input; the signatures carry the reasoning state.
  if (text) parts.push(sigs.text ? { text, thoughtSignature: sigs.text } : { text });
  const calls = (m.tool_calls ?? []).map((tc, j): GeminiPart => {
    const part: GeminiPart = { functionCall: { name: tc.function.name, args: parseArgs(tc.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`) } };
    const sig = sigs.byCall.get(tc.id);
    if (sig) part.thoughtSignature = sig;
    return part;
  });
  if (calls.length && c.traits.signaturesRequired && !calls.some((p) => p.thoughtSignature)) {
    // Gemini 3 rejects function-call history without a signature (history from
    // another model, or a client that dropped reasoning_details); Google's
    // documented escape hatch is this sentinel on the first call of the step.
    calls[0].thoughtSignature = SKIP_SIGNATURE;
    if (!c.notedSentinel) {
      c.notedSentinel = true;
      c.note({ param: `messages[${i}].reasoning_details`, action: 'add', after: SKIP_SIGNATURE, reason: 'Gemini 3 needs a thought signature on function-call history and the message carried none' });
    }
  }
  return [...parts, ...calls];
}

function toolParts(m: ChatMessage, i: number, c: MapCtx): GeminiPart[] {
  const id = m.tool_call_id ?? '';
  const name = c.toolNames.get(id);
  if (!name) throw errors.invalid(`messages[${i}].tool_call_id '${clip(id)}' does not match a tool call of an earlier assistant message`, `messages[${i}].tool_call_id`, 'unknown_tool_call_id');
  return [{ functionResponse: { name, response: toolResponse(m.content) } }];
}

/** Messages [from, to) as Gemini contents plus the system text they hold; consecutive same-role turns merged. */
function mapRange(messages: ChatMessage[], from: number, to: number, c: MapCtx): { contents: GeminiContent[]; system: GeminiPart[] } {
  const contents: GeminiContent[] = [];
  const system: GeminiPart[] = [];
  const push = (role: 'user' | 'model', parts: GeminiPart[]) => {
    if (!parts.length) return;
    const last = contents[contents.length - 1];
    if (last && last.role === role) last.parts = [...(last.parts ?? []), ...parts];
    else contents.push({ role, parts });
  };
  for (let i = from; i < to; i++) {
    const m = messages[i];
    switch (m.role) {
      case 'system':
      case 'developer': {
        const text = textOf(m.content);
        if (!text) break;
        if (c.systemAsUser) {
          c.note({ param: `messages[${i}]`, action: 'rename', before: m.role, after: 'user', reason: 'a system message after the cached prefix cannot join the systemInstruction held by the Gemini cached content; it is sent as user text' });
          push('user', [{ text }]);
        } else system.push({ text });
        break;
      }
      case 'user':
        push('user', userParts(m, i, c));
        break;
      case 'assistant':
        push('model', assistantParts(m, i, c));
        break;
      case 'tool':
        push('user', toolParts(m, i, c));
        break;
    }
  }
  return { contents, system };
}

// ---------------------------------------------------------------------------
// Tools, generation config, native fields.

function mapTools(req: ChatRequest, note: Note): GeminiTool[] | undefined {
  const tools: GeminiTool[] = [];
  if (req.tools?.length) {
    tools.push({
      functionDeclarations: req.tools.map((t, i) => {
        if (t.function.strict) note({ param: `tools[${i}].function.strict`, action: 'strip', before: true, reason: 'Gemini has no strict mode; the JSON Schema is sent as parametersJsonSchema' });
        if (t.cache_control) note({ param: `tools[${i}].cache_control`, action: 'strip', reason: 'Gemini caches a message prefix (mark a message); tools join the cached content when one is made' });
        // parametersJsonSchema takes JSON Schema as is; `parameters` would need
        // the OpenAPI subset (no additionalProperties, $schema, ...).
        return {
          name: t.function.name,
          ...(t.function.description !== undefined ? { description: t.function.description } : {}),
          ...(t.function.parameters ? { parametersJsonSchema: t.function.parameters } : {}),
        };
      }),
    });
  }
  if (req.web_search) {
    tools.push({ googleSearch: {} });
    if (req.web_search.options && Object.keys(req.web_search.options).length)
      note({ param: 'web_search.options', action: 'strip', before: req.web_search.options, reason: 'Gemini Google Search grounding takes no options' });
  }
  return tools.length ? tools : undefined;
}

function mapToolChoice(req: ChatRequest): GeminiToolConfig | undefined {
  const tc = req.tool_choice;
  if (!tc || !req.tools?.length) return undefined;
  if (tc === 'auto') return { functionCallingConfig: { mode: 'AUTO' } };
  if (tc === 'none') return { functionCallingConfig: { mode: 'NONE' } };
  if (tc === 'required') return { functionCallingConfig: { mode: 'ANY' } };
  return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [tc.function.name] } };
}

function thinkingConfig(req: ChatRequest, t: Traits, model: string, note: Note): GeminiThinkingConfig | undefined {
  const effort = req.reasoning_effort;
  const summary = req.reasoning_summary != null && req.reasoning_summary !== 'none';
  if (effort == null) return summary ? { includeThoughts: true } : undefined;
  if (t.thinking?.kind === 'level') {
    const wanted = EFFORT_LEVEL[effort] ?? 'medium';
    const level = LEVEL_ORDER.slice(LEVEL_ORDER.indexOf(wanted)).find((l) => (t.thinking as { levels: Level[] }).levels.includes(l)) ?? 'high';
    if (effort === 'none' || level !== wanted)
      note({ param: 'reasoning_effort', action: 'override', before: effort, after: level, reason: `${model} takes thinkingLevel ${(t.thinking.levels).join('|')} and cannot turn thinking off` });
    return { thinkingLevel: level, includeThoughts: true };
  }
  let budget = EFFORT_BUDGET[effort] ?? EFFORT_BUDGET.medium;
  if (t.thinking) {
    const { min, max, canDisable } = t.thinking;
    const fitted = budget === 0 ? (canDisable ? 0 : min) : Math.min(max, Math.max(min, budget));
    if (fitted !== budget) note({ param: 'reasoning_effort', action: 'override', before: `${effort} (thinkingBudget ${budget})`, after: `thinkingBudget ${fitted}`, reason: `${model} accepts a thinking budget of ${canDisable ? '0 or ' : ''}${min} to ${max}` });
    budget = fitted;
  }
  return budget === 0 ? { thinkingBudget: 0 } : { thinkingBudget: budget, includeThoughts: true };
}

const INT32 = 2 ** 31;

function generationConfig(req: ChatRequest, model: ModelConfig, upstream: string, t: Traits, note: Note): GeminiGenerationConfig {
  const g: GeminiGenerationConfig = {};
  if (req.temperature != null) g.temperature = req.temperature;
  if (req.top_p != null) g.topP = req.top_p;
  const max = req.max_completion_tokens ?? req.max_tokens;
  if (max != null) {
    const limit = model.max_output_tokens;
    if (limit && max > limit) {
      note({ param: req.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens', action: 'override', before: max, after: limit, reason: `${model.id} produces at most ${limit} output tokens` });
      g.maxOutputTokens = limit;
    } else g.maxOutputTokens = max;
  }
  if (req.stop != null) g.stopSequences = Array.isArray(req.stop) ? req.stop : [req.stop];
  if (req.n != null && req.n !== 1) g.candidateCount = req.n;
  if (req.seed != null) {
    // generationConfig.seed is an int32; OpenAI's is any integer.
    const seed = req.seed >= -INT32 && req.seed < INT32 ? req.seed : Number(BigInt.asIntN(32, BigInt(req.seed)));
    if (seed !== req.seed) note({ param: 'seed', action: 'override', before: req.seed, after: seed, reason: 'Gemini seeds are 32-bit integers' });
    g.seed = seed;
  }
  for (const [ir, wire] of [['presence_penalty', 'presencePenalty'], ['frequency_penalty', 'frequencyPenalty']] as const) {
    if (req[ir] == null) continue;
    if (t.penalties) g[wire] = req[ir];
    else note({ param: ir, action: 'strip', before: req[ir], reason: `${upstream} does not accept penalties ("Penalty is not enabled")` });
  }
  const rf = req.response_format;
  if (rf?.type === 'json_object') g.responseMimeType = 'application/json';
  else if (rf?.type === 'json_schema') {
    g.responseMimeType = 'application/json';
    // responseJsonSchema takes JSON Schema as is (responseSchema would need the OpenAPI subset).
    if (rf.json_schema.schema) g.responseJsonSchema = rf.json_schema.schema;
  }
  if (req.logprobs) {
    g.responseLogprobs = true;
    if (req.top_logprobs) g.logprobs = req.top_logprobs;
  }
  const thinking = thinkingConfig(req, t, upstream, note);
  if (thinking) g.thinkingConfig = thinking;
  return g;
}

/**
 * native_fields go where Gemini expects them, under the name the caller used
 * (the API accepts snake_case and camelCase): generation fields inside
 * generationConfig, the rest at the top level. A native field replaces the
 * gateway's own value for the same field (native thinking_config wins over
 * reasoning_effort); native `tools` are added to the function tools.
 */
function applyNative(req: ChatRequest, body: GenerateContentRequest, note: Note): void {
  const native = req.native_fields;
  if (!native) return;
  const g = (body.generationConfig ??= {});
  const putGen = (k: string, v: unknown) => {
    const c = camel(k);
    if (c === 'thinkingConfig' && g.thinkingConfig && req.reasoning_effort != null)
      note({ param: 'reasoning_effort', action: 'strip', before: req.reasoning_effort, reason: 'native_fields.thinking_config is given and wins' });
    for (const key of Object.keys(g)) if (camel(key) === c) delete g[key];
    g[k] = v;
  };
  for (const [k, v] of Object.entries(native)) {
    const c = camel(k);
    if (c === 'generationConfig' && v && typeof v === 'object') for (const [gk, gv] of Object.entries(v)) putGen(gk, gv);
    else if (GENERATION_FIELDS.has(c)) putGen(k, v);
    else if (c === 'tools' && Array.isArray(v)) body.tools = [...(body.tools ?? []), ...v];
    else {
      for (const key of Object.keys(body)) if (camel(key) === c) delete body[key];
      body[k] = v;
    }
  }
  if (!Object.keys(g).length) delete body.generationConfig;
}

// ---------------------------------------------------------------------------
// Prompt cache prefix.

function markOf(m: ChatMessage): CacheControl | undefined {
  if (m.cache_control) return m.cache_control;
  if (Array.isArray(m.content)) {
    for (let j = m.content.length - 1; j >= 0; j--) {
      const cc = (m.content[j] as { cache_control?: CacheControl }).cache_control;
      if (cc) return cc;
    }
  }
  return undefined;
}

/**
 * The end (exclusive) of the cached prefix and its ttl, or undefined. The
 * prefix runs up to and including the last marked message; when nothing but
 * system messages would follow it, it stops before the last conversation
 * message, because a generate call needs at least one content of its own.
 */
function cachePrefix(req: ChatRequest, note: Note): { end: number; ttl: string } | undefined {
  const msgs = req.messages;
  let marked = -1;
  for (let i = msgs.length - 1; i >= 0 && marked < 0; i--) if (markOf(msgs[i])) marked = i;
  if (marked < 0) return undefined;
  const ttl = markOf(msgs[marked])!.ttl ?? DEFAULT_CACHE_TTL;
  if (req.native_fields && Object.keys(req.native_fields).some((k) => camel(k) === 'cachedContent')) {
    note({ param: 'cache_control', action: 'strip', reason: 'native_fields.cached_content names a cached content already' });
    return undefined;
  }
  let end = marked + 1;
  const conversational = (m: ChatMessage) => m.role !== 'system' && m.role !== 'developer';
  if (!msgs.slice(end).some(conversational)) {
    let last = msgs.length - 1;
    while (last >= 0 && !conversational(msgs[last])) last--;
    if (last < 0) return undefined;
    note({ param: `messages[${marked}].cache_control`, action: 'override', before: `prefix ends at messages[${marked}]`, after: `prefix ends at messages[${last - 1}]`, reason: 'Gemini needs at least one message after the cached prefix; the last message is sent with the request' });
    end = last;
  }
  return { end, ttl };
}

// ---------------------------------------------------------------------------

export interface GeminiPlan {
  /** The complete generate body (no cache). */
  body: GenerateContentRequest;
  /** Present when the caller marked a cache prefix. */
  cache?: {
    /** POST /v1beta/cachedContents body. */
    create: CachedContentCreate;
    /** The generate body to send with `cachedContent` set: only the messages after the prefix. */
    body: GenerateContentRequest;
    /** Normalizations that only the cached variant makes (record them when it is sent). */
    notes: NormalizationEntry[];
  };
}

export interface MapOptions {
  /** The catalog entry of the target (limits, id for messages). */
  model: ModelConfig;
  note: Note;
}

export function toGemini(req: ChatRequest, opts: MapOptions): GeminiPlan {
  const { note } = opts;
  const upstream = req.model.replace(/^models\//, '');
  const t = traits(upstream);

  for (const [k, v] of Object.entries(req)) {
    if (v == null || MAPPED.has(k)) continue;
    note({ param: k, action: 'strip', before: v, reason: UNSUPPORTED[k] ?? 'not a field Gemini accepts' });
  }

  const toolNames = new Map<string, string>();
  for (const m of req.messages) for (const tc of m.tool_calls ?? []) toolNames.set(tc.id, tc.function.name);
  const ctx: MapCtx = { note, traits: t, toolNames, systemAsUser: false, notedSentinel: false };

  const tools = mapTools(req, note);
  const toolConfig = mapToolChoice(req);
  const gen = generationConfig(req, opts.model, upstream, t, note);

  const assemble = (contents: GeminiContent[], system: GeminiPart[], withContext: boolean, noteFn: Note): GenerateContentRequest => {
    const body: GenerateContentRequest = { contents };
    if (withContext) {
      if (system.length) body.systemInstruction = { parts: system };
      if (tools) body.tools = tools;
      if (toolConfig) body.toolConfig = toolConfig;
    }
    // A copy only where it can be changed (native_fields merge into it) or shared (the cached variant).
    if (Object.keys(gen).length) body.generationConfig = req.native_fields || !withContext ? structuredClone(gen) : gen;
    applyNative(req, body, noteFn);
    return body;
  };

  const all = mapRange(req.messages, 0, req.messages.length, ctx);
  if (!all.contents.length) throw errors.invalid('Gemini needs at least one non-empty user or assistant message besides system messages.', 'messages', 'no_conversation');
  const plan: GeminiPlan = { body: assemble(all.contents, all.system, true, note) };

  const prefix = cachePrefix(req, note);
  if (prefix) {
    // Map again without notes (the full mapping above recorded them); what only
    // the cached variant changes is kept aside, recorded if that variant is sent.
    const silent: Note = () => {};
    const notes: NormalizationEntry[] = [];
    const quiet: MapCtx = { ...ctx, note: silent, notedSentinel: true };
    const head = mapRange(req.messages, 0, prefix.end, quiet);
    const tail = mapRange(req.messages, prefix.end, req.messages.length, { ...quiet, systemAsUser: true, note: (e) => notes.push(e) });
    // Gemini refuses systemInstruction, tools and toolConfig next to cachedContent:
    // they live in the cached content.
    const create: CachedContentCreate = { model: `models/${upstream}`, ttl: prefix.ttl };
    if (head.contents.length) create.contents = head.contents;
    if (head.system.length) create.systemInstruction = { parts: head.system };
    if (tools) create.tools = tools;
    if (toolConfig) create.toolConfig = toolConfig;
    const body = tail.contents.length ? assemble(tail.contents, [], false, silent) : undefined;
    if (body && Object.keys(body).some((k) => CACHE_HELD.has(camel(k))))
      note({ param: 'cache_control', action: 'strip', reason: 'native_fields set tools, tool_config or system_instruction, which Gemini does not accept next to a cached content' });
    else if (body && (create.contents || create.systemInstruction)) plan.cache = { create, body, notes };
  }
  return plan;
}
