// The bedrock family's pure mappings: chat IR -> Converse request (checked
// against the strict mock's validator too), Converse response and stream ->
// chat, Bedrock errors -> envelope and fallback status, and the event-stream
// frame parser.
import t from 'tap';
import type { ChatRequest, ChatChunk, NormalizationEntry } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import { GatewayError } from '../src/errors.js';
import { UpstreamError } from '../src/provider/errors.js';
import { toConverse, vendorOf, JSON_OBJECT_INSTRUCTION } from '../plugins/providers/bedrock/request.js';
import { fromConverse, mapUsage, finishReason } from '../plugins/providers/bedrock/response.js';
import { ConverseChunkMapper } from '../plugins/providers/bedrock/stream.js';
import { bedrockError, streamException, withShapeStatus } from '../plugins/providers/bedrock/errors.js';
import { EventStreamParser } from '../plugins/providers/bedrock/eventstream.js';
import { validateConverse, eventMessage, exceptionMessage, signReasoning } from './mocks/bedrock.js';
import type { SSEEvent } from '../src/sse.js';

const SONNET = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0';
const NOVA = 'us.amazon.nova-pro-v1:0';
const LLAMA = 'us.meta.llama4-maverick-17b-instruct-v1:0';
const model = { id: 'anthropic/claude-sonnet-4-5', max_output_tokens: 64000 } as ModelConfig;
const PNG_URL = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

function map(req: Partial<ChatRequest>, modelId = SONNET, m: ModelConfig = model) {
  const notes: NormalizationEntry[] = [];
  const full = { model: modelId, messages: [{ role: 'user', content: 'Hi' }], ...req } as ChatRequest;
  const frozen = structuredClone(full);
  const { body, plan } = toConverse(full, modelId, m, (n) => notes.push(n));
  // Pure: the IR is untouched (fallbacks map it again).
  if (JSON.stringify(full) !== JSON.stringify(frozen)) throw new Error('the IR was mutated');
  return { body, plan, notes, params: notes.map((n) => `${n.action}:${n.param}`) };
}

/** The error a function throws (the test fails if it does not). */
function thrown(fn: () => unknown): Record<string, unknown> {
  try {
    fn();
  } catch (e) {
    return e as Record<string, unknown>;
  }
  throw new Error('expected an error');
}

const weather = { type: 'function' as const, function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

t.test('vendorOf: base ids, inference profiles and ARNs', async (t) => {
  t.equal(vendorOf('anthropic.claude-haiku-4-5-20251001-v1:0'), 'anthropic');
  t.equal(vendorOf(SONNET), 'anthropic');
  t.equal(vendorOf('global.anthropic.claude-sonnet-4-5-20250929-v1:0'), 'anthropic');
  t.equal(vendorOf('amazon.nova-pro-v1:0'), 'amazon');
  t.equal(vendorOf(NOVA), 'amazon');
  t.equal(vendorOf(LLAMA), 'meta');
  t.equal(vendorOf('us.mistral.pixtral-large-2502-v1:0'), 'mistral');
  t.equal(vendorOf('arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0'), 'anthropic');
  t.equal(vendorOf('arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123'), 'other');
  t.equal(vendorOf('cohere.command-r-v1:0'), 'other');
});

t.test('system, multi-turn, merged same-role turns, a leading assistant turn, names', async (t) => {
  const { body, params } = map({
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'assistant', content: 'Hello! How can I help?' },
      { role: 'user', content: 'first', name: 'ann' },
      { role: 'user', content: [{ type: 'text', text: 'second' }, { type: 'text', text: '' }] },
      { role: 'developer', content: 'Late rule.' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'third' },
    ],
  });
  t.same(body.system, [{ text: 'Be brief.' }, { text: 'Late rule.' }]);
  t.same(body.messages, [
    { role: 'user', content: [{ text: '(conversation start)' }] },
    { role: 'assistant', content: [{ text: 'Hello! How can I help?' }] },
    { role: 'user', content: [{ text: 'first' }, { text: 'second' }] },
    { role: 'assistant', content: [{ text: 'ok' }] },
    { role: 'user', content: [{ text: 'third' }] },
  ]);
  t.ok(params.includes('add:messages') && params.includes('strip:messages[].name') && params.includes('override:messages[4]'));
  t.same(validateConverse(body, SONNET), { thinking: false, cachePoints: 0 });
});

