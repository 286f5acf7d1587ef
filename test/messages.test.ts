// POST /v1/messages and /v1/messages/count_tokens, driven by the official
// @anthropic-ai/sdk: the same-API path to Anthropic (body patched, not
// rebuilt; anthropic-beta passed on), translations to OpenAI and Gemini
// (answers, streams, tool loops, thinking, images), Anthropic-shaped errors
// (also mid-stream), routing, count_tokens for every model.
import t from 'tap';
import Anthropic from '@anthropic-ai/sdk';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startOpenAIMock, chatReply, OPENAI_KEY } from './mocks/openai.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { startGateway, CLIENT_KEY, until, readThenAbort } from './helpers/gateway.js';
import { readSignature } from '../src/api/messages-map.js';
import { PING_INTERVAL_MS } from '../src/api/messages-stream.js';
import { sha256Hex } from '../src/config/load.js';

type Any = any;

const anth = await startAnthropicMock();
const oai = await startOpenAIMock();
const gem = await startGeminiMock();
// An OpenAI upstream that pauses between stream events (pings, client disconnect).
const slow = await startOpenAIMock({ routes: { '/v1/chat/completions': (req) => ({ ...chatReply(req.body, 'gpt-4.1-mini'), sseDelayMs: 40 }) } });
const SCOPED_KEY = 'gw-scoped-openai-only-0001';
const CHAT_ONLY_KEY = 'gw-chat-only-key-0002';
const gw = await startGateway(`
keys:
  - name: scoped
    sha256: ${sha256Hex(SCOPED_KEY)}
    models: ["openai/*"]
  - name: chat-only
    sha256: ${sha256Hex(CHAT_ONLY_KEY)}
    endpoints: [chat_completions]
providers:
  - name: compat
    family: openai-compatible
    base_url: ${oai.url}/v1
    api_key: ${OPENAI_KEY}
    timeout_ms: 3000
    retries: 0
  - name: openai-slow
    family: openai
    base_url: ${slow.url}/v1
    api_key: ${OPENAI_KEY}
    timeout_ms: 3000
    retries: 0
  - name: anthropic
    family: anthropic
    base_url: ${anth.url}
    api_key: ${ANTHROPIC_KEY}
    region: us
    timeout_ms: 3000
    retries: 0
  - name: openai
    family: openai
    base_url: ${oai.url}/v1
    api_key: ${OPENAI_KEY}
    region: us-east
    timeout_ms: 3000
    retries: 0
  - name: google
    family: google
    base_url: ${gem.url}
    api_key: ${GEMINI_KEY}
    region: us-central1
    timeout_ms: 3000
    retries: 0
routing:
  max_retry_wait_ms: 200
  failure_threshold: 1000
aliases:
  claude-sonnet-4-5-20250929: anthropic/claude-sonnet-4-5
  claude-3-5-haiku-latest: openai/gpt-4.1-mini
models:
  - id: anthropic/claude-sonnet-4-5
    modalities: { input: [text, image], output: [text] }
    capabilities: { thinking: true, tools: true, vision: true }
    max_output_tokens: 64000
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
  - id: anthropic/claude-broken
    deployments: [{ provider: anthropic, model: claude-does-not-exist }]
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
  - id: openai/chat-only
    endpoints: [chat_completions]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/slow
    deployments: [{ provider: openai-slow, model: gpt-4.1-mini }]
  - id: vllm/served-model
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
  - id: google/gemini-2.5-flash
    modalities: { input: [text, image], output: [text] }
    capabilities: { thinking: true, tools: true, vision: true }
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-2.5-flash }]
`);
const client = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await anth.close();
  await oai.close();
  await gem.close();
  await slow.close();
});
t.beforeEach(() => {
  anth.reset();
  oai.reset();
  gem.reset();
});

