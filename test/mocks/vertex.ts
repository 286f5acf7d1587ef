// A strict mock of Google Vertex AI and of the OAuth token server its
// service accounts use, one real HTTP server on port 0.
//
// Token endpoint (POST /token, the service-account file's `token_uri`): the
// JWT bearer grant of https://developers.google.com/identity/protocols/oauth2/service-account
// - form-encoded `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and `assertion`;
// - the assertion is an RS256 JWT whose signature is verified against the
//   public half of the account's key (a `kid`, when present, must name that key);
// - claims: `iss` a known account, `scope` including cloud-platform, `aud` the
//   token URL (this server's, or Google's documented https://oauth2.googleapis.com/token),
//   `iat`/`exp` at most an hour apart and around now;
// - errors as Google writes them ({"error":"invalid_grant","error_description":…});
// - answers {access_token, expires_in, token_type:"Bearer"}; every request is counted.
//
// Vertex AI (https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest),
// under /v1 (and /v1beta1)/projects/{project}/locations/{location}:
// - every call needs `Authorization: Bearer` with a token this server issued and
//   that has not expired (401 UNAUTHENTICATED otherwise, Google's wording);
//   the project (its id or number) and the location must be this server's;
// - publishers/google/models/{m}:generateContent and :streamGenerateContent
//   (SSE with alt=sse): the Gemini request checked by the Gemini mock's own
//   validator (test/mocks/gemini.ts) and answered in its recorded format;
//   Gemini image models on generateContent and Imagen on :predict through the
//   image mock's checks (test/mocks/gemini-images.ts); :countTokens;
// - publishers/anthropic/models/{m}:rawPredict and :streamRawPredict: the
//   Anthropic Messages body without `model` and with
//   `anthropic_version: "vertex-2023-10-16"`
//   (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude),
//   checked by the Anthropic mock's validator (test/mocks/anthropic.ts), the
//   verb matching `stream`; publishers/anthropic/models/count-tokens:rawPredict
//   counts a prompt (the Vertex model id in the body). Vertex refuses an
//   `anthropic-beta` flag it does not serve ("Unexpected value(s) `x` for the
//   `anthropic-beta` header", reported by Claude Code users:
//   anthropics/claude-code#1229, #12429, #21625), and any flag on count-tokens;
// - cachedContents: create / get / delete under the project and location; a
//   cache's name carries the project NUMBER, as Vertex's does, and its model
//   the full publisher model resource name.
import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startMock, type MockServer, type Recorded, type Reply } from './server.js';
import {
  geminiError,
  validateGenerate,
  generateResponse,
  generateReply,
  createCache,
  cacheResource,
  checkSpec,
  field,
  SPEC,
  DEFAULT_GEMINI_MODELS,
  type MockState,
  type Naming,
  type StreamFailure,
  type Spec,
} from './gemini.js';
import { geminiImageReply, imagenReply, GEMINI_IMAGE_MODELS } from './gemini-images.js';
import { checkMessages, answerMessages, anthropicErrorReply, promptTokens, type StreamErrorFault } from './anthropic.js';

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
export const VERTEX_CLAUDE_VERSION = 'vertex-2023-10-16';
/**
 * Versions rawPredict takes in `anthropic_version`: Vertex's documented one,
 * and the dated API version @anthropic-ai/vertex-sdk 1.x copies from its
 * `anthropic-version` header into the body (its changelog, 1.0.0: "new API
 * version 2026-10-21").
 */
const CLAUDE_VERSIONS = new Set([VERTEX_CLAUDE_VERSION, '2026-10-21']);

/** anthropic-beta flags this mock's Vertex serves for Claude (Vertex lags Anthropic's API: newer flags are refused). */
export const VERTEX_CLAUDE_BETAS: ReadonlySet<string> = new Set(['interleaved-thinking-2025-05-14', 'context-1m-2025-08-07', 'web-search-2025-03-05', 'token-efficient-tools-2025-02-19', 'output-128k-2025-02-19', 'fine-grained-tool-streaming-2025-05-14']);

/** Vertex's Claude model ids (partner-models/claude/use-claude) and the Anthropic snapshot each one is. */
export const VERTEX_CLAUDE_MODELS: Record<string, string> = {
  'claude-sonnet-4-5@20250929': 'claude-sonnet-4-5-20250929',
  'claude-haiku-4-5@20251001': 'claude-haiku-4-5-20251001',
  'claude-opus-4-1@20250805': 'claude-opus-4-1-20250805',
};

/** A service-account key file as Google's console writes it. */
export interface ServiceAccountKey {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  auth_uri: string;
  token_uri: string;
  auth_provider_x509_cert_url: string;
  client_x509_cert_url: string;
  universe_domain: string;
}

