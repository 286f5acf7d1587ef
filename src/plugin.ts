// The plugin contract. Two kinds of plugin exist:
//
// - Pipeline plugins (auth, analytics, normalize, debug, and custom ones) run
//   in the order gateway.yaml lists them, Koa-style: `handle(ctx, next)`,
//   around the core's routing step (`route` in the list: src/route.ts).
//   Each declares its `name`, the slots it reads (`needs`), and owns one slot of
//   per-request state, `ctx.state[name]`. A plugin may also take part in every
//   attempt of the fallback loop through `prepareAttempt`, a pure function of the
//   request for one target (called again for each target).
// - Provider plugins serve one or more provider families. They map the IR
//   (src/types.ts) to their wire format and back, and talk to the upstream only
//   through the Transport they are given.
//
// See docs/plugins.md for the author's guide.
import type { IncomingHttpHeaders } from 'node:http';
import type { GatewayConfig, ClientKey, FamilyDefaults } from './config/load.js';
import type { ProviderConfig, ModelConfig, DeploymentConfig, Endpoint } from './config/schema.js';
import type { Transport } from './upstream/transport.js';
import type { Authorizer } from './provider/http.js';
import type { ChatRequest, ChatCompletion, ChatChunk, ChatUsage, RoutingAttempt, NormalizationEntry, DeprecationEntry } from './types.js';
import type { Logger } from 'pino';
import type { RequestRecord, UsageMeter } from './usage.js';

export type DebugCategory = 'normalizations' | 'deprecations' | 'routing';

/** One target of the fallback chain: a catalog model and how it was named. */
export interface Target {
  model: ModelConfig;
}

/** What the route slot must hold for the dispatcher to run. */
export interface RouteSlot {
  /** Requested id as the client wrote it (may be an alias). */
  requested: string;
  /** The resolved primary model id. */
  primary: string;
  targets: Target[];
}

/** An attempt being prepared: the target and the deployment chosen for it. */
export interface AttemptInfo {
  target: Target;
  deployment: DeploymentConfig;
  provider: ProviderConfig;
  index: number;
}

export interface RequestContext {
  readonly id: string;
  readonly endpoint: Endpoint;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The URL's query parameters, on GET and DELETE endpoints (a POST's input is its body). */
  readonly query?: URLSearchParams;
  /** Aborted when the client disconnects. */
  readonly signal: AbortSignal;
  readonly config: GatewayConfig;
  readonly logger: Logger;
  /** The validated request body of the endpoint (chat IR for chat). */
  body: Record<string, unknown>;
  /** Set by the auth plugin. */
  client?: ClientKey;
  /** Per-plugin state, one slot per plugin name. */
  state: Record<string, unknown>;
  /** Fields added to this request's access-log line. */
  log: Record<string, unknown>;
  /** Debug entries, gathered whether or not the client asked (cheap). */
  debug: {
    normalizations: NormalizationEntry[];
    deprecations: DeprecationEntry[];
  };
  /** Routing attempts, appended by the dispatcher. */
  attempts: RoutingAttempt[];
  /**
   * Finalizers run on the final result object: the JSON body, or the last
   * chunk / final response of a stream. Used to attach `debug` and routing.
   */
  finalizers: ((final: Record<string, unknown>) => void)[];
  /** Set by the endpoint's terminal step; written to the client by the core. */
  outcome?: Outcome;
  /**
   * The request's usage record (src/usage.ts): filled by the core, the
   * dispatcher and plugins (the auth plugin sets `key`, analytics `user` and
   * `session`), handed to the usage store and metrics when the response closes.
   */
  record: RequestRecord;
  /** The usage seen so far (final once the provider reported it); settled onto `record` at the end. */
  meter: UsageMeter;
}

/**
 * What the core writes back: a JSON body, or SSE frames produced as they
 * arrive. A stream's `provider` is the provider block serving it: its
 * secrets are cut out of the error frame `onError` makes.
 */
export type Outcome =
  | { kind: 'json'; status?: number; body: Record<string, unknown>; headers?: Record<string, string> }
  | { kind: 'frames'; frames: AsyncIterable<string>; onError: (err: unknown) => string | null; provider?: ProviderConfig };

export interface PipelinePlugin {
  kind?: 'pipeline';
  name: string;
  /** Slots (plugin names) this plugin reads; checked at start-up. */
  needs?: string[];
  /** Called once at start-up with the plugin's options from gateway.yaml. */
  init?(api: PluginInitApi): void | Promise<void>;
  /**
   * Runs on the request line and headers alone, before the core reads a byte
   * of the body (`ctx.body` is `{}`), in pipeline order, before any `handle`.
   * Throw (a GatewayError) to refuse the request: its body is then never
   * read or parsed and its connection is closed. Authentication belongs here.
   */
  beforeBody?(ctx: RequestContext): void | Promise<void>;
  /** Middleware around the rest of the pipeline and the upstream call. */
  handle?(ctx: RequestContext, next: () => Promise<void>): Promise<void>;
  /** Rewrite the request for one attempt. Must be pure: return a new object, never mutate. */
  prepareAttempt?<T extends Record<string, unknown>>(ctx: RequestContext, attempt: AttemptInfo, request: T): T;
  /** Called at shutdown. */
  close?(): void | Promise<void>;
}

