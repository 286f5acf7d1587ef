// Child processes of the benchmark: the mock upstream, the plain proxy, the
// gateway (from the built dist, as an operator starts it), Portkey; and their
// memory, read from /proc.
import { spawn, fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, openSync, closeSync, readFileSync, readdirSync, statSync, rmSync, existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { builtins } from '../plugins/index.js';
import { extraEndpoints } from '../src/api/index.js';

/** dist/bench/ → the project root. */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = path.join(PROJECT_ROOT, 'dist');

export const BENCH_CLIENT_KEY = 'gw-bench-client-key-0123456789abcdef';
/** A key of gateway.yaml with limits (GatewayOptions.limits): rpm, tpm and a daily budget, none of which the benchmark reaches. */
export const BENCH_LIMITED_KEY = 'gw-bench-limited-key-0123456789abcdef';

export interface Proc {
  pid: number;
  port: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

async function waitExit(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, ms);
    child.once('exit', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** Fork a bench module that reports {ready, port} over IPC (`nodeArgs`: node flags for it). */
export function forkReady(script: string, args: string[], nodeArgs: readonly string[] = []): Promise<Proc> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(DIST, 'bench', script), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...nodeArgs] });
    const onExit = (code: number | null) => reject(new Error(`${script} exited (${code}) before it was ready`));
    child.once('exit', onExit);
    child.once('message', (m: { ready?: boolean; port: number }) => {
      child.off('exit', onExit);
      resolve({
        pid: child.pid!,
        port: m.port,
        child,
        async stop() {
          child.kill('SIGTERM');
          await waitExit(child, 3000);
        },
      });
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function get(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.setTimeout(1000, () => req.destroy());
  });
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// ---------------------------------------------------------------------------
// What the built gateway can serve right now (other families and endpoints
// land while the benchmark is being written: a missing one is a row "n/a").

export interface Availability {
  /** Family name of the translated Anthropic / Gemini providers, when registered. */
  anthropic?: { family: string; baseUrlPath: string };
  gemini?: { family: string; baseUrlPath: string };
  openai: { family: string; baseUrlPath: string };
  responses: boolean;
  /** POST /v1/messages is registered (absent: not). */
  messages?: boolean;
}

export function availability(): Availability {
  const reg = builtins();
  const fams: [string, { defaultBaseUrl?: string }][] = reg.providers.flatMap((p) => Object.entries(p.families));
  const find = (re: RegExp) => {
    const f = fams.find(([name]) => re.test(name));
    if (!f) return undefined;
    // Keep the default URL's path (…/v1, …/v1beta): the plugin appends its own paths to it.
    const p = f[1].defaultBaseUrl ? new URL(f[1].defaultBaseUrl).pathname.replace(/\/+$/, '') : '/v1';
    return { family: f[0], baseUrlPath: p };
  };
  let responses: boolean;
  let messages: boolean;
  try {
    responses = extraEndpoints().some((e) => e.endpoint === 'responses');
    messages = extraEndpoints().some((e) => e.endpoint === 'messages');
  } catch {
    responses = false;
    messages = false;
  }
  return { openai: find(/^openai$/) ?? { family: 'openai', baseUrlPath: '/v1' }, anthropic: find(/anthropic/i), gemini: find(/gemini|google/i), responses, messages };
}

// ---------------------------------------------------------------------------
// The gateway, from dist, with a generated config.

export interface GatewayOptions {
  mockOrigin: string;
  workers?: number;
  logLevel?: string;
  /** Where the access log goes: a file path, or 'null' for /dev/null. */
  logFile?: string;
  /** server.transport, only written when set (the key may not exist). */
  transport?: string;
  /** Directory for --cpu-prof output; unset: no profiling. */
  cpuProfDir?: string;
  avail: Availability;
  /** Upstream pacing for the *-paced models (ms between events). */
  paceMs?: number;
  /** Extra node flags for the gateway process (e.g. --trace-gc while investigating). */
  nodeArgs?: readonly string[];
  /**
   * Usage store, metrics and traces: 'default' (as shipped: the usage store and
   * metrics on, no traces), 'off' (all three off) or 'all' (also traces, to the
   * mock's OTLP endpoint).
   */
  observability?: 'default' | 'off' | 'all';
  /**
   * The key BENCH_LIMITED_KEY with rpm, tpm and budget limits, counted in
   * Redis at `redisUrl` under `keyPrefix`: what limits cost on the request
   * path. The models are priced in every gateway (so that the budget reserves
   * and settles real amounts, and the rows compared differ only by the limits).
   */
  limits?: { redisUrl: string; keyPrefix: string };
  /** server.idle_release_ms, only written when set (0: no idle collection after requests). */
  idleReleaseMs?: number;
}

export interface GatewayProc extends Proc {
  startupMs: number;
  dir: string;
  /** Its gateway.yaml: rewrite it and send SIGHUP to reload. */
  configFile: string;
  logFile: string;
  /** The primary and, with workers, its children. */
  pids(): number[];
}

export function gatewayYaml(o: GatewayOptions, port: number): string {
  const pace = o.paceMs ?? 10;
  const provider = (name: string, family: string, basePath: string, key: string) => `
  - name: ${name}
    family: ${family}
    base_url: ${o.mockOrigin}${basePath}
    api_key: ${key}
    timeout_ms: 30000
    retries: 0
    max_sockets: 8192`;
  const model = (id: string, prov: string, upstream: string) => `
  - id: ${id}
    endpoints: [chat_completions, responses${o.avail.messages ? ', messages' : ''}]
    context_window: 128000
    max_output_tokens: 8192
    pricing: { input: 0.4, output: 1.6 }
    deployments: [{ provider: ${prov}, model: ${upstream} }]`;
  let providers = provider('openai', o.avail.openai.family, o.avail.openai.baseUrlPath, 'sk-bench-openai-0123456789');
  let models = model('bench/openai', 'openai', 'gpt-bench') + model('bench/openai-paced', 'openai', `gpt-bench-paced-${pace}`);
  if (o.avail.anthropic) {
    providers += provider('anthropic', o.avail.anthropic.family, o.avail.anthropic.baseUrlPath, 'sk-ant-bench-0123456789');
    models += model('bench/anthropic', 'anthropic', 'claude-bench') + model('bench/anthropic-paced', 'anthropic', `claude-bench-paced-${pace}`);
  }
  if (o.avail.gemini) {
    providers += provider('gemini', o.avail.gemini.family, o.avail.gemini.baseUrlPath, 'AIzaBench0123456789');
    models += model('bench/gemini', 'gemini', 'gemini-bench') + model('bench/gemini-paced', 'gemini', `gemini-bench-paced-${pace}`);
  }
  return `# Generated by bench/processes.ts for one benchmark run.
server:
  host: 127.0.0.1
  port: ${port}
  workers: ${o.workers ?? 1}
  log_level: ${o.logLevel ?? 'info'}${o.transport ? `\n  transport: ${o.transport}` : ''}${o.idleReleaseMs !== undefined ? `\n  idle_release_ms: ${o.idleReleaseMs}` : ''}
storage:
  responses_db: ':memory:'${o.observability === 'off' ? '\n  usage:\n    enabled: false' : ''}${o.observability === 'off' ? '\ntelemetry:\n  metrics:\n    enabled: false' : o.observability === 'all' ? `\ntelemetry:\n  otlp_endpoint: ${o.mockOrigin}` : ''}
routing:
  max_attempts: 1${o.limits ? limitsYaml(o.limits) : ''}
providers:${providers}
models:${models}
`;
}

function limitsYaml(l: NonNullable<GatewayOptions['limits']>): string {
  const sha = createHash('sha256').update(BENCH_LIMITED_KEY).digest('hex');
  // Limits far above what a run sends: every request is admitted, reserved in Redis and settled.
  return `
state:
  redis_url: ${l.redisUrl}
  key_prefix: "${l.keyPrefix}"
policies:
  bench:
    rpm: 100000000
    tpm: 1000000000000
    budget_usd: 1000000
    budget_period: day
keys:
  - { name: bench-limited, sha256: ${sha}, policy: bench }`;
}

/** Why no Redis answers PING at `url` within a second, or undefined when one does. */
export async function redisDown(url: string): Promise<string | undefined> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG' ? undefined : 'no PONG';
  } catch (err) {
    return (err as Error).message;
  } finally {
    r.disconnect();
  }
}

