// Exact usage and cost, every request (issue 19, sections 1 and 2), with the
// SHIPPED gateway.yaml (its catalog prices) pointed at the mocks, driven by the
// official openai SDK: the same answer costs the same streamed or not, with or
// without include_usage, on every family and endpoint; a cut or abandoned
// stream keeps the usage seen so far, marked partial.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import YAML from 'yaml';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { openAIImagesRoute } from './mocks/openai-images.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGeminiImagesMock } from './mocks/gemini-images.js';
import { GEMINI_KEY } from './mocks/gemini.js';
import { startBedrockMock, BEDROCK_CREDENTIALS } from './mocks/bedrock.js';
import { startGateway, CLIENT_KEY, until, readThenAbort, openAIConfig } from './helpers/gateway.js';
import { costOf, fromChatUsage, zeroUsage, type RequestRecord, type Usage } from '../src/usage.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const responses = createResponsesMock();
const [oai, ant, gem, bed] = await Promise.all([
  startOpenAIMock({ routes: { '/v1/responses': responses.handler, '/v1/images/generations': openAIImagesRoute() } }),
  startAnthropicMock(),
  startGeminiImagesMock(),
  startBedrockMock(),
]);
const gw = await startGateway(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'), {
  OPENAI_BASE_URL: `${oai.url}/v1`,
  OPENAI_API_KEY: OPENAI_KEY,
  ANTHROPIC_BASE_URL: ant.url,
  ANTHROPIC_API_KEY: ANTHROPIC_KEY,
  GEMINI_BASE_URL: gem.url,
  GEMINI_API_KEY: GEMINI_KEY,
  AWS_ACCESS_KEY_ID: BEDROCK_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: BEDROCK_CREDENTIALS.secretAccessKey,
  BEDROCK_BASE_URL: bed.url,
  GATEWAY_RESPONSES_DB: ':memory:',
});
t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), ant.close(), gem.close(), bed.close()]);
});
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });

/** The record of the request whose id the client saw (written when the response closes). */
async function recordOf(id: string): Promise<RequestRecord> {
  await until(() => gw.records.some((r) => r.request_id === id), 5000);
  return gw.records.find((r) => r.request_id === id)!;
}

