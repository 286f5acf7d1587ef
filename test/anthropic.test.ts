// Chat completions through the gateway to an Anthropic upstream (a strict
// Messages API mock), driven by the official openai SDK and the Vercel AI SDK:
// plain and streamed answers, tools, images, structured output, thinking with
// signed reasoning sent back, prompt caching, provider errors and fallback,
// debug normalizations.
import t from 'tap';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

const anth = await startAnthropicMock();
const oai = await startOpenAIMock();
const gw = await startGateway(`
providers:
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
routing:
  max_retry_wait_ms: 200
  failure_threshold: 1000
models:
  - id: anthropic/claude-sonnet-4-5
    modalities: { input: [text, image], output: [text] }
    capabilities: { thinking: true, tools: true, vision: true }
    context_window: 200000
    max_output_tokens: 64000
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
  - id: anthropic/claude-opus-4-1
    capabilities: { thinking: true }
    max_output_tokens: 32000
    deployments: [{ provider: anthropic, model: claude-opus-4-1 }]
  - id: anthropic/claude-3-5-haiku
    deployments: [{ provider: anthropic, model: claude-3-5-haiku-latest }]
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await anth.close();
  await oai.close();
});
t.beforeEach(() => {
  anth.reset();
  oai.reset();
});

const SONNET = 'anthropic/claude-sonnet-4-5';
const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
 
type Any = any;
const create = (body: Any, opts?: Any): Promise<Any> => client.chat.completions.create(body, opts) as Promise<Any>;
const upstream = (i = 0) => anth.requests[i].body;
/** The debug.normalizations entry for one param (the list order is not part of the contract). */
const noted = (r: Any, param: string) => r.debug.normalizations.find((n: Any) => n.param === param);

async function rawStream(body: Any): Promise<{ status: number; frames: string[]; text: string }> {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  return { status: res.status, text, frames: text.split('\n\n').filter(Boolean).map((f) => f.replace(/^data: /, '')) };
}
const chunksOf = (frames: string[]) => frames.filter((f) => f !== '[DONE]').map((f) => JSON.parse(f));

t.test('plain completion: Messages API request, headers, system blocks, answer and usage', async (t) => {
  const r = await create({
    model: SONNET,
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'developer', content: [{ type: 'text', text: 'Answer in English.' }] },
      { role: 'user', content: 'hello there' },
    ],
    temperature: 0.3,
    top_p: 0.9,
    stop: 'STOP',
    user: 'user-123',
  });
  t.equal(r.object, 'chat.completion');
  t.equal(r.model, SONNET);
  t.match(r.id, /^chatcmpl-msg_01/);
  t.equal(r.choices[0].message.role, 'assistant');
  t.equal(r.choices[0].message.content, 'Echo: hello there');
  t.equal(r.choices[0].finish_reason, 'stop');
  t.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
  t.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  t.same(r.usage.prompt_tokens_details, { cached_tokens: 0 });
  t.same(r.usage.completion_tokens_details, { reasoning_tokens: 0 });
  t.match(r.extra.routing.attempts, [{ provider: 'anthropic', region: 'us', status: 'succeeded', model: SONNET }]);

  const up = anth.requests[0];
  t.equal(up.path, '/v1/messages');
  t.equal(up.headers['x-api-key'], ANTHROPIC_KEY);
  t.equal(up.headers['anthropic-version'], '2023-06-01');
  t.notOk(up.headers.authorization, 'no Authorization header: Anthropic uses x-api-key');
  t.notOk(JSON.stringify(up.headers).includes(CLIENT_KEY), 'client key never forwarded');
  t.same(up.body, {
    model: 'claude-sonnet-4-5',
    max_tokens: 64000,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hello there' }] }],
    system: [{ type: 'text', text: 'You are terse.' }, { type: 'text', text: 'Answer in English.', cache_control: { type: 'ephemeral' } }],
    stop_sequences: ['STOP'],
    temperature: 0.3,
    top_p: 0.9,
    metadata: { user_id: 'user-123' },
  });
});

t.test('max_tokens: from max_completion_tokens, else the catalog, else 4096, with an add note', async (t) => {
  await create({ model: SONNET, messages: [{ role: 'user', content: 'a' }], max_completion_tokens: 50 });
  t.equal(upstream(0).max_tokens, 50);
  await create({ model: SONNET, messages: [{ role: 'user', content: 'b' }], max_tokens: 70 });
  t.equal(upstream(1).max_tokens, 70, 'legacy max_tokens is honoured');
  const r = await create({ model: 'anthropic/claude-3-5-haiku', messages: [{ role: 'user', content: 'c' }], extra: { debug: ['normalizations'] } });
  t.equal(upstream(2).max_tokens, 4096);
  t.same(r.debug.normalizations.filter((n: Any) => n.param === 'max_tokens'), [{ param: 'max_tokens', action: 'add', after: 4096, reason: 'Anthropic requires max_tokens: default 4096' }]);
  const r2 = await create({ model: SONNET, messages: [{ role: 'user', content: 'd' }], extra: { debug: ['normalizations'] } });
  t.match(noted(r2, 'max_tokens'), { param: 'max_tokens', action: 'add', after: 64000 });
});

t.test('streaming with include_usage: role chunk, deltas, finish, usage chunk, [DONE]', async (t) => {
  const stream = await client.chat.completions.create({ model: SONNET, messages: [{ role: 'user', content: 'stream me please' }], stream: true, stream_options: { include_usage: true } });
  const chunks: Any[] = [];
  for await (const c of stream) chunks.push(c);
  t.equal(chunks[0].choices[0].delta.role, 'assistant');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: stream me please');
  t.ok(chunks.length > 4, 'event by event, not one buffered chunk');
  t.ok(chunks.every((c) => c.model === SONNET && c.object === 'chat.completion.chunk'));
  t.ok(chunks.every((c) => c.id === chunks[0].id) && /^chatcmpl-msg_/.test(chunks[0].id));
  const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
  t.equal(finishes.length, 1);
  t.equal(finishes[0].choices[0].finish_reason, 'stop');
  const last = chunks[chunks.length - 1];
  t.same(last.choices, []);
  t.ok(last.usage.prompt_tokens > 0 && last.usage.completion_tokens > 1, 'usage merged from message_start and message_delta');
  t.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  t.equal(upstream().stream, true);

  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'no usage' }] });
  t.ok(raw.text.endsWith('data: [DONE]\n\n'));
  const rc = chunksOf(raw.frames);
  t.notOk(rc.some((c) => c.usage), 'no usage chunk without include_usage');
  t.equal(rc.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: no usage');
});

t.test('tools: two-turn round trip with tool_use / tool_result', async (t) => {
  const messages: Any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await create({ model: SONNET, messages, tools: [weatherTool] });
  t.equal(r1.choices[0].finish_reason, 'tool_calls');
  t.equal(r1.choices[0].message.content, "I'll look that up.");
  const call = r1.choices[0].message.tool_calls[0];
  t.match(call, { type: 'function', function: { name: 'get_weather' } });
  t.match(call.id, /^toolu_01/, 'Anthropic tool ids are kept');
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  t.same(upstream(0).tools, [{ name: 'get_weather', description: 'Current weather for a city', input_schema: weatherTool.function.parameters, cache_control: { type: 'ephemeral' } }]);
  t.notOk('tool_choice' in upstream(0));

  messages.push(r1.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '21C and sunny' });
  const r2 = await create({ model: SONNET, messages, tools: [weatherTool] });
  t.equal(r2.choices[0].message.content, 'Echo: tool said 21C and sunny');
  t.equal(r2.choices[0].finish_reason, 'stop');
  t.same(upstream(1).messages, [
    { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris?' }] },
    { role: 'assistant', content: [{ type: 'text', text: "I'll look that up." }, { type: 'tool_use', id: call.id, name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21C and sunny' }] },
  ]);
});

t.test('tools: parallel calls, parallel_tool_calls false, tool_choice mapping', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'weather in Paris and London?' }], tools: [weatherTool] });
  const calls = r.choices[0].message.tool_calls;
  t.equal(calls.length, 2);
  t.same(calls.map((c: Any) => JSON.parse(c.function.arguments).city), ['Paris', 'London']);
  // Both results go back in one user turn (consecutive tool messages are merged).
  const r2 = await create({
    model: SONNET,
    tools: [weatherTool],
    messages: [{ role: 'user', content: 'weather in Paris and London?' }, r.choices[0].message, { role: 'tool', tool_call_id: calls[0].id, content: 'sunny' }, { role: 'tool', tool_call_id: calls[1].id, content: 'rain' }],
  });
  t.equal(r2.choices[0].message.content, 'Echo: tool said sunny; rain');
  t.equal(upstream(1).messages.length, 3);

  await create({ model: SONNET, messages: [{ role: 'user', content: 'weather in Paris and London?' }], tools: [weatherTool], parallel_tool_calls: false });
  t.same(upstream(2).tool_choice, { type: 'auto', disable_parallel_tool_use: true });

  const req = await create({ model: SONNET, messages: [{ role: 'user', content: 'hi' }], tools: [weatherTool], tool_choice: 'required' });
  t.same(upstream(3).tool_choice, { type: 'any' });
  t.equal(req.choices[0].finish_reason, 'tool_calls');
  await create({ model: SONNET, messages: [{ role: 'user', content: 'hi' }], tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  t.same(upstream(4).tool_choice, { type: 'tool', name: 'get_weather' });
  const none = await create({ model: SONNET, messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool], tool_choice: 'none' });
  t.same(upstream(5).tool_choice, { type: 'none' });
  t.equal(none.choices[0].message.content, 'Echo: weather?');
});

t.test('tools streamed: stable indices, id and name first, arguments in pieces', async (t) => {
  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'weather in Paris and London?' }], tools: [weatherTool] });
  const chunks = chunksOf(raw.frames);
  const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  const starts = deltas.filter((d: Any) => d.id);
  t.same(starts.map((d: Any) => d.index), [0, 1], 'tool_calls indices count tools, not content blocks');
  t.ok(starts.every((d: Any) => d.function.name === 'get_weather' && d.function.arguments === '' && d.type === 'function'));
  for (const i of [0, 1]) {
    const pieces = deltas.filter((d: Any) => d.index === i && !d.id).map((d: Any) => d.function.arguments);
    t.ok(pieces.length > 1, `tool ${i} arguments arrive in several pieces`);
    t.same(JSON.parse(pieces.join('')), { city: i ? 'London' : 'Paris' });
  }
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), "I'll look that up.");
  t.equal(chunks.find((c) => c.choices[0]?.finish_reason).choices[0].finish_reason, 'tool_calls');

  // The SDK's stream helper assembles the same calls; then the second turn.
  const stream = client.chat.completions.stream({ model: SONNET, messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool] });
  const final = await stream.finalChatCompletion();
  const call = final.choices[0].message.tool_calls![0] as Any;
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  const s2 = client.chat.completions.stream({ model: SONNET, tools: [weatherTool], messages: [{ role: 'user', content: 'weather?' }, final.choices[0].message as Any, { role: 'tool', tool_call_id: call.id, content: 'cloudy' }] });
  t.equal((await s2.finalChatCompletion()).choices[0].message.content, 'Echo: tool said cloudy');
});

t.test('images: URL and base64 data URL become image blocks', async (t) => {
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').toString('base64');
  const r = await create({
    model: SONNET,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] }],
  });
  t.equal(r.choices[0].message.content, 'Echo: what is this? [image url https://example.com/cat.jpg] [image image/png 16 bytes]');
  t.same(upstream().messages[0].content.slice(1), [
    { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
  ]);
  const bad = await create({ model: SONNET, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:image/bmp;base64,Qk0=' } }] }] }).catch((e) => e);
  t.equal(bad.status, 400);
  t.equal(bad.error.param, 'messages[0].content[1].image_url.url');
  t.match(bad.error.message, /image\/jpeg, image\/png, image\/gif and image\/webp/);
  t.equal(anth.requests.length, 1, 'rejected before any upstream call');
});

t.test('response_format json_schema: a forced tool whose input is the answer', async (t) => {
  const schema = { type: 'object', properties: { city: { type: 'string' }, summary: { type: 'string' } }, required: ['city', 'summary'], additionalProperties: false };
  const rf = { type: 'json_schema', json_schema: { name: 'city_report', schema, strict: true } };
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'Tell me about Paris' }], response_format: rf, extra: { debug: ['normalizations'] } });
  t.equal(r.choices[0].finish_reason, 'stop');
  t.notOk(r.choices[0].message.tool_calls);
  t.same(JSON.parse(r.choices[0].message.content), { city: 'Paris', summary: 'Tell me about Paris' });
  t.same(upstream().tool_choice, { type: 'tool', name: 'city_report' });
  t.match(upstream().tools, [{ name: 'city_report', input_schema: schema }]);
  t.match(noted(r, 'response_format'), { param: 'response_format', action: 'rename', before: 'json_schema' });

  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'Tell me about Paris' }], response_format: rf });
  const chunks = chunksOf(raw.frames);
  t.ok(chunks.filter((c) => c.choices[0]?.delta?.content).length > 2, 'the JSON streams as content');
  t.same(JSON.parse(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')), { city: 'Paris', summary: 'Tell me about Paris' });
  t.notOk(chunks.some((c) => c.choices[0]?.delta?.tool_calls));
  t.equal(chunks.find((c) => c.choices[0]?.finish_reason).choices[0].finish_reason, 'stop');

  // With caller tools the model may call one of them or answer.
  const both = await create({ model: SONNET, messages: [{ role: 'user', content: 'weather in Paris?' }], tools: [weatherTool], response_format: rf });
  t.same(upstream(2).tool_choice, { type: 'any' });
  t.equal(both.choices[0].finish_reason, 'tool_calls');
  t.equal(both.choices[0].message.tool_calls[0].function.name, 'get_weather');

  const clash = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool], response_format: { type: 'json_schema', json_schema: { name: 'get_weather', schema } } }).catch((e) => e);
  t.equal(clash.status, 400);
  t.equal(clash.error.param, 'response_format.json_schema.name');
});

t.test('response_format json_object: a system instruction, noted', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'give me json' }], response_format: { type: 'json_object' }, extra: { debug: ['normalizations'] } });
  t.same(JSON.parse(r.choices[0].message.content), { answer: 'give me json' });
  const sys = upstream().system;
  t.equal(sys.length, 2);
  t.equal(sys[0].text, 'Be brief.');
  t.match(sys[1].text, /single valid JSON object/);
  t.match(noted(r, 'response_format'), { param: 'response_format', action: 'add', before: 'json_object' });
});

t.test('reasoning_effort -> thinking; signed reasoning_details sent back and verified by the mock', async (t) => {
  const messages: Any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await create({ model: SONNET, messages, tools: [weatherTool], reasoning_effort: 'medium', temperature: 0.5, extra: { debug: ['normalizations'] } });
  t.same(upstream(0).thinking, { type: 'enabled', budget_tokens: 4096 });
  t.notOk('temperature' in upstream(0), 'temperature not sent with thinking');
  t.match(noted(r1, 'temperature'), { param: 'temperature', action: 'strip', before: 0.5 });
  const m = r1.choices[0].message;
  t.match(m.reasoning_content, /^The user wrote/);
  t.equal(m.reasoning_details.length, 1);
  t.same(Object.keys(m.reasoning_details[0]).sort(), ['signature', 'thinking', 'type']);
  t.equal(m.reasoning_details[0].thinking, m.reasoning_content);
  t.equal(r1.choices[0].finish_reason, 'tool_calls');

  messages.push(m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '18C' });
  const r2 = await create({ model: SONNET, messages, tools: [weatherTool], reasoning_effort: 'medium' });
  t.equal(r2.choices[0].message.content, 'Echo: tool said 18C');
  const assistant = upstream(1).messages[1];
  t.same(assistant.content[0], { type: 'thinking', thinking: m.reasoning_details[0].thinking, signature: m.reasoning_details[0].signature }, 'thinking block first, unchanged');
  t.same(assistant.content.map((b: Any) => b.type), ['thinking', 'text', 'tool_use']);

  // The mock really checks: a tampered signature, or no thinking block, is Anthropic's 400.
  const tampered = structuredClone(messages);
  tampered[1].reasoning_details[0].thinking += ' (edited)';
  const e1 = await create({ model: SONNET, messages: tampered, tools: [weatherTool], reasoning_effort: 'medium' }).catch((e) => e);
  t.equal(e1.status, 400);
  t.match(e1.error.message, /Invalid `signature` in `thinking` block/);
  const stripped = structuredClone(messages);
  delete stripped[1].reasoning_details;
  const e2 = await create({ model: SONNET, messages: stripped, tools: [weatherTool], reasoning_effort: 'medium', extra: { debug: ['normalizations'] } }).catch((e) => e);
  t.equal(e2.status, 400);
  t.match(e2.error.message, /must start with a thinking block/);
});

t.test('thinking streamed: reasoning deltas, signed block at block stop, redacted thinking, round trip', async (t) => {
  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'weather? redact please' }], tools: [weatherTool], reasoning_effort: 'low' });
  const chunks = chunksOf(raw.frames);
  t.same(upstream().thinking, { type: 'enabled', budget_tokens: 1024 });
  const reasoning = chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join('');
  t.match(reasoning, /^The user wrote "weather\? redact please"/);
  t.ok(chunks.filter((c) => c.choices[0]?.delta?.reasoning_content).length > 3, 'reasoning streams in pieces');
  const details = chunks.flatMap((c) => c.choices[0]?.delta?.reasoning_details ?? []);
  t.equal(details.length, 2);
  t.same(details[0], { type: 'thinking', thinking: reasoning, signature: details[0].signature });
  t.ok(details[0].signature.length > 20);
  t.equal(details[1].type, 'redacted_thinking');
  const detailsAt = chunks.findIndex((c) => c.choices[0]?.delta?.reasoning_details);
  const lastReasoningAt = chunks.map((c, i) => (c.choices[0]?.delta?.reasoning_content ? i : -1)).reduce((a, b) => Math.max(a, b));
  t.ok(detailsAt > lastReasoningAt, 'signed block after the reasoning deltas');

  // Assemble the assistant message as a client would and send it back.
  const tc = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  const call = { id: tc[0].id, type: 'function', function: { name: tc[0].function.name, arguments: tc.map((d: Any) => d.function.arguments).join('') } };
  const assistant = { role: 'assistant', content: chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), reasoning_content: reasoning, reasoning_details: details, tool_calls: [call] };
  const r = await create({ model: SONNET, reasoning_effort: 'low', tools: [weatherTool], messages: [{ role: 'user', content: 'weather? redact please' }, assistant, { role: 'tool', tool_call_id: call.id, content: 'windy' }] });
  t.equal(r.choices[0].message.content, 'Echo: tool said windy');
  t.same(upstream(1).messages[1].content.map((b: Any) => b.type), ['thinking', 'redacted_thinking', 'text', 'tool_use']);
});

t.test('thinking budget and max_tokens: raised with a note, capped by the catalog, none = off', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high', max_completion_tokens: 1000, extra: { debug: ['normalizations'] } });
  t.same(upstream(0).thinking, { type: 'enabled', budget_tokens: 16384 });
  t.equal(upstream(0).max_tokens, 17384);
  t.match(noted(r, 'max_tokens'), { param: 'max_tokens', action: 'override', before: 1000, after: 17384 });
  const o = await create({ model: 'anthropic/claude-opus-4-1', messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'xhigh', extra: { debug: ['normalizations'] } });
  t.same(upstream(1).thinking, { type: 'enabled', budget_tokens: 30976 });
  t.equal(upstream(1).max_tokens, 32000);
  t.match(noted(o, 'max_tokens'), { param: 'max_tokens', action: 'add', after: 32000 });
  t.match(noted(o, 'thinking.budget_tokens'), { param: 'thinking.budget_tokens', action: 'override', before: 32000, after: 30976 });
  await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'none', temperature: 0.2 });
  t.notOk('thinking' in upstream(2));
  t.equal(upstream(2).temperature, 0.2);
  // Forced tool use and thinking cannot go together: the hint gives way.
  const f = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool], tool_choice: 'required', reasoning_effort: 'high', extra: { debug: ['normalizations'] } });
  t.notOk('thinking' in upstream(3));
  t.match(noted(f, 'reasoning_effort'), { param: 'reasoning_effort', action: 'strip', before: 'high' });
});

t.test('native_fields: thinking wins untouched, top_k passes, conflicts come back as Anthropic 400s', async (t) => {
  const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high', native_fields: { thinking: { type: 'enabled', budget_tokens: 2048 } }, extra: { debug: ['normalizations'] } });
  t.same(upstream(0).thinking, { type: 'enabled', budget_tokens: 2048 });
  t.equal(upstream(0).max_tokens, 64000);
  t.match(noted(r, 'reasoning_effort'), { param: 'reasoning_effort', action: 'strip', reason: 'native_fields.thinking is given and wins' });
  t.match(r.choices[0].message.reasoning_content, /The user wrote/);
  await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], native_fields: { top_k: 5 } });
  t.equal(upstream(1).top_k, 5);
  // native fields are not normalized: Anthropic's own 400 comes back, as a 400, with its message.
  const e = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }], native_fields: { top_k: 5, thinking: { type: 'enabled', budget_tokens: 2048 } } }).catch((x) => x);
  t.equal(e.status, 400);
  t.equal(e.error.type, 'invalid_request_error');
  t.match(e.error.message, /`top_k` must be unset when thinking is enabled/);
  t.equal(anth.requests.length, 3, 'a 400 is not retried elsewhere');
});

const LONG = Array.from({ length: 120 }, (_, i) => `Fact ${i}: workspace file ${i} has revision ${i * 7} and status verified.`).join('\n');

t.test('cache_control: explicit marks become block-level breakpoints (no ttl); cached tokens reported', async (t) => {
  const body = {
    model: SONNET,
    messages: [
      { role: 'system', content: LONG, cache_control: { type: 'ephemeral', ttl: '600s' } },
      { role: 'user', content: [{ type: 'text', text: 'first' }, { type: 'text', text: 'question' }], cache_control: { type: 'ephemeral' } },
    ],
    tools: [{ ...weatherTool, cache_control: { type: 'ephemeral' } }, { type: 'function', function: { name: 'noop', parameters: { type: 'object', properties: {} } } }],
    extra: { debug: ['normalizations'] },
  };
  const r1 = await create(body);
  const up = upstream(0);
  t.same(up.system, [{ type: 'text', text: LONG, cache_control: { type: 'ephemeral' } }], 'ttl is not forwarded');
  t.same(up.messages[0].content, [{ type: 'text', text: 'first' }, { type: 'text', text: 'question', cache_control: { type: 'ephemeral' } }], 'on the last block of the marked message');
  t.same(up.tools[0].cache_control, { type: 'ephemeral' });
  t.notOk(up.tools[1].cache_control, 'no automatic injection when the caller marked something');
  t.match(noted(r1, 'cache_control.ttl'), { param: 'cache_control.ttl', action: 'strip' });
  t.equal(r1.usage.prompt_tokens_details.cached_tokens, 0, 'first call writes the cache');
  const r2 = await create(body);
  t.ok(r2.usage.prompt_tokens_details.cached_tokens > 1000, 'second call reads the cached prefix');
  t.equal(r2.usage.prompt_tokens, r1.usage.prompt_tokens, 'prompt_tokens include cached tokens');

  // More than 4 marks: the earliest are dropped (Anthropic allows 4).
  const five = await create({
    model: SONNET,
    messages: [1, 2, 3, 4, 5].flatMap((i) => [{ role: 'user', content: `q${i}`, cache_control: { type: 'ephemeral' } }, { role: 'assistant', content: `a${i}` }]).concat([{ role: 'user', content: 'last' }]) as Any,
    extra: { debug: ['normalizations'] },
  });
  const marked = upstream(2).messages.filter((m: Any) => m.content.some((b: Any) => b.cache_control)).map((m: Any) => m.content[0].text);
  t.same(marked, ['q2', 'q3', 'q4', 'q5']);
  t.match(noted(five, 'cache_control'), { param: 'cache_control', action: 'strip', before: 5, after: 4 });
});

t.test('cache_control: automatic injection at the end of the system prompt and of the tools', async (t) => {
  const body = { model: SONNET, messages: [{ role: 'system', content: LONG }, { role: 'user', content: 'what is fact 3?' }], tools: [weatherTool, { type: 'function', function: { name: 'noop' } }], extra: { debug: ['normalizations'] } };
  const r1 = await create(body);
  const up = upstream(0);
  t.same(up.system[0].cache_control, { type: 'ephemeral' });
  t.notOk(up.tools[0].cache_control);
  t.same(up.tools[1], { name: 'noop', input_schema: { type: 'object', properties: {} }, cache_control: { type: 'ephemeral' } });
  t.notOk(up.messages[0].content[0].cache_control, 'conversation not marked');
  t.match(noted(r1, 'cache_control'), { param: 'cache_control', action: 'add', after: ['system', 'tools'] });
  const r2 = await create({ ...body, messages: [{ role: 'system', content: LONG }, { role: 'user', content: 'and fact 4?' }] });
  t.ok(r2.usage.prompt_tokens_details.cached_tokens > 1000, 'the same system prompt is read from the cache on the next call');
});

t.test('provider errors: 400 passes through as 400; auth failure is not the client’s', async (t) => {
  anth.fail({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' }, request_id: 'req_1' } });
  const e = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }] }).catch((x) => x);
  t.equal(e.status, 400);
  t.same(e.error, { message: 'prompt is too long: 210000 tokens > 200000 maximum', type: 'invalid_request_error', param: null, code: 'context_length_exceeded' });

  anth.fail({ status: 401, body: { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } } });
  const a = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }] }).catch((x) => x);
  t.equal(a.status, 500, 'the gateway’s provider key was rejected: all targets failed, not a client 401');
  t.match(a.error.message, /401 invalid x-api-key/);
});

for (const [status, type, message] of [
  [529, 'overloaded_error', 'Overloaded'],
  [500, 'api_error', 'Internal server error'],
] as const) {
  t.test(`${status} ${type} -> fallback to an OpenAI target succeeds; both attempts recorded`, async (t) => {
    anth.fail({ status, body: { type: 'error', error: { type, message } } });
    const r = await create({ model: SONNET, messages: [{ role: 'user', content: 'fall back please' }], fallbacks: ['openai/gpt-4.1-mini'] });
    t.equal(r.choices[0].message.content, 'Echo: fall back please');
    t.equal(r.model, 'openai/gpt-4.1-mini');
    t.match(r.extra.routing.attempts, [
      { provider: 'anthropic', region: 'us', status: 'failed', model: SONNET, error: `${status} ${message}` },
      { provider: 'openai', status: 'succeeded', model: 'openai/gpt-4.1-mini' },
    ]);
    t.equal(anth.requests.length, 1);
    t.equal(oai.requests.length, 1);
    // Streams fall back too (the error comes before the first event).
    anth.fail({ status, body: { type: 'error', error: { type, message } } });
    const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'fall back' }], fallbacks: ['openai/gpt-4.1-mini'] });
    t.equal(chunksOf(raw.frames).map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: fall back');
  });
}

t.test('mid-stream error event: error frame, no [DONE]', async (t) => {
  anth.streamError({ afterEvents: 5 });
  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'a long answer please' }], fallbacks: ['openai/gpt-4.1-mini'] });
  t.equal(raw.status, 200);
  t.notOk(raw.text.includes('[DONE]'));
  const last = JSON.parse(raw.frames[raw.frames.length - 1]);
  t.same(last, { error: { message: 'Overloaded', type: 'api_error', param: null, code: 'overloaded_error' } });
  const chunks = chunksOf(raw.frames.slice(0, -1));
  t.ok(chunks.some((c) => c.choices[0]?.delta?.content), 'content sent before the error stays sent');
  t.equal(oai.requests.length, 0, 'no fallback after the first byte');

  // An error event before anything else: nothing reached the client yet, so the fallback still runs.
  anth.streamError({ afterEvents: 0 });
  const early = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'early error' }], fallbacks: ['openai/gpt-4.1-mini'] });
  t.ok(early.text.endsWith('data: [DONE]\n\n'));
  t.equal(chunksOf(early.frames).map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: early error');
  t.match(chunksOf(early.frames).pop().extra.routing.attempts, [{ provider: 'anthropic', status: 'failed', error: '529 Overloaded' }, { provider: 'openai', status: 'succeeded' }]);

  // A stream cut without message_stop also ends in an error frame.
  anth.fail({ cutAfterEvents: 4 });
  const cut = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'cut me' }] });
  t.notOk(cut.text.includes('[DONE]'));
  t.ok(JSON.parse(cut.frames[cut.frames.length - 1]).error);
});

t.test("a provider's mid-stream error quoting its key: redacted on every endpoint's stream", async (t) => {
  const paths: [string, Any][] = [
    ['/chat/completions', { model: SONNET, messages: [{ role: 'user', content: 'a long answer please' }] }],
    ['/responses', { model: SONNET, input: 'a long answer please', store: false }],
    ['/messages', { model: SONNET, max_tokens: 200, messages: [{ role: 'user', content: 'a long answer please' }] }],
  ];
  for (const [path, body] of paths) {
    anth.streamError({ afterEvents: 5, message: `Overloaded: key ${ANTHROPIC_KEY} is throttled` });
    const res = await fetch(`${gw.baseURL}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ ...body, stream: true }),
    });
    const text = await res.text();
    t.equal(res.status, 200, `${path}: the stream started`);
    t.ok(text.includes('Overloaded: key [redacted] is throttled'), `${path}: the error reaches the client`);
    t.notOk(text.includes(ANTHROPIC_KEY), `${path}: without the provider's key`);
  }
});

