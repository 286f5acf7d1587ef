// Chat completions through the gateway to an OpenAI upstream, driven by the
// official openai SDK: plain, streaming with usage, tool round trip.
import t from 'tap';
import net from 'node:net';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, CLIENT_KEY, until } from './helpers/gateway.js';

const mock = await startOpenAIMock();
const gw = await startGateway(openAIConfig(mock.url));
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});
t.beforeEach(() => mock.reset());

t.test('plain chat completion: model patched, answer returned, routing attached', async (t) => {
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hello there' }] });
  t.equal(r.object, 'chat.completion');
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.equal(r.choices[0].message.content, 'Echo: hello there');
  t.equal(r.choices[0].finish_reason, 'stop');
  t.ok(r.usage && r.usage.total_tokens > 0);
  t.equal(mock.requests.length, 1);
  const up = mock.requests[0];
  t.equal(up.body.model, 'gpt-4.1-mini', 'upstream sees its own model name');
  t.equal(up.headers.authorization, 'Bearer sk-test-openai-0123456789', 'provider key, not the client key');
  t.notOk(JSON.stringify(up.headers).includes(CLIENT_KEY), 'client key never forwarded');
  const attempts = (r as any).extra.routing.attempts;
  t.equal(attempts.length, 1);
  t.match(attempts[0], { provider: 'openai', region: 'us-east', status: 'succeeded', model: 'openai/gpt-4.1-mini' });
});

t.test('aliases resolve to the catalog model', async (t) => {
  // openAIConfig has no alias; requesting the upstream name is an unknown model.
  await t.rejects(client.chat.completions.create({ model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }), { status: 404 } as any);
});

t.test('streaming with include_usage: role chunk, content, finish, usage chunk, [DONE]', async (t) => {
  const stream = await client.chat.completions.create({
    model: 'openai/gpt-4.1-mini',
    messages: [{ role: 'user', content: 'stream me please' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: any[] = [];
  for await (const c of stream) chunks.push(c);
  t.equal(chunks[0].choices[0].delta.role, 'assistant');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: stream me please');
  t.ok(chunks.every((c) => c.model === 'openai/gpt-4.1-mini'));
  const finish = chunks.find((c) => c.choices[0]?.finish_reason);
  t.equal(finish.choices[0].finish_reason, 'stop');
  const last = chunks[chunks.length - 1];
  t.same(last.choices, []);
  t.ok(last.usage.total_tokens > 0, 'usage chunk last');
  t.equal(last.extra.routing.attempts[0].status, 'succeeded', 'routing on the final chunk');
});

t.test('raw stream ends with [DONE] and is framed as SSE', async (t) => {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'a b' }], stream: true }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/event-stream/);
  t.ok(res.headers.get('x-request-id'));
  const text = await res.text();
  t.ok(text.endsWith('data: [DONE]\n\n'));
});

t.test("a stream honours the client's Connection header: close closes, keep-alive keeps the socket for the next request", async (t) => {
  const { port } = new URL(gw.url);
  const request = (stream: boolean, connection: string) => {
    const body = JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'a b' }], stream });
    return `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${CLIENT_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: ${connection}\r\n\r\n${body}`;
  };
  // Raw sockets: an HTTP client would hide who closes the connection.
  const exchange = (requests: string[], waitMs: number) =>
    new Promise<{ text: string; serverClosed: boolean }>((resolve) => {
      const s = net.connect(Number(port), '127.0.0.1');
      let text = '';
      s.setEncoding('utf8');
      s.on('data', (c: string) => (text += c));
      const timer = setTimeout(() => (s.destroy(), resolve({ text, serverClosed: false })), waitMs);
      s.on('end', () => (clearTimeout(timer), s.destroy(), resolve({ text, serverClosed: true })));
      for (const r of requests) s.write(r);
    });
  const closed = await exchange([request(true, 'close')], 3000);
  t.match(closed.text, /^HTTP\/1\.1 200/);
  t.match(closed.text, /\r\nconnection: close\r\n/i, 'the answer says close');
  t.ok(closed.text.includes('data: [DONE]'), 'the whole stream arrived');
  t.ok(closed.serverClosed, 'the gateway closed the connection after the stream');
  // Two streams back to back on one kept-alive connection: both answered, the socket left open.
  const kept = await exchange([request(true, 'keep-alive'), request(true, 'keep-alive')], 500);
  t.equal(kept.text.match(/HTTP\/1\.1 200/g)?.length, 2, 'two answers on one connection');
  t.equal(kept.text.match(/data: \[DONE\]/g)?.length, 2, 'two whole streams');
  t.match(kept.text, /\r\nconnection: keep-alive\r\n/i);
  t.notOk(kept.serverClosed, 'the gateway kept the connection');
});

t.test('tool call round trip (plain and streamed)', async (t) => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const messages: any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages, tools });
  t.equal(r1.choices[0].finish_reason, 'tool_calls');
  const call = r1.choices[0].message.tool_calls![0] as any;
  t.equal(call.function.name, 'get_weather');
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  messages.push(r1.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '21C and sunny' });
  const r2 = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages, tools });
  t.equal(r2.choices[0].message.content, 'Echo: tool said 21C and sunny');

  const stream = client.chat.completions.stream({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'weather?' }], tools });
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls![0] as any;
  t.equal(sc.function.name, 'get_weather');
  t.same(JSON.parse(sc.function.arguments), { city: 'Paris' });
});

t.test('one access-log line per request with the analytics ids', async (t) => {
  const before = gw.logs.length;
  await client.chat.completions.create(
    { model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'log me' }] },
    { headers: { 'x-gateway-user-id': 'user-42', 'x-gateway-session-id': 'sess-7', 'x-request-id': 'my-req-1' } },
  );
  await until(() => gw.logs.slice(before).some((l) => l.request_id === 'my-req-1'));
  const lines = gw.logs.slice(before).filter((l) => l.request_id === 'my-req-1');
  t.equal(lines.length, 1);
  t.match(lines[0], { method: 'POST', path: '/v1/chat/completions', status: 200, model: 'openai/gpt-4.1-mini', provider: 'openai', user_id: 'user-42', session_id: 'sess-7' });
  t.type(lines[0].latency_ms, 'number');
  t.equal(lines[0].key_name, 'env-1', "the key's label is logged (never the key)");
  const up = mock.requests[0];
  t.notOk(up.headers['x-gateway-user-id'], 'analytics headers are not forwarded');
  t.notOk(up.headers['x-gateway-session-id']);
  t.notOk(gw.rawLogs.join('').includes(CLIENT_KEY), 'client key never logged');
  t.notOk(gw.rawLogs.join('').includes('sk-test-openai'), 'provider key never logged');
});