const shipped = YAML.parse(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'));
/** The prices the shipped gateway.yaml states for a model. */
function shippedPricing(id: string): Record<string, number> {
  return shipped.models.find((m: { id: string }) => m.id === id).pricing;
}

// One family each: OpenAI, Anthropic, Google (Gemini API) and Bedrock.
const CHAT = [
  { model: 'openai/gpt-4.1-mini', provider: 'openai', priced: true },
  { model: 'anthropic/claude-sonnet-4-5', provider: 'anthropic', priced: true },
  { model: 'google/gemini-2.5-flash', provider: 'google', priced: true },
  { model: 'amazon/nova-pro', provider: 'bedrock', priced: true },
];

for (const { model, provider, priced } of CHAT) {
  t.test(`${model}: usage and cost are the same streamed or not, with or without include_usage`, async (t) => {
    const messages = [{ role: 'user' as const, content: 'Say hello to the usage meter' }];
    const json = await client.chat.completions
      .create({ model, messages })
      .withResponse()
      .then((r) => ({ id: r.response.headers.get('x-request-id')!, body: r.data }));
    const plain = await recordOf(json.id);

    // Streamed, the client not asking for usage: the gateway asks for it, and the client gets no usage chunk.
    const s1 = await client.chat.completions.create({ model, messages, stream: true }).withResponse();
    let usageSeen = false;
    for await (const c of s1.data) if ('usage' in c) usageSeen = true;
    t.notOk(usageSeen, 'no chunk carries usage when the client did not ask for it');
    const quiet = await recordOf(s1.response.headers.get('x-request-id')!);

    // Streamed with include_usage: the client gets the usage chunk.
    const s2 = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } }).withResponse();
    let chunkUsage: OpenAI.CompletionUsage | undefined;
    for await (const c of s2.data) if (c.usage) chunkUsage = c.usage;
    const asked = await recordOf(s2.response.headers.get('x-request-id')!);

    t.ok(json.body.usage!.prompt_tokens > 0 && json.body.usage!.completion_tokens > 0, 'the JSON answer reports usage');
    t.same(chunkUsage, json.body.usage, "the usage chunk says what the JSON answer's usage says");
    t.same(plain.usage, fromChatUsage(json.body.usage as never), 'the record holds the usage the client saw');
    t.same(quiet.usage, plain.usage, 'streamed without include_usage: the same usage');
    t.same(asked.usage, plain.usage, 'streamed with include_usage: the same usage');
    for (const r of [plain, quiet, asked]) {
      t.equal(r.usage_source, 'reported');
      t.equal(r.provider, provider);
      t.equal(r.model, model);
      t.equal(r.status, 200);
      t.equal(r.endpoint, 'chat_completions');
      t.equal(r.key, 'env-1');
      t.equal(r.attempts, 1);
      t.type(r.ttfb_ms, 'number');
    }
    t.notOk(plain.stream);
    t.ok(quiet.stream && asked.stream);
    if (priced) {
      const p = shippedPricing(model);
      const u = plain.usage!;
      const expected = ((u.input_tokens - u.cached_input_tokens - u.cache_write_tokens) * p.input + u.cached_input_tokens * (p.cached_input ?? 0) + u.output_tokens * p.output) / 1e6;
      t.ok(Math.abs(plain.cost_usd! - expected) < 1e-9, `cost ${plain.cost_usd} from the catalog prices (${expected})`);
      t.ok(plain.cost_usd! > 0);
    } else t.equal(plain.cost_usd, null, 'a model without prices costs null');
    t.equal(quiet.cost_usd, plain.cost_usd, 'same cost streamed without include_usage');
    t.equal(asked.cost_usd, plain.cost_usd, 'same cost streamed with include_usage');
    const id1 = s1.response.headers.get('x-request-id');
    await until(() => gw.logs.some((l) => l.request_id === id1));
    const line = gw.logs.find((l) => l.request_id === id1);
    t.same(line?.usage, plain.usage, 'the access-log line carries the usage by kind');
    t.equal(line?.cost_usd ?? null, plain.cost_usd);
  });
}

t.test('the OpenAI upstream is asked for usage on a stream whose client did not ask', async (t) => {
  oai.reset();
  const s = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], stream: true });
  for await (const _ of s);
  t.same(oai.requests.at(-1)!.body.stream_options, { include_usage: true });
});

for (const model of ['openai/gpt-4.1-mini', 'anthropic/claude-sonnet-4-5']) {
  t.test(`${model} on /v1/responses: the same usage and cost streamed or not`, async (t) => {
    const input = 'Tell the usage meter something';
    const json = await client.responses.create({ model, input, store: false }).withResponse();
    const plain = await recordOf(json.response.headers.get('x-request-id')!);
    const s = await client.responses.create({ model, input, store: false, stream: true }).withResponse();
    let final: OpenAI.Responses.Response | undefined;
    for await (const e of s.data) if (e.type === 'response.completed') final = e.response;
    const streamed = await recordOf(s.response.headers.get('x-request-id')!);
    t.ok(json.data.usage!.input_tokens > 0);
    t.same(final!.usage, json.data.usage, 'the streamed response reports the same usage');
    t.equal(plain.usage!.input_tokens, json.data.usage!.input_tokens);
    t.equal(plain.usage!.output_tokens, json.data.usage!.output_tokens);
    t.same(streamed.usage, plain.usage);
    t.equal(streamed.usage_source, 'reported');
    t.equal(plain.endpoint, 'responses');
    t.ok(plain.cost_usd! > 0);
    t.equal(streamed.cost_usd, plain.cost_usd);
  });
}

