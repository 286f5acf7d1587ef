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

// One call per client key and turn of the event loop (RedisLimits.sendTick):
// that turn's admissions and settlements of the key, applied in order, each
// against the counters as the previous one left them. The key's counters are
// read once, kept in Lua locals and written back once, and expiries are set
// when a key is created (a new window, a new period's budget, an empty holds
// zset given its first hold), so an operation costs Redis the command or two of its own
// (its hold, its in-flight slot) and the gateway a share of one command.
//
// A settlement counts once however often it is retried: it applies only if it
// removes what its admission left, its budget hold (or, when the lease ran
// out first, the note that the hold was reclaimed), else its in-flight slot;
// a reservation with neither (rpm / tpm only) leaves a settled marker. The
// window's tokens are settled only in the window they were reserved in.
//
// KEYS: window hash, in-flight zset, then per budget period named its hash,
// holds zset and reclaimed-holds zset, then the settled markers.
// ARGV: window ms, lease ms, budget ttl ms, marker ttl ms, then one string per
// operation, its fields separated by spaces (one argument each would cost the
// client and Redis nine times the framing), the request id last:
//   admission:  a rpm tpm max_parallel budget-micro-USD tokens micros budget-index 0 id
//   settlement: s window-start reserved-tokens actual-tokens reserved-micros actual-micros budget-index marker-index 0 id
// (0 or -1: no such limit; budget-index: the KEYS index of the budget hash, 0
// without a budget; marker-index: the KEYS index of its marker, -1 when it
// holds an in-flight slot, 0 when neither)
// Returns 7 numbers per admission, in order: outcome (1 admitted; 2 requests,
// 3 tokens, 4 parallel, 5 budget: refused), reset ms, requests, tokens in the
// window, window start, tokens reserved, micros reserved.
const BATCH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local win, lease, bttl, mttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local w = redis.call('HMGET', KEYS[1], 'start', 'req', 'used', 'res')
local start, req, used, res = tonumber(w[1]), tonumber(w[2]) or 0, tonumber(w[3]) or 0, tonumber(w[4]) or 0
local wdirty, wfresh, pardirty, parswept = false, false, false, false
local budgets = {}
local function budget(i)
  local b = budgets[i]
  if b then return b end
  local gone = redis.call('ZRANGEBYSCORE', KEYS[i + 1], '-inf', now)
  local sum = 0
  if #gone > 0 then
    -- Leases that ran out (a replica that died): released, and noted so that a late settlement still counts its spend once.
    for _, m in ipairs(gone) do
      local id, usd = string.match(m, '^(.*):(%d+)$')
      sum = sum + tonumber(usd)
      redis.call('ZADD', KEYS[i + 2], now + mttl, id)
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[i + 1], '-inf', now)
    redis.call('ZREMRANGEBYSCORE', KEYS[i + 2], '-inf', now)
    redis.call('PEXPIRE', KEYS[i + 2], mttl)
  end
  local v = redis.call('HMGET', KEYS[i], 'spent', 'res')
  b = { spent = tonumber(v[1]) or 0, res = (tonumber(v[2]) or 0) - sum, dirty = sum > 0, created = not v[1] and not v[2], newholds = false }
  budgets[i] = b
  return b