export interface PluginInitApi {
  options: Record<string, unknown>;
  config: GatewayConfig;
  logger: Logger;
}

/** Everything a provider plugin gets for one upstream call. */
export interface ProviderCall<T> {
  request: T;
  stream: boolean;
  provider: ProviderConfig;
  deployment: DeploymentConfig;
  model: ModelConfig;
  transport: Transport;
  signal: AbortSignal;
  requestId: string;
  /** Caches and stores shared across requests, keyed by the plugin (e.g. Gemini cached contents). */
  shared: Map<string, unknown>;
  /**
   * What this provider block's plugin shares with the other gateway replicas
   * (state.redis_url; absent without it): small strings by key, with a time
   * to live, so that replicas reuse what one of them created upstream (Gemini
   * cached contents). Each call is bounded by state.timeout_ms and rejects
   * when Redis is unavailable: treat that as a miss.
   */
  replicas?: ReplicaStore;
  /** Record a change the provider made to fit its API (shown under debug.normalizations). */
  note(entry: NormalizationEntry): void;
  /** The plugin's authorize step (ProviderPlugin.authorize), run by upstreamRequest on every call. */
  authorize?: Authorizer;
  /**
   * Report a stream's usage so far, in the chat IR's shape (cumulative: each
   * report replaces the last), as soon as the provider tells it (a message
   * start, a running count). A stream cut or abandoned before its usage chunk
   * is then accounted with what was seen, marked partial. Optional to call.
   */
  reportUsage?(usage: ChatUsage): void;
  /** A W3C traceparent for the upstream request (telemetry.traces.propagate_upstream); upstreamRequest sends it. */
  traceparent?: string;
}

/** Strings shared by the replicas (ProviderCall.replicas), namespaced by provider block. */
export interface ReplicaStore {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
}

export type ChatOutcome = { kind: 'json'; body: ChatCompletion } | { kind: 'stream'; chunks: AsyncIterable<ChatChunk> };

/** A same-API (passthrough) result: already in the ingress wire format. */
export type NativeOutcome =
  | { kind: 'json'; body: Record<string, unknown> }
  | { kind: 'stream'; events: AsyncIterable<{ event?: string; data: Record<string, unknown> }> };

/**
 * A request to count, in the forms the ingress has it. `chat` is the chat IR
 * (with `model` set to the deployment's model); an ingress that is the same
 * API as a provider also passes its own body (model patched), which a plugin
 * serving that API forwards as it is.
 */
export interface CountRequest {
  chat?: ChatRequest;
  /** A Responses API body (POST /v1/responses/input_tokens fields only). */
  responses?: Record<string, unknown>;
  /**
   * An Anthropic Messages API body (POST /v1/messages/count_tokens: the
   * prompt fields, model patched), present when the ingress is the Messages
   * API. A plugin serving that API natively counts it as it is.
   */
  messages?: Record<string, unknown>;
}

/**
 * A Messages API request for a provider that serves that API natively
 * (same-API path): the client's body with the model patched and the gateway's
 * own fields removed, and the client's `anthropic-beta` header, if any.
 */
export interface MessagesCall {
  body: Record<string, unknown>;
  beta?: string;
}

export interface ProviderPlugin {
  kind: 'provider';
  name: string;
  /** Provider families (gateway.yaml `family`) this plugin serves, with their defaults. */
  families: Record<string, FamilyDefaults>;
  chat?(call: ProviderCall<ChatRequest>): Promise<ChatOutcome>;
  /** Native Responses API (same-API fast path); other families are served via chat. */
  responses?(call: ProviderCall<Record<string, unknown>>): Promise<NativeOutcome>;
  images?(call: ProviderCall<Record<string, unknown>>): Promise<NativeOutcome>;
  /**
   * Native Messages API (POST /v1/messages, same-API path). Resolve `null`
   * when this target (e.g. a model of another publisher on the same cloud)
   * does not take the Messages body: the ingress then translates to `chat`.
   * A stream's events are the upstream's, JSON parsed, ending at message_stop.
   */
  messages?(call: ProviderCall<MessagesCall>): Promise<NativeOutcome | null>;
  /**
   * The input tokens the request would use, counted by the provider's own
   * counting endpoint (POST /v1/responses/input_tokens, Anthropic's
   * /v1/messages/count_tokens, Gemini's :countTokens). Resolve `null` when
   * this family, or the form the request comes in, has no provider count:
   * the core then counts locally (src/count.ts). Throw as `chat` does: a
   * provider 400 goes back to the client; any other failure falls back to
   * the local count.
   */
  countTokens?(call: ProviderCall<CountRequest>): Promise<number | null>;
  /**
   * Authorize or sign every upstream request after its body is serialised
   * (a request signature over the final bytes, an OAuth bearer token from a cache):
   * separate from the request mapping, may be async, bounded by the
   * provider's timeout_ms. See OutgoingRequest in src/provider/http.ts.
   */
  authorize?: Authorizer;
  close?(): void | Promise<void>;
}

export type Plugin = PipelinePlugin | ProviderPlugin;

export function isProviderPlugin(p: Plugin): p is ProviderPlugin {
  return (p as ProviderPlugin).kind === 'provider';
}

export function slot<T>(ctx: RequestContext, name: string): T | undefined {
  return ctx.state[name] as T | undefined;
}
