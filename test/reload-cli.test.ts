// Reloading a started gateway (`model-gateway start`, spawned): SIGHUP, the
// file watch (server.watch_config: a file replaced by rename, and one
// rewritten in place), a refused file, and cluster mode (workers: 2), where
// the primary has every worker reload. Waits on what the process writes and
// serves, never on time.
import t from 'tap';
import fs from 'node:fs';
import OpenAI from 'openai';
import { until } from './helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from './helpers/process.js';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';

const KEY = 'k-reload-cli-1';

const mock = await startOpenAIMock();
t.teardown(() => mock.close());

/** A config whose catalog is `models` (each on gpt-4.1-mini), with `server` settings. */
const config = (server: string, models: string[]) => `server:
${server}
providers:
  - name: openai
    family: openai
    base_url: ${mock.url}/v1
    api_key: ${OPENAI_KEY}
models:
${models.map((m) => `  - id: ${m}\n    deployments: [{ provider: openai, model: gpt-4.1-mini }]`).join('\n')}
`;

/** `model-gateway start` on `yaml`, waiting for `readyLines` ready lines (one per worker). */
const start = (t: { teardown(fn: () => void): void }, yaml: string, readyLines = 1) => startGatewayProcess(t, yaml, { GATEWAY_API_KEYS: KEY }, { readyLines });

/** The catalog ids, each over a new connection (in cluster mode, the primary hands connections to the workers in turn). */
async function modelIds(port: number): Promise<string[]> {
  const r = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${KEY}`, connection: 'close' } });
  return ((await r.json()) as { data: { id: string }[] }).data.map((m) => m.id).sort();
}

/** gateway_config_reloads_total{result} from GET /metrics (in cluster mode, the primary's sum over the workers). */
async function reloadMetric(port: number, result: 'success' | 'failure'): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { connection: 'close' } })).text();
  const m = new RegExp(`^gateway_config_reloads_total\\{[^}]*result="${result}"[^}]*\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

const reloaded = (g: GatewayProcess) => g.lines().filter((l) => l.event === 'config_reload' && l.result === 'success');
const refused = (g: GatewayProcess) => g.lines().filter((l) => l.event === 'config_reload' && l.result === 'failure');

