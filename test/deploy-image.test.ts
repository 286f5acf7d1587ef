// The Dockerfile's build steps, run outside Docker (no engine here): each
// stage gets a root directory standing for the image's filesystem; COPY, ENV,
// WORKDIR and RUN are carried out as Docker would, with container paths
// mapped into that root (and `chown`, for a user this machine may not have,
// checked rather than run). Then the runtime stage's CMD starts the gateway
// from what the runtime stage holds, with its ENV, and its HEALTHCHECK is
// asked. Slow (a full `npm ci` and `tsc`: 3-5 minutes on a busy 2-core
// machine), so it runs when GATEWAY_TEST_IMAGE=1; it reuses npm's cache.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { until } from './helpers/gateway.js';

const run = promisify(execFile);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'));

interface Stage { name: string; image: string; root: string; workdir: string; env: Record<string, string>; user?: string; expose: string[]; healthcheck?: string[]; cmd?: string[] }

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(text: string): { op: string; args: string }[] {
  const out: { op: string; args: string }[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!cur && (line.startsWith('#') || !line)) continue;
    if (line.startsWith('#')) continue;
    cur += (cur ? ' ' : '') + line.replace(/\\$/, '').trim();
    if (!line.endsWith('\\')) {
      const m = /^(\w+)\s+([\s\S]*)$/.exec(cur)!;
      out.push({ op: m[1]!.toUpperCase(), args: m[2]! });
      cur = '';
    }
  }
  return out;
}

const inRoot = (st: Stage, p: string) => path.join(st.root, path.isAbsolute(p) ? p : path.join(st.workdir, p));
const mapPaths = (st: Stage, s: string) => s.replace(/(^|[\s=])\/(?=[a-z])/g, `$1${st.root}/`);

const skip = process.env.GATEWAY_TEST_IMAGE ? false : "set GATEWAY_TEST_IMAGE=1 to run the Dockerfile's build steps in a clean directory (a full npm ci and tsc: 3-5 minutes)";
const tmp = skip ? '' : fs.mkdtempSync(path.join(os.tmpdir(), 'mg-image-'));
if (!skip) t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
t.setTimeout(10 * 60_000);

const stages: Stage[] = [];
const dockerignore = fs.readFileSync(path.join(repo, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));

