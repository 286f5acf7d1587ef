// A Claude Code-shaped session (test/fixtures/claude-code-session.ts: system
// prompt in blocks with cache_control, 22 tools with JSON Schemas, thinking
// on, streaming, three tool_use / tool_result loops) replayed through the
// gateway with @anthropic-ai/sdk to every family: Claude on Anthropic's API
// and on Vertex AI (same API), Claude on Bedrock, OpenAI and Gemini
// (translated). Every turn must be accepted by the strict mock upstream,
// every tool argument must arrive intact (streamed fragments, the final
// message, and the history sent back), and usage must be in message_start
// and message_delta.
import t from 'tap';
import Anthropic from '@anthropic-ai/sdk';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { startGeminiMock, GEMINI_KEY, SIGNATURE_SENTINELS } from './mocks/gemini.js';
import { startBedrockMock, BEDROCK_CREDENTIALS } from './mocks/bedrock.js';
import { startVertexMock } from './mocks/vertex.js';
import { startAzureMock, AZURE_KEY } from './mocks/azure.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';
import { claudeCodeRequest, SESSION_PROMPTS, toolResultText } from './fixtures/claude-code-session.js';

type Any = any;

const anth = await startAnthropicMock();
const oai = await startOpenAIMock();
const gem = await startGeminiMock();
const bed = await startBedrockMock();
const vx = await startVertexMock();
const az = await startAzureMock();
const keyFile = vx.writeKeyFile();

const gw = await startGateway(
  `
providers:
  - { name: anthropic, family: anthropic, base_url: '${anth.url}', api_key: '${ANTHROPIC_KEY}', timeout_ms: 5000, retries: 0 }
  - { name: openai, family: openai, base_url: '${oai.url}/v1', api_key: '${OPENAI_KEY}', timeout_ms: 5000, retries: 0 }
  - { name: google, family: google, base_url: '${gem.url}', api_key: '${GEMINI_KEY}', timeout_ms: 5000, retries: 0 }
  - name: bedrock
    family: bedrock
    base_url: ${bed.url}
    region: us-east-1
    access_key_id: ${BEDROCK_CREDENTIALS.accessKeyId}
    secret_access_key: ${BEDROCK_CREDENTIALS.secretAccessKey}
    timeout_ms: 5000
    retries: 0
  - { name: vertex, family: vertex, base_url: '${vx.url}', timeout_ms: 5000, retries: 0 }
  - { name: azure, family: azure, base_url: '${az.url}', api_key: '${AZURE_KEY}', timeout_ms: 5000, retries: 0 }
models:
  - id: azure/gpt-4.1-mini
    deployments: [{ provider: azure, model: gpt-4.1-mini-prod }]
  - id: vertex/gemini-2.5-flash
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 65536
    deployments: [{ provider: vertex, model: gemini-2.5-flash }]
  - id: anthropic/claude-sonnet-4-5
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 64000
    deployments: [{ provider: anthropic, model: claude-sonnet-4-5 }]
  - id: vertex/claude-sonnet-4-5
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 64000
    deployments: [{ provider: vertex, model: claude-sonnet-4-5@20250929 }]
  - id: bedrock/claude-sonnet-4-5
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 64000
    deployments: [{ provider: bedrock, model: us.anthropic.claude-sonnet-4-5-20250929-v1:0 }]
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
  - id: google/gemini-2.5-flash
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-2.5-flash }]
  - id: google/gemini-3-flash
    capabilities: { thinking: true, tools: true }
    max_output_tokens: 65536
    deployments: [{ provider: google, model: gemini-3-flash-preview }]
`,
  { GOOGLE_APPLICATION_CREDENTIALS: keyFile },
);
const client = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await Promise.all([anth.close(), oai.close(), gem.close(), bed.close(), vx.close(), az.close()]);
});

