// Fallbacks and routing (decisions.md): which failures move on, which return
// at once, retries with Retry-After, first-byte timeout, cool-down, the cap of
// three targets, and streams committed only after their first event (a client
// disconnect aborting the upstream is in transports.test.ts). Attempts
// reported must match what the mock upstreams saw.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startMock, sse } from './mocks/server.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const A = await startOpenAIMock();
const B = await startOpenAIMock();
const C = await startOpenAIMock();
// A slow streamer: one event every 50 ms, 100 events.
const slow = await startMock(() => ({
  status: 200,
  sseDelayMs: 50,
  sse: Array.from({ length: 100 }, (_, i) => sse({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : { content: `${i} ` }, finish_reason: null }] })),
}));

const prov = (name: string, url: string, extra = '') => `
  - name: ${name}
    family: openai-compatible
    base_url: ${url}/v1
    api_key: sk-test-openai-0123456789
    region: r-${name}
    timeout_ms: 400
    retries: 1${extra}`;
const model = (id: string, provider: string, extra = '') => `
  - id: ${id}
    deployments: [{ provider: ${provider}, model: gpt-4.1-mini }]${extra}`;

const gw = await startGateway(`
providers:${prov('a', A.url)}${prov('b', B.url)}${prov('c', C.url)}${prov('slow', slow.url)}
routing:
  max_retry_wait_ms: 300
  failure_threshold: 100
models:${model('x/a', 'a')}${model('x/b', 'b')}${model('x/c', 'c')}${model('x/slow', 'slow')}
${model('x/chain', 'a', '\n    fallbacks: [x/b]')}
  - id: x/multi
    deployments:
      - { provider: a, model: gpt-4.1-mini }
      - { provider: b, model: gpt-4.1-mini }
`);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await Promise.all([A.close(), B.close(), C.close(), slow.close()]);
});
t.beforeEach(() => {
  A.reset();
  B.reset();
  C.reset();
  slow.reset();
});

const ask = (model: string, extra: Record<string, unknown> = {}) =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], ...extra } as any) as Promise<any>;
const attemptsOf = (r: any) => r.extra.routing.attempts.map((a: any) => `${a.provider}:${a.status}`);

const faults: [string, Parameters<typeof A.fail>[0]][] = [
  ['HTTP 500', { status: 500, body: { error: { message: 'boom', type: 'server_error' } } }],
  ['HTTP 503', { status: 503 }],
  ['401 from the provider (gateway key rejected)', { status: 401, body: { error: { message: 'bad key', type: 'invalid_request_error', code: 'invalid_api_key' } } }],
  ['connection reset', { reset: true }],
  ['first-byte timeout', { hang: true }],
  ['unparseable body', { rawBody: '<html>oops</html>' }],
];

for (const [name, fault] of faults) {
  t.test(`${name}: falls back, attempts match the upstreams`, async (t) => {
    A.fail(fault);
    const r = await ask('x/a', { fallbacks: ['x/b'] });
    t.equal(r.model, 'x/b', 'served by the fallback');
    t.same(attemptsOf(r), ['a:failed', 'b:succeeded']);
    t.type(r.extra.routing.attempts[0].error, 'string');
    t.equal(A.requests.length, 1);
    t.equal(B.requests.length, 1);
  });
  t.test(`${name}: without fallbacks -> 500 api_error naming the attempt`, async (t) => {
    A.fail(fault);
    const e: any = await ask('x/a').catch((e) => e);
    t.equal(e.status, 500);
    t.equal(e.error.type, 'api_error');
    t.match(e.error.message, /x\/a via a/);
  });
}

t.test('the access log names the attempt that answered, not the one that failed', async (t) => {
  A.fail({ status: 500 });
  const { data, response } = await client.chat.completions.create({ model: 'x/a', messages: [{ role: 'user', content: 'hi' }], fallbacks: ['x/b'] } as any).withResponse();
  t.equal((data as any).model, 'x/b');
  const id = response.headers.get('x-request-id');
  await until(() => gw.logs.some((l) => l.request_id === id));
  const line = gw.logs.find((l) => l.request_id === id)!;
  t.match(line, { provider: 'b', served_model: 'x/b', upstream_model: 'gpt-4.1-mini', status: 200 });
});

