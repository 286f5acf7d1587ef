// Chat completions through the gateway to a Gemini upstream (a strict
// Generative Language API mock), driven by the official openai SDK and the
// Vercel AI SDK: plain and streamed answers, tools with thought signatures sent
// back, images, JSON modes, thinking, native fields, n, safety blocks, prompt
// caching through cachedContents, 429 with RetryInfo and fallback, errors
// mid-stream, debug normalizations.
import t from 'tap';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { startGeminiMock, GEMINI_KEY, rateLimitBody } from './mocks/gemini.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';
import { toGemini, traits, guessMime } from '../plugins/providers/google/request.js';
import { apiBase } from '../plugins/providers/google/index.js';
import { parseDuration, reclassify } from '../plugins/providers/google/errors.js';
import { UpstreamError } from '../src/provider/errors.js';
import type { ChatRequest, NormalizationEntry } from '../src/types.js';
import type { ModelConfig } from '../src/config/schema.js';

 

const gem = await startGeminiMock();
const oai = await startOpenAIMock();
const gw = await startGateway(`
providers:
  - name: google
    family: google
    base_url: ${gem.url}
    api_key: ${GEMINI_KEY}
    region: us-central1
    timeout_ms: 3000
    retries: 0
  - name: google-badkey
    family: google
    base_url: ${gem.url}
    api_key: AIzaSy-wrong-key
    region: europe-west4
    timeout_ms: 3000
    retries: 0
  - name: openai
    family: openai
    base_url: ${oai.url}/v1
    api_key: ${OPENAI_KEY}
    region: us-east
    timeout_ms: 3000
    retries: 0
routing:
  max_retry_wait_ms: 200
  failure_threshold: 1000
models:
  - id: google/gemini-2.5-flash
    modalities: { input: [text, image], output: [text] }
    capabilities: { thinking: true, vision: true, tools: true }
    context_window: 1048576
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-2.5-flash }]
  - id: google/gemini-2.5-pro
    capabilities: { thinking: true }
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-2.5-pro }]
  - id: google/gemini-3-pro-preview
    capabilities: { thinking: true }
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-3-pro-preview }]
  - id: google/gemini-2.0-flash
    max_output_tokens: 8192
    deployments: [{ provider: google, model: gemini-2.0-flash }]
  - id: google/gemini-badkey
    deployments: [{ provider: google-badkey, model: gemini-2.5-flash }]
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await gem.close();
  await oai.close();
});
t.beforeEach(() => {
  gem.reset();
  oai.reset();
});

const FLASH = 'google/gemini-2.5-flash';
const generates = () => gem.requests.filter((r) => /:(stream)?[gG]enerateContent$/.test(r.path));
const lastGenerate = () => generates().at(-1)!;

async function rawStream(body: unknown): Promise<{ status: number; text: string; events: any[] }> {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const events = text
    .split('\n\n')
    .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
    .map((f) => JSON.parse(f.slice(6)));
  return { status: res.status, text, events };
}

const weather = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } }];

t.test('plain completion: contents, systemInstruction, key in a header, usage and signature mapped', async (t) => {
  const r = await client.chat.completions.create({
    model: FLASH,
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'developer', content: 'Answer in English.' },
      { role: 'user', content: 'hello there' },
      { role: 'user', content: [{ type: 'text', text: 'and again' }] },
    ],
  });
  t.equal(r.object, 'chat.completion');
  t.equal(r.model, FLASH);
  t.match(r.id, /^chatcmpl-/);
  t.equal(r.choices[0].message.content, 'Echo: hello there and again');
  t.equal(r.choices[0].finish_reason, 'stop');
  const usage = r.usage as any;
  t.equal(usage.completion_tokens_details.reasoning_tokens, 24, 'thoughtsTokenCount is reasoning_tokens');
  t.ok(usage.completion_tokens > 24, 'completion = candidates + thoughts');
  t.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  const details = (r.choices[0].message as any).reasoning_details;
  t.match(details, [{ type: 'thought_signature', part_index: 0, signature: /^[A-Za-z0-9+/=]+$/ }], 'text signature returned');

  const up = lastGenerate();
  t.equal(up.path, '/v1beta/models/gemini-2.5-flash:generateContent');
  t.equal(up.headers['x-goog-api-key'], GEMINI_KEY, 'key in x-goog-api-key');
  t.equal(up.query.get('key'), null, 'never in the URL');
  t.notOk(JSON.stringify(up.headers).includes(CLIENT_KEY), 'client key not forwarded');
  t.same(up.body.systemInstruction, { parts: [{ text: 'You are terse.' }, { text: 'Answer in English.' }] });
  t.same(up.body.contents, [{ role: 'user', parts: [{ text: 'hello there' }, { text: 'and again' }] }], 'consecutive user messages merged into one turn');
  t.notOk('model' in up.body || 'messages' in up.body, 'no OpenAI fields upstream');
  t.match((r as any).extra.routing.attempts, [{ provider: 'google', region: 'us-central1', status: 'succeeded', model: FLASH }]);
});

t.test('sampling and limits: generationConfig fields, unsupported fields stripped with notes', async (t) => {
  const r: any = await client.chat.completions.create({
    model: FLASH,
    messages: [{ role: 'user', content: 'one two three four five six seven' }],
    temperature: 0.3,
    top_p: 0.9,
    max_completion_tokens: 4,
    stop: 'zzz',
    seed: 2 ** 40 + 7,
    presence_penalty: 0.5,
    logit_bias: { '50256': -100 },
    parallel_tool_calls: false,
    service_tier: 'auto',
    store: true,
    metadata: { team: 'a' },
    user: 'user-1',
    debug: ['normalizations'],
  } as any);
  t.equal(r.choices[0].finish_reason, 'length', 'MAX_TOKENS -> length');
  t.equal(r.choices[0].message.content, 'Echo: one two three ');
  const g = lastGenerate().body.generationConfig;
  t.same(g, { temperature: 0.3, topP: 0.9, maxOutputTokens: 4, stopSequences: ['zzz'], seed: 7 });
  const notes = r.debug.normalizations;
  for (const p of ['logit_bias', 'parallel_tool_calls', 'service_tier', 'store', 'metadata', 'user', 'presence_penalty'])
    t.ok(notes.some((n: any) => n.param === p && n.action === 'strip'), `${p} stripped with a note`);
  t.ok(notes.some((n: any) => n.param === 'seed' && n.action === 'override' && n.after === 7), 'seed folded to int32 with a note');

  // The model's own limit wins over a larger request, with a note.
  const big: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'hi' }], max_tokens: 100000, debug: ['normalizations', 'deprecations'] } as any);
  t.equal(lastGenerate().body.generationConfig.maxOutputTokens, 65536);
  t.match(big.debug.normalizations, [{ param: 'max_tokens', action: 'override', before: 100000, after: 65536 }]);
  t.match(big.debug.deprecations, [{ param: 'max_tokens' }]);
});

t.test('streaming with include_usage: role first, deltas, finish, usage chunk, no unknown fields upstream', async (t) => {
  const stream = await client.chat.completions.create({
    model: FLASH,
    messages: [{ role: 'user', content: 'stream me please now' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: any[] = [];
  for await (const c of stream) chunks.push(c);
  t.equal(chunks[0].choices[0].delta.role, 'assistant');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: stream me please now');
  t.ok(chunks.filter((c) => c.choices[0]?.delta?.content).length >= 3, 'several content deltas');
  const finish = chunks.find((c) => c.choices[0]?.finish_reason);
  t.equal(finish.choices[0].finish_reason, 'stop');
  t.match(finish.choices[0].delta.reasoning_details, [{ type: 'thought_signature', part_index: 0 }], 'signatures on the finish chunk');
  const last = chunks.at(-1);
  t.same(last.choices, []);
  t.equal(last.usage.completion_tokens_details.reasoning_tokens, 24, 'last cumulative usageMetadata');
  t.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  t.equal(last.extra.routing.attempts[0].status, 'succeeded');
  const up = lastGenerate();
  t.equal(up.path, '/v1beta/models/gemini-2.5-flash:streamGenerateContent');
  t.equal(up.query.get('alt'), 'sse');
  t.notOk('stream' in up.body || 'stream_options' in up.body);

  // Without include_usage there is no usage chunk; the raw stream ends with [DONE].
  const raw = await rawStream({ model: FLASH, messages: [{ role: 'user', content: 'x y' }], stream: true });
  t.equal(raw.status, 200);
  t.ok(raw.text.endsWith('data: [DONE]\n\n'));
  t.notOk(raw.events.some((e) => e.usage), 'no usage chunk');
});

t.test('Gemini 3 stream: signature on the trailing empty part reaches reasoning_details', async (t) => {
  const raw = await rawStream({ model: 'google/gemini-3-pro-preview', messages: [{ role: 'user', content: 'count the rs in strawberry' }], stream: true });
  const content = raw.events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('');
  t.equal(content, 'Echo: count the rs in strawberry');
  const fin = raw.events.find((e) => e.choices?.[0]?.finish_reason);
  t.match(fin.choices[0].delta.reasoning_details, [{ type: 'thought_signature', part_index: 0, signature: String }]);
});

t.test('tools round trip (Gemini 3): functionCall -> tool_calls, signature restored, functionResponse named', async (t) => {
  const model = 'google/gemini-3-pro-preview';
  const messages: any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await client.chat.completions.create({ model, messages, tools: weather, tool_choice: 'auto' });
  t.equal(r1.choices[0].finish_reason, 'tool_calls', 'STOP + functionCall -> tool_calls');
  const msg: any = r1.choices[0].message;
  t.equal(msg.content, null);
  const call = msg.tool_calls[0];
  t.match(call.id, /^call_[0-9a-f]{24}$/, 'synthesized id');
  t.equal(call.function.name, 'get_weather');
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  t.match(msg.reasoning_details, [{ type: 'thought_signature', tool_call_id: call.id }]);
  const signature = msg.reasoning_details[0].signature;
  const up1 = lastGenerate().body;
  t.same(up1.tools, [{ functionDeclarations: [{ name: 'get_weather', description: 'Weather for a city', parametersJsonSchema: weather[0].function.parameters }] }], 'JSON Schema passed untouched as parametersJsonSchema');
  t.same(up1.toolConfig, { functionCallingConfig: { mode: 'AUTO' } });

  messages.push(msg, { role: 'tool', tool_call_id: call.id, content: '21C and sunny' });
  const r2 = await client.chat.completions.create({ model, messages, tools: weather });
  t.equal(r2.choices[0].message.content, 'Echo: tool said 21C and sunny');
  const up2 = lastGenerate().body;
  t.same(up2.contents[1], { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: signature }] }, 'signature back on the same part');
  t.same(up2.contents[2], { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { content: '21C and sunny' } } }] }, 'name looked up from the call id');

  // A JSON object result is passed as the response object itself.
  messages[2] = { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21,"sky":"sunny"}' };
  await client.chat.completions.create({ model, messages, tools: weather });
  t.same(lastGenerate().body.contents[2].parts[0].functionResponse.response, { temp_c: 21, sky: 'sunny' });

  // History without the signature (another provider's, or a client that dropped it): the documented sentinel, with a note.
  const { reasoning_details: _drop, ...bare } = msg;
  const r3: any = await client.chat.completions.create({ model, messages: [messages[0], bare, messages[2]], tools: weather, debug: ['normalizations'] } as any);
  t.equal(lastGenerate().body.contents[1].parts[0].thoughtSignature, 'skip_thought_signature_validator');
  t.match(r3.debug.normalizations, [{ param: 'messages[1].reasoning_details', action: 'add' }]);

  // A garbled signature is refused by Gemini: a 400 to the caller.
  const garbled = { ...msg, reasoning_details: [{ type: 'thought_signature', tool_call_id: call.id, signature: 'AAAA' + signature.slice(4) }] };
  await t.rejects(client.chat.completions.create({ model, messages: [messages[0], garbled, messages[2]], tools: weather }), { status: 400, message: /Corrupted thought signature/ } as any);
});

t.test('tools round trip streamed, tool_choice forcing a function, unknown tool_call_id', async (t) => {
  const model = 'google/gemini-3-pro-preview';
  const stream = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'look it up' }], tools: weather, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const chunks: any[] = [];
  stream.on('chunk', (c) => chunks.push(c));
  const final = await stream.finalChatCompletion();
  t.same(lastGenerate().body.toolConfig, { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
  const msg: any = final.choices[0].message;
  t.equal(final.choices[0].finish_reason, 'tool_calls');
  const call = msg.tool_calls[0];
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  const tcChunks = chunks.filter((c) => c.choices[0]?.delta?.tool_calls);
  t.equal(tcChunks.length, 1, 'a Gemini call arrives whole: one delta');
  t.match(tcChunks[0].choices[0].delta.tool_calls[0], { index: 0, id: call.id, type: 'function', function: { name: 'get_weather' } });
  t.match(msg.reasoning_details, [{ type: 'thought_signature', tool_call_id: call.id }]);

  const back = { role: 'assistant', content: msg.content, tool_calls: msg.tool_calls.map((c: any) => ({ id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } })), reasoning_details: msg.reasoning_details };
  const r2 = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'look it up' }, back as any, { role: 'tool', tool_call_id: call.id, content: 'cloudy' }], tools: weather });
  const f2 = await r2.finalChatCompletion();
  t.equal(f2.choices[0].message.content, 'Echo: tool said cloudy');
  t.equal(lastGenerate().body.contents[1].parts[0].thoughtSignature, msg.reasoning_details[0].signature, 'streamed signature restored');

  await t.rejects(
    client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'call_nope', content: 'y' }] }),
    { status: 400, error: { param: 'messages[1].tool_call_id' } } as any,
  );
});

t.test('images: data URL -> inlineData, http(s) URL -> fileData with a guessed MIME type', async (t) => {
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').toString('base64');
  const r: any = await client.chat.completions.create({
    model: FLASH,
    messages: [{
      role: 'user',
      content: [
        { type: 'text', text: 'what is this' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
        { type: 'image_url', image_url: { url: 'https://example.com/pics/cat.webp?size=2', detail: 'high' } },
        { type: 'image_url', image_url: { url: 'https://example.com/photo' } },
      ],
    }],
    debug: ['normalizations'],
  } as any);
  t.equal(r.choices[0].message.content, 'Echo: what is this [3 images]');
  t.same(lastGenerate().body.contents[0].parts, [
    { text: 'what is this' },
    { inlineData: { mimeType: 'image/png', data: png } },
    { fileData: { mimeType: 'image/webp', fileUri: 'https://example.com/pics/cat.webp?size=2' } },
    { fileData: { mimeType: 'image/jpeg', fileUri: 'https://example.com/photo' } },
  ]);
  t.match(r.debug.normalizations, [{ param: 'messages[0].content[2].image_url.detail', action: 'strip' }]);

  await t.rejects(
    client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png,rawbytes' } }] }] }),
    { status: 400, error: { param: 'messages[0].content[0].image_url.url' } } as any,
  );
  t.equal(generates().length, 1, 'a bad image never reached Gemini');
});

t.test('JSON modes: json_object -> responseMimeType, json_schema -> responseJsonSchema untouched', async (t) => {
  const r1 = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'give json' }], response_format: { type: 'json_object' } });
  t.same(JSON.parse(r1.choices[0].message.content!), { answer: 'give json' });
  t.same(lastGenerate().body.generationConfig, { responseMimeType: 'application/json' });

  const schema = { type: 'object', properties: { city: { type: 'string' }, temp: { type: 'number' } }, required: ['city', 'temp'], additionalProperties: false };
  const r2 = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'Paris' }], response_format: { type: 'json_schema', json_schema: { name: 'w', schema, strict: true } } });
  t.same(JSON.parse(r2.choices[0].message.content!), { city: 'Paris', temp: 42 });
  t.same(lastGenerate().body.generationConfig, { responseMimeType: 'application/json', responseJsonSchema: schema });
});

t.test('reasoning_effort -> thinkingConfig, fitted to each model, thoughts -> reasoning_content', async (t) => {
  const r: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'think' }], reasoning_effort: 'low' });
  t.same(lastGenerate().body.generationConfig, { thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } });
  t.match(r.choices[0].message.reasoning_content, /The user wrote: "think"/);
  t.equal(r.choices[0].message.content, 'Echo: think');

  const x: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'hard' }], reasoning_effort: 'xhigh', debug: ['normalizations'] } as any);
  t.equal(lastGenerate().body.generationConfig.thinkingConfig.thinkingBudget, 24576, 'clamped to the Flash maximum');
  t.match(x.debug.normalizations, [{ param: 'reasoning_effort', action: 'override' }]);

  await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'fast' }], reasoning_effort: 'none' as any });
  t.same(lastGenerate().body.generationConfig, { thinkingConfig: { thinkingBudget: 0 } }, 'none turns thinking off on Flash');

  const pro: any = await client.chat.completions.create({ model: 'google/gemini-2.5-pro', messages: [{ role: 'user', content: 'fast' }], reasoning_effort: 'none', debug: ['normalizations'] } as any);
  t.same(lastGenerate().body.generationConfig.thinkingConfig, { thinkingBudget: 128, includeThoughts: true }, '2.5 Pro cannot turn thinking off: its minimum');
  t.match(pro.debug.normalizations, [{ param: 'reasoning_effort', after: 'thinkingBudget 128' }]);

  const g3: any = await client.chat.completions.create({ model: 'google/gemini-3-pro-preview', messages: [{ role: 'user', content: 'hm' }], reasoning_effort: 'medium', debug: ['normalizations'] } as any);
  t.same(lastGenerate().body.generationConfig.thinkingConfig, { thinkingLevel: 'high', includeThoughts: true }, 'Gemini 3 Pro takes a level: medium -> high');
  t.match(g3.debug.normalizations, [{ param: 'reasoning_effort', before: 'medium', after: 'high' }]);
  t.ok(g3.choices[0].message.reasoning_content);

  // Streamed thoughts arrive as reasoning_content deltas before the answer.
  const raw = await rawStream({ model: FLASH, messages: [{ role: 'user', content: 'think aloud' }], stream: true, reasoning_effort: 'medium' });
  const firstContent = raw.events.findIndex((e) => e.choices?.[0]?.delta?.content);
  const reasoning = raw.events.findIndex((e) => e.choices?.[0]?.delta?.reasoning_content);
  t.ok(reasoning >= 0 && reasoning < firstContent, 'reasoning first');
});

t.test('native_fields: thinking_config wins untouched, top_k in generationConfig, safety_settings and labels top level', async (t) => {
  const r: any = await client.chat.completions.create({
    model: FLASH,
    messages: [{ role: 'user', content: 'native' }],
    reasoning_effort: 'high',
    temperature: 0.2,
    native_fields: {
      thinking_config: { thinking_budget: 0 },
      top_k: 40,
      safety_settings: [{ category: 'HARM_CATEGORY_HATE_SPEECH', threshold: 'BLOCK_LOW_AND_ABOVE' }],
      labels: { team: 'search' },
    },
    debug: ['normalizations'],
  } as any);
  t.equal(r.choices[0].message.content, 'Echo: native');
  const body = lastGenerate().body;
  t.same(body.generationConfig, { temperature: 0.2, thinking_config: { thinking_budget: 0 }, top_k: 40 });
  t.same(body.safety_settings, [{ category: 'HARM_CATEGORY_HATE_SPEECH', threshold: 'BLOCK_LOW_AND_ABOVE' }]);
  t.same(body.labels, { team: 'search' });
  t.notOk('native_fields' in body);
  t.match(r.debug.normalizations, [{ param: 'reasoning_effort', action: 'strip' }]);

  // camelCase works the same; an unknown native field is Gemini's to refuse (400, its own message).
  await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'x' }], native_fields: { safetySettings: [], topK: 3 } } as any);
  t.same(lastGenerate().body.safetySettings, []);
  t.equal(lastGenerate().body.generationConfig.topK, 3);
  await t.rejects(client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'x' }], native_fields: { not_a_field: 1 } } as any), { status: 400, message: /Unknown name "not_a_field"/ } as any);
});

t.test('n=2 -> candidateCount 2 -> two choices; logprobs on a model that has them', async (t) => {
  const r = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'twice' }], n: 2 });
  t.equal(r.choices.length, 2);
  t.same(r.choices.map((c) => c.index), [0, 1]);
  t.same(r.choices.map((c) => c.message.content), ['Echo: twice', 'Echo: twice (2)']);
  t.equal(lastGenerate().body.generationConfig.candidateCount, 2);

  const lp = await client.chat.completions.create({ model: 'google/gemini-2.0-flash', messages: [{ role: 'user', content: 'a b' }], logprobs: true, top_logprobs: 2, presence_penalty: 0.4 });
  t.same(lastGenerate().body.generationConfig, { presencePenalty: 0.4, responseLogprobs: true, logprobs: 2 }, 'Gemini 2.0 keeps penalties');
  const content = lp.choices[0].logprobs!.content!;
  t.same(content.map((c) => c.token).join(''), 'Echo: a b');
  t.equal(content[0].top_logprobs.length, 2);
  t.same(content[0].bytes, [...Buffer.from(content[0].token)]);
});

t.test('safety: blocked prompt and blocked answer -> content_filter with empty content', async (t) => {
  const r1 = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'BLOCK_ME please' }] });
  t.equal(r1.choices[0].finish_reason, 'content_filter');
  t.equal(r1.choices[0].message.content, '');
  const r2 = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'UNSAFE_OUTPUT now' }] });
  t.equal(r2.choices[0].finish_reason, 'content_filter');
  t.equal(r2.choices[0].message.content, '');
  const raw = await rawStream({ model: FLASH, messages: [{ role: 'user', content: 'BLOCK_ME' }], stream: true });
  t.match(raw.events[0].choices[0], { delta: { role: 'assistant', content: '' }, finish_reason: 'content_filter' });
  t.ok(raw.text.endsWith('data: [DONE]\n\n'));
});

t.test('cache_control: prefix -> one cachedContents create, reused by later requests', async (t) => {
  const manual = 'Reference manual. '.repeat(400); // ~7 KB: above the 1,024-token minimum
  const ask = (q: string) =>
    client.chat.completions.create({
      model: FLASH,
      messages: [
        { role: 'system', content: manual, cache_control: { type: 'ephemeral', ttl: '300s' } },
        { role: 'user', content: q },
      ],
      tools: weather,
      debug: ['normalizations'],
    } as any);
  const r1: any = await ask('first question');
  const r2: any = await ask('second question');
  t.equal(r1.choices[0].message.content, 'Echo: first question');
  t.equal(r2.choices[0].message.content, 'Echo: second question');
  const creates = gem.requests.filter((r) => r.path === '/v1beta/cachedContents');
  t.equal(creates.length, 1, 'created once');
  t.same(creates[0].body, { model: 'models/gemini-2.5-flash', ttl: '300s', systemInstruction: { parts: [{ text: manual }] }, tools: [{ functionDeclarations: [{ name: 'get_weather', description: 'Weather for a city', parametersJsonSchema: weather[0].function.parameters }] }] });
  const name = [...gem.state.caches.keys()][0];
  const gens = generates();
  t.equal(gens.length, 2);
  for (const g of gens) {
    t.equal(g.body.cachedContent, name, 'generate references the cache');
    t.notOk(g.body.systemInstruction || g.body.tools || g.body.toolConfig, 'held by the cache, not resent');
    t.equal(g.body.contents.length, 1, 'only the messages after the prefix');
  }
  t.ok(r2.usage.prompt_tokens_details.cached_tokens > 1000, 'cachedContentTokenCount -> cached_tokens');
  t.same(r2.debug.normalizations, []);

  // A streamed request with the same prefix uses the same cache.
  const streamed = await rawStream({ model: FLASH, messages: [{ role: 'system', content: manual, cache_control: { type: 'ephemeral', ttl: '300s' } }, { role: 'user', content: 'streamed question' }], tools: weather, stream: true, stream_options: { include_usage: true } });
  t.equal(streamed.events.map((e) => e.choices?.[0]?.delta?.content ?? '').join(''), 'Echo: streamed question');
  t.equal(lastGenerate().body.cachedContent, name);
  t.ok(streamed.events.at(-1).usage.prompt_tokens_details.cached_tokens > 1000);
  t.equal(gem.requests.filter((r) => r.path === '/v1beta/cachedContents').length, 1, 'still one create');

  // Google forgot the cache (deleted, expired early): answered uncached, then a new cache is made.
  gem.state.caches.clear();
  const r3: any = await ask('third question');
  t.equal(r3.choices[0].message.content, 'Echo: third question');
  t.match(r3.debug.normalizations, [{ param: 'cache_control', action: 'strip', reason: /no longer knows/ }]);
  t.same(lastGenerate().body.systemInstruction, { parts: [{ text: manual }] }, 'uncached retry carries the full prompt');
  await ask('fourth question');
  t.equal(gem.requests.filter((r) => r.path === '/v1beta/cachedContents').length, 2, 'a new cache');
  t.ok(lastGenerate().body.cachedContent);

  // Concurrent requests with a new prefix wait for one creation.
  const other = 'Another manual. '.repeat(500);
  const both = await Promise.all(['a', 'b', 'c'].map((q) => client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: other, cache_control: { type: 'ephemeral' } }, { role: 'user', content: q }] } as any)));
  t.same(both.map((r) => r.choices[0].message.content), ['Echo: a', 'Echo: b', 'Echo: c']);
  const otherCreates = gem.requests.filter((r) => r.path === '/v1beta/cachedContents' && r.body.contents);
  t.equal(otherCreates.length, 1, 'one create for three concurrent requests');
  t.equal(otherCreates[0].body.ttl, '600s');
  t.equal(new Set(generates().slice(-3).map((g) => g.body.cachedContent)).size, 1, 'all three use it');
});

t.test('cache_control on a prefix too small for Gemini: sent uncached with a note, refusal remembered', async (t) => {
  const ask = () =>
    client.chat.completions.create({
      model: FLASH,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'short doc', cache_control: { type: 'ephemeral' } }] },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: 'question' },
      ],
      debug: ['normalizations'],
    } as any);
  const r: any = await ask();
  t.equal(r.choices[0].message.content, 'Echo: question');
  t.match(r.debug.normalizations, [{ param: 'cache_control', action: 'strip', reason: /too small/ }]);
  t.equal(gem.requests.filter((x) => x.path === '/v1beta/cachedContents').length, 1);
  t.same(gem.requests[0].body.ttl, '600s', 'default ttl 10 minutes');
  t.equal(lastGenerate().body.contents.length, 3, 'whole conversation sent');
  await ask();
  t.equal(gem.requests.filter((x) => x.path === '/v1beta/cachedContents').length, 1, 'not asked again');
});

t.test('429 RESOURCE_EXHAUSTED with RetryInfo, then fallback to an OpenAI target', async (t) => {
  gem.fail({ status: 429, body: rateLimitBody('34.4s'), pathIncludes: ':generateContent' });
  const r: any = await client.chat.completions.create({ model: FLASH, messages: [{ role: 'user', content: 'fall back' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.equal(r.choices[0].message.content, 'Echo: fall back');
  t.match(r.extra.routing.attempts, [
    { provider: 'google', status: 'failed', model: FLASH, error: /429 You exceeded your current quota/ },
    { provider: 'openai', status: 'succeeded', model: 'openai/gpt-4.1-mini' },
  ]);

  // Every target rate-limited: 429 with Retry-After from RetryInfo.
  gem.fail({ status: 429, body: rateLimitBody('34.4s'), pathIncludes: ':generateContent' });
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: FLASH, messages: [{ role: 'user', content: 'x' }] }),
  });
  t.equal(res.status, 429);
  t.equal(res.headers.get('retry-after'), '35');
  t.match(await res.json(), { error: { type: 'rate_limit_error' } });
});

t.test('provider key rejected (400 API_KEY_INVALID) is the gateway\'s fault: fallback, key never echoed', async (t) => {
  const r: any = await client.chat.completions.create({ model: 'google/gemini-badkey', messages: [{ role: 'user', content: 'k' }], fallbacks: ['openai/gpt-4.1-mini'] } as any);
  t.equal(r.choices[0].message.content, 'Echo: k');
  t.match(r.extra.routing.attempts[0], { provider: 'google-badkey', status: 'failed', error: /^401 / });
  t.notOk(JSON.stringify(r).includes('AIzaSy'), 'no key in the response');
  t.notOk(gw.rawLogs.join('').includes(GEMINI_KEY), 'no key in the logs');
});

t.test('mid-stream error event -> error frame, no [DONE]; first-event error falls back', async (t) => {
  gem.failStream({ afterEvents: 2 });
  const raw = await rawStream({ model: FLASH, messages: [{ role: 'user', content: 'one two three four five six' }], stream: true });
  t.equal(raw.status, 200);
  t.notOk(raw.text.includes('[DONE]'), 'a broken stream never looks finished');
  const last = raw.events.at(-1);
  t.match(last, { error: { message: /internal error/, type: 'api_error', code: 'internal' } });
  t.ok(raw.events.some((e) => e.choices?.[0]?.delta?.content), 'content went out before the error');

  // An error as the very first event: nothing was sent yet, so the next target answers.
  gem.failStream({ afterEvents: 0, error: { code: 503, message: 'The model is overloaded. Please try again later.', status: 'UNAVAILABLE' } });
  const fb = await rawStream({ model: FLASH, messages: [{ role: 'user', content: 'over' }], stream: true, fallbacks: ['openai/gpt-4.1-mini'] });
  t.ok(fb.text.endsWith('data: [DONE]\n\n'));
  t.match(fb.events.at(-1).extra.routing.attempts, [{ provider: 'google', status: 'failed', error: /503 The model is overloaded/ }, { provider: 'openai', status: 'succeeded' }]);
});

t.test('Gemini 400s come back as 400 with Gemini\'s message (no fallback)', async (t) => {
  await t.rejects(
    client.chat.completions.create({ model: 'google/gemini-2.5-pro', messages: [{ role: 'user', content: 'x' }], native_fields: { thinking_config: { thinking_budget: 0 } }, fallbacks: ['openai/gpt-4.1-mini'] } as any),
    { status: 400, message: /only works in thinking mode/, error: { type: 'invalid_request_error' } } as any,
  );
  t.equal(oai.requests.length, 0, 'the caller\'s fault: no fallback');
});

t.test('Vercel AI SDK (openai-compatible provider): generateText and streamText on a Gemini model', async (t) => {
  const gateway = createOpenAICompatible({ name: 'gateway', baseURL: gw.baseURL, apiKey: CLIENT_KEY, includeUsage: true });
  const g = await generateText({ model: gateway(FLASH), system: 'Be brief.', prompt: 'hello from the ai sdk' });
  t.equal(g.text, 'Echo: hello from the ai sdk');
  t.equal(g.finishReason, 'stop');
  t.ok((g.usage.inputTokens ?? 0) > 0);
  const s = streamText({ model: gateway(FLASH), prompt: 'streamed from the ai sdk' });
  t.equal(await s.text, 'Echo: streamed from the ai sdk');
  t.equal(await s.finishReason, 'stop');
  t.equal(lastGenerate().path, '/v1beta/models/gemini-2.5-flash:streamGenerateContent');
});

t.test('the mock refuses what Gemini refuses (so a translation bug fails a test)', async (t) => {
  const post = async (path: string, body: unknown, key: string | null = GEMINI_KEY) => {
    const res = await fetch(`${gem.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { 'x-goog-api-key': key } : {}) }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const gen = (body: unknown) => post('/v1beta/models/gemini-2.5-flash:generateContent', body);
  const user = [{ role: 'user', parts: [{ text: 'hi' }] }];
  const cases: [string, unknown, RegExp][] = [
    ['unknown top-level field', { contents: user, temperature: 1 }, /Unknown name "temperature": Cannot find field/],
    ['unknown nested field', { contents: user, generationConfig: { thinkingConfig: { effort: 'low' } } }, /Unknown name "effort" at 'generation_config.thinking_config': Cannot find field/],
    ['OpenAPI parameters with additionalProperties', { contents: user, tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'object', additionalProperties: false } }] }] }, /Unknown name "additionalProperties" at 'tools\[0\].function_declarations\[0\].parameters'/],
    ['role assistant', { contents: [{ role: 'assistant', parts: [{ text: 'x' }] }] }, /valid role: user, model/],
    ['empty text part', { contents: [{ role: 'user', parts: [{ text: '' }] }] }, /required oneof field 'data'/],
    ['no contents', { contents: [] }, /contents is not specified/],
    ['budget and level', { contents: user, generationConfig: { thinkingConfig: { thinkingBudget: 10, thinkingLevel: 'low' } } }, /only one of thinking budget and thinking level/],
    ['same field twice', { contents: user, generationConfig: { thinkingConfig: {}, thinking_config: {} } }, /Duplicate value for field "thinking_config"/],
    ['unnamed functionResponse', { contents: [...user, { role: 'user', parts: [{ functionResponse: { response: {} } }] }] }, /function_response.name: Name cannot be empty/],
    ['bytes that are not base64', { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/png', data: 'not base64!' } }] }] }, /Base64 decoding failed/],
    ['penalties on 2.5', { contents: user, generationConfig: { presencePenalty: 0.5 } }, /Penalty is not enabled/],
    ['unknown cache', { contents: user, cachedContent: 'cachedContents/nope' }, /CachedContent not found/],
  ];
  for (const [name, body, message] of cases) {
    const r = await gen(body);
    t.ok(r.status === 400 || r.status === 403, `${name}: refused`);
    t.match(r.body.error.message, message, name);
  }
  const bad = await post('/v1beta/models/gemini-2.5-flash:generateContent', { contents: user }, 'wrong');
  t.match(bad, { status: 400, body: { error: { status: 'INVALID_ARGUMENT', details: [{ reason: 'API_KEY_INVALID' }] } } });
  t.match(await post('/v1beta/models/gemini-2.5-flash:generateContent', { contents: user }, null), { status: 403, body: { error: { status: 'PERMISSION_DENIED' } } });
  t.match(await post('/v1beta/models/gemini-9:generateContent', { contents: user }), { status: 404, body: { error: { status: 'NOT_FOUND' } } });
  const cache = await post('/v1beta/cachedContents', { model: 'models/gemini-2.5-flash', systemInstruction: { parts: [{ text: 'x'.repeat(6000) }] }, ttl: '60s' });
  t.equal(cache.status, 200);
  t.match(cache.body, { name: /^cachedContents\//, model: 'models/gemini-2.5-flash', expireTime: String });
  const withSystem = await gen({ contents: user, cachedContent: cache.body.name, systemInstruction: { parts: [{ text: 'y' }] } });
  t.match(withSystem.body.error.message, /CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config/);
  t.equal((await gen({ contents: user, cachedContent: cache.body.name })).status, 200);
});

t.test('request mapping, unit level: pure, edge cases of caching, tools, web search, reasoning summary', async (t) => {
  const model = { id: FLASH, capabilities: { thinking: true }, max_output_tokens: 65536 } as unknown as ModelConfig;
  const map = (req: Partial<ChatRequest>) => {
    const notes: NormalizationEntry[] = [];
    const full = { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'hi' }], ...req } as ChatRequest;
    const frozen = structuredClone(full);
    const plan = toGemini(full, { model, note: (n) => notes.push(n) });
    t.same(full, frozen, 'the IR request is not mutated');
    return { plan, notes };
  };

  // The mark on the last message: that message still goes with the request.
  const last = map({ messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'doc' }, { role: 'user', content: 'q', cache_control: { type: 'ephemeral' } }] });
  t.same(last.plan.cache!.create.contents, [{ role: 'user', parts: [{ text: 'doc' }] }]);
  t.same(last.plan.cache!.body.contents, [{ role: 'user', parts: [{ text: 'q' }] }]);
  t.match(last.notes, [{ param: 'messages[2].cache_control', action: 'override' }]);

  // A system message after the prefix becomes user text in the cached variant only.
  const later = map({ messages: [{ role: 'user', content: 'doc', cache_control: { type: 'ephemeral', ttl: '60s' } }, { role: 'system', content: 'late rule' }, { role: 'user', content: 'q' }] });
  t.same(later.plan.body.systemInstruction, { parts: [{ text: 'late rule' }] }, 'uncached: system instruction');
  t.same(later.plan.cache!.body.contents, [{ role: 'user', parts: [{ text: 'late rule' }, { text: 'q' }] }], 'cached: user text');
  t.equal(later.plan.cache!.create.ttl, '60s');
  t.match(later.plan.cache!.notes, [{ param: 'messages[1]', action: 'rename' }]);
  t.same(later.notes, [], 'cached-only notes kept aside');

  // A client cache named in native_fields: no second cache.
  const own = map({ messages: [{ role: 'user', content: 'doc', cache_control: { type: 'ephemeral' } }, { role: 'user', content: 'q' }], native_fields: { cached_content: 'cachedContents/mine' } });
  t.notOk(own.plan.cache);
  t.equal(own.plan.body.cached_content, 'cachedContents/mine');

  // web_search -> googleSearch tool; native tools are added; reasoning_summary -> includeThoughts.
  const ws = map({ web_search: { enabled: true, options: { search_context_size: 'low' } }, tools: weather, native_fields: { tools: [{ codeExecution: {} }] }, reasoning_summary: 'auto' });
  t.same(ws.plan.body.tools!.map((x) => Object.keys(x)[0]), ['functionDeclarations', 'googleSearch', 'codeExecution']);
  t.same(ws.plan.body.generationConfig, { thinkingConfig: { includeThoughts: true } });
  t.match(ws.notes, [{ param: 'web_search.options', action: 'strip' }]);

  // Assistant history: text and calls in one model turn; arguments must be an object.
  const hist = map({ messages: [
    { role: 'user', content: 'q' },
    { role: 'assistant', content: 'let me check', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '' } }, { id: 'b', type: 'function', function: { name: 'g', arguments: '{"x":1}' } }] },
    { role: 'tool', tool_call_id: 'a', content: [{ type: 'text', text: 'one' }] },
    { role: 'tool', tool_call_id: 'b', content: '[1,2]' },
  ] as any });
  t.same(hist.plan.body.contents.slice(1), [
    { role: 'model', parts: [{ text: 'let me check' }, { functionCall: { name: 'f', args: {} } }, { functionCall: { name: 'g', args: { x: 1 } } }] },
    { role: 'user', parts: [{ functionResponse: { name: 'f', response: { content: 'one' } } }, { functionResponse: { name: 'g', response: { content: '[1,2]' } } }] },
  ], 'tool results merged into one user turn; non-object JSON wrapped');
  t.throws(() => map({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '[1]' } }] }] as any }), { status: 400, param: 'messages[1].tool_calls[0].function.arguments' } as any);
  t.throws(() => map({ messages: [{ role: 'system', content: 'only system' }] }), { status: 400, param: 'messages' } as any);

  // Gemini's OpenAI-compatible signature field is read too.
  const compat = map({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' }, extra_content: { google: { thought_signature: 'c2ln' } } }] }, { role: 'tool', tool_call_id: 'a', content: 'r' }] as any });
  t.equal(compat.plan.body.contents[1].parts![0].thoughtSignature, 'c2ln');

  t.same(traits('gemini-2.5-flash-lite').thinking, { kind: 'budget', min: 512, max: 24576, canDisable: true });
  t.same(traits('models/gemini-3-flash-preview').thinking, { kind: 'level', levels: ['minimal', 'low', 'medium', 'high'] });
  t.ok(traits('gemini-2.0-flash').penalties);
  t.equal(guessMime('https://www.youtube.com/watch?v=x'), 'video/mp4');
  t.equal(guessMime('https://e.com/a.PDF'), 'application/pdf');
  t.equal(apiBase('https://generativelanguage.googleapis.com/'), 'https://generativelanguage.googleapis.com/v1beta');
  t.equal(apiBase('https://proxy.example/gemini/v1beta'), 'https://proxy.example/gemini/v1beta');
  t.equal(parseDuration('34.4s'), 34400);
  t.equal(parseDuration('1m'), undefined);
  const pre = reclassify(new UpstreamError(400, { message: 'User location is not supported for the API use.', type: 'invalid_request_error', param: null, code: 'failed_precondition' }));
  t.equal((pre as UpstreamError).status, 403, 'FAILED_PRECONDITION is about the account: fallback');
});
