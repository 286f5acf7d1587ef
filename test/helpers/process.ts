// A gateway started as an operator starts it (`model-gateway start`, spawned)
// from YAML text, for tests that need separate processes (replicas sharing
// Redis). Waits on what the process writes, never on time.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { until } from './gateway.js';

const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/cli.js');

export interface GatewayProcess {
  child: ChildProcess;
  port: number;
  url: string;
  baseURL: string;
  /** Everything the process wrote to stdout so far, one JSON object per line. */
  lines(): Record<string, any>[];
  stop(): void;
}

export async function startGatewayProcess(t: { teardown(fn: () => void): void }, yaml: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-proc-'));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(file, yaml);
  const child = spawn(process.execPath, [cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, HOST: '127.0.0.1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = () => {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
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
  await until(() => exited || lines().some((l) => l.msg === 'model-gateway ready'), 20_000);
  if (exited) throw new Error(`the gateway exited: ${out}${err}`);
  const port = lines().find((l) => l.msg === 'model-gateway ready')!.port as number;
  const url = `http://127.0.0.1:${port}`;
  return { child, port, url, baseURL: `${url}/v1`, lines, stop };
}
