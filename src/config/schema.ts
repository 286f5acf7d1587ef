// The gateway.yaml schema. This file is the single source of truth for the
// config: the loader validates against it and `model-gateway schema` turns it
// into the JSON Schema shipped as gateway.schema.json for editors.
import * as v from 'valibot';

const nonEmpty = v.pipe(v.string(), v.minLength(1, 'must not be empty'));
const positiveInt = v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1'));
const nonNegativeInt = v.pipe(v.number(), v.integer('must be an integer'), v.minValue(0, 'must be at least 0'));

export const MODEL_ID = /^[A-Za-z0-9][\w.-]*\/[\w.:@+-]+$/;
const modelId = v.pipe(v.string(), v.regex(MODEL_ID, 'must be a model id of the form <owner>/<model>'));

export const ENDPOINTS = ['chat_completions', 'messages', 'responses', 'images_generations'] as const;
export const MODEL_STATUS = ['active', 'deprecated', 'retired'] as const;
export const MODALITIES = ['text', 'image', 'audio', 'video', 'pdf'] as const;

/** A byte size: `512`, `512b`, `64kb`, `20mb`, `1gb` (units of 1024). */
export const SIZE = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i;

/** Bytes in a size accepted by `SIZE`, or a number of bytes. */
export function sizeBytes(size: string | number): number {
  if (typeof size === 'number') return size;
  const m = SIZE.exec(size);
  if (!m) throw new Error(`not a size: ${size}`);
  const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase() as 'b'];
  return Math.floor(Number(m[1]) * unit);
}

const ServerSchema = v.strictObject({
  host: v.optional(v.string(), '0.0.0.0'),
  port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(65535)), 8080),
  /** Largest accepted request body, as bytes or a size such as `10mb`. */
  body_limit: v.optional(v.union([v.pipe(v.string(), v.regex(SIZE, "must be a size such as '20mb', '512kb' or a number of bytes")), positiveInt]), '20mb'),
  /** A client that has not sent its whole body within this time gets a 408. */
  body_timeout_ms: v.optional(positiveInt, 30_000),
  /** Deepest nesting of JSON objects and arrays a request body may have (the body itself is level 1); deeper is a 400 naming the field. */
  json_max_depth: v.optional(v.pipe(v.number(), v.integer('must be an integer'), v.minValue(8, 'must be at least 8'), v.maxValue(1000, 'must be at most 1000')), 128),
  /**
   * Client connections open at once, per process (each cluster worker has its own). A connection
   * accepted above it gets a 503 envelope for its request and is closed; above twice it, new
   * connections are closed at once.
   */
  max_connections: v.optional(positiveInt, 10_000),
  /** SIGTERM: how long in-flight requests may run before the process exits anyway. */
  shutdown_timeout_ms: v.optional(positiveInt, 10_000),
  /** Worker processes (Node cluster). 0 (the default) means one per core; 1 serves from a single process. */
  workers: v.optional(nonNegativeInt, 0),
  /**
   * After a load, once no request has started for this long (between one and
   * two of it), one full garbage collection gives back the memory the load
   * grew; the next requests then run slower for a few seconds while V8
   * optimises the request path again (docs/performance.md, "Memory"). 0: never.
   */
  idle_release_ms: v.optional(nonNegativeInt, 10_000),
  /** Reload the config when gateway.yaml changes (as SIGHUP does): docs/configuration.md "Reloading the configuration". */
  watch_config: v.optional(v.boolean(), false),
  /** Log level for the access log and gateway events. */
  log_level: v.optional(v.picklist(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info'),
  /** Upstream transport: `undici` (undici connection pools, the default: least CPU per call), `http` (node:http on keep-alive agents) or `proxy` (http-proxy-3). docs/performance.md has the numbers. */
  transport: v.optional(v.picklist(['undici', 'http', 'proxy']), 'undici'),
  /**
   * Node/V8 flags the gateway process runs with (e.g. `--max-semi-space-size=32`
   * to trade some throughput for memory: docs/performance.md#memory): `start`
   * re-executes itself once (same pid) with those it was not started with.
   */
  node_flags: v.optional(v.array(v.pipe(v.string(), v.regex(/^--[a-z][a-z0-9_-]*(=[^\s]+)?$/, "must be a node or V8 flag such as '--max-semi-space-size=32'"))), []),
});

export const BUDGET_PERIODS = ['day', 'month'] as const;

