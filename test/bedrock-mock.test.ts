// The Bedrock mock is faithful: the official AWS SDK (@aws-sdk/client-bedrock-runtime)
// signs its requests with SigV4 and the mock accepts them (and refuses a wrong
// secret, a wrong session token, a wrong API key), reads its Converse and
// ConverseStream answers (JSON, and event-stream messages whose CRCs the SDK
// checks), and turns the mock's errors into the SDK's named exceptions.
import t from 'tap';
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  type ConverseCommandInput,
  type ConverseStreamOutput,
  type Message,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { startBedrockMock, BEDROCK_CREDENTIALS, BEDROCK_SESSION_CREDENTIALS, BEDROCK_API_KEY, signReasoning, type BedrockMock } from './mocks/bedrock.js';

const SONNET = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0';
// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

let mock: BedrockMock;
t.before(async () => {
  mock = await startBedrockMock();
});
t.teardown(() => mock.close());
t.beforeEach(() => mock.reset());

function client(over: Partial<ConstructorParameters<typeof BedrockRuntimeClient>[0]> = {}): BedrockRuntimeClient {
  // The SDK speaks HTTP/2 by default, even to http://: the mock is HTTP/1.1 (../shared/STACK.md).
  return new BedrockRuntimeClient({ region: 'us-east-1', endpoint: mock.url, credentials: BEDROCK_CREDENTIALS, requestHandler: new NodeHttpHandler(), maxAttempts: 1, ...over });
}

const user = (text: string): Message => ({ role: 'user', content: [{ text }] });

async function collect(stream: AsyncIterable<ConverseStreamOutput> | undefined): Promise<ConverseStreamOutput[]> {
  const out: ConverseStreamOutput[] = [];
  for await (const e of stream ?? []) out.push(e);
  return out;
}

