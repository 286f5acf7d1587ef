// Validation of every chat field and limit (spec 4.2 and 8), reasoning-model
// normalization with its debug entries, deprecations, and extra.normalize:false.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, CLIENT_KEY } from './helpers/gateway.js';

const mock = await startOpenAIMock();
const gw = await startGateway(openAIConfig(mock.url));
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});

async function post(body: Record<string, unknown>) {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}

const base = { model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] };

// [description, body patch, expected param, message fragment]
const cases: [string, Record<string, unknown>, string, RegExp][] = [
  ['missing model', { model: undefined }, 'model', /Missing required parameter/],
  ['missing messages', { messages: undefined }, 'messages', /Missing required/],
  ['empty messages', { messages: [] }, 'messages', /at least one/],
  ['temperature > 2', { temperature: 2.5 }, 'temperature', /at most 2/],
  ['temperature < 0', { temperature: -0.1 }, 'temperature', /at least 0/],
  ['temperature wrong type', { temperature: 'hot' }, 'temperature', /number/],
  ['top_p > 1', { top_p: 1.5 }, 'top_p', /at most 1/],
  ['frequency_penalty < -2', { frequency_penalty: -3 }, 'frequency_penalty', /at least -2/],
  ['presence_penalty > 2', { presence_penalty: 2.1 }, 'presence_penalty', /at most 2/],
  ['n = 0', { n: 0 }, 'n', /at least 1/],
  ['n = 129', { n: 129 }, 'n', /at most 128/],
  ['n not integer', { n: 1.5 }, 'n', /integer/],
  ['n > 1 with stream', { n: 2, stream: true }, 'n', /stream/],
  ['stream_options without stream', { stream_options: { include_usage: true } }, 'stream_options', /only allowed when 'stream' is true/],
  ['top_logprobs without logprobs', { top_logprobs: 3 }, 'top_logprobs', /requires 'logprobs'/],
  ['top_logprobs > 20', { logprobs: true, top_logprobs: 21 }, 'top_logprobs', /at most 20/],
  ['5 stop sequences', { stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /at most 4/],
  ['stop wrong type', { stop: 5 }, 'stop', /string/],
  ['17 metadata pairs', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata', /at most 16/],
  ['metadata key > 64', { metadata: { ['k'.repeat(65)]: 'v' } }, `metadata.${'k'.repeat(65)}`, /64/],
  ['metadata value > 512', { metadata: { k: 'v'.repeat(513) } }, 'metadata.k', /512/],
  ['logit_bias > 100', { logit_bias: { '50256': 101 } }, 'logit_bias.50256', /at most 100/],
  ['logit_bias < -100', { logit_bias: { '50256': -101 } }, 'logit_bias.50256', /at least -100/],
  ['seed not integer', { seed: 1.2 }, 'seed', /integer/],
  ['max_completion_tokens 0', { max_completion_tokens: 0 }, 'max_completion_tokens', /at least 1/],
  ['bad service_tier', { service_tier: 'turbo' }, 'service_tier', /'auto', 'default', 'flex'/],
  ['bad reasoning_effort', { reasoning_effort: 'extreme' }, 'reasoning_effort', /'none'/],
  ['bad role', { messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role', /one of/],
  ['user content wrong type', { messages: [{ role: 'user', content: 5 }] }, 'messages[0].content', /string or an array/],
  ['bad content part', { messages: [{ role: 'user', content: [{ type: 'video', url: 'x' }] }] }, 'messages[0].content[0].type', /text' or 'image_url'/],
  ['bad image detail', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'ultra' } }] }] }, 'messages[0].content[0].image_url.detail', /'auto'/],
  ['tool_calls on a user message', { messages: [{ role: 'user', content: 'x', tool_calls: [] }] }, 'messages[0].tool_calls', /tool_calls' is not allowed on a user message/],
  ['tool message without tool_call_id', { messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id', /Missing required/],
  ['tool_call_id on assistant', { messages: [{ role: 'assistant', content: 'x', tool_call_id: 'c' }] }, 'messages[0].tool_call_id', /tool_call_id' is not allowed on an assistant message/],
  ['reasoning_content on user', { messages: [{ role: 'user', content: 'x', reasoning_content: 'r' }] }, 'messages[0].reasoning_content', /reasoning_content/],
  ['tool_calls on a tool message', { messages: [{ role: 'tool', content: 'x', tool_call_id: 'c', tool_calls: [] }] }, 'messages[0].tool_calls', /not allowed on a tool message/],
  ['tool_call_id on a system message, second message', { messages: [{ role: 'user', content: 'x' }, { role: 'system', content: 'x', tool_call_id: null }] }, 'messages[1].tool_call_id', /not allowed on a system message/],
  ['function_call on an assistant message', { messages: [{ role: 'assistant', content: 'x', function_call: { name: 'f', arguments: '{}' } }] }, 'messages[0].function_call', /send 'tool_calls'/],
  ['assistant without content or tool_calls', { messages: [{ role: 'assistant' }] }, 'messages[0].content', /needs 'content' or 'tool_calls'/],
  // Maps and objects: an array (or another type) is refused by name, never read as {} (issue 15).
  ['metadata as an array', { metadata: [] }, 'metadata', /object of string values/],
  ['metadata as a non-empty array', { metadata: ['a'] }, 'metadata', /object of string values/],
  ['logit_bias as an array', { logit_bias: [] }, 'logit_bias', /map token ids/],
  ['logit_bias as an array of numbers', { logit_bias: [5] }, 'logit_bias', /map token ids/],
  ['stream_options as an array', { stream: true, stream_options: [] }, 'stream_options', /must be an object/],
  ['native_fields as an array', { native_fields: [1] }, 'native_fields', /must be an object/],
  ['extra as an array', { extra: [] }, 'extra', /must be an object/],
  ['extra as a string', { extra: 'debug' }, 'extra', /must be an object/],
  ['tool parameters as an array', { tools: [{ type: 'function', function: { name: 'f', parameters: [] } }] }, 'tools[0].function.parameters', /JSON Schema object/],
  ['tool function as an array', { tools: [{ type: 'function', function: [] }] }, 'tools[0].function', /must be an object/],
  ['json_schema.schema as an array', { response_format: { type: 'json_schema', json_schema: { name: 'n', schema: [] } } }, 'response_format.json_schema.schema', /must be an object/],
  ['image_url as an array', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: [] }] }] }, 'messages[0].content[0].image_url', /must be an object/],
  ['a message as an array', { messages: [[]] }, 'messages[0].role', /Missing required parameter/],
  ['cache_control as an array', { messages: [{ role: 'user', content: 'x', cache_control: [] }] }, 'messages[0].cache_control', /must be an object/],
  ['non-function tool', { tools: [{ type: 'retrieval' }] }, 'tools[0].type', /function/],
  ['tool without name', { tools: [{ type: 'function', function: {} }] }, 'tools[0].function.name', /Missing/],
  ['tool_choice names an unknown function', { tools: [{ type: 'function', function: { name: 'a' } }], tool_choice: { type: 'function', function: { name: 'b' } } }, 'tool_choice', /not in 'tools'/],
  ['bad tool_choice', { tool_choice: 'always' }, 'tool_choice', /'none', 'auto', 'required'/],
  ['bad response_format', { response_format: { type: 'yaml' } }, 'response_format.type', /json_schema/],
  ['json_schema without name', { response_format: { type: 'json_schema', json_schema: { schema: {} } } }, 'response_format.json_schema.name', /Missing/],
  ['deprecated functions', { functions: [{ name: 'f' }] }, 'functions', /send 'tools'/],
  ['deprecated function_call', { function_call: 'auto' }, 'function_call', /send 'tool_choice'/],
  ['bad cache_control', { messages: [{ role: 'user', content: 'x', cache_control: { type: 'forever' } }] }, 'messages[0].cache_control.type', /ephemeral/],
  ['bad cache_control ttl', { messages: [{ role: 'user', content: 'x', cache_control: { type: 'ephemeral', ttl: '5 minutes' } }] }, 'messages[0].cache_control.ttl', /seconds/],
  ['bad fallbacks', { fallbacks: 'openai/gpt-5-mini' }, 'fallbacks', /array/],
  ['unknown fallback model', { fallbacks: ['openai/nope'] }, 'fallbacks[0]', /does not exist/],
  ['bad debug', { extra: { debug: ['everything'] } }, 'extra.debug[0]', /normalizations/],
];

