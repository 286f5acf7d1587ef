// OpenTelemetry traces (issue 19, section 4), with a strict OTLP/HTTP collector
// (test/helpers/otlp-collector.ts, which decodes protobuf exports itself): a
// span per request and per upstream attempt with the GenAI attributes; the
// client's W3C traceparent honoured; propagated upstream only when
// telemetry.traces.propagate_upstream allows it; both encodings
// (telemetry.traces.protocol) carry the same spans.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { startMock } from './mocks/server.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGateway, CLIENT_KEY, until, type TestGateway } from './helpers/gateway.js';
import { startOtlpCollector } from './helpers/otlp-collector.js';
import type { Logger } from 'pino';
import { parseTraceparent, traceContext, TraceExporter } from '../src/tracing.js';
import { newRecord, type RequestRecord } from '../src/usage.js';
import type { GatewayConfig } from '../src/config/load.js';

const collector = await startOtlpCollector();
const [oai, ant] = await Promise.all([startOpenAIMock(), startAnthropicMock()]);
t.teardown(() => Promise.all([collector.close(), oai.close(), ant.close()]));

const config = (propagate: boolean, protocol?: string, sampleRatio?: number) => `
telemetry:
  otlp_endpoint: ${collector.url}
  traces: { propagate_upstream: ${propagate}${protocol ? `, protocol: ${protocol}` : ''}${sampleRatio === undefined ? '' : `, sample_ratio: ${sampleRatio}`} }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 2000 }
  - { name: anthropic, family: anthropic, base_url: ${ant.url}, api_key: ${ANTHROPIC_KEY}, retries: 0, timeout_ms: 2000 }
routing: { max_retry_wait_ms: 100 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
    fallbacks: [anthropic/claude-haiku-4-5]
    pricing: { input: 0.40, output: 1.60 }
  - id: anthropic/claude-haiku-4-5
    max_output_tokens: 1024
    deployments: [{ provider: anthropic, model: claude-haiku-4-5 }]
`;

/** Every span the collector received, with its attributes as a plain object. */
function spans(): { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; status: { code: number }; attrs: Record<string, unknown>; start: bigint; end: bigint }[] {
  return collector.exports
    .flatMap((r) => r.body.resourceSpans)
    .flatMap((rs: any) => {
      t.same(rs.resource.attributes, [{ key: 'service.name', value: { stringValue: 'model-gateway' } }]);
      return rs.scopeSpans.flatMap((ss: any) => ss.spans);
    })
    .map((s: any) => ({
      ...s,
      start: BigInt(s.startTimeUnixNano),
      end: BigInt(s.endTimeUnixNano),
      attrs: Object.fromEntries(s.attributes.map((a: any) => [a.key, Object.values(a.value)[0]])),
    }));
}

const hex = (n: number) => randomBytes(n).toString('hex');

/** Once the `n` requests made have closed (their records exist), export what they left. */
async function exported(gw: TestGateway, n: number): Promise<void> {
  await until(() => gw.records.length >= n, 5000);
  await gw.gw.traces!.flush();
}

t.afterEach(() => {
  t.same(collector.refused, [], 'the collector refused no export');
});