t.test('the Dockerfile builds in a clean directory', { skip }, async (t) => {
  const args: Record<string, string> = {};
  let st: Stage | undefined;
  // npm as the image runs it, from this machine's cache (the registry only for what it lacks).
  const npmEnv = { npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' };
  for (const { op, args: a } of instructions(fs.readFileSync(path.join(repo, 'Dockerfile'), 'utf8'))) {
    if (op === 'ARG') {
      const [k, v] = a.split('=');
      args[k!] = v ?? '';
    } else if (op === 'FROM') {
      const m = /^(\S+)\s+AS\s+(\S+)$/i.exec(a)!;
      const image = m[1]!.replace(/\$\{(\w+)\}/g, (_, k: string) => args[k]!);
      st = { name: m[2]!, image, root: path.join(tmp, m[2]!), workdir: '/', env: {}, expose: [] };
      fs.mkdirSync(st.root);
      stages.push(st);
    } else if (op === 'WORKDIR') {
      st!.workdir = a;
      fs.mkdirSync(inRoot(st!, '.'), { recursive: true });
    } else if (op === 'ENV') {
      for (const m of a.matchAll(/(\w+)=(\S+)/g)) st!.env[m[1]!] = m[2]!;
    } else if (op === 'COPY') {
      const words = a.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice(7);
      const [dest, ...srcs] = words.filter((w) => !w.startsWith('--')).reverse();
      for (const src of srcs.reverse()) {
        let source: string;
        if (from) source = inRoot(stages.find((s) => s.name === from)!, src);
        else {
          source = path.join(repo, src);
          // The build context keeps it (.dockerignore excludes everything else).
          t.ok(dockerignore.includes(`!${src}`) || dockerignore.includes(`!${src}/`), `.dockerignore lets ${src} into the context`);
        }
        t.ok(fs.existsSync(source), `COPY ${src} exists`);
        const target = dest!.endsWith('/') ? path.join(inRoot(st!, dest!), path.basename(src)) : inRoot(st!, dest!);
        fs.mkdirSync(path.dirname(target), { recursive: true });
        fs.cpSync(source, target, { recursive: true, filter: (f) => !f.endsWith('.test.ts') });
      }
    } else if (op === 'RUN') {
      for (const part of a.split(/\s*&&\s*/)) {
        if (part.startsWith('chown ')) {
          t.match(part, /^chown node:node /, 'the data directory belongs to the image\'s node user');
          continue;
        }
        // Debian's packages: checked rather than installed into this machine (the base image's apt); the
        // link to the library then points at this machine's copy (.ci/run installs libjemalloc2).
        if (part.startsWith('apt-get ') || part.startsWith('rm -rf /var/lib/apt/')) {
          t.match(part, /^(apt-get update|apt-get install -y --no-install-recommends libjemalloc2|rm -rf \/var\/lib\/apt\/lists\/\*)$/, `${st!.name}: ${part} (checked, not run)`);
          continue;
        }
        if (part.startsWith('ln -s ')) fs.mkdirSync(inRoot(st!, path.dirname(part.split(/\s+/).at(-1)!)), { recursive: true });
        const cwd = inRoot(st!, '.');
        const env = { ...process.env, ...npmEnv, ...Object.fromEntries(Object.entries(st!.env).map(([k, v]) => [k, mapPaths(st!, v)])) };
        await run('sh', ['-c', mapPaths(st!, part)], { cwd, env, maxBuffer: 64 << 20 });
        t.pass(`${st!.name}: ${part}`);
      }
    } else if (op === 'USER') st!.user = a;
    else if (op === 'EXPOSE') st!.expose.push(a);
    else if (op === 'HEALTHCHECK') st!.healthcheck = JSON.parse(/CMD\s+(\[.*\])$/.exec(a)![1]!);
    else if (op === 'CMD') st!.cmd = JSON.parse(a);
  }
  t.same(stages.map((s) => s.name), ['build', 'runtime']);
  for (const s of stages) t.match(s.image, /^node:24(-|$)/, `${s.name} runs on Node 24, the version the gateway is tested on (${pkg.devDependencies.node})`);
});

t.test('the runtime stage holds production dependencies only', { skip }, async (t) => {
  const rt = stages.find((s) => s.name === 'runtime')!;
  const modules = inRoot(rt, 'node_modules');
  for (const dep of Object.keys(pkg.dependencies)) t.ok(fs.existsSync(path.join(modules, dep, 'package.json')), `${dep} is installed`);
  for (const dep of Object.keys(pkg.devDependencies)) t.notOk(fs.existsSync(path.join(modules, dep)), `devDependency ${dep} is not`);
  t.ok(fs.existsSync(inRoot(rt, 'dist/src/cli.js')));
  t.ok(fs.existsSync(inRoot(rt, 'dist/plugins/providers/openai/index.js')));
  t.notOk(fs.existsSync(inRoot(rt, 'dist/test')), 'no tests in the image');
  t.notOk(fs.existsSync(inRoot(rt, 'src')), 'no TypeScript sources in the image');
  t.match(rt.user, /^(1000|node)\b/, 'a non-root user');
  t.same(rt.expose, ['8080']);
  t.equal(rt.env.PORT, '8080');
  t.same(rt.cmd, ['node', 'dist/src/cli.js', 'start']);
  t.equal(rt.env.GATEWAY_CONFIG, '/etc/model-gateway/gateway.yaml');
  t.ok(fs.existsSync(inRoot(rt, rt.env.GATEWAY_CONFIG)), 'the config is where GATEWAY_CONFIG says');
});

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

t.test('the runtime stage starts the gateway and its healthcheck answers', { skip }, async (t) => {
  const rt = stages.find((s) => s.name === 'runtime')!;
  const port = await freePort();
  const env = {
    PATH: process.env.PATH ?? '',
    ...Object.fromEntries(Object.entries(rt.env).map(([k, v]) => [k, mapPaths(rt, v)])),
    PORT: String(port),
    HOST: '127.0.0.1',
    GATEWAY_API_KEYS: 'image-test-key',
    GATEWAY_ADMIN_KEY: 'image-test-admin-key',
  };
  // `node` of the CMD and HEALTHCHECK: this process's Node 24, as the base image's.
  const node = (argv: string[]) => [process.execPath, argv.slice(1)] as const;
  const [bin, argv] = node(rt.cmd!);
  const child = spawn(bin, argv, { cwd: inRoot(rt, '.'), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (out += c));
  let exit: number | null | undefined;
  child.on('exit', (code) => (exit = code));
  t.teardown(() => {
    if (exit === undefined) child.kill('SIGKILL');
  });
  await until(() => exit !== undefined || out.includes('"msg":"model-gateway ready"'), 30_000);
  t.equal(exit, undefined, out);

  // The image's allocator: the preloaded jemalloc is mapped into the gateway (a wrong path would only be a warning from ld.so).
  t.match(fs.readFileSync(`/proc/${child.pid}/maps`, 'utf8'), /libjemalloc\.so\.2/, 'the gateway runs with jemalloc');
  t.notMatch(out, /cannot be preloaded/, 'ld.so found the preload');

  const [hbin, hargv] = node(rt.healthcheck!);
  const health = () => run(hbin, hargv, { env }).then(() => 0, (e: { code: number }) => e.code);
  // The ready line comes once the port listens: the first check answers.
  t.equal(await health(), 0, 'HEALTHCHECK: healthy');

  const res = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer image-test-key' } });
  t.equal(res.status, 200);
  const models = ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id);
  t.ok(models.includes('openai/gpt-4.1-mini'), 'the image serves the shipped catalog');
  // What the gateway reads from the package at run time: the dashboard's page, uPlot from node_modules.
  for (const asset of ['/dashboard', '/dashboard/app.js', '/dashboard/uplot.min.js']) {
    const r = await fetch(`http://127.0.0.1:${port}${asset}`);
    t.equal(r.status, 200, `GET ${asset}`);
    await r.arrayBuffer();
  }
  // The usage store opens its database on first use: the usage API is one.
  const usage = await fetch(`http://127.0.0.1:${port}/admin/usage?group_by=model`, { headers: { authorization: 'Bearer image-test-admin-key' } });
  t.equal(usage.status, 200, 'GET /admin/usage');
  t.same(((await usage.json()) as { data: unknown[] }).data, [], 'an empty usage store');
  const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
  t.equal(metrics.status, 200, 'GET /metrics');
  t.match(await metrics.text(), /gateway_requests_total/);

  child.kill('SIGTERM');
  await until(() => exit !== undefined, 30_000);
  t.equal(exit, 0, 'SIGTERM drains and exits 0');
  t.ok(fs.existsSync(mapPaths(rt, rt.env.GATEWAY_USAGE_DB!)), 'the usage store is in the data directory');
  t.not(await health(), 0, 'HEALTHCHECK: unhealthy once the gateway is gone');
});
