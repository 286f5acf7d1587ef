// Azure OpenAI (family `azure`, plugins/providers/azure): the strict mock proved
// faithful with the official clients (`openai`'s AzureOpenAI on the dated
// API, the plain OpenAI client on the v1 API, as Microsoft documents it), then
// the gateway driven through HTTP with the official `openai` SDK: chat plain
// and streamed with usage, a tool round trip, JSON schema output, a reasoning
// model, images, Responses plain and streamed, both URL schemes, the
// content filter (finish_reason and 400), fallback to another family on
// 429/5xx, a client abort that cancels the upstream, environment defaults and
// a deployment without credentials skipped.
import t from 'tap';
import OpenAI, { AzureOpenAI } from 'openai';
import { startAzureMock, AZURE_KEY } from './mocks/azure.js';
import { startOpenAIMock } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { openAIImagesRoute } from './mocks/openai-images.js';
import { startGateway, CLIENT_KEY, until, readThenAbort } from './helpers/gateway.js';

const azure = await startAzureMock();
const responsesMock = createResponsesMock();
const openai = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler, '/v1/images/generations': openAIImagesRoute() } });
t.teardown(async () => {
  await azure.close();
  await openai.close();
});
const user = (content: string) => [{ role: 'user' as const, content }];

t.test('the mock is faithful: AzureOpenAI (dated API) and the OpenAI client (v1 API)', async (t) => {
  const dated = new AzureOpenAI({ endpoint: azure.url, apiKey: AZURE_KEY, apiVersion: '2024-10-21', maxRetries: 0 });
  azure.reset();
  const r = await dated.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('hello') });
  t.equal(r.choices[0].message.content, 'Echo: hello');
  t.equal(azure.requests[0].path, '/openai/deployments/gpt-4.1-mini-prod/chat/completions');
  t.equal(azure.requests[0].query.get('api-version'), '2024-10-21');
  t.equal(azure.requests[0].headers['api-key'], AZURE_KEY);
  t.ok((r as any).prompt_filter_results, "Azure's annotations");
  const s = await dated.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('hi there'), stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage: any;
  for await (const c of s) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) usage = c.usage;
  }
  t.equal(text, 'Echo: hi there');
  t.ok(usage?.total_tokens > 0);
  const img = await dated.images.generate({ model: 'image-gen', prompt: 'a cat', size: '1024x1024' });
  t.ok(img.data?.[0].b64_json);
  t.equal(azure.requests.at(-1)!.path, '/openai/deployments/image-gen/images/generations');
  const preview = new AzureOpenAI({ endpoint: azure.url, apiKey: AZURE_KEY, apiVersion: '2025-04-01-preview', maxRetries: 0 });
  const resp = await preview.responses.create({ model: 'gpt-4.1-mini-prod', input: 'yo' });
  t.equal(resp.output_text, 'Echo: yo');
  t.equal(azure.requests.at(-1)!.path, '/openai/responses');

  const v1 = new OpenAI({ baseURL: `${azure.url}/openai/v1/`, apiKey: AZURE_KEY, maxRetries: 0 });
  const r1 = await v1.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('v1') });
  t.equal(r1.choices[0].message.content, 'Echo: v1');
  t.equal(azure.requests.at(-1)!.path, '/openai/v1/chat/completions');
  const rs1 = await v1.responses.create({ model: 'gpt-5-mini', input: 'v1 responses' });
  t.equal(rs1.output_text, 'Echo: v1 responses');

  // What Azure refuses.
  const wrongKey = new AzureOpenAI({ endpoint: azure.url, apiKey: 'nope', apiVersion: '2024-10-21', maxRetries: 0 });
  const e1: any = await wrongKey.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('x') }).catch((e) => e);
  t.equal(e1.status, 401);
  const e2: any = await dated.chat.completions.create({ model: 'no-such-deployment', messages: user('x') }).catch((e) => e);
  t.equal(e2.status, 404);
  t.equal(e2.code, 'DeploymentNotFound');
  const oldVersion = new AzureOpenAI({ endpoint: azure.url, apiKey: AZURE_KEY, apiVersion: '2023-01-01', maxRetries: 0 });
  const e3: any = await oldVersion.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('x') }).catch((e) => e);
  t.equal(e3.status, 400);
  const e4: any = await dated.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('FILTER-PROMPT') }).catch((e) => e);
  t.equal(e4.status, 400);
  t.equal(e4.code, 'content_filter');
  const bearerOnDated = new AzureOpenAI({ endpoint: azure.url, apiVersion: '2024-10-21', azureADTokenProvider: async () => AZURE_KEY, maxRetries: 0 });
  const e5: any = await bearerOnDated.chat.completions.create({ model: 'gpt-4.1-mini-prod', messages: user('x') }).catch((e) => e);
  t.equal(e5.status, 401, 'a bearer key is accepted on the v1 API only');
  const e6: any = await v1.chat.completions.create({ model: 'gpt-5-mini', messages: user('x'), temperature: 0.2 }).catch((e) => e);
  t.equal(e6.status, 400, 'reasoning models refuse sampling knobs, as on OpenAI');
});

