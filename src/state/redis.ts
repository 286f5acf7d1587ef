// State shared by the replicas through Redis (state.redis_url): key limits and
// budgets (Lua scripts, so that admission and settlement are atomic whichever
// replica runs them, timed by Redis's clock) and deployment cool-downs
// (published to every replica, whose local view the hot path reads).
//
// Every command is bounded by state.timeout_ms and none waits for a
// connection (no offline queue): an unreachable Redis fails at once, and the
// limiter applies state.on_unavailable. ioredis reconnects on its own.
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { budgetPeriod, LEASE_MS, WINDOW_MS, toMicros, type AdmitRequest, type AdmitResult, type Estimate, type LimitStore, type Reservation, type Rejection } from '../limits.js';
import type { MemoryHealth } from '../dispatch.js';
import type { KeyBus } from '../keys.js';
import type { ReplicaStore } from '../plugin.js';
import type { ProviderConfig } from '../config/schema.js';

// KEYS: window hash, in-flight zset, budget hash, budget holds zset.
// ARGV: rpm, tpm, max_parallel, budget (micro-USD), tokens, micros, id, lease ms, budget ttl ms, window ms (0 or -1: no such limit).
const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rpm, tpm, maxpar, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tok, usd, id, lease, bttl, win = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local w = redis.call('HMGET', KEYS[1], 'start', 'req', 'used', 'res')
local start, req, used, res = tonumber(w[1]), tonumber(w[2]) or 0, tonumber(w[3]) or 0, tonumber(w[4]) or 0
if (not start) or start + win <= now then start, req, used, res = now, 0, 0, 0 end
local reset = start + win - now
if tpm > 0 and tok > tpm then tok = tpm end
if rpm > 0 and req + 1 > rpm then return {0, 'requests', reset, req, used + res, start} end
if tpm > 0 and used + res + tok > tpm then return {0, 'tokens', reset, req, used + res, start} end
if maxpar > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= maxpar then return {0, 'parallel', 1000, req, used + res, start} end
end
if budget >= 0 then
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  if #gone > 0 then
    local sum = 0
    for _, m in ipairs(gone) do sum = sum + tonumber(string.match(m, ':(%d+)$')) end
    redis.call('HINCRBY', KEYS[3], 'res', -sum)
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  end
  local b = redis.call('HMGET', KEYS[3], 'spent', 'res')
  local spent, bres = tonumber(b[1]) or 0, tonumber(b[2]) or 0
  if usd > budget then usd = budget end
  if spent >= budget or spent + bres + usd > budget then return {0, 'budget', 0, req, used + res, start} end
  redis.call('HINCRBY', KEYS[3], 'res', usd)
  redis.call('ZADD', KEYS[4], now + lease, id .. ':' .. usd)
  redis.call('PEXPIRE', KEYS[3], bttl)
  redis.call('PEXPIRE', KEYS[4], bttl)
else
  usd = 0
end
redis.call('HSET', KEYS[1], 'start', start, 'req', req + 1, 'used', used, 'res', res + tok)
redis.call('PEXPIRE', KEYS[1], win * 2)
if maxpar > 0 then
  redis.call('ZADD', KEYS[2], now + lease, id)
  redis.call('PEXPIRE', KEYS[2], lease)
