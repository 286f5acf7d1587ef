// Chat completions and the Responses API through the gateway to Amazon
// Bedrock (family `bedrock`, the Converse API), driven by the official openai
// SDK against the strict Bedrock mock: SigV4 and API-key authentication,
// environment defaults, plain and streamed answers (AWS event stream), tools,
// structured output, images, Claude thinking with signed reasoning sent back,
// prompt caching, errors and fallback, client abort.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startBedrockMock, BEDROCK_CREDENTIALS, BEDROCK_SESSION_CREDENTIALS, BEDROCK_API_KEY } from './mocks/bedrock.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const SONNET_ID = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0';
const bed = await startBedrockMock();
const oai = await startOpenAIMock();

const openaiProvider = `
  - name: openai
    family: openai
    base_url: ${oai.url}/v1
    api_key: ${OPENAI_KEY}
    region: us-east
    timeout_ms: 3000
    retries: 0`;

function yaml(providers: string, models = ''): string {
  return `
providers:${providers}${openaiProvider}
routing:
  max_retry_wait_ms: 200
  failure_threshold: 1000
models:
  - id: anthropic/claude-sonnet-4-5
    modalities: { input: [text, image], output: [text] }
    capabilities: { thinking: true, tools: true, vision: true, json_schema: true }
    max_output_tokens: 64000
    endpoints: [chat_completions, responses]
    deployments: [{ provider: bedrock, model: ${SONNET_ID} }]
  - id: amazon/nova-pro
    endpoints: [chat_completions, responses]
    deployments: [{ provider: bedrock, model: us.amazon.nova-pro-v1:0 }]
  - id: amazon/nova-pro-arn
    deployments: [{ provider: bedrock, model: 'arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0' }]
  - id: openai/gpt-4.1-mini
    endpoints: [chat_completions, responses]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
${models}`;
}

const gw = await startGateway(
  yaml(`
  - name: bedrock
    family: bedrock
    base_url: ${bed.url}
    region: us-east-1
    access_key_id: ${BEDROCK_CREDENTIALS.accessKeyId}
    secret_access_key: ${BEDROCK_CREDENTIALS.secretAccessKey}
    timeout_ms: 3000
    retries: 0`),
);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await bed.close();
  await oai.close();
});
t.beforeEach(() => {
  bed.reset();
  oai.reset();
});

const SONNET = 'anthropic/claude-sonnet-4-5';
const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
type Any = any;
const create = (body: Any, opts?: Any): Promise<Any> => client.chat.completions.create(body, opts) as Promise<Any>;
async function streamed(body: Any, c = client): Promise<Any[]> {
  const out: Any[] = [];
  for await (const chunk of (await c.chat.completions.create({ ...body, stream: true })) as Any) out.push(chunk);
  return out;
}
const text = (chunks: Any[]) => chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');

t.test('chat: SigV4-signed Converse call, model id encoded in the path, answer and usage mapped', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello Bedrock' }], max_tokens: 300, temperature: 0.4 });
  t.equal(r.object, 'chat.completion');
  t.equal(r.model, SONNET);
  t.equal(r.choices[0].message.content, `Bedrock ${SONNET_ID} heard: Hello Bedrock`);
  t.equal(r.choices[0].finish_reason, 'stop');
  t.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
  t.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const q = bed.requests[0];
  t.equal(q.rawPath, '/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse');
  t.match(q.headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIAMOCKBEDROCK0000001\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=/);
  t.same(q.body, { messages: [{ role: 'user', content: [{ text: 'Hello Bedrock' }] }], system: [{ text: 'Be brief.' }], inferenceConfig: { maxTokens: 300, temperature: 0.4 } });
  t.notOk(JSON.stringify(gw.rawLogs).includes(BEDROCK_CREDENTIALS.secretAccessKey), 'the secret is in no log line');
});

t.test('an ARN as the model id: encoded once in the path (/ and :), signed as sent', async (t) => {
  const r = await create({ model: 'amazon/nova-pro-arn', messages: [{ role: 'user', content: 'by arn' }] });
  t.equal(r.choices[0].message.content, 'Bedrock arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0 heard: by arn');
  t.equal(bed.requests[0].rawPath, '/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A%3Afoundation-model%2Famazon.nova-pro-v1%3A0/converse');
});

