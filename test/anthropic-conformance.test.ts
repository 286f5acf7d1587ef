// Recorded real Anthropic traffic (shared/fixtures/anthropic, see SOURCES.md
// there) replayed through the plugin's mappers: stream events -> chunks,
// message bodies -> chat.completion, error bodies -> the envelope, and the
// recorded second turn of a thinking + tool loop rebuilt from the first
// turn's mapped answer. Read at run time, never copied into the project;
// skipped when the shared fixtures are not present.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { parseSSE, type SSEEvent } from '../src/sse.js';
import type { ChatChunk, ChatRequest } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import { anthropicChunks } from '../plugins/providers/anthropic/stream.js';
import { fromAnthropic, mapUsage } from '../plugins/providers/anthropic/response.js';
import { toAnthropic, type ResponsePlan } from '../plugins/providers/anthropic/request.js';
import { anthropicError } from '../plugins/providers/anthropic/errors.js';
import { sharedFixtures } from './helpers/fixtures.js';

 
type Any = any;
const { dir: DIR, skip: noRecordings } = sharedFixtures('anthropic');
const read = (f: string) => fs.readFileSync(path.join(DIR, f), 'utf8');
const plan: ResponsePlan = { includeUsage: true };

async function collect(events: AsyncIterable<SSEEvent> | SSEEvent[], p = plan): Promise<ChatChunk[]> {
  const src = Array.isArray(events) ? (async function* () { yield* events; })() : events;
  const out: ChatChunk[] = [];
  for await (const c of anthropicChunks(src, p)) out.push(c);
  return out;
}
/** *.chunks.txt holds one data payload per line (vercel/ai's format); the event name equals the JSON type. */
const lineEvents = (text: string): SSEEvent[] => text.split('\n').filter((l) => l.trim()).map((data) => ({ event: JSON.parse(data).type, data }));
const joined = (chunks: ChatChunk[], f: (d: Any) => string | undefined) => chunks.map((c) => f(c.choices[0]?.delta ?? {}) ?? '').join('');
const finish = (chunks: ChatChunk[]) => chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason);
const model = { id: 'anthropic/claude-sonnet-4', capabilities: { thinking: true }, max_output_tokens: 64000 } as unknown as ModelConfig;

