// Chat completions, Responses and images through the gateway to Google Vertex
// AI (family `vertex`, a strict mock with its own OAuth token endpoint: see
// test/mocks/vertex.ts), driven by the official openai SDK: Gemini and Claude
// models plain and streamed, tools, JSON schema output, Imagen, cached
// contents on Vertex's path, fallback on 429/5xx and on refused credentials,
// a client abort that cancels the upstream, and the service-account token:
// one token request for 50 concurrent calls, a refresh before expiry, a new
// token after a revocation. Then the provider block: environment defaults,
// location and base URL, missing credentials skipped by routing.
import t from 'tap';
import OpenAI from 'openai';
import { startVertexMock, vertexRateLimitBody } from './mocks/vertex.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until, type TestGateway } from './helpers/gateway.js';
import { loadConfigText, ConfigError } from '../src/config/load.js';
import { familiesOf } from '../src/cli.js';
import { builtins } from '../plugins/index.js';

const vx = await startVertexMock({ minCacheTokens: 200 });
const oai = await startOpenAIMock();
const keyFile = vx.writeKeyFile();
const badKeyFile = vx.writeKeyFile(vx.foreignKey());

const FLASH = 'google/gemini-2.5-flash';
const PRO = 'google/gemini-2.5-pro';
const SONNET = 'anthropic/claude-sonnet-4-5';
const HAIKU = 'anthropic/claude-haiku-4-5';

function config(extra = ''): string {
  return `
providers:
  - name: vertex
    family: vertex
    base_url: ${vx.url}
    region: us-central1
    timeout_ms: 5000
    retries: 0
  - name: vertex-badkey
    family: vertex
    base_url: ${vx.url}
    credentials_file: ${badKeyFile}
    timeout_ms: 5000
    retries: 0
  - name: openai
    family: openai
    base_url: ${oai.url}/v1
    api_key: ${OPENAI_KEY}
    timeout_ms: 5000
    retries: 0
routing:
  max_retry_wait_ms: 200
  failure_threshold: 1000
models:
  - id: ${FLASH}
    endpoints: [chat_completions, responses]
    capabilities: { thinking: true, tools: true, vision: true }
    max_output_tokens: 65536
    deployments: [{ provider: vertex, model: gemini-2.5-flash }]
  - id: ${PRO}
    endpoints: [chat_completions, responses]
    max_output_tokens: 65536
    deployments: [{ provider: vertex, model: gemini-2.5-pro }]
  - id: ${SONNET}
    endpoints: [chat_completions, responses]
    capabilities: { tools: true, thinking: true }
    max_output_tokens: 64000
    deployments: [{ provider: vertex, model: claude-sonnet-4-5@20250929 }]
  - id: ${HAIKU}
    endpoints: [chat_completions, responses]
    max_output_tokens: 64000
    deployments: [{ provider: vertex, model: claude-haiku-4-5@20251001 }]
  - id: google/imagen-4
    endpoints: [images_generations]
    modalities: { input: [text], output: [image] }
    deployments: [{ provider: vertex, model: imagen-4.0-generate-001 }]
  - id: google/gemini-image
    endpoints: [images_generations]
    modalities: { input: [text, image], output: [image, text] }
    capabilities: { max_images: 4 }
    deployments: [{ provider: vertex, model: gemini-2.5-flash-image }]
  - id: google/gemini-3-pro-image
    endpoints: [images_generations]
    modalities: { input: [text, image], output: [image, text] }
    deployments: [{ provider: vertex, model: gemini-3-pro-image-preview }]
  - id: google/gemini-badkey
    deployments: [{ provider: vertex-badkey, model: gemini-2.5-flash }]
  - id: openai/gpt-4.1-mini
    endpoints: [chat_completions, responses]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
${extra}`;
}

const ENV = { GOOGLE_APPLICATION_CREDENTIALS: keyFile };
const gw = await startGateway(config(), ENV);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await vx.close();
  await oai.close();
});
t.beforeEach(() => {
  vx.reset();
  oai.reset();
});

