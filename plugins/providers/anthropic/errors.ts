// Anthropic error bodies -> the gateway envelope.
// Body: {"type":"error","error":{"type":"<error_type>","message":"…"},"request_id":"req_…"}
// (https://docs.anthropic.com/en/api/errors). The HTTP status is kept on the
// UpstreamError, so the dispatcher's fallback rules apply unchanged: 529
// `overloaded_error` is a 5xx and falls back like a 500.
import { UpstreamError, statusType, type ErrorMapper } from '../../../src/provider/errors.js';
import type { ErrorBody } from '../../../src/errors.js';

/** Anthropic `error.type` -> envelope `type` (the OpenAI names clients already branch on). */
const TYPES: Record<string, string> = {
  invalid_request_error: 'invalid_request_error',
  authentication_error: 'authentication_error',
  permission_error: 'permission_denied_error',
  not_found_error: 'not_found_error',
  request_too_large: 'invalid_request_error',
  rate_limit_error: 'rate_limit_error',
  api_error: 'api_error',
  overloaded_error: 'api_error',
  timeout_error: 'api_error',
  billing_error: 'permission_denied_error',
};

/** Status for an error that arrives as a mid-stream `error` event (the HTTP status is already 200). */
const STREAM_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

function envelope(status: number, type: string | undefined, message: string): ErrorBody {
  const mapped = type ? TYPES[type] : undefined;
  let code: string | null = type && mapped !== type ? type : null;
  // "prompt is too long: 201234 tokens > 200000 maximum": give clients OpenAI's code for it.
  if (status === 400 && /prompt is too long/i.test(message)) code = 'context_length_exceeded';
  return { message, type: mapped ?? statusType(status), param: null, code };
}

export const anthropicError: ErrorMapper = (status, body, text) => {
  const e = (body as { error?: { type?: unknown; message?: unknown } } | undefined)?.error;
  const type = typeof e?.type === 'string' ? e.type : undefined;
  const message = typeof e?.message === 'string' ? e.message : text.slice(0, 500) || `HTTP ${status}`;
  return { error: envelope(status, type, message) };
};

/** A mid-stream `error` event as an UpstreamError (the core ends the stream with an error frame). */
export function streamError(error: { type?: string; message?: string } | undefined): UpstreamError {
  const type = error?.type ?? 'api_error';
  const status = STREAM_STATUS[type] ?? 500;
  return new UpstreamError(status, envelope(status, type, error?.message ?? 'the provider reported an error mid-stream'));
}
