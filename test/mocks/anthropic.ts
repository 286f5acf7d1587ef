// A strict mock of Anthropic's Messages API (POST /v1/messages, and
// POST /v1/messages/count_tokens, which takes the prompt fields only). It validates
// requests the way the real API does (shared/fixtures/WIRE-FORMATS.md section
// 4 and the docs it cites), so a translation bug in the gateway fails a test:
// x-api-key and anthropic-version headers, max_tokens required, roles
// user/assistant only and alternating, first message user, tool_result after
// its tool_use, signed thinking blocks, extended-thinking restrictions,
// cache_control shape and the 4-breakpoint limit, unknown fields rejected.
// It answers in the recorded formats (shared/fixtures/anthropic): JSON
// messages and event streams with ping events and space-padded data lines.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { startMock, type MockServer, type Recorded, type Reply } from './server.js';

export const ANTHROPIC_KEY = 'sk-ant-test-0123456789abcdef';

/** Model names the mock knows, with the dated snapshot it reports as `model`. */
export const ANTHROPIC_MODELS: Record<string, string> = {
  'claude-sonnet-4-5': 'claude-sonnet-4-5-20250929',
  'claude-sonnet-4-5-20250929': 'claude-sonnet-4-5-20250929',
  'claude-haiku-4-5': 'claude-haiku-4-5-20251001',
  'claude-haiku-4-5-20251001': 'claude-haiku-4-5-20251001',
  'claude-opus-4-1': 'claude-opus-4-1-20250805',
  'claude-opus-4-1-20250805': 'claude-opus-4-1-20250805',
  'claude-3-5-haiku-latest': 'claude-3-5-haiku-20241022',
};

/** Real prefixes shorter than a model-specific minimum are silently not cached (docs: prompt caching). */
export const MIN_CACHEABLE_TOKENS = 1024;

const SIGNING_KEY = randomBytes(32);
/** Thinking signatures the mock can verify later: a client that alters the thinking text breaks it. */
export const signThinking = (thinking: string) => createHmac('sha256', SIGNING_KEY).update(thinking).digest('base64');
const REDACTED_DATA = 'EmwKAhgBEgy' + createHmac('sha256', SIGNING_KEY).update('redacted').digest('base64');

