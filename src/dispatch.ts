// The fallback loop (docs/routing.md "Fallbacks").
// Targets come from the route slot; each is tried on one deployment (ordered or
// weighted, skipping one in cool-down). A target is abandoned on connection
// error, first-byte timeout, 5xx, 429 (after retries), 401/403 from the
// provider, or an unparseable body; a 400 is the caller's fault and returns at
// once. At most `routing.max_attempts` (≤ 3) upstream calls in all.
import { followRequest } from './abort.js';
import type { RequestContext, RouteSlot, AttemptInfo, ProviderPlugin, Target, ReplicaStore } from './plugin.js';
import type { DeploymentConfig, ProviderConfig } from './config/schema.js';
import type { RoutingAttempt } from './types.js';
import type { Transport } from './upstream/transport.js';
import { TransportError } from './upstream/errors.js';
import { UpstreamError } from './provider/errors.js';
import { batchSource, type BatchIterator } from './stream/batches.js';
import { GatewayError, errors, scrubSecrets, providerSecrets } from './errors.js';
import { fromChatUsage } from './usage.js';
import { spanId, traceparentOf } from './tracing.js';
import { Upstream, type AttemptServices, type Served } from './attempt.js';

export interface CoreServices extends AttemptServices {
  transport: Transport;
  providerPlugins: Map<string, ProviderPlugin>; // by family
  health: Health;
  shared: ProviderState;
  /** With shared state (state.redis_url): each provider block's ReplicaStore. */
  replicas?: { of(p: ProviderConfig): ReplicaStore };
}

/**
 * Each provider block's cross-request state (ProviderCall.shared: Gemini
 * cached contents, a Bedrock signer), by the block's instance: a reload that
 * changes the block (another key, region, URL) starts it afresh, one that
 * leaves it alone keeps it.
 */
export class ProviderState {
  private maps = new Map<string, Map<string, unknown>>();
  of(p: ProviderConfig): Map<string, unknown> {
    const k = p.instance ?? p.name;
    let m = this.maps.get(k);
    if (!m) this.maps.set(k, (m = new Map()));
    return m;
  }
  forget(instances: Iterable<string>): void {
    for (const k of instances) this.maps.delete(k);
  }
}

/**
 * What the ingress does with one attempt: translate its request for the
 * target and send it through `upstream` (src/attempt.ts), which prepares it
 * and calls the provider plugin. It must read a stream's first event before
 * returning (fallback is possible until then).
 */
export type Invoke<R> = (attempt: AttemptInfo, upstream: Upstream) => Promise<R>;

/**
 * Deployment cool-downs: after `failure_threshold` consecutive failures a
 * deployment is skipped for `cooldown_ms`. The hot path asks isCooling(),
 * which answers from this process's view without waiting on anything; with
 * shared state (src/state/) a cool-down one replica opens reaches the others'
 * views through Redis.
 */
export interface Health {
  isCooling(model: string, d: DeploymentConfig, region: string, now?: number): boolean;
  failure(model: string, d: DeploymentConfig, region: string): void;
  success(model: string, d: DeploymentConfig, region: string): void;
  /** New routing settings (a config reload): cool-downs under way keep their end. */
  configure(threshold: number, cooldownMs: number): void;
  /** Drop the state of these providers' deployments (a reload removed or changed their blocks). */
  forgetProviders(names: ReadonlySet<string>): void;
}

/** The cool-down key of a deployment: model|provider|region|upstream model (model ids hold no `|`). */
export function healthKey(model: string, d: DeploymentConfig, region: string): string {
  return `${model}|${d.provider}|${region}|${d.model}`;
}

/** Cool-downs in this process's memory; `onOpen` hears of each one opened here (to share it). */
export class MemoryHealth implements Health {
  private state = new Map<string, { failures: number; until: number }>();
  onOpen?: (key: string, until: number) => void;
  constructor(
    private threshold: number,
    private cooldownMs: number,
  ) {}
  configure(threshold: number, cooldownMs: number): void {
    this.threshold = threshold;
    this.cooldownMs = cooldownMs;
  }
  forgetProviders(names: ReadonlySet<string>): void {
    for (const k of this.state.keys()) if (names.has(k.split('|')[1])) this.state.delete(k);
  }
  /** A cool-down opened elsewhere (another replica): honoured until `until` unless one here ends later. */
  apply(key: string, until: number): void {
    if (until <= Date.now()) return;
    const s = this.state.get(key);
    if (s) s.until = Math.max(s.until, until);
    else this.state.set(key, { failures: 0, until });
  }
  isCooling(model: string, d: DeploymentConfig, region: string, now = Date.now()): boolean {
    if (this.state.size === 0) return false; // the common case: nothing has failed lately
    const s = this.state.get(healthKey(model, d, region));
    return !!s && s.until > now;
  }
  failure(model: string, d: DeploymentConfig, region: string) {
    const k = healthKey(model, d, region);
    const s = this.state.get(k) ?? { failures: 0, until: 0 };
    s.failures++;
    if (s.failures >= this.threshold) {
      s.until = Date.now() + this.cooldownMs;
      s.failures = 0;
      this.onOpen?.(k, s.until);
    }
    this.state.set(k, s);
  }
  success(model: string, d: DeploymentConfig, region: string) {
    if (this.state.size !== 0) this.state.delete(healthKey(model, d, region));
  }
}