if (noRecordings) {
  t.test('Anthropic conformance replay', { skip: noRecordings }, async () => {});
} else {
  t.test('every *.chunks.txt recording replays to a well-formed chunk sequence', async (t) => {
    const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.chunks.txt'));
    t.ok(files.length >= 3, 'recordings found');
    for (const f of files) {
      const events = lineEvents(read(f));
      const chunks = await collect(events);
      const payloads = events.map((e) => JSON.parse(e.data));
      const expectText = payloads.filter((p) => p.delta?.type === 'text_delta').map((p) => p.delta.text).join('');
      t.equal(chunks[0].choices[0].delta.role, 'assistant', `${f}: role first`);
      t.equal(joined(chunks, (d) => d.content), expectText, `${f}: text`);
      const toolBlocks = payloads.filter((p) => p.type === 'content_block_start' && p.content_block.type === 'tool_use');
      const starts = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).filter((d) => d.id);
      t.same(starts.map((d) => [d.index, d.id, d.function?.name]), toolBlocks.map((p, i) => [i, p.content_block.id, p.content_block.name]), `${f}: tool calls`);
      const stop = payloads.find((p) => p.type === 'message_delta').delta.stop_reason;
      t.same(finish(chunks), [stop === 'tool_use' ? 'tool_calls' : 'stop'], `${f}: one finish_reason`);
      const final = payloads.find((p) => p.type === 'message_delta').usage;
      const last = chunks[chunks.length - 1];
      t.same(last.choices, [], `${f}: usage chunk last`);
      t.equal(last.usage!.completion_tokens, final.output_tokens, `${f}: completion tokens from message_delta`);
      t.equal(last.usage!.prompt_tokens, final.input_tokens + final.cache_creation_input_tokens + final.cache_read_input_tokens, `${f}: prompt tokens`);
    }
  });

  t.test('anthropic-text.chunks.txt', async (t) => {
    const chunks = await collect(lineEvents(read('anthropic-text.chunks.txt')));
    t.equal(joined(chunks, (d) => d.content), "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?");
    t.ok(chunks.every((c) => c.id === 'chatcmpl-msg_01QC4g3HwBThD4BaNtBckFDJ' && c.model === 'claude-sonnet-4-5-20250929'));
    t.same(chunks[chunks.length - 1].usage, { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } });
    const noUsage = await collect(lineEvents(read('anthropic-text.chunks.txt')), { includeUsage: false });
    t.notOk(noUsage.some((c) => c.usage), 'no usage chunk unless asked');
  });

  t.test('anthropic-json-tool.1.chunks.txt: streamed arguments; as the response_format tool, streamed content', async (t) => {
    const chunks = await collect(lineEvents(read('anthropic-json-tool.1.chunks.txt')));
    const args = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).map((d) => d.function?.arguments ?? '').join('');
    t.same(JSON.parse(args), { elements: [{ location: 'San Francisco', temperature: 58, condition: 'sunny' }] });
    t.same(finish(chunks), ['tool_calls']);
    const answer = await collect(lineEvents(read('anthropic-json-tool.1.chunks.txt')), { includeUsage: false, answerTool: 'json' });
    t.same(JSON.parse(joined(answer, (d) => d.content)), { elements: [{ location: 'San Francisco', temperature: 58, condition: 'sunny' }] });
    t.notOk(answer.some((c) => c.choices[0]?.delta?.tool_calls));
    t.same(finish(answer), ['stop']);
  });

  t.test('anthropic-tool-no-args.chunks.txt: tool at block 1 is tool_calls index 0 with {} arguments', async (t) => {
    const chunks = await collect(lineEvents(read('anthropic-tool-no-args.chunks.txt')));
    t.equal(joined(chunks, (d) => d.content), "I'll update the issue list for you.");
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    t.same(deltas, [
      { index: 0, id: 'toolu_01QE1WLsSVp5hy5Q3GmGTmjP', type: 'function', function: { name: 'updateIssueList', arguments: '' } },
      { index: 0, function: { arguments: '{}' } },
    ]);
  });

  t.test('*.json message bodies map to chat.completion', async (t) => {
    const text = fromAnthropic(JSON.parse(read('anthropic-text.json')), plan);
    t.match(text, { id: 'chatcmpl-msg_01VdEjxAP5ahtHKrrRdNBteQ', object: 'chat.completion', model: 'claude-sonnet-4-5-20250929' });
    t.same(text.choices, [{ index: 0, message: { role: 'assistant', content: "Hello! I'm doing well, thanks for asking. How are you doing today? Is there anything I can help you with?", refusal: null }, finish_reason: 'stop', logprobs: null }]);
    t.same(text.usage, { prompt_tokens: 12, completion_tokens: 29, total_tokens: 41, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } });

    const raw = JSON.parse(read('anthropic-json-tool.1.json'));
    const tool = fromAnthropic(raw, plan);
    t.equal(tool.choices[0].finish_reason, 'tool_calls');
    t.equal(tool.choices[0].message.content, null);
    t.same(tool.choices[0].message.tool_calls, [{ id: 'toolu_01Q9ExVZnzZj7E2QQYHYtNUa', type: 'function', function: { name: 'json', arguments: JSON.stringify(raw.content[0].input) } }]);
    t.equal(tool.usage!.prompt_tokens, 1151);
    const answer = fromAnthropic(raw, { includeUsage: false, answerTool: 'json' });
    t.same(JSON.parse(answer.choices[0].message.content!), raw.content[0].input);
    t.equal(answer.choices[0].finish_reason, 'stop');
  });

  t.test('thinking stream (raw SSE with padded data lines): reasoning deltas and one signed block', async (t) => {
    const cassette = YAML.parse(read('test_anthropic_model_thinking_part_stream.yaml'));
    const body: string = cassette.interactions[0].response.body.string;
    t.match(body, /\} {2,}\}\n/, 'the recording pads its data JSON with spaces');
    // Split the body at awkward places, as TCP would.
    const pieces = body.match(/[\s\S]{1,97}/g)!.map((s) => Buffer.from(s));
    const chunks = await collect(parseSSE((async function* () { yield* pieces; })()));
    const payloads = body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    const thinking = payloads.filter((p) => p.delta?.type === 'thinking_delta').map((p) => p.delta.thinking).join('');
    const signature = payloads.find((p) => p.delta?.type === 'signature_delta').delta.signature;
    t.match(thinking, /^This is a straightforward question about pedestrian safety/);
    t.equal(joined(chunks, (d) => d.reasoning_content), thinking);
    t.same(chunks.flatMap((c) => c.choices[0]?.delta?.reasoning_details ?? []), [{ type: 'thinking', thinking, signature }]);
    t.match(signature, /^EvMCCkYICxgC/);
    t.match(joined(chunks, (d) => d.content), /^Here are the basic steps for safely crossing the street:/);
    t.same(finish(chunks), ['stop']);
    t.match(chunks[chunks.length - 1].usage, { prompt_tokens: 43, completion_tokens: 282 });
  });

  t.test('thinking + tool loop: turn 1 maps back; turn 2 rebuilt from it equals the recorded request', async (t) => {
    const cassette = YAML.parse(read('test_anthropic_tool_with_thinking.yaml'));
    const [first, second] = cassette.interactions;
    const r1 = fromAnthropic(first.response.parsed_body, plan);
    const m = r1.choices[0].message;
    t.equal(r1.choices[0].finish_reason, 'tool_calls');
    t.match(m.reasoning_content, /^The user is asking about the largest city/);
    t.same(m.reasoning_details, [{ type: 'thinking', thinking: first.response.parsed_body.content[0].thinking, signature: first.response.parsed_body.content[0].signature }]);
    t.equal(m.content, "I'll help you find the largest city in your country. First, let me determine which country you're from.");
    t.same(m.tool_calls, [{ id: 'toolu_01YGzqpRE16Vricda3Aqcejo', type: 'function', function: { name: 'get_user_country', arguments: '{}' } }]);

    const rec = second.request.parsed_body;
    const ir: ChatRequest = {
      model: rec.model,
      max_completion_tokens: rec.max_tokens,
      messages: [{ role: 'user', content: 'What is the largest city in the user country?' }, m, { role: 'tool', tool_call_id: m.tool_calls![0].id, content: 'Mexico' }],
      tools: [{ type: 'function', function: { name: 'get_user_country', description: '', parameters: rec.tools[0].input_schema } }],
      tool_choice: 'auto',
      native_fields: { thinking: rec.thinking },
    };
    const frozen = structuredClone(ir);
    const { body } = toAnthropic(ir, model, () => {}, false);
    t.same(ir, frozen, 'the mapping does not mutate the IR');
    // Recorded differences by design: is_error:false is the default; the gateway marks the last tool for caching.
    const recMessages = structuredClone(rec.messages);
    delete recMessages[2].content[0].is_error;
    t.same(body.messages, recMessages, 'messages, with the signed thinking block first, byte for byte');
    t.same(body.thinking, rec.thinking);
    t.same(body.tool_choice, rec.tool_choice);
    t.equal(body.max_tokens, rec.max_tokens);
    t.same((body.tools as Any[]).map(({ cache_control: _c, ...tool }) => tool), [{ name: 'get_user_country', input_schema: rec.tools[0].input_schema }]);

    const r2 = fromAnthropic(second.response.parsed_body, plan);
    t.match(r2.choices[0].message.content, /Mexico City/);
    t.equal(r2.choices[0].finish_reason, 'stop');
    t.same(r2.usage, { prompt_tokens: 566, completion_tokens: 126, total_tokens: 692, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } });
  });

  t.test('prompt caching usage: cache writes and reads count as prompt tokens; reads are cached_tokens, writes cache_write_tokens', async (t) => {
    const cassette = YAML.parse(read('test_inline_system_prompt_cache_prefix_is_reused.yaml'));
    const [write, hit] = cassette.interactions.map((i: Any) => mapUsage(i.response.parsed_body.usage));
    t.same(write, { prompt_tokens: 1592, completion_tokens: 4, total_tokens: 1596, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 1590 }, completion_tokens_details: { reasoning_tokens: 0 } });
    t.same(hit, { prompt_tokens: 1592, completion_tokens: 4, total_tokens: 1596, prompt_tokens_details: { cached_tokens: 1590 }, completion_tokens_details: { reasoning_tokens: 0 } });
    // The recording sends a `system` role inside messages (a newer API); the gateway hoists it to the top level.
    const rec = cassette.interactions[0].request.parsed_body;
    const ir = { model: rec.model, messages: [{ role: 'system', content: rec.system }, ...rec.messages.map((mm: Any) => ({ role: mm.role, content: mm.content }))] } as ChatRequest;
    const { body } = toAnthropic(ir, model, () => {}, false);
    t.same(body.system!.map((b) => b.text), ['Reply with OK.', 'S']);
    t.same(body.messages.map((mm) => mm.role), ['user', 'assistant', 'user']);
  });

  t.test('error body -> envelope', async (t) => {
    const cassette = YAML.parse(read('test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml'));
    const res = cassette.interactions[0].response;
    const { error } = anthropicError(res.status.code, res.parsed_body, JSON.stringify(res.parsed_body));
    t.same(error, { message: "This model does not support effort level 'xhigh'. Supported levels: high, low, max, medium.", type: 'invalid_request_error', param: null, code: null });
    t.same(anthropicError(529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, '').error, { message: 'Overloaded', type: 'api_error', param: null, code: 'overloaded_error' });
    t.same(anthropicError(502, undefined, '<html>Bad gateway</html>').error, { message: '<html>Bad gateway</html>', type: 'api_error', param: null, code: null });
  });
}