const config = (extra = '') => `
providers:
  - name: azure
    family: azure
    base_url: ${azure.url}
    api_key: ${AZURE_KEY}
    timeout_ms: 3000
    retries: 0
  - name: azure-dated
    family: azure
    base_url: ${azure.url}/openai
    api_key: ${AZURE_KEY}
    api_version: 2025-04-01-preview
    retries: 0
  - name: openai
    family: openai
    base_url: ${openai.url}/v1
    api_key: sk-test-openai-0123456789
    retries: 0
routing:
  max_retry_wait_ms: 0
  failure_threshold: 100
models:
  - id: openai/gpt-4.1-mini
    endpoints: [chat_completions, responses]
    deployments: [{ provider: azure, model: gpt-4.1-mini-prod }, { provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-4.1-mini-dated
    endpoints: [chat_completions, responses]
    deployments: [{ provider: azure-dated, model: gpt-4.1-mini-prod }]
  - id: openai/gpt-5-mini
    endpoints: [chat_completions, responses]
    capabilities: { reasoning: true }
    deployments: [{ provider: azure-dated, model: gpt-5-mini }]
  - id: openai/gpt-image-1
    endpoints: [images_generations]
    modalities: { input: [text], output: [image] }
    deployments: [{ provider: azure, model: image-gen }]
  - id: openai/gpt-image-1-dated
    endpoints: [images_generations]
    modalities: { input: [text], output: [image] }
    deployments: [{ provider: azure-dated, model: image-gen }]
  - id: azure/only
    deployments: [{ provider: azure, model: gpt-4.1-mini-prod }]
  - id: azure/fallback
    deployments: [{ provider: azure, model: gpt-4.1-mini-prod }]
    fallbacks: [openai/gpt-4.1-mini-openai]
  - id: openai/gpt-4.1-mini-openai
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
${extra}`;

const gw = await startGateway(config());
t.teardown(() => gw.close());
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });

t.test('chat, plain and streamed with usage, on both URL schemes', async (t) => {
  for (const [model, path, version] of [
    ['openai/gpt-4.1-mini', '/openai/v1/chat/completions', null],
    ['openai/gpt-4.1-mini-dated', '/openai/deployments/gpt-4.1-mini-prod/chat/completions', '2025-04-01-preview'],
  ] as const) {
    azure.reset();
    const r = await client.chat.completions.create({ model, messages: user('hello azure') });
    t.equal(r.choices[0].message.content, 'Echo: hello azure', model);
    t.equal(r.model, model);
    t.notOk('prompt_filter_results' in r, "Azure's annotations are not passed on");
    t.notOk('content_filter_results' in r.choices[0]);
    const req = azure.requests[0];
    t.equal(req.path, path);
    t.equal(req.query.get('api-version'), version);
    t.equal(req.headers['api-key'], AZURE_KEY);
    t.notOk(req.headers.authorization, 'no bearer header');
    t.equal(req.body.model, 'gpt-4.1-mini-prod', 'the deployment name');

    const s = await client.chat.completions.create({ model, messages: user('stream me'), stream: true, stream_options: { include_usage: true } });
    const chunks: any[] = [];
    for await (const c of s) chunks.push(c);
    t.equal(chunks[0].choices[0].delta.role, 'assistant', 'the first chunk is the role chunk (the prompt-filter chunk is dropped)');
    t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: stream me');
    t.equal(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1);
    t.ok(chunks.at(-1).usage?.total_tokens > 0, 'usage last');
    t.notOk(chunks.some((c) => c.prompt_filter_results || c.choices.some((x: any) => x.content_filter_results)), 'no annotations');
    t.ok(chunks.every((c) => c.id === chunks[0].id && c.id), 'one id');
  }
});