end
return {1, '', reset, req + 1, used + res + tok, start, tok, usd}
`;

// KEYS: window hash, in-flight zset, budget hash ('' without a budget), budget holds zset, then one settled marker per settlement.
// ARGV: marker ttl ms, budget ttl ms, then per settlement: id, window start, reserved tokens, actual tokens, reserved micros, actual micros.
// Several settlements of one key (and budget period) in one call. A marker makes a settlement count once,
// however often it is retried; the number counted now is returned.
const SETTLE = `
local mttl, bttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local done = 0
for i = 5, #KEYS do
  local a = 3 + (i - 5) * 6
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', mttl) then
    done = done + 1
    local id = ARGV[a]
    if redis.call('HGET', KEYS[1], 'start') == ARGV[a + 1] then
      redis.call('HINCRBY', KEYS[1], 'res', -tonumber(ARGV[a + 2]))
      redis.call('HINCRBY', KEYS[1], 'used', tonumber(ARGV[a + 3]))
    end
    redis.call('ZREM', KEYS[2], id)
    if KEYS[3] ~= '' then
      if redis.call('ZREM', KEYS[4], id .. ':' .. ARGV[a + 4]) == 1 then redis.call('HINCRBY', KEYS[3], 'res', -tonumber(ARGV[a + 4])) end
      local spent = tonumber(ARGV[a + 5])
      if spent > 0 then
        redis.call('HINCRBY', KEYS[3], 'spent', spent)
        redis.call('PEXPIRE', KEYS[3], bttl)
      end
    end
  end