t.test('a 400 from the provider returns at once, untranslated in meaning', async (t) => {
  A.fail({ status: 400, body: { error: { message: "Invalid 'messages[0]': bad", type: 'invalid_request_error', param: 'messages[0]', code: 'invalid_value' } } });
  const e: any = await ask('x/a', { fallbacks: ['x/b'] }).catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'messages[0]');
  t.match(e.error.message, /bad/);
  t.equal(B.requests.length, 0, 'no fallback on a caller fault');
});

t.test('429 with a short Retry-After is retried on the same target', async (t) => {
  A.fail({ status: 429, headers: { 'retry-after': '0' }, body: { error: { message: 'slow down', type: 'rate_limit_error' } } });
  const r = await ask('x/a', { fallbacks: ['x/b'] });
  t.equal(r.model, 'x/a');
  t.same(attemptsOf(r), ['a:failed', 'a:succeeded']);
  t.equal(A.requests.length, 2);
  t.equal(B.requests.length, 0);
});

t.test('429 with a long Retry-After moves on to the next target', async (t) => {
  A.fail({ status: 429, headers: { 'retry-after': '30' } });
  const r = await ask('x/a', { fallbacks: ['x/b'] });
  t.same(attemptsOf(r), ['a:failed', 'b:succeeded']);
});

t.test('every target rate-limited -> 429 rate_limit_error with retry-after', async (t) => {
  A.fail({ status: 429, headers: { 'retry-after': '30' } });
  B.fail({ status: 429, headers: { 'retry-after': '20' } });
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'x/a', messages: [{ role: 'user', content: 'x' }], fallbacks: ['x/b'] }),
  });
  t.equal(res.status, 429);
  t.equal(((await res.json()) as any).error.type, 'rate_limit_error');
  t.ok(res.headers.get('retry-after'));
});

t.test('at most 3 attempts whatever the chain length', async (t) => {
  A.fail({ status: 500 });
  B.fail({ status: 500 });
  C.fail({ status: 500 });
  const e: any = await ask('x/a', { fallbacks: ['x/b', 'x/c', 'x/slow'], extra: { fallbacks: ['x/chain'] } }).catch((e) => e);
  t.equal(e.status, 500);
  t.equal(A.requests.length + B.requests.length + C.requests.length + slow.requests.length, 3);
  t.equal(slow.requests.length, 0, 'the 4th target is never tried');
});

t.test('extra.fallbacks and the model default chain', async (t) => {
  A.fail({ status: 500 });
  const r1 = await ask('x/a', { extra: { fallbacks: ['x/c'] } });
  t.same(attemptsOf(r1), ['a:failed', 'c:succeeded']);
  A.fail({ status: 500 });
  const r2 = await ask('x/chain', { extra: { debug: ['routing'] } });
  t.same(attemptsOf(r2), ['a:failed', 'b:succeeded']);
  t.same(r2.debug.routing.targets, ['x/chain', 'x/b']);
});

t.test('streams: failure before the first event falls back; the stream is clean', async (t) => {
  A.fail({ status: 502 });
  const stream = await client.chat.completions.create({ model: 'x/a', messages: [{ role: 'user', content: 'one two' }], stream: true, fallbacks: ['x/b'] } as any);
  const chunks: any[] = [];
  for await (const c of stream as any) chunks.push(c);
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: one two');
  const last = chunks[chunks.length - 1];
  t.same(last.extra.routing.attempts.map((a: any) => `${a.provider}:${a.status}`), ['a:failed', 'b:succeeded']);
});

t.test('streams: an upstream that closes before any event falls back', async (t) => {
  A.fail({ cutAfterEvents: 0 });
  const stream = await client.chat.completions.create({ model: 'x/a', messages: [{ role: 'user', content: 'z' }], stream: true, fallbacks: ['x/b'] } as any);
  let text = '';
  for await (const c of stream as any) text += c.choices[0]?.delta?.content ?? '';
  t.equal(text, 'Echo: z');
});

