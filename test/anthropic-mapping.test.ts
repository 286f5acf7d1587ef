// Unit tests of the anthropic family's pure mappings (IR -> Messages request,
// Messages response -> chat completion, stream events -> chunks, errors),
// beside the HTTP tests in anthropic.test.ts. Expected shapes follow
// Anthropic's Messages API reference (https://docs.anthropic.com/en/api/messages).
import t from 'tap';
import type { ChatChunk, ChatRequest, NormalizationEntry } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import type { SSEEvent } from '../src/sse.js';
import type { GatewayError } from '../src/errors.js';
import { toAnthropic, DEFAULT_MAX_TOKENS } from '../plugins/providers/anthropic/request.js';
import { fromAnthropic, finishReason, mapUsage } from '../plugins/providers/anthropic/response.js';
import { AnthropicChunkMapper, textDelta } from '../plugins/providers/anthropic/stream.js';
import { anthropicError, streamError } from '../plugins/providers/anthropic/errors.js';

const model = { id: 'anthropic/claude-sonnet-4-5', capabilities: { thinking: true }, max_output_tokens: 64000 } as unknown as ModelConfig;
const map = (req: Partial<ChatRequest>, stream = false) => {
  const notes: NormalizationEntry[] = [];
  const out = toAnthropic({ model: 'claude-sonnet-4-5', messages: [], ...req } as ChatRequest, model, (n) => notes.push(n), stream);
  return { ...out, notes };
};

t.test('request: system to the top level, tool calls and results as blocks, images as sources', async (t) => {
  const req = {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'What is in it?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'look', arguments: '{"zoom":2}' } }] },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'a cat' },
    ],
    tools: [{ type: 'function', function: { name: 'look', description: 'Look closer', parameters: { type: 'object', properties: { zoom: { type: 'number' } } } } }],
    tool_choice: 'required',
    stop: 'END',
    user: 'user-7',
  } as unknown as ChatRequest;
  const { body, notes } = map(req, true);
  t.same(body.system, [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }], 'no cache_control in the request: the end of the system prompt is marked');
  t.equal(body.messages.length, 3, 'user, assistant, user (the tool result)');
  t.same(body.messages[0].content, [
    { type: 'text', text: 'What is in it?' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
  ]);
  t.same(body.messages[1], { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'look', input: { zoom: 2 } }] });
  t.match(body.messages[2], { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1' }] });
  t.same(body.tools, [{ name: 'look', description: 'Look closer', input_schema: { type: 'object', properties: { zoom: { type: 'number' } } }, cache_control: { type: 'ephemeral' } }], 'and so is the end of the tools');
  t.match(notes.find((n) => n.param === 'cache_control'), { action: 'add', after: ['system', 'tools'] }, 'the automatic cache marks are reported');
  t.same(body.tool_choice, { type: 'any' }, "OpenAI's 'required' is Anthropic's 'any'");
  t.same(body.stop_sequences, ['END']);
  t.same(body.metadata, { user_id: 'user-7' });
  t.equal(body.stream, true);
  t.equal(body.max_tokens, 64000, "no max_tokens in the request: the catalog's output limit");
});

t.test('request: pure (the IR is not mutated) and fields Anthropic lacks are noted, not sent', async (t) => {
  const req = { messages: [{ role: 'user', content: 'hi' }], seed: 7, frequency_penalty: 0.5, max_tokens: 100 } as unknown as ChatRequest;
  const before = JSON.stringify(req);
  const { body, notes } = map(req);
  t.equal(JSON.stringify(req), before, 'the request is unchanged');
  t.notOk('seed' in body);
  t.notOk('frequency_penalty' in body);
  t.same(notes.map((n) => n.param).sort(), ['frequency_penalty', 'seed']);
  t.equal(body.max_tokens, 100);
  const { body: noLimit } = toAnthropic({ model: 'm', messages: [{ role: 'user', content: 'x' }] } as ChatRequest, { id: 'x/y' } as unknown as ModelConfig, () => {}, false);
  t.equal(noLimit.max_tokens, DEFAULT_MAX_TOKENS, 'neither request nor catalog: the default');
});

t.test('request: invalid client input is a 400 naming the field', async (t) => {
  const bad = (req: Partial<ChatRequest>) => {
    try {
      map(req);
    } catch (err) {
      return err as GatewayError;
    }
    return undefined;
  };
  const n = bad({ messages: [{ role: 'user', content: 'x' }], n: 2 } as Partial<ChatRequest>);
  t.equal(n?.status, 400);
  t.equal(n?.param, 'n');
  const img = bad({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/tiff;base64,AAAA' } }] }] } as Partial<ChatRequest>);
  t.equal(img?.param, 'messages[0].content[0].image_url.url');
});

t.test('response: text, tool calls, usage with cache tokens, stop reasons', async (t) => {
  const msg = {
    id: 'msg_01',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-5',
    content: [
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'toolu_2', name: 'look', input: { zoom: 3 } },
    ],
    stop_reason: 'tool_use',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 },
  };
  const c = fromAnthropic(msg as never, { includeUsage: false });
  t.equal(c.object, 'chat.completion');
  t.equal(c.choices[0].message.content, 'Let me look.');
  t.same(c.choices[0].message.tool_calls, [{ id: 'toolu_2', type: 'function', function: { name: 'look', arguments: '{"zoom":3}' } }]);
  t.equal(c.choices[0].finish_reason, 'tool_calls');
  t.same(c.usage, { prompt_tokens: 130, completion_tokens: 5, total_tokens: 135, prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 20 }, completion_tokens_details: { reasoning_tokens: 0 } }, 'input excludes cache reads and writes on the wire: the prompt is their sum');
  t.equal(finishReason('max_tokens', false), 'length');
  t.equal(finishReason('refusal', false), 'content_filter');
  t.equal(finishReason('tool_use', true), 'stop', 'the response_format tool is the answer');
  t.equal(finishReason('end_turn', false), 'stop');
  t.same(mapUsage({ input_tokens: 1, output_tokens: 2 }).total_tokens, 3);
});

