// docker-compose.yaml's topology without Docker: HAProxy with the repository's
// deploy/compose/haproxy.cfg (servers pointed at two local gateway processes)
// in front of two replicas sharing one Redis. Requests through the load
// balancer reach both replicas, a key's rpm holds across them, and when a
// replica goes away the load balancer's /healthz checks take it out and the
// other serves. Skipped, saying so, without haproxy or Redis.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import OpenAI, { APIError } from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { until, untilAsync } from './helpers/gateway.js';
import { startGatewayProcess, redisReachable } from './helpers/process.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const sha = (k: string) => createHash('sha256').update(k).digest('hex');


const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

const haveHaproxy = spawnSync('haproxy', ['-v']).status === 0;
const skip = !haveHaproxy ? 'no haproxy binary (apt-get install haproxy; .ci/run installs it)' : !(await redisReachable(REDIS)) ? `no Redis answers at ${REDIS} (.ci/run starts one)` : false;

t.test('two replicas behind the compose load balancer config', { skip }, async (t) => {
  const prefix = `mgtest-lb:${process.pid}:${Date.now()}:`;
  const admin = new Redis(REDIS);
  t.teardown(async () => {
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length) await admin.del(...keys);
    admin.disconnect();
  });
  const oai = await startOpenAIMock();
  t.teardown(() => oai.close());
  const KEY = 'gw-lb-rpm-key-0001';
  const OPEN = 'gw-lb-open-key-001';
  const yaml = `
server: { workers: 1, shutdown_timeout_ms: 2000 }
storage: { usage: { enabled: false } , responses_db: ":memory:" }
state: { redis_url: ${REDIS}, key_prefix: "${prefix}" }
keys:
  - { name: limited, sha256: ${sha(KEY)}, rpm: 6 }
  - { name: open, sha256: ${sha(OPEN)} }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 5000 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`;
  const [a, b] = await Promise.all([startGatewayProcess(t, yaml), startGatewayProcess(t, yaml)]);

  // The repository's config, with the servers at the two processes and the
  // frontends on free local ports (Compose's DNS resolver does not exist here).
  const [lbPort, monPort] = await Promise.all([freePort(), freePort()]);
  const cfg = fs
    .readFileSync(path.join(repo, 'deploy/compose/haproxy.cfg'), 'utf8')
    .replace('server gateway-1 gateway-1:8080', `server gateway-1 127.0.0.1:${a.port}`)
    .replace('server gateway-2 gateway-2:8080', `server gateway-2 127.0.0.1:${b.port}`)
    .replace('bind :8080', `bind 127.0.0.1:${lbPort}`)
    .replace('bind :8404', `bind 127.0.0.1:${monPort}`)
    .replace(' resolvers docker', '')
    .replace(/resolvers docker\n.*\n?/, '');
  t.notMatch(cfg, /gateway-\d:8080|resolvers/, 'every Compose name replaced');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-lb-'));
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), cfg);
  const lb = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let lbOut = '';
  lb.stdout.on('data', (c) => (lbOut += c));
  lb.stderr.on('data', (c) => (lbOut += c));
  t.teardown(() => {
    lb.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `http://127.0.0.1:${lbPort}/v1`, maxRetries: 0, timeout: 10_000 });
  const chat = (key: string, i: number) =>
    client(key)
      .chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: `hi ${i}` }] })
      .then(
        () => 200,
        (e: APIError) => e.status ?? 0,
      );
  const served = (g: typeof a) => g.lines().filter((l) => l.path === '/v1/chat/completions').length;
  // Both servers up: haproxy marks a server up after two good checks (rise 2).
  await untilAsync(async () => (await chat(OPEN, 0)) === 200 && served(a) > 0 && served(b) > 0, 20_000).catch(() => t.fail(`both replicas never served: ${lbOut}`));
  t.ok(served(a) > 0 && served(b) > 0, 'requests through the load balancer reach both replicas');

  // A 6-per-minute key: exactly 6 of 12 served, whichever replica each reached.
  const before = [served(a), served(b)];
  const out: number[] = [];
  for (let i = 0; i < 12; i++) out.push(await chat(KEY, i));
  t.equal(out.filter((s) => s === 200).length, 6, '6 served');
  t.equal(out.filter((s) => s === 429).length, 6, '6 refused with 429');
  // The access log goes out in small batches: wait for all 12 lines.
  await until(() => served(a) + served(b) >= before[0]! + before[1]! + 12, 10_000);
  t.ok(served(a) > before[0]! && served(b) > before[1]!, 'the limited requests went to both replicas');

  // Replica A stops (SIGTERM: it drains, answers /healthz 503, exits). The
  // load balancer's checks take it out; B serves every request after that.
  a.child.kill('SIGTERM');
  await new Promise((r) => a.child.once('exit', r));
  const afterStop = served(b);
  await untilAsync(async () => {
    for (let i = 0; i < 4; i++) if ((await chat(OPEN, i)) !== 200) return false;
    return true;
  }, 20_000);
  await until(() => served(b) >= afterStop + 4, 10_000);
  t.pass('replica B serves once A is gone');
  t.match(lbOut, /gateway-1 is DOWN/, 'haproxy took gateway-1 out');
});
