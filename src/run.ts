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
import cluster, { type Worker } from 'node:cluster';
import os from 'node:os';
import v8 from 'node:v8';
import type { GatewayConfig } from './config/load.js';
import type { BuiltinRegistry } from './pipeline.js';
import { createGateway, type EndpointSpec } from './server.js';
import { createLogger } from './log.js';

const flagName = (f: string) => f.split('=')[0].replace(/_/g, '-');
/** The flags given on the command line and in NODE_OPTIONS, with any others. */
const givenFlags = (execArgv: readonly string[], nodeOptions: string, ...more: readonly string[]) => [...execArgv, ...nodeOptions.split(/\s+/), ...more].filter(Boolean);
const LACKING_FLAGS = 'running without some of server.node_flags (this Node cannot re-execute itself): pass them on the command line or in NODE_OPTIONS';

/** The flags of `wanted` this process was started without (by name, from its command line or NODE_OPTIONS). */
export function missingNodeFlags(wanted: readonly string[], execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const have = new Set(givenFlags(execArgv, nodeOptions).map(flagName));
  return wanted.filter((f) => !have.has(flagName(f)));
}

/**
 * Apply `server.node_flags`: V8 reads heap sizes only when a process starts,
 * so a process started without them replaces itself (process.execve: same
 * pid, same stdio, nothing has been written yet) with one started with them.
 * Once: the relaunched process, or one where execve is not available, goes
 * on as it is and says which flags it lacks. Cluster workers inherit the
 * primary's flags.
 */
export function relaunchWithNodeFlags(flags: readonly string[]): string[] {
  const missing = missingNodeFlags(flags);
  if (!missing.length || cluster.isWorker || process.env.MODEL_GATEWAY_RELAUNCHED === '1' || typeof process.execve !== 'function') return missing;
  return process.execve(process.execPath, [process.execPath, ...process.execArgv, ...missing, ...process.argv.slice(1)], { ...process.env, MODEL_GATEWAY_RELAUNCHED: '1' });
}

/**
 * V8 flags the gateway sets on itself before it serves. Unlike heap sizes,
 * V8 reads these while it runs, so no relaunch is needed.
 *
 * `--no-allocation-site-pretenuring`: once V8 sees most objects of an object
 * or array literal survive a young-generation GC, it allocates that literal's
 * objects directly in the old generation. A gateway's objects live for one
 * request or one event, but during a ramp of streams the chunk and frame
 * literals looked long-lived, and V8 then filled the old generation with
 * per-event garbage that only a full GC reclaims: with 2,000 open streams the
 * old generation grew by ~5 MB/s to ~140 MB (~70 MB live), and peak RSS went
 * from ~300 to ~380 MB. Without pretenuring the same run peaks at ~300 MB and
 * every request row costs less CPU (BENCHMARKS.md, "Memory").
 */
export const RUNTIME_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/**
 * Node/V8 flags the gateway starts with unless the operator decides otherwise.
 * V8 sizes its heap only when a process starts, so `start` applies these with
 * the same one-time re-execution as `server.node_flags`.
 *
 * `--max-semi-space-size=32`: on a host with several GB of RAM, V8 lets the
 * young generation grow to 2 × 64 MB, and any sustained load grows it there
 * (every young collection's survivors count towards the next growth). A
 * gateway's objects live for one request or one event, so half of that holds
 * nothing a collection would keep: with 2,000 open streams, peak RSS went from
 * 302–316 MB to ~250 MB, and the streams used no more CPU. Request rows pay
 * ~5% more CPU for the more frequent young collections (BENCHMARKS.md,
 * "Memory"). Any flag that sizes the young generation, in `server.node_flags`,
 * on the command line or in NODE_OPTIONS, replaces this one.
 */
export const START_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];

/** A flag's name without `--`, `no-` and value, `_` read as `-`: both polarities of a flag share it. */
const flagBase = (f: string) => flagName(f).replace(/^--/, '').replace(/^no-/, '');

