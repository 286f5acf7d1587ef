// Every failure path a client can cause answers the decisions.md envelope
// with a status from its table, a message naming the field, no stack trace and
// no key. Driven over HTTP, with the openai SDK where it can send the request.
import t from 'tap';
import http from 'node:http';
import zlib from 'node:zlib';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, CLIENT_KEY } from './helpers/gateway.js';
import { sha256Hex } from '../src/config/load.js';

const mock = await startOpenAIMock();
const scopedKey = 'gw-scoped-key-000111222333';
const gw = await startGateway(
  openAIConfig(mock.url, `
keys:
  - name: scoped
    sha256: ${sha256Hex(scopedKey)}
    models: ["openai/gpt-5-*"]
  - name: chat-only
    sha256: ${sha256Hex('gw-chat-only-key-999')}
    endpoints: [images_generations]
server:
  body_limit: 2kb
  body_timeout_ms: 2000
`,
    {
      providers: `
  - name: nokey
    family: openai
    base_url: ${mock.url}/v1
  - name: down
    family: openai-compatible
    base_url: http://127.0.0.1:1/v1
    timeout_ms: 500`,
      models: `
  - id: nokey/model
    deployments: [{ provider: nokey, model: gpt-4.1-mini }]
  - id: down/model
    deployments: [{ provider: down, model: gpt-4.1-mini }]`,
    },
  ),
  { OPENAI_API_KEY: '' },
);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});

async function raw(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(gw.url + path, {
    method,
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

function envelopeOk(t: any, r: { json: any; text: string; headers: Headers }, type: string) {
  t.ok(r.json?.error, 'has error envelope');
  t.equal(r.json.error.type, type);
  t.type(r.json.error.message, 'string');
  t.ok('param' in r.json.error && 'code' in r.json.error, 'param and code present');
  t.notMatch(r.text, /at .+\.(js|ts):\d+/, 'no stack trace');
  t.notOk(r.text.includes(CLIENT_KEY), 'no client key');
  t.ok(r.headers.get('x-request-id'), 'x-request-id on errors too');
}

const chat = (extra: object = {}) => JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], ...extra });

t.test('malformed JSON -> 400', async (t) => {
  const r = await raw('POST', '/v1/chat/completions', '{"model": ');
  t.equal(r.status, 400);
  envelopeOk(t, r, 'invalid_request_error');
  t.equal(r.json.error.code, 'invalid_json');
});

t.test('JSON that is not an object -> 400', async (t) => {
  const r = await raw('POST', '/v1/chat/completions', '[1,2]');
  t.equal(r.status, 400);
  envelopeOk(t, r, 'invalid_request_error');
});

t.test('wrong content type -> 415 envelope', async (t) => {
  const r = await raw('POST', '/v1/chat/completions', chat(), { 'content-type': 'text/plain' });
  t.equal(r.status, 415);
  envelopeOk(t, r, 'invalid_request_error');
  t.match(r.json.error.message, /application\/json/);
});

t.test('a body error never answers an unauthenticated request: its 401 comes first', async (t) => {
  const noKey = { authorization: '' };
  const badKey = { authorization: 'Bearer gw-not-a-key-at-all-000' };
  const cases: [string, string | Buffer, Record<string, string>][] = [
    ['malformed JSON, no key', '{"model": ', noKey],
    ['malformed JSON, unknown key', '{"model": ', badKey],
    ['JSON that is not an object', '[1,2]', badKey],
    ['wrong content type', chat(), { ...badKey, 'content-type': 'text/plain' }],
    ['no body at all', '', noKey],
    ['body over the limit', chat({ user: 'x'.repeat(5000) }), noKey],
    ['a body that is not valid gzip', Buffer.from('not gzip at all'), { ...badKey, 'content-encoding': 'gzip' }],
  ];
  for (const [what, body, headers] of cases) {
    const r = await raw('POST', '/v1/chat/completions', body, headers);
    t.equal(r.status, 401, `${what}: 401`);
    envelopeOk(t, r, 'authentication_error');
    t.equal(r.json.error.code, 'invalid_api_key');
  }
  // The same body errors on every endpoint that reads a body.
  for (const path of ['/v1/responses', '/v1/images/generations']) {
    const r = await raw('POST', path, '{"model": ', noKey);
    t.equal(r.status, 401, `${path}: 401 before the body's 400`);
  }
  // A slow body: the deadline passes, and the answer is still the 401.
  const { port } = new URL(gw.url);
  const slow = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', 'content-length': '100' } }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: b }));
    });
    req.on('error', reject);
    req.write('{"model":');
  });
  t.equal(slow.status, 401, 'a body past the deadline without a key: 401');
  t.equal(JSON.parse(slow.body).error.type, 'authentication_error');
  // With a good key the body's own error is the answer, as before.
  const keyed = await raw('POST', '/v1/chat/completions', '[1,2]');
  t.equal(keyed.status, 400);
  t.match(keyed.json.error.message, /JSON object/);
  // A path no endpoint serves: 404, whatever the body.
  const nowhere = await raw('POST', '/v1/no-such-endpoint', '{"model": ', noKey);
  t.equal(nowhere.status, 404);
  envelopeOk(t, nowhere, 'not_found_error');
});

