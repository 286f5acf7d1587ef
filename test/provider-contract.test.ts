// The provider contract (docs/plugins.md, "What a provider plugin
// implements"), driven end to end through HTTP with the official `openai` SDK:
// a provider plugin loaded from a path (test/helpers/acme-plugin.ts, which
// imports only `model-gateway/plugin`) brings its family, its provider-block
// schema with environment defaults and a derived base URL, an async
// authorize step that signs the final body bytes, its own binary stream
// framing, NDJSON, and an error mapper that reads headers; a plugin that
// would replace a built-in family is refused; a provider without credentials
// is skipped in favour of the model's next deployment.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until, readThenAbort } from './helpers/gateway.js';
import { loadGatewayConfig } from '../src/pipeline.js';
import { builtins } from '../plugins/index.js';
import { ConfigError } from '../src/config/load.js';
import { AcmeFrameParser } from './helpers/acme-plugin.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pluginPath = path.join(here, 'helpers/acme-plugin.js');
const cli = path.resolve(here, '../src/cli.js');
const SECRET = 'acme-secret-0123456789abcdef';
const KEY_ID = 'kid-42';

/** One acme frame: length, JSON payload, CRC32 of what precedes it. */
function frame(payload: unknown, corrupt = false): Buffer {
  const json = Buffer.from(JSON.stringify(payload));
  const buf = Buffer.alloc(json.length + 8);
  buf.writeUInt32BE(buf.length, 0);
  json.copy(buf, 4);
  buf.writeUInt32BE((crc32(buf.subarray(0, buf.length - 4)) ^ (corrupt ? 1 : 0)) >>> 0, buf.length - 4);
  return buf;
}

interface AcmeMock {
  url: string;
  tokenRequests: number;
  generate: { path: string; body: any; headers: http.IncomingHttpHeaders; aborted: boolean }[];
  /** What the next /generate answers do instead of the normal answer. */
  mode: 'ok' | 'throttle' | 'bad-crc' | 'slow' | 'hang-token';
  close(): Promise<void>;
}

/** A strict mock of the made-up acme API: it checks the token, the key id, the secret and the body's HMAC. */
async function startAcmeMock(): Promise<AcmeMock> {
  let tokens = 0;
  const issued = new Set<string>();
  const sockets = new Set<import('node:net').Socket>();
  const m: AcmeMock = { url: '', tokenRequests: 0, generate: [], mode: 'ok', close: async () => {} };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const [, region, op] = (req.url ?? '').split('/');
    if (region !== 'eu' && region !== 'us') return void res.writeHead(404).end('no such region');
    if (op === 'token') {
      m.tokenRequests++;
      if (m.mode === 'hang-token') return; // never answers
      const body = JSON.parse(raw.toString('utf8'));
      if (req.headers['x-acme-key-id'] !== KEY_ID || body.secret !== SECRET || req.headers.authorization) return void res.writeHead(401).end('bad key');
      await new Promise((r) => setTimeout(r, 30)); // long enough for concurrent calls to pile up
      const token = `tok-${++tokens}`;
      issued.add(token);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token }));
    }
    if (op !== 'generate') return void res.writeHead(404).end('not found');
    const rec = { path: req.url!, body: JSON.parse(raw.toString('utf8')), headers: req.headers, aborted: false };
    m.generate.push(rec);
    res.on('close', () => (rec.aborted = !res.writableFinished));
    if (!issued.has(String(req.headers.authorization).replace(/^Bearer /, ''))) return void res.writeHead(401, { 'x-acme-error-type': 'Unauthorized' }).end('bad token');
    const expected = createHmac('sha256', SECRET).update(raw).digest('hex');
    if (req.headers['x-acme-signature'] !== expected) return void res.writeHead(403, { 'x-acme-error-type': 'BadSignature' }).end('signature mismatch');
    if (m.mode === 'throttle') return void res.writeHead(429, { 'x-acme-error-type': 'Throttling', 'content-type': 'text/plain' }).end('slow down');
    const text = rec.body.turns.map((x: { text: string }) => x.text).join(' | ');
    if (!rec.body.stream) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'acme-1', text: `echo: ${text}`, tokens: { in: 7, out: 3 } }));
    const events = [{ type: 'start', id: 'acme-s' }, { type: 'text', text: 'echo: ' }, { type: 'text', text }, { type: 'end', tokens: { in: 7, out: 2 } }];
    if (rec.body.model === 'acme-nd') {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      // Lines split across writes, and a blank line: the framing copes.
      const nd = events.map((e) => JSON.stringify(e)).join('\n\n') + '\n';
      res.write(nd.slice(0, 17));
      return void res.end(nd.slice(17));
    }
    res.writeHead(200, { 'content-type': 'application/x-acme-frames' });
    if (m.mode === 'bad-crc') return void res.end(frame(events[0], true));
    if (m.mode === 'slow') {
      res.write(frame(events[0]));
      res.write(frame(events[1]));
      const timer = setInterval(() => res.write(frame({ type: 'text', text: '.' })), 20);
      res.on('close', () => clearInterval(timer));
      return;
    }
    // A frame split across two writes.
    const all = Buffer.concat(events.map((e) => frame(e)));
    res.write(all.subarray(0, 6));
    res.end(all.subarray(6));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  m.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  m.close = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return m;
}

