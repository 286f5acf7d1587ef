// Reloading gateway.yaml without a restart (src/reload.ts), in process: a
// reload under load drops nothing and each request ends on the config it
// started with; a refused file leaves the running config serving; what a
// reload keeps (connection pools, cool-downs, stored responses) and what it
// closes (the pools of a removed provider, once its requests are done).
// SIGHUP, the file watch and cluster mode: test/reload-cli.test.ts.
import t from 'tap';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startGateway, until, CLIENT_KEY } from './helpers/gateway.js';
import { startMock, type MockServer, type Recorded } from './mocks/server.js';
import { chatReply, validateChat, authError, OPENAI_KEY } from './mocks/openai.js';
import { reloadCounts, RESTART_ONLY } from '../src/reload.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A gate a test opens: the mock holds its answers (and its streams after their first frame) until then. */
function gate() {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

/** An OpenAI mock serving `up-1`…`up-9`; while `held` is set, answers wait for it (streams after their first frame). */
async function heldMock(): Promise<MockServer & { hold(g?: { promise: Promise<void> }): void }> {
  let held: Promise<void> | undefined;
  const models = new Set(Array.from({ length: 9 }, (_, i) => `up-${i + 1}`));
  const mock = await startMock(async (req) => {
    const auth = authError(req, OPENAI_KEY);
    if (auth) return auth;
    const bad = validateChat(req.body, models);
    if (bad) return bad;
    const reply = chatReply(req.body, req.body.model);
    if (held && !req.body.stream) await held;
    return held ? { ...reply, sseGate: held } : reply;
  });
  return Object.assign(mock, { hold: (g?: { promise: Promise<void> }) => void (held = g?.promise) });
}

/**
 * Version `v` of a config: models acme/m-1…acme/m-v (acme/m-k on upstream
 * model up-k), and the alias `fast` naming the newest. Each version adds a
 * model and moves the alias.
 */
function versioned(base: string, v: number, extraProviders = ''): string {
  const models = Array.from({ length: v }, (_, i) => `  - id: acme/m-${i + 1}\n    deployments: [{ provider: openai, model: up-${i + 1} }]`).join('\n');
  return `
providers:
  - name: openai
    family: openai
    base_url: ${base}/v1
    api_key: ${OPENAI_KEY}
    timeout_ms: 5000
    retries: 0
${extraProviders}
models:
${models}
aliases:
  fast: acme/m-${v}
`;
}

const lastUser = (r: Recorded) => r.body?.messages?.at(-1)?.content as string;

t.test('a reload under load drops nothing: 200 requests in flight across 4 reloads, each on the config it started with', async (t) => {
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const g = await startGateway(versioned(mock.url, 1));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const before = reloadCounts();
  const held = gate();
  mock.hold(held);

  const BATCH = 50;
  const VERSIONS = 4;
  const results: Promise<{ batch: number; text: string; tag: string; stream: boolean }>[] = [];
  const retired: { done: boolean; p: Promise<void> }[] = [];
  for (let v = 1; v <= VERSIONS; v++) {
    for (let i = 0; i < BATCH; i++) {
      const tag = `v${v} #${i}`;
      const stream = i % 2 === 0;
      results.push(
        (async () => {
          if (!stream) {
            const r = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: tag }] });
            return { batch: v, text: r.choices[0].message.content ?? '', tag, stream };
          }
          const s = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: tag }], stream: true });
          let text = '';
          for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
          return { batch: v, text, tag, stream };
        })(),
      );
    }
    // Every request of this batch has reached the upstream (streams have their first frame) before the reload.
    await until(() => mock.requests.length === v * BATCH, 10_000);
    if (v === VERSIONS) break;
    const o = await g.reload(versioned(mock.url, v + 1));
    t.equal(o.result, 'success', `reload ${v} -> ${v + 1}`);
    const r = { done: false, p: o.retired! };
    void r.p.then(() => (r.done = true));
    retired.push(r);
    // The model the reload added is reachable at once (its answer is held like the others: its request is counted below).
    const ids = (await client.models.list()).data.map((m) => m.id);
    t.ok(ids.includes(`acme/m-${v + 1}`), `acme/m-${v + 1} listed after reload ${v}`);
  }
  t.notOk(retired.some((r) => r.done), 'no previous config is retired while its requests are in flight');

  held.open();
  mock.hold();
  const done = await Promise.all(results);
  t.equal(done.length, VERSIONS * BATCH, 'every request completed');
  for (const d of done) {
    if (d.text !== `Echo: ${d.tag}`) t.fail(`request ${d.tag} answered ${JSON.stringify(d.text)}`);
    // The alias resolved as it was when the request started.
    const up = mock.requests.find((r) => lastUser(r) === d.tag)?.body.model;
    if (up !== `up-${d.batch}`) t.fail(`request ${d.tag} went to ${up}, not up-${d.batch}`);
  }
  t.pass('all 200 answered in full, each batch on its own alias target');
  await Promise.all(retired.map((r) => r.p));
  t.ok(retired.every((r) => r.done), 'each previous config retired once its requests were done');

  // New requests: the last config.
  const r = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'after' }] });
  t.equal(r.choices[0].message.content, 'Echo: after');
  t.equal(mock.requests.at(-1)!.body.model, `up-${VERSIONS}`, 'the alias moved for new requests');
  const after = reloadCounts();
  t.equal(after.success - before.success, VERSIONS - 1, 'reloads counted by result');
  t.equal(after.failure, before.failure);
  const lines = g.logs.filter((l) => l.event === 'config_reload' && l.result === 'success');
  t.equal(lines.length, VERSIONS - 1, 'one log line per reload');
  t.match(lines[0], { msg: 'config reloaded', trigger: 'test', models: 2 });
});

