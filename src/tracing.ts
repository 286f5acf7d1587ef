// OpenTelemetry traces, behind `telemetry.otlp_endpoint`: one SERVER span per
// model request and one CLIENT span per upstream attempt, with the GenAI
// semantic conventions' attributes
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/),
// exported as OTLP/HTTP JSON (https://opentelemetry.io/docs/specs/otlp/) in
// batches, off the request path (a full queue or a slow collector drops
// spans, counted). A client's W3C `traceparent`
// (https://www.w3.org/TR/trace-context/) is honoured: the request span joins
// its trace. It is sent upstream (the attempt span as parent) only when
// `telemetry.traces.propagate_upstream` allows it. docs/observability.md, "Traces".
import { randomHex } from './random.js';
import { operationName, providerName } from './genai-names.js';
import type { Pool } from 'undici';
import type { Logger } from 'pino';
import type { RequestRecord } from './usage.js';
import type { GatewayConfig } from './config/load.js';
import { undiciPool } from './lazy.js';

/** A request's place in a trace: its trace id, its own span id, and the client's span (the parent), if any. */
export interface TraceContext {
  trace_id: string;
  span_id: string;
  parent_span_id?: string;
  /** The client's sampled flag (W3C trace-flags); without a traceparent, true. */
  sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/** A W3C traceparent header, or undefined when it is absent or invalid (all-zero ids, version ff). */
export function parseTraceparent(h: string | string[] | undefined): { traceId: string; parentId: string; sampled: boolean } | undefined {
  const v = Array.isArray(h) ? h[0] : h;
  if (!v) return undefined;
  const m = TRACEPARENT.exec(v.trim().toLowerCase());
  if (!m || m[1] === 'ff' || /^0+$/.test(m[2]) || /^0+$/.test(m[3])) return undefined;
  if (m[1] === '00' && v.trim().length !== 55) return undefined;
  return { traceId: m[2], parentId: m[3], sampled: (parseInt(m[4], 16) & 1) === 1 };
}

// Ids come from a pool of random bytes (src/random.ts): one randomBytes()
// call per id cost more than the rest of a span's making.
export const spanId = (): string => randomHex(8);

/**
 * The trace context of a new request: the client's trace when it sent a
 * valid traceparent (sampled as the client says), else a new one, sampled
 * with probability `sampleRatio` (telemetry.traces.sample_ratio): OpenTelemetry's
 * default sampler, ParentBased(TraceIdRatioBased), which decides from the
 * trace id, so that every service using the same ratio keeps the same traces.
 */
export function traceContext(header: string | string[] | undefined, sampleRatio = 1): TraceContext {
  const p = parseTraceparent(header);
  if (p) return { trace_id: p.traceId, span_id: spanId(), parent_span_id: p.parentId, sampled: p.sampled };
  const traceId = randomHex(16);
  return { trace_id: traceId, span_id: spanId(), sampled: sampleRatio >= 1 || idRatio(traceId) < sampleRatio };
}

/** A trace id's last 52 bits (of the 64 TraceIdRatioBased reads) as a fraction of their range: uniform in [0, 1). */
const idRatio = (traceId: string) => parseInt(traceId.slice(-13), 16) / 2 ** 52;

/** The traceparent an upstream call carries: this trace, the attempt's span as parent. */
export function traceparentOf(trace: TraceContext, attemptSpan: string): string {
  return `00-${trace.trace_id}-${attemptSpan}-${trace.sampled ? '01' : '00'}`;
}

// Spans are encoded straight into the body of the next export, from pieces
// encoded once per route (the attributes and names that depend only on the
// endpoint, models, provider and deployment) and the request's own values:
// an object per span and per attribute, then JSON.stringify of the batch, cost
// several times more (docs/observability.md, "Traces"). Two encodings, as
// `telemetry.traces.protocol` says: OTLP protobuf (the default, as in
// OpenTelemetry's SDKs: about a third of the bytes, and no text to build and
// re-encode) and OTLP/JSON. Both are written by the same walk over a record
// (writeSpans), through the SpanEncoder interface.

/** An attribute's value; undefined, null and '' leave the attribute out. */
type AttrValue = string | number | boolean | undefined | null;

/** The OTLP fields of a span before its attributes. */
interface SpanHead {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  kind: number;
  /** Milliseconds since the epoch, fractional. */
  startMs: number;
  endMs: number;
}

/**
 * One encoding of spans. `P` is a piece encoded once per route (a span's name,
 * a run of attributes). A span is `begin`, then attributes (`piece`, `attr`)
 * in order, then `end`; `take` hands over what the spans encoded since the
 * last take, and `batch` wraps a batch's spans into an export request body.
 */
interface SpanEncoder<P> {
  readonly contentType: string;
  name(name: string): P;
  attrs(list: [string, AttrValue][]): P;
  begin(h: SpanHead, name: P): void;
  piece(p: P): void;
  attr(key: string, v: AttrValue): void;
  end(error: string | undefined, failed: boolean): void;
  /** The spans encoded since the last take: their bytes (written at `into`, grown as needed), returned with the end offset. */
  takeInto(into: Buffer, at: number, first: boolean): { buf: Buffer; at: number };
  /** Bytes the spans since the last take need at most, separators included. */
  pending(): number;
  /** Bytes kept free before a batch's first span, and the most its suffix takes. */
  readonly headRoom: number;
  readonly tailRoom: number;
  /** A sealed batch's bytes before its spans (at most headRoom) and after them, for `spansBytes` bytes of spans. */
  wrap(spansBytes: number): { prefix: Buffer; suffix: Buffer };
}

/** A JSON string literal (names and ids a client or an operator chose may need escaping). */
const str = JSON.stringify as (s: string) => string;

/** Milliseconds since the epoch (fractional) as OTLP's nanosecond string; microseconds stay exact below 2^53. */
const nanos = (ms: number) => {
  const us = Math.round(ms * 1000);
  return us === 0 ? '0' : `${us}000`;
};

const STATUS_ERROR = 2;

/** OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): text, written into the batch as UTF-8. */
class JsonSpans implements SpanEncoder<string> {
  readonly contentType = 'application/json';
  private text = '';
  /** Attributes of the span being written so far (its list starts without a comma). */
  private open = false;
  name(name: string): string {
    return str(name);
  }
  attrs(list: [string, AttrValue][]): string {
    return list.map(([k, v]) => JsonSpans.attr(k, v)).join('');
  }
  /**
   * One OTLP attribute, with its leading comma; nothing for a value left out:
   * strings as stringValue, booleans as boolValue, integers as intValue (a
   * decimal string, as OTLP/JSON writes 64-bit integers), other numbers as
   * doubleValue.
   */
  static attr(key: string, v: AttrValue): string {
    if (v === undefined || v === null || v === '') return '';
    if (typeof v === 'string') return `,{"key":"${key}","value":{"stringValue":${str(v)}}}`;
    if (typeof v === 'boolean') return `,{"key":"${key}","value":{"boolValue":${v}}}`;
    if (Number.isInteger(v)) return `,{"key":"${key}","value":{"intValue":"${v}"}}`;
    return `,{"key":"${key}","value":{"doubleValue":${JSON.stringify(v)}}}`;
  }
  begin(h: SpanHead, name: string): void {
    this.text +=
      `${this.text ? ',' : ''}{"traceId":"${h.traceId}","spanId":"${h.spanId}"${h.parentSpanId === undefined ? '' : `,"parentSpanId":"${h.parentSpanId}"`},"name":${name},"kind":${h.kind},` +
      `"startTimeUnixNano":"${nanos(h.startMs)}","endTimeUnixNano":"${nanos(h.endMs)}","attributes":[`;
    this.open = false;
  }
  piece(p: string): void {
    this.add(p);
  }
  attr(key: string, v: AttrValue): void {
    this.add(JsonSpans.attr(key, v));
  }
  private add(a: string): void {
    if (!a) return;
    this.text += this.open ? a : a.slice(1);
    this.open = true;
  }
  end(error: string | undefined, failed: boolean): void {
    const status = failed ? (error === undefined ? `{"code":${STATUS_ERROR}}` : `{"code":${STATUS_ERROR},"message":${str(error)}}`) : '{"code":0}';
    this.text += `],"status":${status}}`;
  }
  pending(): number {
    // At most 3 UTF-8 bytes per UTF-16 unit, and a comma.
    return this.text.length * 3 + 1;
  }
  takeInto(into: Buffer, at: number, first: boolean): { buf: Buffer; at: number } {
    if (!first) into[at++] = 0x2c; // ,
    at += into.write(this.text, at, 'utf8');
    this.text = '';
    return { buf: into, at };
  }
  /** The export request's body around a batch's spans. */
  private static readonly WRAP = {
    prefix: Buffer.from(
      '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"model-gateway"}}]},"scopeSpans":[{"scope":{"name":"model-gateway"},"spans":[',
    ),
    suffix: Buffer.from(']}]}]}'),
  };
  readonly headRoom = JsonSpans.WRAP.prefix.length;
  readonly tailRoom = JsonSpans.WRAP.suffix.length;
  wrap(): { prefix: Buffer; suffix: Buffer } {
    return JsonSpans.WRAP;
  }
}

/** Bytes of a protobuf varint. */
const varintLen = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : Math.ceil(Math.log2(n + 1) / 7));

