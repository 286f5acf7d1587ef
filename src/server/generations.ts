// The configs in force and the swap a reload makes. Each request takes the
// generation current when it arrives and keeps it to its end, so that a
// reload never changes the config under a request (ctx.config, its
// pipeline); a generation a reload replaced is retired (its plugins closed,
// its stale pools dropped) once its last request is done.
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/load.js';
import type { BodyOptions } from '../body.js';
import type { LoadedPipeline } from '../pipeline.js';
import type { Transport } from '../upstream/transport.js';
import type { CoreServices } from '../dispatch.js';
import type { ProviderCarry } from '../reload.js';

/** One config in force, with what was built from it. */
export interface Generation {
  config: GatewayConfig;
  pipeline: LoadedPipeline;
  core: CoreServices;
  bodyOptions: BodyOptions;
  /** Requests on this generation not finished yet. */
  active: number;
  /** Set when a newer generation took over: called once `active` is 0. */
  onIdle?: () => void;
}

export class Generations {
  /** The generation new requests start on. */
  current: Generation;
  /** The current generation and the previous ones whose requests are not done yet. */
  private readonly live: Set<Generation>;

  constructor(
    first: Generation,
    private readonly transport: Transport,
    private readonly logger: Logger,
  ) {
    this.current = first;
    this.live = new Set([first]);
  }

  /** A request starts on the current generation; release() it when the request is done. */
  take(): Generation {
    const gen = this.current;
    gen.active++;
    return gen;
  }

  release(gen: Generation): void {
    if (--gen.active === 0) gen.onIdle?.();
  }

  /** New requests start on `next`; resolves once the old generation's requests are done and it is retired. */
  swap(next: Generation, carry: ProviderCarry): Promise<void> {
    const old = this.current;
    this.current = next;
    this.live.add(next);
    const retired = new Promise<void>((resolve) => {
      old.onIdle = () => void this.retire(old, carry).then(resolve);
    });
    if (old.active === 0) old.onIdle!();
    return retired;
  }

  /** A generation no request uses any more: close what the current one does not share with it. */
  private async retire(old: Generation, carry: ProviderCarry): Promise<void> {
    this.live.delete(old);
    // A plugin object another live generation also holds (a module exporting an object, not a factory) stays open.
    const inUse = new Set<unknown>();
    for (const g of this.live) for (const p of [...g.pipeline.plugins, ...g.pipeline.providers.values()]) inUse.add(p);
    for (const p of old.pipeline.plugins) if (!inUse.has(p)) await this.closeQuietly(p.name, () => p.close?.());
    for (const p of new Set(old.pipeline.providers.values())) if (!inUse.has(p)) await this.closeQuietly(p.name, () => p.close?.());
    // Still stale now (a later reload may have brought a pool back)?
    const pools = new Set([...this.current.config.providers.values()].map((p) => p.pool ?? p.name));
    this.transport.retire?.(new Set([...carry.stalePools].filter((n) => !pools.has(n))));
  }

  private async closeQuietly(name: string, close: () => void | Promise<void>): Promise<void> {
    try {
      await close();
    } catch (err) {
      this.logger.error({ err, plugin: name }, 'config reload: closing a plugin of the previous config failed');
    }
  }
}
