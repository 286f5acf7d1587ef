// Fast checks of the hot parts of the chat and Messages bodies: a message and
// a tool (src/validate.ts, withFastPath). Each returns exactly what the
// valibot schema beside it outputs for that value (the same copies: a new
// object for each object valibot copies, strings and the values valibot does
// not look into shared), or UNSURE. UNSURE is not an error: the value then
// goes through the valibot schema, which accepts it or names the field. So a
// check here may refuse to vouch for anything rare (an image, a cache_control
// mark, a refusal part) and must never vouch for what the schema refuses:
// test/fast-check.test.ts compares the two on the fixtures, the benchmark's
// conversations and mutations of them.
import { UNSURE as NO } from '../validate.js';

type Obj = Record<string, unknown>;

const isObj = (x: unknown): x is Obj => x !== null && typeof x === 'object' && !Array.isArray(x);
/** Keys valibot's object schemas leave out of their output: an object that has one is left to valibot. */
const dropped = (k: string) => k === '__proto__' || k === 'constructor' || k === 'prototype';
const nonEmpty = (x: unknown) => typeof x === 'string' && x.length > 0;

/** Whether `o` has no key valibot would drop. */
function clean(o: Obj): boolean {
  for (const k in o) if (dropped(k)) return false;
  return true;
}

/** A copy of `o` (a loose object or a record whose values valibot does not look into), or NO when it has a key valibot would drop. */
const copy = (o: Obj): Obj | typeof NO => (clean(o) ? { ...o } : NO);

/** `x` copied when `item` vouches for every element (a new array of its outputs), else NO. */
function array(x: unknown, item: (e: unknown) => unknown): unknown[] | typeof NO {
  if (!Array.isArray(x)) return NO;
  const out = new Array<unknown>(x.length);
  for (let i = 0; i < x.length; i++) {
    const e = item(x[i]);
    if (e === NO) return NO;
    out[i] = e;
  }
  return out;
}

// ---------------------------------------------------------------- chat (chat-schema.ts)

/** A text part without cache_control: {type: 'text', text}. */
function chatTextPart(p: unknown): unknown {
  if (!isObj(p) || p.type !== 'text' || typeof p.text !== 'string' || p.cache_control !== undefined) return NO;
  return copy(p);
}

/** textContent: a string or an array of text parts. */
const chatText = (x: unknown) => (typeof x === 'string' ? x : array(x, chatTextPart));

function toolCall(t: unknown): unknown {
  if (!isObj(t) || typeof t.id !== 'string' || t.type !== 'function' || !isObj(t.function)) return NO;
  const fn = t.function;
  if (typeof fn.name !== 'string' || typeof fn.arguments !== 'string') return NO;
  const out = copy(t);
  const f = copy(fn);
  if (out === NO || f === NO) return NO;
  out.function = f;
  return out;
}

const reasoningDetail = (d: unknown) => (isObj(d) && typeof d.type === 'string' ? copy(d) : NO);

/** Fields of a chat message the schema names on some role: any the role's check does not take is left to valibot. */
const CHAT_MESSAGE_FIELDS = new Set(['role', 'content', 'name', 'cache_control', 'tool_calls', 'tool_call_id', 'reasoning_content', 'reasoning_details', 'refusal', 'function_call']);

/** One message of POST /v1/chat/completions (chat-schema.ts Message). */
export function chatMessage(m: unknown): unknown {
  if (!isObj(m)) return NO;
  const role = m.role;
  const assistant = role === 'assistant';
  const tool = role === 'tool';
  if (!assistant && !tool && role !== 'user' && role !== 'system' && role !== 'developer') return NO;
  const out = copy(m);
  if (out === NO) return NO;
  for (const k in m) {
    if (!CHAT_MESSAGE_FIELDS.has(k)) continue; // a field the schema does not name: kept as is
    const x = m[k];
    let y: unknown;
    switch (k) {
      case 'role':
        continue;
      case 'name':
        if (typeof x !== 'string') return NO;
        continue;
      case 'content':
        if (assistant) y = x === null || typeof x === 'string' ? x : array(x, chatTextPart);
        else if (role === 'user') y = typeof x === 'string' ? x : Array.isArray(x) && x.length ? array(x, chatTextPart) : NO;
        else y = chatText(x);
        break;
      case 'tool_calls':
        y = assistant ? array(x, toolCall) : NO;
        break;
      case 'reasoning_details':
        y = assistant ? array(x, reasoningDetail) : NO;
        break;
      case 'reasoning_content':
      case 'refusal':
        if (!assistant || (x !== null && typeof x !== 'string')) return NO;
        continue;
      case 'tool_call_id':
        if (!tool || !nonEmpty(x)) return NO;
        continue;
      default:
        return NO; // cache_control, function_call: valibot's
    }
    if (y === NO) return NO;
    out[k] = y;
  }
  if (assistant) {
    const calls = m.tool_calls as unknown[] | undefined;
    if ((m.content === undefined || m.content === null) && !calls?.length && !m.refusal) return NO;
  } else if (m.content === undefined || (tool && m.tool_call_id === undefined)) return NO;
  return out;
}