/** Other flags that decide what a default flag decides: the young generation's size is also set by these. */
const ALSO_DECIDED_BY: Readonly<Record<string, readonly string[]>> = {
  'max-semi-space-size': ['min-semi-space-size', 'max-heap-size', 'scavenger-max-new-space-capacity-mb'],
};

/**
 * The flags of `defaults` to set: those the operator did not name, in either
 * polarity, on the command line, in NODE_OPTIONS or in `server.node_flags`,
 * nor decide with another flag (ALSO_DECIDED_BY).
 */
export function defaultFlagsToSet(defaults: readonly string[], nodeFlags: readonly string[], execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const named = new Set(givenFlags(execArgv, nodeOptions, ...nodeFlags).map(flagBase));
  return defaults.filter((f) => ![flagBase(f), ...(ALSO_DECIDED_BY[flagBase(f)] ?? [])].some((b) => named.has(b)));
}

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

export async function runServer(config: GatewayConfig, registry: BuiltinRegistry, endpoints: EndpointSpec[]): Promise<void> {
  const nodeFlags = config.server.node_flags;
  // Flags the operator asked for and this process could not get (no execve); a default that could not be applied is only missing from the ready line's node_flags.
  const lacking = relaunchWithNodeFlags([...nodeFlags, ...defaultFlagsToSet(START_NODE_FLAGS, nodeFlags)]).filter((f) => nodeFlags.includes(f));
  const v8Flags = applyRuntimeV8Flags(nodeFlags);
  const workers = workerCount(config.server.workers);
  if (workers > 1 && cluster.isPrimary) return runPrimary(config, workers, lacking);
  const gw = await createGateway({ config, registry, endpoints });
  if (lacking.length) gw.logger.warn({ node_flags: lacking }, LACKING_FLAGS);
  const addr = await gw.listen();
  gw.logger.info(
    { port: addr.port, host: addr.address, pid: process.pid, models: config.models.size, node_flags: process.execArgv, v8_flags: v8Flags, ...(cluster.isWorker ? { worker: cluster.worker?.id } : {}) },
    'model-gateway ready',
  );
  // The access log is written in small batches: the ready line goes out at once.
  gw.logger.flush();
  if (cluster.isWorker) process.send?.({ gatewayReady: true });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    gw.logger.info({ signal, pid: process.pid }, 'shutting down: draining in-flight requests');
    await gw.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

/** Consecutive workers that died before they were serving: after this many, the primary gives up. */
const MAX_EARLY_DEATHS = 5;

function runPrimary(config: GatewayConfig, count: number, lacking: string[]): void {
  const logger = createLogger(config.server.log_level);
  if (lacking.length) logger.warn({ node_flags: lacking }, LACKING_FLAGS);
  if (config.storage.responses_db === ':memory:')
    logger.warn({ workers: count }, "storage.responses_db is ':memory:' with several workers: each worker keeps its own stored responses, so GET /v1/responses/{id} and previous_response_id only find responses the same worker stored; use a file (shared in WAL mode) or workers: 1");
  const serving = new WeakSet<Worker>();
  let earlyDeaths = 0;
  let stopping = false;

  const fork = () => {
    const w = cluster.fork();
    w.on('message', (m: { gatewayReady?: boolean }) => {
      if (m?.gatewayReady) {
        serving.add(w);
        earlyDeaths = 0;
      }
    });
  };

  logger.info({ pid: process.pid, workers: count, port: config.server.port }, 'model-gateway primary: starting workers');
  logger.flush();
  for (let i = 0; i < count; i++) fork();

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
    if (stopping) return;
    stopping = true;
    logger.info({ signal, pid: process.pid }, 'model-gateway primary: stopping workers');
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    // Workers exit on their own deadline (shutdown_timeout_ms); this is the backstop.
    setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(1);
    }, config.server.shutdown_timeout_ms + 5_000).unref();
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