const SONNET = 'anthropic/claude-sonnet-4-5';
const weather = { name: 'get_weather', description: 'Current weather for a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } };
const create = (body: Any, opts?: Any): Promise<Any> => client.messages.create(body, opts) as Promise<Any>;
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

async function raw(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Any; text: string }> {
  const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: Any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** The SSE events of a raw stream, in order. */
function events(text: string): { event: string; data: Any }[] {
  return text
    .split('\n\n')
    .filter((f) => f.trim())
    .map((f) => {
      const event = /^event: (.*)$/m.exec(f)?.[1] ?? '';
      const data = JSON.parse(/^data: (.*)$/m.exec(f)?.[1] ?? 'null');
      return { event, data };
    });
}

t.test('Anthropic target: the body is patched, not rebuilt; model is the requested id', async (t) => {
  const body = {
    model: 'claude-sonnet-4-5-20250929',
    max_tokens: 2048,
    system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
    tools: [{ ...weather, cache_control: { type: 'ephemeral' } }, { type: 'web_search_20250305', name: 'web_search', max_uses: 2 }],
    thinking: { type: 'enabled', budget_tokens: 1024 },
    metadata: { user_id: 'u-1' },
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello there', cache_control: { type: 'ephemeral', ttl: '5m' } }] }],
  };
  const r = await client.messages.create(body as Any, { headers: { 'anthropic-beta': 'interleaved-thinking-2025-05-14' } });
  t.equal(r.model, 'claude-sonnet-4-5-20250929');
  t.match(r.id, /^msg_/);
  t.equal(r.type, 'message');
  t.equal(r.content[0].type, 'thinking');
  t.match(r.content[1], { type: 'text', text: 'Echo: Hello there' });
  t.equal(r.stop_reason, 'end_turn');
  t.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  const sent = anth.requests[0];
  t.same(sent.body, { ...body, model: 'claude-sonnet-4-5' }, 'only the model changed');
  t.equal(sent.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14');
  t.equal(sent.headers['x-api-key'], ANTHROPIC_KEY, "the provider's key, never the client's");

  // The signed thinking block goes back unchanged on the next turn (the mock verifies the signature).
  const next = await client.messages.create({
    ...(body as Any),
    messages: [...body.messages, { role: 'assistant', content: r.content }, { role: 'user', content: 'And again' }],
  });
  t.match(next.content[1], { type: 'text', text: 'Echo: And again' });
  t.same(anth.requests[1].body.messages[1].content, r.content);
});

t.test('Anthropic target: messages.stream() and finalMessage(); pings pass through', async (t) => {
  const stream = client.messages.stream({ model: SONNET, max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, tools: [weather], messages: [{ role: 'user', content: 'What is the weather in Paris and London?' }] });
  const final = await stream.finalMessage();
  t.equal(final.model, SONNET);
  t.equal(final.stop_reason, 'tool_use');
  const tools = final.content.filter((b) => b.type === 'tool_use') as Any[];
  t.same(tools.map((b) => b.input), [{ city: 'Paris' }, { city: 'London' }]);
  t.ok(final.usage.input_tokens > 0);
  const rawStream = await raw('/v1/messages', { model: SONNET, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
  const evs = events(rawStream.text);
  t.same([evs[0].event, evs[evs.length - 1].event], ['message_start', 'message_stop']);
  t.ok(evs.some((e) => e.event === 'ping'));
  t.equal(evs[0].data.message.model, SONNET);
});

t.test('Auth: x-api-key or Bearer; errors in Anthropic shape with their statuses', async (t) => {
  const bearer = await raw('/v1/messages', { model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': '', authorization: `Bearer ${CLIENT_KEY}` });
  t.equal(bearer.status, 200);
  const none = await raw('/v1/messages', { model: SONNET, max_tokens: 10, messages: [] }, { 'x-api-key': '' });
  t.equal(none.status, 401);
  t.match(none.json, { type: 'error', error: { type: 'authentication_error', message: /x-api-key/ } });
  const wrong = new Anthropic({ apiKey: 'nope', baseURL: gw.url, maxRetries: 0 });
  await t.rejects(wrong.messages.create({ model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }), Anthropic.AuthenticationError);

  const missing = await raw('/v1/messages', { model: SONNET, messages: [{ role: 'user', content: 'Hi' }] });
  t.equal(missing.status, 400);
  t.match(missing.json, { type: 'error', error: { type: 'invalid_request_error', message: "Missing required parameter: 'max_tokens'." } });
  const badBlock = await raw('/v1/messages', { model: SONNET, max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png' } }] }] });
  t.match(badBlock.json.error.message, /messages\[0\]\.content\[0\]\.source\.data/);
  const unknown = await raw('/v1/messages', { model: 'no/such-model', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] });
  t.equal(unknown.status, 404);
  t.match(unknown.json, { type: 'error', error: { type: 'not_found_error' } });
  await t.rejects(create({ model: 'openai/chat-only', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }), Anthropic.BadRequestError);
  // The provider's own 4xx comes back in the same shape.
  await t.rejects(create({ model: SONNET, max_tokens: 10, temperature: 0.5, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'Hi' }] }), { status: 400, error: { type: 'error', error: { type: 'invalid_request_error' } } } as Any);
});

t.test('A failure mid-stream ends with an error event, never message_stop', async (t) => {
  anth.streamError({ afterEvents: 4, type: 'overloaded_error', message: 'Overloaded' });
  const r = await raw('/v1/messages', { model: SONNET, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Hello you there' }] });
  const evs = events(r.text);
  t.equal(evs[evs.length - 1].event, 'error');
  t.match(evs[evs.length - 1].data, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  t.notOk(evs.some((e) => e.event === 'message_stop'));

  oai.fail({ cutAfterEvents: 3 });
  const cut = await raw('/v1/messages', { model: 'openai/gpt-4.1-mini', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'one two three four five six' }] });
  const cevs = events(cut.text);
  t.equal(cevs[0].event, 'message_start');
  t.equal(cevs[cevs.length - 1].event, 'error');
  t.match(cevs[cevs.length - 1].data.error, { type: 'api_error' });
  t.notOk(cevs.some((e) => e.event === 'message_stop'));
  anth.streamError({ afterEvents: 3 });
  const failing = client.messages.stream({ model: SONNET, max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] });
  await t.rejects(failing.finalMessage());
});

t.test('Routing: aliases, fallbacks in the body, debug, access log', async (t) => {
  const r: Any = await create({ model: 'anthropic/claude-broken', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], fallbacks: ['openai/gpt-4.1-mini'], debug: true } as Any);
  t.equal(r.model, 'anthropic/claude-broken');
  t.match(r.content, [{ type: 'text', text: 'Echo: Hi' }]);
  t.match(r.debug.routing.attempts, [{ model: 'anthropic/claude-broken', status: 'failed' }, { model: 'openai/gpt-4.1-mini', status: 'succeeded' }]);
  const viaExtra: Any = await create({ model: 'anthropic/claude-broken', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], extra: { fallbacks: ['google/gemini-2.5-flash'] } } as Any);
  t.match(viaExtra.content.find((b: Any) => b.type === 'text'), { text: /Hi/ });
  const aliased = await create({ model: 'claude-3-5-haiku-latest', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-gateway-user-id': 'user-7', 'anthropic-beta': 'prompt-caching-2024-07-31' } });
  t.equal(aliased.model, 'claude-3-5-haiku-latest');
  t.notOk(oai.requests[oai.requests.length - 1].headers['anthropic-beta'], 'beta flags go to Anthropic-family targets only');
  await until(() => gw.logs.some((l) => l.path === '/v1/messages' && l.user_id === 'user-7' && l.usage));
  const line = gw.logs.find((l) => l.path === '/v1/messages' && l.user_id === 'user-7')!;
  t.match(line, { model: 'openai/gpt-4.1-mini', provider: 'openai', status: 200, usage: { input_tokens: Number, output_tokens: Number } });
  t.notOk(JSON.stringify(gw.logs).includes(CLIENT_KEY), 'no key in the log');

  const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as Any;
  t.ok(models.data.find((m: Any) => m.id === SONNET).endpoints.includes('messages'));
  t.notOk(models.data.find((m: Any) => m.id === 'openai/chat-only').endpoints.includes('messages'));
});

t.test('OpenAI target: translated both ways, with a tool loop', async (t) => {
  const first: Any = await create({
    model: 'openai/gpt-4.1-mini',
    max_tokens: 200,
    system: 'Be brief.',
    tools: [weather],
    tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    stop_sequences: ['###'],
    temperature: 0.2,
    metadata: { user_id: 'u-42' },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  });
  t.equal(first.stop_reason, 'tool_use');
  const call = first.content.find((b: Any) => b.type === 'tool_use');
  t.same(call.input, { city: 'Paris' });
  const sent = oai.requests[0].body;
  t.same(sent.messages[0], { role: 'system', content: 'Be brief.' });
  t.same(sent.tools, [{ type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: weather.input_schema } }]);
  t.match(sent, { tool_choice: 'auto', parallel_tool_calls: false, stop: ['###'], temperature: 0.2, user: 'u-42', max_tokens: 200 });

  const second: Any = await create({
    model: 'openai/gpt-4.1-mini',
    max_tokens: 200,
    tools: [weather],
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: [{ type: 'text', text: 'Sunny, 21C' }] }, { type: 'text', text: 'Thanks!' }] },
    ],
  });
  t.equal(second.stop_reason, 'end_turn');
  const msgs = oai.requests[1].body.messages;
  t.match(msgs[1], { role: 'assistant', tool_calls: [{ id: call.id, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
  t.same(msgs[2], { role: 'tool', tool_call_id: call.id, content: 'Sunny, 21C' });
  t.same(msgs[3], { role: 'user', content: 'Thanks!' });
  t.match(second.usage, { input_tokens: Number, output_tokens: Number, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 });
});

t.test('OpenAI target: streamed tool arguments arrive whole; usage in message_start and message_delta', async (t) => {
  const r = await raw('/v1/messages', { model: 'openai/gpt-4.1-mini', max_tokens: 200, stream: true, tools: [weather], messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const evs = events(r.text);
  t.same(
    evs.map((e) => e.event).filter((e, i, a) => e !== 'content_block_delta' || a[i - 1] !== 'content_block_delta'),
    ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
  );
  t.ok(evs.every((e) => e.event === e.data.type), 'event names are the types');
  t.match(evs[0].data.message, { role: 'assistant', model: 'openai/gpt-4.1-mini', usage: { input_tokens: Number, output_tokens: Number } });
  const frags = evs.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => e.data.delta.partial_json);
  t.ok(frags.length > 1, 'one delta per upstream fragment');
  t.same(JSON.parse(frags.join('')), { city: 'Paris' });
  const delta = evs.find((e) => e.event === 'message_delta')!.data;
  t.equal(delta.delta.stop_reason, 'tool_use');
  t.ok(delta.usage.input_tokens > 0 && delta.usage.output_tokens > 0);

  const stream = client.messages.stream({ model: 'openai/gpt-4.1-mini', max_tokens: 200, messages: [{ role: 'user', content: 'Say hello world' }] });
  const texts: string[] = [];
  stream.on('text', (x) => texts.push(x));
  const final = await stream.finalMessage();
  t.equal((final.content[0] as Any).text, 'Echo: Say hello world');
  t.ok(texts.length > 1);
  t.ok(final.usage.output_tokens > 0);
});

t.test('Images go to OpenAI as image parts; thinking -> reasoning effort', async (t) => {
  await create({
    model: 'openai/gpt-5-mini',
    max_tokens: 300,
    thinking: { type: 'enabled', budget_tokens: 2048 },
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }, { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }, { type: 'text', text: 'What is this?' }] }],
  });
  const sent = oai.requests[0].body;
  t.same(sent.messages[0].content.slice(0, 2), [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }, { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }]);
  t.equal(sent.reasoning_effort, 'low');
  t.equal(sent.max_completion_tokens, 300);
  t.notOk('max_tokens' in sent);
});

t.test('Gemini target: thinking signed by the gateway goes back to Gemini only', async (t) => {
  const first: Any = await create({ model: 'google/gemini-2.5-flash', max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 4096 }, tools: [weather], messages: [{ role: 'user', content: 'What is the weather in Paris?' }] });
  t.equal(first.stop_reason, 'tool_use');
  const thinking = first.content.find((b: Any) => b.type === 'thinking');
  t.ok(thinking, 'a thinking block carries the signed state');
  t.equal(readSignature(thinking.signature)?.family, 'google');
  const call = first.content.find((b: Any) => b.type === 'tool_use');
  const history = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: first.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'Sunny' }] },
  ];
  const second: Any = await create({ model: 'google/gemini-2.5-flash', max_tokens: 2000, tools: [weather], messages: history });
  t.match(second.content.find((b: Any) => b.type === 'text'), { text: /Sunny/ });
  const parts = gem.requests[1].body.contents[1].parts;
  t.ok(parts.some((p: Any) => p.functionCall && p.thoughtSignature), "Gemini's signature restored on the call");

  // The same history to Anthropic: the gateway's signature is not sent; a note says so.
  const toClaude: Any = await create({ model: SONNET, max_tokens: 2000, tools: [weather], messages: history, debug: ['normalizations'] } as Any);
  t.equal(toClaude.stop_reason, 'end_turn');
  t.notOk(anth.requests[0].body.messages[1].content.some((b: Any) => b.type === 'thinking'));
  t.match(toClaude.debug.normalizations, [{ action: 'strip', param: 'messages' }]);

  // And to OpenAI: dropped with a note.
  const toOpenAI: Any = await create({ model: 'openai/gpt-4.1-mini', max_tokens: 200, tools: [weather], messages: history, debug: ['normalizations'] } as Any);
  t.ok(toOpenAI.debug.normalizations.some((n: Any) => n.param === 'messages[1].content[0]' && n.action === 'strip'));
});

