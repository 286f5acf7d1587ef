// The usage store and GET /admin/usage (issue 19, section 3), on SQLite and on
// the local PostgreSQL: the records written match the requests made with the
// official openai client; the admin API groups them; a blocked store drops
// records (counted) and never holds a request; old records are pruned.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { openAIImagesRoute } from './mocks/openai-images.js';
import { startGateway, CLIENT_KEY, until, type TestGateway } from './helpers/gateway.js';
import { postgresDown } from './helpers/process.js';
import { COLUMNS } from '../src/store/usage.js';

const ADMIN_KEY = 'gw-admin-key-' + randomBytes(8).toString('hex');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

const responses = createResponsesMock();
const oai = await startOpenAIMock({ routes: { '/v1/responses': responses.handler, '/v1/images/generations': openAIImagesRoute() } });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-usage-'));
t.teardown(async () => {
  await oai.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function config(storage: string): string {
  return `
admin_keys:
  - { name: ops, sha256: ${sha(ADMIN_KEY)} }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: sk-test-openai-0123456789, retries: 0, timeout_ms: 2000 }
routing: { max_retry_wait_ms: 100 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
    pricing: { input: 0.40, cached_input: 0.10, output: 1.60 }
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
  - id: openai/gpt-image-1
    endpoints: [images_generations]
    modalities: { input: [text], output: [image] }
    deployments: [{ provider: openai, model: gpt-image-1 }]
    pricing: { input: 5.00, cached_input: 1.25, input_image: 10.00, output_image: 40.00 }
storage:
${storage}`;
}

/** Reading rows back the way an operator would, straight from the database. */
interface Reader {
  rows(): Promise<Record<string, any>[]>;
  close(): Promise<void>;
}

/** Requests made through the openai client, with what the client saw. */
interface Made {
  id: string;
  endpoint: string;
  model: string | null;
  user: string | null;
  session: string | null;
  status: number;
  stream: boolean;
  usage?: { input: number; output: number; cached: number; reasoning: number };
}

async function admin(gw: TestGateway, query: string, key = ADMIN_KEY): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.url}/admin/usage${query}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: await res.json() };
}

