// Stored responses in PostgreSQL (storage.url): the store itself (owner
// scoping, replacement, a conversation's chain in one query, output items for
// item_reference, migrations applied once), two gateway processes on one
// database driven by the official openai SDK (a response stored through
// replica A is continued, fetched, listed, referenced and deleted through
// replica B, and a client that continues at once always finds its response),
// and a database that is locked or away: bounded waits, `store: false` for a
// response not stored, a retryable 503 for a read, never a hang. Skipped,
// saying so, where no PostgreSQL runs.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import OpenAI from 'openai';
import { openPostgresResponseStore } from '../src/store/responses-pg.js';
import { storedResponse } from './helpers/stored-response.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';
import { startGatewayProcess, postgresDown } from './helpers/process.js';

type Any = any;

const PG = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const down = await postgresDown(PG);
if (down) {
  t.comment(`skipped: no PostgreSQL answers at ${PG} (${down}; set TEST_DATABASE_URL, or start one: .ci/run does): stored responses were not tested on PostgreSQL`);
  t.pass('skipped: no PostgreSQL');
  t.end();
} else {
  await run();
}

async function run() {
  const admin = new pg.Client({ connectionString: PG });
  await admin.connect();
  const tables: string[] = [];
  /** A table name of this run (dropped at the end, with its items and migrations tables, and `<name>_u_keys` of the runtime keys). */
  const table = (what: string) => {
    const name = `gw_resp_${what}_${randomBytes(4).toString('hex')}`;
    tables.push(name);
    return name;
  };
  t.teardown(async () => {
    for (const n of tables) await admin.query(`DROP TABLE IF EXISTS ${n}, ${n}_items, ${n}_migrations, ${n}_u_keys`);
    await admin.end();
  });

  const record = storedResponse;

  t.test('the store: owner-scoped, replace, chain, items, migrations once', async (t) => {
    const name = table('store');
    const s = openPostgresResponseStore(PG, name);
    t.teardown(() => s.close());
    await s.put(record('resp_a'));
    const [migrated] = (await admin.query(`SELECT count(*)::int AS n FROM ${name}_migrations`)).rows;
    t.equal(migrated.n, 1, 'the tables were created by the first operation, the migration recorded');
    await s.put(record('resp_b', 'alice', 'resp_a', ['msg_b1', 'msg_b2']));
    await s.put(record('resp_c', 'alice', 'resp_b', ['msg_c']));
    await s.put(record('resp_x', 'bob', null, ['msg_x']));

    const got = (await s.get('resp_a', 'alice'))!;
    t.same(got, record('resp_a'), 'a stored response comes back as it was put');
    t.same(Object.keys(got.response), Object.keys(record('resp_a').response), "the response object's keys in their order");
    t.equal(await s.get('resp_a', 'bob'), undefined, 'another owner sees nothing');
    t.same((await s.chain('resp_c', 'alice', 100)).map((r) => r.id), ['resp_c', 'resp_b', 'resp_a'], 'the chain, newest first, in one query');
    t.same((await s.chain('resp_c', 'alice', 2)).map((r) => r.id), ['resp_c', 'resp_b'], 'at most max turns');
    t.same(await s.chain('resp_c', 'bob', 100), [], "empty when the id is not the owner's");
    t.same((await s.chain('resp_b', 'alice', 100))[0].input, record('resp_b').input);

    const items = await s.items(['msg_b1', 'msg_b2', 'msg_x', 'msg_b1', 'msg_none'], 'alice');
    t.same([...items.keys()].sort(), ['msg_b1', 'msg_b2'], "the owner's output items only, each once");
    t.equal((items.get('msg_b2') as Any).content[0].text, 'text of msg_b2');

    await s.put({ ...record('resp_b', 'alice', 'resp_a', ['msg_b2', 'msg_b3', 'msg_b3']), model: 'compat/llama' });
    t.equal((await s.get('resp_b', 'alice'))!.model, 'compat/llama', 'put replaces');
    t.same([...(await s.items(['msg_b1', 'msg_b2', 'msg_b3'], 'alice')).keys()].sort(), ['msg_b2', 'msg_b3'], 'a replaced response keeps only its new items');

    t.equal(await s.delete('resp_b', 'bob'), false, 'another owner cannot delete');
    t.equal(await s.delete('resp_b', 'alice'), true);
    t.equal(await s.delete('resp_b', 'alice'), false, 'gone');
    t.equal((await s.items(['msg_b2', 'msg_b3'], 'alice')).size, 0, "deleting a response deletes its items");
    t.same((await s.chain('resp_c', 'alice', 100)).map((r) => r.id), ['resp_c'], 'a deleted turn ends the chain');

    // A cycle (only a replaced response can make one) ends where it comes back.
    await s.put(record('resp_a', 'alice', 'resp_c'));
    t.same((await s.chain('resp_c', 'alice', 100)).map((r) => r.id), ['resp_c'], 'resp_b is gone: the chain still ends there');
    await s.put(record('resp_c', 'alice', 'resp_a', ['msg_c']));
    t.same((await s.chain('resp_c', 'alice', 100)).map((r) => r.id), ['resp_c', 'resp_a'], 'a cycle ends at the first turn seen twice');

    // Another handle (another replica) on the same tables: the migration is not applied again.
    const other = openPostgresResponseStore(PG, name);
    t.equal((await other.get('resp_x', 'bob'))!.id, 'resp_x');
    await other.close();
    t.equal((await admin.query(`SELECT count(*)::int AS n FROM ${name}_migrations`)).rows[0].n, 1, 'migrated once');
    await s.close();
    await t.rejects(s.get('resp_a', 'alice'), { code: 'STORE_CLOSED' });
  });

  // The upstreams, strict mocks: OpenAI's Responses API (native path) and Chat Completions, Anthropic's Messages.
  const responsesMock = createResponsesMock();
  const oai = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler } });
  const ant = await startAnthropicMock();
  t.teardown(() => Promise.all([oai.close(), ant.close()]));
  const models = `
providers:
  - { name: openai, family: openai, base_url: "${oai.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 5000, retries: 0 }
  - { name: compat, family: openai-compatible, base_url: "${oai.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 5000, retries: 0 }
  - { name: anthropic, family: anthropic, base_url: "${ant.url}", api_key: ${ANTHROPIC_KEY}, timeout_ms: 5000, retries: 0 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: compat/gpt
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
  - id: anthropic/claude-sonnet-4-5
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
`;

  t.test('two replicas on one database: a response stored through A is continued, fetched, referenced and deleted through B', async (t) => {
    const name = table('fleet');
    const yaml = (dir: string) => `
server: { workers: 1, log_level: info }
storage:
  url: \${DATABASE_URL}
  responses_table: ${name}
  responses_db: ${dir}/must-not-be-used.sqlite
  usage: { enabled: false, table: ${name}_u }
${models}`;
    const env = { DATABASE_URL: PG, GATEWAY_API_KEYS: CLIENT_KEY };
    const [A, B] = await Promise.all([startGatewayProcess(t, yaml, env), startGatewayProcess(t, yaml, env)]);
    const a = new OpenAI({ apiKey: CLIENT_KEY, baseURL: A.baseURL, maxRetries: 0 });
    const b = new OpenAI({ apiKey: CLIENT_KEY, baseURL: B.baseURL, maxRetries: 0 });

    // Turn 1 on A, through the chat path (an OpenAI-compatible provider).
    const r1: Any = await a.responses.create({ model: 'compat/gpt', input: 'Remember the number 7.' });
    t.equal(r1.store, true);
    t.equal(r1.output_text, 'Echo: Remember the number 7.');

    // B fetches it: the object A answered.
    const got: Any = await b.responses.retrieve(r1.id);
    t.equal(got.id, r1.id);
    t.same(got.output, r1.output, 'GET through B: the stored output');

    // Turn 2 on B, on another family (Anthropic): B replays the conversation A stored.
    const r2: Any = await b.responses.create({ model: 'anthropic/claude-sonnet-4-5', previous_response_id: r1.id, input: 'Which number?' });
    t.equal(r2.previous_response_id, r1.id);
    const sent = ant.requests.at(-1)!.body.messages.map((m: Any) => (typeof m.content === 'string' ? m.content : m.content.map((p: Any) => p.text).join('')));
    t.same(sent, ['Remember the number 7.', 'Echo: Remember the number 7.', 'Which number?'], "Anthropic got the history stored through A");

    // Its input items through B: A's turn, then its own input.
    const listed = await b.responses.inputItems.list(r2.id, { order: 'asc' });
    t.same(
      listed.data.map((it: Any) => [it.type, it.role]),
      [
        ['message', 'user'],
        ['message', 'assistant'],
        ['message', 'user'],
      ],
      'input_items through B: the chain stored through A and B',
    );

    // Turn 3 on A, same-API target (OpenAI's Responses API): A reads B's turn.
    const r3: Any = await a.responses.create({ model: 'openai/gpt-4.1-mini', previous_response_id: r2.id, input: 'And doubled?' });
    t.equal(r3.status, 'completed');
    const native = oai.requests.filter((r) => r.path === '/v1/responses').at(-1)!.body;
    t.equal(native.previous_response_id, undefined, 'the id is the gateway\'s: OpenAI gets the history itself');
    t.equal(native.input.length, 5, 'two stored turns (input and output each) and the new input');

    // item_reference through B to an output item A stored.
    const ref: Any = await b.responses.create({ model: 'compat/gpt', store: false, input: [{ type: 'item_reference', id: r1.output[0].id }, { role: 'user', content: 'Repeat that.' }] } as Any);
    t.equal(ref.status, 'completed');
    const chat = oai.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)!.body;
    t.same(
      chat.messages.map((m: Any) => [m.role, m.content]),
      [
        ['assistant', 'Echo: Remember the number 7.'],
        ['user', 'Repeat that.'],
      ],
      'the referenced item, stored through A, resolved through B',
    );

    // A streamed response stored through B, fetched through A.
    const stream = await b.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: 'Stream me.', stream: true });
    let completed: Any;
    for await (const e of stream) if (e.type === 'response.completed') completed = e.response;
    t.equal(completed.store, true);
    t.equal(((await a.responses.retrieve(completed.id)) as Any).output_text, completed.output.at(-1).content[0].text, 'the streamed response, stored before its last event, is on A');

    // A client that continues at once, on the other replica, always finds the response (it is written before the answer).
    for (let i = 0; i < 10; i++) {
      const [first, second] = i % 2 ? [a, b] : [b, a];
      const x: Any = await first.responses.create({ model: 'compat/gpt', input: `turn ${i}` });
      const y: Any = await second.responses.create({ model: 'compat/gpt', previous_response_id: x.id, input: 'next', store: false });
      t.equal(y.status, 'completed', `continued at once on the other replica (${i})`);
    }

    // Deleted through B: gone on A too, and the chain after it starts later.
    const del = await b.responses.delete(r1.id);
    t.match(del, { id: r1.id, deleted: true });
    const gone: Any = await a.responses.retrieve(r1.id).catch((e) => e);
    t.equal(gone.status, 404);
    t.match(gone.error, { code: 'response_not_found' });
    const after = await a.responses.inputItems.list(r2.id, { order: 'asc' });
    t.equal(after.data.length, 1, 'r2 keeps only its own input: the turn before it was deleted');
    const refGone: Any = await a.responses.create({ model: 'compat/gpt', input: [{ type: 'item_reference', id: r1.output[0].id }] } as Any).catch((e) => e);
    t.equal(refGone.status, 404);
    t.match(refGone.error, { code: 'item_not_found', param: 'input[0]' });

    const rows = (await admin.query(`SELECT count(*)::int AS n FROM ${name}`)).rows[0].n;
    t.ok(rows >= 13, `the responses are rows of ${name}`);
    t.notOk(
      [...A.lines(), ...B.lines()].some((l) => l.level >= 50),
      'no error logged by either replica',
    );
  });

  t.test('a locked table: the answer says store: false within the timeout, reads are a 503, the loop stays free', async (t) => {
    const name = table('lock');
    const gw = await startGateway(`
storage: { url: "${PG}", responses_table: ${name}, responses_timeout_ms: 500, usage: { table: ${name}_u } }
${models}`);
    t.teardown(() => gw.close());
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
    const first: Any = await client.responses.create({ model: 'compat/gpt', input: 'first' });
    t.equal(first.store, true, 'stored (and the tables exist)');

    const locker = new pg.Client({ connectionString: PG });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${name} IN ACCESS EXCLUSIVE MODE`);
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await locker.query('COMMIT');
      await locker.end();
    };
    t.teardown(release);

    let answered = false;
    const pending = client.responses.create({ model: 'compat/gpt', input: 'while locked' }).withResponse().then((r) => {
      answered = true;
      return r;
    });
    // Meanwhile the process answers other requests.
    const list = await client.models.list();
    t.ok(list.data.length > 0);
    const unstored: Any = await client.responses.create({ model: 'compat/gpt', input: 'not stored', store: false });
    t.equal(unstored.status, 'completed');
    t.equal(answered, false, 'the stored response still waits for the lock');
    const { data, response } = await pending;
    t.equal(response.status, 200, 'the client gets its answer');
    t.equal((data as Any).store, false, 'not reported as stored');
    t.equal(response.headers.get('x-gateway-warning'), 'store_failed');

    const read: Any = await client.responses.create({ model: 'compat/gpt', previous_response_id: first.id, input: 'next' }).catch((e) => e);
    t.equal(read.status, 503, 'a history that cannot be read is a 503');
    t.match(read.error, { type: 'service_unavailable_error', code: 'store_unavailable' });
    await until(() => gw.logs.some((l) => l.msg === 'request' && ['STORE_LOCKED', 'STORE_TIMEOUT'].includes(l.store_error)));
    t.notOk(gw.rawLogs.some((l) => /"stack"|127\.0\.0\.1:5432/.test(l)), 'no stack trace, no database address in the log');

    await release();
    t.equal(((await client.responses.retrieve(first.id)) as Any).id, first.id, 'read again once the lock is gone');
    t.equal(((await client.responses.retrieve(data.id).catch((e) => e)) as Any).status, 404, 'the response answered as not stored was not stored later');
  });

  t.test('no database at storage.url: bounded, store: false, 503 for reads, and the store comes back with it', async (t) => {
    // A port that refuses connections now; a PostgreSQL proxy on it later.
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const name = table('away');
    const url = new URL(PG);
    url.port = String(port);
    const gw = await startGateway(`
storage: { url: "${url}", responses_table: ${name}, responses_timeout_ms: 500, usage: { table: ${name}_u } }
${models}`);
    t.teardown(() => gw.close());
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
    const { data, response } = await client.responses.create({ model: 'compat/gpt', input: 'hello' }).withResponse();
    t.equal(response.status, 200);
    t.equal((data as Any).store, false);
    t.equal(response.headers.get('x-gateway-warning'), 'store_failed');
    const get: Any = await client.responses.retrieve('resp_whatever').catch((e) => e);
    t.equal(get.status, 503);
    t.match(get.error, { code: 'store_unavailable', message: /unreachable/ });
    t.notOk(JSON.stringify(get.error).includes(String(port)), 'the answer names no address');
    const ref: Any = await client.responses.create({ model: 'compat/gpt', input: [{ type: 'item_reference', id: 'msg_1' }] } as Any).catch((e) => e);
    t.equal(ref.status, 503, 'an item_reference that cannot be resolved: 503');

    // PostgreSQL reachable on that port (a TCP proxy to the real one): the next operation connects and creates the tables.
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((c) => {
      const up = net.connect(Number(new URL(PG).port || 5432), new URL(PG).hostname);
      sockets.add(c).add(up);
      c.pipe(up).pipe(c);
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => proxy.listen(port, '127.0.0.1', () => r()));
    t.teardown(() => {
      for (const s of sockets) s.destroy();
      proxy.close();
    });
    const back: Any = await client.responses.create({ model: 'compat/gpt', input: 'again' });
    t.equal(back.store, true, 'stored once the database is back');
    t.equal(((await client.responses.retrieve(back.id)) as Any).id, back.id);
  });
}