const acmeMock = await startAcmeMock();
const openai = await startOpenAIMock();
t.teardown(async () => {
  await acmeMock.close();
  await openai.close();
});

const config = (acmeExtra = '', models = '') => `
plugins:
  - name: auth
  - name: analytics
  - path: ${pluginPath}
  - name: route
  - name: normalize
  - name: debug
providers:
  - name: acme
    family: acme
    host: ${acmeMock.url}
    key_id: ${KEY_ID}
    timeout_ms: 1500
    retries: 0${acmeExtra}
  - name: acme-nd
    family: acme
    host: ${acmeMock.url}
    region: us
    key_id: ${KEY_ID}
    framing: ndjson
  - name: openai
    family: openai
    base_url: ${openai.url}/v1
    api_key: sk-test-openai-0123456789
    retries: 0
routing:
  max_retry_wait_ms: 0
models:
  - id: acme/frames
    deployments: [{ provider: acme, model: acme-frames }]
    fallbacks: [openai/gpt-4.1-mini]
  - id: acme/only
    deployments: [{ provider: acme, model: acme-frames }]
  - id: acme/nd
    deployments: [{ provider: acme-nd, model: acme-nd }]
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
${models}`;

const gw = await startGateway(config(), { ACME_SECRET: SECRET });
t.teardown(() => gw.close());
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
const user = (content: string) => [{ role: 'user' as const, content }];

t.test('a provider plugin loaded from a path: schema, env defaults, derived base URL', async (t) => {
  const p = gw.gw.pipeline.providers.get('acme');
  t.equal(p?.name, 'acme', 'the family is registered');
  const acme = gw.gw.core.providerPlugins.get('acme');
  t.ok(acme?.authorize, 'with its authorize step');
  const cfg = (await loadGatewayConfig('g.yaml', builtins(), { text: config(), env: { ACME_SECRET: SECRET, ACME_REGION: 'us' } })).config;
  const a = cfg.providers.get('acme')!;
  t.equal(a.region, 'us', 'region from ACME_REGION');
  t.equal(a.base_url, `${acmeMock.url}/us`, 'base URL derived from the region');
  t.same(a.options, { key_id: KEY_ID, secret: SECRET, host: acmeMock.url, framing: 'frames' }, "the family's keys, defaults applied, secret from ACME_SECRET");
  t.equal(cfg.providers.get('acme-nd')!.base_url, `${acmeMock.url}/us`);
  const eu = (await loadGatewayConfig('g.yaml', builtins(), { text: config(), env: { ACME_SECRET: SECRET } })).config;
  t.equal(eu.providers.get('acme')!.base_url, `${acmeMock.url}/eu`, "the family's default region");
});

