// The upstream transport: every provider call goes through here.
//
// The Transport interface is small on purpose so that providers never depend
// on the HTTP client under it. Three exist (`server.transport`; what each buys
// is in docs/performance.md): undici connection pools (`undici`, the default),
// node:http requests on one keep-alive agent per provider (`http`), and
// http-proxy-3, the design's proxy toolkit, on the same agents (`proxy`).
//
// Whatever the transport, only the headers the provider plugin chose are sent,
// never the client's. http-proxy-3 forwards every header of the request it is
// given, Authorization and Cookie included, so the proxy transport hands it a
// synthetic incoming request that carries the plugin's headers only.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, IncomingMessage, ClientRequest, Agent } from 'node:http';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import { createRequire } from 'node:module';
import type { Pool, Dispatcher } from 'undici';
import { http, https, undiciPool } from './lazy.js';

const require = createRequire(import.meta.url);

export interface UpstreamRequest {
  /** Pool key: one keep-alive agent per provider. */
  pool: string;
  url: string;
  method?: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  body?: Buffer | string;
  /** Aborting it destroys the upstream request at once (client gone, deadline). */
  signal: AbortSignal;
  /** No response headers within this time: the call fails with ETIMEDOUT_FIRST_BYTE. */
  firstByteTimeoutMs: number;
  maxSockets?: number;
  /**
   * The response may last minutes (a stream): do not keep the request body
   * referenced while it is read. A 31 KB conversation otherwise stays in memory
   * for the whole stream, once per open stream. (undici transport, bodies over
   * ONE_SHOT_MIN_BYTES; the http and proxy transports drop their own
   * reference once the body is handed to node:http.)
   */
  releaseBody?: boolean;
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Readable;
  /**
   * The consumer stopped reading before the end (a provider plugin stops at
   * its terminal event, usually before the response's own end has been
   * parsed): let the connection go back to the keep-alive pool if the rest
   * arrives at once, destroy it otherwise. Never waits on the upstream for
   * long: a consumer that stopped on an error must not keep it streaming.
   */
  release(): void;
}

/** release() for a node:http response: drain a complete one into the pool, give one still arriving 100 ms. */
export function releaseIncoming(body: IncomingMessage): void {
  if (body.destroyed || body.readableEnded) return;
  if (!body.complete) {
    const t = setTimeout(() => body.destroy(), 100);
    const clear = () => clearTimeout(t);
    body.once('end', clear);
    body.once('close', clear);
  }
  body.resume();
}

export interface Transport {
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  /**
   * Close the pools of these names (and of `<name>#...`) once the calls on
   * them have ended; a later call under such a name opens a new pool. A
   * config reload retires the pools of providers it removed or reconnected
   * (src/reload.ts).
   */
  retire?(pools: ReadonlySet<string>): void;
  close(): void;
}

/** Whether a pool name belongs to one of these pools (`openai`, or `vertex#oauth` for `vertex`). */
export function poolIn(name: string, pools: ReadonlySet<string>): boolean {
  if (pools.has(name)) return true;
  const hash = name.indexOf('#');
  return hash > 0 && pools.has(name.slice(0, hash));
}

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

interface Pending {
  resolve(res: IncomingMessage): void;
  proxyReq?: ClientRequest;
}
const kPending = Symbol('pending');

/** Which transport `server.transport` names. */
export type TransportKind = 'proxy' | 'http' | 'undici';

/**
 * `undici` is the default (server.transport): its connection pool and parser
 * cost less CPU per call than node:http's client (docs/performance.md); `http` is
 * node:http on keep-alive agents, `proxy` is http-proxy-3.
 */
export function createTransport(kind: TransportKind = 'undici'): Transport {
  return kind === 'undici' ? createUndiciTransport() : kind === 'http' ? createHttpTransport() : createProxyTransport();
}