t.test('Gemini target: stream with thinking deltas and a signature', async (t) => {
  const stream = client.messages.stream({ model: 'google/gemini-2.5-flash', max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: [{ role: 'user', content: 'Tell me something' }] });
  const final: Any = await stream.finalMessage();
  const thinking = final.content.filter((b: Any) => b.type === 'thinking');
  t.ok(thinking.length >= 1);
  t.ok(thinking.every((b: Any) => readSignature(b.signature)?.family === 'google'));
  t.ok(final.content.some((b: Any) => b.type === 'text' && b.text));
  t.ok(final.usage.output_tokens > 0);
});

t.test('count_tokens: provider counts for Anthropic and Gemini, local otherwise', async (t) => {
  const body = { system: 'You are a helpful assistant.', tools: [weather], messages: [{ role: 'user' as const, content: 'How many tokens is this?' }] };
  const a = await client.messages.countTokens({ model: SONNET, ...body });
  t.ok(a.input_tokens > 0);
  t.equal(anth.requests[0].path, '/v1/messages/count_tokens');
  t.same(anth.requests[0].body, { model: 'claude-sonnet-4-5', ...body });
  const g = await client.messages.countTokens({ model: 'google/gemini-2.5-flash', ...body });
  t.ok(g.input_tokens > 0);
  t.match(gem.requests[0].path, /:countTokens$/);
  const o = await client.messages.countTokens({ model: 'openai/gpt-4.1-mini', ...body });
  const bare = await client.messages.countTokens({ model: 'openai/gpt-4.1-mini', messages: body.messages });
  t.ok(o.input_tokens > bare.input_tokens + 10, 'tools and system are counted');
});