const upstream = () => vx.requests.filter((r) => r.path !== '/token');
const last = () => upstream().at(-1)!;
const base = `/v1/projects/${vx.project}/locations/us-central1/publishers`;
const weather = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } }];

t.test('Gemini on Vertex: plain chat, the token in Authorization, no API key anywhere', async (t) => {
  const r = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello vertex' }] });
  t.equal(r.choices[0].message.content, 'Echo: hello vertex');
  t.equal(r.model, FLASH);
  t.ok(r.usage!.prompt_tokens > 0);
  const rec = last();
  t.equal(rec.path, `${base}/google/models/gemini-2.5-flash:generateContent`);
  t.match(rec.headers.authorization, /^Bearer ya29\./);
  t.notOk(rec.headers['x-goog-api-key']);
  t.same(rec.body.systemInstruction, { parts: [{ text: 'Be brief.' }] });
  const token = rec.headers.authorization!.slice(7);
  t.notOk(gw.rawLogs.some((l) => l.includes(token)), 'the access token is never logged');
});

t.test('Gemini on Vertex: streamed with usage', async (t) => {
  const stream = await client.chat.completions.create({ model: PRO, messages: [{ role: 'user', content: 'stream this answer please' }], stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage: any;
  let finish: string | null = null;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
    if (c.usage) usage = c.usage;
  }
  t.equal(text, 'Echo: stream this answer please');
  t.equal(finish, 'stop');
  t.ok(usage?.completion_tokens > 0 && usage.prompt_tokens > 0, 'usage chunk');
  t.equal(last().path, `${base}/google/models/gemini-2.5-pro:streamGenerateContent`);
  t.equal(last().query.get('alt'), 'sse');
});

t.test('Claude on Vertex: rawPredict body without model, anthropic_version vertex-2023-10-16', async (t) => {
  const r = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello claude' }], max_completion_tokens: 200 });
  t.equal(r.choices[0].message.content, 'Echo: hello claude');
  t.equal(r.choices[0].finish_reason, 'stop');
  t.ok(r.usage!.completion_tokens > 0);
  const rec = last();
  t.equal(rec.path, `${base}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict`);
  t.equal(rec.body.anthropic_version, 'vertex-2023-10-16');
  t.notOk('model' in rec.body);
  t.equal(rec.body.max_tokens, 200);
  t.notOk(rec.headers['x-api-key'] || rec.headers['anthropic-version'], 'no Anthropic API headers');
  t.match(rec.headers.authorization, /^Bearer ya29\./);
});

t.test('Claude on Vertex: streamed with usage on streamRawPredict', async (t) => {
  const stream = await client.chat.completions.create({ model: HAIKU, messages: [{ role: 'user', content: 'stream claude' }], stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage: any;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) usage = c.usage;
  }
  t.equal(text, 'Echo: stream claude');
  t.ok(usage?.prompt_tokens > 0 && usage.completion_tokens > 0);
  t.equal(last().path, `${base}/anthropic/models/claude-haiku-4-5@20251001:streamRawPredict`);
  t.equal(last().body.stream, true);
});

for (const model of [FLASH, SONNET]) {
  t.test(`tool round trip on ${model}`, async (t) => {
    const messages: any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.chat.completions.create({ model, messages, tools: weather });
    const call = first.choices[0].message.tool_calls?.[0] as any;
    t.equal(first.choices[0].finish_reason, 'tool_calls');
    t.equal(call?.function.name, 'get_weather');
    t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
    messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' });
    const second = await client.chat.completions.create({ model, messages, tools: weather });
    t.equal(second.choices[0].message.content, 'Echo: tool said sunny, 21 C');
  });
}

t.test('JSON schema output on Gemini and Claude', async (t) => {
  const response_format = { type: 'json_schema' as const, json_schema: { name: 'city_answer', schema: { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false } } };
  const g = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'Paris facts' }], response_format });
  t.match(JSON.parse(g.choices[0].message.content!), { city: String, population: Number });
  t.equal(last().body.generationConfig.responseMimeType, 'application/json');
  const c = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'Paris facts' }], response_format });
  t.match(JSON.parse(c.choices[0].message.content!), { city: String, population: Number });
  t.equal(last().body.tool_choice.name, 'city_answer', 'the schema as a forced tool, as on Anthropic');
});