t.test('a request keeps the config it started with, even before its body has arrived', async (t) => {
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const g = await startGateway(versioned(mock.url, 1));
  t.teardown(() => g.close());
  const body = JSON.stringify({ model: 'fast', messages: [{ role: 'user', content: 'slow body' }] });
  const answer = new Promise<{ status: number; json: any }>((resolve, reject) => {
    const req = http.request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    // The gateway's request handler has run (it takes the config there, synchronously) before the reload; the body comes after it.
    let started = false;
    g.gw.server.once('request', () => (started = true));
    req.write(body.slice(0, 10));
    void until(() => started, 5000).then(async () => {
      const o = await g.reload(versioned(mock.url, 2));
      if (o.result !== 'success') reject(new Error('reload failed'));
      req.end(body.slice(10));
    });
  });
  const r = await answer;
  t.equal(r.status, 200);
  t.equal(mock.requests.at(-1)!.body.model, 'up-1', 'the alias as it was when the request arrived');
  const c = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  await c.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'next' }] });
  t.equal(mock.requests.at(-1)!.body.model, 'up-2', 'the next request: the new alias');
});

t.test('an invalid file is refused: problems logged with path and line, the running config keeps serving', async (t) => {
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const g = await startGateway(versioned(mock.url, 2));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const before = reloadCounts();

  const bad = versioned(mock.url, 3).replace('{ provider: openai, model: up-3 }', '{ provider: nowhere, model: up-3 }').replace('{ provider: openai, model: up-2 }', '{ provider: elsewhere, model: up-2 }');
  const lineOf = (s: string) => bad.split('\n').findIndex((l) => l.includes(s)) + 1;
  const o = await g.reload(bad);
  t.equal(o.result, 'failure');
  t.equal(o.retired, undefined);
  const line = g.logs.find((l) => l.event === 'config_reload' && l.result === 'failure')!;
  t.ok(line, 'the refusal is logged');
  t.equal(line.level, 50, 'at error level');
  t.match(line.msg, /config reload refused \(2 problems\): the running config stays/);
  t.same(line.problems, [
    `models.1.deployments.0.provider (line ${lineOf('elsewhere')}): no provider named "elsewhere"`,
    `models.2.deployments.0.provider (line ${lineOf('nowhere')}): no provider named "nowhere"`,
  ]);
  t.notMatch(JSON.stringify(line), new RegExp(OPENAI_KEY), 'no provider key in the log line');
  const after = reloadCounts();
  t.equal(after.failure - before.failure, 1, 'counted as a failure');
  t.equal(after.success, before.success);

  const ids = (await client.models.list()).data.map((m) => m.id);
  t.same(ids.sort(), ['acme/m-1', 'acme/m-2'], 'the running catalog stays');
  const r = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'still here' }] });
  t.equal(r.choices[0].message.content, 'Echo: still here');
  t.equal(mock.requests.at(-1)!.body.model, 'up-2', 'the running alias stays');

  // YAML that does not parse, a plugin module that cannot be loaded, a path-loaded provider's own block schema.
  const yamlBad = await g.reload('providers: [\n  - oops: {\n');
  t.equal(yamlBad.result, 'failure');
  t.match(yamlBad.problems, [/\(line \d+\)/]);
  const pluginBad = await g.reload(versioned(mock.url, 3) + `plugins:\n  - name: auth\n  - path: ./no-such-plugin.js\n  - name: route\n`);
  t.equal(pluginBad.result, 'failure');
  t.match(pluginBad.problems, [/^PLUGIN_LOAD_FAILED: plugins\.1: cannot load \.\/no-such-plugin\.js/]);
  t.equal(reloadCounts().failure - before.failure, 3);
  t.same((await client.models.list()).data.map((m) => m.id).sort(), ['acme/m-1', 'acme/m-2'], 'still the running catalog');
});