t.test('Per-key allow-lists; a wrong method answers in the same shape', async (t) => {
  const scoped = new Anthropic({ apiKey: SCOPED_KEY, baseURL: gw.url, maxRetries: 0 });
  t.match((await scoped.messages.create({ model: 'openai/gpt-4.1-mini', max_tokens: 20, messages: [{ role: 'user', content: 'Hi' }] })).content, [{ type: 'text' }]);
  await t.rejects(scoped.messages.create({ model: SONNET, max_tokens: 20, messages: [{ role: 'user', content: 'Hi' }] }), { status: 403, error: { error: { type: 'permission_error' } } } as Any);
  const chatOnly = await raw('/v1/messages', { model: SONNET, max_tokens: 20, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': CHAT_ONLY_KEY });
  t.equal(chatOnly.status, 403);
  t.match(chatOnly.json, { type: 'error', error: { type: 'permission_error', message: /messages/ } });
  const get = await fetch(`${gw.url}/v1/messages`, { headers: { 'x-api-key': CLIENT_KEY } });
  t.equal(get.status, 405);
  t.match(await get.json(), { type: 'error', error: { type: 'invalid_request_error' } });
});

t.test('Images: forwarded as they are to Anthropic, as inline data to Gemini', async (t) => {
  const content = [{ type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PNG } }, { type: 'text' as const, text: 'Describe it' }];
  const a = await create({ model: SONNET, max_tokens: 100, messages: [{ role: 'user', content }] });
  t.match(a.content[0].text, /\[image image\/png \d+ bytes\]/);
  t.same(anth.requests[0].body.messages[0].content, content);
  const g = await create({ model: 'google/gemini-2.5-flash', max_tokens: 100, messages: [{ role: 'user', content }] });
  t.match(g.content.find((b: Any) => b.type === 'text').text, /1 image/);
  t.same(gem.requests[0].body.contents[0].parts[0], { inlineData: { mimeType: 'image/png', data: PNG } });
  // Gemini reads PDFs too: a document block goes as inline data.
  const pdf = await create({ model: 'google/gemini-2.5-flash', max_tokens: 100, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' } }, { type: 'text', text: 'Summarize' }] }] });
  t.equal(pdf.stop_reason, 'end_turn');
  t.same(gem.requests[1].body.contents[0].parts[0], { inlineData: { mimeType: 'application/pdf', data: 'JVBERi0xLjQK' } });
});

t.test('Translated requests: every Messages field mapped, or dropped with a note', async (t) => {
  const r: Any = await create({
    model: 'google/gemini-2.5-flash',
    max_tokens: 300,
    top_k: 40,
    tools: [weather],
    tool_choice: { type: 'tool', name: 'get_weather' },
    service_tier: 'auto',
    messages: [
      { role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'The report says 42.' } }, { type: 'text', text: 'Weather please' }] },
    ],
    debug: ['normalizations'],
  } as Any);
  t.equal(r.stop_reason, 'tool_use');
  const sent = gem.requests[0].body;
  t.equal(sent.generationConfig.topK, 40, 'top_k is native on Gemini');
  t.same(sent.contents[0].parts[0], { text: 'The report says 42.' });
  t.match(sent.toolConfig.functionCallingConfig, { mode: 'ANY', allowedFunctionNames: ['get_weather'] });
  t.match(r.debug.normalizations, [{ param: 'service_tier', action: 'strip' }]);

  const call = r.content.find((b: Any) => b.type === 'tool_use');
  const o: Any = await create({
    model: 'openai/gpt-4.1-mini',
    max_tokens: 300,
    top_k: 5,
    tools: [weather],
    tool_choice: { type: 'none' },
    messages: [
      { role: 'user', content: 'Weather please' },
      { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, call] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, is_error: true, content: [{ type: 'text', text: 'city not found' }, { type: 'image', source: { type: 'url', url: 'https://example.com/map.png' } }] }] },
    ],
    debug: ['normalizations'],
  } as Any);
  t.equal(o.stop_reason, 'end_turn');
  const msgs = oai.requests[0].body.messages;
  t.same(msgs[2], { role: 'tool', tool_call_id: call.id, content: 'Error:\ncity not found' });
  t.same(msgs[3], { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/map.png' } }] });
  t.equal(oai.requests[0].body.tool_choice, 'none');
  t.notOk('top_k' in oai.requests[0].body);
  for (const param of ['top_k', 'messages[2].content[0].is_error', 'messages[2].content[0].content']) t.ok(o.debug.normalizations.some((n: Any) => n.param === param), `note for ${param}`);

  const pdf = await raw('/v1/messages', { model: 'openai/gpt-4.1-mini', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }] }] });
  t.equal(pdf.status, 400);
  t.match(pdf.json.error, { type: 'invalid_request_error', message: /messages\[0\]\.content\[0\]\.source/ });
  const server = await raw('/v1/messages', { model: 'openai/gpt-4.1-mini', max_tokens: 10, tools: [{ type: 'bash_20250124', name: 'bash' }], messages: [{ role: 'user', content: 'ls' }] });
  t.equal(server.status, 400);
  t.match(server.json.error.message, /tools\[0\]\.type/);
  // The same PDF and server tool go to Claude untouched (the provider judges them).
  const claude = await raw('/v1/messages', { model: SONNET, max_tokens: 10, tools: [{ type: 'web_search_20250305', name: 'web_search' }], messages: [{ role: 'user', content: 'Search' }] });
  t.equal(claude.status, 200);
});

