// The Koa core: createGateway puts together the request lifecycle
// (src/server/lifecycle.ts: ids, errors, the access-log line), the routes, the
// endpoint handlers that build the per-request context handed to the plugin
// pipeline, the finished records' sinks (src/server/records.ts), the configs
// in force (src/server/generations.ts) and the drain (src/server/drain.ts).
// It names no provider.
import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/load.js';
import { sizeBytes, type Endpoint } from './config/schema.js';
import { readJsonBody, type BodyOptions } from './body.js';
import { sourceOf, rememberSource } from './json-source.js';
import { startIdleCollector } from './idle-gc.js';
import { createHttpServer } from './connections.js';
import { KoaRouter } from './lazy.js';
import type { RequestContext } from './plugin.js';
import { loadPipeline, type BuiltinRegistry, type LoadedPipeline } from './pipeline.js';
import { createTransport } from './upstream/index.js';
import type { Transport } from './upstream/transport.js';
import { ProviderState, type CoreServices } from './dispatch.js';
import { errors, GatewayError, scrubSecrets, providerSecrets, clip } from './errors.js';
import { pipeFrames, jsonBody } from './respond.js';
import { createLogger, accessLogWriter } from './log.js';
import { listModels, getModel, listModelsAnthropic, getModelAnthropic } from './api/models.js';
import { messagesErrorBody } from './api/messages.js';
import { newRecord, UsageMeter } from './usage.js';
import type { UsageRecorder } from './store/usage.js';
import { adminRoutes, adminKeyName } from './admin.js';
import { createMetrics } from './metrics.js';
import { dashboardRoutes } from './dashboard.js';
import { adminKeyRoutes } from './admin-keys.js';
import { RuntimeKeys } from './keys.js';
import { TraceExporter, traceContext } from './tracing.js';
import { chatEndpoint } from './api/chat.js';
import type { ProviderCarry } from './reload.js';
import type { RouteSlot } from './plugin.js';
import { estimateOf } from './limits.js';
import { createSharedState } from './state/index.js';
import { requestLifecycle, originPath, endJson, type Exchange } from './server/lifecycle.js';
import { RecordFinisher, openUsageStore, type RecordSink } from './server/records.js';
import { Generations, type Generation } from './server/generations.js';
import { Drain } from './server/drain.js';

export type { RecordSink } from './server/records.js';
export { CLIENT_CLOSED } from './server/lifecycle.js';

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
  /** Full collections the idle collector has run after requests (server.idle_release_ms; src/idle-gc.ts). */
  readonly idleCollections: number;
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /**
   * Drain (new requests refused with a 503, /healthz 503), let in-flight
   * requests finish until the deadline, end those still running with their
   * error, then close everything. Called again, it returns the same drain.
   */
  close(deadlineMs?: number): Promise<void>;
}

const LISTEN_BACKLOG = 4096;

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

