// A stream holds no copy of its request once it is committed: the parsed body,
// the validated conversation and the upstream body are released when the
// first event goes to the client, so that memory per open stream does not grow
// with the prompt (BENCHMARKS.md, "Memory"). Checked with WeakRefs and a forced
// collection while the stream is still open, on a passthrough and on a
// translated path, for each endpoint that streams (each declares the fields it
// releases: EndpointSpec.releaseOnStream). Finalizers of a stream then see
// ctx.body without the conversation; those of a JSON answer see all of it.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startMock, sse } from './mocks/server.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

interface Probe {
  refs: { what: string; ref: WeakRef<object> }[];
  seen: { keys: string[] }[];
}
const probe = (): Probe => (globalThis as unknown as { __releaseProbe: Probe }).__releaseProbe;
(globalThis as unknown as { __releaseProbe: Probe }).__releaseProbe = { refs: [], seen: [] };

// A custom plugin, loaded from a path as an operator would, that keeps only weak
// references. It runs first: before next() ctx.body is the body as parsed, after it
// the validated one.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-release-'));
const pluginFile = path.join(dir, 'probe.mjs');
fs.writeFileSync(
  pluginFile,
  `export default function probe() {
  return {
    name: 'probe',
    async handle(ctx, next) {
      const p = globalThis.__releaseProbe;
      const conv = (b) => b.messages ?? b.input;
      p.refs.push({ what: 'body as parsed', ref: new WeakRef(ctx.body) }, { what: 'conversation as parsed', ref: new WeakRef(conv(ctx.body)) });
      ctx.finalizers.push(() => p.seen.push({ keys: Object.keys(ctx.body) }));
      await next();
      p.refs.push({ what: 'validated body', ref: new WeakRef(ctx.body) }, { what: 'validated conversation', ref: new WeakRef(conv(ctx.body)) }, { what: 'a validated message', ref: new WeakRef(conv(ctx.body)[3]) });
    },
  };
}
`,
);

const chatChunk = (i: number) => sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : { content: `${i} ` }, finish_reason: i === 11 ? 'stop' : null }] });
const openai = await startMock((req) =>
  req.body?.stream
    ? { status: 200, sseDelayMs: 25, sse: [...Array.from({ length: 12 }, (_, i) => chatChunk(i)), 'data: [DONE]\n\n'] }
    : { status: 200, json: { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } },
);
const anthropicEvents = [
  sse({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } }, 'message_start'),
  sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
  ...Array.from({ length: 10 }, (_, i) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `${i} ` } }, 'content_block_delta')),
  sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
  sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 10 } }, 'message_delta'),
  sse({ type: 'message_stop' }, 'message_stop'),
];
const anthropic = await startMock(() => ({ status: 200, sseDelayMs: 25, sse: anthropicEvents }));
t.teardown(async () => {
  await Promise.all([openai.close(), anthropic.close()]);
  fs.rmSync(dir, { recursive: true, force: true });
});

const gw = await startGateway(`
plugins:
  - name: probe
    path: ${pluginFile}
  - name: auth
  - name: analytics
  - name: route
  - name: normalize
  - name: debug
providers:
  - name: compat
    family: openai-compatible
    base_url: ${openai.url}/v1
    api_key: sk-test-compat-0123456789
  - name: claude
    family: anthropic
    base_url: ${anthropic.url}
    api_key: sk-ant-test-0123456789abcdef
models:
  - id: compat/m
    deployments: [{ provider: compat, model: m }]
  - id: anthropic/claude-x
    deployments: [{ provider: claude, model: claude-x }]
`);
t.teardown(() => gw.close());
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });

