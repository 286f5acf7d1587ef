// Hardening from outside (issue 15): what fuzzing, fault injection and real
// clients found. Each test drives the gateway over HTTP and fails without its
// fix: map fields that took arrays, 400s naming the message instead of the
// field, long values quoted whole, upstream addresses in errors, malformed
// percent-encoding answered with a 500 and a stack trace.
import t from 'tap';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startGateway, openAIConfig, until, CLIENT_KEY, type TestGateway } from './helpers/gateway.js';
import { nestsDeeperThan } from '../src/body.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const responsesMock = createResponsesMock();
const mock = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler } });
const down = `
  - name: down
    family: openai-compatible
    base_url: http://127.0.0.1:1/v1
    api_key: sk-down-0123456789
    timeout_ms: 1000
    retries: 0`;
const downModels = `
  - id: down/model
    endpoints: [chat_completions, responses]
    deployments: [{ provider: down, model: gpt-4.1-mini }]
    fallbacks: [openai/gpt-4.1-mini]
  - id: down/only
    endpoints: [chat_completions, responses]
    deployments: [{ provider: down, model: gpt-4.1-mini }]`;
const yaml = (transport: string) => openAIConfig(mock.url, `server: { transport: ${transport} }\nstorage: { responses_db: ":memory:" }`, { providers: down, models: downModels });
const gw = await startGateway(yaml('undici'));
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});

async function post(g: TestGateway, path: string, body: unknown) {
  const res = await fetch(g.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) };
}

const STACK = /\bat \S+ \(|\.(js|ts):\d+|node:internal/;

t.test('map and object fields refuse arrays and other types by name (responses, images)', async (t) => {
  const responses = { model: 'openai/gpt-4.1-mini', input: 'hi' };
  const images = { model: 'openai/gpt-image-1', prompt: 'a cat' };
  const cases: [string, string, Record<string, unknown>, string][] = [
    ['/v1/responses', 'metadata []', { ...responses, metadata: [] }, 'metadata'],
    ['/v1/responses', 'metadata ["a"]', { ...responses, metadata: ['a'] }, 'metadata'],
    ['/v1/responses', 'text []', { ...responses, text: [] }, 'text'],
    ['/v1/responses', 'reasoning []', { ...responses, reasoning: [] }, 'reasoning'],
    ['/v1/responses', 'stream_options []', { ...responses, stream: true, stream_options: [] }, 'stream_options'],
    ['/v1/responses', 'native_fields []', { ...responses, native_fields: [] }, 'native_fields'],
    ['/v1/responses', 'tool parameters []', { ...responses, tools: [{ type: 'function', name: 'f', parameters: [] }] }, 'tools[0].parameters'],
    ['/v1/responses', 'json_schema schema []', { ...responses, text: { format: { type: 'json_schema', name: 'n', schema: [] } } }, 'text.format.schema'],
    ['/v1/responses', 'web search user_location []', { ...responses, tools: [{ type: 'web_search', user_location: [] }] }, 'tools[0].user_location'],
    ['/v1/responses', 'an input item as an array', { ...responses, input: [[]] }, 'input[0]'],
    ['/v1/responses', 'an input_image part without an image', { ...responses, input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }, { type: 'input_image' }] }] }, 'input[0].content[1].image_url'],
    ['/v1/responses/input_tokens', 'reasoning []', { ...responses, reasoning: [1] }, 'reasoning'],
    ['/v1/images/generations', 'extra []', { ...images, extra: [] }, 'extra'],
    ['/v1/chat/completions', 'extra.debug as an object', { model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }], extra: { debug: {} } }, 'extra.debug'],
  ];
  for (const [path, what, body, param] of cases) {
    mock.reset();
    const r = await post(gw, path, body);
    t.equal(r.status, 400, `${path} ${what}: 400`);
    t.equal(r.json.error?.type, 'invalid_request_error', `${path} ${what}: type`);
    t.equal(r.json.error?.param, param, `${path} ${what}: names ${param}`);
    t.equal(mock.requests.length, 0, `${path} ${what}: nothing sent upstream`);
  }
});