t.test('finish reasons: length, stop sequence, refusal', async (t) => {
  const l = await create({ model: SONNET, messages: [{ role: 'user', content: 'a rather long question that produces a long echo' }], max_completion_tokens: 3 });
  t.equal(l.choices[0].finish_reason, 'length');
  t.equal(l.choices[0].message.content.length, 12);
  const s = await create({ model: SONNET, messages: [{ role: 'user', content: 'one two three' }], stop: ['two'] });
  t.equal(s.choices[0].finish_reason, 'stop');
  t.equal(s.choices[0].message.content, 'Echo: one ');
  const c = await create({ model: SONNET, messages: [{ role: 'user', content: 'please refuse' }] });
  t.equal(c.choices[0].finish_reason, 'content_filter');
  t.equal(c.choices[0].message.content, null);
  const raw = await rawStream({ model: SONNET, messages: [{ role: 'user', content: 'a rather long question' }], max_completion_tokens: 2 });
  t.equal(chunksOf(raw.frames).find((x) => x.choices[0]?.finish_reason).choices[0].finish_reason, 'length');
});

t.test('message shaping: merged turns, hoisted system, assistant-first chats, names', async (t) => {
  const r = await create({
    model: SONNET,
    messages: [
      { role: 'assistant', content: 'Hi! How can I help?' },
      { role: 'user', content: 'first', name: 'alice' },
      { role: 'user', content: 'second' },
      { role: 'system', content: 'Late rule.' },
      { role: 'assistant', content: '' , tool_calls: [{ id: 'toolu_x1', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { role: 'tool', tool_call_id: 'toolu_x1', content: [{ type: 'text', text: 'sun' }] },
      { role: 'user', content: 'thanks' },
    ],
    tools: [weatherTool],
    extra: { debug: ['normalizations'] },
  });
  t.equal(r.choices[0].message.content, 'Echo: tool said sun');
  const up = upstream();
  t.same(up.messages.map((m: Any) => m.role), ['user', 'assistant', 'user', 'assistant', 'user']);
  t.same(up.messages[0].content, [{ type: 'text', text: '(conversation start)' }]);
  t.same(up.messages[2].content, [{ type: 'text', text: 'first' }, { type: 'text', text: 'second' }]);
  t.same(up.messages[3].content, [{ type: 'tool_use', id: 'toolu_x1', name: 'get_weather', input: {} }]);
  t.same(up.messages[4].content, [{ type: 'tool_result', tool_use_id: 'toolu_x1', content: [{ type: 'text', text: 'sun' }] }, { type: 'text', text: 'thanks' }]);
  t.same(up.system, [{ type: 'text', text: 'Late rule.', cache_control: { type: 'ephemeral' } }]);
  const params = r.debug.normalizations.map((n: Any) => n.param);
  t.ok(params.includes('messages') && params.includes('messages[3]') && params.includes('messages[].name'));

  const bad = await create({ model: SONNET, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '[1]' } }] }, { role: 'tool', tool_call_id: 'toolu_1', content: 'r' }] }).catch((e) => e);
  t.equal(bad.status, 400);
  t.equal(bad.error.param, 'messages[1].tool_calls[0].function.arguments');
});