/** The tool inputs of every tool call in the history an upstream received, in order, in its own wire format. */
function upstreamToolInputs(body: Any): unknown[] {
  if (Array.isArray(body.contents)) {
    // Gemini: the cached prefix (cachedContents, made from Claude Code's cache marks) holds the earlier turns.
    const cache = body.cachedContent ? (gem.state.caches.get(body.cachedContent) ?? [...vx.gemini.caches.values()].find((c) => body.cachedContent.endsWith(c.name.split('/').pop()))) : undefined;
    const cached = cache?.contents ?? [];
    return [...cached, ...body.contents].flatMap((c: Any) => (c.parts ?? []).filter((p: Any) => p.functionCall).map((p: Any) => p.functionCall.args));
  }
  if (body.messages?.some((m: Any) => Array.isArray(m.tool_calls))) return body.messages.flatMap((m: Any) => (m.tool_calls ?? []).map((c: Any) => JSON.parse(c.function.arguments)));
  return (body.messages ?? []).flatMap((m: Any) => (Array.isArray(m.content) ? m.content : []).flatMap((b: Any) => (b.type === 'tool_use' ? [b.input] : b.toolUse ? [b.toolUse.input] : [])));
}

interface Upstream {
  requests: { body: Any; path?: string; rawPath?: string }[];
}

/** The flags Claude Code sends: some Anthropic's API only has. */
const CLAUDE_CODE_BETAS = 'claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,prompt-caching-scope-2026-01-05';

async function replay(t: Any, model: string, upstream: Upstream, o: { thinking?: boolean } = {}): Promise<void> {
  const start = upstream.requests.length;
  const messages: Any[] = [{ role: 'user', content: [{ type: 'text', text: '<system-reminder>This is a reminder that your todo list is empty.</system-reminder>' }, { type: 'text', text: SESSION_PROMPTS[0] }] }];
  const inputs: unknown[] = [];
  let loops = 0;
  let prompt = 1;
  for (let turn = 0; turn < 8; turn++) {
    const events: Any[] = [];
    const stream = client.messages.stream(claudeCodeRequest(model, messages, o) as Any, { headers: { 'anthropic-beta': CLAUDE_CODE_BETAS } });
    stream.on('streamEvent', (e) => events.push(e));
    const final: Any = await stream.finalMessage();
    t.equal(final.model, model, `turn ${turn}: the requested model`);

    // Usage at both ends, the event order Anthropic uses.
    t.equal(events[0].type, 'message_start');
    t.ok(events[0].message.usage && typeof events[0].message.usage.input_tokens === 'number', `turn ${turn}: usage in message_start`);
    const delta = events.find((e) => e.type === 'message_delta');
    t.ok(delta.usage.output_tokens > 0, `turn ${turn}: output usage in message_delta`);
    const input = (u: Any) => (u?.input_tokens ?? 0) + (u?.cache_read_input_tokens ?? 0) + (u?.cache_creation_input_tokens ?? 0);
    t.ok(input(delta.usage) > 0 || input(events[0].message.usage) > 0, `turn ${turn}: input usage reported`);
    t.equal(events[events.length - 1].type, 'message_stop');

    // Every fragment of every tool call's arguments arrived: they join to the final input.
    const tools = final.content.filter((b: Any) => b.type === 'tool_use');
    for (const b of tools) {
      const index = final.content.indexOf(b);
      const joined = events.filter((e) => e.type === 'content_block_delta' && e.index === index && e.delta.type === 'input_json_delta').map((e) => e.delta.partial_json).join('');
      t.same(JSON.parse(joined || '{}'), b.input, `turn ${turn}: ${b.name} arguments intact`);
      t.ok(Object.keys(b.input).length > 0, `turn ${turn}: ${b.name} has arguments`);
      inputs.push(b.input);
    }
    messages.push({ role: 'assistant', content: final.content });
    if (final.stop_reason === 'tool_use') {
      loops++;
      messages.push({ role: 'user', content: tools.map((b: Any) => ({ type: 'tool_result', tool_use_id: b.id, content: toolResultText(b.name, b.input) })) });
    } else {
      t.equal(final.stop_reason, 'end_turn');
      if (prompt === SESSION_PROMPTS.length) break;
      messages.push({ role: 'user', content: SESSION_PROMPTS[prompt++] });
    }
  }
  t.equal(loops, SESSION_PROMPTS.length, 'three tool loops');
  // Generation calls only (not the OAuth token, cached-content or count calls).
  const sent = upstream.requests.slice(start).filter((r) => /messages|completions|Generate|Predict|converse/.test(r.path ?? r.rawPath ?? ''));
  t.equal(sent.length, messages.filter((m) => m.role === 'assistant').length, 'one upstream call per turn, each accepted');
  // The history sent back on the last turn carries every tool call's arguments unchanged.
  t.same(upstreamToolInputs(sent[sent.length - 1].body), inputs, 'the history sent back keeps every argument');
}

