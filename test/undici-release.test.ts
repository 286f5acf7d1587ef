// The undici transport's release() (src/upstream/undici.ts): a response the
// consumer stopped reading goes back to the keep-alive pool when the rest
// arrives at once, and is torn down 100 ms on when the upstream keeps sending.
import t from 'tap';
import http from 'node:http';
import type { Socket } from 'node:net';
import { createUndiciTransport } from '../src/upstream/undici.js';
import { until } from './helpers/gateway.js';

const sockets: Socket[] = [];
const closed = new Set<Socket>();
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write('data: first\n\n');
  // /rest: the rest follows at once; /endless: a chunk every 20 ms, never an end.
  if (req.url === '/rest') setTimeout(() => res.end('data: last\n\n'), 5);
  else {
    const every = setInterval(() => res.write('data: more\n\n'), 20);
    res.on('close', () => clearInterval(every));
  }
});
server.on('connection', (s: Socket) => {
  sockets.push(s);
  s.on('close', () => closed.add(s));
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const transport = createUndiciTransport();
t.teardown(() => {
  transport.close();
  server.closeAllConnections();
  server.close();
});

/** A call read up to its first chunk, then released as a provider plugin does at its terminal event. */
async function readFirstThenRelease(path: string) {
  const res = await transport.request({ pool: 'p', url: origin + path, headers: {}, body: '{}', signal: new AbortController().signal, firstByteTimeoutMs: 2000 });
  await new Promise<void>((resolve) => res.body.once('data', () => resolve()));
  res.body.pause();
  res.release();
  return res;
}

t.test('the rest arrives at once: the connection is reused', async (t) => {
  const a = await readFirstThenRelease('/rest');
  await until(() => a.body.destroyed || a.body.readableEnded);
  const b = await readFirstThenRelease('/rest');
  await until(() => b.body.destroyed || b.body.readableEnded);
  t.equal(sockets.length, 1, 'one upstream connection for both calls');
  t.equal(closed.size, 0, 'and it is still open');
});

t.test('the upstream keeps sending: the connection is torn down, not pooled', async (t) => {
  const r = await readFirstThenRelease('/endless');
  await until(() => r.body.destroyed, 2000);
  await until(() => closed.size === 1, 2000);
  t.equal(closed.size, 1, 'the connection of the endless call closed');
  t.notOk(r.body.readableEnded, 'the body never ended: release gave up on it');
});