t.test('images: data URLs inline, s3:// by location, http(s) refused with the field named', async (t) => {
  const { body, params } = map({ messages: [{ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: PNG_URL, detail: 'high' } }, { type: 'image_url', image_url: { url: 's3://bucket/cat.JPG' } }] }] });
  t.same(body.messages[0].content[1], { image: { format: 'png', source: { bytes: PNG_URL.split(',')[1] } } });
  t.same(body.messages[0].content[2], { image: { format: 'jpeg', source: { s3Location: { uri: 's3://bucket/cat.JPG' } } } });
  t.ok(params.includes('strip:messages[].content[].image_url.detail'));
  const bad = (url: string) => {
    try {
      map({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }] });
    } catch (e) {
      return e as GatewayError;
    }
    throw new Error('expected an error');
  };
  const http = bad('https://example.com/cat.png');
  t.equal(http.status, 400);
  t.equal(http.param, 'messages[0].content[0].image_url.url');
  t.match(http.message, /does not fetch images from http/);
  t.match(bad('data:image/bmp;base64,Qk0=').message, /image\/png, image\/jpeg/);
  t.match(bad('data:image/png,notbase64').message, /base64 data URL/);
  t.match(bad('s3://bucket/noext').message, /must end in/);
});

t.test('tools, tool_choice, tool round trip with toolResult blocks first', async (t) => {
  const history: Partial<ChatRequest> = {
    tools: [weather, { type: 'function', function: { name: 'noop', strict: true } }],
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'tooluse_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }, { id: 'tooluse_2', type: 'function', function: { name: 'noop', arguments: '' } }] },
      { role: 'tool', tool_call_id: 'tooluse_1', content: '{"temp":21}' },
      { role: 'tool', tool_call_id: 'tooluse_2', content: [{ type: 'text', text: 'done' }] },
      { role: 'user', content: 'Thanks' },
    ],
  };
  const { body } = map({ ...history, tool_choice: 'auto' });
  t.same(body.toolConfig, {
    tools: [
      { toolSpec: { name: 'get_weather', description: 'Weather', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } },
      { toolSpec: { name: 'noop', inputSchema: { json: { type: 'object', properties: {} } }, strict: true } },
    ],
    toolChoice: { auto: {} },
  });
  t.same(body.messages[1].content, [
    { toolUse: { toolUseId: 'tooluse_1', name: 'get_weather', input: { city: 'Paris' } } },
    { toolUse: { toolUseId: 'tooluse_2', name: 'noop', input: {} } },
  ]);
  t.same(body.messages[2].content, [{ toolResult: { toolUseId: 'tooluse_1', content: [{ text: '{"temp":21}' }] } }, { toolResult: { toolUseId: 'tooluse_2', content: [{ text: 'done' }] } }, { text: 'Thanks' }]);
  validateConverse(body, SONNET);
  t.same(map({ ...history, tool_choice: 'required' }).body.toolConfig?.toolChoice, { any: {} });
  t.same(map({ ...history, tool_choice: { type: 'function', function: { name: 'noop' } } }).body.toolConfig?.toolChoice, { tool: { name: 'noop' } });
  // 'none' with tool history keeps the tools (Bedrock needs them) and says so; without history, no tools are sent.
  const none = map({ ...history, tool_choice: 'none', parallel_tool_calls: false });
  t.equal(none.body.toolConfig?.toolChoice, undefined);
  t.ok(none.params.includes('strip:tool_choice') && none.params.includes('strip:parallel_tool_calls'));
  const noneFresh = map({ tools: [weather], tool_choice: 'none' });
  t.equal(noneFresh.body.toolConfig, undefined);
  t.ok(noneFresh.params.includes('strip:tools'));
  t.ok(map({ tool_choice: 'auto' }).params.includes('strip:tool_choice'));
  // A user message before the tool results: the results still come first in the merged turn.
  const early = map({ tools: [weather], messages: [history.messages![0], history.messages![1], { role: 'user', content: 'also' }, history.messages![2], history.messages![3]] });
  t.same(early.body.messages[2].content.map((b) => Object.keys(b)[0]), ['toolResult', 'toolResult', 'text']);
  t.match(thrown(() => map({ messages: history.messages })), { status: 400, param: 'tools' });
  t.match(thrown(() => map({ tools: [weather], messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'get_weather', arguments: '[1]' } }] }] })), {
    param: 'messages[1].tool_calls[0].function.arguments',
  });
});

