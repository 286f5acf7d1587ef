// GET /metrics (issue 19, section 4): after a known mix of requests made with
// the official openai client, the Prometheus text shows the exact counts;
// labels stay bounded (no user, session or request id); the endpoint can
// require an admin key; with several workers (`start`, workers: 2) every
// scrape shows the whole process.
import t from 'tap';
import path from 'node:path';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';
import { startGatewayProcess } from './helpers/process.js';
import client, { AggregatorRegistry, Registry } from 'prom-client';
import { CellCounter, CellHistogram } from '../src/metric-cells.js';

const ADMIN_KEY = 'gw-admin-metrics-0123456789';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text exposition format, parsed (https://prometheus.io/docs/instrumenting/exposition_formats/). */
function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of the samples named `name` whose labels include `match`. */
function value(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);
}

const [oai, ant] = await Promise.all([startOpenAIMock(), startAnthropicMock()]);
t.teardown(() => Promise.all([oai.close(), ant.close()]));

const config = (extra = '') => `
admin_keys: [{ name: ops, sha256: ${sha(ADMIN_KEY)} }]
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 2000, region: us-east }
  - { name: anthropic, family: anthropic, base_url: ${ant.url}, api_key: ${ANTHROPIC_KEY}, retries: 0, timeout_ms: 2000, region: us }
routing: { failure_threshold: 1, cooldown_ms: 600000, max_retry_wait_ms: 100 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
    fallbacks: [anthropic/claude-haiku-4-5]
    pricing: { input: 0.40, cached_input: 0.10, output: 1.60 }
  - id: anthropic/claude-haiku-4-5
    max_output_tokens: 1024
    deployments: [{ provider: anthropic, model: claude-haiku-4-5 }]
    pricing: { input: 1.00, cache_write: 1.25, cached_input: 0.10, output: 5.00 }
${extra}`;

