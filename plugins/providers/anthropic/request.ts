// Chat IR -> Anthropic Messages request (https://docs.anthropic.com/en/api/messages).
// Pure: the IR is never mutated (fallbacks map the same request again for the
// next target). Every change that is not a plain rename is recorded through
// `note` and shows under debug.normalizations. The full table is in
// docs/providers-anthropic.md.
import type { ChatRequest, ChatMessage, ContentPart, NormalizationEntry, FunctionTool } from '../../../src/types.js';
import type { ModelConfig } from '../../../src/config/schema.js';
import { errors, clip } from '../../../src/errors.js';
import type * as W from './wire.js';

type Note = (e: NormalizationEntry) => void;

/** What the response and stream mappers need to know about the request. */
export interface ResponsePlan {
  /** The tool that stands in for response_format json_schema: its input is the answer. */
  answerTool?: string;
  includeUsage: boolean;
}

/** reasoning_effort -> thinking.budget_tokens (Anthropic's minimum budget is 1024). */
export const THINKING_BUDGET: Record<string, number> = { minimal: 1024, low: 1024, medium: 4096, high: 16384, xhigh: 32000 };
/** Used when neither the request nor the catalog entry gives a maximum. */
export const DEFAULT_MAX_TOKENS = 4096;
const MIN_BUDGET = 1024;
/** Anthropic allows at most 4 cache breakpoints per request (docs: prompt caching). */
const MAX_BREAKPOINTS = 4;
/** Anthropic accepts these image types only (https://docs.anthropic.com/en/docs/build-with-claude/vision). */
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

export const JSON_OBJECT_INSTRUCTION =
  'Respond with a single valid JSON object and nothing else: no prose before or after it, no Markdown code fences.';
const ANSWER_TOOL_DESCRIPTION = 'Give your final answer by calling this tool. Its input is the answer, as JSON that matches the schema.';

/** IR fields this mapping reads; any other top-level field is dropped with a note. */
const KNOWN = new Set([
  'model', 'messages', 'temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stream', 'stream_options',
  'frequency_penalty', 'presence_penalty', 'stop', 'seed', 'logprobs', 'top_logprobs', 'tools', 'tool_choice',
  'response_format', 'reasoning_effort', 'user', 'n', 'parallel_tool_calls', 'service_tier', 'store', 'metadata',
  'logit_bias', 'native_fields', 'web_search', 'reasoning_summary',
]);
/** OpenAI fields with no Anthropic counterpart: stripped (with a note) when set. */
const UNSUPPORTED = ['frequency_penalty', 'presence_penalty', 'seed', 'logprobs', 'top_logprobs', 'logit_bias', 'service_tier', 'store', 'metadata', 'reasoning_summary'] as const;

const isSet = (v: unknown) => v !== undefined && v !== null && v !== false;

/** Collects cache breakpoints in prefix order (tools -> system -> messages) so the limit of 4 can be enforced. */
class Breakpoints {
  tools: { cache_control?: W.CacheControl }[] = [];
  system: { cache_control?: W.CacheControl }[] = [];
  messages: { cache_control?: W.CacheControl }[] = [];
  ttlDropped = false;
  mark(where: 'tools' | 'system' | 'messages', block: { cache_control?: W.CacheControl } | undefined, cc: { ttl?: string } | undefined) {
    if (!block || !cc) return;
    // docs/providers-anthropic.md "Prompt caching": ttl is not forwarded to Anthropic (its 5m default applies).
    if (cc.ttl !== undefined) this.ttlDropped = true;
    if (!block.cache_control) this[where].push(block);
    block.cache_control = { type: 'ephemeral' };
  }
  get count() {
    return this.tools.length + this.system.length + this.messages.length;
  }
}

