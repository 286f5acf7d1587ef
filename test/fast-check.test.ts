// The fast checks of chat and Messages bodies (src/api/fast-check.ts) against
// the valibot schemas alone (withoutFastPaths): on the benchmark's agent
// conversations, the Claude Code session fixture, the recorded requests of
// the shared fixtures and mutations of all of them, the validated body (or
// the error: message, param, code) is the same, and so is every translation
// of it (chat → Anthropic, Messages → chat, byte for byte; the passthrough as
// JSON). The fast checks must also vouch for the common shapes, or they buy
// nothing: every message and tool of the agent conversations.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import YAML from 'yaml';
import { validate, withoutFastPaths, UNSURE } from '../src/validate.js';
import { ChatBody } from '../src/api/chat-schema.js';
import { MessagesBody } from '../src/api/messages-schema.js';
import { chatMessage, chatTool, messagesMessage, messagesTool } from '../src/api/fast-check.js';
import { toChatRequest } from '../src/api/messages-map.js';
import { withoutExtensions } from '../src/api/common.js';
import { toAnthropic } from '../plugins/providers/anthropic/request.js';
import { toOpenAIChat } from '../plugins/providers/openai/request.js';
import { agentChatBody, agentMessagesBody, AGENT_SIZES } from '../bench/agent.js';
import { claudeCodeRequest, longHistory } from './fixtures/claude-code-session.js';
import { sharedFixtures } from './helpers/fixtures.js';
import type { ChatRequest } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';

type Any = any;
type Json = Record<string, Any>;

/** The outcome of validating `raw`: the body, or the error's fields. */
function outcome(schema: typeof ChatBody | typeof MessagesBody, raw: unknown): { ok: true; body: Json } | { ok: false; error: Json } {
  try {
    return { ok: true, body: validate(schema as typeof ChatBody, raw) as Json };
  } catch (err) {
    const e = err as Any;
    return { ok: false, error: { message: e.message, param: e.param, code: e.code, status: e.status } };
  }
}

const MODEL = { id: 'claude-x', max_output_tokens: 8192 } as unknown as ModelConfig;

/** What each translation of a validated body sends: JSON text (or the error it throws). */
function translations(kind: 'chat' | 'messages', body: Json): Record<string, string> {
  const run = (f: () => unknown) => {
    try {
      return JSON.stringify(f());
    } catch (err) {
      return `error: ${(err as Error).message}`;
    }
  };
  if (kind === 'chat') {
    const req = withoutExtensions(body) as unknown as ChatRequest;
    return {
      anthropic: run(() => toAnthropic(req, MODEL, () => {}, false).body),
      anthropicStream: run(() => toAnthropic(req, MODEL, () => {}, true).body),
      openai: run(() => toOpenAIChat(req, () => {})),
    };
  }
  return {
    openai: run(() => toChatRequest(body as Any, { family: 'openai', stream: false }).request),
    google: run(() => toChatRequest(body as Any, { family: 'google', stream: true }).request),
  };
}

/** Fast and valibot-only agree on `raw`: same body or same error, same translations. */
function agree(t: Any, kind: 'chat' | 'messages', raw: Json, label: string): boolean {
  const schema = kind === 'chat' ? ChatBody : MessagesBody;
  const fast = outcome(schema, structuredClone(raw));
  const slow = withoutFastPaths(() => outcome(schema, structuredClone(raw)));
  if (fast.ok !== slow.ok || (!fast.ok && !slow.ok && !isDeepStrictEqual(fast.error, slow.error))) {
    t.fail(`${label}: fast ${JSON.stringify(fast.ok ? 'accepts' : fast.error)}, valibot ${JSON.stringify(slow.ok ? 'accepts' : slow.error)}`);
    return false;
  }
  if (fast.ok && slow.ok) {
    if (!isDeepStrictEqual(fast.body, slow.body)) {
      t.fail(`${label}: the validated bodies differ`);
      return false;
    }
    const a = translations(kind, fast.body);
    const b = translations(kind, slow.body);
    for (const k of Object.keys(b)) {
      // The passthrough keeps the client's member order (valibot's output put its known fields first): compared as JSON.
      const same = k === 'openai' && kind === 'chat' ? isDeepStrictEqual(JSON.parse(a[k]), JSON.parse(b[k])) : a[k] === b[k];
      if (!same) {
        t.fail(`${label}: the ${k} translation differs`);
        return false;
      }
    }
  }
  return true;
}

