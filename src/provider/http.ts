// How a provider plugin calls its upstream: headers, the authorize/sign
// step, status check, error mapping (errors.ts), JSON bodies and streamed
// ones. A streamed body becomes events in its framing (src/stream/framing.ts)
// through UpstreamEvents (src/stream/upstream-events.ts), with the same
// back-pressure, release and abort behaviour whatever the framing; providers
// only see events.
import { serialiseBody } from '../json-source.js';
import type { ProviderCall } from '../plugin.js';
import { TransportError, namedTransportError } from '../upstream/errors.js';
import { readBody } from '../upstream/body.js';
import type { UpstreamRequest, UpstreamResponse, WholeResponse } from '../upstream/transport.js';
import type { SSEEvent } from '../sse.js';
import { errors } from '../errors.js';
import { sseFraming, type Framing } from '../stream/framing.js';
import { UpstreamEvents } from '../stream/upstream-events.js';
import { UpstreamError, unparseable, type ErrorMapper } from './errors.js';

/**
 * The request as it is about to leave, body serialised: what an authorize
 * step signs (a request signature hashes the final bytes) or completes (an OAuth bearer
 * token). It may change `headers` and `url` (a query parameter); `body` is
 * exactly the bytes sent (a string is sent as UTF-8).
 */
export interface OutgoingRequest {
  url: string;
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  readonly body: string | Buffer | undefined;
}

/**
 * The authorize/sign step of a provider plugin (ProviderPlugin.authorize),
 * run on every upstream request after the body is serialised and the
 * operator's headers merged. It may be async (fetch or refresh a token); it
 * is bounded by the provider's `timeout_ms` and by the client's abort.
 */
export type Authorizer = (req: OutgoingRequest, call: ProviderCall<unknown>) => void | Promise<void>;

export interface UpstreamCallOptions {
  url: string;
  method?: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  body?: unknown;
  mapError: ErrorMapper;
  /**
   * This call's authorize step instead of the plugin's; `null` sends the
   * request unauthorized (e.g. the token request an authorize step makes itself).
   */
  authorize?: Authorizer | null;
  /** How a stream's body is framed (upstreamEvents). Default: SSE. */
  framing?: Framing;
}

export function parseRetryAfter(h: Record<string, string | string[] | undefined>): number | undefined {
  const ms = h['retry-after-ms'];
  if (typeof ms === 'string' && Number.isFinite(Number(ms))) return Number(ms);
  const ra = h['retry-after'];
  if (typeof ra !== 'string') return undefined;
  const s = Number(ra);
  if (Number.isFinite(s)) return s * 1000;
  const at = Date.parse(ra);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/**
 * The request body as JSON: from the client's own bytes where the body is
 * the client's request sent on (src/json-source.ts), else JSON.stringify. A
 * body JSON.stringify cannot take (nested too deeply for the stack, too large
 * for a string) is the request's problem, not the provider's: a 400 that is
 * not retried elsewhere and charges no failure to the provider (a RangeError
 * would have counted towards its cool-down, for every other client).
 */
function serialise(body: unknown, provider: string): string | Buffer {
  try {
    return body !== null && typeof body === 'object' ? serialiseBody(body) : JSON.stringify(body);
  } catch {
    throw errors.invalid(`The request could not be serialised for provider ${provider}: it is nested too deeply or too large.`, null, 'request_not_serialisable');
  }
}

/** The request as the transport gets it: serialised, the operator's headers merged, authorized. */
async function outgoing(call: ProviderCall<unknown>, o: UpstreamCallOptions, streaming: boolean): Promise<UpstreamRequest> {
  const body = o.body === undefined ? undefined : typeof o.body === 'string' || Buffer.isBuffer(o.body) ? o.body : serialise(o.body, call.provider.name);
  // The plugin's headers first; the operator's `headers` in gateway.yaml win.
  let headers: Record<string, string> = { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...o.headers, ...call.provider.headers };
  if (call.traceparent) headers.traceparent = call.traceparent;
  let url = o.url;
  const method = o.method ?? 'POST';
  const authorize = o.authorize === undefined ? call.authorize : o.authorize;
  if (authorize) {
    const out: OutgoingRequest = { url, method, headers, body };
    await authorizeWithin(authorize(out, call), call);
    ({ url, headers } = out);
  }
  return {
    pool: call.provider.pool ?? call.provider.name,
    url,
    method,
    headers,
    body: body as Buffer | string | undefined,
    signal: call.signal,
    firstByteTimeoutMs: call.provider.timeout_ms,
    maxSockets: call.provider.max_sockets,
    releaseBody: streaming,
  };
}

/** A transport failure named by its provider, never by its address. */
function named(err: unknown, call: ProviderCall<unknown>): unknown {
  return err instanceof TransportError ? namedTransportError(err, call.provider.name) : err;
}

/** The UpstreamError of an answer with status >= 400, from its body (the mapper gets the JSON, or the text). */
function answerError(status: number, bytes: Buffer, headers: UpstreamResponse['headers'], o: UpstreamCallOptions): UpstreamError {
  const text = bytes.toString('utf8');
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON: the mapper gets the text */
  }
  const mapped = o.mapError(status, parsed, text, headers);
  return new UpstreamError(status, mapped.error, mapped.retryAfterMs ?? parseRetryAfter(headers));
}

