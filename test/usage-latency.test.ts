// GET /admin/usage/latency (the dashboard's percentiles), on SQLite and on the
// local PostgreSQL: after requests made with the official openai client, the
// percentiles equal the nearest-rank percentiles of the records in the
// database, over the requests answered without an error, per group and bucket.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import pg from 'pg';
import { DatabaseSync } from 'node:sqlite';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until, type TestGateway } from './helpers/gateway.js';
import { postgresDown } from './helpers/process.js';

const ADMIN_KEY = 'gw-admin-key-' + randomBytes(8).toString('hex');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

const oai = await startOpenAIMock();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-latency-'));
t.teardown(async () => {
  await oai.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const config = (storage: string) => `
admin_keys:
  - { name: ops, sha256: ${sha(ADMIN_KEY)} }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: sk-test-openai-0123456789, retries: 0, timeout_ms: 2000 }
routing: { max_retry_wait_ms: 100 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
storage:
${storage}`;

async function latency(gw: TestGateway, query: string, key = ADMIN_KEY): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.url}/admin/usage/latency${query}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: await res.json() };
}

/** Nearest rank: the smallest value with at least p of the sorted values at or below it. */
function percentile(values: number[], p: number): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(p * sorted.length) - 1];
}

function expected(rows: Record<string, any>[]) {
  const ok = rows.filter((r) => Number(r.error) === 0 && Number(r.status) < 400);
  const lat = ok.map((r) => Number(r.latency_ms));
  const ttfb = ok.filter((r) => r.ttfb_ms !== null).map((r) => Number(r.ttfb_ms));
  const of = (v: number[]) => ({ p50: percentile(v, 0.5), p90: percentile(v, 0.9), p95: percentile(v, 0.95), p99: percentile(v, 0.99), max: v.length ? Math.max(...v) : null });
  return { requests: ok.length, latency_ms: of(lat), ttfb_ms: of(ttfb) };
}

async function exercise(t: Test, gw: TestGateway, read: () => Promise<Record<string, any>[]>): Promise<void> {
  const empty = await latency(gw, '');
  t.same(empty.body.data, [{ requests: 0, latency_ms: { p50: null, p90: null, p95: null, p99: null, max: null }, ttfb_ms: { p50: null, p90: null, p95: null, p99: null, max: null } }], 'an empty store: no percentiles, not an error');

  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  let n = 0;
  for (let i = 0; i < 6; i++) {
    await client.chat.completions.create({ model: i % 3 ? 'openai/gpt-4.1-mini' : 'openai/gpt-5-mini', messages: [{ role: 'user', content: `request ${i}` }] });
    n++;
  }
  const s = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'stream' }], stream: true });
  for await (const _ of s);
  n++;
  oai.fail({ status: 500 });
  await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'fails' }] }).catch(() => undefined);
  n++;
  await until(() => gw.records.length >= n, 5000);
  await gw.gw.usage!.flush();
  const rows = await read();
  t.equal(rows.length, n, 'every request has its record');

  const all = await latency(gw, '');
  t.equal(all.status, 200);
  t.same(all.body.data, [expected(rows)], 'the percentiles of the records, the failed request left out');
  t.equal(all.body.data[0].requests, n - 1);

  const byModel = await latency(gw, '?group_by=model');
  const models = [...new Set(rows.map((r) => r.model as string))].sort();
  t.same(
    byModel.body.data,
    models.map((m) => ({ model: m, ...expected(rows.filter((r) => r.model === m)) })),
    'per model',
  );

  const width = 3_600_000;
  const byHour = await latency(gw, '?interval=1h&group_by=model');
  const want: Record<string, unknown>[] = [];
  for (const start of [...new Set(rows.map((r) => Math.floor(Number(r.time) / width) * width))].sort((a, b) => a - b))
    for (const m of models) {
      const inside = rows.filter((r) => r.model === m && Math.floor(Number(r.time) / width) * width === start);
      if (inside.some((r) => Number(r.error) === 0)) want.push({ start: new Date(start).toISOString(), model: m, ...expected(inside) });
    }
  t.same(byHour.body.data, want, 'per hour and model, each bucket with its start');

  const bad = await latency(gw, '?group_by=colour');
  t.equal(bad.status, 400);
  t.equal(bad.body.error.param, 'group_by', 'a bad parameter is named');
  t.equal((await latency(gw, '', '')).status, 401, 'no key: 401');
  t.equal((await latency(gw, '', CLIENT_KEY)).status, 403, 'a client key: 403');
}

t.test('SQLite', async (t) => {
  const db = path.join(dir, 'usage.db');
  const gw = await startGateway(config(`  usage: { db: ${db}, flush_ms: 20 }`), {}, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  await exercise(t, gw, async () => {
    const d = new DatabaseSync(db);
    try {
      return d.prepare('SELECT * FROM gateway_usage').all() as Record<string, any>[];
    } finally {
      d.close();
    }
  });
});

const pgDown = await postgresDown(PG_URL);

t.test('PostgreSQL', { skip: pgDown ? `PostgreSQL is not running on 127.0.0.1:5432 (${pgDown}): the latency percentiles were not tested on it` : false }, async (t) => {
  const table = `gw_latency_test_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  t.teardown(async () => {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`DROP TABLE IF EXISTS ${table}_migrations`);
    await client.end();
  });
  const gw = await startGateway(config(`  url: ${PG_URL}\n  usage: { table: ${table}, flush_ms: 20 }`), {}, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  await exercise(t, gw, async () => (await client.query(`SELECT * FROM ${table}`)).rows);
});