t.test('each invalid field -> 400 naming it, no upstream call', async (t) => {
  for (const [name, patch, param, msg] of cases) {
    mock.reset();
    const body: Record<string, unknown> = { ...base, ...patch };
    for (const k of Object.keys(patch)) if (patch[k] === undefined) delete body[k];
    const r = await post(body);
    t.equal(r.status, 400, `${name}: status`);
    t.equal(r.json.error?.type, 'invalid_request_error', `${name}: type`);
    t.equal(r.json.error?.param, param, `${name}: param`);
    t.match(r.json.error?.message, msg, `${name}: message`);
    t.notMatch(r.json.error?.message, /\(got (Object|Array)\)/, `${name}: no "got Object" about a whole object`);
    t.equal(mock.requests.length, 0, `${name}: nothing sent upstream`);
  }
});

t.test('a long value is quoted as a short prefix, never whole', async (t) => {
  const huge = 'Z'.repeat(3_000_000);
  const cases: [string, Record<string, unknown>, string][] = [
    ['a 3 MB metadata value', { metadata: { k: huge } }, 'metadata.k'],
    ['a 3 MB tool name', { tools: [{ type: 'function', function: { name: huge } }] }, 'tools[0].function.name'],
    ['a 3 MB cache_control ttl', { messages: [{ role: 'user', content: 'x', cache_control: { type: 'ephemeral', ttl: huge } }] }, 'messages[0].cache_control.ttl'],
    ['a 3 MB json_schema name', { response_format: { type: 'json_schema', json_schema: { name: huge } } }, 'response_format.json_schema.name'],
    ['a 3 MB model id', { model: huge }, 'model'],
    ['a 3 MB fallback id', { fallbacks: [huge] }, 'fallbacks[0]'],
  ];
  for (const [name, patch, param] of cases) {
    const r = await post({ ...base, ...patch });
    t.ok(r.status === 400 || r.status === 404, `${name}: client error`);
    t.equal(r.json.error.param, param, `${name}: param`);
    t.ok(r.json.error.message.length < 400, `${name}: a short message (${r.json.error.message.length} characters)`);
    t.match(r.json.error.message, /Z{20,}…/, `${name}: the value's prefix, marked as cut`);
  }
  // A key the client made up is quoted short too, in the param and the message.
  const key = 'k'.repeat(100_000);
  const r = await post({ ...base, metadata: { [key]: 'v' } });
  t.equal(r.status, 400);
  t.ok(r.json.error.param.length < 200 && r.json.error.param.startsWith('metadata.kkk'), 'the param names the key by its prefix');
  t.ok(r.json.error.message.length < 400, 'a short message');
});