export async function upstreamRequest(call: ProviderCall<unknown>, o: UpstreamCallOptions, streaming = false): Promise<UpstreamResponse> {
  const req = await outgoing(call, o, streaming);
  let res: UpstreamResponse;
  try {
    res = await call.transport.request(req);
  } catch (err) {
    throw named(err, call);
  }
  if (res.status >= 400) throw answerError(res.status, await readBody(res.body, undefined, call.provider.stream_idle_timeout_ms), res.headers, o);
  return res;
}

/**
 * Wait for an async authorize step, at most the provider's timeout_ms, and
 * no longer than the client stays: a token endpoint that hangs must not hold
 * the request (the attempt fails over like a first-byte timeout).
 */
function authorizeWithin(pending: void | Promise<void>, call: ProviderCall<unknown>): void | Promise<void> {
  if (!pending || typeof (pending as Promise<void>).then !== 'function') return;
  const ms = call.provider.timeout_ms;
  return new Promise<void>((resolve, reject) => {
    const done = (err?: unknown) => {
      clearTimeout(timer);
      call.signal.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = () => done(new TransportError('request aborted while it was authorized', 'ABORTED'));
    const timer = setTimeout(() => done(new TransportError(`the authorize step did not finish within ${ms} ms`, 'ETIMEDOUT_AUTHORIZE')), ms);
    if (call.signal.aborted) return onAbort();
    call.signal.addEventListener('abort', onAbort, { once: true });
    (pending as Promise<void>).then(
      () => done(),
      (err: unknown) => done(err ?? new Error('authorize failed')),
    );
  });
}

/** The most an upstream JSON answer may be (readBody's default). */
const JSON_LIMIT = 64 * 1024 * 1024;

export async function upstreamJson<T = Record<string, unknown>>(call: ProviderCall<unknown>, o: UpstreamCallOptions): Promise<T> {
  // A body that stops arriving half-way is bounded like a silent stream.
  const idleMs = call.provider.stream_idle_timeout_ms;
  let buf: Buffer;
  if (call.transport.requestWhole) {
    // The whole answer from the transport at once: no body stream to read it from.
    const req = await outgoing(call, o, false);
    let res: WholeResponse;
    try {
      res = await call.transport.requestWhole(req, JSON_LIMIT, idleMs);
    } catch (err) {
      throw named(err, call);
    }
    if (res.status >= 400) throw answerError(res.status, res.body, res.headers, o);
    buf = res.body;
  } else {
    const res = await upstreamRequest(call, o);
    buf = await readBody(res.body, JSON_LIMIT, idleMs);
  }
  try {
    return JSON.parse(buf.toString('utf8')) as T;
  } catch {
    throw unparseable('the provider answered with a body that is not JSON');
  }
}

/** A streamed upstream answer as events, in the call's framing (SSE unless `o.framing` says otherwise). */
export async function upstreamEvents(call: ProviderCall<unknown>, o: UpstreamCallOptions): Promise<AsyncGenerator<SSEEvent>> {
  const framing = o.framing ?? sseFraming;
  const res = await upstreamRequest(call, o, true);
  const ct = String(res.headers['content-type'] ?? '');
  if (framing.contentTypes.length && !framing.contentTypes.some((t) => ct.includes(t))) {
    res.body.resume();
    throw unparseable(`the provider answered a stream request with content-type "${ct || 'none'}"`);
  }
  return new UpstreamEvents(res, framing.parser(), call.provider.stream_idle_timeout_ms, call.signal);
}

/** Join a base URL and a path without doubling slashes. */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + (path.startsWith('/') ? path : '/' + path);
}

/** A token count from a provider's counting endpoint; anything but a whole number is an unusable answer. */
export function tokenCount(n: unknown): number {
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0) return n;
  throw unparseable('the provider answered its token count without a count');
}