t.test('body over the limit -> 413 request_too_large', async (t) => {
  const r = await raw('POST', '/v1/chat/completions', chat({ user: 'x'.repeat(5000) }));
  t.equal(r.status, 413);
  envelopeOk(t, r, 'invalid_request_error');
  t.equal(r.json.error.code, 'request_too_large');
});

t.test('body sent too slowly -> 408', async (t) => {
  const { port } = new URL(gw.url);
  const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'content-length': '100' } }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: b }));
    });
    req.on('error', reject);
    req.write('{"model":');
  });
  t.equal(res.status, 408);
  t.equal(JSON.parse(res.body).error.type, 'request_timeout_error');
});

t.test('request body encodings, charsets and shapes', async (t) => {
  const body = chat();
  // Compressed bodies are accepted (gzip, deflate, br) and reach the upstream intact.
  for (const [enc, data] of [
    ['gzip', zlib.gzipSync(body)],
    ['deflate', zlib.deflateSync(body)],
    ['br', zlib.brotliCompressSync(body)],
  ] as const) {
    const r = await raw('POST', '/v1/chat/completions', data, { 'content-encoding': enc });
    t.equal(r.status, 200, `${enc} body accepted`);
    t.equal(r.json.object, 'chat.completion');
  }
  const badGzip = await raw('POST', '/v1/chat/completions', Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' });
  t.equal(badGzip.status, 400);
  envelopeOk(t, badGzip, 'invalid_request_error');
  t.equal(badGzip.json.error.code, 'invalid_encoding');
  const unknownEnc = await raw('POST', '/v1/chat/completions', body, { 'content-encoding': 'zstd-custom' });
  t.equal(unknownEnc.status, 415);
  t.match(unknownEnc.json.error.message, /Content-Encoding 'zstd-custom'/);
  // The limit applies to the decompressed size: a small gzip of a large body is refused.
  const bomb = await raw('POST', '/v1/chat/completions', zlib.gzipSync(chat({ user: 'x'.repeat(50_000) })), { 'content-encoding': 'gzip' });
  t.equal(bomb.status, 413);
  t.equal(bomb.json.error.code, 'request_too_large');
  // Charset: UTF-8 (any spelling) is fine, anything else is a 415 naming it.
  const utf8 = await raw('POST', '/v1/chat/completions', body, { 'content-type': 'Application/JSON; charset="UTF-8"' });
  t.equal(utf8.status, 200);
  const latin1 = await raw('POST', '/v1/chat/completions', body, { 'content-type': 'application/json; charset=latin1' });
  t.equal(latin1.status, 415);
  t.match(latin1.json.error.message, /charset 'latin1'/);
  // application/json only: a +json suffix type is another media type.
  const suffix = await raw('POST', '/v1/chat/completions', body, { 'content-type': 'application/vnd.api+json' });
  t.equal(suffix.status, 415);
  // An empty JSON body and a __proto__ key (even escaped) are 400s.
  const empty = await raw('POST', '/v1/chat/completions', '');
  t.equal(empty.status, 400);
  t.equal(empty.json.error.code, 'missing_body');
  const noBodyNoType = await raw('POST', '/v1/chat/completions', undefined, { 'content-type': '' });
  t.equal(noBodyNoType.status, 400);
  t.equal(noBodyNoType.json.error.code, 'missing_body');
  for (const key of ['"__proto__"', '"\\u005f_proto__"']) {
    const proto = await raw('POST', '/v1/chat/completions', `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],"metadata":{${key}:{"admin":true}}}`);
    t.equal(proto.status, 400, `${key} refused`);
    t.equal(proto.json.error.code, 'invalid_json');
    t.match(proto.json.error.message, /__proto__/);
  }
  // A key merely containing the word is fine.
  const fine = await raw('POST', '/v1/chat/completions', chat({ metadata: { not__proto__: 'x' } }));
  t.equal(fine.status, 200);
});

t.test('a body over the limit closes the connection instead of reading the rest', async (t) => {
  const { port } = new URL(gw.url);
  const res = await new Promise<{ status: number; connection?: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
    });
    req.on('error', reject);
    // 3 KiB now (over the 2 KiB limit) and the stream left open.
    req.write('{"model":"' + 'x'.repeat(3000));
  });
  t.equal(res.status, 413);
  t.equal(res.connection, 'close');
});

