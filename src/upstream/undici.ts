// The `undici` transport (the default): undici's connection pools.
import type { IncomingHttpHeaders } from 'node:http';
import type { Pool, Dispatcher } from 'undici';
import { undiciPool } from '../lazy.js';
import { poolIn, type Transport, type UpstreamRequest, type UpstreamResponse, type WholeResponse } from './transport.js';
import { TransportError, socketError, bodyError, idleTimeout } from './errors.js';
import { oneShot, ONE_SHOT_MIN_BYTES } from './body.js';

/**
 * The same contract on undici's connection pools (one Pool per provider and
 * origin, `max_sockets` connections, keep-alive). undici's HTTP/1.1 client
 * does less per call than node:http's ClientRequest + Agent (docs/performance.md,
 * `server.transport`). Headers come only from
 * the plugin; the first-byte deadline is undici's headersTimeout; the
 * request's AbortSignal tears the call down before and after the headers.
 */
export function createUndiciTransport(): Transport {
  const pools = new Map<string, Pool>();
  const targets = new Map<string, { key: string; origin: string; path: string }>();
  const targetOf = (pool: string, url: string) => {
    const k = pool + '\0' + url;
    let t = targets.get(k);
    if (!t) {
      const u = new URL(url);
      t = { key: `${pool}\0${u.origin}`, origin: u.origin, path: u.pathname + u.search };
      if (targets.size > 1000) targets.clear();
      targets.set(k, t);
    }
    return t;
  };
  const poolFor = (t: { key: string; origin: string }, maxSockets: number, timeoutMs: number) => {
    let p = pools.get(t.key);
    if (!p) {
      // timeout_ms bounds the connect (undici's own default is 10 s) and then the wait for the headers.
      p = new (undiciPool())(t.origin, { connections: maxSockets, pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, connectTimeout: timeoutMs });
      pools.set(t.key, p);
    }
    return p;
  };

  return {
    requestWhole(r: UpstreamRequest, limit: number, idleMs?: number): Promise<WholeResponse> {
      if (r.signal.aborted) return Promise.reject(new TransportError('aborted before sending', 'ABORTED'));
      const t = targetOf(r.pool, r.url);
      const method = r.method ?? 'POST';
      return new Promise<WholeResponse>((resolve, reject) => {
        const handler = new WholeHandler(r.signal, limit, idleMs, r.firstByteTimeoutMs, resolve, reject);
        poolFor(t, r.maxSockets ?? 256, r.firstByteTimeoutMs).dispatch(
          { path: t.path, method, headers: r.headers, body: r.body ?? (method === 'GET' ? undefined : ''), headersTimeout: r.firstByteTimeoutMs, bodyTimeout: 0 },
          handler,
        );
      });
    },
    async request(r: UpstreamRequest): Promise<UpstreamResponse> {
      if (r.signal.aborted) throw new TransportError('aborted before sending', 'ABORTED');
      const t = targetOf(r.pool, r.url);
      const method = r.method ?? 'POST';
      // A stream object costs about 1 KB for the life of the call itself: worth it only for a body larger than that.
      const oneShotBody = r.releaseBody === true && r.body !== undefined && r.body.length > ONE_SHOT_MIN_BYTES;
      let res: Dispatcher.ResponseData;
      try {
        res = await poolFor(t, r.maxSockets ?? 256, r.firstByteTimeoutMs).request({
          path: t.path,
          method,
          headers: oneShotBody ? { ...r.headers, 'content-length': String(Buffer.byteLength(r.body!)) } : r.headers,
          body: oneShotBody ? oneShot(r.body!) : (r.body ?? (method === 'GET' ? undefined : '')),
          signal: r.signal,
          headersTimeout: r.firstByteTimeoutMs,
          bodyTimeout: 0,
        });
      } catch (err) {
        throw undiciError(err, r.firstByteTimeoutMs);
      }
      const body = res.body;
      return {
        status: res.statusCode,
        headers: res.headers as IncomingHttpHeaders,
        body,
        release() {
          // Read what is left (a few bytes after a terminal event) so the connection is reused; give up after 100 ms or 256 KiB.
          // A plain timer, cleared when the body closes: AbortSignal.timeout() always fired its timer, 100 ms after every
          // stream, and made a DOMException (with its stack) for an abort nobody waited for.
          if (body.destroyed || body.readableEnded) return;
          const giveUp = setTimeout(() => body.destroy(), 100).unref();
          const done = () => clearTimeout(giveUp);
          body.dump({ limit: 256 * 1024 }).then(done, done);
        },
      };
    },
    retire(names: ReadonlySet<string>) {
      for (const [key, p] of pools) {
        if (!poolIn(key.slice(0, key.indexOf('\0')), names)) continue;
        pools.delete(key);
        // undici's close() lets the requests under way (their bodies included) finish first.
        void p.close().catch(() => {});
      }
      for (const [k, t] of targets) if (!pools.has(t.key) && poolIn(k.slice(0, k.indexOf('\0')), names)) targets.delete(k);
    },
    close() {
      for (const p of pools.values()) void p.destroy().catch(() => {});
      pools.clear();
    },
  };
}

