// What one request used and what it cost: the usage by kind, gathered from
// whatever the provider reported (a JSON answer's usage, a stream's usage
// chunk or the usage seen before it was cut), priced from the model's catalog
// entry. One RequestRecord per request, filled as the request goes (the core,
// the dispatcher, the auth and analytics plugins, the endpoint's terminal
// step) and handed to the usage sinks (store, metrics) when the response
// closes. docs/observability.md.
import type { ChatUsage } from './types.js';
import type { ModelConfig, Endpoint } from './config/schema.js';
import type { TraceContext } from './tracing.js';

/**
 * Token and unit counts of one request. `input_tokens` counts every input
 * token (cached reads, cache writes and image tokens included) and
 * `output_tokens` every output token (reasoning and image tokens included),
 * as OpenAI counts them; the other fields say how many of those were of a kind
 * priced differently.
 */
export interface Usage {
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  /** Input tokens that were images (image models' prompts). */
  input_image_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  /** Output tokens that were images (image models). */
  output_image_tokens: number;
  /** Images generated. */
  images: number;
  /** Provider server-tool uses: web searches. */
  web_searches: number;
}

export const USAGE_KINDS = [
  'input_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'input_image_tokens',
  'output_tokens',
  'reasoning_tokens',
  'output_image_tokens',
  'images',
  'web_searches',
] as const satisfies readonly (keyof Usage)[];

export function zeroUsage(): Usage {
  return { input_tokens: 0, cached_input_tokens: 0, cache_write_tokens: 0, input_image_tokens: 0, output_tokens: 0, reasoning_tokens: 0, output_image_tokens: 0, images: 0, web_searches: 0 };
}

const n = (x: unknown): number => (typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : 0);

/**
 * The chat IR usage (src/types.ts): `prompt_tokens` includes cached reads and
 * cache writes; `prompt_tokens_details.cache_write_tokens` and
 * `server_tool_use.web_search_requests` are the gateway's extensions for what
 * OpenAI's usage has no field for (docs/plugins.md).
 */
export function fromChatUsage(u: Partial<ChatUsage> | null | undefined): Usage {
  const out = zeroUsage();
  if (!u) return out;
  out.input_tokens = n(u.prompt_tokens);
  out.cached_input_tokens = n(u.prompt_tokens_details?.cached_tokens);
  out.cache_write_tokens = n(u.prompt_tokens_details?.cache_write_tokens);
  out.input_image_tokens = n(u.prompt_tokens_details?.image_tokens);
  out.output_tokens = n(u.completion_tokens);
  out.reasoning_tokens = n(u.completion_tokens_details?.reasoning_tokens);
  out.output_image_tokens = n(u.completion_tokens_details?.image_tokens);
  out.web_searches = n((u as { server_tool_use?: { web_search_requests?: number } }).server_tool_use?.web_search_requests);
  return out;
}

/** A Responses API usage object, and the web searches the response's output items show. */
export function fromResponsesUsage(u: Record<string, unknown> | null | undefined, output?: unknown): Usage {
  const out = zeroUsage();
  if (u && typeof u === 'object') {
    const inD = u.input_tokens_details as Record<string, unknown> | undefined;
    const outD = u.output_tokens_details as Record<string, unknown> | undefined;
    out.input_tokens = n(u.input_tokens);
    out.cached_input_tokens = n(inD?.cached_tokens);
    out.cache_write_tokens = n(inD?.cache_write_tokens);
    out.output_tokens = n(u.output_tokens);
    out.reasoning_tokens = n(outD?.reasoning_tokens);
    out.web_searches = n((u.server_tool_use as { web_search_requests?: number } | undefined)?.web_search_requests);
  }
  if (Array.isArray(output) && !out.web_searches) {
    let searches = 0;
    for (const item of output) if ((item as { type?: string } | null)?.type === 'web_search_call') searches++;
    out.web_searches = searches;
  }
  return out;
}

/**
 * Anthropic Messages usage (the /v1/messages front door): `input_tokens`
 * excludes cache reads and writes, which are counted on their own.
 */