t.test('images: Imagen on :predict', async (t) => {
  const r = await client.images.generate({ model: 'google/imagen-4', prompt: 'a red square', n: 2, size: '1536x1024' });
  t.equal(r.data?.length, 2);
  t.ok(Buffer.from(r.data![0].b64_json!, 'base64').length > 0);
  t.equal(last().path, `${base}/google/models/imagen-4.0-generate-001:predict`);
  t.equal(last().body.parameters.sampleCount, 2);
});

t.test('images: a Gemini image model on generateContent, one call per image', async (t) => {
  const r = await client.images.generate({ model: 'google/gemini-image', prompt: 'a blue circle', n: 2, size: '1024x1024' });
  t.equal(r.data?.length, 2);
  const calls = upstream().filter((x) => x.path === `${base}/google/models/gemini-2.5-flash-image:generateContent`);
  t.equal(calls.length, 2);
  t.same(calls[0].body.generationConfig, { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '1:1' } });
  t.ok((r as any).usage?.output_tokens > 0, 'image usage from usageMetadata');
});

t.test('images on Vertex: quality echoed and sent as the resolution where the model has one, size the nearest allowed', async (t) => {
  const g = await client.images.generate({ model: 'google/gemini-3-pro-image', prompt: 'a tall tower', size: '1024x1536', quality: 'medium' });
  t.equal(g.quality, 'medium');
  t.equal(g.size, '1024x1536', 'a 1696x2528 image (2:3 at 2K)');
  t.equal(Buffer.from(g.data![0].b64_json!, 'base64').readUInt32BE(16), 1696);
  t.equal(last().path, `${base}/google/models/gemini-3-pro-image-preview:generateContent`);
  t.same(last().body.generationConfig.imageConfig, { aspectRatio: '2:3', imageSize: '2K' });
  const flash: any = await client.images.generate({ model: 'google/gemini-image', prompt: 'a blue circle', quality: 'low', debug: ['normalizations'] } as any);
  t.equal(flash.quality, 'low', 'echoed even where the model has no resolution setting');
  t.equal(flash.size, '1024x1024');
  t.notOk(last().body.generationConfig.imageConfig, 'no imageSize for gemini-2.5-flash-image (Vertex refuses it)');
  t.match(flash.debug.normalizations, [{ param: 'quality', action: 'strip', before: 'low' }]);
  const imagen = await client.images.generate({ model: 'google/imagen-4', prompt: 'a red square', size: '1536x1024', quality: 'high' });
  t.equal(imagen.quality, 'high');
  t.equal(imagen.size, '1536x1024', 'a 2560x1792 image (4:3 at 2K)');
  t.equal(last().body.parameters.sampleImageSize, '2K');
});

t.test('Claude on Vertex: thinking with a signed block sent back, n fanned out', async (t) => {
  const first: any = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'think first' }], reasoning_effort: 'low' } as any);
  t.match(first.choices[0].message.reasoning_content, /think first/);
  t.match(last().body.thinking, { type: 'enabled', budget_tokens: Number });
  const again = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'think first' }, first.choices[0].message, { role: 'user', content: 'and again' }], reasoning_effort: 'low' } as any);
  t.equal(again.choices[0].message.content, 'Echo: and again', 'the signed thinking block verified upstream');
  const n: any = await client.chat.completions.create({ model: HAIKU, messages: [{ role: 'user', content: 'two please' }], n: 2 });
  t.equal(n.choices.length, 2);
  t.equal(upstream().filter((x) => x.path.endsWith('claude-haiku-4-5@20251001:rawPredict')).length, 2);
});

