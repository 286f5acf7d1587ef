// The request lifecycle: the first middleware every request goes through.
// It gives the request its id and its generation (the config it is served
// on), admits it or refuses it while the gateway drains, maps whatever is
// thrown to the error a client sees (one place decides), and on the
// response's close aborts the upstream call of a client that left, finishes
// the request's record and writes the access-log line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type Koa from 'koa';
import type { Logger } from 'pino';
import type { RequestContext } from '../plugin.js';
import { errors, envelope, toGatewayError, clip, type GatewayError } from '../errors.js';
import type { Admitted } from '../state/limiter.js';
import type { Generations } from './generations.js';
import type { Drain, AbortEntry } from './drain.js';
import type { RecordFinisher } from './records.js';

const ID_RE = /^[\w.:-]{1,128}$/;
/** The access-log status of a request whose client left before any answer (nginx's "client closed request"). */
export const CLIENT_CLOSED = 499;
/** A request whose handler is still running this long after its client left is logged without waiting for it. */
const LOG_LATE_MS = 1000;

/** An endpoint's own error shape (the Messages API's); default: the envelope. */
export type ErrorShape = (err: GatewayError, requestId: string) => Record<string, unknown>;

export interface LifecycleOptions {
  generations: Generations;
  drain: Drain;
  records: RecordFinisher;
  writeAccessLine: (line: Record<string, unknown>) => void;
  logger: Logger;
  /** By path: the error shape of an endpoint that has its own (for errors raised before its handler runs). */
  errorShapes: ReadonlyMap<string, ErrorShape>;
}

/**
 * The request path without its query for the usual origin-form target
 * (`/v1/chat/completions?x=1`), without parsing the URL; undefined for any
 * other form (an absolute URL: Koa's `ctx.path` parses it).
 */
export function originPath(url: string): string | undefined {
  if (url.charCodeAt(0) !== 47 /* / */) return undefined;
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/**
 * One request as the lifecycle and the endpoint handlers see it: Koa's
 * context has these members, and so does the minimal one a fixed-path POST
 * endpoint is served with, straight from the node:http request handler
 * (Koa's per-request context, its finished-listeners and respond() are
 * skipped there: docs/performance.md, "Where the time goes"). `state` holds
 * what the lifecycle and the handler share (below).
 */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  state: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- Koa's DefaultState
  /** Koa's: false once a handler wrote the response itself. */
  respond?: boolean;
  /** The router's path parameters (a fixed path has none). */
  params?: Record<string, string>;
  /** The query string (Koa's; GET and DELETE endpoints read it). */
  querystring?: string;
}

/**
 * Answered before its body was read (refused on its headers, an unknown path,
 * a body over the limit or past its deadline): close the connection after the
 * answer. Keeping it would mean reading, or waiting for, the rest of a body
 * that may be large or trickling, for a client the gateway has already turned away.
 */
function closeIfUnread(x: Exchange): void {
  if (!x.req.complete && !x.res.headersSent) x.res.setHeader('connection', 'close');
}

