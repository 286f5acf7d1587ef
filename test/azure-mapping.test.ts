// Azure OpenAI's pure mappings (plugins/providers/azure), unit level: URLs on
// both schemes, error bodies, and the content-filter annotations removed from
// answers, chunks and images. The HTTP behaviour is in azure.test.ts.
import t from 'tap';
import type { ChatChunk, ChatCompletion } from '../src/types.js';
import { azureUrl, resourceBase } from '../plugins/providers/azure/request.js';
import { azureError } from '../plugins/providers/azure/errors.js';
import { AzureChunkMapper } from '../plugins/providers/azure/stream.js';
import { withoutFilterResults, imagesWithoutFilterResults } from '../plugins/providers/azure/response.js';

t.test('URLs: v1 without an API version, deployments with one; the endpoint suffix tolerated', async (t) => {
  t.equal(azureUrl('https://r.openai.azure.com/', 'chat/completions', 'dep', undefined), 'https://r.openai.azure.com/openai/v1/chat/completions');
  t.equal(azureUrl('https://r.openai.azure.com/openai/v1', 'responses', 'dep', undefined), 'https://r.openai.azure.com/openai/v1/responses');
  t.equal(azureUrl('https://r.openai.azure.com', 'images/generations', 'my dep', '2024-10-21'), 'https://r.openai.azure.com/openai/deployments/my%20dep/images/generations?api-version=2024-10-21');
  t.equal(azureUrl('https://r.openai.azure.com/openai', 'responses', 'dep', '2025-04-01-preview'), 'https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview');
  t.equal(resourceBase('https://r.cognitiveservices.azure.com/openai/'), 'https://r.cognitiveservices.azure.com');
});

t.test('errors: content filter 400 names the categories; others as OpenAI maps them', async (t) => {
  const body = { error: { code: 'content_filter', message: 'filtered', param: 'prompt', innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { hate: { filtered: true, severity: 'medium' }, sexual: { filtered: false, severity: 'safe' } } } } };
  t.match(azureError(400, body, JSON.stringify(body), {}).error, { code: 'content_filter', type: 'invalid_request_error', param: 'prompt', message: /content filter blocked the request \(hate: medium\): filtered/ });
  const img = { error: { code: 'content_policy_violation', message: 'Your request was rejected' } };
  t.match(azureError(400, img, '', {}).error, { code: 'content_filter', message: /blocked the request: Your request/ });
  t.match(azureError(429, { error: { code: '429', message: 'Rate limit is exceeded.' } }, '', {}).error, { code: '429', type: 'rate_limit_error' });
});

t.test('stream: annotation-only chunks dropped, annotations removed from the others', async (t) => {
  const ev = (o: unknown) => ({ data: typeof o === 'string' ? o : JSON.stringify(o) });
  const m = new AzureChunkMapper();
  const out: ChatChunk[] = [];
  const safe = { hate: { filtered: false, severity: 'safe' } };
  // Azure's first chunk: the prompt's filter results alone, with an empty id and model.
  m.step(ev({ id: '', object: '', created: 0, model: '', choices: [], prompt_filter_results: [{ prompt_index: 0, content_filter_results: safe }] }), out);
  t.same(out, [], 'the prompt-filter chunk is not for the client');
  const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4.1-mini' };
  m.step(ev({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: null, content_filter_results: safe }] }), out);
  m.step(ev({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }), out);
  // An asynchronous filter's trailing chunk: annotations and nothing else.
  m.step(ev({ ...base, choices: [{ index: 0, delta: {}, finish_reason: null, content_filter_results: safe }] }), out);
  t.equal(m.step(ev('[DONE]'), out), true, '[DONE] ends the stream');
  t.equal(out.length, 2, 'the content chunk and the finish chunk');
  t.equal(out[0].choices[0].delta.content, 'Hi');
  t.notOk('content_filter_results' in out[0].choices[0], 'annotations removed');
  t.equal(out[1].choices[0].finish_reason, 'stop');
  const bare = new AzureChunkMapper();
  const none: ChatChunk[] = [];
  bare.end(none);
  t.same(none, [], 'a stream without [DONE] simply ends');
});

t.test('answers and images: the annotations removed, the rest untouched', async (t) => {
  const body = {
    id: 'chatcmpl-2',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4.1-mini',
    prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }],
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok', refusal: null }, finish_reason: 'stop', logprobs: null, content_filter_results: {} }],
  };
  const out = withoutFilterResults(body as unknown as ChatCompletion) as unknown as Record<string, unknown>;
  t.notOk('prompt_filter_results' in out);
  t.same((out.choices as Record<string, unknown>[])[0], { index: 0, message: { role: 'assistant', content: 'ok', refusal: null }, finish_reason: 'stop', logprobs: null });
  const images = imagesWithoutFilterResults({ created: 1, data: [{ b64_json: 'AAAA', content_filter_results: {}, prompt_filter_results: {} }] });
  t.same(images, { created: 1, data: [{ b64_json: 'AAAA' }] });
});
