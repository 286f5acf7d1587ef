// The upstream event stream (src/stream/upstream-events.ts) and the
// synchronous SSE parser under it: events in order whatever the chunking,
// back-pressure on a consumer that lags, the connection handed back when the
// consumer stops early, and a broken body as a TransportError. MappedEvents:
// a provider's synchronous mapping over it, a batch per chunk of events.
import t from 'tap';
import { PassThrough } from 'node:stream';
import { UpstreamEvents } from '../src/stream/upstream-events.js';
import { MappedEvents, type EventMapper } from '../src/stream/mapped.js';
import { UpstreamError } from '../src/provider/errors.js';
import { SSEParser, type SSEEvent } from '../src/sse.js';
import { TransportError } from '../src/upstream/errors.js';
import type { UpstreamResponse } from '../src/upstream/transport.js';

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

/** A mapper like the providers': `n` maps to n items, `stop` is the terminal event, `bad` throws; the end without `stop` is a cut stream. */
function mapper(log: string[] = []): EventMapper<string> {
  return {
    step(ev, out) {
      log.push(ev.data);
      if (ev.data === 'stop') return true;
      if (ev.data === 'bad') throw new UpstreamError(502, { message: 'bad event', type: 'api_error', param: null, code: null });
      for (let i = 0; i < Number(ev.data); i++) out.push(`${ev.data}.${i}`);
      return false;
    },
    end() {
      throw new UpstreamError(502, { message: 'cut', type: 'api_error', param: null, code: null });
    },
  };
}
const ev = (d: string) => `data: ${d}\n\n`;

t.test('MappedEvents: events that arrive together are mapped in one batch; events that make nothing are skipped', async (t) => {
  const { body, res, released } = upstream();
  const m = new MappedEvents(new UpstreamEvents(res), mapper());
  body.write(ev('0') + ev('2') + ev('0') + ev('1'));
  t.same(await m.nextBatch(), ['2.0', '2.1', '1.0'], 'one batch for one chunk of four events');
  body.write(ev('0'));
  const later = m.nextBatch();
  body.write(ev('3'));
  t.same(await later, ['3.0', '3.1', '3.2'], 'a batch waits for an event that makes items');
  body.write(ev('1') + ev('stop') + ev('5'));
  t.same(await m.nextBatch(), ['1.0'], 'the terminal event ends the batch; nothing after it is mapped');
  t.equal(await m.nextBatch(), null);
  t.equal(released(), 1, 'the connection is handed back at the terminal event');
});

t.test('MappedEvents: a mapping error after some items delivers them, then fails, and lets the upstream go', async (t) => {
  const { body, res, released } = upstream();
  const log: string[] = [];
  const m = new MappedEvents(new UpstreamEvents(res), mapper(log));
  body.write(ev('1') + ev('2') + ev('bad') + ev('4'));
  t.same(await m.nextBatch(), ['1.0', '2.0', '2.1'], 'the items before the bad event');
  await t.rejects(m.nextBatch(), { message: '502 bad event' }, 'then its error');
  t.equal(await m.nextBatch(), null, 'then done');
  t.same(log, ['1', '2', 'bad'], 'no event after the bad one was mapped');
  t.equal(released(), 1);

  const cut = upstream();
  const m2 = new MappedEvents(new UpstreamEvents(cut.res), mapper());
  cut.body.end(ev('1'));
  t.same(await m2.nextBatch(), ['1.0']);
  await t.rejects(m2.nextBatch(), { message: '502 cut' }, 'an upstream that ends without its terminal event fails in end()');
});

t.test('MappedEvents: prime() keeps the first items queued; a plain async iterable works as a source; return() stops it', async (t) => {
  const { body, res } = upstream();
  const m = new MappedEvents(new UpstreamEvents(res), mapper());
  body.write(ev('0') + ev('2'));
  t.equal(await m.prime(), true);
  body.write(ev('1') + ev('stop'));
  const got: string[] = [];
  for await (const item of m) got.push(item);
  t.same(got, ['2.0', '2.1', '1.0'], 'the primed items first, then the rest, through the AsyncGenerator interface');

  const empty = upstream();
  const m2 = new MappedEvents(new UpstreamEvents(empty.res), { step: () => false, end: () => {} });
  empty.body.end(ev('x'));
  t.equal(await m2.prime(), false, 'a stream that ends without an item primes nothing');

  let returned = 0;
  const source = {
    [Symbol.asyncIterator]() {
      let i = 0;
      return {
        next: async () => (i < 3 ? { done: false as const, value: { event: undefined, data: String(++i), id: undefined } } : { done: true as const, value: undefined }),
        return: async () => (returned++, { done: true as const, value: undefined }),
      };
    },
  };
  const m3 = new MappedEvents(source, mapper());
  t.same(await m3.nextBatch(), ['1.0'], 'one event per next() from a plain iterable');
  await m3.return();
  t.equal(returned, 1, 'return() returns the source');
  t.equal(await m3.nextBatch(), null, 'and nothing more comes');
});
