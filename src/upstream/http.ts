// The `http` transport: node:http / node:https requests on the keep-alive
// agents (agents.ts).
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { http, https } from '../lazy.js';
import type { Transport, UpstreamRequest, UpstreamResponse } from './transport.js';
import { TransportError, socketError } from './errors.js';
import { createAgents, outgoing, releaseIncoming } from './agents.js';

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
        const { body, headers } = outgoing(r, target.host);
        // The listeners below live as long as the response and reach `r`: let them reach it without its body.
        if (r.releaseBody) r = { ...r, body: undefined };

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

        const req = (target.isHttps ? https() : http).request(
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
