// The `proxy` transport: http-proxy-3, the design's proxy toolkit, on the
// keep-alive agents (agents.ts). http-proxy-3 forwards every header of the
// request it is given, Authorization and Cookie included, so it is handed a
// synthetic incoming request that carries the plugin's headers only, and a
// synthetic response (the upstream response is handled here).
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ClientRequest } from 'node:http';
import { createRequire } from 'node:module';
import type { Transport, UpstreamRequest, UpstreamResponse } from './transport.js';
import { TransportError, socketError } from './errors.js';
import { oneShot } from './body.js';
import { createAgents, outgoing, releaseIncoming } from './agents.js';

const require = createRequire(import.meta.url);

interface Pending {
  resolve(res: IncomingMessage): void;
  proxyReq?: ClientRequest;
}
const kPending = Symbol('pending');

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
        const { body, headers } = outgoing(r, target.host);
        // The listeners below live as long as the response and reach `r`: let them reach it without its body.
        if (r.releaseBody) r = { ...r, body: undefined };

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