/** One keep-alive agent per provider (pool) and scheme. */
function createAgents() {
  const agents = new Map<string, Agent>();
  return {
    get(pool: string, isHttps: boolean, maxSockets: number): Agent {
      const key = `${isHttps ? 's' : ''}:${pool}`;
      let a = agents.get(key);
      if (!a) {
        const opts = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo' as const };
        a = isHttps ? new https.Agent(opts) : new http.Agent(opts);
        agents.set(key, a);
      }
      return a;
    },
    retire(pools: ReadonlySet<string>) {
      for (const [key, a] of agents) {
        if (!poolIn(key.slice(key.indexOf(':') + 1), pools)) continue;
        agents.delete(key);
        // A socket handed back is destroyed from now on; the ones in use finish their call.
        a.maxFreeSockets = 0;
        for (const list of Object.values(a.freeSockets)) for (const s of list ?? []) s.destroy();
      }
    },
    close() {
      for (const a of agents.values()) a.destroy();
      agents.clear();
    },
  };
}

export function createProxyTransport(): Transport {
  const agents = createAgents();
  // Loaded only for this transport (not the default).
  const { createProxyServer } = require('http-proxy-3') as typeof import('http-proxy-3');
  const proxy = createProxyServer({});
  // Route the proxy's server-level events back to the call that caused them.
  proxy.on('proxyReq', (proxyReq: ClientRequest, req: unknown) => {
    const p = (req as { [kPending]?: Pending })[kPending];
    if (p) p.proxyReq = proxyReq;
  });
  proxy.on('proxyRes', (proxyRes: IncomingMessage, req: unknown) => {
    (req as { [kPending]?: Pending })[kPending]?.resolve(proxyRes);
  });
  // Errors without a per-call callback (econnreset after abort) are expected.
  proxy.on('error', () => {});
  proxy.on('econnreset', () => {});

  return {
    request(r: UpstreamRequest): Promise<UpstreamResponse> {
      return new Promise<UpstreamResponse>((resolve, reject) => {
        if (r.signal.aborted) return reject(new TransportError('aborted before sending', 'ABORTED'));
        const target = new URL(r.url);
        const isHttps = target.protocol === 'https:';
        const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body);
        // The listeners below live as long as the response and reach `r`: let them reach it without its body.
        if (r.releaseBody) r = { ...r, body: undefined };
        const headers: Record<string, string> = { ...r.headers, host: target.host };
        if (body) headers['content-length'] = String(body.length);
        else if (r.method !== 'GET') headers['content-length'] = '0';

        let settled = false;
        let timer: NodeJS.Timeout | undefined;
        const finish = (err: Error | null, res?: IncomingMessage) => {
          if (settled) return;
          settled = true;
          if (timer) clearTimeout(timer);
          r.signal.removeEventListener('abort', onAbort);
          if (err) {
            pending.proxyReq?.destroy();
            reject(err);
          } else {
            const upstream = res!;
            // After the headers, an abort still has to tear the stream down.
            const onLateAbort = () => upstream.destroy(new TransportError('aborted', 'ABORTED'));
            r.signal.addEventListener('abort', onLateAbort, { once: true });
            upstream.once('close', () => r.signal.removeEventListener('abort', onLateAbort));
            resolve({ status: upstream.statusCode ?? 502, headers: upstream.headers, body: upstream, release: () => releaseIncoming(upstream) });
          }
        };
        const pending: Pending = { resolve: (res) => finish(null, res) };
        const onAbort = () => finish(new TransportError('request aborted', 'ABORTED'));
        r.signal.addEventListener('abort', onAbort, { once: true });
        timer = setTimeout(
          () => finish(new TransportError(`no response within ${r.firstByteTimeoutMs} ms`, 'ETIMEDOUT_FIRST_BYTE')),
          r.firstByteTimeoutMs,
        );

        // The synthetic request: only what http-proxy-3 reads (method, url,
        // headers, httpVersion, socket flags, error events).
        const fakeSocket = { destroyed: false, setTimeout() {} };
        const req = Object.assign(new EventEmitter(), {
          method: r.method ?? 'POST',
          url: '/',
          headers,
          httpVersionMajor: 1,
          httpVersionMinor: 1,
          socket: fakeSocket,
          connection: fakeSocket,
          [kPending]: pending,
        });
        // The synthetic response: we handle the upstream response ourselves.
        const res = Object.assign(new EventEmitter(), { headersSent: true, finished: false, writableFinished: false, writableEnded: false });

        proxy.web(req as never, res as never, {
          target: target.href,
          ignorePath: true,
          selfHandleResponse: true,
          agent: agents.get(r.pool, isHttps, r.maxSockets ?? 256),
          buffer: oneShot(body ?? ''),
        } as never, (err: Error) => {
          finish(socketError(err));
        });
      });
    },
    retire: (pools) => agents.retire(pools),
    close() {
      agents.close();
      proxy.close();
    },
  };
}