/** The value of each lowercase hex digit, by character code. */
const HEX = new Uint8Array(128);
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = i;

/** A growable buffer that protobuf fields are written into. */
class PbWriter {
  buf = Buffer.allocUnsafe(4096);
  at = 0;
  room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(grown, 0, 0, this.at);
    this.buf = grown;
  }
  /** A varint (0 ≤ n < 2^53); room for it made by the caller. */
  varint(n: number): void {
    const b = this.buf;
    while (n >= 0x80) {
      b[this.at++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    b[this.at++] = n;
  }
  bytes(p: Uint8Array): void {
    this.room(p.length);
    this.buf.set(p, this.at);
    this.at += p.length;
  }
  /** A length-delimited field: its tag, then the UTF-8 of `s`. */
  string(tag: number, s: string): void {
    const len = s.length;
    // Short ASCII (ids, names, error types) is copied here: a call into
    // Buffer's native write costs more than the copy.
    if (len < 0x80) {
      this.room(2 + len);
      const b = this.buf;
      let at = this.at + 2;
      let i = 0;
      for (; i < len; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[at++] = c;
      }
      if (i === len) {
        b[this.at] = tag;
        b[this.at + 1] = len;
        this.at = at;
        return;
      }
    }
    const n = Buffer.byteLength(s);
    this.room(11 + n);
    this.buf[this.at++] = tag;
    this.varint(n);
    this.at += this.buf.write(s, this.at, 'utf8');
  }
  /** A fixed64 field of nanoseconds from fractional milliseconds (exact to the microsecond). */
  nanos(tag: number, ms: number): void {
    this.room(9);
    this.buf[this.at++] = tag;
    const us = Math.max(0, Math.round(ms * 1000));
    // us × 1000 passes 2^53: split it in 32-bit halves first.
    const lo = (us % 0x100000000) * 1000;
    this.buf.writeUInt32LE(lo % 0x100000000, this.at);
    this.buf.writeUInt32LE(Math.floor(us / 0x100000000) * 1000 + Math.floor(lo / 0x100000000), this.at + 4);
    this.at += 8;
  }
  /** A bytes field from lowercase hex (the ids: traceContext and spanId make and check them). */
  hex(tag: number, hex: string): void {
    const n = hex.length >> 1;
    this.room(2 + n);
    const b = this.buf;
    b[this.at++] = tag;
    b[this.at++] = n;
    for (let i = 0; i < hex.length; i += 2) b[this.at++] = (HEX[hex.charCodeAt(i)] << 4) | HEX[hex.charCodeAt(i + 1)];
  }
}

// Field tags (field number << 3 | wire type) of the OTLP trace protos
// (opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto).
const PB = {
  resourceSpans: 0x0a, // ExportTraceServiceRequest.resource_spans = 1
  resource: 0x0a, // ResourceSpans.resource = 1
  scopeSpans: 0x12, // ResourceSpans.scope_spans = 2
  resourceAttr: 0x0a, // Resource.attributes = 1
  scope: 0x0a, // ScopeSpans.scope = 1
  span: 0x12, // ScopeSpans.spans = 2
  scopeName: 0x0a, // InstrumentationScope.name = 1
  traceId: 0x0a, // Span.trace_id = 1
  spanId: 0x12, // Span.span_id = 2
  parentSpanId: 0x22, // Span.parent_span_id = 4
  name: 0x2a, // Span.name = 5
  kind: 0x30, // Span.kind = 6
  start: 0x39, // Span.start_time_unix_nano = 7 (fixed64)
  end: 0x41, // Span.end_time_unix_nano = 8 (fixed64)
  attribute: 0x4a, // Span.attributes = 9
  status: 0x7a, // Span.status = 15
  statusMessage: 0x12, // Status.message = 2
  statusCode: 0x18, // Status.code = 3
  key: 0x0a, // KeyValue.key = 1
  value: 0x12, // KeyValue.value = 2
  stringValue: 0x0a, // AnyValue.string_value = 1
  boolValue: 0x10, // AnyValue.bool_value = 2
  intValue: 0x18, // AnyValue.int_value = 3
  doubleValue: 0x21, // AnyValue.double_value = 4 (fixed64)
} as const;

/** OTLP protobuf (https://opentelemetry.io/docs/specs/otlp/#binary-protobuf-encoding): each span written, then copied behind its tag and length. */
class ProtoSpans implements SpanEncoder<Buffer> {
  readonly contentType = 'application/x-protobuf';
  /** The span being written (its fields), then the spans taken so far (tag, length, fields). */
  private span = new PbWriter();
  private done = new PbWriter();
  /** The encoded `key` field of each attribute name (names are the code's own: few). */
  private keys = new Map<string, Buffer>();
  name(name: string): Buffer {
    const w = new PbWriter();
    w.string(PB.name, name);
    return Buffer.from(w.buf.subarray(0, w.at));
  }
  attrs(list: [string, AttrValue][]): Buffer {
    const saved = this.span;
    const w = (this.span = new PbWriter());
    for (const [k, v] of list) this.attr(k, v);
    this.span = saved;
    return Buffer.from(w.buf.subarray(0, w.at));
  }
  begin(h: SpanHead, name: Buffer): void {
    const w = this.span;
    w.at = 0;
    w.hex(PB.traceId, h.traceId);
    w.hex(PB.spanId, h.spanId);
    if (h.parentSpanId !== undefined) w.hex(PB.parentSpanId, h.parentSpanId);
    w.bytes(name);
    w.room(2);
    w.buf[w.at++] = PB.kind;
    w.buf[w.at++] = h.kind;
    w.nanos(PB.start, h.startMs);
    w.nanos(PB.end, h.endMs);
  }
  piece(p: Buffer): void {
    this.span.bytes(p);
  }
  private key(k: string): Buffer {
    let b = this.keys.get(k);
    if (!b) {
      const w = new PbWriter();
      w.string(PB.key, k);
      this.keys.set(k, (b = Buffer.from(w.buf.subarray(0, w.at))));
    }
    return b;
  }
  /** A KeyValue: strings, booleans, integers in [0, 2^53) as int_value, other numbers as double_value (as the JSON encoding). */
  attr(k: string, v: AttrValue): void {
    if (v === undefined || v === null || v === '') return;
    const key = this.key(k);
    const w = this.span;
    if (typeof v === 'string') {
      const n = Buffer.byteLength(v);
      const any = 1 + varintLen(n) + n;
      w.room(key.length + any + 12);
      w.buf[w.at++] = PB.attribute;
      w.varint(key.length + 1 + varintLen(any) + any);
      w.bytes(key);
      w.buf[w.at++] = PB.value;
      w.varint(any);
      w.string(PB.stringValue, v);
      return;
    }
    w.room(key.length + 16);
    if (typeof v === 'boolean') {
      w.buf[w.at++] = PB.attribute;
      w.varint(key.length + 4);
      w.bytes(key);
      w.buf[w.at++] = PB.value;
      w.buf[w.at++] = 2;
      w.buf[w.at++] = PB.boolValue;
      w.buf[w.at++] = v ? 1 : 0;
    } else if (Number.isSafeInteger(v) && v >= 0) {
      const any = 1 + varintLen(v);
      w.buf[w.at++] = PB.attribute;
      w.varint(key.length + 2 + any);
      w.bytes(key);
      w.buf[w.at++] = PB.value;
      w.buf[w.at++] = any;
      w.buf[w.at++] = PB.intValue;
      w.varint(v);
    } else {
      w.buf[w.at++] = PB.attribute;
      w.varint(key.length + 2 + 9);
      w.bytes(key);
      w.buf[w.at++] = PB.value;
      w.buf[w.at++] = 9;
      w.buf[w.at++] = PB.doubleValue;
      w.buf.writeDoubleLE(v, w.at);
      w.at += 8;
    }
  }
  end(error: string | undefined, failed: boolean): void {
    // An unset status (code 0) is the message's default: left out.
    if (failed) {
      const w = this.span;
      const msg = error === undefined ? 0 : Buffer.byteLength(error);
      const len = 2 + (error === undefined ? 0 : 1 + varintLen(msg) + msg);
      w.room(2 + len + 8);
      w.buf[w.at++] = PB.status;
      w.varint(len);
      if (error !== undefined) w.string(PB.statusMessage, error);
      w.buf[w.at++] = PB.statusCode;
      w.buf[w.at++] = STATUS_ERROR;
    }
    // The span behind its tag and length, after the request's other spans.
    const d = this.done;
    d.room(6 + this.span.at);
    d.buf[d.at++] = PB.span;
    d.varint(this.span.at);
    d.at += this.span.buf.copy(d.buf, d.at, 0, this.span.at);
  }
  pending(): number {
    return this.done.at;
  }
  takeInto(into: Buffer, at: number): { buf: Buffer; at: number } {
    at += this.done.buf.copy(into, at, 0, this.done.at);
    this.done.at = 0;
    return { buf: into, at };
  }
  /**
   * The bytes before a batch's spans are the enclosing messages' tags and
   * lengths, known only when the batch is sealed (`wrap` gives them, written
   * just before the spans, in the room left there); the resource and scope
   * are fixed.
   */
  private static readonly RESOURCE = (() => {
    const p = new ProtoSpans();
    const attrs = p.attrs([['service.name', 'model-gateway']]);
    const w = new PbWriter();
    // Resource { attributes }: the attribute was written as a Span.attributes field (tag 9); Resource's is field 1.
    const resource = Buffer.from(attrs);
    resource[0] = PB.resourceAttr;
    w.room(resource.length + 16);
    w.buf[w.at++] = PB.resource;
    w.varint(resource.length);
    w.bytes(resource);
    return Buffer.from(w.buf.subarray(0, w.at));
  })();
  private static readonly SCOPE = (() => {
    const w = new PbWriter();
    const name = Buffer.from('model-gateway');
    w.room(32);
    w.buf[w.at++] = PB.scope;
    w.varint(name.length + 2);
    w.buf[w.at++] = PB.scopeName;
    w.varint(name.length);
    w.bytes(name);
    return Buffer.from(w.buf.subarray(0, w.at));
  })();
  get headRoom(): number {
    return 32 + ProtoSpans.RESOURCE.length + ProtoSpans.SCOPE.length;
  }
  readonly tailRoom = 0;
  private static readonly NONE = Buffer.alloc(0);
  wrap(spansBytes: number): { prefix: Buffer; suffix: Buffer } {
    const scopeSpans = ProtoSpans.SCOPE.length + spansBytes;
    const resourceSpans = ProtoSpans.RESOURCE.length + 1 + varintLen(scopeSpans) + scopeSpans;
    const w = new PbWriter();
    w.room(32 + ProtoSpans.RESOURCE.length + ProtoSpans.SCOPE.length);
    w.buf[w.at++] = PB.resourceSpans;
    w.varint(resourceSpans);
    w.bytes(ProtoSpans.RESOURCE);
    w.buf[w.at++] = PB.scopeSpans;
    w.varint(scopeSpans);
    w.bytes(ProtoSpans.SCOPE);
    return { prefix: Buffer.from(w.buf.subarray(0, w.at)), suffix: ProtoSpans.NONE };
  }
}

const SPAN_KIND = { server: 2, client: 3 } as const;

/** Pieces made once per tuple of names (config names: bounded), in nested maps; undefined is a key like any other. */
class Pieces<V> {
  private root = new Map<string | undefined, unknown>();
  private size = 0;
  constructor(private readonly max = 10_000) {}
  get(parts: readonly (string | undefined)[], make: () => V): V {
    let m = this.root;
    const last = parts.length - 1;
    for (let i = 0; i < last; i++) {
      let next = m.get(parts[i]) as Map<string | undefined, unknown> | undefined;
      if (!next) m.set(parts[i], (next = new Map()));
      m = next;
    }
    let v = m.get(parts[last]) as V | undefined;
    if (v === undefined) {
      v = make();
      // A bound, although config names are few: past it, start again.
      if (++this.size > this.max) {
        this.root = new Map();
        this.size = 0;
      } else m.set(parts[last], v);
    }
    return v;
  }
}

const familyName = (family: string | undefined) => (family ? providerName(family) : undefined);

/** An encoder with its route pieces: a request span's name, attributes before its usage and between its request id and attempts; an attempt span's name and attributes. */
class RouteEncoder<P> {
  readonly server = new Pieces<{ name: P; head: P; route: P }>();
  readonly attempt = new Pieces<{ name: P; attrs: P }>();
  constructor(readonly enc: SpanEncoder<P>) {}
}

/**
 * A finished request's spans (the request, then each upstream attempt),
 * encoded by `e`; how many there are (0 for a request without a trace).
 */
function writeSpans<P>(e: RouteEncoder<P>, r: RequestRecord, config: GatewayConfig): number {
  const t = r.trace;
  if (!t) return 0;
  const enc = e.enc;
  const family = (name?: string) => (name ? config.providers.get(name)?.family : undefined);
  const op = operationName(r.endpoint);
  const fam = family(r.provider);
  const p = e.server.get([r.endpoint, fam, r.requested_model, r.model, r.provider, r.deployment], () => ({
    name: enc.name(r.requested_model ? `${op} ${r.requested_model}` : op),
    head: enc.attrs([
      ['gen_ai.operation.name', op],
      ['gen_ai.provider.name', familyName(fam)],
      ['gen_ai.request.model', r.requested_model],
      ['gen_ai.response.model', r.model],
    ]),
    route: enc.attrs([
      ['gateway.endpoint', r.endpoint],
      ['gateway.provider', r.provider],
      ['gateway.deployment', r.deployment],
    ]),
  }));
  const failed = r.status >= 400 || (!!r.error_type && r.error_type !== 'client_closed');
  const u = r.usage;
  enc.begin({ traceId: t.trace_id, spanId: t.span_id, parentSpanId: t.parent_span_id, kind: SPAN_KIND.server, startMs: r.time, endMs: r.time + r.latency_ms }, p.name);
  enc.piece(p.head);
  enc.attr('gen_ai.usage.input_tokens', u?.input_tokens);
  enc.attr('gen_ai.usage.output_tokens', u?.output_tokens);
  enc.attr('gen_ai.usage.cache_read.input_tokens', u?.cached_input_tokens || undefined);
  enc.attr('gen_ai.usage.cache_creation.input_tokens', u?.cache_write_tokens || undefined);
  enc.attr('gateway.request_id', r.request_id);
  enc.piece(p.route);
  enc.attr('gateway.attempts', r.attempts);
  enc.attr('gateway.cost_usd', r.cost_usd ?? undefined);
  enc.attr('gateway.usage_partial', r.usage_source === 'partial' ? true : undefined);
  enc.attr('gateway.stream', r.stream);
  enc.attr('gateway.ttfb_ms', r.ttfb_ms);
  enc.attr('http.response.status_code', r.status);
  enc.attr('error.type', failed ? (r.status >= 400 ? String(r.status) : r.error_type) : undefined);
  enc.end(r.error_type, failed);
  let count = 1;
  for (const a of r.attempt_spans ?? []) {
    const f = family(a.provider);
    const ap = e.attempt.get([r.endpoint, f, a.deployment, a.model, a.provider], () => ({
      name: enc.name(`${op} ${a.deployment}`),
      attrs: enc.attrs([
        ['gen_ai.operation.name', op],
        ['gen_ai.provider.name', familyName(f)],
        ['gen_ai.request.model', a.deployment],
        ['gateway.model', a.model],
        ['gateway.provider', a.provider],
      ]),
    }));
    enc.begin({ traceId: t.trace_id, spanId: a.span_id, parentSpanId: t.span_id, kind: SPAN_KIND.client, startMs: a.start, endMs: a.start + a.duration_ms }, ap.name);
    enc.piece(ap.attrs);
    enc.attr('error.type', a.error_type);
    enc.end(a.error_type, !!a.error_type);
    count++;
  }
  return count;
}

export type TraceProtocol = 'http/protobuf' | 'http/json';

/** An encoder per protocol, with its route pieces (module-wide: the pieces depend only on names). */
const encoders = new Map<TraceProtocol, RouteEncoder<unknown>>();
function encoderFor(protocol: TraceProtocol): RouteEncoder<unknown> {
  let e = encoders.get(protocol);
  if (!e) encoders.set(protocol, (e = new RouteEncoder<unknown>((protocol === 'http/json' ? new JsonSpans() : new ProtoSpans()) as SpanEncoder<unknown>)));
  return e;
}

/** A batch's first buffer (bytes); grown when its spans need more. */
const BATCH_BYTES = 256 * 1024;
/**
 * Batch buffers kept for reuse once their export is answered: a new one
 * each batch is, past glibc's mmap threshold (the image sets 128 KiB), a
 * fresh mapping whose pages fault in as spans are written, then unmapped.
 */
const SPARE_BATCHES = 2;

/**
 * The exporter: spans are encoded into the body of the next export as each
 * request's response closes (no span objects wait, a batch long, in a queue),
 * and POSTed to the collector in batches, one export at a time, each bounded
 * by a timeout; what does not fit or fails is dropped and counted.
 */
export class TraceExporter {
  /** The batch being filled: its encoder, its body so far (spans from the encoder's headRoom), the bytes used, its spans. */
  private enc: SpanEncoder<unknown> | undefined;
  private batch: Buffer | undefined;
  private used = 0;
  private batchSpans = 0;
  /** Batches waiting for their export: the body, within `whole`, the batch's buffer. */
  private ready: { body: Buffer; whole: Buffer; spans: number; contentType: string }[] = [];
  /** Buffers of batches whose export was answered, for the next batches. */
  private spare: Buffer[] = [];
  /** Spans waiting (ready batches and the one being filled). */
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  readonly stats = { exported: 0, dropped: 0 };
  private readonly url: string;
  /** Keep-alive connections to the collector, made on the first export. */
  private pool: Pool | undefined;
  private lastLog = 0;

  constructor(
    endpoint: string,
    private readonly config: () => GatewayConfig,
    private readonly logger: Logger,
    private readonly opts = { queueSize: 20_000, batchSize: 512, flushMs: 1_000, timeoutMs: 10_000 },
  ) {
    this.url = endpoint.replace(/\/+$/, '').endsWith('/v1/traces') ? endpoint : endpoint.replace(/\/+$/, '') + '/v1/traces';
  }

  /** A finished request's record (a RecordSink): its spans, unless the client's trace is not sampled. */
  record(r: RequestRecord): void {
    if (!r.trace?.sampled) return;
    const count = 1 + (r.attempt_spans?.length ?? 0);
    if (this.queued + count > this.opts.queueSize) {
      this.drop(count, 'the span queue is full');
      return;
    }
    const config = this.config();
    const e = encoderFor(config.telemetry.traces.protocol);
    // A request's spans travel together, in batches of at most batchSize spans (unless one request has more), of one encoding.
    if (this.batchSpans && (this.batchSpans + count > this.opts.batchSize || this.enc !== e.enc)) this.seal();
    writeSpans(e, r, config);
    this.append(e.enc, count);
    if (this.batchSpans >= this.opts.batchSize) this.seal();
    if (this.ready.length) this.kick();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flushMs);
      this.timer.unref();
    }
  }

  /** Move a request's spans from the encoder into the batch being filled. */
  private append(enc: SpanEncoder<unknown>, count: number): void {
    const room = enc.pending() + enc.tailRoom;
    if (!this.batch) {
      this.enc = enc;
      const need = Math.max(BATCH_BYTES, enc.headRoom + room);
      const spare = this.spare.pop();
      this.batch = spare && spare.length >= need ? spare : Buffer.allocUnsafe(need);
      this.used = enc.headRoom;
    } else if (this.used + room > this.batch.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.batch.length * 2, this.used + room));
      this.batch.copy(grown, 0, 0, this.used);
      this.batch = grown;
    }
    this.used = enc.takeInto(this.batch, this.used, this.batchSpans === 0).at;
    this.batchSpans += count;
    this.queued += count;
  }

  /** The batch being filled is complete: it waits for its export. */
  private seal(): void {
    if (!this.batch || !this.enc) return;
    const { prefix, suffix } = this.enc.wrap(this.used - this.enc.headRoom);
    const from = this.enc.headRoom - prefix.length;
    prefix.copy(this.batch, from);
    this.used += suffix.copy(this.batch, this.used);
    this.ready.push({ body: this.batch.subarray(from, this.used), whole: this.batch, spans: this.batchSpans, contentType: this.enc.contentType });
    this.batch = undefined;
    this.used = 0;
    this.batchSpans = 0;
  }

  private drop(n: number, why: string): void {
    this.stats.dropped += n;
    const now = Date.now();
    if (now - this.lastLog >= 10_000) {
      this.lastLog = now;
      this.logger.warn({ dropped_total: this.stats.dropped }, `trace spans dropped: ${why}`);
    }
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending) return;
    if (!this.ready.length) this.seal();
    const next = this.ready.shift();
    if (!next) return;
    this.queued -= next.spans;
    this.sending = this.send(next.body, next.spans, next.contentType).then((accepted) => {
      // Its bytes were all read: the buffer takes a later batch.
      if (accepted && this.spare.length < SPARE_BATCHES) this.spare.push(next.whole);
      this.sending = undefined;
      // Full batches go at once; a partial one waits for its flush timer
      // (or more spans): sealing it now would make every export as small as
      // what arrived during the last one.
      if (this.ready.length) this.kick();
      else if (this.queued && !this.timer) {
        this.timer = setTimeout(() => this.kick(), this.opts.flushMs);
        this.timer.unref();
      }
    });
  }

  /**
   * Export one batch; whether the collector accepted it (a 2xx: it has read
   * the whole body, so nothing of it is still being written).
   */
  private async send(body: Buffer, spans: number, contentType: string): Promise<boolean> {
    try {
      const url = new URL(this.url);
      this.pool ??= new (undiciPool())(url.origin);
      const res = await this.pool.request({
        path: url.pathname + url.search,
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      await res.body.dump();
      if (res.statusCode >= 300) throw new Error(`the collector answered ${res.statusCode}`);
      this.stats.exported += spans;
      return true;
    } catch (err) {
      this.drop(spans, `the export failed (${(err as Error).message})`);
      return false;
    }
  }

  /** Hands this exporter the records finished but not yet recorded (RecordFinisher.drain): flush() calls it first. */
  drainFirst?: () => void;

  /** Export what is queued (tests, shutdown). */
  async flush(): Promise<void> {
    this.drainFirst?.();
    while (this.sending || this.queued) {
      if (!this.sending) this.kick();
      await this.sending;
    }
  }
}
