// Chat IR -> Bedrock Converse request
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
// Pure: the IR is never mutated (fallbacks map the same request again for the
// next target). Every change that is not a plain rename is recorded through
// `note` and shows under debug.normalizations. The table is in
// docs/providers-bedrock.md.
import type { ChatRequest, ChatMessage, ContentPart, NormalizationEntry, CacheControl } from '../../../src/types.js';
import type { ModelConfig } from '../../../src/config/schema.js';
import { errors, clip } from '../../../src/errors.js';
import { thinkingBlocks, parseArguments } from '../anthropic/request.js';
import * as W from './wire.js';

type Note = (e: NormalizationEntry) => void;

/** What the response and stream mappers need to know about the request. */
export interface ResponsePlan {
  includeUsage: boolean;
}

/** The model vendor behind a Bedrock model id, which decides the model-specific fields. */
export type Vendor = 'anthropic' | 'amazon' | 'meta' | 'mistral' | 'other';

/**
 * The vendor of a model id, an inference profile id (`us.anthropic.…`,
 * `global.…`) or an ARN whose resource id is one of those. Application
 * inference profile and provisioned-throughput ARNs hide the model: 'other'.
 */
export function vendorOf(modelId: string): Vendor {
  const id = modelId.includes(':inference-profile/') || modelId.includes(':foundation-model/') ? modelId.slice(modelId.lastIndexOf('/') + 1) : modelId;
  const parts = id.split('.');
  // A geographic prefix (us, eu, apac, jp, au, ca, us-gov, global) comes before the vendor.
  const vendor = parts.length > 2 && /^[a-z-]{2,6}$/.test(parts[0]) && parts[0] !== 'amazon' ? parts[1] : parts[0];
  return vendor === 'anthropic' || vendor === 'amazon' || vendor === 'meta' || vendor === 'mistral' ? vendor : 'other';
}