/**
 * The pid of the redis-server at `url` when it runs on this machine (its
 * CPU then counts in the limits row), else undefined.
 */
export async function redisPid(url: string): Promise<number | undefined> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  r.on('error', () => {});
  try {
    await r.connect();
    const pid = Number(/process_id:(\d+)/.exec(await r.info('server'))?.[1]);
    return pid > 0 && readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis') ? pid : undefined;
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

/** Delete a run's keys (`prefix*`) from Redis. */
export async function dropRedisKeys(url: string, prefix: string): Promise<void> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 1000, commandTimeout: 5000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) await r.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}

/** Where Debian's libjemalloc2 puts the library, on this machine's architecture; undefined when it is not installed. */
export function hostJemalloc(): string | undefined {
  const arch = process.arch === 'x64' ? 'x86_64' : process.arch === 'arm64' ? 'aarch64' : process.arch;
  return [`/usr/lib/${arch}-linux-gnu/libjemalloc.so.2`, '/usr/local/lib/libjemalloc.so.2', '/usr/lib/libjemalloc.so.2'].find((f) => existsSync(f));
}

/** The image's allocator settings (Dockerfile `ENV MALLOC_CONF`): test/bench.test.ts checks them against the Dockerfile. */
export const IMAGE_MALLOC_CONF = 'background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0';

