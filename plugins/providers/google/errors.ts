// Gemini error bodies to the gateway envelope.
//
// Google answers {"error":{"code","message","status","details":[...]}}
// (https://ai.google.dev/gemini-api/docs/troubleshooting, AIP-193). Two cases
// need more than a status copy:
// - a rejected API key is a 400 INVALID_ARGUMENT with ErrorInfo.reason
//   API_KEY_INVALID: it is the gateway's key, not the caller's request, so it
//   becomes a 401 (the dispatcher then tries the next target instead of
//   blaming the client);
// - 400 FAILED_PRECONDITION ("User location is not supported", free tier not
//   available) is about the gateway's account, so it becomes a 403 (fallback).
// A 429 RESOURCE_EXHAUSTED carries RetryInfo.retryDelay ("34.4s"), which
// becomes retryAfterMs (https://cloud.google.com/apis/design/errors#error_details).
import { UpstreamError, statusType, type ErrorMapper } from '../../../src/provider/errors.js';
import type { ErrorBody } from '../../../src/errors.js';
import type { GeminiErrorBody } from './wire.js';

type Detail = NonNullable<NonNullable<GeminiErrorBody['error']>['details']>[number];

/** "34.4s" (google.protobuf.Duration JSON) to milliseconds. */
export function parseDuration(s: unknown): number | undefined {
  if (typeof s !== 'string') return undefined;
  const m = /^(\d+(?:\.\d+)?)s$/.exec(s.trim());
  return m ? Math.round(Number(m[1]) * 1000) : undefined;
}

function details(e: GeminiErrorBody['error']): Detail[] {
  return Array.isArray(e?.details) ? e.details : [];
}

/** The error object, whether the body is {error} or (non-SSE stream) [{error}]. */
function errorOf(body: unknown): GeminiErrorBody['error'] | undefined {
  const b = Array.isArray(body) ? body[0] : body;
  const e = (b as GeminiErrorBody | undefined)?.error;
  return e && typeof e === 'object' ? e : undefined;
}

export const geminiError: ErrorMapper = (status, body, text) => {
  const e = errorOf(body);
  const message = typeof e?.message === 'string' && e.message ? e.message : text.slice(0, 500) || `HTTP ${status}`;
  const retry = details(e).find((d) => String(d['@type'] ?? '').endsWith('google.rpc.RetryInfo'));
  const keyRejected = details(e).some((d) => d.reason === 'API_KEY_INVALID');
  const error: ErrorBody = {
    message,
    type: statusType(status),
    param: null,
    code: keyRejected ? 'api_key_invalid' : typeof e?.status === 'string' ? e.status.toLowerCase() : null,
  };
  return { error, retryAfterMs: parseDuration(retry?.retryDelay) };
};

/** The body of a `data: {"error":...}` stream event as an UpstreamError. */
export function streamError(body: GeminiErrorBody): UpstreamError {
  const e = body.error ?? {};
  const status = typeof e.code === 'number' && e.code >= 400 && e.code < 600 ? e.code : 500;
  const mapped = geminiError(status, body, '');
  return new UpstreamError(status, mapped.error, mapped.retryAfterMs);
}

/**
 * Re-class errors that are about the gateway's own Google account rather than
 * the caller's request (see the header comment). Anything else is returned as is.
 */
export function reclassify(err: unknown): unknown {
  if (!(err instanceof UpstreamError) || err.status !== 400) return err;
  if (err.error.code === 'api_key_invalid') {
    return new UpstreamError(401, { message: 'The provider rejected the gateway\'s Gemini API key (API_KEY_INVALID).', type: 'authentication_error', param: null, code: 'provider_auth_failed' });
  }
  if (err.error.code === 'failed_precondition') {
    return new UpstreamError(403, { ...err.error, type: 'permission_denied_error' });
  }
  return err;
}