t.test('inferenceConfig: maxTokens, temperature, topP, stop; one sampler on Claude 4.5; unsupported fields noted', async (t) => {
  const a = map({ max_tokens: 100, temperature: 1.5, stop: 'END', seed: 7, frequency_penalty: 0.5, user: 'u1', logprobs: true });
  t.same(a.body.inferenceConfig, { maxTokens: 100, temperature: 1, stopSequences: ['END'] });
  for (const p of ['override:temperature', 'strip:seed', 'strip:frequency_penalty', 'strip:user', 'strip:logprobs']) t.ok(a.params.includes(p), p);
  const b = map({ max_tokens: 100, max_completion_tokens: 50, temperature: 0.3, top_p: 0.9, stop: ['a', 'b'] });
  t.same(b.body.inferenceConfig, { maxTokens: 50, temperature: 0.3, stopSequences: ['a', 'b'] });
  t.ok(b.params.includes('strip:top_p') && b.params.includes('strip:max_tokens'));
  t.same(map({ temperature: 0.3, top_p: 0.9 }, NOVA).body.inferenceConfig, { temperature: 0.3, topP: 0.9 });
  t.equal(map({}).body.inferenceConfig, undefined);
  t.match(thrown(() => map({ n: 2 })), { status: 400, param: 'n' });
});

t.test('response_format: json_schema as outputConfig, json_object as a system instruction', async (t) => {
  const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
  const { body } = map({ response_format: { type: 'json_schema', json_schema: { name: 'thing', schema, description: 'A thing' } } });
  t.same(body.outputConfig, { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'thing', description: 'A thing' } } } });
  validateConverse(body, SONNET);
  const obj = map({ response_format: { type: 'json_object' } });
  t.same(obj.body.system, [{ text: JSON_OBJECT_INSTRUCTION }]);
  t.ok(obj.params.includes('add:response_format'));
});

t.test('reasoning: Claude thinking budget in additionalModelRequestFields, Nova reasoningConfig, native fields win', async (t) => {
  const a = map({ reasoning_effort: 'high', temperature: 0.5, top_p: 0.5 });
  t.same(a.body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 16384 } });
  t.equal(a.body.inferenceConfig?.maxTokens, 64000);
  t.equal(a.body.inferenceConfig?.temperature, undefined);
  t.ok(a.params.includes('strip:temperature') && a.params.includes('add:max_tokens'));
  t.same(validateConverse(a.body, SONNET).thinking, true);
  const raised = map({ reasoning_effort: 'medium', max_tokens: 1000 });
  t.equal(raised.body.inferenceConfig?.maxTokens, 5096);
  const capped = map({ reasoning_effort: 'xhigh' }, SONNET, { id: 'm', max_output_tokens: 8192 } as ModelConfig);
  t.same(capped.body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 7168 } });
  t.ok(capped.params.includes('override:thinking.budget_tokens'));
  t.equal(map({ reasoning_effort: 'low' }, SONNET, { id: 'm', max_output_tokens: 1500 } as ModelConfig).body.additionalModelRequestFields, undefined);
  t.equal(map({ reasoning_effort: 'low' }, SONNET, { id: 'm' } as ModelConfig).body.inferenceConfig?.maxTokens, 4096);
  const forced = map({ reasoning_effort: 'low', tools: [weather], tool_choice: 'required' });
  t.equal(forced.body.additionalModelRequestFields, undefined);
  t.ok(forced.params.includes('strip:reasoning_effort'));
  t.same(map({ reasoning_effort: 'minimal' }, NOVA).body.additionalModelRequestFields, { reasoningConfig: { type: 'enabled', maxReasoningEffort: 'low' } });
  t.ok(map({ reasoning_effort: 'low' }, LLAMA).params.includes('strip:reasoning_effort'));
  const native = map({ reasoning_effort: 'high', native_fields: { thinking: { type: 'enabled', budget_tokens: 2000 }, top_k: 5, guardrailConfig: { guardrailIdentifier: 'g', guardrailVersion: '1' } }, max_tokens: 3000 });
  t.same(native.body.additionalModelRequestFields, { thinking: { type: 'enabled', budget_tokens: 2000 }, top_k: 5 });
  t.same(native.body.guardrailConfig, { guardrailIdentifier: 'g', guardrailVersion: '1' });
  t.ok(native.params.includes('strip:reasoning_effort'));
  t.equal(map({ reasoning_effort: 'none' }).body.additionalModelRequestFields, undefined);
});

