// The upstream event stream (src/provider.ts UpstreamEvents) and the
// synchronous SSE parser under it: events in order whatever the chunking,
// back-pressure on a consumer that lags, the connection handed back when the
// consumer stops early, and a broken body as a TransportError.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { UpstreamEvents } from '../src/provider.js';
import { SSEParser, type SSEEvent } from '../src/sse.js';
import { TransportError, type UpstreamResponse } from '../src/upstream.js';

function upstream() {
  const body = new PassThrough();
  let released = 0;
  const res: UpstreamResponse = { status: 200, headers: {}, body, release: () => void released++ };
  return { body, res, released: () => released };
}

const frame = (i: number) => `event: e\ndata: {"i":${i}}\n\n`;

t.test('the parser gives the same events for any chunking and every line end', async (t) => {
  const text = 'event: a\r\ndata: 1\r\ndata: 2\r\n\r\n: comment\n\nid: 7\ndata: 3\r\rdata: last';
  const want: SSEEvent[] = [
    { event: 'a', data: '1\n2', id: undefined },
    { event: undefined, data: '3', id: '7' },
    // The last event id carries over to later events (the spec's "last event ID").
    { event: undefined, data: 'last', id: '7' },
  ];
  for (const size of [1, 2, 3, 5, 8, text.length]) {
    const p = new SSEParser();
    const out: SSEEvent[] = [];
    for (let i = 0; i < text.length; i += size) p.push(Buffer.from(text.slice(i, i + size)), out);
    p.end(out);
    t.same(out, want, `chunks of ${size}`);
  }
  // A multi-byte character split across chunks.
  const p = new SSEParser();
  const out: SSEEvent[] = [];
  const bytes = Buffer.from('data: é€😀\n\n');
  for (let i = 0; i < bytes.length; i++) p.push(bytes.subarray(i, i + 1), out);
  t.same(out, [{ event: undefined, data: 'é€😀', id: undefined }]);
});

t.test('events arrive in order; a lagging consumer pauses the body, and it resumes when caught up', async (t) => {
  const { body, res } = upstream();
  const events = new UpstreamEvents(res);
  body.write(Array.from({ length: 600 }, (_, i) => frame(i)).join(''));
  await new Promise((r) => setImmediate(r));
  t.ok(body.isPaused(), 'paused with 600 events queued');
  const seen: number[] = [];
  for (let i = 0; i < 600; i++) {
    const r = await events.next();
    seen.push(JSON.parse((r.value as SSEEvent).data).i);
  }
  t.notOk(body.isPaused(), 'flowing again once the queue is drained');
  body.write(frame(600));
  body.end();
  for await (const e of events) seen.push(JSON.parse(e.data).i);
  t.same(seen, Array.from({ length: 601 }, (_, i) => i));
  t.same(await events.next(), { done: true, value: undefined }, 'done stays done');
});

t.test('a consumer that stops early hands the connection back once; a finished body is not released', async (t) => {
  const a = upstream();
  const ea = new UpstreamEvents(a.res);
  a.body.write(frame(1) + frame(2));
  for await (const e of ea) {
    t.equal(e.data, '{"i":1}');
    break;
  }
  t.equal(a.released(), 1, 'released on return()');
  await ea.return();
  t.equal(a.released(), 1, 'once');
  a.body.destroy(new Error('late reset'));
  await new Promise((r) => setImmediate(r));
  t.pass('a late body error after the consumer stopped is not an uncaught exception');

  const b = upstream();
  const eb = new UpstreamEvents(b.res);
  b.body.end(frame(1));
  const all: string[] = [];
  for await (const e of eb) all.push(e.data);
  t.same(all, ['{"i":1}']);
  t.equal(b.released(), 0, 'a body read to its end is not released');

  const c = upstream();
  const ec = new UpstreamEvents(c.res);
  const pending = ec.next();
  await ec.return();
  t.same(await pending, { done: true, value: undefined }, 'a pending next() ends when the consumer stops');
});

t.test('a body that breaks or closes early is a TransportError, after the events that came before it', async (t) => {
  const a = upstream();
  const ea = new UpstreamEvents(a.res);
  a.body.write(frame(1));
  await new Promise((r) => setImmediate(r));
  a.body.destroy(Object.assign(new Error('socket hang up'), { code: 'UND_ERR_SOCKET' }));
  t.equal((await ea.next()).value?.data, '{"i":1}');
  const err = await ea.next().catch((e) => e);
  t.ok(err instanceof TransportError);
  t.equal(err.code, 'ECONNRESET');

  const b = upstream();
  const eb = new UpstreamEvents(b.res);
  const waiting = eb.next();
  b.body.destroy();
  const err2 = await waiting.catch((e) => e);
  t.ok(err2 instanceof TransportError, 'closed without an end: premature close');
  t.equal(err2.code, 'ECONNRESET');
  t.equal(b.released(), 0);
});
