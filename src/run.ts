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
import { defaultFlagsToSet, LACKING_FLAGS, RUNTIME_V8_FLAGS, workerExecArgv } from './node-flags.js';

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

  // Workers get the default young-generation cap on their command line: no process re-executes itself for a default.
  cluster.setupPrimary({ execArgv: workerExecArgv(config.server.node_flags) });
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