t.test('mid-stream errors: an error frame, no [DONE]', async (t) => {
  vx.failStream({ afterEvents: 1 });
  const g = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'one two three four five six' }], stream: true });
  let text = '';
  await t.rejects(
    (async () => {
      for await (const c of g) text += c.choices[0]?.delta?.content ?? '';
    })(),
    /internal error/i,
  );
  t.ok(text.length > 0, 'what came before the error reached the client');
  vx.claudeStreamError({ afterEvents: 4 });
  const c = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'one two three four five six' }], stream: true });
  await t.rejects(
    (async () => {
      for await (const x of c) void x;
    })(),
    /Overloaded/,
  );
});

t.test('a client that leaves mid-stream: the upstream stream is cut at once', async (t) => {
  for (const model of [FLASH, SONNET]) {
    vx.reset();
    vx.sseDelayMs = 300;
    const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'a long answer with many many words to stream slowly' }], stream: true });
    for await (const c of stream) {
      if (c.choices[0]?.delta?.content) break;
    }
    await until(() => upstream().at(-1)!.aborted, 5000);
    t.ok(upstream().at(-1)!.aborted, `${model}: upstream closed`);
  }
});

t.test('Responses API plain and streamed, on Gemini and Claude', async (t) => {
  for (const model of [FLASH, SONNET]) {
    const r = await client.responses.create({ model, input: `responses on ${model}`, store: false });
    t.equal(r.output_text, `Echo: responses on ${model}`);
    const events: string[] = [];
    let text = '';
    const stream = await client.responses.create({ model, input: 'stream responses', stream: true, store: false });
    for await (const e of stream) {
      events.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
    }
    t.equal(text, 'Echo: stream responses');
    t.equal(events[0], 'response.created');
    t.equal(events.at(-1), 'response.completed');
  }
});

t.test('JSON schema output on the Responses API, plain and streamed, on Gemini and Claude', async (t) => {
  const format = { type: 'json_schema' as const, name: 'city_answer', schema: { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false }, strict: true };
  for (const model of [FLASH, SONNET]) {
    vx.reset();
    const r = await client.responses.create({ model, input: 'Paris facts', text: { format }, store: false });
    t.match(JSON.parse(r.output_text), { city: String, population: Number }, model);
    if (model === FLASH) t.equal(last().body.generationConfig.responseMimeType, 'application/json');
    else t.equal(last().body.tool_choice.name, 'city_answer');
    let text = '';
    for await (const e of await client.responses.create({ model, input: 'Paris facts', text: { format }, stream: true, store: false })) if (e.type === 'response.output_text.delta') text += e.delta;
    t.match(JSON.parse(text), { city: String, population: Number }, `${model} streamed`);
    t.match(last().path, /:stream(GenerateContent|RawPredict)$/);
  }
});

t.test('fallback from Vertex to OpenAI on 429 and on 5xx', async (t) => {
  vx.fail({ status: 429, body: vertexRateLimitBody(), pathIncludes: ':generateContent' });
  const r: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'fall back' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.equal(r.choices[0].message.content, 'Echo: fall back');
  t.match(r.extra.routing.attempts, [
    { provider: 'vertex', status: 'failed', model: FLASH, error: /429 Resource exhausted/ },
    { provider: 'openai', status: 'succeeded' },
  ]);

  vx.fail({ status: 503, body: { error: { code: 503, message: 'The service is currently unavailable.', status: 'UNAVAILABLE' } }, pathIncludes: ':streamRawPredict' });
  const stream = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'stream fall back' }], stream: true, fallbacks: ['openai/gpt-4.1-mini'] } as OpenAI.ChatCompletionCreateParamsStreaming);
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  t.equal(text, 'Echo: stream fall back');
  t.equal(oai.requests.length, 2);

  // Claude's own refusal (Anthropic's shape) is the caller's: a 400, no fallback.
  const bad = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: SONNET, messages: [{ role: 'user', content: 'x' }], top_k: -1, native_fields: { top_k: -1 }, fallbacks: ['openai/gpt-4.1-mini'] }),
  });
  t.equal(bad.status, 400);
});

