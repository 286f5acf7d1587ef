// Loads the plugins gateway.yaml lists, checks the contract at start-up, and
// composes the pipeline. A plugin is a plain object; anything else is refused
// at once with a message that names the plugin (as Koa's use() does).
//
// `route` in the list is not a plugin but the place of the core's own step:
// the endpoint's validation of the body, then routing (src/route.ts).
// Plugins ahead of it see the raw body; plugins after it, the validated body
// and the route slot.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { readFileSync } from 'node:fs';
import type { GatewayConfig, LoadOptions } from './config/load.js';
import { loadConfigText, peekPlugins, ConfigError } from './config/load.js';
import type { PipelinePlugin, ProviderPlugin, Plugin, RequestContext, AttemptInfo } from './plugin.js';
import { isProviderPlugin } from './plugin.js';
import { ROUTE, routeRequest } from './route.js';

/**
 * The core's validate-and-route step where `route` stands in the list: in
 * `plugins` (so that `needs: ['route']` and the order checks see it), run by
 * the runner itself. It reads the key's allowed models (`auth`).
 */
const ROUTE_STEP: PipelinePlugin = Object.freeze({ name: ROUTE, needs: ['auth'] });

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
  /** Pipeline plugins by name, and the default order when gateway.yaml lists none (`route` included: the routing step's place). */
  pipeline: Record<string, () => PipelinePlugin>;
  defaultPipeline: string[];
  providers: ProviderPlugin[];
  /**
   * What the modules of `plugins:` entries with a `path` exported, by entry
   * index, once resolvePlugins() has imported them; their provider plugins
   * are in `providers` after the built-in ones.
   */
  loaded?: Map<number, unknown>;
  /** The families of the built-in provider plugins (set by resolvePlugins). */
  builtinFamilies?: ReadonlySet<string>;
  /** The registry resolvePlugins started from (a config reload resolves the new file's plugins on it). */
  base?: BuiltinRegistry;
}

type PluginEntries = NonNullable<GatewayConfig['plugins']>;

/** Import a plugin module and take its default export (calling it with the entry's options when it is a function). */
async function importPlugin(e: PluginEntries[number], dir: string, where: string): Promise<unknown> {
  const file = path.resolve(dir, e.path!);
  let mod: { default?: unknown };
  try {
    mod = await import(pathToFileURL(file).href);
  } catch (err) {
    throw new PluginError(`${where}: cannot load ${e.path}: ${(err as Error).message}`, 'PLUGIN_LOAD_FAILED');
  }
  return typeof mod.default === 'function' ? (mod.default as (o: unknown) => unknown)(e.options ?? {}) : mod.default;
}

function validateProviderPlugin(p: ProviderPlugin, where: string): ProviderPlugin {
  if (typeof p.name !== 'string' || !p.name) throw new PluginError(`${where}: a provider plugin needs a string \`name\``, 'PLUGIN_INVALID');
  if (!p.families || typeof p.families !== 'object' || !Object.keys(p.families).length)
    throw new PluginError(`${where} (${p.name}): a provider plugin needs \`families\`, an object of at least one family`, 'PLUGIN_INVALID');
  for (const fn of ['chat', 'responses', 'images', 'countTokens', 'authorize', 'close'] as const) {
    if (p[fn] !== undefined && typeof p[fn] !== 'function') throw new PluginError(`${where} (${p.name}): \`${fn}\` must be a function`, 'PLUGIN_INVALID');
  }
  if (!p.chat && !p.responses && !p.images) throw new PluginError(`${where} (${p.name}): a provider plugin needs \`chat\`, \`responses\` or \`images\``, 'PLUGIN_INVALID');
  for (const [fam, d] of Object.entries(p.families)) {
    const schema = d?.schema as { '~standard'?: unknown; kind?: unknown } | undefined;
    if (schema !== undefined && (typeof schema !== 'object' || schema.kind !== 'schema'))
      throw new PluginError(`${where} (${p.name}): families.${fam}.schema must be a valibot schema`, 'PLUGIN_INVALID');
    const secrets = d?.secrets as unknown;
    if (secrets !== undefined && (!Array.isArray(secrets) || !secrets.every((k) => typeof k === 'string')))
      throw new PluginError(`${where} (${p.name}): families.${fam}.secrets must be an array of key names`, 'PLUGIN_INVALID');
    for (const fn of ['baseUrl', 'missingCredentials'] as const) {
      if (d?.[fn] !== undefined && typeof d[fn] !== 'function') throw new PluginError(`${where} (${p.name}): families.${fam}.${fn} must be a function`, 'PLUGIN_INVALID');
    }
  }
  return p;
}

