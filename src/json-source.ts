// The client's JSON bytes, forwarded as received where the request is
// forwarded unchanged.
//
// A same-API request (chat completions to an OpenAI-style provider) leaves
// the gateway almost as it came: the model patched, the gateway's own fields
// removed, `stream_options.include_usage` added to a stream. Re-serialising a
// 400 KB conversation for that costs more CPU than reading it, so the body
// sent upstream is written from the client's bytes instead: each top-level
// member the gateway did not change is copied byte for byte, each changed one
// is serialised on its own, removed ones are left out, added ones appended.
//
// Whether a member changed is decided on values, not on trust: a member is
// copied only when the value about to be sent is structurally equal to what
// the client's bytes parse to (strings are compared by identity first, so the
// walk over an unchanged conversation touches objects, not characters). A
// plugin that rewrites a message in place, after validation, gets that member
// re-serialised. The parsed body handed to plugins before validation is the
// reference: plugins must not change it in place (docs/plugins.md).
//
// JSON semantics are kept: a body with a duplicate top-level key (JSON.parse
// keeps the last, another parser may keep the first) is always re-serialised.

/** Byte offsets of one top-level member: the key's opening quote, the value's first and past-last byte. */
interface Member {
  key: string;
  start: number;
  valueStart: number;
  valueEnd: number;
}

/** A request body as the client sent it: its bytes and the value they parse to (before validation). */
export interface JsonSource {
  bytes: Buffer;
  parsed: Record<string, unknown>;
  /** Top-level members, once scanned (undefined: not yet; null: unusable, e.g. a duplicate key). */
  members?: Member[] | null;
}

const WS = new Uint8Array(256);
WS[0x20] = WS[0x09] = WS[0x0a] = WS[0x0d] = 1;

/** The index of the closing quote of the string whose opening quote is at `i`, or -1. */
function stringEnd(buf: Uint8Array, i: number): number {
  for (;;) {
    i = buf.indexOf(0x22, i + 1);
    if (i === -1) return -1;
    let bs = 0;
    while (buf[i - 1 - bs] === 0x5c /* \ */) bs++;
    if (bs % 2 === 0) return i;
  }
}

/**
 * One pass over JSON text: whether it nests objects and arrays deeper than
 * `max` (0: not checked), and where the members of its top-level object are.
 * Strings are skipped with indexOf: a structural byte ({ [ ] } " , :) is
 * always ASCII in UTF-8, never part of a multi-byte character. The text is
 * assumed to be valid JSON (the parse says otherwise); `members` is null when
 * the top level is not an object or repeats a key.
 */
export function scanJson(buf: Uint8Array, max: number): { deep: boolean; members: Member[] | null } {
  let depth = 0;
  const n = buf.length;
  const members: Member[] = [];
  let ok = true;
  // At depth 1: the member being read (its key seen, its value not yet ended).
  let key: string | undefined;
  let start = 0;
  let valueStart = -1;
  let expectKey = false;
  for (let i = 0; i < n; i++) {
    const c = buf[i];
    if (c === 0x22 /* " */) {
      const end = stringEnd(buf, i);
      if (end === -1) return { deep: false, members: null }; // an unterminated string: the parse reports it
      if (depth === 0) ok = false;
      else if (depth === 1) {
        if (expectKey) {
          key = keyOf(buf, i, end);
          // A key that is not valid JSON: the parse rejects the body; the scan still measures the nesting.
          if (key === undefined) {
            ok = false;
            key = '';
          }
          start = i;
          expectKey = false;
        } else if (valueStart === -1) valueStart = i;
      }
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth === 0) {
        if (c === 0x7b) expectKey = true;
        else ok = false;
      }
      else if (depth === 1 && valueStart === -1) valueStart = i;
      if (++depth > max && max > 0) return { deep: true, members: null };
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (depth === 1 && key !== undefined) {
        members.push({ key, start, valueStart, valueEnd: trimEnd(buf, i) });
        key = undefined;
      }
      depth--;
    } else if (depth === 1) {
      if (c === 0x2c /* , */) {
        if (key !== undefined) members.push({ key, start, valueStart, valueEnd: trimEnd(buf, i) });
        key = undefined;
        valueStart = -1;
        expectKey = true;
      } else if (c !== 0x3a /* : */ && !WS[c] && valueStart === -1 && key !== undefined) valueStart = i;
    } else if (depth === 0 && !WS[c]) ok = false; // a top level that is not an object
  }
  if (!ok || members.some((m) => m.valueStart === -1)) return { deep: false, members: null };
  const keys = new Set<string>();
  for (const m of members) {
    if (keys.has(m.key)) return { deep: false, members: null };
    keys.add(m.key);
  }
  return { deep: false, members };
}