export interface VertexMockOptions {
  project?: string;
  projectNumber?: string;
  /** Locations this server serves (default us-central1 and global). */
  locations?: string[];
  /** Lifetime of issued access tokens, in seconds (Google: 3599). */
  tokenTtlSeconds?: number;
  geminiModels?: string[];
  minCacheTokens?: number;
}

export interface VertexMock extends MockServer {
  project: string;
  projectNumber: string;
  /** The token endpoint (the key file's token_uri). */
  tokenUrl: string;
  /** A key file for an account this server knows, pointing at its token endpoint. */
  serviceAccount: ServiceAccountKey;
  /** Requests to the token endpoint, answered or not. */
  readonly tokenRequests: number;
  /** Lifetime of the tokens issued from now on, in seconds. */
  tokenTtlSeconds: number;
  /** Pause between the events of every stream from now on (0: none). */
  sseDelayMs: number;
  /** Tokens issued and the time (ms) each expires. */
  tokens: Map<string, number>;
  /** Write a key file to a new temp dir (default: the mock's own account); returns its path. */
  writeKeyFile(key?: ServiceAccountKey): string;
  /** A key file for the same account signed by another key (its signature does not verify). */
  foreignKey(): ServiceAccountKey;
  /** Forget every issued token (as a revocation does): calls with them get 401. */
  revokeTokens(): void;
  /** The next Gemini SSE stream ends with an error event. */
  failStream(f: StreamFailure): void;
  /** The next Claude stream ends with an `error` event. */
  claudeStreamError(f: StreamErrorFault): void;
  gemini: MockState;
  /** Prompt-cache prefixes Claude has seen. */
  claudeCache: Map<string, number>;
}