/** What a client key may do and how much (docs/keys.md): given on a key, or named under `policies` and shared. */
const PolicyEntries = {
  /** Model ids (with `*` wildcards) this key may use. Absent: all. */
  models: v.optional(v.array(nonEmpty)),
  /** Endpoints this key may call. Absent: all. */
  endpoints: v.optional(v.array(v.picklist(ENDPOINTS))),
  /** Model requests per minute. */
  rpm: v.optional(positiveInt),
  /** Tokens (input and output) per minute, reserved before each call and settled after it. */
  tpm: v.optional(positiveInt),
  /** Requests under way at once. */
  max_parallel: v.optional(positiveInt),
  /** Spend in USD per `budget_period` (costs from the catalog's prices). */
  budget_usd: v.optional(v.pipe(v.number(), v.minValue(0, 'must be at least 0'))),
  /** The budget's period, in UTC: `day` or `month`. */
  budget_period: v.optional(v.picklist(BUDGET_PERIODS)),
};
const PolicySchema = v.strictObject(PolicyEntries);

const KeySchema = v.strictObject({
  /** A label for logs and usage records; never the key itself. */
  name: nonEmpty,
  /** SHA-256 of the key, hex. Plaintext keys are only accepted through GATEWAY_API_KEYS. */
  sha256: v.pipe(v.string(), v.regex(/^[a-f0-9]{64}$/i, 'must be a 64-character hex SHA-256 digest')),
  /** A policy under `policies` this key follows; what the key gives itself overrides it. */
  policy: v.optional(nonEmpty),
  ...PolicyEntries,
});

const StateSchema = v.strictObject({
  /**
   * Redis shared by the replicas (`redis://host:6379/0`, `rediss://…`): rate
   * limits, budgets and deployment cool-downs hold across them. Empty: this
   * process keeps them in memory.
   */
  redis_url: v.optional(v.pipe(v.string(), v.regex(/^(?:rediss?:\/\/\S+)?$/, "must be a Redis URL ('redis://host:6379') or empty")), ''),
  /** Redis unreachable: `open` serves without the shared limits (a warning, a counter), `closed` answers 503. */
  on_unavailable: v.optional(v.picklist(['open', 'closed']), 'open'),
  /** Longest wait for one Redis command before it counts as unavailable. */
  timeout_ms: v.optional(positiveInt, 250),
  /**
   * With Redis: how long a replica admits a busy key's requests from a grant
   * it took from Redis (a share of what the key has left: at most 1/16, about
   * this long's worth of its traffic) before it settles the grant and gives
   * back what it did not use. 0: Redis admits every request.
   */
  grant_ms: v.optional(v.pipe(nonNegativeInt, v.maxValue(10_000, 'must be at most 10000')), 1000),
  /** Prefix of every Redis key and channel the gateway uses (several gateways on one Redis). */
  key_prefix: v.optional(v.pipe(v.string(), v.regex(/^[\w:.-]{0,64}$/, 'must be letters, digits and : . _ - (at most 64)')), 'mg:'),
});

/**
 * The core keys of a provider block. A block may hold more: the keys of its
 * family (credentials, region, project, API version...), checked by the
 * schema its provider plugin supplies (FamilyDefaults.schema in load.ts).
 */
const ProviderEntries = {
  name: v.pipe(v.string(), v.regex(/^[A-Za-z0-9][\w.-]*$/, 'must be letters, digits, dot, dash or underscore')),
  family: nonEmpty,
  base_url: v.optional(v.pipe(v.string(), v.url('must be an absolute URL'))),
  api_key: v.optional(v.string()),
  /** Extra headers sent on every upstream request (e.g. OpenAI-Organization). */
  headers: v.optional(v.record(v.string(), v.string()), {}),
  /** No first byte within this time: the attempt fails and the next target is tried. */
  timeout_ms: v.optional(positiveInt, 30_000),
  /**
   * A stream whose upstream sends nothing (no byte: no event, no keep-alive
   * comment) for this long after its headers is ended with an error event and
   * its upstream request aborted.
   */
  stream_idle_timeout_ms: v.optional(positiveInt, 300_000),
  region: v.optional(v.string(), 'default'),
  /** Retries of a 429 on this provider before moving on (each counts as an attempt). */
  retries: v.optional(nonNegativeInt, 1),
  max_sockets: v.optional(positiveInt, 256),
  /**
   * The upstream takes OpenAI's `stream_options.include_usage` (the gateway
   * asks for a stream's usage on every stream, and drops the usage chunk a
   * client did not ask for). `false` for a server that rejects the option:
   * the gateway then never sends it, and such streams carry no usage.
   */
  stream_usage: v.optional(v.boolean(), true),
};
const ProviderSchema = v.looseObject(ProviderEntries);

