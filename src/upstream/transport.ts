// The upstream transport's contract: every provider call goes through a
// Transport (src/provider/http.ts calls it). The interface is small on
// purpose so that providers never depend on the HTTP client under it. Three
// exist (`server.transport`, index.ts; what each buys is in
// docs/performance.md): undici connection pools (undici.ts, the default),
// node:http requests on one keep-alive agent per provider (http.ts), and
// http-proxy-3, the design's proxy toolkit, on the same agents (proxy.ts).
// Whatever the transport, only the headers the provider plugin chose are
// sent, never the client's.
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

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

/** A whole (small, non-streaming) answer: its status, headers and every byte of its body. */
export interface WholeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Transport {
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  /**
   * The whole answer at once (a JSON call): the body read with a size limit
   * (EBODYTOOLARGE) and, with `idleMs`, an idle deadline (ETIMEDOUT_IDLE), as
   * readBody() (body.ts) reads request()'s. Optional: a transport without it
   * is read through request(). The undici transport has it without a body
   * stream (docs/performance.md, "What a request costs").
   */
  requestWhole?(req: UpstreamRequest, limit: number, idleMs?: number): Promise<WholeResponse>;
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

/** Which transport `server.transport` names. */
export type TransportKind = 'proxy' | 'http' | 'undici';