const conversation = (): OpenAI.ChatCompletionMessageParam[] => [
  ...Array.from({ length: 60 }, (_, i): OpenAI.ChatCompletionMessageParam => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}: ` + 'words '.repeat(50) })),
  { role: 'user', content: 'and now?' },
];

async function collect(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
}

const expectedText: Record<string, string> = {
  'compat/m': Array.from({ length: 11 }, (_, i) => `${i + 1} `).join(''),
  'anthropic/claude-x': Array.from({ length: 10 }, (_, i) => `${i} `).join(''),
};
for (const model of ['compat/m', 'anthropic/claude-x']) {
  t.test(`${model}: an open stream holds no copy of its request`, async (t) => {
    const p = probe();
    p.refs = [];
    p.seen = [];
    const stream = await client.chat.completions.create({ model, messages: conversation(), stream: true, max_completion_tokens: 100, temperature: 0.5, user: 'u-42' });
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    t.notOk(first.done, 'the stream is open');
    t.equal(p.refs.length, 5, 'the probe saw the request');
    await collect();
    const alive = p.refs.filter((r) => r.ref.deref() !== undefined).map((r) => r.what);
    t.same(alive, [], 'nothing of the request is reachable while the stream is still open');
    let text = (first.value as OpenAI.ChatCompletionChunk).choices[0]?.delta?.content ?? '';
    for (let r = await it.next(); !r.done; r = await it.next()) text += (r.value as OpenAI.ChatCompletionChunk).choices[0]?.delta?.content ?? '';
    t.equal(text, expectedText[model], 'the whole stream arrived after the collection');
    t.equal(p.seen.length, 1, 'the finalizer ran at the end of the stream');
    t.notOk(p.seen[0].keys.includes('messages'), 'a stream finalizer sees the body without the conversation');
    t.ok(p.seen[0].keys.includes('model') && p.seen[0].keys.includes('user') && p.seen[0].keys.includes('temperature'), 'and with the other fields');
  });
}

/**
 * Open a stream, read its first event, collect, and check that nothing of the
 * request is reachable while it is open; then read it to its `lastType` event.
 */
async function heldNothingWhileOpen(t: Test, open: () => Promise<AsyncIterable<{ type: string }>>, lastType: string): Promise<Probe> {
  const p = probe();
  p.refs = [];
  p.seen = [];
  const it = (await open())[Symbol.asyncIterator]();
  const first = await it.next();
  t.notOk(first.done, 'the stream is open');
  await collect();
  t.same(
    p.refs.filter((r) => r.ref.deref() !== undefined).map((r) => r.what),
    [],
    'nothing of the request is reachable while the stream is still open',
  );
  let done = false;
  for (let r = await it.next(); !r.done; r = await it.next()) if (r.value.type === lastType) done = true;
  t.ok(done, 'the stream completed after the collection');
  return p;
}

t.test('a Responses stream (translated, store: false) holds no copy of its request either', async (t) => {
  const input = conversation().map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content as string }));
  await heldNothingWhileOpen(t, () => client.responses.create({ model: 'anthropic/claude-x', input, stream: true, store: false, max_output_tokens: 100 }), 'response.completed');
});

t.test('a Messages API stream (same-API) holds no copy of its request either', async (t) => {
  const anth = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
  const messages = conversation().map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content as string }));
  const p = await heldNothingWhileOpen(t, () => anth.messages.create({ model: 'anthropic/claude-x', system: 'be brief', messages, max_tokens: 100, stream: true }), 'message_stop');
  t.equal(p.seen.length, 1, 'the finalizer ran at the end of the stream');
  t.notOk(p.seen[0].keys.includes('messages') || p.seen[0].keys.includes('system'), 'a stream finalizer sees the body without the conversation');
  t.ok(p.seen[0].keys.includes('model') && p.seen[0].keys.includes('max_tokens'), 'and with the other fields');
});

t.test('a JSON answer: the finalizer sees the whole body', async (t) => {
  const p = probe();
  p.seen = [];
  const r = await client.chat.completions.create({ model: 'compat/m', messages: conversation() });
  t.equal(r.choices[0].message.content, 'ok');
  t.equal(p.seen.length, 1);
  t.ok(p.seen[0].keys.includes('messages'), 'messages still there: nothing is released for a JSON answer');
});
