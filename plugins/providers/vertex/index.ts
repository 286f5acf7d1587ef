// The Google Vertex AI provider plugin: family `vertex`.
//
// Google's models (Gemini, Gemini image models, Imagen) go through the Gemini
// mapping of plugins/providers/google on Vertex's publishers/google paths, prompt-cache
// prefixes becoming Vertex cached contents; Claude models go through the
// Anthropic mapping of plugins/providers/anthropic on publishers/anthropic rawPredict /
// streamRawPredict (request.ts). Every call carries an OAuth access token of
// the service account, added by the authorize step after the body is
// serialised (token.ts: cached, refreshed once for all waiters).
//
// A provider block takes `credentials_file` (GOOGLE_APPLICATION_CREDENTIALS),
// `project` (VERTEX_PROJECT, else the key's project_id) and `location`
// (VERTEX_LOCATION, default us-central1); the base URL follows the location
// unless `base_url` (VERTEX_BASE_URL) is given. docs/providers-vertex.md.
import * as v from 'valibot';
import type { ProviderPlugin, ProviderCall, ChatOutcome, NativeOutcome, CountRequest, MessagesCall } from '../../../src/plugin.js';
import type { ChatRequest } from '../../../src/types.js';
import type { ProviderBlock } from '../../../src/config/load.js';
import { UpstreamError } from '../../../src/provider/errors.js';
import type { Authorizer } from '../../../src/provider/http.js';
import { readBody } from '../../../src/upstream/body.js';
import type { Transport } from '../../../src/upstream/transport.js';
import { geminiChat, geminiCountTokens } from '../google/index.js';
import { geminiImages } from '../google/images.js';
import { claudeChat, claudeCountTokens, claudeMessages, type ClaudeSite } from '../anthropic/index.js';
import { TokenSource, readServiceAccount, CredentialsError, type TokenPost } from './token.js';
import { locationBaseUrl, geminiSite, claudeUrl, claudeCountUrl, toRawPredict, toCountRawPredict, isClaude, type VertexPlace } from './request.js';
import { claudeOnVertexError } from './errors.js';
import { vertexBetas } from './request.js';

/** The keys of a `vertex` provider block besides the core ones. */
export const VertexOptions = v.strictObject({
  /** A service-account key file (JSON), as Google's console writes it. */
  credentials_file: v.optional(v.pipe(v.string(), v.minLength(1, 'must not be empty'))),
  // Project ids: 6 to 30 lowercase letters, digits and hyphens (legacy ones scoped by a domain, `example.com:my-project`); or a project number.
  project: v.optional(v.pipe(v.string(), v.regex(/^([a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$|^\d+$/, 'must be a Google Cloud project id or number'))),
  location: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9-]+$/, 'must be a Vertex AI location such as us-central1, europe-west4 or global'))),
});
type Options = v.InferOutput<typeof VertexOptions>;

export const DEFAULT_LOCATION = 'us-central1';

const optionsOf = (p: { options: Record<string, unknown> }) => p.options as Options;

/** Why a block cannot call Vertex: no key file, a key file that cannot be used, no project. */
function missingCredentials(p: ProviderBlock): string | undefined {
  const o = optionsOf(p);
  if (!o.credentials_file) return 'no service-account key file (credentials_file or GOOGLE_APPLICATION_CREDENTIALS)';
  try {
    const sa = readServiceAccount(o.credentials_file);
    if (!o.project && !sa.projectId) return 'no project (project, VERTEX_PROJECT, or project_id in the key file)';
  } catch (err) {
    if (err instanceof CredentialsError) return err.message;
    throw err;
  }
  return undefined;
}

/** Token requests through the gateway's own transport (keep-alive pool per provider), never fetch(). */
function transportPost(transport: Transport, pool: string, timeoutMs: number): TokenPost {
  return async (url, form, signal) => {
    const res = await transport.request({
      pool,
      url,
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form,
      signal,
      firstByteTimeoutMs: timeoutMs,
    });
    return { status: res.status, text: (await readBody(res.body, 1024 * 1024)).toString('utf8') };
  };
}

