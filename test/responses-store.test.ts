// The responses store (SQLite through node:sqlite) and the pure pieces of the
// Responses endpoint: item <-> IR mapping, the stream translators, truncation
// units, and a replay of the recorded OpenAI Responses streams
// (shared/fixtures/openai-responses) through the same-API passthrough.
import t from 'tap';
import { mkdtempSync, mkdirSync, rmSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { openSqliteResponseStore, type StoredResponse } from '../src/store/responses.js';
import { storedResponse } from './helpers/stored-response.js';
import {
  itemsToMessages,
  toNativeBody,
  toChatRequest,
  fromChatCompletion,
  responseEcho,
  encodeReasoning,
  normalizeInput,
  type Item,
  type ResponsesRequest,
} from '../src/api/responses-map.js';
import { chatToResponseEvents, nativeResponseEvents, type StreamHooks, type ResponseEvent } from '../src/api/responses-stream.js';
import { unitsOf, fitContext } from '../src/api/responses-truncate.js';
import type { ChatChunk, ChatCompletion } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import { GatewayError } from '../src/errors.js';
import { TransportError } from '../src/upstream/errors.js';
import { midStreamError } from '../src/api/common.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';
import { sharedFixtures } from './helpers/fixtures.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';

 
type Any = any;

const dir = mkdtempSync(path.join(tmpdir(), 'mgw-responses-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const record = (id: string, owner = 'alice', prev: string | null = null): StoredResponse => storedResponse(id, owner, prev);

t.test('sqlite store: directory created, owner-scoped get/delete, replace, persistence, shared file', async (t) => {
  const file = path.join(dir, 'nested', 'deeper', 'responses.sqlite');
  const s = openSqliteResponseStore(file);
  t.ok(existsSync(path.dirname(file)), 'parent directories created');
  await s.put(record('resp_a'));
  await s.put(record('resp_b', 'bob', 'resp_a'));
  t.same((await s.get('resp_a', 'alice'))!.input, record('resp_a').input);
  t.equal(await s.get('resp_a', 'bob'), undefined, 'another owner sees nothing');
  t.equal((await s.get('resp_b', 'bob'))!.previous_response_id, 'resp_a');
  t.equal(await s.delete('resp_a', 'bob'), false, 'another owner cannot delete');
  const changed = { ...record('resp_a'), model: 'compat/llama' };
  await s.put(changed);
  t.equal((await s.get('resp_a', 'alice'))!.model, 'compat/llama', 'put replaces');

  // A second handle on the same file (another worker process) sees the writes: WAL mode.
  const s2 = openSqliteResponseStore(file);
  t.ok((await s2.get('resp_b', 'bob'))!.response);
  t.ok(existsSync(`${file}-wal`), 'journal in WAL mode');
  t.equal(await s2.delete('resp_b', 'bob'), true);
  t.equal(await s.get('resp_b', 'bob'), undefined);
  await s2.close();
  await s.close();
  await s.close(); // idempotent
  const s3 = openSqliteResponseStore(file);
  t.equal((await s3.get('resp_a', 'alice'))!.model, 'compat/llama', 'persisted across reopen');
  await s3.close();

  const mem = openSqliteResponseStore(':memory:');
  await mem.put(record('resp_m'));
  t.ok(await mem.get('resp_m', 'alice'));
  await mem.close();
  // A relative path is resolved against the config directory.
  const rel = openSqliteResponseStore('./rel/r.sqlite', dir);
  t.equal(await rel.get('resp_none', 'alice'), undefined, 'opened (by its thread) on first use');
  t.ok(existsSync(path.join(dir, 'rel', 'r.sqlite')));
  await rel.close();
});

t.test('sqlite store: output items by id for item_reference, per owner, gone with their response, kept across reopen', async (t) => {
  const file = path.join(dir, 'items', 'responses.sqlite');
  const s = openSqliteResponseStore(file);
  const withItems = (id: string, owner: string, itemIds: string[]): StoredResponse => ({
    ...storedResponse(id, owner, null, itemIds),
    input: [{ type: 'message', id: `msg_input_${id}`, role: 'user', content: 'hi' }],
  });
  await s.put(withItems('resp_1', 'alice', ['msg_a', 'msg_b']));
  await s.put(withItems('resp_2', 'bob', ['msg_c']));
  const got = await s.items(['msg_a', 'msg_b', 'msg_c', 'msg_a', `msg_input_resp_1`], 'alice');
  t.same([...got.keys()].sort(), ['msg_a', 'msg_b'], "the owner's output items only (not bob's, not input items), each once");
  t.same((got.get('msg_b') as Any).content[0].text, 'text of msg_b', 'the item as stored');
  t.equal((await s.items(['msg_c'], 'bob')).size, 1);
  await s.put(withItems('resp_2', 'bob', ['msg_d']));
  t.same([...(await s.items(['msg_c', 'msg_d'], 'bob')).keys()], ['msg_d'], 'a replaced response keeps only its new items');
  t.equal(await s.delete('resp_1', 'alice'), true);
  t.equal((await s.items(['msg_a', 'msg_b'], 'alice')).size, 0, 'deleting a response deletes its items');
  await s.close();
  const again = openSqliteResponseStore(file);
  t.equal((await again.items(['msg_d'], 'bob')).get('msg_d')?.id, 'msg_d', 'persisted across reopen');
  await again.close();
});

t.test('sqlite store: a store written before the item index gets its output items indexed on first open', async (t) => {
  const file = path.join(dir, 'old', 'responses.sqlite');
  mkdirSync(path.dirname(file), { recursive: true });
  // The table as the previous version created it, with one response in it.
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  const old = new DatabaseSync(file);
  old.exec(`CREATE TABLE responses (id TEXT PRIMARY KEY, owner TEXT NOT NULL, model TEXT NOT NULL, created_at INTEGER NOT NULL,
    previous_response_id TEXT, input TEXT NOT NULL, output TEXT NOT NULL, response TEXT NOT NULL) STRICT`);
  const output = [
    { type: 'message', id: 'msg_old', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'from before', annotations: [] }] },
    { type: 'function_call', id: 'fc_old', call_id: 'call_1', name: 'f', arguments: '{}' },
    { type: 'message', role: 'assistant', content: 'no id: not indexed' },
  ];
  old.prepare('INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run('resp_old', 'alice', 'openai/gpt-4.1-mini', 1, null, '[]', JSON.stringify(output), '{}');
  old.close();
  const s = openSqliteResponseStore(file);
  const got = await s.items(['msg_old', 'fc_old'], 'alice');
  t.same(got.get('msg_old'), output[0], 'the old response\'s message is found by its id');
  t.same(got.get('fc_old'), output[1]);
  t.equal((await s.items(['msg_old'], 'bob')).size, 0, 'still per owner');
  await s.close();
  // Done once: the file now carries schema version 1, and a second open finds the same items.
  const check = new DatabaseSync(file);
  t.equal((check.prepare('PRAGMA user_version').get() as { user_version: number }).user_version, 1);
  check.close();
  const again = openSqliteResponseStore(file);
  t.equal((await again.items(['msg_old', 'fc_old'], 'alice')).size, 2);
  await again.close();
});

t.test('gateway: stored responses survive a restart on the same file; the store is closed at shutdown', async (t) => {
  const file = path.join(dir, 'gw', 'responses.sqlite');
  const mock = await startOpenAIMock();
  t.teardown(() => mock.close());
  const yaml = `
providers:
  - { name: compat, family: openai-compatible, base_url: "${mock.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 2000, retries: 0 }
storage: { responses_db: "${file}" }
models:
  - id: compat/gpt
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
`;
  const gw1 = await startGateway(yaml);
  const c1 = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw1.baseURL, maxRetries: 0 });
  const r: Any = await c1.responses.create({ model: 'compat/gpt', input: 'remember me' });
  await gw1.close();
  t.ok(existsSync(file));
  const gw2 = await startGateway(yaml);
  t.teardown(() => gw2.close());
  const c2 = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw2.baseURL, maxRetries: 0 });
  t.equal((await c2.responses.retrieve(r.id)).output_text, 'Echo: remember me');
  await c2.responses.create({ model: 'compat/gpt', previous_response_id: r.id, input: 'and now?' });
  t.same(mock.requests.at(-1)!.body.messages.map((m: Any) => m.content), ['remember me', 'Echo: remember me', 'and now?']);
});

