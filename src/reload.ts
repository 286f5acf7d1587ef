// Reloading gateway.yaml without a restart: on SIGHUP (src/run.ts) and, with
// `server.watch_config: true`, when the file changes. The new file goes
// through every check `model-gateway check` makes (schema, cross-references,
// the plugins it names by path and their provider-block schemas, the
// pipeline's own checks) before anything changes; then the gateway swaps to
// it at once (Gateway.swap in src/server.ts). A request runs to its end on the
// config it started with; a file that fails is refused, its problems logged
// with their path and line, and the running config stays.
//
// docs/configuration.md "Reloading the configuration" says what reloads and
// what needs a restart.
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type GatewayConfig } from './config/load.js';
import type { ProviderConfig } from './config/schema.js';
import { loadGatewayConfig, loadPipeline, PluginError, type BuiltinRegistry, type LoadedPipeline } from './pipeline.js';

/**
 * Settings a running process cannot take over (a listening socket, the
 * worker processes, the Node flags, the upstream transport, the stores and
 * the Redis connection opened at start-up): a reload that changes one keeps the running value and logs a
 * warning naming it. A path names a key, or a whole section.
 */
export const RESTART_ONLY: readonly string[] = [
  'server.host',
  'server.port',
  'server.workers',
  'server.node_flags',
  'server.transport',
  'storage',
  // The Redis connection of the shared state (src/state/); state.on_unavailable reloads.
  'state.redis_url',
  'state.timeout_ms',
  'state.key_prefix',
  // The metrics route is set up once (telemetry.metrics.require_admin_key reloads).
  'telemetry.metrics.enabled',
  'telemetry.metrics.path',
];

export type ReloadResult = 'success' | 'failure';

const counts: Record<ReloadResult, number> = { success: 0, failure: 0 };
const listeners = new Set<(result: ReloadResult) => void>();

/**
 * Reloads of this process so far, by result (`gateway_config_reloads_total{result}`).
 * In a cluster each worker counts its own.
 */
export function reloadCounts(): Readonly<Record<ReloadResult, number>> {
  return { ...counts };
}