t.test('valid edge values pass and reach the upstream untouched', async (t) => {
  mock.reset();
  const body = {
    ...base,
    temperature: 0,
    top_p: 1,
    n: 2,
    stop: ['a', 'b', 'c', 'd'],
    seed: 42,
    logprobs: true,
    top_logprobs: 20,
    metadata: { k: 'v'.repeat(512) },
    logit_bias: { '50256': -100 },
    service_tier: 'flex',
    user: 'u1',
    parallel_tool_calls: false,
    store: false,
    verbosity: 'low', // unknown to the gateway: forwarded to OpenAI on the same-API path
  };
  const r = await post(body);
  t.equal(r.status, 200);
  t.equal(r.json.choices.length, 2);
  t.same(r.json.choices.map((c: any) => c.index), [0, 1], 'unique choice indexes');
  t.ok(r.json.choices[0].logprobs.content.length, 'logprobs returned');
  const up = mock.requests[0].body;
  for (const k of Object.keys(body)) if (k !== 'model') t.same(up[k], (body as any)[k], `${k} forwarded`);
});

t.test('assistant message echoed from a previous result is accepted', async (t) => {
  const r1 = await client.chat.completions.create({ ...base } as any);
  const r2 = await client.chat.completions.create({ model: base.model, messages: [...base.messages, r1.choices[0].message, { role: 'user', content: 'again' }] } as any);
  t.equal(r2.choices[0].message.content, 'Echo: again');
});

