// Unit tests of the Messages API mappings (src/api/messages-map.ts,
// src/api/messages-stream.ts): pure functions, no HTTP.
import t from 'tap';
import { toChatRequest, fromChatCompletion, nativeBody, gatewaySignature, readSignature, effortFor, stopReason, usageFromChat, toolInput, type MessagesRequest } from '../src/api/messages-map.js';
import { ChatToMessageEvents, NativeMessageEvents, type MessageEvent } from '../src/api/messages-stream.js';
import { anthropicErrorType } from '../src/api/messages.js';
import type { ChatChunk, ChatCompletion, NormalizationEntry } from '../src/types.js';

type Any = any;
const base = (extra: Partial<MessagesRequest> = {}): MessagesRequest => ({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], ...extra });

t.test('signatures: family and details round-trip; altered ones are not the gateway\'s', async (t) => {
  const details = [{ type: 'thought_signature', signature: 'abc', tool_call_id: 'c1' }];
  const sig = gatewaySignature('google', details);
  t.same(readSignature(sig), { family: 'google', details });
  t.equal(readSignature('EqQBCkYIBxgCKkA'), undefined, "Anthropic's own");
  t.equal(readSignature('mgw1.google'), undefined);
  t.equal(readSignature('mgw1.google.' + Buffer.from('{"x":1}').toString('base64url')), undefined, 'not a list');
  t.equal(readSignature('mgw1.google.%%%'), undefined);
});

t.test('top_k: native where the target has it', async (t) => {
  const r = (family: string, upstreamModel?: string) => toChatRequest(base({ top_k: 7 }), { family, stream: false, upstreamModel });
  t.same(r('google').request.native_fields, { topK: 7 });
  t.same(r('vertex', 'gemini-2.5-flash').request.native_fields, { topK: 7 });
  t.same(r('bedrock', 'us.anthropic.claude-sonnet-4-5-20250929-v1:0').request.native_fields, { top_k: 7 });
  const o = r('openai');
  t.notOk(o.request.native_fields);
  t.match(o.notes, [{ param: 'top_k', action: 'strip' }]);
  t.same(r('bedrock', 'us.amazon.nova-pro-v1:0').request.native_fields, undefined);
  t.same(toChatRequest(base({ top_k: 7, native_fields: { topK: 3 } }), { family: 'google', stream: false }).request.native_fields, { topK: 3 }, "the caller's native field wins");
});

t.test('max_tokens sized for Claude is lowered to what the target allows, with a note', async (t) => {
  const { request, notes } = toChatRequest(base({ max_tokens: 32000 }), { family: 'openai', stream: false, maxOutput: 16384 });
  t.equal(request.max_tokens, 16384);
  t.match(notes, [{ param: 'max_tokens', action: 'override', before: 32000, after: 16384 }]);
  t.equal(toChatRequest(base({ max_tokens: 100 }), { family: 'openai', stream: false, maxOutput: 16384 }).request.max_tokens, 100);
});

t.test('requests: system, cache marks, tool choice, thinking, documents', async (t) => {
  const { request, notes } = toChatRequest(
    base({
      system: [{ type: 'text', text: 'A' }, { type: 'text', text: 'B', cache_control: { type: 'ephemeral', ttl: '1h' } }],
      tools: [{ type: 'custom', name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }, { type: 'web_search_20250305', name: 'web_search', allowed_domains: ['x.org'] }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      thinking: { type: 'enabled', budget_tokens: 20000 },
      metadata: { user_id: 'u' },
      stop_sequences: [],
      messages: [
        { role: 'user', content: [{ type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'doc' }] } }, { type: 'text', text: 'q', cache_control: { type: 'ephemeral' } }] },
        { role: 'assistant', content: [{ type: 'text', text: 'a', cache_control: { type: 'ephemeral' } }, { type: 'server_tool_use', id: 's', name: 'web_search', input: {} }] },
        { role: 'assistant', content: '' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'r', cache_control: { type: 'ephemeral' } }] },
      ],
    }),
    { family: 'google', stream: true },
  );
  t.same(request.messages[0], { role: 'system', content: [{ type: 'text', text: 'A' }, { type: 'text', text: 'B', cache_control: { type: 'ephemeral', ttl: '3600s' } }] });
  t.same(request.messages[1], { role: 'user', content: [{ type: 'text', text: 'doc' }, { type: 'text', text: 'q', cache_control: { type: 'ephemeral' } }] });
  t.same(request.messages[2], { role: 'assistant', content: [{ type: 'text', text: 'a', cache_control: { type: 'ephemeral' } }] });
  t.same(request.messages[3], { role: 'tool', tool_call_id: 't', content: 'r', cache_control: { type: 'ephemeral' } });
  t.equal(request.messages.length, 4, 'an empty assistant turn is dropped');
  t.same(request.tools, [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } }, cache_control: { type: 'ephemeral' } }]);
  t.same(request.web_search, { enabled: true, options: { allowed_domains: ['x.org'] } });
  t.match(request, { tool_choice: 'required', parallel_tool_calls: false, reasoning_effort: 'high', user: 'u', stream: true, stream_options: { include_usage: true } });
  t.notOk(request.stop, 'no empty stop list');
  t.ok(notes.some((n: NormalizationEntry) => n.param === 'messages[1].content' && n.action === 'strip'), 'server tool records dropped with a note');
  const adaptive = toChatRequest(base({ thinking: { type: 'adaptive' } }), { family: 'openai', stream: false });
  t.notOk(adaptive.request.reasoning_effort);
  t.match(adaptive.notes, [{ param: 'thinking', action: 'strip' }]);
  t.notOk(toChatRequest(base({ thinking: { type: 'disabled' } }), { family: 'openai', stream: false }).notes.length);
  t.throws(() => toChatRequest(base({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] }), { family: 'openai', stream: false }), { param: 'messages[0].content[0].source' } as Any);
  t.throws(() => toChatRequest(base({ messages: [{ role: 'user', content: [{ type: 'search_result', source: 'x' }] }] }), { family: 'openai', stream: false }), { param: 'messages[0].content[0].type' } as Any);
  t.equal(effortFor(1024), 'low');
  t.equal(effortFor(8000), 'medium');
});

