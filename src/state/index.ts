// What the gateway keeps across requests and shares across replicas when
// `state.redis_url` is set (docs/keys.md#shared-state): key limits and
// budgets, and deployment cool-downs. Without Redis, the same in memory.
// Created once per process; a reload changes the limits and cool-down settings
// it applies (state.on_unavailable too), a restart changes where it lives.
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/load.js';
import { MemoryHealth, type Health } from '../dispatch.js';
import { MemoryLimits } from '../limits.js';
import { Limiter } from './limiter.js';

export interface SharedState {
  limiter: Limiter;
  health: Health;
  /** Whether the state is shared through Redis. */
  shared: boolean;
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
  throw new Error('state.redis_url: shared state through Redis is not available in this build');
}

function configure(config: GatewayConfig, limiter: Limiter, health: Health): void {
  limiter.configure(config.state.on_unavailable);
  health.configure(config.routing.failure_threshold, config.routing.cooldown_ms);
}
