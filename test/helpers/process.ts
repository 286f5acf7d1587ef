// A gateway started as an operator starts it (`model-gateway start`, spawned)
// from YAML text, for tests that need separate processes (replicas sharing
// Redis). Waits on what the process writes, never on time.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { until } from './gateway.js';

const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/cli.js');

export interface GatewayProcess {
  child: ChildProcess;
  port: number;
  url: string;
  baseURL: string;
  /** Everything the process wrote to stdout so far, one JSON object per line. */
  lines(): Record<string, any>[];
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** The config file it was started with, in a temporary folder removed at teardown. */
  file: string;
  stop(): void;
}

export interface ProcessOptions {
  /** Ready lines to wait for: one per worker in cluster mode. Default 1. */
  readyLines?: number;
  timeoutMs?: number;
  /** Node flags for the process (before the CLI's path). */
  nodeArgs?: string[];
}

/** `yaml` may be a function of the process's temporary folder (for a database file there). */
export async function startGatewayProcess(
  t: { teardown(fn: () => void): void },
  yaml: string | ((dir: string) => string),
  env: Record<string, string> = {},
  opts: ProcessOptions = {},
): Promise<GatewayProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-proc-'));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(file, typeof yaml === 'function' ? yaml(dir) : yaml);
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, HOST: '127.0.0.1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = () => {
    child.kill('SIGKILL');
    // A cluster worker still starting (it creates the stores' folder) lives until it sees the primary gone: retry a folder it is writing into.
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 25 });
  };
  t.teardown(stop);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (err += c));
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  let exited = false;
  child.on('exit', () => (exited = true));
  const ready = () => lines().filter((l) => l.msg === 'model-gateway ready').length;
  await until(() => exited || ready() >= (opts.readyLines ?? 1), opts.timeoutMs ?? 20_000);
  if (exited) throw new Error(`the gateway exited: ${out}${err}`);
  const port = lines().find((l) => l.msg === 'model-gateway ready')!.port as number;
  const url = `http://127.0.0.1:${port}`;
  return { child, port, url, baseURL: `${url}/v1`, lines, stderr: () => err, file, stop };
}

/** Whether a Redis server answers PING at `url` (within about a second). */
export async function redisReachable(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

/** Why no PostgreSQL answers at `url` (within about two seconds), or undefined when one does. */
export async function postgresDown(url: string): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await c.end().catch(() => undefined);
  }
}