/**
 * The same contract on a plain node:http / node:https request with the same
 * keep-alive agents. It does per call only what a gateway needs (the provider
 * plugin's headers, the body in one write with the headers, the first-byte
 * deadline, abort), without http-proxy-3's synthetic request/response pair,
 * body stream and event routing. Headers come only from the plugin, never from
 * the client, exactly as in the proxy transport.
 */
export function createHttpTransport(): Transport {
  const agents = createAgents();
  // Parsed upstream URLs: a provider calls a handful of URLs, and new URL() is not free.
  const targets = new Map<string, { isHttps: boolean; hostname: string; port: string; path: string; host: string; servername: string }>();
  const targetOf = (url: string) => {
    let t = targets.get(url);
    if (!t) {
      const u = new URL(url);
      const hostname = u.hostname.replace(/^\[(.*)\]$/, '$1');
      // SNI name, worked out once (the agent would parse the host header per request): none for an IP address or plain http.
      const servername = u.protocol === 'https:' && !isIP(hostname) ? hostname : '';
      t = { isHttps: u.protocol === 'https:', hostname, port: u.port, path: u.pathname + u.search, host: u.host, servername };
      if (targets.size > 1000) targets.clear();
      targets.set(url, t);
    }
    return t;
  };

  return {
    request(r: UpstreamRequest): Promise<UpstreamResponse> {
      return new Promise<UpstreamResponse>((resolve, reject) => {
        if (r.signal.aborted) return reject(new TransportError('aborted before sending', 'ABORTED'));
        const target = targetOf(r.url);
        const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body);
        // The listeners below live as long as the response and reach `r`: let them reach it without its body.
        if (r.releaseBody) r = { ...r, body: undefined };
        const headers: Record<string, string> = { ...r.headers, host: target.host };
        if (body) headers['content-length'] = String(body.length);
        else if (r.method !== 'GET') headers['content-length'] = '0';

        let settled = false;
        let upstream: IncomingMessage | undefined;
        const finish = (err: Error | null, res?: IncomingMessage) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (err) {
            r.signal.removeEventListener('abort', onAbort);
            req.destroy();
            reject(err);
            return;
          }
          upstream = res!;
          // The abort listener stays until the body is done: an abort after the headers tears the stream down.
          upstream.once('close', () => r.signal.removeEventListener('abort', onAbort));
          resolve({ status: upstream.statusCode ?? 502, headers: upstream.headers, body: upstream, release: () => releaseIncoming(upstream!) });
        };
        const onAbort = () => {
          if (upstream) upstream.destroy(new TransportError('aborted', 'ABORTED'));
          else finish(new TransportError('request aborted', 'ABORTED'));
        };
        r.signal.addEventListener('abort', onAbort, { once: true });
        const timer = setTimeout(
          () => finish(new TransportError(`no response within ${r.firstByteTimeoutMs} ms`, 'ETIMEDOUT_FIRST_BYTE')),
          r.firstByteTimeoutMs,
        );

        const req = (target.isHttps ? https : http).request(
          {
            hostname: target.hostname,
            port: target.port || undefined,
            path: target.path,
            method: r.method ?? 'POST',
            headers,
            servername: target.servername,
            agent: agents.get(r.pool, target.isHttps, r.maxSockets ?? 256),
          },
          (res) => finish(null, res),
        );
        // Errors after the response headers belong to the body stream (the
        // provider sees them while reading); this listener keeps a late one
        // from becoming an uncaught exception.
        req.on('error', (err: NodeJS.ErrnoException) => finish(socketError(err)));
        // Headers and body leave in one write.
        req.end(body);
      });
    },
    retire: (pools) => agents.retire(pools),
    close() {
      agents.close();
    },
  };
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