t.test('refused service-account key: a provider credential failure, fallback, no key material', async (t) => {
  const r: any = await client.chat.completions.create({ model: 'google/gemini-badkey', messages: [{ role: 'user', content: 'x' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.match(r.extra.routing.attempts[0], { provider: 'vertex-badkey', status: 'failed', error: /401 .*invalid_grant: Invalid JWT Signature/ });
  t.notMatch(JSON.stringify(r), /PRIVATE KEY|ya29/);
  t.notOk(upstream().length, 'no generate call without a token');
});

t.test('a client abort cancels the upstream call', async (t) => {
  vx.fail({ pathIncludes: ':generateContent', delayMs: 3000 });
  const ac = new AbortController();
  const p = client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'slow' }] }, { signal: ac.signal });
  await until(() => upstream().length === 1, 5000);
  ac.abort();
  await t.rejects(p);
  await until(() => upstream()[0].aborted, 5000);
  t.ok(upstream()[0].aborted, 'the upstream request was closed by the gateway');
});

t.test('cache_control prefix: a Vertex cached content, created once, named by the project number', async (t) => {
  const manual = 'Reference manual. '.repeat(100);
  const ask = (q: string) =>
    client.chat.completions.create({ model: FLASH, messages: [{ role: 'system', content: manual, cache_control: { type: 'ephemeral', ttl: '300s' } } as any, { role: 'user', content: q }] });
  const r1 = await ask('first');
  const r2 = await ask('second');
  t.equal(r2.choices[0].message.content, 'Echo: second');
  t.ok(r1.choices[0].message.content);
  const creates = vx.requests.filter((r) => r.path.endsWith('/cachedContents'));
  t.equal(creates.length, 1);
  t.equal(creates[0].path, `/v1/projects/${vx.project}/locations/us-central1/cachedContents`);
  t.equal(creates[0].body.model, `projects/${vx.project}/locations/us-central1/publishers/google/models/gemini-2.5-flash`);
  const gens = upstream().filter((r) => r.path.endsWith(':generateContent'));
  t.match(gens[1].body.cachedContent, new RegExp(`^projects/${vx.projectNumber}/locations/us-central1/cachedContents/\\d+$`));
  t.ok((r2.usage as any).prompt_tokens_details.cached_tokens > 0);
});

/** A gateway of its own, so that its token cache starts empty. */
async function freshGateway(): Promise<TestGateway> {
  return startGateway(config(), ENV);
}

t.test('50 concurrent calls on a cold gateway make one token request', async (t) => {
  const g = await freshGateway();
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  vx.fail({ pathIncludes: '/token', delayMs: 300 });
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => c.chat.completions.create({ model: i % 2 ? FLASH : SONNET, messages: [{ role: 'user', content: `call ${i}` }] })),
  );
  t.equal(results.length, 50);
  t.ok(results.every((r, i) => r.choices[0].message.content === `Echo: call ${i}`));
  t.equal(vx.tokenRequests, 1, 'exactly one token request');
  t.equal(new Set(upstream().map((r) => r.headers.authorization)).size, 1, 'every call used the same token');
});

t.test('the token is refreshed shortly before it expires, once for all waiters, while still valid', async (t) => {
  const g = await freshGateway();
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  // 301 s: the gateway uses it 1 s, then refreshes it 5 minutes before expiry.
  vx.tokenTtlSeconds = 301;
  t.teardown(() => void (vx.tokenTtlSeconds = 3599));
  await c.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'first' }] });
  t.equal(vx.tokenRequests, 1);
  const firstToken = last().headers.authorization;
  await new Promise((r) => setTimeout(r, 1200));
  vx.fail({ pathIncludes: '/token', delayMs: 200 });
  const again = await Promise.all(Array.from({ length: 20 }, (_, i) => c.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: `again ${i}` }] })));
  t.equal(again.length, 20);
  t.equal(vx.tokenRequests, 2, 'one refresh for 20 waiting calls');
  const later = new Set(upstream().slice(1).map((r) => r.headers.authorization));
  t.equal(later.size, 1);
  t.not([...later][0], firstToken, 'a new token');
  t.ok(vx.tokens.get(firstToken!.slice(7))! > Date.now(), 'the old one was still valid upstream: refreshed before expiry');
});

