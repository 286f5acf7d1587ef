// Unit tests of the openai family's pure mappings (the same-API request patch,
// compatible servers' stream and completion quirks), beside the HTTP tests in
// chat-openai.test.ts and openai-compatible.test.ts.
import t from 'tap';
import type { ChatChunk, ChatCompletion, ChatRequest, NormalizationEntry } from '../src/types.js';
import { toOpenAIChat } from '../plugins/providers/openai/request.js';
import { OpenAIChunkMapper } from '../plugins/providers/openai/stream.js';
import { fixCompletion } from '../plugins/providers/openai/response.js';

const patch = (req: Record<string, unknown>) => {
  const notes: NormalizationEntry[] = [];
  return { out: toOpenAIChat({ model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], ...req } as unknown as ChatRequest, (n) => notes.push(n)), notes };
};

t.test('request: nothing to patch forwards the request itself', async (t) => {
  const req = { model: 'gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], temperature: 0.3, some_new_openai_field: 1 } as unknown as ChatRequest;
  t.equal(toOpenAIChat(req, () => {}), req, 'the same object: fields the gateway does not know reach OpenAI as written');
});

t.test('request: gateway-only fields removed, native_fields merged, cache_control and reasoning echoes stripped', async (t) => {
  const input = {
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'long prefix', cache_control: { type: 'ephemeral' } }] },
      { role: 'assistant', content: 'ok', reasoning_content: 'thought', reasoning_details: [{ type: 'thinking', thinking: 't', signature: 's' }] },
      { role: 'user', content: 'next', cache_control: { type: 'ephemeral' } },
    ],
    native_fields: { prediction: { type: 'content', content: 'x' } },
    web_search: { options: { search_context_size: 'low' } },
  };
  const before = JSON.stringify(input);
  const { out, notes } = patch(input);
  t.equal(JSON.stringify(input), before, 'pure: the request is not mutated');
  t.notOk('native_fields' in out);
  t.notOk('web_search' in out);
  t.same(out.prediction, { type: 'content', content: 'x' }, 'native fields under OpenAI names, at the top level');
  t.same(out.web_search_options, { search_context_size: 'low' });
  t.same(out.messages, [
    { role: 'user', content: [{ type: 'text', text: 'long prefix' }] },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: 'next' },
  ]);
  t.match(notes, [{ param: 'cache_control', action: 'strip' }]);
});

t.test("stream: compatible servers' tool-call quirks made uniform", async (t) => {
  const m = new OpenAIChunkMapper();
  const out: ChatChunk[] = [];
  const ev = (delta: Record<string, unknown>, finish: string | null = null) => ({ data: JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) });
  m.step(ev({ role: 'assistant', content: '' }), out);
  m.step(ev({ tool_calls: [{ index: 1, id: '', type: 'function', function: { name: 'a', arguments: '{"x"' } }] }), out);
  m.step(ev({ tool_calls: [{ index: 1, function: { arguments: ':1}' } }] }), out);
  m.step(ev({ reasoning: 'hmm' }), out);
  m.step(ev({}, 'tool_calls'), out);
  m.step(ev({}, 'tool_calls'), out);
  t.equal(m.step({ data: '[DONE]' }, out), true, '[DONE] is terminal');
  const calls = out.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  t.equal(calls[0].index, 0, 'indexes from 1 become 0-based');
  t.match(calls[0].id, /^call_[0-9a-f]{24}$/, 'an empty id is replaced');
  t.notOk('id' in calls[1] && calls[1].id === '', 'a later empty id is not forwarded');
  t.equal(calls.map((c) => c.function?.arguments).join(''), '{"x":1}');
  t.equal(out.find((c) => c.choices[0]?.delta?.reasoning_content)?.choices[0].delta.reasoning_content, 'hmm', 'delta.reasoning becomes reasoning_content');
  t.equal(out.filter((c) => c.choices[0]?.finish_reason).length, 1, 'a repeated finish chunk is forwarded once');
  t.throws(() => m.step({ data: JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }) }, []), 'an error event mid-stream is an upstream error');
});

t.test('completion: reasoning and missing tool-call ids fixed', async (t) => {
  const body = { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, reasoning: 'r', tool_calls: [{ id: '', type: 'function', function: { name: 'f', arguments: '{}' } }] } }] } as unknown as ChatCompletion;
  const fixed = fixCompletion(body);
  t.equal(fixed.choices[0].message.reasoning_content, 'r');
  t.match(fixed.choices[0].message.tool_calls?.[0].id, /^call_/);
});