t.test('signed reasoning is restored as reasoningContent before text and tool use', async (t) => {
  const thought = 'The user asks: Think. I should answer briefly.';
  const { body, params } = map({
    reasoning_effort: 'low',
    tools: [weather],
    messages: [
      { role: 'user', content: 'Think' },
      {
        role: 'assistant',
        content: 'Calling.',
        reasoning_content: thought,
        reasoning_details: [{ type: 'thinking', thinking: thought, signature: signReasoning(thought) }, { type: 'redacted_thinking', data: 'AAAA' }, { type: 'thought_signature', signature: 'x' }],
        tool_calls: [{ id: 'tooluse_9', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'tooluse_9', content: 'sunny' },
    ],
  });
  t.same(body.messages[1].content.map((b) => Object.keys(b)[0]), ['reasoningContent', 'reasoningContent', 'text', 'toolUse']);
  t.same(body.messages[1].content[0], { reasoningContent: { reasoningText: { text: thought, signature: signReasoning(thought) } } });
  t.same(body.messages[1].content[1], { reasoningContent: { redactedContent: 'AAAA' } });
  t.ok(params.includes('strip:messages[1].reasoning_details'));
  t.ok(map({ messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b', reasoning_content: 'c' }, { role: 'user', content: 'd' }] }).params.includes('strip:messages[1].reasoning_content'));
});

t.test('prompt caching: cache points after marked content, ttl, the limit of 4, stripped on models without caching', async (t) => {
  const cc = { type: 'ephemeral' as const };
  const { body, params } = map({
    tools: [{ ...weather, cache_control: cc }],
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'Long system prompt.', cache_control: { type: 'ephemeral', ttl: '3600s' } }] },
      { role: 'user', content: 'First question', cache_control: cc },
      { role: 'assistant', content: 'An answer', cache_control: { type: 'ephemeral', ttl: '300s' } },
      { role: 'user', content: [{ type: 'text', text: 'Next', cache_control: { type: 'ephemeral', ttl: '600s' } }] },
    ],
  });
  // Five marks: the earliest (the tools') is dropped.
  t.same(body.toolConfig?.tools.length, 1);
  t.same(body.system, [{ text: 'Long system prompt.' }, { cachePoint: { type: 'default', ttl: '1h' } }]);
  t.same(body.messages[0].content, [{ text: 'First question' }, { cachePoint: { type: 'default' } }]);
  t.same(body.messages[1].content, [{ text: 'An answer' }, { cachePoint: { type: 'default' } }]);
  t.same(body.messages[2].content, [{ text: 'Next' }, { cachePoint: { type: 'default', ttl: '1h' } }]);
  t.ok(params.includes('strip:cache_control') && params.includes('override:cache_control.ttl'));
  t.equal(validateConverse(body, SONNET).cachePoints, 4);
  const tools = map({ tools: [{ ...weather, cache_control: cc }], messages: [{ role: 'tool', tool_call_id: 'x', content: 'r', cache_control: cc }] });
  t.same(tools.body.toolConfig?.tools[1], { cachePoint: { type: 'default' } });
  t.same(tools.body.messages[0].content[1], { cachePoint: { type: 'default' } });
  const llama = map({ messages: [{ role: 'system', content: 'S', cache_control: cc }, { role: 'user', content: 'Q', cache_control: cc }] }, LLAMA);
  t.same(llama.body.system, [{ text: 'S' }]);
  t.same(llama.notes.filter((n) => n.param === 'cache_control').length, 1);
  validateConverse(llama.body, LLAMA);
});

t.test('metadata -> requestMetadata when it fits the pattern; service_tier', async (t) => {
  t.same(map({ metadata: { team: 'search', run: 'a-1' } }).body.requestMetadata, { team: 'search', run: 'a-1' });
  const bad = map({ metadata: { 'bad key!': 'x' } });
  t.equal(bad.body.requestMetadata, undefined);
  t.ok(bad.params.includes('strip:metadata'));
  t.same(map({ service_tier: 'flex' }).body.serviceTier, { type: 'flex' });
  t.ok(map({ service_tier: 'scale' }).params.includes('strip:service_tier'));
});

t.test('fromConverse: text, tool calls, signed and redacted reasoning, usage with cache reads and writes', async (t) => {
  const c = fromConverse(
    {
      output: {
        message: {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'hmm', signature: 'sig' } } },
            { reasoningContent: { redactedContent: 'QUJD' } },
            { text: 'Hello ' },
            { text: 'there' },
            { toolUse: { toolUseId: 'tooluse_1', name: 'get_weather', input: { city: 'Paris' } } },
          ],
        },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 45, cacheReadInputTokens: 20, cacheWriteInputTokens: 10 },
      metrics: { latencyMs: 100 },
    },
    SONNET,
    'rid-1',
  );
  t.equal(c.id, 'chatcmpl-rid-1');
  t.equal(c.model, SONNET);
  const m = c.choices[0].message;
  t.equal(m.content, 'Hello there');
  t.equal(m.reasoning_content, 'hmm');
  t.same(m.reasoning_details, [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'redacted_thinking', data: 'QUJD' }]);
  t.same(m.tool_calls, [{ id: 'tooluse_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
  t.equal(c.choices[0].finish_reason, 'tool_calls');
  t.same(c.usage, { prompt_tokens: 40, completion_tokens: 5, total_tokens: 45, prompt_tokens_details: { cached_tokens: 20, cache_write_tokens: 10 }, completion_tokens_details: { reasoning_tokens: 0 } });
  t.same(mapUsage(undefined).total_tokens, 0);
  t.match(thrown(() => fromConverse({} as never, SONNET)), { status: 502 });
  const empty = fromConverse({ output: { message: { role: 'assistant', content: [] } }, stopReason: 'end_turn' }, SONNET);
  t.equal(empty.choices[0].message.content, null);
  t.match(empty.id, /^chatcmpl-/);
  for (const [stop, fin] of [['end_turn', 'stop'], ['stop_sequence', 'stop'], ['max_tokens', 'length'], ['model_context_window_exceeded', 'length'], ['guardrail_intervened', 'content_filter'], ['content_filtered', 'content_filter'], ['malformed_tool_use', 'stop']])
    t.equal(finishReason(stop), fin, stop);
});

/** Encoded event-stream messages -> the frame parser (split at awkward places) -> the chunk mapper. */
function runStream(messages: Uint8Array[], includeUsage = true, splitEvery = 7): ChatChunk[] {
  const bytes = Buffer.concat(messages.map((m) => Buffer.from(m)));
  const parser = new EventStreamParser();
  const events: SSEEvent[] = [];
  for (let i = 0; i < bytes.length; i += splitEvery) parser.push(bytes.subarray(i, i + splitEvery), events);
  parser.end();
  const mapper = new ConverseChunkMapper({ includeUsage }, SONNET, 'rid');
  const out: ChatChunk[] = [];
  for (const e of events) if (mapper.step(e, out)) return out;
  mapper.end();
  return out;
}

t.test('stream: text, tool use, reasoning with its signature, finish and usage chunks', async (t) => {
  const chunks = runStream([
    eventMessage('messageStart', { role: 'assistant', p: 'abc' }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { text: 'think ' } }, p: 'a' }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { text: 'more' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'SIG' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 0 }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 1, delta: { reasoningContent: { redactedContent: 'QUJD' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 1 }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 2, delta: { text: 'Hello' } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 2, delta: { text: '' } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 2 }),
    eventMessage('contentBlockStart', { contentBlockIndex: 3, start: { toolUse: { toolUseId: 'tooluse_1', name: 'get_weather' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 3, delta: { toolUse: { input: '{"city":' } } }),
    eventMessage('contentBlockDelta', { contentBlockIndex: 3, delta: { toolUse: { input: '"Paris"}' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 3 }),
    eventMessage('contentBlockStart', { contentBlockIndex: 4, start: { toolUse: { toolUseId: 'tooluse_2', name: 'noop' } } }),
    eventMessage('contentBlockStop', { contentBlockIndex: 4 }),
    eventMessage('messageStop', { stopReason: 'tool_use' }),
    eventMessage('metadata', { usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 }, metrics: { latencyMs: 1 } }),
  ]);
  const deltas = chunks.map((c) => c.choices[0]?.delta);
  t.same(deltas[0], { role: 'assistant', content: '' });
  t.equal(deltas.map((d) => d?.reasoning_content ?? '').join(''), 'think more');
  t.equal(deltas.map((d) => d?.content ?? '').join(''), 'Hello');
  t.same(deltas.filter((d) => d?.tool_calls).map((d) => d!.tool_calls![0]), [
    { index: 0, id: 'tooluse_1', type: 'function', function: { name: 'get_weather', arguments: '' } },
    { index: 0, function: { arguments: '{"city":' } },
    { index: 0, function: { arguments: '"Paris"}' } },
    { index: 1, id: 'tooluse_2', type: 'function', function: { name: 'noop', arguments: '' } },
    { index: 1, function: { arguments: '{}' } },
  ]);
  const finish = chunks.at(-2)!;
  t.equal(finish.choices[0].finish_reason, 'tool_calls');
  t.same(finish.choices[0].delta.reasoning_details, [{ type: 'thinking', thinking: 'think more', signature: 'SIG' }, { type: 'redacted_thinking', data: 'QUJD' }]);
  t.same(chunks.at(-1)!.choices, []);
  t.equal(chunks.at(-1)!.usage?.total_tokens, 7);
  t.ok(chunks.every((c) => c.id === 'chatcmpl-rid'));
  // Without include_usage, no usage chunk.
  const plain = runStream([eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'x' } }), eventMessage('messageStop', { stopReason: 'end_turn' }), eventMessage('metadata', {})], false, 3);
  t.same(plain.map((c) => c.choices[0].finish_reason), [null, null, 'stop']);
});