t.test("the key file's token_uri is where tokens come from, whatever the base URL", async (t) => {
  const altUri = `${vx.url}/oauth2/v4/token`;
  const altKey = vx.writeKeyFile({ ...vx.serviceAccount, token_uri: altUri });
  const g = await startGateway(config(), { GOOGLE_APPLICATION_CREDENTIALS: altKey });
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const r = await c.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'alt token uri' }] });
  t.equal(r.choices[0].message.content, 'Echo: alt token uri');
  t.same(vx.requests.filter((x) => x.path.endsWith('/token')).map((x) => x.path), ['/oauth2/v4/token'], 'one token request, to the token_uri of the key file');
  const claims = JSON.parse(Buffer.from(new URLSearchParams(vx.requests.find((x) => x.path === '/oauth2/v4/token')!.raw).get('assertion')!.split('.')[1], 'base64url').toString());
  t.equal(claims.aud, altUri, 'the JWT is addressed to it');
});

t.test('a revoked token: 401 falls back, the next call fetches a new token', async (t) => {
  await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'warm' }] });
  vx.revokeTokens();
  const before = vx.tokenRequests;
  const r: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'after revoke' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.match(r.extra.routing.attempts[0], { provider: 'vertex', status: 'failed', error: /401 Request had invalid authentication credentials/ });
  const ok = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'new token' }] });
  t.equal(ok.choices[0].message.content, 'Echo: new token');
  t.equal(vx.tokenRequests - before, 1);
});

t.test('a token endpoint that hangs: the attempt fails over within timeout_ms', async (t) => {
  const g = await startGateway(config().replace('timeout_ms: 5000', 'timeout_ms: 400'), ENV);
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  vx.fail({ pathIncludes: '/token', hang: true });
  const r: any = await c.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'hang' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.match(r.extra.routing.attempts[0], { provider: 'vertex', status: 'failed', error: /400 ms/ });
});

