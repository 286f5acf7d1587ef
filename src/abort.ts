// How an upstream attempt follows its request's abort.
//
// An attempt has a controller of its own (src/dispatch.ts: a failed attempt
// is torn down without ending the request), which must also abort when the
// request's does: the client left, or the shutdown deadline passed. It
// follows through an 'abort' listener on the request's signal, left in place
// after a successful attempt (a stream's attempt follows the client for the
// life of the stream). The listener is made here, outside the dispatch loop,
// so that it holds the two controllers and nothing else: a closure made in
// the loop would hold the loop's whole scope (the request context, its body,
// the meter) for as long as the request's signal is reachable.

const nothing = () => {};

/**
 * Abort `attempt` with the request's reason when the request's `signal`
 * aborts, or at once when it already has. Returns what stops that, for an
 * attempt that ended first.
 */
export function followRequest(signal: AbortSignal, attempt: AbortController): () => void {
  if (signal.aborted) {
    attempt.abort(signal.reason);
    return nothing;
  }
  const onAbort = () => attempt.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}
