// examples/custom-provider: a provider plugin for Cohere's v2 Chat API that
// lives outside plugins/ and imports only the published API. The strict
// Cohere mock is proved faithful with Cohere's own SDK (cohere-ai); then the
// example's own gateway.yaml is loaded from its folder (the plugin by its
// path) and driven over HTTP with the official `openai` SDK: chat plain and
// streamed with usage, a tool round trip (plain and streamed), JSON schema
// output, the Responses API through chat. `model-gateway check` passes on
// that file, and the plugin type-checks against the published declarations.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { CohereClientV2, CohereError } from 'cohere-ai';
import { startCohereMock, COHERE_KEY } from './mocks/cohere.js';
import { startGateway, CLIENT_KEY, until, readThenAbort } from './helpers/gateway.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const exampleDir = path.join(root, 'examples/custom-provider');
const exampleYaml = path.join(exampleDir, 'gateway.yaml');
const cli = path.resolve(here, '../src/cli.js');

const mock = await startCohereMock();
t.teardown(() => mock.close());
const user = (content: string) => [{ role: 'user' as const, content }];

t.test('the Cohere mock is faithful: the cohere-ai SDK (v2 chat, stream, tools, errors)', async (t) => {
  const co = new CohereClientV2({ token: COHERE_KEY, environment: mock.url });
  mock.reset();
  const r = await co.chat({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'hello' }] });
  t.equal(r.finishReason, 'COMPLETE');
  t.same(r.message.content, [{ type: 'text', text: 'Echo: hello' }]);
  t.ok(r.usage?.tokens?.inputTokens);
  t.equal(mock.requests[0].headers.authorization, `Bearer ${COHERE_KEY}`);

  const stream = await co.chatStream({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'stream this' }] });
  const types: string[] = [];
  let text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content-delta') text += ev.delta?.message?.content?.text ?? '';
  }
  t.equal(text, 'Echo: stream this');
  t.equal(types[0], 'message-start');
  t.equal(types.at(-1), 'message-end');

  const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const call = await co.chat({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'weather in Paris?' }], tools });
  t.equal(call.finishReason, 'TOOL_CALL');
  const tc = call.message.toolCalls![0];
  t.equal(tc.function?.name, 'get_weather');
  const done = await co.chat({
    model: 'command-a-03-2025',
    tools,
    messages: [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', toolCalls: call.message.toolCalls, toolPlan: call.message.toolPlan },
      { role: 'tool', toolCallId: tc.id!, content: [{ type: 'document', document: { data: { temperature: '18C' } } }] },
    ],
  });
  t.equal(done.finishReason, 'COMPLETE');

  const bad: any = await new CohereClientV2({ token: 'wrong', environment: mock.url }).chat({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.ok(bad instanceof CohereError);
  t.equal(bad.statusCode, 401);
  const unknown: any = await co.chat({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
  t.equal(unknown.statusCode, 404);
  const orphan: any = await co
    .chat({ model: 'command-a-03-2025', messages: [{ role: 'user', content: 'x' }, { role: 'tool', toolCallId: 'nope', content: 'y' }] })
    .catch((e) => e);
  t.equal(orphan.statusCode, 400, 'a tool result must answer a tool call');
});

t.test('the example imports only the published plugin API (and valibot)', async (t) => {
  const src = fs.readFileSync(path.join(exampleDir, 'cohere.js'), 'utf8');
  const imports = [...src.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
  t.same(imports.sort(), ['model-gateway/plugin', 'valibot']);
  t.notMatch(src, /\.\.\/(src|plugins)\//, 'no path into the gateway');
});

const gw = await startGateway(fs.readFileSync(exampleYaml, 'utf8'), { COHERE_API_KEY: COHERE_KEY, COHERE_BASE_URL: mock.url }, exampleYaml);
t.teardown(() => gw.close());
const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });

t.test('chat through the example plugin, plain: the request in Cohere shape', async (t) => {
  mock.reset();
  const r = await client.chat.completions.create({
    model: 'cohere/command-a',
    messages: [{ role: 'system', content: 'be brief' }, ...user('hello cohere')],
    top_p: 0.5,
    max_completion_tokens: 200,
    stop: 'END',
    temperature: 0.2,
  });
  t.equal(r.choices[0].message.content, 'Echo: hello cohere');
  t.equal(r.choices[0].finish_reason, 'stop');
  t.equal(r.model, 'cohere/command-a');
  t.ok(r.usage!.prompt_tokens > 0);
  const body = mock.requests[0].body;
  t.same(body.messages, [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello cohere' }]);
  t.match(body, { model: 'command-a-03-2025', p: 0.5, max_tokens: 200, stop_sequences: ['END'], temperature: 0.2, safety_mode: 'CONTEXTUAL', stream: false });
  t.equal(mock.requests[0].headers.authorization, `Bearer ${COHERE_KEY}`);
});

t.test('chat streamed, with usage; max_tokens maps to finish_reason length', async (t) => {
  const s = await client.chat.completions.create({ model: 'cohere/command-a', messages: user('stream it please'), stream: true, stream_options: { include_usage: true } });
  const chunks: any[] = [];
  for await (const c of s) chunks.push(c);
  t.equal(chunks[0].choices[0].delta.role, 'assistant');
  t.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Echo: stream it please');
  t.same(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason), ['stop']);
  t.ok(chunks.at(-1).usage.total_tokens > 0, 'usage chunk last');
  const cut = await client.chat.completions.create({ model: 'cohere/command-a', messages: user('a rather long prompt to be cut short'), max_completion_tokens: 2 });
  t.equal(cut.choices[0].finish_reason, 'length');
});

t.test('a tool round trip, plain and streamed', async (t) => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const r1 = await client.chat.completions.create({ model: 'cohere/command-a', messages: user('weather in Paris?'), tools });
  t.equal(r1.choices[0].finish_reason, 'tool_calls');
  const call = r1.choices[0].message.tool_calls![0] as any;
  t.equal(call.function.name, 'get_weather');
  t.same(JSON.parse(call.function.arguments), { city: 'Paris' });
  mock.reset();
  const r2 = await client.chat.completions.create({
    model: 'cohere/command-a',
    tools,
    messages: [...user('weather in Paris?'), r1.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '18C' }],
  });
  t.equal(r2.choices[0].message.content, 'tool said 18C', 'the tool result reached Cohere');
  t.match(mock.requests[0].body.messages[1], { role: 'assistant', tool_calls: [{ id: call.id, type: 'function', function: { name: 'get_weather' } }] });
  t.match(mock.requests[0].body.messages[2], { role: 'tool', tool_call_id: call.id, content: '18C' });

  const s = await client.chat.completions.create({ model: 'cohere/command-a', messages: user('use the tool'), tools, tool_choice: 'required', stream: true });
  let args = '';
  let id: string | undefined;
  let name: string | undefined;
  let finish: string | null = null;
  for await (const c of s) {
    const tc = c.choices[0]?.delta?.tool_calls?.[0];
    if (tc?.id) id = tc.id;
    if (tc?.function?.name) name = tc.function.name;
    args += tc?.function?.arguments ?? '';
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  t.ok(id);
  t.equal(name, 'get_weather');
  t.same(JSON.parse(args), { city: 'Paris' });
  t.equal(finish, 'tool_calls');
  t.equal(mock.requests.at(-1)!.body.tool_choice, 'REQUIRED');
});

t.test('JSON schema output, and the Responses API through chat', async (t) => {
  mock.reset();
  const j = await client.chat.completions.create({
    model: 'cohere/command-a',
    messages: user('as json'),
    response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'object', properties: { answer: { type: 'string' } } } } },
  });
  t.same(JSON.parse(j.choices[0].message.content!), { answer: 'as json' });
  t.same(mock.requests[0].body.response_format, { type: 'json_object', json_schema: { type: 'object', properties: { answer: { type: 'string' } } } });
  const r = await client.responses.create({ model: 'cohere/command-r7b', input: 'via responses' });
  t.equal(r.output_text, 'Echo: via responses');
});