t.test('Anthropic (same API)', async (t) => {
  await replay(t, 'anthropic/claude-sonnet-4-5', anth);
  // The last request went as Claude Code sent it: blocks, cache marks, thinking and tools untouched.
  const last = anth.requests[anth.requests.length - 1].body;
  t.equal(last.tools.length, 22);
  t.same(last.system[1].cache_control, { type: 'ephemeral' });
  t.same(last.thinking, { type: 'enabled', budget_tokens: 16000 });
  t.ok(last.messages[1].content.some((b: Any) => b.type === 'thinking'), 'signed thinking blocks sent back');
  t.equal(anth.requests[anth.requests.length - 1].headers['anthropic-beta'], CLAUDE_CODE_BETAS, "every flag goes to Anthropic's API");
});

t.test('Claude on Vertex AI (same API, rawPredict)', async (t) => {
  await replay(t, 'vertex/claude-sonnet-4-5', vx as unknown as Upstream);
  const last = vx.requests[vx.requests.length - 1];
  t.match(last.path, /publishers\/anthropic\/models\/claude-sonnet-4-5@20250929:streamRawPredict$/);
  t.equal(last.body.anthropic_version, 'vertex-2023-10-16');
  t.notOk('model' in last.body);
  // Vertex refuses flags it does not serve (the mock too): only those it serves go.
  t.equal(last.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14');
  const r = await raw('vertex/claude-sonnet-4-5', 'prompt-caching-scope-2026-01-05');
  t.equal(r.status, 200);
  t.notOk(vx.requests[vx.requests.length - 1].headers['anthropic-beta'], 'no flag Vertex serves: no header');
  t.match(r.json.debug.normalizations, [{ param: 'anthropic-beta', action: 'strip', before: 'prompt-caching-scope-2026-01-05' }]);
  const count = await client.messages.countTokens({ model: 'vertex/claude-sonnet-4-5', messages: [{ role: 'user', content: 'count me' }] }, { headers: { 'anthropic-beta': CLAUDE_CODE_BETAS } });
  t.ok(count.input_tokens > 0, 'count-tokens gets no flag (Vertex refuses any there)');
});

async function raw(model: string, beta: string): Promise<{ status: number; json: Any }> {
  const res = await fetch(`${gw.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'anthropic-beta': beta, 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }], debug: ['normalizations'] }),
  });
  return { status: res.status, json: await res.json() };
}

t.test('Gemini on Vertex AI (translated); counts on Vertex for Claude and Gemini', async (t) => {
  await replay(t, 'vertex/gemini-2.5-flash', vx as unknown as Upstream);
  const body = { system: claudeCodeRequest('x', []).system as Any, tools: claudeCodeRequest('x', []).tools as Any, messages: [{ role: 'user' as const, content: 'How long is this prompt?' }] };
  const claude = await client.messages.countTokens({ model: 'vertex/claude-sonnet-4-5', ...body });
  t.ok(claude.input_tokens > 1000, 'tools and system counted');
  t.match(vx.requests.at(-1)!.path, /publishers\/anthropic\/models\/count-tokens:rawPredict$/);
  t.match(vx.requests.at(-1)!.body, { anthropic_version: 'vertex-2023-10-16', model: 'claude-sonnet-4-5@20250929', tools: body.tools });
  const gemini = await client.messages.countTokens({ model: 'vertex/gemini-2.5-flash', ...body });
  t.ok(gemini.input_tokens > 1000);
  t.match(vx.requests.at(-1)!.path, /publishers\/google\/models\/gemini-2.5-flash:countTokens$/);
});

t.test('Azure OpenAI (translated)', async (t) => {
  await replay(t, 'azure/gpt-4.1-mini', az);
});

t.test('Claude on Bedrock (translated through Converse)', async (t) => {
  await replay(t, 'bedrock/claude-sonnet-4-5', bed as unknown as Upstream);
  // Thinking on: the signed reasoning came back to Bedrock through the gateway's signature (the mock checks it).
  const last = bed.requests[bed.requests.length - 1].body;
  t.ok(last.additionalModelRequestFields?.thinking || last.additionalModelRequestFields?.reasoning_config, 'thinking is on');
  const assistant = last.messages.filter((m: Any) => m.role === 'assistant');
  t.ok(assistant.every((m: Any) => 'reasoningContent' in m.content[0]), 'every assistant turn starts with its signed reasoning');
});

t.test('OpenAI (translated)', async (t) => {
  await replay(t, 'openai/gpt-4.1-mini', oai);
  await replay(t, 'openai/gpt-5-mini', oai);
});

t.test('Gemini (translated; Gemini 3 checks the thought signatures sent back)', async (t) => {
  await replay(t, 'google/gemini-2.5-flash', gem);
  await replay(t, 'google/gemini-3-flash', gem);
  const last = gem.requests.filter((r) => /Generate/.test(r.path)).pop()!.body;
  const cached = last.cachedContent ? (gem.state.caches.get(last.cachedContent)?.contents ?? []) : [];
  const calls = [...cached, ...last.contents].flatMap((c: Any) => c.parts ?? []).filter((p: Any) => p.functionCall);
  t.equal(calls.length, 3);
  t.ok(calls.every((p: Any) => p.thoughtSignature && !SIGNATURE_SENTINELS.has(p.thoughtSignature)), "Gemini's own signatures restored, not the skip sentinel");
});

t.test('One session switching models mid tool loop, thinking on: every provider accepts every turn', async (t) => {
  // Claude Code's /model switch: the history holds thinking signed by the previous provider.
  // Even turns ask for a tool, odd turns answer it on another model.
  const order = [
    'google/gemini-3-flash', 'bedrock/claude-sonnet-4-5',
    'anthropic/claude-sonnet-4-5', 'vertex/claude-sonnet-4-5',
    'openai/gpt-4.1-mini', 'anthropic/claude-sonnet-4-5',
    'bedrock/claude-sonnet-4-5', 'google/gemini-3-flash',
    'vertex/claude-sonnet-4-5', 'openai/gpt-5-mini',
  ];
  const messages: Any[] = [{ role: 'user', content: SESSION_PROMPTS[0] }];
  for (const [turn, model] of order.entries()) {
    const stream = client.messages.stream({ ...(claudeCodeRequest(model, messages) as Any), debug: ['normalizations'] });
    let debug: Any;
    stream.on('streamEvent', (e: Any) => {
      if (e.type === 'message_delta') debug = e.debug;
    });
    const r: Any = await stream.finalMessage();
    t.equal(r.type, 'message', `turn ${turn} on ${model} accepted`);
    const loop = messages[messages.length - 1].content[0]?.type === 'tool_result';
    const lostThinking = debug.normalizations.find((n: Any) => n.param === 'thinking' && n.action === 'strip');
    t.equal(loop, turn % 2 === 1, `turn ${turn}: ${loop ? 'answers a tool call' : 'asks for a tool'}`);
    // Claude's own signature goes on to Claude elsewhere (Anthropic -> Vertex); any other loses its thinking.
    const claudeAfterClaude = turn === 3;
    if (loop && /claude/.test(model)) t.equal(!!lostThinking, !claudeAfterClaude, `turn ${turn}: thinking ${claudeAfterClaude ? 'kept' : 'off'} on ${model}`);
    messages.push({ role: 'assistant', content: r.content });
    const calls = r.content.filter((b: Any) => b.type === 'tool_use');
    messages.push(
      calls.length
        ? { role: 'user', content: calls.map((b: Any) => ({ type: 'tool_result', tool_use_id: b.id, content: toolResultText(b.name, b.input) })) }
        : { role: 'user', content: [{ type: 'text', text: SESSION_PROMPTS[1 + (turn % 2)] }] },
    );
  }
});