t.test('a tool round trip and JSON schema output', async (t) => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const r1 = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('weather in Paris? use the tool'), tools });
  const call = r1.choices[0].message.tool_calls![0] as any;
  t.equal(r1.choices[0].finish_reason, 'tool_calls');
  t.equal(call.function.name, 'get_weather');
  const r2 = await client.chat.completions.create({
    model: 'openai/gpt-4.1-mini',
    tools,
    messages: [...user('weather in Paris? use the tool'), r1.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '18C' }],
  });
  t.equal(r2.choices[0].message.content, 'Echo: tool said 18C');
  const j = await client.chat.completions.create({
    model: 'openai/gpt-4.1-mini-dated',
    messages: user('json please'),
    response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'object', properties: { answer: { type: 'string' } } } } },
  });
  t.same(JSON.parse(j.choices[0].message.content!), { answer: 'json please' });
});

t.test('a reasoning model: sampling knobs normalized away before Azure sees them', async (t) => {
  azure.reset();
  const r: any = await client.chat.completions.create({ model: 'openai/gpt-5-mini', messages: user('think'), temperature: 0.3, max_tokens: 100, debug: ['normalizations'] } as any);
  t.equal(r.choices[0].message.content, 'Echo: think');
  t.equal(azure.requests[0].body.temperature, 1, 'temperature forced to 1');
  t.equal(azure.requests[0].body.max_completion_tokens, 100);
  t.equal(r.usage.completion_tokens_details.reasoning_tokens, 64);
});

t.test('content filter: finish_reason content_filter (plain and streamed), a blocked prompt is a clear 400', async (t) => {
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('FILTER-OUTPUT tell me') });
  t.equal(r.choices[0].finish_reason, 'content_filter');
  const s = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini-dated', messages: user('FILTER-OUTPUT again'), stream: true });
  const finishes: string[] = [];
  for await (const c of s) if (c.choices[0]?.finish_reason) finishes.push(c.choices[0].finish_reason);
  t.same(finishes, ['content_filter']);
  azure.reset();
  const e: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('FILTER-PROMPT bad') }).catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.code, 'content_filter');
  t.equal(e.error.type, 'invalid_request_error');
  t.match(e.error.message, /content filter blocked the request \(violence: medium\)/);
  t.equal(openai.requests.length, 0, 'the caller-fault 400 does not fall back');
});

t.test('content filter on the Responses API: incomplete with reason content_filter (plain and streamed), a blocked prompt a 400', async (t) => {
  for (const model of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini']) {
    const r = await client.responses.create({ model, input: 'FILTER-OUTPUT tell me more' });
    t.equal(r.status, 'incomplete', model);
    t.same(r.incomplete_details, { reason: 'content_filter' });
    t.equal(r.output_text, 'Echo:', 'the text up to where the filter stopped it');
    const events: any[] = [];
    for await (const ev of await client.responses.create({ model, input: 'FILTER-OUTPUT streamed', stream: true })) events.push(ev);
    t.equal(events.at(-1).type, 'response.incomplete');
    t.same(events.at(-1).response.incomplete_details, { reason: 'content_filter' });
    t.notOk(events.some((e) => e.type === 'response.completed'));
    azure.reset();
    openai.reset();
    const e: any = await client.responses.create({ model, input: 'FILTER-PROMPT bad' }).catch((x) => x);
    t.equal(e.status, 400);
    t.match(e.error, { code: 'content_filter', type: 'invalid_request_error', message: /content filter blocked the request \(violence: medium\)/ });
    const es: any = await client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'FILTER-PROMPT streamed' }] }], stream: true }).catch((x) => x);
    t.equal(es.status, 400, 'streamed: the 400 comes before any event');
    t.equal(es.error.code, 'content_filter');
    t.equal(azure.requests.length, 2);
    t.equal(openai.requests.length, 0, 'a blocked prompt does not fall back');
  }
});

t.test('content filter on images: content_policy_violation is a 400 content_filter naming the categories', async (t) => {
  for (const model of ['openai/gpt-image-1', 'openai/gpt-image-1-dated']) {
    const e: any = await client.images.generate({ model, prompt: 'FILTER-PROMPT a picture' }).catch((x) => x);
    t.equal(e.status, 400, model);
    t.match(e.error, { code: 'content_filter', type: 'invalid_request_error', message: /content filter blocked the request \(sexual: high\): Your request was rejected/ });
  }
});