t.test('native body: patched, count fields only, foreign signatures removed', async (t) => {
  const notes: NormalizationEntry[] = [];
  const ours = { type: 'thinking', thinking: 't', signature: gatewaySignature('google', []) };
  const theirs = { type: 'thinking', thinking: 't', signature: 'EqQBsig' };
  const body = base({ stream: true, debug: true, fallbacks: ['x'], native_fields: { service_tier: 'auto' }, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [ours, theirs, { type: 'text', text: 'a' }] }, { role: 'user', content: 'q2' }] });
  const out = nativeBody(body, 'claude-x', (e) => notes.push(e));
  t.equal(out.model, 'claude-x');
  t.notOk('debug' in out || 'fallbacks' in out || 'native_fields' in out);
  t.equal(out.service_tier, 'auto');
  t.same((out.messages as Any)[1].content, [theirs, { type: 'text', text: 'a' }]);
  t.equal(body.messages[1].content.length, 3, 'the request is not mutated');
  t.match(notes, [{ param: 'messages', action: 'strip' }]);
  t.same(Object.keys(nativeBody(body, 'claude-x', () => {}, ['model', 'messages', 'system'])).sort(), ['messages', 'model']);
  const plain = base();
  t.equal(nativeBody(plain, 'y', () => {}).messages, plain.messages, 'nothing to strip: the messages are the same array');
});

t.test('a tool loop whose assistant turn has no thinking Claude can read: thinking off, with a note', async (t) => {
  const loop = (assistant: Any[]) =>
    base({
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: assistant },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'r' }] },
      ],
    });
  const call = { type: 'tool_use', id: 't1', name: 'f', input: {} };
  const foreign = { type: 'thinking', thinking: 'x', signature: gatewaySignature('google', [{ type: 'thought_signature', signature: 's' }]) };
  const notes: NormalizationEntry[] = [];
  t.notOk('thinking' in nativeBody(loop([foreign, call]), 'c', (e) => notes.push(e)));
  t.match(notes, [{ param: 'messages' }, { param: 'thinking', action: 'strip' }]);
  t.notOk('thinking' in nativeBody(loop([call]), 'c', () => {}), 'a turn from a model without thinking');
  t.ok('thinking' in nativeBody(loop([{ type: 'thinking', thinking: 'x', signature: 'EqQB' }, call]), 'c', () => {}), "Claude's own thinking: kept on");
  const claudeOnBedrock = { family: 'bedrock', stream: false, upstreamModel: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0' };
  const off = toChatRequest(loop([foreign, call]), claudeOnBedrock);
  t.notOk(off.request.reasoning_effort);
  t.ok(off.notes.some((n) => n.param === 'thinking' && n.action === 'strip'));
  const own = { type: 'thinking', thinking: 'x', signature: gatewaySignature('bedrock', [{ type: 'thinking', thinking: 'x', signature: 'sig' }]) };
  t.equal(toChatRequest(loop([own, call]), claudeOnBedrock).request.reasoning_effort, 'low', "Bedrock's own signed reasoning restored: thinking stays on");
  t.equal(toChatRequest(loop([foreign, call]), { family: 'google', stream: false }).request.reasoning_effort, 'low', 'Gemini has no such rule');
});

t.test('results: stop reasons, usage without the cached part, tool input', async (t) => {
  t.equal(stopReason('length'), 'max_tokens');
  t.equal(stopReason('tool_calls'), 'tool_use');
  t.equal(stopReason('content_filter'), 'refusal');
  t.equal(stopReason(null), 'end_turn');
  t.same(usageFromChat({ prompt_tokens: 100, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 60, cache_write_tokens: 30 } }), { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 30, cache_read_input_tokens: 60 });
  t.same(usageFromChat(undefined), { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  t.same(toolInput(''), {});
  t.same(toolInput('[1]'), { _raw_arguments: '[1]' });
  t.same(toolInput('{"a":'), { _raw_arguments: '{"a":' });
  const c: ChatCompletion = {
    id: 'x',
    object: 'chat.completion',
    created: 0,
    model: 'up',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'no', reasoning_content: 'hmm' }, finish_reason: 'content_filter', logprobs: null }],
  };
  const m = fromChatCompletion(c, 'asked', 'openai');
  t.match(m, { model: 'asked', stop_reason: 'refusal', content: [{ type: 'thinking', thinking: 'hmm' }, { type: 'text', text: 'no' }] });
  t.equal(readSignature(m.content[0].signature as string)?.family, 'openai');
  t.equal(anthropicErrorType('permission_denied_error', 403), 'permission_error');
  t.equal(anthropicErrorType('invalid_request_error', 413), 'request_too_large');
  t.equal(anthropicErrorType('api_error', 529), 'overloaded_error');
  t.equal(anthropicErrorType('something_else', 502), 'api_error');
  t.equal(anthropicErrorType('something_else', 409), 'invalid_request_error');
});

