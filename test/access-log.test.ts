// The access-log line says what happened to a request whose client left: 499
// (nginx's "client closed request") when it left before any answer, the status
// it was sent plus `client_closed` and the stream's outcome when it left
// mid-stream; never a 404 the client was not sent.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startMock, sse } from './mocks/server.js';
import { startGateway, openAIConfig, CLIENT_KEY, until } from './helpers/gateway.js';

const oai = await startOpenAIMock();
const chunk = (i: number) => sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : { content: `${i} ` }, finish_reason: null }] });
const slow = await startMock(() => ({ status: 200, sseDelayMs: 40, sse: Array.from({ length: 50 }, (_, i) => chunk(i)) }));
const gw = await startGateway(
  openAIConfig(oai.url, '', {
    providers: `
  - name: slow
    family: openai-compatible
    base_url: ${slow.url}/v1
    api_key: sk-test-openai-0123456789`,
    models: `
  - id: x/slow
    deployments: [{ provider: slow, model: m }]`,
  }),
);
t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), slow.close()]);
});
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
const lineFor = (id: string) => gw.logs.find((l) => l.msg === 'request' && l.request_id === id);

t.test('a client that leaves before any answer is logged 499, and its upstream call is aborted', async (t) => {
  oai.reset();
  oai.fail({ hang: true });
  const ac = new AbortController();
  const pending = client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] }, { signal: ac.signal, headers: { 'x-request-id': 'left-early' } });
  await until(() => oai.requests.length === 1);
  ac.abort();
  await t.rejects(pending);
  await until(() => lineFor('left-early') !== undefined);
  t.match(lineFor('left-early'), { status: 499, client_closed: true, error: 'client_closed', path: '/v1/chat/completions' });
  await until(() => oai.requests[0].aborted);
});

t.test('a client that leaves mid-stream: the status it was sent, client_closed, and the stream outcome', async (t) => {
  slow.reset();
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: 'x/slow', messages: [{ role: 'user', content: 'hi' }], stream: true }, { signal: ac.signal, headers: { 'x-request-id': 'left-mid' } });
  let n = 0;
  await (async () => {
    for await (const _ of stream) if (++n === 2) ac.abort();
  })().catch(() => {});
  await until(() => lineFor('left-mid') !== undefined);
  t.match(lineFor('left-mid'), { status: 200, client_closed: true, stream: 'client_closed' });
  await until(() => slow.requests[0]?.aborted === true);
});

t.test('answered requests keep their status and carry no client_closed', async (t) => {
  await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-request-id': 'answered' } });
  const s = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }, { headers: { 'x-request-id': 'streamed' } });
  for await (const _ of s);
  const missing = await fetch(`${gw.url}/v1/nothing-here`, { headers: { 'x-request-id': 'unknown-route' } });
  t.equal(missing.status, 404);
  await until(() => ['answered', 'streamed', 'unknown-route'].every((id) => lineFor(id)));
  t.match(lineFor('answered'), { status: 200 });
  t.match(lineFor('streamed'), { status: 200, stream: 'completed' });
  t.match(lineFor('unknown-route'), { status: 404, error: 'unknown_route' });
  for (const id of ['answered', 'streamed', 'unknown-route']) t.notOk('client_closed' in lineFor(id)!, `${id}: not client_closed`);
});
