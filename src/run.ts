// Process life: listen, log readiness, stop gracefully on SIGTERM/SIGINT
// (stop accepting, let in-flight requests finish until the deadline, exit).
//
// With server.workers ≠ 1 (0 = one per core), the primary process forks that
// many workers with node:cluster; they share the port (the primary accepts and
// hands connections out round-robin, Node's default on Linux). The primary
// serves no request itself. It replaces a worker that dies, gives up when
// workers keep dying before they listen (a bad port or config would otherwise
// fork forever), and on SIGTERM/SIGINT passes the signal on and exits when the
// last worker has drained. BENCHMARKS.md shows what a second worker buys.
// A repeated SIGTERM/SIGINT, in the primary or a worker, never cuts a drain.
//
// SIGHUP reloads gateway.yaml (src/reload.ts), and so does a change to the
// file when server.watch_config is true. With several workers the primary
// reads the file once (on SIGHUP, or when its watch sees a change) and sends
// the text to every worker, which checks it and swaps to it (or refuses it)
// on its own and tells the primary; a worker ignores a SIGHUP of its own (a
// signal to the whole process group would otherwise reload it twice).
import cluster, { type Worker } from 'node:cluster';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/load.js';
import type { BuiltinRegistry } from './pipeline.js';
import { createGateway, type EndpointSpec, type Gateway } from './server.js';
import { createLogger } from './log.js';
import { reloadGateway, watchConfigFile } from './reload.js';
import { serveClusterMetrics } from './metrics.js';
import { flushCompileCache } from './compile-cache.js';
import { defaultFlagsToSet, LACKING_FLAGS, releaseStartupV8Flags, RUNTIME_V8_FLAGS, workerExecArgv } from './node-flags.js';

/** Set RUNTIME_V8_FLAGS (those the operator left alone) on this process; returns the flags set. */
export function applyRuntimeV8Flags(nodeFlags: readonly string[]): string[] {
  const set = defaultFlagsToSet(RUNTIME_V8_FLAGS, nodeFlags);
  for (const f of set) v8.setFlagsFromString(f);
  return set;
}

/** Workers to run for a `server.workers` value: 0 means one per core. */
export function workerCount(configured: number): number {
  return configured === 0 ? os.availableParallelism() : configured;
}

/**
 * Serve (or, with several workers, run the primary). `lacking`: the
 * server.node_flags this process could not get; `start` (src/cli.ts) applies
 * them, re-executing once, before it loads the gateway.
 */
export async function runServer(config: GatewayConfig, registry: BuiltinRegistry, endpoints: EndpointSpec[], lacking: string[] = []): Promise<void> {
  const v8Flags = applyRuntimeV8Flags(config.server.node_flags);
  const workers = workerCount(config.server.workers);
  if (workers > 1 && cluster.isPrimary) return runPrimary(config, workers, lacking);
  // Taken from now on (a reload the primary sends while this worker starts waits for the gateway).
  const reloads = reloadsOf(config, registry);
  const gw = await createGateway({ config, registry, endpoints });
  if (lacking.length) gw.logger.warn({ node_flags: lacking }, LACKING_FLAGS);
  const addr = await gw.listen();
  // Watching (and taking reloads) before the ready line: a change made as soon
  // as the gateway says it is ready must not fall before the watch exists.
  reloads.start(gw);
  gw.logger.info(
    { port: addr.port, host: addr.address, pid: process.pid, models: config.models.size, node_flags: process.execArgv, v8_flags: v8Flags, ...(cluster.isWorker ? { worker: cluster.worker?.id } : {}) },
    'model-gateway ready',
  );
  // The access log is written in small batches: the ready line goes out at once.
  gw.logger.flush();
  releaseStartupV8Flags();
  if (cluster.isWorker) process.send?.({ gatewayReady: true });
  // What the start compiled, on disk for the next start (nothing to write when it came from there).
  flushCompileCache();
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      gw.logger.info({ signal, pid: process.pid }, REPEATED_SIGNAL);
      return;
    }
    stopping = true;
    gw.logger.info({ signal, pid: process.pid }, 'shutting down: draining in-flight requests');
    reloads.stop();
    await gw.close();
    process.exit(0);
  };
  onStopSignals((signal) => void stop(signal));
}

