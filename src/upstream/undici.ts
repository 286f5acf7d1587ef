// The `undici` transport (the default): undici's connection pools.
import type { IncomingHttpHeaders } from 'node:http';
import type { Pool, Dispatcher } from 'undici';
import { undiciPool } from '../lazy.js';
import { poolIn, type Transport, type UpstreamRequest, type UpstreamResponse } from './transport.js';
import { TransportError, socketError } from './errors.js';
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