export function regionOf(d: DeploymentConfig, p: ProviderConfig): string {
  return d.region ?? p.region;
}

/**
 * The deployment of a target to try: among those whose provider has
 * credentials (the others are recorded as skipped, so that one shipped
 * gateway.yaml works with whichever credentials an operator has), in order or
 * by weight, avoiding one in cool-down. Undefined when none has credentials.
 */
function pickDeployment(ctx: RequestContext, target: Target, health: Health): { deployment: DeploymentConfig; provider: ProviderConfig } | undefined {
  const m = target.model;
  if (m.deployments.length === 1 && m.routing !== 'weighted') {
    const deployment = m.deployments[0];
    const provider = ctx.config.providers.get(deployment.provider)!;
    return provider.missing_credentials === undefined ? { deployment, provider } : undefined;
  }
  const options: { deployment: DeploymentConfig; provider: ProviderConfig; index: number }[] = [];
  const skipped: { index: number; attempt: RoutingAttempt }[] = [];
  m.deployments.forEach((deployment, index) => {
    const provider = ctx.config.providers.get(deployment.provider)!;
    if (provider.missing_credentials === undefined) options.push({ deployment, provider, index });
    else skipped.push({ index, attempt: { provider: provider.name, region: regionOf(deployment, provider), status: 'skipped', model: m.id, latency_ms: 0, error: provider.missing_credentials } });
  });
  const pick = (o: (typeof options)[number]) => {
    // In order, only the deployments ahead of the one chosen were passed over
    // (a later one would not have been tried anyway); by weight, any could have been.
    for (const s of skipped) if (m.routing === 'weighted' || s.index < o.index) ctx.attempts.push(s.attempt);
    return { deployment: o.deployment, provider: o.provider };
  };
  if (!options.length) {
    for (const s of skipped) ctx.attempts.push(s.attempt);
    return undefined;
  }
  const live = options.filter((o) => !health.isCooling(m.id, o.deployment, regionOf(o.deployment, o.provider)));
  const pool = live.length ? live : options;
  if (m.routing === 'weighted' && pool.length > 1) {
    const total = pool.reduce((s, o) => s + (o.deployment.weight ?? 1), 0);
    let r = Math.random() * total;
    for (const o of pool) {
      r -= o.deployment.weight ?? 1;
      if (r < 0) return pick(o);
    }
  }
  return pick(pool[0]);
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

/**
 * The fixed vocabulary of upstream failures (metrics label
 * `gateway_upstream_errors_total{error_type}`, docs/observability.md).
 */
export const UPSTREAM_ERROR_TYPES = ['rate_limited', 'timeout', 'connection', 'server_error', 'auth', 'bad_request', 'not_found', 'invalid_response', 'other'] as const;
export type UpstreamErrorType = (typeof UPSTREAM_ERROR_TYPES)[number];

export function upstreamErrorType(err: unknown): UpstreamErrorType {
  if (err instanceof UpstreamError) {
    const s = err.status;
    if (err.error.code === 'invalid_upstream_response') return 'invalid_response';
    if (s === 429) return 'rate_limited';
    if (s === 401 || s === 403) return 'auth';
    if (s === 404) return 'not_found';
    if (s === 408 || s === 504) return 'timeout';
    if (s >= 500) return 'server_error';
    if (s >= 400) return 'bad_request';
    return 'other';
  }
  if (err instanceof TransportError) return /TIMEDOUT/.test(err.code ?? '') ? 'timeout' : 'connection';
  return 'other';
}

/** The error for a request aborted before it was answered: the abort's own (the shutdown deadline's 503), or the client's leaving. */
function abortedBy(signal: AbortSignal): GatewayError {
  return signal.reason instanceof GatewayError ? signal.reason : errors.invalid('The client closed the connection.', null, 'client_closed');
}

export function describeFailure(err: unknown): { error: string; fallback: boolean; status?: number } {
  if (err instanceof UpstreamError) {
    const s = err.status;
    const callerFault = s === 400 || s === 413 || s === 422;
    return { error: `${s} ${err.error.message}`.slice(0, 300), fallback: !callerFault, status: s };
  }
  if (err instanceof TransportError) return { error: err.message, fallback: true };
  if (err instanceof GatewayError) return { error: err.message, fallback: false, status: err.status };
  return { error: 'internal error in provider plugin', fallback: true };
}

/**
 * Whether a target can take this request: `true`, `false` (its provider plugin
 * does not serve the endpoint) or a sentence saying why not (e.g. an image
 * model whose limits the request exceeds); such a target is skipped, not tried.
 */
export type CanServe = (p: ProviderPlugin, target: Target) => boolean | string;

/**
 * Run the route slot's targets until one answers: the one place a request
 * gets its fallback target and the retry decision is made. Returns the
 * attempt that answered with what the ingress made of it; the access log
 * names it (provider, served_model, upstream_model), written here only.
 */
export async function runTargets<R>(ctx: RequestContext, core: CoreServices, canServe: CanServe, invoke: Invoke<R>): Promise<Served<R>> {
  const route = ctx.state.route as RouteSlot | undefined;
  if (!route) throw errors.internal();
  const maxAttempts = ctx.config.routing.max_attempts;
  let attemptsMade = 0;
  let lastUpstream: UpstreamError | undefined;
  let allRateLimited = true;
  let retryAfterMs: number | undefined;
  const unavailable: string[] = [];
  const rec = ctx.record;
  rec.requested_model = route.primary;
  const meter = ctx.meter;
  // A stream's usage as its provider reports it, before the usage chunk (src/usage.ts).
  const reportUsage = (u: Parameters<typeof fromChatUsage>[0]) => meter.seen(fromChatUsage(u));

  for (let t = 0; t < route.targets.length && attemptsMade < maxAttempts; t++) {
    const target = route.targets[t];
    const picked = pickDeployment(ctx, target, core.health);
    if (!picked) {
      const why = [...new Set(target.model.deployments.map((d) => ctx.config.providers.get(d.provider)!.missing_credentials))].join(', ');
      unavailable.push(`${target.model.id}: ${why} for any of its providers (${target.model.deployments.map((d) => d.provider).join(', ')})`);
      if (target.model.deployments.length === 1) {
        const provider = ctx.config.providers.get(target.model.deployments[0].provider)!;
        ctx.attempts.push({ provider: provider.name, region: regionOf(target.model.deployments[0], provider), status: 'skipped', model: target.model.id, latency_ms: 0, error: provider.missing_credentials });
      }
      continue;
    }
    const { deployment, provider } = picked;
    const region = regionOf(deployment, provider);
    const plugin = core.providerPlugins.get(provider.family);
    const fit = plugin ? canServe(plugin, target) : false;
    if (!plugin || fit !== true) {
      unavailable.push(`${target.model.id} via ${provider.name}: ${typeof fit === 'string' ? fit : `the ${provider.family} family does not serve ${ctx.endpoint}`}`);
      if (typeof fit === 'string') ctx.attempts.push({ provider: provider.name, region, status: 'failed', model: target.model.id, latency_ms: 0, error: fit });
      continue;
    }
    const info: AttemptInfo = { target, deployment, provider, index: attemptsMade };
    // A target tried after another one failed: a fallback.
    if (attemptsMade > 0) rec.fallbacks++;

    for (let retry = 0; attemptsMade < maxAttempts; retry++) {
      attemptsMade++;
      const started = performance.now();
      const ac = new AbortController();
      // The request's abort reason (the client left; the shutdown deadline) reaches the upstream call and its stream.
      const unfollow = followRequest(ctx.signal, ac);
      // debug.normalizations describes what was sent to the target that answered.
      ctx.debug.normalizations = [];
      meter.reset();
      rec.attempts = attemptsMade;
      // Its span (tracing on): the upstream sees it as the parent when the operator allows propagation.
      // Its start on the request's clock (newRecord): the wall clock read again could be stepped.
      const span = rec.trace ? { span_id: spanId(), start: rec.mono === undefined ? Date.now() : rec.time + (started - rec.mono) } : undefined;
      const traceparent = span && ctx.config.telemetry.traces.propagate_upstream ? traceparentOf(rec.trace!, span.span_id) : undefined;
      // The target being tried: the one that served, or for a request that fails, the last one tried.
      rec.provider = provider.name;
      rec.model = target.model.id;
      rec.deployment = deployment.model;
      try {
        const value = await invoke(info, new Upstream(ctx, info, plugin, core, ac.signal, reportUsage, traceparent));
        const took = performance.now() - started;
        rec.upstream_ms += took;
        if (span) (rec.attempt_spans ??= []).push({ ...span, provider: provider.name, model: target.model.id, deployment: deployment.model, duration_ms: took });
        ctx.attempts.push({ provider: provider.name, region, status: 'succeeded', model: target.model.id, latency_ms: Math.round(took) });
        core.health.success(target.model.id, deployment, region);
        ctx.log.provider = provider.name;
        ctx.log.served_model = target.model.id;
        ctx.log.upstream_model = deployment.model;
        // The attempt's controller stays tied to the client for the life of the stream.
        return { target, deployment, provider, index: info.index, value };
      } catch (err) {
        unfollow();
        ac.abort();
        if (ctx.signal.aborted) throw abortedBy(ctx.signal);
        const f = describeFailure(err);
        const secrets = providerSecrets(provider);
        const took = performance.now() - started;
        rec.upstream_ms += took;
        (rec.upstream_errors ??= []).push({ provider: provider.name, type: upstreamErrorType(err) });
        if (span) (rec.attempt_spans ??= []).push({ ...span, provider: provider.name, model: target.model.id, deployment: deployment.model, duration_ms: took, error_type: upstreamErrorType(err) });
        ctx.attempts.push({ provider: provider.name, region, status: 'failed', model: target.model.id, latency_ms: Math.round(took), error: scrubSecrets(f.error, secrets) });
        if (!f.fallback) {
          if (err instanceof UpstreamError)
            throw new GatewayError(err.status, err.status === 400 ? 'invalid_request_error' : err.error.type, scrubSecrets(err.error.message, secrets), { param: err.error.param, code: err.error.code });
          throw err;
        }
        if (!(err instanceof UpstreamError && err.status === 429)) allRateLimited = false;
        if (err instanceof UpstreamError) lastUpstream = err;
        else if (!(err instanceof TransportError)) ctx.logger.error({ err, request_id: ctx.id }, 'provider plugin threw');
        // Only what the upstream did counts towards its cool-down: a plugin that
        // threw on this request (a bug, a value it could not map) says nothing
        // about the deployment's health, and must not take it away from every other client.
        if (err instanceof UpstreamError || err instanceof TransportError) core.health.failure(target.model.id, deployment, region);
        if (err instanceof UpstreamError && err.status === 429) {
          retryAfterMs = err.retryAfterMs;
          // Retry the same target after Retry-After (or backoff) when it is short enough.
          const wait = err.retryAfterMs ?? 250 * 2 ** retry;
          if (retry < provider.retries && attemptsMade < maxAttempts && wait <= ctx.config.routing.max_retry_wait_ms) {
            await sleep(wait, ctx.signal);
            if (ctx.signal.aborted) throw abortedBy(ctx.signal);
            continue;
          }
        }
        break;
      }
    }
  }

  if (attemptsMade === 0) {
    throw errors.unavailable(`No target could be tried for ${route.requested}: ${unavailable.join('; ') || 'no deployment available'}.`);
  }
  const list = ctx.attempts.map((a) => `${a.model} via ${a.provider} (${a.region}): ${a.error}`).join('; ');
  if (allRateLimited && lastUpstream) throw errors.rateLimited(`Every target is rate-limited: ${list}.`, retryAfterMs !== undefined ? retryAfterMs / 1000 : undefined);
  throw errors.allFailed(`Every target of the fallback chain failed: ${list}.`);
}

/**
 * Read the first item of a stream before committing to it (fallback stays
 * possible until then), within `timeoutMs`. The stream comes back as a
 * BatchIterator with that item queued: the gateway's own streams as they are,
 * anything else (a plugin's async generator) adapted once, here, so that the
 * writer has one path (nextBatch).
 */
export function primeStream<T>(it: AsyncIterable<T>, timeoutMs: number): Promise<BatchIterator<T>> {
  const src = batchSource(it);
  return new Promise<BatchIterator<T>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TransportError(`no first stream event within ${timeoutMs} ms`, 'ETIMEDOUT_FIRST_BYTE')), timeoutMs);
    src.prime().then(
      (primed) => {
        clearTimeout(timer);
        if (primed) resolve(src);
        else reject(new TransportError('the provider closed the stream before its first event', 'EEMPTYSTREAM'));
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