export function toAnthropic(req: ChatRequest, model: ModelConfig, note: Note, stream: boolean): { body: W.MessagesRequest; plan: ResponsePlan } {
  if (req.n != null && req.n > 1)
    throw errors.invalid("The anthropic provider family does not support 'n' greater than 1: send one request per choice.", 'n', 'unsupported_parameter');
  noteDropped(req, note);
  const native = req.native_fields ?? {};
  const marks = new Breakpoints();
  const { system, messages } = mapMessages(req.messages, note, marks);
  const { tools, toolChoice, answerTool } = mapTools(req, marks, system, note);
  const { maxTokens, thinking, thinkingOn } = mapLimits(req, model, toolChoice, note);
  const sampling = mapSampling(req, thinkingOn, note);
  applyCaching(marks, system, tools, note);

  const body: W.MessagesRequest = { model: req.model, max_tokens: maxTokens, messages };
  if (system.length) body.system = system;
  if (tools.length) body.tools = tools;
  if (toolChoice) body.tool_choice = toolChoice;
  const stop = req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop;
  if (stop.length) body.stop_sequences = [...stop];
  Object.assign(body, sampling);
  if (thinking) body.thinking = thinking;
  if (req.user) body.metadata = { user_id: req.user };
  if (stream) body.stream = true;
  // Provider-specific fields under Anthropic's own names, untouched (docs/providers-anthropic.md).
  Object.assign(body, native);
  return { body, plan: { answerTool, includeUsage: !!req.stream_options?.include_usage } };
}

/** Fields with no Anthropic counterpart, and unknown ones, are not sent: each gets a note. */
function noteDropped(req: ChatRequest, note: Note): void {
  const raw = req as unknown as Record<string, unknown>;
  for (const key of Object.keys(raw)) {
    if (!KNOWN.has(key) && raw[key] !== undefined) note({ param: key, action: 'strip', before: raw[key], reason: `'${key}' has no counterpart in the Anthropic Messages API` });
  }
  for (const key of UNSUPPORTED) {
    if (isSet(req[key])) note({ param: key, action: 'strip', before: req[key], reason: `the Anthropic Messages API has no '${key}'` });
  }
}

/** Tools, tool_choice, response_format and web_search decide together. */
function mapTools(req: ChatRequest, marks: Breakpoints, system: W.TextBlock[], note: Note): { tools: W.Tool[]; toolChoice?: W.ToolChoice; answerTool?: string } {
  const callerTools = req.tools ?? [];
  const tools: W.Tool[] = callerTools.map((t) => mapTool(t, marks));
  if (callerTools.some((t) => t.function.strict)) note({ param: 'tools[].function.strict', action: 'strip', before: true, reason: 'strict tool schemas are not part of the Anthropic Messages API (2023-06-01)' });
  let toolChoice = mapToolChoice(req);
  let answerTool: string | undefined;
  const rf = req.response_format;
  if (rf?.type === 'json_schema') {
    const name = rf.json_schema.name;
    if (callerTools.some((t) => t.function.name === name))
      throw errors.invalid(`'response_format.json_schema.name' (${name}) must differ from the names in 'tools': the anthropic family sends the schema as a tool of that name.`, 'response_format.json_schema.name', 'invalid_value');
    answerTool = name;
    tools.push({ name, description: rf.json_schema.description ?? ANSWER_TOOL_DESCRIPTION, input_schema: withObjectType(rf.json_schema.schema ?? { type: 'object' }) });
    // Forced when the model has nothing else to call; with caller tools, `any`
    // lets it call one of them or answer (a forced named tool the caller chose wins).
    if (!callerTools.length || req.tool_choice === 'none') toolChoice = { type: 'tool', name };
    else if (toolChoice?.type !== 'tool') toolChoice = { type: 'any' };
    note({ param: 'response_format', action: 'rename', before: 'json_schema', after: `tool '${name}'`, reason: 'Anthropic has no response_format: the schema becomes a tool the model must call, and its input is returned as the message content' });
  } else if (rf?.type === 'json_object') {
    system.push({ type: 'text', text: JSON_OBJECT_INSTRUCTION });
    note({ param: 'response_format', action: 'add', before: 'json_object', after: 'system instruction', reason: 'Anthropic has no JSON mode: a system instruction asks for a JSON object only' });
  }
  if (req.web_search) tools.push(webSearchTool(req.web_search.options ?? {}, note));
  if (req.tool_choice !== undefined && !tools.length) {
    note({ param: 'tool_choice', action: 'strip', before: req.tool_choice, reason: "Anthropic accepts 'tool_choice' only together with 'tools'" });
    toolChoice = undefined;
  }
  if (req.parallel_tool_calls === false) {
    if (tools.length && toolChoice?.type !== 'none') toolChoice = { ...(toolChoice ?? { type: 'auto' }), disable_parallel_tool_use: true } as W.ToolChoice;
    else note({ param: 'parallel_tool_calls', action: 'strip', before: false, reason: 'no tool can be called in this request' });
  }
  return { tools, toolChoice, answerTool };
}