t.test('ownership: env keys by digest (reordering GATEWAY_API_KEYS changes nothing), file keys by name', async (t) => {
  const file = path.join(dir, 'own', 'responses.sqlite');
  const mock = await startOpenAIMock();
  t.teardown(() => mock.close());
  const yaml = `
providers:
  - { name: compat, family: openai-compatible, base_url: "${mock.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 2000, retries: 0 }
storage: { responses_db: "${file}" }
models:
  - id: compat/gpt
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
`;
  const gw1 = await startGateway(yaml, { GATEWAY_API_KEYS: 'key-a-1111111111,key-b-2222222222' });
  const a1 = new OpenAI({ apiKey: 'key-a-1111111111', baseURL: gw1.baseURL, maxRetries: 0 });
  const r: Any = await a1.responses.create({ model: 'compat/gpt', input: 'mine' });
  await gw1.close();
  const gw2 = await startGateway(yaml, { GATEWAY_API_KEYS: 'key-b-2222222222,key-a-1111111111' });
  t.teardown(() => gw2.close());
  const a2 = new OpenAI({ apiKey: 'key-a-1111111111', baseURL: gw2.baseURL, maxRetries: 0 });
  const b2 = new OpenAI({ apiKey: 'key-b-2222222222', baseURL: gw2.baseURL, maxRetries: 0 });
  t.equal((await a2.responses.retrieve(r.id)).id, r.id, 'still the owner after reordering');
  const e: Any = await b2.responses.retrieve(r.id).catch((e) => e);
  t.equal(e.status, 404, 'the other key, now env-1, does not inherit it');
});

