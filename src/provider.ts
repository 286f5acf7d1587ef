// Helpers every provider plugin uses to call its upstream: headers, the
// authorize/sign step, status check, error mapping, JSON and streamed bodies.
// A stream's framing (SSE, newline-delimited JSON, or one a plugin supplies,
// such as a binary event stream with checksums) is parsed here, in one place, with the same
// back-pressure, release and abort behaviour whatever the framing; providers
// only see events.
import type { ProviderCall } from './plugin.js';
import { readBody, bodyError, idleTimeout, TransportError, namedTransportError, type UpstreamResponse } from './upstream.js';
import { SSEParser, type SSEEvent } from './sse.js';
import { GatewayError, errors, type ErrorBody } from './errors.js';

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

/** Parses an upstream stream's bytes into events as they arrive; synchronous (no promise per event). */
export interface FrameParser {
  /** Parse a chunk; complete events are appended to `out`. */
  push(chunk: Buffer, out: SSEEvent[]): void;
  /** The body ended: push a last complete event, or throw if the bytes left are a cut frame. */
  end(out: SSEEvent[]): void;
}

/**
 * A stream framing: how an upstream stream's bytes become events. Events
 * have the SSE shape whatever the framing: `event` is the event's type (an
 * SSE `event:` line, a binary frame's event-type header...), `data`
 * its payload as text, `headers` a binary framing's message headers.
 */
export interface Framing {
  name: string;
  /** Content types a stream in this framing is answered with (substring match); empty: any. */
  contentTypes: readonly string[];
  parser(): FrameParser;
}

/** Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html). */
export const sseFraming: Framing = { name: 'sse', contentTypes: ['text/event-stream'], parser: () => new SSEParser() };

/** Newline-delimited JSON (https://github.com/ndjson/ndjson-spec): one event per non-empty line, `data` the line. */
export const ndjsonFraming: Framing = {
  name: 'ndjson',
  contentTypes: ['application/x-ndjson', 'application/jsonl', 'application/json', 'application/jsonlines'],
  parser: () => new NdjsonParser(),
};

export class NdjsonParser implements FrameParser {
  private readonly decoder = new TextDecoder();
  private buf = '';

  push(chunk: Buffer, out: SSEEvent[]): void {
    const text = this.buf + this.decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      const line = text.slice(start, nl).trim();
      start = nl + 1;
      if (line) out.push({ data: line });
    }
    this.buf = text.slice(start);
  }

  end(out: SSEEvent[]): void {
    const line = (this.buf + this.decoder.decode()).trim();
    this.buf = '';
    if (line) out.push({ data: line });
  }
}

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
 * The request body as JSON text. A body JSON.stringify cannot take (nested
 * too deeply for the stack, too large for a string) is the request's
 * problem, not the provider's: a 400 that is not retried elsewhere and
 * charges no failure to the provider (a RangeError would have counted
 * towards its cool-down, for every other client).
 */
function serialise(body: unknown, provider: string): string {
  try {
    return JSON.stringify(body);
  } catch {
    throw errors.invalid(`The request could not be serialised for provider ${provider}: it is nested too deeply or too large.`, null, 'request_not_serialisable');
  }
}

export async function upstreamRequest(call: ProviderCall<unknown>, o: UpstreamCallOptions, streaming = false): Promise<UpstreamResponse> {
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
  let res: UpstreamResponse;
  try {
    res = await call.transport.request({
      pool: call.provider.pool ?? call.provider.name,
      url,
      method,
      headers,
      body: body as Buffer | string | undefined,
      signal: call.signal,
      firstByteTimeoutMs: call.provider.timeout_ms,
      maxSockets: call.provider.max_sockets,
      releaseBody: streaming,
    });
  } catch (err) {
    // Named by its provider, never by its address.
    throw err instanceof TransportError ? namedTransportError(err, call.provider.name) : err;
  }
  if (res.status >= 400) {
    const text = (await readBody(res.body, undefined, call.provider.stream_idle_timeout_ms)).toString('utf8');
    let parsed: unknown = undefined;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON: the mapper gets the text */
    }
    const mapped = o.mapError(res.status, parsed, text, res.headers);
    throw new UpstreamError(res.status, mapped.error, mapped.retryAfterMs ?? parseRetryAfter(res.headers));
  }
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