t.test('a known mix of requests gives exact counts', async (t) => {
  const gw = await startGateway(config());
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { 'x-gateway-user-id': 'user-secret-42', 'x-gateway-session-id': 'session-77' } });
  const ids: string[] = [];
  let openaiIn = 0;
  let openaiOut = 0;
  for (let i = 0; i < 3; i++) {
    const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: `question ${i}` }] }).withResponse();
    ids.push(r.response.headers.get('x-request-id')!);
    openaiIn += r.data.usage!.prompt_tokens;
    openaiOut += r.data.usage!.completion_tokens;
  }
  for (let i = 0; i < 2; i++) {
    const s = await client.chat.completions.create({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: `stream ${i}` }], stream: true });
    for await (const _ of s);
  }
  const missing = await client.chat.completions.create({ model: 'acme/nothing', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(missing.status, 404);
  // OpenAI fails (500): the request falls back to Claude, and OpenAI's deployment cools down (failure_threshold 1).
  oai.fail({ status: 500 });
  const fb = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'fall back' }] });
  t.equal(fb.model, 'anthropic/claude-haiku-4-5', 'served by the fallback');
  const badKey = await new OpenAI({ apiKey: 'wrong-key', baseURL: gw.baseURL, maxRetries: 0 }).chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(badKey.status, 401);
  await until(() => gw.records.length === 8);

  const res = await fetch(`${gw.url}/metrics`);
  t.equal(res.status, 200, '/metrics is open by default');
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const s = parse(text);
  const chat = { endpoint: 'chat_completions' };
  t.equal(value(s, 'gateway_requests_total', { ...chat, model: 'openai/gpt-4.1-mini', provider: 'openai', status_class: '2xx' }), 3);
  t.equal(value(s, 'gateway_requests_total', { ...chat, model: 'anthropic/claude-haiku-4-5', provider: 'anthropic', status_class: '2xx' }), 3, 'two streams and the fallback');
  t.equal(value(s, 'gateway_requests_total', { ...chat, model: '', provider: '', status_class: '4xx' }), 2, 'the unknown model and the bad key');
  t.equal(value(s, 'gateway_requests_total'), 8, 'every request once');
  t.equal(value(s, 'gateway_fallbacks_total', { ...chat, model: 'openai/gpt-4.1-mini' }), 1);
  t.equal(value(s, 'gateway_upstream_errors_total', { provider: 'openai', error_type: 'server_error' }), 1);
  t.equal(value(s, 'gateway_upstream_errors_total'), 1);

  const oaiGenAi = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'openai', gen_ai_request_model: 'openai/gpt-4.1-mini' };
  t.equal(value(s, 'gen_ai_client_token_usage_count', { ...oaiGenAi, gen_ai_token_type: 'input' }), 3);
  t.equal(value(s, 'gen_ai_client_token_usage_sum', { ...oaiGenAi, gen_ai_token_type: 'input' }), openaiIn, 'input tokens as the client saw them');
  t.equal(value(s, 'gen_ai_client_token_usage_sum', { ...oaiGenAi, gen_ai_token_type: 'output' }), openaiOut);
  t.equal(value(s, 'gateway_tokens_total', { model: 'openai/gpt-4.1-mini', type: 'input' }), openaiIn);
  const antGenAi = { gen_ai_provider_name: 'anthropic', gen_ai_request_model: 'anthropic/claude-haiku-4-5' };
  t.equal(value(s, 'gen_ai_client_token_usage_count', { ...antGenAi, gen_ai_token_type: 'output' }), 3);
  t.equal(value(s, 'gen_ai_server_time_to_first_token_seconds_count', antGenAi), 2, 'time to first token: the two streams');
  t.equal(value(s, 'gen_ai_server_time_to_first_token_seconds_count'), 2);
  t.equal(value(s, 'gen_ai_client_operation_duration_seconds_count'), 6, 'every request that reached a model');
  t.equal(value(s, 'gen_ai_client_operation_duration_seconds_count', { error_type: '' }), 6);
  t.equal(value(s, 'gateway_overhead_seconds_count', chat), 6);
  const cost = value(s, 'gateway_cost_usd_total', { model: 'openai/gpt-4.1-mini', provider: 'openai' });
  t.ok(Math.abs(cost - (openaiIn * 0.4 + openaiOut * 1.6) / 1e6) < 1e-9, `cost ${cost} from the catalog prices`);
  t.ok(value(s, 'gateway_cost_usd_total', { model: 'anthropic/claude-haiku-4-5' }) > 0);
  t.equal(value(s, 'gateway_inflight_requests'), 1, 'only the scrape itself is in flight');
  t.equal(value(s, 'gateway_provider_cooldown', { model: 'openai/gpt-4.1-mini', provider: 'openai', region: 'us-east', deployment: 'gpt-4.1-mini' }), 1, "OpenAI's deployment is cooling down");
  t.equal(value(s, 'gateway_provider_cooldown', { model: 'anthropic/claude-haiku-4-5', provider: 'anthropic' }), 0);
  t.ok(s.some((x) => x.name === 'gateway_config_reloads_total' && x.labels.result === 'success'), 'the reload counter is exposed');
  t.ok(s.some((x) => x.name === 'process_cpu_seconds_total'), 'process metrics too');

  for (const secret of ['user-secret-42', 'session-77', CLIENT_KEY, OPENAI_KEY, ...ids]) t.notOk(text.includes(secret), `no "${secret.slice(0, 12)}…" in the metrics`);
  const labelNames = new Set(s.flatMap((x) => Object.keys(x.labels)));
  for (const l of ['user', 'user_id', 'session', 'session_id', 'request_id', 'key']) t.notOk(labelNames.has(l), `no ${l} label`);

  // The scrape is no model request: it counts nothing.
  const again = parse(await (await fetch(`${gw.url}/metrics`)).text());
  t.equal(value(again, 'gateway_requests_total'), 8);
});