const model = (caps: Record<string, unknown> = {}, id = 'x/model'): ModelConfig => ({ id, capabilities: caps } as unknown as ModelConfig);
const where = (i: number) => `input[${i}]`;

t.test('items -> IR messages: one assistant message per turn, signed reasoning restored, foreign items dropped with notes', async (t) => {
  const details = [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }];
  const items = normalizeInput([
    { role: 'user', content: 'q1' } as Item,
    { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'hmm' }], encrypted_content: encodeReasoning(details) },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'let me check' }] },
    { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
    { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{"a":1}' },
    { type: 'function_call_output', call_id: 'c1', output: 'one' },
    { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
    { type: 'reasoning', id: 'rs_openai', summary: [], encrypted_content: 'gAAAAABxyz' },
    { type: 'web_search_call', id: 'ws_1' },
    { type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }] },
    { role: 'developer', content: [{ type: 'input_text', text: 'dev' }] } as Item,
  ]);
  const { messages, notes } = itemsToMessages(items, 'sys', where);
  t.same(messages, [
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'q1' },
    {
      role: 'assistant',
      content: 'let me check',
      reasoning_content: 'hmm',
      reasoning_details: details,
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } },
        { id: 'c2', type: 'function', function: { name: 'g', arguments: '{"a":1}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: 'one' },
    { role: 'tool', tool_call_id: 'c2', content: 'two' },
    { role: 'assistant', content: 'no' },
    { role: 'developer', content: 'dev' },
  ]);
  t.same(notes.map((n) => n.before), ['1 reasoning item(s)', '1 web_search_call item(s)']);
  t.throws(() => itemsToMessages([{ type: 'message', role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }], null, where), { param: 'input[0].content[0].file_id' } as Any);
  t.throws(() => itemsToMessages([{ type: 'message', role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }], null, where), { param: 'input[0].content[0]' } as Any);
});