t.test('the Messages API refuses arrays for its objects too (Anthropic error shape)', async (t) => {
  const base = { model: 'openai/gpt-4.1-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['metadata []', { ...base, metadata: [] }, /'metadata'/],
    ['tool input_schema []', { ...base, tools: [{ name: 'f', input_schema: [] }] }, /'tools\[0\]\.input_schema'/],
    ['native_fields []', { ...base, native_fields: [] }, /'native_fields'/],
  ];
  for (const [what, body, field] of cases) {
    mock.reset();
    const r = await post(gw, '/v1/messages', body);
    t.equal(r.status, 400, `${what}: 400`);
    t.equal(r.json.type, 'error');
    t.equal(r.json.error.type, 'invalid_request_error');
    t.match(r.json.error.message, field, `${what}: names the field`);
    t.equal(mock.requests.length, 0, `${what}: nothing sent upstream`);
  }
});

t.test('a long value is quoted as a short prefix on every endpoint', async (t) => {
  const huge = 'Q'.repeat(3_000_000);
  const cases: [string, Record<string, unknown>, string][] = [
    ['/v1/responses', { model: 'openai/gpt-4.1-mini', input: 'hi', metadata: { k: huge } }, 'metadata.k'],
    ['/v1/responses', { model: 'openai/gpt-4.1-mini', input: [{ type: 'function_call', call_id: 'c', name: huge, arguments: '{}' }] }, 'input[0].name'],
    ['/v1/responses', { model: 'openai/gpt-4.1-mini', input: 'hi', previous_response_id: huge }, 'previous_response_id'],
    ['/v1/responses', { model: huge, input: 'hi' }, 'model'],
    ['/v1/images/generations', { model: huge, prompt: 'a cat' }, 'model'],
  ];
  for (const [path, body, param] of cases) {
    const r = await post(gw, path, body);
    t.ok(r.status === 400 || r.status === 404, `${path} ${param}: a client error (${r.status})`);
    t.equal(r.json.error.param, param, `${path} ${param}: param`);
    t.ok(r.text.length < 600, `${path} ${param}: a short body (${r.text.length} bytes)`);
    t.match(r.json.error.message, /Q{20,}…/, `${path} ${param}: the value's prefix, marked as cut`);
  }
  // A block type the Messages API keeps (unknown types pass validation) and a translation refuses.
  const mg = await startGateway(openAIConfig(mock.url, '', { models: `
  - id: openai/messages-model
    endpoints: [messages]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]` }));
  const m = await post(mg, '/v1/messages', { model: 'openai/messages-model', max_tokens: 5, messages: [{ role: 'user', content: [{ type: huge }] }] });
  await mg.close();
  t.equal(m.status, 400, 'an unknown block type on a translated target: 400');
  t.ok(m.text.length < 600, `the Messages error is short (${m.text.length} bytes)`);
  t.match(m.json.error.message, /Q{20,}…/);
  const id = 'resp_' + 'x'.repeat(10_000);
  const g = await fetch(`${gw.baseURL}/responses/${id}`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
  const text = await g.text();
  t.equal(g.status, 404);
  t.ok(text.length < 600, `a long id in the path is quoted short (${text.length} bytes)`);
});

t.test('an upstream connection error names the provider, never its address', async (t) => {
  for (const transport of ['undici', 'http', 'proxy']) {
    const g = transport === 'undici' ? gw : await startGateway(yaml(transport));
    const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
    // Every target failed: the 500 lists the attempts.
    const e: any = await c.chat.completions.create({ model: 'down/only', messages: [{ role: 'user', content: 'x' }] }).catch((err) => err);
    t.equal(e.status, 500, `${transport}: 500`);
    t.match(e.error.message, /could not connect to provider down \(ECONNREFUSED\)/, `${transport}: names the provider and the code`);
    t.notMatch(JSON.stringify(e.error), /127\.0\.0\.1|:1\b|localhost/, `${transport}: no address in the error`);
    // A fallback served: extra.routing (debug) lists the failed attempt, without its address.
    const ok: any = await c.chat.completions.create({ model: 'down/model', messages: [{ role: 'user', content: 'x' }], extra: { debug: ['routing'] } } as any);
    const failed = ok.extra.routing.attempts.find((a: any) => a.status === 'failed');
    t.match(failed.error, /could not connect to provider down/, `${transport}: routing names the provider`);
    t.notMatch(JSON.stringify(ok), /127\.0\.0\.1/, `${transport}: no address in the answer`);
    // The Responses API over chat, streamed: the error before the first event is the same envelope.
    const re: any = await c.responses.create({ model: 'down/only', input: 'x', stream: true }).catch((err) => err);
    t.equal(re.status, 500);
    t.notMatch(JSON.stringify(re.error), /127\.0\.0\.1/, `${transport}: no address in the responses error`);
    t.notOk(g.rawLogs.some((l) => l.includes('127.0.0.1:1')), `${transport}: no address in any log line`);
    if (g !== gw) await g.close();
  }
});

t.test('malformed percent-encoding in any path: 400 envelope, no stack trace in the log', async (t) => {
  const before = gw.rawLogs.length;
  const paths: [string, string][] = [
    ['GET', '/v1/models/%zz'],
    ['GET', '/v1/models/openai%2F%E0%A4%A'],
    ['GET', '/v1/responses/%C0%AF'],
    ['DELETE', '/v1/responses/%'],
    ['POST', '/v1/chat/completions%zz'],
    ['GET', '/v1/nothing/%FF'],
  ];
  for (const [method, path] of paths) {
    const res = await fetch(gw.url + path, { method, headers: { authorization: `Bearer ${CLIENT_KEY}` } });
    const text = await res.text();
    t.equal(res.status, 400, `${method} ${path}: 400`);
    const body = JSON.parse(text);
    t.equal(body.error.type, 'invalid_request_error');
    t.equal(body.error.code, 'invalid_path');
    t.notMatch(text, STACK, 'no stack trace in the body');
  }
  const lines = gw.rawLogs.slice(before);
  t.notOk(lines.some((l) => STACK.test(l) || /unhandled error/.test(l)), 'no stack trace or unhandled error logged');
  // The id is decoded once: %2F is a slash, %252F stays a literal %2F (not found).
  t.equal((await client.models.retrieve('openai/gpt-4.1-mini')).id, 'openai/gpt-4.1-mini');
  const once = await fetch(`${gw.baseURL}/models/openai%2Fgpt-4.1-mini`);
  t.equal(once.status, 200);
  const twice = await fetch(`${gw.baseURL}/models/openai%252Fgpt-4.1-mini`);
  t.equal(twice.status, 404, 'a percent-encoded percent sign is not decoded twice');
});

/**
 * A raw HTTP/1.1 exchange: the request head and the first part of its body,
 * the rest never sent and the socket never ended by the client. It resolves
 * when the socket closes, which only the gateway can make happen.
 */
function rawExchange(port: number, head: string, partialBody: string): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.setEncoding('utf8');
    sock.on('data', (c) => (data += c));
    sock.on('error', () => {
      /* a reset after the answer: the gateway dropped the connection */
    });
    sock.on('close', () => {
      const at = data.indexOf('\r\n\r\n');
      if (at === -1) return reject(new Error(`no response: ${JSON.stringify(data)}`));
      const headers = data.slice(0, at);
      resolve({ status: Number(headers.split(' ')[1]), headers: headers.toLowerCase(), body: data.slice(at + 4) });
    });
    sock.write(head + '\r\n\r\n' + partialBody);
  });
}

