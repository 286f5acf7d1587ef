// A real HTTP server on port 0 that plays a provider. It records every request
// (headers and parsed body) and can be told to misbehave for the next calls
// (status, delay, hang, cut mid-stream, garbage body), so that fault tests show
// what the gateway does with what a real upstream does.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: any;  
  raw: string;
  /** Set when the client (the gateway) closed the connection before the response ended. */
  aborted: boolean;
  /** Set when the whole response has been handed to the operating system. */
  finished: boolean;
}

export interface Fault {
  /** Answer with this status and body instead of the normal response. */
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait before answering. */
  delayMs?: number;
  /** Never answer. */
  hang?: boolean;
  /** Destroy the socket before answering (connection reset). */
  reset?: boolean;
  /** For streams: send this many events, then destroy the socket. */
  cutAfterEvents?: number;
  /** For streams: send this many events, then nothing more (the connection stays open until the client closes it). */
  silentAfterEvents?: number;
  /** For streams: wait this long between events (a slow model; a client can leave mid-stream). */
  frameDelayMs?: number;
  /** For JSON answers: send the headers and this many bytes of the body, then nothing more (the connection stays open). */
  stallAfterBytes?: number;
  /** Answer 200 with this raw text (e.g. not JSON). */
  rawBody?: string;
  /** Only apply to requests whose path includes this. */
  pathIncludes?: string;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** JSON body */
  json?: unknown;
  /** SSE events: each is written as its own frame, in order. */
  sse?: string[];
  /** Delay between SSE frames. */
  sseDelayMs?: number;
  /** For streams: after the first frame, wait for this before the others (a stream held open until a test lets it go). */
  sseGate?: Promise<unknown>;
}

export type Handler = (req: Recorded) => Reply | Promise<Reply>;

export interface MockServer {
  url: string;
  port: number;
  requests: Recorded[];
  /** TCP connections accepted so far (keep-alive reuse shows as fewer connections than requests). */
  readonly connections: number;
  /** TCP connections open now. */
  readonly open: number;
  faults: Fault[];
  /** Queue faults for the next requests, in order. */
  fail(...f: Fault[]): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startMock(handler: Handler): Promise<MockServer> {
  const requests: Recorded[] = [];
  const faults: Fault[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const u = new URL(req.url ?? '/', 'http://mock');
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = undefined;
    }
    const rec: Recorded = { method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, headers: req.headers, body, raw, aborted: false, finished: false };
    requests.push(rec);
    res.on('finish', () => (rec.finished = true));
    res.on('close', () => {
      if (!res.writableFinished) rec.aborted = true;
    });
    const fi = faults.findIndex((f) => !f.pathIncludes || rec.path.includes(f.pathIncludes));
    const fault = fi >= 0 ? faults.splice(fi, 1)[0] : undefined;
    if (fault?.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
    if (fault?.hang) return;
    if (fault?.reset) {
      req.socket.destroy();
      return;
    }
    if (fault?.rawBody !== undefined) {
      res.writeHead(fault.status ?? 200, { 'content-type': 'application/json', ...fault.headers });
      res.end(fault.rawBody);
      return;
    }
    if (fault?.status) {
      res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers });
      res.end(JSON.stringify(fault.body ?? { error: { message: `mock fault ${fault.status}` } }));
      return;
    }
    let reply: Reply;
    try {
      reply = await handler(rec);
    } catch (err) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `mock handler crashed: ${(err as Error).message}` } }));
      return;
    }
    if (reply.sse) {
      res.writeHead(reply.status, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...reply.headers });
      let n = 0;
      for (const frame of reply.sse) {
        if (res.destroyed) return;
        if (fault?.cutAfterEvents !== undefined && n >= fault.cutAfterEvents) {
          // Let what was written reach the wire, then drop the connection
          // without the final chunk: the client sees a premature close.
          await new Promise((r) => setTimeout(r, 30));
          res.socket?.destroy();
          return;
        }
        if (fault?.silentAfterEvents !== undefined && n >= fault.silentAfterEvents) return;
        res.write(frame);
        n++;
        if (n === 1 && reply.sseGate) await reply.sseGate;
        const pause = fault?.frameDelayMs ?? reply.sseDelayMs;
        if (pause) await new Promise((r) => setTimeout(r, pause));
      }
      res.end();
      return;
    }
    const text = reply.json === undefined ? '' : JSON.stringify(reply.json);
    if (fault?.stallAfterBytes !== undefined) {
      // The length of the whole body, and only its start: the client waits for the rest.
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers, 'content-length': String(Buffer.byteLength(text)) });
      res.write(text.slice(0, fault.stallAfterBytes));
      return;
    }
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(text);
  });
  const listening = await listenLocal(server);
  return {
    url: listening.url,
    port: listening.port,
    requests,
    get connections() {
      return listening.connections;
    },
    get open() {
      return listening.open;
    },
    faults,
    fail: (...f) => faults.push(...f),
    reset() {
      requests.length = 0;
      faults.length = 0;
    },
    close: listening.close,
  };
}

/** Listen on 127.0.0.1, port 0, counting TCP connections; close() drops the open sockets first (keep-alive ones too). */
export async function listenLocal(server: http.Server): Promise<{ url: string; port: number; readonly connections: number; readonly open: number; close(): Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>();
  let connections = 0;
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export function sse(data: unknown, event?: string): string {
  const d = typeof data === 'string' ? data : JSON.stringify(data);
  return event ? `event: ${event}\ndata: ${d}\n\n` : `data: ${d}\n\n`;
}

export function errorReply(status: number, error: unknown, headers?: Record<string, string>): Reply {
  return { status, json: error, headers };
}