const FN_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** One function tool of POST /v1/chat/completions, without cache_control (chat-schema.ts FunctionTool). */
export function chatTool(t: unknown): unknown {
  if (!isObj(t) || t.type !== 'function' || t.cache_control !== undefined || !isObj(t.function)) return NO;
  const fn = t.function;
  if (typeof fn.name !== 'string' || !FN_NAME.test(fn.name)) return NO;
  if (fn.description !== undefined && typeof fn.description !== 'string') return NO;
  if (fn.strict !== undefined && fn.strict !== null && typeof fn.strict !== 'boolean') return NO;
  const out = copy(t);
  const f = copy(fn);
  if (out === NO || f === NO) return NO;
  if (fn.parameters !== undefined) {
    const p = isObj(fn.parameters) ? copy(fn.parameters) : NO;
    if (p === NO) return NO;
    f.parameters = p;
  }
  out.function = f;
  return out;
}

// ---------------------------------------------------------------- Messages API (messages-schema.ts)

/** A cache_control mark on a block: absent, null or {type: 'ephemeral', ttl?: '5m' | '1h'} (copied). */
function cacheControl(b: Obj, out: Obj): boolean {
  const cc = b.cache_control;
  if (cc === undefined || cc === null) return true;
  if (!isObj(cc) || cc.type !== 'ephemeral' || (cc.ttl !== undefined && cc.ttl !== '5m' && cc.ttl !== '1h')) return false;
  const c = copy(cc);
  if (c === NO) return false;
  out.cache_control = c;
  return true;
}

function textBlock(b: unknown): unknown {
  if (!isObj(b) || b.type !== 'text' || typeof b.text !== 'string') return NO;
  const out = copy(b);
  return out !== NO && cacheControl(b, out) ? out : NO;
}

/** A content block of the kinds an agent conversation is made of: text, tool_use, tool_result (of text), thinking. */
function block(b: unknown): unknown {
  if (!isObj(b)) return NO;
  switch (b.type) {
    case 'text':
      return textBlock(b);
    case 'tool_use': {
      if (!nonEmpty(b.id) || !nonEmpty(b.name) || !isObj(b.input)) return NO;
      const out = copy(b);
      const input = copy(b.input);
      if (out === NO || input === NO || !cacheControl(b, out)) return NO;
      out.input = input;
      return out;
    }
    case 'tool_result': {
      if (!nonEmpty(b.tool_use_id) || (b.is_error !== undefined && typeof b.is_error !== 'boolean')) return NO;
      const out = copy(b);
      if (out === NO || !cacheControl(b, out)) return NO;
      if (b.content !== undefined && typeof b.content !== 'string') {
        const content = array(b.content, textBlock);
        if (content === NO) return NO;
        out.content = content;
      }
      return out;
    }
    case 'thinking':
      return typeof b.thinking === 'string' && typeof b.signature === 'string' ? copy(b) : NO;
    default:
      return NO;
  }
}

/** One message of POST /v1/messages (messages-schema.ts Message). */
export function messagesMessage(m: unknown): unknown {
  if (!isObj(m) || (m.role !== 'user' && m.role !== 'assistant')) return NO;
  const out = copy(m);
  if (out === NO) return NO;
  if (typeof m.content !== 'string') {
    const content = array(m.content, block);
    if (content === NO) return NO;
    out.content = content;
  }
  return out;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;

/** A custom tool of POST /v1/messages (messages-schema.ts Tool, its first option). */
export function messagesTool(t: unknown): unknown {
  if (!isObj(t) || (t.type !== undefined && t.type !== null && t.type !== 'custom')) return NO;
  if (typeof t.name !== 'string' || !TOOL_NAME.test(t.name) || (t.description !== undefined && typeof t.description !== 'string')) return NO;
  if (!isObj(t.input_schema) || t.input_schema.type !== 'object') return NO;
  const out = copy(t);
  if (out === NO || !clean(t.input_schema) || !cacheControl(t, out)) return NO;
  // valibot's object output: its named members first (a translation that hands the schema on keeps this order).
  out.input_schema = { type: 'object', ...t.input_schema };
  return out;
}