/** Be told of every reload of this process as it is counted (e.g. to update a metric). Returns the unsubscribe function. */
export function onReload(listener: (result: ReloadResult) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function count(result: ReloadResult): void {
  counts[result]++;
  for (const l of listeners) {
    try {
      l(result);
    } catch {
      /* a listener's failure is not the reload's */
    }
  }
}

/** JSON with object keys sorted, so that two equal values give one text. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (v instanceof Map) return Object.fromEntries([...v.entries()].sort(([a], [b]) => String(a).localeCompare(String(b))));
    if (v && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v)) {
      const o = v as Record<string, unknown>;
      return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
    }
    return v;
  });
}

function at(obj: unknown, p: string): unknown {
  let cur = obj as Record<string, unknown> | undefined;
  for (const k of p.split('.')) cur = cur?.[k] as Record<string, unknown> | undefined;
  return cur;
}

/**
 * The restart-only settings (RESTART_ONLY) `next` changes, each set back to
 * the running value in `next` (so that the config in force says what is in
 * force). Returns their paths.
 */
export function keepRestartOnly(running: GatewayConfig, next: GatewayConfig): string[] {
  const changed: string[] = [];
  for (const p of RESTART_ONLY) {
    const was = at(running, p);
    if (stableJson(was) === stableJson(at(next, p))) continue;
    changed.push(p);
    const keys = p.split('.');
    const last = keys.pop()!;
    const parent = keys.length ? (at(next, keys.join('.')) as Record<string, unknown>) : (next as unknown as Record<string, unknown>);
    parent[last] = structuredClone(was);
  }
  return changed;
}

/** What a reload does to the providers' connection pools and cross-request state. */
export interface ProviderCarry {
  /** Pool names the running config uses and the new one does not: closed once the old config's requests are done. */
  stalePools: Set<string>;
  /** Provider instances whose state (cool-down, `shared`) the new config drops: changed or removed blocks. */
  staleInstances: Set<string>;
  /** Provider names whose block the reload changed or removed (their cool-down state starts afresh). */
  changedProviders: Set<string>;
}

const poolOf = (p: ProviderConfig) => p.pool ?? p.name;
const instanceOf = (p: ProviderConfig) => p.instance ?? p.name;
// What the pool's connections depend on: where they go, how many, how long a connect may take.
const connectionOf = (p: ProviderConfig) => stableJson([p.family, p.base_url, p.max_sockets, p.timeout_ms]);
const blockOf = (p: ProviderConfig) => stableJson({ ...p, pool: undefined, instance: undefined });

/**
 * Give each provider of `next` its pool name and instance: the running one's
 * when the block is the same (connections: same base URL, max_sockets and
 * timeout_ms; state: the same block), a new one (`<name>~<seq>`) otherwise.
 */
export function carryProviders(running: GatewayConfig, next: GatewayConfig, seq: number): ProviderCarry {
  const changedProviders = new Set<string>();
  for (const [name, p] of next.providers) {
    const was = running.providers.get(name);
    p.pool = was && connectionOf(was) === connectionOf(p) ? poolOf(was) : `${name}~${seq}`;
    p.instance = was && blockOf(was) === blockOf(p) ? instanceOf(was) : `${name}~${seq}`;
    if (was && p.instance !== instanceOf(was)) changedProviders.add(name);
  }
  for (const name of running.providers.keys()) if (!next.providers.has(name)) changedProviders.add(name);
  const livePools = new Set([...next.providers.values()].map(poolOf));
  const liveInstances = new Set([...next.providers.values()].map(instanceOf));
  return {
    stalePools: new Set([...running.providers.values()].map(poolOf).filter((n) => !livePools.has(n))),
    staleInstances: new Set([...running.providers.values()].map(instanceOf).filter((n) => !liveInstances.has(n))),
    changedProviders,
  };
}

/** The problems of a refused file, one line each (`models.2.id (line 14): ...`), as start-up prints them. */
export function problemLines(err: unknown, file: string): string[] {
  if (err instanceof ConfigError) return err.problems.map((p) => `${p.path || '(root)'}${p.line ? ` (line ${p.line})` : ''}: ${p.message}`);
  if (err instanceof PluginError) return [`${err.code}: ${err.message}`];
  return [`${path.basename(file)}: ${(err as Error)?.message ?? String(err)}`];
}

/** What a gateway offers the reloader (src/server.ts). */
export interface Reloadable {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  /** Serve new requests from this config and pipeline; the running requests finish on theirs. */
  swap(config: GatewayConfig, pipeline: LoadedPipeline, carry: ProviderCarry): { retired: Promise<void> };
}

export interface ReloadOutcome {
  result: ReloadResult;
  /** Problems of a refused file. */
  problems?: string[];
  /** Restart-only settings the file changed (kept at their running values). */
  restartRequired?: string[];
  /** Resolves when the previous config's requests are done and what it alone used is closed. */
  retired?: Promise<void>;
}

let seq = 0;

/**
 * Load `file` (or `text`, the file's content as read by a cluster primary),
 * check it fully, and swap the gateway to it; or refuse it and keep the
 * running config. Never throws: the outcome is logged (one line) and counted.
 */
export async function reloadGateway(
  gw: Reloadable,
  registry: BuiltinRegistry,
  file: string,
  opts: { text?: string; trigger?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<ReloadOutcome> {
  const log = gw.logger;
  const trigger = opts.trigger ?? 'SIGHUP';
  let config: GatewayConfig;
  let pipeline: LoadedPipeline;
  try {
    // The built-in registry, not the running one: the plugins the new file names by path are resolved afresh.
    const loaded = await loadGatewayConfig(file, registry.base ?? registry, { text: opts.text, env: opts.env });
    config = loaded.config;
    pipeline = await loadPipeline(config, loaded.registry, log);
  } catch (err) {
    const problems = problemLines(err, file);
    count('failure');
    if (!(err instanceof ConfigError || err instanceof PluginError)) log.error({ err }, 'config reload: unexpected error');
    log.error({ event: 'config_reload', result: 'failure', trigger, file, pid: process.pid, problems }, `config reload refused (${problems.length} problem${problems.length === 1 ? '' : 's'}): the running config stays`);
    log.flush?.();
    return { result: 'failure', problems };
  }
  const running = gw.config;
  const restartRequired = keepRestartOnly(running, config);
  const carry = carryProviders(running, config, ++seq);
  const { retired } = gw.swap(config, pipeline, carry);
  count('success');
  if (restartRequired.length)
    log.warn({ event: 'config_reload', restart_required: restartRequired, file }, `config reload: ${restartRequired.join(', ')} changed; the running value stays until a restart`);
  log.info(
    { event: 'config_reload', result: 'success', trigger, file, pid: process.pid, providers: config.providers.size, models: config.models.size, changed_providers: [...carry.changedProviders] },
    'config reloaded',
  );
  log.flush?.();
  return { result: 'success', restartRequired, retired };
}

/** How long the watcher waits for a file to stop changing before it reads it. */
export const WATCH_DEBOUNCE_MS = 200;

export function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Watch a config file: `onChange(text)` once its content has changed and
 * then stayed put for WATCH_DEBOUNCE_MS. The folder is watched, not the file,
 * so that an editor that writes a new file and renames it over the old one
 * (vim, sed -i, `mv`), or a Kubernetes ConfigMap's symlink swap, is seen; an
 * event that leaves the content as it was (a touch, a second event for one
 * save) does nothing.
 */
export function watchConfigFile(file: string, onChange: (text: string) => void, logger: Logger): { close(): void } {
  const read = (): string | undefined => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return undefined; // between an unlink and the rename that follows: wait for the next event
    }
  };
  let last = digest(read() ?? '');
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    timer = undefined;
    const text = read();
    if (text === undefined) return;
    const d = digest(text);
    if (d === last) return;
    last = d;
    onChange(text);
  };
  let watcher: FSWatcher;
  try {
    watcher = watch(path.dirname(path.resolve(file)), { persistent: false }, () => {
      clearTimeout(timer);
      timer = setTimeout(check, WATCH_DEBOUNCE_MS);
    });
  } catch (err) {
    logger.error({ file, err: (err as Error).message }, 'server.watch_config: cannot watch the config file; reload with SIGHUP');
    return { close() {} };
  }
  watcher.on('error', (err) => logger.error({ file, err: err.message }, 'server.watch_config: the watch failed; reload with SIGHUP'));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