/** Logged when a stop signal comes again during the drain (a process group signalled, then the primary passing it on; a second Ctrl-C). */
const REPEATED_SIGNAL = 'already draining: a repeated signal does not cut the drain (SIGKILL does)';

/**
 * Call `stop` on every SIGTERM and SIGINT, not only the first: a listener
 * that removed itself would leave the next one to Node's default action,
 * which kills the process mid-drain. That next one is the usual case: a
 * signal to the whole process group (systemd's default, `kill -- -PGID`,
 * Ctrl-C in a terminal) reaches every worker, and the primary passes it on.
 */
function onStopSignals(stop: (signal: NodeJS.Signals) => void): void {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => stop(signal));
}

/** Consecutive workers that died before they were serving: after this many, the primary gives up. */
const MAX_EARLY_DEATHS = 5;

function runPrimary(config: GatewayConfig, count: number, lacking: string[]): void {
  const logger = createLogger(config.server.log_level);
  if (lacking.length) logger.warn({ node_flags: lacking }, LACKING_FLAGS);
  if (!config.storage.url && config.storage.responses_db === ':memory:')
    logger.warn({ workers: count }, "storage.responses_db is ':memory:' with several workers: each worker keeps its own stored responses, so GET /v1/responses/{id} and previous_response_id only find responses the same worker stored; use a file (shared in WAL mode) or workers: 1");
  // One scrape of /metrics, whichever worker serves it, shows every worker's metrics (src/metrics.ts).
  if (config.telemetry.metrics.enabled) serveClusterMetrics();
  if (!config.state.redis_url && config.keys.some((k) => k.limits))
    logger.warn({ workers: count }, 'keys have limits (rpm, tpm, max_parallel, budget_usd) and state.redis_url is empty: each worker counts on its own, so a key gets its limits once per worker; set state.redis_url (docs/keys.md#shared-state) or workers: 1');
  const serving = new WeakSet<Worker>();
  let earlyDeaths = 0;
  let stopping = false;

  // Reload: the file is read here once and its text sent to every worker (they all check the same text).
  const file = config.file;
  const sendReload = (trigger: string, text?: string) => {
    if (!file || stopping) return;
    if (text === undefined) {
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        /* each worker reads it, fails and says why */
      }
    }
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    logger.info({ event: 'config_reload', trigger, workers: workers.length }, 'model-gateway primary: reloading the workers');
    logger.flush();
    for (const w of workers) w.send({ gatewayReload: { trigger, text } });
  };
  const watch = configWatch(file, logger, (text) => sendReload('watch', text));
  // The workers' drain deadline, as their config (reloaded or not) says.
  let shutdownMs = config.server.shutdown_timeout_ms;
  watch.set(config.server.watch_config);
  process.on('SIGHUP', () => sendReload('SIGHUP'));

  const fork = () => {
    const w = cluster.fork();
    w.on('message', (m: { gatewayReady?: boolean; gatewayReloaded?: { result: string; watch_config: boolean; shutdown_timeout_ms?: number } }) => {
      if (m?.gatewayReady) {
        serving.add(w);
        earlyDeaths = 0;
      }
      // The workers checked the file: follow its server.watch_config.
      if (m?.gatewayReloaded?.result === 'success' && !stopping) {
        watch.set(m.gatewayReloaded.watch_config);
        // ... and its shutdown deadline: the backstop below must not cut a drain the workers now allow longer.
        if (m.gatewayReloaded.shutdown_timeout_ms) shutdownMs = m.gatewayReloaded.shutdown_timeout_ms;
      }
    });
  };

  // Workers get the default young-generation cap on their command line: no process re-executes itself for a default.
  cluster.setupPrimary({ execArgv: workerExecArgv(config.server.node_flags) });
  logger.info({ pid: process.pid, workers: count, port: config.server.port }, 'model-gateway primary: starting workers');
  logger.flush();
  for (let i = 0; i < count; i++) fork();
  releaseStartupV8Flags();

  cluster.on('exit', (w, code, signal) => {
    const alive = Object.keys(cluster.workers ?? {}).length;
    if (stopping) {
      if (alive === 0) {
        logger.info({ pid: process.pid }, 'model-gateway primary: all workers stopped');
        logger.flush();
        process.exit(process.exitCode ?? 0);
      }
      return;
    }
    if (code === 0 && !signal) return; // a worker that chose to exit cleanly is not replaced
    const early = !serving.has(w);
    logger.error({ worker: w.id, pid: w.process.pid, code, signal, early }, 'worker died: starting a replacement');
    if (early && ++earlyDeaths >= MAX_EARLY_DEATHS) {
      logger.fatal({ deaths: earlyDeaths }, 'workers keep dying before they serve (check the port and the log above): giving up');
      logger.flush();
      stopping = true;
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGTERM');
      process.exitCode = 1;
      if (alive === 0) process.exit(1);
      return;
    }
    fork();
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.info({ signal, pid: process.pid }, REPEATED_SIGNAL);
      return;
    }
    stopping = true;
    watch.set(false);
    logger.info({ signal, pid: process.pid }, 'model-gateway primary: stopping workers');
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    // Workers exit on their own deadline (shutdown_timeout_ms, then a second for the last error frames); this is the backstop.
    setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(1);
    }, shutdownMs + 5_000).unref();
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  };
  onStopSignals(stop);
}

