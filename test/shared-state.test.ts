// Two gateway processes on one Redis behave as one (docs/keys.md#shared-state):
// a key's requests per minute and its budget hold across both, a cool-down one
// opens the other honours; and a Redis that goes away mid-run gives the
// configured behaviour (503, or serving without limits), never a hang, and
// the limits come back with it. Skipped, saying so, where no Redis runs.
import t from 'tap';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import OpenAI, { APIError } from 'openai';
import { startOpenAIMock, openAIError, OPENAI_KEY } from './mocks/openai.js';
import { startMock } from './mocks/server.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { startGateway, until, untilAsync } from './helpers/gateway.js';
import { startGatewayProcess, redisReachable as reachable } from './helpers/process.js';
import { dropRedisKeys } from '../bench/processes.js';

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const sha = (k: string) => createHash('sha256').update(k).digest('hex');


if (!(await reachable(REDIS))) {
  t.comment(`skipped: no Redis answers at ${REDIS} (set TEST_REDIS_URL, or start one: .ci/run does); the shared-state tests need one`);
  t.pass('skipped: no Redis');
  t.end();
} else {
  await run();
}

async function run() {
  const prefix = `mgtest:${process.pid}:${Date.now()}:`;
  const admin = new Redis(REDIS);
  t.teardown(async () => {
    await dropRedisKeys(REDIS, prefix);
    admin.disconnect();
  });

  const oai = await startOpenAIMock();
  const gem = await startGeminiMock();
  t.teardown(() => gem.close());
  const broken = await startMock(() => openAIError(500, 'The server had an error while processing your request.', 'server_error', null, null));
  t.teardown(() => Promise.all([oai.close(), broken.close()]));

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-shared-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ADMIN = 'gw-shared-admin-key-01';
  const KEYS = { rpm: 'gw-shared-rpm-01', budget: 'gw-shared-budget', cool: 'gw-shared-cool-1', busy: 'gw-shared-busy-01' };
  const yaml = `
server: { workers: 1, log_level: info }
storage: { usage: { enabled: false, db: "${dir}/gateway.sqlite" } }
state:
  redis_url: ${REDIS}
  key_prefix: "${prefix}"
  # Exactness is what these tests check: a machine busy enough to delay Redis past the default
  # 250 ms would serve a request unlimited (on_unavailable: open) and miscount.
  timeout_ms: 2000
keys:
  - { name: rpm, sha256: ${sha(KEYS.rpm)}, rpm: 10 }
  - { name: budget, sha256: ${sha(KEYS.budget)}, budget_usd: 0.01, budget_period: day }
  - { name: cool, sha256: ${sha(KEYS.cool)} }
  - { name: busy, sha256: ${sha(KEYS.busy)}, rpm: 100000, tpm: 100000000, budget_usd: 100, budget_period: day }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 3000 }
  - { name: google, family: google, base_url: ${gem.url}, api_key: ${GEMINI_KEY}, retries: 0, timeout_ms: 3000 }
  - { name: broken, family: openai-compatible, base_url: ${broken.url}/v1, api_key: sk-broken, retries: 0, timeout_ms: 3000 }
routing:
  failure_threshold: 1
  cooldown_ms: 600000
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: x/priced
    deployments: [{ provider: openai, model: gpt-4.1 }]
    pricing: { input: 2, output: 8 }
  - id: google/gemini-2.5-flash
    deployments: [{ provider: google, model: gemini-2.5-flash }]
  - id: x/cool
    deployments: [{ provider: broken, model: m }, { provider: openai, model: gpt-4.1-mini }]
`;
  const [a, b] = await Promise.all([startGatewayProcess(t, yaml, { GATEWAY_ADMIN_KEY: ADMIN }), startGatewayProcess(t, yaml, { GATEWAY_ADMIN_KEY: ADMIN })]);
  const on = (g: { baseURL: string }, key: string) => new OpenAI({ apiKey: key, baseURL: g.baseURL, maxRetries: 0, timeout: 20_000 });

  t.test('a 10-per-minute key gets exactly 10 successes out of 30 requests over both replicas', async (t) => {
    const calls = Array.from({ length: 30 }, (_, i) =>
      on(i % 2 ? b : a, KEYS.rpm)
        .chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: `hi ${i}` }] })
        .withResponse()
        .then(
          (r) => ({ status: r.response.status, remaining: r.response.headers.get('x-ratelimit-remaining-requests') }),
          (e: APIError) => ({ status: e.status, code: (e.error as { code?: string })?.code, retry: e.headers?.get('retry-after') }),
        ),
    );
    const out = await Promise.all(calls);
    t.equal(out.filter((o) => o.status === 200).length, 10, '10 served');
    t.equal(out.filter((o) => o.status === 429).length, 20, '20 refused');
    t.same(out.filter((o) => o.status === 200).map((o) => Number((o as { remaining: string }).remaining)).sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'one shared count');
    for (const o of out.filter((o) => o.status === 429)) t.match(o, { code: 'rate_limit_exceeded', retry: /^\d+$/ });
  });

  t.test('a budget holds across replicas under 50 concurrent requests', async (t) => {
    // Each request reserves its input (bytes / 4) and max_tokens at x/priced's prices,
    // about $0.0011, and costs about $0.0010: within $0.01, 9 fit at most.
    const content = 'x'.repeat(400);
    const calls = Array.from({ length: 50 }, (_, i) =>
      on(i % 2 ? b : a, KEYS.budget)
        .chat.completions.create({ model: 'x/priced', messages: [{ role: 'user', content }], max_tokens: 110 })
        .then(
          (r) => ({ status: 200, cost: (r.usage!.prompt_tokens * 2 + r.usage!.completion_tokens * 8) / 1e6, completion: r.usage!.completion_tokens }),
          (e: APIError) => ({ status: e.status, code: (e.error as { code?: string })?.code, cost: 0, completion: 0 }),
        ),
    );
    const out = await Promise.all(calls);
    const served = out.filter((o) => o.status === 200);
    const spent = served.reduce((s, o) => s + o.cost, 0);
    t.ok(served.every((o) => o.completion <= 110), 'every answer within its max_tokens: the reservation covers it (no overshoot)');
    t.ok(served.length >= 1 && served.length <= 9, `${served.length} served`);
    t.ok(spent <= 0.01, `spent $${spent.toFixed(6)} of $0.01`);
    t.ok(out.filter((o) => o.status !== 200).every((o) => o.status === 429 && (o as { code?: string }).code === 'insufficient_quota'), 'the others: 429 insufficient_quota');
    // Settled in Redis: what the replicas counted is what the answers cost (rounded up to the micro-dollar).
    const day = new Date().toISOString().slice(0, 10);
    const bd = `${prefix}lim:{budget}:bd:${day}`;
    await untilAsync(async () => Number(await admin.hget(bd, 'res')) === 0);
    const counted = Number(await admin.hget(bd, 'spent')) / 1e6;
    t.ok(Math.abs(counted - spent) <= served.length * 1e-6, `Redis counted $${counted}`);
    t.equal(Number(await admin.hget(bd, 'res')), 0, 'no reservation left');
  });

  t.test('a busy key is admitted from grants on both replicas, and Redis ends with the exact counts', async (t) => {
    const metric = async (g: { url: string }) => {
      const text = await (await fetch(`${g.url}/metrics`)).text();
      return Number(/^gateway_key_limit_admissions_total\{by="grant"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    const before = (await metric(a)) + (await metric(b));
    const content = 'y'.repeat(200);
    let tokens = 0;
    let cost = 0;
    let served = 0;
    const worker = async (g: { baseURL: string }) => {
      for (let i = 0; i < 60; i++) {
        const { data, response } = await on(g, KEYS.busy)
          .chat.completions.create({ model: 'x/priced', messages: [{ role: 'user', content }], max_tokens: 50 })
          .withResponse();
        t.equal(response.headers.get('x-ratelimit-limit-requests'), '100000');
        tokens += data.usage!.prompt_tokens + data.usage!.completion_tokens;
        cost += Math.ceil(((data.usage!.prompt_tokens * 2 + data.usage!.completion_tokens * 8) / 1e6) * 1e6 - 1e-6);
        served++;
      }
    };
    await Promise.all([a, b, a, b, a, b].map(worker));
    t.equal(served, 360, 'every request served');
    const fromGrants = (await metric(a)) + (await metric(b)) - before;
    t.ok(fromGrants > 180, `${fromGrants} of 360 admitted from grants`);
    // Once the grants close (a second after their last use), Redis holds the exact counts.
    const day = new Date().toISOString().slice(0, 10);
    const win = `${prefix}lim:{busy}:win`;
    const bd = `${prefix}lim:{busy}:bd:${day}`;
    await untilAsync(async () => (await admin.hget(win, 'req')) === '360' && Number(await admin.hget(bd, 'res')) === 0, 5000);
    t.match(await admin.hgetall(win), { req: '360', used: String(tokens), res: '0' }, 'requests and tokens');
    t.equal(Number(await admin.hget(bd, 'spent')), cost, 'spend, to the micro-dollar');
  });

  t.test('a cool-down opened by one replica is honoured by the other', async (t) => {
    broken.reset();
    oai.reset();
    // Replica A tries the broken deployment first: it fails, and (failure_threshold 1) cools down.
    await on(a, KEYS.cool).chat.completions.create({ model: 'x/cool', messages: [{ role: 'user', content: 'hi' }] }).catch(() => {});
    t.equal(broken.requests.length, 1);
    await untilAsync(async () => (await admin.hlen(`${prefix}cooldowns`)) === 1);
    // Replica B, which never saw the failure, goes straight to the other deployment.
    const r = await on(b, KEYS.cool).chat.completions.create({ model: 'x/cool', messages: [{ role: 'user', content: 'hi' }] });
    t.match(r.choices[0].message.content, /Echo: hi/);
    t.equal(broken.requests.length, 1, 'B sent nothing to the deployment A cooled');
  });

  t.test('a Gemini cached content created through one replica is reused by the other', async (t) => {
    gem.reset();
    const manual = 'Shared reference manual. '.repeat(300); // above Gemini's 1,024-token minimum
    const ask = (g: { baseURL: string }, q: string) =>
      on(g, KEYS.cool).chat.completions.create({
        model: 'google/gemini-2.5-flash',
        messages: [
          { role: 'system', content: manual, cache_control: { type: 'ephemeral', ttl: '300s' } },
          { role: 'user', content: q },
        ],
      } as never);
    t.match((await ask(a, 'first')).choices[0].message.content, /Echo: first/);
    t.match((await ask(b, 'second')).choices[0].message.content, /Echo: second/);
    const creates = gem.requests.filter((r) => r.path === '/v1beta/cachedContents');
    t.equal(creates.length, 1, 'one cached content for both replicas');
    const used = gem.requests.filter((r) => r.path.endsWith(':generateContent')).map((r) => r.body.cachedContent);
    t.equal(used.length, 2);
    t.ok(used[0] && used[0] === used[1], `both generate calls use ${used[0]}`);
  });

  t.test('a key created on one replica works on the other; revoked on one, it fails on the other within two seconds', async (t) => {
    const admin = (g: { url: string }, method: string, p: string, body?: unknown) =>
      fetch(`${g.url}${p}`, { method, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    const made = await admin(a, 'POST', '/admin/keys', { name: 'roaming', rpm: 100 });
    t.equal(made.status, 201);
    const { key } = (await made.json()) as { key: string };
    const status = (g: { baseURL: string }) =>
      on(g, key)
        .chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] })
        .then(
          () => 200,
          (e: APIError) => e.status,
        );
    await untilAsync(async () => (await status(b)) === 200);
    t.pass('B accepts the key A created');
    t.equal((await admin(a, 'DELETE', '/admin/keys/roaming')).status, 200);
    await untilAsync(async () => (await status(b)) === 401, 2000);
    t.pass('B refuses it within two seconds of the revoke on A');
    t.equal(await status(a), 401);
  });

  t.test('Redis stopped mid-run: 503 when closed, served unlimited when open, never a hang; limits back with Redis', async (t) => {
    if (spawnSync('redis-server', ['--version']).status !== 0) {
      t.comment('skipped: redis-server is not installed (this test runs a Redis of its own, to stop and restart it)');
      t.pass('skipped: no redis-server');
      return;
    }
    const port = await freePort();
    let server: ChildProcess | undefined;
    const startRedis = async () => {
      server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      await untilAsync(() => reachable(`redis://127.0.0.1:${port}`));
    };
    await startRedis();
    t.teardown(() => void server?.kill('SIGKILL'));
    const conf = (mode: string) => `
state: { redis_url: "redis://127.0.0.1:${port}", on_unavailable: ${mode}, timeout_ms: 200, grant_ms: 100, key_prefix: "${prefix}own:" }
keys:
  - { name: own, sha256: ${sha(KEYS.rpm)}, rpm: 1000 }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 3000 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`;
    const closed = await startGateway(conf('closed'));
    const open = await startGateway(conf('open'));
    t.teardown(() => Promise.all([closed.close(), open.close()]));
    const ask = (g: { baseURL: string }) =>
      on(g, KEYS.rpm)
        .chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] })
        .withResponse()
        .then(
          (r) => ({ status: r.response.status, limit: r.response.headers.get('x-ratelimit-limit-requests'), code: undefined as string | undefined }),
          (e: APIError) => ({ status: e.status, limit: null, code: (e.error as { code?: string })?.code }),
        );
    t.match(await ask(closed), { status: 200, limit: '1000' });
    t.match(await ask(open), { status: 200, limit: '1000' });

    server!.kill('SIGKILL');
    await new Promise((r) => server!.once('exit', r));
    await until(() => closed.logs.some((l) => l.msg === 'redis: connection lost; reconnecting'));
    // What a replica was granted before Redis went away admits for grant_ms at most; then on_unavailable applies.
    await new Promise((r) => setTimeout(r, 150));
    t.match(await ask(closed), { status: 503, code: 'state_unavailable' }, 'closed: 503 at once');
    t.match(await ask(open), { status: 200, limit: null }, 'open: served, without limits');
    t.ok(open.logs.some((l) => l.msg === 'shared state unavailable: rate limits and budgets cannot be checked' && l.on_unavailable === 'open'), 'open: a warning');

    await startRedis();
    await untilAsync(async () => (await ask(closed)).status === 200, 10_000);
    t.match(await ask(open), { status: 200, limit: '1000' }, 'limits back');
    const metrics = await (await fetch(`${open.url}/metrics`)).text();
    t.match(metrics, /^gateway_state_unavailable_total 1$/m, 'open: the request served without limits is counted');
  });

  t.test('a settlement Redis missed is retried and counted once: the slot and the tokens come back', async (t) => {
    if (spawnSync('redis-server', ['--version']).status !== 0) {
      t.comment('skipped: redis-server is not installed (this test runs a Redis of its own, to pause it)');
      t.pass('skipped: no redis-server');
      return;
    }
    const port = await freePort();
    const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    t.teardown(() => void server.kill('SIGKILL'));
    const url = `redis://127.0.0.1:${port}`;
    await untilAsync(() => reachable(url));
    const own = new Redis(url);
    t.teardown(() => own.disconnect());
    const g = await startGateway(`
state: { redis_url: "${url}", timeout_ms: 200, key_prefix: "p:" }
keys:
  - { name: one, sha256: ${sha(KEYS.rpm)}, max_parallel: 1, tpm: 100000 }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY}, retries: 0, timeout_ms: 3000 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`);
    t.teardown(() => g.close());
    const ask = (signal?: AbortSignal) =>
      on(g, KEYS.rpm)
        .chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1000 }, { signal })
        .then(
          () => 200,
          (e: APIError) => e.status,
        );
    oai.reset();
    oai.fail({ hang: true });
    const ac = new AbortController();
    const held = ask(ac.signal);
    await until(() => oai.requests.length === 1);
    t.equal(await ask(), 429, 'the one slot is taken');
    t.ok(Number(await own.hget('p:lim:{one}:win', 'res')) > 1000, 'its tokens reserved');
    // Redis stops answering (paused) while the request ends: the settlement times out on the
    // gateway, but Redis runs it once the pause ends, and the gateway sends it again.
    await own.call('CLIENT', 'PAUSE', '1500', 'ALL');
    ac.abort();
    await held;
    await until(() => g.logs.some((l) => l.msg === 'could not settle a reservation'));
    await until(() => g.logs.some((l) => l.msg === 'redis: settled reservations that had waited for it'), 10_000);
    t.equal(await own.hget('p:lim:{one}:win', 'res'), '0', 'released once: no reservation left, none released twice');
    t.equal(await own.zcard('p:lim:{one}:par'), 0, 'the slot is free');
    oai.reset();
    t.equal(await ask(), 200);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