t.test('a request without a valid key: 401 from its headers, its body never read, its connection closed', async (t) => {
  // A slow-body deadline long enough that only an answer from the headers can end these exchanges.
  const g = await startGateway(openAIConfig(mock.url, 'server: { body_timeout_ms: 600000 }'));
  t.teardown(() => g.close());
  const port = Number(new URL(g.url).port);
  for (const [what, auth] of [
    ['no key', ''],
    ['an unknown key', 'authorization: Bearer gw-nope-nope-nope-000\r\n'],
    ['a malformed header', 'authorization: Basic abc\r\n'],
  ] as const) {
    for (const path of ['/v1/chat/completions', '/v1/responses', '/v1/images/generations', '/v1/responses/input_tokens', '/v1/messages']) {
      // 20 MB announced, a few bytes sent, the connection left open: the answer
      // can only come from the headers, and the close only from the gateway.
      const r = await rawExchange(port, `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${auth}content-length: 20000000`, '[{},{},{},');
      t.equal(r.status, 401, `${what} ${path}: 401`);
      t.equal(JSON.parse(r.body.slice(r.body.indexOf('{'))).error.type, 'authentication_error', `${what} ${path}: the envelope`);
      t.match(r.headers, /\r\nconnection: close/, `${what} ${path}: Connection: close`);
    }
  }
  // A chunked body trickling in: the same.
  const chunked = await rawExchange(port, 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked', '5\r\n[{},{\r\n');
  t.equal(chunked.status, 401);
  t.match(chunked.headers, /\r\nconnection: close/);
  // A path no endpoint serves: 404, its body unread, the connection closed.
  const nowhere = await rawExchange(port, `POST /v1/nowhere HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer ${CLIENT_KEY}\r\ncontent-length: 1000`, '{');
  t.equal(nowhere.status, 404);
  t.match(nowhere.headers, /\r\nconnection: close/);
  // With a valid key the body is read: the gateway waits for it, and a complete one is served on a kept-alive connection.
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const ok = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(ok.object, 'chat.completion');
  t.notOk(g.logs.some((l) => l.level >= 50), 'nothing logged as an error');
});

/** `{"a":{"a":…}}` (objects) or `[[…]]` (arrays) nested `n` levels, as JSON text. */
const nested = (n: number, arrays = false) => (arrays ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n - 1) + '{}' + '}'.repeat(n - 1));

t.test('a value nested deeper than server.json_max_depth: 400 naming where, never sent to a provider nor charged to it', async (t) => {
  const g = await startGateway(openAIConfig(mock.url).replace('routing:\n', 'routing:\n  failure_threshold: 1\n'));
  t.teardown(() => g.close());
  const chat = (extra: string) => `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],${extra}}`;
  const cases: [string, string, string, RegExp][] = [
    ['an unknown top-level field, 5,000 levels', '/v1/chat/completions', chat(`"whatever":${nested(5000)}`), /^whatever(\.a)+$/],
    ['native_fields', '/v1/chat/completions', chat(`"native_fields":{"x":${nested(300, true)}}`), /^native_fields\.x(\[0\])+$/],
    ['a tool\'s parameters', '/v1/chat/completions', chat(`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${nested(200)}}}}]`), /^tools\[0\]\.function\.parameters\.properties(\.a)+$/],
    ['a message content', '/v1/chat/completions', `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":${nested(500, true)}}]}`, /^messages\[0\]\.content(\[0\])+$/],
    ['responses input', '/v1/responses', `{"model":"openai/gpt-4.1-mini","input":${nested(1000, true)}}`, /^input(\[0\])+$/],
    ['images, an unknown field', '/v1/images/generations', `{"model":"openai/gpt-image-1","prompt":"a cat","x":${nested(129)}}`, /^x(\.a)+$/],
  ];
  for (let round = 0; round < 2; round++) {
    for (const [what, path, body, param] of cases) {
      mock.reset();
      const res = await fetch(g.url + path, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body });
      const text = await res.text();
      const json = JSON.parse(text);
      t.equal(res.status, 400, `${what}: 400`);
      t.equal(json.error.type, 'invalid_request_error');
      t.equal(json.error.code, 'nesting_too_deep');
      t.match(json.error.param, param, `${what}: names the path (${String(json.error.param).slice(0, 60)}…)`);
      t.match(json.error.message, /nested more than 128 levels deep/);
      t.ok(text.length < 1200, `${what}: a short error`);
      t.equal(mock.requests.length, 0, `${what}: nothing sent upstream`);
    }
  }
  // At the limit the body is served; garbage that is deep as well is still a 400.
  const schema = (n: number) => chat(`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${nested(n)}}}}]`);
  const ok = await fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: schema(123) });
  t.equal(ok.status, 200, '128 levels in all: served');
  const over = await fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: schema(124) });
  t.equal(over.status, 400, '129 levels: refused');
  // Brackets inside strings are not nesting.
  const inString = await fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: '[{'.repeat(5000) + '\\"\\\\' }] }) });
  t.equal(inString.status, 200, 'brackets and escaped quotes in a string are text');
  const broken = await fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: '{"x":' + '['.repeat(3000) });
  t.equal(broken.status, 400);
  t.equal(((await broken.json()) as any).error.code, 'nesting_too_deep');
  // The deployment is healthy: nothing was charged to it, nothing logged as an error.
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const served: any = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], extra: { debug: ['routing'] } } as any);
  t.same(served.extra.routing.attempts.map((a: any) => a.status), ['succeeded']);
  t.notOk(g.logs.some((l) => l.level >= 50), 'no error logged');
  t.notOk(g.rawLogs.some((l) => STACK.test(l)), 'no stack trace logged');
});