t.test('unsupported fields are stripped with notes; temperature above 1 is overridden; n > 1 fans out', async (t) => {
  const r = await create({
    model: SONNET,
    messages: [{ role: 'user', content: 'x' }],
    temperature: 1.5,
    seed: 7,
    frequency_penalty: 0.5,
    presence_penalty: 0.1,
    logit_bias: { '50256': -100 },
    logprobs: true,
    top_logprobs: 2,
    store: true,
    service_tier: 'auto',
    metadata: { team: 'a' },
    n: 1,
    some_future_field: 'x',
    extra: { debug: ['normalizations'] },
  });
  t.equal(r.choices[0].message.content, 'Echo: x');
  const up = upstream();
  t.equal(up.temperature, 1);
  for (const f of ['seed', 'frequency_penalty', 'presence_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'store', 'service_tier', 'metadata', 'n', 'some_future_field']) t.notOk(f in up, `${f} not sent`);
  const byParam = Object.fromEntries(r.debug.normalizations.map((n: Any) => [n.param, n]));
  t.match(byParam.temperature, { action: 'override', before: 1.5, after: 1 });
  for (const f of ['seed', 'frequency_penalty', 'presence_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'store', 'service_tier', 'metadata', 'some_future_field']) t.equal(byParam[f]?.action, 'strip', `${f} noted`);
  t.equal(r.choices[0].logprobs, null);

  // Anthropic has no n: the gateway sends n requests and merges their choices.
  const before = anth.requests.length;
  const n: Any = await create({ model: SONNET, messages: [{ role: 'user', content: 'say two things' }], n: 3, debug: ['normalizations'] });
  t.equal(anth.requests.length - before, 3, 'three upstream requests');
  t.ok(anth.requests.slice(before).every((r: Any) => !('n' in r.body)), 'none carries n');
  t.same(n.choices.map((c: Any) => c.index), [0, 1, 2], 'unique indexes');
  t.ok(n.choices.every((c: Any) => typeof c.message.content === 'string' && c.finish_reason === 'stop'));
  const one: Any = await create({ model: SONNET, messages: [{ role: 'user', content: 'say two things' }] });
  t.equal(n.usage.prompt_tokens, 3 * one.usage.prompt_tokens, 'usage summed over the requests');
  t.match(n.debug.normalizations.filter((x: Any) => x.param === 'n'), [{ action: 'override', before: 3, after: 1 }]);
  t.equal(n.debug.normalizations.filter((x: Any) => x.param === 'max_tokens').length, 1, "the copies' notes recorded once");
  // More than the 8 requests kept in flight: every choice still comes back, in order.
  const before12 = anth.requests.length;
  const n12: Any = await create({ model: SONNET, messages: [{ role: 'user', content: 'many' }], n: 12 });
  t.equal(anth.requests.length - before12, 12);
  t.same(n12.choices.map((c: Any) => c.index), Array.from({ length: 12 }, (_, i) => i));
});

t.test('web_search (from the Responses ingress) becomes Anthropic\'s hosted web search tool', async (t) => {
  const r = await create({
    model: SONNET,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'news?' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'low' } }] }],
    web_search: { enabled: true, options: { search_context_size: 'low', user_location: { type: 'approximate', city: 'Paris', country: 'FR' }, filters: { allowed_domains: ['example.com'] } } },
    extra: { debug: ['normalizations'] },
  });
  t.match(r.choices[0].message.content, /^Echo: news\?/);
  t.same(upstream().tools, [{ type: 'web_search_20250305', name: 'web_search', user_location: { type: 'approximate', city: 'Paris', country: 'FR' }, allowed_domains: ['example.com'] }]);
  t.match(noted(r, 'web_search.search_context_size'), { action: 'strip', before: 'low' });
  t.match(noted(r, 'messages[].content[].image_url.detail'), { action: 'strip' });
});