for (const model of ['anthropic/claude-sonnet-4-5', 'google/gemini-2.5-flash']) {
  t.test(`${model} on /v1/messages: the same usage and cost streamed or not`, async (t) => {
    const anthropic = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const messages = [{ role: 'user' as const, content: 'Tell the usage meter something' }];
    const json = await anthropic.messages.create({ model, max_tokens: 200, messages }).withResponse();
    const plain = await recordOf(json.response.headers.get('x-request-id')!);
    const s = await anthropic.messages.create({ model, max_tokens: 200, messages, stream: true }).withResponse();
    for await (const _ of s.data);
    const streamed = await recordOf(s.response.headers.get('x-request-id')!);
    const u = json.data.usage;
    t.equal(plain.usage!.input_tokens, u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0));
    t.equal(plain.usage!.output_tokens, u.output_tokens);
    t.equal(plain.endpoint, 'messages');
    t.same(streamed.usage, plain.usage, 'the stream is accounted the same');
    t.equal(streamed.usage_source, 'reported');
    t.ok(plain.cost_usd! > 0);
    t.equal(streamed.cost_usd, plain.cost_usd);
  });
}

t.test('web searches are counted and priced (Responses web_search_preview on gpt-5-mini)', async (t) => {
  const r = await client.responses
    .create({ model: 'openai/gpt-5-mini', input: 'What is new today? search the web', tools: [{ type: 'web_search_preview' }], store: false })
    .withResponse();
  const rec = await recordOf(r.response.headers.get('x-request-id')!);
  t.ok(r.data.output.some((o) => o.type === 'web_search_call'), 'the model searched');
  t.equal(rec.usage!.web_searches, 1);
  const u = rec.usage!;
  const p = shippedPricing('openai/gpt-5-mini');
  const expected = ((u.input_tokens - u.cached_input_tokens) * p.input + u.cached_input_tokens * p.cached_input + u.output_tokens * p.output) / 1e6 + p.web_search;
  t.ok(Math.abs(rec.cost_usd! - expected) < 1e-9, `one search priced at ${p.web_search}`);
});

t.test('the shipped catalog prices every model it serves, and every web search a model can run', async (t) => {
  for (const m of shipped.models as { id: string; status?: string; pricing?: Record<string, number>; capabilities?: Record<string, unknown> }[]) {
    if (m.status === 'retired') continue;
    t.ok(m.pricing && Object.keys(m.pricing).length, `${m.id} has prices`);
    if (m.capabilities?.web_search) t.ok(m.pricing?.web_search !== undefined || m.pricing?.web_search_request !== undefined, `${m.id} prices its web searches`);
  }
});

// Google Search grounding: Gemini lists the queries it ran (the mock, like
// Gemini, repeats one and adds an empty string); the distinct non-empty ones
// are the searches. Gemini 2.x is billed per grounded request, Gemini 3 per query.
for (const { model, perRequest } of [
  { model: 'google/gemini-2.5-flash', perRequest: true },
  { model: 'google/gemini-3-pro-preview', perRequest: false },
]) {
  t.test(`${model}: Google Search grounding counted and priced, streamed or not`, async (t) => {
    const input = 'What is new today? search the web';
    const tools: OpenAI.Responses.Tool[] = [{ type: 'web_search_preview' }];
    const r = await client.responses.create({ model, input, tools, store: false }).withResponse();
    const plain = await recordOf(r.response.headers.get('x-request-id')!);
    t.equal(plain.usage!.web_searches, 2, 'two distinct non-empty queries');
    t.same(r.data.usage && (r.data.usage as unknown as { server_tool_use?: unknown }).server_tool_use, { web_search_requests: 2 }, 'the answer reports them');
    const s = await client.responses.create({ model, input, tools, store: false, stream: true }).withResponse();
    for await (const _ of s.data);
    const streamed = await recordOf(s.response.headers.get('x-request-id')!);
    t.same(streamed.usage, plain.usage, 'the stream is accounted the same');
    const p = shippedPricing(model);
    const u = plain.usage!;
    const tokens = ((u.input_tokens - u.cached_input_tokens) * p.input + u.cached_input_tokens * p.cached_input + u.output_tokens * p.output) / 1e6;
    const searches = perRequest ? p.web_search_request : 2 * p.web_search;
    t.ok(searches > 0, 'the catalog prices the searches');
    t.ok(Math.abs(plain.cost_usd! - (tokens + searches)) < 1e-9, `cost ${plain.cost_usd}: tokens ${tokens} + searches ${searches}`);
    t.equal(streamed.cost_usd, plain.cost_usd);
  });
}