t.test('toChatRequest / toNativeBody are pure and map every option', async (t) => {
  const body: ResponsesRequest = {
    model: 'x/model',
    input: 'hi',
    tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: true }, { type: 'web_search_preview', search_context_size: 'low' }],
    tool_choice: 'required',
    parallel_tool_calls: false,
    text: { format: { type: 'json_schema', name: 'n', schema: { type: 'object' }, strict: true, description: 'd' } },
    reasoning: { effort: 'low', summary: 'auto' },
    native_fields: { top_k: 3 },
    stop: 'END',
    prompt_cache_key: 'k',
  };
  const frozen = JSON.stringify(body);
  const { request, notes } = toChatRequest(body, normalizeInput(body.input), { model: model({ web_search: true, reasoning_summary: true }), stream: true, where });
  t.same(request, {
    model: 'x/model',
    messages: [{ role: 'user', content: 'hi' }],
    stop: 'END',
    stream: true,
    stream_options: { include_usage: true },
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }],
    web_search: { enabled: true, options: { search_context_size: 'low' } },
    tool_choice: 'required',
    parallel_tool_calls: false,
    response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' }, strict: true, description: 'd' } },
    reasoning_effort: 'low',
    reasoning_summary: 'auto',
    native_fields: { top_k: 3 },
  });
  t.same(notes.map((n) => n.param), ['prompt_cache_key']);
  t.equal(JSON.stringify(body), frozen, 'input not mutated');

  const gw = { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: encodeReasoning([]) };
  const native = toNativeBody(
    { ...body, stop: null, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'f' } }, previous_response_id: 'resp_gw', extra: { debug: true }, debug: ['routing'], fallbacks: ['a/b'] } as Any,
    { upstreamModel: 'gpt-x', model: model({ reasoning: true }), items: [{ type: 'message', role: 'user', content: 'a' }, gw], normalize: true },
  );
  t.same(native.body.tools, [{ type: 'function', name: 'f' }]);
  t.same(native.body.tool_choice, { type: 'function', name: 'f' });
  t.same(native.body.input, [{ type: 'message', role: 'user', content: 'a' }], 'gateway reasoning not sent to OpenAI');
  t.equal(native.body.top_k, 3, 'native_fields merged at the top level');
  t.equal(native.body.model, 'gpt-x');
  for (const f of ['previous_response_id', 'extra', 'debug', 'fallbacks', 'native_fields']) t.notOk(f in native.body, `${f} removed`);
  t.equal(JSON.stringify(body), frozen);
});

const completion = (message: Any, finish: Any, usage?: Any): ChatCompletion => ({ id: 'c', object: 'chat.completion', created: 5, model: 'm', choices: [{ index: 0, message, finish_reason: finish, logprobs: null }], usage });

t.test('fromChatCompletion: statuses, refusal, annotations, reasoning placement, usage always detailed', async (t) => {
  const echo = responseEcho({ model: 'x', input: 'y' });
  const long: Any = fromChatCompletion(completion({ role: 'assistant', content: 'cut' }, 'length'), echo, 'x/m');
  t.match(long, { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ status: 'incomplete' }] });
  t.same(long.usage, { input_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 });
  const filtered: Any = fromChatCompletion(completion({ role: 'assistant', content: null }, 'content_filter'), echo, 'x/m');
  t.match(filtered, { status: 'incomplete', incomplete_details: { reason: 'content_filter' } });
  const refusal: Any = fromChatCompletion(completion({ role: 'assistant', content: null, refusal: 'I cannot' }, 'stop'), echo, 'x/m');
  t.same(refusal.output[0].content, [{ type: 'refusal', refusal: 'I cannot' }]);
  const cited: Any = fromChatCompletion(completion({ role: 'assistant', content: 'see', annotations: [{ type: 'url_citation', url_citation: { start_index: 0, end_index: 3, url: 'https://e.x', title: 'E' } }] }, 'stop'), echo, 'x/m');
  t.same(cited.output[0].content[0].annotations, [{ type: 'url_citation', start_index: 0, end_index: 3, url: 'https://e.x', title: 'E' }]);
  const signed: Any = fromChatCompletion(completion({ role: 'assistant', content: 'a', reasoning_details: [{ type: 'thought_signature', signature: 's' }] }, 'stop', { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: { cached_tokens: 1 }, completion_tokens_details: { reasoning_tokens: 1 } }), echo, 'x/m');
  t.same(signed.output.map((o: Any) => o.type), ['message', 'reasoning'], 'signature without text goes last, where streams deliver it');
  t.same(signed.usage, { input_tokens: 3, input_tokens_details: { cached_tokens: 1 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 1 }, total_tokens: 5 });
});