t.test('Vercel AI SDK (openai-compatible provider): generateText and streamText', async (t) => {
  const gateway = createOpenAICompatible({ name: 'gateway', baseURL: gw.baseURL, apiKey: CLIENT_KEY, includeUsage: true });
  const g = await generateText({ model: gateway(SONNET), prompt: 'hello from the ai sdk' });
  t.equal(g.text, 'Echo: hello from the ai sdk');
  t.equal(g.finishReason, 'stop');
  t.ok((g.usage.inputTokens ?? 0) > 0);
  const s = streamText({ model: gateway(SONNET), system: 'Be kind.', prompt: 'streamed from the ai sdk' });
  t.equal(await s.text, 'Echo: streamed from the ai sdk');
  t.equal(await s.finishReason, 'stop');
  t.equal(upstream(1).system[0].text, 'Be kind.');
  t.ok(((await s.usage).outputTokens ?? 0) > 0);
});

t.test('no key in logs; provider key only in x-api-key', async (t) => {
  await create({ model: SONNET, messages: [{ role: 'user', content: 'log me' }] }, { headers: { 'x-request-id': 'anth-log-1' } });
  await until(() => gw.logs.some((l) => l.request_id === 'anth-log-1'));
  const line = gw.logs.find((l) => l.request_id === 'anth-log-1');
  t.match(line, { provider: 'anthropic', model: SONNET, status: 200 });
  const all = gw.rawLogs.join('');
  t.notOk(all.includes(ANTHROPIC_KEY), 'provider key never logged');
  t.notOk(all.includes(CLIENT_KEY), 'client key never logged');
});