const chunk = (delta: ChatChunk['choices'][number]['delta'], finish: ChatChunk['choices'][number]['finish_reason'] = null, usage?: Any): ChatChunk => ({
  id: 'c',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'm',
  choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }],
  ...(usage ? { usage } : {}),
});

async function collect(it: AsyncIterable<MessageEvent>): Promise<MessageEvent[]> {
  const out: MessageEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

const hooks = { finish: () => undefined, errorBody: (err: unknown) => ({ type: 'api_error', message: String((err as Error).message) }) };

t.test('stream translation: blocks in order, tool fragments, late signatures, usage', async (t) => {
  async function* chunks() {
    yield chunk({ role: 'assistant', reasoning_content: 'think' });
    yield chunk({ content: 'Hi' });
    yield chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] });
    yield chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] });
    yield chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'g', arguments: '' } }] });
    yield chunk({ reasoning_details: [{ type: 'thought_signature', signature: 's' }] }, 'tool_calls');
    yield chunk({}, null, { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 0 } });
  }
  const evs = await collect(new ChatToMessageEvents(chunks(), { model: 'asked', family: 'google' }, hooks));
  t.same(
    evs.map((e) => (e.type === 'content_block_delta' ? `${e.type}:${(e.delta as Any).type}` : e.type)),
    [
      'message_start',
      'content_block_start', 'content_block_delta:thinking_delta', 'content_block_delta:signature_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta:text_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta:input_json_delta', 'content_block_delta:input_json_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta:input_json_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta:signature_delta', 'content_block_stop',
      'message_delta',
      'message_stop',
    ],
  );
  t.same(readSignature((evs[3].delta as Any).signature), { family: 'google', details: [] }, 'the thinking block signs what was known then');
  t.same(readSignature((evs[16].delta as Any).signature), { family: 'google', details: [{ type: 'thought_signature', signature: 's' }] }, 'later state in a block of its own');
  t.equal((evs[13].delta as Any).partial_json, '{}', 'a call without arguments is {}');
  t.same(evs[evs.length - 2], { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { input_tokens: 6, output_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 4 } });
  t.same((evs[0].message as Any).model, 'asked');
});

t.test('stream translation: a failure is an error event; an empty stream still closes', async (t) => {
  async function* broken() {
    yield chunk({ content: 'x' });
    throw new Error('cut');
  }
  const evs = await collect(new ChatToMessageEvents(broken(), { model: 'm', family: 'openai' }, hooks));
  t.same(evs.map((e) => e.type), ['message_start', 'content_block_start', 'content_block_delta', 'error']);
  t.same(evs[3], { type: 'error', error: { type: 'api_error', message: 'cut' } });
  const failsAtOnce: AsyncIterable<ChatChunk> = { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('down')) }) };
  t.same((await collect(new ChatToMessageEvents(failsAtOnce, { model: 'm', family: 'openai' }, hooks))).map((e) => e.type), ['message_start', 'error']);
  const none: AsyncIterable<ChatChunk> = { [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true, value: undefined }) }) };
  t.same((await collect(new ChatToMessageEvents(none, { model: 'm', family: 'openai' }, hooks))).map((e) => e.type), ['message_start', 'message_delta', 'message_stop']);
});

t.test('native pass-through: model patched, usage gathered, a cut stream ends in an error event', async (t) => {
  const finals: Any[] = [];
  const h = { finish: (u: Any) => (finals.push(u), { debug: { x: 1 } }), errorBody: hooks.errorBody };
  async function* events() {
    yield { event: 'message_start', data: { type: 'message_start', message: { model: 'claude-up', usage: { input_tokens: 5, output_tokens: 1 } } } };
    yield { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } } };
    yield { event: 'message_stop', data: { type: 'message_stop' } };
  }
  const evs = await collect(new NativeMessageEvents(events(), 'asked', h));
  t.equal((evs[0].message as Any).model, 'asked');
  t.same(finals, [{ input_tokens: 5, output_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }]);
  t.same(evs[1].debug, { x: 1 }, "the finalizers' debug rides on message_delta");
  async function* cut() {
    yield { data: { type: 'message_start', message: { model: 'x' } } };
  }
  const c = await collect(new NativeMessageEvents(cut(), 'asked', h));
  t.same(c.map((e) => e.type), ['message_start', 'error']);
});
