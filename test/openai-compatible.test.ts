// OpenAI-compatible servers deviate from OpenAI (WIRE-FORMATS.md section 6);
// the gateway must hand clients OpenAI's shapes anyway. A mock server plays
// each deviation, the official openai SDK checks what comes out. A conformance
// part replays the shared recording of a compatible stream where it exists.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startMock, sse, type Reply } from './mocks/server.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';
import { sharedFixtures } from './helpers/fixtures.js';

const base = { object: 'chat.completion.chunk', created: 0, model: 'upstream-m' };
const frame = (id: string, delta: object, finish: string | null = null, extra: object = {}) => sse({ id, ...base, choices: [{ index: 0, delta, finish_reason: finish }], ...extra });

// What the mock answers, by the user's message.
const scripts: Record<string, () => Reply> = {
  // Gemini's compat endpoint: empty tool ids, usage with total > prompt + completion, no [DONE].
  'empty-ids': () => ({
    status: 200,
    sse: [
      frame('a', { role: 'assistant', tool_calls: [{ index: 0, id: '', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] }),
      frame('a', { tool_calls: [{ index: 1, id: '', type: 'function', function: { name: 'g', arguments: '{}' } }] }),
      frame('a', {}, 'tool_calls'),
    ],
  }),
  // Anthropic's compat endpoint (recorded): tool index starting at 1, arguments in pieces.
  'index-from-one': () => ({
    status: 200,
    sse: [
      frame('b', { role: 'assistant' }),
      frame('b', { content: 'Reading it.' }),
      frame('b', { tool_calls: [{ index: 1, id: 'toolu_1', type: 'function', function: { name: 'read_file', arguments: '' } }] }),
      frame('b', { tool_calls: [{ index: 1, function: { arguments: '{"pa' } }] }),
      frame('b', { tool_calls: [{ index: 1, function: { arguments: 'th": "a.txt"}' } }] }),
      frame('b', {}, 'tool_calls'),
      'data: [DONE]\n\n',
    ],
  }),
  // DeepSeek / vLLM / OpenRouter: reasoning in delta.reasoning; xAI: the finish chunk twice.
  reasoning: () => ({
    status: 200,
    sse: [
      frame('c', { role: 'assistant', content: '' }),
      frame('c', { reasoning: 'Let me think. ' }),
      frame('c', { reasoning_content: 'Done thinking.' }),
      frame('c', { content: 'Answer.' }),
      frame('c', {}, 'stop'),
      frame('c', {}, 'stop'),
      sse({ id: 'c', ...base, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }),
      'data: [DONE]\n\n',
    ],
  }),
  // Tool call with no index at all.
  'no-index': () => ({
    status: 200,
    sse: [frame('d', { role: 'assistant', tool_calls: [{ id: 'call_z', type: 'function', function: { name: 'h', arguments: '{"k":2}' } }] }), frame('d', {}, 'tool_calls'), 'data: [DONE]\n\n'],
  }),
  'error-event': () => ({ status: 200, sse: [frame('e', { role: 'assistant', content: 'par' }), sse({ error: { message: 'model crashed', type: 'server_error' } })] }),
  'plain-reasoning': () => ({
    status: 200,
    json: { id: 'p', object: 'chat.completion', created: 0, model: 'upstream-m', choices: [{ index: 0, message: { role: 'assistant', content: 'ok', reasoning: 'because', tool_calls: [{ id: '', type: 'function', function: { name: 'f', arguments: '{}' } }] }, finish_reason: 'tool_calls' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
  }),
};

const mock = await startMock((req) => {
  const text = req.body.messages.at(-1).content;
  const s = scripts[text];
  if (!s) return { status: 400, json: { error: { message: `no script ${text}` } } };
  return s();
});
const gw = await startGateway(`
providers:
  - name: compat
    family: openai-compatible
    base_url: ${mock.url}/v1
    timeout_ms: 2000
models:
  - id: local/m
    deployments: [{ provider: compat, model: upstream-m }]
`);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});

async function collect(content: string) {
  const s = await client.chat.completions.create({ model: 'local/m', messages: [{ role: 'user', content }], stream: true });
  const chunks: any[] = [];
  for await (const c of s) chunks.push(c);
  return chunks;
}

t.test('no key configured: none sent (local servers)', async (t) => {
  await collect('reasoning');
  t.notOk(mock.requests.at(-1)!.headers.authorization);
});

t.test('empty tool ids get stable generated ids; [DONE] missing is fine', async (t) => {
  const final = await client.chat.completions.stream({ model: 'local/m', messages: [{ role: 'user', content: 'empty-ids' }] }).finalChatCompletion();
  const calls = final.choices[0].message.tool_calls as any[];
  t.equal(calls.length, 2);
  t.match(calls[0].id, /^call_\w+$/);
  t.match(calls[1].id, /^call_\w+$/);
  t.not(calls[0].id, calls[1].id);
  t.same(calls.map((c) => c.function.name), ['f', 'g']);
});

t.test('tool index starting at 1 is renumbered from 0; pieces reassemble', async (t) => {
  const chunks = await collect('index-from-one');
  const idx = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).map((tc: any) => tc.index);
  t.ok(idx.every((i: number) => i === 0));
  const final = await client.chat.completions.stream({ model: 'local/m', messages: [{ role: 'user', content: 'index-from-one' }] }).finalChatCompletion();
  const call = (final.choices[0].message.tool_calls as any[])[0];
  t.equal(call.id, 'toolu_1');
  t.same(JSON.parse(call.function.arguments), { path: 'a.txt' });
  t.equal(final.choices[0].message.content, 'Reading it.');
});

t.test('delta.reasoning becomes reasoning_content; a repeated finish chunk is sent once', async (t) => {
  const chunks = await collect('reasoning');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join(''), 'Let me think. Done thinking.');
  t.notOk(chunks.some((c) => c.choices[0]?.delta && 'reasoning' in c.choices[0].delta));
  t.equal(chunks.filter((c) => c.choices[0]?.finish_reason).length, 1);
  t.ok(chunks.every((c) => c.model === 'local/m'));
});

