// Pieces shared by the ingress endpoints.
import type { RequestContext } from '../plugin.js';
import { UpstreamError } from '../provider/errors.js';
import { TransportError } from '../upstream/errors.js';
import { GatewayError, scrubSecrets, type ErrorBody } from '../errors.js';

/** Gateway extension fields: consumed by the gateway, never sent to a provider. */
export const EXTENSION_FIELDS = ['extra', 'fallbacks', 'debug'] as const;

export function withoutExtensions<T extends Record<string, unknown>>(body: T): T {
  const out = { ...body };
  for (const f of EXTENSION_FIELDS) delete out[f];
  return out;
}

export function runFinalizers(ctx: RequestContext, final: Record<string, unknown>): void {
  for (const f of ctx.finalizers) f(final);
}

/**
 * The envelope for a failure after a stream has started. `secrets` (the
 * serving provider's, providerSecrets) are cut from a provider's own message.
 */
export function midStreamError(err: unknown, secrets?: string[]): ErrorBody {
  if (err instanceof UpstreamError) return { ...err.error, message: secrets ? scrubSecrets(err.error.message, secrets) : err.error.message, type: err.error.type || 'api_error' };
  if (err instanceof GatewayError) return err.body();
  const code = (err as NodeJS.ErrnoException)?.code;
  // A socket that closes mid-body surfaces from node:http as Error('aborted', ECONNRESET).
  if (err instanceof TransportError && err.code === 'ETIMEDOUT_IDLE')
    return { message: `The upstream stream went silent before it finished: ${err.message}.`, type: 'api_error', param: null, code: 'upstream_stream_error' };
  if (err instanceof TransportError || code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || (err as Error)?.message === 'aborted')
    return { message: `The upstream stream broke before it finished (${err instanceof TransportError ? err.code : code ?? 'aborted'}).`, type: 'api_error', param: null, code: 'upstream_stream_error' };
  return { message: 'The gateway hit an internal error while streaming.', type: 'internal_server_error', param: null, code: 'internal_error' };
}
