// Unit tests of the google family's pure mappings (IR -> generateContent,
// generateContent response -> chat completion, stream events -> chunks,
// errors), beside the HTTP tests in google.test.ts. Expected shapes follow the
// Gemini API reference (https://ai.google.dev/api/generate-content).
import t from 'tap';
import type { ChatChunk, ChatRequest, NormalizationEntry } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';
import { toGemini } from '../plugins/providers/google/request.js';
import { toCompletion, mapFinish } from '../plugins/providers/google/response.js';
import { GeminiChunkMapper } from '../plugins/providers/google/stream.js';
import { geminiError, parseDuration } from '../plugins/providers/google/errors.js';

const model = { id: 'google/gemini-2.5-flash', capabilities: { thinking: true }, max_output_tokens: 65536 } as unknown as ModelConfig;
const map = (req: Partial<ChatRequest>) => {
  const notes: NormalizationEntry[] = [];
  const plan = toGemini({ model: 'gemini-2.5-flash', messages: [], ...req } as ChatRequest, { model, note: (n) => notes.push(n) });
  return { ...plan, notes };
};

t.test('request: systemInstruction, roles user/model, function calls and responses, inline images', async (t) => {
  const req = {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather?' }, { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQ' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp":21}' },
    ],
    tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }],
    tool_choice: { type: 'function', function: { name: 'weather' } },
    temperature: 0.2,
    max_tokens: 200,
    stop: ['END'],
  } as unknown as ChatRequest;
  const before = JSON.stringify(req);
  const { body } = map(req);
  t.equal(JSON.stringify(req), before, 'pure: the request is not mutated');
  t.same(body.systemInstruction, { parts: [{ text: 'Be brief.' }] });
  t.same(body.contents.map((c) => c.role), ['user', 'model', 'user'], 'the tool result goes back as a user turn');
  t.match(body.contents[0].parts, [{ text: 'Weather?' }, { inlineData: { mimeType: 'image/jpeg', data: '/9j/4AAQ' } }]);
  t.match(body.contents[1].parts, [{ functionCall: { name: 'weather', args: { city: 'Paris' } } }]);
  t.match(body.contents[2].parts, [{ functionResponse: { name: 'weather' } }], 'the response is named after the call it answers');
  t.match(body.tools, [{ functionDeclarations: [{ name: 'weather' }] }]);
  t.match(body.toolConfig, { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['weather'] } });
  t.match(body.generationConfig, { temperature: 0.2, maxOutputTokens: 200, stopSequences: ['END'] });
});

t.test('request: a conversation of system messages only is a 400 naming messages', async (t) => {
  let err: unknown;
  try {
    map({ messages: [{ role: 'system', content: 'x' }] } as Partial<ChatRequest>);
  } catch (e) {
    err = e;
  }
  t.match(err, { status: 400, param: 'messages' });
});

t.test('response: text, function calls, finish reasons, usage with cached and thinking tokens', async (t) => {
  const res = {
    candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'Sunny.' }, { functionCall: { name: 'weather', args: { city: 'Rome' } } }] }, finishReason: 'STOP' }],
    usageMetadata: { promptTokenCount: 50, candidatesTokenCount: 7, thoughtsTokenCount: 3, cachedContentTokenCount: 40, totalTokenCount: 60 },
    responseId: 'r1',
  };
  const c = toCompletion(res as never, 'google/gemini-2.5-flash');
  t.equal(c.choices[0].message.content, 'Sunny.');
  t.match(c.choices[0].message.tool_calls, [{ type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } }]);
  t.equal(c.choices[0].finish_reason, 'tool_calls', 'a function call answers with tool_calls even though Gemini says STOP');
  t.match(c.usage, { prompt_tokens: 50, prompt_tokens_details: { cached_tokens: 40 }, completion_tokens_details: { reasoning_tokens: 3 } });
  t.equal(mapFinish('MAX_TOKENS', false), 'length');
  t.equal(mapFinish('SAFETY', false), 'content_filter');
  t.equal(mapFinish('STOP', false), 'stop');
});

t.test('stream: chunks event by event, role first, finish and usage at the end', async (t) => {
  const ev = (o: unknown) => ({ data: JSON.stringify(o) });
  const mapper = new GeminiChunkMapper({ model: 'google/gemini-2.5-flash', includeUsage: true });
  const out: ChatChunk[] = [];
  mapper.step(ev({ candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'Hel' }] } }], responseId: 'r2' }), out);
  mapper.step(ev({ candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'lo' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 2, totalTokenCount: 6 }, responseId: 'r2' }), out);
  mapper.end(out);
  t.equal(out[0].choices[0].delta.role, 'assistant');
  t.equal(out.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello');
  t.equal(out.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
  t.match(out.find((c) => c.usage)?.usage, { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 });
});

t.test('Google Search grounding: the distinct non-empty queries are the web searches, JSON or streamed', async (t) => {
  const grounding = { webSearchQueries: ['rome weather', '', 'rome forecast', 'rome weather'] };
  const usageMetadata = { promptTokenCount: 9, candidatesTokenCount: 2, totalTokenCount: 11 };
  const res = { candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'Sunny.' }] }, finishReason: 'STOP', groundingMetadata: grounding }], usageMetadata };
  t.same(toCompletion(res as never, 'google/gemini-3-pro-preview').usage?.server_tool_use, { web_search_requests: 2 });
  const ungrounded = toCompletion({ ...res, candidates: [{ ...res.candidates[0], groundingMetadata: undefined }] } as never, 'google/gemini-3-pro-preview');
  t.notOk(ungrounded.usage && 'server_tool_use' in ungrounded.usage, 'no searches: no server_tool_use');

  const ev = (o: unknown) => ({ data: JSON.stringify(o) });
  const mapper = new GeminiChunkMapper({ model: 'google/gemini-3-pro-preview', includeUsage: true });
  const out: ChatChunk[] = [];
  mapper.step(ev({ candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'Sun' }] } }], usageMetadata: { ...usageMetadata, candidatesTokenCount: 1 }, responseId: 'g1' }), out);
  mapper.step(ev({ candidates: [{ index: 0, content: { role: 'model', parts: [{ text: 'ny.' }] }, finishReason: 'STOP', groundingMetadata: grounding }], usageMetadata, responseId: 'g1' }), out);
  mapper.end(out);
  t.same(out.find((c) => c.usage)?.usage?.server_tool_use, { web_search_requests: 2 }, 'grounding on the last event counts in the final usage');
});

t.test('errors: status, code and RetryInfo', async (t) => {
  const body = { error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'Quota exceeded', details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '34.4s' }] } };
  t.same(geminiError(429, body, ''), { error: { message: 'Quota exceeded', type: 'rate_limit_error', param: null, code: 'resource_exhausted' }, retryAfterMs: 34400 });
  const key = { error: { code: 400, status: 'INVALID_ARGUMENT', message: 'API key not valid', details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID' }] } };
  t.equal(geminiError(400, key, '').error.code, 'api_key_invalid');
  t.equal(parseDuration('2s'), 2000);
  t.equal(parseDuration('soon'), undefined);
});