t.test('JSON schema output on the Responses API, plain and streamed', async (t) => {
  const format = { type: 'json_schema' as const, name: 'answer', schema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false }, strict: true };
  for (const model of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini']) {
    azure.reset();
    const r = await client.responses.create({ model, input: 'json via responses', text: { format } });
    t.same(JSON.parse(r.output_text), { answer: 'json via responses' }, model);
    t.same(azure.requests[0].body.text.format, format, 'the format reaches Azure as sent');
    let text = '';
    for await (const ev of await client.responses.create({ model, input: 'json streamed', text: { format }, stream: true })) if (ev.type === 'response.output_text.delta') text += ev.delta;
    t.same(JSON.parse(text), { answer: 'json streamed' });
  }
});

t.test('images on both URL schemes, annotations removed', async (t) => {
  for (const model of ['openai/gpt-image-1', 'openai/gpt-image-1-dated']) {
    azure.reset();
    const img = await client.images.generate({ model, prompt: 'a lighthouse', size: '1024x1024' });
    t.ok(img.data?.[0].b64_json, model);
    t.notOk('content_filter_results' in img.data![0]);
    t.equal(azure.requests[0].body.model, 'image-gen');
  }
  t.equal(azure.requests[0].path, '/openai/deployments/image-gen/images/generations');
});

t.test('Responses API, plain and streamed, on both URL schemes', async (t) => {
  for (const [model, path] of [
    ['openai/gpt-4.1-mini', '/openai/v1/responses'],
    ['openai/gpt-5-mini', '/openai/responses'],
  ] as const) {
    azure.reset();
    const r = await client.responses.create({ model, input: 'hi responses' });
    t.equal(r.output_text, 'Echo: hi responses', model);
    t.equal(r.model, model);
    t.equal(azure.requests[0].path, path);
    const s = await client.responses.create({ model, input: 'streamed', stream: true });
    let text = '';
    let done: any;
    for await (const ev of s) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') done = ev.response;
    }
    t.equal(text, 'Echo: streamed');
    t.equal(done?.status, 'completed');
  }
});

t.test('fallback from azure to another family on 429 and 5xx, before the first byte', async (t) => {
  for (const fault of [
    { status: 429, body: { error: { code: '429', message: 'Requests to the ChatCompletions_Create Operation have exceeded the rate limit.' } }, headers: { 'retry-after-ms': '10' } },
    { status: 500, body: { error: { code: 'InternalServerError', message: 'The server had an error.' } } },
    { status: 503, body: { error: { code: 'ServiceUnavailable', message: 'overloaded' } } },
  ]) {
    azure.reset();
    openai.reset();
    azure.fail(fault);
    const r: any = await client.chat.completions.create({ model: 'azure/fallback', messages: user('fall back'), debug: ['routing'] } as any);
    t.equal(r.choices[0].message.content, 'Echo: fall back', `after ${fault.status}`);
    t.match(r.debug.routing.attempts, [
      { provider: 'azure', status: 'failed', error: new RegExp(`^${fault.status} `) },
      { provider: 'openai', status: 'succeeded' },
    ]);
    azure.fail(fault);
    const s = await client.chat.completions.create({ model: 'azure/fallback', messages: user('stream fall back'), stream: true });
    let text = '';
    for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
    t.equal(text, 'Echo: stream fall back', `streamed, after ${fault.status}`);
  }
});

t.test('a client abort mid-stream cancels the Azure upstream', async (t) => {
  // Events 20 ms apart: the client leaves after a few, long before the end.
  const slow = await startAzureMock({ sseDelayMs: 20 });
  t.teardown(() => slow.close());
  const g = await startGateway(config().replaceAll(azure.url, slow.url));
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const long = Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ');
  const ac = new AbortController();
  const s = await c.chat.completions.create({ model: 'azure/only', messages: user(long), stream: true }, { signal: ac.signal });
  const n = await readThenAbort(s, ac, 3);
  await until(() => slow.requests[0]?.aborted === true, 5000);
  t.ok(slow.requests[0].aborted, 'the upstream response was torn down before its end');
  t.equal(n, 3, 'the client left after 3 chunks');
});

