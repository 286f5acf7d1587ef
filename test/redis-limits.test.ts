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

  // Grants (state.grant_ms): a busy key's requests admitted from a share this replica holds.
  const granted = (ms: number) => {
    const s = new RedisLimits(redis, prefix, log, ms);
    t.teardown(() => s.close());
    return s;
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const win = async (key: string) => admin.hgetall(`${prefix}lim:{${key}}:win`);

  t.test('grants: after the first requests Redis admits none; the close gives back the unused and settles the used', async (t) => {
    const s = granted(200);
    const limits = { rpm: 100_000, tpm: 100_000_000, budget_usd: 100, budget_period: 'day' } as KeyLimits;
    const est = { tokens: 100, micros: 50 };
    const first = admitted(await s.admit({ key: 'gr', id: 'g0', limits, estimate: est }));
    t.notOk(first.grant, 'the first request is admitted by Redis, and takes no grant (one request says nothing of a rate)');
    await sleep(20);
    t.equal((await win('gr')).req, '1');
    const second = admitted(await s.admit({ key: 'gr', id: 'g0b', limits, estimate: est }));
    t.notOk(second.grant, 'the second too, and it takes a grant');
    await sleep(20);
    const w0 = await win('gr');
    const n = Number(w0.req) - 2;
    t.ok(n >= 4, `a grant of ${n} requests taken with it`);
    const before = await evalshaCalls();
    const local: Reservation[] = [];
    for (let i = 1; i <= 3; i++) local.push(admitted(await s.admit({ key: 'gr', id: `g${i}`, limits, estimate: est })));
    t.ok(local.every((r) => r.grant), 'the next three from the grant');
    t.equal((await evalshaCalls()) - before, 0, 'no Redis call for them');
    t.equal(await admin.hget(`${prefix}lim:{gr}:win`, 'req'), w0.req, 'Redis counted them in the grant already');
    await s.settle(first, { tokens: 30, micros: 15 });
    await s.settle(second, { tokens: 30, micros: 15 });
    for (const r of local.slice(0, 2)) await s.settle(r, { tokens: 70, micros: 40 });
    await s.settle(local[0]!, { tokens: 70, micros: 40 }); // twice: counts once
    // local[2] is still under way when the grant closes: its reservation stays, as the grant's tail.
    await sleep(450);
    let w = await win('gr');
    t.equal(w.req, '5', 'the unused requests given back: 5 admitted');
    t.equal(w.used, String(60 + 140), 'the settled tokens');
    t.equal(w.res, '100', 'the request under way still reserves its estimate');
    let b = await admin.hgetall(`${prefix}lim:{gr}:bd:${day}`);
    t.match(b, { spent: String(30 + 80), res: '50' }, 'spend settled, the tail held');
    await s.settle(local[2]!, { tokens: 90, micros: 45 });
    await sleep(30);
    w = await win('gr');
    b = await admin.hgetall(`${prefix}lim:{gr}:bd:${day}`);
    t.match(w, { req: '5', used: String(60 + 140 + 90), res: '0' }, 'the tail settled');
    t.match(b, { spent: String(30 + 80 + 45), res: '0' });
    t.equal(await admin.zcard(`${prefix}lim:{gr}:bdh:${day}`), 0, 'no hold left');
  });

  t.test('grants: two replicas near the limit never admit more than it, and all of it once the grants end', async (t) => {
    const a = granted(50);
    const b = granted(50);
    const limits = { rpm: 400 } as KeyLimits;
    let ok = 0;
    let fromGrants = 0;
    let i = 0;
    // Bursts on both, for longer than a grant lives: each burst in one turn of the event loop.
    for (let round = 0; round < 30 && ok < 400; round++) {
      const out = await Promise.all(Array.from({ length: 40 }, () => (i++ % 2 ? a : b).admit({ key: 'near', id: `n${i}`, limits, estimate: { tokens: 0, micros: 0 } })));
      ok += out.filter((o) => o.ok).length;
      fromGrants += out.filter((o) => o.ok && o.reservation.grant).length;
      t.ok(ok <= 400, `never over the limit (${ok})`);
      await sleep(20);
    }
    t.equal(ok, 400, 'the whole limit admitted');
    t.ok(fromGrants > 100, `${fromGrants} of them from grants`);
    await sleep(120);
    t.equal((await win('near')).req, '400', 'Redis counts exactly the admitted');
  });

  t.test('grants: none for a key that sends too few requests to use one', async (t) => {
    const s = granted(100);
    const limits = { rpm: 100_000 } as KeyLimits;
    const out: AdmitResult[] = [];
    for (let k = 0; k < 4; k++) {
      out.push(await s.admit({ key: 'slow', id: `w${k}`, limits, estimate: { tokens: 0, micros: 0 } }));
      await sleep(60);
    }
    t.ok(out.every((o) => o.ok && !o.reservation.grant), 'each admitted by Redis');
    t.equal((await win('slow')).req, '4', 'and nothing reserved beyond them');
  });

  t.test('grants: a small limit is never shared out (each request is Redis\'s)', async (t) => {
    const s = granted(1000);
    const limits = { rpm: 20 } as KeyLimits;
    const out: AdmitResult[] = [];
    for (let k = 0; k < 25; k++) out.push(await s.admit({ key: 'small', id: `s${k}`, limits, estimate: { tokens: 0, micros: 0 } }));
    t.equal(out.filter((o) => o.ok).length, 20);
    t.ok(out.every((o) => !o.ok || !o.reservation.grant), 'no grant: 20 / 16 is under two requests');
  });

  t.test('grants: a reload to 0 closes them and Redis admits every request again', async (t) => {
    const s = granted(5000);
    const limits = { rpm: 100_000 } as KeyLimits;
    admitted(await s.admit({ key: 'off', id: 'o0', limits, estimate: { tokens: 0, micros: 0 } }));
    admitted(await s.admit({ key: 'off', id: 'o0b', limits, estimate: { tokens: 0, micros: 0 } }));
    await sleep(20);
    t.ok(admitted(await s.admit({ key: 'off', id: 'o1', limits, estimate: { tokens: 0, micros: 0 } })).grant, 'from a grant');
    s.configure(0);
    await sleep(20);
    t.equal((await win('off')).req, '3', 'the grant closed: what it did not admit given back');
    t.notOk(admitted(await s.admit({ key: 'off', id: 'o2', limits, estimate: { tokens: 0, micros: 0 } })).grant, 'Redis admits');
  });

  t.test('grants: one Redis makes while they are turned off is given back at once', async (t) => {
    const s = granted(5000);
    const limits = { rpm: 100_000 } as KeyLimits;
    admitted(await s.admit({ key: 'late', id: 'l0', limits, estimate: { tokens: 0, micros: 0 } }));
    const asking = s.admit({ key: 'late', id: 'l1', limits, estimate: { tokens: 0, micros: 0 } }); // takes a grant
    s.configure(0); // before Redis answers
    admitted(await asking);
    await sleep(30);
    t.equal((await win('late')).req, '2', 'nothing held beyond the two requests');
  });
}
