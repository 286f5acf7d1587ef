// One error catalog for the whole gateway. Every failure a client can see goes
// through GatewayError and is rendered by envelope(); nothing else writes an
// error body. Shapes and statuses are documented in docs/errors.md.

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_denied_error'
  | 'not_found_error'
  | 'request_timeout_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'internal_server_error'
  | 'service_unavailable_error';

export interface ErrorBody {
  message: string;
  type: ErrorType | string;
  param: string | null;
  code: string | null;
}

/** How much of a client's value an error message quotes back. */
export const QUOTE_MAX = 100;
/** Backstops: no error message or param, whatever built it, is longer than these. */
const MESSAGE_MAX = 4096;
const PARAM_MAX = 512;

/**
 * A value as an error message may quote it: at most `max` characters (a
 * 3 MB string sent back in a 3 MB error body helps nobody), cut on a
 * character boundary and marked with an ellipsis.
 */
export function clip(value: unknown, max = QUOTE_MAX): string {
  const s = typeof value === 'string' ? value : String(value);
  if (s.length <= max) return s;
  let end = max;
  const c = s.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--; // not half of a surrogate pair
  return s.slice(0, end) + '…';
}

export class GatewayError extends Error {
  readonly status: number;
  readonly type: ErrorType | string;
  readonly param: string | null;
  readonly code: string | null;
  /** Extra response headers (e.g. retry-after on 429). */
  readonly headers: Record<string, string>;
  /** Koa reads `expose` to decide whether the message may reach the client. */
  readonly expose = true;

  constructor(
    status: number,
    type: ErrorType | string,
    message: string,
    opts: { param?: string | null; code?: string | null; headers?: Record<string, string> } = {},
  ) {
    super(clip(message, MESSAGE_MAX));
    this.name = 'GatewayError';
    this.status = status;
    this.type = type;
    this.param = opts.param == null ? null : clip(opts.param, PARAM_MAX);
    this.code = opts.code ?? null;
    this.headers = opts.headers ?? {};
  }

  body(): ErrorBody {
    return { message: this.message, type: this.type, param: this.param, code: this.code };
  }
}

// Constructors for the catalog, so call sites read as the table in docs/errors.md.
export const errors = {
  invalid: (message: string, param: string | null = null, code: string | null = null) =>
    new GatewayError(400, 'invalid_request_error', message, { param, code }),
  unauthenticated: (message: string) =>
    new GatewayError(401, 'authentication_error', message, { code: 'invalid_api_key' }),
  forbidden: (message: string, param: string | null = null) =>
    new GatewayError(403, 'permission_denied_error', message, { param, code: 'permission_denied' }),
  notFound: (message: string, param: string | null = null, code: string | null = null) =>
    new GatewayError(404, 'not_found_error', message, { param, code }),
  timeout: (message: string) => new GatewayError(408, 'request_timeout_error', message, { code: 'request_timeout' }),
  tooLarge: (message: string) =>
    new GatewayError(413, 'invalid_request_error', message, { code: 'request_too_large' }),
  unsupportedMedia: (message: string) =>
    new GatewayError(415, 'invalid_request_error', message, { code: 'unsupported_media_type' }),
  rateLimited: (message: string, retryAfterS?: number) =>
    new GatewayError(429, 'rate_limit_error', message, {
      code: 'rate_limit_exceeded',
      headers: retryAfterS !== undefined ? { 'retry-after': String(Math.ceil(retryAfterS)) } : {},
    }),
  allFailed: (message: string) => new GatewayError(500, 'api_error', message, { code: 'all_targets_failed' }),
  internal: () => new GatewayError(500, 'internal_server_error', 'The gateway hit an internal error.', { code: 'internal_error' }),
  unavailable: (message: string) =>
    new GatewayError(503, 'service_unavailable_error', message, { code: 'no_target_available' }),
  shuttingDown: (message: string) => new GatewayError(503, 'service_unavailable_error', message, { code: 'shutting_down' }),
};

/**
 * Map anything thrown into a GatewayError. Unknown errors become a bare 500:
 * their message and stack stay in the log, never in the response.
 */
export function toGatewayError(err: unknown): { error: GatewayError; internal: boolean } {
  if (err instanceof GatewayError) return { error: err, internal: false };
  const e = err as { status?: number; statusCode?: number; type?: string; message?: string; code?: string };
  const status = e?.status ?? e?.statusCode;
  // koa-body / raw-body errors carry a status and a `type`.
  if (status === 413 || e?.type === 'entity.too.large')
    return { error: errors.tooLarge('Request body is larger than the configured limit (server.body_limit).'), internal: false };
  if (err instanceof SyntaxError || e?.type === 'entity.parse.failed')
    return { error: errors.invalid('Request body is not valid JSON.', null, 'invalid_json'), internal: false };
  if (e?.type === 'request.aborted' || e?.code === 'ECONNRESET')
    return { error: errors.invalid('The client aborted the request.', null, 'client_aborted'), internal: false };
  if (status === 400 && e?.type?.startsWith('encoding'))
    return { error: errors.invalid('Unsupported request encoding.', null, 'invalid_encoding'), internal: false };
  return { error: errors.internal(), internal: true };
}

export function envelope(err: GatewayError): { error: ErrorBody } {
  return { error: err.body() };
}

/**
 * Remove secrets from text that came from an upstream (error messages are
 * shown to clients and logged): a provider that echoes the key it was sent
 * must not leak it through the gateway.
 */
export function scrubSecrets(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4 && out.includes(s)) out = out.split(s).join('[redacted]');
  return out;
}

/**
 * What a provider's config holds that must never reach a client or a log
 * line: its API key, long header values (an operator's own auth header), and
 * the values of its family's own keys that the family declares secret
 * (`FamilyDefaults.secrets`: an AWS secret key, a session token...). Other
 * option values (a project, a location, a key file's path) stay readable.
 */
export function providerSecrets(p: { api_key?: string; headers: Record<string, string>; options?: Record<string, unknown>; secret_options?: readonly string[] }): string[] {
  const out: string[] = [];
  if (p.api_key) out.push(p.api_key);
  for (const h of Object.values(p.headers)) if (h.length >= 16) out.push(h);
  for (const k of p.secret_options ?? []) {
    const o = p.options?.[k];
    if (typeof o === 'string' && o) out.push(o);
  }
  return out;
}