t.test('provider block: environment defaults, location and base URL, missing credentials', async (t) => {
  const families = familiesOf(builtins());
  const load = (yaml: string, env: Record<string, string> = {}) => loadConfigText(yaml, 'vertex.yaml', { families, env });
  const block = (extra: string) => `
providers:
  - name: vx
    family: vertex
${extra}
models:
  - id: google/gemini-2.5-flash
    deployments: [{ provider: vx, model: gemini-2.5-flash }]
`;
  let c = load(block(''), { GOOGLE_APPLICATION_CREDENTIALS: keyFile });
  let p = c.providers.get('vx')!;
  t.equal(p.base_url, 'https://us-central1-aiplatform.googleapis.com');
  t.same(p.options, { credentials_file: keyFile, location: 'us-central1' });
  t.equal(p.missing_credentials, undefined);

  c = load(block(''), { GOOGLE_APPLICATION_CREDENTIALS: keyFile, VERTEX_LOCATION: 'global', VERTEX_PROJECT: 'other-project' });
  p = c.providers.get('vx')!;
  t.equal(p.base_url, 'https://aiplatform.googleapis.com', 'global uses the global host');
  t.equal(p.options.project, 'other-project');

  c = load(block('    location: europe-west4'), { GOOGLE_APPLICATION_CREDENTIALS: keyFile, VERTEX_BASE_URL: 'https://vertex-proxy.example' });
  t.equal(c.providers.get('vx')!.base_url, 'https://vertex-proxy.example');

  t.match(load(block('')).providers.get('vx')!.missing_credentials, /no service-account key file/);
  t.match(load(block('    credentials_file: /nonexistent/key.json')).providers.get('vx')!.missing_credentials, /cannot read/);
  const { project_id: _p, ...noProject } = vx.serviceAccount;
  const noProjectFile = vx.writeKeyFile(noProject as any);
  t.match(load(block('')).providers.get('vx')!.missing_credentials, /no service-account key/);
  t.match(load(block(`    credentials_file: ${noProjectFile}`)).providers.get('vx')!.missing_credentials, /no project/);
  t.equal(load(block(`    credentials_file: ${noProjectFile}\n    project: my-project-1`)).providers.get('vx')!.missing_credentials, undefined);

  const err = t.throws(() => load(block('    location: Europe West\n    zone: x'), { GOOGLE_APPLICATION_CREDENTIALS: keyFile })) as ConfigError;
  t.ok(err instanceof ConfigError);
  t.match(err.problems, [{ path: 'providers.0.location', line: 5, message: /Vertex AI location/ }, { path: 'providers.0.zone', message: 'unknown key' }]);

  // Routing skips a provider without credentials for the model's next deployment; 503 when none has any.
  const g = await startGateway(`
providers:
  - name: vertex-nokey
    family: vertex
    base_url: ${vx.url}
    retries: 0
  - name: vertex
    family: vertex
    base_url: ${vx.url}
    credentials_file: ${keyFile}
    retries: 0
models:
  - id: ${FLASH}
    deployments: [{ provider: vertex-nokey, model: gemini-2.5-flash }, { provider: vertex, model: gemini-2.5-flash }]
  - id: google/only-nokey
    deployments: [{ provider: vertex-nokey, model: gemini-2.5-flash }]
`);
  t.teardown(() => g.close());
  const c2 = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const r: any = await c2.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'skip' }], debug: ['routing'] } as any);
  t.equal(r.choices[0].message.content, 'Echo: skip');
  t.match(r.debug.routing.attempts ?? r.extra.routing.attempts, [{ provider: 'vertex-nokey', status: 'skipped' }, { provider: 'vertex', status: 'succeeded' }]);
  const none = await fetch(`${g.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'google/only-nokey', messages: [{ role: 'user', content: 'x' }] }),
  });
  t.equal(none.status, 503);
});

t.test('error texts keep what is not secret: a key file that vanished is named by its path; declared secrets are cut', async (t) => {
  const { copyFileSync, mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'vertex-vanishing-key-')), 'service-account-key.json');
  copyFileSync(keyFile, file);
  const g = await startGateway(config().replace(`credentials_file: ${badKeyFile}`, `credentials_file: ${file}`));
  t.teardown(() => g.close());
  // Read at start-up (the provider has credentials), gone before the first call.
  rmSync(file);
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const r: any = await c.chat.completions.create({ model: 'google/gemini-badkey', messages: [{ role: 'user', content: 'x' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.match(r.extra.routing.attempts[0], { provider: 'vertex-badkey', status: 'failed', error: `401 cannot read the service-account key file ${file} (ENOENT)` }, 'the path is named, not [redacted]');

  const families = familiesOf(builtins());
  const cfg = loadConfigText(
    `
providers:
  - name: bedrock
    family: bedrock
    region: eu-central-1
    access_key_id: AKIAEXAMPLE000000001
    secret_access_key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
    session_token: FwoGZXIvYXdzEXAMPLETOKEN
  - name: vx
    family: vertex
    credentials_file: ${keyFile}
    project: a-long-project-name-1
    location: northamerica-northeast1
models:
  - id: m/one
    deployments: [{ provider: bedrock, model: amazon.nova-pro-v1:0 }, { provider: vx, model: gemini-2.5-flash }]
`,
    'g.yaml',
    { families, env: {} },
  );
  const { providerSecrets, scrubSecrets } = await import('../src/errors.js');
  t.same(providerSecrets(cfg.providers.get('bedrock')!).sort(), ['FwoGZXIvYXdzEXAMPLETOKEN', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'], "bedrock's declared secrets, not its key id or region");
  t.same(providerSecrets(cfg.providers.get('vx')!), [], 'a key file path, a project and a location are not secrets');
  t.equal(scrubSecrets('bad token FwoGZXIvYXdzEXAMPLETOKEN in eu-central-1', providerSecrets(cfg.providers.get('bedrock')!)), 'bad token [redacted] in eu-central-1');
});

t.test('the shipped gateway.yaml with only Vertex credentials: Claude and Gemini served by Vertex, in us-central1 unless VERTEX_LOCATION says otherwise', async (t) => {
  const { readFileSync, mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const yaml = readFileSync(new URL('../../gateway.yaml', import.meta.url), 'utf8');
  for (const location of ['us-central1', 'global']) {
    const db = path.join(mkdtempSync(path.join(tmpdir(), 'vertex-shipped-')), 'responses.sqlite');
    const env: Record<string, string> = { GOOGLE_APPLICATION_CREDENTIALS: keyFile, VERTEX_BASE_URL: vx.url, GATEWAY_RESPONSES_DB: db };
    if (location === 'global') env.VERTEX_LOCATION = 'global';
    const g = await startGateway(yaml, env);
    t.teardown(() => g.close());
    const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
    for (const [model, path] of [
      ['anthropic/claude-sonnet-4-5', '/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict'],
      ['anthropic/claude-haiku-4-5', '/publishers/anthropic/models/claude-haiku-4-5@20251001:rawPredict'],
      ['google/gemini-2.5-flash', '/publishers/google/models/gemini-2.5-flash:generateContent'],
      ['google/gemini-2.5-pro', '/publishers/google/models/gemini-2.5-pro:generateContent'],
    ]) {
      const r: any = await c.chat.completions.create({ model, messages: [{ role: 'user', content: `shipped ${model}` }], debug: ['routing'] } as any);
      t.equal(r.choices[0].message.content, `Echo: shipped ${model}`);
      t.equal(last().path, `/v1/projects/${vx.project}/locations/${location}${path}`);
      t.match(r.extra.routing.attempts, [{ status: 'skipped' }, { provider: 'vertex', region: location, status: 'succeeded' }], `${model}: the direct provider without a key is skipped`);
    }
  }
  // Without VERTEX_BASE_URL the host follows the location.
  const families = familiesOf(builtins());
  t.equal(loadConfigText(yaml, 'gateway.yaml', { families, env: { GOOGLE_APPLICATION_CREDENTIALS: keyFile } }).providers.get('vertex')!.base_url, 'https://us-central1-aiplatform.googleapis.com');
  t.equal(loadConfigText(yaml, 'gateway.yaml', { families, env: { GOOGLE_APPLICATION_CREDENTIALS: keyFile, VERTEX_LOCATION: 'global' } }).providers.get('vertex')!.base_url, 'https://aiplatform.googleapis.com');
});

t.test('input token counts: :countTokens for Gemini (prompt fields at the top level), count-tokens:rawPredict for Claude', async (t) => {
  const g = await client.responses.inputTokens.count({ model: FLASH, input: 'Count these words please', instructions: 'Be terse.', tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }] } as any);
  t.ok(g.input_tokens > 0);
  const rec = last();
  t.equal(rec.path, `${base}/google/models/gemini-2.5-flash:countTokens`);
  t.ok(rec.body.contents && rec.body.systemInstruction && rec.body.tools, 'contents, systemInstruction and tools at the top level');
  t.notOk(rec.body.generateContentRequest, "not the Gemini API's wrapper");
  const c = await client.responses.inputTokens.count({ model: SONNET, input: 'Count these words please', instructions: 'Be terse.' });
  t.ok(c.input_tokens > 0);
  t.equal(last().path, `${base}/anthropic/models/count-tokens:rawPredict`);
  t.match(last().body, { anthropic_version: 'vertex-2023-10-16', model: 'claude-sonnet-4-5@20250929', system: [{ type: 'text', text: 'Be terse.' }] });
  t.notOk('max_tokens' in last().body, 'the prompt only');
});
