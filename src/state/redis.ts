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
// and, for a replica's grants (RedisLimits, state.grant_ms):
//   grant:  g rpm tpm 0 budget-micro-USD tokens-per-request micros-per-request budget-index requests id
//   close:  c window-start tokens actual-tokens micros actual-micros budget-index marker-index unused-requests tail-tokens tail-micros id
// A grant reserves, like an admission, for up to `requests` requests of the
// given size at once, but at most 1/SHARE of what the window (and the
// budget) has left, and nothing when that is under two requests. Closing it
// settles what its requests used, gives back the requests it did not admit,
// and (counted once, as a settlement) turns what its requests still under way
// reserved into a reservation of its own, `<id>.t`, settled later by an `s`.
// Returns 7 numbers per admission, in order: outcome (1 admitted; 2 requests,
// 3 tokens, 4 parallel, 5 budget: refused), reset ms, requests, tokens in the
// window, window start, tokens reserved, micros reserved; 8 per grant: outcome
// (1 granted, 0 not), then the same six, then the requests granted.
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
-- A budget hold: usd micro-dollars reserved under member until the lease ends.
local function hold(b, bi, member, usd)
  -- Nothing reserved: the holds zset is empty (gone), so this hold creates it, and it needs its expiry.
  if b.res <= 0 then b.newholds = true end
  b.res = b.res + usd
  b.dirty = true
  redis.call('ZADD', KEYS[bi + 1], now + lease, member .. ':' .. usd)
end
-- A settlement (fields as of 's'): applied only the first time; returns whether it was, and the budget.
local function settle(f1, f2, f3, f4, f5, f6, f7, f8, id)
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
      req, res, used, wdirty = req - tonumber(f8), res - tonumber(f2), used + tonumber(f3), true
    end
    if b then
      b.spent = b.spent + tonumber(f5)
      b.dirty = true
    end
  end
  return first, b