/**
 * Read a whole (small, non-streaming) upstream body. `idleMs`: a body that
 * stops arriving for this long fails with ETIMEDOUT_IDLE and is destroyed
 * (the headers came in time, the rest never does).
 */
export function readBody(res: Readable, limit = 64 * 1024 * 1024, idleMs?: number): Promise<Buffer> {
  // Plain 'data'/'end' listeners: `for await` over the stream builds an async
  // iterator and a promise per chunk, a measurable share of a small call.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Given up on: destroyed, its late error (undici's body errors when destroyed) not an uncaught exception.
    const drop = () => {
      cleanup();
      res.on('error', () => {});
      res.destroy();
    };
    const idle = idleMs
      ? setTimeout(() => {
          drop();
          reject(idleTimeout(idleMs));
        }, idleMs)
      : undefined;
    const cleanup = () => {
      if (idle) clearTimeout(idle);
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.off('close', onClose);
    };
    const onData = (c: Buffer) => {
      idle?.refresh();
      size += c.length;
      if (size > limit) {
        drop();
        reject(new TransportError('upstream body too large', 'EBODYTOOLARGE'));
        return;
      }
      chunks.push(c);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(bodyError(err));
    };
    // Destroyed before 'end' (abort, socket closed mid-body): the same error `for await` gives.
    const onClose = () => {
      cleanup();
      reject(bodyError(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
    };
    res.on('data', onData);
    res.once('end', onEnd);
    res.once('error', onError);
    res.once('close', onClose);
  });
}

/** releaseBody applies to bodies longer than this (bytes, or UTF-16 units for a string). */
export const ONE_SHOT_MIN_BYTES = 4096;

/**
 * A body undici forgets once it is written. undici keeps a Buffer or string
 * body referenced (its Request and its request handler) until the response
 * ends; a stream body is read once and holds nothing after. The headers (with
 * the content-length) and the body still leave in one corked write.
 */
export function oneShot(body: Buffer | string): Readable {
  let pending: Buffer | string | null = body;
  return new Readable({
    read() {
      const b = pending;
      pending = null;
      if (b !== null && b.length) this.push(b);
      this.push(null);
    },
  });
}

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
          if (!body.destroyed && !body.readableEnded) body.dump({ limit: 256 * 1024, signal: AbortSignal.timeout(100) }).catch(() => {});
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

function undiciError(err: unknown, timeoutMs: number): TransportError {
  const e = err as { code?: string; message?: string; name?: string; cause?: { code?: string; message?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return new TransportError(`no response within ${timeoutMs} ms`, 'ETIMEDOUT_FIRST_BYTE');
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new TransportError(`no response within ${timeoutMs} ms (the connection was not established)`, 'ETIMEDOUT_FIRST_BYTE');
  if (code === 'UND_ERR_ABORTED' || e?.name === 'AbortError') return new TransportError('request aborted', 'ABORTED');
  if (code === 'UND_ERR_SOCKET') return new TransportError('the connection failed (ECONNRESET)', 'ECONNRESET');
  return socketError({ code: code ?? 'EUPSTREAM' });
}