/** An RSA key pair and a key file around it. */
export function makeServiceAccount(tokenUri: string, project: string, email = `gateway-test@${project}.iam.gserviceaccount.com`): { key: ServiceAccountKey; publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key: ServiceAccountKey = {
    type: 'service_account',
    project_id: project,
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    client_email: email,
    client_id: String(100000000000000000000n + BigInt('0x' + randomBytes(8).toString('hex'))),
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: tokenUri,
    auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
    client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/${encodeURIComponent(email)}`,
    universe_domain: 'googleapis.com',
  };
  return { key, publicKey };
}

// ---------------------------------------------------------------------------
// The token endpoint.

const grantError = (error: string, description: string): Reply => ({ status: 400, json: { error, error_description: description } });
const TIMEFRAME = 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.';

function b64json(part: string): any {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

interface Account {
  publicKey: KeyObject;
  keyId: string;
}

function tokenReply(req: Recorded, accounts: Map<string, Account>, tokenUrl: string, issue: () => Reply): Reply {
  if (req.method !== 'POST') return { status: 405, json: { error: 'invalid_request', error_description: 'Method not allowed' } };
  if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded'))
    return grantError('invalid_request', 'Content-Type must be application/x-www-form-urlencoded');
  const form = new URLSearchParams(req.raw);
  const grant = form.get('grant_type');
  if (grant !== JWT_BEARER) return grantError('unsupported_grant_type', `Invalid grant_type: ${grant ?? ''}`);
  const assertion = form.get('assertion') ?? '';
  const parts = assertion.split('.');
  if (parts.length !== 3) return grantError('invalid_grant', 'Invalid JWT: the assertion is not a signed JWT.');
  const header = b64json(parts[0]);
  const claims = b64json(parts[1]);
  if (!header || !claims) return grantError('invalid_grant', 'Invalid JWT: the assertion is not a signed JWT.');
  if (header.alg !== 'RS256') return grantError('invalid_grant', 'Invalid JWT Signature.');
  const account = typeof claims.iss === 'string' ? accounts.get(claims.iss) : undefined;
  if (!account) return grantError('invalid_grant', 'Invalid grant: account not found');
  if (header.kid !== undefined && header.kid !== account.keyId) return grantError('invalid_grant', 'Invalid JWT Signature.');
  const signed = verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), account.publicKey, Buffer.from(parts[2], 'base64url'));
  if (!signed) return grantError('invalid_grant', 'Invalid JWT Signature.');
  if (claims.aud !== tokenUrl && claims.aud !== GOOGLE_TOKEN_URL) return grantError('invalid_grant', `Invalid JWT: Failed audience check. The expected audience is ${GOOGLE_TOKEN_URL}.`);
  const now = Math.floor(Date.now() / 1000);
  if (!Number.isInteger(claims.iat) || !Number.isInteger(claims.exp)) return grantError('invalid_grant', TIMEFRAME);
  if (claims.exp - claims.iat > 3600 || claims.exp <= claims.iat || claims.iat > now + 300 || claims.exp < now) return grantError('invalid_grant', TIMEFRAME);
  const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ') : [];
  if (!scopes.includes(CLOUD_PLATFORM_SCOPE)) return grantError('invalid_scope', 'Invalid OAuth scope or ID token audience provided.');
  return issue();
}

// ---------------------------------------------------------------------------
// Vertex errors and auth.

const UNAUTHENTICATED =
  'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.';
const MISSING = 'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.';

/** The 429 Vertex answers when a model's shared quota is used up. */
export function vertexRateLimitBody(): unknown {
  return {
    error: {
      code: 429,
      message: 'Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.',
      status: 'RESOURCE_EXHAUSTED',
    },
  };
}

const invalid = (message: string): Reply => geminiError(400, 'INVALID_ARGUMENT', message);

const CountTokensRequest: Spec = {
  kind: 'obj',
  type: 'CountTokensRequest',
  fields: { model: 'string', instances: { kind: 'arr', of: 'any' }, contents: { kind: 'arr', of: SPEC.Content }, systemInstruction: SPEC.Content, tools: { kind: 'arr', of: SPEC.Tool }, generationConfig: SPEC.GenerationConfig },
};

/** The token endpoint's paths: /token (this mock's own key files), and Google's older /oauth2/v4/token, for a key file whose token_uri names another. */
const TOKEN_PATHS = new Set(['/token', '/oauth2/v4/token']);
const MODEL_PATH = /^\/(v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/([^/]+)\/models\/([^/:]+):([A-Za-z]+)$/;
const CACHE_PATH = /^\/(v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/cachedContents(?:\/([^/]+))?$/;

export async function startVertexMock(opts: VertexMockOptions = {}): Promise<VertexMock> {
  const project = opts.project ?? 'gateway-test-project';
  const projectNumber = opts.projectNumber ?? '123456789012';
  const locations = new Set(opts.locations ?? ['us-central1', 'global']);
  const geminiModels = new Set([...(opts.geminiModels ?? DEFAULT_GEMINI_MODELS), ...GEMINI_IMAGE_MODELS]);
  const accounts = new Map<string, Account>();
  const tokens = new Map<string, number>();
  const gemini: MockState = { caches: new Map(), signatures: new Set() };
  const claudeCache = new Map<string, number>();
  const streamFailures: StreamFailure[] = [];
  const claudeFaults: StreamErrorFault[] = [];
  let tokenRequests = 0;
  let tokenUrl = '';
  const self = { tokenTtlSeconds: opts.tokenTtlSeconds ?? 3599, sseDelayMs: 0 };

  const issue = (): Reply => {
    const token = `ya29.c.${randomBytes(48).toString('base64url')}`;
    tokens.set(token, Date.now() + self.tokenTtlSeconds * 1000);
    return { status: 200, headers: { 'cache-control': 'no-cache, no-store, max-age=0, must-revalidate' }, json: { access_token: token, expires_in: self.tokenTtlSeconds, token_type: 'Bearer' } };
  };

  const authError = (req: Recorded): Reply | undefined => {
    const h = req.headers.authorization;
    if (!h) return geminiError(401, 'UNAUTHENTICATED', MISSING);
    const m = /^Bearer (\S+)$/.exec(h);
    const exp = m ? tokens.get(m[1]) : undefined;
    if (exp === undefined || exp <= Date.now()) return geminiError(401, 'UNAUTHENTICATED', UNAUTHENTICATED);
    return undefined;
  };

  /** Vertex resource names for one project and location. */
  const naming = (location: string): Naming => {
    const modelRe = /^projects\/([^/]+)\/locations\/([^/]+)\/publishers\/google\/models\/([^/]+)$/;
    return {
      model: (m) => `projects/${projectNumber}/locations/${location}/publishers/google/models/${m}`,
      parseModel: (name) => {
        const x = modelRe.exec(name);
        return x && (x[1] === project || x[1] === projectNumber) && x[2] === location ? x[3] : undefined;
      },
      newCache: () => `projects/${projectNumber}/locations/${location}/cachedContents/${BigInt('0x' + randomBytes(8).toString('hex')) % 10n ** 19n}`,
      lookup: (name) => name.replace(`projects/${project}/`, `projects/${projectNumber}/`),
    };
  };

  const notFound = (p: string, l: string, publisher: string, model: string) =>
    geminiError(404, 'NOT_FOUND', `Publisher Model \`projects/${p}/locations/${l}/publishers/${publisher}/models/${model}\` not found.`);

  const google = (req: Recorded, location: string, model: string, verb: string): Reply => {
    const n = naming(location);
    if (verb === 'predict') return imagenReply(model, req.body);
    if (verb === 'countTokens') {
      if (!geminiModels.has(model)) return notFound(project, location, 'google', model);
      const shape = checkSpec(req.body, CountTokensRequest, '');
      if (shape) return shape;
      const contents = field(req.body, 'contents');
      if (!Array.isArray(contents) || !contents.length) return invalid('* CountTokensRequest.contents: contents is not specified\n');
      const total = Math.ceil(JSON.stringify([contents, field(req.body, 'systemInstruction') ?? null, field(req.body, 'tools') ?? null]).length / 4);
      return { status: 200, json: { totalTokens: total, totalBillableCharacters: total * 4, promptTokensDetails: [{ modality: 'TEXT', tokenCount: total }] } };
    }
    if (verb !== 'generateContent' && verb !== 'streamGenerateContent') return geminiError(400, 'INVALID_ARGUMENT', `Method ${verb} is not supported by publishers/google/models/${model}.`);
    if (GEMINI_IMAGE_MODELS.includes(model)) {
      if (verb !== 'generateContent') return invalid(`${model} does not support streamGenerateContent in this mock.`);
      return geminiImageReply(model, req.body, gemini, geminiModels, n);
    }
    if (!geminiModels.has(model)) return notFound(project, location, 'google', model);
    const { error, cache } = validateGenerate(req.body, model, gemini, geminiModels, n);
    if (error) return error;
    const full = generateResponse(req.body, cache, model, gemini);
    const stream = verb === 'streamGenerateContent';
    const sse = stream && req.query.get('alt') === 'sse';
    return generateReply(full, model, stream, req.query.get('alt'), sse ? streamFailures.shift() : undefined);
  };

  /** A refusal of the anthropic-beta flags Vertex does not serve (none on count-tokens), as Vertex words it. */
  const betaError = (req: Recorded, served: ReadonlySet<string>): Reply | undefined => {
    const h = req.headers['anthropic-beta'];
    const flags = (Array.isArray(h) ? h.join(',') : (h ?? '')).split(',').map((f) => f.trim()).filter(Boolean);
    const bad = flags.filter((f) => !served.has(f));
    if (!bad.length) return undefined;
    return anthropicErrorReply(400, 'invalid_request_error', `Unexpected value(s) ${bad.map((f) => `\`${f}\``).join(', ')} for the \`anthropic-beta\` header. Please consult our documentation at docs.anthropic.com or try again without the header.`);
  };

  /** Claude's token count: the count-tokens model's rawPredict, the Vertex model id in the body. */
  const claudeCount = (body: any): Reply => {
    if (!body || typeof body !== 'object' || Array.isArray(body)) return anthropicErrorReply(400, 'invalid_request_error', 'There was an issue with your request body: expected a JSON object');
    const { anthropic_version: version, model, ...rest } = body;
    if (!CLAUDE_VERSIONS.has(version)) return anthropicErrorReply(400, 'invalid_request_error', `anthropic_version: Input should be '${VERTEX_CLAUDE_VERSION}'`);
    const snapshot = typeof model === 'string' ? VERTEX_CLAUDE_MODELS[model] : undefined;
    if (!snapshot) return anthropicErrorReply(400, 'invalid_request_error', `model: ${model === undefined ? 'Field required' : `${model} is not a Claude model on Vertex AI`}`);
    const messages = { ...rest, model: snapshot };
    return checkMessages(messages, true) ?? { status: 200, json: { input_tokens: promptTokens(messages) } };
  };

  const anthropic = (req: Recorded, location: string, model: string, verb: string): Reply => {
    if (model === 'count-tokens' && verb === 'rawPredict') return betaError(req, new Set()) ?? claudeCount(req.body);
    const beta = betaError(req, VERTEX_CLAUDE_BETAS);
    if (beta) return beta;
    const snapshot = VERTEX_CLAUDE_MODELS[model];
    if (!snapshot) return notFound(project, location, 'anthropic', model);
    if (verb !== 'rawPredict' && verb !== 'streamRawPredict') return geminiError(400, 'INVALID_ARGUMENT', `Method ${verb} is not supported by publishers/anthropic/models/${model}.`);
    const body = req.body;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return anthropicErrorReply(400, 'invalid_request_error', 'There was an issue with your request body: expected a JSON object');
    if ('model' in body) return anthropicErrorReply(400, 'invalid_request_error', 'model: Extra inputs are not permitted (the model is named in the URL)');
    const { anthropic_version: version, ...rest } = body;
    if (version === undefined) return anthropicErrorReply(400, 'invalid_request_error', 'anthropic_version: Field required');
    if (!CLAUDE_VERSIONS.has(version)) return anthropicErrorReply(400, 'invalid_request_error', `anthropic_version: Input should be '${VERTEX_CLAUDE_VERSION}'`);
    const streaming = rest.stream === true;
    if (streaming !== (verb === 'streamRawPredict')) return anthropicErrorReply(400, 'invalid_request_error', `stream: ${verb} takes ${verb === 'streamRawPredict' ? 'stream: true' : 'no stream: true (use streamRawPredict)'}`);
    const messages = { ...rest, model: snapshot };
    return checkMessages(messages) ?? answerMessages(messages, claudeCache, streaming ? claudeFaults.shift() : undefined, snapshot);
  };

  /** Streams pace their events by self.sseDelayMs (a client can leave mid-stream). */
  const handler = (req: Recorded): Reply => {
    const reply = route(req);
    if (reply.sse && self.sseDelayMs) reply.sseDelayMs = self.sseDelayMs;
    return reply;
  };

  const route = (req: Recorded): Reply => {
    if (TOKEN_PATHS.has(req.path)) {
      tokenRequests++;
      // The JWT's audience is the URL it was posted to (the key file's token_uri).
      return tokenReply(req, accounts, tokenUrl.replace(/\/token$/, req.path), issue);
    }
    const auth = authError(req);
    if (auth) return auth;
    const m = MODEL_PATH.exec(req.path);
    const c = m ? undefined : CACHE_PATH.exec(req.path);
    const where = m ?? c;
    if (!where) return geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
    const [, , p, location] = where;
    if (p !== project && p !== projectNumber) return geminiError(403, 'PERMISSION_DENIED', `Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/${p}/locations/${location}' (or it may not exist).`);
    if (!locations.has(location)) return invalid(`Location ${location} is not supported by this project.`);
    if (m) {
      if (req.method !== 'POST') return geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
      const [, , , , publisher, model, verb] = m;
      if (publisher === 'google') return google(req, location, decodeURIComponent(model), verb);
      if (publisher === 'anthropic') return anthropic(req, location, decodeURIComponent(model), verb);
      return notFound(p, location, publisher, model);
    }
    const id = c![4];
    if (!id) return req.method === 'POST' ? createCache(req.body, gemini, geminiModels, opts.minCacheTokens, naming(location)) : geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
    return (
      cacheResource(req.method, `projects/${projectNumber}/locations/${location}/cachedContents/${id}`, gemini) ??
      geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`)
    );
  };

  const server = await startMock(handler);
  tokenUrl = `${server.url}/token`;
  const own = makeServiceAccount(tokenUrl, project);
  accounts.set(own.key.client_email, { publicKey: own.publicKey, keyId: own.key.private_key_id });
  const reset = server.reset;

  // Accessors, not values: Object.assign would copy a getter's value once.
  Object.defineProperties(server, {
    tokenRequests: { get: () => tokenRequests, enumerable: true },
    tokenTtlSeconds: { get: () => self.tokenTtlSeconds, set: (s: number) => void (self.tokenTtlSeconds = s), enumerable: true },
    sseDelayMs: { get: () => self.sseDelayMs, set: (ms: number) => void (self.sseDelayMs = ms), enumerable: true },
  });
  return Object.assign(server, {
    project,
    projectNumber,
    tokenUrl,
    serviceAccount: own.key,
    tokens,
    gemini,
    claudeCache,
    writeKeyFile(key: ServiceAccountKey = own.key): string {
      const dir = mkdtempSync(path.join(tmpdir(), 'vertex-key-'));
      const file = path.join(dir, 'service-account.json');
      writeFileSync(file, JSON.stringify(key, null, 2), { mode: 0o600 });
      return file;
    },
    foreignKey(): ServiceAccountKey {
      const other = makeServiceAccount(tokenUrl, project, own.key.client_email).key;
      // Same account and key id, another private key: the signature cannot verify.
      return { ...other, private_key_id: own.key.private_key_id };
    },
    revokeTokens: () => tokens.clear(),
    failStream: (f: StreamFailure) => void streamFailures.push(f),
    claudeStreamError: (f: StreamErrorFault) => void claudeFaults.push(f),
    reset() {
      reset();
      tokenRequests = 0;
      self.sseDelayMs = 0;
      streamFailures.length = 0;
      claudeFaults.length = 0;
      claudeCache.clear();
    },
  }) as VertexMock;
}

