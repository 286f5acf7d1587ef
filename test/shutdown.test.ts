// Graceful shutdown as an operator's system does it: `model-gateway start`
// with two workers in its own process group, streams in flight, and the whole
// group signalled twice (systemd's default, `kill -- -PGID`, Ctrl-C), so each
// worker gets the signal from the shell and again from the primary. Every
// stream either finishes or ends with its endpoint's error frame; none is cut
// without one; /healthz answers 503 while the workers drain. Then, in one
// process, what the shutdown deadline does to what is still running.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startMock, sse } from './mocks/server.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.resolve(here, '../src/cli.js');
const KEY = 'k-shutdown-1';

const chunk = (i: number, last = false) =>
  sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : last ? {} : { content: `${i} ` }, finish_reason: last ? 'stop' : null }] });
// A stream of about 3 s: far longer than it takes to signal the gateway.
const EVENTS = 30;
// Model `long`: about 7 s, longer than the primary's backstop for a 300 ms deadline (5.3 s).
const upstream = await startMock((req) => {
  const n = req.body?.model === 'long' ? 70 : EVENTS;
  return { status: 200, sseDelayMs: 100, sse: [...Array.from({ length: n }, (_, i) => chunk(i)), chunk(n, true), 'data: [DONE]\n\n'] };
});
t.teardown(() => upstream.close());

interface Cluster {
  port: number;
  file: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  out(): string;
}

const clusterConfig = (shutdownMs: number) => `server:
  workers: 2
  shutdown_timeout_ms: ${shutdownMs}
storage:
  responses_db: ":memory:"
providers:
  - name: up
    family: openai-compatible
    base_url: ${upstream.url}/v1
models:
  - id: up/m
    deployments: [{ provider: up, model: m }]
  - id: up/long
    deployments: [{ provider: up, model: long }]
`;

/** `model-gateway start` with two workers, detached: the leader of its own process group. */
async function startCluster(t: { teardown(fn: () => void): void }, shutdownMs: number): Promise<Cluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-shutdown-'));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(file, clusterConfig(shutdownMs));
  const child = spawn(process.execPath, [cli, 'start'], { detached: true, env: { ...process.env, PORT: '0', HOST: '127.0.0.1', GATEWAY_CONFIG: file, GATEWAY_API_KEYS: KEY }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  let out = '';
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (c) => {
      out += c;
      const ready = [...out.matchAll(/"port":(\d+)[^\n]*"msg":"model-gateway ready"/g)];
      if (ready.length === 2) resolve(Number(ready[0][1]));
    });
    void exited.then((code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  return { port, file, child, exited, out: () => out };
}

/** A stream in flight: its first bytes have arrived; `rest` reads it to its end (or its cut). */
async function openStream(port: number, endpoint: 'chat' | 'responses', model = 'up/m'): Promise<{ rest: Promise<{ text: string; cut: boolean }> }> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/${endpoint === 'chat' ? 'chat/completions' : 'responses'}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(endpoint === 'chat' ? { model, messages: [{ role: 'user', content: 'x' }], stream: true } : { model, input: 'x', stream: true, store: false }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  const reader = res.body!.getReader();
  let text = Buffer.from((await reader.read()).value ?? []).toString();
  const rest = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return { text, cut: false };
        text += Buffer.from(value).toString();
      }
    } catch {
      return { text, cut: true };
    }
  })();
  return { rest };
}

const count = (text: string, re: RegExp) => text.match(new RegExp(re.source, 'g'))?.length ?? 0;

/**
 * Signal the whole process group, and once the primary and both workers are
 * draining, again: a signal sent while another of its kind is still pending
 * is delivered once, so the second waits for the first to be taken.
 */
async function signalTwice(gw: Cluster, signal: NodeJS.Signals): Promise<void> {
  process.kill(-gw.child.pid!, signal);
  await until(() => count(gw.out(), /"msg":"shutting down: draining in-flight requests"/) === 2 && /primary: stopping workers/.test(gw.out()), 5000);
  process.kill(-gw.child.pid!, signal);
  // The primary and each worker took it, and went on draining.
  await until(() => count(gw.out(), /"msg":"already draining: a repeated signal does not cut the drain \(SIGKILL does\)"/) >= 3, 5000);
}

type Ending = 'completed' | 'error-frame' | 'cut';

/** How a stream ended: finished, ended with its endpoint's error frame, or cut without one. */
function ending(endpoint: 'chat' | 'responses', s: { text: string; cut: boolean }): { how: Ending; error?: Record<string, unknown> } {
  if (s.cut) return { how: 'cut' };
  const frames = s.text.trim().split('\n\n');
  const last = frames.at(-1) ?? '';
  if (endpoint === 'chat') {
    if (last === 'data: [DONE]') return { how: 'completed' };
    const data = last.startsWith('data: ') ? JSON.parse(last.slice(6)) : undefined;
    return data?.error ? { how: 'error-frame', error: data.error } : { how: 'cut' };
  }
  if (last.startsWith('event: response.completed')) return { how: 'completed' };
  const before = frames.at(-2) ?? '';
  if (last.startsWith('event: response.failed') && before.startsWith('event: error')) return { how: 'error-frame', error: JSON.parse(before.split('\ndata: ')[1]) };
  return { how: 'cut' };
}

async function healthz(port: number): Promise<number | undefined> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { connection: 'close' } });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return undefined;
  }
}