t.test('telemetry.metrics.require_admin_key: the admin key scrapes, a client key gets 403', async (t) => {
  const gw = await startGateway(config('telemetry: { metrics: { require_admin_key: true, path: /internal/metrics } }'));
  t.teardown(() => gw.close());
  t.equal((await fetch(`${gw.url}/metrics`)).status, 404, 'served on its configured path only');
  t.equal((await fetch(`${gw.url}/internal/metrics`)).status, 401);
  const asClient = await fetch(`${gw.url}/internal/metrics`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
  t.equal(asClient.status, 403);
  t.equal(((await asClient.json()) as any).error.type, 'permission_denied_error');
  const ok = await fetch(`${gw.url}/internal/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  t.equal(ok.status, 200);
  t.match(await ok.text(), /# TYPE gateway_requests_total counter/);
  t.notOk(gw.rawLogs.join('').includes(ADMIN_KEY), 'the admin key is in no log line');
});

t.test('telemetry.metrics.enabled: false serves no /metrics', async (t) => {
  const gw = await startGateway(config('telemetry: { metrics: { enabled: false } }'));
  t.teardown(() => gw.close());
  t.equal((await fetch(`${gw.url}/metrics`)).status, 404);
});

t.test('with two workers, every scrape shows the requests both served', async (t) => {
  const g = await startGatewayProcess(
    t,
    (dir) => `server: { workers: 2 }\nstorage: { responses_db: ':memory:', usage: { db: ${path.join(dir, 'usage.sqlite')} } }\n` + config(),
    { GATEWAY_API_KEYS: CLIENT_KEY },
    { readyLines: 2, timeoutMs: 30_000 },
  );
  t.equal(g.child.exitCode, null, 'the gateway runs');
  const ready = g.lines().filter((l) => l.msg === 'model-gateway ready');
  const port = ready[0].port;
  t.equal(new Set(ready.map((l) => l.pid)).size, 2, 'two workers');
  // New connections go to the workers in turn (the primary hands them out round-robin: src/run.ts).
  const N = 10;
  for (let i = 0; i < N; i++) {
    const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: `hello ${i}` }] }),
    });
    t.equal(r.status, 200);
    await r.json();
  }
  await until(() => g.lines().filter((l) => l.path === '/v1/chat/completions').length === N, 10_000);
  for (let i = 0; i < 4; i++) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { connection: 'close' } })).text();
    const s = parse(text);
    t.equal(value(s, 'gateway_requests_total', { model: 'anthropic/claude-haiku-4-5', status_class: '2xx' }), N, `scrape ${i + 1}: all ${N} requests, whichever worker answers`);
    t.equal(value(s, 'gen_ai_client_token_usage_count', { gen_ai_token_type: 'input' }), N);
  }
});

t.test("the record path's counters and histograms expose what prom-client's own would", async (t) => {
  // The same updates on prom-client's Counter and Histogram and on src/metric-cells.ts: the same text, JSON and cluster aggregation.
  const [theirs, ours] = [new Registry(), new Registry()];
  const labelNames = ['model', 'kind'];
  const buckets = [0.001, 0.01, 0.1, 1, 10];
  const pc = new client.Counter({ name: 'x_total', help: 'h', labelNames, registers: [theirs] });
  const ph = new client.Histogram({ name: 'x_seconds', help: 'h', labelNames, buckets, registers: [theirs] });
  const cc = new CellCounter({ name: 'x_total', help: 'h', labelNames, registers: [ours] });
  const ch = new CellHistogram({ name: 'x_seconds', help: 'h', labelNames, registers: [ours] }, buckets);
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let i = 0; i < 2000; i++) {
    const values = [['a/b', 'c "quoted"', 'd\\e'][i % 3], ['in', 'out'][(i >> 2) % 2]];
    const labels = { model: values[0], kind: values[1] };
    const v = rand() * 20;
    pc.inc(labels, v);
    cc.inc(values, v);
    ph.observe(labels, v / 1000 ** (i % 4));
    ch.observe(values, v / 1000 ** (i % 4));
  }
  t.throws(() => cc.inc(['a', 'b'], -1), /decrease/, 'a counter does not go down');
  t.throws(() => ch.observe(['a', 'b'], NaN), /not a valid number/);
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same exposition text');
  t.same(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON(), 'the same JSON (what the cluster primary aggregates)');
  const agg = async (r: Registry) => AggregatorRegistry.aggregate([await r.getMetricsAsJSON(), await r.getMetricsAsJSON()]).metrics();
  t.equal(await agg(ours), await agg(theirs), 'the same aggregation over two workers');
});