/** Recorded request bodies of the shared fixtures (cassettes), by shape. */
function recorded(): { chat: Json[]; messages: Json[]; skip: string | false } {
  const out = { chat: [] as Json[], messages: [] as Json[], skip: false as string | false };
  for (const kind of ['anthropic', 'openai-chat', 'openai-compatible']) {
    const f = sharedFixtures(kind);
    if (f.skip) {
      out.skip = f.skip;
      continue;
    }
    for (const file of fs.readdirSync(f.dir).filter((n) => n.endsWith('.yaml'))) {
      const cassette = YAML.parse(fs.readFileSync(path.join(f.dir, file), 'utf8')) as Any;
      for (const i of cassette?.interactions ?? []) {
        const body = i.request?.parsed_body;
        if (!body || typeof body !== 'object' || !Array.isArray(body.messages)) continue;
        if (/\/messages(\?|$)/.test(String(i.request.uri ?? ''))) out.messages.push(body);
        else if (/chat\/completions(\?|$)/.test(String(i.request.uri ?? ''))) out.chat.push(body);
      }
    }
  }
  return out;
}

const chatBodies = (): [string, Json][] => AGENT_SIZES.map((b) => [`agent chat ${b}`, JSON.parse(agentChatBody('gpt-x', 64, b))]);
const messagesBodies = (): [string, Json][] => [
  ...AGENT_SIZES.map((b): [string, Json] => [`agent messages ${b}`, JSON.parse(agentMessagesBody('claude-x', 64, b))]),
  ['claude code session', claudeCodeRequest('claude-x', longHistory(60_000), { thinking: true, stream: true })],
];

t.test('the fast checks vouch for every message and tool of the agent conversations', async (t) => {
  for (const [label, body] of chatBodies()) {
    t.ok(body.messages.every((m: unknown) => chatMessage(m) !== UNSURE), `${label}: messages`);
    t.ok(body.tools.every((x: unknown) => chatTool(x) !== UNSURE), `${label}: tools`);
  }
  for (const [label, body] of messagesBodies()) {
    t.ok(body.messages.every((m: unknown) => messagesMessage(m) !== UNSURE), `${label}: messages`);
    t.ok(body.tools.every((x: unknown) => messagesTool(x) !== UNSURE), `${label}: tools`);
  }
});

t.test('a vouched-for value is a copy, as valibot made one', async (t) => {
  const m = { role: 'assistant', content: [{ type: 'text', text: 'x' }], tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }], extra_field: { a: 1 } };
  const out = chatMessage(m) as Any;
  t.not(out, m);
  t.not(out.content, m.content);
  t.not(out.content[0], m.content[0]);
  t.not(out.tool_calls[0].function, m.tool_calls[0].function);
  t.equal(out.extra_field, m.extra_field, 'a field the schema does not name is handed on, as valibot does');
  const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string' } } } } };
  const tc = chatTool(tool) as Any;
  t.not(tc.function.parameters, tool.function.parameters);
  t.equal(tc.function.parameters.properties, tool.function.parameters.properties);
});

t.test('same bodies, errors and translations as valibot alone: conversations and recordings', async (t) => {
  for (const [label, body] of chatBodies()) t.ok(agree(t, 'chat', body, label), label);
  for (const [label, body] of messagesBodies()) t.ok(agree(t, 'messages', body, label), label);
  const rec = recorded();
  if (rec.skip) t.comment(rec.skip);
  t.comment(`recorded: ${rec.chat.length} chat and ${rec.messages.length} Messages requests`);
  rec.chat.forEach((b, i) => agree(t, 'chat', b, `recorded chat ${i}`));
  rec.messages.forEach((b, i) => agree(t, 'messages', b, `recorded messages ${i}`));
});