t.test('images: token-priced (gpt-image-1) and image-priced (Imagen) generations', async (t) => {
  const a = await client.images.generate({ model: 'openai/gpt-image-1', prompt: 'a red square', n: 2, size: '1024x1024' }).withResponse();
  const ra = await recordOf(a.response.headers.get('x-request-id')!);
  t.equal(ra.usage!.images, 2);
  t.equal(ra.usage!.output_image_tokens, a.data.usage!.output_tokens_details!.image_tokens);
  t.equal(ra.endpoint, 'images_generations');
  const p = shippedPricing('openai/gpt-image-1');
  const u = ra.usage!;
  const textIn = u.input_tokens - u.input_image_tokens - u.cached_input_tokens;
  const expected = (textIn * p.input + u.input_image_tokens * p.input_image + u.output_image_tokens * p.output_image) / 1e6;
  t.ok(Math.abs(ra.cost_usd! - expected) < 1e-9, `gpt-image-1 priced by its tokens (${ra.cost_usd})`);

  const b = await client.images.generate({ model: 'google/imagen-4.0-generate-001', prompt: 'a blue circle', n: 3 }).withResponse();
  const rb = await recordOf(b.response.headers.get('x-request-id')!);
  t.equal(rb.usage!.images, 3);
  t.equal(rb.cost_usd, 0.12, 'Imagen: 3 images at $0.04');
});

t.test('a stream the upstream cuts keeps the usage seen so far, marked partial', async (t) => {
  const model = 'anthropic/claude-sonnet-4-5';
  const messages = [{ role: 'user' as const, content: 'Tell me a long story about usage meters and their many friends' }];
  const whole = await client.chat.completions.create({ model, messages });
  ant.fail({ cutAfterEvents: 4 });
  const s = await client.chat.completions.create({ model, messages, stream: true }).withResponse();
  await t.rejects(
    (async () => {
      for await (const _ of s.data);
    })(),
    'the client sees the stream break',
  );
  const rec = await recordOf(s.response.headers.get('x-request-id')!);
  t.equal(rec.usage_source, 'partial');
  t.equal(rec.usage!.input_tokens, whole.usage!.prompt_tokens, 'the input tokens Anthropic reported at message_start');
  t.ok(rec.usage!.output_tokens < whole.usage!.completion_tokens, 'fewer output tokens than the whole answer');
  t.ok(rec.cost_usd! > 0, 'what was seen is priced');
  t.ok(rec.error_type, `the record names the error (${rec.error_type})`);
  await until(() => gw.logs.some((l) => l.request_id === rec.request_id));
  const line = gw.logs.find((l) => l.request_id === rec.request_id);
  t.equal(line?.usage_partial, true, 'the access-log line says the usage is partial');

  // OpenAI reports usage only at the end: a cut stream has none, still marked partial.
  oai.fail({ cutAfterEvents: 2 });
  const o = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages, stream: true }).withResponse();
  await t.rejects(
    (async () => {
      for await (const _ of o.data);
    })(),
  );
  const ro = await recordOf(o.response.headers.get('x-request-id')!);
  t.equal(ro.usage_source, 'partial');
  t.equal(ro.usage, null, 'no usage was reported before the cut');
  t.equal(ro.cost_usd, null, 'no usage: no cost, not a guess');
});

