// The idle collector (src/idle-gc.ts): one full collection once the requests
// stop and the heap has grown, none while requests come in or run, none
// again before more requests; and its collection (V8's, reached without
// --expose-gc) frees the garbage a burst of requests left.
import t from 'tap';
import v8 from 'node:v8';
import { startIdleCollector } from '../src/idle-gc.js';

t.test('collects once per idle period after requests, never while they run', async (t) => {
  let started = 0;
  let running = 0;
  let heap = 100;
  let collected = 0;
  const c = startIdleCollector({ started: () => started, running: () => running, intervalMs: 60_000, afterStartMs: 0, minGrowthBytes: 10, heapBytes: () => heap, collect: () => ((collected++), (heap = 100)) });
  t.teardown(() => c.stop());
  c.check();
  t.equal(collected, 0, 'no request yet: nothing to give back');
  started = 5;
  running = 1;
  heap = 200;
  c.check();
  t.equal(collected, 0, 'requests started in this interval: busy');
  c.check();
  t.equal(collected, 0, 'a request still running');
  running = 0;
  c.check();
  t.equal(collected, 1, 'idle for an interval after serving, heap grown: one collection');
  t.equal(heap, 100);
  heap = 200;
  c.check();
  t.equal(collected, 1, 'not again before more requests');
  started = 6;
  heap = 105;
  c.check();
  c.check();
  t.equal(collected, 1, 'served again, but the heap barely grew: nothing to give back');
  t.equal(c.collections, 1);
});

t.test("V8's full collection, reached without --expose-gc, frees what nothing holds", async (t) => {
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'this process was started without --expose-gc');
  let requests = 0;
  const c = startIdleCollector({ started: () => requests, running: () => 0, intervalMs: 3_600_000, afterStartMs: 0, minGrowthBytes: 0 });
  t.teardown(() => c.stop());
  // About 20 MB that a request could have left behind: reachable while the heap is measured, garbage after.
  const used = (() => {
    const garbage = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `${'x'.repeat(64)}${i}` }));
    const u = v8.getHeapStatistics().used_heap_size;
    t.equal(garbage.length, 200_000);
    return u;
  })();
  requests++;
  c.check(); // the request is seen
  c.check(); // idle for an interval: collect
  t.equal(c.collections, 1, 'one collection');
  const after = v8.getHeapStatistics().used_heap_size;
  t.ok(after < used - 10 * 1048576, `used heap ${Math.round(used / 1048576)} MB → ${Math.round(after / 1048576)} MB`);
});

t.test("one look after the start collects the start-up's garbage, unless a request came first", async (t) => {
  const counted = (started: () => number) => {
    let collected = 0;
    const c = startIdleCollector({ started, running: () => 0, intervalMs: 3_600_000, afterStartMs: 20, collect: () => collected++ });
    t.teardown(() => c.stop());
    return () => collected;
  };
  const idle = counted(() => 0);
  let requests = 0;
  const served = counted(() => requests);
  requests++;
  await new Promise((r) => setTimeout(r, 100));
  t.equal(idle(), 1, 'no request by then: one collection');
  t.equal(served(), 0, "a request came: left to the requests' own collection");
});

t.test('the wait is read at every look: 0 turns the collection off, a reload back on', async (t) => {
  let interval = 0;
  let requests = 0;
  let collected = 0;
  const c = startIdleCollector({ started: () => requests, running: () => 0, intervalMs: () => interval, afterStartMs: 0, minGrowthBytes: 0, heapBytes: () => 1, collect: () => collected++ });
  t.teardown(() => c.stop());
  requests = 3;
  // Off: the timer looks once a second without collecting.
  await new Promise((r) => setTimeout(r, 1_300));
  t.equal(collected, 0, 'idle_release_ms 0: no collection after requests');
  interval = 30;
  // The pending one-second look picks up the new value; then one look sees requests, the next sees idleness.
  requests = 4;
  await new Promise((r) => setTimeout(r, 1_000));
  t.equal(collected, 1, 'turned on: one collection once idle');
  t.equal(c.collections, 1);
});
