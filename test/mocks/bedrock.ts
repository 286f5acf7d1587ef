// A strict mock of Amazon Bedrock's Converse API (bedrock-runtime):
// POST /model/{modelId}/converse and /model/{modelId}/converse-stream. It
// checks what the real service checks, so a signing or translation bug in the
// gateway fails a test:
// - SigV4 (service `bedrock`), recomputed here by hand from the secret, not
//   with the library the gateway signs with: canonical request over the path
//   as sent (the model id URL-encoded once) and encoded again, the signed
//   headers, the payload hash; credential scope, clock skew, session tokens.
//   Or a Bedrock API key as `Authorization: Bearer` (AWS_BEARER_TOKEN_BEDROCK).
// - Converse bodies: turn order (user first, alternating roles), content
//   block unions, blank text, images (format and bytes), toolUse/toolResult
//   pairing and toolConfig, tool choice, inferenceConfig ranges, Claude's
//   thinking rules and signed reasoning blocks, cache points (models with
//   caching only, at most 4), structured output (outputConfig), on-demand
//   ids of models that need an inference profile. Unknown members are
//   rejected (the real service ignores them, which would hide a mapping bug).
// Errors are Bedrock's: status, `x-amzn-errortype`, {"message": …}. Streams are
// AWS event-stream messages with valid CRCs (@smithy/eventstream-codec), with
// the `p` padding member Bedrock adds to every event.
import http from 'node:http';
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import { listenLocal } from './server.js';

export const BEDROCK_REGION = 'us-east-1';
export const BEDROCK_CREDENTIALS = { accessKeyId: 'AKIAMOCKBEDROCK0000001', secretAccessKey: 'mock/Secret+Key0123456789abcdefghijklmnop' };
export const BEDROCK_SESSION_CREDENTIALS = {
  accessKeyId: 'ASIAMOCKBEDROCK0000002',
  secretAccessKey: 'mock/Session+Secret0123456789abcdefghijkl',
  sessionToken: 'IQoJb3JpZ2luX2VjEMOCKsessiontoken0123456789',
};
/** Bedrock API keys start with ABSK (https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys.html). */
export const BEDROCK_API_KEY = 'ABSKbW9jay1iZWRyb2NrLWFwaS1rZXktMDEyMzQ1Njc4OQ==';

interface ModelInfo {
  vendor: 'anthropic' | 'amazon' | 'meta' | 'mistral';
  caching: boolean;
  /** Claude 4.5: on-demand ids are refused; an inference profile id is needed. */
  profileOnly?: boolean;
  /** Claude 4.5: temperature or topP, not both. */
  oneSampler?: boolean;
  oneHourCache?: boolean;
}

const CLAUDE_45: ModelInfo = { vendor: 'anthropic', caching: true, profileOnly: true, oneSampler: true, oneHourCache: true };
const BASE_MODELS: Record<string, ModelInfo> = {
  'anthropic.claude-sonnet-4-5-20250929-v1:0': CLAUDE_45,
  'anthropic.claude-haiku-4-5-20251001-v1:0': CLAUDE_45,
  'anthropic.claude-3-5-haiku-20241022-v1:0': { vendor: 'anthropic', caching: true },
  'amazon.nova-pro-v1:0': { vendor: 'amazon', caching: true },
  'amazon.nova-lite-v1:0': { vendor: 'amazon', caching: true },
  'amazon.nova-2-lite-v1:0': { vendor: 'amazon', caching: true, profileOnly: true },
  'meta.llama4-maverick-17b-instruct-v1:0': { vendor: 'meta', caching: false, profileOnly: true },
  'mistral.pixtral-large-2502-v1:0': { vendor: 'mistral', caching: false, profileOnly: true },
  'mistral.mistral-large-2407-v1:0': { vendor: 'mistral', caching: false },
};

/** The model behind an id (base id or a us./eu./apac./global. inference profile); undefined if unknown. */
export function modelInfo(id: string): (ModelInfo & { base: string; profile: boolean }) | undefined {
  // An ARN names a foundation model or a (system-defined) inference profile by its id.
  const arn = /^arn:aws:bedrock:[a-z0-9-]+:(?:\d{12})?:(foundation-model|inference-profile)\/(.+)$/.exec(id);
  if (arn) {
    const m = modelInfo(arn[2]);
    return m && m.profile === (arn[1] === 'inference-profile') ? m : undefined;
  }
  if (BASE_MODELS[id]) return { ...BASE_MODELS[id], base: id, profile: false };
  const m = /^(us|eu|apac|jp|global)\.(.+)$/.exec(id);
  if (m && BASE_MODELS[m[2]]) return { ...BASE_MODELS[m[2]], base: m[2], profile: true };
  return undefined;
}