/**
 * A whole answer read straight from undici's dispatch handler: no response
 * object, body stream or stream events (what `request()` gives a JSON call
 * costs more than reading it). The same outcomes as request() + readBody():
 * the first-byte deadline (headersTimeout), the abort of the call's signal
 * before and after the headers, the body's size limit and idle deadline, and
 * the same TransportErrors.
 */
class WholeHandler implements Dispatcher.DispatchHandler {
  private abortCall: ((err?: Error) => void) | undefined;
  private status = 0;
  private raw: Buffer[] = [];
  private chunks: Buffer[] = [];
  private size = 0;
  private idle: NodeJS.Timeout | undefined;
  private settled = false;
  private readonly onAbort = () => this.fail(new TransportError('request aborted', 'ABORTED'));

  constructor(
    private readonly signal: AbortSignal,
    private readonly limit: number,
    private readonly idleMs: number | undefined,
    private readonly firstByteMs: number,
    private readonly resolve: (r: WholeResponse) => void,
    private readonly reject: (err: Error) => void,
  ) {
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortCall = abort;
    if (this.settled) abort();
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200) return true; // 1xx: the answer is still to come
    this.status = statusCode;
    this.raw = rawHeaders;
    if (this.idleMs) this.idle = setTimeout(() => this.fail(idleTimeout(this.idleMs!)), this.idleMs);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.idle?.refresh();
    this.size += chunk.length;
    if (this.size > this.limit) this.fail(new TransportError('upstream body too large', 'EBODYTOOLARGE'));
    else this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.settled) return;
    this.done();
    const c = this.chunks;
    this.resolve({ status: this.status, headers: headersOf(this.raw), body: c.length === 1 ? c[0] : Buffer.concat(c) });
  }

  onError(err: Error): void {
    if (this.settled) return;
    this.done();
    // After the headers, a broken body (readBody's errors); before them, the call's (request()'s).
    this.reject(this.status ? bodyError(err) : undiciError(err, this.firstByteMs));
  }

  /** Give up on the call: `err` is the outcome, the connection is torn down. */
  private fail(err: TransportError): void {
    if (this.settled) return;
    this.done();
    this.reject(err);
    this.abortCall?.(err);
  }

  private done(): void {
    this.settled = true;
    if (this.idle) clearTimeout(this.idle);
    this.signal.removeEventListener('abort', this.onAbort);
  }
}

/** undici's raw response headers as node:http's object: names in lower case, a repeated header's values in an array. */
function headersOf(raw: Buffer[]): IncomingHttpHeaders {
  const h: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i].toString('latin1').toLowerCase();
    const v = raw[i + 1].toString('utf8');
    const prev = h[k];
    h[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return h;
}

function undiciError(err: unknown, timeoutMs: number): TransportError {
  const e = err as { code?: string; message?: string; name?: string; cause?: { code?: string; message?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return new TransportError(`no response within ${timeoutMs} ms`, 'ETIMEDOUT_FIRST_BYTE');
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new TransportError(`no response within ${timeoutMs} ms (the connection was not established)`, 'ETIMEDOUT_FIRST_BYTE');
  if (code === 'UND_ERR_ABORTED' || e?.name === 'AbortError') return new TransportError('request aborted', 'ABORTED');
  if (code === 'UND_ERR_SOCKET') return new TransportError('the connection failed (ECONNRESET)', 'ECONNRESET');
  return socketError({ code: code ?? 'EUPSTREAM' });
}
