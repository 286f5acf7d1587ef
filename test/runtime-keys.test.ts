// Runtime client keys (docs/keys.md, "Runtime keys"): POST/GET/DELETE
// /admin/keys behind the admin key, `model-gateway keys create|list|revoke`;
// the key shown once and stored hashed; its policy applied; a revoked key
// refused; SQLite by default and PostgreSQL (skipped, saying so, where none runs).
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import OpenAI, { APIError } from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGateway, untilAsync } from './helpers/gateway.js';

const ADMIN = 'gw-admin-key-runtime-0001';
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/cli.js');
const run = promisify(execFile);

const oai = await startOpenAIMock();
t.teardown(() => oai.close());
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-keys-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const yaml = (storage: string) => `
storage: ${storage}
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-4.1
    deployments: [{ provider: openai, model: gpt-4.1 }]
`;

const admin = (url: string, method: string, p: string, body?: unknown, key = ADMIN) =>
  fetch(`${url}${p}`, { method, headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
const ask = (baseURL: string, key: string, model = 'openai/gpt-4.1-mini') =>
  new OpenAI({ apiKey: key, baseURL, maxRetries: 0 }).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
const status = (p: Promise<unknown>) => p.then(() => 200, (e: APIError) => e.status);

async function suite(t: Test, storage: string) {
  const gw = await startGateway(yaml(storage), { GATEWAY_ADMIN_KEY: ADMIN });
  t.teardown(() => gw.close());

  const created = await admin(gw.url, 'POST', '/admin/keys', { name: 'team-x', rpm: 2, models: ['openai/gpt-4.1-mini'], budget_usd: 5, budget_period: 'day' });
  t.equal(created.status, 201);
  const body = (await created.json()) as Record<string, any>;
  t.match(body, { name: 'team-x', key: /^sk-gw-[\w-]{40,}$/, rpm: 2, models: ['openai/gpt-4.1-mini'], budget_usd: 5, budget_period: 'day', created_at: Number });

  // The key works at once on this gateway, under its policy.
  const { response } = await ask(gw.baseURL, body.key);
  t.equal(response.headers.get('x-ratelimit-limit-requests'), '2');
  t.equal(await status(ask(gw.baseURL, body.key, 'openai/gpt-4.1')), 403, 'outside its models');
  t.equal(await status(ask(gw.baseURL, body.key)), 200);
  t.equal(await status(ask(gw.baseURL, body.key)), 429, 'its rpm');

  // Listed without the key or its hash.
  const list = (await (await admin(gw.url, 'GET', '/admin/keys')).json()) as { data: Record<string, unknown>[] };
  t.match(list.data, [{ name: 'team-x', rpm: 2, revoked: false }]);
  t.notOk(JSON.stringify(list).includes(body.key), 'the key is not listed');
  t.notOk(JSON.stringify(list).match(/[a-f0-9]{64}/), 'nor its hash');

  // Mistakes: named precisely; a taken name; a client key on the admin API.
  const bad = await admin(gw.url, 'POST', '/admin/keys', { name: 'y', rpm: 0 });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: { type: 'invalid_request_error', param: 'rpm' } });
  const unknown = await admin(gw.url, 'POST', '/admin/keys', { name: 'y', color: 'red' });
  t.match(await unknown.json(), { error: { param: 'color' } });
  const taken = await admin(gw.url, 'POST', '/admin/keys', { name: 'team-x' });
  t.equal(taken.status, 409);
  t.match(await taken.json(), { error: { code: 'key_exists', param: 'name' } });
  t.equal((await admin(gw.url, 'GET', '/admin/keys', undefined, body.key)).status, 403, 'a client key gets 403 on the admin API');
  t.equal((await admin(gw.url, 'GET', '/admin/keys', undefined, 'nope')).status, 401);

  // Revoked: refused at once; a second revoke finds nothing; the name can be used again.
  const del = await admin(gw.url, 'DELETE', '/admin/keys/team-x');
  t.equal(del.status, 200);
  t.same(await del.json(), { name: 'team-x', revoked: true });
  t.equal(await status(ask(gw.baseURL, body.key)), 401);
  t.equal((await admin(gw.url, 'DELETE', '/admin/keys/team-x')).status, 404);
  const again = await admin(gw.url, 'POST', '/admin/keys', { name: 'team-x' });
  t.equal(again.status, 201);
  const fresh = ((await again.json()) as { key: string }).key;
  t.not(fresh, body.key);
  t.equal(await status(ask(gw.baseURL, fresh)), 200);
  t.equal(await status(ask(gw.baseURL, body.key)), 401, 'the old key stays revoked');
}

t.test('SQLite: the admin API creates, lists and revokes keys', (t) => suite(t, `{ usage: { enabled: false, db: "${dir}/a.sqlite" } }`));

t.test('the CLI: keys create, list and revoke reach a running gateway (no Redis: within a second)', async (t) => {
  const file = path.join(dir, 'cli.yaml');
  fs.writeFileSync(file, yaml(`{ usage: { enabled: false, db: "${dir}/cli.sqlite" } }`));
  const gw = await startGateway(yaml(`{ usage: { enabled: false, db: "${dir}/cli.sqlite" } }`), {}, file);
  t.teardown(() => gw.close());
  const env = { ...process.env, GATEWAY_CONFIG: file };
  const out = await run(process.execPath, [cli, 'keys', 'create', 'from-cli', '--rpm', '7', '--endpoints', 'chat_completions'], { env });
  const made = JSON.parse(out.stdout) as { name: string; key: string; rpm: number; endpoints: string[] };
  t.match(made, { name: 'from-cli', key: /^sk-gw-/, rpm: 7, endpoints: ['chat_completions'] });
  // The gateway (no admin key, no Redis) opens the file the CLI created and finds the key.
  await untilAsync(async () => (await status(ask(gw.baseURL, made.key))) === 200, 5000);
  t.pass('the running gateway accepts the new key');
  const listed = await run(process.execPath, [cli, 'keys', 'list'], { env });
  t.match(JSON.parse(listed.stdout), { data: [{ name: 'from-cli', rpm: 7, revoked: false }] });
  t.notOk(listed.stdout.includes(made.key));
  const bad = await run(process.execPath, [cli, 'keys', 'create', 'x', '--rpm', 'many'], { env }).catch((e: { code: number; stderr: string }) => e);
  t.match(bad, { code: 2, stderr: /--rpm/ });
  await run(process.execPath, [cli, 'keys', 'revoke', 'from-cli'], { env });
  await untilAsync(async () => (await status(ask(gw.baseURL, made.key))) === 401, 2000);
  t.pass('refused within two seconds of the revoke');
});

const PG = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const table = `gw_keys_test_${process.pid}`;
const probe = new pg.Client({ connectionString: PG, connectionTimeoutMillis: 2000 });
const pgUp = await probe.connect().then(
  () => true,
  () => false,
);
if (pgUp) {
  t.teardown(async () => {
    await probe.query(`DROP TABLE IF EXISTS ${table}_keys`);
    await probe.end();
  });
  t.test('PostgreSQL: the admin API creates, lists and revokes keys', (t) => suite(t, `{ url: "${PG}", usage: { enabled: false, table: ${table} } }`));
} else {
  t.comment(`skipped: no PostgreSQL answers at ${PG} (set TEST_DATABASE_URL; .ci/run starts one): the runtime keys were tested on SQLite only`);
}
