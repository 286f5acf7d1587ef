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
// be offered behind it (issue 6) without touching the providers.
import { EventEmitter } from 'node:events';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ClientRequest } from 'node:http';
import https from 'node:https';
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

export function createProxyTransport(): Transport {
  const agents = new Map<string, http.Agent>();
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

  function agentFor(pool: string, isHttps: boolean, maxSockets: number): http.Agent {
    const key = `${isHttps ? 's' : ''}:${pool}`;
    let a = agents.get(key);
    if (!a) {
      const opts = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo' as const };
      a = isHttps ? new https.Agent(opts) : new http.Agent(opts);
      agents.set(key, a);
    }
    return a;
  }

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
          agent: agentFor(r.pool, isHttps, r.maxSockets ?? 256),
          buffer: body ? Readable.from([body]) : Readable.from([]),
        } as never, (err: Error) => {
          const code = (err as NodeJS.ErrnoException).code ?? 'EUPSTREAM';
          finish(new TransportError(`${code}: ${err.message}`, code));
        });
      });
    },
    close() {
      for (const a of agents.values()) a.destroy();
      agents.clear();
      proxy.close();
    },
  };
}

/** Read a whole (small, non-streaming) upstream body. */
export async function readBody(res: IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res) {
    size += (c as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw new TransportError('upstream body too large', 'EBODYTOOLARGE');
    }
    chunks.push(c as Buffer);
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}