/**
 * Register a provider plugin's families. A family is served by one plugin:
 * one loaded from a path may not take a built-in family (an operator's
 * module would silently replace the gateway's own mapping), nor one another
 * module already registered.
 */
function registerFamilies(providers: Map<string, ProviderPlugin>, p: ProviderPlugin, builtin: ReadonlySet<string>, where: string): void {
  for (const fam of Object.keys(p.families)) {
    const owner = providers.get(fam);
    if (owner && owner !== p)
      throw new PluginError(
        `${where} (${p.name}): provider family "${fam}" is already served by ${builtin.has(fam) ? 'the built-in' : 'the'} plugin "${owner.name}"; a plugin cannot replace a family: give yours another family name`,
        'PLUGIN_FAMILY_CONFLICT',
      );
    providers.set(fam, p);
  }
}

/**
 * Import the modules that `plugins:` names by `path` (once), before the
 * config is checked: the provider plugins among them join the registry, so
 * that the check knows their families and runs their provider-block schemas.
 * Refuses (PLUGIN_FAMILY_CONFLICT) a plugin that would take a family already
 * served.
 */
export async function resolvePlugins(registry: BuiltinRegistry, entries: PluginEntries | undefined, dir: string): Promise<BuiltinRegistry> {
  const builtinFamilies = new Set(registry.providers.flatMap((p) => Object.keys(p.families)));
  const byFamily = new Map<string, ProviderPlugin>();
  for (const p of registry.providers) for (const fam of Object.keys(p.families)) byFamily.set(fam, p);
  const loaded = new Map<number, unknown>();
  const providers = [...registry.providers];
  for (const [i, e] of (entries ?? []).entries()) {
    if (!e.enabled || !e.path) continue;
    const exported = await importPlugin(e, dir, `plugins.${i}`);
    loaded.set(i, exported);
    if (exported && isProviderPlugin(exported as Plugin)) {
      const pp = validateProviderPlugin(exported as ProviderPlugin, `plugins.${i}`);
      registerFamilies(byFamily, pp, builtinFamilies, `plugins.${i}`);
      providers.push(pp);
    }
  }
  return { ...registry, providers, loaded, builtinFamilies, base: registry.base ?? registry };
}


/**
 * Load a gateway.yaml with its plugins: the modules it names by `path` are
 * imported first, so that provider plugins loaded from a path have their
 * families and schemas checked like the built-in ones. Returns the config and
 * the registry to start the gateway with.
 */
export async function loadGatewayConfig(
  file: string,
  registry: BuiltinRegistry,
  opts: { env?: NodeJS.ProcessEnv; text?: string } = {},
): Promise<{ config: GatewayConfig; registry: BuiltinRegistry }> {
  let text = opts.text;
  if (text === undefined) {
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(file, [{ path: '', message: `cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})` }]);
    }
  }
  const reg = await resolvePlugins(registry, peekPlugins(text, opts.env ?? process.env), path.dirname(path.resolve(file)));
  const config = loadConfigText(text, file, { families: Object.assign({}, ...reg.providers.map((p) => p.families)) as LoadOptions['families'], env: opts.env });
  return { config, registry: reg };
}

export interface LoadedPipeline {
  plugins: PipelinePlugin[];
  providers: Map<string, ProviderPlugin>;
  /**
   * Every plugin's `beforeBody` hook, in order, on the headers alone: the
   * core calls it before it reads the body, so a refused request (no key)
   * costs no body read and no parse. Undefined (nothing to await) when every
   * hook returned synchronously.
   */
  beforeBody(ctx: RequestContext): void | Promise<void>;
  /**
   * Run the pipeline. At the routing step, `validate` runs (a body the core
   * could not read is answered there, after the errors of the plugins ahead
   * of it, which see the raw JSON body), then routing (src/route.ts).
   */
  run(ctx: RequestContext, validate: () => void, terminal: () => Promise<void>): Promise<void>;
  prepare<T extends Record<string, unknown>>(ctx: RequestContext, attempt: AttemptInfo, request: T): T;
  close(): Promise<void>;
}

function validatePipelinePlugin(p: unknown, where: string): PipelinePlugin {
  if (!p || typeof p !== 'object') throw new PluginError(`${where}: a plugin must be an object, got ${typeof p}`, 'PLUGIN_INVALID');
  const pl = p as PipelinePlugin;
  if (typeof pl.name !== 'string' || !pl.name) throw new PluginError(`${where}: a plugin needs a string \`name\``, 'PLUGIN_INVALID');
  for (const fn of ['init', 'beforeBody', 'handle', 'prepareAttempt', 'close'] as const) {
    if (pl[fn] !== undefined && typeof pl[fn] !== 'function') throw new PluginError(`${where} (${pl.name}): \`${fn}\` must be a function`, 'PLUGIN_INVALID');
  }
  if (!pl.handle && !pl.prepareAttempt && !pl.beforeBody)
    throw new PluginError(`${where} (${pl.name}): a plugin needs \`handle\`, \`beforeBody\` or \`prepareAttempt\``, 'PLUGIN_INVALID');
  if (pl.needs !== undefined && (!Array.isArray(pl.needs) || pl.needs.some((n) => typeof n !== 'string')))
    throw new PluginError(`${where} (${pl.name}): \`needs\` must be an array of plugin names`, 'PLUGIN_INVALID');
  return pl;
}