t.test('a stream the client abandons keeps the usage seen so far, marked partial', async (t) => {
  const model = 'google/gemini-2.5-flash';
  const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  const messages = [{ role: 'user' as const, content: long }];
  const whole = await client.chat.completions.create({ model, messages });
  // Two events, then the upstream goes quiet (the connection stays open): the client gives up.
  gem.fail({ silentAfterEvents: 2 });
  const ac = new AbortController();
  const s = await client.chat.completions.create({ model, messages, stream: true }, { signal: ac.signal }).withResponse();
  const n = await readThenAbort(s.data, ac, 1);
  t.ok(n >= 1, `the client left after ${n} chunk(s)`);
  const rec = await recordOf(s.response.headers.get('x-request-id')!);
  t.equal(rec.usage_source, 'partial');
  t.equal(rec.error_type, 'client_closed');
  t.equal(rec.usage!.input_tokens, whole.usage!.prompt_tokens, "Gemini's running usage: the whole prompt");
  t.ok(rec.usage!.output_tokens < whole.usage!.completion_tokens, 'part of the output');
  t.ok(rec.cost_usd! > 0);
});

t.test('a provider marked stream_usage: false is never sent stream_options', async (t) => {
  const compat = await startOpenAIMock();
  t.teardown(() => compat.close());
  const g = await startGateway(
    openAIConfig(compat.url).replace('    retries: 0', '    retries: 0\n    stream_usage: false'),
  );
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const s = await c.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }).withResponse();
  for await (const _ of s.data);
  t.notOk('stream_options' in compat.requests.at(-1)!.body, 'the option was not sent');
  await until(() => g.records.length === 1);
  t.equal(g.records[0].usage, null, 'the upstream reported no usage');
});

t.test('costOf: prices by kind, long-context tier, per image, and null without a price', async (t) => {
  const u = (o: Partial<Usage>): Usage => ({ ...zeroUsage(), ...o });
  const near = (a: number | null, b: number, msg?: string) => t.ok(a !== null && Math.abs(a - b) < 1e-9, `${msg ?? 'cost'}: ${a} ≈ ${b}`);
  const p = { input: 3, cached_input: 0.3, cache_write: 3.75, output: 15 };
  near(costOf(u({ input_tokens: 1_000_000, cached_input_tokens: 200_000, cache_write_tokens: 100_000, output_tokens: 10_000 }), p), 0.7 * 3 + 0.2 * 0.3 + 0.1 * 3.75 + 0.01 * 15);
  near(costOf(u({ input_tokens: 10, output_tokens: 5, reasoning_tokens: 3 }), p), (10 * 3 + 5 * 15) / 1e6, 'reasoning tokens are output tokens');
  t.equal(costOf(u({ input_tokens: 10, web_searches: 1 }), p), null, 'a web search without a price: null');
  near(costOf(u({ input_tokens: 1_000_000, web_searches: 3 }), { input: 1, web_search: 0.014 }), 1 + 3 * 0.014, 'per search');
  near(costOf(u({ input_tokens: 1_000_000, web_searches: 3 }), { input: 1, web_search_request: 0.035 }), 1 + 0.035, 'per grounded request, however many searches');
  near(costOf(u({ input_tokens: 1_000_000 }), { input: 1, web_search_request: 0.035 }), 1, 'no search: no grounding fee');
  t.equal(costOf(u({ input_tokens: 10 }), undefined), null, 'no prices: null');
  t.equal(costOf(u({ input_tokens: 10, cached_input_tokens: 5 }), { input: 1, output: 1 }), null, 'cached input without its price: null, not the input price');
  const tiered = { input: 1.25, output: 10, long_context: { threshold: 200_000, input: 2.5, output: 15 } };
  near(costOf(u({ input_tokens: 200_000, output_tokens: 1000 }), tiered), 0.25 + 0.01);
  near(costOf(u({ input_tokens: 300_000, output_tokens: 1000 }), tiered), 0.75 + 0.015, 'above the threshold the long-context prices apply');
  near(costOf(u({ images: 2 }), { image: 0.04 }), 0.08);
  near(costOf(u({ input_tokens: 10, images: 1, output_tokens: 100, output_image_tokens: 100 }), { input: 5, output_image: 40 }), (50 + 4000) / 1e6, 'token-priced images are priced by their tokens');
});