t.test('a deep body with a __proto__ key as well: refused for its nesting, naming where, as before the parse', async (t) => {
  const g = await startGateway(openAIConfig(mock.url));
  t.teardown(() => g.close());
  mock.reset();
  const post = (body: string) => fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body });
  // A `__proto__` key sends the body through the parse that refuses it; the nesting is reported first, and named.
  for (const proto of ['"__proto__":{}', '"\\u005f_proto__":{}']) {
    const res = await post(`{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi",${proto}}],"whatever":${nested(3000)}}`);
    const json = (await res.json()) as any;
    t.equal(res.status, 400);
    t.equal(json.error.code, 'nesting_too_deep', proto);
    t.match(json.error.param, /^whatever(\.a)+$/);
    // Not deep: the key itself is refused.
    const shallow = await post(`{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi",${proto}}],"whatever":${nested(127)}}`);
    t.equal(shallow.status, 400);
    t.match(((await shallow.json()) as any).error.message, /__proto__/);
  }
  // Through the openai SDK: a deep value in an extra field is the SDK's BadRequestError, naming the path.
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < 200; i++) deep = { a: deep };
  const err: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], whatever: deep } as any).catch((e) => e);
  t.ok(err instanceof OpenAI.BadRequestError, 'a 400 to the SDK');
  t.equal(err.code, 'nesting_too_deep');
  t.match(err.param, /^whatever(\.a)+$/);
  t.equal(mock.requests.length, 0, 'nothing sent upstream');
});

