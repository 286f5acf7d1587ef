// POST /v1/responses/input_tokens (the openai SDK's responses.inputTokens.count)
// on every family: the provider's own counting endpoint where it has one
// (OpenAI /v1/responses/input_tokens, Anthropic /v1/messages/count_tokens,
// Gemini :countTokens), the gateway's local count otherwise, and the local
// count when a provider's counting endpoint fails. The counting endpoints of
// the strict mocks are first shown faithful with each provider's official SDK.
import t from 'tap';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startAnthropicMock, ANTHROPIC_KEY, promptTokens } from './mocks/anthropic.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { startGateway, until, CLIENT_KEY } from './helpers/gateway.js';
import { countBodyFromChat } from '../plugins/providers/openai/count.js';
import { countChatTokens, estimateTokens } from '../src/tokens.js';

type Any = any;

const OTHER_KEY = 'gw-test-other-client-key-987654';
const COMPAT_KEY = 'sk-test-compat-0123456789';

const responsesMock = createResponsesMock();
const oai = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler, '/v1/responses/input_tokens': responsesMock.countHandler } });
const compat = await startOpenAIMock({ key: COMPAT_KEY, models: ['llama-3.3-70b'] });
const anth = await startAnthropicMock();
const gem = await startGeminiMock();

const gw = await startGateway(
  `
providers:
  - { name: openai, family: openai, base_url: "${oai.url}/v1", api_key: ${OPENAI_KEY}, region: us-east, timeout_ms: 3000, retries: 0 }
  - { name: compat, family: openai-compatible, base_url: "${compat.url}/v1", api_key: ${COMPAT_KEY}, region: eu, timeout_ms: 3000, retries: 0 }
  - { name: anthropic, family: anthropic, base_url: "${anth.url}", api_key: ${ANTHROPIC_KEY}, region: us, timeout_ms: 3000, retries: 0 }
  - { name: google, family: google, base_url: "${gem.url}", api_key: ${GEMINI_KEY}, region: us, timeout_ms: 3000, retries: 0 }
routing: { max_retry_wait_ms: 200, failure_threshold: 1000 }
storage: { responses_db: ":memory:" }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: compat/llama
    deployments: [{ provider: compat, model: llama-3.3-70b }]
  - id: anthropic/claude-sonnet-4-5
    capabilities: { thinking: true }
    max_output_tokens: 64000
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
  - id: google/gemini-2.5-flash
    capabilities: { thinking: true }
    deployments: [{ provider: google, model: gemini-2.5-flash }]
`,
  { GATEWAY_API_KEYS: `${CLIENT_KEY},${OTHER_KEY}` },
);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
const other = new OpenAI({ apiKey: OTHER_KEY, baseURL: gw.baseURL, maxRetries: 0 });

t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), compat.close(), anth.close(), gem.close()]);
});
t.beforeEach(() => {
  oai.reset();
  compat.reset();
  anth.reset();
  gem.reset();
});

const weather = { type: 'function' as const, name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false };
const request = { instructions: 'You are terse.', input: 'What is the weather in Paris?', tools: [weather] };
const last = (m: { requests: { path: string; body: Any }[] }) => m.requests.at(-1)!;