class BedrockFault extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
  ) {
    super(message);
  }
}
const invalid = (message: string) => new BedrockFault(400, 'ValidationException', message);

export interface BedrockRecorded {
  method: string;
  /** The path as sent (the model id URL-encoded). */
  rawPath: string;
  modelId: string;
  stream: boolean;
  headers: http.IncomingHttpHeaders;
  body: any;
  raw: Buffer;
  /** The gateway closed the connection before the answer ended. */
  aborted: boolean;
}

export interface BedrockFaultSpec {
  /** Answer with this error (status, x-amzn-errortype shape, message). */
  error?: { status: number; type: string; message?: string };
  /** Never answer. */
  hang?: boolean;
  /** Streams: send this many events, then drop the connection. */
  cutAfterEvents?: number;
  /** Streams: send this many events, then an exception message of this type (e.g. throttlingException). */
  exceptionAfterEvents?: { events: number; type: string; message: string };
  /** Streams: wait this long between events. */
  eventDelayMs?: number;
}

export interface BedrockMock {
  url: string;
  region: string;
  requests: BedrockRecorded[];
  readonly connections: number;
  fail(...f: BedrockFaultSpec[]): void;
  reset(): void;
  close(): Promise<void>;
}

// ---------------------------------------------------------------- SigV4

/** RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const hmac = (key: Buffer | string, s: string) => createHmac('sha256', key).update(s).digest();

const SECRETS: Record<string, { secret: string; token?: string }> = {
  [BEDROCK_CREDENTIALS.accessKeyId]: { secret: BEDROCK_CREDENTIALS.secretAccessKey },
  [BEDROCK_SESSION_CREDENTIALS.accessKeyId]: { secret: BEDROCK_SESSION_CREDENTIALS.secretAccessKey, token: BEDROCK_SESSION_CREDENTIALS.sessionToken },
};
const INVALID_TOKEN = 'The security token included in the request is invalid.';

/** Checks the request's authorization as Bedrock does; throws the 403 Bedrock answers. */
export function verifyAuthorization(method: string, rawUrl: string, headers: http.IncomingHttpHeaders, body: Buffer, region: string, now = Date.now()): void {
  const auth = headers.authorization;
  if (!auth) throw new BedrockFault(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
  if (auth.startsWith('Bearer ')) {
    const key = auth.slice(7);
    if (!key.startsWith('ABSK')) throw new BedrockFault(403, 'UnrecognizedClientException', 'Invalid API Key format: Must start with pre-defined prefix');
    if (key !== BEDROCK_API_KEY) throw new BedrockFault(403, 'UnrecognizedClientException', INVALID_TOKEN);
    return;
  }
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) throw new BedrockFault(403, 'IncompleteSignatureException', `Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters. Authorization=${auth.split(' ')[0]}`);
  const [, akid, day, scopeRegion, service, signedList, signature] = m;
  const cred = SECRETS[akid];
  if (!cred) throw new BedrockFault(403, 'UnrecognizedClientException', INVALID_TOKEN);
  if (cred.token !== undefined && headers['x-amz-security-token'] !== cred.token) throw new BedrockFault(403, 'UnrecognizedClientException', INVALID_TOKEN);
  if (service !== 'bedrock') throw new BedrockFault(403, 'InvalidSignatureException', "Credential should be scoped to correct service: 'bedrock'.");
  if (scopeRegion !== region) throw new BedrockFault(403, 'InvalidSignatureException', `Credential should be scoped to a valid region. `);
  const amzDate = String(headers['x-amz-date'] ?? '');
  const t = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!t) throw new BedrockFault(403, 'IncompleteSignatureException', 'Authorization header requires existence of either a \'X-Amz-Date\' or a \'Date\' header.');
  const at = Date.UTC(+t[1], +t[2] - 1, +t[3], +t[4], +t[5], +t[6]);
  if (Math.abs(now - at) > 5 * 60_000) throw new BedrockFault(403, 'InvalidSignatureException', `Signature expired: ${amzDate} is now earlier than the allowed window.`);
  if (!amzDate.startsWith(day)) throw new BedrockFault(403, 'InvalidSignatureException', 'Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP');
  const signed = signedList.split(';');
  for (const h of ['host', 'x-amz-date', ...(headers['x-amz-security-token'] ? ['x-amz-security-token'] : [])])
    if (!signed.includes(h)) throw new BedrockFault(403, 'InvalidSignatureException', `'${h}' must be a signed header.`);
  const [rawPath, rawQuery = ''] = rawUrl.split('?');
  // Every path segment as sent, encoded again (SigV4 for services other than S3).
  const canonicalPath = rawPath.split('/').map(uriEncode).join('/');
  const query = rawQuery
    .split('&')
    .filter(Boolean)
    .map((kv) => kv.split('=').map((x) => uriEncode(decodeURIComponent(x ?? ''))))
    .sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : 1) : a[0] < b[0] ? -1 : 1))
    .map(([k, v = '']) => `${k}=${v}`)
    .join('&');
  const canonicalHeaders = signed.map((h) => `${h}:${String(headers[h] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const payloadHash = sha256(body);
  if (headers['x-amz-content-sha256'] !== undefined && headers['x-amz-content-sha256'] !== payloadHash && headers['x-amz-content-sha256'] !== 'UNSIGNED-PAYLOAD')
    throw new BedrockFault(400, 'ValidationException', 'The provided x-amz-content-sha256 header does not match what was computed.');
  const canonical = [method, canonicalPath, query, canonicalHeaders, signedList, payloadHash].join('\n');
  const scope = `${day}/${scopeRegion}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac('AWS4' + cred.secret, day), scopeRegion), service), 'aws4_request');
  if (createHmac('sha256', key).update(toSign).digest('hex') !== signature)
    throw new BedrockFault(
      403,
      'InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
}