end
local out = {}
local SHARE = 16
for a = 5, #ARGV do
  local kind, f1, f2, f3, f4, f5, f6, f7, f8, id, f9, f10
  if string.sub(ARGV[a], 1, 1) == 'c' then
    kind, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, id = string.match(ARGV[a], '^(%a) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (.*)$')
  else
    kind, f1, f2, f3, f4, f5, f6, f7, f8, id = string.match(ARGV[a], '^(%a) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (.*)$')
  end
  if kind == 'g' then
    local rpm, tpm, limit = tonumber(f1), tonumber(f2), tonumber(f4)
    local tpr, upr, bi, n = tonumber(f5), tonumber(f6), tonumber(f7), tonumber(f8)
    if (not start) or start + win <= now then start, req, used, res, wfresh = now, 0, 0, 0, true end
    if rpm > 0 then n = math.min(n, math.floor((rpm - req) / SHARE)) end
    if tpm > 0 and tpr > 0 then n = math.min(n, math.floor((tpm - used - res) / SHARE / tpr)) end
    local b
    if bi > 0 then
      b = budget(bi)
      if b.spent >= limit then n = 0
      elseif upr > 0 then n = math.min(n, math.floor((limit - b.spent - b.res) / SHARE / upr)) end
    end
    local tok, usd = 0, 0
    if n >= 2 then
      tok, usd = n * tpr, 0
      if b then
        usd = n * upr
        hold(b, bi, id, usd)
      end
      req, res, wdirty = req + n, res + tok, true
      out[#out + 1] = 1
    else
      n = 0
      out[#out + 1] = 0
    end
    out[#out + 1] = start + win - now
    out[#out + 1] = req
    out[#out + 1] = used + res
    out[#out + 1] = start
    out[#out + 1] = tok
    out[#out + 1] = usd
    out[#out + 1] = n
  elseif kind == 'c' then
    -- The grant's settlement, then (the first time) its requests under way's reservation, <id>.t.
    local first, b = settle(f1, f2, f3, f4, f5, f6, f7, f8, id)
    if first then
      if start == tonumber(f1) then res = res + tonumber(f9) end
      if b and tonumber(f10) > 0 then hold(b, tonumber(f6), id .. '.t', tonumber(f10)) end
    end
  elseif kind == 'a' then
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
        hold(b, bi, id, usd)
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
    settle(f1, f2, f3, f4, f5, f6, f7, f8, id)
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

/** A request for a grant of a key's requests (GrantKey.taking). */
interface GrantRequest {
  kind: 'g';
  /** The grant's id (its hold in Redis, its tail `<id>.t`). */
  id: string;
  req: AdmitRequest;
  period?: { id: string; endsAt: number };
  /** Requests wanted, and the tokens and micros each reserves. */
  n: number;
  tokens: number;
  micros: number;
}

/** The close of a grant: its settlement, and its requests still under way turned into a reservation of their own. */
interface Close {
  kind: 'c';
  g: Grant;
  done?: { resolve(): void; reject(err: Error): void };
}

type Op = Admission | Settlement | GrantRequest | Close;
type Retried = Settlement | Close;

/**
 * A share of a key's window (and budget) that Redis reserved for this replica
 * (BATCH's `g`): its requests are admitted here, without a round trip, until
 * its deadline, the window's end, or what it holds runs out. Then it is
 * closed (BATCH's `c`): what its requests used is settled, the requests it did
 * not admit go back, and what its requests still under way reserved becomes
 * the reservation `<id>.t`, settled when the last of them ends.
 */
interface Grant {
  id: string;
  key: string;
  /** The window's start (Redis's clock) and its end (this process's clock). */
  window: number;
  endsAt: number;
  /** No admission from it after this (this process's clock). */
  deadline: number;
  /** Its budget period, when the key has a budget. */
  period?: string;
  /** Granted: requests, tokens, micro-dollars. */
  n: number;
  tokens: number;
  micros: number;
  /** Left to admit. */
  req: number;
  tok: number;
  usd: number;
  /** Requests admitted from it. */
  used: number;
  /** What its settled requests used. */
  actualTok: number;
  actualUsd: number;
  /** Its requests under way and what they reserved. */
  open: number;
  openTok: number;
  openUsd: number;
  /** The window's requests and tokens as Redis counted them, less this grant: what the headers start from. */
  baseRequests: number;
  baseTokens: number;
  closed: boolean;
  /** Once closed with requests under way: what they reserved and, as they end, used. */
  tail?: { open: number; tokens: number; micros: number; actualTok: number; actualUsd: number };
  /** Its close failed (Redis away): the tail's settlement waits behind it. */
  closePending?: boolean;
}

/** A key's grants in this process. */
interface GrantKey {
  current?: Grant;
  /** A grant asked for and not answered yet. */
  taking: boolean;
  /** No grant asked for before this (Redis granted none: the key is near its limit, or Redis failed). */
  quietUntil: number;
  /** Admissions since the last grant asked for, and since when: the rate a grant is sized by. */
  admits: number;
  since: number;
  /** The requests' estimates, averaged: a grant's tokens and micros per request. */
  avgTokens: number;
  avgMicros: number;
  lastUse: number;
}

/** Requests per grant at most and at least, and the least time a grant's size is computed over. */
const GRANT_MAX = 100_000;
const GRANT_MIN = 4;
const RATE_FLOOR_MS = 100;

export class RedisLimits implements LimitStore {
  private r: Scripted;
  /** This turn of the event loop's admissions and settlements, by client key: one BATCH call each at its end. */
  private queued = new Map<string, Op[]>();
  private scheduled = false;
  /** Settlements and grant closes that failed (Redis down or slow): retried, counted once thanks to their marker. */
  private pending: Retried[] = [];
  private retrying = false;
  private retry: NodeJS.Timeout;
  /** Keys' grants (state.grant_ms > 0). */
  private grants = new Map<string, GrantKey>();
  private sweeper?: NodeJS.Timeout;
  private grantSeq = 0;
  private readonly replica = `${process.pid.toString(36)}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  /** Reservations from grants already settled: a second settlement counts nothing. */
  private settledLocal = new WeakSet<Reservation>();
  private closing = false;
  constructor(
    redis: Redis,
    private prefix: string,
    private logger: Logger,
    private grantMs = 0,
  ) {
    this.r = redis as Scripted;
    this.r.defineCommand('gwLimits', { lua: BATCH });
    this.retry = setInterval(() => void this.flush(), 1000);
    this.retry.unref();
    this.configure(grantMs);
  }

  /** state.grant_ms, at start and at a reload (0: every admission is Redis's; grants held are closed). */
  configure(grantMs: number): void {
    this.grantMs = grantMs;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    if (grantMs > 0) {
      this.sweeper = setInterval(() => this.sweep(), Math.max(20, Math.min(250, grantMs / 4)));
      this.sweeper.unref();
    } else this.sweep(true);
  }

  /** Close the grants past their deadline or window (all of them with `all`), forget keys idle for a minute. */
  private sweep(all = false): void {
    const now = Date.now();
    for (const [key, gk] of this.grants) {
      const g = gk.current;
      if (g && (all || now >= g.deadline || now >= g.endsAt)) this.closeGrant(gk, g);
      if (!gk.current && !gk.taking && now - gk.lastUse > 60_000) this.grants.delete(key);
    }
  }

  /**
   * Decided at the end of this turn of the event loop, in one call with the
   * turn's other admissions and settlements of the key (the order they came
   * in): under load many requests share a call and a system call, instead of
   * a call each. Nothing waits longer than this turn, and the call has the
   * connection's timeout (state.timeout_ms).
   */
  admit(req: AdmitRequest): Promise<AdmitResult> {
    const now = Date.now();
    const period = req.limits.budget_usd !== undefined ? budgetPeriod(req.limits.budget_period, now) : undefined;
    // Grants: not for max_parallel (requests under way are counted one by one, across replicas).
    const gk = this.grantMs > 0 && req.limits.max_parallel === undefined ? this.grantKey(req, now) : undefined;
    if (gk) {
      const local = this.fromGrant(gk, req, period, now);
      if (local) return Promise.resolve(local);
    }
    const p = new Promise<AdmitResult>((resolve, reject) => this.enqueue(req.key, { kind: 'a', req, period, resolve, reject }));
    // After this admission (its op first): a grant, for the key's next requests.
    if (gk && !gk.taking && now >= gk.quietUntil) this.takeGrant(gk, req, period, now);
    return p;
  }

  private grantKey(req: AdmitRequest, now: number): GrantKey {
    let gk = this.grants.get(req.key);
    if (!gk) this.grants.set(req.key, (gk = { taking: false, quietUntil: 0, admits: 0, since: now, avgTokens: 0, avgMicros: 0, lastUse: now }));
    gk.lastUse = now;
    gk.admits++;
    const { tokens, micros } = req.estimate;
    gk.avgTokens = gk.avgTokens ? gk.avgTokens * 0.9 + tokens * 0.1 : tokens;
    gk.avgMicros = gk.avgMicros ? gk.avgMicros * 0.9 + micros * 0.1 : micros;
    return gk;
  }

  /** Admitted from the key's grant, when it has one that holds this request; undefined: ask Redis. */
  private fromGrant(gk: GrantKey, req: AdmitRequest, period: { id: string; endsAt: number } | undefined, now: number): AdmitResult | undefined {
    const g = gk.current;
    if (!g) return undefined;
    if (now >= g.deadline || now >= g.endsAt || g.period !== period?.id) {
      this.closeGrant(gk, g);
      return undefined;
    }
    const { limits, estimate, key, id } = req;
    const tokens = limits.tpm !== undefined ? Math.min(estimate.tokens, limits.tpm) : estimate.tokens;
    const micros = limits.budget_usd !== undefined ? Math.min(estimate.micros, toMicros(limits.budget_usd)) : 0;
    if (g.req < 1 || g.tok < tokens || g.usd < micros) {
      // Spent: closed now (what is left goes back), and the next grant is asked for below.
      this.closeGrant(gk, g);
      return undefined;
    }
    g.req--;
    g.tok -= tokens;
    g.usd -= micros;
    g.used++;
    g.open++;
    g.openTok += tokens;
    g.openUsd += micros;
    // Three quarters used or lived: the next grant is asked for now, so that requests need not wait for it.
    if (!gk.taking && now >= gk.quietUntil && (g.req * 4 < g.n || g.tok * 4 < g.tokens || g.usd * 4 < g.micros || (g.deadline - now) * 4 < this.grantMs)) this.takeGrant(gk, req, period, now);
    return {
      ok: true,
      view: { requests: g.baseRequests + g.used, tokens: g.baseTokens + g.tokens - g.tok, resetMs: g.endsAt - now },
      reservation: { key, id, window: g.window, tokens, micros, period: g.period, parallel: false, grant: g },
    };
  }

  /** Ask Redis for a grant sized to about grant_ms of the key's traffic here (at most 1/16 of what it has left). */
  private takeGrant(gk: GrantKey, req: AdmitRequest, period: { id: string; endsAt: number } | undefined, now: number): void {
    const elapsed = now - gk.since;
    const rate = gk.admits / Math.max(RATE_FLOOR_MS, elapsed);
    // A key that sends fewer than GRANT_MIN requests in a grant's time is admitted by Redis: a grant would expire unused.
    if (gk.admits < 2 || rate * this.grantMs < GRANT_MIN) {
      if (elapsed > 10 * Math.max(this.grantMs, RATE_FLOOR_MS)) {
        gk.admits = 0;
        gk.since = now;
      }
      return;
    }
    gk.admits = 0;
    gk.since = now;
    const n = Math.min(GRANT_MAX, Math.max(GRANT_MIN, Math.ceil(rate * this.grantMs * 1.5)));
    const { limits } = req;
    const tokens = Math.max(1, Math.ceil(limits.tpm !== undefined ? Math.min(gk.avgTokens, limits.tpm) : gk.avgTokens));
    const micros = limits.budget_usd !== undefined ? Math.ceil(gk.avgMicros) : 0;
    gk.taking = true;
    this.enqueue(req.key, { kind: 'g', id: `g${this.replica}.${(this.grantSeq++).toString(36)}`, req, period, n, tokens, micros });
  }

  /** Redis's answer to a grant request: the key's new grant (the one before it closed), or none for a while. */
  private granted(op: GrantRequest, out: number[]): void {
    const gk = this.grants.get(op.req.key);
    if (!gk) return;
    gk.taking = false;
    const [code, reset, requests, tokens, start, tok, usd, n] = out;
    const now = Date.now();
    if (code !== 1) {
      // Too little left to share (or a budget spent): Redis admits each request until the window ends or a grant time passes.
      gk.quietUntil = now + Math.min(this.grantMs, Math.max(0, reset));
      return;
    }
    if (gk.current) this.closeGrant(gk, gk.current);
    const g: Grant = {
      id: op.id,
      key: op.req.key,
      window: start,
      endsAt: now + reset,
      deadline: now + this.grantMs,
      period: op.period?.id,
      n,
      tokens: tok,
      micros: usd,
      req: n,
      tok,
      usd,
      used: 0,
      actualTok: 0,
      actualUsd: 0,
      open: 0,
      openTok: 0,
      openUsd: 0,
      baseRequests: requests - n,
      baseTokens: tokens - tok,
      closed: false,
    };
    gk.current = g;
    // Grants were turned off (a reload to 0, or the store closing) while Redis made this one: given back at once.
    if (this.grantMs <= 0 || this.closing) this.closeGrant(gk, g);
  }

  /** No more admissions from it: its close goes to Redis at the end of this turn. */
  private closeGrant(gk: GrantKey, g: Grant): void {
    if (gk.current === g) gk.current = undefined;
    if (g.closed) return;
    g.closed = true;
    if (g.open > 0) g.tail = { open: g.open, tokens: g.openTok, micros: g.openUsd, actualTok: 0, actualUsd: 0 };
    this.enqueue(g.key, { kind: 'c', g });
  }

  /** Settled at the end of this turn, as admit() is. One that fails waits in `pending` (retried every second) and rejects. */
  settle(res: Reservation, actual: Estimate): Promise<void> {
    const g = res.grant as Grant | undefined;
    if (g) return this.settleLocal(g, res, actual);
    return new Promise((resolve, reject) => this.enqueue(res.key, { kind: 's', res, actual, done: { resolve, reject } }));
  }

  /** A request admitted from a grant: counted into the grant, or, once it closed, into its tail (settled in Redis when the tail's last request ends). */
  private settleLocal(g: Grant, res: Reservation, actual: Estimate): Promise<void> {
    if (this.settledLocal.has(res)) return Promise.resolve();
    this.settledLocal.add(res);
    const t = g.tail;
    if (!g.closed || !t) {
      g.open--;
      g.openTok -= res.tokens;
      g.openUsd -= res.micros;
      g.actualTok += actual.tokens;
      g.actualUsd += actual.micros;
      return Promise.resolve();
    }
    t.open--;
    t.actualTok += actual.tokens;
    t.actualUsd += actual.micros;
    if (t.open > 0) return Promise.resolve();
    const tail: Settlement = {
      kind: 's',
      res: { key: g.key, id: `${g.id}.t`, window: g.window, tokens: t.tokens, micros: t.micros, period: g.period, parallel: false },
      actual: { tokens: t.actualTok, micros: t.actualUsd },
    };
    // Behind its grant's close, when that is still waiting for Redis.
    if (g.closePending) {
      if (this.pending.length < PENDING_MAX) this.pending.push(tail);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.enqueue(g.key, { ...tail, done: { resolve, reject } }));
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
    const marker = (id: string) => (keys.push(`${this.prefix}settled:{${key}}:${id}`), keys.length);
    for (const op of ops) {
      if (op.kind === 'a') {
        const { limits: l, estimate, id } = op.req;
        argv.push(`a ${l.rpm ?? 0} ${l.tpm ?? 0} ${l.max_parallel ?? 0} ${l.budget_usd !== undefined ? toMicros(l.budget_usd) : -1} ${estimate.tokens} ${estimate.micros} ${budget(op.period?.id)} 0 ${id}`);
      } else if (op.kind === 'g') {
        const l = op.req.limits;
        argv.push(`g ${l.rpm ?? 0} ${l.tpm ?? 0} 0 ${l.budget_usd !== undefined ? toMicros(l.budget_usd) : -1} ${op.tokens} ${op.micros} ${budget(op.period?.id)} ${op.n} ${op.id}`);
      } else if (op.kind === 'c') {
        const g = op.g;
        const t = g.tail;
        // Its budget hold makes the close count once; a marker where it has none.
        argv.push(
          `c ${g.window} ${g.tokens} ${g.actualTok} ${g.micros} ${g.actualUsd} ${budget(g.period)} ${g.period ? 0 : marker(g.id)} ${g.n - g.used} ${t?.tokens ?? 0} ${t?.micros ?? 0} ${g.id}`,
        );
      } else {
        const { res, actual } = op;
        // Its hold or its slot makes the settlement count once; a marker where it has neither.
        const mi = res.parallel ? -1 : res.period ? 0 : marker(res.id);
        argv.push(`s ${res.window} ${res.tokens} ${actual.tokens} ${res.micros} ${actual.micros} ${budget(res.period)} ${mi} 0 ${res.id}`);
      }
    }
    return this.r.gwLimits(keys.length, ...keys, ...argv).then(
      (out) => {
        let j = 0;
        for (const op of ops) {
          if (op.kind === 's' || op.kind === 'c') {
            op.done?.resolve();
            continue;
          }
          if (op.kind === 'g') {
            this.granted(op, out.slice(j, (j += 8)));
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
          else if (op.kind === 'g') {
            // No grant for a while: Redis (or its absence) answers each request.
            const gk = this.grants.get(op.req.key);
            if (gk) {
              gk.taking = false;
              gk.quietUntil = Date.now() + 1000;
            }
          } else {
            if (op.kind === 'c') op.g.closePending = true;
            if (this.pending.length < PENDING_MAX) this.pending.push(op.kind === 's' ? { kind: 's', res: op.res, actual: op.actual } : { kind: 'c', g: op.g });
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
      const tries = await Promise.allSettled(
        batch.map((s) => new Promise<void>((resolve, reject) => this.enqueue(s.kind === 's' ? s.res.key : s.g.key, { ...s, done: { resolve, reject } }))),
      );
      const settled = tries.filter((x) => x.status === 'fulfilled').length;
      if (settled) this.logger.info({ settled }, 'redis: settled reservations that had waited for it');
    } finally {
      this.retrying = false;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.retry);
    if (this.sweeper) clearInterval(this.sweeper);
    // What grants hold goes back (their requests under way keep their reservations).
    for (const gk of this.grants.values()) if (gk.current) this.closeGrant(gk, gk.current);
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