t.test('nestsDeeperThan: levels of objects and arrays, the value itself level 1', async (t) => {
  t.equal(nestsDeeperThan(JSON.parse(nested(3)), 3), false);
  t.equal(nestsDeeperThan(JSON.parse(nested(4)), 3), true);
  t.equal(nestsDeeperThan(JSON.parse(nested(3, true)), 3), false);
  t.equal(nestsDeeperThan(JSON.parse(nested(4, true)), 3), true);
  t.equal(nestsDeeperThan({ a: [1, 'x', null, { b: [] }] }, 4), false, 'primitives and null are no level');
  t.equal(nestsDeeperThan({ a: [1, 'x', null, { b: [[]] }] }, 4), true, 'the deep one found after shallow siblings');
  t.equal(nestsDeeperThan('[[[[[[', 1), false, 'a string is text');
  t.equal(nestsDeeperThan(null, 1), false);
  t.equal(nestsDeeperThan(JSON.parse(nested(100000, true)), 128), true, 'a very deep value: the walk stops past the limit');
  t.equal(nestsDeeperThan(JSON.parse(nested(1000)), 1000), false, 'the largest json_max_depth: 1,000 levels pass');
  t.equal(nestsDeeperThan(JSON.parse(nested(1001)), 1000), true, '1,001 do not');
});