function trimEnd(buf: Uint8Array, i: number): number {
  while (i > 0 && WS[buf[i - 1]]) i--;
  return i;
}

/** The key whose quotes are at `open` and `close`, decoded as JSON does; undefined when it is not a valid JSON string. */
function keyOf(buf: Uint8Array, open: number, close: number): string | undefined {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const escape = b.indexOf(0x5c, open);
  if (escape === -1 || escape > close) return b.toString('utf8', open + 1, close);
  try {
    return JSON.parse(b.toString('utf8', open, close + 1)) as string;
  } catch {
    return undefined;
  }
}

/** Whether `a` (a value about to be sent) serialises to the same JSON as `b` (the client's parsed value). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const proto = Object.getPrototypeOf(a);
  if (proto !== Object.prototype && proto !== null) return false; // toJSON, a class: serialised on its own
  const bo = b as Record<string, unknown>;
  let count = 0;
  for (const k in a as Record<string, unknown>) {
    const v = (a as Record<string, unknown>)[k];
    if (v === undefined) continue;
    count++;
    if (!Object.hasOwn(bo, k) || !sameJson(v, bo[k])) return false;
  }
  let bCount = 0;
  for (const _ in bo) bCount++;
  return count === bCount;
}

/**
 * Where an object's JsonSource is kept: a non-enumerable property under a
 * private symbol, on the object itself. Nothing that reads a body sees it
 * (JSON.stringify, for-in, Object.keys, valibot and structuredClone skip
 * symbols) and nothing that copies one takes it along (a spread or
 * Object.assign copies enumerable properties only), so a copy, like any
 * other object, has no source: what a WeakMap keyed by the object gave.
 * A WeakMap cost more: every request put two or three young objects into
 * long-lived WeakMaps, and each such entry is an ephemeron that V8 records
 * on the write and revisits in every young-generation collection: a few
 * µs of CPU per small passthrough request (docs/performance.md, "Where the
 * time goes").
 */
const SOURCE = Symbol('json-source');
const SENT = Symbol('json-source-sent');

function attach(value: object, key: symbol, source: JsonSource | undefined): void {
  Object.defineProperty(value, key, { value: source, writable: true, configurable: true, enumerable: false });
}

function attached(value: object, key: symbol): JsonSource | undefined {
  return Object.hasOwn(value, key) ? ((value as Record<symbol, JsonSource | undefined>)[key] ?? undefined) : undefined;
}

/**
 * Mark `body` (about to be sent to a provider, possibly after plugins changed
 * it) as derived from the client's request `source`: serialiseBody may then
 * write it from the client's bytes.
 */
export function derivedFrom<T extends object>(body: T, source: JsonSource | undefined): T {
  if (source && Object.isExtensible(body)) attach(body, SENT, source);
  return body;
}

