// OAuth access tokens for Vertex AI from a service-account key file.
//
// The JWT bearer grant of https://developers.google.com/identity/protocols/oauth2/service-account:
// an RS256-signed JWT ({iss: client_email, scope, aud: token_uri, iat, exp
// ≤ iat + 1 h}, header kid = private_key_id) is posted form-encoded to the key
// file's `token_uri`, which answers {access_token, expires_in, token_type}.
// Signed here with node:crypto rather than google-auth-library, whose JWT
// client posts to Google's own token URL whatever the file says
// (google-auth-library's JWT client), so a `token_uri` pointing elsewhere (a proxy, a private
// endpoint, a test server) would be ignored.
//
// A token is used until shortly before it expires (REFRESH_MARGIN_MS, as
// google-auth-library's eager refresh does), and one refresh serves every
// request that waits for it. The refresh has its own timeout and is not tied
// to the request that started it: a client that disconnects stops waiting,
// the others still get the token.
import { readFileSync } from 'node:fs';
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { TransportError } from '../../../src/upstream/errors.js';
import { UpstreamError } from '../../../src/provider/errors.js';

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** Google's token endpoint, for a key file without token_uri. */
export const GOOGLE_TOKEN_URI = 'https://oauth2.googleapis.com/token';
/** Refresh this long before expiry (google-auth-library's eagerRefreshThresholdMillis). */
export const REFRESH_MARGIN_MS = 5 * 60_000;
/** A token is used at least this long, however short its lifetime. */
const MIN_USE_MS = 1000;
/** Google caps an assertion's lifetime at one hour. */
const ASSERTION_LIFETIME_S = 3600;

/** What the gateway needs from a service-account key file. */
export interface ServiceAccount {
  clientEmail: string;
  privateKey: KeyObject;
  privateKeyId?: string;
  tokenUri: string;
  projectId?: string;
}

/** A key file that cannot be used; the message names the file and the field, never the key. */
export class CredentialsError extends Error {
  override name = 'CredentialsError';
}

/** Parse a service-account key file's JSON text. */
export function parseServiceAccount(text: string, source: string): ServiceAccount {
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new CredentialsError(`${source} is not JSON`);
  }
  if (!j || typeof j !== 'object' || Array.isArray(j)) throw new CredentialsError(`${source} is not a JSON object`);
  if (j.type !== 'service_account')
    throw new CredentialsError(`${source}: "type" is ${JSON.stringify(j.type ?? null)}; Vertex AI credentials must be a service-account key ("type": "service_account")`);
  const str = (k: string) => (typeof j[k] === 'string' && j[k] !== '' ? (j[k] as string) : undefined);
  const clientEmail = str('client_email');
  if (!clientEmail) throw new CredentialsError(`${source}: "client_email" is missing`);
  const pem = str('private_key');
  if (!pem) throw new CredentialsError(`${source}: "private_key" is missing`);
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new CredentialsError(`${source}: "private_key" is not a PEM private key`);
  }
  if (privateKey.asymmetricKeyType !== 'rsa') throw new CredentialsError(`${source}: "private_key" is not an RSA key (RS256 needs one)`);
  const tokenUri = str('token_uri') ?? GOOGLE_TOKEN_URI;
  if (!/^https?:\/\//.test(tokenUri)) throw new CredentialsError(`${source}: "token_uri" is not an http(s) URL`);
  return { clientEmail, privateKey, privateKeyId: str('private_key_id'), tokenUri, projectId: str('project_id') };
}