export async function upstreamJson<T = Record<string, unknown>>(call: ProviderCall<unknown>, o: UpstreamCallOptions): Promise<T> {
  const res = await upstreamRequest(call, o);
  // A body that stops arriving half-way is bounded like a silent stream.
  const buf = await readBody(res.body, undefined, call.provider.stream_idle_timeout_ms);
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


/** Events parsed ahead of the consumer before the body is paused (back-pressure). */
const HIGH_WATER_EVENTS = 256;
const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * The AsyncGenerator protocol around a stop(): return() and throw() stop the
 * source (handing the upstream connection back or dropping it) and report
 * done; the iterator is its own iterable.
 */
abstract class StoppableIterator<T> implements AsyncGenerator<T, undefined> {
  abstract next(): Promise<IteratorResult<T, undefined>>;
  protected abstract stop(): void;

  return(): Promise<IteratorResult<T, undefined>> {
    this.stop();
    return Promise.resolve(DONE);
  }

  throw(err?: unknown): Promise<IteratorResult<T, undefined>> {
    this.stop();
    return Promise.reject(err);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stop();
  }
}

/**
 * An upstream stream body as an async iterator of events, parsed synchronously
 * by its framing's parser (SSE by default)
 * as the body's chunks arrive: one promise per event at most, where a chain of
 * async generators (the stream's own iterator, a chunk generator, a parser
 * generator) costs several promises and iterator results per event
 * (docs/performance.md, "How streams are carried").
 *
 * The response is never destroyed when the consumer stops early. Provider
 * plugins stop at their terminal event ([DONE], message_stop), usually before
 * the response's own end has been read; a destroyed response closes its
 * socket, so every stream used to cost a new upstream connection (connect,
 * close, slow start) on both sides. When the consumer stops early the
 * transport's release() puts the connection back in the pool if the rest
 * arrives at once, and destroys it otherwise. A body that breaks is a
 * TransportError (bodyError).
 */
export class UpstreamEvents extends StoppableIterator<SSEEvent> implements BatchSource<SSEEvent> {
  private queue: SSEEvent[] = [];
  private head = 0;
  private ended = false;
  private closed = false;
  private detached = false;
  private failure: Error | undefined;
  /** The consumer waiting for events: next() for one, nextBatch() for all there are. */
  private waiter:
    | { batch: false; resolve(r: IteratorResult<SSEEvent, undefined>): void; reject(e: unknown): void }
    | { batch: true; resolve(events: SSEEvent[] | null): void; reject(e: unknown): void }
    | undefined;
  /** Armed while the body is read: the upstream sent nothing for `idleMs` (refreshed on every chunk). */
  private idle: NodeJS.Timeout | undefined;
  private readonly onIdle = () => {
    // Events not yet taken, or a body paused for them: the consumer is behind, the upstream is not silent.
    if (this.head < this.queue.length || this.res.body.isPaused()) {
      this.idle?.refresh();
      return;
    }
    this.fail(idleTimeout(this.idleMs!));
    // Tear the upstream request down: a silent upstream is not handed back to the pool.
    this.res.body.destroy();
  };
  private readonly onData = (chunk: Buffer) => {
    this.idle?.refresh();
    try {
      this.parser.push(chunk, this.queue);
    } catch (err) {
      // Bytes the framing cannot decode (a bad CRC, a broken frame): the rest of the body is useless.
      this.fail(undecodable(err));
      this.res.body.destroy();
      return;
    }
    if (this.queue.length - this.head >= HIGH_WATER_EVENTS) this.res.body.pause();
    this.wake();
  };
  private readonly onEnd = () => {
    try {
      this.parser.end(this.queue);
    } catch (err) {
      // A cut frame at the end of a binary framing: the stream broke.
      this.fail(undecodable(err));
      return;
    }
    this.ended = true;
    this.detach();
    this.wake();
  };
  private readonly onError = (err: unknown) => this.fail(bodyError(err));
  // Destroyed before 'end' (abort, socket closed mid-body): a premature close.
  private readonly onClose = () => {
    if (!this.ended) this.fail(bodyError(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
  };

  constructor(
    private readonly res: UpstreamResponse,
    private readonly parser: FrameParser = new SSEParser(),
    /** No byte from the upstream for this long: the stream fails with ETIMEDOUT_IDLE and the upstream is aborted. */
    private readonly idleMs?: number,
    /**
     * The call's signal: a body torn down by its abort fails with the abort's
     * reason when that is the gateway's own error (the shutdown deadline), so
     * the client's last frame says why.
     */
    private readonly signal?: AbortSignal,
  ) {
    super();
    const body = res.body;
    if (idleMs) {
      this.idle = setTimeout(this.onIdle, idleMs);
      this.idle.unref();
    }
    body.on('data', this.onData);
    body.once('end', this.onEnd);
    body.once('error', this.onError);
    body.once('close', this.onClose);
  }

  next(): Promise<IteratorResult<SSEEvent, undefined>> {
    if (this.head < this.queue.length) return Promise.resolve({ done: false, value: this.take() });
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended || this.closed) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => (this.waiter = { batch: false, resolve, reject }));
  }

  /**
   * Every event parsed so far (at least one: waits for it), or null at the
   * end: events that arrived in one chunk cost the consumer one promise.
   */
  nextBatch(): Promise<SSEEvent[] | null> {
    if (this.head < this.queue.length) return Promise.resolve(this.takeAll());
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended || this.closed) return Promise.resolve(null);
    return new Promise((resolve, reject) => (this.waiter = { batch: true, resolve, reject }));
  }

  private takeAll(): SSEEvent[] {
    const out = this.head === 0 ? this.queue : this.queue.slice(this.head);
    this.queue = [];
    this.emptied();
    return out;
  }

  private take(): SSEEvent {
    const ev = this.queue[this.head++];
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.emptied();
    }
    return ev;
  }

  /** The queue is empty: a body paused for back-pressure may flow again. */
  private emptied(): void {
    this.head = 0;
    if (this.res.body.isPaused() && !this.ended) {
      this.idle?.refresh();
      this.res.body.resume();
    }
  }

  /** Done for the waiter: null for a batch, the done result for one event. */
  private static finished(w: NonNullable<UpstreamEvents['waiter']>): void {
    if (w.batch) w.resolve(null);
    else w.resolve(DONE);
  }

  private wake(): void {
    const w = this.waiter;
    if (!w) return;
    if (this.head < this.queue.length) {
      this.waiter = undefined;
      if (w.batch) w.resolve(this.takeAll());
      else w.resolve({ done: false, value: this.take() });
    } else if (this.failure) {
      this.waiter = undefined;
      w.reject(this.failure);
    } else if (this.ended) {
      this.waiter = undefined;
      UpstreamEvents.finished(w);
    }
  }

  private fail(err: Error): void {
    if (this.ended || this.closed || this.failure) return;
    const reason: unknown = this.signal?.aborted ? this.signal.reason : undefined;
    this.failure = reason instanceof GatewayError ? reason : err;
    this.detach();
    // Events parsed before the failure are still delivered first.
    this.wake();
  }

  protected stop(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.head = 0;
    const wasEnded = this.ended || this.failure !== undefined;
    this.detach();
    if (!wasEnded) this.res.release();
    const w = this.waiter;
    this.waiter = undefined;
    if (w) UpstreamEvents.finished(w);
  }

  private detach(): void {
    if (this.detached) return;
    this.detached = true;
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    const body = this.res.body;
    body.off('data', this.onData);
    body.off('end', this.onEnd);
    body.off('error', this.onError);
    body.off('close', this.onClose);
    // A late error (a reset after the consumer stopped) must not become an uncaught exception.
    body.on('error', ignore);
  }
}