/**
 * `body` as JSON bytes: from the client's bytes when it was derived from them
 * (derivedFrom), else JSON.stringify. The result parses to what
 * JSON.stringify(body) parses to.
 *
 * Always a Buffer: a string body is measured (Buffer.byteLength) and then
 * encoded again by the socket's write, whose UTF-8 encoder is the slow one:
 * on the 120 KB agent conversation translated to Anthropic the write of the
 * string cost about twice the JSON.parse of the request, Buffer.from once
 * about as much as the parse.
 */
export function serialiseBody(body: object): Buffer {
  const source = attached(body, SENT);
  if (source) {
    // Once: a stream's request object may live as long as the stream, the client's bytes need not.
    attach(body, SENT, undefined);
    const patched = patch(source, body as Record<string, unknown>);
    if (patched) return patched;
  }
  return utf8(JSON.stringify(body));
}

const encoder = new TextEncoder();
/** Below this many UTF-16 units Buffer.from is as fast, and takes its memory from Node's pool. */
const ENCODE_INTO_MIN = 16 * 1024;

/**
 * `text` as UTF-8 bytes: Buffer.from(text), faster for a large string.
 * Buffer.from measures the string first and then encodes it, both with V8's
 * per-character encoder where the string holds any character beyond Latin-1
 * (one typographic quote in a conversation is enough); TextEncoder.encodeInto
 * encodes in one pass with simdutf. On the benchmark's translated agent
 * conversations (120 and 400 KB) 30-37% less time than Buffer.from, with or
 * without such characters; at 30 KB the same or 15% more for plain ASCII, so
 * smaller strings keep Buffer.from. The buffer is sized for mostly ASCII text
 * (1/8 more than the string's length); what does not fit is encoded after.
 */
export function utf8(text: string): Buffer {
  if (text.length < ENCODE_INTO_MIN) return Buffer.from(text);
  const head = Buffer.allocUnsafe(text.length + (text.length >> 3) + 16);
  const first = encoder.encodeInto(text, head);
  if (first.read === text.length) return head.subarray(0, first.written);
  // encodeInto stops between characters, never inside a surrogate pair. At most 3 bytes per UTF-16 unit.
  const rest = text.slice(first.read);
  const tail = Buffer.allocUnsafe(rest.length * 3);
  const second = encoder.encodeInto(rest, tail);
  return Buffer.concat([head.subarray(0, first.written), tail.subarray(0, second.written)], first.written + second.written);
}

const COMMA = Buffer.from(',');
const OPEN = Buffer.from('{');
const CLOSE = Buffer.from('}');

/** The client's bytes with `out`'s changes, or undefined when they cannot be used. */
export function patch(source: JsonSource, out: Record<string, unknown>): Buffer | undefined {
  if (source.members === undefined) source.members = scanJson(source.bytes, 0).members;
  const members = source.members;
  if (!members) return undefined;
  const parsed = source.parsed;
  const parts: Buffer[] = [OPEN];
  let copied = 0;
  const seen = new Set<string>();
  const add = (key: string, value: unknown) => {
    const json = JSON.stringify(value);
    if (json === undefined) return;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(utf8(`${JSON.stringify(key)}:${json}`));
  };
  for (const m of members) {
    seen.add(m.key);
    if (!Object.hasOwn(out, m.key)) continue;
    const v = out[m.key];
    if (sameJson(v, parsed[m.key])) {
      if (parts.length > 1) parts.push(COMMA);
      parts.push(source.bytes.subarray(m.start, m.valueEnd));
      copied++;
    } else add(m.key, v);
  }
  if (!copied) return undefined; // nothing of the client's left: no point
  for (const k in out) if (!seen.has(k)) add(k, out[k]);
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/** Remember that `value` (the parse of `bytes`, or a validated copy of it) came from the client's `bytes`. */
export function rememberSource(value: object, source: JsonSource): void {
  if (Object.isExtensible(value)) attach(value, SOURCE, source);
}

/** The client's bytes behind a request body (rememberSource), if known. */
export function sourceOf(value: object): JsonSource | undefined {
  return attached(value, SOURCE);
}