function collectHooks() {
  const finished: Any[] = [];
  const failed: Any[] = [];
  const hooks: StreamHooks = { finish: (r) => void finished.push(r), fail: (r) => void failed.push(r), errorBody: midStreamError };
  return { hooks, finished, failed };
}

async function drain(gen: AsyncIterable<ResponseEvent>): Promise<ResponseEvent[]> {
  const out: ResponseEvent[] = [];
  for await (const e of gen) out.push(e);
  return out;
}

const chunk = (delta: Any, finish: Any = null, usage: Any = undefined): ChatChunk => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) });
async function* from(chunks: ChatChunk[], failAfter?: number) {
  for (const [i, c] of chunks.entries()) {
    if (i === failAfter) throw new TransportError('socket hang up', 'ECONNRESET');
    yield c;
  }
}
const init = { id: 'resp_t', created_at: 1, model: 'x/m', echo: responseEcho({ model: 'x', input: 'y' }) };

t.test('chat chunks -> events in batches: the same events as one by one, a batch per batch of chunks, end events before the store', async (t) => {
  const { MappedEvents } = await import('../src/stream/mapped.js');
  const list = [chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop')];
  // A batch source of chat chunks: two "chunks of events", of three and one.
  const batched = () => {
    let step = 0;
    const groups = [list.slice(0, 3), list.slice(3)];
    return new MappedEvents<ChatChunk>(
      { [Symbol.asyncIterator]: () => ({ next: async () => (step < groups.length ? { done: false as const, value: { event: undefined, data: String(step++), id: undefined } } : { done: true as const, value: undefined }) }) },
      { step: (ev, out) => (out.push(...groups[Number(ev.data)]), false), end: () => {} },
    );
  };
  const oneByOne = await drain(chatToResponseEvents(from(list), init, collectHooks().hooks));
  const { hooks, finished } = collectHooks();
  const order: string[] = [];
  const src = chatToResponseEvents(batched(), init, { ...hooks, finish: (r) => (order.push('finish'), hooks.finish(r)) });
  const batches: ResponseEvent[][] = [];
  for (let b = await src.nextBatch(); b; b = await src.nextBatch()) {
    batches.push(b);
    order.push(`batch of ${b.length}`);
  }
  t.same(batches.flat().map((e) => e.type), oneByOne.map((e) => e.type), 'the same events in the same order');
  t.same(batches.flat().map((e) => e.sequence_number), oneByOne.map((_, i) => i));
  t.equal(batches.length, 3, 'start + first chunks, last chunk + end, terminal');
  t.equal(order.at(-2), 'finish', 'the store is updated after the end events went out, before the terminal event');
  t.equal(batches.at(-1)![0].type, 'response.completed');
  t.equal(finished.length, 1);

  const { hooks: h2, failed } = collectHooks();
  const failing = new MappedEvents<ChatChunk>(
    (async function* () {
      yield { event: undefined, data: '0', id: undefined };
      throw new TransportError('socket hang up', 'ECONNRESET');
    })(),
    { step: (_ev, out) => (out.push(list[0], list[1]), false), end: () => {} },
  );
  const broken = await drain(chatToResponseEvents(failing, init, h2));
  t.same(broken.slice(-2).map((e) => e.type), ['error', 'response.failed'], 'a source that breaks ends with error and response.failed');
  t.ok(broken.some((e) => e.type === 'response.output_text.delta'), 'after what came before');
  t.equal(failed.length, 1);
});

t.test('chat chunks -> events: interleaved reasoning, late signature, tool calls, refusal, break', async (t) => {
  const { hooks, finished } = collectHooks();
  const ev = await drain(
    chatToResponseEvents(
      from([
        chunk({ role: 'assistant', reasoning_content: 'think ' }),
        chunk({ reasoning_content: 'more' }),
        chunk({ content: 'Hel' }),
        chunk({ content: 'lo' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'g', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }),
        chunk({ reasoning_content: 'after tools' }),
        chunk({ reasoning_details: [{ type: 'thought_signature', signature: 'late' }] }, 'tool_calls'),
        { ...chunk({}), choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 1 } } },
      ]),
      init,
      hooks,
    ),
  );
  t.ok(ev.every((e, i) => e.sequence_number === i));
  const final: Any = ev.at(-1)!;
  t.equal(final.type, 'response.completed');
  t.same(final.response.output.map((o: Any) => o.type), ['reasoning', 'message', 'function_call', 'function_call']);
  const rs = final.response.output[0];
  t.same(rs.summary.map((s: Any) => s.text), ['think more', 'after tools'], 'second thinking segment is a second summary part');
  t.equal(Buffer.from(rs.encrypted_content.slice(5), 'base64url').toString(), JSON.stringify([{ type: 'thought_signature', signature: 'late' }]), 'late signature attached');
  t.same(final.response.output.slice(2).map((o: Any) => [o.call_id, o.arguments]), [['call_1', '{"a":1}'], ['call_2', '']]);
  t.same(final.response.usage.output_tokens_details, { reasoning_tokens: 1 });
  t.equal(finished.length, 1);
  // SDK accumulation of these events gives the same final object.
  const { accumulateResponse } = await import('openai/lib/responses/ResponseAccumulator');
  let snap: Any;
  for (const e of ev.slice(0, -1)) snap = accumulateResponse(e as Any, snap);
  t.same(JSON.parse(JSON.stringify(snap.output)), final.response.output, 'the SDK rebuilds the same output from the deltas');

  const r = await drain(chatToResponseEvents(from([chunk({ refusal: 'No' }), chunk({ refusal: '.' }, 'stop')]), init, collectHooks().hooks));
  t.same((r.at(-1) as Any).response.output[0].content, [{ type: 'refusal', refusal: 'No.' }]);
  t.ok(r.some((e) => e.type === 'response.refusal.done'));

  const { hooks: h2, failed } = collectHooks();
  const broken = await drain(chatToResponseEvents(from([chunk({ content: 'a' }), chunk({ content: 'b' })], 1), init, h2));
  t.same(broken.slice(-2).map((e) => e.type), ['error', 'response.failed']);
  t.match(broken.at(-1), { response: { status: 'failed', error: { code: 'server_error', message: /\(upstream_stream_error\)$/ } } });
  t.equal(failed.length, 1);
});