// Values put in place of a member, or added as one, by the mutations.
const JUNK: unknown[] = [undefined, null, 0, 5, -1, 1.5, '', 'x', 'text', 'function', 'ephemeral', 'object', 'user', true, false, [], [{}], {}, { type: 'text', text: 'x' }, { type: 'ephemeral', ttl: '1h' }];
const ADDED = ['constructor', 'prototype', 'cache_control', 'function_call', 'tool_call_id', 'tool_calls', 'refusal', 'reasoning_content', 'reasoning_details', 'name', 'is_error', 'content', 'unknown_field'];

/** Every variant of `value` with one member (at any depth up to 4) replaced, removed or added. */
function* mutations(value: unknown, depth = 0): Generator<unknown> {
  if (depth > 4 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      for (const j of JUNK) yield value.map((x, k) => (k === i ? j : x)).filter((x) => x !== undefined);
      for (const m of mutations(value[i], depth + 1)) yield value.map((x, k) => (k === i ? m : x));
    }
    yield [];
    return;
  }
  const o = value as Json;
  for (const k of Object.keys(o)) {
    for (const j of JUNK) {
      const c = { ...o };
      if (j === undefined) delete c[k];
      else c[k] = j;
      yield c;
    }
    for (const m of mutations(o[k], depth + 1)) yield { ...o, [k]: m };
  }
  for (const k of ADDED) for (const j of JUNK) if (j !== undefined && !(k in o)) yield { ...o, [k]: j };
}

/** Messages and tools worth mutating: one of each shape the bodies have. */
function samples(list: Json[], shape: (x: Json) => string): Json[] {
  const seen = new Map<string, Json>();
  for (const x of list) if (!seen.has(shape(x))) seen.set(shape(x), x);
  return [...seen.values()];
}

t.test('mutations: fast and valibot-only agree on every one', async (t) => {
  const chatShape = (m: Json) => `${m.role}|${typeof m.content}|${!!m.tool_calls}|${Array.isArray(m.content) ? m.content.length : ''}`;
  const msgShape = (m: Json) => `${m.role}|${Array.isArray(m.content) ? m.content.map((b: Json) => b.type).join(',') : 'string'}`;
  const chat = chatBodies()[0][1];
  const handMade: Json[] = [
    { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b', extra: 1 }] },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }], reasoning_content: 'r', reasoning_details: [{ type: 'thinking', thinking: 't', signature: 's' }], refusal: null },
    { role: 'developer', content: [{ type: 'text', text: 'sys' }], name: 'n' },
    { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'out' }] },
  ];
  const msgs = [...samples(chat.messages, chatShape), ...handMade];
  let n = 0;
  const base = { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] };
  for (const m of msgs) for (const v of mutations(m)) n += agree(t, 'chat', { ...base, messages: [base.messages[0], v] }, `chat message ${JSON.stringify(v).slice(0, 200)}`) ? 1 : 0;
  for (const v of mutations(chat.tools[0])) n += agree(t, 'chat', { ...base, tools: [v] }, `chat tool ${JSON.stringify(v).slice(0, 200)}`) ? 1 : 0;

  const mb = messagesBodies();
  const mHandMade: Json[] = [
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }], is_error: true, cache_control: null }] },
    { role: 'assistant', content: [{ type: 'thinking', thinking: 't', signature: 's', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'a', cache_control: { type: 'ephemeral', ttl: '5m' } }] },
  ];
  const mMsgs = [...samples(mb.flatMap(([, b]) => b.messages), msgShape), ...mHandMade];
  const mBase = { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
  for (const m of mMsgs) for (const v of mutations(m)) n += agree(t, 'messages', { ...mBase, messages: [mBase.messages[0], v] }, `messages message ${JSON.stringify(v).slice(0, 200)}`) ? 1 : 0;
  const tool = (mb[3][1].tools as Json[]).find((x) => x.cache_control) ?? mb[0][1].tools[0];
  for (const v of mutations(tool)) n += agree(t, 'messages', { ...mBase, tools: [v] }, `messages tool ${JSON.stringify(v).slice(0, 200)}`) ? 1 : 0;
  t.ok(n > 2000, `${n} mutations agree`);
});
