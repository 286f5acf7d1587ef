// Transport failures: a call that got no response (connection refused,
// reset, timeout, abort) and a body that broke or went silent, as
// TransportErrors whose messages never name the upstream's address.

/** A transport failure before any response: connection refused, reset, timeout, abort. */
export class TransportError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

/** Codes of a connection that could not be made (DNS, refused, unreachable, connect timeout, TLS). */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'ETIMEDOUT', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);
const isConnectCode = (code: string) => CONNECT_CODES.has(code) || code.startsWith('ERR_TLS') || code.includes('CERT') || code.startsWith('ERR_SSL');

/**
 * A socket error as a TransportError. Its message is built from the code
 * alone: the error's own text names the upstream's address (`connect
 * ECONNREFUSED 10.0.3.7:443`, a certificate's host names), and transport
 * messages reach clients (the attempts of an all_targets_failed error,
 * extra.routing) and log lines.
 */
export function socketError(err: unknown): TransportError {
  const code = (err as NodeJS.ErrnoException)?.code ?? 'EUPSTREAM';
  return new TransportError(isConnectCode(code) ? `could not connect (${code})` : `the connection failed (${code})`, code);
}

/** `err` with the provider it concerns named in its message ("could not connect to provider openai (ECONNREFUSED)"). */
export function namedTransportError(err: TransportError, provider: string): TransportError {
  if (err.code === 'ABORTED') return err;
  const message = isConnectCode(err.code) ? `could not connect to provider ${provider} (${err.code})` : `provider ${provider}: ${err.message}`;
  return new TransportError(message, err.code);
}

/** A body stream's error as a TransportError (a reset mid-body is a transport failure, whatever the client library calls it). */
export function bodyError(err: unknown): Error {
  if (err instanceof TransportError) return err;
  const e = err as { code?: string; message?: string; name?: string };
  if (e?.name === 'AbortError' || e?.code === 'UND_ERR_ABORTED' || e?.code === 'ABORT_ERR') return new TransportError('aborted', 'ABORTED');
  const code = e?.code === 'UND_ERR_SOCKET' || e?.code === 'ERR_STREAM_PREMATURE_CLOSE' || e?.message === 'aborted' ? 'ECONNRESET' : (e?.code ?? 'EUPSTREAM');
  // Not the error's own text: it may name the upstream's address (socketError).
  return new TransportError(`${code}: the upstream connection broke while the body was read`, code);
}

/** The error an upstream body ends with when it sent nothing for `ms` (a provider's stream_idle_timeout_ms). */
export function idleTimeout(ms: number): TransportError {
  return new TransportError(`the provider sent nothing for ${ms} ms (stream_idle_timeout_ms)`, 'ETIMEDOUT_IDLE');
}