t.test('a path-loaded provider plugin: its block schema is checked on reload; a valid change to its block applies', async (t) => {
  const plugin = path.join(here, 'helpers/acme-plugin.js');
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const withAcme = (keyId: string) => `${versioned(mock.url, 1, `  - name: acme\n    family: acme\n    key_id: ${keyId}\n    host: http://127.0.0.1:9\n    region: eu\n`)}plugins:\n  - name: auth\n  - path: ${plugin}\n  - name: route\n`;
  const g = await startGateway(withAcme('key-1'), {}, path.join(here, 'reload-gateway.yaml'));
  t.teardown(() => g.close());
  const o = await g.reload(withAcme('k'));
  t.equal(o.result, 'failure', 'a key_id the plugin\'s schema refuses');
  t.match(o.problems, [/^providers\.1\.key_id \(line \d+\): must be at least 3 characters/]);
  t.equal(g.gw.config.providers.get('acme')!.options.key_id, 'key-1', 'the running block stays');
  const ok = await g.reload(withAcme('key-2'));
  t.equal(ok.result, 'success');
  t.equal(g.gw.config.providers.get('acme')!.options.key_id, 'key-2');
  t.notOk(g.gw.config.providers.get('openai')!.instance?.includes('~'), 'the unchanged provider keeps its state');
  t.match(g.gw.config.providers.get('acme')!.instance, /^acme~\d+$/, 'the changed one starts afresh');
});