t.test('a client abort mid-stream cancels the Cohere upstream', async (t) => {
  const slow = await startCohereMock({ sseDelayMs: 20 });
  t.teardown(() => slow.close());
  const g = await startGateway(fs.readFileSync(exampleYaml, 'utf8'), { COHERE_API_KEY: COHERE_KEY, COHERE_BASE_URL: slow.url }, exampleYaml);
  t.teardown(() => g.close());
  const c = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const ac = new AbortController();
  const s = await c.chat.completions.create({ model: 'cohere/command-a', messages: user(Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ')), stream: true }, { signal: ac.signal });
  const n = await readThenAbort(s, ac, 3);
  t.equal(n, 3, 'the client left after 3 chunks');
  await until(() => slow.requests[0]?.aborted === true, 5000);
  t.ok(slow.requests[0].aborted);
});

t.test('model-gateway check passes on the example, and the plugin type-checks against the published declarations', async (t) => {
  const env = { ...process.env };
  delete env.COHERE_API_KEY;
  const check = spawnSync(process.execPath, [cli, 'check', 'examples/custom-provider/gateway.yaml'], { cwd: root, encoding: 'utf8', env });
  t.equal(check.status, 0, check.stderr);
  t.match(check.stdout, /OK \(1 providers, 2 models/);
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'examples/custom-provider'], { cwd: root, encoding: 'utf8' });
  t.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});