t.test('reasoning model: normalization applied and reported', async (t) => {
  mock.reset();
  const r: any = await client.chat.completions.create({
    model: 'openai/gpt-5-mini',
    messages: [{ role: 'user', content: 'think' }],
    temperature: 0.5,
    top_p: 0.9,
    presence_penalty: 0.1,
    max_tokens: 100,
    extra: { debug: ['normalizations', 'deprecations', 'routing'] },
  } as any);
  t.equal(r.choices[0].message.content, 'Echo: think');
  const up = mock.requests[0].body;
  t.equal(up.temperature, 1);
  t.notOk('top_p' in up);
  t.notOk('presence_penalty' in up);
  t.notOk('max_tokens' in up);
  t.equal(up.max_completion_tokens, 100);
  t.notOk('extra' in up, 'gateway extension fields never sent upstream');
  const norms = r.debug.normalizations;
  t.match(norms, [
    { param: 'temperature', action: 'override', before: 0.5, after: 1 },
    { param: 'top_p', action: 'strip' },
    { param: 'presence_penalty', action: 'strip' },
    { param: 'max_tokens', action: 'rename', after: 'max_completion_tokens' },
  ]);
  t.ok(norms.every((n: any) => typeof n.reason === 'string' && n.reason.length > 0));
  t.match(r.debug.deprecations, [{ param: 'max_tokens' }]);
  t.same(r.debug.routing.targets, ['openai/gpt-5-mini']);
  t.equal(r.debug.routing.attempts[0].status, 'succeeded');
});

t.test('debug absent unless asked; top-level debug list works too', async (t) => {
  const plain: any = await client.chat.completions.create({ ...base } as any);
  t.notOk('debug' in plain);
  const dbg: any = await client.chat.completions.create({ ...base, debug: ['routing'] } as any);
  t.same(Object.keys(dbg.debug), ['routing']);
});

t.test('extra.normalize:false -> the provider error comes back as it would', async (t) => {
  const e: any = await client.chat.completions
    .create({ model: 'openai/gpt-5-mini', messages: [{ role: 'user', content: 'x' }], max_tokens: 10, extra: { normalize: false } } as any)
    .catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.code, 'unsupported_parameter');
  t.equal(e.error.param, 'max_tokens');
  t.match(e.error.message, /max_completion_tokens/);
});

t.test('deprecated model serves and says so', async (t) => {
  const r: any = await client.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], extra: { debug: ['deprecations'] } } as any);
  t.equal(r.model, 'openai/gpt-4o-mini');
  t.match(r.debug.deprecations, [{ param: 'model', message: /deprecated/ }]);
});

t.test('cache_control is stripped for OpenAI targets and recorded', async (t) => {
  mock.reset();
  const r: any = await client.chat.completions.create({
    model: 'openai/gpt-4.1-mini',
    messages: [{ role: 'system', content: 'sys', cache_control: { type: 'ephemeral' } }, { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral', ttl: '300s' } }] }],
    debug: ['normalizations'],
  } as any);
  t.equal(r.choices[0].message.content, 'Echo: hi');
  t.notOk(JSON.stringify(mock.requests[0].body).includes('cache_control'));
  t.match(r.debug.normalizations, [{ param: 'cache_control', action: 'strip' }]);
});
