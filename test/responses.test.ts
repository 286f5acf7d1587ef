// POST /v1/responses (and GET/DELETE /v1/responses/{id}) through the gateway,
// driven by the official openai SDK (client.responses.create / .stream /
// .retrieve / .delete) against strict mocks:
// - OpenAI's Responses API (test/mocks/openai-responses.ts): the same-API path;
// - an OpenAI-compatible chat server, Anthropic and Gemini: translated to the
//   chat IR and back.
import t from 'tap';
import OpenAI from 'openai';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { startOpenAIMock, validateChat, chatReply, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { sse, type Handler } from './mocks/server.js';
import { startGateway, CLIENT_KEY, until } from './helpers/gateway.js';

 
type Any = any;

const OTHER_KEY = 'gw-test-other-client-key-987654';
const COMPAT_KEY = 'sk-test-compat-0123456789';

// An OpenAI-compatible server (vLLM / DeepSeek style): Chat Completions only.
// `deepseek-reasoner` answers with `reasoning_content` first (WIRE-FORMATS.md section 6).
const compatModels = new Set(['llama-3.3-70b', 'deepseek-reasoner']);
const compatChat: Handler = (req) => {
  if (req.method !== 'POST') return { status: 404, json: { error: { message: 'not found' } } };
  const bad = validateChat(req.body, compatModels);
  if (bad) return bad;
  const reply = chatReply(req.body, req.body.model);
  if (req.body.model !== 'deepseek-reasoner') return reply;
  if (reply.json) {
    (reply.json as Any).choices[0].message.reasoning_content = 'Let me think about it.';
    return reply;
  }
  const first = JSON.parse(reply.sse![0].slice('data: '.length));
  const piece = (text: string) => sse({ ...first, choices: [{ index: 0, delta: { reasoning_content: text }, logprobs: null, finish_reason: null }] });
  reply.sse!.splice(1, 0, piece('Let me '), piece('think about it.'));
  return reply;
};

const responsesMock = createResponsesMock();
const oai = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler } });
const compat = await startOpenAIMock({ key: COMPAT_KEY, models: [...compatModels], routes: { '/v1/chat/completions': compatChat } });
const anth = await startAnthropicMock();
const gem = await startGeminiMock();

const gw = await startGateway(
  `
providers:
  - { name: openai, family: openai, base_url: "${oai.url}/v1", api_key: ${OPENAI_KEY}, region: us-east, timeout_ms: 3000, retries: 0 }
  - { name: compat, family: openai-compatible, base_url: "${compat.url}/v1", api_key: ${COMPAT_KEY}, region: eu, timeout_ms: 3000, retries: 0 }
  - { name: anthropic, family: anthropic, base_url: "${anth.url}", api_key: ${ANTHROPIC_KEY}, region: us, timeout_ms: 3000, retries: 0 }
  - { name: google, family: google, base_url: "${gem.url}", api_key: ${GEMINI_KEY}, region: us, timeout_ms: 3000, retries: 0 }
routing: { max_retry_wait_ms: 200, failure_threshold: 1000 }
storage: { responses_db: ":memory:" }
models:
  - id: openai/gpt-4.1-mini
    capabilities: { web_search: true }
    context_window: 1047576
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true, reasoning_summary: true, web_search: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
  - id: openai/gpt-4.1-tiny
    context_window: 60
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: compat/llama
    deployments: [{ provider: compat, model: llama-3.3-70b }]
  - id: compat/reasoner
    capabilities: { thinking: true }
    deployments: [{ provider: compat, model: deepseek-reasoner }]
  - id: compat/tiny
    context_window: 60
    deployments: [{ provider: compat, model: llama-3.3-70b }]
  - id: anthropic/claude-sonnet-4-5
    capabilities: { thinking: true, web_search: true }
    max_output_tokens: 64000
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
  - id: google/gemini-2.5-flash
    capabilities: { thinking: true, web_search: true }
    deployments: [{ provider: google, model: gemini-2.5-flash }]
`,
  { GATEWAY_API_KEYS: `${CLIENT_KEY},${OTHER_KEY}` },
);
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
const other = new OpenAI({ apiKey: OTHER_KEY, baseURL: gw.baseURL, maxRetries: 0 });

t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), compat.close(), anth.close(), gem.close()]);
});
t.beforeEach(() => {
  oai.reset();
  compat.reset();
  anth.reset();
  gem.reset();
});

const upstream = (m: { requests: { path: string; body: Any }[] }, i = -1) => m.requests.at(i)!.body;
const weatherFlat = { type: 'function' as const, name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false };
const weatherNested = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

/** A response with ids and times replaced, to compare two shapes. */
function shape(r: Any): Any {
  return JSON.parse(
    JSON.stringify(r)
      .replace(/"(resp|msg|fc|rs|call|ws)_[A-Za-z0-9_-]+"/g, '"$1_X"')
      .replace(/"created_at":\d+/g, '"created_at":0')
      .replace(/"encrypted_content":"[^"]*"/g, '"encrypted_content":"E"')
      // Added client-side by the SDK's stream helper (ResponseStream -> maybeParseResponse).
      .replace(/,"(output_)?parsed":null/g, ''),
  );
}