export async function loadPipeline(config: GatewayConfig, registry: BuiltinRegistry, logger: Logger): Promise<LoadedPipeline> {
  const plugins: PipelinePlugin[] = [];
  try {
    return await composePipeline(config, registry, logger, plugins);
  } catch (err) {
    // A pipeline refused after some plugins' init (a config reload that fails its checks): close those.
    for (const p of plugins) await Promise.resolve(p.close?.()).catch(() => {});
    throw err;
  }
}

/** loadPipeline's work; `plugins` gets each plugin once its init has run. */
async function composePipeline(config: GatewayConfig, registry: BuiltinRegistry, logger: Logger, plugins: PipelinePlugin[]): Promise<LoadedPipeline> {
  const entries = config.plugins ?? registry.defaultPipeline.map((name) => ({ name, path: undefined, enabled: true, options: {} }));
  const providers = new Map<string, ProviderPlugin>();
  const builtin = registry.builtinFamilies ?? new Set(registry.providers.flatMap((p) => Object.keys(p.families)));
  for (const prov of registry.providers) for (const fam of Object.keys(prov.families)) providers.set(fam, prov);

  for (const [i, e] of entries.entries()) {
    if (!e.enabled) continue;
    const where = `plugins.${i}`;
    let plugin: Plugin;
    if (e.path) {
      const preloaded = registry.loaded?.has(i);
      const exported = preloaded ? registry.loaded!.get(i) : await importPlugin(e, config.dir, where);
      if (exported && isProviderPlugin(exported as Plugin)) {
        // Registered by resolvePlugins already, or (a registry that did not resolve this config's plugins) here.
        if (!preloaded) registerFamilies(providers, validateProviderPlugin(exported as ProviderPlugin, where), builtin, where);
        continue;
      }
      plugin = validatePipelinePlugin(exported, where);
      if (e.name && e.name !== plugin.name) throw new PluginError(`${where}: module exports plugin "${plugin.name}", config names it "${e.name}"`, 'PLUGIN_NAME_MISMATCH');
      if (plugin.name === ROUTE) throw new PluginError(`${where}: "${ROUTE}" is the gateway's routing step, not a plugin name to take: give your plugin another name`, 'PLUGIN_INVALID');
    } else if (e.name === ROUTE) {
      if (plugins.includes(ROUTE_STEP)) throw new PluginError(`${where}: "${ROUTE}" is listed twice (the body is validated and routed once)`, 'PLUGIN_DUPLICATE');
      plugins.push(ROUTE_STEP);
      continue;
    } else if (e.name) {
      const make = registry.pipeline[e.name];
      if (!make) throw new PluginError(`${where}: no built-in plugin "${e.name}" (built-ins: ${[...Object.keys(registry.pipeline), ROUTE].join(', ')}); give \`path\` for a custom one`, 'PLUGIN_UNKNOWN');
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
  if (!plugins.includes(ROUTE_STEP)) throw new PluginError(`the pipeline has no "${ROUTE}" step: list \`- name: ${ROUTE}\` in plugins where the body is validated and the request routed`, 'PLUGIN_MISSING_ROUTE');

  // The routing step runs between the handlers listed before it and those after.
  const handlers = plugins.filter((p) => p.handle || p === ROUTE_STEP);
  const gates = plugins.filter((p) => p.beforeBody);
  const preparers = plugins.filter((p) => p.prepareAttempt);

  return {
    plugins,
    providers,
    beforeBody(ctx) {
      for (let i = 0; i < gates.length; i++) {
        const pending = gates[i].beforeBody!(ctx);
        // An async hook: the rest wait for it, in order.
        if (pending && typeof pending.then === 'function')
          return pending.then(async () => {
            for (const g of gates.slice(i + 1)) await g.beforeBody!(ctx);
          });
      }
    },
    run(ctx, validate, terminal) {
      const step = (i: number): Promise<void> => {
        if (i === handlers.length) return terminal();
        if (handlers[i] === ROUTE_STEP) {
          validate();
          routeRequest(ctx);
          return step(i + 1);
        }
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
