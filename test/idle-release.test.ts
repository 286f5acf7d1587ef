// server.idle_release_ms through a running gateway (src/idle-gc.ts, src/server.ts):
// 0 keeps the heap after requests; a reload that sets a wait turns the idle
// collection on, and it runs once the requests stop. The requests are the
// OpenAI SDK's.
import t from 'tap';
import OpenAI from 'openai';
import { startGateway, openAIConfig, until, CLIENT_KEY } from './helpers/gateway.js';
import { startOpenAIMock } from './mocks/openai.js';

const mock = await startOpenAIMock();
const yaml = (ms: number) => `server:\n  idle_release_ms: ${ms}\n${openAIConfig(mock.url)}`;
const gw = await startGateway(yaml(0));
t.teardown(async () => {
  await gw.close();
  await mock.close();
});
const client = new OpenAI({ baseURL: gw.baseURL, apiKey: CLIENT_KEY, maxRetries: 0 });
const ask = () => client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] });

t.test('0: no collection after requests; a reload to 100 ms collects once they stop', async (t) => {
  t.ok((await ask()).choices[0].message.content, 'served');
  // A heap grown past the collector's 16 MB threshold, as a load leaves it (held: the size is what it looks at).
  const grown = Array.from({ length: 300_000 }, (_, i) => ({ i, s: `${'x'.repeat(64)}${i}` }));
  await new Promise((r) => setTimeout(r, 1_500));
  t.equal(gw.gw.idleCollections, 0, 'idle_release_ms 0: the heap is kept');
  const outcome = await gw.reload(yaml(100));
  t.equal(outcome.result, 'success');
  // (The test harness turns the usage store off behind the file's back, so `storage` shows as changed.)
  t.notOk((outcome.restartRequired ?? []).some((k) => k.startsWith('server')), 'idle_release_ms needs no restart');
  await until(() => gw.gw.idleCollections === 1, 3_000);
  t.equal(gw.gw.idleCollections, 1, 'one collection once idle');
  t.equal(grown.length, 300_000);
  t.ok((await ask()).choices[0].message.content, 'served after the collection');
  await new Promise((r) => setTimeout(r, 400));
  t.equal(gw.gw.idleCollections, 1, 'not again: the heap has not grown since');
});
