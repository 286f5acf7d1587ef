// The same scenario through all three families, with the SHIPPED gateway.yaml
// (pointed at the mocks through the documented env vars), driven by the
// official openai SDK and by the Vercel AI SDK: a client written for OpenAI
// gets OpenAI-shaped answers and streams whatever model it names.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [oai, ant, gem] = await Promise.all([startOpenAIMock(), startAnthropicMock(), startGeminiMock()]);
const gw = await startGateway(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'), {
  OPENAI_BASE_URL: `${oai.url}/v1`,
  OPENAI_API_KEY: OPENAI_KEY,
  ANTHROPIC_BASE_URL: ant.url,
  ANTHROPIC_API_KEY: ANTHROPIC_KEY,
  GEMINI_BASE_URL: gem.url,
  GEMINI_API_KEY: GEMINI_KEY,
  GATEWAY_RESPONSES_DB: ':memory:',
});
t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), ant.close(), gem.close()]);
});
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
const provider = createOpenAICompatible({ name: 'gateway', baseURL: gw.baseURL, apiKey: CLIENT_KEY, includeUsage: true });

const MODELS = ['openai/gpt-4.1-mini', 'anthropic/claude-sonnet-4-5', 'google/gemini-2.5-flash'];
const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

const mockOf: Record<string, { connections: number }> = { 'openai/gpt-4.1-mini': oai, 'anthropic/claude-sonnet-4-5': ant, 'google/gemini-2.5-flash': gem };

for (const model of MODELS) {
  t.test(`${model}: streams one after another reuse one upstream connection`, async (t) => {
    // A provider plugin stops at its terminal event, before the response's own
    // end: the upstream response must go back to the keep-alive pool, not be
    // destroyed (which cost a new connection per stream).
    const warm = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say hello' }], stream: true });
    for await (const _ of warm);
    await new Promise((r) => setTimeout(r, 20));
    const before = mockOf[model].connections;
    for (let i = 0; i < 5; i++) {
      const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say hello' }], stream: true });
      let text = '';
      for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
      t.ok(text.length > 0, `stream ${i + 1} has text`);
      await new Promise((r) => setTimeout(r, 5));
    }
    t.equal(mockOf[model].connections - before, 0, 'no new upstream connection for 5 more streams');
  });
}

for (const model of MODELS) {
  t.test(`${model}: plain completion is OpenAI-shaped`, async (t) => {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }] });
    t.equal(r.object, 'chat.completion');
    t.equal(r.model, model);
    t.match(r.id, /\S+/);
    t.type(r.created, 'number');
    t.equal(r.choices.length, 1);
    t.equal(r.choices[0].index, 0);
    t.equal(r.choices[0].message.role, 'assistant');
    t.ok(typeof r.choices[0].message.content === 'string' && r.choices[0].message.content.length > 0, 'text content');
    t.equal(r.choices[0].finish_reason, 'stop');
    t.ok(r.usage!.prompt_tokens > 0 && r.usage!.completion_tokens > 0);
    t.equal(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);
    t.type(r.usage!.prompt_tokens_details?.cached_tokens, 'number');
    t.type(r.usage!.completion_tokens_details?.reasoning_tokens, 'number');
    t.match((r as any).extra.routing.attempts, [{ status: 'succeeded', model }]);
  });

  t.test(`${model}: stream with include_usage follows the chunk protocol`, async (t) => {
    const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } });
    const chunks: any[] = [];
    for await (const c of stream) chunks.push(c);
    t.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === model));
    t.equal(chunks[0].choices[0].delta.role, 'assistant', 'role first');
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    t.ok(text.length > 0, 'content streamed');
    const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
    t.equal(finishes.length, 1, 'one finish_reason');
    t.equal(finishes[0].choices[0].finish_reason, 'stop');
    const usage = chunks.filter((c) => c.usage);
    t.equal(usage.length, 1, 'one usage chunk');
    t.same(usage[0].choices, []);
    t.equal(chunks.indexOf(usage[0]), chunks.length - 1, 'usage chunk last');
    t.ok(usage[0].usage.total_tokens > 0);
  });

  t.test(`${model}: tool call round trip (plain, then streamed)`, async (t) => {
    const messages: any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const r1 = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required' });
    t.equal(r1.choices[0].finish_reason, 'tool_calls');
    const call = r1.choices[0].message.tool_calls![0] as any;
    t.match(call, { id: /\S+/, type: 'function', function: { name: 'get_weather' } });
    t.type(JSON.parse(call.function.arguments), 'object');
    messages.push(r1.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 21}' });
    const r2 = await client.chat.completions.create({ model, messages, tools });
    t.equal(r2.choices[0].finish_reason, 'stop');
    t.ok(r2.choices[0].message.content!.length > 0, 'answers after the tool result');

    const s = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools, tool_choice: 'required' });
    const final = await s.finalChatCompletion();
    t.equal(final.choices[0].finish_reason, 'tool_calls');
    const sc = final.choices[0].message.tool_calls![0] as any;
    t.equal(sc.function.name, 'get_weather');
    t.type(JSON.parse(sc.function.arguments), 'object', 'streamed arguments reassemble to JSON');
  });

  t.test(`${model}: JSON schema output parses`, async (t) => {
    const r = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Give me a city as JSON' }],
      response_format: { type: 'json_schema', json_schema: { name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } },
    });
    t.type(JSON.parse(r.choices[0].message.content!), 'object');
  });

  t.test(`${model}: Vercel AI SDK generateText and streamText`, async (t) => {
    const g = await generateText({ model: provider(model), prompt: 'Say hello' });
    t.ok(g.text.length > 0);
    t.equal(g.finishReason, 'stop');
    const s = streamText({ model: provider(model), prompt: 'Say hello' });
    let text = '';
    for await (const part of s.textStream) text += part;
    t.ok(text.length > 0);
    t.equal(await s.finishReason, 'stop');
    t.ok(((await s.usage).totalTokens ?? 0) > 0, 'usage arrives through include_usage');
  });
}

t.test('the shipped catalog lists every family in /v1/models', async (t) => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  for (const id of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini', 'openai/gpt-image-1', 'anthropic/claude-sonnet-4-5', 'google/gemini-2.5-flash', 'google/gemini-2.5-flash-image']) t.ok(ids.includes(id), id);
});

t.test('every family answers with string system_fingerprint and service_tier (spec 2.3)', async (t) => {
  const prints = new Map<string, string>();
  for (const model of MODELS) {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
    t.match(r.system_fingerprint, /^\S+$/, `${model} fingerprint`);
    t.type(r.service_tier, 'string', `${model} tier`);
    prints.set(model, r.system_fingerprint!);
    const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true });
    for await (const c of s) {
      t.type(c.system_fingerprint, 'string');
      t.type(c.service_tier, 'string');
    }
  }
  // A fingerprint the gateway gives names the backend that served (provider, model, upstream model).
  const again = await client.chat.completions.create({ model: 'anthropic/claude-sonnet-4-5', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(again.system_fingerprint, prints.get('anthropic/claude-sonnet-4-5'), 'the same backend, the same fingerprint');
  t.not(prints.get('anthropic/claude-sonnet-4-5'), prints.get('google/gemini-2.5-flash'), 'another backend, another fingerprint');
});