t.test('chat through the signed, token-authorized acme API', async (t) => {
  acmeMock.generate.length = 0;
  const r = await client.chat.completions.create({ model: 'acme/frames', messages: user('hello') });
  t.equal(r.choices[0].message.content, 'echo: hello');
  t.equal(r.model, 'acme/frames');
  t.equal(r.usage?.total_tokens, 10);
  t.equal(acmeMock.generate[0].path, '/eu/generate');
  t.equal(acmeMock.generate[0].body.model, 'acme-frames', "the deployment's model");
});

t.test('one token request for many concurrent calls (the authorize step caches)', async (t) => {
  const before = acmeMock.tokenRequests;
  const fresh = await startGateway(config(), { ACME_SECRET: SECRET });
  t.teardown(() => fresh.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: fresh.baseURL, maxRetries: 0 });
  const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => c.chat.completions.create({ model: 'acme/frames', messages: user(`n${i}`) })));
  t.same(
    rs.map((r) => r.choices[0].message.content),
    rs.map((_, i) => `echo: n${i}`),
  );
  t.equal(acmeMock.tokenRequests - before, 1, 'one token request');
});

t.test('streams in a framing of the plugin (binary frames with CRCs) and in NDJSON, with usage', async (t) => {
  for (const model of ['acme/frames', 'acme/nd']) {
    const stream = await client.chat.completions.create({ model, messages: user('hi'), stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: any;
    let finish: string | null = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
      if (c.usage) usage = c.usage;
    }
    t.equal(text, 'echo: hi', model);
    t.equal(finish, 'stop');
    t.equal(usage?.completion_tokens, 2);
  }
});

t.test('the frame parser: split frames, a bad CRC, a cut frame', async (t) => {
  const p = new AcmeFrameParser();
  const out: any[] = [];
  const f = Buffer.concat([frame({ type: 'a' }), frame({ type: 'b' })]);
  for (let i = 0; i < f.length; i++) p.push(f.subarray(i, i + 1), out);
  t.same(out.map((e) => e.event), ['a', 'b']);
  p.end(out);
  t.throws(() => new AcmeFrameParser().push(frame({ type: 'x' }, true), []), /CRC/);
  const cut = new AcmeFrameParser();
  cut.push(frame({ type: 'x' }).subarray(0, 9), []);
  t.throws(() => cut.end([]), /inside a frame/);
});

t.test('a stream that cannot be decoded (bad CRC) falls back before the first byte', async (t) => {
  acmeMock.mode = 'bad-crc';
  t.teardown(() => void (acmeMock.mode = 'ok'));
  const stream = await client.chat.completions.create({ model: 'acme/frames', messages: user('x'), stream: true, extra: { debug: ['routing'] } } as any);
  let text = '';
  let last: any;
  for await (const c of stream as any) {
    text += c.choices[0]?.delta?.content ?? '';
    last = c;
  }
  t.ok(text.length > 0, 'served by the fallback');
  const attempts = last.extra?.routing?.attempts ?? last.debug?.routing?.attempts;
  t.match(attempts, [{ provider: 'acme', status: 'failed', error: /could not be decoded.*CRC/ }, { provider: 'openai', status: 'succeeded' }]);
});

t.test('the error mapper sees the headers: Throttling -> 429, fallback; without a fallback the 429 is the answer', async (t) => {
  acmeMock.mode = 'throttle';
  t.teardown(() => void (acmeMock.mode = 'ok'));
  const r: any = await client.chat.completions.create({ model: 'acme/frames', messages: user('x'), debug: ['routing'] } as any);
  t.match(r.debug.routing.attempts, [{ provider: 'acme', status: 'failed', error: /^429 Throttling: slow down/ }, { provider: 'openai', status: 'succeeded' }]);
  const e: any = await client.chat.completions.create({ model: 'acme/only', messages: user('x') }).catch((e) => e);
  t.equal(e.status, 429);
  t.equal(e.error.type, 'rate_limit_error');
});

t.test('an authorize step that does not finish in time fails the attempt over', async (t) => {
  const slow = await startGateway(config(), { ACME_SECRET: SECRET });
  t.teardown(() => slow.close());
  acmeMock.mode = 'hang-token';
  t.teardown(() => void (acmeMock.mode = 'ok'));
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: slow.baseURL, maxRetries: 0 });
  const r: any = await c.chat.completions.create({ model: 'acme/frames', messages: user('x'), debug: ['routing'] } as any);
  t.match(r.debug.routing.attempts, [{ provider: 'acme', status: 'failed' }, { provider: 'openai', status: 'succeeded' }]);
  t.match(r.debug.routing.attempts[0].error, /no response within 1500 ms|authorize step did not finish/);
});