async function exercise(t: Test, gw: TestGateway, read: Reader): Promise<void> {
  const made: Made[] = [];
  const client = (user?: string, session?: string) =>
    new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { ...(user ? { 'x-gateway-user-id': user } : {}), ...(session ? { 'x-gateway-session-id': session } : {}) } });
  const a = client('u-1', 's-1');
  const b = client('u-2');
  const chat = async (c: OpenAI, model: string, user: string | null, session: string | null) => {
    const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: `hello from ${user}` }] }).withResponse();
    const u = r.data.usage!;
    made.push({ id: r.response.headers.get('x-request-id')!, endpoint: 'chat_completions', model, user, session, status: 200, stream: false, usage: { input: u.prompt_tokens, output: u.completion_tokens, cached: u.prompt_tokens_details?.cached_tokens ?? 0, reasoning: u.completion_tokens_details?.reasoning_tokens ?? 0 } });
  };
  await chat(a, 'openai/gpt-4.1-mini', 'u-1', 's-1');
  await chat(a, 'openai/gpt-4.1-mini', 'u-1', 's-1');
  await chat(b, 'openai/gpt-5-mini', 'u-2', null);
  // A stream whose client did not ask for usage: the record has it all the same.
  const s = await a.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'stream it' }], stream: true, stream_options: { include_usage: true } }).withResponse();
  let su: OpenAI.CompletionUsage | undefined;
  for await (const c of s.data) if (c.usage) su = c.usage;
  made.push({ id: s.response.headers.get('x-request-id')!, endpoint: 'chat_completions', model: 'openai/gpt-4.1-mini', user: 'u-1', session: 's-1', status: 200, stream: true, usage: { input: su!.prompt_tokens, output: su!.completion_tokens, cached: 0, reasoning: 0 } });
  const resp = await b.responses.create({ model: 'openai/gpt-4.1-mini', input: 'a response', store: false }).withResponse();
  const ru = resp.data.usage!;
  made.push({ id: resp.response.headers.get('x-request-id')!, endpoint: 'responses', model: 'openai/gpt-4.1-mini', user: 'u-2', session: null, status: 200, stream: false, usage: { input: ru.input_tokens, output: ru.output_tokens, cached: 0, reasoning: ru.output_tokens_details.reasoning_tokens } });
  const img = await client().images.generate({ model: 'openai/gpt-image-1', prompt: 'a square' }).withResponse();
  const iu = img.data.usage!;
  made.push({ id: img.response.headers.get('x-request-id')!, endpoint: 'images_generations', model: 'openai/gpt-image-1', user: null, session: null, status: 200, stream: false, usage: { input: iu.input_tokens, output: iu.output_tokens, cached: 0, reasoning: 0 } });
  // Failures: the upstream answers 500 (502 to the client), and an unknown model (404).
  oai.fail({ status: 500 });
  const e1 = await a.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'fail' }] }).catch((e) => e);
  made.push({ id: e1.headers.get('x-request-id'), endpoint: 'chat_completions', model: 'openai/gpt-4.1-mini', user: 'u-1', session: 's-1', status: e1.status, stream: false });
  const e2 = await b.chat.completions.create({ model: 'openai/nope', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  made.push({ id: e2.headers.get('x-request-id'), endpoint: 'chat_completions', model: null, user: 'u-2', session: null, status: 404, stream: false });
  t.ok(e1.status >= 500, `the upstream failure answers ${e1.status}`);
  // Reads and counts make no record.
  await a.models.list();

  await until(() => gw.records.length >= made.length, 5000);
  await gw.gw.usage!.flush();
  t.equal(gw.gw.usage!.stats.dropped, 0, 'nothing dropped');
  const rows = await read.rows();
  t.equal(rows.length, made.length, 'one record per request, none for GET /v1/models');
  for (const m of made) {
    const r = rows.find((x) => x.request_id === m.id);
    t.ok(r, `a record for ${m.endpoint} ${m.model} (${m.status})`);
    if (!r) continue;
    t.equal(r.endpoint, m.endpoint);
    t.equal(r.model, m.model);
    t.equal(Number(r.status), m.status);
    t.equal(r.key_name, 'env-1');
    t.equal(r.user_id, m.user);
    t.equal(r.session_id, m.session);
    t.equal(Number(r.stream), m.stream ? 1 : 0);
    t.equal(Number(r.error), m.status >= 400 ? 1 : 0);
    t.type(Number(r.time), 'number');
    t.ok(Number(r.latency_ms) >= 0, 'latency recorded');
    if (m.usage) {
      t.equal(Number(r.input_tokens), m.usage.input, 'input tokens as the client saw them');
      t.equal(Number(r.output_tokens), m.usage.output, 'output tokens as the client saw them');
      t.equal(Number(r.reasoning_tokens), m.usage.reasoning);
      t.equal(r.provider, 'openai');
      t.equal(r.deployment, m.model!.slice('openai/'.length));
      t.equal(Number(r.attempts), 1);
      t.equal(r.usage_source, 'reported');
      t.ok(r.ttfb_ms !== null, 'time to first byte recorded');
    }
    if (m.model === 'openai/gpt-4.1-mini' && m.usage) t.ok(Math.abs(Number(r.cost_usd) - (m.usage.input * 0.4 + m.usage.output * 1.6) / 1e6) < 1e-9, 'cost from the catalog prices');
    if (m.model === 'openai/gpt-5-mini') t.equal(r.cost_usd, null, 'a model without prices costs null');
  }
  const failed = rows.find((x) => x.request_id === made[6].id)!;
  t.ok(failed.error_type, `the failure's type is recorded (${failed.error_type})`);

  // --- GET /admin/usage
  t.equal((await admin(gw, '?group_by=model', '')).status, 401, 'no key: 401');
  const asClient = await admin(gw, '?group_by=model', CLIENT_KEY);
  t.equal(asClient.status, 403, 'a client key: 403');
  t.equal(asClient.body.error.type, 'permission_denied_error');

  const sum = (ms: Made[], f: (u: NonNullable<Made['usage']>) => number) => ms.reduce((n, m) => n + (m.usage ? f(m.usage) : 0), 0);
  const expectGroup = (body: any, key: string, value: string | null, ms: Made[]) => {
    const row = body.data.find((r: any) => r[key] === value);
    t.ok(row, `a row for ${key} ${value}`);
    if (!row) return;
    t.equal(row.requests, ms.length, `${key} ${value}: requests`);
    t.equal(row.errors, ms.filter((m) => m.status >= 400).length, `${key} ${value}: errors`);
    t.equal(row.input_tokens, sum(ms, (u) => u.input), `${key} ${value}: input tokens`);
    t.equal(row.output_tokens, sum(ms, (u) => u.output), `${key} ${value}: output tokens`);
  };
  const byModel = await admin(gw, '?group_by=model');
  t.equal(byModel.status, 200);
  for (const model of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini', 'openai/gpt-image-1', null]) expectGroup(byModel.body, 'model', model, made.filter((m) => m.model === model));
  t.equal(byModel.body.data.length, 4, 'one row per model (and one for the request that named none)');
  const mini = byModel.body.data.find((r: any) => r.model === 'openai/gpt-4.1-mini');
  const miniCost = made.filter((m) => m.model === 'openai/gpt-4.1-mini' && m.usage).reduce((c, m) => c + (m.usage!.input * 0.4 + m.usage!.output * 1.6) / 1e6, 0);
  t.ok(Math.abs(mini.cost_usd - miniCost) < 1e-8, `cost_usd summed (${mini.cost_usd})`);
  t.equal(byModel.body.data.find((r: any) => r.model === 'openai/gpt-5-mini').cost_usd, null, 'no prices: null, not 0');

  const byUser = await admin(gw, '?group_by=user');
  for (const user of ['u-1', 'u-2', null]) expectGroup(byUser.body, 'user', user, made.filter((m) => m.user === user));
  const bySession = await admin(gw, '?group_by=session');
  for (const session of ['s-1', null]) expectGroup(bySession.body, 'session', session, made.filter((m) => m.session === session));
  const byKey = await admin(gw, '?group_by=key');
  expectGroup(byKey.body, 'key', 'env-1', made);
  const byProvider = await admin(gw, '?group_by=provider');
  expectGroup(byProvider.body, 'provider', 'openai', made.filter((m) => m.model && m.model !== null && m.status !== 404));
  const total = await admin(gw, '');
  t.equal(total.body.data.length, 1, 'no group_by: one row for the whole range');
  t.equal(total.body.data[0].requests, made.length);

  // With an interval: one row per bucket and group, each with its start.
  const hour = 3_600_000;
  const now = Date.now();
  const from = new Date(Math.floor(now / hour) * hour - 2 * hour).toISOString();
  const to = new Date(now + hour).toISOString();
  const bucketed = await admin(gw, `?group_by=model&interval=1h&from=${from}&to=${to}`);
  t.equal(bucketed.status, 200);
  const thisHour = new Date(Math.floor(Math.min(...rows.map((r) => Number(r.time))) / hour) * hour).toISOString();
  for (const row of bucketed.body.data) {
    t.match(row.start, /^\d{4}-\d\d-\d\dT\d\d:00:00\.000Z$/, 'buckets start on the hour');
    t.ok(Object.keys(row)[0] === 'start' && Object.keys(row)[1] === 'model', 'start, then the group');
  }
  const inBucket = bucketed.body.data.filter((r: any) => r.start === thisHour);
  t.ok(inBucket.length >= 1, 'the requests fall in the current hour');
  t.equal(bucketed.body.data.reduce((n: number, r: any) => n + r.requests, 0), made.length, 'every request in some bucket');
  const empty = await admin(gw, `?from=2001-01-01T00:00:00Z&to=2001-01-02T00:00:00Z&group_by=model`);
  t.same(empty.body, { data: [] }, 'a range without requests: no rows');

  const bad = await admin(gw, '?group_by=colour');
  t.equal(bad.status, 400);
  t.equal(bad.body.error.param, 'group_by');
  t.equal((await admin(gw, '?interval=5x')).body.error.param, 'interval');
  t.equal((await admin(gw, '?from=yesterday')).body.error.param, 'from');
  t.equal((await admin(gw, '?interval=1s&from=2000-01-01T00:00:00Z')).body.error.code, 'out_of_range');

  // The latest failures, with their request ids (what a dashboard lists).
  const res = await fetch(`${gw.url}/admin/usage/records?errors=true&limit=10`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const recent = (await res.json()) as any;
  t.same(recent.data.map((r: any) => r.request_id).sort(), [made[6].id, made[7].id].sort(), 'the failed requests, by id');

  // Retention: a record older than retention_days goes, the others stay.
  const old = [now - 200 * 86_400_000, 'old-record', null, null, null, 'chat_completions', 'openai/gpt-4.1-mini', null, 'openai', null, 1, 0, 200, null, 0, 0, 'reported', 1, 0, 0, 0, 1, 0, 0, 0, 0, null, 5, 5, 5];
  t.equal(old.length, COLUMNS.length);
  await gw.gw.usage!.backend!.write([old]);
  t.ok((await read.rows()).some((r) => r.request_id === 'old-record'));
  await gw.gw.usage!.prune();
  const after = await read.rows();
  t.notOk(after.some((r) => r.request_id === 'old-record'), 'the old record was deleted');
  t.equal(after.length, made.length, 'the recent ones stay');

  t.notOk(gw.rawLogs.join('').includes(ADMIN_KEY), 'the admin key is in no log line');
  t.ok(gw.logs.some((l) => l.path === '/admin/usage' && l.admin_key === 'ops'), "the access log names the admin key's name");
}

/** Requests while the store is blocked: every one is answered, the records beyond the queue are dropped and counted. */
async function blocked(t: Test, gw: TestGateway, hold: () => Promise<() => Promise<void>>): Promise<void> {
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  // A first record reaches the store and opens its write, which now waits on the lock.
  const release = await hold();
  const answers = [];
  for (let i = 0; i < 8; i++) answers.push(await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: `while blocked ${i}` }] }));
  t.equal(answers.length, 8, 'every request was answered while the store could not write');
  await until(() => gw.records.length === 8, 5000);
  await until(() => gw.gw.usage!.stats.dropped > 0, 5000);
  await release();
  await gw.gw.usage!.flush();
  const { written, dropped } = gw.gw.usage!.stats;
  t.ok(dropped > 0, `records were dropped (${dropped}) rather than waited for`);
  t.equal(written + dropped, 8, 'every record was written or counted as dropped');
  t.ok(gw.logs.some((l) => /usage records dropped/.test(l.msg ?? '')), 'the drop is logged');
}