/** A watch of the config file that can be turned on and off (server.watch_config may change on a reload). */
function configWatch(file: string | null, logger: Logger, onText: (text: string) => void): { set(on: boolean): void } {
  let w: { close(): void } | undefined;
  return {
    set(on) {
      if (on && !w && file) {
        w = watchConfigFile(file, onText, logger);
        logger.info({ file }, 'server.watch_config: watching the config file');
      } else if (!on && w) {
        w.close();
        w = undefined;
        logger.info({ file }, 'server.watch_config: no longer watching the config file');
      }
    },
  };
}

/**
 * The reloads of a serving process, one at a time: a request while one runs
 * waits for it, and of several that wait only the last runs. Sources: SIGHUP
 * and the file watch in a single process; the primary's messages in a worker.
 */
function reloadsOf(config: GatewayConfig, registry: BuiltinRegistry): { start(gw: Gateway): void; stop(): void } {
  const file = config.file;
  let gw: Gateway | undefined;
  let running = false;
  let next: { trigger: string; text?: string } | undefined;
  let watch: { set(on: boolean): void } | undefined;
  const run = async () => {
    running = true;
    while (next && gw) {
      const r = next;
      next = undefined;
      const o = await reloadGateway(gw, registry, file!, r);
      if (cluster.isWorker) process.send?.({ gatewayReloaded: { result: o.result, watch_config: gw.config.server.watch_config, shutdown_timeout_ms: gw.config.server.shutdown_timeout_ms } });
      else watch?.set(gw.config.server.watch_config);
    }
    running = false;
  };
  const request = (r: { trigger: string; text?: string }) => {
    if (!file) return;
    next = r;
    if (!running && gw) void run();
  };
  const onMessage = (m: { gatewayReload?: { trigger: string; text?: string } }) => {
    if (m?.gatewayReload) request(m.gatewayReload);
  };
  const onHup = () => {
    if (cluster.isWorker) gw?.logger.info({ pid: process.pid }, 'SIGHUP to a worker is ignored: the primary reloads every worker (send SIGHUP to it)');
    else request({ trigger: 'SIGHUP' });
  };
  if (cluster.isWorker) process.on('message', onMessage);
  process.on('SIGHUP', onHup);
  return {
    start(g) {
      gw = g;
      if (!cluster.isWorker) {
        watch = configWatch(file, g.logger, (text) => request({ trigger: 'watch', text }));
        watch.set(config.server.watch_config);
      }
      if (next && !running) void run();
    },
    stop() {
      watch?.set(false);
      next = undefined;
      if (cluster.isWorker) process.off('message', onMessage);
    },
  };
}
