// gateway.yaml: validation with path and line for every problem (all at
// once), ${VAR} / ${VAR:-default}, env keys and provider env defaults, and
// the CLI: `check` exit codes, `start` serving /healthz, SIGTERM draining.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadConfigText, ConfigError, sha256Hex } from '../src/config/load.js';
import { builtins } from '../plugins/index.js';
import { familiesOf } from '../src/cli.js';
import { applyStartFlags, defaultFlagsToSet, holdStartupV8Flags, missingNodeFlags, relaunchWithNodeFlags, releaseStartupV8Flags, RUNTIME_V8_FLAGS, START_NODE_FLAGS, startDefaults, workerExecArgv } from '../src/node-flags.js';
import { peekNodeFlags } from '../src/config/load.js';
import { startMock, sse } from './mocks/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const cli = path.resolve(here, '../src/cli.js');
const families = familiesOf(builtins());
const load = (yaml: string, env: Record<string, string> = {}) => loadConfigText(yaml, 'g.yaml', { families, env });

function problems(yaml: string, env: Record<string, string> = {}) {
  try {
    load(yaml, env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
}

t.test('the shipped gateway.yaml is valid and holds the expected catalog', async (t) => {
  const cfg = load(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'), {});
  for (const id of ['openai/gpt-4.1-mini', 'openai/gpt-5-mini', 'openai/gpt-image-1']) t.ok(cfg.models.get(id), id);
  t.equal(cfg.models.get('openai/gpt-5-mini')!.capabilities.reasoning, true);
  t.equal(cfg.server.port, 8080);
});

t.test('every problem is reported with its path and line', async (t) => {
  const yaml = `server:
  port: 99999
  colour: blue
providers:
  - name: p1
    family: martian
  - name: p2
    family: openai
    base_url: not a url
models:
  - id: no-slash
    deployments: [{ provider: p2, model: m }]
  - id: a/b
    deployments: [{ provider: ghost, model: m }]
    fallbacks: [a/zzz]
  - id: a/c
    deployments: []
aliases:
  short: a/unknown
`;
  const ps = problems(yaml);
  const find = (p: string) => ps.find((x) => x.path === p);
  t.match(find('server.port'), { line: 2, message: /65535/ });
  t.match(find('server.colour'), { line: 3, message: /unknown key/ });
  t.match(find('providers.1.base_url'), { line: 9, message: /URL/ });
  t.match(find('models.0.id'), { line: 11, message: /<owner>\/<model>/ });
  t.match(find('models.2.deployments'), { line: 17, message: /at least one/ });
  t.ok(ps.length >= 5, 'schema problems all listed together');
  // Cross-reference problems are found once the schema passes.
  const ps2 = problems(`providers:
  - name: p1
    family: martian
  - name: p2
    family: openai
models:
  - id: a/b
    deployments: [{ provider: ghost, model: m }]
    fallbacks: [a/zzz]
aliases:
  short: a/unknown
`);
  const f2 = (p: string) => ps2.find((x) => x.path === p);
  t.match(f2('providers.0.family'), { line: 3, message: /unknown provider family "martian"/ });
  t.match(f2('models.0.deployments.0.provider'), { line: 8, message: /no provider named "ghost"/ });
  t.match(f2('models.0.fallbacks.0'), { line: 9, message: /no model "a\/zzz"/ });
  t.match(f2('aliases.short'), { line: 11, message: /unknown model/ });
  const e = (() => {
    try {
      load('server:\n  port: [1,');
    } catch (e) {
      return e as ConfigError;
    }
  })();
  t.ok(e instanceof ConfigError, 'YAML syntax errors are config errors');
  t.ok(e!.problems[0].line);
});

t.test('${VAR} and ${VAR:-default} interpolation, inside values only', async (t) => {
  const yaml = `providers:
  - name: o
    family: openai
    api_key: \${MY_KEY}
    base_url: \${MY_URL:-http://127.0.0.1:9/v1}
    headers: { x-team: "\${TEAM:-core}" }
`;
  const cfg = load(yaml, { MY_KEY: 'sk-abc' });
  const p = cfg.providers.get('o')!;
  t.equal(p.api_key, 'sk-abc');
  t.equal(p.base_url, 'http://127.0.0.1:9/v1');
  t.equal(p.headers['x-team'], 'core');
  const ps = problems(yaml, {});
  t.match(ps, [{ path: 'providers.0.api_key', line: 4, message: /MY_KEY is not set/ }]);
  // A value that looks like YAML stays a string.
  const cfg2 = load(yaml, { MY_KEY: 'a: [b, c]' });
  t.equal(cfg2.providers.get('o')!.api_key, 'a: [b, c]');
});

t.test('keys: SHA-256 in the file, plaintext only via GATEWAY_API_KEYS; env provider defaults; PORT', async (t) => {
  const cfg = load(`keys:\n  - name: team\n    sha256: ${sha256Hex('k1')}\nproviders:\n  - name: openai\n    family: openai\n`, {
    GATEWAY_API_KEYS: 'k2, k3',
    OPENAI_API_KEY: 'sk-env',
    OPENAI_BASE_URL: 'http://127.0.0.1:7/v1/',
    PORT: '9090',
  });
  t.same(cfg.keys.map((k) => k.name), ['team', 'env-1', 'env-2']);
  t.equal(cfg.keys[1].hash.toString('hex'), sha256Hex('k2'));
  t.equal(cfg.providers.get('openai')!.api_key, 'sk-env');
  t.equal(cfg.providers.get('openai')!.base_url, 'http://127.0.0.1:7/v1');
  t.equal(cfg.server.port, 9090);
  t.match(problems(`keys:\n  - name: plain\n    sha256: my-secret-key\n`), [{ path: 'keys.0.sha256', message: /SHA-256/ }]);
  t.match(problems('server: {}', { PORT: 'eighty' }), [{ path: 'PORT' }]);
});

t.test('model-gateway check: exit 0 on a good file, 1 listing every problem', async (t) => {
  const ok = spawnSync(process.execPath, [cli, 'check', path.join(root, 'gateway.yaml')], { encoding: 'utf8' });
  t.equal(ok.status, 0, ok.stderr);
  t.match(ok.stdout, /OK/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-cfg-'));
  const bad = path.join(dir, 'bad.yaml');
  fs.writeFileSync(bad, 'server:\n  port: -1\n  nope: 1\n');
  const r = spawnSync(process.execPath, [cli, 'check', bad], { encoding: 'utf8' });
  t.equal(r.status, 1);
  t.match(r.stderr, /server\.port \(line 2\)/);
  t.match(r.stderr, /server\.nope \(line 3\): unknown key/);
  const missing = spawnSync(process.execPath, [cli, 'check', path.join(dir, 'none.yaml')], { encoding: 'utf8' });
  t.equal(missing.status, 1);
  t.match(missing.stderr, /cannot read/);
  const schema = spawnSync(process.execPath, [cli, 'schema'], { encoding: 'utf8' });
  t.equal(schema.status, 0);
  const js = JSON.parse(schema.stdout);
  t.ok(js.properties.models && js.properties.providers, 'JSON Schema of the config');
});

t.test('model-gateway start: /healthz, then SIGTERM lets the in-flight stream finish', async (t) => {
  const upstream = await startMock(() => ({
    status: 200,
    sseDelayMs: 40,
    sse: [
      ...Array.from({ length: 10 }, (_, i) => sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: '' } : { content: `${i} ` }, finish_reason: null }] })),
      sse({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
      'data: [DONE]\n\n',
    ],
  }));
  t.teardown(() => upstream.close());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-start-'));
  const file = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(file, `providers:\n  - name: up\n    family: openai-compatible\n    base_url: ${upstream.url}/v1\nmodels:\n  - id: up/m\n    deployments: [{ provider: up, model: m }]\n`);
  const child = spawn(process.execPath, [cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, GATEWAY_API_KEYS: 'k-start-1', HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => child.kill('SIGKILL'));
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (c) => {
      out += c;
      // The ready line of a worker (the default is one per core; the primary's own line carries the configured port, 0).
      const m = /"port":(\d+)[^\n]*"msg":"model-gateway ready"/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  const h = await fetch(`http://127.0.0.1:${port}/healthz`);
  t.equal(h.status, 200);
  if (os.availableParallelism() > 1) t.match(out, /"workers":\d+[^\n]*primary: starting workers/, 'no server.workers: one worker per core');
  t.match(out, new RegExp(`"node_flags":${JSON.stringify(startDefaults()).replace(/[[\]]/g, '\\$&')}[^\\n]*"msg":"model-gateway ready"`), 'no server.node_flags: each worker starts with the default young-generation cap where it applies');
  t.match(out, /"v8_flags":\["--no-allocation-site-pretenuring"\][^\n]*"msg":"model-gateway ready"/, 'the runtime V8 flags set by default, listed in the ready line');
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer k-start-1', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'up/m', messages: [{ role: 'user', content: 'x' }], stream: true }),
  });
  t.equal(res.status, 200);
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const reader = res.body!.getReader();
  await reader.read();
  child.kill('SIGTERM');
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  t.match(text, /\[DONE\]/, 'the in-flight stream completed after SIGTERM');
  t.equal(await exited, 0, 'clean exit');
  await t.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'no longer accepting');
  t.match(out, /"request_id"/, 'access log line written');
  t.notMatch(out, /k-start-1/, 'client key never logged');
});