export async function createGateway(opts: GatewayOptions): Promise<Gateway> {
  const logger = opts.logger ?? createLogger(opts.config.server.log_level);
  const recordSinks = [...(opts.recordSinks ?? [])];
  const usageStore = await openUsageStore(opts.config, logger);
  const recorder = usageStore.recorder;
  if (recorder) recordSinks.push((r) => recorder.record(r));
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
  const generations = new Generations(generation(opts.config, await loadPipeline(opts.config, opts.registry, logger)), transport, logger);
  const drain = new Drain();
  // The heap a load grew, given back once the requests stop (idle-gc.ts).
  const idleGc = startIdleCollector({ started: () => drain.started, running: () => drain.inflight, intervalMs: () => generations.current.config.server.idle_release_ms });

  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  const router = new KoaRouter();
  let ready = false;
  let closing: Promise<void> | undefined;

  const specs: EndpointSpec[] = [chatEndpoint, ...(opts.endpoints ?? [])];
  // 1. The request lifecycle (ids, error mapping, the access log): one place decides what a client sees.
  const records = new RecordFinisher(recordSinks, state.limiter, logger);
  if (recorder) recorder.drainFirst = records.drain;
  const lifecycle = requestLifecycle({
    generations,
    drain,
    records,
    writeAccessLine: accessLogWriter(logger),
    logger,
    errorShapes: new Map(specs.filter((s) => s.errorBody).map((s) => [s.path, s.errorBody!])),
  });
  app.use(lifecycle.koa);

  // The body (JSON only, with a size limit and a read deadline; src/body.ts)
  // is read by the endpoint's handler, after the plugins' beforeBody hooks
  // (auth) have accepted the request's headers: a request without a valid key
  // costs no body read and no parse. A path no endpoint serves answers 404 or
  // 405 without reading its body either; either way the connection closes
  // when a body is left unread (closeIfUnread, src/server/lifecycle.ts).

  adminRoutes(router, () => generations.current.config, () => recorder?.backend);
  dashboardRoutes(router, logger);
  adminKeyRoutes(router, () => generations.current.config, runtimeKeys, () => generations.current.bodyOptions);

  // Traces (src/tracing.ts): with telemetry.otlp_endpoint (at start-up), each request's record becomes spans.
  const traces = opts.config.telemetry.otlp_endpoint ? new TraceExporter(opts.config.telemetry.otlp_endpoint, () => generations.current.config, logger) : undefined;
  if (traces) {
    traces.drainFirst = records.drain;
    recordSinks.push((r) => traces.record(r));
  }

  // Prometheus metrics (src/metrics.ts), fed by each request's record. The path
  // and whether it is served take effect at start-up; require_admin_key follows reloads.
  const metricsOpts = opts.config.telemetry.metrics;
  if (metricsOpts.enabled) {
    const metrics = createMetrics({ config: () => generations.current.config, health, inflight: () => drain.inflight, usage: recorder, limits: state.limiter });
    recordSinks.push(metrics.record);
    router.get(metricsOpts.path, async (kctx) => {
      const config = generations.current.config;
      if (config.telemetry.metrics.require_admin_key) kctx.state.log.admin_key = adminKeyName(kctx, config);
      records.drain();
      const text = await metrics.text();
      kctx.set('content-type', metrics.contentType);
      kctx.body = text;
    });
  }

  router.get('/healthz', (kctx) => {
    if (!ready || drain.draining) {
      kctx.status = 503;
      jsonBody(kctx, { status: drain.draining ? 'draining' : 'starting' });
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

  // POST endpoints with a fixed path are found by one map lookup and served
  // outside Koa (below); the router still knows them, for 405s and other
  // spellings of the path.
  const exactPost = new Map<string, (x: Exchange) => Promise<void>>();
  for (const spec of specs) {
    const metered = spec.metered ?? spec.method === 'POST';
    const handler = async (kctx: Exchange) => {
      const { req } = kctx;
      const res = kctx.res;
      const { config, pipeline, core } = kctx.state.gen as Generation;
      // Aborted by the core's close listener when the client leaves first.
      const ac = new AbortController();
      kctx.state.abort = drain.aborts.add(ac);
      if (spec.errorBody) kctx.state.errorBody = spec.errorBody;
      const ctx: RequestContext = {
        id: kctx.state.requestId,
        endpoint: spec.endpoint,
        method: req.method!,
        path: kctx.state.path,
        headers: req.headers,
        // Every field, those set later too (undefined until then), in one
        // order: one hidden class for every request's context (see newRecord).
        query: spec.method !== 'POST' ? new URLSearchParams(kctx.querystring ?? '') : undefined,
        signal: ac.signal,
        config,
        logger,
        // Empty until the headers are accepted; then the parsed body, which
        // validation replaces with its output: nothing else keeps it, so a long
        // stream does not hold a second copy.
        body: {},
        client: undefined,
        state: {},
        log: kctx.state.log,
        debug: { normalizations: [], deprecations: [] },
        attempts: [],
        finalizers: [],
        outcome: undefined,
        record: newRecord(kctx.state.requestId, spec.endpoint),
        meter: new UsageMeter(),
      };
      if (traces) ctx.record.trace = traceContext(req.headers.traceparent, ctx.config.telemetry.traces.sample_ratio);
      if (metered) kctx.state.metered = ctx;
      // Headers first (auth): a refused request's body is never read.
      const gate = pipeline.beforeBody(ctx);
      if (gate) await gate;
      if (req.method === 'POST' && drain.draining) res.setHeader('connection', 'close');
      // A body the client got wrong (400, 408, 413, 415) is answered where the
      // endpoint validates it, after the errors of the plugins ahead of validation.
      const bodyError = req.method === 'POST' ? await readBodyInto(ctx, req, (kctx.state.gen as Generation).bodyOptions) : undefined;
      const run = () => spec.terminal(ctx, core, kctx.params ?? {});
      await pipeline.run(
        ctx,
        () => {
          if (bodyError) throw bodyError;
          const raw = ctx.body;
          ctx.body = spec.validate(raw, ctx);
          // The client's bytes stay known behind the validated body (a same-API target is sent them: json-source.ts).
          const source = sourceOf(raw);
          if (source) rememberSource(ctx.body, source);
        },
        () => (metered && ctx.client?.limits ? admitThen(kctx, ctx, run) : run()),
      );
      const out = ctx.outcome;
      if (!out) throw errors.internal();
      ctx.record.ttfb_ms = Math.round((performance.now() - (kctx.state.started as number)) * 100) / 100;
      if (out.kind === 'json') {
        // Written here, with the headers Koa would give it: Koa's body setter
        // and respond() cost more than the write itself.
        kctx.respond = false;
        endJson(res, out.status ?? 200, out.headers, out.body, drain.draining);
        return;
      }
      kctx.respond = false;
      ctx.record.stream = true;
      if (spec.releaseOnStream) releaseFields(ctx, spec.releaseOnStream);
      if (drain.draining) res.setHeader('connection', 'close');
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
   * Settled when the response closes (RecordFinisher, src/server/records.ts).
   */
  async function admitThen(kctx: Exchange, ctx: RequestContext, run: () => Promise<void>): Promise<void> {
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
  // A POST to a fixed endpoint path (the usual origin-form target) is served
  // straight from the node:http request handler, through the same lifecycle
  // and handler as in Koa, with a minimal Exchange: Koa's per-request context,
  // its finished-listeners and the compose chain cost more than the lookup
  // (docs/performance.md, "What a request costs"). Everything else is Koa's.
  const koaCallback = app.callback();
  const serve = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.method === 'POST') {
      const path = originPath(req.url ?? '/');
      const h = path === undefined ? undefined : exactPost.get(path);
      if (h) return void lifecycle.serve(req, res, path!, h);
    }
    return koaCallback(req, res);
  };
  const server = createHttpServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 60_000 }, serve, { maxConnections: () => generations.current.config.server.max_connections });

  return {
    app,
    server,
    usage: recorder,
    traces,
    get idleCollections() {
      return idleGc.collections;
    },
    get config() {
      return generations.current.config;
    },
    get core() {
      return generations.current.core;
    },
    get pipeline() {
      return generations.current.pipeline;
    },
    logger,
    swap(config, pipeline, carry) {
      const old = generations.current.config;
      state.configure(config);
      config.runtimeKeys = runtimeKeys;
      const next = generation(config, pipeline);
      health.forgetProviders(carry.changedProviders);
      shared.forget(carry.staleInstances);
      if (config.server.log_level !== old.server.log_level) logger.level = config.server.log_level;
      return { retired: generations.swap(next, carry) };
    },
    listen(port = generations.current.config.server.port, host = generations.current.config.server.host) {
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
    close(deadlineMs = generations.current.config.server.shutdown_timeout_ms) {
      closing ??= shutdown(deadlineMs);
      return closing;
    },
  };

  /** Drain the requests (src/server/drain.ts), then close everything the gateway opened. */
  async function shutdown(deadlineMs: number): Promise<void> {
    idleGc.stop();
    await drain.drain(server, deadlineMs, logger);
    transport.close();
    for (const spec of specs) await spec.close?.();
    await generations.current.pipeline.close();
    usageStore.stop();
    records.drain();
    // What is queued is written (each write bounded by write_timeout_ms), then the store closes.
    await recorder?.close();
    await runtimeKeys.close();
    await state.close();
    logger.flush?.();
  }
}