/** max_tokens (required by Anthropic) and the thinking budget, which must stay below it. */
function mapLimits(req: ChatRequest, model: ModelConfig, toolChoice: W.ToolChoice | undefined, note: Note): { maxTokens: number; thinking?: W.Thinking; thinkingOn: boolean } {
  let maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  if (req.max_completion_tokens != null && req.max_tokens != null)
    note({ param: 'max_tokens', action: 'strip', before: req.max_tokens, reason: 'max_completion_tokens is also set' });
  if (maxTokens == null) {
    maxTokens = model.max_output_tokens ?? DEFAULT_MAX_TOKENS;
    note({ param: 'max_tokens', action: 'add', after: maxTokens, reason: model.max_output_tokens ? `Anthropic requires max_tokens: the catalog's max_output_tokens for ${model.id}` : `Anthropic requires max_tokens: default ${DEFAULT_MAX_TOKENS}` });
  }
  const effort = req.reasoning_effort ?? undefined;
  const native = req.native_fields?.thinking;
  // native_fields.thinking wins untouched (docs/providers-anthropic.md).
  if (native !== undefined) {
    if (effort) note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: 'native_fields.thinking is given and wins' });
    return { maxTokens, thinkingOn: !!native && (native as { type?: string }).type !== 'disabled' };
  }
  if (!effort || effort === 'none') return { maxTokens, thinkingOn: false };
  const cap = model.max_output_tokens;
  if (toolChoice?.type === 'any' || toolChoice?.type === 'tool') {
    note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: 'Anthropic does not allow extended thinking while tool use is forced (tool_choice, or response_format json_schema)' });
    return { maxTokens, thinkingOn: false };
  }
  if (cap !== undefined && cap - MIN_BUDGET < MIN_BUDGET) {
    note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: `${model.id} allows at most ${cap} output tokens, too few for Anthropic's minimum thinking budget of ${MIN_BUDGET}` });
    return { maxTokens, thinkingOn: false };
  }
  let budget = THINKING_BUDGET[effort] ?? THINKING_BUDGET.medium;
  if (cap !== undefined && budget > cap - MIN_BUDGET) {
    note({ param: 'thinking.budget_tokens', action: 'override', before: budget, after: cap - MIN_BUDGET, reason: `the budget for '${effort}' must stay below ${model.id}'s ${cap} output tokens` });
    budget = cap - MIN_BUDGET;
  }
  // Anthropic: max_tokens must exceed budget_tokens (thinking counts towards max_tokens).
  if (maxTokens <= budget) {
    const raised = cap !== undefined ? Math.min(cap, budget + maxTokens) : budget + maxTokens;
    note({ param: 'max_tokens', action: 'override', before: maxTokens, after: raised, reason: `Anthropic requires max_tokens above the thinking budget (${budget} for '${effort}'): the budget is added to the requested maximum` });
    maxTokens = raised;
  }
  return { maxTokens, thinking: { type: 'enabled', budget_tokens: budget }, thinkingOn: true };
}