t.test('server.node_flags: start re-executes itself once, keeping its pid, with the flags it lacks', async (t) => {
  t.same(missingNodeFlags(['--max-semi-space-size=16', '--stack-trace-limit=7'], ['--max_semi_space_size=32'], ''), ['--stack-trace-limit=7'], 'a flag given on the command line (either spelling) is kept as given');
  t.same(missingNodeFlags(['--max-semi-space-size=16', '--stack-trace-limit=7'], [], ' --stack-trace-limit=3  --max-old-space-size=900'), ['--max-semi-space-size=16'], 'NODE_OPTIONS counts too');
  t.same(missingNodeFlags([], [], ''), []);
  t.same(RUNTIME_V8_FLAGS, ['--no-allocation-site-pretenuring']);
  t.same(defaultFlagsToSet(RUNTIME_V8_FLAGS, [], [], ''), ['--no-allocation-site-pretenuring'], 'set when nobody named the flag');
  t.same(defaultFlagsToSet(RUNTIME_V8_FLAGS, ['--allocation-site-pretenuring'], [], ''), [], 'server.node_flags naming it (either polarity) wins');
  t.same(defaultFlagsToSet(RUNTIME_V8_FLAGS, [], ['--allocation_site_pretenuring'], ''), [], 'so does the command line, in either spelling');
  t.same(defaultFlagsToSet(RUNTIME_V8_FLAGS, [], [], '--max-old-space-size=900 --no-allocation-site-pretenuring'), [], 'and NODE_OPTIONS');
  t.same(defaultFlagsToSet(['--no-foo', '--bar=1'], ['--baz'], ['--nothing'], ''), ['--no-foo', '--bar=1'], 'other flags do not count');
  // The young generation held at its size and the optimising compilers off while the gateway starts, V8's own once it is ready.
  const tiers = ['--no-maglev', '--no-turbofan'];
  t.same(holdStartupV8Flags([], [], ''), ['--semi-space-growth-factor=1', ...tiers], 'held when nobody named the flags');
  t.same(releaseStartupV8Flags(), ['--semi-space-growth-factor=2', '--maglev', '--turbofan'], "V8's own values once ready");
  t.same(releaseStartupV8Flags(), [], 'released once');
  t.same(holdStartupV8Flags(['--semi-space-growth-factor=4'], [], ''), tiers, 'server.node_flags naming one wins');
  t.same(releaseStartupV8Flags(), ['--maglev', '--turbofan']);
  t.same(holdStartupV8Flags([], ['--semi_space_growth_factor=3', '--max-opt=2'], ''), [], 'so does the command line (--max-opt decides both tiers)');
  t.same(holdStartupV8Flags([], [], '--semi-space-growth-factor=3 --no-opt --jitless'), [], 'and NODE_OPTIONS');
  t.same(releaseStartupV8Flags(), [], 'nothing held: nothing set back');
  t.same(holdStartupV8Flags([], [], ''), ['--semi-space-growth-factor=1', ...tiers], 'held before server.node_flags are read');
  t.same(holdStartupV8Flags(['--maglev'], [], ''), ['--semi-space-growth-factor=1', '--no-turbofan'], 'then those they name are set back');
  t.same(releaseStartupV8Flags(), ['--semi-space-growth-factor=2', '--turbofan']);
  t.same(START_NODE_FLAGS, ['--max-semi-space-size=32']);
  t.same(startDefaults(24 * 2 ** 30), ['--max-semi-space-size=32'], 'the cap on a host where V8 would use 64 MB semi-spaces');
  t.same(startDefaults(4 * 2 ** 30), ['--max-semi-space-size=32'], 'from 4 GiB up');
  t.same(startDefaults(2 * 2 ** 30), [], 'not where V8 already picks 32 MB or less: it would change nothing, or raise the limit on a small container');
  t.same(defaultFlagsToSet(START_NODE_FLAGS, [], [], ''), ['--max-semi-space-size=32'], 'the young-generation cap when nobody sized it');
  t.same(defaultFlagsToSet(START_NODE_FLAGS, ['--max_semi_space_size=64'], [], ''), [], 'server.node_flags sizing it wins');
  for (const other of ['--min-semi-space-size=64', '--max-heap-size=4096', '--scavenger-max-new-space-capacity-mb=8'])
    t.same(defaultFlagsToSet(START_NODE_FLAGS, [], [], other), [], `${other} in NODE_OPTIONS sizes the young generation too: no default beside it`);
  t.same(defaultFlagsToSet(START_NODE_FLAGS, ['--max-old-space-size=900'], ['--stack-trace-limit=7'], ''), ['--max-semi-space-size=32'], 'flags that do not size the young generation leave the default in place');
  t.same(workerExecArgv([], ['--stack-trace-limit=7'], 24 * 2 ** 30), ['--stack-trace-limit=7', '--max-semi-space-size=32'], "a worker starts with the primary's flags and the default cap");
  t.same(workerExecArgv([], ['--max-semi-space-size=64'], 24 * 2 ** 30), ['--max-semi-space-size=64'], 'the primary sized the young generation: the worker keeps that');
  t.same(workerExecArgv(['--max-semi-space-size=16'], [], 24 * 2 ** 30), [], 'server.node_flags sizing it: the default is left out (the workers inherit the re-executed primary\'s flags)');
  t.same(workerExecArgv([], [], 2 * 2 ** 30), [], 'no default where V8 already picks 32 MB or less');
  // A process that cannot re-execute (here: one that already did) reports the configured flags it lacks, never a default.
  const was = process.env.MODEL_GATEWAY_RELAUNCHED;
  process.env.MODEL_GATEWAY_RELAUNCHED = '1';
  try {
    const lacking = applyStartFlags(['--stack-trace-limit=7']);
    t.same(lacking, process.execArgv.some((f) => f.startsWith('--stack-trace-limit')) ? [] : ['--stack-trace-limit=7'], 'the configured flag this process lacks is reported');
    t.notOk(lacking.some((f) => f.startsWith('--max-semi-space-size')), 'the default it could not apply is not');
  } finally {
    if (was === undefined) delete process.env.MODEL_GATEWAY_RELAUNCHED;
    else process.env.MODEL_GATEWAY_RELAUNCHED = was;
  }
  // execve(2) refused (newer Node throws instead of aborting): the process goes on as started.
  const realExecve = process.execve;
  const calls: string[][] = [];
  const refused = (_file: string, args?: readonly string[]) => {
    calls.push([...(args ?? [])]);
    throw Object.assign(new Error('execve EPERM'), { code: 'EPERM' });
  };
  Object.defineProperty(process, 'execve', { value: refused, configurable: true, writable: true });
  if (process.execve === (refused as unknown)) {
    delete process.env.MODEL_GATEWAY_RELAUNCHED;
    try {
      const flag = '--stack-trace-limit=9';
      t.same(relaunchWithNodeFlags([flag]), [flag], 'a refused re-execution: the process goes on and says which flags it lacks');
      t.ok(calls[0]?.includes(flag), 'after trying to re-execute with them');
    } finally {
      Object.defineProperty(process, 'execve', { value: realExecve, configurable: true, writable: true });
      if (was !== undefined) process.env.MODEL_GATEWAY_RELAUNCHED = was;
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-flags-'));
  const file = path.join(dir, 'gateway.yaml');
  // start reads server.node_flags before it loads the rest of the gateway, to re-execute early.
  fs.writeFileSync(file, `server:\n  node_flags: ['--max-old-space-size=\${HEAP:-900}', '--stack-trace-limit=7']\nproviders: []\nmodels: []\n`);
  t.same(peekNodeFlags(file, {}), ['--max-old-space-size=900', '--stack-trace-limit=7'], 'peek: the flags, ${VAR:-default} replaced');
  t.same(peekNodeFlags(file, { HEAP: '2048' }), ['--max-old-space-size=2048', '--stack-trace-limit=7'], 'peek: from the environment');
  fs.writeFileSync(file, `providers: []\nmodels: []\n`);
  t.same(peekNodeFlags(file, {}), [], 'peek: none given');
  fs.writeFileSync(file, `server:\n  node_flags: ['--x']\n  no_such_key: 1\n`);
  t.equal(peekNodeFlags(file, {}), undefined, 'peek: a file that fails the schema gives nothing (the full load reports it)');
  fs.writeFileSync(file, `server: [`);
  t.equal(peekNodeFlags(file, {}), undefined, 'peek: nor does broken YAML');
  t.equal(peekNodeFlags(path.join(dir, 'missing.yaml'), {}), undefined, 'peek: nor a missing file');
  // Two workers: the primary re-executes itself, the workers inherit the flags.
  fs.writeFileSync(file, `server:\n  workers: 2\n  node_flags: ['--stack-trace-limit=7', '--max-semi-space-size=8', '--allocation-site-pretenuring']\nproviders: []\nmodels: []\n`);
  const child = spawn(process.execPath, ['--max-semi-space-size=4', cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => child.kill('SIGKILL'));
  let out = '';
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout.on('data', (c) => {
      out += c;
      const l = out.split('\n').find((x) => x.includes('"model-gateway ready"'));
      if (l) resolve(JSON.parse(l));
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  t.same(line.node_flags, ['--max-semi-space-size=4', '--stack-trace-limit=7', '--allocation-site-pretenuring'], 'the missing flags added once; the one given on the command line kept; the worker inherited them');
  t.same(line.v8_flags, [], 'a runtime V8 flag named in server.node_flags is left as the operator set it');
  t.match(out, new RegExp(`"pid":${child.pid},[^\\n]*primary: starting workers`), 'the primary kept its pid through the re-exec');
  t.equal(out.match(/primary: starting workers/g)?.length, 1, 'one primary line: the relaunch happened before anything was written');
  const exited = new Promise((r) => child.on('exit', (code) => r(code)));
  child.kill('SIGTERM');
  t.equal(await exited, 0);

  // One process and no server.node_flags: nothing to re-execute for (a default never causes one).
  fs.writeFileSync(file, `server:\n  workers: 1\nproviders: []\nmodels: []\n`);
  const single = spawn(process.execPath, [cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, HOST: '127.0.0.1', NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => single.kill('SIGKILL'));
  let singleOut = '';
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    single.stdout.on('data', (c) => {
      singleOut += c;
      const l = singleOut.split('\n').find((x) => x.includes('"model-gateway ready"'));
      if (l) resolve(JSON.parse(l));
    });
    single.on('exit', (code) => reject(new Error(`exited ${code}: ${singleOut}`)));
  });
  t.same(ready.node_flags, [], 'started as it was: no default flag, so no re-execution');
  t.equal(ready.pid, single.pid);
  const singleExit = new Promise((r) => single.on('exit', (code) => r(code)));
  single.kill('SIGTERM');
  t.equal(await singleExit, 0);

  fs.writeFileSync(file, `server:\n  workers: 1\n  node_flags: ['--no-such-flag-anywhere']\nproviders: []\nmodels: []\n`);
  const bad = spawnSync(process.execPath, [cli, 'start'], { env: { ...process.env, PORT: '0', GATEWAY_CONFIG: file, HOST: '127.0.0.1' }, encoding: 'utf8', timeout: 20_000 });
  t.not(bad.status, 0, 'a flag Node does not know stops the start');
  t.match(bad.stderr, /no-such-flag-anywhere/, 'and Node names it');
});

t.test('the committed gateway.schema.json is up to date with the schema', async (t) => {
  const r = spawnSync(process.execPath, [cli, 'schema'], { encoding: 'utf8' });
  const committed = JSON.parse(fs.readFileSync(path.join(root, 'gateway.schema.json'), 'utf8'));
  t.same(committed, JSON.parse(r.stdout), 'run `npm run schema` after changing src/config/schema.ts');
});
