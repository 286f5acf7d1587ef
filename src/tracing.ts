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
import { request } from 'undici';
import type { Logger } from 'pino';
import type { RequestRecord } from './usage.js';
import type { GatewayConfig } from './config/load.js';

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

type Attr = { key: string; value: { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean } };

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attr[];
  status: { code: number; message?: string };
}

function attrs(o: Record<string, string | number | boolean | undefined | null>): Attr[] {
  const out: Attr[] = [];
  for (const key in o) {
    const v = o[key];
    if (v === undefined || v === null || v === '') continue;
    if (typeof v === 'string') out.push({ key, value: { stringValue: v } });
    else if (typeof v === 'boolean') out.push({ key, value: { boolValue: v } });
    else if (Number.isInteger(v)) out.push({ key, value: { intValue: String(v) } });
    else out.push({ key, value: { doubleValue: v } });
  }
  return out;
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

/** A finished request's spans: the request, then each upstream attempt. */
export function spansOf(r: RequestRecord, config: GatewayConfig): OtlpSpan[] {
  const t = r.trace;
  if (!t) return [];
  const family = (name?: string) => (name ? config.providers.get(name)?.family : undefined);
  const op = OPERATION[r.endpoint] ?? r.endpoint;
  const fam = family(r.provider);
  const failed = r.status >= 400 || (!!r.error_type && r.error_type !== 'client_closed');
  const spans: OtlpSpan[] = [
    {
      traceId: t.trace_id,
      spanId: t.span_id,
      parentSpanId: t.parent_span_id,
      name: r.requested_model ? `${op} ${r.requested_model}` : op,
      kind: SPAN_KIND.server,
      startTimeUnixNano: nanos(r.time),
      endTimeUnixNano: nanos(r.time + r.latency_ms),
      attributes: attrs({
        'gen_ai.operation.name': op,
        'gen_ai.provider.name': fam ? (PROVIDER_NAME[fam] ?? fam) : undefined,
        'gen_ai.request.model': r.requested_model,
        'gen_ai.response.model': r.model,
        'gen_ai.usage.input_tokens': r.usage?.input_tokens,
        'gen_ai.usage.output_tokens': r.usage?.output_tokens,
        'gen_ai.usage.cache_read.input_tokens': r.usage?.cached_input_tokens || undefined,
        'gen_ai.usage.cache_creation.input_tokens': r.usage?.cache_write_tokens || undefined,
        'gateway.request_id': r.request_id,
        'gateway.endpoint': r.endpoint,
        'gateway.provider': r.provider,
        'gateway.deployment': r.deployment,
        'gateway.attempts': r.attempts,
        'gateway.cost_usd': r.cost_usd ?? undefined,
        'gateway.usage_partial': r.usage_source === 'partial' ? true : undefined,
        'gateway.stream': r.stream,
        'gateway.ttfb_ms': r.ttfb_ms,
        'http.response.status_code': r.status,
        'error.type': failed ? (r.status >= 400 ? String(r.status) : r.error_type) : undefined,
      }),
      status: failed ? { code: STATUS.error, message: r.error_type } : { code: STATUS.unset },
    },
  ];
  for (const a of r.attempt_spans ?? []) {
    const f = family(a.provider);
    spans.push({
      traceId: t.trace_id,
      spanId: a.span_id,
      parentSpanId: t.span_id,
      name: `${op} ${a.deployment}`,
      kind: SPAN_KIND.client,
      startTimeUnixNano: nanos(a.start),
      endTimeUnixNano: nanos(a.start + a.duration_ms),
      attributes: attrs({
        'gen_ai.operation.name': op,
        'gen_ai.provider.name': f ? (PROVIDER_NAME[f] ?? f) : undefined,
        'gen_ai.request.model': a.deployment,
        'gateway.model': a.model,
        'gateway.provider': a.provider,
        'error.type': a.error_type,
      }),
      status: a.error_type ? { code: STATUS.error, message: a.error_type } : { code: STATUS.unset },
    });
  }
  return spans;
}

/**
 * The exporter: spans join a bounded queue when a request's response closes
 * and are POSTed to the collector in batches, one export at a time, each
 * bounded by a timeout; what does not fit or fails is dropped and counted.
 */
export class TraceExporter {
  private queue: OtlpSpan[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  readonly stats = { exported: 0, dropped: 0 };
  private readonly url: string;
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
    const spans = spansOf(r, this.config());
    if (this.queue.length + spans.length > this.opts.queueSize) {
      this.drop(spans.length, 'the span queue is full');
      return;
    }
    for (const s of spans) this.queue.push(s);
    if (this.queue.length >= this.opts.batchSize) this.kick();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flushMs);
      this.timer.unref();
    }
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
    if (this.sending || !this.queue.length) return;
    const batch = this.queue.splice(0, this.opts.batchSize);
    this.sending = this.send(batch).finally(() => {
      this.sending = undefined;
      if (this.queue.length) this.kick();
    });
  }

  private async send(spans: OtlpSpan[]): Promise<void> {
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: attrs({ 'service.name': 'model-gateway' }) },
          scopeSpans: [{ scope: { name: 'model-gateway' }, spans }],
        },
      ],
    });
    try {
      const res = await request(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      await res.body.dump();
      if (res.statusCode >= 300) throw new Error(`the collector answered ${res.statusCode}`);
      this.stats.exported += spans.length;
    } catch (err) {
      this.drop(spans.length, `the export failed (${(err as Error).message})`);
    }
  }

  /** Export what is queued (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.sending || this.queue.length) {
      if (!this.sending) this.kick();
      await this.sending;
    }
  }
}