// ---------------------------------------------------------------- validation

const SIGNING_KEY = randomBytes(32);
/** Reasoning signatures the mock can verify later: altered reasoning text breaks them. */
export const signReasoning = (text: string) => createHmac('sha256', SIGNING_KEY).update(text).digest('base64');
const REDACTED = Buffer.from('redacted:' + signReasoning('redacted')).toString('base64');

const isObj = (v: unknown): v is Record<string, any> => !!v && typeof v === 'object' && !Array.isArray(v);
const TOP = ['messages', 'system', 'inferenceConfig', 'toolConfig', 'guardrailConfig', 'additionalModelRequestFields', 'promptVariables', 'additionalModelResponseFieldPaths', 'requestMetadata', 'performanceConfig', 'serviceTier', 'outputConfig'];
const CONTENT_KEYS = ['text', 'image', 'document', 'video', 'toolUse', 'toolResult', 'guardContent', 'cachePoint', 'reasoningContent', 'citationsContent', 'searchResult'];
const MAGIC: Record<string, (b: Buffer) => boolean> = {
  png: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  jpeg: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  gif: (b) => b.subarray(0, 4).toString('latin1') === 'GIF8',
  webp: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
};

/** One member exactly (a Smithy union). */
function unionKey(b: unknown, at: string, allowed: string[]): string {
  if (!isObj(b)) throw invalid(`The ${at} must be an object.`);
  const keys = Object.keys(b);
  if (keys.length !== 1 || !allowed.includes(keys[0])) throw invalid(`The ContentBlock object at ${at} must set one of the following keys: ${allowed.join(', ')}.`);
  return keys[0];
}

function checkCachePoint(cp: unknown, at: string, model: ModelInfo, counter: { n: number }): void {
  if (!isObj(cp) || cp.type !== 'default') throw invalid(`1 validation error detected: Value at '${at}.cachePoint.type' failed to satisfy constraint: Member must satisfy enum value set: [default]`);
  for (const k of Object.keys(cp)) if (k !== 'type' && k !== 'ttl') throw invalid(`Unknown member ${at}.cachePoint.${k}`);
  if (cp.ttl !== undefined && cp.ttl !== '5m' && cp.ttl !== '1h') throw invalid(`1 validation error detected: Value '${cp.ttl}' at '${at}.cachePoint.ttl' failed to satisfy constraint: Member must satisfy enum value set: [5m, 1h]`);
  if (cp.ttl === '1h' && !model.oneHourCache) throw invalid('The model does not support a cache TTL of 1h.');
  if (!model.caching) throw invalid('You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.');
  if (++counter.n > 4) throw invalid(`A maximum of 4 cache checkpoints are allowed. Found ${counter.n}.`);
}

function checkImage(img: unknown, at: string): void {
  if (!isObj(img) || !['png', 'jpeg', 'gif', 'webp'].includes(img.format)) throw invalid(`1 validation error detected: Value at '${at}.image.format' failed to satisfy constraint: Member must satisfy enum value set: [png, jpeg, gif, webp]`);
  const src = img.source;
  if (isObj(src) && typeof src.bytes === 'string') {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(src.bytes)) throw invalid(`The image bytes at ${at} are not valid base64.`);
    if (!MAGIC[img.format](Buffer.from(src.bytes, 'base64'))) throw invalid(`The provided image does not match the format ${img.format} at ${at}.`);
  } else if (!(isObj(src) && isObj(src.s3Location) && typeof src.s3Location.uri === 'string' && src.s3Location.uri.startsWith('s3://')))
    throw invalid(`The ImageSource object at ${at}.image.source must set one of the following keys: bytes, s3Location.`);
}

interface Checked {
  thinking: boolean;
  cachePoints: number;
}

