// The three upstream transports (server.transport: undici, the default; http;
// proxy) behind one contract: the same answers, keep-alive reuse for JSON and
// streams, and the same failures (refused, first-byte timeout, reset mid-body,
// client disconnect) reported the same way. `GATEWAY_TEST_TRANSPORT=http|proxy
// npm test` runs the whole suite on another one.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startMock, sse } from './mocks/server.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const oai = await startOpenAIMock();
const chunk = (i: number) => sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : { content: `${i} ` }, finish_reason: null }] });
const slow = await startMock(() => ({ status: 200, sseDelayMs: 40, sse: Array.from({ length: 50 }, (_, i) => chunk(i)) }));
const cut = await startMock(() => ({ status: 200, sse: [chunk(0), chunk(1), chunk(2)] }));
// A native (OpenAI family) Responses stream that takes its time.
const slowResponses = await startMock(() => ({
  status: 200,
  sseDelayMs: 40,
  sse: [
    sse({ type: 'response.created', sequence_number: 0, response: { id: 'resp_slow', object: 'response', status: 'in_progress', model: 'gpt-4.1-mini', output: [] } }, 'response.created'),
    ...Array.from({ length: 50 }, (_, i) => sse({ type: 'response.output_text.delta', sequence_number: i + 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: `${i} ` }, 'response.output_text.delta')),
  ],
}));
t.teardown(async () => {
  await Promise.all([oai.close(), slow.close(), cut.close(), slowResponses.close()]);
});

