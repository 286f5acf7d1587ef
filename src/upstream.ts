// The upstream transport: every provider call goes through here.
//
// It is built on http-proxy-3 (the design's proxy toolkit) with one keep-alive
// agent per provider. Each call hands http-proxy-3 a synthetic incoming request
// that carries only the headers the provider plugin chose, never the client's:
// http-proxy-3 forwards every header of the request it is given, Authorization
// and Cookie included (shared/STACK.md), so giving it the client's request would
// leak the client's key upstream.
//
// The Transport interface is small on purpose so that a faster transport can
// be offered behind it (issue 6) without touching the providers. Two exist:
// createHttpTransport() below, a plain node:http request on the same
// keep-alive agents (`server.transport: http`, the default since the benchmark
// measured ~25% more throughput and ~0.1 ms less added latency with it), and
// this http-proxy-3 one (`server.transport: proxy`).
import { EventEmitter } from 'node:events';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ClientRequest } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';

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
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: IncomingMessage;
}

export interface Transport {
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  close(): void;
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

interface Pending {
  resolve(res: IncomingMessage): void;
  proxyReq?: ClientRequest;
}
const kPending = Symbol('pending');

/** Which transport `server.transport` names. */
export type TransportKind = 'proxy' | 'http';

/** `http` is the default (server.transport): ~25% more throughput than http-proxy-3 for the same work (BENCHMARKS.md). */
export function createTransport(kind: TransportKind = 'http'): Transport {
  return kind === 'http' ? createHttpTransport() : createProxyTransport();
}

/** One keep-alive agent per provider (pool) and scheme. */
function createAgents() {
  const agents = new Map<string, http.Agent>();
  return {
    get(pool: string, isHttps: boolean, maxSockets: number): http.Agent {
      const key = `${isHttps ? 's' : ''}:${pool}`;
      let a = agents.get(key);
      if (!a) {
        const opts = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo' as const };
        a = isHttps ? new https.Agent(opts) : new http.Agent(opts);
        agents.set(key, a);
      }
      return a;
    },
    close() {
      for (const a of agents.values()) a.destroy();
      agents.clear();
    },
  };
}

export function createProxyTransport(): Transport {
  const agents = createAgents();
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
            resolve({ status: upstream.statusCode ?? 502, headers: upstream.headers, body: upstream });
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
          buffer: body ? Readable.from([body]) : Readable.from([]),
        } as never, (err: Error) => {
          const code = (err as NodeJS.ErrnoException).code ?? 'EUPSTREAM';
          finish(new TransportError(`${code}: ${err.message}`, code));
        });
      });
    },
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
          resolve({ status: upstream.statusCode ?? 502, headers: upstream.headers, body: upstream });
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
        req.on('error', (err: NodeJS.ErrnoException) => {
          const code = err.code ?? 'EUPSTREAM';
          finish(new TransportError(`${code}: ${err.message}`, code));
        });
        // Headers and body leave in one write.
        req.end(body);
      });
    },
    close() {
      agents.close();
    },
  };
}

/** Read a whole (small, non-streaming) upstream body. */
export function readBody(res: IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  // Plain 'data'/'end' listeners: `for await` over the stream builds an async
  // iterator and a promise per chunk, a measurable share of a small call (BENCHMARKS.md).
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.off('close', onClose);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        cleanup();
        res.destroy();
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
      reject(err);
    };
    // Destroyed before 'end' (abort, socket closed mid-body): the same error `for await` gives.
    const onClose = () => {
      cleanup();
      reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    res.on('data', onData);
    res.once('end', onEnd);
    res.once('error', onError);
    res.once('close', onClose);
  });
}
