// The Koa core: error mapping, request ids, body parsing, routes, and the
// per-request context handed to the plugin pipeline. It names no provider.
import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/load.js';
import { sizeBytes, type Endpoint } from './config/schema.js';
import { readJsonBody, type BodyOptions } from './body.js';
import { createHttpServer } from './connections.js';
import { KoaRouter } from './lazy.js';
import type { RequestContext } from './plugin.js';
import { loadPipeline, type BuiltinRegistry, type LoadedPipeline } from './pipeline.js';
import { createTransport, type Transport } from './upstream.js';
import { ProviderState, type CoreServices } from './dispatch.js';
import { errors, envelope, toGatewayError, GatewayError, scrubSecrets, providerSecrets, clip } from './errors.js';
import { pipeFrames, jsonBody } from './respond.js';
import { createLogger, accessLogWriter } from './log.js';
import { listModels, getModel, listModelsAnthropic, getModelAnthropic } from './api/models.js';
import { messagesErrorBody } from './api/messages.js';
import { newRecord, UsageMeter, modelCost, type RequestRecord } from './usage.js';
import { UsageRecorder, openUsageBackend } from './store/usage.js';
import { adminRoutes, adminKeyName } from './admin.js';
import { createMetrics } from './metrics.js';
import { dashboardRoutes } from './dashboard.js';
import { adminKeyRoutes } from './admin-keys.js';
import { RuntimeKeys } from './keys.js';
import { TraceExporter, traceContext } from './tracing.js';
import { chatEndpoint } from './api/chat.js';
import type { ProviderCarry } from './reload.js';
import type { RouteSlot } from './plugin.js';
import { estimateOf, toMicros } from './limits.js';
import { createSharedState } from './state/index.js';
import type { Admitted } from './state/limiter.js';

/** `ctx.body` without the fields an endpoint releases once its stream is committed (EndpointSpec.releaseOnStream). */
function releaseFields(ctx: RequestContext, fields: readonly string[]): void {
  const body: Record<string, unknown> = {};
  for (const k in ctx.body) if (!fields.includes(k)) body[k] = ctx.body[k];
  ctx.body = body;
}

/** An ingress endpoint: how to validate its body and what its terminal step does. */
export interface EndpointSpec {
  endpoint: Endpoint;
  method: 'POST' | 'GET' | 'DELETE';
  path: string;
  validate(raw: unknown, ctx: RequestContext): Record<string, unknown>;
  terminal(ctx: RequestContext, core: CoreServices, params: Record<string, string>): Promise<void>;
  /** Called once at gateway shutdown (e.g. to close the endpoint's store). */
  close?(): void | Promise<void>;
  /**
   * The error body this endpoint answers with, when its API has its own
   * error shape (the Messages API); default: the OpenAI envelope.
   */
  errorBody?(err: GatewayError, requestId: string): Record<string, unknown>;
  /** Whether a request here is a usage record (default: POST endpoints). Reads and counts are not. */
  metered?: boolean;
  /**
   * Body fields that can be large (the conversation and what travels with
   * it), dropped from `ctx.body` once a stream is committed: its first event
   * is on the way to the client, so no fallback will translate the request
   * again. A stream lasts seconds to minutes, and holding a long prompt for
   * all of it, once per open stream, is most of a streaming gateway's
   * memory. Finalizers of a stream see `ctx.body` without them (docs/plugins.md).
   */
  releaseOnStream?: readonly string[];
}

/** Where finished request records go (the usage store, metrics): called on the response's close, must not block. */
export type RecordSink = (rec: RequestRecord) => void;

export interface GatewayOptions {
  config: GatewayConfig;
  registry: BuiltinRegistry;
  logger?: Logger;
  transport?: Transport;
  /** Extra endpoints (Responses, images) registered by their modules. */
  endpoints?: EndpointSpec[];
  /** Receivers of each finished request record (src/usage.ts). */
  recordSinks?: RecordSink[];
}