t.test('a tool call without index gets one', async (t) => {
  const chunks = await collect('no-index');
  t.equal(chunks[0].choices[0].delta.tool_calls[0].index, 0);
});

t.test('an error event inside the stream -> error frame, no [DONE]', async (t) => {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'local/m', messages: [{ role: 'user', content: 'error-event' }], stream: true }),
  });
  const text = await res.text();
  t.notMatch(text, /\[DONE\]/);
  t.match(text, /model crashed/);
});

t.test('non-stream: message.reasoning and empty tool ids fixed', async (t) => {
  const r: any = await client.chat.completions.create({ model: 'local/m', messages: [{ role: 'user', content: 'plain-reasoning' }] });
  t.equal(r.choices[0].message.reasoning_content, 'because');
  t.notOk('reasoning' in r.choices[0].message);
  t.match(r.choices[0].message.tool_calls[0].id, /^call_/);
});

const RECORDING = 'anthropic-fallback-tool-call.sse';
const { dir: recordings, skip: noFixture } = sharedFixtures('openai-compatible', RECORDING);
const recorded = path.join(recordings, RECORDING);
t.test('conformance: the recorded compatible stream replays through the mapper', { skip: noFixture }, async (t) => {
  const file = recorded;
  const { openAIChunks } = await import('../plugins/providers/openai/stream.js');
  const { parseSSE } = await import('../src/sse.js');
  const chunks: any[] = [];
  for await (const c of openAIChunks(parseSSE((async function* () { yield fs.readFileSync(file); })()))) chunks.push(c);
  const calls = new Map<number, { id?: string; name?: string; args: string }>();
  for (const c of chunks)
    for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
      const cur = calls.get(tc.index) ?? { args: '' };
      if (tc.id) cur.id = tc.id;
      if (tc.function?.name) cur.name = tc.function.name;
      cur.args += tc.function?.arguments ?? '';
      calls.set(tc.index, cur);
    }
  t.same([...calls.keys()], [0], 'index renumbered from 1 to 0');
  const call = calls.get(0)!;
  t.equal(call.name, 'read_file');
  t.type(JSON.parse(call.args), 'object');
});