t.test('A silent upstream gets pings; a client that leaves cancels the upstream', async (t) => {
  const before = PING_INTERVAL_MS.value;
  PING_INTERVAL_MS.value = 5; // the slow upstream pauses 40 ms between events: several silent intervals each
  t.teardown(() => void (PING_INTERVAL_MS.value = before));
  const r = await raw('/v1/messages', { model: 'openai/slow', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'one two three four' }] });
  const evs = events(r.text);
  t.ok(evs.some((e) => e.event === 'ping'), 'ping while the upstream is silent');
  t.equal(evs[0].event, 'message_start');
  t.equal(evs[evs.length - 1].event, 'message_stop');
  t.equal(evs.filter((e) => e.data.delta?.type === 'text_delta').map((e) => e.data.delta.text).join(''), 'Echo: one two three four');

  const ac = new AbortController();
  const stream = await client.messages.create({ model: 'openai/slow', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'a b c d e f g h i j k l m n o p' }] }, { signal: ac.signal });
  await readThenAbort(stream, ac, 2);
  await until(() => slow.requests.length === 2 && slow.requests[1].aborted);
  t.ok(slow.requests[1].aborted, 'the upstream stream was cancelled');
});

t.test('A stream falls back before its first byte: an error status, or an error event first', async (t) => {
  anth.fail({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } });
  const a = client.messages.stream({ model: SONNET, max_tokens: 100, messages: [{ role: 'user', content: 'Hi there' }], fallbacks: ['openai/gpt-4.1-mini'] } as Any);
  t.match((await a.finalMessage()).content, [{ type: 'text', text: 'Echo: Hi there' }]);
  anth.streamError({ afterEvents: 0, type: 'overloaded_error' });
  const b = await raw('/v1/messages', { model: SONNET, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Hi again' }], fallbacks: ['google/gemini-2.5-flash'], debug: ['routing'] });
  const evs = events(b.text);
  t.equal(evs[evs.length - 1].event, 'message_stop');
  t.match(evs.find((e) => e.event === 'message_delta')!.data.debug.routing.attempts, [{ model: SONNET, status: 'failed', error: /Overloaded/ }, { model: 'google/gemini-2.5-flash', status: 'succeeded' }]);
});

t.test('OpenAI-compatible target (vLLM, Ollama...): translated, streamed tool call, local count', async (t) => {
  const stream = client.messages.stream({ model: 'vllm/served-model', max_tokens: 200, tools: [weather], messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const final: Any = await stream.finalMessage();
  t.equal(final.stop_reason, 'tool_use');
  t.same(final.content.find((b: Any) => b.type === 'tool_use').input, { city: 'Paris' });
  t.equal(oai.requests[0].path, '/v1/chat/completions');
  const n = await client.messages.countTokens({ model: 'vllm/served-model', tools: [weather], messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  t.ok(n.input_tokens > 0);
  t.equal(oai.requests.length, 1, 'counted locally: OpenAI-compatible servers have no counting endpoint in common');
});

t.test("The catalog in the Models API's shape for Anthropic clients (models.list, models.retrieve)", async (t) => {
  const ids: string[] = [];
  for await (const m of client.models.list({ limit: 2 })) {
    t.match(m, { type: 'model', id: String, display_name: String, created_at: String });
    ids.push(m.id);
  }
  const serving = [SONNET, 'anthropic/claude-broken', 'openai/gpt-4.1-mini', 'openai/gpt-5-mini', 'openai/slow', 'vllm/served-model', 'google/gemini-2.5-flash'];
  t.same([...ids].sort(), [...serving].sort(), 'every model that serves messages, across pages; none other');
  t.same(await client.models.retrieve('claude-sonnet-4-5-20250929'), { type: 'model', id: SONNET, display_name: SONNET, created_at: '1970-01-01T00:00:00.000Z' });
  await t.rejects(client.models.retrieve('no/such'), Anthropic.NotFoundError);
  const bad = await fetch(`${gw.url}/v1/models?limit=0`, { headers: { 'anthropic-version': '2023-06-01' } });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { type: 'error', error: { type: 'invalid_request_error', message: /limit/ } });
  const openaiShape = (await (await fetch(`${gw.url}/v1/models`)).json()) as Any;
  t.equal(openaiShape.object, 'list', 'without anthropic-version: the OpenAI shape');
});

t.test("The SDK's beta API (Claude Code's): ?beta=true, betas as anthropic-beta", async (t) => {
  const r = await client.beta.messages.create({ model: SONNET, max_tokens: 50, betas: ['interleaved-thinking-2025-05-14'], messages: [{ role: 'user', content: 'Hi beta' }] });
  t.match(r.content, [{ type: 'text', text: 'Echo: Hi beta' }]);
  t.equal(anth.requests[0].headers['anthropic-beta'], 'interleaved-thinking-2025-05-14');
  const n = await client.beta.messages.countTokens({ model: 'openai/gpt-4.1-mini', betas: ['token-counting-2024-11-01'], messages: [{ role: 'user', content: 'Hi beta' }] });
  t.ok(n.input_tokens > 0);
});