t.test('restart-only settings: a change is named in a warning and the running value stays', async (t) => {
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const g = await startGateway(versioned(mock.url, 1));
  t.teardown(() => g.close());
  t.same(RESTART_ONLY, ['server.host', 'server.port', 'server.workers', 'server.node_flags', 'server.transport', 'storage', 'state.redis_url', 'state.timeout_ms', 'state.key_prefix', 'telemetry.metrics.enabled', 'telemetry.metrics.path']);
  const running = { ...g.gw.config.server };
  // (The transport a GATEWAY_TEST_TRANSPORT run starts with, so that only the keys below change.)
  const transport = g.gw.config.server.transport;
  const o = await g.reload(`server:\n  port: 9999\n  workers: 3\n  body_limit: 1kb\n  transport: ${transport}\n${versioned(mock.url, 2)}storage:\n  responses_db: ':memory:'\n`);
  t.equal(o.result, 'success', 'the rest of the file applies');
  t.same(o.restartRequired, ['server.port', 'server.workers', 'storage']);
  const warn = g.logs.find((l) => l.restart_required)!;
  t.match(warn, { level: 40, restart_required: ['server.port', 'server.workers', 'storage'] });
  t.match(warn.msg, /server\.port, server\.workers, storage changed; the running value stays until a restart/);
  t.equal(g.gw.config.server.port, running.port);
  t.equal(g.gw.config.server.workers, running.workers);
  t.equal(g.gw.config.storage.responses_db, './data/responses.sqlite');
  // body_limit is not restart-only: a body over the new limit gets 413.
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  await t.rejects(client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x'.repeat(2000) }] }), { status: 413 } as any);
  t.ok((await client.models.list()).data.some((m) => m.id === 'acme/m-2'));
});

t.test('pools: an unchanged provider keeps its connections; a removed one is closed once its stream is done', async (t) => {
  const a = await heldMock();
  const b = await heldMock();
  t.teardown(() => a.close());
  t.teardown(() => b.close());
  const withB = (v: number) =>
    versioned(a.url, v, `  - name: other\n    family: openai\n    base_url: ${b.url}/v1\n    api_key: ${OPENAI_KEY}\n    retries: 0\n`).replace('aliases:', `  - id: other/m\n    deployments: [{ provider: other, model: up-1 }]\naliases:`);
  const g = await startGateway(withB(1));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  await client.chat.completions.create({ model: 'acme/m-1', messages: [{ role: 'user', content: 'one' }] });
  t.equal(a.connections, 1);

  // A stream on `other`, held open while a reload removes `other`.
  const held = gate();
  b.hold(held);
  const stream = await client.chat.completions.create({ model: 'other/m', messages: [{ role: 'user', content: 'held stream' }], stream: true });
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  t.equal(first.value?.choices[0].delta.role, 'assistant', 'the stream has begun');
  const o = await g.reload(versioned(a.url, 2));
  t.equal(o.result, 'success');
  t.same(g.logs.find((l) => l.msg === 'config reloaded')!.changed_providers, ['other']);
  await t.rejects(client.chat.completions.create({ model: 'other/m', messages: [{ role: 'user', content: 'x' }] }), { status: 404 } as any, 'the removed provider\'s model is gone for new requests');
  let retired = false;
  void o.retired!.then(() => (retired = true));
  t.equal(b.open, 1, 'the removed provider\'s connection stays while its stream runs');
  t.notOk(retired);

  // The unchanged provider: the same pool, the same connection.
  await client.chat.completions.create({ model: 'acme/m-2', messages: [{ role: 'user', content: 'two' }] });
  t.equal(a.connections, 1, 'the kept pool reused its connection');

  held.open();
  let text = '';
  for (let r = await it.next(); !r.done; r = await it.next()) text += r.value.choices[0]?.delta?.content ?? '';
  t.equal(text, 'Echo: held stream', 'the stream finished in full');
  await o.retired;
  await until(() => b.open === 0, 5000);
  t.pass('the removed provider\'s pool closed once its stream was done');

  // A changed base URL: a new pool to the new place, the old one closed.
  const c = await heldMock();
  t.teardown(() => c.close());
  const moved = await g.reload(versioned(c.url, 2));
  await client.chat.completions.create({ model: 'acme/m-2', messages: [{ role: 'user', content: 'three' }] });
  t.equal(c.requests.length, 1, 'the new base URL serves');
  await moved.retired;
  await until(() => a.open === 0, 5000);
  t.pass('the pool to the old base URL closed');
});

t.test('cool-down: kept for an unchanged provider, cleared for a changed one; routing settings apply', async (t) => {
  const bad = await heldMock();
  const good = await heldMock();
  t.teardown(() => bad.close());
  t.teardown(() => good.close());
  const cfg = (badKey: string, threshold = 1) => `
providers:
  - name: p1
    family: openai
    base_url: ${bad.url}/v1
    api_key: ${badKey}
    retries: 0
  - name: p2
    family: openai
    base_url: ${good.url}/v1
    api_key: ${OPENAI_KEY}
    retries: 0
routing:
  failure_threshold: ${threshold}
  cooldown_ms: 600000
models:
  - id: acme/m
    deployments: [{ provider: p1, model: up-1 }, { provider: p2, model: up-1 }]
`;
  const g = await startGateway(cfg('sk-wrong-key-0000000000'));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const served = async () => {
    const r = (await client.chat.completions.create({ model: 'acme/m', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e)) as any;
    return r.status ? 'failed' : r.extra.routing.attempts.map((a: any) => `${a.provider}:${a.status}`).join(',');
  };
  t.equal(await served(), 'failed', 'p1 refuses the key: the target fails, and p1 cools down');
  t.equal(await served(), 'p2:succeeded', 'p1 is cooling down: p2 serves');
  t.equal((await g.reload(cfg('sk-wrong-key-0000000000'))).result, 'success');
  t.equal(await served(), 'p2:succeeded', 'an unchanged p1 is still cooling down after the reload');
  t.equal((await g.reload(cfg(OPENAI_KEY))).result, 'success');
  t.equal(await served(), 'p1:succeeded', 'p1 with a new key: its cool-down was cleared');
  t.equal((await g.reload(cfg('sk-wrong-key-0000000000', 2))).result, 'success');
  t.equal(await served(), 'failed', 'one failure...');
  t.equal(await served(), 'failed', '...and another: failure_threshold 2 from the reload');
  t.equal(await served(), 'p2:succeeded');
});

t.test('stored responses outlive a reload', async (t) => {
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const withResponses = (v: number) => versioned(mock.url, v).replace('family: openai', 'family: openai-compatible').replace(/(deployments: \[\{ provider: openai, model: up-\d \}\])/g, 'endpoints: [chat_completions, responses]\n    $1') + `storage:\n  responses_db: ':memory:'\n`;
  const g = await startGateway(withResponses(1));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const r = await client.responses.create({ model: 'acme/m-1', input: 'remember me' });
  t.equal((await g.reload(withResponses(2))).result, 'success');
  const got = await client.responses.retrieve(r.id);
  t.equal(got.output_text, 'Echo: remember me', 'the stored response is still there');
  const next = await client.responses.create({ model: 'acme/m-2', input: 'and then', previous_response_id: r.id });
  t.equal(next.output_text, 'Echo: and then');
  t.match(mock.requests.at(-1)!.body.messages, [{ role: 'user', content: 'remember me' }, { role: 'assistant' }, { role: 'user', content: 'and then' }], 'the conversation continues on the new model');
});

t.test('pipeline plugins: each reload builds new instances; the old ones close once their requests are done', async (t) => {
  const probePath = path.join(here, 'helpers/probe-plugin.js');
  const { events } = (await import(probePath)) as { events: string[] };
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const withProbe = (tag: string) => `${versioned(mock.url, 1)}plugins:\n  - name: auth\n  - path: ${probePath}\n    options: { tag: ${tag} }\n  - name: route\n`;
  const g = await startGateway(withProbe('one'));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const held = gate();
  mock.hold(held);
  const stream = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'held' }], stream: true });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  const o = await g.reload(withProbe('two'));
  t.equal(o.result, 'success');
  t.same(events, ['init one', 'init two'], 'the new instance is initialised with its new options');
  mock.hold();
  await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'new' }] });
  await until(() => g.logs.some((l) => l.msg === 'request' && l.probe === 'two'));
  t.same(events, ['init one', 'init two'], 'the old instance stays open while its stream runs');
  held.open();
  while (!(await it.next()).done);
  await o.retired;
  t.same(events, ['init one', 'init two', 'close one'], 'closed once its request was done');
  await until(() => g.logs.some((l) => l.msg === 'request' && l.probe === 'one'));
  t.pass('the held stream was handled by the instance of the config it started on');
});