function decodes(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Answer with `body` as JSON: the status, `headers`, its content type and
 * length, and `connection: close` while the gateway drains. Both JSON answers
 * written outside Koa go through here: an endpoint's and an error's.
 */
export function endJson(res: ServerResponse, status: number, headers: Record<string, string> | undefined, body: unknown, draining: boolean): void {
  const text = JSON.stringify(body);
  if (draining) res.setHeader('connection', 'close');
  res.writeHead(status, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The lifecycle of every request: Koa's first middleware, and the fixed-path POST endpoints' own entry (serve). */
export interface Lifecycle {
  koa: Koa.Middleware;
  /** Serve a request outside Koa: `handler` on a minimal Exchange, with everything Koa's middleware does for a request. */
  serve(req: IncomingMessage, res: ServerResponse, path: string, handler: (x: Exchange) => Promise<void>): Promise<void>;
}

/**
 * The lifecycle. What it leaves in `x.state` for the handlers:
 * `requestId`, `path`, `started`, `log` (the access-log line, filled in as the
 * request goes: ctx.log), `gen`; they leave `abort` (the entry of the request's
 * AbortController in the drain's list), `metered` (the RequestContext whose record is finished)
 * and `admitted` (a limited key's reservation) for it, and `errorBody` for
 * an endpoint's own error shape.
 * (Hot path: the Node request and response are used directly where Koa's
 * delegating getters would only add cost.)
 */
export function requestLifecycle(o: LifecycleOptions): Lifecycle {
  const { generations, drain, records, writeAccessLine, logger, errorShapes } = o;
  const run = async (x: Exchange, path: string, next: () => Promise<void>): Promise<void> => {
    const started = performance.now();
    const { req, res } = x;
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && ID_RE.test(incoming) ? incoming : randomUUID();
    x.state.requestId = id;
    x.state.path = path;
    x.state.started = started;
    res.setHeader('x-request-id', id);
    // The access-log record, filled in by the core and the plugins (ctx.log) as the request goes.
    const rec: Record<string, unknown> = { request_id: id, method: req.method, path, status: 0, latency_ms: 0 };
    x.state.log = rec;
    // This request's config, to its end (a reload swaps the current generation for the requests after it).
    const gen = generations.take();
    x.state.gen = gen;
    // The generation is released when the response has closed and the handler has returned, whichever is last.
    let holds = 2;
    const done = () => {
      if (--holds === 0) generations.release(gen);
    };
    // A request that arrives while the gateway drains is not waited for: it is refused at once (below).
    const admitted = !drain.draining;
    drain.started++;
    if (admitted) drain.inflight++;
    // The log line is written once the response has closed and the handler
    // has returned (what a stream's writer or a failed attempt records comes
    // after a client left), or LOG_LATE_MS after a close the handler outlives.
    let handled = false;
    let closed = false;
    let written = false;
    let late: NodeJS.Timeout | undefined;
    const writeLine = () => {
      if (late) clearTimeout(late);
      if (written) return;
      written = true;
      const rctx = x.state.metered as RequestContext | undefined;
      if (rctx) records.finish(rctx, rec, x.state.admitted as Admitted | undefined);
      writeAccessLine(rec);
    };
    // One close listener per request: abort the upstream call of a client that left, write the log line.
    res.once('close', () => {
      done();
      if (admitted) drain.inflight--;
      const entry = x.state.abort as AbortEntry | undefined;
      if (entry) drain.aborts.delete(entry);
      const ac = entry?.ac;
      closed = true;
      rec.latency_ms = Math.round((performance.now() - started) * 100) / 100;
      if (res.writableFinished) rec.status = res.statusCode;
      else {
        ac?.abort();
        rec.client_closed = true;
        // A client that left before any answer: 499 (client closed request), as nginx logs it;
        // one that left mid-answer keeps the status it was sent.
        rec.status = res.headersSent ? res.statusCode : CLIENT_CLOSED;
      }
      if (handled) writeLine();
      else (late = setTimeout(writeLine, LOG_LATE_MS)).unref();
    });
    let answer: { error: GatewayError; body: Record<string, unknown> } | undefined;
    try {
      if (!admitted) {
        // Draining: the connection closes after this answer; /healthz says so, anything else is refused.
        res.setHeader('connection', 'close');
        if (path !== '/healthz') throw errors.shuttingDown('The gateway is shutting down and takes no new requests; retry (another instance will answer).');
      }
      // A path whose percent-encoding does not decode (`/v1/models/%zz`, `%C0`) names nothing: 400 on every route.
      if (path.includes('%') && !decodes(path)) throw errors.invalid('The request path has malformed percent-encoding.', null, 'invalid_path');
      await next();
    } catch (err) {
      const { error, internal } = toGatewayError(err);
      if (internal) logger.error({ err, request_id: id }, 'unhandled error');
      rec.error = error.code ?? error.type;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // The endpoint's own error shape; also for a wrong method on its path (405), answered before any handler ran.
      const shape = (x.state.errorBody as ErrorShape | undefined) ?? errorShapes.get(path);
      answer = { error, body: shape ? shape(error, id) : envelope(error) };
    } finally {
      handled = true;
      if (closed) writeLine();
      done();
    }
    closeIfUnread(x);
    if (answer) {
      // Written here for every route (Koa's respond() is skipped): the same status, headers and JSON body.
      x.respond = false;
      endJson(res, answer.error.status, answer.error.headers, answer.body, drain.draining);
    }
  };
  return {
    koa: (kctx, next) =>
      run(kctx, originPath(kctx.req.url ?? '/') ?? kctx.path, async () => {
        await next();
        if (kctx.status === 404 && kctx.body === undefined && !kctx.res.headersSent) {
          throw errors.notFound(`Unknown route: ${clip(kctx.method)} ${clip(kctx.path)}.`, null, 'unknown_route');
        }
      }),
    serve(req, res, path, handler) {
      const x: Exchange = { req, res, state: {} };
      return run(x, path, () => handler(x));
    },
  };
}