t.test('what does not fit Converse is noted under debug.normalizations', async (t) => {
  const r = await create({
    model: SONNET,
    messages: [{ role: 'user', content: 'hi', name: 'ann' }],
    seed: 7,
    frequency_penalty: 0.2,
    temperature: 0.5,
    top_p: 0.9,
    user: 'u-1',
    debug: ['normalizations'],
  });
  const params = r.debug.normalizations.map((n: Any) => `${n.action}:${n.param}`);
  for (const p of ['strip:seed', 'strip:frequency_penalty', 'strip:top_p', 'strip:user', 'strip:messages[].name']) t.ok(params.includes(p), p);
  t.same(bed.requests[0].body.inferenceConfig, { temperature: 0.5 });
  const n = await create({ model: SONNET, messages: [{ role: 'user', content: 'hi' }], n: 2 }).catch((e) => e);
  t.equal(n.status, 400);
  t.equal(n.error.param, 'n');
});

t.test('chat streamed: event-stream frames become chunks, finish reason, then usage', async (t) => {
  const before = bed.connections;
  const chunks = await streamed({ model: SONNET, messages: [{ role: 'user', content: 'Stream me a few words' }], stream_options: { include_usage: true } });
  t.same(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  t.equal(text(chunks), `Bedrock ${SONNET_ID} heard: Stream me a few words`);
  t.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
  t.same(chunks.at(-1).choices, []);
  t.ok(chunks.at(-1).usage.total_tokens > 0);
  t.match(bed.requests[0].rawPath, /%3A0\/converse-stream$/);
  // The stream's connection goes back to the keep-alive pool: the next calls reuse it.
  await create({ model: SONNET, messages: [{ role: 'user', content: 'again' }] });
  await streamed({ model: SONNET, messages: [{ role: 'user', content: 'and again' }] });
  t.ok(bed.connections - before <= 1, `${bed.connections - before} new connections for 3 calls`);
});

t.test('tools: a round trip (tool call, then the result), streamed tool calls, tool_choice', async (t) => {
  const messages: Any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await create({ model: SONNET, messages, tools: [weatherTool] });
  t.equal(first.choices[0].finish_reason, 'tool_calls');
  const call = first.choices[0].message.tool_calls[0];
  t.equal(call.function.name, 'get_weather');
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  t.match(call.id, /^tooluse_/);
  const second = await create({ model: SONNET, tools: [weatherTool], messages: [...messages, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21}' }] });
  t.equal(second.choices[0].message.content, 'The tool returned: {"temp_c":21}');
  t.same(
    bed.requests[1].body.messages.map((m: Any) => [m.role, m.content.map((b: Any) => Object.keys(b)[0])]),
    [
      ['user', ['text']],
      ['assistant', ['toolUse']],
      ['user', ['toolResult']],
    ],
  );
  const chunks = await streamed({ model: SONNET, messages: [{ role: 'user', content: 'go' }], tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  t.equal(calls[0].function.name, 'get_weather');
  t.same(JSON.parse(calls.map((c: Any) => c.function.arguments).join('')), { city: 'Paris' });
  t.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  t.same(bed.requests[2].body.toolConfig.toolChoice, { tool: { name: 'get_weather' } });
});

t.test('JSON schema output: outputConfig.textFormat, the answer is JSON that fits the schema', async (t) => {
  const schema = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false };
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'Largest city of France?' }], response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } } });
  t.same(JSON.parse(r.choices[0].message.content), { city: 'Paris', population: 42 });
  t.same(JSON.parse(bed.requests[0].body.outputConfig.textFormat.structure.jsonSchema.schema), schema);
});

t.test('images: a data URL goes inline; an http URL is a 400 naming the field', async (t) => {
  const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is it?' }, { type: 'image_url', image_url: { url: png } }] }] });
  t.match(r.choices[0].message.content, /\(1 image\)$/);
  const e = await create({ model: SONNET, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }).catch((x) => x);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'messages[0].content[0].image_url.url');
  t.equal(bed.requests.length, 1, 'the refused request never reached Bedrock');
});