async function rejection(p: Promise<unknown>): Promise<{ name: string; message: string; status?: number }> {
  try {
    await p;
  } catch (err) {
    const e = err as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
  throw new Error('expected a rejection');
}

t.test('Converse: SigV4-signed by the SDK, the model id encoded in the path, text and usage back', async (t) => {
  const out = await client().send(new ConverseCommand({ modelId: SONNET, system: [{ text: 'Be brief.' }], messages: [user('Hello there')], inferenceConfig: { maxTokens: 200, temperature: 0.2 } }));
  t.equal(out.stopReason, 'end_turn');
  t.match(out.output?.message?.content?.[0].text, /heard: Hello there/);
  t.ok(out.usage!.inputTokens! > 0 && out.usage!.outputTokens! > 0);
  t.equal(out.usage!.totalTokens, out.usage!.inputTokens! + out.usage!.outputTokens!);
  const rec = mock.requests[0];
  t.equal(rec.rawPath, '/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse');
  t.equal(rec.modelId, SONNET);
  t.match(rec.headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIAMOCKBEDROCK0000001\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
});

t.test('a wrong secret, an unknown key, a wrong session token and a wrong region are refused as Bedrock refuses them', async (t) => {
  const wrong = await rejection(client({ credentials: { ...BEDROCK_CREDENTIALS, secretAccessKey: 'not-the-secret' } }).send(new ConverseCommand({ modelId: SONNET, messages: [user('hi')] })));
  t.equal(wrong.name, 'InvalidSignatureException');
  t.equal(wrong.status, 403);
  t.match(wrong.message, /signature we calculated does not match/);
  const unknown = await rejection(client({ credentials: { accessKeyId: 'AKIAUNKNOWN000000000', secretAccessKey: 'x' } }).send(new ConverseCommand({ modelId: SONNET, messages: [user('hi')] })));
  t.equal(unknown.name, 'UnrecognizedClientException');
  const session = await client({ credentials: BEDROCK_SESSION_CREDENTIALS }).send(new ConverseCommand({ modelId: SONNET, messages: [user('with a session')] }));
  t.match(session.output?.message?.content?.[0].text, /with a session/);
  t.equal(mock.requests.at(-1)!.headers['x-amz-security-token'], BEDROCK_SESSION_CREDENTIALS.sessionToken);
  const badToken = await rejection(client({ credentials: { ...BEDROCK_SESSION_CREDENTIALS, sessionToken: 'stale' } }).send(new ConverseCommand({ modelId: SONNET, messages: [user('hi')] })));
  t.equal(badToken.name, 'UnrecognizedClientException');
  const region = await rejection(client({ region: 'eu-west-1' }).send(new ConverseCommand({ modelId: SONNET, messages: [user('hi')] })));
  t.equal(region.name, 'InvalidSignatureException');
});

t.test('a Bedrock API key is accepted as a Bearer token; a wrong one is refused', async (t) => {
  const bearer = (token: string) => client({ credentials: undefined, token: { token }, authSchemePreference: ['httpBearerAuth'] });
  const ok = await bearer(BEDROCK_API_KEY).send(new ConverseCommand({ modelId: SONNET, messages: [user('by api key')] }));
  t.match(ok.output?.message?.content?.[0].text, /by api key/);
  t.equal(mock.requests[0].headers.authorization, `Bearer ${BEDROCK_API_KEY}`);
  const bad = await rejection(bearer('ABSKnot-a-real-key').send(new ConverseCommand({ modelId: SONNET, messages: [user('hi')] })));
  t.equal(bad.status, 403);
});

t.test('ConverseStream: event-stream messages the SDK decodes (CRCs checked), text, then stop and usage', async (t) => {
  const out = await client().send(new ConverseStreamCommand({ modelId: 'us.amazon.nova-pro-v1:0', messages: [user('Stream this please')] }));
  const events = await collect(out.stream);
  t.same(events[0], { messageStart: { role: 'assistant' } });
  const text = events.map((e) => e.contentBlockDelta?.delta?.text ?? '').join('');
  t.match(text, /heard: Stream this please/);
  t.equal(events.at(-2)?.messageStop?.stopReason, 'end_turn');
  t.ok(events.at(-1)?.metadata?.usage?.outputTokens);
  t.match(mock.requests[0].rawPath, /\/converse-stream$/);
});

t.test('tools: the SDK round trip toolUse -> toolResult, streamed tool input, and the pairing rules', async (t) => {
  const toolConfig: ConverseCommandInput['toolConfig'] = {
    tools: [{ toolSpec: { name: 'get_weather', description: 'Weather for a city', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } } }],
  };
  const first = await client().send(new ConverseCommand({ modelId: SONNET, toolConfig, messages: [user('What is the weather in Paris?')] }));
  t.equal(first.stopReason, 'tool_use');
  const use = first.output!.message!.content![0].toolUse!;
  t.same(use.input, { city: 'Paris' });
  const second = await client().send(
    new ConverseCommand({
      modelId: SONNET,
      toolConfig,
      messages: [user('What is the weather in Paris?'), first.output!.message!, { role: 'user', content: [{ toolResult: { toolUseId: use.toolUseId, content: [{ json: { temp: 21 } }] } }] }],
    }),
  );
  t.match(second.output?.message?.content?.[0].text, /"temp":21/);
  // A result for an id that was never used, and a missing toolConfig, are refused.
  const stray = await rejection(
    client().send(new ConverseCommand({ modelId: SONNET, toolConfig, messages: [user('x'), first.output!.message!, { role: 'user', content: [{ toolResult: { toolUseId: 'tooluse_other', content: [{ text: 'x' }] } }] }] })),
  );
  t.equal(stray.name, 'ValidationException');
  const noConfig = await rejection(
    client().send(new ConverseCommand({ modelId: SONNET, messages: [user('x'), first.output!.message!, { role: 'user', content: [{ toolResult: { toolUseId: use.toolUseId, content: [{ text: 'x' }] } }] }] })),
  );
  t.match(noConfig.message, /toolConfig field must be defined/);
  const streamed = await client().send(new ConverseStreamCommand({ modelId: SONNET, toolConfig: { ...toolConfig, toolChoice: { tool: { name: 'get_weather' } } }, messages: [user('go')] }));
  const events = await collect(streamed.stream);
  t.equal(events.find((e) => e.contentBlockStart)?.contentBlockStart?.start?.toolUse?.name, 'get_weather');
  t.same(JSON.parse(events.map((e) => e.contentBlockDelta?.delta?.toolUse?.input ?? '').join('')), { city: 'Paris' });
  t.equal(events.at(-2)?.messageStop?.stopReason, 'tool_use');
});

t.test('turn order, blank text, on-demand ids of profile-only models, unknown members: ValidationException 400', async (t) => {
  const cases: [ConverseCommandInput, RegExp][] = [
    [{ modelId: SONNET, messages: [{ role: 'assistant', content: [{ text: 'Hi' }] }] }, /must start with a user message/],
    [{ modelId: SONNET, messages: [user('a'), user('b')] }, /must alternate between user and assistant/],
    [{ modelId: SONNET, messages: [user(' ')] }, /is blank/],
    [{ modelId: 'anthropic.claude-sonnet-4-5-20250929-v1:0', messages: [user('a')] }, /on-demand throughput isn't supported/],
    [{ modelId: 'us.anthropic.claude-nonexistent-v1:0', messages: [user('a')] }, /model identifier is invalid/],
    [{ modelId: SONNET, messages: [user('a')], inferenceConfig: { temperature: 0.5, topP: 0.9 } }, /cannot both be specified/],
    [{ modelId: 'us.meta.llama4-maverick-17b-instruct-v1:0', system: [{ text: 'x' }, { cachePoint: { type: 'default' } }], messages: [user('a')] }, /did not allow prompt caching/],
  ];
  for (const [input, re] of cases) {
    const e = await rejection(client().send(new ConverseCommand(input)));
    t.equal(e.name, 'ValidationException', String(re));
    t.equal(e.status, 400);
    t.match(e.message, re);
  }
});

t.test('images: the SDK sends the bytes base64-encoded; the mock checks format and bytes', async (t) => {
  const ok = await client().send(new ConverseCommand({ modelId: SONNET, messages: [{ role: 'user', content: [{ text: 'What is this?' }, { image: { format: 'png', source: { bytes: PNG } } }] }] }));
  t.match(ok.output?.message?.content?.[0].text, /\(1 image\)/);
  t.equal(mock.requests[0].body.messages[0].content[1].image.source.bytes, PNG.toString('base64'));
  const wrong = await rejection(client().send(new ConverseCommand({ modelId: SONNET, messages: [{ role: 'user', content: [{ text: 'x' }, { image: { format: 'jpeg', source: { bytes: PNG } } }] }] })));
  t.match(wrong.message, /does not match the format jpeg/);
});

t.test('Claude thinking: signed reasoning comes back and must return unchanged', async (t) => {
  const fields = { thinking: { type: 'enabled', budget_tokens: 1024 } };
  const first = await client().send(new ConverseCommand({ modelId: SONNET, messages: [user('Think first')], inferenceConfig: { maxTokens: 2048 }, additionalModelRequestFields: fields }));
  const r = first.output!.message!.content![0].reasoningContent!.reasoningText!;
  t.equal(r.signature, signReasoning(r.text!));
  const next = (text: string): Message[] => [user('Think first'), { role: 'assistant', content: [{ reasoningContent: { reasoningText: { text, signature: r.signature } } }, { text: 'ok' }] }, user('again')];
  const again = await client().send(new ConverseCommand({ modelId: SONNET, messages: next(r.text!), inferenceConfig: { maxTokens: 2048 }, additionalModelRequestFields: fields }));
  t.equal(again.stopReason, 'end_turn');
  const tampered = await rejection(client().send(new ConverseCommand({ modelId: SONNET, messages: next(r.text + ' (edited)'), inferenceConfig: { maxTokens: 2048 }, additionalModelRequestFields: fields })));
  t.match(tampered.message, /Invalid `signature`/);
  const budget = await rejection(client().send(new ConverseCommand({ modelId: SONNET, messages: [user('x')], inferenceConfig: { maxTokens: 1000 }, additionalModelRequestFields: fields })));
  t.match(budget.message, /max_tokens` must be greater/);
  // Streamed: reasoning deltas, then its signature delta.
  const s = await client().send(new ConverseStreamCommand({ modelId: SONNET, messages: [user('Think first')], inferenceConfig: { maxTokens: 2048 }, additionalModelRequestFields: fields }));
  const events = await collect(s.stream);
  const thought = events.map((e) => e.contentBlockDelta?.delta?.reasoningContent?.text ?? '').join('');
  t.equal(events.find((e) => e.contentBlockDelta?.delta?.reasoningContent?.signature)?.contentBlockDelta?.delta?.reasoningContent?.signature, signReasoning(thought));
});

t.test('prompt caching: cache points write the prefix once, then read it', async (t) => {
  const system = [{ text: 'A long, stable system prompt. '.repeat(50) }, { cachePoint: { type: 'default' as const } }];
  const a = await client().send(new ConverseCommand({ modelId: SONNET, system, messages: [user('one')] }));
  t.ok(a.usage!.cacheWriteInputTokens! > 0);
  t.equal(a.usage!.cacheReadInputTokens, 0);
  const b = await client().send(new ConverseCommand({ modelId: SONNET, system, messages: [user('two')] }));
  t.equal(b.usage!.cacheReadInputTokens, a.usage!.cacheWriteInputTokens);
  t.equal(b.usage!.totalTokens, b.usage!.inputTokens! + b.usage!.outputTokens! + b.usage!.cacheReadInputTokens!);
  const five = Array.from({ length: 5 }, (_, i) => [{ text: `part ${i}` }, { cachePoint: { type: 'default' as const } }]).flat();
  t.match((await rejection(client().send(new ConverseCommand({ modelId: SONNET, system: five, messages: [user('x')] })))).message, /maximum of 4 cache checkpoints/);
});

t.test('structured output: outputConfig.textFormat with a JSON schema string', async (t) => {
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'], additionalProperties: false };
  const out = await client().send(
    new ConverseCommand({ modelId: SONNET, messages: [user('Extract: Ann is 42')], outputConfig: { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'person' } } } } }),
  );
  t.same(JSON.parse(out.output!.message!.content![0].text!), { name: 'sample name', age: 42 });
});

t.test('errors the SDK names: throttling before the answer, and an exception message mid-stream', async (t) => {
  mock.fail({ error: { status: 429, type: 'ThrottlingException', message: 'Too many requests, please wait before trying again.' } });
  const e = await rejection(client().send(new ConverseCommand({ modelId: SONNET, messages: [user('x')] })));
  t.equal(e.name, 'ThrottlingException');
  t.equal(e.status, 429);
  mock.fail({ exceptionAfterEvents: { events: 2, type: 'throttlingException', message: 'Too many tokens' } });
  const s = await client().send(new ConverseStreamCommand({ modelId: SONNET, messages: [user('a b c d e f')] }));
  const mid = await rejection(collect(s.stream));
  t.equal(mid.name, 'ThrottlingException');
  t.match(mid.message, /Too many tokens/);
});