t.test('the process group signalled twice with SIGTERM: every stream finishes, /healthz says 503 meanwhile', async (t) => {
  upstream.reset();
  const gw = await startCluster(t, 20_000);
  t.equal(await healthz(gw.port), 200);
  const kinds = ['chat', 'chat', 'chat', 'chat', 'responses', 'responses'] as const;
  const streams = await Promise.all(kinds.map((k) => openStream(gw.port, k)));
  // Every worker gets SIGTERM from the first and again from the primary; then all get the second.
  await signalTwice(gw, 'SIGTERM');
  // (The workers take the signal within a few ms; the streams last seconds.)
  let draining: number | undefined;
  for (let i = 0; i < 1000 && draining !== 503; i++) draining = await healthz(gw.port);
  t.equal(draining, 503, '/healthz answers 503 while the workers drain');
  const endings = await Promise.all(streams.map(async (s, i) => ending(kinds[i], await s.rest)));
  t.same(endings.filter((e) => e.how === 'cut'), [], 'no stream was cut without an error frame');
  t.same(endings.map((e) => e.how), kinds.map(() => 'completed'), 'with a deadline far off, every stream finished');
  t.equal(await gw.exited, 0, 'clean exit');
  t.equal(await healthz(gw.port), undefined, 'no longer listening');
});

t.test('Ctrl-C twice with a deadline shorter than the streams: each ends with its error frame', async (t) => {
  upstream.reset();
  const gw = await startCluster(t, 300);
  const kinds = ['chat', 'chat', 'chat', 'responses', 'responses'] as const;
  const streams = await Promise.all(kinds.map((k) => openStream(gw.port, k)));
  await signalTwice(gw, 'SIGINT');
  const endings = await Promise.all(streams.map(async (s, i) => ending(kinds[i], await s.rest)));
  t.same(endings.map((e) => e.how), kinds.map(() => 'error-frame'), 'every stream ended with an error frame');
  for (const e of endings) t.match(e.error, { code: 'shutting_down', message: /shutting down.*shutdown deadline/ });
  t.equal(await gw.exited, 0, 'clean exit');
  await until(() => upstream.requests.length === kinds.length && upstream.requests.every((r) => r.aborted));
});

t.test('a reload that lengthens shutdown_timeout_ms: the primary does not cut the longer drain', async (t) => {
  upstream.reset();
  const gw = await startCluster(t, 300);
  fs.writeFileSync(gw.file, clusterConfig(20_000));
  gw.child.kill('SIGHUP');
  await until(() => count(gw.out(), /"msg":"config reloaded"/) === 2, 10_000);
  // Four (over four connections, handed to the workers in turn): both workers are draining when the second signal comes.
  const streams = await Promise.all([1, 2, 3, 4].map(() => openStream(gw.port, 'chat', 'up/long')));
  await signalTwice(gw, 'SIGTERM');
  const endings = await Promise.all(streams.map(async (s) => ending('chat', await s.rest).how));
  t.same(endings, ['completed', 'completed', 'completed', 'completed'], 'the streams outlived the backstop the first deadline would have set (300 ms + 5 s)');
  t.equal(await gw.exited, 0, 'clean exit');
});

t.test('one process: at the deadline an unanswered request gets a 503, a stream its error events; new requests are refused', async (t) => {
  const hang = await startMock(() => ({ status: 200, json: {} }));
  t.teardown(() => hang.close());
  const gw = await startGateway(`
providers:
  - name: up
    family: openai-compatible
    base_url: ${upstream.url}/v1
  - name: hang
    family: openai-compatible
    base_url: ${hang.url}/v1
    timeout_ms: 60000
models:
  - id: up/m
    deployments: [{ provider: up, model: m }]
  - id: hang/m
    deployments: [{ provider: hang, model: m }]
`);
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  upstream.reset();
  hang.fail({ hang: true });
  const unanswered = client.chat.completions.create({ model: 'hang/m', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  const stream = await client.responses.create({ model: 'up/m', input: 'x', stream: true });
  const events: any[] = [];
  const read = (async () => {
    for await (const e of stream) events.push(e);
  })().catch((e) => e);
  await until(() => hang.requests.length === 1 && events.length > 3);
  const closing = gw.gw.close(300);
  const health = await fetch(`${gw.url}/healthz`);
  t.equal(health.status, 503);
  t.same(await health.json(), { status: 'draining' });
  t.equal(health.headers.get('connection'), 'close', 'the connection closes after it');
  const late: any = await new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 }).chat.completions.create({ model: 'up/m', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(late.status, 503, 'a request that arrives while the gateway drains is refused');
  t.match(late.error, { type: 'service_unavailable_error', code: 'shutting_down' });
  const err: any = await unanswered;
  t.equal(err.status, 503, 'a request still waiting for its upstream at the deadline: 503');
  t.match(err.error, { type: 'service_unavailable_error', code: 'shutting_down', message: /shutdown deadline/ });
  await read;
  t.match(events.at(-2), { type: 'error', code: 'shutting_down' });
  t.match(events.at(-1), { type: 'response.failed', response: { status: 'failed', error: { code: 'server_error', message: /shutting down.*\(shutting_down\)$/ } } });
  await closing;
  await until(() => hang.requests[0].aborted && upstream.requests[0]?.aborted === true);
  await until(() => gw.logs.filter((l) => l.msg === 'request').length >= 4);
  t.match(
    gw.logs.find((l) => l.msg === 'request' && l.path === '/v1/responses'),
    { status: 200, stream: 'failed', stream_error: 'shutting_down' },
    'the stream that ended on its error events is logged as failed',
  );
});
