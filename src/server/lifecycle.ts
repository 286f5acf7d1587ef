// The request lifecycle: the first middleware every request goes through.
// It gives the request its id and its generation (the config it is served
// on), admits it or refuses it while the gateway drains, maps whatever is
// thrown to the error a client sees (one place decides), and on the
// response's close aborts the upstream call of a client that left, finishes
// the request's record and writes the access-log line.
import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { Logger } from 'pino';
import type { RequestContext } from '../plugin.js';
import { errors, envelope, toGatewayError, clip, type GatewayError } from '../errors.js';
import type { Admitted } from '../state/limiter.js';
import type { Generations } from './generations.js';
import type { Drain } from './drain.js';
import type { RecordFinisher } from './records.js';
import { jsonBody } from '../respond.js';

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

/** The request path without its query (Koa's `ctx.path`, without parsing the URL for the usual origin-form target). */
function pathOf(kctx: Koa.Context): string {
  const url = kctx.req.url ?? '/';
  if (url.charCodeAt(0) !== 47 /* / */) return kctx.path;
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/**
 * Answered before its body was read (refused on its headers, an unknown path,
 * a body over the limit or past its deadline): close the connection after the
 * answer. Keeping it would mean reading, or waiting for, the rest of a body
 * that may be large or trickling, for a client the gateway has already turned away.
 */
function closeIfUnread(kctx: Koa.Context): void {
  if (!kctx.req.complete && !kctx.res.headersSent) kctx.res.setHeader('connection', 'close');
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
 * The lifecycle middleware. What it leaves in `kctx.state` for the handlers:
 * `requestId`, `path`, `started`, `log` (the access-log line, filled in as the
 * request goes: ctx.log), `gen`; they leave `abort` (the request's
 * AbortController), `metered` (the RequestContext whose record is finished)
 * and `admitted` (a limited key's reservation) for it, and `errorBody` for
 * an endpoint's own error shape.
 * (Hot path: the Node request and response are used directly where Koa's
 * delegating getters would only add cost.)
 */
export function requestLifecycle(o: LifecycleOptions): Koa.Middleware {
  const { generations, drain, records, writeAccessLine, logger, errorShapes } = o;
  return async (kctx, next) => {
    const started = performance.now();
    const { req, res } = kctx;
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && ID_RE.test(incoming) ? incoming : randomUUID();
    const path = pathOf(kctx);
    kctx.state.requestId = id;
    kctx.state.path = path;
    kctx.state.started = started;
    res.setHeader('x-request-id', id);
    // The access-log record, filled in by the core and the plugins (ctx.log) as the request goes.
    const rec: Record<string, unknown> = { request_id: id, method: req.method, path, status: 0, latency_ms: 0 };
    kctx.state.log = rec;
    // This request's config, to its end (a reload swaps the current generation for the requests after it).
    const gen = generations.take();
    kctx.state.gen = gen;
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
      const rctx = kctx.state.metered as RequestContext | undefined;
      if (rctx) records.finish(rctx, rec, kctx.state.admitted as Admitted | undefined);
      writeAccessLine(rec);
    };
    // One close listener per request: abort the upstream call of a client that left, write the log line.
    res.once('close', () => {
      done();
      if (admitted) drain.inflight--;
      const ac = kctx.state.abort as AbortController | undefined;
      if (ac) drain.aborts.delete(ac);
      closed = true;
      rec.latency_ms = Math.round((performance.now() - started) * 100) / 100;
      if (res.writableFinished) rec.status = res.statusCode;
      else {
        (kctx.state.abort as AbortController | undefined)?.abort();
        rec.client_closed = true;
        // A client that left before any answer: 499 (client closed request), as nginx logs it;
        // one that left mid-answer keeps the status it was sent.
        rec.status = res.headersSent ? res.statusCode : CLIENT_CLOSED;
      }
      if (handled) writeLine();
      else (late = setTimeout(writeLine, LOG_LATE_MS)).unref();
    });
    try {
      if (!admitted) {
        // Draining: the connection closes after this answer; /healthz says so, anything else is refused.
        res.setHeader('connection', 'close');
        if (path !== '/healthz') throw errors.shuttingDown('The gateway is shutting down and takes no new requests; retry (another instance will answer).');
      }
      // A path whose percent-encoding does not decode (`/v1/models/%zz`, `%C0`) names nothing: 400 on every route.
      if (path.includes('%') && !decodes(path)) throw errors.invalid('The request path has malformed percent-encoding.', null, 'invalid_path');
      await next();
      if (kctx.status === 404 && kctx.body === undefined && !kctx.res.headersSent) {
        throw errors.notFound(`Unknown route: ${clip(kctx.method)} ${clip(kctx.path)}.`, null, 'unknown_route');
      }
    } catch (err) {
      const { error, internal } = toGatewayError(err);
      if (internal) logger.error({ err, request_id: id }, 'unhandled error');
      rec.error = error.code ?? error.type;
      if (kctx.res.headersSent) {
        kctx.res.destroy();
        return;
      }
      kctx.status = error.status;
      for (const [k, v] of Object.entries(error.headers)) kctx.set(k, v);
      if (drain.draining) kctx.set('connection', 'close');
      // The endpoint's own error shape; also for a wrong method on its path (405), answered before any handler ran.
      const shape = (kctx.state.errorBody as ErrorShape | undefined) ?? errorShapes.get(path);
      jsonBody(kctx, shape ? shape(error, id) : envelope(error));
    } finally {
      handled = true;
      if (closed) writeLine();
      done();
    }
    closeIfUnread(kctx);
  };
}