for (const protocol of ['http/protobuf', 'http/json', undefined])
t.test(`a request span joins the client trace; an attempt span is its child and the upstream its grandchild (${protocol ?? 'default encoding'})`, async (t) => {
  const gw = await startGateway(config(true, protocol));
  t.teardown(() => gw.close());
  const exportsBefore = collector.exports.length;
  const traceId = hex(16);
  const parent = hex(8);
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${traceId}-${parent}-01` } });
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'trace me' }] }).withResponse();
  await exported(gw, 1);
  const mine = spans().filter((s) => s.traceId === traceId);
  t.equal(mine.length, 2, 'one span for the request, one for its attempt');
  const server = mine.find((s) => s.kind === 2)!;
  const attempt = mine.find((s) => s.kind === 3)!;
  t.equal(server.parentSpanId, parent, "the request span's parent is the client's span");
  t.equal(server.name, 'chat openai/gpt-4.1-mini');
  t.match(server.attrs, {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': 'openai/gpt-4.1-mini',
    'gen_ai.response.model': 'openai/gpt-4.1-mini',
    'gen_ai.usage.input_tokens': String(r.data.usage!.prompt_tokens),
    'gen_ai.usage.output_tokens': String(r.data.usage!.completion_tokens),
    'gateway.request_id': r.response.headers.get('x-request-id'),
    'http.response.status_code': '200',
  });
  t.equal(server.status.code, 0);
  t.ok(server.end >= server.start);
  t.equal(attempt.parentSpanId, server.spanId, 'the attempt span is a child of the request span');
  t.equal(attempt.name, 'chat gpt-4.1-mini');
  t.match(attempt.attrs, { 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4.1-mini', 'gateway.provider': 'openai' });
  // Within the millisecond both start times are read at (Date.now(); the durations are finer).
  const ms = 1_000_000n;
  t.ok(attempt.start >= server.start - ms && attempt.end <= server.end + ms, 'the attempt lies within the request');
  const sent = parseTraceparent(oai.requests.at(-1)!.headers.traceparent as string);
  t.same(sent, { traceId, parentId: attempt.spanId, sampled: true }, 'the upstream got the trace, the attempt span as parent');
  t.same(
    [...new Set(collector.exports.slice(exportsBefore).map((e) => e.contentType))],
    [protocol === 'http/json' ? 'application/json' : 'application/x-protobuf'],
    'sent in the configured encoding (protobuf by default)',
  );
});

t.test('a fallback shows each attempt, the failed one with its error type', async (t) => {
  const gw = await startGateway(config(true));
  t.teardown(() => gw.close());
  const traceId = hex(16);
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${traceId}-${hex(8)}-01` } });
  oai.fail({ status: 500 });
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'fall back' }] });
  t.equal(r.model, 'anthropic/claude-haiku-4-5');
  await exported(gw, 1);
  const attempts = spans().filter((s) => s.traceId === traceId && s.kind === 3);
  t.equal(attempts.length, 2);
  t.match(attempts[0].attrs, { 'gateway.provider': 'openai', 'error.type': 'server_error' });
  t.equal(attempts[0].status.code, 2, 'the failed attempt is an error span');
  t.match(attempts[1].attrs, { 'gateway.provider': 'anthropic', 'gen_ai.provider.name': 'anthropic' });
  t.equal(attempts[1].status.code, 0);
  const server = spans().find((s) => s.traceId === traceId && s.kind === 2)!;
  t.match(server.attrs, { 'gen_ai.response.model': 'anthropic/claude-haiku-4-5', 'gateway.attempts': '2' });
  t.equal(parseTraceparent(ant.requests.at(-1)!.headers.traceparent as string)?.parentId, attempts[1].spanId);
});

t.test('without a traceparent a new trace starts; an unsampled one is not exported; a broken one is ignored', async (t) => {
  const gw = await startGateway(config(true));
  t.teardown(() => gw.close());
  const before = spans().length;
  const plain = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  await plain.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'new trace' }] });
  const unsampledTrace = hex(16);
  const unsampled = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${unsampledTrace}-${hex(8)}-00` } });
  await unsampled.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'not sampled' }] });
  t.equal(parseTraceparent(oai.requests.at(-1)!.headers.traceparent as string)?.sampled, false, 'the upstream is told the trace is not sampled');
  const broken = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${'0'.repeat(32)}-${hex(8)}-01` } });
  await broken.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'broken' }] });
  await exported(gw, 3);
  const fresh = spans().slice(before);
  t.notOk(fresh.some((s) => s.traceId === unsampledTrace), 'nothing exported for the unsampled trace');
  const servers = fresh.filter((s) => s.kind === 2);
  t.equal(servers.length, 2, 'the plain and the broken-header requests');
  for (const s of servers) {
    t.equal(s.parentSpanId, undefined, 'a new trace: no parent');
    t.match(s.traceId, /^[0-9a-f]{32}$/);
    t.not(s.traceId, '0'.repeat(32));
  }
});