t.test('Claude thinking: reasoning_effort -> thinking budget; signed reasoning returned and accepted back', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'Think about it' }], reasoning_effort: 'low', tools: [weatherTool] });
  const m = r.choices[0].message;
  t.match(m.reasoning_content, /The user asks: Think about it/);
  t.same(m.reasoning_details, [{ type: 'thinking', thinking: m.reasoning_content, signature: m.reasoning_details[0].signature }]);
  t.same(bed.requests[0].body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 1024 } });
  // The next turn sends the signed block back: the mock verifies the signature.
  const next = await create({ model: SONNET, reasoning_effort: 'low', tools: [weatherTool], messages: [{ role: 'user', content: 'Think about it' }, m, { role: 'user', content: 'And now?' }] });
  t.equal(next.choices[0].finish_reason, 'stop');
  t.same(Object.keys(bed.requests[1].body.messages[1].content[0]), ['reasoningContent']);
  // Streamed: reasoning deltas, and the signed block with the finish chunk.
  const chunks = await streamed({ model: SONNET, messages: [{ role: 'user', content: 'Think about it' }], reasoning_effort: 'low' });
  const thought = chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join('');
  t.match(thought, /The user asks/);
  t.same(chunks.at(-1).choices[0].delta.reasoning_details[0].thinking, thought);
});

t.test('prompt caching: cache_control becomes a cache point; the second call reads the cache', async (t) => {
  const system = { role: 'system', content: [{ type: 'text', text: 'You are a meticulous assistant. '.repeat(40), cache_control: { type: 'ephemeral' } }] };
  const a = await create({ model: SONNET, messages: [system, { role: 'user', content: 'first' }] });
  const b = await create({ model: SONNET, messages: [system, { role: 'user', content: 'second' }] });
  t.same(bed.requests[0].body.system[1], { cachePoint: { type: 'default' } });
  t.ok(a.usage.prompt_tokens_details.cache_write_tokens > 0);
  t.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
  t.equal(b.usage.prompt_tokens_details.cached_tokens, a.usage.prompt_tokens_details.cache_write_tokens);
  t.ok(b.usage.prompt_tokens > b.usage.prompt_tokens_details.cached_tokens, 'prompt_tokens include the cached part');
});

t.test('Responses API, plain and streamed, translated through chat', async (t) => {
  const r: Any = await client.responses.create({ model: SONNET, input: 'Hello from responses', instructions: 'Be kind.' } as Any);
  t.equal(r.status, 'completed');
  t.equal(r.output_text, `Bedrock ${SONNET_ID} heard: Hello from responses`);
  t.same(bed.requests[0].body.system, [{ text: 'Be kind.' }]);
  const events: Any[] = [];
  for await (const e of (await client.responses.create({ model: SONNET, input: 'Stream a response', stream: true } as Any)) as Any) events.push(e);
  t.equal(events[0].type, 'response.created');
  t.equal(events.at(-1).type, 'response.completed');
  t.equal(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join(''), `Bedrock ${SONNET_ID} heard: Stream a response`);
  t.ok(events.at(-1).response.usage.total_tokens > 0);
});

t.test('JSON schema output on the Responses API: text.format becomes outputConfig, plain and streamed', async (t) => {
  const schema = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'integer' } }, required: ['city', 'population'], additionalProperties: false };
  const format = { type: 'json_schema', name: 'city', schema, strict: true };
  const r: Any = await client.responses.create({ model: SONNET, input: 'Largest city of France?', text: { format } } as Any);
  t.same(JSON.parse(r.output_text), { city: 'Paris', population: 42 });
  t.same(JSON.parse(bed.requests[0].body.outputConfig.textFormat.structure.jsonSchema.schema), schema);
  let text = '';
  for await (const e of (await client.responses.create({ model: SONNET, input: 'Largest city of France?', text: { format }, stream: true } as Any)) as Any) if (e.type === 'response.output_text.delta') text += e.delta;
  t.same(JSON.parse(text), { city: 'Paris', population: 42 });
  t.match(bed.requests[1].rawPath, /converse-stream$/);
  t.ok(bed.requests[1].body.outputConfig.textFormat, 'streamed with the schema too');
});

