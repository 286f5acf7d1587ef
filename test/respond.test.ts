// The SSE writer: frames of one event-loop turn share a socket write, and
// nothing is lost or reordered whatever the timing (a corked response that
// ended lost its last frames once).
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeFrames, MappedFrames } from '../src/respond.js';

async function serve(frames: () => AsyncIterable<string>, onError: (e: unknown) => string | null = () => null) {
  let result: string | undefined;
  const srv = http.createServer(async (_req, res) => {
    result = await pipeFrames(res, { 'x-test': '1' }, frames(), onError);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const res = await fetch(`http://127.0.0.1:${(srv.address() as AddressInfo).port}/`);
  const text = await res.text();
  srv.close();
  return { text, headers: res.headers, result: () => result };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('frames in the same turn, across turns, and after pauses all arrive in order', async (t) => {
  const { text, headers, result } = await serve(async function* () {
    yield 'data: 1\n\n';
    yield 'data: 2\n\n';
    await sleep(5);
    yield 'data: 3\n\n';
    await new Promise((r) => setImmediate(r));
    yield 'data: 4\n\n';
    yield 'data: [DONE]\n\n';
  });
  t.equal(text, 'data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n');
  t.match(headers.get('content-type'), /text\/event-stream/);
  t.equal(headers.get('x-test'), '1');
  t.equal(result(), 'completed');
});

t.test('a failing source ends with the error frame after every earlier frame', async (t) => {
  const { text, result } = await serve(
    async function* () {
      yield 'data: a\n\n';
      await sleep(2);
      yield 'data: b\n\n';
      throw new Error('upstream broke');
    },
    () => 'data: {"error":{}}\n\n',
  );
  t.equal(text, 'data: a\n\ndata: b\n\ndata: {"error":{}}\n\n');
  t.equal(result(), 'failed');
});

t.test('many frames with back-pressure keep their order', async (t) => {
  const big = 'x'.repeat(8192);
  const { text } = await serve(async function* () {
    for (let i = 0; i < 500; i++) {
      yield `data: ${i} ${big}\n\n`;
      if (i % 50 === 0) await sleep(1);
    }
  });
  const ids = text.split('\n\n').filter(Boolean).map((f) => Number(f.slice(6).split(' ')[0]));
  t.same(ids, Array.from({ length: 500 }, (_, i) => i));
});

t.test('MappedFrames: the writer maps items itself, with the same frames a plain consumer gets', async (t) => {
  const big = 'y'.repeat(8192);
  const make = () =>
    new MappedFrames(
      (async function* () {
        for (let i = 0; i < 300; i++) {
          yield i;
          if (i % 60 === 0) await sleep(1);
        }
      })(),
      (i: number) => (i % 3 === 0 ? '' : `data: ${i} ${big}\n\n`),
      () => 'data: [DONE]\n\n',
    );
  let generic = '';
  for await (const f of make()) generic += f;
  const { text, result } = await serve(make);
  t.equal(text, generic, 'same bytes through pipeFrames (back-pressure included) as through the generic iterator');
  t.ok(text.endsWith('data: [DONE]\n\n'));
  t.notMatch(text, /data: 3 /, 'an item mapped to no frame writes nothing');
  t.equal(result(), 'completed');

  const failing = await serve(
    () =>
      new MappedFrames(
        (async function* () {
          yield 1;
          yield 2;
        })(),
        (i: number) => {
          if (i === 2) throw new Error('mapping failed');
          return `data: ${i}\n\n`;
        },
        () => 'data: [DONE]\n\n',
      ),
    () => 'data: {"error":{}}\n\n',
  );
  t.equal(failing.text, 'data: 1\n\ndata: {"error":{}}\n\n', 'a mapper that throws ends with the error frame, no [DONE]');
  t.equal(failing.result(), 'failed');
});

t.test('MappedFrames over a provider mapping (MappedEvents): a batch per chunk of events, the same bytes, the upstream let go', async (t) => {
  const { PassThrough } = await import('node:stream');
  const { UpstreamEvents } = await import('../src/stream/upstream-events.js');
  const { MappedEvents } = await import('../src/stream/mapped.js');
  const big = 'z'.repeat(4096);
  let released = 0;
  const make = (chunks: string[][]) => {
    const body = new PassThrough();
    const events = new UpstreamEvents({ status: 200, headers: {}, body, release: () => void released++ });
    const mapped = new MappedEvents<number>(events, {
      step(ev, out) {
        if (ev.data === 'end') return true;
        const n = Number(ev.data);
        if (n % 5 !== 0) out.push(n, n + 0.5); // two items per event, none for multiples of 5
        return false;
      },
      end() {},
    });
    (async () => {
      for (const group of chunks) {
        body.write(group.map((d) => `data: ${d}\n\n`).join(''));
        await sleep(2);
      }
    })();
    return new MappedFrames(mapped, (n: number) => (Number.isInteger(n) ? `data: ${n} ${big}\n\n` : `data: ${n}\n\n`), () => 'data: [DONE]\n\n');
  };
  const groups = Array.from({ length: 40 }, (_, g) => Array.from({ length: 7 }, (_, i) => String(g * 7 + i)));
  groups.push(['end', '999']);
  let generic = '';
  for await (const f of make(groups)) generic += f;
  t.match(generic, /^data: 1 z+\n\ndata: 1\.5\n\ndata: 2 /, 'two frames per event, in order');
  t.notMatch(generic, /data: 5 /, 'an event that maps to nothing writes nothing');
  t.notMatch(generic, /data: 999/, 'nothing after the terminal event');
  released = 0;
  let writes = 0;
  const srv = http.createServer(async (_req, res) => {
    const write = res.write.bind(res) as (c: string) => boolean;
    res.write = ((c: string) => (writes++, write(c))) as typeof res.write;
    await pipeFrames(res, {}, make(groups), () => null);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const text = await (await fetch(`http://127.0.0.1:${(srv.address() as AddressInfo).port}/`)).text();
  srv.close();
  t.equal(text, generic, 'the same bytes as the generic iterator, back-pressure included');
  t.ok(writes <= groups.length + 1, `one write per chunk of events, not per frame (${writes} writes for ${groups.length} chunks)`);
  t.equal(released, 1, 'the terminal event handed the connection back');
});

t.test('a primed stream: its first frame goes with the headers, and a first item that makes no frame still lets the headers out', async (t) => {
  const { batchSource } = await import('../src/stream/batches.js');
  for (const first of ['data: 0\n\n', '']) {
    let headersSeen!: () => void;
    const seen = new Promise<void>((r) => (headersSeen = r));
    // The second item waits for the client to have the headers: were they held back, this would never end.
    const src = batchSource(
      (async function* () {
        yield first;
        await seen;
        yield 'data: 1\n\n';
      })(),
    );
    t.equal(await src.prime(), true);
    t.equal(src.ready, true, 'primed: its first batch is ready');
    const srv = http.createServer((_req, res) => void pipeFrames(res, {}, new MappedFrames(src, (f: string) => f), () => null));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const res = await fetch(`http://127.0.0.1:${(srv.address() as AddressInfo).port}/`);
    headersSeen();
    t.equal(await res.text(), `${first}data: 1\n\n`, first ? 'first frame with the headers' : 'headers alone, then the frame');
    srv.close();
  }
});

t.test('read by push (an upstream body through a provider mapping): back-pressure, a client that leaves, a body that breaks', async (t) => {
  const { PassThrough } = await import('node:stream');
  const net = await import('node:net');
  const { UpstreamEvents } = await import('../src/stream/upstream-events.js');
  const { MappedEvents } = await import('../src/stream/mapped.js');
  const big = 'y'.repeat(16 * 1024);
  const make = () => {
    const body = new PassThrough();
    let released = 0;
    const events = new UpstreamEvents({ status: 200, headers: {}, body, release: () => void released++ });
    const mapped = new MappedEvents<string>(events, {
      step(ev, out) {
        if (ev.data === 'end') return true;
        out.push(ev.data);
        return false;
      },
      end() {},
    });
    return { body, mapped, released: () => released, frames: new MappedFrames(mapped, (d: string) => `data: ${d} ${big}\n\n`, () => 'data: [DONE]\n\n') };
  };
  const run = async (src: ReturnType<typeof make>, client: (port: number) => Promise<void>) => {
    t.equal(src.mapped.pushes, true, 'the source is read by push');
    let result: Promise<string> | undefined;
    const srv = http.createServer((_req, res) => void (result = pipeFrames(res, {}, src.frames, () => 'data: {"error":{}}\n\n')));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    await client((srv.address() as AddressInfo).port);
    const r = await result!;
    srv.close();
    return r;
  };

  // A client that reads nothing for a while: the writer waits for the socket, the body is paused, nothing is lost.
  const slow = make();
  const n = 600;
  let pausedSeen = false;
  const completed = await run(slow, async (port) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    sock.pause();
    for (let i = 0; i < n; i++) slow.body.write(`data: ${i}\n\n`);
    slow.body.write('data: end\n\n');
    for (let i = 0; i < 50 && !pausedSeen; i++) {
      await sleep(10);
      pausedSeen = slow.body.isPaused();
    }
    const parts: Buffer[] = [];
    sock.on('data', (c: Buffer) => parts.push(c));
    sock.resume();
    await new Promise((r) => sock.once('end', r));
    const text = Buffer.concat(parts).toString();
    const got = [...text.matchAll(/data: (\d+) y+\n\n/g)].map((m) => Number(m[1]));
    t.same(got, Array.from({ length: n }, (_, i) => i), 'every event, in order');
    t.match(text, /data: \[DONE\]\n\n\r\n0\r\n\r\n$/, 'the closing frame, then the end');
  });
  t.ok(pausedSeen, 'the upstream body was paused while the client did not read');
  t.equal(completed, 'completed');
  t.equal(slow.released(), 1, 'the terminal event handed the connection back');

  // A client that leaves mid-stream: the writer stops and lets the upstream go.
  const left = make();
  const closed = await run(left, async (port) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    left.body.write('data: 0\n\n');
    await new Promise((r) => sock.once('data', r));
    sock.destroy();
    await sleep(20);
  });
  t.equal(closed, 'client_closed');
  t.equal(left.released(), 1, 'the upstream is let go when the client leaves');

  // A body that breaks after some events: those events, then the error frame, no [DONE].
  const broken = make();
  let text = '';
  const failed = await run(broken, async (port) => {
    const res = fetch(`http://127.0.0.1:${port}/`);
    broken.body.write('data: 0\n\ndata: 1\n\n');
    await sleep(10);
    broken.body.destroy(new Error('reset'));
    text = await (await res).text();
  });
  t.equal(failed, 'failed');
  t.match(text, /^data: 0 y+\n\ndata: 1 y+\n\ndata: \{"error":\{\}\}\n\n$/, 'the events before the break, then the error frame');
});