/** The keys every provider block has; any other key belongs to the family's schema. */
export const PROVIDER_KEYS: ReadonlySet<string> = new Set(Object.keys(ProviderEntries));

const DeploymentSchema = v.strictObject({
  provider: nonEmpty,
  /** The model name the provider knows. */
  model: nonEmpty,
  region: v.optional(v.string()),
  weight: v.optional(v.pipe(v.number(), v.minValue(0)), 1),
});

const CapabilitiesSchema = v.looseObject({
  /** Reasoning model: temperature forced to 1, sampling knobs stripped (OpenAI o-series, gpt-5). */
  reasoning: v.optional(v.boolean(), false),
  /** Supports reasoning_effort mapped to a thinking budget (Anthropic thinking, Gemini thinkingConfig). */
  thinking: v.optional(v.boolean(), false),
  /** The model rejects `stop` (some newer reasoning models). */
  no_stop: v.optional(v.boolean(), false),
  tools: v.optional(v.boolean(), true),
  vision: v.optional(v.boolean()),
  json_schema: v.optional(v.boolean(), true),
  reasoning_summary: v.optional(v.boolean(), false),
  web_search: v.optional(v.boolean(), false),
  /** Largest n for image models. */
  max_images: v.optional(positiveInt),
  /**
   * An older image model (dall-e generation): takes the deprecated
   * `response_format` and `style`, the sizes 256x256/512x512/1792x1024/1024x1792
   * and quality standard/hd, not background/output_format/output_compression/moderation.
   */
  legacy_images: v.optional(v.boolean(), false),
});

const price = v.pipe(v.number(), v.minValue(0, 'must be at least 0'));

/**
 * List prices in USD: per million tokens of each kind, per image, per web
 * search. A kind a request used without a price here makes its cost null.
 */
const PriceEntries = {
  /** Input tokens (text, and any not counted under another kind). */
  input: v.optional(price),
  /** Input tokens read from the provider's prompt cache. */
  cached_input: v.optional(price),
  /** Input tokens written to the provider's prompt cache. */
  cache_write: v.optional(price),
  /** Input tokens that are images (image models). */
  input_image: v.optional(price),
  /** Output tokens, reasoning included. */
  output: v.optional(price),
  /** Output tokens that are images (image models). */
  output_image: v.optional(price),
  /** Per image generated, for models priced per image (no output tokens reported). */
  image: v.optional(price),
  /** Per provider web search (server-side tool use). */
  web_search: v.optional(price),
  /** Per request that ran at least one provider web search, however many (replaces `web_search`). */
  web_search_request: v.optional(price),
};

const PricingSchema = v.strictObject({
  ...PriceEntries,
  /**
   * Prices for a request whose input exceeds `threshold` tokens (Gemini Pro's
   * long prompts): the kinds given here replace the base prices for the whole request.
   */
  long_context: v.optional(v.strictObject({ threshold: positiveInt, ...PriceEntries })),
});

const ModelSchema = v.strictObject({
  id: modelId,
  status: v.optional(v.picklist(MODEL_STATUS), 'active'),
  created: v.optional(nonNegativeInt, 0),
  modalities: v.optional(
    v.strictObject({ input: v.array(v.picklist(MODALITIES)), output: v.array(v.picklist(MODALITIES)) }),
    { input: ['text'], output: ['text'] },
  ),
  endpoints: v.optional(v.array(v.picklist(ENDPOINTS)), ['chat_completions', 'responses', 'messages']),
  capabilities: v.optional(CapabilitiesSchema, {}),
  context_window: v.optional(positiveInt),
  max_output_tokens: v.optional(positiveInt),
  deployments: v.pipe(v.array(DeploymentSchema), v.minLength(1, 'needs at least one deployment')),
  /** Default fallback chain: other model ids tried after this one. */
  fallbacks: v.optional(v.array(modelId), []),
  /** How deployments are chosen: in order, or at random by weight. */
  routing: v.optional(v.picklist(['ordered', 'weighted']), 'ordered'),
  /** List prices (USD) for cost accounting; absent: cost is null. */
  pricing: v.optional(PricingSchema),
});

