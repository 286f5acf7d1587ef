// Loads the plugins gateway.yaml lists, checks the contract at start-up, and
// composes the pipeline. A plugin is a plain object; anything else is refused
// at once with a message that names the plugin (as Koa's use() does).
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/load.js';
import type { PipelinePlugin, ProviderPlugin, Plugin, RequestContext, AttemptInfo } from './plugin.js';
import { isProviderPlugin } from './plugin.js';

export class PluginError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'PluginError';
  }
}

export interface BuiltinRegistry {
  /** Pipeline plugins by name, and the default order when gateway.yaml lists none. */
  pipeline: Record<string, () => PipelinePlugin>;
  defaultPipeline: string[];
  providers: ProviderPlugin[];
}

export interface LoadedPipeline {
  plugins: PipelinePlugin[];
  providers: Map<string, ProviderPlugin>;
  /**
   * Run the pipeline. `validate` runs just before the route plugin: plugins
   * ahead of it (auth, analytics) see the raw JSON body, so an unauthenticated
   * request gets its 401 before any 400 about its body.
   */
  run(ctx: RequestContext, validate: () => void, terminal: () => Promise<void>): Promise<void>;
  prepare<T extends Record<string, unknown>>(ctx: RequestContext, attempt: AttemptInfo, request: T): T;
  close(): Promise<void>;
}

function validatePipelinePlugin(p: unknown, where: string): PipelinePlugin {
  if (!p || typeof p !== 'object') throw new PluginError(`${where}: a plugin must be an object, got ${typeof p}`, 'PLUGIN_INVALID');
  const pl = p as PipelinePlugin;
  if (typeof pl.name !== 'string' || !pl.name) throw new PluginError(`${where}: a plugin needs a string \`name\``, 'PLUGIN_INVALID');
  for (const fn of ['init', 'handle', 'prepareAttempt', 'close'] as const) {
    if (pl[fn] !== undefined && typeof pl[fn] !== 'function') throw new PluginError(`${where} (${pl.name}): \`${fn}\` must be a function`, 'PLUGIN_INVALID');
  }
  if (!pl.handle && !pl.prepareAttempt) throw new PluginError(`${where} (${pl.name}): a plugin needs \`handle\` or \`prepareAttempt\``, 'PLUGIN_INVALID');
  if (pl.needs !== undefined && (!Array.isArray(pl.needs) || pl.needs.some((n) => typeof n !== 'string')))
    throw new PluginError(`${where} (${pl.name}): \`needs\` must be an array of plugin names`, 'PLUGIN_INVALID');
  return pl;
}

export async function loadPipeline(config: GatewayConfig, registry: BuiltinRegistry, logger: Logger): Promise<LoadedPipeline> {
  const entries = config.plugins ?? registry.defaultPipeline.map((name) => ({ name, path: undefined, enabled: true, options: {} }));
  const plugins: PipelinePlugin[] = [];
  const providers = new Map<string, ProviderPlugin>();
  for (const prov of registry.providers) for (const fam of Object.keys(prov.families)) providers.set(fam, prov);

  for (const [i, e] of entries.entries()) {
    if (!e.enabled) continue;
    const where = `plugins.${i}`;
    let plugin: Plugin;
    if (e.path) {
      const file = path.resolve(config.dir, e.path);
      let mod: { default?: unknown };
      try {
        mod = await import(pathToFileURL(file).href);
      } catch (err) {
        throw new PluginError(`${where}: cannot load ${e.path}: ${(err as Error).message}`, 'PLUGIN_LOAD_FAILED');
      }
      const exported = typeof mod.default === 'function' ? (mod.default as (o: unknown) => unknown)(e.options) : mod.default;
      if (exported && isProviderPlugin(exported as Plugin)) {
        const pp = exported as ProviderPlugin;
        for (const fam of Object.keys(pp.families ?? {})) providers.set(fam, pp);
        continue;
      }
      plugin = validatePipelinePlugin(exported, where);
      if (e.name && e.name !== plugin.name) throw new PluginError(`${where}: module exports plugin "${plugin.name}", config names it "${e.name}"`, 'PLUGIN_NAME_MISMATCH');
    } else if (e.name) {
      const make = registry.pipeline[e.name];
      if (!make) throw new PluginError(`${where}: no built-in plugin "${e.name}" (built-ins: ${Object.keys(registry.pipeline).join(', ')}); give \`path\` for a custom one`, 'PLUGIN_UNKNOWN');
      plugin = make();
    } else {
      throw new PluginError(`${where}: give a built-in \`name\` or a module \`path\``, 'PLUGIN_INVALID');
    }
    if (plugins.some((p) => p.name === plugin.name)) throw new PluginError(`${where}: plugin "${plugin.name}" is listed twice (each owns one state slot)`, 'PLUGIN_DUPLICATE');
    await plugin.init?.({ options: e.options ?? {}, config, logger: logger.child({ plugin: plugin.name }) });
    plugins.push(plugin as PipelinePlugin);
  }

  // Every slot a plugin reads must be owned by a plugin that runs before it.
  plugins.forEach((p, i) => {
    for (const need of p.needs ?? []) {
      const at = plugins.findIndex((q) => q.name === need);
      if (at === -1) throw new PluginError(`plugin "${p.name}" needs "${need}", which is not in the pipeline`, 'PLUGIN_MISSING_DEPENDENCY');
      if (at > i) throw new PluginError(`plugin "${p.name}" needs "${need}", which must come before it in plugins`, 'PLUGIN_ORDER');
    }
  });
  if (!plugins.some((p) => p.name === 'route')) throw new PluginError('the pipeline has no "route" plugin: requests could not be routed', 'PLUGIN_MISSING_ROUTE');

  const handlers = plugins.filter((p) => p.handle);
  const preparers = plugins.filter((p) => p.prepareAttempt);

  return {
    plugins,
    providers,
    run(ctx, validate, terminal) {
      let validated = false;
      const step = (i: number): Promise<void> => {
        if (!validated && (i === handlers.length || handlers[i].name === 'route')) {
          validated = true;
          validate();
        }
        if (i === handlers.length) return terminal();
        let called = false;
        return handlers[i].handle!(ctx, () => {
          if (called) return Promise.reject(new Error(`plugin "${handlers[i].name}" called next() twice`));
          called = true;
          return step(i + 1);
        });
      };
      return step(0);
    },
    prepare(ctx, attempt, request) {
      let r = request;
      for (const p of preparers) r = p.prepareAttempt!(ctx, attempt, r);
      return r;
    },
    async close() {
      for (const p of plugins) await p.close?.();
      for (const p of new Set(providers.values())) await p.close?.();
    },
  };
}