t.test('the mocks count as the real APIs do, driven by the official SDKs', async (t) => {
  // The SDK's apiKey goes out as a Bearer token; the API key header is x-api-key (as the mock checks).
  // The API version is the one the gateway's Anthropic plugin is written against.
  const anthropic = new Anthropic({ apiKey: null, defaultHeaders: { 'x-api-key': ANTHROPIC_KEY, 'anthropic-version': '2023-06-01' }, baseURL: anth.url, maxRetries: 0 });
  const params = { model: 'claude-sonnet-4-5', system: 'You are terse.', messages: [{ role: 'user' as const, content: 'Hello there' }] };
  const counted = await anthropic.messages.countTokens(params);
  t.equal(counted.input_tokens, promptTokens(params), 'Anthropic: input_tokens of the prompt');
  t.equal(last(anth).path, '/v1/messages/count_tokens');
  await t.rejects(anthropic.messages.countTokens({ ...params, max_tokens: 100 } as Any), { status: 400, message: /max_tokens: Extra inputs are not permitted/ }, 'Anthropic: no generation settings');
  await t.rejects(anthropic.messages.countTokens({ ...params, messages: [] }), { status: 400 } as Any, 'Anthropic: messages required');

  const google = new GoogleGenAI({ apiKey: GEMINI_KEY, httpOptions: { baseUrl: gem.url } });
  const g = await google.models.countTokens({ model: 'gemini-2.5-flash', contents: 'Hello there' });
  t.ok(g.totalTokens! > 0, 'Gemini: totalTokens of contents');
  t.match(last(gem).path, /\/v1beta\/models\/gemini-2\.5-flash:countTokens$/);
  t.same(Object.keys(last(gem).body), ['contents'], 'the SDK sends {contents}');
  // What the SDK refuses to send, the API refuses too: the generate request's top-level fields.
  const raw = await fetch(`${gem.url}/v1beta/models/gemini-2.5-flash:countTokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': GEMINI_KEY },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }], systemInstruction: { parts: [{ text: 'x' }] } }),
  });
  t.equal(raw.status, 400);
  t.match(await raw.json(), { error: { message: /Unknown name "systemInstruction"/ } });
  const both = await fetch(`${gem.url}/v1beta/models/gemini-2.5-flash:countTokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': GEMINI_KEY },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generateContentRequest: { model: 'models/gemini-2.5-flash', contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } }),
  });
  t.equal(both.status, 400, 'contents and generateContentRequest are exclusive');

  const openai = new OpenAI({ apiKey: OPENAI_KEY, baseURL: `${oai.url}/v1`, maxRetries: 0 });
  const o = await openai.responses.inputTokens.count({ model: 'gpt-4.1-mini', input: 'Hello there', instructions: 'You are terse.' });
  t.equal(o.object, 'response.input_tokens');
  t.ok(o.input_tokens > 0);
  await t.rejects(openai.responses.inputTokens.count({ model: 'gpt-4.1-mini', input: 'hi', temperature: 0.5 } as Any), { status: 400, param: 'temperature' } as Any, 'OpenAI: generation settings are unknown parameters there');
  // A chat IR request written as the counting endpoint's body (other ingresses) is one OpenAI accepts.
  const ir = {
    model: 'gpt-4.1-mini',
    messages: [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'Weather?' }, { type: 'image_url' as const, image_url: { url: 'https://example.com/a.png', detail: 'low' as const } }] },
      { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool' as const, tool_call_id: 'call_1', content: 'sunny' },
      { role: 'assistant' as const, content: 'It is sunny.' },
    ],
    tools: [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object' } } }],
    tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
    parallel_tool_calls: false,
    response_format: { type: 'json_schema' as const, json_schema: { name: 'w', schema: { type: 'object' } } },
  };
  const fromChat = await openai.responses.inputTokens.count(countBodyFromChat(ir) as Any);
  t.ok(fromChat.input_tokens > 0, 'the chat-IR form is accepted by the counting endpoint');
});

t.test('OpenAI family: the provider counts the body the generation would get', async (t) => {
  const r = await client.responses.inputTokens.count({ model: 'openai/gpt-4.1-mini', ...request });
  t.equal(r.object, 'response.input_tokens');
  const up = last(oai);
  t.equal(up.path, '/v1/responses/input_tokens');
  t.equal(up.body.model, 'gpt-4.1-mini', 'model patched');
  t.same(Object.keys(up.body).sort(), ['input', 'instructions', 'model', 'tools']);
  t.equal(r.input_tokens, JSON.stringify([request.instructions, up.body.tools, { role: 'user', content: request.input }]).length >> 2, "the provider's number");
  await until(() => gw.logs.some((l) => l.path === '/v1/responses/input_tokens' && l.token_count === 'provider'));

  // A provider 400 is the caller's: it comes back, no local count.
  await t.rejects(
    client.responses.inputTokens.count({ model: 'openai/gpt-4.1-mini', input: [{ type: 'function_call_output', call_id: 'call_nope', output: 'x' }] }),
    { status: 400, message: /No tool call found/ },
  );
});

t.test('Anthropic family: /v1/messages/count_tokens with the prompt only', async (t) => {
  const r = await client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', ...request, reasoning: { effort: 'low' } });
  const up = last(anth);
  t.equal(up.path, '/v1/messages/count_tokens');
  t.notOk('max_tokens' in up.body, 'no generation settings');
  t.match(up.body.system, [{ type: 'text', text: request.instructions }]);
  t.equal(up.body.tools[0].name, 'get_weather');
  t.match(up.body.thinking, { type: 'enabled' }, 'thinking is part of what is counted');
  t.equal(r.input_tokens, promptTokens(up.body));
});

t.test('Gemini family: :countTokens with the whole request inside generateContentRequest', async (t) => {
  const r = await client.responses.inputTokens.count({ model: 'google/gemini-2.5-flash', ...request });
  const up = last(gem);
  t.match(up.path, /gemini-2\.5-flash:countTokens$/);
  t.same(Object.keys(up.body), ['generateContentRequest']);
  t.equal(up.body.generateContentRequest.model, 'models/gemini-2.5-flash');
  t.ok(up.body.generateContentRequest.systemInstruction, 'system instruction counted inside the request');
  t.ok(up.body.generateContentRequest.tools, 'tools counted');
  t.ok(r.input_tokens > 0);
});