/** Read and parse a key file (synchronously: at start-up, or once per file). */
export function readServiceAccount(file: string): ServiceAccount {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CredentialsError(`cannot read the service-account key file ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseServiceAccount(text, file);
}

/** The signed JWT of the bearer grant. */
export function signAssertion(sa: ServiceAccount, scope = CLOUD_PLATFORM_SCOPE, nowMs = Date.now()): string {
  const iat = Math.floor(nowMs / 1000);
  const header = { alg: 'RS256', typ: 'JWT', ...(sa.privateKeyId ? { kid: sa.privateKeyId } : {}) };
  const claims = { iss: sa.clientEmail, scope, aud: sa.tokenUri, iat, exp: iat + ASSERTION_LIFETIME_S };
  const input = `${b64url(header)}.${b64url(claims)}`;
  const signature = sign('RSA-SHA256', Buffer.from(input), sa.privateKey);
  return `${input}.${signature.toString('base64url')}`;
}

const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/** Posts a form to the token endpoint; the answer's status and text. */
export type TokenPost = (url: string, form: string, signal: AbortSignal) => Promise<{ status: number; text: string }>;

interface Cached {
  token: string;
  /** When to stop using it (expiry minus the margin), ms. */
  refreshAt: number;
}

export interface TokenSourceOptions {
  /** Give up on the token endpoint after this long. */
  timeoutMs: number;
  scope?: string;
  now?: () => number;
}

/** One service account's access token: cached, refreshed once for every waiter. */
export class TokenSource {
  private cached: Cached | undefined;
  private pending: Promise<Cached> | undefined;
  /** Token requests made (answered or not). */
  requests = 0;

  constructor(
    readonly account: ServiceAccount,
    private readonly post: TokenPost,
    private readonly opts: TokenSourceOptions,
  ) {}

  /** A valid access token; `signal` stops this caller's wait, not the refresh others share. */
  async token(signal?: AbortSignal): Promise<string> {
    const now = (this.opts.now ?? Date.now)();
    if (this.cached && this.cached.refreshAt > now) return this.cached.token;
    this.pending ??= this.refresh().finally(() => (this.pending = undefined));
    if (!signal) return (await this.pending).token;
    return (await abortable(this.pending, signal)).token;
  }

  /** The upstream refused this token (revoked, or expired early): the next call fetches another. */
  invalidate(token: string): void {
    if (this.cached?.token === token) this.cached = undefined;
  }

  /**
   * The upstream refused a token of this source: drop the cached one. At
   * worst a token fetched meanwhile is dropped too and fetched again.
   */
  invalidateCurrent(): void {
    this.cached = undefined;
  }

  private async refresh(): Promise<Cached> {
    this.requests++;
    const form = new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion: signAssertion(this.account, this.opts.scope) }).toString();
    const started = (this.opts.now ?? Date.now)();
    let res: { status: number; text: string };
    const signal = AbortSignal.timeout(this.opts.timeoutMs);
    try {
      res = await this.post(this.account.tokenUri, form, signal);
    } catch (err) {
      const timedOut = signal.aborted || (err as { code?: string }).code === 'ETIMEDOUT_FIRST_BYTE';
      throw new TransportError(
        timedOut ? `the OAuth token endpoint did not answer within ${this.opts.timeoutMs} ms` : `the OAuth token request failed (${(err as Error).message})`,
        timedOut ? 'ETIMEDOUT_TOKEN' : 'ETOKEN',
      );
    }
    let body: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      body = JSON.parse(res.text);
    } catch {
      /* not JSON: reported below */
    }
    if (res.status !== 200 || typeof body.access_token !== 'string' || !body.access_token) {
      throw tokenRefused(res.status, body, this.account.clientEmail);
    }
    const lifetimeMs = (typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600) * 1000;
    const margin = Math.min(REFRESH_MARGIN_MS, Math.max(0, lifetimeMs - MIN_USE_MS));
    this.cached = { token: body.access_token, refreshAt: started + lifetimeMs - margin };
    return this.cached;
  }
}

/**
 * The token endpoint's refusal: the gateway's credentials, not the caller's
 * request, so a 401 (the dispatcher falls back to the next target); its own
 * 5xx and 429 keep their status (fallback too).
 */
function tokenRefused(status: number, body: { error?: unknown; error_description?: unknown }, account: string): UpstreamError {
  const what = [body.error, body.error_description].filter((x) => typeof x === 'string' && x).join(': ') || `HTTP ${status}`;
  if (status === 429 || status >= 500) {
    return new UpstreamError(status === 429 ? 429 : 502, { message: `The OAuth token endpoint failed for ${account}: ${what}`, type: status === 429 ? 'rate_limit_error' : 'api_error', param: null, code: 'provider_token_failed' });
  }
  return new UpstreamError(401, {
    message: `The OAuth token endpoint refused the gateway's service account ${account}: ${what}`,
    type: 'authentication_error',
    param: null,
    code: 'provider_auth_failed',
  });
}

/** A shared promise, abandoned (not cancelled) when this caller's signal aborts. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new TransportError('the request was aborted', 'ECONNRESET'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new TransportError('the request was aborted', 'ECONNRESET'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
