// An upstream stream body as events, parsed as its chunks arrive.
import type { UpstreamResponse } from '../upstream/transport.js';
import { bodyError, idleTimeout, TransportError } from '../upstream/errors.js';
import { SSEParser, type SSEEvent } from '../sse.js';
import { GatewayError } from '../errors.js';
import { UpstreamError, unparseable } from '../provider/errors.js';
import type { FrameParser } from './framing.js';
import { BatchIterator } from './batches.js';

/** Events parsed ahead of the consumer before the body is paused (back-pressure). */
const HIGH_WATER_EVENTS = 256;

/**
 * An upstream stream body as batches of events, parsed synchronously by its
 * framing's parser (SSE by default) as the body's chunks arrive: the events
 * of one chunk cost the consumer one promise, where a chain of async
 * generators (the stream's own iterator, a chunk generator, a parser
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
export class UpstreamEvents extends BatchIterator<SSEEvent> {
  private queue: SSEEvent[] = [];
  private ended = false;
  private closed = false;
  private detached = false;
  private failure: Error | undefined;
  /** The consumer reading by push (onReady): called when events, the end or a failure arrive. */
  private listener: (() => void) | undefined;
  /** The consumer waiting for events. */
  private waiter: { resolve(events: SSEEvent[] | null): void; reject(e: unknown): void } | undefined;
  /** Armed while the body is read: the upstream sent nothing for `idleMs` (refreshed on every chunk). */
  private idle: NodeJS.Timeout | undefined;
  private readonly onIdle = () => {
    // Events not yet taken, or a body paused for them: the consumer is behind, the upstream is not silent.
    if (this.queue.length || this.res.body.isPaused()) {
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
    if (this.queue.length >= HIGH_WATER_EVENTS) this.res.body.pause();
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

  /** Every event parsed so far (at least one: waits for it), or null at the end. */
  protected pull(): Promise<SSEEvent[] | null> {
    if (this.queue.length) return Promise.resolve(this.takeAll());
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended || this.closed) return Promise.resolve(null);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  override get pushes(): boolean {
    return true;
  }

  /** Every event parsed so far, null at the end, undefined for none yet; throws the body's failure. */
  protected override pullReady(): SSEEvent[] | null | undefined {
    if (this.queue.length) return this.takeAll();
    if (this.failure) throw this.failure;
    if (this.ended || this.closed) return null;
    return undefined;
  }

  override onReady(fn: (() => void) | undefined): void {
    this.listener = fn;
  }

  private takeAll(): SSEEvent[] {
    const out = this.queue;
    this.queue = [];
    // The queue is empty: a body paused for back-pressure may flow again.
    if (!this.ended && this.res.body.isPaused()) {
      this.idle?.refresh();
      this.res.body.resume();
    }
    return out;
  }

  private wake(): void {
    const w = this.waiter;
    if (!w) {
      // Read by push: the reader takes what is there now, inside this data event.
      if (this.listener && (this.queue.length || this.failure || this.ended)) this.listener();
      return;
    }
    if (this.queue.length) {
      this.waiter = undefined;
      w.resolve(this.takeAll());
    } else if (this.failure) {
      this.waiter = undefined;
      w.reject(this.failure);
    } else if (this.ended) {
      this.waiter = undefined;
      w.resolve(null);
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
    this.dropKept();
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    const wasEnded = this.ended || this.failure !== undefined;
    this.listener = undefined;
    this.detach();
    if (!wasEnded) this.res.release();
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve(null);
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
