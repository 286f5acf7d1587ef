// The Redis limit store on its own (src/state/redis.ts): the admissions and
// settlements of one turn go to Redis in one call per key, and that batching
// keeps limits exact and settlements counted once (docs/keys.md#shared-state).
// The HTTP behaviour across two replicas is in shared-state.test.ts. Skipped,
// saying so, where no Redis runs.
import t from 'tap';
import { Redis } from 'ioredis';
import pino from 'pino';
import { RedisLimits, connect } from '../src/state/redis.js';
import type { KeyLimits } from '../src/config/load.js';
import type { AdmitResult, Reservation } from '../src/limits.js';
import { redisReachable } from './helpers/process.js';
import { dropRedisKeys } from '../bench/processes.js';

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

if (!(await redisReachable(REDIS))) {
  t.comment(`skipped: no Redis answers at ${REDIS} (set TEST_REDIS_URL, or start one: .ci/run does)`);
  t.pass('skipped: no Redis');
  t.end();
} else {
  await run();
}

async function run() {
  const prefix = `mgtest-rl:${process.pid}:${Date.now()}:`;
  const admin = new Redis(REDIS);
  const log = pino({ level: 'silent' });
  const redis = connect({ url: REDIS, prefix, timeoutMs: 2000 }, log, 'commands');
  await new Promise((r) => (redis.status === 'ready' ? r(undefined) : redis.once('ready', r)));
  const store = new RedisLimits(redis, prefix, log);
  t.teardown(async () => {
    await store.close();
    redis.disconnect();
    await dropRedisKeys(REDIS, prefix);
    admin.disconnect();
  });
  const evalshaCalls = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
  const admitted = (r: AdmitResult): Reservation => {
    if (!r.ok) throw new Error(`refused: ${r.reason}`);
    return r.reservation;
  };
  const day = new Date().toISOString().slice(0, 10);

  t.test('50 concurrent admissions on one replica against 10 a minute: exactly 10, in few calls', async (t) => {
    const limits = { rpm: 10 } as KeyLimits;
    const before = await evalshaCalls();
    const out = await Promise.all(Array.from({ length: 50 }, (_, i) => store.admit({ key: 'rpm', id: `r${i}`, limits, estimate: { tokens: 0, micros: 0 } })));
    const calls = (await evalshaCalls()) - before;
    t.equal(out.filter((o) => o.ok).length, 10, '10 admitted');
    t.ok(out.slice(10).every((o) => !o.ok && o.reason === 'requests'), 'the 40 after them refused for requests');
    t.same(
      out.slice(0, 10).map((o) => o.view.requests),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      'each decided against the count the one before left',
    );
    t.ok(calls < 50, `${calls} script calls for 50 admissions (one per key and turn)`);
    t.equal(await admin.hget(`${prefix}lim:{rpm}:win`, 'req'), '10', 'Redis counted 10');
  });

  t.test('a budget and tokens per minute in one call: admissions see the reservations before them', async (t) => {
    const limits = { tpm: 1000, budget_usd: 0.005, budget_period: 'day' } as KeyLimits;
    const out = await Promise.all(Array.from({ length: 12 }, (_, i) => store.admit({ key: 'mix', id: `m${i}`, limits, estimate: { tokens: 100, micros: 1000 } })));
    t.same(
      out.map((o) => (o.ok ? 'ok' : o.reason)),
      ['ok', 'ok', 'ok', 'ok', 'ok', 'budget', 'budget', 'budget', 'budget', 'budget', 'budget', 'budget'],
      '$0.005 holds 5 reservations of $0.001',
    );
    t.equal(await admin.hget(`${prefix}lim:{mix}:bd:${day}`, 'res'), '5000');
    t.equal(await admin.hget(`${prefix}lim:{mix}:win`, 'res'), '500');
    // Settled with what they used, the settlements and new admissions of one turn in one call, in order.
    const reservations = out.filter((o) => o.ok).map(admitted);
    const [, , , , , again] = await Promise.all([
      ...reservations.map((r) => store.settle(r, { tokens: 80, micros: 600 })),
      store.admit({ key: 'mix', id: 'm-after', limits, estimate: { tokens: 100, micros: 1000 } }),
    ]);
    t.match(again, { ok: true }, 'admitted after the settlements sent before it in the same turn');
    t.equal(await admin.hget(`${prefix}lim:{mix}:bd:${day}`, 'spent'), '3000', 'spent: what they used');
    t.equal(await admin.hget(`${prefix}lim:{mix}:bd:${day}`, 'res'), '1000', 'reserved: the one admitted after');
    t.equal(await admin.hget(`${prefix}lim:{mix}:win`, 'used'), '400');
    // Expiries are set when the keys are created, not at every call: each has one.
    for (const k of [`lim:{mix}:win`, `lim:{mix}:bd:${day}`, `lim:{mix}:bdh:${day}`]) t.ok((await admin.pttl(prefix + k)) > 0, `${k} expires`);
  });

  t.test('a settlement sent again counts once, whatever the key holds', async (t) => {
    const cases: [string, KeyLimits][] = [
      ['budget', { budget_usd: 1, budget_period: 'day' } as KeyLimits],
      ['slot', { max_parallel: 2, tpm: 10_000 } as KeyLimits],
      ['tokens', { tpm: 10_000 } as KeyLimits],
    ];
    for (const [key, limits] of cases) {
      const r = admitted(await store.admit({ key, id: `${key}-1`, limits, estimate: { tokens: 100, micros: 500 } }));
      await store.settle(r, { tokens: 70, micros: 300 });
      await Promise.all([store.settle(r, { tokens: 70, micros: 300 }), store.settle(r, { tokens: 70, micros: 300 })]);
      await store.settle(r, { tokens: 70, micros: 300 });
      const win = await admin.hgetall(`${prefix}lim:{${key}}:win`);
      t.match(win, { res: '0', used: '70' }, `${key}: tokens settled once`);
      if (limits.budget_usd !== undefined) t.match(await admin.hgetall(`${prefix}lim:{${key}}:bd:${day}`), { spent: '300', res: '0' }, `${key}: spend counted once`);
      if (limits.max_parallel !== undefined) t.equal(await admin.zcard(`${prefix}lim:{${key}}:par`), 0, `${key}: slot free`);
    }
  });

  t.test('a hold whose lease ran out is released; its late settlement still counts its spend, once', async (t) => {
    const limits = { budget_usd: 0.002, budget_period: 'day' } as KeyLimits;
    const r = admitted(await store.admit({ key: 'lease', id: 'l1', limits, estimate: { tokens: 10, micros: 2000 } }));
    t.match(await store.admit({ key: 'lease', id: 'l2', limits, estimate: { tokens: 10, micros: 2000 } }), { ok: false, reason: 'budget' }, 'the budget is reserved');
    // The replica that admitted it "died": its lease ends (moved into the past).
    await admin.zadd(`${prefix}lim:{lease}:bdh:${day}`, 'XX', 1, `l1:2000`);
    const next = admitted(await store.admit({ key: 'lease', id: 'l3', limits, estimate: { tokens: 10, micros: 1000 } }));
    t.equal(await admin.hget(`${prefix}lim:{lease}:bd:${day}`, 'res'), '1000', 'the lapsed hold released, the new one held');
    await store.settle(r, { tokens: 10, micros: 800 });
    await store.settle(r, { tokens: 10, micros: 800 });
    t.match(await admin.hgetall(`${prefix}lim:{lease}:bd:${day}`), { spent: '800', res: '1000' }, 'spend counted once, the reservation not released twice');
    await store.settle(next, { tokens: 10, micros: 900 });
    t.match(await admin.hgetall(`${prefix}lim:{lease}:bd:${day}`), { spent: '1700', res: '0' });
  });

  t.test('a settlement lost to a Redis outage is retried and not applied twice', async (t) => {
    // Its own connection with a short timeout, so that a pause of Redis makes the settlement fail here while Redis still runs it later.
    const short = connect({ url: REDIS, prefix, timeoutMs: 100 }, log, 'commands');
    await new Promise((r) => (short.status === 'ready' ? r(undefined) : short.once('ready', r)));
    const logs: string[] = [];
    const capture = pino({ level: 'info' }, { write: (l: string) => void logs.push(JSON.parse(l).msg) });
    const s2 = new RedisLimits(short, prefix, capture);
    t.teardown(async () => {
      await s2.close();
      short.disconnect();
    });
    const limits = { budget_usd: 1, budget_period: 'day', tpm: 100_000 } as KeyLimits;
    const r = admitted(await s2.admit({ key: 'outage', id: 'o1', limits, estimate: { tokens: 1000, micros: 5000 } }));
    await admin.call('CLIENT', 'PAUSE', '600', 'WRITE');
    await t.rejects(s2.settle(r, { tokens: 400, micros: 2500 }), 'the settlement times out');
    // After the pause Redis runs the settlement it had received, and the store sends it again.
    const end = Date.now() + 10_000;
    while (!logs.includes('redis: settled reservations that had waited for it') && Date.now() < end) await new Promise((res) => setTimeout(res, 50));
    t.ok(logs.includes('redis: settled reservations that had waited for it'), 'retried');
    t.match(await admin.hgetall(`${prefix}lim:{outage}:bd:${day}`), { spent: '2500', res: '0' }, 'spend once');
    t.match(await admin.hgetall(`${prefix}lim:{outage}:win`), { used: '400', res: '0' }, 'tokens once');
  });
}
