// `npm run bench:floor [-- --rounds N] [--duration S] [--gateway LABEL=DIR ...]`
//
// Where the framework floor is, and A/B comparisons of gateway builds. On one
// machine, against the benchmark's mock, interleaved rounds of 32 connections
// for each target, reported as the median of per-round ratios to the plain
// Node proxy (a shared VM drifts by ±25% between rounds; ratios inside one
// round do not) and as process CPU per request:
//   plain      the benchmark's plain Node proxy
//   koa-body   a Koa app that only proxies: koa-body + @koa/router
//   koa        the same with the gateway's body reader idea (one buffer, JSON.parse)
//   koa-bare   the same without the router
//   gateway    this checkout's dist (the passthrough row's request)
//   LABEL      another build's dist, for --gateway LABEL=DIR (a git worktree
//              of an earlier commit, built: the way each hot-path change in
//              BENCHMARKS.md was measured)
// koa-body is not a dependency of the gateway any more; the koa-body row runs
// only where it is installed (npm i --no-save koa-body).
import http from 'node:http';
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Koa from 'koa';
import Router from '@koa/router';
import { throughput, type RequestSpec } from './load.js';
import { forkReady, availability, cpuSeconds, gatewayYaml, freePort, BENCH_CLIENT_KEY, PROJECT_ROOT } from './processes.js';

const HERE = fileURLToPath(import.meta.url);
const CHAT = JSON.stringify({ messages: [{ role: 'user', content: 'Say hello in five words.' }], max_completion_tokens: 16 });

/** A Koa app that does what the plain proxy does, in one of the variants. */
async function koaProxy(upstream: string, variant: string): Promise<number> {
  const target = new URL(upstream);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 256, scheduling: 'lifo' });
  const app = new Koa();
  if (variant === 'koa-body') {
    const { koaBody } = (await import('koa-body' as string)) as { koaBody: (o: object) => Koa.Middleware };
    app.use(koaBody({ json: true, urlencoded: false, text: false, multipart: false, jsonStrict: true, patchNode: false }));
  } else {
    app.use(async (ctx, next) => {
      const chunks: Buffer[] = [];
      for await (const c of ctx.req) chunks.push(c as Buffer);
      (ctx.request as unknown as { body: unknown }).body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      return next();
    });
  }
  const handler = async (ctx: Koa.Context) => {
    const out = Buffer.from(JSON.stringify((ctx.request as unknown as { body: unknown }).body));
    const text = await new Promise<string>((resolve, reject) => {
      const up = http.request(
        { host: target.hostname, port: target.port, method: 'POST', path: '/v1/chat/completions', agent, headers: { 'content-type': 'application/json', 'content-length': out.length, authorization: ctx.get('authorization') } },
        (res) => {
          const rc: Buffer[] = [];
          res.on('data', (c: Buffer) => rc.push(c));
          res.on('end', () => resolve(Buffer.concat(rc).toString('utf8')));
        },
      );
      up.on('error', reject);
      up.end(out);
    });
    ctx.body = JSON.parse(text);
  };
  if (variant === 'koa-bare') app.use(handler);
  else {
    const r = new Router();
    r.post('/v1/chat/completions', handler);
    app.use(r.routes());
  }
  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

interface Target {
  label: string;
  pid: number;
  spec: RequestSpec;
  child: ChildProcess;
}

async function startGatewayFrom(label: string, root: string, mockOrigin: string, dir: string): Promise<Target> {
  const port = await freePort();
  const cfg = path.join(dir, `${label}.yaml`);
  writeFileSync(cfg, gatewayYaml({ mockOrigin, avail: availability() }, port));
  const out = openSync(path.join(dir, `${label}.log`), 'a');
  const child = spawn(process.execPath, [path.join(root, 'dist', 'src', 'cli.js'), 'start', cfg], {
    cwd: dir,
    env: { ...process.env, GATEWAY_API_KEYS: BENCH_CLIENT_KEY, NODE_ENV: 'production' },
    stdio: ['ignore', out, 'inherit'],
  });
  for (let i = 0; ; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const ok = await new Promise<boolean>((resolve) => http.get(`http://127.0.0.1:${port}/healthz`, (res) => (res.resume(), resolve(res.statusCode === 200))).on('error', () => resolve(false)));
    if (ok) break;
    if (i > 400) throw new Error(`${label}: the gateway in ${root} did not start`);
  }
  const body = JSON.stringify({ model: 'bench/openai', ...JSON.parse(CHAT) });
  return { label, pid: child.pid!, child, spec: { origin: `http://127.0.0.1:${port}`, path: '/v1/chat/completions', headers: { authorization: `Bearer ${BENCH_CLIENT_KEY}` }, body, stream: false } };
}