const PluginSchema = v.strictObject({
  /** A built-in plugin name, or a name for a custom plugin loaded from `path`. */
  name: v.optional(nonEmpty),
  /** Path to a module (relative to the config file) whose default export is a plugin. */
  path: v.optional(nonEmpty),
  enabled: v.optional(v.boolean(), true),
  options: v.optional(v.record(v.string(), v.unknown()), {}),
});

/** The `plugins:` list (also read on its own, before the rest: src/pipeline.ts, loadGatewayConfig). */
export const PluginsSchema = v.optional(v.array(PluginSchema));

const RoutingSchema = v.strictObject({
  /** Attempts per request, whatever the chain's length. */
  max_attempts: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(3)), 3),
  /** Consecutive failures after which a deployment is skipped for cooldown_ms. */
  failure_threshold: v.optional(positiveInt, 3),
  cooldown_ms: v.optional(nonNegativeInt, 30_000),
  /** Longest Retry-After the gateway waits out before retrying a 429 on the same target. */
  max_retry_wait_ms: v.optional(nonNegativeInt, 2_000),
});

/** A table's name, in SQLite and PostgreSQL. */
const sqlName = v.pipe(v.string(), v.regex(/^[a-z_][a-z0-9_]{0,47}$/, 'must be a lower-case SQL identifier (letters, digits, underscore; at most 48)'));

/** Usage records (docs/observability.md#usage-store): one per request, written off the request path in batches. */
const UsageStoreSchema = v.strictObject({
  /** Write a usage record for every request. */
  enabled: v.optional(v.boolean(), true),
  /** SQLite file for usage records when `storage.url` names no PostgreSQL database; `:memory:` keeps them in memory. */
  db: v.optional(v.string(), './data/usage.sqlite'),
  /** The table's name (SQLite and PostgreSQL). */
  table: v.optional(sqlName, 'gateway_usage'),
  /** Records older than this many days are deleted (hourly); 0 keeps them forever. */
  retention_days: v.optional(nonNegativeInt, 90),
  /** Records waiting to be written; when the queue is full, new records are dropped (counted and logged), never waited for. */
  queue_size: v.optional(positiveInt, 10_000),
  /** Records per write. */
  batch_size: v.optional(positiveInt, 500),
  /** A record waits at most this long before it is written. */
  flush_ms: v.optional(positiveInt, 1_000),
  /** A write taking longer than this fails; its records are dropped (counted). */
  write_timeout_ms: v.optional(positiveInt, 10_000),
});

const StorageSchema = v.strictObject({
  /** SQLite file for stored responses when `url` names no PostgreSQL database; `:memory:` keeps them in memory. */
  responses_db: v.optional(v.string(), './data/responses.sqlite'),
  /** The PostgreSQL table of stored responses (`url`); their output items go to `<name>_items`. */
  responses_table: v.optional(sqlName, 'gateway_responses'),
  /**
   * Longest an operation of the responses store may take, a wait for
   * another connection's lock included: a response not stored within it is
   * answered with `store: false`.
   */
  responses_timeout_ms: v.optional(positiveInt, 2_000),
  /**
   * A PostgreSQL database for stored responses, usage records and runtime
   * keys (`postgres://user:pass@host:5432/db`); empty or absent: the embedded
   * SQLite files `responses_db` and `usage.db`. The shipped gateway.yaml
   * takes it from DATABASE_URL.
   */
  url: v.optional(v.pipe(v.string(), v.regex(/^(?:postgres(?:ql)?:\/\/\S+)?$/, "must be a PostgreSQL URL ('postgres://user:password@host:5432/database') or empty")), ''),
  usage: v.optional(UsageStoreSchema, {}),
});

const AdminKeySchema = v.strictObject({
  /** A label for logs; never the key itself. */
  name: nonEmpty,
  /** SHA-256 of the key, hex. A plaintext admin key is only accepted through GATEWAY_ADMIN_KEY. */
  sha256: v.pipe(v.string(), v.regex(/^[a-f0-9]{64}$/i, 'must be a 64-character hex SHA-256 digest')),
});