for (const transport of ['undici', 'http', 'proxy']) {
  t.test(`transport ${transport}`, async (t) => {
    const prov = (name: string, url: string, extra = '') => `
  - name: ${name}
    family: openai-compatible
    base_url: ${url}/v1
    api_key: sk-test-openai-0123456789
    timeout_ms: 300
    retries: 0${extra}`;
    const gw = await startGateway(`
server:
  transport: ${transport}
providers:${prov('o', oai.url)}${prov('slow', slow.url)}${prov('cut', cut.url)}${prov('refused', 'http://127.0.0.1:1')}${prov('silent', slow.url, '\n    stream_idle_timeout_ms: 200')}${prov('stall', oai.url, '\n    stream_idle_timeout_ms: 200')}
  - name: slowresp
    family: openai
    base_url: ${slowResponses.url}/v1
    api_key: sk-test-openai-0123456789
    timeout_ms: 300
    retries: 0
  - name: silentresp
    family: openai
    base_url: ${slowResponses.url}/v1
    api_key: sk-test-openai-0123456789
    timeout_ms: 300
    stream_idle_timeout_ms: 200
    retries: 0
models:
  - id: x/stall
    deployments: [{ provider: stall, model: gpt-4.1-mini }]
  - id: x/silent
    deployments: [{ provider: silent, model: m }]
  - id: x/silentresp
    deployments: [{ provider: silentresp, model: gpt-4.1-mini }]
  - id: x/slowresp
    deployments: [{ provider: slowresp, model: gpt-4.1-mini }]
  - id: x/o
    deployments: [{ provider: o, model: gpt-4.1-mini }]
  - id: x/slow
    deployments: [{ provider: slow, model: m }]
  - id: x/cut
    deployments: [{ provider: cut, model: m }]
  - id: x/refused
    deployments: [{ provider: refused, model: m }]
`);
    // GATEWAY_TEST_TRANSPORT must not override what this test asks for.
    gw.gw.core.transport.close();
    const { createTransport } = await import('../src/upstream/index.js');
    gw.gw.core.transport = createTransport(transport as 'undici');
    t.teardown(() => gw.close());
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });

    await t.test('JSON and streams answer, and reuse one upstream connection', async (t) => {
      const first = await client.chat.completions.create({ model: 'x/o', messages: [{ role: 'user', content: 'hi' }] });
      t.equal(first.object, 'chat.completion');
      const before = oai.connections;
      for (let i = 0; i < 3; i++) {
        const r = await client.chat.completions.create({ model: 'x/o', messages: [{ role: 'user', content: 'hi' }] });
        t.ok(r.choices[0].message.content);
        const s = await client.chat.completions.create({ model: 'x/o', messages: [{ role: 'user', content: 'hi' }], stream: true });
        let text = '';
        for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
        t.ok(text.length > 0, 'streamed text');
        await new Promise((r) => setTimeout(r, 5));
      }
      t.equal(oai.connections - before, 0, 'no new upstream connection for 6 more calls');
      const sent = oai.requests[oai.requests.length - 1];
      t.equal(sent.headers.authorization, 'Bearer sk-test-openai-0123456789', "the provider's key, not the client's");
      t.notOk(JSON.stringify(sent.headers).includes(CLIENT_KEY), 'no client header reaches the provider');
    });

    await t.test('a stream request leaves whole, with its content-length, in one piece of framing', async (t) => {
      // Stream requests hand the transport a body it must not keep (releaseBody): undici gets it as a one-shot stream.
      const long = Array.from({ length: 400 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} ` + 'é—x'.repeat(60) })) as OpenAI.ChatCompletionMessageParam[];
      long.push({ role: 'user', content: 'last' });
      const before = oai.requests.length;
      const s = await client.chat.completions.create({ model: 'x/o', messages: long, stream: true });
      let text = '';
      for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
      t.ok(text.length > 0, 'streamed');
      const sent = oai.requests[before];
      t.equal(sent.headers['content-length'], String(Buffer.byteLength(sent.raw)), 'content-length is the body length');
      t.notOk(sent.headers['transfer-encoding'], 'not chunked');
      t.equal(sent.body.messages.length, long.length, 'every message arrived');
      t.equal(sent.body.messages[399].content, long[399].content, 'multi-byte text intact');
    });

    await t.test('connection refused and first-byte timeout are transport failures with their code', async (t) => {
      const refused: any = await client.chat.completions.create({ model: 'x/refused', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
      t.equal(refused.status, 500);
      t.match(refused.error.message, /ECONNREFUSED/);
      oai.fail({ delayMs: 1000 });
      const slowHeaders: any = await client.chat.completions.create({ model: 'x/o', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
      t.equal(slowHeaders.status, 500);
      t.match(slowHeaders.error.message, /no response within 300 ms/);
    });

    await t.test('a reset mid-stream ends the stream with an error frame, not [DONE]', async (t) => {
      cut.fail({ cutAfterEvents: 2 });
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'x/cut', messages: [{ role: 'user', content: 'x' }], stream: true }),
      });
      const text = await res.text();
      t.match(text, /"error":/, 'an error frame');
      t.notMatch(text, /\[DONE\]/);
      await until(() => gw.logs.some((l) => l.msg === 'request' && l.stream === 'failed'), 2000);
      t.notOk(gw.logs.some((l) => l.msg === 'stream failed inside the gateway'), 'a broken upstream is not logged as a gateway bug');
    });

    await t.test('an upstream that goes silent mid-stream: an error frame after stream_idle_timeout_ms, the upstream aborted', async (t) => {
      slow.reset();
      slow.fail({ silentAfterEvents: 2 });
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'x/silent', messages: [{ role: 'user', content: 'x' }], stream: true }),
      });
      t.equal(res.status, 200);
      const text = await res.text();
      const frames = text.trim().split('\n\n');
      t.equal(frames.length, 3, 'the two events, then the error: ' + text);
      const last = JSON.parse(frames[2].slice(6));
      t.match(last.error, { type: 'api_error', code: 'upstream_stream_error', message: /went silent.*nothing for 200 ms \(stream_idle_timeout_ms\)/ });
      t.notMatch(text, /\[DONE\]/);
      await until(() => slow.requests[0]?.aborted === true, 2000);
      t.ok(slow.requests[0].aborted, 'the silent upstream request was aborted');
      await until(() => gw.logs.some((l) => l.msg === 'request' && l.stream === 'failed' && l.stream_error === 'ETIMEDOUT_IDLE'), 2000);

      // The SDK raises it.
      slow.fail({ silentAfterEvents: 2 });
      const s = await client.chat.completions.create({ model: 'x/silent', messages: [{ role: 'user', content: 'x' }], stream: true });
      let n = 0;
      const err: any = await (async () => {
        for await (const _ of s) n++;
      })().catch((e) => e);
      t.equal(n, 2, 'the events before the silence arrived');
      t.match(err?.message, /went silent/);
    });

    await t.test('a JSON answer whose body stops half-way: the attempt fails after stream_idle_timeout_ms, the upstream aborted', async (t) => {
      oai.reset();
      oai.fail({ stallAfterBytes: 20 });
      const err: any = await client.chat.completions.create({ model: 'x/stall', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
      t.equal(err.status, 500);
      t.match(err.error, { code: 'all_targets_failed', message: /sent nothing for 200 ms \(stream_idle_timeout_ms\)/ });
      await until(() => oai.requests[0]?.aborted === true, 2000);
    });

    await t.test('a native Responses stream that goes silent ends with error and response.failed', async (t) => {
      slowResponses.reset();
      slowResponses.fail({ silentAfterEvents: 3 });
      const stream = await client.responses.create({ model: 'x/silentresp', input: 'x', stream: true });
      const events: any[] = [];
      const err: any = await (async () => {
        for await (const e of stream) events.push(e);
      })().catch((e) => e);
      t.same(events.slice(0, 3).map((e) => e.type), ['response.created', 'response.output_text.delta', 'response.output_text.delta']);
      t.match(events.at(-1), { type: 'response.failed', response: { status: 'failed', error: { code: 'server_error', message: /went silent/ } } });
      t.ok(err === undefined || /went silent/.test(err.message), 'the SDK saw the failure');
      await until(() => slowResponses.requests[0]?.aborted === true, 2000);
      await until(() => gw.logs.some((l) => l.msg === 'request' && l.path === '/v1/responses' && l.stream === 'failed' && l.stream_error === 'ETIMEDOUT_IDLE'), 2000);
    });

    await t.test('a client that disconnects aborts the upstream at once', async (t) => {
      slow.reset();
      const ac = new AbortController();
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'x/slow', messages: [{ role: 'user', content: 'x' }], stream: true }),
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      ac.abort();
      await until(() => slow.requests[0]?.aborted === true, 2000);
      t.ok(slow.requests[0].aborted, 'the upstream saw the connection close before its stream ended');
    });

    await t.test('a client that leaves a native Responses stream aborts the upstream at once', async (t) => {
      slowResponses.reset();
      const ac = new AbortController();
      const res = await fetch(`${gw.baseURL}/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'x/slowresp', input: 'x', stream: true }),
        signal: ac.signal,
      });
      t.equal(res.status, 200);
      const reader = res.body!.getReader();
      const first = Buffer.from((await reader.read()).value ?? []).toString();
      t.match(first, /response\.created/, 'the first event arrived');
      ac.abort();
      await until(() => slowResponses.requests[0]?.aborted === true, 2000);
      t.ok(slowResponses.requests[0].aborted, 'the upstream saw the connection close before its stream ended');
      t.equal(slowResponses.requests[0].path, '/v1/responses', 'it was the native Responses call');
    });
  });
}