t.test('stream: several signed thinking blocks reach an SDK stream-helper user whole', async (t) => {
  const { anthropicChunks } = await import('../plugins/providers/anthropic/stream.js');
  const ev = (type: string, body: object) => ({ event: type, data: JSON.stringify({ type, ...body }) });
  const events = [
    ev('message_start', { message: { id: 'msg_1', model: 'claude-sonnet-4-5', usage: { input_tokens: 5, output_tokens: 1 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'first' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: 'sig-1' } }),
    ev('content_block_stop', { index: 0 }),
    ev('content_block_start', { index: 1, content_block: { type: 'redacted_thinking', data: 'opaque' } }),
    ev('content_block_stop', { index: 1 }),
    ev('content_block_start', { index: 2, content_block: { type: 'thinking', thinking: '', signature: '' } }),
    ev('content_block_delta', { index: 2, delta: { type: 'thinking_delta', thinking: 'second' } }),
    ev('content_block_delta', { index: 2, delta: { type: 'signature_delta', signature: 'sig-2' } }),
    ev('content_block_stop', { index: 2 }),
    ev('content_block_start', { index: 3, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 3, delta: { type: 'text_delta', text: 'answer' } }),
    ev('content_block_stop', { index: 3 }),
    ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } }),
    ev('message_stop', {}),
  ];
  const chunks: any[] = [];
  for await (const c of anthropicChunks((async function* () { yield* events; })(), { includeUsage: false })) chunks.push(c);
  const withDetails = chunks.filter((c) => c.choices[0]?.delta?.reasoning_details);
  t.equal(withDetails.length, 1, 'one reasoning_details delta, so Object.assign merging keeps them all');
  t.same(withDetails[0].choices[0].delta.reasoning_details, [
    { type: 'thinking', thinking: 'first', signature: 'sig-1' },
    { type: 'redacted_thinking', data: 'opaque' },
    { type: 'thinking', thinking: 'second', signature: 'sig-2' },
  ]);
  t.equal(withDetails[0].choices[0].finish_reason, 'stop', 'carried by the finish chunk');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join(''), 'firstsecond');
});