t.test('stream: every tool-argument fragment arrives, in order, and the finish reason closes it', async (t) => {
  const events: SSEEvent[] = [
    { event: 'message_start', data: JSON.stringify({ type: 'message_start', message: { id: 'msg_9', type: 'message', role: 'assistant', content: [], model: 'm', stop_reason: null, usage: { input_tokens: 12, output_tokens: 1 } } }) },
    { event: 'content_block_start', data: JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_9', name: 'look', input: {} } }) },
    { event: 'content_block_delta', data: JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"zo' } }) },
    { event: 'content_block_delta', data: JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: 'om":4}' } }) },
    { event: 'content_block_stop', data: JSON.stringify({ type: 'content_block_stop', index: 0 }) },
    { event: 'message_delta', data: JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } }) },
    { event: 'message_stop', data: JSON.stringify({ type: 'message_stop' }) },
  ];
  const mapper = new AnthropicChunkMapper({ includeUsage: true });
  const out: ChatChunk[] = [];
  let done = false;
  for (const e of events) done = mapper.step(e, out) || done;
  t.ok(done, 'message_stop is terminal');
  const args = out.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).map((tc) => tc.function?.arguments ?? '').join('');
  t.equal(args, '{"zoom":4}');
  t.equal(out.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).find((tc) => tc.id)?.id, 'toolu_9');
  t.equal(out.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'tool_calls');
  const usage = out.find((c) => c.usage)?.usage;
  t.match(usage, { prompt_tokens: 12, completion_tokens: 9 }, 'include_usage: a usage chunk with the final counts');
  const cut = new AnthropicChunkMapper({ includeUsage: false });
  cut.step(events[0], []);
  t.throws(() => cut.end(), 'an upstream that stops before message_stop was cut: an error, never a clean end');
});

t.test('stream: a text delta read without JSON.parse gives what JSON.parse gives, and anything else is parsed in full', async (t) => {
  const delta = (text: string, index = 0, pad = '') => JSON.stringify({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } }) + pad;
  const texts = ['t0 ', '', 'line\nbreak', 'a "quoted" \\ word', 'é€😀', '\u2028 and \u0001', 'tab\tend', '}}"', '\\'];
  for (const text of texts) {
    for (const data of [delta(text), delta(text, 12, '   '), delta(text, 3, ' \r\n\t')]) t.equal(textDelta(data), text, `read as JSON reads it: text ${texts.indexOf(text)}`);
  }
  // Escapes spelled differently from JSON.stringify's still mean the same text.
  t.equal(textDelta('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\u00e9\\/"}}'), 'é/');
  const other = [
    JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{}' } }),
    JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x', extra: 1 } }),
    JSON.stringify({ type: 'content_block_delta', index: 0, delta: { text: 'x', type: 'text_delta' } }),
    '{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}',
    '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}',
    '{"type":"content_block_delta","index":1.5,"delta":{"type":"text_delta","text":"x"}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} x',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"raw\ttab"}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \\q escape"}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut',
  ];
  for (const [i, data] of other.entries()) t.equal(textDelta(data), undefined, `parsed in full: shape ${i}`);

  // The mapper gives the same chunks whichever way an event is read.
  const start: SSEEvent[] = [
    { event: 'message_start', data: JSON.stringify({ type: 'message_start', message: { id: 'msg_7', model: 'm', usage: { input_tokens: 3 } } }) },
    { event: 'content_block_start', data: JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) },
    { event: 'content_block_start', data: JSON.stringify({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } }) },
  ];
  const run = (events: SSEEvent[]) => {
    const m = new AnthropicChunkMapper({ includeUsage: false });
    const out: ChatChunk[] = [];
    for (const e of [...start, ...events]) m.step(e, out);
    return out.map((c) => ({ ...c, created: 0 }));
  };
  const fast = texts.map((text, i) => ({ event: 'content_block_delta', data: delta(text, 0, i % 2 ? '   ' : '') }));
  const slow = texts.map((text) => ({ event: 'content_block_delta', data: JSON.stringify({ delta: { text, type: 'text_delta' }, index: 0, type: 'content_block_delta' }) }));
  t.same(run(fast), run(slow), 'text deltas: the same chunks as through JSON.parse');
  t.same(run([{ data: delta('x', 1) }]), run([]), 'a text delta for a tool block is mapped as before (nothing)');
  t.throws(() => run([{ data: delta('x', 5) }]), /content block 5, which was never started/, 'a delta for a block never started is still an error');
});

t.test('errors: Anthropic error types map to the envelope types clients branch on', async (t) => {
  t.same(anthropicError(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, ''), { error: { message: 'Overloaded', type: 'api_error', param: null, code: 'overloaded_error' } });
  t.same(anthropicError(403, { type: 'error', error: { type: 'permission_error', message: 'no' } }, '').error.type, 'permission_denied_error');
  t.equal(anthropicError(400, { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 201234 tokens > 200000 maximum' } }, '').error.code, 'context_length_exceeded');
  t.equal(anthropicError(502, undefined, '<html>bad gateway</html>').error.message, '<html>bad gateway</html>', 'a body that is not JSON: its text');
  const mid = streamError({ type: 'overloaded_error', message: 'Overloaded' });
  t.equal(mid.status, 529, 'a mid-stream error event gets the status its type has over HTTP');
});
