// GET /metrics: Prometheus metrics (prom-client), names following the
// OpenTelemetry GenAI semantic conventions where they exist
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/), and
// the gateway's own. Fed from each request's record when its response closes
// (src/usage.ts), so the hot path pays nothing more; labels come from the
// config only (model ids, provider names, endpoints, fixed vocabularies):
// never a user, session or request id. With several workers (node:cluster),
// the primary aggregates every worker's registry for each scrape
// (prom-client's AggregatorRegistry). docs/observability.md, "Metrics".
import cluster from 'node:cluster';
import type * as PromClient from 'prom-client';
import { createRequire } from 'node:module';
import type { GatewayConfig } from './config/load.js';
import type { Health } from './dispatch.js';
import { regionOf, UPSTREAM_ERROR_TYPES } from './dispatch.js';
import type { RequestRecord } from './usage.js';
import { CellCounter, CellHistogram } from './metric-cells.js';
import type { UsageRecorder } from './store/usage.js';
import { reloadCounts } from './reload.js';
import { operationName, providerName } from './genai-names.js';

type PromParts = Pick<typeof PromClient, 'Registry' | 'AggregatorRegistry' | 'Counter' | 'Gauge' | 'collectDefaultMetrics'>;
let promSource: 'parts' | 'index' | undefined;

/**
 * prom-client's classes, each from its own file: the package's index also
 * loads its Pushgateway, which brings node:https and node:tls (about 3.5 MB of
 * idle RSS; docs/performance.md, "Start-up"), and the Summary's tdigest, none
 * of which the gateway uses. Falls back to the index should a release move
 * these files (`promClientSource()` says which was loaded: test/startup.test.ts
 * checks it).
 */
function loadPromClient(): PromParts {
  const require = createRequire(import.meta.url);
  try {
    const parts: PromParts = {
      Registry: require('prom-client/lib/registry'),
      AggregatorRegistry: require('prom-client/lib/cluster'),
      Counter: require('prom-client/lib/counter'),
      Gauge: require('prom-client/lib/gauge'),
      collectDefaultMetrics: require('prom-client/lib/defaultMetrics'),
    };
    if (typeof parts.Registry !== 'function' || !(parts.AggregatorRegistry.prototype instanceof parts.Registry) || typeof parts.collectDefaultMetrics !== 'function') throw new Error('prom-client layout changed');
    promSource = 'parts';
    return parts;
  } catch {
    promSource = 'index';
    return require('prom-client') as typeof PromClient;
  }
}
const { Registry, AggregatorRegistry, Counter, Gauge, collectDefaultMetrics } = loadPromClient();
type Registry = PromClient.Registry;

/** Which prom-client loadPromClient() loaded: its parts, or (a release that moved them) the whole package. */
export function promClientSource(): 'parts' | 'index' | undefined {
  return promSource;
}

// Bucket boundaries the GenAI semantic conventions advise.
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export interface MetricsSources {
  /** The config in force (a reload swaps it). */
  config(): GatewayConfig;
  health: Health;
  inflight(): number;
  usage?: UsageRecorder;
  /** Key limits (src/state/limiter.ts): refusals by limit, and admissions the shared state could not answer. */
  limits?: { rejected: Record<string, number>; unavailable: number; admitted: { store: number; grant: number } };
}

export interface GatewayMetrics {
  registry: Registry;
  /** A finished request's record (a RecordSink). */
  record(r: RequestRecord): void;
  /** The exposition text: with several workers, every worker's metrics aggregated. */
  text(): Promise<string>;
  contentType: string;
}

const statusClass = (s: number) => (s >= 100 && s < 600 ? `${Math.floor(s / 100)}xx` : 'other');

