// Recorded real Gemini traffic (shared/fixtures/gemini, see SOURCES.md there)
// replayed through the plugin's mappers: stream events -> chunks, response
// bodies -> chat.completion, the 429 body -> the envelope with retryAfterMs,
// and the recorded second turn of a thinking conversation rebuilt from the
// first turn's mapped answer. The recorded request bodies also go through the
// mock's field spec, so the mock is shown to accept what Google accepts.
// Read at run time, never copied into the project; skipped when the shared
// fixtures are not present.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { parseSSE, type SSEEvent } from '../src/sse.js';
import type { ChatChunk, ChatMessage, ChatRequest } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import { geminiChunks } from '../plugins/providers/google/stream.js';
import { toCompletion } from '../plugins/providers/google/response.js';
import { toGemini } from '../plugins/providers/google/request.js';
import { geminiError } from '../plugins/providers/google/errors.js';
import { checkSpec, SPEC } from './mocks/gemini.js';
import { sharedFixtures } from './helpers/fixtures.js';

 
type Any = any;
const { dir: DIR, skip: noRecordings } = sharedFixtures('gemini');
const read = (f: string) => fs.readFileSync(path.join(DIR, f), 'utf8');
const model = { id: 'google/gemini-2.5-flash', capabilities: { thinking: true }, max_output_tokens: 65536 } as unknown as ModelConfig;

async function collect(events: AsyncIterable<SSEEvent> | SSEEvent[], includeUsage = true): Promise<ChatChunk[]> {
  const src = Array.isArray(events) ? (async function* () { yield* events; })() : events;
  const out: ChatChunk[] = [];
  for await (const c of geminiChunks(src, { model: 'm', includeUsage })) out.push(c);
  return out;
}
/** *.chunks.txt holds one GenerateContentResponse per line (vercel/ai's format). */
const lineEvents = (text: string): SSEEvent[] => text.split('\n').filter((l) => l.trim()).map((data) => ({ data }));
const joined = (chunks: ChatChunk[], f: (d: Any) => string | undefined) => chunks.map((c) => f(c.choices[0]?.delta ?? {}) ?? '').join('');
const finishes = (chunks: ChatChunk[]) => chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason);
const sigBytes = (s: string) => Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('hex');

/** What a list of Gemini responses says, computed straight from the recording. */
function expected(responses: Any[]) {
  const parts = responses.flatMap((r) => r.candidates?.[0]?.content?.parts ?? []);
  const last = responses[responses.length - 1];
  const u = [...responses].reverse().find((r) => r.usageMetadata)?.usageMetadata ?? {};
  return {
    text: parts.filter((p: Any) => !p.thought && typeof p.text === 'string').map((p: Any) => p.text).join(''),
    thoughts: parts.filter((p: Any) => p.thought).map((p: Any) => p.text).join(''),
    calls: parts.filter((p: Any) => p.functionCall).map((p: Any) => p.functionCall),
    signatures: parts.filter((p: Any) => p.thoughtSignature).map((p: Any) => p.thoughtSignature),
    finishReason: last.candidates?.[0]?.finishReason,
    usage: {
      prompt_tokens: (u.promptTokenCount ?? 0) + (u.toolUsePromptTokenCount ?? 0),
      completion_tokens: (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0),
      total_tokens: u.totalTokenCount,
      prompt_tokens_details: { cached_tokens: u.cachedContentTokenCount ?? 0 },
      completion_tokens_details: { reasoning_tokens: u.thoughtsTokenCount ?? 0 },
    },
  };
}

const finishOf = (reason: string | undefined, calls: number) =>
  reason === 'MAX_TOKENS' ? 'length' : reason === 'SAFETY' ? 'content_filter' : calls ? 'tool_calls' : 'stop';

function checkStream(t: Any, name: string, chunks: ChatChunk[], e: ReturnType<typeof expected>) {
  t.equal(chunks[0].choices[0].delta.role, 'assistant', `${name}: role first`);
  t.equal(joined(chunks, (d) => d.content), e.text, `${name}: text`);
  t.equal(joined(chunks, (d) => d.reasoning_content), e.thoughts, `${name}: thoughts as reasoning_content`);
  const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  t.same(calls.map((c) => [c.index, c.function?.name, JSON.parse(c.function?.arguments ?? 'null')]), e.calls.map((c: Any, i: number) => [i, c.name, c.args]), `${name}: tool calls, whole`);
  t.ok(calls.every((c) => /^call_/.test(c.id ?? '')), `${name}: tool call ids synthesized`);
  t.same(finishes(chunks), [finishOf(e.finishReason, e.calls.length)], `${name}: one finish_reason`);
  const fin = chunks.find((c) => c.choices[0]?.finish_reason)!;
  t.same((fin.choices[0].delta.reasoning_details ?? []).map((d: Any) => d.signature).sort(), [...e.signatures].sort(), `${name}: every signature on the finish chunk`);
  const last = chunks[chunks.length - 1];
  t.same(last.choices, [], `${name}: usage chunk last`);
  t.same(last.usage, e.usage, `${name}: usage from the last usageMetadata`);
}