/** Claude at one place on Vertex, for the shared Anthropic mapping; the token is added by the authorize step. */
function claudeSite(place: VertexPlace, model: string): ClaudeSite {
  return {
    url: (stream) => claudeUrl(place, model, stream),
    headers: {},
    adapt: toRawPredict,
    mapError: claudeOnVertexError,
    count: { url: claudeCountUrl(place), adapt: toCountRawPredict },
  };
}

export default function vertex(): ProviderPlugin {
  /**
   * One token source per provider block (and key file), kept in the block's
   * cross-request state: a config reload that changes the block starts a new one.
   */
  function sourceFor(call: ProviderCall<unknown>): TokenSource {
    const o = optionsOf(call.provider);
    const key = `vertex.token\0${o.credentials_file}`;
    const sources = call.shared;
    let s = sources.get(key) as TokenSource | undefined;
    if (!s) {
      let account;
      try {
        account = readServiceAccount(o.credentials_file ?? '');
      } catch (err) {
        // The file changed or vanished after start-up: the gateway's credentials, so fall back.
        throw new UpstreamError(401, { message: (err as Error).message, type: 'authentication_error', param: null, code: 'provider_auth_failed' });
      }
      const timeout = call.provider.timeout_ms;
      s = new TokenSource(account, transportPost(call.transport, `${call.provider.pool ?? call.provider.name}#oauth`, timeout), { timeoutMs: timeout });
      sources.set(key, s);
    }
    return s;
  }

  function placeOf(call: ProviderCall<unknown>): VertexPlace {
    const o = optionsOf(call.provider);
    const project = o.project ?? sourceFor(call).account.projectId!;
    return { base: call.provider.base_url, project, location: o.location ?? DEFAULT_LOCATION };
  }

  /** A 401 from Vertex: the cached token was revoked or expired early; the next call fetches another. */
  async function withToken<T>(call: ProviderCall<unknown>, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (err instanceof UpstreamError && err.status === 401) sourceFor(call).invalidateCurrent();
      throw err;
    }
  }

  const authorize: Authorizer = async (req, call) => {
    req.headers.authorization = `Bearer ${await sourceFor(call).token(call.signal)}`;
  };

  return {
    kind: 'provider',
    name: 'vertex',
    families: {
      vertex: {
        env: { baseUrl: 'VERTEX_BASE_URL', credentials_file: 'GOOGLE_APPLICATION_CREDENTIALS', project: 'VERTEX_PROJECT', location: 'VERTEX_LOCATION' },
        defaults: { location: DEFAULT_LOCATION },
        schema: VertexOptions,
        baseUrl: (p) => locationBaseUrl(optionsOf(p).location ?? DEFAULT_LOCATION),
        missingCredentials,
      },
    },
    authorize,
    chat(call: ProviderCall<ChatRequest>): Promise<ChatOutcome> {
      return withToken(call, () => {
        const place = placeOf(call);
        const model = call.request.model;
        if (!isClaude(model)) return geminiChat(call, geminiSite(place));
        return claudeChat(call, claudeSite(place, model));
      });
    },
    // POST /v1/responses/input_tokens: :countTokens for Google's models, the
    // count-tokens model's rawPredict for Claude.
    countTokens(call: ProviderCall<CountRequest>): Promise<number | null> {
      const model = call.deployment.model;
      if (!isClaude(model) && !call.request.chat) return Promise.resolve(null);
      return withToken(call, () => (isClaude(model) ? claudeCountTokens(call, claudeSite(placeOf(call), model)) : geminiCountTokens(call, geminiSite(placeOf(call)))));
    },
    // POST /v1/messages: Claude takes the Messages body on rawPredict (same
    // API, model in the URL); Google's models are translated through chat.
    messages(call: ProviderCall<MessagesCall>): Promise<NativeOutcome | null> {
      const model = call.deployment.model;
      if (!isClaude(model)) return Promise.resolve(null);
      const beta = vertexBetas(call.request.beta, call.note);
      const request = beta === call.request.beta ? call.request : { ...call.request, beta };
      return withToken(call, () => claudeMessages({ ...call, request }, claudeSite(placeOf(call), model)));
    },
    // POST /v1/images/generations: Imagen on :predict, Gemini image models on generateContent.
    images(call: ProviderCall<Record<string, unknown>>): Promise<NativeOutcome> {
      return withToken(call, () => geminiImages(call, geminiSite(placeOf(call))));
    },
  };
}