export function createMetrics(src: MetricsSources): GatewayMetrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });

  const genAi = ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_request_model'] as const;
  const tokenUsage = new CellHistogram(
    {
      name: 'gen_ai_client_token_usage',
      help: 'Tokens used per request, by type (input, output): GenAI semantic conventions, gen_ai.client.token.usage.',
      labelNames: [...genAi, 'gen_ai_token_type'],
      registers,
    },
    TOKEN_BUCKETS,
  );
  const duration = new CellHistogram(
    {
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'Duration of requests that reached a model, to the end of the response (gen_ai.client.operation.duration); error_type set on failures.',
      labelNames: [...genAi, 'error_type'],
      registers,
    },
    DURATION_BUCKETS,
  );
  const ttft = new CellHistogram(
    {
      name: 'gen_ai_server_time_to_first_token_seconds',
      help: 'Time to the first streamed event of a successful stream (gen_ai.server.time_to_first_token, as the gateway sees it).',
      labelNames: [...genAi],
      registers,
    },
    TTFT_BUCKETS,
  );
  const requests = new CellCounter({
    name: 'gateway_requests_total',
    help: 'Requests to the model endpoints, by endpoint, model (the catalog model that served or was tried last; empty before one was chosen), provider and status class.',
    labelNames: ['endpoint', 'model', 'provider', 'status_class'],
    registers,
  });
  const tokens = new CellCounter({
    name: 'gateway_tokens_total',
    help: 'Tokens by kind (input and output count all; the other kinds are parts of them).',
    labelNames: ['model', 'provider', 'type'],
    registers,
  });
  const images = new CellCounter({ name: 'gateway_images_total', help: 'Images generated.', labelNames: ['model', 'provider'], registers });
  const searches = new CellCounter({ name: 'gateway_web_searches_total', help: 'Web searches providers ran for requests (server-side tool use).', labelNames: ['model', 'provider'], registers });
  const cost = new CellCounter({ name: 'gateway_cost_usd_total', help: 'Cost in USD of the requests whose cost is known (catalog pricing).', labelNames: ['model', 'provider'], registers });
  const unpriced = new CellCounter({ name: 'gateway_unpriced_requests_total', help: 'Requests with usage but no cost (a kind used without a catalog price).', labelNames: ['model', 'provider'], registers });
  const partial = new CellCounter({ name: 'gateway_partial_usage_total', help: 'Streams cut or abandoned before their final usage: their usage is what was seen so far.', labelNames: ['model', 'provider'], registers });
  const fallbacks = new CellCounter({ name: 'gateway_fallbacks_total', help: 'Times a request moved on to another target after one failed.', labelNames: ['endpoint', 'model'], registers });
  const upstreamErrors = new CellCounter({
    name: 'gateway_upstream_errors_total',
    help: `Failed upstream calls, by provider and error type (${UPSTREAM_ERROR_TYPES.join(', ')}).`,
    labelNames: ['provider', 'error_type'],
    registers,
  });
  const overhead = new CellHistogram(
    {
      name: 'gateway_overhead_seconds',
      help: 'Time to first byte spent in the gateway itself (not waiting on upstream calls), for requests a model answered.',
      labelNames: ['endpoint'],
      registers,
    },
    OVERHEAD_BUCKETS,
  );
  new Gauge({
    name: 'gateway_inflight_requests',
    help: 'Requests whose response has not closed yet.',
    registers,
    collect() {
      this.set(src.inflight());
    },
  });
  new Gauge({
    name: 'gateway_provider_cooldown',
    help: '1 while a deployment is in cool-down after consecutive failures (routing skips it), else 0.',
    labelNames: ['model', 'provider', 'region', 'deployment'],
    aggregator: 'max',
    registers,
    collect() {
      this.reset();
      const config = src.config();
      for (const m of config.models.values())
        for (const d of m.deployments) {
          const p = config.providers.get(d.provider);
          if (!p) continue;
          const region = regionOf(d, p);
          this.set({ model: m.id, provider: p.name, region, deployment: d.model }, src.health.isCooling(m.id, d, region) ? 1 : 0);
        }
    },
  });
  new Counter({
    name: 'gateway_config_reloads_total',
    help: 'Reloads of gateway.yaml, by result (success, failure).',
    labelNames: ['result'],
    registers,
    collect() {
      this.reset();
      for (const [result, n] of Object.entries(reloadCounts())) this.inc({ result }, n);
    },
  });
  if (src.limits) {
    const l = src.limits;
    new Counter({
      name: 'gateway_key_limit_rejections_total',
      help: "Requests refused by their key's limit (docs/keys.md): requests, tokens, parallel, budget.",
      labelNames: ['limit'],
      registers,
      collect() {
        this.reset();
        for (const [limit, n] of Object.entries(l.rejected)) this.inc({ limit }, n);
      },
    });
    new Counter({
      name: 'gateway_key_limit_admissions_total',
      help: "Limited keys' requests admitted, by what decided: the store (Redis, or this process's memory) or a grant this replica held (docs/keys.md#grants).",
      labelNames: ['by'],
      registers,
      collect() {
        this.reset();
        this.inc({ by: 'store' }, l.admitted.store);
        this.inc({ by: 'grant' }, l.admitted.grant);
      },
    });
    new Counter({
      name: 'gateway_state_unavailable_total',
      help: 'Requests of limited keys the shared state (Redis) could not check: served without limits (state.on_unavailable: open) or refused with 503 (closed).',
      registers,
      collect() {
        this.reset();
        this.inc(l.unavailable);
      },
    });
  }
  if (src.usage) {
    const u = src.usage;
    new Counter({
      name: 'gateway_usage_records_dropped_total',
      help: 'Usage records dropped: the queue was full or the store failed or was too slow.',
      registers,
      collect() {
        this.reset();
        this.inc(u.stats.dropped);
      },
    });
    new Gauge({
      name: 'gateway_usage_queue_length',
      help: 'Usage records waiting to be written.',
      registers,
      collect() {
        this.set(u.stats.queued);
      },
    });
  }

  const familyOf = (provider: string | undefined) => (provider ? src.config().providers.get(provider)?.family : undefined);

  // Label values in each metric's labelNames order.
  function record(r: RequestRecord): void {
    const model = r.model ?? '';
    const provider = r.provider ?? '';
    requests.inc([r.endpoint, model, provider, statusClass(r.status)]);
    for (const e of r.upstream_errors ?? []) upstreamErrors.inc([e.provider, e.type]);
    if (r.fallbacks) fallbacks.inc([r.endpoint, r.requested_model ?? model], r.fallbacks);
    if (!r.attempts) return;
    const family = familyOf(r.provider) ?? '';
    const op = operationName(r.endpoint);
    const provName = providerName(family);
    // error.type kept low-cardinality: the HTTP status of a failure, `stream_error` for a stream that broke.
    const errorType = r.status >= 400 ? String(r.status) : r.error_type && r.error_type !== 'client_closed' ? 'stream_error' : '';
    duration.observe([op, provName, model, errorType], r.latency_ms / 1000);
    const ok = r.status < 400;
    if (ok && r.stream && r.ttfb_ms !== undefined) ttft.observe([op, provName, model], r.ttfb_ms / 1000);
    if (ok && r.ttfb_ms !== undefined) overhead.observe([r.endpoint], Math.max(0, r.ttfb_ms - r.upstream_ms) / 1000);
    const u = r.usage;
    if (!u) return;
    tokenUsage.observe([op, provName, model, 'input'], u.input_tokens);
    tokenUsage.observe([op, provName, model, 'output'], u.output_tokens);
    // Kind by kind, each from its own field: no object of the kinds made for every record.
    if (u.input_tokens) tokens.inc([model, provider, 'input'], u.input_tokens);
    if (u.cached_input_tokens) tokens.inc([model, provider, 'cached_input'], u.cached_input_tokens);
    if (u.cache_write_tokens) tokens.inc([model, provider, 'cache_write'], u.cache_write_tokens);
    if (u.input_image_tokens) tokens.inc([model, provider, 'input_image'], u.input_image_tokens);
    if (u.output_tokens) tokens.inc([model, provider, 'output'], u.output_tokens);
    if (u.reasoning_tokens) tokens.inc([model, provider, 'reasoning'], u.reasoning_tokens);
    if (u.output_image_tokens) tokens.inc([model, provider, 'output_image'], u.output_image_tokens);
    if (u.images) images.inc([model, provider], u.images);
    if (u.web_searches) searches.inc([model, provider], u.web_searches);
    if (r.cost_usd !== null) cost.inc([model, provider], r.cost_usd);
    else unpriced.inc([model, provider]);
    if (r.usage_source === 'partial') partial.inc([model, provider]);
  }

  if (cluster.isWorker) joinCluster(registry);
  return {
    registry,
    record,
    contentType: registry.contentType,
    text: () => (cluster.isWorker ? clusterText(registry) : registry.metrics()),
  };
}