function checkCompletion(t: Any, name: string, body: Any) {
  const e = expected([body]);
  const c = toCompletion(body, 'm');
  const m: Any = c.choices[0].message;
  t.equal(m.content, e.text || (e.calls.length ? null : ''), `${name}: content`);
  t.equal(m.reasoning_content, e.thoughts || undefined, `${name}: reasoning_content`);
  t.same((m.tool_calls ?? []).map((tc: Any) => [tc.function.name, JSON.parse(tc.function.arguments)]), e.calls.map((x: Any) => [x.name, x.args]), `${name}: tool calls`);
  t.same((m.reasoning_details ?? []).map((d: Any) => d.signature).sort(), [...e.signatures].sort(), `${name}: signatures`);
  for (const d of m.reasoning_details ?? []) t.ok(d.tool_call_id ? m.tool_calls.some((tc: Any) => tc.id === d.tool_call_id) : d.part_index === 0, `${name}: signature placed`);
  t.equal(c.choices[0].finish_reason, finishOf(e.finishReason, e.calls.length), `${name}: finish_reason`);
  t.same(c.usage, e.usage, `${name}: usage`);
  return c;
}

interface Interaction { request: Any; response: Any }
const cassette = (f: string): Interaction[] => YAML.parse(read(f)).interactions;
/** A cassette's SSE body parsed by the gateway's own SSE reader (\r\n\r\n separators). */
async function cassetteEvents(body: string): Promise<SSEEvent[]> {
  const out: SSEEvent[] = [];
  for await (const e of parseSSE((async function* () { yield Buffer.from(body); })())) out.push(e);
  return out;
}