t.test('native passthrough: missing sequence numbers filled, premature end is a failure', async (t) => {
  const { hooks, failed } = collectHooks();
  async function* up() {
    yield { event: 'response.created', data: { type: 'response.created', response: { id: 'resp_1', model: 'gpt-x', output: [] } } };
    yield { event: 'response.output_item.done', data: { type: 'response.output_item.done', output_index: 0, item: { type: 'message', id: 'msg_1' } } };
  }
  const ev = await drain(nativeResponseEvents(up(), { model: 'openai/x' }, hooks));
  t.same(ev.map((e) => [e.type, e.sequence_number]), [['response.created', 0], ['response.output_item.done', 1], ['error', 2], ['response.failed', 3]]);
  t.match(ev[0], { response: { model: 'openai/x' } });
  t.match(ev[3], { response: { status: 'failed', output: [{ id: 'msg_1' }], model: 'openai/x' } });
  t.equal(failed.length, 1);
});

t.test('native passthrough in batches: upstream batches patched as batches, the store updated before the terminal event, the connection let go at it', async (t) => {
  const { jsonEvents } = await import('../src/stream/mapped.js');
  const { RESPONSES_TERMINAL } = await import('../src/api/responses-stream.js');
  const resp = (status: string) => ({ id: 'resp_1', model: 'gpt-x', status, output: [], usage: status === 'completed' ? { input_tokens: 1, output_tokens: 2, total_tokens: 3 } : null });
  const all = [
    { type: 'response.created', response: resp('in_progress') },
    { type: 'response.output_item.added', output_index: 0, item: { type: 'message', id: 'msg_1' } },
    { type: 'response.output_text.delta', output_index: 0, delta: 'Hel' },
    { type: 'response.output_text.delta', output_index: 0, delta: 'lo' },
    { type: 'response.output_item.done', output_index: 0, item: { type: 'message', id: 'msg_1' } },
    { type: 'response.completed', response: resp('completed') },
    { type: 'response.output_text.delta', output_index: 0, delta: 'after the end' },
  ];
  // Upstream SSE events as a batch source (as UpstreamEvents hands them out): what arrived together.
  const upstream = (groups: number[][], failAt?: number) => {
    let i = 0;
    const src = {
      returned: 0,
      async nextBatch() {
        if (i === failAt) throw new TransportError('socket hang up', 'ECONNRESET');
        return i < groups.length ? groups[i++].map((n) => ({ event: all[n].type, data: JSON.stringify(all[n]), id: undefined })) : null;
      },
      async next() {
        throw new Error('read in batches only');
      },
      async return() {
        src.returned++;
        return { done: true as const, value: undefined };
      },
      [Symbol.asyncIterator]() {
        return src;
      },
    };
    return src;
  };
  const up = upstream([[0, 1, 2], [3, 4, 5, 6]]);
  const { hooks, finished } = collectHooks();
  const order: string[] = [];
  const src = nativeResponseEvents(jsonEvents(up, (type) => RESPONSES_TERMINAL.has(type)), { model: 'openai/x', previousResponseId: 'resp_0' }, { ...hooks, finish: (r) => (order.push('finish'), hooks.finish(r)) });
  const batches: ResponseEvent[][] = [];
  for (let b = await src.nextBatch(); b; b = await src.nextBatch()) {
    batches.push(b);
    order.push(`batch of ${b.length}`);
  }
  t.same(order, ['batch of 3', 'batch of 2', 'finish', 'batch of 1'], 'a batch per upstream batch; the terminal event after the store update, and after the events before it');
  t.same(batches.flat().map((e) => e.type), all.slice(0, 6).map((e) => e.type), 'nothing read after the terminal event');
  t.same(batches.flat().map((e) => e.sequence_number), [0, 1, 2, 3, 4, 5], 'sequence numbers filled');
  t.match(batches.at(-1)![0], { response: { model: 'openai/x', previous_response_id: 'resp_0', usage: { input_tokens_details: { cached_tokens: 0 } } } }, 'the terminal response patched, its usage completed');
  t.equal(finished.length, 1);
  t.equal(up.returned, 1, 'the upstream was let go at the terminal event');

  // The same events as a plain async iterable, one by one (a custom provider's stream).
  async function* plain() {
    for (const e of all.slice(0, 6)) yield { event: e.type, data: structuredClone(e) as Record<string, unknown> };
  }
  const oneByOne = await drain(nativeResponseEvents(plain(), { model: 'openai/x', previousResponseId: 'resp_0' }, collectHooks().hooks));
  t.same(oneByOne, batches.flat(), 'the same events as one by one');

  const { hooks: h2, failed } = collectHooks();
  const cut = upstream([[0, 1, 2]], 1);
  const broken = await drain(nativeResponseEvents(jsonEvents(cut, (type) => RESPONSES_TERMINAL.has(type)), { model: 'openai/x' }, h2));
  t.same(broken.map((e) => e.type), ['response.created', 'response.output_item.added', 'response.output_text.delta', 'error', 'response.failed'], 'a source that breaks ends with error and response.failed, after what came before');
  t.match(broken.at(-1), { sequence_number: 4, response: { status: 'failed', model: 'openai/x', error: { code: 'server_error', message: /\(upstream_stream_error\)$/ } } });
  t.equal(failed.length, 1);
});