export interface Gateway {
  app: Koa;
  server: http.Server;
  /** The config, core services and pipeline new requests start on (a reload swaps all three). */
  readonly config: GatewayConfig;
  readonly core: CoreServices;
  readonly pipeline: LoadedPipeline;
  logger: Logger;
  /**
   * Serve new requests from this config and pipeline (already checked: src/reload.ts);
   * a request under way finishes on the ones it started with. `retired`
   * resolves once those requests are done and what only the old config used
   * (its pipeline plugins, removed provider plugins, stale pools) is closed.
   */
  swap(config: GatewayConfig, pipeline: LoadedPipeline, carry: ProviderCarry): { retired: Promise<void> };
  /** The usage store's queue (undefined when storage.usage.enabled is false). */
  readonly usage: UsageRecorder | undefined;
  /** The span exporter (undefined without telemetry.otlp_endpoint). */
  readonly traces: TraceExporter | undefined;
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /**
   * Drain (new requests refused with a 503, /healthz 503), let in-flight
   * requests finish until the deadline, end those still running with their
   * error, then close everything. Called again, it returns the same drain.
   */
  close(deadlineMs?: number): Promise<void>;
}

const ID_RE = /^[\w.:-]{1,128}$/;
/** The access-log status of a request whose client left before any answer (nginx's "client closed request"). */
export const CLIENT_CLOSED = 499;
/** A request whose handler is still running this long after its client left is logged without waiting for it. */
const LOG_LATE_MS = 1000;
/** After the shutdown deadline: how long the requests it aborted get to write their error frame or answer. */
const SHUTDOWN_GRACE_MS = 1000;
const LISTEN_BACKLOG = 4096;

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

/**
 * Read the request's JSON body into `ctx.body`; resolves the client's error
 * about it, if any. Not inline in the (async) handler: a suspended async
 * function keeps its locals, and a local holding the parsed body would keep
 * it, and the whole conversation, reachable for the life of a stream.
 */