const FAST = 'flush_ms: 20';

t.test('SQLite (the default store)', async (t) => {
  const db = path.join(dir, 'usage.sqlite');
  const gw = await startGateway(config(`  usage: { db: ${db}, ${FAST}, retention_days: 90 }`), {}, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  t.equal(gw.gw.usage!.backend!.kind, 'sqlite');
  const reader = new DatabaseSync(db, { readOnly: true });
  t.teardown(() => reader.close());
  await exercise(t, gw, { rows: async () => reader.prepare('SELECT * FROM gateway_usage').all() as Record<string, any>[], close: async () => {} });
});

t.test('SQLite: a locked database never holds a request', async (t) => {
  const db = path.join(dir, 'locked.sqlite');
  const gw = await startGateway(config(`  usage: { db: ${db}, flush_ms: 10, batch_size: 1, queue_size: 2, write_timeout_ms: 60000 }`), {}, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  const other = new DatabaseSync(db);
  t.teardown(() => other.close());
  await blocked(t, gw, async () => {
    other.exec('BEGIN EXCLUSIVE');
    return async () => other.exec('COMMIT');
  });
});

const pgDown = await postgresDown(PG_URL);
const skipPg = pgDown ? `PostgreSQL is not running on 127.0.0.1:5432 (${pgDown}): the PostgreSQL usage store was not tested` : false;

t.test('PostgreSQL (storage.url)', { skip: skipPg }, async (t) => {
  const table = `gw_usage_test_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  t.teardown(async () => {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`DROP TABLE IF EXISTS ${table}_migrations`);
    await client.end();
  });
  const gw = await startGateway(config(`  url: \${DATABASE_URL:-}\n  usage: { table: ${table}, ${FAST} }`), { DATABASE_URL: PG_URL }, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  t.equal(gw.gw.usage!.backend!.kind, 'postgres', 'storage.url from DATABASE_URL names PostgreSQL');
  const migrations = await client.query(`SELECT version FROM ${table}_migrations ORDER BY version`);
  t.same(migrations.rows.map((r) => r.version), [1, 2], 'the schema was created and its migrations recorded at start-up');
  await exercise(t, gw, { rows: async () => (await client.query(`SELECT * FROM ${table}`)).rows, close: async () => {} });
});

t.test('PostgreSQL: a locked table never holds a request', { skip: skipPg }, async (t) => {
  const table = `gw_usage_lock_${randomBytes(4).toString('hex')}`;
  const locker = new pg.Client({ connectionString: PG_URL });
  await locker.connect();
  t.teardown(async () => {
    await locker.query(`DROP TABLE IF EXISTS ${table}`);
    await locker.query(`DROP TABLE IF EXISTS ${table}_migrations`);
    await locker.end();
  });
  const gw = await startGateway(config(`  url: ${PG_URL}\n  usage: { table: ${table}, flush_ms: 10, batch_size: 1, queue_size: 2, write_timeout_ms: 60000 }`), {}, 'test-gateway.yaml', { usageStore: true });
  t.teardown(() => gw.close());
  await blocked(t, gw, async () => {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    return async () => {
      await locker.query('COMMIT');
    };
  });
});

t.test('a second run of the migrations changes nothing (a restarted gateway)', { skip: skipPg }, async (t) => {
  const table = `gw_usage_mig_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  t.teardown(async () => {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`DROP TABLE IF EXISTS ${table}_migrations`);
    await client.end();
  });
  const yaml = config(`  url: ${PG_URL}\n  usage: { table: ${table}, ${FAST} }`);
  const [one, two] = await Promise.all([1, 2].map(() => startGateway(yaml, {}, 'test-gateway.yaml', { usageStore: true })));
  await one.close();
  await two.close();
  const again = await startGateway(yaml, {}, 'test-gateway.yaml', { usageStore: true });
  await again.close();
  const m = await client.query(`SELECT version FROM ${table}_migrations`);
  t.equal(m.rows.length, 2, 'each migration applied once, by one of two gateways starting together');
});

t.test('storage.url must name PostgreSQL', async (t) => {
  const err = await startGateway(config(`  url: mysql://localhost/db`)).catch((e) => e);
  t.match(err.problems, [{ path: 'storage.url', message: /PostgreSQL URL/ }]);
});