/** Raw SSE frames of a streamed request: [{event, data}]. */
async function rawEvents(body: Record<string, unknown>): Promise<{ event: string; data: Any }[]> {
  const res = await fetch(`${gw.baseURL}/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  t.equal(res.status, 200);
  const text = await res.text();
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1] ?? '';
      const data = JSON.parse(/^data: (.*)$/m.exec(frame)![1]);
      return { event, data };
    });
}

function checkSequence(t: Any, events: { event: string; data: Any }[]) {
  events.forEach((e, i) => {
    if (e.event !== e.data.type) t.fail(`frame ${i}: event line '${e.event}' but type '${e.data.type}'`);
    if (e.data.sequence_number !== i) t.fail(`frame ${i}: sequence_number ${e.data.sequence_number}`);
  });
  t.pass(`${events.length} events, each with an event line matching its type and a rising sequence_number`);
}

t.test('plain, OpenAI native: same-API body, model patched, echo and usage', async (t) => {
  const r = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'hello there', instructions: 'Be brief.' });
  t.equal(r.object, 'response');
  t.match(r.id, /^resp_/);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.equal(r.status, 'completed');
  t.equal(r.output_text, 'Echo: hello there');
  t.equal(r.instructions, 'Be brief.');
  t.match(r.usage, { input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } });
  t.equal((r as Any).debug, undefined, 'no debug unless asked');
  const up = upstream(oai);
  t.equal(oai.requests.at(-1)!.path, '/v1/responses');
  t.same(up, { model: 'gpt-4.1-mini', input: 'hello there', instructions: 'Be brief.' }, 'body forwarded with only the model patched');
  t.equal(oai.requests.at(-1)!.headers.authorization, `Bearer ${OPENAI_KEY}`);
});

t.test('plain, translated (openai-compatible): IR request, Responses object back', async (t) => {
  const r: Any = await client.responses.create({
    model: 'compat/llama',
    instructions: 'Be brief.',
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello there' }, { type: 'input_image', image_url: 'https://example.com/cat.png', detail: 'low' }] }],
    temperature: 0.3,
    top_p: 0.9,
    max_output_tokens: 100,
    metadata: { app: 'test' },
    user: 'u-1',
    debug: ['routing', 'normalizations'],
  } as Any);
  t.equal(compat.requests.length, 1);
  const up = upstream(compat);
  t.same(up, {
    model: 'llama-3.3-70b',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'hello there' }, { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } }] },
    ],
    temperature: 0.3,
    top_p: 0.9,
    max_completion_tokens: 100,
    user: 'u-1',
  });
  t.match(r, {
    object: 'response',
    id: /^resp_[0-9a-f]{50}$/,
    model: 'compat/llama',
    status: 'completed',
    error: null,
    incomplete_details: null,
    instructions: 'Be brief.',
    max_output_tokens: 100,
    temperature: 0.3,
    top_p: 0.9,
    metadata: { app: 'test' },
    store: true,
    truncation: 'disabled',
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: true,
    previous_response_id: null,
    text: { format: { type: 'text' } },
    reasoning: { effort: null, summary: null },
  });
  t.equal(r.output.length, 1);
  t.match(r.output[0], { id: /^msg_/, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Echo: hello there', annotations: [] }] });
  t.equal(r.output_text, 'Echo: hello there');
  t.ok(r.usage.input_tokens > 0 && r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens);
  t.same(Object.keys(r.usage.input_tokens_details), ['cached_tokens']);
  t.same(r.usage.output_tokens_details, { reasoning_tokens: 0 });
  t.match(r.debug.routing, { requested: 'compat/llama', targets: ['compat/llama'], attempts: [{ provider: 'compat', region: 'eu', status: 'succeeded', model: 'compat/llama' }] });
  t.same(r.debug.normalizations, []);
});

t.test('streaming: the full event sequence, rising sequence numbers, finalResponse() equals the plain shape', async (t) => {
  for (const model of ['openai/gpt-4.1-mini', 'compat/llama', 'anthropic/claude-sonnet-4-5', 'google/gemini-2.5-flash']) {
    const events = await rawEvents({ model, input: 'stream me please', instructions: 'Answer.' });
    checkSequence(t, events);
    // Gemini signs its answer (thoughtSignature): a reasoning item carrying it comes last.
    const types = events.filter((e) => e.data.type !== 'response.output_text.delta' && e.data.item?.type !== 'reasoning').map((e) => e.data.type);
    t.same(types, ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed'], `${model}: event types`);
    const deltas = events.filter((e) => e.data.type === 'response.output_text.delta');
    t.ok(deltas.length >= 2, `${model}: text in several deltas`);
    t.equal(deltas.map((e) => e.data.delta).join(''), events.at(-1)!.data.response.output_text ?? events.at(-1)!.data.response.output[0].content[0].text);
    t.match(events[0].data.response, { status: 'in_progress', output: [], model });
    t.match(events.at(-1)!.data.response, { status: 'completed', model });

    const stream = client.responses.stream({ model, input: 'stream me please', instructions: 'Answer.' });
    const seen: number[] = [];
    for await (const e of stream) seen.push(e.sequence_number);
    const final = await stream.finalResponse();
    t.ok(seen.every((n, i) => n === i), `${model}: SDK sees rising sequence numbers`);
    const plain = await client.responses.create({ model, input: 'stream me please', instructions: 'Answer.' });
    const a = shape(final);
    const b = shape(plain);
    // Usage is the provider's own count; the native mock sizes it by the request, which differs by `stream`.
    delete a.usage;
    delete b.usage;
    t.same(a, b, `${model}: finalResponse() equals the non-streamed response`);
  }
});

t.test('function tool round trip: flat and nested tool shapes, native and translated, plain and streamed', async (t) => {
  for (const [model, m] of [['openai/gpt-4.1-mini', oai], ['compat/llama', compat], ['anthropic/claude-sonnet-4-5', anth], ['google/gemini-2.5-flash', gem]] as const) {
    for (const tools of [[weatherFlat], [weatherNested]]) {
      const input: Any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
      const r1: Any = await client.responses.create({ model, input, tools } as Any);
      const call = r1.output.find((o: Any) => o.type === 'function_call');
      t.match(call, { type: 'function_call', id: /^fc_/, name: 'get_weather', status: 'completed' }, `${model}: function_call item`);
      t.same(JSON.parse(call.arguments), { city: 'Paris' });
      t.same(r1.tools.map((x: Any) => [x.type, x.name]), [['function', 'get_weather']], 'tools echoed flat');
      if (model === 'openai/gpt-4.1-mini') t.same(upstream(oai).tools[0].name, 'get_weather', 'native upstream gets flat tools');
      const r2: Any = await client.responses.create({ model, input: [...input, ...r1.output, { type: 'function_call_output', call_id: call.call_id, output: '21C and sunny' }], tools } as Any);
      t.match(r2.output_text, /tool said 21C and sunny|21C and sunny/, `${model}: answer uses the tool output`);
      void m;
    }
    // Streamed: function_call_arguments events, the final item as in the plain call.
    const events = await rawEvents({ model, input: 'weather in Paris?', tools: [weatherFlat], tool_choice: { type: 'function', name: 'get_weather' } });
    checkSequence(t, events);
    const types = events.map((e) => e.data.type);
    t.ok(types.includes('response.function_call_arguments.delta') && types.includes('response.function_call_arguments.done'), `${model}: argument events`);
    const final = events.at(-1)!.data.response;
    const fc = final.output.find((o: Any) => o.type === 'function_call');
    t.same(JSON.parse(fc.arguments), { city: 'Paris' });
    const added = events.find((e) => e.data.type === 'response.output_item.added' && e.data.item.type === 'function_call')!.data.item;
    t.match(added, { arguments: '', status: 'in_progress', call_id: fc.call_id, name: 'get_weather' });
  }
  // Forced tool_choice in the nested shape reaches a chat upstream in the chat shape.
  await client.responses.create({ model: 'compat/llama', input: 'hi', tools: [weatherNested], tool_choice: { type: 'function', function: { name: 'get_weather' } } } as Any);
  t.same(upstream(compat).tool_choice, { type: 'function', function: { name: 'get_weather' } });
  t.same(upstream(compat).tools, [{ type: 'function', function: weatherNested.function }]);
  await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'hi', tools: [weatherNested], tool_choice: { type: 'function', function: { name: 'get_weather' } } } as Any);
  t.same(upstream(oai).tool_choice, { type: 'function', name: 'get_weather' }, 'native upstream gets the flat tool_choice');
});

t.test('item_reference: the Vercel AI SDK OpenAI provider runs a tool loop on every family; references resolve from the store, per key', async (t) => {
  // createOpenAI(...)(model) speaks the Responses API and, with store on (the
  // default), sends the earlier turn's output as { type: 'item_reference', id }.
  const weather = tool({
    description: 'Weather in a city',
    inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
    execute: async ({ city }) => `21C and sunny in ${city}`,
  });
  let referenced = 0;
  for (const [model, m] of [['openai/gpt-4.1-mini', oai], ['compat/llama', compat], ['anthropic/claude-sonnet-4-5', anth], ['google/gemini-2.5-flash', gem]] as const) {
    const seen: Any[] = [];
    const traced = createOpenAI({
      baseURL: gw.baseURL,
      apiKey: CLIENT_KEY,
      fetch: async (url, init) => {
        seen.push(JSON.parse(String(init?.body)));
        return fetch(url, init);
      },
    });
    const r = await generateText({ model: traced(model), prompt: 'What is the weather in Paris?', tools: { get_weather: weather }, stopWhen: stepCountIs(3), maxRetries: 0 });
    t.same(r.steps.map((x) => x.finishReason), ['tool-calls', 'stop'], `${model}: a tool call, then the answer`);
    t.match(r.text, /21C and sunny in Paris/, `${model}: the answer uses the tool output`);
    // The SDK refers to the earlier assistant message (and reasoning) by id; a function call goes inline.
    const refs = seen[1].input.filter((it: Any) => it.type === 'item_reference').length;
    if (r.steps[0].text) t.ok(refs > 0, `${model}: the SDK referred to the earlier assistant message`);
    const up = upstream(m);
    const text = JSON.stringify(up);
    t.notOk(text.includes('item_reference'), `${model}: the provider never sees a reference`);
    t.ok(text.includes('get_weather') && text.includes('21C and sunny in Paris'), `${model}: the provider got the call and its output`);
    if (r.steps[0].text) t.ok(text.includes(JSON.stringify(r.steps[0].text).slice(1, -1)), `${model}: and the referenced assistant text`);
    referenced += refs;
  }
  t.ok(referenced >= 2, 'references were exercised (Anthropic answers with text before its tool call, Gemini with a signed reasoning item)');

  // By hand: a reference without `type`, an unknown one, another key's, a deleted response's.
  const r1: Any = await client.responses.create({ model: 'compat/llama', input: 'Remember the word kiwi.' });
  const msg = r1.output.find((o: Any) => o.type === 'message');
  const r2: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: [{ role: 'user', content: 'Remember the word kiwi.' }, { id: msg.id }, { role: 'user', content: 'Which word?' }] } as Any);
  t.equal(r2.status, 'completed');
  t.same(upstream(anth).messages[1], { role: 'assistant', content: [{ type: 'text', text: 'Echo: Remember the word kiwi.' }] }, 'the referenced item, translated for Anthropic');
  const r3: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: [{ role: 'user', content: 'Remember the word kiwi.' }, { type: 'item_reference', id: msg.id }, { role: 'user', content: 'Which word?' }] } as Any);
  t.equal(r3.status, 'completed');
  t.match(upstream(oai).input[1], { type: 'message', role: 'assistant', id: msg.id, content: [{ type: 'output_text', text: 'Echo: Remember the word kiwi.' }] }, 'OpenAI gets the item itself, not a reference it could not resolve');
  const unknown: Any = await client.responses.create({ model: 'compat/llama', input: [{ role: 'user', content: 'x' }, { type: 'item_reference', id: 'msg_nope' }] } as Any).catch((x) => x);
  t.equal(unknown.status, 404);
  t.match(unknown.error, { type: 'not_found_error', param: 'input[1]', code: 'item_not_found', message: /msg_nope/ });
  const theirs: Any = await other.responses.create({ model: 'compat/llama', input: [{ type: 'item_reference', id: msg.id }] } as Any).catch((x) => x);
  t.equal(theirs.status, 404, "another key cannot reference this key's items");
  t.match(theirs.error, { param: 'input[0]', code: 'item_not_found' });
  await client.responses.delete(r1.id);
  const gone: Any = await client.responses.create({ model: 'compat/llama', input: [{ type: 'item_reference', id: msg.id }] } as Any).catch((x) => x);
  t.equal(gone.status, 404, 'a deleted response takes its items with it');
  const badRef: Any = await client.responses.create({ model: 'compat/llama', input: [{ type: 'item_reference' }] } as Any).catch((x) => x);
  t.equal(badRef.status, 400);
  t.match(badRef.error, { param: 'input[0].id', code: 'missing_required_parameter' });
});

t.test('web search: OpenAI passes the hosted tool through; a family without search is a 400 naming tools', async (t) => {
  const r: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'news today?', tools: [{ type: 'web_search_preview' }] });
  t.same(upstream(oai).tools, [{ type: 'web_search_preview' }]);
  t.same(r.output.map((o: Any) => o.type), ['web_search_call', 'message']);
  t.equal(r.output[1].content[0].annotations[0].type, 'url_citation');

  const e: Any = await client.responses.create({ model: 'compat/llama', input: 'news today?', tools: [{ type: 'web_search_preview' }] }).catch((x) => x);
  t.equal(e.status, 400);
  t.match(e.error, { type: 'invalid_request_error', param: 'tools[0]', code: 'unsupported_tool' });
  t.match(e.error.message, /compat\/llama.*web search/);
  t.equal(compat.requests.length, 0, 'no upstream call');

  await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: 'news today?', tools: [{ type: 'web_search', user_location: { type: 'approximate', country: 'FR' } }] } as Any);
  const tools = upstream(anth).tools;
  t.match(tools, [{ type: 'web_search_20250305', name: 'web_search' }], 'Anthropic gets its own search tool');
});

t.test('structured output: text.format json_schema (flat) maps to response_format', async (t) => {
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };
  const format = { type: 'json_schema' as const, name: 'answer', schema, strict: true };
  const r: Any = await client.responses.create({ model: 'compat/llama', input: 'capital of France?', text: { format } });
  t.same(upstream(compat).response_format, { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } });
  t.same(JSON.parse(r.output_text), { answer: 'capital of France?' });
  t.same(r.text, { format });
  const n: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'capital of France?', text: { format } });
  t.same(upstream(oai).text, { format }, 'native: text.format forwarded as is');
  t.same(JSON.parse(n.output_text), { answer: 'capital of France?' });
  await client.responses.create({ model: 'compat/llama', input: 'x', text: { format: { type: 'json_object' } } });
  t.same(upstream(compat).response_format, { type: 'json_object' });
  const g: Any = await client.responses.create({ model: 'google/gemini-2.5-flash', input: 'capital of France?', text: { format } });
  t.same(Object.keys(JSON.parse(g.output_text)), ['answer'], 'Gemini answers in the schema');
});

t.test('reasoning: effort mapped, reasoning items returned (and signed reasoning restored next turn)', async (t) => {
  // Native: reasoning passes, temperature stripped for a reasoning model (recorded 400 otherwise).
  const n: Any = await client.responses.create({ model: 'openai/gpt-5-mini', input: 'think', reasoning: { effort: 'high', summary: 'auto' }, temperature: 0.5, debug: ['normalizations'] } as Any);
  t.same(upstream(oai).reasoning, { effort: 'high', summary: 'auto' });
  t.notOk('temperature' in upstream(oai));
  t.match(n.debug.normalizations, [{ param: 'temperature', action: 'strip', before: 0.5 }]);
  t.match(n.output[0], { type: 'reasoning', summary: [{ type: 'summary_text' }] });
  t.equal(n.usage.output_tokens_details.reasoning_tokens, 64);
  // Non-reasoning OpenAI model: `reasoning` stripped with a note instead of OpenAI's 400.
  const s: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'x', reasoning: { effort: 'low' }, debug: ['normalizations'] } as Any);
  t.notOk('reasoning' in upstream(oai));
  t.match(s.debug.normalizations, [{ param: 'reasoning', action: 'strip' }]);
  // extra.normalize:false: the provider's own error comes back.
  const e: Any = await client.responses.create({ model: 'openai/gpt-5-mini', input: 'x', temperature: 0.5, extra: { normalize: false } } as Any).catch((x) => x);
  t.equal(e.status, 400);
  t.match(e.error, { param: 'temperature', message: "Unsupported parameter: 'temperature' is not supported with this model." });

  // Translated (DeepSeek style): effort -> reasoning_effort, reasoning_content -> reasoning item.
  const d: Any = await client.responses.create({ model: 'compat/reasoner', input: 'think', reasoning: { effort: 'high', summary: 'detailed' }, debug: ['normalizations'] } as Any);
  t.equal(upstream(compat).reasoning_effort, 'high');
  t.match(d.debug.normalizations, [{ param: 'reasoning.summary', action: 'strip' }], 'no summary mode on that model');
  t.same(d.output.map((o: Any) => o.type), ['reasoning', 'message']);
  t.match(d.output[0], { id: /^rs_/, summary: [{ type: 'summary_text', text: 'Let me think about it.' }], encrypted_content: /^mgw1:/ });
  const ev = await rawEvents({ model: 'compat/reasoner', input: 'think' });
  checkSequence(t, ev);
  const types = ev.map((e) => e.data.type);
  t.same(types.slice(0, 6), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.reasoning_summary_part.added', 'response.reasoning_summary_text.delta', 'response.reasoning_summary_text.delta']);
  t.ok(types.indexOf('response.reasoning_summary_part.done') < types.indexOf('response.content_part.added'), 'thinking ends when the answer starts');
  t.equal(ev.find((e) => e.data.type === 'response.reasoning_summary_text.done')!.data.text, 'Let me think about it.');

  // Anthropic: effort -> thinking budget; the signed thinking block comes back on the next turn
  // (the mock verifies the signature), by echoing output items and by previous_response_id.
  const tools = [weatherFlat];
  const input: Any[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const a1: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input, tools, reasoning: { effort: 'medium' } });
  t.same(upstream(anth).thinking, { type: 'enabled', budget_tokens: 4096 });
  t.same(a1.output.map((o: Any) => o.type), ['reasoning', 'message', 'function_call'].filter((x) => a1.output.some((o: Any) => o.type === x)));
  t.equal(a1.output[0].type, 'reasoning');
  t.match(a1.output[0].summary[0].text, /^The user wrote/);
  const call = a1.output.find((o: Any) => o.type === 'function_call');
  const a2: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: [...input, ...a1.output, { type: 'function_call_output', call_id: call.call_id, output: '21C' }], tools, reasoning: { effort: 'medium' } });
  t.equal(a2.status, 'completed');
  const assistant = upstream(anth).messages[1];
  t.equal(assistant.content[0].type, 'thinking', 'signed thinking block restored first');
  t.equal(assistant.content[0].thinking, a1.output[0].summary[0].text);
  const a3: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', previous_response_id: a1.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: '21C' }], tools, reasoning: { effort: 'medium' } });
  t.equal(a3.status, 'completed');
  t.equal(upstream(anth).messages[1].content[0].type, 'thinking', 'restored through previous_response_id too');
  // Tampered reasoning is refused by name.
  const bad = { ...a1.output[0], encrypted_content: 'mgw1:not-json' };
  const e2: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', input: [...input, bad] } as Any).catch((x) => x);
  t.equal(e2.status, 400);
  t.equal(e2.error.param, 'input[1].encrypted_content');

  // Gemini: the thought signature (sent late in the stream) rides in the reasoning item, streamed or not.
  const g1: Any = await client.responses.create({ model: 'google/gemini-2.5-flash', input, tools, reasoning: { effort: 'low', summary: 'auto' } });
  t.ok(g1.output.some((o: Any) => o.type === 'reasoning' && o.encrypted_content.startsWith('mgw1:')));
  const gcall = g1.output.find((o: Any) => o.type === 'function_call');
  const g2: Any = await client.responses.create({ model: 'google/gemini-2.5-flash', previous_response_id: g1.id, input: [{ type: 'function_call_output', call_id: gcall.call_id, output: '21C' }], tools });
  t.equal(g2.status, 'completed');
  const parts = upstream(gem).contents[1].parts;
  t.ok(parts.some((p: Any) => p.functionCall && p.thoughtSignature), 'Gemini gets its signature back on the function call');
  const gs = client.responses.stream({ model: 'google/gemini-2.5-flash', input: 'hello', reasoning: { effort: 'low', summary: 'auto' } });
  const gfinal: Any = await gs.finalResponse();
  const gplain: Any = await client.responses.create({ model: 'google/gemini-2.5-flash', input: 'hello', reasoning: { effort: 'low', summary: 'auto' } });
  t.same(gfinal.output.map((o: Any) => o.type), gplain.output.map((o: Any) => o.type), 'same items streamed or not');
  t.ok(gfinal.output.find((o: Any) => o.type === 'reasoning').encrypted_content.length > 10);
});

t.test('stored chain across providers: turn 1 native, turn 2 translated with the full history, turn 3 native again', async (t) => {
  const r1: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', instructions: 'Turn one rules.', input: 'My name is Ada.' });
  const r2: Any = await client.responses.create({ model: 'compat/llama', previous_response_id: r1.id, input: 'What is my name?' });
  t.same(upstream(compat).messages, [
    { role: 'user', content: 'My name is Ada.' },
    { role: 'assistant', content: 'Echo: My name is Ada.' },
    { role: 'user', content: 'What is my name?' },
  ], 'the second upstream received the whole conversation (instructions are per turn, as on OpenAI)');
  t.equal(r2.previous_response_id, r1.id);
  t.equal(r2.output_text, 'Echo: What is my name?');

  const r3: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', previous_response_id: r2.id, input: [{ role: 'user', content: 'And again?' }] });
  const up = upstream(oai);
  t.notOk('previous_response_id' in up, "the gateway's id is not sent to OpenAI");
  t.same(up.input.map((i: Any) => [i.type, i.role]), [['message', 'user'], ['message', 'assistant'], ['message', 'user'], ['message', 'assistant'], ['message', 'user']]);
  t.equal(up.input[3].content[0].text, 'Echo: What is my name?');
  t.equal(r3.previous_response_id, r2.id, 'the echo names the id the client sent');

  // Streamed turns store too, and chain.
  const s = client.responses.stream({ model: 'compat/llama', previous_response_id: r3.id, input: 'Last one.' });
  const f: Any = await s.finalResponse();
  const r5: Any = await client.responses.create({ model: 'anthropic/claude-sonnet-4-5', previous_response_id: f.id, input: 'Summarise.' });
  t.equal(r5.status, 'completed');
  const msgs = upstream(anth).messages;
  t.equal(msgs.length, 9, 'Anthropic receives all four earlier turns plus the new one');

  // store:false is not stored; an unknown id is a 404 naming previous_response_id.
  const nr: Any = await client.responses.create({ model: 'compat/llama', input: 'forget me', store: false });
  t.equal(nr.store, false);
  const e: Any = await client.responses.create({ model: 'compat/llama', previous_response_id: nr.id, input: 'x' }).catch((x) => x);
  t.equal(e.status, 404);
  t.match(e.error, { type: 'not_found_error', param: 'previous_response_id', code: 'previous_response_not_found' });
});

t.test('retrieve and delete, scoped to the key that created the response', async (t) => {
  const r: Any = await client.responses.create({ model: 'compat/llama', input: 'keep me', debug: ['routing'] } as Any);
  const got: Any = await client.responses.retrieve(r.id);
  const { debug: _d, ...withoutDebug } = r;
  t.same(got, withoutDebug, 'retrieve returns the stored response (debug is per request)');
  const n: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'native keep' });
  t.equal((await client.responses.retrieve(n.id)).output_text, 'Echo: native keep');

  const e1: Any = await other.responses.retrieve(r.id).catch((x) => x);
  t.equal(e1.status, 404, 'another key: 404 as for an unknown id');
  t.match(e1.error, { type: 'not_found_error', code: 'response_not_found' });
  const e2: Any = await other.responses.delete(r.id).catch((x) => x);
  t.equal(e2.status, 404);
  const e3: Any = await other.responses.create({ model: 'compat/llama', previous_response_id: r.id, input: 'x' }).catch((x) => x);
  t.equal(e3.status, 404, 'another key cannot continue the conversation');

  const res = await fetch(`${gw.baseURL}/responses/${r.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${CLIENT_KEY}` } });
  t.equal(res.status, 200);
  t.same(await res.json(), { id: r.id, object: 'response.deleted', deleted: true });
  const e4: Any = await client.responses.retrieve(r.id).catch((x) => x);
  t.equal(e4.status, 404);
  await client.responses.delete(n.id);
  const e5: Any = await client.responses.delete(n.id).catch((x) => x);
  t.equal(e5.status, 404, 'deleting twice: 404');

  const unauth = await fetch(`${gw.baseURL}/responses/${n.id}`);
  t.equal(unauth.status, 401, 'auth required on GET');
});

t.test('truncation disabled: too long is a 400 before any upstream call (o200k for OpenAI, estimate for others)', async (t) => {
  const long = 'word '.repeat(80);
  for (const [model, m] of [['compat/tiny', compat], ['openai/gpt-4.1-tiny', oai]] as const) {
    const e: Any = await client.responses.create({ model, input: long }).catch((x) => x);
    t.equal(e.status, 400, model);
    t.match(e.error, { type: 'invalid_request_error', code: 'context_length_exceeded', param: 'input' });
    t.match(e.error.message, new RegExp(`${model}.*context window of 60 tokens`));
    t.equal(m.requests.length, 0, `${model}: no upstream call`);
  }
  // 'word ' x 50 is 51 o200k tokens (+4 framing: fits 60) but 250 / 4 = 63 estimated (too long).
  const ok: Any = await client.responses.create({ model: 'openai/gpt-4.1-tiny', input: 'word '.repeat(50) });
  t.equal(ok.status, 'completed', 'o200k counts 50 words as 51 tokens: fits');
  const e: Any = await client.responses.create({ model: 'compat/tiny', input: 'word '.repeat(50) }).catch((x) => x);
  t.equal(e.status, 400, 'the chars/4 estimate says 63 + framing: too long for compat/tiny');
});

t.test('truncation auto: middle items dropped, first and latest turns kept, call/output pairs intact', async (t) => {
  const pad = 'filler text here '.repeat(3);
  const input: Any[] = [
    { role: 'developer', content: 'Be nice.' },
    { role: 'user', content: 'first question' },
    { role: 'assistant', content: `old answer ${pad}` },
    { role: 'user', content: `middle question ${pad}` },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: `sunny ${pad}` },
    { role: 'assistant', content: `middle answer ${pad}` },
    { role: 'user', content: 'latest question' },
  ];
  const r: Any = await client.responses.create({ model: 'compat/tiny', input, truncation: 'auto', max_output_tokens: 5, tools: [], debug: ['normalizations'] } as Any);
  t.equal(r.status, 'completed');
  const msgs = upstream(compat).messages;
  t.same(msgs[0], { role: 'developer', content: 'Be nice.' });
  t.same(msgs[1], { role: 'user', content: 'first question' });
  t.same(msgs.at(-1), { role: 'user', content: 'latest question' });
  t.ok(msgs.length < input.length, `dropped some (${msgs.length} of ${input.length})`);
  const hasCall = msgs.some((m: Any) => m.tool_calls);
  const hasOutput = msgs.some((m: Any) => m.role === 'tool');
  t.equal(hasCall, hasOutput, 'a function call and its output stay together');
  const note = r.debug.normalizations.find((n: Any) => n.param === 'input');
  t.match(note, { param: 'input', action: 'strip', before: input.length, after: Number, reason: /truncation 'auto'/ });
  t.equal(note.after, msgs.length);
  t.equal(r.truncation, 'auto');

  // Native: the shortened list goes out as `input`, counted with o200k.
  const n: Any = await client.responses.create({ model: 'openai/gpt-4.1-tiny', input, truncation: 'auto', debug: ['normalizations'] } as Any);
  t.equal(n.status, 'completed');
  const up = upstream(oai);
  t.ok(up.input.length < input.length);
  t.equal(up.truncation, 'auto');
  t.match(n.debug.normalizations, [{ param: 'input', action: 'strip', before: input.length }]);

  // Even the protected items do not fit: still a 400.
  const e: Any = await client.responses.create({ model: 'compat/tiny', input: [{ role: 'user', content: 'word '.repeat(200) }], truncation: 'auto' }).catch((x) => x);
  t.equal(e.status, 400);
  t.equal(e.error.code, 'context_length_exceeded');
});

t.test('a stream that breaks mid-way ends with an error event then response.failed, never completed', async (t) => {
  for (const [model, m] of [['compat/llama', compat], ['openai/gpt-4.1-mini', oai]] as const) {
    m.fail({ cutAfterEvents: 4 });
    const events = await rawEvents({ model, input: 'this will break in the middle of the stream' });
    checkSequence(t, events);
    const types = events.map((e) => e.data.type);
    t.same(types.slice(-2), ['error', 'response.failed'], `${model}: error then response.failed`);
    t.notOk(types.includes('response.completed'));
    t.match(events.at(-2)!.data, { code: 'upstream_stream_error', message: /stream broke/ });
    // The response's error code is one OpenAI's schema allows; the gateway's detail is in the message.
    t.match(events.at(-1)!.data.response, { status: 'failed', model, error: { code: 'server_error', message: /stream broke.*\(upstream_stream_error\)/ } });
    const e: Any = await client.responses.retrieve(events.at(-1)!.data.response.id).catch((x) => x);
    t.equal(e.status, 404, 'a failed response is not stored');
    // The SDK's stream helper rejects with the error event, as it does with OpenAI's own.
    m.fail({ cutAfterEvents: 4 });
    const s = client.responses.stream({ model, input: 'break again please now' });
    const err: Any = await s.finalResponse().catch((x) => x);
    t.match(err, { type: 'error', code: 'upstream_stream_error' });
  }
});

t.test("response.failed carries an error code from OpenAI's schema, the provider's own in the message", async (t) => {
  // A provider's mid-stream rate limit, overload and refusal of the prompt.
  const cases: [string, () => void, string, RegExp][] = [
    ['google/gemini-2.5-flash', () => gem.failStream({ afterEvents: 1, error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } }), 'rate_limit_exceeded', /exhausted/],
    ['anthropic/claude-sonnet-4-5', () => anth.streamError({ afterEvents: 3, type: 'overloaded_error', message: 'Overloaded' }), 'server_error', /Overloaded/],
    ['anthropic/claude-sonnet-4-5', () => anth.streamError({ afterEvents: 3, type: 'invalid_request_error', message: 'Output blocked by content filtering policy' }), 'invalid_prompt', /content filtering/],
  ];
  for (const [model, fail, code, message] of cases) {
    fail();
    const s = client.responses.stream({ model, input: 'tell me a long story about the sea' });
    const seen: Any[] = [];
    s.on('event', (e) => seen.push(e));
    const err: Any = await s.finalResponse().catch((x) => x);
    t.equal(err?.type, 'error', `${model}: the SDK raises the error event`);
    const failed = seen.find((e) => e.type === 'response.failed') ?? (await rawFailed(model, fail));
    t.match(failed.response.error, { code, message }, `${model}: ${code}`);
  }
});

/** The response.failed event of a raw stream (the SDK stops at the error event before it). */
async function rawFailed(model: string, fail: () => void): Promise<Any> {
  fail();
  const events = await rawEvents({ model, input: 'tell me a long story about the sea' });
  return events.at(-1)!.data;
}

t.test('fallbacks across families, stop via chat on OpenAI, and debug on the terminal event', async (t) => {
  compat.fail({ status: 503 });
  const r: Any = await client.responses.create({ model: 'compat/llama', input: 'fall back please', fallbacks: ['openai/gpt-4.1-mini'], debug: ['routing'] } as Any);
  t.equal(r.model, 'openai/gpt-4.1-mini');
  t.match(r.debug.routing.attempts, [{ provider: 'compat', status: 'failed', model: 'compat/llama' }, { provider: 'openai', status: 'succeeded', model: 'openai/gpt-4.1-mini' }]);
  t.equal(oai.requests.at(-1)!.path, '/v1/responses', 'the fallback target took the native path');

  compat.fail({ status: 500 });
  const events = await rawEvents({ model: 'compat/llama', input: 'fall back streaming', extra: { fallbacks: ['anthropic/claude-sonnet-4-5'], debug: ['routing'] } });
  const last = events.at(-1)!.data;
  t.equal(last.type, 'response.completed');
  t.equal(last.response.model, 'anthropic/claude-sonnet-4-5');
  t.equal(last.response.debug.routing.attempts.length, 2);
  t.notOk(events.slice(0, -1).some((e) => e.data.response?.debug), 'debug only on the terminal event');

  const nd = await rawEvents({ model: 'openai/gpt-4.1-mini', input: 'native debug', debug: ['routing'] });
  t.match(nd.at(-1)!.data.response.debug.routing.attempts, [{ provider: 'openai', status: 'succeeded' }]);
  t.equal(nd.at(-1)!.data.response.model, 'openai/gpt-4.1-mini');

  // OpenAI's Responses API has no `stop`: such a request goes through its chat API.
  const s: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'stop here', stop: ['.'] } as Any);
  t.equal(oai.requests.at(-1)!.path, '/v1/chat/completions');
  t.same(upstream(oai).stop, ['.']);
  t.equal(s.output_text, 'Echo: stop here');
});

t.test('validation: every field named in a 400', async (t) => {
  const cases: [Record<string, unknown>, string, RegExp?][] = [
    [{ input: 'x' }, 'model'],
    [{ model: 'compat/llama' }, 'input'],
    [{ model: 'compat/llama', input: [] }, 'input'],
    [{ model: 'compat/llama', input: 'x', temperature: 3 }, 'temperature', /at most 2/],
    [{ model: 'compat/llama', input: 'x', top_p: -1 }, 'top_p'],
    [{ model: 'compat/llama', input: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /at most 4/],
    [{ model: 'compat/llama', input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
    [{ model: 'compat/llama', input: [{ type: 'computer_call_output', call_id: 'x' }] }, 'input[0].type', /'message', 'function_call'.*'item_reference'/],
    [{ model: 'compat/llama', input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
    [{ model: 'compat/llama', input: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] }, 'input[0].content[0].type'],
    [{ model: 'compat/llama', input: [{ role: 'user', content: [{ type: 'input_image' }] }] }, 'input[0].content[0].image_url', /image_url/],
    [{ model: 'compat/llama', input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'input[0].arguments'],
    [{ model: 'compat/llama', input: 'x', tools: [{ type: 'function', function: { description: 'no name' } }] }, 'tools[0].function.name'],
    [{ model: 'compat/llama', input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
    [{ model: 'compat/llama', input: 'x', tools: [{ type: 'file_search' }] }, 'tools[0].type'],
    [{ model: 'compat/llama', input: 'x', tools: [weatherFlat], tool_choice: { type: 'function', name: 'other' } }, 'tool_choice'],
    [{ model: 'compat/llama', input: 'x', text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name'],
    [{ model: 'compat/llama', input: 'x', reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
    [{ model: 'compat/llama', input: 'x', truncation: 'middle' }, 'truncation'],
    [{ model: 'compat/llama', input: 'x', stream_options: { include_obfuscation: false } }, 'stream_options'],
    [{ model: 'compat/llama', input: 'x', background: true }, 'background'],
    [{ model: 'compat/llama', input: 'x', metadata: { a: 1 } }, 'metadata.a'],
    [{ model: 'compat/llama', input: 'x', debug: ['everything'] }, 'debug[0]'],
  ];
  for (const [body, param, message] of cases) {
    const res = await fetch(`${gw.baseURL}/responses`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const j: Any = await res.json();
    t.equal(res.status, 400, `${JSON.stringify(body)} -> 400`);
    t.equal(j.error.param, param, `param ${param}`);
    t.equal(j.error.type, 'invalid_request_error');
    if (message) t.match(j.error.message, message);
  }
  t.equal(compat.requests.length + oai.requests.length, 0, 'nothing reached a provider');
  const m: Any = await client.responses.create({ model: 'compat/nope', input: 'x' }).catch((x) => x);
  t.equal(m.status, 404);
  t.equal(m.error.code, 'model_not_found');
  // Fields the chat format has no place for are stripped with a note on translated targets.
  const r: Any = await client.responses.create({ model: 'compat/llama', input: 'x', top_logprobs: 2, text: { verbosity: 'low' }, debug: ['normalizations'] } as Any);
  t.same(r.debug.normalizations.map((n: Any) => n.param).sort(), ['text.verbosity', 'top_logprobs']);
});

t.test('native streams are stored too; native_fields reach OpenAI; usage in the access log; file inputs only where they can go', async (t) => {
  const events = await rawEvents({ model: 'openai/gpt-4.1-mini', input: 'streamed and stored', native_fields: { prompt_cache_key: 'pk-1' } });
  t.equal(upstream(oai).prompt_cache_key, 'pk-1', 'native_fields merged at the top level');
  t.notOk('native_fields' in upstream(oai));
  const id = events.at(-1)!.data.response.id;
  const got: Any = await client.responses.retrieve(id);
  t.equal(got.output_text, 'Echo: streamed and stored');
  t.equal(got.model, 'openai/gpt-4.1-mini');
  const next: Any = await client.responses.create({ model: 'compat/llama', previous_response_id: id, input: 'next' });
  t.equal(upstream(compat).messages[1].content, 'Echo: streamed and stored');
  t.equal(next.previous_response_id, id);

  await client.responses.create({ model: 'compat/llama', input: 'count me' }, { headers: { 'x-request-id': 'resp-usage-1', 'x-gateway-user-id': 'u-9' } });
  await until(() => gw.logs.some((l) => l.request_id === 'resp-usage-1'));
  const line = gw.logs.find((l) => l.request_id === 'resp-usage-1');
  t.match(line, { path: '/v1/responses', status: 200, model: 'compat/llama', provider: 'compat', user_id: 'u-9', usage: { input_tokens: Number, output_tokens: Number, cached_input_tokens: Number } });

  const file = { role: 'user', content: [{ type: 'input_image', file_id: 'file-abc' }] };
  const e: Any = await client.responses.create({ model: 'compat/llama', input: [file] } as Any).catch((x) => x);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'input[0].content[0].file_id');
  t.match(e.error.message, /OpenAI-family model/);
  await client.responses.create({ model: 'openai/gpt-4.1-mini', input: [file] } as Any);
  t.same(upstream(oai).input, [file], 'native: OpenAI resolves its own file ids');
});

t.test('incomplete: the output limit gives status incomplete and a response.incomplete terminal event', async (t) => {
  const g: Any = await client.responses.create({ model: 'google/gemini-2.5-flash', input: 'one two three four five six', max_output_tokens: 2 });
  t.match(g, { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  t.equal(g.output.find((o: Any) => o.type === 'message').status, 'incomplete');
  const ev = await rawEvents({ model: 'google/gemini-2.5-flash', input: 'one two three four five six', max_output_tokens: 2 });
  checkSequence(t, ev);
  t.equal(ev.at(-1)!.data.type, 'response.incomplete');
  t.match(ev.at(-1)!.data.response, { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });

  const long = 'many words '.repeat(20);
  const n: Any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: long, max_output_tokens: 16 });
  t.match(n, { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  const nev = await rawEvents({ model: 'openai/gpt-4.1-mini', input: long, max_output_tokens: 16 });
  t.equal(nev.at(-1)!.data.type, 'response.incomplete', 'native terminal event passed through');
  const kept: Any = await client.responses.retrieve(nev.at(-1)!.data.response.id);
  t.equal(kept.status, 'incomplete', 'incomplete responses are stored');
});