function readBodyInto(ctx: RequestContext, req: http.IncomingMessage, o: BodyOptions): Promise<GatewayError | undefined> {
  return readJsonBody(req, o).then(
    (body) => {
      if (body === null || typeof body !== 'object' || Array.isArray(body)) return errors.invalid('Request body must be a JSON object.', null, 'invalid_json');
      ctx.body = body as Record<string, unknown>;
      return undefined;
    },
    (err: unknown) => {
      if (err instanceof GatewayError) return err;
      throw err;
    },
  );
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
 * One config in force, with what was built from it. Each request takes the
 * generation current when it arrives and keeps it to its end, so that a
 * reload never changes the config under a request (ctx.config, its pipeline).
 */
interface Generation {
  config: GatewayConfig;
  pipeline: LoadedPipeline;
  core: CoreServices;
  bodyOptions: BodyOptions;
  /** Requests on this generation not finished yet. */
  active: number;
  /** Set when a newer generation took over: called once `active` is 0. */
  onIdle?: () => void;
}

export async function createGateway(opts: GatewayOptions): Promise<Gateway> {
  const logger = opts.logger ?? createLogger(opts.config.server.log_level);
  const writeAccessLine = accessLogWriter(logger);
  const recordSinks = [...(opts.recordSinks ?? [])];
  // The usage store (src/store/usage.ts): records queue until it is open; a
  // database that cannot be reached at start-up is retried every 30 s.
  // (storage.* takes effect at start-up: a reload does not reopen it.)
  const usageOpts = opts.config.storage.usage;
  const recorder = usageOpts.enabled ? new UsageRecorder(usageOpts, logger) : undefined;
  let storeRetry: NodeJS.Timeout | undefined;
  if (recorder) {
    recordSinks.push((r) => recorder.record(r));
    const openStore = async () => {
      try {
        recorder.attach(await openUsageBackend(opts.config));
      } catch (err) {
        logger.error({ error: (err as Error).message, backend: opts.config.storage.url ? 'postgres' : 'sqlite' }, 'cannot open the usage store (storage.url / storage.usage); retrying in 30 s');
        storeRetry = setTimeout(() => void openStore(), 30_000);
        storeRetry.unref();
      }
    };
    await openStore();
  }

  /** The request's record, finished when its response closes: usage settled, cost, onto the access line, to the sinks. */
  function finishRecord(ctx: RequestContext, line: Record<string, unknown>, admitted: Admitted | undefined): void {
    const r = ctx.record;
    r.status = line.status as number;
    r.latency_ms = line.latency_ms as number;
    ctx.meter.settle(r);
    const stream = ctx.log.stream as string | undefined;
    // A stream that did not complete (cut, abandoned): whatever was seen is partial.
    if (r.stream && stream !== 'completed' && r.usage_source !== 'reported') r.usage_source = 'partial';
    r.error_type = (line.error as string | undefined) ?? (ctx.log.stream_error as string | undefined) ?? (line.client_closed ? 'client_closed' : undefined);
    r.key ??= ctx.client?.name;
    r.model ??= r.requested_model;
    r.cost_usd = r.usage && r.model ? modelCost(r.usage, ctx.config.models.get(r.model)) : null;
    // The key's reservation settled with what the request used (nothing, when it failed before any usage).
    if (admitted)
      state.limiter.settle(admitted.reservation, { tokens: r.usage ? r.usage.input_tokens + r.usage.output_tokens : 0, micros: r.cost_usd ? toMicros(r.cost_usd) : 0 });
    if (r.usage) {
      line.usage = r.usage;
      line.cost_usd = r.cost_usd;
      if (r.usage_source === 'partial') line.usage_partial = true;
    }
    for (const sink of recordSinks) {
      try {
        sink(r);
      } catch (err) {
        logger.error({ err, request_id: r.request_id }, 'a usage record sink failed');
      }
    }
  }
  const transport = opts.transport ?? createTransport(opts.config.server.transport);
  // Kept across reloads (src/reload.ts): key limits, cool-downs and provider state of the blocks a reload leaves alone.
  // In this process's memory, or shared by the replicas through Redis (state.redis_url; a restart changes it).
  const state = await createSharedState(opts.config, logger);
  const health = state.health;
  // Runtime keys (docs/keys.md): in memory, following the key store; each config served looks them up here.
  const runtimeKeys = new RuntimeKeys(logger, state.keyBus);
  await runtimeKeys.open(opts.config);
  opts.config.runtimeKeys = runtimeKeys;
  const shared = new ProviderState();
  const generation = (config: GatewayConfig, pipeline: LoadedPipeline): Generation => ({
    config,
    pipeline,
    core: { transport, providerPlugins: pipeline.providers, health, shared, replicas: state.replicas, prepare: pipeline.prepare },
    bodyOptions: { limit: sizeBytes(config.server.body_limit), timeoutMs: config.server.body_timeout_ms, maxDepth: config.server.json_max_depth },
    active: 0,
  });
  let current = generation(opts.config, await loadPipeline(opts.config, opts.registry, logger));
  // The current generation and the previous ones whose requests are not done yet.
  const live = new Set([current]);
  const release = (gen: Generation) => {
    if (--gen.active === 0) gen.onIdle?.();
  };

  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  const router = new KoaRouter();
  let ready = false;
  let draining = false;
  let closing: Promise<void> | undefined;
  // Requests admitted before the drain began whose response has not closed yet (drained on shutdown).
  let inflight = 0;
  // Their upstream calls: aborted, with the shutdown error as the reason, at the shutdown deadline.
  const aborts = new Set<AbortController>();

  // 1. Error mapping and the access log: one place decides what a client sees.
  // (Hot path: the Node request and response are used directly where Koa's
  // delegating getters would only add cost.)
  app.use(async (kctx, next) => {
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
    // This request's config, to its end (a reload swaps `current` for the requests after it).
    const gen = current;
    kctx.state.gen = gen;
    gen.active++;
    // The generation is released when the response has closed and the handler has returned, whichever is last.
    let holds = 2;
    const done = () => {
      if (--holds === 0) release(gen);
    };
    // A request that arrives while the gateway drains is not waited for: it is refused at once (below).
    const admitted = !draining;
    if (admitted) inflight++;
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
      if (rctx) finishRecord(rctx, rec, kctx.state.admitted as Admitted | undefined);
      writeAccessLine(rec);
    };
    // One close listener per request: abort the upstream call of a client that left, write the log line.
    res.once('close', () => {
      done();
      if (admitted) inflight--;
      const ac = kctx.state.abort as AbortController | undefined;
      if (ac) aborts.delete(ac);
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
      if (draining) kctx.set('connection', 'close');
      // The endpoint's own error shape; also for a wrong method on its path (405), answered before any handler ran.
      const shape = (kctx.state.errorBody as EndpointSpec['errorBody']) ?? errorShapes.get(path);
      jsonBody(kctx, shape ? shape(error, id) : envelope(error));
    } finally {
      handled = true;
      if (closed) writeLine();
      done();
    }
    closeIfUnread(kctx);
  });

  // The body (JSON only, with a size limit and a read deadline; src/body.ts)
  // is read by the endpoint's handler, after the plugins' beforeBody hooks
  // (auth) have accepted the request's headers: a request without a valid key
  // costs no body read and no parse. A path no endpoint serves answers 404 or
  // 405 without reading its body either; either way the connection closes
  // when a body is left unread (closeIfUnread).

  adminRoutes(router, () => current.config, () => recorder?.backend);
  dashboardRoutes(router, logger);
  adminKeyRoutes(router, () => current.config, runtimeKeys, () => current.bodyOptions);

  // Traces (src/tracing.ts): with telemetry.otlp_endpoint (at start-up), each request's record becomes spans.
  const traces = opts.config.telemetry.otlp_endpoint ? new TraceExporter(opts.config.telemetry.otlp_endpoint, () => current.config, logger) : undefined;
  if (traces) recordSinks.push((r) => traces.record(r));

  // Prometheus metrics (src/metrics.ts), fed by each request's record. The path
  // and whether it is served take effect at start-up; require_admin_key follows reloads.
  const metricsOpts = opts.config.telemetry.metrics;
  if (metricsOpts.enabled) {
    const metrics = createMetrics({ config: () => current.config, health, inflight: () => inflight, usage: recorder, limits: state.limiter });
    recordSinks.push(metrics.record);
    router.get(metricsOpts.path, async (kctx) => {
      if (current.config.telemetry.metrics.require_admin_key) kctx.state.log.admin_key = adminKeyName(kctx, current.config);
      const text = await metrics.text();
      kctx.set('content-type', metrics.contentType);
      kctx.body = text;
    });
  }

  router.get('/healthz', (kctx) => {
    if (!ready || draining) {
      kctx.status = 503;
      jsonBody(kctx, { status: draining ? 'draining' : 'starting' });
      return;
    }
    jsonBody(kctx, { status: 'ok' });
  });

  // A client of Anthropic's API (it sends anthropic-version) gets the catalog, and its errors, in that API's shape.
  const anthropicClient = (kctx: Koa.Context) => {
    if (kctx.req.headers['anthropic-version'] === undefined) return false;
    kctx.state.errorBody = messagesErrorBody;
    return true;
  };
  router.get('/v1/models', (kctx) => {
    const config = (kctx.state.gen as Generation).config;
    jsonBody(kctx, anthropicClient(kctx) ? listModelsAnthropic(config, kctx.query) : listModels(config, kctx.query.status));
  });
  router.get('/v1/models/*id', (kctx) => {
    // The router has decoded the id once (`openai%2Fgpt-4.1` is `openai/gpt-4.1`); decoding again would read `%252F` as `/`.
    const config = (kctx.state.gen as Generation).config;
    jsonBody(kctx, anthropicClient(kctx) ? getModelAnthropic(config, String(kctx.params.id)) : getModel(config, String(kctx.params.id)));
  });

  const specs: EndpointSpec[] = [
    chatEndpoint,
    ...(opts.endpoints ?? []),
  ];
  const errorShapes = new Map(specs.filter((s) => s.errorBody).map((s) => [s.path, s.errorBody!]));
  // POST endpoints with a fixed path are found by one map lookup before the
  // router (which still knows them, for 405s and other spellings of the path).
  const exactPost = new Map<string, (kctx: Koa.Context) => Promise<void>>();
  for (const spec of specs) {
    const metered = spec.metered ?? spec.method === 'POST';
    const handler = async (kctx: Koa.Context) => {
      const { req } = kctx;
      const res = kctx.res;
      const { config, pipeline, core } = kctx.state.gen as Generation;
      // Aborted by the core's close listener when the client leaves first.
      const ac = new AbortController();
      kctx.state.abort = ac;
      aborts.add(ac);
      if (spec.errorBody) kctx.state.errorBody = spec.errorBody;
      const ctx: RequestContext = {
        id: kctx.state.requestId,
        endpoint: spec.endpoint,
        method: req.method!,
        path: kctx.state.path,
        headers: req.headers,
        ...(spec.method !== 'POST' ? { query: new URLSearchParams(kctx.querystring) } : {}),
        signal: ac.signal,
        config,
        logger,
        // Empty until the headers are accepted; then the parsed body, which
        // validation replaces with its output: nothing else keeps it, so a long
        // stream does not hold a second copy.
        body: {},
        state: {},
        log: kctx.state.log,
        debug: { normalizations: [], deprecations: [] },
        attempts: [],
        finalizers: [],
        record: newRecord(kctx.state.requestId, spec.endpoint),
        meter: new UsageMeter(),
      };
      if (traces) ctx.record.trace = traceContext(req.headers.traceparent);
      if (metered) kctx.state.metered = ctx;
      // Headers first (auth): a refused request's body is never read.
      const gate = pipeline.beforeBody(ctx);
      if (gate) await gate;
      if (req.method === 'POST' && draining) res.setHeader('connection', 'close');
      // A body the client got wrong (400, 408, 413, 415) is answered where the
      // endpoint validates it, after the errors of the plugins ahead of validation.
      const bodyError = req.method === 'POST' ? await readBodyInto(ctx, req, (kctx.state.gen as Generation).bodyOptions) : undefined;
      const run = () => spec.terminal(ctx, core, kctx.params ?? {});
      await pipeline.run(
        ctx,
        () => {
          if (bodyError) throw bodyError;
          ctx.body = spec.validate(ctx.body, ctx);
        },
        () => (metered && ctx.client?.limits ? admitThen(kctx, ctx, run) : run()),
      );
      const out = ctx.outcome;
      if (!out) throw errors.internal();
      ctx.record.ttfb_ms = Math.round((performance.now() - (kctx.state.started as number)) * 100) / 100;
      if (out.kind === 'json') {
        // Written here, with the headers Koa would give it: Koa's body setter
        // and respond() cost more than the write itself.
        const text = JSON.stringify(out.body);
        kctx.respond = false;
        kctx.status = out.status ?? 200;
        if (draining) res.setHeader('connection', 'close');
        res.writeHead(out.status ?? 200, { ...out.headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      kctx.respond = false;
      ctx.record.stream = true;
      if (spec.releaseOnStream) releaseFields(ctx, spec.releaseOnStream);
      if (draining) res.setHeader('connection', 'close');
      const result = await pipeFrames(kctx.res, { 'x-request-id': ctx.id }, out.frames, (err) => {
        const raw = out.onError(err);
        const frame = raw && out.provider ? scrubSecrets(raw, providerSecrets(out.provider)) : raw;
        const name = (err as Error)?.name;
        ctx.log.stream_error = (err as { code?: string })?.code ?? name ?? 'error';
        if (!['UpstreamError', 'TransportError', 'GatewayError'].includes(name) && (err as { code?: string })?.code !== 'ECONNRESET')
          logger.error({ err, request_id: ctx.id }, 'stream failed inside the gateway');
        return frame;
      });
      // A Responses stream ends a failure with events of its own (error, response.failed): failed all the same.
      ctx.log.stream = result === 'completed' && ctx.log.stream_error !== undefined ? 'failed' : result;
    };
    if (spec.method === 'POST' && !spec.path.includes(':') && !spec.path.includes('*')) exactPost.set(spec.path, handler);
    if (spec.method === 'POST') router.post(spec.path, handler);
    else if (spec.method === 'GET') router.get(spec.path, handler);
    else router.delete(spec.path, handler);
  }

  /**
   * A limited key's request (docs/keys.md): reserve its estimate (429 over a
   * limit), answer with the key's rate-limit headers, then run the endpoint.
   * Settled when the response closes (finishRecord).
   */
  async function admitThen(kctx: Koa.Context, ctx: RequestContext, run: () => Promise<void>): Promise<void> {
    const key = ctx.client!;
    const lim = key.limits!;
    let estimate = { tokens: 0, micros: 0 };
    if (lim.tpm !== undefined || lim.budget_usd !== undefined) {
      const route = ctx.state.route as RouteSlot | undefined;
      const declared = Number(kctx.req.headers['content-length']);
      const bytes = declared > 0 ? declared : Buffer.byteLength(JSON.stringify(ctx.body));
      estimate = estimateOf(ctx.endpoint, ctx.body, bytes, route ? ctx.config.models.get(route.primary) : undefined);
    }
    // Its own id: a client-chosen x-request-id may repeat, a reservation may not.
    const admitted = await state.limiter.admit(key, randomUUID(), estimate);
    if (admitted) {
      kctx.state.admitted = admitted;
      for (const h in admitted.headers) kctx.res.setHeader(h, admitted.headers[h]);
    }
    return run();
  }

  app.use((kctx, next) => {
    const h = kctx.req.method === 'POST' ? exactPost.get(kctx.state.path) : undefined;
    return h ? h(kctx) : next();
  });
  app.use(router.routes());
  app.use(async (kctx, next) => {
    // Known path, wrong method: a fixed path only. A path that only matches a
    // pattern (/v1/responses/{id}) under another method names nothing this
    // method serves (POST /v1/responses/foo is not a misspelt GET): 404.
    await next();
    if (kctx.status === 404 && kctx.body === undefined && router.match(kctx.path, kctx.method).path.some((layer) => layer.paramNames.length === 0)) {
      throw new GatewayError(405, 'invalid_request_error', `Method ${clip(kctx.method)} is not allowed on ${clip(kctx.path)}.`, { code: 'method_not_allowed' });
    }
  });
  app.on('error', () => {
    /* client aborts surface here as ERR_STREAM_PREMATURE_CLOSE; not a gateway error */
  });

  // The envelope on what Node's parser refuses (431, 400), and the connection cap: src/connections.ts.
  const server = createHttpServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 60_000 }, app.callback(), { maxConnections: () => current.config.server.max_connections });

  /** A generation no request uses any more: close what the current one does not share with it. */
  async function retire(old: Generation, carry: ProviderCarry): Promise<void> {
    live.delete(old);
    // A plugin object another live generation also holds (a module exporting an object, not a factory) stays open.
    const inUse = new Set<unknown>();
    for (const g of live) for (const p of [...g.pipeline.plugins, ...g.pipeline.providers.values()]) inUse.add(p);
    for (const p of old.pipeline.plugins) if (!inUse.has(p)) await closeQuietly(p.name, () => p.close?.());
    for (const p of new Set(old.pipeline.providers.values())) if (!inUse.has(p)) await closeQuietly(p.name, () => p.close?.());
    // Still stale now (a later reload may have brought a pool back)?
    const pools = new Set([...current.config.providers.values()].map((p) => p.pool ?? p.name));
    transport.retire?.(new Set([...carry.stalePools].filter((n) => !pools.has(n))));
  }
  async function closeQuietly(name: string, close: () => void | Promise<void>): Promise<void> {
    try {
      await close();
    } catch (err) {
      logger.error({ err, plugin: name }, 'config reload: closing a plugin of the previous config failed');
    }
  }

  return {
    app,
    server,
    usage: recorder,
    traces,
    get config() {
      return current.config;
    },
    get core() {
      return current.core;
    },
    get pipeline() {
      return current.pipeline;
    },
    logger,
    swap(config, pipeline, carry) {
      const old = current;
      state.configure(config);
      config.runtimeKeys = runtimeKeys;
      const next = generation(config, pipeline);
      health.forgetProviders(carry.changedProviders);
      shared.forget(carry.staleInstances);
      if (config.server.log_level !== old.config.server.log_level) logger.level = config.server.log_level;
      current = next;
      live.add(next);
      const retired = new Promise<void>((resolve) => {
        old.onIdle = () => void retire(old, carry).then(resolve);
      });
      if (old.active === 0) old.onIdle!();
      return { retired };
    },
    listen(port = current.config.server.port, host = current.config.server.host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        // A deeper accept queue than Node's 511 (the kernel caps it at net.core.somaxconn):
        // a burst of thousands of new connections to a busy gateway waits instead of
        // overflowing the queue, which ends in client resets after SYN retransmits.
        server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => {
          server.off('error', reject);
          ready = true;
          resolve(server.address() as AddressInfo);
        });
      });
    },
    close(deadlineMs = current.config.server.shutdown_timeout_ms) {
      closing ??= drain(deadlineMs);
      return closing;
    },
  };

  /**
   * Drain: keep listening (so that /healthz answers 503 to a load balancer,
   * and a new request is refused with a 503 it can retry elsewhere, in
   * cluster mode as well), close connections as they go idle, and wait for
   * the requests admitted before it began. At the deadline, those still
   * running are aborted with the shutdown error as the reason: a stream ends
   * with its endpoint's error frame, a request not yet answered gets a 503.
   * SHUTDOWN_GRACE_MS later, whatever is left is closed.
   */
  async function drain(deadlineMs: number): Promise<void> {
    draining = true;
    const tick = () => new Promise((r) => setTimeout(r, 20));
    const deadline = performance.now() + deadlineMs;
    while (inflight > 0 && performance.now() < deadline) {
      server.closeIdleConnections();
      await tick();
    }
    if (inflight > 0) {
      const reason = errors.shuttingDown(`The gateway is shutting down: the request was still running at its shutdown deadline (server.shutdown_timeout_ms, ${deadlineMs} ms).`);
      logger.warn({ requests: inflight, deadline_ms: deadlineMs }, 'shutdown deadline: ending the requests still running');
      for (const ac of aborts) ac.abort(reason);
      const grace = performance.now() + SHUTDOWN_GRACE_MS;
      while (inflight > 0 && performance.now() < grace) await tick();
    }
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
    transport.close();
    for (const spec of specs) await spec.close?.();
    await current.pipeline.close();
    if (storeRetry) clearTimeout(storeRetry);
    // What is queued is written (each write bounded by write_timeout_ms), then the store closes.
    await recorder?.close();
    await runtimeKeys.close();
    await state.close();
    logger.flush?.();
  }
}