/** reasoning_effort -> Claude's thinking budget (Anthropic's minimum is 1024), as the anthropic family maps it. */
export const THINKING_BUDGET: Record<string, number> = { minimal: 1024, low: 1024, medium: 4096, high: 16384, xhigh: 32000 };
const MIN_BUDGET = 1024;
/** Used with thinking when neither the request nor the catalog gives a maximum (Claude needs maxTokens above the budget). */
export const DEFAULT_MAX_TOKENS = 4096;
/** Bedrock allows at most 4 cache checkpoints per request (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html). */
const MAX_CACHE_POINTS = 4;
const IMAGE_FORMATS: Record<string, W.ImageFormat> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/jpg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };
/** requestMetadata keys and values (API reference: RequestMetadata). */
const METADATA_PATTERN = /^[a-zA-Z0-9\s:_@$#=/+,.-]{0,256}$/;

export const JSON_OBJECT_INSTRUCTION =
  'Respond with a single valid JSON object and nothing else: no prose before or after it, no Markdown code fences.';

/** IR fields with no Converse counterpart: stripped (with a note) when set. */
const UNSUPPORTED = ['frequency_penalty', 'presence_penalty', 'seed', 'logprobs', 'top_logprobs', 'logit_bias', 'store', 'user', 'reasoning_summary', 'web_search'] as const;
const isSet = (v: unknown) => v !== undefined && v !== null && v !== false;

/** Claude 4.5 and later on Bedrock take temperature or top_p, not both (Bedrock user guide, Anthropic Claude request parameters). */
const ONE_SAMPLER = /claude-(?:opus|sonnet|haiku)-(?:4-[5-9]|[5-9])/;

export function toConverse(req: ChatRequest, modelId: string, model: ModelConfig, note: Note): { body: W.ConverseRequest; plan: ResponsePlan } {
  if (req.n != null && req.n > 1)
    throw errors.invalid("The bedrock provider family does not support 'n' greater than 1: send one request per choice.", 'n', 'unsupported_parameter');
  const vendor = vendorOf(modelId);
  for (const key of UNSUPPORTED) if (isSet(req[key])) note({ param: key, action: 'strip', before: req[key], reason: `the Bedrock Converse API has no '${key}'` });
  const caching = new CachePoints(vendor === 'anthropic' || vendor === 'amazon', note);
  const { system, messages } = mapMessages(req.messages, caching, note);
  const toolConfig = mapTools(req, messages, caching, note);
  const body: W.ConverseRequest = { messages };
  if (system.length) body.system = system;

  const native = { ...(req.native_fields ?? {}) };
  const additional: Record<string, unknown> = {};
  const inference = mapInference(req, vendor, modelId, model, native, toolConfig, additional, note);
  if (Object.keys(inference).length) body.inferenceConfig = inference;
  if (toolConfig) body.toolConfig = toolConfig;

  const rf = req.response_format;
  if (rf?.type === 'json_schema') {
    const s: W.OutputConfig['textFormat']['structure']['jsonSchema'] = { schema: JSON.stringify(rf.json_schema.schema ?? { type: 'object' }), name: rf.json_schema.name };
    if (rf.json_schema.description) s.description = rf.json_schema.description;
    body.outputConfig = { textFormat: { type: 'json_schema', structure: { jsonSchema: s } } };
  } else if (rf?.type === 'json_object') {
    (body.system ??= []).push({ text: JSON_OBJECT_INSTRUCTION });
    note({ param: 'response_format', action: 'add', before: 'json_object', after: 'system instruction', reason: 'Converse has no JSON mode without a schema: a system instruction asks for a JSON object only' });
  }

  if (req.metadata && Object.keys(req.metadata).length) {
    const ok = Object.entries(req.metadata).every(([k, v]) => k.length > 0 && METADATA_PATTERN.test(k) && METADATA_PATTERN.test(v));
    if (ok) body.requestMetadata = { ...req.metadata };
    else note({ param: 'metadata', action: 'strip', before: req.metadata, reason: 'Bedrock requestMetadata keys and values allow letters, digits, spaces and :_@$#=/+,.- only (up to 256 characters)' });
  }
  if (req.service_tier !== undefined && req.service_tier !== null) {
    if (req.service_tier === 'default' || req.service_tier === 'flex' || req.service_tier === 'priority') body.serviceTier = { type: req.service_tier };
    else note({ param: 'service_tier', action: 'strip', before: req.service_tier, reason: "Bedrock service tiers are 'default', 'flex', 'priority' and 'reserved'" });
  }
  // native_fields (docs/providers-bedrock.md): Converse's own top-level members stay at the
  // top level, anything else is a model field and goes to additionalModelRequestFields.
  for (const [k, v] of Object.entries(native)) {
    if ((W.REQUEST_MEMBERS as readonly string[]).includes(k)) (body as unknown as Record<string, unknown>)[k] = v;
    else additional[k] = v;
  }
  if (Object.keys(additional).length) body.additionalModelRequestFields = additional;
  caching.enforceLimit();
  return { body, plan: { includeUsage: !!req.stream_options?.include_usage } };
}

/** Cache points in prefix order (tools -> system -> messages), so that the limit of 4 keeps the latest. */
class CachePoints {
  private readonly placed: { order: number; list: unknown[]; point: W.CachePoint }[] = [];
  private ttlNoted = false;
  private stripped = false;
  constructor(
    readonly supported: boolean,
    private readonly note: Note,
  ) {}

  /** Append a cache point to `list` (after its current last block), for a caller's cache_control. */
  mark(list: unknown[], cc: CacheControl | undefined, where: 'tools' | 'system' | 'messages'): void {
    if (!cc || !list.length) return;
    if (!this.supported) {
      if (!this.stripped) this.note({ param: 'cache_control', action: 'strip', reason: 'this Bedrock model has no prompt caching (Claude and Amazon Nova models have it)' });
      this.stripped = true;
      return;
    }
    if (isPoint(list[list.length - 1])) return;
    const point: W.CachePoint = { cachePoint: { type: 'default' } };
    const ttl = this.ttl(cc.ttl);
    if (ttl) point.cachePoint.ttl = ttl;
    list.push(point);
    // Tools are mapped after the messages but come first in the prompt.
    this.placed.push({ order: PREFIX_ORDER[where] * 1e6 + this.placed.length, list, point });
  }

  /** The IR's ttl ('300s') -> Bedrock's '5m' (the default, omitted) or '1h'. */
  private ttl(ttl: string | undefined): W.CacheTtl | undefined {
    if (ttl === undefined) return undefined;
    const s = Number(ttl.slice(0, -1));
    if (s === 300) return undefined;
    if (s === 3600) return '1h';
    const after = s > 300 ? '1h' : '5m';
    if (!this.ttlNoted) this.note({ param: 'cache_control.ttl', action: 'override', before: ttl, after, reason: "Bedrock cache points last '5m' (the default) or '1h'" });
    this.ttlNoted = true;
    return after === '1h' ? '1h' : undefined;
  }

  enforceLimit(): void {
    if (this.placed.length <= MAX_CACHE_POINTS) return;
    // Keep the last four: each later checkpoint covers everything before it.
    const inOrder = [...this.placed].sort((a, b) => a.order - b.order);
    for (const { list, point } of inOrder.slice(0, inOrder.length - MAX_CACHE_POINTS)) list.splice(list.indexOf(point), 1);
    this.note({ param: 'cache_control', action: 'strip', before: this.placed.length, after: MAX_CACHE_POINTS, reason: `Bedrock allows at most ${MAX_CACHE_POINTS} cache checkpoints: the earliest were removed` });
  }
}

const PREFIX_ORDER = { tools: 0, system: 1, messages: 2 } as const;
const isPoint = (b: unknown): b is W.CachePoint => !!b && typeof b === 'object' && 'cachePoint' in b;

/** A user turn's toolResult blocks first (Claude requires them before other content), each with the cache point that follows it. */
function toolResultsFirst(content: W.ContentBlock[]): W.ContentBlock[] {
  const results: W.ContentBlock[] = [];
  const rest: W.ContentBlock[] = [];
  let into = rest;
  for (const b of content) {
    if (!isPoint(b)) into = 'toolResult' in b ? results : rest;
    into.push(b);
  }
  return [...results, ...rest];
}

function textParts(content: string | ContentPart[] | null | undefined): { text: string; cache_control?: CacheControl }[] {
  if (content == null) return [];
  if (typeof content === 'string') return [{ text: content }];
  return content.filter((p): p is Extract<ContentPart, { type: 'text' }> => p.type === 'text').map((p) => ({ text: p.text, cache_control: p.cache_control }));
}

/** Images go inline (a base64 data: URL) or by S3 location; Bedrock does not fetch http(s) URLs. */
function imageBlock(part: Extract<ContentPart, { type: 'image_url' }>, param: string): W.ImageBlock {
  const url = part.image_url.url;
  const at = `${param}.image_url.url`;
  if (url.startsWith('data:')) {
    const m = /^data:([^;,]+)(?:;[^;,]*)*;base64,(.*)$/s.exec(url);
    if (!m) throw errors.invalid(`'${at}' must be a base64 data URL (data:<type>;base64,<data>) or an s3:// URL.`, at, 'invalid_value');
    const format = IMAGE_FORMATS[m[1].toLowerCase()];
    if (!format) throw errors.invalid(`'${at}' has type ${clip(m[1])}: the bedrock family accepts image/png, image/jpeg, image/gif and image/webp.`, at, 'invalid_value');
    return { format, source: { bytes: m[2] } };
  }
  if (url.startsWith('s3://')) {
    const ext = /\.([a-z]+)$/i.exec(url)?.[1].toLowerCase();
    const format = ext ? IMAGE_FORMATS[`image/${ext}`] : undefined;
    if (!format) throw errors.invalid(`'${at}' must end in .png, .jpeg, .jpg, .gif or .webp: Bedrock needs the image format.`, at, 'invalid_value');
    return { format, source: { s3Location: { uri: url } } };
  }
  throw errors.invalid(`'${at}' must be a base64 data URL or an s3:// URL: Bedrock does not fetch images from http(s) URLs.`, at, 'invalid_value');
}

/** Signed reasoning restored as reasoningContent blocks, unchanged (the anthropic family's reasoning_details format). */
function reasoningBlocks(m: ChatMessage, i: number, note: Note): W.ContentBlock[] {
  return thinkingBlocks(m, i, note, 'Bedrock').map((b) =>
    b.type === 'thinking' ? { reasoningContent: { reasoningText: { text: b.thinking, signature: b.signature } } } : { reasoningContent: { redactedContent: b.data } },
  );
}

function mapMessages(input: ChatMessage[], caching: CachePoints, note: Note): { system: W.SystemBlock[]; messages: W.Message[] } {
  const system: W.SystemBlock[] = [];
  const turns: W.Message[] = [];
  let named = false;
  let detail = false;
  const push = (role: 'user' | 'assistant', blocks: W.ContentBlock[]) => {
    if (!blocks.length) return;
    const last = turns[turns.length - 1];
    // Converse wants alternating roles: consecutive same-role messages become one turn.
    if (last && last.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };

  input.forEach((m, i) => {
    if (m.name !== undefined) named = true;
    if (m.role === 'system' || m.role === 'developer') {
      if (turns.length) note({ param: `messages[${i}]`, action: 'override', before: m.role, after: 'system (top level)', reason: 'Converse has no system role inside messages: this message joins the top-level system prompt' });
      for (const p of textParts(m.content)) {
        if (p.text === '') continue; // Bedrock rejects blank text blocks
        system.push({ text: p.text });
        caching.mark(system, p.cache_control, 'system');
      }
      caching.mark(system, m.cache_control, 'system');
      return;
    }
    const blocks: W.ContentBlock[] = [];
    if (m.role === 'user') {
      const parts = typeof m.content === 'string' ? [{ type: 'text' as const, text: m.content }] : (m.content ?? []);
      parts.forEach((p, j) => {
        if (p.type === 'image_url') {
          if (p.image_url.detail && p.image_url.detail !== 'auto') detail = true;
          blocks.push({ image: imageBlock(p, `messages[${i}].content[${j}]`) });
        } else if (p.text !== '') blocks.push({ text: p.text });
        caching.mark(blocks, p.cache_control, 'messages');
      });
    } else if (m.role === 'tool') {
      const texts = textParts(m.content).filter((p) => p.text !== '');
      blocks.push({ toolResult: { toolUseId: m.tool_call_id ?? '', content: texts.map((p) => ({ text: p.text })) } });
      const cc = m.cache_control ?? texts.find((p) => p.cache_control)?.cache_control;
      caching.mark(blocks, cc, 'messages');
      push('user', blocks);
      return;
    } else {
      // assistant: signed reasoning first (Claude requires it before text and toolUse), then text, then toolUse.
      blocks.push(...reasoningBlocks(m, i, note));
      for (const p of textParts(m.content)) {
        if (p.text === '') continue;
        blocks.push({ text: p.text });
        caching.mark(blocks, p.cache_control, 'messages');
      }
      (m.tool_calls ?? []).forEach((tc, j) => {
        blocks.push({ toolUse: { toolUseId: tc.id, name: tc.function.name, input: parseArguments(tc.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`, 'Bedrock') } });
      });
    }
    const last = blocks[blocks.length - 1];
    if (last && !('reasoningContent' in last)) caching.mark(blocks, m.cache_control, 'messages');
    push(m.role === 'user' ? 'user' : 'assistant', blocks);
  });

  if (named) note({ param: 'messages[].name', action: 'strip', reason: 'Converse messages have no name field' });
  if (detail) note({ param: 'messages[].content[].image_url.detail', action: 'strip', reason: 'Converse has no image detail setting' });
  for (const t of turns) if (t.role === 'user' && t.content.some((b) => 'toolResult' in b)) t.content = toolResultsFirst(t.content);
  if (turns.length && turns[0].role === 'assistant') {
    // Converse: "A conversation must start with a user message."
    turns.unshift({ role: 'user', content: [{ text: '(conversation start)' }] });
    note({ param: 'messages', action: 'add', after: 'user turn "(conversation start)"', reason: 'Bedrock requires the conversation to start with a user message' });
  }
  return { system, messages: turns };
}

/** tools, tool_choice and parallel_tool_calls -> toolConfig. */
function mapTools(req: ChatRequest, messages: W.Message[], caching: CachePoints, note: Note): W.ToolConfig | undefined {
  const callerTools = req.tools ?? [];
  // Bedrock: "The toolConfig field must be defined when using toolUse and toolResult content blocks."
  const toolHistory = messages.some((m) => m.content.some((b) => 'toolUse' in b || 'toolResult' in b));
  if (req.parallel_tool_calls === false) note({ param: 'parallel_tool_calls', action: 'strip', before: false, reason: 'Converse has no setting for parallel tool calls' });
  if (!callerTools.length) {
    if (req.tool_choice !== undefined) note({ param: 'tool_choice', action: 'strip', before: req.tool_choice, reason: "Converse accepts a tool choice only together with 'tools'" });
    if (toolHistory) throw errors.invalid("The conversation contains tool calls or tool results: send the 'tools' they use as well (Bedrock requires the tool definitions then).", 'tools', 'missing_required_parameter');
    return undefined;
  }
  if (req.tool_choice === 'none' && !toolHistory) {
    note({ param: 'tools', action: 'strip', before: callerTools.length, reason: "Converse has no tool_choice 'none': the tools are not sent, so none can be called" });
    return undefined;
  }
  const tools: W.Tool[] = [];
  for (const t of callerTools) {
    const params = t.function.parameters ?? { type: 'object', properties: {} };
    const spec: W.ToolSpec = { name: t.function.name, inputSchema: { json: params.type === undefined ? { type: 'object', ...params } : { ...params } } };
    if (t.function.description) spec.description = t.function.description;
    if (t.function.strict) spec.strict = true;
    tools.push({ toolSpec: spec });
    caching.mark(tools, t.cache_control, 'tools');
  }
  const config: W.ToolConfig = { tools };
  const c = req.tool_choice;
  if (c === 'none') note({ param: 'tool_choice', action: 'strip', before: 'none', reason: "Converse has no tool_choice 'none', and the conversation's tool calls need the tool definitions: the model may call a tool" });
  else if (c === 'auto') config.toolChoice = { auto: {} };
  else if (c === 'required') config.toolChoice = { any: {} };
  else if (c) config.toolChoice = { tool: { name: c.function.name } };
  return config;
}

/** inferenceConfig, and the reasoning fields that decide maxTokens and the sampling parameters with it. */
function mapInference(
  req: ChatRequest,
  vendor: Vendor,
  modelId: string,
  model: ModelConfig,
  native: Record<string, unknown>,
  toolConfig: W.ToolConfig | undefined,
  additional: Record<string, unknown>,
  note: Note,
): W.InferenceConfig {
  const out: W.InferenceConfig = {};
  let maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  if (req.max_completion_tokens != null && req.max_tokens != null) note({ param: 'max_tokens', action: 'strip', before: req.max_tokens, reason: 'max_completion_tokens is also set' });
  const thinking = mapReasoning(req, vendor, model, native, toolConfig, maxTokens, additional, note);
  if (thinking.maxTokens !== undefined) maxTokens = thinking.maxTokens;
  if (maxTokens != null) out.maxTokens = maxTokens;

  let temperature = req.temperature ?? undefined;
  let topP = req.top_p ?? undefined;
  if (thinking.on && vendor === 'anthropic') {
    // Claude's extended thinking is incompatible with temperature changes and limits top_p (Anthropic docs: extended thinking).
    if (temperature !== undefined) note({ param: 'temperature', action: 'strip', before: temperature, reason: 'Claude does not accept temperature with extended thinking' });
    if (topP !== undefined) note({ param: 'top_p', action: 'strip', before: topP, reason: 'Claude restricts top_p with extended thinking' });
    temperature = topP = undefined;
  }
  if (temperature !== undefined && temperature > 1) {
    // Not clamped silently: the override is visible under debug.normalizations.
    note({ param: 'temperature', action: 'override', before: temperature, after: 1, reason: 'Converse accepts temperature from 0 to 1' });
    temperature = 1;
  }
  if (temperature !== undefined && topP !== undefined && vendor === 'anthropic' && ONE_SAMPLER.test(modelId)) {
    note({ param: 'top_p', action: 'strip', before: topP, reason: `${modelId} accepts temperature or top_p, not both` });
    topP = undefined;
  }
  if (temperature !== undefined) out.temperature = temperature;
  if (topP !== undefined) out.topP = topP;
  const stop = req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop;
  if (stop.length) out.stopSequences = [...stop];
  return out;
}

/**
 * reasoning_effort -> Claude's `thinking` (budget_tokens) or Amazon Nova 2's
 * `reasoningConfig`, both in additionalModelRequestFields. A native `thinking`
 * or `reasoningConfig` wins untouched (docs/providers-bedrock.md).
 */
function mapReasoning(
  req: ChatRequest,
  vendor: Vendor,
  model: ModelConfig,
  native: Record<string, unknown>,
  toolConfig: W.ToolConfig | undefined,
  maxTokens: number | undefined,
  additional: Record<string, unknown>,
  note: Note,
): { on: boolean; maxTokens?: number } {
  const effort = req.reasoning_effort ?? undefined;
  const nativeThinking = (native.thinking ?? native.reasoningConfig) as { type?: string } | undefined;
  if (nativeThinking !== undefined) {
    if (effort) note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: 'native_fields gives the model its reasoning settings, which win' });
    return { on: nativeThinking.type !== 'disabled' };
  }
  if (!effort || effort === 'none') return { on: false };
  if (vendor === 'amazon') {
    const level = effort === 'minimal' ? 'low' : effort === 'xhigh' ? 'high' : effort;
    additional.reasoningConfig = { type: 'enabled', maxReasoningEffort: level };
    if (level !== effort) note({ param: 'reasoning_effort', action: 'override', before: effort, after: level, reason: "Amazon Nova's reasoning effort is 'low', 'medium' or 'high'" });
    return { on: true };
  }
  if (vendor !== 'anthropic') {
    note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: 'the gateway sets reasoning on Bedrock for Claude and Amazon Nova models only: use native_fields for this model' });
    return { on: false };
  }
  const forced = toolConfig?.toolChoice && !('auto' in toolConfig.toolChoice);
  if (forced) {
    note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: 'Claude does not allow extended thinking while tool use is forced (tool_choice)' });
    return { on: false };
  }
  const cap = model.max_output_tokens;
  if (cap !== undefined && cap - MIN_BUDGET < MIN_BUDGET) {
    note({ param: 'reasoning_effort', action: 'strip', before: effort, reason: `${model.id} allows at most ${cap} output tokens, too few for Claude's minimum thinking budget of ${MIN_BUDGET}` });
    return { on: false };
  }
  let budget = THINKING_BUDGET[effort] ?? THINKING_BUDGET.medium;
  if (cap !== undefined && budget > cap - MIN_BUDGET) {
    note({ param: 'thinking.budget_tokens', action: 'override', before: budget, after: cap - MIN_BUDGET, reason: `the budget for '${effort}' must stay below ${model.id}'s ${cap} output tokens` });
    budget = cap - MIN_BUDGET;
  }
  additional.thinking = { type: 'enabled', budget_tokens: budget };
  // Claude: maxTokens must exceed budget_tokens (thinking counts towards it).
  let max = maxTokens ?? model.max_output_tokens ?? DEFAULT_MAX_TOKENS;
  if (max <= budget) {
    const raised = cap !== undefined ? Math.min(cap, budget + max) : budget + max;
    note({ param: 'max_tokens', action: 'override', before: max, after: raised, reason: `Claude requires maxTokens above the thinking budget (${budget} for '${effort}'): the budget is added to the requested maximum` });
    max = raised;
  } else if (maxTokens == null) note({ param: 'max_tokens', action: 'add', after: max, reason: 'Claude requires maxTokens above the thinking budget' });
  return { on: true, maxTokens: max };
}