function mapSampling(req: ChatRequest, thinkingOn: boolean, note: Note): { temperature?: number; top_p?: number } {
  const temperature = req.temperature ?? undefined;
  const topP = req.top_p ?? undefined;
  if (thinkingOn) {
    // Extended thinking is incompatible with temperature / top_k changes and limits top_p (docs: extended thinking).
    if (temperature !== undefined) note({ param: 'temperature', action: 'strip', before: temperature, reason: 'Anthropic does not accept temperature with extended thinking' });
    if (topP !== undefined) note({ param: 'top_p', action: 'strip', before: topP, reason: 'Anthropic restricts top_p with extended thinking' });
    return {};
  }
  const out: { temperature?: number; top_p?: number } = {};
  if (temperature !== undefined && temperature > 1) {
    // Not clamped silently: the override is visible under debug.normalizations.
    note({ param: 'temperature', action: 'override', before: temperature, after: 1, reason: 'Anthropic accepts temperature from 0 to 1' });
    out.temperature = 1;
  } else if (temperature !== undefined) out.temperature = temperature;
  if (topP !== undefined) out.top_p = topP;
  return out;
}

/** Prompt caching (docs/providers-anthropic.md): the caller's marks (at most 4), else the end of the system prompt and of the tools. */
function applyCaching(marks: Breakpoints, system: W.TextBlock[], tools: W.Tool[], note: Note): void {
  if (marks.count === 0) {
    const added: string[] = [];
    if (system.length) {
      system[system.length - 1].cache_control = { type: 'ephemeral' };
      added.push('system');
    }
    const lastCustom = [...tools].reverse().find((t) => !('type' in t)) as W.CustomTool | undefined;
    if (lastCustom) {
      lastCustom.cache_control = { type: 'ephemeral' };
      added.push('tools');
    }
    if (added.length) note({ param: 'cache_control', action: 'add', after: added, reason: 'no cache_control in the request: the gateway marks the end of the system prompt and of the tool definitions' });
    return;
  }
  if (marks.ttlDropped) note({ param: 'cache_control.ttl', action: 'strip', reason: "Anthropic's default 5-minute cache lifetime applies; ttl is not forwarded" });
  const all = [...marks.tools, ...marks.system, ...marks.messages];
  if (all.length > MAX_BREAKPOINTS) {
    // Keep the last four: each later breakpoint covers everything before it.
    for (const b of all.slice(0, all.length - MAX_BREAKPOINTS)) delete b.cache_control;
    note({ param: 'cache_control', action: 'strip', before: all.length, after: MAX_BREAKPOINTS, reason: `Anthropic allows at most ${MAX_BREAKPOINTS} cache breakpoints: the earliest were removed` });
  }
}

function withObjectType(schema: Record<string, unknown>): Record<string, unknown> {
  // Anthropic requires input_schema.type "object"; OpenAI lets `parameters` omit it.
  return schema.type === undefined ? { type: 'object', ...schema } : { ...schema };
}

function mapTool(t: FunctionTool, marks: Breakpoints): W.CustomTool {
  const out: W.CustomTool = { name: t.function.name, input_schema: withObjectType(t.function.parameters ?? { type: 'object', properties: {} }) };
  if (t.function.description) out.description = t.function.description;
  marks.mark('tools', out, t.cache_control);
  return out;
}

function mapToolChoice(req: ChatRequest): W.ToolChoice | undefined {
  const c = req.tool_choice;
  if (c === undefined) return undefined;
  if (c === 'none') return { type: 'none' };
  if (c === 'auto') return { type: 'auto' };
  if (c === 'required') return { type: 'any' };
  return { type: 'tool', name: c.function.name };
}

function webSearchTool(options: Record<string, unknown>, note: Note): W.WebSearchTool {
  const tool: W.WebSearchTool = { type: 'web_search_20250305', name: 'web_search' };
  // OpenAI web_search options and Anthropic's share user_location's shape ({type:'approximate', city, region, country, timezone}).
  if (options.user_location && typeof options.user_location === 'object') tool.user_location = options.user_location as Record<string, unknown>;
  const filters = options.filters as { allowed_domains?: string[] } | undefined;
  if (Array.isArray(options.allowed_domains)) tool.allowed_domains = options.allowed_domains as string[];
  else if (Array.isArray(filters?.allowed_domains)) tool.allowed_domains = filters.allowed_domains;
  if (Array.isArray(options.blocked_domains)) tool.blocked_domains = options.blocked_domains as string[];
  if (typeof options.max_uses === 'number') tool.max_uses = options.max_uses;
  if (options.search_context_size !== undefined) note({ param: 'web_search.search_context_size', action: 'strip', before: options.search_context_size, reason: "Anthropic's web search tool has no search_context_size" });
  return tool;
}