t.test('stream faults: cut before messageStop, exceptions, bad frames, out-of-order events', async (t) => {
  t.match(thrown(() => runStream([eventMessage('messageStart', { role: 'assistant' }), eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'x' } })])), { status: 502, message: /before messageStop/ });
  // metadata after messageStop but the body ended without it: finished, no usage.
  t.equal(runStream([eventMessage('messageStop', { stopReason: 'end_turn' })]).at(-1)?.choices[0].finish_reason, 'stop');
  const ex = (() => {
    try {
      runStream([eventMessage('messageStart', { role: 'assistant' }), exceptionMessage('throttlingException', 'Too many tokens')]);
    } catch (e) {
      return e as UpstreamError;
    }
  })();
  t.ok(ex instanceof UpstreamError);
  t.equal(ex!.status, 429);
  t.same(ex!.error, { message: 'Too many tokens', type: 'rate_limit_error', param: null, code: 'ThrottlingException' });
  // A model failure mid-stream (424 on the wire) is an upstream fault: 502.
  t.equal(streamException('modelStreamErrorException', '{"message":"boom"}').status, 502);
  t.equal(streamException('validationException', 'not json').error.message, 'not json');
  const mapper = new ConverseChunkMapper({ includeUsage: false }, SONNET);
  t.match(thrown(() => mapper.step({ event: 'x', data: '', headers: { ':message-type': 'error', ':error-code': 'internalServerException', ':error-message': 'bad' } } as SSEEvent, [])), { status: 500 });
  t.throws(() => runStream([eventMessage('metadata', {})]), { message: /before messageStop/ });
  t.throws(() => runStream([eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '{' } } })]), { message: /not a tool use/ });
  t.throws(() => runStream([eventMessage('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'a' } }), eventMessage('contentBlockStart', { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'a', name: 'b' } } }), eventMessage('contentBlockDelta', { contentBlockIndex: 1, delta: { reasoningContent: { text: 'x' } } })]), {
    message: /not a reasoning block/,
  });
  // A flipped byte fails the CRC; a truncated message fails at the end; a silly length is refused.
  const msg = Buffer.from(eventMessage('messageStart', { role: 'assistant' }));
  msg[msg.length - 6] ^= 1;
  t.throws(() => new EventStreamParser().push(msg, []), /checksum/);
  const p = new EventStreamParser();
  p.push(Buffer.from(eventMessage('messageStart', { role: 'assistant' })).subarray(0, 20), []);
  t.throws(() => p.end(), /ended inside an event-stream message/);
  const huge = Buffer.alloc(16);
  huge.writeUInt32BE(0xffffffff, 0);
  t.throws(() => new EventStreamParser().push(huge, []), /declares/);
});