/**
 * The environment the container image (Dockerfile, `ENV`) starts the gateway
 * with, besides its paths: the benchmark measures the gateway as shipped. The
 * image preloads jemalloc (`LD_PRELOAD`); here it is this machine's copy of
 * Debian's libjemalloc2, and glibc's malloc with the image's fallback threshold
 * where that package is not installed (the report says which: `allocator`).
 * The benchmark's own environment wins (`LD_PRELOAD= npm run bench` measures
 * glibc's malloc). test/bench.test.ts checks it against the Dockerfile.
 */
const jemalloc = hostJemalloc();
export const IMAGE_ENV: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_CONF: IMAGE_MALLOC_CONF,
  ...(jemalloc ? { LD_PRELOAD: jemalloc } : {}),
};

/** The allocator the benchmark's gateways run with. */
export function gatewayAllocator(): string {
  const preload = process.env.LD_PRELOAD ?? IMAGE_ENV.LD_PRELOAD;
  if (preload?.includes('jemalloc')) return `jemalloc (${preload}; MALLOC_CONF=${process.env.MALLOC_CONF ?? IMAGE_ENV.MALLOC_CONF})`;
  return IMAGE_ENV.LD_PRELOAD
    ? `glibc malloc (the benchmark's environment sets LD_PRELOAD=${preload ?? ''}, over the image's jemalloc)`
    : 'glibc malloc (Debian\'s libjemalloc2, which the image preloads, is not installed here: apt-get install libjemalloc2)';
}