export function fromMessagesUsage(u: Record<string, unknown> | null | undefined): Usage {
  const out = zeroUsage();
  if (!u || typeof u !== 'object') return out;
  out.cached_input_tokens = n(u.cache_read_input_tokens);
  out.cache_write_tokens = n(u.cache_creation_input_tokens);
  out.input_tokens = n(u.input_tokens) + out.cached_input_tokens + out.cache_write_tokens;
  out.output_tokens = n(u.output_tokens);
  out.web_searches = n((u.server_tool_use as { web_search_requests?: number } | undefined)?.web_search_requests);
  return out;
}

/** An image generation result (spec 2.4): its usage, and one image per `data` entry. */
export function fromImagesResult(result: Record<string, unknown>): Usage {
  const out = zeroUsage();
  const u = result.usage as Record<string, unknown> | undefined;
  if (u && typeof u === 'object') {
    const inD = u.input_tokens_details as Record<string, unknown> | undefined;
    const outD = u.output_tokens_details as Record<string, unknown> | undefined;
    out.input_tokens = n(u.input_tokens);
    out.cached_input_tokens = n(inD?.cached_tokens);
    out.input_image_tokens = n(inD?.image_tokens);
    out.output_tokens = n(u.output_tokens);
    out.output_image_tokens = n(outD?.image_tokens);
  }
  out.images = Array.isArray(result.data) ? result.data.length : 0;
  return out;
}

/** Prices of a catalog entry (gateway.yaml `pricing`): USD per million tokens of each kind, per image, per web search. */
export interface Pricing {
  input?: number;
  cached_input?: number;
  cache_write?: number;
  output?: number;
  input_image?: number;
  output_image?: number;
  image?: number;
  web_search?: number;
  /** Per request that ran at least one web search, however many (Gemini 2.x's "grounded prompt"); replaces `web_search`. */
  web_search_request?: number;
  /** Prices for requests whose input exceeds `threshold` tokens. */
  long_context?: Omit<Pricing, 'long_context'> & { threshold: number };
}

/**
 * The cost in USD of `u` at `p`, or null when a kind the request used has no
 * price (never a guess). Text input is the input less cached reads, cache
 * writes and image tokens; text output is the output less image tokens
 * (reasoning tokens are output tokens, priced as output). Images are priced
 * per image only when the provider reported no output tokens for them (a
 * token-priced image model is priced by its tokens). Above
 * `long_context.threshold` input tokens, its prices replace the base ones.
 */
export function costOf(u: Usage, pricing: Pricing | undefined): number | null {
  if (!pricing) return null;
  const long = pricing.long_context;
  const p = long && u.input_tokens > long.threshold ? { ...pricing, ...long } : pricing;
  let cost = 0;
  const add = (count: number, price: number | undefined, per: number): boolean => {
    if (count <= 0) return true;
    if (price === undefined) return false;
    cost += (count * price) / per;
    return true;
  };
  const textIn = Math.max(0, u.input_tokens - u.cached_input_tokens - u.cache_write_tokens - u.input_image_tokens);
  const textOut = Math.max(0, u.output_tokens - u.output_image_tokens);
  const ok =
    add(textIn, p.input, 1e6) &&
    add(u.cached_input_tokens, p.cached_input, 1e6) &&
    add(u.cache_write_tokens, p.cache_write, 1e6) &&
    add(u.input_image_tokens, p.input_image, 1e6) &&
    add(textOut, p.output, 1e6) &&
    add(u.output_image_tokens, p.output_image, 1e6) &&
    add(u.output_tokens > 0 ? 0 : u.images, p.image, 1) &&
    (p.web_search_request !== undefined ? add(u.web_searches > 0 ? 1 : 0, p.web_search_request, 1) : add(u.web_searches, p.web_search, 1));
  // Rounded to a nano-dollar: sums of float prices otherwise differ in the 17th digit.
  return ok ? Math.round(cost * 1e9) / 1e9 : null;
}

export function modelCost(u: Usage, model: ModelConfig | undefined): number | null {
  return costOf(u, model?.pricing);
}

/** Where a request's usage came from. */
export type UsageSource = 'reported' | 'partial' | 'none';

/**
 * The one internal record of a request, filled as the request goes, finished
 * when its response closes. Ids and names only; never a key or a prompt.
 */