// ---------------------------------------------------------------- several workers

let listening = false;
let nextId = 0;
const waiting = new Map<number, { resolve(text: string): void; timer: NodeJS.Timeout }>();

/**
 * In a worker: answer the primary's requests for this worker's metrics
 * (prom-client's own messages, from AggregatorRegistry.setRegistries), and
 * take the primary's aggregated text for the scrapes this worker serves.
 */
function joinCluster(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry]);
  if (listening) return;
  listening = true;
  // Constructed for its side effect: it makes this worker answer the primary's metric requests.
  new AggregatorRegistry();
  process.on('message', (m: { gatewayMetricsText?: { id: number; text: string } }) => {
    const reply = m?.gatewayMetricsText;
    const w = reply && waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    clearTimeout(w.timer);
    w.resolve(reply.text);
  });
}

/**
 * A scrape served by a worker: the primary aggregates every worker's metrics.
 * Without its answer within 5 s (or with an empty one), this worker's own.
 */
function clusterText(registry: Registry): Promise<string> {
  const id = ++nextId;
  return new Promise<string>((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      resolve('');
    }, 5_000);
    waiting.set(id, { resolve, timer });
    process.send?.({ gatewayMetrics: { id } });
  }).then((text) => text || registry.metrics());
}

/** In the primary: aggregate the workers' metrics for a worker that serves a scrape. */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, m: { gatewayMetrics?: { id: number } }) => {
    const ask = m?.gatewayMetrics;
    if (!ask) return;
    aggregator
      .clusterMetrics()
      .then((text) => worker.send({ gatewayMetricsText: { id: ask.id, text } }))
      .catch(() => worker.send({ gatewayMetricsText: { id: ask.id, text: '' } }));
  });
}