t.test('truncation units and fitting', async (t) => {
  const items: Item[] = [
    { type: 'message', role: 'user', content: 'a' },
    { type: 'reasoning', summary: [] },
    { type: 'function_call', call_id: '1', name: 'f', arguments: '' },
    { type: 'function_call', call_id: '2', name: 'f', arguments: '' },
    { type: 'function_call_output', call_id: '2', output: 'x' },
    { type: 'function_call_output', call_id: '1', output: 'y' },
    { type: 'message', role: 'assistant', content: 'b' },
  ];
  t.same(unitsOf(items), [0, 1, 1, 1, 1, 1, 2], 'parallel calls, their outputs and the reasoning before them form one unit');
  const none = await fitContext(items, { modelId: 'm', truncation: 'disabled' });
  t.equal(none.changed, false, 'no context_window: nothing measured');
  await t.rejects(fitContext([{ type: 'message', role: 'user', content: 'x'.repeat(400) }], { modelId: 'm', contextWindow: 50, truncation: 'disabled', tokenizer: 'o200k_base' }), GatewayError);
});

// Recorded OpenAI streams (read at run time; never copied into the project).
const { dir: fixtures, skip } = sharedFixtures('openai-responses');
t.test('conformance: recorded OpenAI Responses streams pass through intact', { skip }, async (t) => {
  const files = readdirSync(fixtures).filter((f) => f.endsWith('.chunks.txt'));
  t.ok(files.length >= 3);
  for (const f of files) {
    const lines = readFileSync(path.join(fixtures, f), 'utf8').split('\n').filter((l) => l.trim());
    // A file may hold several streams (a tool loop): split at each response.created.
    const streams: Any[][] = [];
    for (const l of lines) {
      const e = JSON.parse(l);
      if (e.type === 'response.created') streams.push([]);
      streams.at(-1)!.push(e);
    }
    for (const recorded of streams) {
      const { hooks, finished, failed } = collectHooks();
      async function* up() {
        for (const e of recorded) yield { event: e.type, data: structuredClone(e) };
      }
      const out = await drain(nativeResponseEvents(up(), { model: 'openai/gpt-5-mini' }, hooks));
      t.equal(out.length, recorded.length, `${f}: every event passed through, none added`);
      const strip = (e: Any) => JSON.stringify({ ...e, response: e.response ? { ...e.response, model: 'M', usage: e.response.usage ? { ...e.response.usage } : e.response.usage } : undefined });
      t.ok(out.every((e, i) => strip(e) === strip(recorded[i])), `${f}: events unchanged but for the model`);
      t.ok(out.filter((e: Any) => e.response).every((e: Any) => e.response.model === 'openai/gpt-5-mini'));
      const last = recorded.at(-1).type;
      t.equal(last === 'response.failed' ? failed.length : finished.length, 1, `${f}: terminal ${last} handled`);
    }
  }
});

t.test('conformance: an older recording without sequence_number gets them filled, and the SDK rebuilds it', { skip }, async (t) => {
  const { parse } = await import('yaml');
  const { parseSSE } = await import('../src/sse.js');
  const { accumulateResponse } = await import('openai/lib/responses/ResponseAccumulator');
  const cassette = parse(readFileSync(path.join(fixtures, 'test_openai_responses_stream.yaml'), 'utf8'));
  for (const it of cassette.interactions) {
    const { hooks, finished } = collectHooks();
    async function* up() {
      const body: string = it.response.body.string;
      for await (const e of parseSSE((async function* () {
        yield body;
      })())) yield { event: e.event, data: JSON.parse(e.data) };
    }
    const out = await drain(nativeResponseEvents(up(), { model: 'openai/gpt-4o' }, hooks));
    t.ok(out.every((e, i) => e.sequence_number === i), 'sequence numbers filled in order');
    let snap: Any;
    for (const e of out) snap = accumulateResponse(e as Any, snap);
    t.equal(snap.status, 'completed');
    t.equal(snap.model, 'openai/gpt-4o');
    t.equal(finished.length, 1);
    t.same(snap.output, (out.at(-1) as Any).response.output, 'accumulated output equals the terminal response');
  }
});
