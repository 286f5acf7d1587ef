// `npm run bench:sinks [-- --records N] [--rounds N]`
//
// What each finished request's record costs in the receivers the gateway
// hands it to when its response closes: the Prometheus metrics, the usage
// store (SQLite, its worker thread included), the OpenTelemetry exporter
// (to the benchmark's mock collector) and the access-log line (to /dev/null).
// Each is fed the record of a small passthrough request, N times, yielding to
// the event loop every 128 records as a serving gateway would (batches
// leave, exports are answered), and is charged the process's CPU time (all
// threads) until everything queued has been written: CPU per record. The
// whole benchmark (`npm run bench`, rows gw-openai, gwoff-openai,
// gwall-openai) measures the same costs from outside, where a shared
// machine's drift is often larger than they are; this measures them alone.
import { mkdtempSync, openSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomUUID } from 'node:crypto';
import { builtins } from '../plugins/index.js';
import { loadGatewayConfig } from '../src/pipeline.js';
import { createMetrics } from '../src/metrics.js';
import { UsageRecorder, openUsageBackend } from '../src/store/usage.js';
import { TraceExporter, traceContext, spanId } from '../src/tracing.js';
import { createLogger, accessLogWriter, batchedStdout } from '../src/log.js';
import { MemoryHealth } from '../src/dispatch.js';
import type { RequestRecord } from '../src/usage.js';
import type { Logger } from 'pino';
import { forkReady, gatewayYaml, availability } from './processes.js';

export interface SinkCost {
  sink: 'metrics' | 'usage store' | 'traces' | 'traces (OTLP/JSON)' | 'access log';
  /** CPU per record (µs), the median over rounds. */
  us_per_record: number;
  /** Each round's. */
  rounds: number[];
}

/** The record of a small passthrough request, as the core finishes it (src/server.ts). */
function passthroughRecord(): RequestRecord {
  const time = Date.now();
  return {
    time,
    request_id: randomUUID(),
    endpoint: 'chat_completions',
    key: 'env-1',
    requested_model: 'bench/openai',
    model: 'bench/openai',
    provider: 'openai',
    deployment: 'gpt-bench',
    attempts: 1,
    fallbacks: 0,
    status: 200,
    usage: { input_tokens: 13, cached_input_tokens: 0, cache_write_tokens: 0, input_image_tokens: 0, output_tokens: 16, reasoning_tokens: 0, output_image_tokens: 0, images: 0, web_searches: 0 },
    usage_source: 'reported',
    cost_usd: null,
    latency_ms: 0.83,
    ttfb_ms: 0.71,
    upstream_ms: 0.42,
    stream: false,
    trace: traceContext(undefined),
    attempt_spans: [{ span_id: spanId(), start: time, provider: 'openai', model: 'bench/openai', deployment: 'gpt-bench', duration_ms: 0.42 }],
  };
}

/** The access-log line of the same request (what the core and the plugins put in ctx.log). */
function accessLine(r: RequestRecord): Record<string, unknown> {
  return {
    request_id: r.request_id,
    method: 'POST',
    path: '/v1/chat/completions',
    status: r.status,
    latency_ms: r.latency_ms,
    key_name: r.key,
    model: r.model,
    provider: r.provider,
    served_model: r.model,
    upstream_model: r.deployment,
    usage: r.usage,
    cost_usd: r.cost_usd,
  };
}

const quiet = { warn() {}, info() {}, error() {}, debug() {} } as unknown as Logger;
const yieldToLoop = () => new Promise<void>((r) => setImmediate(r));

/** CPU µs per record of feeding `n` records to `feed`, then `drain` (what was queued, written). */
async function cpuPerRecord(records: RequestRecord[], n: number, feed: (r: RequestRecord) => void, drain: () => Promise<void>): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    feed(records[i % records.length]);
    if ((i & 127) === 127) await yieldToLoop();
  }
  await drain();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