t.test('Gemini cached contents: kept while the provider block is unchanged, started afresh when it changes', async (t) => {
  const { startGeminiMock, GEMINI_KEY } = await import('./mocks/gemini.js');
  const gem = await startGeminiMock();
  t.teardown(() => gem.close());
  const cfg = (region: string, alias: string) => `
providers:
  - name: google
    family: google
    base_url: ${gem.url}
    api_key: ${GEMINI_KEY}
    region: ${region}
    retries: 0
models:
  - id: google/gemini-2.5-flash
    deployments: [{ provider: google, model: gemini-2.5-flash }]
aliases:
  ${alias}: google/gemini-2.5-flash
`;
  const g = await startGateway(cfg('us-central1', 'flash'));
  t.teardown(() => g.close());
  const client = new OpenAI({ baseURL: g.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
  const manual = 'Reference manual. '.repeat(400); // above Gemini's minimum cacheable size
  const ask = (q: string) =>
    client.chat.completions.create({ model: 'google/gemini-2.5-flash', messages: [{ role: 'system', content: manual, cache_control: { type: 'ephemeral', ttl: '300s' } }, { role: 'user', content: q }] } as any);
  const creates = () => gem.requests.filter((r) => r.path === '/v1beta/cachedContents').length;
  await ask('one');
  t.equal(creates(), 1);
  t.equal((await g.reload(cfg('us-central1', 'quick'))).result, 'success', 'a reload that leaves the provider block alone');
  t.equal((await ask('two')).choices[0].message.content, 'Echo: two');
  t.equal(creates(), 1, 'the cached content is reused');
  t.equal((await g.reload(cfg('europe-west4', 'quick'))).result, 'success', 'a reload that changes the block');
  t.equal((await ask('three')).choices[0].message.content, 'Echo: three');
  t.equal(creates(), 2, 'the changed block starts with an empty registry');
});

t.test('a reload refused after a plugin\'s init closes that plugin again', async (t) => {
  const probePath = path.join(here, 'helpers/probe-plugin.js');
  const { events } = (await import(probePath)) as { events: string[] };
  const mock = await heldMock();
  t.teardown(() => mock.close());
  const g = await startGateway(versioned(mock.url, 1));
  t.teardown(() => g.close());
  const seen = events.length;
  // The probe initialises, then the pipeline is refused: no route plugin.
  const o = await g.reload(`${versioned(mock.url, 2)}plugins:\n  - name: auth\n  - path: ${probePath}\n    options: { tag: refused }\n`);
  t.equal(o.result, 'failure');
  t.match(o.problems, [/^PLUGIN_MISSING_ROUTE: /]);
  t.same(events.slice(seen), ['init refused', 'close refused']);
});