t.test('a client that disconnects mid-stream aborts the upstream (custom framing)', async (t) => {
  acmeMock.mode = 'slow';
  acmeMock.generate.length = 0;
  t.teardown(() => void (acmeMock.mode = 'ok'));
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: 'acme/only', messages: user('x'), stream: true }, { signal: ac.signal });
  const n = await readThenAbort(stream, ac, 4);
  t.equal(n, 4, 'the client left after 4 chunks');
  await until(() => acmeMock.generate[0]?.aborted === true, 5000);
  t.ok(acmeMock.generate[0].aborted, 'the upstream response was torn down');
});

t.test('a provider without credentials is skipped for the next deployment; none with credentials: 503', async (t) => {
  const yaml = config(
    '',
    `  - id: acme/mixed
    deployments: [{ provider: acme, model: acme-frames }, { provider: openai, model: gpt-4.1-mini }]
`,
  );
  const nokey = await startGateway(yaml, {});
  t.teardown(() => nokey.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: nokey.baseURL, maxRetries: 0 });
  const r: any = await c.chat.completions.create({ model: 'acme/mixed', messages: user('x'), debug: ['routing'] } as any);
  t.match(r.debug.routing.attempts, [
    { provider: 'acme', status: 'skipped', error: 'no acme secret (ACME_SECRET)' },
    { provider: 'openai', status: 'succeeded' },
  ]);
  const e: any = await c.chat.completions.create({ model: 'acme/only', messages: user('x') }).catch((e) => e);
  t.equal(e.status, 503);
  t.equal(e.error.type, 'service_unavailable_error');
  t.match(e.error.message, /no acme secret/);
});

function problems(yaml: string, env: Record<string, string> = {}): Promise<any[]> {
  return loadGatewayConfig('g.yaml', builtins(), { text: yaml, env }).then(
    () => [],
    (e) => {
      if (e instanceof ConfigError) return e.problems;
      throw e;
    },
  );
}

t.test("the config check runs the family's schema: path and line, values from the environment named", async (t) => {
  const bad = config().replace(`    key_id: ${KEY_ID}\n    timeout_ms`, `    key_id: k\n    colour: blue\n    timeout_ms`).replace('framing: ndjson', 'framing: xml');
  const ps = await problems(bad, { ACME_SECRET: SECRET });
  const lineOf = (s: string) => bad.split('\n').findIndex((l) => l.includes(s)) + 1;
  t.match(ps, [
    { path: 'providers.0.key_id', line: lineOf('key_id: k'), message: /at least 3/ },
    { path: 'providers.0.colour', line: lineOf('colour: blue'), message: 'unknown key' },
    { path: 'providers.1.framing', line: lineOf('framing: xml'), message: /Invalid/ },
  ]);
  const fromEnv = await problems(config().replace(`    key_id: ${KEY_ID}\n    timeout_ms`, '    timeout_ms'), { ACME_SECRET: SECRET, ACME_KEY_ID: 'k' });
  t.match(fromEnv, [{ path: 'providers.0.key_id', message: /at least 3.*\(from ACME_KEY_ID\)/ }]);
  const noHost = await problems(config().replace(`    host: ${acmeMock.url}\n    key_id: ${KEY_ID}\n    timeout_ms`, `    key_id: ${KEY_ID}\n    timeout_ms`), { ACME_SECRET: SECRET });
  t.match(noHost, [{ path: 'providers.0.base_url', message: /no default base URL: set base_url/ }]);
  // A built-in family without a schema takes no key of its own.
  const openaiExtra = await problems(config().replace('    api_key: sk-test-openai-0123456789', '    api_key: sk-x\n    project: p1'));
  t.match(openaiExtra, [{ path: 'providers.2.project', message: /unknown key/ }]);
});