function ignore(): void {}

/** A framing parser's failure as an upstream fault (its own UpstreamError or TransportError kept). */
function undecodable(err: unknown): Error {
  if (err instanceof UpstreamError || err instanceof TransportError) return err;
  return unparseable(`the provider's stream could not be decoded (${err instanceof Error ? err.message : String(err)})`);
}

/**
 * A provider's stream mapping as a synchronous step per upstream event, so
 * that the writer can map a whole chunk of events to frames with one promise
 * (where an async generator per provider costs a promise, an iterator result
 * and several microtasks per event; docs/performance.md, "How streams are
 * carried").
 */
export interface EventMapper<T> {
  /** Push the items for one event to `out`; return true when this event ends the stream (nothing after it is read). */
  step(ev: SSEEvent, out: T[]): boolean;
  /** The upstream ended without a terminal event: push any closing items, or throw (a cut stream must not look finished). */
  end(out: T[]): void;
}

/** A source that hands out items in batches: the writer (src/respond.ts) maps and writes a batch at once. */
export interface BatchSource<T> extends AsyncIterable<T> {
  /** The next items (at least one), or null at the end. */
  nextBatch(): Promise<T[] | null>;
  return(): Promise<unknown>;
}

export function isBatchSource<T>(s: unknown): s is BatchSource<T> {
  return typeof (s as BatchSource<T> | undefined)?.nextBatch === 'function';
}

/** Read an iterator a batch at a time: its own batches when it has them, else one item per next(). */
export function batchesOf<T>(it: AsyncIterator<T>): () => Promise<T[] | null> {
  if (isBatchSource<T>(it)) return () => it.nextBatch();
  return () => it.next().then((r) => (r.done ? null : [r.value]));
}

/** The AsyncGenerator protocol over a pull() of batches; a batch kept back (a primed one, or the rest of one next() began) comes first. */
export abstract class BatchIterator<T> extends StoppableIterator<T> implements BatchSource<T> {
  private buf: T[] = [];
  private head = 0;

