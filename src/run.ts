// Process life: listen, log readiness, stop gracefully on SIGTERM/SIGINT
// (stop accepting, let in-flight requests finish until the deadline, exit).
// With server.workers ≠ 1, a primary forks workers (Node cluster) that share the port.
import cluster from 'node:cluster';
import os from 'node:os';
import type { GatewayConfig } from './config/load.js';
import type { BuiltinRegistry } from './pipeline.js';
import { createGateway, type EndpointSpec } from './server.js';

export async function runServer(config: GatewayConfig, registry: BuiltinRegistry, endpoints: EndpointSpec[]): Promise<void> {
  const workers = config.server.workers === 0 ? os.availableParallelism() : config.server.workers;
  if (workers > 1 && cluster.isPrimary) {
    for (let i = 0; i < workers; i++) cluster.fork();
    let stopping = false;
    cluster.on('exit', (w, code) => {
      if (!stopping && code !== 0) cluster.fork();
      if (stopping && Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    });
    const stop = () => {
      stopping = true;
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    return;
  }
  const gw = await createGateway({ config, registry, endpoints });
  const addr = await gw.listen();
  gw.logger.info({ port: addr.port, host: addr.address, pid: process.pid, models: config.models.size }, 'model-gateway ready');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    gw.logger.info({ signal }, 'shutting down: draining in-flight requests');
    await gw.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}