for (const [status, type, fallsBack] of [
  [429, 'ThrottlingException', true],
  [503, 'ServiceUnavailableException', true],
  [500, 'InternalServerException', true],
  [403, 'AccessDeniedException', true],
  [400, 'ServiceQuotaExceededException', true],
  [424, 'ModelErrorException', true],
  [400, 'ValidationException', false],
] as const) {
  t.test(`${status} ${type}: ${fallsBack ? 'falls back to another family' : 'answered at once as a 400'}`, async (t) => {
    bed.fail({ error: { status, type, message: `mock says ${type}` } });
    const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'fall back please' }], fallbacks: ['openai/gpt-4.1-mini'] }).catch((e) => e);
    if (!fallsBack) {
      t.equal(r.status, 400);
      t.same(r.error, { message: 'mock says ValidationException', type: 'invalid_request_error', param: null, code: 'ValidationException' });
      t.equal(oai.requests.length, 0);
      return;
    }
    t.equal(r.choices[0].message.content, 'Echo: fall back please');
    t.match(r.extra.routing.attempts, [
      { provider: 'bedrock', region: 'us-east-1', status: 'failed', model: SONNET, error: new RegExp(`mock says ${type}`) },
      { provider: 'openai', status: 'succeeded', model: 'openai/gpt-4.1-mini' },
    ]);
    // Streams fall back too: the error comes before the first byte.
    bed.fail({ error: { status, type, message: `mock says ${type}` } });
    const chunks = await streamed({ model: SONNET, messages: [{ role: 'user', content: 'fall back' }], fallbacks: ['openai/gpt-4.1-mini'] });
    t.equal(text(chunks), 'Echo: fall back');
  });
}

t.test('a throttling exception inside the stream: fallback before the first event, an error frame after', async (t) => {
  bed.fail({ exceptionAfterEvents: { events: 0, type: 'throttlingException', message: 'Too many tokens, please wait' } });
  const early = await streamed({ model: SONNET, messages: [{ role: 'user', content: 'early' }], fallbacks: ['openai/gpt-4.1-mini'] });
  t.equal(text(early), 'Echo: early');
  bed.fail({ exceptionAfterEvents: { events: 4, type: 'throttlingException', message: 'Too many tokens, please wait' } });
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: SONNET, messages: [{ role: 'user', content: 'a b c d e f g' }], stream: true, fallbacks: ['openai/gpt-4.1-mini'] }),
  });
  const body = await res.text();
  t.notOk(body.includes('[DONE]'), 'a broken stream never looks finished');
  const frames = body.split('\n\n').filter(Boolean).map((f) => JSON.parse(f.slice(6)));
  t.same(frames.at(-1), { error: { message: 'Too many tokens, please wait', type: 'rate_limit_error', param: null, code: 'ThrottlingException' } });
  t.equal(oai.requests.length, 1, 'only the early one fell back');
  // A stream cut in the middle of a message also ends in an error frame.
  bed.fail({ cutAfterEvents: 3 });
  const cut = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: SONNET, messages: [{ role: 'user', content: 'a b c d e f g' }], stream: true }),
  });
  const cutBody = await cut.text();
  t.notOk(cutBody.includes('[DONE]'));
  t.match(cutBody, /"error"/);
});

t.test('a client that disconnects mid-stream aborts the upstream at once', async (t) => {
  bed.fail({ eventDelayMs: 150 });
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten' }], stream: true }, { signal: ac.signal });
  let n = 0;
  await (async () => {
    for await (const _ of stream) if (++n === 3) ac.abort();
  })().catch(() => {});
  await until(() => bed.requests[0]?.aborted === true, 5000);
  t.ok(bed.requests[0].aborted, 'the Bedrock response was torn down');
});

t.test('a wrong secret is a provider-credential failure: 403 InvalidSignatureException, then fallback', async (t) => {
  const wrong = await startGateway(
    yaml(`
  - name: bedrock
    family: bedrock
    base_url: ${bed.url}
    access_key_id: ${BEDROCK_CREDENTIALS.accessKeyId}
    secret_access_key: not-the-right-secret
    retries: 0`),
  );
  t.teardown(() => wrong.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: wrong.baseURL, maxRetries: 0 });
  const r: Any = await c.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], fallbacks: ['openai/gpt-4.1-mini'], debug: ['routing'] } as Any);
  t.match(r.debug.routing.attempts, [{ provider: 'bedrock', status: 'failed', error: /^403 The request signature we calculated does not match/ }, { provider: 'openai', status: 'succeeded' }]);
  const e: Any = await c.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'x' }] }).catch((x) => x);
  t.equal(e.status, 500);
  t.notOk(JSON.stringify(e.error).includes('not-the-right-secret'));
});