const TOP_LEVEL = new Set(['model', 'messages', 'max_tokens', 'system', 'metadata', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k', 'tools', 'tool_choice', 'thinking', 'service_tier']);
/** POST /v1/messages/count_tokens takes the prompt only (https://docs.anthropic.com/en/api/messages-count-tokens). */
const COUNT_TOP_LEVEL = new Set(['model', 'messages', 'system', 'tools', 'tool_choice', 'thinking', 'mcp_servers']);
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
const DOCS = 'Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking';

class Invalid extends Error {
  constructor(
    message: string,
    readonly status = 400,
    readonly type = 'invalid_request_error',
  ) {
    super(message);
  }
}

export function anthropicErrorReply(status: number, type: string, message: string): Reply {
  const rid = 'req_' + randomBytes(12).toString('hex');
  return { status, headers: { 'request-id': rid }, json: { type: 'error', error: { type, message }, request_id: rid } };
}

const isObj = (v: unknown): v is Record<string, any> => !!v && typeof v === 'object' && !Array.isArray(v);  
function only(o: Record<string, unknown>, keys: string[], at: string) {
  for (const k of Object.keys(o)) if (!keys.includes(k)) throw new Invalid(`${at}.${k}: Extra inputs are not permitted`);
}

function checkCacheControl(cc: unknown, at: string): number {
  if (cc === undefined) return 0;
  if (!isObj(cc) || cc.type !== 'ephemeral') throw new Invalid(`${at}.cache_control.type: Input should be 'ephemeral'`);
  only(cc, ['type', 'ttl'], `${at}.cache_control`);
  if (cc.ttl !== undefined && cc.ttl !== '5m' && cc.ttl !== '1h') throw new Invalid(`${at}.cache_control.ttl: Input should be '5m' or '1h'`);
  return 1;
}

function checkText(b: Record<string, any>, at: string): number {
  only(b, ['type', 'text', 'cache_control', 'citations'], at);
  if (typeof b.text !== 'string') throw new Invalid(`${at}.text: Field required`);
  if (b.text === '') throw new Invalid('messages: text content blocks must be non-empty');
  return checkCacheControl(b.cache_control, at);
}

function checkImage(b: Record<string, any>, at: string): number {
  only(b, ['type', 'source', 'cache_control'], at);
  const s = b.source;
  if (!isObj(s)) throw new Invalid(`${at}.source: Field required`);
  if (s.type === 'base64') {
    only(s, ['type', 'media_type', 'data'], `${at}.source`);
    if (!IMAGE_TYPES.has(s.media_type)) throw new Invalid(`${at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`);
    if (typeof s.data !== 'string' || !s.data || !/^[A-Za-z0-9+/]+={0,2}$/.test(s.data)) throw new Invalid(`${at}.source.base64.data: Input is not valid base64`);
  } else if (s.type === 'url') {
    only(s, ['type', 'url'], `${at}.source`);
    if (typeof s.url !== 'string' || !/^https?:\/\//.test(s.url)) throw new Invalid(`${at}.source.url.url: Input should be a valid URL`);
  } else throw new Invalid(`${at}.source: Input tag '${s.type}' found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'`);
  return checkCacheControl(b.cache_control, at);
}

/**
 * Validates one request body; throws Invalid with Anthropic's wording. With
 * `count`, the body of POST /v1/messages/count_tokens: the same prompt, and
 * no generation settings (`max_tokens`, `stream`, `temperature`... are extra inputs there).
 */
export function validateMessages(body: any, count = false): void {
  if (!isObj(body)) throw new Invalid('There was an issue with your request body: expected a JSON object');
  for (const k of Object.keys(body)) if (!(count ? COUNT_TOP_LEVEL : TOP_LEVEL).has(k)) throw new Invalid(`${k}: Extra inputs are not permitted`);
  if (typeof body.model !== 'string') throw new Invalid('model: Field required');
  if (!(body.model in ANTHROPIC_MODELS)) throw new Invalid(`model: ${body.model}`, 404, 'not_found_error');
  if (!count && body.max_tokens === undefined) throw new Invalid('max_tokens: Field required');
  if (!count && (!Number.isInteger(body.max_tokens) || body.max_tokens < 1)) throw new Invalid('max_tokens: Input should be greater than or equal to 1');
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw new Invalid('stream: Input should be a valid boolean');
  if (body.temperature !== undefined && (typeof body.temperature !== 'number' || body.temperature < 0 || body.temperature > 1))
    throw new Invalid(`temperature: Input should be ${typeof body.temperature === 'number' && body.temperature < 0 ? 'greater than or equal to 0' : 'less than or equal to 1'}`);
  if (body.top_p !== undefined && (typeof body.top_p !== 'number' || body.top_p < 0 || body.top_p > 1)) throw new Invalid('top_p: Input should be less than or equal to 1');
  if (body.top_k !== undefined && (!Number.isInteger(body.top_k) || body.top_k < 0)) throw new Invalid('top_k: Input should be greater than or equal to 0');
  if (body.stop_sequences !== undefined && (!Array.isArray(body.stop_sequences) || body.stop_sequences.some((s: unknown) => typeof s !== 'string')))
    throw new Invalid('stop_sequences: Input should be a valid list of strings');
  if (body.metadata !== undefined) {
    if (!isObj(body.metadata)) throw new Invalid('metadata: Input should be a valid dictionary');
    only(body.metadata, ['user_id'], 'metadata');
  }
  if (body.service_tier !== undefined && !['auto', 'standard_only'].includes(body.service_tier)) throw new Invalid("service_tier: Input should be 'auto' or 'standard_only'");
  let breakpoints = 0;

  // system: a string or text blocks; there is no system role in messages.
  if (body.system !== undefined) {
    if (Array.isArray(body.system)) {
      body.system.forEach((b: unknown, j: number) => {
        if (!isObj(b) || b.type !== 'text') throw new Invalid(`system.${j}.type: Input should be 'text'`);
        breakpoints += checkText(b, `system.${j}`);
      });
    } else if (typeof body.system !== 'string') throw new Invalid('system: Input should be a valid string or list of text blocks');
  }

  // tools
  const toolNames = new Set<string>();
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Invalid('tools: Input should be a valid list');
    body.tools.forEach((t: unknown, j: number) => {
      const at = `tools.${j}`;
      if (!isObj(t)) throw new Invalid(`${at}: Input should be a valid dictionary`);
      if (t.type === 'web_search_20250305') {
        only(t, ['type', 'name', 'max_uses', 'allowed_domains', 'blocked_domains', 'user_location', 'cache_control'], at);
        if (t.name !== 'web_search') throw new Invalid(`${at}.name: Input should be 'web_search'`);
      } else {
        if (t.type !== undefined && t.type !== 'custom') throw new Invalid(`${at}: Input tag '${t.type}' found using 'type' does not match any of the expected tags`);
        only(t, ['type', 'name', 'description', 'input_schema', 'cache_control'], at);
        if (typeof t.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(t.name)) throw new Invalid(`${at}.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`);
        if (!isObj(t.input_schema)) throw new Invalid(`${at}.input_schema: Field required`);
        if (t.input_schema.type !== 'object') throw new Invalid(`${at}.input_schema.type: Input should be 'object'`);
        if (t.description !== undefined && typeof t.description !== 'string') throw new Invalid(`${at}.description: Input should be a valid string`);
      }
      if (toolNames.has(t.name)) throw new Invalid('tools: Tool names must be unique.');
      toolNames.add(t.name);
      breakpoints += checkCacheControl(t.cache_control, at);
    });
  }
  const tc = body.tool_choice;
  if (tc !== undefined) {
    if (!toolNames.size) throw new Invalid('tool_choice: tool_choice may only be specified while providing tools.');
    if (!isObj(tc) || !['auto', 'any', 'tool', 'none'].includes(tc.type)) throw new Invalid("tool_choice: Input tag found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'");
    only(tc, tc.type === 'tool' ? ['type', 'name', 'disable_parallel_tool_use'] : tc.type === 'none' ? ['type'] : ['type', 'disable_parallel_tool_use'], 'tool_choice');
    if (tc.type === 'tool' && !toolNames.has(tc.name)) throw new Invalid(`tool_choice.name: Tool '${tc.name}' not found in provided tools`);
  }

  // thinking
  const th = body.thinking;
  let thinkingOn = false;
  if (th !== undefined) {
    if (!isObj(th) || !['enabled', 'disabled'].includes(th.type)) throw new Invalid("thinking: Input tag found using 'type' does not match any of the expected tags: 'enabled', 'disabled'");
    if (th.type === 'enabled') {
      only(th, ['type', 'budget_tokens'], 'thinking.enabled');
      if (!Number.isInteger(th.budget_tokens)) throw new Invalid('thinking.enabled.budget_tokens: Field required');
      if (th.budget_tokens < 1024) throw new Invalid('thinking.enabled.budget_tokens: Input should be greater than or equal to 1024');
      if (!count && body.max_tokens <= th.budget_tokens) throw new Invalid(`\`max_tokens\` must be greater than \`thinking.budget_tokens\`. ${DOCS}#max-tokens-and-context-window-size`);
      thinkingOn = true;
      if (body.temperature !== undefined && body.temperature !== 1) throw new Invalid(`\`temperature\` may only be set to 1 when thinking is enabled. ${DOCS}#feature-compatibility`);
      if (body.top_k !== undefined) throw new Invalid(`\`top_k\` must be unset when thinking is enabled. ${DOCS}#feature-compatibility`);
      if (body.top_p !== undefined && body.top_p < 0.95) throw new Invalid(`\`top_p\` must be greater than or equal to 0.95 or unset when thinking is enabled. ${DOCS}#feature-compatibility`);
      if (tc && (tc.type === 'any' || tc.type === 'tool')) throw new Invalid(`Thinking may not be enabled when tool_choice forces tool use. ${DOCS}#extended-thinking-with-tool-use`);
    } else only(th, ['type'], 'thinking.disabled');
  }

  // messages
  const msgs = body.messages;
  if (!Array.isArray(msgs)) throw new Invalid('messages: Field required');
  if (!msgs.length) throw new Invalid('messages: at least one message is required');
  msgs.forEach((m: unknown, i: number) => {
    const at = `messages.${i}`;
    if (!isObj(m)) throw new Invalid(`${at}: Input should be a valid dictionary`);
    only(m, ['role', 'content'], at);
    if (m.role === 'system')
      throw new Invalid(`${at}.role: Input should be 'user' or 'assistant'. Use the top-level \`system\` parameter for a system prompt`);
    if (m.role !== 'user' && m.role !== 'assistant') throw new Invalid(`${at}.role: Input should be 'user' or 'assistant'`);
    if (i === 0 && m.role !== 'user') throw new Invalid('messages: first message must use the "user" role');
    if (i > 0 && msgs[i - 1].role === m.role) throw new Invalid(`messages: roles must alternate between "user" and "assistant", but found multiple "${m.role}" roles in a row`);
    if (typeof m.content === 'string') {
      if (!m.content && !(m.role === 'assistant' && i === msgs.length - 1)) throw new Invalid(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`);
      return;
    }
    if (!Array.isArray(m.content)) throw new Invalid(`${at}.content: Input should be a valid string or list`);
    if (!m.content.length) throw new Invalid(`messages.${i}: all messages must have non-empty content except for the optional final assistant message`);
    let seenOther = false;
    m.content.forEach((b: unknown, j: number) => {
      const bat = `${at}.content.${j}`;
      if (!isObj(b)) throw new Invalid(`${bat}: Input should be a valid dictionary`);
      const userOnly = ['image', 'tool_result'];
      const assistantOnly = ['tool_use', 'thinking', 'redacted_thinking'];
      if ((m.role === 'assistant' && userOnly.includes(b.type)) || (m.role === 'user' && assistantOnly.includes(b.type)))
        throw new Invalid(`${bat}.type: a '${b.type}' block is not allowed in a '${m.role}' message`);
      switch (b.type) {
        case 'text':
          breakpoints += checkText(b, bat);
          break;
        case 'image':
          breakpoints += checkImage(b, bat);
          break;
        case 'tool_use':
          only(b, ['type', 'id', 'name', 'input', 'cache_control'], bat);
          if (typeof b.id !== 'string' || !/^[a-zA-Z0-9_-]+$/.test(b.id)) throw new Invalid(`${bat}.id: String should match pattern '^[a-zA-Z0-9_-]+$'`);
          if (typeof b.name !== 'string') throw new Invalid(`${bat}.name: Field required`);
          if (!isObj(b.input)) throw new Invalid(`${bat}.input: Input should be a valid dictionary`);
          breakpoints += checkCacheControl(b.cache_control, bat);
          break;
        case 'tool_result':
          only(b, ['type', 'tool_use_id', 'content', 'is_error', 'cache_control'], bat);
          if (seenOther) throw new Invalid(`${at}.content: \`tool_result\` blocks must come before any other content in a user message`);
          if (typeof b.tool_use_id !== 'string') throw new Invalid(`${bat}.tool_use_id: Field required`);
          if (b.content !== undefined && typeof b.content !== 'string') {
            if (!Array.isArray(b.content)) throw new Invalid(`${bat}.content: Input should be a valid string or list`);
            b.content.forEach((c: any, k: number) => (c?.type === 'image' ? checkImage(c, `${bat}.content.${k}`) : checkText(c, `${bat}.content.${k}`)));  
          }
          breakpoints += checkCacheControl(b.cache_control, bat);
          break;
        case 'thinking':
          only(b, ['type', 'thinking', 'signature'], bat);
          if (typeof b.thinking !== 'string') throw new Invalid(`${bat}.thinking.thinking: Field required`);
          if (typeof b.signature !== 'string') throw new Invalid(`${bat}.thinking.signature: Field required`);
          if (b.signature !== signThinking(b.thinking)) throw new Invalid(`${bat}: Invalid \`signature\` in \`thinking\` block`);
          break;
        case 'redacted_thinking':
          only(b, ['type', 'data'], bat);
          if (b.data !== REDACTED_DATA) throw new Invalid(`${bat}: Invalid \`data\` in \`redacted_thinking\` block`);
          break;
        default:
          throw new Invalid(`${bat}: Input tag '${b.type}' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'`);
      }
      if (b.type !== 'tool_result') seenOther = true;
    });
  });

  // tool_use <-> tool_result pairing, in adjacent turns.
  msgs.forEach((m: any, i: number) => {  
    const blocks = Array.isArray(m.content) ? m.content : [];
    if (m.role === 'user') {
      const prev = msgs[i - 1];
      const ids = new Set((Array.isArray(prev?.content) ? prev.content : []).filter((b: any) => b.type === 'tool_use').map((b: any) => b.id));  
      blocks.forEach((b: any, j: number) => {  
        if (b.type === 'tool_result' && !ids.has(b.tool_use_id))
          throw new Invalid(`messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
      });
    } else {
      const next = msgs[i + 1];
      if (!next) return;
      const answered = new Set((Array.isArray(next.content) ? next.content : []).filter((b: any) => b.type === 'tool_result').map((b: any) => b.tool_use_id));  
      const missing = blocks.filter((b: any) => b.type === 'tool_use' && !answered.has(b.id)).map((b: any) => b.id);  
      if (missing.length)
        throw new Invalid(`messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
    }
  });

  // With thinking on, a tool loop's assistant turn must start with its (signed) thinking block.
  const last = msgs[msgs.length - 1];
  if (thinkingOn && last.role === 'user' && Array.isArray(last.content) && last.content.some((b: any) => b.type === 'tool_result')) {  
    const a = msgs[msgs.length - 2];
    const first = Array.isArray(a?.content) ? a.content[0] : { type: 'text' };
    if (first.type !== 'thinking' && first.type !== 'redacted_thinking')
      throw new Invalid(
        `messages.${msgs.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`. ${DOCS}`,
      );
  }
  if (breakpoints > 4) throw new Invalid(`A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`);
}

// ---- answers ----------------------------------------------------------------

const tokens = (s: string) => Math.ceil(s.length / 4);
const msgId = () => 'msg_01' + randomBytes(16).toString('base64url').replace(/[-_]/g, 'x').slice(0, 22);
const toolId = () => 'toolu_01' + randomBytes(16).toString('base64url').replace(/[-_]/g, 'x').slice(0, 22);

function textOf(content: any): string {  
  if (typeof content === 'string') return content;
  return (content ?? []).filter((b: any) => b.type === 'text').map((b: any) => b.text).join(' ');  
}

function sample(schema: any, key: string, text: string, city: string): unknown {  
  if (!isObj(schema)) return text;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const t = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (t === 'object' || isObj(schema.properties)) {
    const out: Record<string, unknown> = {};
    for (const [k, s] of Object.entries(schema.properties ?? {})) out[k] = sample(s, k, text, city);
    return out;
  }
  if (t === 'array') return [sample(schema.items, key, text, city)];
  if (t === 'number' || t === 'integer') return 21;
  if (t === 'boolean') return true;
  if (t === 'null') return null;
  return /city|location/i.test(key) ? city : text;
}

type OutBlock = { type: 'text'; text: string } | { type: 'thinking'; thinking: string; signature: string } | { type: 'redacted_thinking'; data: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

/** What the mock model "says": deterministic, derived from the conversation. */
export function plan(body: any): { content: OutBlock[]; stop_reason: string; stop_sequence: string | null } {  
  const msgs = body.messages;
  const last = msgs[msgs.length - 1];
  const lastUser = [...msgs].reverse().find((m: any) => m.role === 'user' && textOf(m.content)) ?? last;  
  const userText = textOf(lastUser.content);
  const blocks: any[] = Array.isArray(last.content) ? last.content : [];  
  const toolResults = last.role === 'user' ? blocks.filter((b) => b.type === 'tool_result') : [];
  const content: OutBlock[] = [];
  if (body.thinking?.type === 'enabled') {
    const thinking = `The user wrote "${userText}". I should answer plainly.`;
    content.push({ type: 'thinking', thinking, signature: signThinking(thinking) });
    if (/redact/i.test(userText)) content.push({ type: 'redacted_thinking', data: REDACTED_DATA });
  }
  const custom = (body.tools ?? []).filter((t: any) => t.type !== 'web_search_20250305');  
  const tc = body.tool_choice;
  const forced = tc?.type === 'tool' ? tc.name : undefined;
  const wantsTool = /weather|use the tool/i.test(userText);
  if (custom.length && tc?.type !== 'none' && last.role === 'user' && !toolResults.length && (forced || tc?.type === 'any' || wantsTool)) {
    const pick = forced ? custom.find((t: any) => t.name === forced) : wantsTool ? custom[0] : custom[custom.length - 1];  
    if (!forced && tc?.type !== 'any') content.push({ type: 'text', text: "I'll look that up." });
    const cities = /paris and london/i.test(userText) && !tc?.disable_parallel_tool_use ? ['Paris', 'London'] : ['Paris'];
    for (const city of cities) content.push({ type: 'tool_use', id: toolId(), name: pick.name, input: sample(pick.input_schema, '', userText, city) as Record<string, unknown> });
    return { content, stop_reason: 'tool_use', stop_sequence: null };
  }
  if (/please refuse/i.test(userText)) return { content, stop_reason: 'refusal', stop_sequence: null };
  const system = typeof body.system === 'string' ? body.system : textOf(body.system);
  let text: string;
  if (toolResults.length) text = `Echo: tool said ${toolResults.map((b) => (typeof b.content === 'string' ? b.content : textOf(b.content))).join('; ')}`;
  else if (/JSON object/.test(system)) text = JSON.stringify({ answer: userText });
  else {
    const images = (Array.isArray(lastUser.content) ? lastUser.content : []).filter((b: any) => b.type === 'image');  
    text = `Echo: ${userText}` + images.map((b: any) => (b.source.type === 'url' ? ` [image url ${b.source.url}]` : ` [image ${b.source.media_type} ${Buffer.from(b.source.data, 'base64').length} bytes]`)).join('');  
  }
  let stop_reason = 'end_turn';
  let stop_sequence: string | null = null;
  for (const s of body.stop_sequences ?? []) {
    const at = text.indexOf(s);
    if (at >= 0) {
      text = text.slice(0, at);
      stop_reason = 'stop_sequence';
      stop_sequence = s;
      break;
    }
  }
  const room = body.max_tokens - content.reduce((n, b) => n + (b.type === 'thinking' ? tokens(b.thinking) : 0), 0);
  if (tokens(text) > room) {
    text = text.slice(0, Math.max(0, room) * 4);
    stop_reason = 'max_tokens';
  }
  if (text) content.push({ type: 'text', text });
  return { content, stop_reason, stop_sequence };
}

/** Units of the prompt in cache-prefix order (tools -> system -> messages), with their breakpoints. */
function promptUnits(body: any): { text: string; breakpoint: boolean }[] {  
  const units: { text: string; breakpoint: boolean }[] = [];
  const add = (b: any) => {  
    const { cache_control, ...rest } = b;
    units.push({ text: JSON.stringify(rest), breakpoint: !!cache_control });
  };
  (body.tools ?? []).forEach(add);
  if (typeof body.system === 'string') units.push({ text: body.system, breakpoint: false });
  else (body.system ?? []).forEach(add);
  for (const m of body.messages) {
    if (typeof m.content === 'string') units.push({ text: m.role + m.content, breakpoint: false });
    else m.content.forEach((b: unknown) => add({ role: m.role, ...(b as object) }));
  }
  return units;
}

/** The prompt's tokens (tools, system, messages), as the mock's model counts them. */
export function promptTokens(body: any): number {
  return promptUnits(body).reduce((n, u) => n + tokens(u.text), 0);
}

function usageFor(body: any, content: OutBlock[], cache: Map<string, number>) {
  const units = promptUnits(body);
  const total = promptTokens(body);
  let read = 0;
  let created = 0;
  let running = 0;
  const hash = createHash('sha256').update(body.model);
  const prefixes: { key: string; tokens: number }[] = [];
  for (const u of units) {
    hash.update(u.text);
    running += tokens(u.text);
    if (u.breakpoint) prefixes.push({ key: hash.copy().digest('hex'), tokens: running });
  }
  for (const p of prefixes) if (cache.has(p.key)) read = Math.max(read, p.tokens);
  const lastBp = prefixes[prefixes.length - 1];
  if (lastBp && !cache.has(lastBp.key) && lastBp.tokens >= MIN_CACHEABLE_TOKENS) created = lastBp.tokens - read;
  for (const p of prefixes) if (p.tokens >= MIN_CACHEABLE_TOKENS) cache.set(p.key, p.tokens);
  const output = content.reduce((n, b) => n + tokens(b.type === 'text' ? b.text : b.type === 'thinking' ? b.thinking : b.type === 'tool_use' ? JSON.stringify(b.input) : b.data), 0) + 1;
  return {
    input_tokens: total - read - created,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: read,
    cache_creation: { ephemeral_5m_input_tokens: created, ephemeral_1h_input_tokens: 0 },
    output_tokens: output,
    service_tier: 'standard',
  };
}

/** One SSE frame as Anthropic writes it: `event:` line, and data JSON sometimes padded with spaces before its last brace (observed). */
function frame(data: Record<string, unknown>, n: number): string {
  const pad = n % 3 === 1 ? ' '.repeat(1 + (n % 11)) : '';
  // Recorded: `{"type":"content_block_stop","index":0               }`, and ping as `{"type": "ping"}`.
  const json = data.type === 'ping' ? '{"type": "ping"}' : JSON.stringify(data).slice(0, -1) + pad + '}';
  return `event: ${data.type}\ndata: ${json}\n\n`;
}

function pieces(s: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

export interface StreamErrorFault {
  /** Events sent before the `error` event. */
  afterEvents: number;
  type?: string;
  message?: string;
}

function streamFrames(id: string, served: string, p: ReturnType<typeof plan>, usage: ReturnType<typeof usageFor>, fault?: StreamErrorFault): string[] {
  const ev: Record<string, unknown>[] = [];
  ev.push({ type: 'message_start', message: { model: served, id, type: 'message', role: 'assistant', content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  p.content.forEach((b, index) => {
    if (b.type === 'text') {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      if (index === 0) ev.push({ type: 'ping' });
      for (const w of b.text.split(/(?<= )/)) ev.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: w } });
    } else if (b.type === 'thinking') {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
      if (index === 0) ev.push({ type: 'ping' });
      for (const w of b.thinking.split(/(?<= )/)) ev.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: w } });
      ev.push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: b.signature } });
    } else if (b.type === 'redacted_thinking') {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'redacted_thinking', data: b.data } });
    } else {
      ev.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
      // Recorded: the first fragment is "", and a tool without arguments sends only that.
      ev.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } });
      const json = JSON.stringify(b.input);
      if (json !== '{}') for (const part of pieces(json, 7)) ev.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } });
    }
    ev.push({ type: 'content_block_stop', index });
  });
  ev.push({ type: 'message_delta', delta: { stop_reason: p.stop_reason, stop_sequence: p.stop_sequence }, usage: { input_tokens: usage.input_tokens, cache_creation_input_tokens: usage.cache_creation_input_tokens, cache_read_input_tokens: usage.cache_read_input_tokens, output_tokens: usage.output_tokens } });
  ev.push({ type: 'message_stop' });
  if (fault) {
    ev.splice(fault.afterEvents);
    ev.push({ type: 'error', error: { type: fault.type ?? 'overloaded_error', message: fault.message ?? 'Overloaded' } });
  }
  return ev.map(frame);
}

/** The validation of a Messages body as an error reply in Anthropic's shape, or undefined when it passes. */
export function checkMessages(body: any, counting = false): Reply | undefined {
  try {
    validateMessages(body, counting);
    return undefined;
  } catch (e) {
    if (e instanceof Invalid) return anthropicErrorReply(e.status, e.type, e.message);
    throw e;
  }
}

/**
 * The answer to a validated Messages body: a JSON message, or the event
 * stream when `stream` is set (ending in an `error` event when `fault` says
 * so). `cache` holds the prompt-cache prefixes seen so far. `served` is the
 * model the answer reports (the dated snapshot by default).
 */
export function answerMessages(body: any, cache: Map<string, number>, fault?: StreamErrorFault, served = ANTHROPIC_MODELS[body.model]): Reply {
  const p = plan(body);
  const usage = usageFor(body, p.content, cache);
  const id = msgId();
  const headers = { 'request-id': 'req_' + randomBytes(12).toString('hex'), 'anthropic-ratelimit-requests-remaining': '999' };
  if (body.stream) return { status: 200, headers, sse: streamFrames(id, served, p, usage, fault) };
  return { status: 200, headers, json: { model: served, id, type: 'message', role: 'assistant', content: p.content, stop_reason: p.stop_reason, stop_sequence: p.stop_sequence, usage: { ...usage, inference_geo: 'not_available' } } };
}

export interface AnthropicMock extends MockServer {
  /** Make the next streamed answer send an `error` event after some events (HTTP status stays 200). */
  streamError(f: StreamErrorFault): void;
  /** Cached prefixes (hash -> tokens), as the prompt cache would hold them. */
  cache: Map<string, number>;
}

export async function startAnthropicMock(opts: { key?: string } = {}): Promise<AnthropicMock> {
  const key = opts.key ?? ANTHROPIC_KEY;
  const cache = new Map<string, number>();
  const streamErrors: StreamErrorFault[] = [];
  const handle = (req: Recorded): Reply => {
    if (req.headers['x-api-key'] !== key) return anthropicErrorReply(401, 'authentication_error', 'invalid x-api-key');
    if (!req.headers['anthropic-version']) return anthropicErrorReply(400, 'invalid_request_error', 'anthropic-version: header is required');
    if (!['2023-06-01', '2023-01-01'].includes(String(req.headers['anthropic-version']))) return anthropicErrorReply(400, 'invalid_request_error', 'anthropic-version: invalid version');
    const counting = req.path === '/v1/messages/count_tokens';
    if (req.method !== 'POST' || (req.path !== '/v1/messages' && !counting)) return anthropicErrorReply(404, 'not_found_error', 'Not Found');
    if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) return anthropicErrorReply(400, 'invalid_request_error', 'content-type: must be application/json');
    const body = req.body;
    const invalid = checkMessages(body, counting);
    if (invalid) return invalid;
    // The count is the prompt's size as usage would report it, before any cache read.
    if (counting) return { status: 200, headers: { 'request-id': 'req_' + randomBytes(12).toString('hex') }, json: { input_tokens: promptTokens(body) } };
    return answerMessages(body, cache, body.stream ? streamErrors.shift() : undefined);
  };
  const mock = await startMock(handle);
  return Object.assign(mock, {
    cache,
    streamError: (f: StreamErrorFault) => void streamErrors.push(f),
    reset() {
      mock.requests.length = 0;
      mock.faults.length = 0;
      streamErrors.length = 0;
      cache.clear();
    },
  });
}
