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
import { randomFillSync } from 'node:crypto';
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

// Ids come from a pool of random bytes refilled 4 KiB at a time: one
// randomBytes() call per id cost more than the rest of a span's making.
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;
function randomHex(bytes: number): string {
  if (poolAt + bytes > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  const hex = POOL.toString('hex', poolAt, poolAt + bytes);
  poolAt += bytes;
  return hex;
}

export const spanId = (): string => randomHex(8);

/** The trace context of a new request: the client's trace when it sent a valid traceparent, else a new one. */
export function traceContext(header: string | string[] | undefined): TraceContext {
  const p = parseTraceparent(header);
  if (p) return { trace_id: p.traceId, span_id: spanId(), parent_span_id: p.parentId, sampled: p.sampled };
  return { trace_id: randomHex(16), span_id: spanId(), sampled: true };
}

/** The traceparent an upstream call carries: this trace, the attempt's span as parent. */
export function traceparentOf(trace: TraceContext, attemptSpan: string): string {
  return `00-${trace.trace_id}-${attemptSpan}-${trace.sampled ? '01' : '00'}`;
}

// Spans are written as OTLP/JSON text, one string per request, from pieces
// made once per route (the attributes and names that depend only on the
// endpoint, models, provider and deployment) and the request's own values:
// an object per span and per attribute, then JSON.stringify of the batch,
// cost several times more (docs/observability.md, "Traces").

/** A JSON string literal (names and ids a client or an operator chose may need escaping). */
const str = JSON.stringify as (s: string) => string;

/**
 * One OTLP attribute, with its leading comma; nothing for a value left out
 * (undefined, null, ''): strings as stringValue, booleans as boolValue,
 * integers as intValue (a decimal string, as OTLP/JSON writes 64-bit
 * integers), other numbers as doubleValue.
 */
function attr(key: string, v: string | number | boolean | undefined | null): string {
  if (v === undefined || v === null || v === '') return '';
  if (typeof v === 'string') return `,{"key":"${key}","value":{"stringValue":${str(v)}}}`;
  if (typeof v === 'boolean') return `,{"key":"${key}","value":{"boolValue":${v}}}`;
  if (Number.isInteger(v)) return `,{"key":"${key}","value":{"intValue":"${v}"}}`;
  return `,{"key":"${key}","value":{"doubleValue":${JSON.stringify(v)}}}`;
}

/** Milliseconds since the epoch (fractional) as OTLP's nanosecond string; microseconds stay exact below 2^53. */
const nanos = (ms: number) => {
  const us = Math.round(ms * 1000);
  return us === 0 ? '0' : `${us}000`;
};

const OPERATION: Record<string, string> = { chat_completions: 'chat', responses: 'chat', messages: 'chat', images_generations: 'generate_content' };
const PROVIDER_NAME: Record<string, string> = { openai: 'openai', azure: 'azure.ai.openai', anthropic: 'anthropic', google: 'gcp.gemini', vertex: 'gcp.vertex_ai', bedrock: 'aws.bedrock' };
const SPAN_KIND = { server: 2, client: 3 } as const;
const STATUS = { unset: 0, error: 2 } as const;

/** A span's status: unset, or error with its message (left out when there is none). */
const status = (error: string | undefined, failed: boolean) => (failed ? (error === undefined ? `{"code":${STATUS.error}}` : `{"code":${STATUS.error},"message":${str(error)}}`) : `{"code":${STATUS.unset}}`);

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

const providerName = (family: string | undefined) => (family ? (PROVIDER_NAME[family] ?? family) : undefined);

/** A request span's route pieces: its name, the attributes before its usage, and those between its request id and attempts. */
const serverPieces = new Pieces<{ name: string; head: string; route: string }>();
/** An attempt span's: its name and its attributes but the error type. */
const attemptPieces = new Pieces<{ name: string; attrs: string }>();

/**
 * A finished request's spans as OTLP/JSON span objects joined by commas (the
 * request, then each upstream attempt), and how many there are; undefined
 * for a request without a trace.
 */
export function spansJson(r: RequestRecord, config: GatewayConfig): { json: string; count: number } | undefined {
  const t = r.trace;
  if (!t) return undefined;
  const family = (name?: string) => (name ? config.providers.get(name)?.family : undefined);
  const op = OPERATION[r.endpoint] ?? r.endpoint;
  const fam = family(r.provider);
  const p = serverPieces.get([r.endpoint, fam, r.requested_model, r.model, r.provider, r.deployment], () => ({
    name: str(r.requested_model ? `${op} ${r.requested_model}` : op),
    // The operation name is never empty: the list starts with it, without a comma.
    head: (attr('gen_ai.operation.name', op) + attr('gen_ai.provider.name', providerName(fam)) + attr('gen_ai.request.model', r.requested_model) + attr('gen_ai.response.model', r.model)).slice(1),
    route: attr('gateway.endpoint', r.endpoint) + attr('gateway.provider', r.provider) + attr('gateway.deployment', r.deployment),
  }));
  const failed = r.status >= 400 || (!!r.error_type && r.error_type !== 'client_closed');
  const u = r.usage;
  const attributes =
    p.head +
    attr('gen_ai.usage.input_tokens', u?.input_tokens) +
    attr('gen_ai.usage.output_tokens', u?.output_tokens) +
    attr('gen_ai.usage.cache_read.input_tokens', u?.cached_input_tokens || undefined) +
    attr('gen_ai.usage.cache_creation.input_tokens', u?.cache_write_tokens || undefined) +
    attr('gateway.request_id', r.request_id) +
    p.route +
    attr('gateway.attempts', r.attempts) +
    attr('gateway.cost_usd', r.cost_usd ?? undefined) +
    attr('gateway.usage_partial', r.usage_source === 'partial' ? true : undefined) +
    attr('gateway.stream', r.stream) +
    attr('gateway.ttfb_ms', r.ttfb_ms) +
    attr('http.response.status_code', r.status) +
    attr('error.type', failed ? (r.status >= 400 ? String(r.status) : r.error_type) : undefined);
  let json =
    `{"traceId":"${t.trace_id}","spanId":"${t.span_id}"${t.parent_span_id === undefined ? '' : `,"parentSpanId":"${t.parent_span_id}"`},"name":${p.name},"kind":${SPAN_KIND.server},` +
    `"startTimeUnixNano":"${nanos(r.time)}","endTimeUnixNano":"${nanos(r.time + r.latency_ms)}","attributes":[${attributes}],"status":${status(r.error_type, failed)}}`;
  let count = 1;
  for (const a of r.attempt_spans ?? []) {
    const f = family(a.provider);
    const ap = attemptPieces.get([r.endpoint, f, a.deployment, a.model, a.provider], () => ({
      name: str(`${op} ${a.deployment}`),
      attrs: (attr('gen_ai.operation.name', op) + attr('gen_ai.provider.name', providerName(f)) + attr('gen_ai.request.model', a.deployment) + attr('gateway.model', a.model) + attr('gateway.provider', a.provider)).slice(1),
    }));
    json +=
      `,{"traceId":"${t.trace_id}","spanId":"${a.span_id}","parentSpanId":"${t.span_id}","name":${ap.name},"kind":${SPAN_KIND.client},` +
      `"startTimeUnixNano":"${nanos(a.start)}","endTimeUnixNano":"${nanos(a.start + a.duration_ms)}","attributes":[${ap.attrs}${attr('error.type', a.error_type)}],"status":${status(a.error_type, !!a.error_type)}}`;
    count++;
  }
  return { json, count };
}

/** The export request's body around a batch's spans (spansJson output joined by commas). */
const BODY_HEAD =
  '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"model-gateway"}}]},"scopeSpans":[{"scope":{"name":"model-gateway"},"spans":[';
const BODY_TAIL = ']}]}]}';
/** A batch's first buffer (bytes); grown when its spans need more. */
const BATCH_BYTES = 512 * 1024;

/**
 * The exporter: spans are written into the body of the next export as each
 * request's response closes (UTF-8 bytes: the request's strings become
 * garbage at once instead of waiting, a batch long, in a queue), and POSTed
 * to the collector in batches, one export at a time, each bounded by a
 * timeout; what does not fit or fails is dropped and counted.
 */
export class TraceExporter {
  /** The batch being filled: its body so far (from BODY_HEAD), the bytes used, its spans. */
  private batch: Buffer | undefined;
  private used = 0;
  private batchSpans = 0;
  /** Batches waiting for their export. */
  private ready: { body: Buffer; spans: number }[] = [];
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
    const spans = spansJson(r, this.config());
    if (!spans) return;
    if (this.queued + spans.count > this.opts.queueSize) {
      this.drop(spans.count, 'the span queue is full');
      return;
    }
    // A request's spans travel together, in batches of at most batchSize spans (unless one request has more).
    if (this.batchSpans && this.batchSpans + spans.count > this.opts.batchSize) this.seal();
    this.append(spans.json, spans.count);
    if (this.batchSpans >= this.opts.batchSize) this.seal();
    if (this.ready.length) this.kick();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flushMs);
      this.timer.unref();
    }
  }

  /** Write a request's spans into the batch being filled. */
  private append(json: string, count: number): void {
    // At most 3 UTF-8 bytes per UTF-16 unit, a comma, and the tail that seals the batch.
    const room = json.length * 3 + 1 + BODY_TAIL.length;
    if (!this.batch) {
      this.batch = Buffer.allocUnsafe(Math.max(BATCH_BYTES, BODY_HEAD.length + room));
      this.used = this.batch.write(BODY_HEAD, 0, 'latin1');
    } else if (this.used + room > this.batch.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.batch.length * 2, this.used + room));
      this.batch.copy(grown, 0, 0, this.used);
      this.batch = grown;
    }
    if (this.batchSpans) this.batch[this.used++] = 0x2c; // ,
    this.used += this.batch.write(json, this.used, 'utf8');
    this.batchSpans += count;
    this.queued += count;
  }

  /** The batch being filled is complete: it waits for its export. */
  private seal(): void {
    if (!this.batch) return;
    this.used += this.batch.write(BODY_TAIL, this.used, 'latin1');
    this.ready.push({ body: this.batch.subarray(0, this.used), spans: this.batchSpans });
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
    this.sending = this.send(next.body, next.spans).finally(() => {
      this.sending = undefined;
      if (this.queued) this.kick();
    });
  }

  private async send(body: Buffer, spans: number): Promise<void> {
    try {
      const url = new URL(this.url);
      this.pool ??= new (undiciPool())(url.origin);
      const res = await this.pool.request({
        path: url.pathname + url.search,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      await res.body.dump();
      if (res.statusCode >= 300) throw new Error(`the collector answered ${res.statusCode}`);
      this.stats.exported += spans;
    } catch (err) {
      this.drop(spans, `the export failed (${(err as Error).message})`);
    }
  }

  /** Export what is queued (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.sending || this.queued) {
      if (!this.sending) this.kick();
      await this.sending;
    }
  }
}