function tmpModule(src: string): string {
  // Inside the package, so that `model-gateway/plugin` resolves (a package's own name resolves within it).
  const dir = fs.mkdtempSync(path.join(here, 'tmp-contract-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'p.mjs');
  fs.writeFileSync(file, src);
  return file;
}

t.test('a plugin that would replace a built-in family, or take one another plugin has, is refused with a coded error', async (t) => {
  const thief = tmpModule(`import { openAIStyleError } from 'model-gateway/plugin';
export default { kind: 'provider', name: 'thief', families: { openai: {} }, async chat() { throw new Error(String(openAIStyleError)); } };`);
  const yaml = config().replace(`  - path: ${pluginPath}\n`, `  - path: ${pluginPath}\n  - path: ${thief}\n`);
  const err: any = await startGateway(yaml, { ACME_SECRET: SECRET }).then(
    (g) => g.close().then(() => null),
    (e) => e,
  );
  t.equal(err?.code, 'PLUGIN_FAMILY_CONFLICT');
  t.match(err?.message, /plugins\.3 \(thief\): provider family "openai" is already served by the built-in plugin "openai"/);
  const twice = config().replace(`  - path: ${pluginPath}\n`, `  - path: ${pluginPath}\n  - path: ${pluginPath}\n`);
  const err2: any = await loadGatewayConfig('g.yaml', builtins(), { text: twice }).catch((e) => e);
  t.equal(err2?.code, 'PLUGIN_FAMILY_CONFLICT', 'a second copy of the same family');
  const invalid = tmpModule(`export default { kind: 'provider', name: 'x', families: { x: { schema: 42 } }, async chat() {} };`);
  const err3: any = await loadGatewayConfig('g.yaml', builtins(), { text: config().replace(`  - path: ${pluginPath}\n`, `  - path: ${invalid}\n`) }).catch((e) => e);
  t.equal(err3?.code, 'PLUGIN_INVALID');
  t.match(err3?.message, /families\.x\.schema must be a valibot schema/);
  const badSecrets = tmpModule(`export default { kind: 'provider', name: 'x', families: { x: { secrets: 'secret' } }, async chat() {} };`);
  const err4: any = await loadGatewayConfig('g.yaml', builtins(), { text: config().replace(`  - path: ${pluginPath}\n`, `  - path: ${badSecrets}\n`) }).catch((e) => e);
  t.equal(err4?.code, 'PLUGIN_INVALID');
  t.match(err4?.message, /families\.x\.secrets must be an array of key names/);
});

t.test('model-gateway check knows the families of path-loaded plugins', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-contract-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(file, config());
  const ok = spawnSync(process.execPath, [cli, 'check', file], { encoding: 'utf8', env: { ...process.env, ACME_SECRET: SECRET } });
  t.equal(ok.status, 0, ok.stderr);
  t.match(ok.stdout, /OK \(3 providers, 4 models/);
  fs.writeFileSync(file, config().replace('framing: ndjson', 'framing: xml'));
  const bad = spawnSync(process.execPath, [cli, 'check', file], { encoding: 'utf8' });
  t.equal(bad.status, 1);
  t.match(bad.stderr, /providers\.1\.framing \(line \d+\)/);
  fs.writeFileSync(file, config().replace(`  - path: ${pluginPath}\n`, `  - path: ${pluginPath}\n  - path: ${pluginPath}\n`));
  const conflict = spawnSync(process.execPath, [cli, 'check', file], { encoding: 'utf8' });
  t.equal(conflict.status, 1);
  t.match(conflict.stderr, /PLUGIN_FAMILY_CONFLICT/);
});