end
return done
`;

type Scripted = Redis & {
  gwAdmit(k1: string, k2: string, k3: string, k4: string, ...args: (string | number)[]): Promise<[number, string, number, number, number, number, number?, number?]>;
  /** numkeys, then the keys and the arguments (SETTLE). */
  gwSettle(...args: (string | number)[]): Promise<number>;
};

export interface RedisOptions {
  url: string;
  prefix: string;
  timeoutMs: number;
}

/** A Redis connection as the gateway uses it: bounded commands, no offline queue, reconnects forever. */
export function connect(o: RedisOptions, logger: Logger, role: string): Redis {
  const r = new Redis(o.url, {
    commandTimeout: o.timeoutMs,
    connectTimeout: Math.max(1000, o.timeoutMs),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(100 * times, 2000),
    lazyConnect: false,
  });
  let down = false;
  r.on('error', (err: Error) => {
    if (!down) logger.warn({ err: err.message, role }, 'redis: connection lost; reconnecting');
    down = true;
  });
  r.on('ready', () => {
    if (down) logger.info({ role }, 'redis: connected again');
    down = false;
  });
  return r;
}

/** Period budgets expire a while after their period (a month and two days covers the longest). */
const BUDGET_TTL_MS = 33 * 24 * 3600_000;
const SETTLED_TTL_MS = 2 * LEASE_MS;
const PENDING_MAX = 10_000;

/** Settlements per SETTLE call. */
const SETTLE_BATCH = 200;

/** A key's settlements in calls of at most SETTLE_BATCH. */
const chunks = (list: Settlement[]): Settlement[][] => Array.from({ length: Math.ceil(list.length / SETTLE_BATCH) }, (_, i) => list.slice(i * SETTLE_BATCH, (i + 1) * SETTLE_BATCH));

interface Settlement {
  res: Reservation;
  actual: Estimate;
  done?: { resolve(): void; reject(err: Error): void };
}

export class RedisLimits implements LimitStore {
  private r: Scripted;
  /** Settlements of this turn of the event loop, by key and budget period: sent together at its end. */
  private queued = new Map<string, Settlement[]>();
  private flushing = false;
  /** Whether the connection's socket is corked until the end of this turn (batch()). */
  private corked = false;
  /** Settlements that failed (Redis down or slow): retried, counted once thanks to their marker. */
  private pending: Settlement[] = [];
  private retry: NodeJS.Timeout;
  constructor(
    redis: Redis,
    private prefix: string,
    private logger: Logger,
  ) {
    this.r = redis as Scripted;
    this.r.defineCommand('gwAdmit', { numberOfKeys: 4, lua: ADMIT });
    this.r.defineCommand('gwSettle', { lua: SETTLE });
    this.retry = setInterval(() => void this.flush(), 1000);
    this.retry.unref();
  }

  private keys(key: string, period?: string): [string, string, string, string] {
    // One hash tag per key: a Redis Cluster keeps a key's counters on one node.
    const k = `${this.prefix}lim:{${key}}`;
    return [`${k}:win`, `${k}:par`, period ? `${k}:bd:${period}` : '', period ? `${k}:bdh:${period}` : ''];
  }

  /**
   * Commands issued from now to the end of this turn of the event loop leave
   * in one write: under load, the admissions and settlements of many requests
   * share a system call (on loopback and in containers a write to Redis costs
   * the sender the whole TCP path), instead of one each. Nothing waits longer
   * than this turn, and each command keeps its own timeout.
   */
  private batch(): void {
    const stream = (this.r as unknown as { stream?: { writable?: boolean; cork(): void; uncork(): void } }).stream;
    if (this.corked || !stream?.writable || this.r.status !== 'ready') return;
    this.corked = true;
    stream.cork();
    setImmediate(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  async admit({ key, id, limits, estimate }: AdmitRequest): Promise<AdmitResult> {
    const period = limits.budget_usd !== undefined ? budgetPeriod(limits.budget_period, Date.now()) : undefined;
    const [win, par, bd, bdh] = this.keys(key, period?.id);
    this.batch();
    const out = await this.r.gwAdmit(
      win,
      par,
      bd || `${win}:nobd`,
      bdh || `${win}:nobdh`,
      limits.rpm ?? 0,
      limits.tpm ?? 0,
      limits.max_parallel ?? 0,
      limits.budget_usd !== undefined ? toMicros(limits.budget_usd) : -1,
      estimate.tokens,
      estimate.micros,
      id,
      LEASE_MS,
      BUDGET_TTL_MS,
      WINDOW_MS,
    );
    const [ok, reason, reset, requests, tokens, start] = out;
    const view = { requests, tokens, resetMs: reset };
    if (ok !== 1) return { ok: false, reason: reason as Rejection, retryAfterMs: reason === 'budget' && period ? period.endsAt - Date.now() : reset, view };
    return { ok: true, view, reservation: { key, id, window: start, tokens: out[6] ?? 0, micros: out[7] ?? 0, period: period?.id, parallel: limits.max_parallel !== undefined } };
  }

  /**
   * Settled at the end of this turn of the event loop, with the other
   * settlements of the turn: one script call per key (and budget period), in
   * one write. A settlement that fails waits in `pending` (retried every
   * second) and rejects.
   */
  settle(res: Reservation, actual: Estimate): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const group = `${res.key}\n${res.period ?? ''}`;
      const list = this.queued.get(group);
      const s = { res, actual, done: { resolve, reject } };
      if (list) list.push(s);
      else this.queued.set(group, [s]);
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => this.sendQueued());
      }
    });
  }

  private sendQueued(): Promise<unknown> {
    this.flushing = false;
    const groups = [...this.queued.values()];
    this.queued.clear();
    this.batch();
    const sent: Promise<void>[] = [];
    for (const part of groups.flatMap(chunks))
      sent.push(
        this.settleNow(part).then(
          () => part.forEach((s) => s.done?.resolve()),
          (err: Error) => {
            for (const s of part) {
              if (this.pending.length < PENDING_MAX) this.pending.push({ res: s.res, actual: s.actual });
              s.done?.reject(err);
            }
          },
        ),
      );
    return Promise.all(sent);
  }

  /** One SETTLE call for settlements of one key and budget period. */
  private settleNow(list: Settlement[]): Promise<number> {
    const { key, period } = list[0].res;
    const [win, par, bd, bdh] = this.keys(key, period);
    const markers = list.map((s) => `${this.prefix}settled:{${key}}:${s.res.id}`);
    const args: (string | number)[] = [4 + list.length, win, par, bd, bdh || `${win}:nobdh`, ...markers, SETTLED_TTL_MS, BUDGET_TTL_MS];
    for (const { res, actual } of list) args.push(res.id, res.window, res.tokens, actual.tokens, res.micros, actual.micros);
    return this.r.gwSettle(...args);
  }

  /** Send the settlements that failed again, grouped as settle() does. */
  private async flush(): Promise<void> {
    if (!this.pending.length || this.r.status !== 'ready') return;
    const batch = this.pending.splice(0, 500);
    const groups = new Map<string, Settlement[]>();
    for (const s of batch) {
      const g = `${s.res.key}\n${s.res.period ?? ''}`;
      groups.set(g, [...(groups.get(g) ?? []), s]);
    }
    const left = [...groups.values()].flatMap(chunks);
    while (left.length) {
      try {
        await this.settleNow(left[0]);
        left.shift();
      } catch {
        this.pending.push(...left.flat());
        return;
      }
    }
    this.logger.info({ settled: batch.length }, 'redis: settled reservations that had waited for it');
  }

  async close(): Promise<void> {
    clearInterval(this.retry);
    if (this.queued.size) await this.sendQueued();
    await this.flush().catch(() => {});
  }
}

/**
 * Cool-downs shared through Redis: one opened here is written to a hash (with
 * its end) and published; every replica applies what it hears, and reads the
 * hash again whenever its subscription (re)connects, so one that was away
 * catches up. isCooling() stays a local read.
 */
export function shareHealth(health: MemoryHealth, redis: Redis, sub: Redis, prefix: string, logger: Logger): void {
  const hashKey = `${prefix}cooldowns`;
  const channel = `${prefix}cooldown`;
  health.onOpen = (key, until) => {
    redis
      .multi()
      .hset(hashKey, key, String(until))
      .pexpire(hashKey, 24 * 3600_000)
      .publish(channel, `${until}\t${key}`)
      .exec()
      .catch((err: Error) => logger.warn({ err: err.message }, 'redis: could not share a cool-down'));
  };
  sub.on('message', (ch: string, msg: string) => {
    if (ch !== channel) return;
    const tab = msg.indexOf('\t');
    if (tab > 0) health.apply(msg.slice(tab + 1), Number(msg.slice(0, tab)));
  });
  const catchUp = () =>
    redis
      .hgetall(hashKey)
      .then((all) => {
        for (const [k, until] of Object.entries(all)) health.apply(k, Number(until));
      })
      .catch(() => {});
  sub.on('ready', () => {
    sub.subscribe(channel).catch(() => {});
    void catchUp();
  });
  redis.on('ready', () => void catchUp());
}

/** Each provider block's strings shared by the replicas (ProviderCall.replicas), under `<prefix>shared:<provider>:`. */
export function replicaStores(redis: Redis, prefix: string): { of(p: ProviderConfig): ReplicaStore } {
  const stores = new Map<string, ReplicaStore>();
  return {
    of(p) {
      let s = stores.get(p.name);
      if (!s) {
        const ns = `${prefix}shared:${p.name}:`;
        s = {
          get: async (k) => (await redis.get(ns + k)) ?? undefined,
          set: async (k, val, ttlMs) => {
            if (ttlMs > 0) await redis.set(ns + k, val, 'PX', Math.ceil(ttlMs));
          },
          delete: async (k) => {
            await redis.del(ns + k);
          },
        };
        stores.set(p.name, s);
      }
      return s;
    },
  };
}

/** Key changes (created, revoked) published to every replica (src/keys.ts). */
export function keyBus(redis: Redis, sub: Redis, prefix: string, logger: Logger): KeyBus {
  const channel = `${prefix}keys`;
  const listeners: ((msg: string) => void)[] = [];
  sub.on('message', (ch: string, msg: string) => {
    if (ch === channel) for (const l of listeners) l(msg);
  });
  const join = () => void sub.subscribe(channel).catch(() => {});
  sub.on('ready', join);
  if (sub.status === 'ready') join();
  return {
    publish(msg) {
      redis.publish(channel, msg).catch((err: Error) => logger.warn({ err: err.message }, 'redis: could not publish a key change (replicas see it at their next poll)'));
    },
    subscribe(l) {
      listeners.push(l);
    },
  };
}