t.test('sample_ratio: new traces sampled by their id, a client trace as the client says', async (t) => {
  const gw = await startGateway(config(true, undefined, 0));
  t.teardown(() => gw.close());
  const before = spans().length;
  const plain = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  await plain.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'not sampled at 0' }] });
  t.equal(parseTraceparent(oai.requests.at(-1)!.headers.traceparent as string)?.sampled, false, 'the upstream is told the new trace is not sampled');
  const traceId = hex(16);
  const traced = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${traceId}-${hex(8)}-01` } });
  await traced.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'the client samples it' }] });
  await exported(gw, 2);
  const fresh = spans().slice(before);
  t.equal(fresh.length, 2, "only the client's sampled trace is exported");
  t.ok(fresh.every((s) => s.traceId === traceId));
  // The ratio between 0 and 1: about that share of new traces (4,000 ids: the bounds are 6 standard deviations).
  const share = Array.from({ length: 4000 }, () => traceContext(undefined, 0.25).sampled).filter(Boolean).length / 4000;
  t.ok(share > 0.2 && share < 0.3, `a quarter sampled (${share})`);
  t.ok(Array.from({ length: 100 }, () => traceContext(undefined).sampled).every(Boolean), 'the default samples every trace');
});

t.test('propagate_upstream: false keeps the trace inside the gateway', async (t) => {
  const gw = await startGateway(config(false));
  t.teardown(() => gw.close());
  const traceId = hex(16);
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { traceparent: `00-${traceId}-${hex(8)}-01` } });
  await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'private' }] });
  t.equal(oai.requests.at(-1)!.headers.traceparent, undefined, 'no traceparent upstream');
  await exported(gw, 1);
  t.equal(spans().filter((s) => s.traceId === traceId).length, 2, 'the spans are still exported');
});

t.test('a collector that fails drops spans, counted, and every request is answered', async (t) => {
  const down = await startMock(() => ({ status: 503, json: {} }));
  const gw = await startGateway(config(false).replace(collector.url, down.url));
  t.teardown(async () => {
    await gw.close();
    await down.close();
  });
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: `x${i}` }] });
  await exported(gw, 3);
  t.equal(gw.gw.traces!.stats.dropped, 6, 'three requests, two spans each, dropped');
  t.equal(gw.gw.traces!.stats.exported, 0);
});

/** A finished request's record with `attempts` attempt spans (the exporter's input). */
const exporterRecord = (i: number, attempts: number): RequestRecord => ({
  ...newRecord(`req-${i}`, 'chat_completions'),
  requested_model: 'openai/gpt-4.1-mini',
  model: 'openai/gpt-4.1-mini',
  provider: 'openai',
  deployment: 'gpt-4.1-mini',
  attempts,
  status: 200,
  trace: traceContext(undefined),
  attempt_spans: Array.from({ length: attempts }, (_, k) => ({ span_id: hex(8), provider: 'openai', model: 'openai/gpt-4.1-mini', deployment: 'gpt-4.1-mini', start: Date.now(), duration_ms: k })),
});
const exporterConfig = { providers: new Map([['openai', { family: 'openai' }]]), telemetry: { traces: { protocol: 'http/protobuf' } } } as unknown as GatewayConfig;

t.test('the exporter: batches of whole requests up to batchSize spans, all delivered; a full queue drops, counted', async (t) => {
  const sink = await startOtlpCollector();
  t.teardown(() => sink.close());
  const cfg = exporterConfig;
  const warnings: string[] = [];
  const logger = { warn: (_o: unknown, m: string) => warnings.push(m) } as unknown as Logger;
  const record = exporterRecord;
  const ex = new TraceExporter(sink.url, () => cfg, logger, { queueSize: 1000, batchSize: 10, flushMs: 50, timeoutMs: 2000 });
  // 40 requests of 2 or 3 spans: 100 spans.
  for (let i = 0; i < 40; i++) ex.record(record(i, 1 + (i % 2)));
  await ex.flush();
  t.same(sink.refused, []);
  const bodies = sink.exports.map((r) => r.body.resourceSpans[0].scopeSpans[0].spans as { spanId: string; parentSpanId?: string; attributes: { key: string; value: { stringValue?: string } }[] }[]);
  t.ok(bodies.every((b) => b.length > 0 && b.length <= 10), 'no batch over batchSize spans');
  const all = bodies.flat();
  t.equal(all.length, 100, 'every span delivered');
  t.equal(ex.stats.exported, 100);
  const ids = all.flatMap((s) => s.attributes.filter((a) => a.key === 'gateway.request_id').map((a) => a.value.stringValue));
  t.same(ids, Array.from({ length: 40 }, (_, i) => `req-${i}`), 'request spans in order, once each');
  for (const b of bodies) {
    const servers = new Set(b.filter((s) => s.parentSpanId === undefined).map((s) => s.spanId));
    t.ok(b.every((s) => s.parentSpanId === undefined || servers.has(s.parentSpanId)), "a request's attempt spans travel in its batch");
  }

  // A collector that never answers: the first export hangs, the queue fills, what does not fit is dropped.
  const hung = await startMock(() => new Promise(() => {}));
  t.teardown(() => hung.close());
  const slow = new TraceExporter(hung.url, () => cfg, logger, { queueSize: 20, batchSize: 10, flushMs: 10_000, timeoutMs: 500 });
  for (let i = 0; i < 20; i++) slow.record(record(i, 1));
  t.equal(slow.stats.dropped, 10, 'beyond queueSize (20 spans waiting, 10 in the export under way): 5 requests dropped');
  t.match(warnings.join('\n'), /trace spans dropped: the span queue is full/);
  await slow.flush();
  t.equal(slow.stats.dropped, 40, 'the exports that timed out drop their spans too');
  t.equal(slow.stats.exported, 0);
});

t.test('an export under way: a full batch follows it at once, a partial one waits for the flush timer', async (t) => {
  const sink = await startOtlpCollector();
  t.teardown(() => sink.close());
  let release!: () => void;
  sink.hold = new Promise<void>((r) => (release = r));
  const ex = new TraceExporter(sink.url, () => exporterConfig, { warn() {} } as unknown as Logger, { queueSize: 1000, batchSize: 4, flushMs: 60_000, timeoutMs: 5000 });
  // One span a request: the first 4 fill a batch, whose export waits on the collector; then one more full batch and 2 spans.
  for (let i = 0; i < 10; i++) ex.record(exporterRecord(i, 0));
  sink.hold = undefined;
  release();
  await until(() => sink.exports.length >= 2);
  // Had the partial batch been sealed when the second export ended, it would be here by now.
  await new Promise((r) => setTimeout(r, 300));
  t.same(sink.exports.map((e) => e.body.resourceSpans[0].scopeSpans[0].spans.length), [4, 4], 'two full batches, the 2 spans still waiting');
  await ex.flush();
  t.equal(sink.exports.length, 3, 'flush sends the partial batch');
  t.equal(ex.stats.exported, 10);
});

t.test('the two encodings carry the same spans, whatever the values; a change of encoding starts a new batch', async (t) => {
  const sink = await startOtlpCollector();
  t.teardown(() => sink.close());
  const traces = { protocol: 'http/protobuf' };
  const cfg = { providers: new Map([['openai', { family: 'openai' }], ['anthropic', { family: 'anthropic' }]]), telemetry: { traces } } as unknown as GatewayConfig;
  const logger = { warn() {} } as unknown as Logger;
  const time = Date.now() + 0.123;
  // Long and non-ASCII text (lengths past one varint byte), an error with a message, fractional numbers, both flags.
  const record = (i: number): RequestRecord => ({
    ...newRecord(`req-${i}-${'é∑🙂'.repeat(i * 20)}`, 'chat_completions', time + i),
    requested_model: 'openai/gpt-4.1-mini',
    model: 'anthropic/claude-haiku-4-5',
    provider: 'anthropic',
    deployment: 'claude-haiku-4-5',
    attempts: 2,
    status: i % 2 ? 200 : 502,
    error_type: i % 2 ? undefined : `upstream said ${'no '.repeat(i * 30)}`,
    usage: { input_tokens: 1_000_000 + i, output_tokens: i, cached_input_tokens: 128, cache_write_tokens: 0, input_image_tokens: 0, reasoning_tokens: 0, output_image_tokens: 0, images: 0, web_searches: 0 },
    usage_source: i % 3 ? 'reported' : 'partial',
    cost_usd: 0.000123 * (i + 1),
    latency_ms: 1234.567,
    ttfb_ms: i % 2 ? 12 : 0.5,
    stream: i % 2 === 1,
    trace: traceContext(i % 2 ? `00-${hex(16)}-${hex(8)}-01` : undefined),
    attempt_spans: [
      { span_id: hex(8), provider: 'openai', model: 'openai/gpt-4.1-mini', deployment: 'gpt-4.1-mini', start: time + i, duration_ms: 3.25, error_type: 'server_error' },
      { span_id: hex(8), provider: 'anthropic', model: 'anthropic/claude-haiku-4-5', deployment: 'claude-haiku-4-5', start: time + i + 4, duration_ms: 1200 },
    ],
  });
  const records = Array.from({ length: 6 }, (_, i) => record(i));
  const ex = new TraceExporter(sink.url, () => cfg, logger, { queueSize: 1000, batchSize: 100, flushMs: 10_000, timeoutMs: 2000 });
  for (const r of records.slice(0, 3)) ex.record(r);
  traces.protocol = 'http/json';
  for (const r of records.slice(3)) ex.record(r);
  traces.protocol = 'http/protobuf';
  for (const r of records) ex.record(r);
  traces.protocol = 'http/json';
  for (const r of records) ex.record(r);
  await ex.flush();
  t.same(sink.refused, []);
  t.same(sink.exports.map((e) => e.contentType), ['application/x-protobuf', 'application/json', 'application/x-protobuf', 'application/json'], 'one batch per run of one encoding');
  const spansOf = (i: number) => sink.exports[i].body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans));
  const proto = spansOf(2);
  const json = spansOf(3);
  t.equal(proto.length, 18);
  t.same(proto, json, 'the same spans, field for field');
  t.same([...spansOf(0), ...spansOf(1)], json, 'and the same again across the switch');
  t.ok(sink.exports[2].bytes < sink.exports[3].bytes / 1.5, `protobuf is the smaller (${sink.exports[2].bytes} against ${sink.exports[3].bytes} bytes)`);
  const server = proto.find((s: any) => s.kind === 2 && s.attributes.some((a: any) => a.key === 'gateway.request_id' && a.value.stringValue === records[4].request_id));
  t.ok(server, 'the long non-ASCII request id arrives whole');
  t.same(server.status, { code: 2, message: records[4].error_type });
  t.equal(server.startTimeUnixNano, String(BigInt(Math.round((time + 4) * 1000)) * 1000n), 'nanoseconds, exact to the microsecond');
  t.same(Object.fromEntries(server.attributes.map((a: any) => [a.key, a.value])), {
    'gen_ai.operation.name': { stringValue: 'chat' },
    'gen_ai.provider.name': { stringValue: 'anthropic' },
    'gen_ai.request.model': { stringValue: 'openai/gpt-4.1-mini' },
    'gen_ai.response.model': { stringValue: 'anthropic/claude-haiku-4-5' },
    'gen_ai.usage.input_tokens': { intValue: '1000004' },
    'gen_ai.usage.output_tokens': { intValue: '4' },
    'gen_ai.usage.cache_read.input_tokens': { intValue: '128' },
    'gateway.request_id': { stringValue: records[4].request_id },
    'gateway.endpoint': { stringValue: 'chat_completions' },
    'gateway.provider': { stringValue: 'anthropic' },
    'gateway.deployment': { stringValue: 'claude-haiku-4-5' },
    'gateway.attempts': { intValue: '2' },
    'gateway.cost_usd': { doubleValue: 0.000123 * 5 },
    'gateway.stream': { boolValue: false },
    'gateway.ttfb_ms': { doubleValue: 0.5 },
    'http.response.status_code': { intValue: '502' },
    'error.type': { stringValue: '502' },
  });
});
