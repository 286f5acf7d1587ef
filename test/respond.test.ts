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
