// Provider errors: a provider's non-2xx answer (or an unusable body) as an
// UpstreamError in the gateway's envelope, the ErrorMapper a provider
// plugin gives to map its own error bodies, and the generic pieces of one.
// The dispatcher decides from these what is retried or falls back
// (src/dispatch.ts, docs/routing.md).
import type { ErrorBody } from '../errors.js';

/** A non-2xx answer (or an unusable body) from a provider, already mapped to the envelope. */
export class UpstreamError extends Error {
  constructor(
    readonly status: number,
    readonly error: ErrorBody,
    readonly retryAfterMs?: number,
  ) {
    super(`${status} ${error.message}`);
    this.name = 'UpstreamError';
  }
}

/**
 * A provider's own error answer mapped to the envelope, plus a retry hint if it
 * gave one. It sees the status, the body (parsed when it is JSON, else
 * undefined), the raw text and the response headers (some providers name the
 * error kind or the request id in a header).
 */
export type ErrorMapper = (
  status: number,
  body: unknown,
  text: string,
  /** Always given by upstreamRequest; optional so that a mapper can be called on a body alone. */
  headers?: Readonly<Record<string, string | string[] | undefined>>,
) => { error: ErrorBody; retryAfterMs?: number };

export function unparseable(message: string): UpstreamError {
  return new UpstreamError(502, { message, type: 'api_error', param: null, code: 'invalid_upstream_response' });
}

/**
 * An error answer already in the gateway's own envelope
 * (`{ error: { message, type, param, code } }`, OpenAI's shape, which most
 * OpenAI-compatible servers share), taken field by field; anything missing
 * from the status and the text.
 */
export const envelopeError: ErrorMapper = (status, body, text) => {
  const raw = (body as { error?: unknown } | undefined)?.error;
  const e = raw && typeof raw === 'object' ? (raw as Partial<ErrorBody>) : undefined;
  const message = typeof e?.message === 'string' ? e.message : typeof raw === 'string' ? raw : text.slice(0, 500) || `HTTP ${status}`;
  return {
    error: {
      message,
      type: typeof e?.type === 'string' ? e.type : statusType(status),
      param: typeof e?.param === 'string' ? e.param : null,
      code: typeof e?.code === 'string' ? e.code : null,
    },
  };
};

export function statusType(status: number): string {
  if (status === 400 || status === 413 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_denied_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return 'api_error';
}