t.test('SIGHUP reloads a single-process gateway; a refused file keeps it serving', async (t) => {
  const g = await start(t, config('  workers: 1', ['acme/a']));
  t.same(await modelIds(g.port), ['acme/a']);
  fs.writeFileSync(g.file, config('  workers: 1', ['acme/a', 'acme/b']));
  g.child.kill('SIGHUP');
  await until(() => reloaded(g).length === 1, 10_000);
  t.match(reloaded(g)[0], { trigger: 'SIGHUP', models: 2, msg: 'config reloaded' });
  t.same(await modelIds(g.port), ['acme/a', 'acme/b'], 'the added model is served');
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${g.port}/v1`, apiKey: KEY, maxRetries: 0 });
  const r = await client.chat.completions.create({ model: 'acme/b', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(r.choices[0].message.content, 'Echo: hi');

  fs.writeFileSync(g.file, config('  workers: 1\n  port: 99999', ['acme/c']));
  g.child.kill('SIGHUP');
  await until(() => refused(g).length === 1, 10_000);
  t.match(refused(g)[0], { level: 'error', trigger: 'SIGHUP', problems: [/^server\.port \(line 3\): .*65535/] });
  t.same(await modelIds(g.port), ['acme/a', 'acme/b'], 'the running config keeps serving');
  t.equal(g.child.exitCode, null, 'still running');
  t.equal(await reloadMetric(g.port, 'success'), 1, 'gateway_config_reloads_total{result="success"}');
  t.equal(await reloadMetric(g.port, 'failure'), 1, 'gateway_config_reloads_total{result="failure"}');
});

t.test('server.watch_config: a file replaced by rename, or rewritten in place, is reloaded', async (t) => {
  const g = await start(t, config('  workers: 1\n  watch_config: true', ['acme/a']));
  // An editor's save: a new file renamed over the old one.
  const tmp = `${g.file}.tmp`;
  fs.writeFileSync(tmp, config('  workers: 1\n  watch_config: true', ['acme/a', 'acme/renamed']));
  fs.renameSync(tmp, g.file);
  await until(() => reloaded(g).length === 1, 10_000);
  t.equal(reloaded(g)[0].trigger, 'watch');
  t.same(await modelIds(g.port), ['acme/a', 'acme/renamed']);
  // Rewritten in place (after the rename: the watch survived it).
  fs.writeFileSync(g.file, config('  workers: 1\n  watch_config: true', ['acme/in-place']));
  await until(() => reloaded(g).length === 2, 10_000);
  t.same(await modelIds(g.port), ['acme/in-place']);
  // A broken save is refused, and the fix that follows is taken.
  fs.writeFileSync(g.file, config('  workers: 1\n  watch_config: true', ['not-a-model-id']));
  await until(() => refused(g).length === 1, 10_000);
  t.match(refused(g)[0].problems, [/^models\.0\.id \(line \d+\)/]);
  t.same(await modelIds(g.port), ['acme/in-place']);
  fs.writeFileSync(g.file, config('  workers: 1\n  watch_config: true', ['acme/fixed']));
  await until(() => reloaded(g).length === 3, 10_000);
  t.same(await modelIds(g.port), ['acme/fixed']);
  t.equal(reloaded(g).length, 3, 'one reload per change');
});

t.test('cluster mode: SIGHUP to the primary, and the watch, reload every worker', async (t) => {
  const g = await start(t, config('  workers: 2\n  watch_config: true', ['acme/a']), 2);
  const pids = (ls: Record<string, any>[]) => [...new Set(ls.map((l) => l.pid as number))].sort();
  const workerPids = pids(g.lines().filter((l) => l.msg === 'model-gateway ready'));
  t.equal(workerPids.length, 2, 'two workers');
  fs.writeFileSync(g.file, config('  workers: 2\n  watch_config: false', ['acme/a', 'acme/b']));
  // The watch sees this change too: wait for its round before sending SIGHUP.
  await until(() => reloaded(g).length === 2, 10_000);
  t.same(pids(reloaded(g)), workerPids, 'the watch (in the primary) reloaded both workers');
  // The workers told the primary the new file's watch_config: false.
  await until(() => g.lines().some((l) => l.msg === 'server.watch_config: no longer watching the config file'), 10_000);
  t.ok(g.lines().some((l) => l.msg === 'model-gateway primary: reloading the workers' && l.trigger === 'watch' && l.workers === 2));
  for (let i = 0; i < 4; i++) t.same(await modelIds(g.port), ['acme/a', 'acme/b'], `connection ${i + 1}: the new catalog`);

  fs.writeFileSync(g.file, config('  workers: 2', ['acme/c']));
  g.child.kill('SIGHUP');
  await until(() => reloaded(g).length === 4, 10_000);
  t.same(pids(reloaded(g).slice(2)), workerPids, 'SIGHUP to the primary reloaded both workers');
  t.ok(reloaded(g).slice(2).every((l) => l.trigger === 'SIGHUP'));
  for (let i = 0; i < 4; i++) t.same(await modelIds(g.port), ['acme/c'], `connection ${i + 1}: the catalog after SIGHUP`);
  t.equal(g.child.exitCode, null, 'the primary still runs');
  t.equal(g.lines().filter((l) => l.msg === 'model-gateway ready').length, 2, 'no worker was restarted');
  t.equal(await reloadMetric(g.port, 'success'), 4, 'one scrape counts every worker\'s reloads: 2 reloads x 2 workers');
  t.equal(await reloadMetric(g.port, 'failure'), 0);
});
