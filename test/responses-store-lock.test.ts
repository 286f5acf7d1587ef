// A responses store whose SQLite file another connection holds a write lock
// on (another process, a backup, an operator's sqlite3 shell): the store's
// connection lives in its own thread, so a write waiting for the lock does not
// stall the gateway's event loop (other requests are answered meanwhile), and
// a response that could not be stored in storage.responses_timeout_ms is answered with
// `store: false` (and a warning header when it is JSON), never as stored.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-store-lock-'));
const file = path.join(dir, 'responses.sqlite');
const oai = await startOpenAIMock();
t.teardown(async () => {
  await oai.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const config = (timeoutMs: number) => `
storage:
  responses_db: ${file}
  responses_timeout_ms: ${timeoutMs}
providers:
  - name: compat
    family: openai-compatible
    base_url: ${oai.url}/v1
    api_key: sk-test-openai-0123456789
models:
  - id: compat/gpt-4.1-mini
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
`;
const MODEL = 'compat/gpt-4.1-mini';

/** Another connection to the same file, holding its write lock until release(). */
function lockStore(): { release(): void } {
  const other = new DatabaseSync(file);
  other.exec('BEGIN IMMEDIATE');
  return {
    release() {
      other.exec('COMMIT');
      other.close();
    },
  };
}

/** A few turns of the event loop: an upstream answer that has arrived is read by then. */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

t.test('a write waiting for the lock leaves the event loop free; it is stored once the lock goes', async (t) => {
  const gw = await startGateway(config(60_000));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  const first = await client.responses.create({ model: MODEL, input: 'first turn' });
  t.equal((first as any).store, true, 'the store works (and its file and tables exist)');

  const lock = lockStore();
  let released = false;
  t.teardown(() => {
    if (!released) lock.release();
  });
  oai.reset();
  let answered = false;
  const pending = client.responses.create({ model: MODEL, input: 'stored while locked' }).then((r) => {
    answered = true;
    return r;
  });
  // The upstream has answered: the gateway is on to storing it, and waits for the lock.
  await until(() => oai.requests[0]?.finished === true);
  await turns();

  // Meanwhile the same process answers other requests: a model list, a response not stored,
  // and one that continues the stored conversation (reads are not blocked by the writer, in WAL mode).
  const models = await client.models.list();
  t.ok(models.data.some((m) => m.id === MODEL));
  const unstored = await client.responses.create({ model: MODEL, input: 'not stored', store: false });
  t.equal(unstored.status, 'completed');
  const followUp = await client.responses.create({ model: MODEL, input: 'second turn', previous_response_id: first.id, store: false });
  t.equal(followUp.status, 'completed');
  t.equal(answered, false, 'all of that while the stored response still waited for the lock');

  lock.release();
  released = true;
  const stored = await pending;
  t.equal((stored as any).store, true);
  const got = await client.responses.retrieve(stored.id);
  t.equal(got.id, stored.id, 'stored once the lock was released');
});

t.test('a response that could not be stored within storage.responses_timeout_ms is answered with store: false', async (t) => {
  const gw = await startGateway(config(1000));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  const lock = lockStore();
  let released = false;
  t.teardown(() => {
    if (!released) lock.release();
  });

  const { data: json, response } = await client.responses.create({ model: MODEL, input: 'hello' }).withResponse();
  t.equal(response.status, 200, 'the client still gets its answer');
  t.equal(json.status, 'completed');
  t.equal((json as any).store, false, 'not reported as stored');
  t.equal(response.headers.get('x-gateway-warning'), 'store_failed');
  const missing: any = await client.responses.retrieve(json.id).catch((e) => e);
  t.equal(missing.status, 404, 'and indeed not stored');

  const stream = await client.responses.create({ model: MODEL, input: 'hello', stream: true });
  let completed: any;
  for await (const e of stream) if (e.type === 'response.completed') completed = e.response;
  t.equal(completed?.store, false, "a stream's response.completed says store: false");
  t.equal(((await client.responses.retrieve(completed.id).catch((e) => e)) as any).status, 404);

  await until(() => gw.logs.filter((l) => l.msg === 'request' && l.store_error).length === 2);
  t.ok(gw.logs.filter((l) => l.msg === 'request' && l.store_error).every((l) => ['STORE_LOCKED', 'STORE_TIMEOUT'].includes(l.store_error)), 'the access log says why');
  t.ok(gw.logs.some((l) => /storing the response failed/.test(l.msg ?? '')), 'the failure is logged');
  t.notOk(gw.rawLogs.some((l) => /"stack"/.test(l)), 'without a stack trace');

  // Reading a stored response is not blocked by another connection's write lock (WAL);
  // deleting one needs the lock: a 503 the client can retry, not a 500.
  lock.release();
  released = true;
  const kept = await client.responses.create({ model: MODEL, input: 'kept' });
  t.equal((kept as any).store, true, 'stored again once the lock is gone');
  const again = lockStore();
  t.teardown(() => again.release());
  t.equal((await client.responses.retrieve(kept.id)).id, kept.id, 'read while another connection holds the write lock');
  const del: any = await client.responses.delete(kept.id).catch((e) => e);
  t.equal(del.status, 503);
  t.match(del.error, { type: 'service_unavailable_error', code: 'store_unavailable' });
});