function textOf(content: string | ContentPart[] | null | undefined): { text: string; cache_control?: { ttl?: string } }[] {
  if (content == null) return [];
  if (typeof content === 'string') return [{ text: content }];
  return content.filter((p): p is Extract<ContentPart, { type: 'text' }> => p.type === 'text').map((p) => ({ text: p.text, cache_control: p.cache_control }));
}

function imageBlock(part: Extract<ContentPart, { type: 'image_url' }>, param: string): W.ImageBlock {
  const url = part.image_url.url;
  if (url.startsWith('data:')) {
    const m = /^data:([^;,]+)((?:;[^;,]*)*);base64,(.*)$/s.exec(url);
    if (!m) throw errors.invalid(`'${param}.image_url.url' must be a base64 data URL (data:<type>;base64,<data>) or an http(s) URL.`, `${param}.image_url.url`, 'invalid_value');
    const mediaType = m[1].toLowerCase();
    if (!IMAGE_TYPES.has(mediaType))
      throw errors.invalid(`'${param}.image_url.url' has type ${clip(mediaType)}: the anthropic family accepts image/jpeg, image/png, image/gif and image/webp.`, `${param}.image_url.url`, 'invalid_value');
    return { type: 'image', source: { type: 'base64', media_type: mediaType, data: m[3] } };
  }
  if (/^https?:\/\//i.test(url)) return { type: 'image', source: { type: 'url', url } };
  throw errors.invalid(`'${param}.image_url.url' must be a base64 data URL or an http(s) URL.`, `${param}.image_url.url`, 'invalid_value');
}

/** A tool call's arguments as the object Anthropic (and Bedrock) take as tool input; '' is {}. */
export function parseArguments(args: string, param: string, provider = 'Anthropic'): Record<string, unknown> {
  if (args.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    v = undefined;
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw errors.invalid(`'${param}' must be a JSON object string (${provider} tool input is an object).`, param, 'invalid_value');
  return v as Record<string, unknown>;
}

/**
 * Signed reasoning restored as Anthropic blocks, unchanged; anything else
 * cannot be sent back. Also the bedrock family's (Claude on Bedrock signs the
 * same blocks; `provider` names the target in the notes).
 */
export function thinkingBlocks(m: ChatMessage, i: number, note: Note, provider = 'Anthropic'): (W.ThinkingBlock | W.RedactedThinkingBlock)[] {
  const out: (W.ThinkingBlock | W.RedactedThinkingBlock)[] = [];
  let dropped = 0;
  for (const d of m.reasoning_details ?? []) {
    if (d.type === 'thinking' && typeof d.thinking === 'string' && typeof d.signature === 'string') out.push({ type: 'thinking', thinking: d.thinking, signature: d.signature });
    else if (d.type === 'redacted_thinking' && typeof d.data === 'string') out.push({ type: 'redacted_thinking', data: d.data });
    else dropped++;
  }
  if (dropped) note({ param: `messages[${i}].reasoning_details`, action: 'strip', before: dropped, reason: `only thinking blocks with a signature (or redacted_thinking) can be sent back to ${provider}` });
  if (!out.length && m.reasoning_content) note({ param: `messages[${i}].reasoning_content`, action: 'strip', reason: `reasoning text without its signed thinking block cannot be sent back to ${provider}` });
  return out;
}

function mapMessages(input: ChatMessage[], note: Note, marks: Breakpoints): { system: W.TextBlock[]; messages: W.Message[] } {
  const system: W.TextBlock[] = [];
  const turns: W.Message[] = [];
  let named = false;
  let detail = false;
  const push = (role: 'user' | 'assistant', blocks: W.RequestBlock[]) => {
    const last = turns[turns.length - 1];
    // Anthropic wants alternating roles: consecutive same-role messages become one turn.
    if (last && last.role === role) last.content.push(...blocks);
    else turns.push({ role, content: [...blocks] });
  };

  input.forEach((m, i) => {
    if (m.name !== undefined) named = true;
    if (m.role === 'system' || m.role === 'developer') {
      if (turns.length)
        note({ param: `messages[${i}]`, action: 'override', before: m.role, after: 'system (top level)', reason: 'Anthropic has no system role inside messages: this message joins the top-level system prompt' });
      const blocks: W.TextBlock[] = [];
      for (const p of textOf(m.content)) {
        if (p.text === '') continue; // Anthropic rejects empty text blocks
        const b: W.TextBlock = { type: 'text', text: p.text };
        marks.mark('system', b, p.cache_control);
        blocks.push(b);
      }
      marks.mark('system', blocks[blocks.length - 1], m.cache_control);
      system.push(...blocks);
      return;
    }
    if (m.role === 'user') {
      const parts = typeof m.content === 'string' ? [{ type: 'text' as const, text: m.content }] : (m.content ?? []);
      const blocks: (W.TextBlock | W.ImageBlock)[] = parts.map((p, j) => {
        if (p.type === 'image_url' && p.image_url.detail && p.image_url.detail !== 'auto') detail = true;
        const b: W.TextBlock | W.ImageBlock = p.type === 'image_url' ? imageBlock(p, `messages[${i}].content[${j}]`) : { type: 'text', text: p.text };
        marks.mark('messages', b, p.cache_control);
        return b;
      });
      marks.mark('messages', blocks[blocks.length - 1], m.cache_control);
      push('user', blocks);
      return;
    }
    if (m.role === 'tool') {
      const texts = textOf(m.content);
      const content: string | W.TextBlock[] = typeof m.content === 'string' ? m.content : texts.map((p) => ({ type: 'text', text: p.text }));
      const b: W.ToolResultBlock = { type: 'tool_result', tool_use_id: m.tool_call_id ?? '', content };
      // Part-level marks inside a tool message are carried by the tool_result block itself.
      marks.mark('messages', b, m.cache_control ?? texts.find((p) => p.cache_control)?.cache_control);
      push('user', [b]);
      return;
    }
    // assistant: signed thinking first (Anthropic requires it before text/tool_use), then text, then tool_use.
    const blocks: W.RequestBlock[] = [...thinkingBlocks(m, i, note)];
    for (const p of textOf(m.content)) {
      if (p.text === '') continue;
      const b: W.TextBlock = { type: 'text', text: p.text };
      marks.mark('messages', b, p.cache_control);
      blocks.push(b);
    }
    (m.tool_calls ?? []).forEach((tc, j) => {
      blocks.push({ type: 'tool_use', id: tc.id, name: tc.function.name, input: parseArguments(tc.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`) });
    });
    // Thinking blocks cannot carry cache_control.
    const last = blocks[blocks.length - 1];
    if (last && last.type !== 'thinking' && last.type !== 'redacted_thinking') marks.mark('messages', last as W.TextBlock | W.ToolUseBlock, m.cache_control);
    if (blocks.length) push('assistant', blocks);
  });

  if (named) note({ param: 'messages[].name', action: 'strip', reason: 'Anthropic messages have no name field' });
  if (detail) note({ param: 'messages[].content[].image_url.detail', action: 'strip', reason: 'Anthropic has no image detail setting: images are resized to fit its limits' });
  for (const t of turns) {
    // Anthropic: in a user turn, tool_result blocks come before any other content.
    if (t.role === 'user' && t.content.some((b) => b.type === 'tool_result')) {
      t.content = [...t.content.filter((b) => b.type === 'tool_result'), ...t.content.filter((b) => b.type !== 'tool_result')];
    }
  }
  if (turns.length && turns[0].role === 'assistant') {
    // Anthropic: the first message must be a user turn (a chat that opens with the assistant's greeting).
    turns.unshift({ role: 'user', content: [{ type: 'text', text: '(conversation start)' }] });
    note({ param: 'messages', action: 'add', after: 'user turn "(conversation start)"', reason: 'Anthropic requires the first message to be a user message' });
  }
  return { system, messages: turns };
}
