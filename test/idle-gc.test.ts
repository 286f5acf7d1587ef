// The idle collector (src/idle-gc.ts): one full collection once the requests
// stop and the heap has grown, none while requests come in or run, none
// again before more requests; and its collection (V8's, reached without
// --expose-gc) gives back the heap a burst of large requests grew.
import t from 'tap';
import v8 from 'node:v8';
import { startIdleCollector } from '../src/idle-gc.js';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, CLIENT_KEY } from './helpers/gateway.js';

t.test('collects once per idle period after requests, never while they run', async (t) => {
  let started = 0;
  let running = 0;
  let heap = 100;
  let collected = 0;
  const c = startIdleCollector({ started: () => started, running: () => running, intervalMs: 60_000, minGrowthBytes: 10, heapBytes: () => heap, collect: () => ((collected++), (heap = 100)) });
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

t.test("V8's full collection without --expose-gc: the heap a burst of large requests grew is given back", async (t) => {
  const mock = await startOpenAIMock();
  const gw = await startGateway(openAIConfig(mock.url));
  t.teardown(async () => {
    await gw.close();
    await mock.close();
  });
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'this process was started without --expose-gc');
  let requests = 0;
  const c = startIdleCollector({ started: () => requests, running: () => 0, intervalMs: 3_600_000, minGrowthBytes: 1 });
  t.teardown(() => c.stop());
  const content = 'x'.repeat(200_000);
  for (let i = 0; i < 20; i++) {
    requests++;
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: content + i }] }),
    });
    t.equal(res.status, 200);
    await res.text();
  }
  const grown = v8.getHeapStatistics().total_heap_size;
  c.check(); // the requests are seen
  c.check(); // idle for an interval: collect
  t.equal(c.collections, 1, 'one collection');
  const after = v8.getHeapStatistics().total_heap_size;
  t.ok(after < grown, `heap ${Math.round(grown / 1048576)} MB → ${Math.round(after / 1048576)} MB`);
});