t.test('errors: x-amzn-errortype decides status and type; the statuses that fall back', async (t) => {
  const e = (status: number, type: string | undefined, body: unknown, text = '') => bedrockError(status, body, text, type ? { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` } : {}).error;
  t.same(e(429, 'ThrottlingException', { message: 'Too many requests' }), { message: 'Too many requests', type: 'rate_limit_error', param: null, code: 'ThrottlingException' });
  t.same(e(400, 'ValidationException', { message: 'A conversation must start with a user message.' }).type, 'invalid_request_error');
  t.equal(e(400, 'ValidationException', { message: 'Input is too long for requested model.' }).code, 'context_length_exceeded');
  t.same(e(403, 'AccessDeniedException', { message: "You don't have access to the model" }).type, 'permission_denied_error');
  t.same(e(403, 'InvalidSignatureException', { Message: 'The request signature…' }).message, 'The request signature…');
  t.same(e(403, undefined, { __type: 'com.amazon.coral.service#UnrecognizedClientException', message: 'bad token' }).code, 'UnrecognizedClientException');
  t.same(e(502, undefined, undefined, '<html>bad gateway</html>'), { message: '<html>bad gateway</html>', type: 'api_error', param: null, code: null });
  t.equal(e(503, undefined, undefined, '').message, 'HTTP 503');
  t.same(e(418, 'SomethingNew', {}), { message: 'HTTP 418', type: 'api_error', param: null, code: 'SomethingNew' });
  // The status kept decides fallback: quota 400 -> 429, a failed model 424 -> 502, a slow one 408 -> 504.
  const status = (http: number, type: string) => (withShapeStatus(new UpstreamError(http, e(http, type, { message: 'm' }))) as UpstreamError).status;
  t.equal(status(400, 'ServiceQuotaExceededException'), 429);
  t.equal(status(424, 'ModelErrorException'), 502);
  t.equal(status(408, 'ModelTimeoutException'), 504);
  t.equal(status(429, 'ModelNotReadyException'), 429);
  t.equal(status(400, 'ValidationException'), 400);
  const other = new Error('x');
  t.equal(withShapeStatus(other), other);
});