export async function runSinks(o: { records: number; rounds: number; print?: boolean }): Promise<SinkCost[]> {
  const print = o.print === false ? () => {} : (s: string) => process.stdout.write(s);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-sinks-'));
  const mock = await forkReady('mock-upstream.js', []);
  const file = path.join(dir, 'gateway.yaml');
  const yaml = gatewayYaml({ mockOrigin: `http://127.0.0.1:${mock.port}`, avail: availability(), observability: 'all' }, 0);
  writeFileSync(file, yaml);
  try {
    const { config } = await loadGatewayConfig(file, builtins(), { text: yaml, env: { GATEWAY_API_KEYS: 'gw-sinks-client-key-0123456789abcdef' } });
    // Records made once and reused (their making is not a sink's cost); a thousand distinct request ids.
    const records = Array.from({ length: 1024 }, passthroughRecord);
    const metrics = createMetrics({ config: () => config, health: new MemoryHealth(3, 1000), inflight: () => 0 });
    // Queues that hold a whole round: records come here faster than a gateway finishes requests, and a drop would hide its cost.
    const exporter = (c: typeof config) => new TraceExporter(c.telemetry.otlp_endpoint!, () => c, quiet, { queueSize: 4 * o.records, batchSize: 512, flushMs: 1_000, timeoutMs: 10_000 });
    // The default encoding (OTLP protobuf) and OTLP/JSON.
    const traces = exporter(config);
    const tracesJson = exporter({ ...config, telemetry: { ...config.telemetry, traces: { ...config.telemetry.traces, protocol: 'http/json' } } });
    // (/dev/null stays open: the logger writes what it holds when the process exits.)
    const writeLine = accessLogWriter(createLogger('info', batchedStdout(openSync('/dev/null', 'w'))));
    const results = new Map<SinkCost['sink'], number[]>();
    const add = (sink: SinkCost['sink'], us: number) => results.set(sink, [...(results.get(sink) ?? []), us]);
    // Round 0 warms up (compiled code, pools, the SQLite file): not counted.
    for (let round = 0; round <= o.rounds; round++) {
      const keep = (sink: SinkCost['sink'], us: number) => round > 0 && add(sink, us);
      keep('metrics', await cpuPerRecord(records, o.records, metrics.record, async () => {}));
      const usage = new UsageRecorder({ ...config.storage.usage, queue_size: o.records + 1 }, quiet);
      const backend = await openUsageBackend({ ...config, dir, storage: { ...config.storage, usage: { ...config.storage.usage, db: path.join(dir, `usage-${round}.db`) } } });
      // The SQLite store starts its thread on its first call: started here, not charged to the records.
      await backend.prune(0);
      usage.attach(backend);
      keep('usage store', await cpuPerRecord(records, o.records, (r) => usage.record(r), () => usage.flush()));
      await usage.close();
      keep('traces', await cpuPerRecord(records, o.records, (r) => traces.record(r), () => traces.flush()));
      keep('traces (OTLP/JSON)', await cpuPerRecord(records, o.records, (r) => tracesJson.record(r), () => tracesJson.flush()));
      keep('access log', await cpuPerRecord(records, o.records, (r) => writeLine(accessLine(r)), async () => {}));
    }
    if (traces.stats.dropped || tracesJson.stats.dropped) throw new Error(`${traces.stats.dropped} spans dropped: the numbers would not be the exporter's whole cost`);
    const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
    const out: SinkCost[] = [...results].map(([sink, rounds]) => ({ sink, us_per_record: median(rounds), rounds }));
    print(`\n${'sink'.padEnd(18)} ${'µs CPU/record'.padStart(13)}  per round\n`);
    for (const r of out) print(`${r.sink.padEnd(18)} ${r.us_per_record.toFixed(2).padStart(13)}  ${r.rounds.map((x) => x.toFixed(2)).join(' ')}\n`);
    print(`\n${o.records} records a round, ${o.rounds} round(s) after a warm-up; CPU of the whole process (the usage store's worker thread included) until all was written.\n`);
    return out;
  } finally {
    await mock.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const o = { records: 50_000, rounds: 3 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--records') o.records = Number(argv[++i]);
    else if (argv[i] === '--rounds') o.rounds = Number(argv[++i]);
    else {
      process.stderr.write('usage: node dist/bench/sinks.js [--records N] [--rounds N]\n');
      process.exit(2);
    }
  }
  await runSinks(o);
  process.exit(0);
}