t.test('streams: cut mid-stream -> error event, no [DONE], no fallback', async (t) => {
  A.fail({ cutAfterEvents: 3 });
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'x/a', messages: [{ role: 'user', content: 'a b c d e f g' }], stream: true, fallbacks: ['x/b'] }),
  });
  t.equal(res.status, 200);
  const text = await res.text();
  t.notOk(text.includes('[DONE]'), 'a broken stream never looks finished: ' + text.slice(0, 3000));
  const frames = text.trim().split('\n\n');
  const last = JSON.parse(frames[frames.length - 1].slice(6));
  t.equal(last.error.type, 'api_error');
  t.equal(B.requests.length, 0);
  // The SDK surfaces it as an error.
  A.fail({ cutAfterEvents: 3 });
  const stream = await client.chat.completions.create({ model: 'x/a', messages: [{ role: 'user', content: 'a b c d e f' }], stream: true } as any);
  await t.rejects(
    (async () => {
      for await (const _ of stream as any);
    })(),
  );
});

// A client that disconnects mid-stream aborts the upstream request: test/transports.test.ts, on every transport.

t.test('a deployment that keeps failing is skipped for the cool-down', async (t) => {
  const gw2 = await startGateway(`
providers:${prov('a', A.url)}${prov('b', B.url)}
routing:
  failure_threshold: 1
  cooldown_ms: 60000
models:
  - id: x/multi
    deployments:
      - { provider: a, model: gpt-4.1-mini }
      - { provider: b, model: gpt-4.1-mini }
`);
  t.teardown(() => gw2.close());
  const c2 = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw2.baseURL, maxRetries: 0 });
  A.fail({ status: 500 }, { status: 500 });
  const e: any = await c2.chat.completions.create({ model: 'x/multi', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e.status, 500, 'one target, one deployment tried: it failed');
  const r: any = await c2.chat.completions.create({ model: 'x/multi', messages: [{ role: 'user', content: 'x' }] });
  t.same(r.extra.routing.attempts.map((a: any) => a.provider), ['b'], 'deployment a is cooling down');
  t.equal(A.requests.length, 1);
});

t.test('weighted deployments spread the load', async (t) => {
  const gw3 = await startGateway(`
providers:${prov('a', A.url)}${prov('b', B.url)}
models:
  - id: x/w
    routing: weighted
    deployments:
      - { provider: a, model: gpt-4.1-mini, weight: 1 }
      - { provider: b, model: gpt-4.1-mini, weight: 1 }
`);
  t.teardown(() => gw3.close());
  const c3 = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw3.baseURL, maxRetries: 0 });
  for (let i = 0; i < 40; i++) await c3.chat.completions.create({ model: 'x/w', messages: [{ role: 'user', content: 'x' }] });
  t.ok(A.requests.length > 5 && B.requests.length > 5, `both used (a=${A.requests.length}, b=${B.requests.length})`);
});

t.test('a provider that echoes our key in its errors does not leak it to the client', async (t) => {
  const key = 'sk-test-openai-0123456789';
  A.fail({ status: 400, body: { error: { message: `Key ${key} is not allowed to use this`, type: 'invalid_request_error' } } });
  const e1: any = await ask('x/a').catch((e) => e);
  t.equal(e1.status, 400);
  t.notOk(JSON.stringify(e1.error).includes(key), '400 message scrubbed');
  t.match(e1.error.message, /\[redacted\]/);
  A.fail({ status: 500, body: { error: { message: `upstream saw key ${key}` } } });
  const e2: any = await ask('x/a').catch((e) => e);
  t.equal(e2.status, 500);
  t.notOk(JSON.stringify(e2.error).includes(key), 'attempt list scrubbed');
  A.fail({ status: 503, body: { error: { message: `bad ${key}` } } });
  const r: any = await ask('x/a', { fallbacks: ['x/b'] });
  t.notOk(JSON.stringify(r).includes(key), 'routing attempts scrubbed');
  const leaky = await startMock(() => ({ status: 200, sse: [sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }), sse({ error: { message: `stream died for ${key}`, type: 'server_error' } })] }));
  t.teardown(() => leaky.close());
  const gw4 = await startGateway(`
providers:${prov('leaky', leaky.url)}
models:${model('x/leaky', 'leaky')}
`);
  t.teardown(() => gw4.close());
  const res = await fetch(`${gw4.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'x/leaky', messages: [{ role: 'user', content: 'x' }], stream: true }),
  });
  const text = await res.text();
  t.match(text, /stream died for \[redacted\]/, 'mid-stream error frame scrubbed');
  t.notOk(text.includes(key));
});