t.test('server.json_max_depth is configurable', async (t) => {
  const g = await startGateway(openAIConfig(mock.url, 'server: { json_max_depth: 16 }'));
  t.teardown(() => g.close());
  // body (1), tools (2), [0] (3), function (4), parameters (5), properties: n more.
  const body = (n: number) => `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${nested(n)}}}}]}`;
  const post = (b: string) => fetch(g.url + '/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: b });
  t.equal((await post(body(11))).status, 200, '16 levels: served');
  const r = await post(body(12));
  t.equal(r.status, 400, '17 levels: refused');
  t.match(((await r.json()) as any).error.message, /more than 16 levels/);
});

t.test('a provider plugin that throws on a request is not charged a failure (no cool-down for everyone else)', async (t) => {
  // A plugin whose mapping cannot serialise one request (a RangeError deep in JSON.stringify), serving family `wrapped`.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-throw-'));
  const file = path.join(dir, 'wrapped.mjs');
  fs.writeFileSync(file, `
import openai from ${JSON.stringify(path.resolve(here, '../plugins/providers/openai/index.js'))};
const base = openai();
export default {
  ...base,
  name: 'wrapped',
  families: { wrapped: base.families.openai },
  chat(call) {
    if (call.request.user === 'boom') {
      let deep = {};
      for (let i = 0; i < 200000; i++) deep = { deep };
      JSON.stringify(deep);
    }
    return base.chat(call);
  },
};`);
  const yamlText = openAIConfig(mock.url, `plugins:
  - name: auth
  - name: analytics
  - path: ${file}
  - name: route
  - name: normalize
  - name: debug`, {
    providers: `
  - name: first
    family: wrapped
    base_url: ${mock.url}/v1
    api_key: sk-test-openai-0123456789
  - name: second
    family: wrapped
    base_url: ${mock.url}/v1
    api_key: sk-test-openai-0123456789`,
    models: `
  - id: wrapped/model
    deployments: [{ provider: first, model: gpt-4.1-mini }, { provider: second, model: gpt-4.1-mini }]`,
  }).replace('routing:\n', 'routing:\n  failure_threshold: 1\n  cooldown_ms: 600000\n');
  const g = await startGateway(yamlText);
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  for (let i = 0; i < 3; i++) {
    const e: any = await c.chat.completions.create({ model: 'wrapped/model', messages: [{ role: 'user', content: 'x' }], user: 'boom' }).catch((err) => err);
    t.equal(e.status, 500, 'the plugin failed: a gateway error');
    t.match(e.error.message, /wrapped\/model via first \(default\): internal error in provider plugin/, `request ${i + 1}: the first deployment is tried again`);
    t.notMatch(JSON.stringify(e.error), STACK, 'no stack trace in the answer');
  }
  const ok: any = await c.chat.completions.create({ model: 'wrapped/model', messages: [{ role: 'user', content: 'x' }], extra: { debug: ['routing'] } } as any);
  t.same(
    ok.extra.routing.attempts.map((a: any) => [a.provider, a.status]),
    [['first', 'succeeded']],
    'the first deployment still serves: it was not put in cool-down',
  );
});

t.test('headers over 16 KB: 431 with the JSON envelope; malformed HTTP: 400 envelope', async (t) => {
  const port = Number(new URL(gw.url).port);
  const big = await rawExchange(port, `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-filler: ${'a'.repeat(20_000)}`, '');
  t.equal(big.status, 431);
  t.match(big.headers, /content-type: application\/json/);
  t.match(big.headers, /\r\nconnection: close/);
  const body = JSON.parse(big.body);
  t.same(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  t.equal(body.error.type, 'invalid_request_error');
  t.equal(body.error.code, 'request_header_fields_too_large');
  // The same with a key and a body on the way.
  const post = await rawExchange(port, `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CLIENT_KEY}\r\ncontent-type: application/json\r\ncontent-length: 10\r\nx-filler: ${'b'.repeat(17_000)}`, '{}');
  t.equal(post.status, 431);
  t.equal(JSON.parse(post.body).error.code, 'request_header_fields_too_large');
  const bad = await rawExchange(port, 'GET /v1/models HTTP/1.1\r\nhost: x\r\nbad header line', '');
  t.equal(bad.status, 400);
  t.equal(JSON.parse(bad.body).error.code, 'invalid_http');
  // The gateway still serves.
  t.equal((await fetch(`${gw.baseURL}/models`)).status, 200);
});

t.test('server.max_connections: a connection over the cap gets a 503 envelope and is closed', async (t) => {
  const g = await startGateway(openAIConfig(mock.url, 'server: { max_connections: 2 }'));
  t.teardown(() => g.close());
  const port = Number(new URL(g.url).port);
  const openConnections = () => new Promise<number>((resolve) => g.gw.server.getConnections((_e, n) => resolve(n)));
  // Two idle keep-alive connections fill the cap.
  const held = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
  for (const s of held) s.on('error', () => {});
  let n = 0;
  const poll = setInterval(() => void openConnections().then((c) => (n = c)), 5);
  await until(() => n === 2);
  const over = await rawExchange(port, `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CLIENT_KEY}\r\ncontent-type: application/json\r\ncontent-length: 1000`, '{');
  t.equal(over.status, 503);
  t.match(over.headers, /\r\nconnection: close/);
  t.match(over.headers, /\r\nretry-after: 1/);
  const err = JSON.parse(over.body).error;
  t.equal(err.type, 'service_unavailable_error');
  t.equal(err.code, 'too_many_connections');
  t.match(err.message, /server\.max_connections: 2/);
  // One leaves: a new connection is served again.
  held[0].destroy();
  await until(() => n === 1);
  clearInterval(poll);
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const ok = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(ok.object, 'chat.completion');
  held[1].destroy();
});

t.test('a long word is counted in bounded time: input_tokens with a 400 KB single word', async (t) => {
  // BPE over one 400 KB pre-token took minutes of CPU on the event loop; it is counted in pieces now.
  const word = 'L'.repeat(400_000);
  const r = await post(gw, '/v1/responses/input_tokens', { model: 'openai/gpt-4.1-mini', input: word });
  t.equal(r.status, 200);
  t.equal(r.json.input_tokens, 100_004, "o200k_base counts 'LLLL' as one token, plus the message framing");
  // Ordinary text is counted exactly as before (the same count as without pieces).
  const { boundedCount } = await import('../src/tokens.js');
  const mod = await import('gpt-tokenizer/encoding/o200k_base');
  const text = 'The quick brown fox jumps over the lazy dog, then naps. '.repeat(200) + 'https://example.com/a/b?c=d ' + '我们今天去公园散步。'.repeat(20);
  t.equal(boundedCount(text, (s) => (s ? mod.countTokens(s) : 0)), mod.countTokens(text));
});