export interface FloorRow {
  label: string;
  ratio: number;
  rps: number;
  cpu_us: number;
}

export async function runFloor(o: { rounds: number; durationS: number; gateways: [string, string][]; variants: string[]; print?: boolean }): Promise<FloorRow[]> {
  const print = o.print === false ? () => {} : (s: string) => process.stdout.write(s);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-floor-'));
  const mock = await forkReady('mock-upstream.js', []);
  const mockOrigin = `http://127.0.0.1:${mock.port}`;
  const direct = { authorization: 'Bearer sk-bench-openai-0123456789' };
  const withModel = JSON.stringify({ model: 'gpt-bench', ...JSON.parse(CHAT) });
  const targets: Target[] = [];
  const plain = await forkReady('plain-proxy.js', [mockOrigin]);
  targets.push({ label: 'plain', pid: plain.pid, child: plain.child, spec: { origin: `http://127.0.0.1:${plain.port}`, path: '/v1/chat/completions', headers: direct, body: withModel, stream: false } });
  for (const v of o.variants) {
    const child = fork(HERE, ['--serve', mockOrigin, v], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    const port = await new Promise<number | null>((resolve) => {
      child.once('message', (m: { port?: number }) => resolve(m.port ?? null));
      child.once('exit', () => resolve(null));
    });
    if (port === null) {
      print(`${v}: not run (${v === 'koa-body' ? 'koa-body is not installed' : 'did not start'})\n`);
      continue;
    }
    targets.push({ label: v, pid: child.pid!, child, spec: { origin: `http://127.0.0.1:${port}`, path: '/v1/chat/completions', headers: direct, body: withModel, stream: false } });
  }
  for (const [label, root] of o.gateways) targets.push(await startGatewayFrom(label, root, mockOrigin, dir));

  const rows = new Map<string, { rps: number; us: number }[]>(targets.map((t) => [t.label, []]));
  for (const t of targets) await throughput(t.spec, 32, 0.5); // warm-up
  for (let r = 0; r < o.rounds; r++) {
    // Start one target later each round.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(k + r) % targets.length];
      const c0 = cpuSeconds([t.pid]);
      const res = await throughput(t.spec, 32, o.durationS);
      const c1 = cpuSeconds([t.pid]);
      if (res.failed) print(`${t.label}: ${res.failed} failed requests in round ${r + 1}\n`);
      rows.get(t.label)!.push({ rps: res.rps, us: ((c1 - c0) / Math.max(1, res.ok)) * 1e6 });
    }
  }
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const base = rows.get('plain')!;
  const out: FloorRow[] = [];
  print(`\n${'target'.padEnd(12)} ${'ratio to plain'.padStart(14)} ${'req/s'.padStart(7)} ${'CPU µs/req'.padStart(10)}  per-round ratios\n`);
  for (const t of targets) {
    const m = rows.get(t.label)!;
    const ratios = m.map((x, i) => x.rps / base[i].rps);
    out.push({ label: t.label, ratio: median(ratios), rps: median(m.map((x) => x.rps)), cpu_us: median(m.map((x) => x.us)) });
    print(
      `${t.label.padEnd(12)} ${median(ratios).toFixed(3).padStart(14)} ${Math.round(median(m.map((x) => x.rps))).toString().padStart(7)} ${Math.round(median(m.map((x) => x.us))).toString().padStart(10)}  ${ratios.map((x) => x.toFixed(2)).join(' ')}\n`,
    );
  }
  print(`\n${o.rounds} interleaved rounds of ${o.durationS} s at 32 connections; ratio = median of per-round ratios to the plain proxy.\n`);
  for (const t of targets) t.child.kill();
  await mock.stop();
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  if (argv[0] === '--serve') {
    koaProxy(argv[1], argv[2]).then(
      (port) => process.send?.({ port }),
      () => process.exit(3),
    );
    process.on('disconnect', () => process.exit(0));
  } else {
    const o = { rounds: 9, durationS: 1.5, gateways: [['gateway', PROJECT_ROOT]] as [string, string][], variants: ['koa-body', 'koa', 'koa-bare'] };
    for (let i = 0; i < argv.length; i++) {
      if (argv[i] === '--rounds') o.rounds = Number(argv[++i]);
      else if (argv[i] === '--duration') o.durationS = Number(argv[++i]);
      else if (argv[i] === '--no-koa') o.variants = [];
      else if (argv[i] === '--gateway') {
        const [label, root] = argv[++i].split('=');
        o.gateways.push([label, path.resolve(root)]);
      } else {
        process.stderr.write('usage: node dist/bench/floor.js [--rounds N] [--duration S] [--no-koa] [--gateway LABEL=DIR ...]\n');
        process.exit(2);
      }
    }
    await runFloor(o);
  }
}
