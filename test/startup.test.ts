// Start-up of a sidecar (`model-gateway start`, workers: 1): what an idle
// gateway has loaded, and that what it defers loads on first use. Nothing here
// is timed; the start-up time and idle memory are measured by the benchmark
// (BENCHMARKS.md). docs/performance.md, "Start-up", says what is deferred.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import OpenAI from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { CLIENT_KEY, until, untilAsync } from './helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from './helpers/process.js';
import type { LoadedModules } from './helpers/loaded-modules.js';
import { undiciPool, undiciSource } from '../src/lazy.js';

const preload = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'loaded-modules.js');
const ADMIN_KEY = 'gw-admin-startup-0123456789';
/** Node's bundled fetch/WebSocket: an ES import of node:http, or undici's whole index, loads it. */
const BUNDLED_UNDICI = 'NativeModule internal/deps/undici/undici';

async function loaded(g: GatewayProcess, out: string): Promise<LoadedModules> {
  fs.rmSync(out, { force: true });
  g.child.kill('SIGUSR2');
  await until(() => fs.existsSync(out), 10_000);
  return JSON.parse(fs.readFileSync(out, 'utf8')) as LoadedModules;
}

const fromPackage = (m: LoadedModules, name: string) => m.urls.filter((u) => u.includes(`/node_modules/${name}/`));

t.test('an idle sidecar has loaded no upstream client, database thread or unused library; the first request loads them', async (t) => {
  const oai = await startOpenAIMock();
  t.teardown(() => oai.close());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-startup-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'loaded.json');
  const g = await startGatewayProcess(
    t,
    (d) => `server: { workers: 1 }
storage: { responses_db: ${path.join(d, 'responses.sqlite')}, usage: { db: ${path.join(d, 'usage.sqlite')}, flush_ms: 50 } }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY} }
  - { name: anthropic, family: anthropic, api_key: sk-ant-startup-0123456789 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`,
    { GATEWAY_API_KEYS: CLIENT_KEY, GATEWAY_ADMIN_KEY: ADMIN_KEY, LOADED_MODULES_OUT: out },
    { nodeArgs: ['--import', preload] },
  );

  // Ready as a probe sees it (the benchmark polls /healthz too).
  t.same(await (await fetch(`${g.url}/healthz`)).json(), { status: 'ok' });
  const idle = await loaded(g, out);
  t.notOk(idle.builtins.includes(BUNDLED_UNDICI), "Node's bundled fetch/WebSocket is not loaded");
  for (const pkg of ['undici', 'ioredis', 'pg', 'http-proxy-3', 'gpt-tokenizer', '@smithy'])
    t.same(fromPackage(idle, pkg), [], `${pkg} is not loaded`);
  t.same(idle.threads, [], 'no worker thread: the usage and response stores start theirs on first use');
  for (const b of ['https', 'tls']) t.notOk(idle.builtins.includes(`NativeModule ${b}`), `node:${b} is not loaded (no upstream call yet)`);
  t.ok(fromPackage(idle, 'prom-client').some((u) => u.endsWith('/lib/registry.js')), "prom-client's registry is loaded (metrics are on)");
  t.same(
    fromPackage(idle, 'prom-client').filter((u) => /\/(index|pushgateway|summary)\.js$/.test(u)),
    [],
    "prom-client's index, Pushgateway and Summary are not loaded",
  );

  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0, timeout: 10_000 });
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hello' }] });
  t.equal(r.choices[0].message.role, 'assistant', 'the first request is answered');
  // Its record reaches the usage store, whose thread the first batch started.
  await untilAsync(async () => {
    const res = await fetch(`${g.url}/admin/usage/records`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    const body = (await res.json()) as { data?: { model: string }[] };
    return res.status === 200 && body.data?.length === 1;
  }, 10_000);

  // JSON answers through Koa (an error, the catalog) as well.
  const denied = await fetch(`${g.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(denied.status, 401);
  t.equal(denied.headers.get('content-type'), 'application/json; charset=utf-8');
  t.match(await denied.json(), { error: { type: 'authentication_error' } });
  t.match((await client.models.list()).data, [{ id: 'openai/gpt-4.1-mini' }]);

  const served = await loaded(g, out);
  t.ok(fromPackage(served, 'undici').some((u) => u.endsWith('/lib/dispatcher/pool.js')), "undici's Pool is loaded by the first upstream call");
  t.notOk(served.builtins.includes(BUNDLED_UNDICI), "Node's bundled fetch/WebSocket is still not loaded");
  t.equal(served.threads.length, 1, 'the usage store started its thread');
});

t.test("prom-client's classes come from their parts, the same as its index exports", async (t) => {
  const { createMetrics, promClientSource } = await import('../src/metrics.js');
  t.equal(promClientSource(), 'parts', 'this prom-client release keeps the files the metrics load');
  const pkg = createRequire(import.meta.url)('prom-client') as typeof import('prom-client');
  const m = createMetrics({ config: () => ({ models: new Map(), providers: new Map() }) as never, health: { isCooling: () => false } as never, inflight: () => 0 });
  t.ok(m.registry instanceof pkg.Registry, "the metrics' registry is the package's Registry");
  t.match(await m.text(), /# TYPE gateway_requests_total counter/);
});

t.test("undici's Pool comes from its parts, with the request API its index installs", async (t) => {
  const Pool = undiciPool();
  t.equal(undiciSource(), 'parts', 'this undici release keeps the files undiciPool() loads');
  const pkg = createRequire(import.meta.url)('undici') as typeof import('undici');
  t.equal(Pool, pkg.Pool, 'the same class as the package exports');
  t.type(Pool.prototype.request, 'function');
  t.type(Pool.prototype.stream, 'function');
});