if (noRecordings) {
  t.test('Gemini conformance replay', { skip: noRecordings }, async () => {});
} else {
  t.test('every *.chunks.txt recording replays to a well-formed chunk sequence', async (t) => {
    const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.chunks.txt'));
    t.ok(files.length >= 2, 'recordings found');
    for (const f of files) {
      const events = lineEvents(read(f));
      checkStream(t, f, await collect(events), expected(events.map((e) => JSON.parse(e.data))));
      const noUsage = await collect(events, false);
      t.notOk(noUsage.some((c) => c.usage), `${f}: no usage chunk without include_usage`);
    }
  });

  t.test('google-text.chunks.txt: Gemini 3 signature on the trailing empty part', async (t) => {
    const chunks = await collect(lineEvents(read('google-text.chunks.txt')));
    t.equal(joined(chunks, (d) => d.content), 'There are **3** "r"s in strawberry.\n\nst**r**awbe**rr**y');
    const fin: Any = chunks.find((c) => c.choices[0]?.finish_reason);
    t.match(fin.choices[0].delta.reasoning_details, [{ type: 'thought_signature', part_index: 0, signature: /^EqsFCqgF/ }]);
    t.same(chunks.at(-1)!.usage, { prompt_tokens: 9, completion_tokens: 208, total_tokens: 217, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 185 } });
  });

  t.test('every *.json response body maps to a chat.completion', async (t) => {
    const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.json') && !f.includes('429'));
    t.ok(files.length >= 2);
    for (const f of files) checkCompletion(t, f, JSON.parse(read(f)));
    const tool = toCompletion(JSON.parse(read('google-tool-call.json')), 'm');
    t.equal(tool.choices[0].finish_reason, 'tool_calls', 'STOP + functionCall -> tool_calls');
    t.same(JSON.parse(tool.choices[0].message.tool_calls![0].function.arguments), { location: 'San Francisco' });
  });

  t.test('429 RESOURCE_EXHAUSTED: the envelope and RetryInfo.retryDelay as retryAfterMs', async (t) => {
    const text = read('google-429-retry-info.json');
    const mapped = geminiError(429, JSON.parse(text), text);
    t.same(mapped.error, { message: 'You exceeded your current quota, please check your plan.', type: 'rate_limit_error', param: null, code: 'resource_exhausted' });
    t.equal(mapped.retryAfterMs, 34400);
  });

  t.test('every *.yaml cassette: the mock accepts the recorded requests, responses and streams map', async (t) => {
    const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.yaml'));
    t.ok(files.length >= 4);
    for (const f of files) {
      for (const [i, it] of cassette(f).entries()) {
        const name = `${f}#${i}`;
        t.equal(checkSpec(it.request.parsed_body, SPEC.GenerateContentRequest, ''), undefined, `${name}: the mock's field spec accepts Google's real request`);
        if (it.response.parsed_body) checkCompletion(t, name, it.response.parsed_body);
        else {
          const events = await cassetteEvents(it.response.body.string);
          t.ok(events.length > 1, `${name}: \\r\\n\\r\\n-separated events parsed`);
          checkStream(t, name, await collect(events), expected(events.map((e) => JSON.parse(e.data))));
        }
      }
    }
  });

  t.test('recorded answers: MAX_TOKENS -> length, SAFETY with empty content -> content_filter, cached tokens', async (t) => {
    const max = toCompletion(cassette('test_google_model_max_tokens.yaml')[0].response.parsed_body, 'm');
    t.match(max.choices[0], { finish_reason: 'length', message: { content: 'The capital of France is' } });
    const safety = toCompletion(cassette('test_google_model_safety_settings.yaml')[0].response.parsed_body, 'm');
    t.match(safety.choices[0], { finish_reason: 'content_filter', message: { content: '' } });
    const video = toCompletion(cassette('test_google_model_mobile_youtube_video_url_input.yaml')[0].response.parsed_body, 'm');
    t.same(video.usage, { prompt_tokens: 17713, completion_tokens: 889, total_tokens: 18602, prompt_tokens_details: { cached_tokens: 17379 }, completion_tokens_details: { reasoning_tokens: 821 } });
  });

  t.test('the gateway maps a request to the recorded request shape', async (t) => {
    const rec = cassette('test_google_model_max_tokens.yaml')[0].request.parsed_body;
    const req: ChatRequest = {
      model: 'gemini-2.5-flash',
      messages: [{ role: 'system', content: 'You are a helpful chatbot.' }, { role: 'user', content: 'What is the capital of France?' }],
      max_completion_tokens: 5,
      reasoning_effort: 'none',
    };
    const { body } = toGemini(req, { model, note: () => {} });
    t.same(body.contents, rec.contents);
    t.same(body.systemInstruction!.parts, rec.systemInstruction.parts);
    t.equal(body.generationConfig!.maxOutputTokens, rec.generationConfig.maxOutputTokens);
    t.equal(body.generationConfig!.thinkingConfig!.thinkingBudget, rec.generationConfig.thinkingConfig.thinking_budget);
    t.equal(checkSpec(body, SPEC.GenerateContentRequest, ''), undefined, 'the mapped body passes the field spec');
  });

  t.test('thinking conversation: the recorded second turn rebuilt from the first turn\'s mapped answer', async (t) => {
    const [first, second] = cassette('test_google_model_thinking_part.yaml');
    const answer = toCompletion(first.response.parsed_body, 'm').choices[0].message;
    const recorded = second.request.parsed_body;
    const system = recorded.systemInstruction.parts[0].text;
    const [q1, q2] = [recorded.contents[0].parts[0].text, recorded.contents[2].parts[0].text];
    const req: ChatRequest = {
      model: 'gemini-3-pro-preview',
      messages: [{ role: 'system', content: system }, { role: 'user', content: q1 }, answer as ChatMessage, { role: 'user', content: q2 }],
      tools: [{ type: 'function', function: { name: 'dummy', description: '', parameters: { type: 'object', properties: {}, additionalProperties: false } } }],
    };
    const { body } = toGemini(req, { model, note: () => {} });
    t.same(body.contents[0], recorded.contents[0], 'first user turn');
    t.same(body.contents[2], recorded.contents[2], 'second user turn');
    const recModel = recorded.contents[1];
    const mine = body.contents[1];
    t.equal(mine.role, 'model');
    const recText = recModel.parts.find((p: Any) => !p.thought);
    t.same(mine.parts!.map((p) => p.text), [recText.text], 'the answer text (thought summaries are not sent back)');
    t.equal(sigBytes(mine.parts![0].thoughtSignature!), sigBytes(recText.thoughtSignature), 'the same signature bytes on the same part');
    t.same(body.tools![0].functionDeclarations![0].parametersJsonSchema, recorded.tools[0].functionDeclarations[0].parameters_json_schema, 'JSON Schema passed as parametersJsonSchema, as recorded');
    t.equal(checkSpec(body, SPEC.GenerateContentRequest, ''), undefined);
  });
}