t.test('environment defaults: AZURE_OPENAI_API_KEY, AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_VERSION', async (t) => {
  const yaml = `
providers:
  - name: azure
    family: azure
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: azure, model: gpt-4.1-mini-prod }]
`;
  const g = await startGateway(yaml, { AZURE_OPENAI_API_KEY: AZURE_KEY, AZURE_OPENAI_ENDPOINT: `${azure.url}/`, AZURE_OPENAI_API_VERSION: '2024-10-21' });
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  azure.reset();
  const r = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('env') });
  t.equal(r.choices[0].message.content, 'Echo: env');
  t.equal(azure.requests[0].path, '/openai/deployments/gpt-4.1-mini-prod/chat/completions');
  t.equal(azure.requests[0].query.get('api-version'), '2024-10-21');
  const g2 = await startGateway(yaml, {});
  t.teardown(() => g2.close());
  t.match(g2.gw.core, {}, 'starts without Azure credentials');
  const e: any = await new OpenAI({ apiKey: CLIENT_KEY, baseURL: g2.baseURL, maxRetries: 0 }).chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('x') }).catch((e) => e);
  t.equal(e.status, 503);
  t.match(e.error.message, /no API key configured \(api_key or AZURE_OPENAI_API_KEY\)/);
  const bad = await startGateway(yaml, { AZURE_OPENAI_API_KEY: AZURE_KEY, AZURE_OPENAI_ENDPOINT: azure.url, AZURE_OPENAI_API_VERSION: 'v1' }).catch((e) => e);
  t.match(bad.problems, [{ path: 'providers.0.api_version', message: /dated API version.*\(from AZURE_OPENAI_API_VERSION\)/ }]);
});

t.test('a deployment without credentials is skipped for the next one', async (t) => {
  const yaml = config().replace(`    base_url: ${azure.url}\n    api_key: ${AZURE_KEY}\n`, `    base_url: ${azure.url}\n`);
  const g = await startGateway(yaml);
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const r: any = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: user('skip'), debug: ['routing'] } as any);
  t.equal(r.choices[0].message.content, 'Echo: skip');
  t.match(r.debug.routing.attempts, [
    { provider: 'azure', status: 'skipped', error: /no API key configured/ },
    { provider: 'openai', status: 'succeeded' },
  ]);
});

t.test('/v1/models lists a model once, whatever serves it', async (t) => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  t.equal(ids.filter((id) => id === 'openai/gpt-4.1-mini').length, 1, 'two deployments (Azure, OpenAI), one entry');
  t.equal(new Set(ids).size, ids.length);
  t.same(Object.keys(list.data.find((m) => m.id === 'openai/gpt-4.1-mini')!).sort(), Object.keys(list.data.find((m) => m.id === 'azure/only')!).sort(), 'the same shape');
});

t.test('the shipped gateway.yaml with only Azure credentials: gpt-4.1-mini and gpt-5-mini served by Azure', async (t) => {
  const { readFileSync } = await import('node:fs');
  const shippedAzure = await startAzureMock({ deployments: { 'gpt-4.1-mini': 'gpt-4.1-mini', 'gpt-5-mini': 'gpt-5-mini' } });
  t.teardown(() => shippedAzure.close());
  const yaml = readFileSync(new URL('../../gateway.yaml', import.meta.url), 'utf8');
  const g = await startGateway(yaml, { AZURE_OPENAI_API_KEY: AZURE_KEY, AZURE_OPENAI_ENDPOINT: shippedAzure.url, GATEWAY_RESPONSES_DB: ':memory:' });
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  for (const model of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini']) {
    const r: any = await c.chat.completions.create({ model, messages: user(`shipped ${model}`), debug: ['routing'] } as any);
    t.equal(r.choices[0].message.content, `Echo: shipped ${model}`);
    t.equal(shippedAzure.requests.at(-1)!.path, '/openai/v1/chat/completions', 'the v1 API without AZURE_OPENAI_API_VERSION');
    t.equal(shippedAzure.requests.at(-1)!.body.model, model.slice('openai/'.length), 'the deployment name');
    t.match(r.debug.routing.attempts, [{ provider: 'openai', status: 'skipped' }, { provider: 'azure', status: 'succeeded' }], `${model}: OpenAI without a key is skipped`);
  }
  const ids = (await c.models.list()).data.map((m) => m.id);
  t.equal(ids.filter((id) => id === 'openai/gpt-5-mini').length, 1, 'listed once');
});