/** Validates a Converse body for the model; throws the ValidationException Bedrock answers. */
export function validateConverse(body: any, modelId: string): Checked {
  const model = modelInfo(modelId);
  if (!model) throw invalid('The provided model identifier is invalid.');
  if (model.profileOnly && !model.profile)
    throw invalid(`Invocation of model ID ${modelId} with on-demand throughput isn't supported. Retry your request with the ID or ARN of an inference profile that contains this model.`);
  if (!isObj(body)) throw invalid('The request body must be a JSON object.');
  for (const k of Object.keys(body)) if (!TOP.includes(k)) throw invalid(`Unknown member '${k}' in the Converse request (the mock rejects what Bedrock would ignore).`);
  const counter = { n: 0 };
  const amr = body.additionalModelRequestFields;
  if (amr !== undefined && !isObj(amr)) throw invalid('additionalModelRequestFields must be an object.');
  const thinking = model.vendor === 'anthropic' && isObj(amr?.thinking) && amr.thinking.type === 'enabled';
  const ic = body.inferenceConfig ?? {};
  if (!isObj(ic)) throw invalid('inferenceConfig must be an object.');
  for (const k of Object.keys(ic)) if (!['maxTokens', 'temperature', 'topP', 'stopSequences'].includes(k)) throw invalid(`Unknown member inferenceConfig.${k}`);
  if (ic.maxTokens !== undefined && (!Number.isInteger(ic.maxTokens) || ic.maxTokens < 1)) throw invalid("1 validation error detected: Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1");
  for (const k of ['temperature', 'topP'])
    if (ic[k] !== undefined && (typeof ic[k] !== 'number' || ic[k] < 0 || ic[k] > 1)) throw invalid(`1 validation error detected: Value '${ic[k]}' at 'inferenceConfig.${k}' failed to satisfy constraint: Member must have value less than or equal to 1`);
  if (ic.stopSequences !== undefined && (!Array.isArray(ic.stopSequences) || ic.stopSequences.some((s: unknown) => typeof s !== 'string' || s === ''))) throw invalid('inferenceConfig.stopSequences must be a list of non-empty strings.');
  if (model.oneSampler && ic.temperature !== undefined && ic.topP !== undefined) throw invalid('The model returned the following errors: `temperature` and `top_p` cannot both be specified for this model. Please use only one.');
  if (thinking) {
    const budget = amr.thinking.budget_tokens;
    if (!Number.isInteger(budget) || budget < 1024) throw invalid('The model returned the following errors: thinking.enabled.budget_tokens: Input should be greater than or equal to 1024');
    if (ic.maxTokens === undefined || ic.maxTokens <= budget) throw invalid('The model returned the following errors: `max_tokens` must be greater than `thinking.budget_tokens`.');
    if (ic.temperature !== undefined && ic.temperature !== 1) throw invalid('The model returned the following errors: `temperature` may only be set to 1 when thinking is enabled.');
  }

  // system
  if (body.system !== undefined) {
    if (!Array.isArray(body.system)) throw invalid('system must be a list.');
    body.system.forEach((b: unknown, j: number) => {
      const k = unionKey(b, `system.${j}`, ['text', 'guardContent', 'cachePoint']);
      if (k === 'text' && (typeof (b as any).text !== 'string' || !(b as any).text.trim())) throw invalid(`The text field in the SystemContentBlock object at system.${j} is blank. Add text to the text field, and try again.`);
      if (k === 'cachePoint') checkCachePoint((b as any).cachePoint, `system.${j}`, model, counter);
    });
  }

  // tools
  const toolNames = new Set<string>();
  const tc = body.toolConfig;
  if (tc !== undefined) {
    if (!isObj(tc) || !Array.isArray(tc.tools) || tc.tools.length === 0) throw invalid("1 validation error detected: Value at 'toolConfig.tools' failed to satisfy constraint: Member must have length greater than or equal to 1");
    tc.tools.forEach((t: unknown, j: number) => {
      const k = unionKey(t, `toolConfig.tools.${j}`, ['toolSpec', 'cachePoint', 'systemTool']);
      if (k === 'cachePoint') return checkCachePoint((t as any).cachePoint, `toolConfig.tools.${j}`, model, counter);
      const s = (t as any)[k];
      if (!isObj(s) || typeof s.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(s.name)) throw invalid(`1 validation error detected: Value at 'toolConfig.tools.${j}.member.toolSpec.name' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+`);
      for (const key of Object.keys(s)) if (!['name', 'description', 'inputSchema', 'strict'].includes(key)) throw invalid(`Unknown member toolConfig.tools.${j}.toolSpec.${key}`);
      if (!isObj(s.inputSchema) || !isObj(s.inputSchema.json) || s.inputSchema.json.type !== 'object') throw invalid(`The model returned the following errors: tools.${j}.custom.input_schema.type: Field required`);
      if (toolNames.has(s.name)) throw invalid(`The model returned the following errors: tools: Tool names must be unique.`);
      toolNames.add(s.name);
    });
    const choice = tc.toolChoice;
    if (choice !== undefined) {
      const k = unionKey(choice, 'toolConfig.toolChoice', ['auto', 'any', 'tool']);
      if (k === 'tool' && !toolNames.has(choice.tool?.name)) throw invalid(`The model returned the following errors: Tool '${choice.tool?.name}' not found in provided tools`);
      if (thinking && k !== 'auto') throw invalid('The model returned the following errors: Thinking may not be enabled when tool_choice forces tool use.');
    }
  }

  // messages
  const msgs = body.messages;
  if (!Array.isArray(msgs) || msgs.length === 0) throw invalid('A conversation must start with a user message. Try again with a conversation that starts with a user message.');
  let pending: string[] = [];
  let usesTools = false;
  msgs.forEach((m: unknown, i: number) => {
    if (!isObj(m)) throw invalid(`messages.${i} must be an object.`);
    if (m.role !== 'user' && m.role !== 'assistant') throw invalid(`1 validation error detected: Value '${m.role}' at 'messages.${i}.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]`);
    if (i === 0 && m.role !== 'user') throw invalid('A conversation must start with a user message. Try again with a conversation that starts with a user message.');
    if (i > 0 && (msgs[i - 1] as { role: string }).role === m.role)
      throw invalid('A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.');
    if (!Array.isArray(m.content) || m.content.length === 0) throw invalid(`The content field in the Message object at messages.${i} is empty. Add a ContentBlock object to the content field and try again.`);
    const answered: string[] = [];
    const used: string[] = [];
    m.content.forEach((b: unknown, j: number) => {
      const at = `messages.${i}.content.${j}`;
      const k = unionKey(b, at, CONTENT_KEYS);
      const v = (b as any)[k];
      if (k === 'text') {
        if (typeof v !== 'string' || !v.trim()) throw invalid(`The text field in the ContentBlock object at ${at} is blank. Add text to the text field, and try again.`);
      } else if (k === 'image') {
        if (m.role !== 'user') throw invalid(`The model returned the following errors: ${at}: image blocks are only allowed in user messages`);
        checkImage(v, at);
      } else if (k === 'cachePoint') {
        if (j === 0) throw invalid(`The cachePoint at ${at} must follow other content.`);
        checkCachePoint(v, at, model, counter);
      } else if (k === 'toolUse') {
        usesTools = true;
        if (m.role !== 'assistant') throw invalid(`The model returned the following errors: ${at}: toolUse blocks are only allowed in assistant messages`);
        if (!isObj(v) || typeof v.toolUseId !== 'string' || !/^[a-zA-Z0-9_-]+$/.test(v.toolUseId) || typeof v.name !== 'string') throw invalid(`The toolUse block at ${at} needs a toolUseId ([a-zA-Z0-9_-]+) and a name.`);
        if (!isObj(v.input)) throw invalid(`The model returned the following errors: ${at}.tool_use.input: Input should be a valid dictionary`);
        used.push(v.toolUseId);
      } else if (k === 'toolResult') {
        usesTools = true;
        if (m.role !== 'user') throw invalid(`The model returned the following errors: ${at}: toolResult blocks are only allowed in user messages`);
        if (!isObj(v) || typeof v.toolUseId !== 'string' || !Array.isArray(v.content)) throw invalid(`The toolResult block at ${at} needs a toolUseId and content.`);
        if (!pending.includes(v.toolUseId))
          throw invalid(`The model returned the following errors: ${at}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${v.toolUseId}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
        if (v.status !== undefined && v.status !== 'success' && v.status !== 'error') throw invalid(`toolResult status at ${at} must be success or error.`);
        v.content.forEach((c: unknown, n: number) => {
          const ck = unionKey(c, `${at}.toolResult.content.${n}`, ['text', 'json', 'image', 'document', 'video', 'searchResult']);
          if (ck === 'text' && typeof (c as { text: unknown }).text !== 'string') throw invalid(`The text at ${at}.toolResult.content.${n} must be a string.`);
        });
        answered.push(v.toolUseId);
      } else if (k === 'reasoningContent') {
        if (m.role !== 'assistant') throw invalid(`The model returned the following errors: ${at}: reasoning blocks are only allowed in assistant messages`);
        const rk = unionKey(v, `${at}.reasoningContent`, ['reasoningText', 'redactedContent']);
        if (model.vendor === 'anthropic') {
          if (rk === 'reasoningText' && (typeof v.reasoningText?.text !== 'string' || v.reasoningText.signature !== signReasoning(v.reasoningText.text)))
            throw invalid(`The model returned the following errors: ${at}: Invalid \`signature\` in \`thinking\` block`);
          if (rk === 'redactedContent' && v.redactedContent !== REDACTED) throw invalid(`The model returned the following errors: ${at}: Invalid \`data\` in \`redacted_thinking\` block`);
          if (j > 0 && !('reasoningContent' in m.content[j - 1])) throw invalid(`The model returned the following errors: ${at}: thinking blocks must come first in an assistant message`);
        }
      } else throw invalid(`The mock does not serve ${k} blocks (${at}).`);
    });
    if (m.role === 'user' && pending.length) {
      const missing = pending.filter((id) => !answered.includes(id));
      if (missing.length) throw invalid(`Expected toolResult blocks at messages.${i}.content for the following Ids: ${missing.join(', ')}`);
    }
    pending = m.role === 'assistant' ? used : [];
  });
  if (usesTools && tc === undefined) throw invalid('The toolConfig field must be defined when using toolUse and toolResult content blocks.');
  // Claude with thinking: the assistant turn whose tool use is being answered must start with its thinking block.
  if (thinking) {
    const last = msgs[msgs.length - 1];
    const prev = msgs[msgs.length - 2];
    if (last?.content.some((b: object) => 'toolResult' in b) && prev && !('reasoningContent' in prev.content[0]))
      throw invalid(
        `The model returned the following errors: messages.${msgs.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`tool_use\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`,
      );
  }
  const oc = body.outputConfig;
  if (oc !== undefined) {
    const tf = oc?.textFormat;
    if (!isObj(tf) || tf.type !== 'json_schema' || !isObj(tf.structure?.jsonSchema) || typeof tf.structure.jsonSchema.schema !== 'string')
      throw invalid('outputConfig.textFormat needs type json_schema and structure.jsonSchema.schema (a JSON string).');
    let schema: unknown;
    try {
      schema = JSON.parse(tf.structure.jsonSchema.schema);
    } catch {
      throw invalid('The JSON schema in outputConfig.textFormat.structure.jsonSchema.schema is not valid JSON.');
    }
    if (!isObj(schema)) throw invalid('The JSON schema in outputConfig must be an object.');
  }
  return { thinking, cachePoints: counter.n };
}

// ---------------------------------------------------------------- answers

/** A value that fits a JSON schema (the mock's "model" output for tools and structured output). */
export function sampleFor(schema: any, name = ''): unknown {
  if (!isObj(schema)) return null;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  switch (schema.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, s] of Object.entries(schema.properties ?? {})) out[k] = sampleFor(s, k);
      return out;
    }
    case 'array':
      return [sampleFor(schema.items, name)];
    case 'integer':
    case 'number':
      return 42;
    case 'boolean':
      return true;
    default:
      return /city|location/i.test(name) ? 'Paris' : `sample ${name}`.trim();
  }
}

const tokens = (s: string) => Math.max(1, Math.ceil(s.length / 4));

type Block = { text: string } | { toolUse: { toolUseId: string; name: string; input: unknown } } | { reasoningContent: { reasoningText: { text: string; signature?: string } } | { redactedContent: string } };

interface Answer {
  content: Block[];
  stopReason: string;
  usage: { inputTokens: number; outputTokens: number; totalTokens: number; cacheReadInputTokens?: number; cacheWriteInputTokens?: number };
}

function lastUserText(body: any): string {
  const last = body.messages[body.messages.length - 1];
  if (last.role !== 'user') return '';
  return last.content.filter((b: object) => 'text' in b).map((b: { text: string }) => b.text).join(' ');
}

function answer(body: any, modelId: string, checked: Checked, cache: Map<string, number>): Answer {
  const content: Block[] = [];
  const last = body.messages[body.messages.length - 1];
  const question = lastUserText(body);
  if (checked.thinking) {
    const thought = `The user asks: ${question || 'about the tool result'}. I should answer briefly.`;
    content.push({ reasoningContent: { reasoningText: { text: thought, signature: signReasoning(thought) } } });
    if (/redact/i.test(question)) content.push({ reasoningContent: { redactedContent: REDACTED } });
  }
  let stopReason = 'end_turn';
  const specs: { name: string; inputSchema: { json: unknown } }[] = (body.toolConfig?.tools ?? []).filter((t: object) => 'toolSpec' in t).map((t: { toolSpec: unknown }) => t.toolSpec);
  const choice = body.toolConfig?.toolChoice;
  const toolResult = last.role === 'user' ? last.content.find((b: object) => 'toolResult' in b)?.toolResult : undefined;
  let tool = choice?.tool ? specs.find((s) => s.name === choice.tool.name) : choice?.any ? specs[0] : undefined;
  if (!tool && !toolResult) tool = specs.find((s) => question.toLowerCase().includes(s.name.toLowerCase()) || question.toLowerCase().includes(s.name.split('_').pop()!.toLowerCase()));
  if (tool) {
    content.push({ toolUse: { toolUseId: 'tooluse_' + randomBytes(9).toString('base64url').replace(/[^a-zA-Z0-9]/g, 'x'), name: tool.name, input: sampleFor(tool.inputSchema.json) } });
    stopReason = 'tool_use';
  } else if (body.outputConfig) {
    content.push({ text: JSON.stringify(sampleFor(JSON.parse(body.outputConfig.textFormat.structure.jsonSchema.schema))) });
  } else {
    let text: string;
    if (toolResult) text = `The tool returned: ${toolResult.content.map((c: { text?: string; json?: unknown }) => c.text ?? JSON.stringify(c.json)).join(' ')}`;
    else if (/json/i.test(JSON.stringify(body.system ?? ''))) text = JSON.stringify({ answer: question });
    else text = `Bedrock ${modelId} heard: ${question}`;
    const images = last.content.filter((b: object) => 'image' in b).length;
    if (images) text += ` (${images} image${images > 1 ? 's' : ''})`;
    for (const stop of body.inferenceConfig?.stopSequences ?? []) {
      const at = text.indexOf(stop);
      if (at >= 0) {
        text = text.slice(0, at);
        stopReason = 'stop_sequence';
      }
    }
    const max = body.inferenceConfig?.maxTokens;
    if (max !== undefined && tokens(text) > max) {
      text = text.slice(0, max * 4);
      stopReason = 'max_tokens';
    }
    content.push({ text });
  }
  // Usage: input excludes the cached prefix (read) and the newly cached one (write).
  const all = tokens(JSON.stringify([body.toolConfig ?? null, body.system ?? null, body.messages]));
  let read = 0;
  let write = 0;
  if (checked.cachePoints) {
    const prefix = cachedPrefix(body);
    const key = sha256(modelId + prefix);
    const n = Math.min(tokens(prefix), all - 1);
    if (cache.has(key)) read = n;
    else {
      cache.set(key, n);
      write = n;
    }
  }
  const input = all - read - write;
  const output = tokens(JSON.stringify(content));
  const usage: Answer['usage'] = { inputTokens: input, outputTokens: output, totalTokens: input + output + read + write };
  if (checked.cachePoints) Object.assign(usage, { cacheReadInputTokens: read, cacheWriteInputTokens: write });
  return { content, stopReason, usage };
}

/** Everything before the last cache point, in prompt order (tools, system, messages). */
function cachedPrefix(body: any): string {
  const parts: unknown[] = [];
  let upTo = 0;
  const walk = (list: unknown[] | undefined) => {
    for (const b of list ?? []) {
      parts.push(b);
      if (isObj(b) && 'cachePoint' in b) upTo = parts.length;
    }
  };
  walk(body.toolConfig?.tools);
  walk(body.system);
  for (const m of body.messages) walk(m.content);
  return JSON.stringify(parts.slice(0, upTo));
}

// ---------------------------------------------------------------- event stream

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const PAD = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
/** Bedrock pads every event with `p` (a random-length run of this alphabet) against length side channels. */
const pad = () => PAD.slice(0, 1 + Math.floor(Math.random() * PAD.length));

export function eventMessage(type: string, payload: unknown): Uint8Array {
  return codec.encode({
    headers: {
      ':event-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
}

export function exceptionMessage(type: string, message: string): Uint8Array {
  return codec.encode({
    headers: {
      ':exception-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    body: fromUtf8(JSON.stringify({ message })),
  });
}

function streamEvents(a: Answer): Uint8Array[] {
  const out: Uint8Array[] = [eventMessage('messageStart', { p: pad(), role: 'assistant' })];
  a.content.forEach((b, i) => {
    if ('text' in b) {
      for (const piece of b.text.match(/\S+\s*|\s+/g) ?? ['']) out.push(eventMessage('contentBlockDelta', { contentBlockIndex: i, delta: { text: piece }, p: pad() }));
    } else if ('toolUse' in b) {
      out.push(eventMessage('contentBlockStart', { contentBlockIndex: i, start: { toolUse: { toolUseId: b.toolUse.toolUseId, name: b.toolUse.name } }, p: pad() }));
      const json = JSON.stringify(b.toolUse.input);
      const half = Math.ceil(json.length / 2);
      for (const piece of [json.slice(0, half), json.slice(half)]) out.push(eventMessage('contentBlockDelta', { contentBlockIndex: i, delta: { toolUse: { input: piece } }, p: pad() }));
    } else {
      const r = b.reasoningContent;
      if ('reasoningText' in r) {
        for (const piece of r.reasoningText.text.match(/\S+\s*/g) ?? []) out.push(eventMessage('contentBlockDelta', { contentBlockIndex: i, delta: { reasoningContent: { text: piece } }, p: pad() }));
        if (r.reasoningText.signature) out.push(eventMessage('contentBlockDelta', { contentBlockIndex: i, delta: { reasoningContent: { signature: r.reasoningText.signature } }, p: pad() }));
      } else out.push(eventMessage('contentBlockDelta', { contentBlockIndex: i, delta: { reasoningContent: { redactedContent: r.redactedContent } }, p: pad() }));
    }
    out.push(eventMessage('contentBlockStop', { contentBlockIndex: i, p: pad() }));
  });
  out.push(eventMessage('messageStop', { p: pad(), stopReason: a.stopReason }));
  out.push(eventMessage('metadata', { metrics: { latencyMs: 120 }, p: pad(), usage: a.usage }));
  return out;
}

// ---------------------------------------------------------------- server

const ERROR_NAMESPACE = ':http://internal.amazon.com/coral/com.amazon.bedrock/';

export async function startBedrockMock(opts: { region?: string } = {}): Promise<BedrockMock> {
  const region = opts.region ?? BEDROCK_REGION;
  const requests: BedrockRecorded[] = [];
  const faults: BedrockFaultSpec[] = [];
  const cache = new Map<string, number>();

  const sendError = (res: http.ServerResponse, status: number, type: string, message: string) => {
    const rid = randomUUID();
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-requestid': rid, 'x-amzn-errortype': type + ERROR_NAMESPACE });
    res.end(JSON.stringify({ message }));
  };

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const rawUrl = req.url ?? '/';
    const m = /^\/model\/([^/?]+)\/(converse|converse-stream)(?:\?.*)?$/.exec(rawUrl);
    let body: unknown;
    try {
      body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      body = undefined;
    }
    let modelId = '';
    try {
      modelId = m ? decodeURIComponent(m[1]) : '';
    } catch {
      /* a bad escape: unknown model */
    }
    const rec: BedrockRecorded = { method: req.method ?? '', rawPath: rawUrl.split('?')[0], modelId, stream: m?.[2] === 'converse-stream', headers: req.headers, body, raw, aborted: false };
    requests.push(rec);
    res.on('close', () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    try {
      verifyAuthorization(req.method ?? '', rawUrl, req.headers, raw, region);
      if (!m || req.method !== 'POST') throw new BedrockFault(404, 'UnknownOperationException', 'Unknown operation');
      // The model id in the path must be encoded: a raw ':' or '/' would be another resource.
      if (m[1] !== encodeURIComponent(modelId)) throw invalid('The provided model identifier is invalid.');
      if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) throw new BedrockFault(415, 'UnsupportedMediaTypeException', 'Unsupported Media Type');
      if (body === undefined) throw new BedrockFault(400, 'SerializationException', 'Could not parse the request body as JSON.');
      const fault = faults.shift();
      if (fault?.hang) return;
      if (fault?.error) throw new BedrockFault(fault.error.status, fault.error.type, fault.error.message ?? `mock ${fault.error.type}`);
      const checked = validateConverse(body, modelId);
      const a = answer(body, modelId, checked, cache);
      const rid = randomUUID();
      if (!rec.stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': rid });
        res.end(JSON.stringify({ output: { message: { role: 'assistant', content: a.content } }, stopReason: a.stopReason, usage: a.usage, metrics: { latencyMs: 150 } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': rid });
      const events = streamEvents(a);
      for (let n = 0; n < events.length; n++) {
        if (res.destroyed) return;
        if (fault?.cutAfterEvents !== undefined && n >= fault.cutAfterEvents) {
          await new Promise((r) => setTimeout(r, 30));
          res.socket?.destroy();
          return;
        }
        if (fault?.exceptionAfterEvents && n >= fault.exceptionAfterEvents.events) {
          res.end(exceptionMessage(fault.exceptionAfterEvents.type, fault.exceptionAfterEvents.message));
          return;
        }
        res.write(events[n]);
        if (fault?.eventDelayMs) await new Promise((r) => setTimeout(r, fault.eventDelayMs));
      }
      res.end();
    } catch (err) {
      if (err instanceof BedrockFault) sendError(res, err.status, err.errorType, err.message);
      else sendError(res, 500, 'InternalServerException', `mock crashed: ${(err as Error).message}`);
    }
  });
  const listening = await listenLocal(server);
  return {
    url: listening.url,
    region,
    requests,
    get connections() {
      return listening.connections;
    },
    fail: (...f) => faults.push(...f),
    reset() {
      requests.length = 0;
      faults.length = 0;
    },
    close: listening.close,
  };
}