t.test('a family without a counting endpoint is counted locally', async (t) => {
  const bare = await client.responses.inputTokens.count({ model: 'compat/llama', input: request.input });
  const full = await client.responses.inputTokens.count({ model: 'compat/llama', ...request });
  t.equal(compat.requests.length, 0, 'no upstream call');
  const expected = countChatTokens({ model: 'llama-3.3-70b', messages: [{ role: 'user', content: request.input }] }, estimateTokens);
  t.equal(bare.input_tokens, expected, 'the local estimate');
  t.ok(full.input_tokens > bare.input_tokens + estimateTokens(request.instructions), 'instructions and tools are counted');
  await until(() => gw.logs.some((l) => l.path === '/v1/responses/input_tokens' && l.token_count === 'local'));
});

t.test("a provider's failing count falls back to the local count of the same model", async (t) => {
  anth.fail({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, pathIncludes: 'count_tokens' });
  const r = await client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', input: 'Hello there' });
  t.equal(r.input_tokens, countChatTokens({ model: 'x', messages: [{ role: 'user', content: 'Hello there' }] }, estimateTokens));
  t.equal(anth.requests.length, 1, 'one try, no other target');
  gem.fail({ rawBody: '<html>upstream exploded</html>', pathIncludes: 'countTokens' });
  const g = await client.responses.inputTokens.count({ model: 'google/gemini-2.5-flash', input: 'Hello there' });
  t.equal(g.input_tokens, r.input_tokens, 'an answer that is not a count is counted locally too');
  oai.fail({ rawBody: '{"object": "response.input_tokens"}', pathIncludes: 'input_tokens' });
  const o = await client.responses.inputTokens.count({ model: 'openai/gpt-4.1-mini', input: 'Hello there' });
  t.equal(o.input_tokens, 4 + 2, 'OpenAI: counted locally with o200k_base (framing + 2 tokens)');
});

t.test('previous_response_id: the stored conversation is counted, for its owner only', async (t) => {
  const first = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: 'Remember the number 42.' });
  const alone = await client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', input: 'What was it?' });
  const withHistory = await client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', input: 'What was it?', previous_response_id: first.id });
  t.ok(withHistory.input_tokens > alone.input_tokens, 'history counted');
  t.equal(last(anth).body.messages.length, 3, 'user, assistant, user');
  const noInput = await client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', previous_response_id: first.id });
  t.ok(noInput.input_tokens > 0, 'input may be left out when continuing a conversation');
  await t.rejects(other.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5', input: 'x', previous_response_id: first.id }), { status: 404, param: 'previous_response_id' } as Any);
});

t.test('client errors name the field', async (t) => {
  await t.rejects(client.responses.inputTokens.count({ model: 'anthropic/claude-sonnet-4-5' }), { status: 400, param: 'input', code: 'missing_required_parameter' } as Any);
  await t.rejects(client.responses.inputTokens.count({ input: 'x' }), { status: 400, param: 'model' } as Any);
  await t.rejects(client.responses.inputTokens.count({ model: 'nope/nothing', input: 'x' }), { status: 404 } as Any);
  await t.rejects(client.responses.inputTokens.count({ model: 'compat/llama', input: [{ role: 'user', content: 5 }] as Any }), { status: 400, param: 'input[0].content' } as Any);
  const noKey = await fetch(`${gw.baseURL}/responses/input_tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(noKey.status, 401);
});

t.test('an unknown sub-path is a 404 whatever the method; a wrong method on a fixed path is a 405', async (t) => {
  const h = { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' };
  for (const [method, path] of [
    ['POST', '/v1/responses/resp_123'],
    ['PUT', '/v1/responses/resp_123'],
    ['POST', '/v1/responses/input_tokens/extra'],
    ['PATCH', '/v1/models/openai/gpt-4.1-mini'],
  ]) {
    const r = await fetch(`${gw.url}${path}`, { method, headers: h, body: method === 'GET' ? undefined : '{}' });
    t.equal(r.status, 404, `${method} ${path}`);
    t.match(await r.json(), { error: { type: 'not_found_error', code: 'unknown_route' } });
  }
  for (const [method, path] of [
    ['PUT', '/v1/responses/input_tokens'],
    ['GET', '/v1/chat/completions'],
  ]) {
    const r = await fetch(`${gw.url}${path}`, { method, headers: h, body: method === 'GET' ? undefined : '{}' });
    t.equal(r.status, 405, `${method} ${path}`);
    t.match(await r.json(), { error: { code: 'method_not_allowed' } });
  }
});
