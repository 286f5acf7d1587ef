// What the gateway keeps across requests and shares across replicas when
// `state.redis_url` is set (docs/keys.md#shared-state): key limits and
// budgets, and deployment cool-downs. Without Redis, the same in memory.
// Created once per process; a reload changes the limits and cool-down settings
// it applies (state.on_unavailable too), a restart changes where it lives.
import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { GatewayConfig } from '../config/load.js';
import { MemoryHealth, type Health } from '../dispatch.js';
import { MemoryLimits } from '../limits.js';
import { Limiter } from './limiter.js';
import type { ReplicaStore } from '../plugin.js';
import type { ProviderConfig } from '../config/schema.js';
import type { KeyBus } from '../keys.js';

export interface SharedState {
  limiter: Limiter;
  health: Health;
  /** Whether the state is shared through Redis. */
  shared: boolean;
  /** Key changes between replicas (with Redis). */
  keyBus?: KeyBus;
  /** Provider plugins' shared strings (with Redis): ProviderCall.replicas. */
  replicas?: { of(p: ProviderConfig): ReplicaStore };
  configure(config: GatewayConfig): void;
  close(): Promise<void>;
}

/** Redis connections, once connected (or after `state.timeout_ms` × 4 without: requests then apply state.on_unavailable). */
export async function createSharedState(config: GatewayConfig, logger: Logger): Promise<SharedState> {
  const st = config.state;
  const health = new MemoryHealth(config.routing.failure_threshold, config.routing.cooldown_ms);
  if (!st.redis_url) {
    const limiter = new Limiter(new MemoryLimits(), st.on_unavailable, logger);
    return { limiter, health, shared: false, configure: (c) => configure(c, limiter, health), close: () => limiter.store.close() };
  }
  // ioredis is loaded only for a gateway that names a Redis.
  const { RedisLimits, connect, shareHealth, keyBus, replicaStores } = await import('./redis.js');
  const log = logger.child({ component: 'state' });
  const opts = { url: st.redis_url, prefix: st.key_prefix, timeoutMs: st.timeout_ms };
  const redis = connect(opts, log, 'commands');
  const sub = connect({ ...opts }, log, 'subscriber');
  const limiter = new Limiter(new RedisLimits(redis, st.key_prefix, log, st.grant_ms), st.on_unavailable, log);
  shareHealth(health, redis, sub, st.key_prefix, log);
  const bus = keyBus(redis, sub, st.key_prefix, log);
  await Promise.race([Promise.all([ready(redis), ready(sub)]), new Promise((r) => setTimeout(r, st.timeout_ms * 4).unref())]);
  if (redis.status !== 'ready') log.warn({ on_unavailable: st.on_unavailable }, 'redis: not reachable at start-up; reconnecting in the background');
  return {
    limiter,
    health,
    shared: true,
    keyBus: bus,
    replicas: replicaStores(redis, st.key_prefix),
    configure: (c) => configure(c, limiter, health),
    async close() {
      await limiter.store.close();
      redis.disconnect();
      sub.disconnect();
    },
  };
}

function ready(r: Redis): Promise<void> {
  return r.status === 'ready' ? Promise.resolve() : new Promise((res) => r.once('ready', () => res()));
}

function configure(config: GatewayConfig, limiter: Limiter, health: Health): void {
  limiter.configure(config.state.on_unavailable, config.state.grant_ms);
  health.configure(config.routing.failure_threshold, config.routing.cooldown_ms);
}