const TelemetrySchema = v.strictObject({
  /**
   * An OpenTelemetry collector's OTLP/HTTP endpoint (`http://collector:4318`;
   * spans go to `/v1/traces`). Absent: no traces.
   */
  otlp_endpoint: v.optional(v.pipe(v.string(), v.regex(/^(?:https?:\/\/\S+)?$/, "must be an http(s) URL such as 'http://collector:4318', or empty"))),
  traces: v.optional(
    v.strictObject({
      /** Send a W3C traceparent upstream (the attempt's span as parent), so that a provider's own tracing joins the trace. */
      propagate_upstream: v.optional(v.boolean(), false),
      /**
       * The OTLP/HTTP encoding of the exports: `http/protobuf` (the default, as
       * in OpenTelemetry's SDKs; about a third of the bytes, cheaper to write)
       * or `http/json`. A collector's OTLP receiver takes both.
       */
      protocol: v.optional(v.picklist(['http/protobuf', 'http/json']), 'http/protobuf'),
      /**
       * The share of new traces (requests without a client traceparent) that
       * are recorded and exported, decided from the trace id; a client's
       * traceparent decides for its own trace (parent-based, OpenTelemetry's
       * default sampler).
       */
      sample_ratio: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1)), 1),
    }),
    {},
  ),
  /** Prometheus metrics (docs/observability.md#metrics). */
  metrics: v.optional(
    v.strictObject({
      enabled: v.optional(v.boolean(), true),
      /** Where Prometheus scrapes. */
      path: v.optional(v.pipe(v.string(), v.regex(/^\/[A-Za-z0-9._~/-]*$/, "must be a path such as '/metrics'")), '/metrics'),
      /** Require an admin key (admin_keys, GATEWAY_ADMIN_KEY) as a Bearer token to scrape. Default: open (the metrics hold no user data and no secret). */
      require_admin_key: v.optional(v.boolean(), false),
    }),
    {},
  ),
});

export const ConfigSchema = v.strictObject({
  $schema: v.optional(v.string()),
  server: v.optional(ServerSchema, {}),
  keys: v.optional(v.array(KeySchema), []),
  /** Keys for the admin endpoints (/admin/*), stored as SHA-256 digests; separate from client keys. */
  admin_keys: v.optional(v.array(AdminKeySchema), []),
  /** Named policies (limits, budgets, allowed models and endpoints) that keys refer to by `policy`. */
  policies: v.optional(v.record(v.pipe(v.string(), v.regex(/^[\w.-]{1,64}$/, 'must be letters, digits, dot, dash or underscore')), PolicySchema), {}),
  /** State shared by replicas (docs/keys.md#shared-state). */
  state: v.optional(StateSchema, {}),
  providers: v.optional(v.array(ProviderSchema), []),
  models: v.optional(v.array(ModelSchema), []),
  /** Other names for models: `alias: <owner>/<model>`. */
  aliases: v.optional(v.record(v.string(), modelId), {}),
  routing: v.optional(RoutingSchema, {}),
  storage: v.optional(StorageSchema, {}),
  telemetry: v.optional(TelemetrySchema, {}),
  /** Pipeline plugins, in order. Absent: the built-in pipeline. */
  plugins: PluginsSchema,
});

export type RawConfig = v.InferOutput<typeof ConfigSchema>;
export type ProviderConfig = v.InferOutput<v.ObjectSchema<typeof ProviderEntries, undefined>> & {
  base_url: string;
  api_key?: string;
  /** The family's own keys, as its schema returned them (e.g. `api_version`, `project`). */
  options: Record<string, unknown>;
  /** Why this provider cannot call its upstream (no credentials), if so: routing skips it. */
  missing_credentials?: string;
  /** The keys of `options` that hold secrets (its family's `secrets`): scrubbed from error texts. */
  secret_options?: readonly string[];
  /**
   * Set by a config reload (src/reload.ts): the connection pool's name (the
   * provider's name until a reload changes its base_url, max_sockets or
   * timeout_ms) and the identity of its cross-request state (cool-down,
   * `shared`: a new one when the block changed at all). Absent: `name`.
   */
  pool?: string;
  instance?: string;
};
export type ModelConfig = v.InferOutput<typeof ModelSchema>;
export type DeploymentConfig = v.InferOutput<typeof DeploymentSchema>;
export type PluginConfig = v.InferOutput<typeof PluginSchema>;
export type KeyConfig = v.InferOutput<typeof KeySchema>;
export type PolicyConfig = v.InferOutput<typeof PolicySchema>;
export type Endpoint = (typeof ENDPOINTS)[number];