export async function startGateway(o: GatewayOptions): Promise<GatewayProc> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  const port = await freePort();
  const cfg = path.join(dir, 'gateway.yaml');
  writeFileSync(cfg, gatewayYaml(o, port));
  const logFile = o.logFile === 'null' ? '/dev/null' : (o.logFile ?? path.join(dir, 'access.log'));
  const out = openSync(logFile, 'a');
  const execArgv = [...(o.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${o.cpuProfDir}`] : []), ...(o.nodeArgs ?? [])];
  const t0 = performance.now();
  const child = spawn(process.execPath, [...execArgv, path.join(DIST, 'src', 'cli.js'), 'start', cfg], {
    cwd: dir,
    env: { ...IMAGE_ENV, ...process.env, GATEWAY_API_KEYS: BENCH_CLIENT_KEY, PORT: String(port), NODE_ENV: 'production' },
    stdio: ['ignore', out, 'pipe'],
  });
  closeSync(out);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    if (stderr.length < 20_000) stderr += c.toString();
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    if (exited) throw new Error(`the gateway exited during start-up:\n${stderr}`);
    if ((await get(`http://127.0.0.1:${port}/healthz`)) === 200) break;
    if (performance.now() - t0 > 30_000) {
      child.kill('SIGKILL');
      throw new Error(`the gateway was not ready within 30 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const startupMs = performance.now() - t0;
  const pid = child.pid!;
  let family: number[] | undefined;
  return {
    pid,
    port,
    child,
    dir,
    configFile: cfg,
    logFile,
    startupMs,
    pids() {
      // Workers are forked once at start; find them once.
      family ??= [pid, ...childrenOf(pid)];
      return family;
    },
    async stop() {
      child.kill('SIGTERM');
      await waitExit(child, 15_000);
      if (stderr.trim()) process.stderr.write(`[gateway stderr]\n${stderr}\n`);
    },
  };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

export async function startPortkey(nodeArgs: readonly string[] = []): Promise<Proc> {
  const port = await freePort();
  const script = path.join(PROJECT_ROOT, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  statSync(script);
  const child = spawn(process.execPath, [...nodeArgs, script, `--port=${port}`, '--headless'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'ignore', 'ignore'] });
  let exited = false;
  child.once('exit', () => (exited = true));
  const t0 = performance.now();
  while (!(await tcpOpen(port))) {
    if (exited) throw new Error('Portkey exited during start-up');
    if (performance.now() - t0 > 30_000) throw new Error('Portkey did not listen within 30 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    pid: child.pid!,
    port,
    child,
    async stop() {
      child.kill('SIGTERM');
      await waitExit(child, 3000);
    },
  };
}

// ---------------------------------------------------------------------------
// Memory, from /proc (Linux). VmRSS: now; VmHWM: the peak since the process started.

function statusField(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(s);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Resident memory in MB, summed over processes. */
export function rssMb(pids: number[]): number {
  return pids.reduce((s, p) => s + (statusField(p, 'VmRSS') || 0), 0);
}
export function peakRssMb(pids: number[]): number {
  return pids.reduce((s, p) => s + (statusField(p, 'VmHWM') || 0), 0);
}

export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may contain spaces, so parse after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {
      /* process gone */
    }
  }
  return out;
}

/** Samples the RSS of named process groups every `everyMs`; keeps the maximum per group since the last mark. */
export class RssSampler {
  private timer: NodeJS.Timeout;
  private peaks = new Map<string, number>();
  constructor(
    private groups: Map<string, () => number[]>,
    everyMs = 100,
  ) {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }
  sample(): void {
    for (const [name, pids] of this.groups) {
      const v = rssMb(pids());
      if (v > (this.peaks.get(name) ?? 0)) this.peaks.set(name, v);
    }
  }
  /** Peak since the last reset of this group, then reset it. */
  take(name: string): number {
    this.sample();
    const v = this.peaks.get(name) ?? NaN;
    this.peaks.delete(name);
    return v;
  }
  stop(): void {
    clearInterval(this.timer);
  }
}

/** CPU seconds (user + system) used so far by processes. */
export function cpuSeconds(pids: number[]): number {
  let t = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      t += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      /* gone */
    }
  }
  return t;
}

/** CPU seconds the whole machine has spent busy (all cores), from /proc/stat. */
export function machineBusySeconds(): number {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal …: busy = all but idle and iowait.
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - f[3] - f[4]) / 100;
  } catch {
    return NaN;
  }
}

/**
 * The Node version the project pins (the `node` devDependency, which npm scripts run on), and
 * whether this process runs it: the gateways run on this process's Node (process.execPath), and
 * their memory and speed differ by Node version (Node 24's binary alone keeps 46 MB of shared
 * pages resident where Node 20's keeps 40), so a run on another Node measures another gateway.
 */
export function pinnedNode(): { pinned: string; matches: boolean } {
  try {
    const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> };
    const pinned = pkg.devDependencies?.node ?? '';
    const want = /(\d+)\.(\d+)/.exec(pinned);
    const have = /^v(\d+)\.(\d+)/.exec(process.version);
    return { pinned, matches: !want || (!!have && want[1] === have[1] && want[2] === have[2]) };
  } catch {
    return { pinned: '', matches: true };
  }
}

export function machine() {
  let cpu = 'unknown';
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpu;
  } catch {
    /* not Linux */
  }
  return {
    nproc: os.availableParallelism(),
    cpu_model: cpu,
    mem_total_gb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    node_pinned: pinnedNode().pinned,
    allocator: gatewayAllocator(),
    os: `${os.type()} ${os.release()}`,
  };
}