  /** The next batch from the source (at least one item), or null at the end. */
  protected abstract pull(): Promise<T[] | null>;

  nextBatch(): Promise<T[] | null> {
    if (this.head < this.buf.length) {
      const out = this.head === 0 ? this.buf : this.buf.slice(this.head);
      this.dropKept();
      return Promise.resolve(out);
    }
    return this.pull();
  }

  async next(): Promise<IteratorResult<T, undefined>> {
    if (this.head >= this.buf.length) {
      const batch = await this.pull();
      if (!batch) return DONE;
      this.keep(batch);
    }
    return { done: false, value: this.buf[this.head++] };
  }

  protected keep(batch: T[]): void {
    this.buf = batch;
    this.head = 0;
  }

  protected dropKept(): void {
    this.buf = [];
    this.head = 0;
  }
}

/**
 * Items mapped from upstream events by an EventMapper. An AsyncGenerator for
 * any consumer; the writer (src/respond.ts) and primeStream use nextBatch(),
 * which maps every event that arrived together in one go.
 */
export class MappedEvents<T> extends BatchIterator<T> {
  private readonly iter: AsyncIterator<SSEEvent>;
  private readonly read: () => Promise<SSEEvent[] | null>;
  private done = false;
  /** An error raised after some items of the same batch: thrown once those are delivered. */
  private failed: unknown;

  constructor(
    source: AsyncIterable<SSEEvent>,
    private readonly mapper: EventMapper<T>,
  ) {
    super();
    this.iter = source[Symbol.asyncIterator]();
    this.read = batchesOf(this.iter);
  }

  /** The items of the next upstream event(s) that made any (at least one), or null at the end. */
  protected async pull(): Promise<T[] | null> {
    if (this.failed !== undefined) {
      const err = this.failed;
      this.failed = undefined;
      throw err;
    }
    const out: T[] = [];
    try {
      while (!this.done && out.length === 0) {
        const events = await this.read();
        if (events === null) this.finish(out);
        else for (let i = 0; i < events.length && !this.done; i++) if (this.mapper.step(events[i], out)) this.terminal();
      }
    } catch (err) {
      this.stop();
      // What the events before the failing one made still goes out first, as it would have one by one.
      if (!out.length) throw err;
      this.failed = err;
    }
    return out.length ? out : null;
  }

  /** Read until the first item is ready (it stays queued for the consumer); false if the stream ended without one. */
  async prime(): Promise<boolean> {
    const first = await this.pull();
    if (!first) return false;
    this.keep(first);
    return true;
  }

  private finish(out: T[]): void {
    this.done = true;
    this.mapper.end(out);
  }

  /** The mapper saw the terminal event: hand the connection back at once. */
  private terminal(): void {
    this.done = true;
    void this.iter.return?.();
  }

  protected stop(): void {
    this.dropKept();
    if (this.done) return;
    this.done = true;
    void this.iter.return?.();
  }
}

/** The Responses API events that end a stream. */
export const RESPONSES_TERMINAL: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** An upstream event with its JSON data parsed. */
export interface JsonEvent {
  event?: string;
  data: Record<string, unknown>;
}

/**
 * A same-API stream's events with their JSON parsed, read in batches (a
 * MappedEvents, so the writer frames every event that arrived together at
 * once). `ends(type)` names the event that ends the stream (the data's
 * `type`, else the SSE event name): the connection goes back to the pool then.
 */
export function jsonEvents(source: AsyncIterable<SSEEvent>, ends: (type: string) => boolean): MappedEvents<JsonEvent> {
  return new MappedEvents(source, {
    step(ev, out) {
      const data = parseEventJson(ev.data);
      out.push({ event: ev.event, data });
      return ends(typeof data.type === 'string' ? data.type : (ev.event ?? ''));
    },
    end() {},
  });
}

export function unparseable(message: string): UpstreamError {
  return new UpstreamError(502, { message, type: 'api_error', param: null, code: 'invalid_upstream_response' });
}

/** Parse one SSE data payload, or fail the stream as an upstream fault. */
export function parseEventJson<T = Record<string, unknown>>(data: string): T {
  try {
    return JSON.parse(data) as T;
  } catch {
    throw unparseable('the provider sent a stream event that is not JSON');
  }
}

/** Join a base URL and a path without doubling slashes. */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + (path.startsWith('/') ? path : '/' + path);
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

/** A token count from a provider's counting endpoint; anything but a whole number is an unusable answer. */
export function tokenCount(n: unknown): number {
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0) return n;
  throw unparseable('the provider answered its token count without a count');
}
