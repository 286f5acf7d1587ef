// Bedrock error answers -> the gateway envelope. Bedrock (restJson1) names
// the error in the `x-amzn-errortype` header ("ThrottlingException:http://…",
// the part before ':' is the shape) and sometimes in the body's `__type`; the
// body is {"message": "…"} ({"Message": …} from the auth layer).
// Shapes and statuses: API reference "Common errors" and the Converse errors
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors).
//
// The status kept on the UpstreamError decides fallback in the dispatcher:
// 429 and 5xx fall back, 401/403 (the gateway's AWS credentials were refused)
// fall back, 400 is the caller's fault and is returned at once.
import { UpstreamError, statusType, type ErrorMapper } from '../../../src/provider/errors.js';
import type { ErrorBody } from '../../../src/errors.js';
import { STREAM_EXCEPTIONS } from './wire.js';

interface Mapping {
  status: number;
  type: string;
}

/** Error shape -> the status the gateway keeps and the envelope type. */
const SHAPES: Record<string, Mapping> = {
  ValidationException: { status: 400, type: 'invalid_request_error' },
  ThrottlingException: { status: 429, type: 'rate_limit_error' },
  // A quota (tokens per day, …) is a limit like a rate: fall back rather than blame the caller.
  ServiceQuotaExceededException: { status: 429, type: 'rate_limit_error' },
  // The model is being loaded: Bedrock asks to retry, like a rate limit.
  ModelNotReadyException: { status: 429, type: 'rate_limit_error' },
  // The gateway's own AWS credentials or their permissions were refused: a provider-key failure.
  AccessDeniedException: { status: 403, type: 'permission_denied_error' },
  UnrecognizedClientException: { status: 403, type: 'permission_denied_error' },
  InvalidSignatureException: { status: 403, type: 'permission_denied_error' },
  ExpiredTokenException: { status: 403, type: 'permission_denied_error' },
  IncompleteSignatureException: { status: 403, type: 'permission_denied_error' },
  MissingAuthenticationTokenException: { status: 403, type: 'permission_denied_error' },
  // The model id is unknown here, or not enabled for this account/region: another deployment may have it.
  ResourceNotFoundException: { status: 404, type: 'not_found_error' },
  InternalServerException: { status: 500, type: 'api_error' },
  ServiceUnavailableException: { status: 503, type: 'api_error' },
  // The model itself failed (424 on the wire) or took too long (408): upstream faults, so they fall back.
  ModelErrorException: { status: 502, type: 'api_error' },
  ModelStreamErrorException: { status: 502, type: 'api_error' },
  ModelTimeoutException: { status: 504, type: 'api_error' },
};

type Headers = Readonly<Record<string, string | string[] | undefined>>;

function shapeOf(headers: Headers | undefined, body: unknown): string | undefined {
  const h = headers?.['x-amzn-errortype'];
  const raw = (Array.isArray(h) ? h[0] : h) ?? (body as { __type?: unknown } | undefined)?.__type;
  if (typeof raw !== 'string' || !raw) return undefined;
  // "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/" or "com.amazon.coral.service#ValidationException".
  const name = raw.split(':')[0];
  return name.slice(name.lastIndexOf('#') + 1);
}

function envelope(status: number, shape: string | undefined, message: string): { status: number; error: ErrorBody } {
  const m = shape ? SHAPES[shape] : undefined;
  const s = m?.status ?? status;
  let code: string | null = shape ?? null;
  // "Input is too long for requested model." / "prompt is too long": give clients OpenAI's code for it.
  if (s === 400 && /too long|too many (input )?tokens|context (window|length)/i.test(message)) code = 'context_length_exceeded';
  return { status: s, error: { message, type: m?.type ?? statusType(s), param: null, code } };
}

function messageOf(status: number, body: unknown, text: string): string {
  const b = body as { message?: unknown; Message?: unknown } | undefined;
  const m = typeof b?.message === 'string' ? b.message : typeof b?.Message === 'string' ? b.Message : text.slice(0, 500);
  return m || `HTTP ${status}`;
}

/**
 * The UpstreamError of an error answer under the status its shape means for
 * the gateway (SHAPES): the transport keeps the HTTP status, and Bedrock
 * answers a quota with 400, a failed model with 424 and a slow one with 408.
 */
export function withShapeStatus(err: unknown): unknown {
  if (!(err instanceof UpstreamError)) return err;
  const m = err.error.code ? SHAPES[err.error.code] : undefined;
  return m && m.status !== err.status ? new UpstreamError(m.status, err.error, err.retryAfterMs) : err;
}

/** The ErrorMapper of the bedrock family: the shape is in the headers (x-amzn-errortype). */
export const bedrockError: ErrorMapper = (status, body, text, headers) => ({ error: envelope(status, shapeOf(headers, body), messageOf(status, body, text)).error });

/** An exception event inside a ConverseStream (`:exception-type` throttlingException, …) as an UpstreamError. */
export function streamException(exceptionType: string, payload: string): UpstreamError {
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch {
    body = undefined;
  }
  const shape = exceptionType ? exceptionType[0].toUpperCase() + exceptionType.slice(1) : 'InternalServerException';
  const { status, error } = envelope(STREAM_EXCEPTIONS[exceptionType] ?? 500, shape, messageOf(500, body, payload || 'the provider reported an error mid-stream'));
  return new UpstreamError(status, error);
}