export interface RequestRecord {
  /** Unix ms when the request arrived. */
  time: number;
  /**
   * performance.now() when `time` was read: the request's later instants
   * (its attempts' spans) are `time` plus the monotonic time since, so that
   * they lie within the request's span whatever the wall clock does.
   */
  mono?: number;
  request_id: string;
  endpoint: Endpoint;
  /** The client key's name (auth plugin). */
  key?: string;
  /** x-gateway-user-id / x-gateway-session-id (analytics plugin). */
  user?: string;
  session?: string;
  /** The model id the client asked for (after aliases), and what served it (or was tried last, for a request that failed). */
  requested_model?: string;
  model?: string;
  provider?: string;
  /** The provider's own model name (the deployment). */
  deployment?: string;
  /** Upstream calls made (retries and fallbacks included). */
  attempts: number;
  /** Each failed upstream call: its provider and the kind of failure (dispatch.ts, UPSTREAM_ERROR_TYPES). */
  upstream_errors?: { provider: string; type: string }[];
  /** An attempt that failed over to another target (fallbacks). */
  fallbacks: number;
  status: number;
  /** The error's code (or type) when the request failed, `client_closed`, or a stream's error. */
  error_type?: string;
  /** Usage by kind; null when the provider reported none. */
  usage: Usage | null;
  /** `reported`: the provider's final usage; `partial`: the usage seen before the stream was cut or abandoned. */
  usage_source: UsageSource;
  /** USD, or null without prices (or without usage). */
  cost_usd: number | null;
  latency_ms: number;
  /** Time to first byte: when the answer (a JSON body, a stream's first event) was ready to write. */
  ttfb_ms?: number;
  /** Time spent in upstream calls before the first byte (every attempt). */
  upstream_ms: number;
  stream: boolean;
  /** The request's trace (telemetry.otlp_endpoint set): src/tracing.ts. */
  trace?: TraceContext;
  /** Each upstream attempt, for its span: when it started (Unix ms), how long it took, how it failed. */
  attempt_spans?: { span_id: string; provider: string; model: string; deployment: string; start: number; duration_ms: number; error_type?: string }[];
}

/**
 * A new record with every field it can get, the optional ones undefined, in
 * one order: the plugins, the core and the stream writer fill them in a
 * different order on each path (a stream, a fallback, a client that left),
 * and an object that gains its fields in another order gets another hidden
 * class in V8. The sinks that read every record (the usage store's rows, the
 * metrics, the access line) then saw several and were optimised, dropped
 * ("wrong map") and optimised again: with --trace-deopt, once a second under
 * a load whose connections closed with requests in flight.
 */
export function newRecord(requestId: string, endpoint: Endpoint, time = Date.now()): RequestRecord {
  return {
    time,
    mono: performance.now(),
    request_id: requestId,
    endpoint,
    key: undefined,
    user: undefined,
    session: undefined,
    requested_model: undefined,
    model: undefined,
    provider: undefined,
    deployment: undefined,
    attempts: 0,
    upstream_errors: undefined,
    fallbacks: 0,
    status: 0,
    error_type: undefined,
    usage: null,
    usage_source: 'none',
    cost_usd: null,
    latency_ms: 0,
    ttfb_ms: undefined,
    upstream_ms: 0,
    stream: false,
    trace: undefined,
    attempt_spans: undefined,
  };
}

/**
 * Usage as a stream goes: the last usage seen (providers report it
 * cumulatively) and whether it is final. A stream that ends without its final
 * usage (cut by the upstream, abandoned by the client) leaves what was seen,
 * marked partial.
 */
export class UsageMeter {
  usage: Usage | null = null;
  final = false;

  /** A new upstream attempt: what an earlier, failed one reported does not count. */
  reset(): void {
    this.usage = null;
    this.final = false;
  }

  /** Usage seen so far (cumulative: each report replaces the last). */
  seen(u: Usage): void {
    if (!this.final) this.usage = u;
  }

  /** The provider's final usage. */
  done(u: Usage): void {
    this.usage = u;
    this.final = true;
  }

  /** Write the result onto the record. */
  settle(rec: RequestRecord): void {
    if (!this.usage) {
      rec.usage_source = 'none';
      return;
    }
    rec.usage = this.usage;
    rec.usage_source = this.final ? 'reported' : 'partial';
  }
}