end
local out = {}
for a = 5, #ARGV do
  local kind, f1, f2, f3, f4, f5, f6, f7, f8, id = string.match(ARGV[a], '^(%a) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (.*)$')
  if kind == 'a' then
    local rpm, tpm, maxpar, limit = tonumber(f1), tonumber(f2), tonumber(f3), tonumber(f4)
    local tok, usd, bi = tonumber(f5), tonumber(f6), tonumber(f7)
    if (not start) or start + win <= now then start, req, used, res, wfresh = now, 0, 0, 0, true end
    local reset = start + win - now
    if tpm > 0 and tok > tpm then tok = tpm end
    local code = 1
    if rpm > 0 and req + 1 > rpm then code = 2
    elseif tpm > 0 and used + res + tok > tpm then code = 3
    elseif maxpar > 0 then
      if not parswept then
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        parswept = true
      end
      if redis.call('ZCARD', KEYS[2]) >= maxpar then code, reset = 4, 1000 end
    end
    local b
    if code == 1 and bi > 0 then
      b = budget(bi)
      if usd > limit then usd = limit end
      if b.spent >= limit or b.spent + b.res + usd > limit then code, reset = 5, 0 end
    end
    if code == 1 then
      if b then
        -- Nothing reserved: the holds zset is empty (gone), so this hold creates it, and it needs its expiry.
        if b.res <= 0 then b.newholds = true end
        b.res = b.res + usd
        b.dirty = true
        redis.call('ZADD', KEYS[bi + 1], now + lease, id .. ':' .. usd)
      else
        usd = 0
      end
      req, res, wdirty = req + 1, res + tok, true
      if maxpar > 0 then
        redis.call('ZADD', KEYS[2], now + lease, id)
        pardirty = true
      end
      out[#out + 1] = 1
    else
      tok, usd = 0, 0
      out[#out + 1] = code
    end
    out[#out + 1] = reset
    out[#out + 1] = req
    out[#out + 1] = used + res
    out[#out + 1] = start
    out[#out + 1] = tok
    out[#out + 1] = usd
  else
    local bi, mi = tonumber(f6), tonumber(f7)
    local first, b
    if bi > 0 then
      b = budget(bi)
      if redis.call('ZREM', KEYS[bi + 1], id .. ':' .. f4) == 1 then
        b.res = b.res - tonumber(f4)
        first = true
      else
        first = redis.call('ZREM', KEYS[bi + 2], id) == 1
      end
      if mi < 0 then redis.call('ZREM', KEYS[2], id) end
    elseif mi < 0 then
      first = redis.call('ZREM', KEYS[2], id) == 1
    else
      first = redis.call('SET', KEYS[mi], '1', 'NX', 'PX', mttl) ~= false
    end
    if first then
      if start == tonumber(f1) then
        res, used, wdirty = res - tonumber(f2), used + tonumber(f3), true
      end
      if b then
        b.spent = b.spent + tonumber(f5)
        b.dirty = true
      end
    end
  end
end
if wdirty then
  redis.call('HSET', KEYS[1], 'start', start, 'req', req, 'used', used, 'res', res)
  if wfresh then redis.call('PEXPIRE', KEYS[1], win * 2) end
end
if pardirty then redis.call('PEXPIRE', KEYS[2], lease) end
for i, b in pairs(budgets) do
  if b.dirty then
    redis.call('HSET', KEYS[i], 'spent', b.spent, 'res', b.res)
    if b.created then redis.call('PEXPIRE', KEYS[i], bttl) end
  end
  if b.newholds then redis.call('PEXPIRE', KEYS[i + 1], bttl) end
end
return out
`;

type Scripted = Redis & {
  /** numkeys, then the keys and the arguments (BATCH). */
  gwLimits(...args: (string | number)[]): Promise<number[]>;
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
/** Operations per BATCH call. */
const BATCH_OPS = 200;
/** BATCH's outcome codes 2… of a refused admission. */
const REFUSALS: Rejection[] = ['requests', 'tokens', 'parallel', 'budget'];

interface Admission {
  kind: 'a';
  req: AdmitRequest;
  period?: { id: string; endsAt: number };
  resolve(r: AdmitResult): void;
  reject(err: Error): void;
}

interface Settlement {
  kind: 's';
  res: Reservation;
  actual: Estimate;
  done?: { resolve(): void; reject(err: Error): void };
}

type Op = Admission | Settlement;

export class RedisLimits implements LimitStore {
  private r: Scripted;
  /** This turn of the event loop's admissions and settlements, by client key: one BATCH call each at its end. */
  private queued = new Map<string, Op[]>();
  private scheduled = false;
  /** Settlements that failed (Redis down or slow): retried, counted once thanks to their marker. */
  private pending: Settlement[] = [];
  private retrying = false;
  private retry: NodeJS.Timeout;
  constructor(
    redis: Redis,
    private prefix: string,
    private logger: Logger,
  ) {
    this.r = redis as Scripted;
    this.r.defineCommand('gwLimits', { lua: BATCH });
    this.retry = setInterval(() => void this.flush(), 1000);
    this.retry.unref();
  }

  /**
   * Decided at the end of this turn of the event loop, in one call with the
   * turn's other admissions and settlements of the key (the order they came
   * in): under load many requests share a call and a system call, instead of
   * a call each. Nothing waits longer than this turn, and the call has the
   * connection's timeout (state.timeout_ms).
   */
  admit(req: AdmitRequest): Promise<AdmitResult> {
    const period = req.limits.budget_usd !== undefined ? budgetPeriod(req.limits.budget_period, Date.now()) : undefined;
    return new Promise((resolve, reject) => this.enqueue(req.key, { kind: 'a', req, period, resolve, reject }));
  }

  /** Settled at the end of this turn, as admit() is. One that fails waits in `pending` (retried every second) and rejects. */
  settle(res: Reservation, actual: Estimate): Promise<void> {
    return new Promise((resolve, reject) => this.enqueue(res.key, { kind: 's', res, actual, done: { resolve, reject } }));
  }

  private enqueue(key: string, op: Op): void {
    const list = this.queued.get(key);
    if (list) list.push(op);
    else this.queued.set(key, [op]);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.sendTick());
    }
  }

  /** This turn's operations: a call per key (of at most BATCH_OPS operations), all in one write to the socket. */
  private sendTick(): Promise<unknown> {
    this.scheduled = false;
    const groups = [...this.queued];
    this.queued.clear();
    const stream = (this.r as unknown as { stream?: { writable?: boolean; cork(): void; uncork(): void } }).stream;
    const cork = this.r.status === 'ready' && stream?.writable === true;
    if (cork) stream!.cork();
    const sent: Promise<void>[] = [];
    for (const [key, ops] of groups) for (let i = 0; i < ops.length; i += BATCH_OPS) sent.push(this.send(key, ops.slice(i, i + BATCH_OPS)));
    if (cork) stream!.uncork();
    return Promise.all(sent);
  }

  /** One BATCH call for operations of one client key; never rejects (each operation is answered). */
  private send(key: string, ops: Op[]): Promise<void> {
    // One hash tag per key: a Redis Cluster keeps a key's counters on one node.
    const k = `${this.prefix}lim:{${key}}`;
    const keys = [`${k}:win`, `${k}:par`];
    const budgets = new Map<string, number>();
    /** The KEYS index (from 1) of a budget period's hash, its holds and reclaimed holds next to it; 0 without a budget. */
    const budget = (period: string | undefined): number => {
      if (!period) return 0;
      let i = budgets.get(period);
      if (i === undefined) {
        keys.push(`${k}:bd:${period}`, `${k}:bdh:${period}`, `${k}:bdx:${period}`);
        budgets.set(period, (i = keys.length - 2));
      }
      return i;
    };
    const argv: (string | number)[] = [WINDOW_MS, LEASE_MS, BUDGET_TTL_MS, SETTLED_TTL_MS];
    for (const op of ops) {
      if (op.kind === 'a') {
        const { limits: l, estimate, id } = op.req;
        argv.push(`a ${l.rpm ?? 0} ${l.tpm ?? 0} ${l.max_parallel ?? 0} ${l.budget_usd !== undefined ? toMicros(l.budget_usd) : -1} ${estimate.tokens} ${estimate.micros} ${budget(op.period?.id)} 0 ${id}`);
      } else {
        const { res, actual } = op;
        // Its hold or its slot makes the settlement count once; a marker where it has neither.
        if (!res.period && !res.parallel) keys.push(`${this.prefix}settled:{${key}}:${res.id}`);
        argv.push(`s ${res.window} ${res.tokens} ${actual.tokens} ${res.micros} ${actual.micros} ${budget(res.period)} ${res.parallel ? -1 : res.period ? 0 : keys.length} 0 ${res.id}`);
      }
    }
    return this.r.gwLimits(keys.length, ...keys, ...argv).then(
      (out) => {
        let j = 0;
        for (const op of ops) {
          if (op.kind === 's') {
            op.done?.resolve();
            continue;
          }
          const [code, reset, requests, tokens, start, tok, usd] = out.slice(j, (j += 7));
          const { key, id, limits } = op.req;
          const view = { requests, tokens, resetMs: reset };
          if (code === 1) op.resolve({ ok: true, view, reservation: { key, id, window: start, tokens: tok, micros: usd, period: op.period?.id, parallel: limits.max_parallel !== undefined } });
          else {
            const reason = REFUSALS[code - 2];
            op.resolve({ ok: false, reason, retryAfterMs: reason === 'budget' && op.period ? op.period.endsAt - Date.now() : reset, view });
          }
        }
      },
      (err: Error) => {
        for (const op of ops) {
          if (op.kind === 'a') op.reject(err);
          else {
            if (this.pending.length < PENDING_MAX) this.pending.push({ kind: 's', res: op.res, actual: op.actual });
            op.done?.reject(err);
          }
        }
      },
    );
  }

  /** Send the settlements that failed again (with this turn's other operations); those that fail again wait for the next try. */
  private async flush(): Promise<void> {
    if (this.retrying || !this.pending.length || this.r.status !== 'ready') return;
    this.retrying = true;
    try {
      const batch = this.pending.splice(0, 500);
      const tries = await Promise.allSettled(batch.map((s) => new Promise<void>((resolve, reject) => this.enqueue(s.res.key, { ...s, done: { resolve, reject } }))));
      const settled = tries.filter((x) => x.status === 'fulfilled').length;
      if (settled) this.logger.info({ settled }, 'redis: settled reservations that had waited for it');
    } finally {
      this.retrying = false;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.retry);
    if (this.queued.size) await this.sendTick();
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