t.test('unknown route -> 404 envelope; wrong method -> 405', async (t) => {
  const r = await raw('GET', '/v1/nothing-here');
  t.equal(r.status, 404);
  envelopeOk(t, r, 'not_found_error');
  const m = await raw('GET', '/v1/chat/completions');
  t.equal(m.status, 405);
  envelopeOk(t, m, 'invalid_request_error');
});

t.test('missing, malformed and unknown keys -> 401', async (t) => {
  const none = await raw('POST', '/v1/chat/completions', chat(), { authorization: '' });
  t.equal(none.status, 401);
  envelopeOk(t, none, 'authentication_error');
  const basic = await raw('POST', '/v1/chat/completions', chat(), { authorization: 'Basic abc' });
  t.equal(basic.status, 401);
  const bad = new OpenAI({ apiKey: 'gw-wrong-key-123456789', baseURL: gw.baseURL, maxRetries: 0 });
  const err: any = await bad.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(err.status, 401);
  t.notOk(JSON.stringify(err.error).includes('gw-wrong-key'), 'the presented key is not echoed');
});

t.test('401 comes before body validation', async (t) => {
  const r = await raw('POST', '/v1/chat/completions', '{"model": 5}', { authorization: 'Bearer nope-nope-nope' });
  t.equal(r.status, 401);
});

t.test('key scoped to other models/endpoints -> 403', async (t) => {
  const scoped = new OpenAI({ apiKey: scopedKey, baseURL: gw.baseURL, maxRetries: 0 });
  const err: any = await scoped.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(err.status, 403);
  t.equal(err.error.type, 'permission_denied_error');
  const ok = await scoped.chat.completions.create({ model: 'openai/gpt-5-mini', messages: [{ role: 'user', content: 'x' }] });
  t.equal(ok.model, 'openai/gpt-5-mini');
  const r = await raw('POST', '/v1/chat/completions', chat(), { authorization: 'Bearer gw-chat-only-key-999' });
  t.equal(r.status, 403);
});

t.test('unknown model -> 404 model_not_found; retired -> 404 model_retired', async (t) => {
  const e1: any = await client.chat.completions.create({ model: 'openai/nope', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e1.status, 404);
  t.equal(e1.error.type, 'not_found_error');
  t.equal(e1.error.code, 'model_not_found');
  t.equal(e1.error.param, 'model');
  const e2: any = await client.chat.completions.create({ model: 'openai/old-model', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e2.status, 404);
  t.equal(e2.error.code, 'model_retired');
});

t.test('model that does not serve the endpoint -> 400 param model', async (t) => {
  const e: any = await client.chat.completions.create({ model: 'openai/gpt-image-1', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'model');
});

t.test('provider without a key -> 503 service_unavailable_error', async (t) => {
  const e: any = await client.chat.completions.create({ model: 'nokey/model', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e.status, 503);
  t.equal(e.error.type, 'service_unavailable_error');
  t.match(e.error.message, /no API key/);
});

t.test('upstream down -> 500 api_error listing the attempt', async (t) => {
  const e: any = await client.chat.completions.create({ model: 'down/model', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(e.status, 500);
  t.equal(e.error.type, 'api_error');
  t.match(e.error.message, /down\/model via down/);
  t.match(e.error.message, /ECONNREFUSED/);
});

t.test('/v1/models: no auth, status filter validated, spec 2.5 shape', async (t) => {
  const r = await raw('GET', '/v1/models', undefined, { authorization: '' });
  t.equal(r.status, 200);
  t.equal(r.json.object, 'list');
  const m = r.json.data.find((x: any) => x.id === 'openai/gpt-4.1-mini');
  t.match(m, { object: 'model', owned_by: 'openai', status: 'active', modalities: { input: ['text'], output: ['text'] }, endpoints: ['chat_completions', 'responses'] });
  t.type(m.created, 'number');
  const dep = await raw('GET', '/v1/models?status=deprecated');
  t.same(dep.json.data.map((x: any) => x.id), ['openai/gpt-4o-mini']);
  const bad = await raw('GET', '/v1/models?status=gone');
  t.equal(bad.status, 400);
  t.equal(bad.json.error.param, 'status');
  const list = await client.models.list();
  t.ok(list.data.length >= 5, 'the SDK lists models');
  const one = await client.models.retrieve('openai/gpt-5-mini');
  t.match(one, { id: 'openai/gpt-5-mini', object: 'model', owned_by: 'openai', status: 'active' });
  const none = await raw('GET', '/v1/models/openai/nope', undefined, { authorization: '' });
  t.equal(none.status, 404);
  t.equal(none.json.error.code, 'model_not_found');
});

t.test('healthz', async (t) => {
  const r = await raw('GET', '/healthz');
  t.equal(r.status, 200);
  t.same(r.json, { status: 'ok' });
});