t.test('credentials from the environment: key pair with a session token, or a Bedrock API key; none: skipped', async (t) => {
  const envGw = await startGateway(
    yaml(`
  - name: bedrock
    family: bedrock
    retries: 0`),
    {
      AWS_ACCESS_KEY_ID: BEDROCK_SESSION_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: BEDROCK_SESSION_CREDENTIALS.secretAccessKey,
      AWS_SESSION_TOKEN: BEDROCK_SESSION_CREDENTIALS.sessionToken,
      AWS_REGION: 'us-east-1',
      BEDROCK_BASE_URL: bed.url,
    },
  );
  t.teardown(() => envGw.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: envGw.baseURL, maxRetries: 0 });
  const r = await c.chat.completions.create({ model: 'amazon/nova-pro', messages: [{ role: 'user', content: 'session creds' }] });
  t.equal(r.choices[0].message.content, 'Bedrock us.amazon.nova-pro-v1:0 heard: session creds');
  t.equal(bed.requests[0].headers['x-amz-security-token'], BEDROCK_SESSION_CREDENTIALS.sessionToken);
  t.match(bed.requests[0].headers.authorization, /Credential=ASIAMOCKBEDROCK0000002\//);

  const keyGw = await startGateway(yaml(`\n  - name: bedrock\n    family: bedrock\n    retries: 0`), { AWS_BEARER_TOKEN_BEDROCK: BEDROCK_API_KEY, BEDROCK_BASE_URL: bed.url });
  t.teardown(() => keyGw.close());
  const k = new OpenAI({ apiKey: CLIENT_KEY, baseURL: keyGw.baseURL, maxRetries: 0 });
  const s = await streamed({ model: 'amazon/nova-pro', messages: [{ role: 'user', content: 'api key' }] }, k);
  t.equal(text(s), 'Bedrock us.amazon.nova-pro-v1:0 heard: api key');
  t.equal(bed.requests[1].headers.authorization, `Bearer ${BEDROCK_API_KEY}`);

  const none = await startGateway(
    yaml(
      `\n  - name: bedrock\n    family: bedrock\n    base_url: ${bed.url}`,
      `  - id: anthropic/claude-haiku-4-5
    deployments: [{ provider: bedrock, model: us.anthropic.claude-haiku-4-5-20251001-v1:0 }, { provider: openai, model: gpt-4.1-mini }]
`,
    ),
  );
  t.teardown(() => none.close());
  const n = new OpenAI({ apiKey: CLIENT_KEY, baseURL: none.baseURL, maxRetries: 0 });
  const skipped: Any = await n.chat.completions.create({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: 'x' }], debug: ['routing'] } as Any);
  t.match(skipped.debug.routing.attempts, [
    { provider: 'bedrock', status: 'skipped', error: /no AWS credentials/ },
    { provider: 'openai', status: 'succeeded' },
  ]);
  const e: Any = await n.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'x' }] }).catch((x) => x);
  t.equal(e.status, 503);
  t.equal(bed.requests.length, 2, 'no request without credentials');
});

t.test('the shipped gateway.yaml: with AWS credentials only, Claude and the Bedrock-only models are served by Bedrock', async (t) => {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const shipped = await startGateway(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'), {
    AWS_ACCESS_KEY_ID: BEDROCK_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: BEDROCK_CREDENTIALS.secretAccessKey,
    BEDROCK_BASE_URL: bed.url,
    GATEWAY_RESPONSES_DB: ':memory:',
  });
  t.teardown(() => shipped.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: shipped.baseURL, maxRetries: 0 });
  const expected: Record<string, string> = {
    'anthropic/claude-sonnet-4-5': 'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
    'anthropic/claude-haiku-4-5': 'us.anthropic.claude-haiku-4-5-20251001-v1:0',
    'amazon/nova-pro': 'us.amazon.nova-pro-v1:0',
    'meta/llama-4-maverick': 'us.meta.llama4-maverick-17b-instruct-v1:0',
    'mistral/pixtral-large': 'us.mistral.pixtral-large-2502-v1:0',
  };
  for (const [model, id] of Object.entries(expected)) {
    const r: Any = await c.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], debug: ['routing'] } as Any);
    t.equal(r.choices[0].message.content, `Bedrock ${id} heard: hi`, model);
    t.equal(bed.requests.at(-1)!.modelId, id);
    t.equal(r.debug.routing.attempts.at(-1).provider, 'bedrock');
  }
  const models = await c.models.list();
  t.equal(models.data.filter((m) => m.id === 'anthropic/claude-sonnet-4-5').length, 1, 'a model is listed once, whatever serves it');
});
