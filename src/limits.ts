// Client keys' rate limits and budgets (docs/keys.md): requests and tokens per
// minute, requests under way, USD per day or month. Tokens and spend work by
// reservation: an estimate is reserved when a request is admitted (the input's
// size and the output it may produce), and settled with the real usage and
// cost when its response closes (released, on failure, by settling zero).
//
// The counters live in a LimitStore: this process's memory, or Redis shared by
// the replicas (src/state/redis.ts), whose Lua scripts do what MemoryLimits
// does here, atomically. Windows are one minute from a key's first request
// after the previous window ended; budget periods are UTC days or months.
import type { ClientKey, KeyLimits } from './config/load.js';
import type { ModelConfig, Endpoint } from './config/schema.js';
import { GatewayError } from './errors.js';
import { modelCost, zeroUsage } from './usage.js';

export const WINDOW_MS = 60_000;
/** How long a request's parallel slot and budget reservation last when never settled (a replica that died). */
export const LEASE_MS = 15 * 60_000;
/** The output reserved for a request that names no limit, on a model without `max_output_tokens`. */
export const DEFAULT_OUTPUT_RESERVE = 4_096;

/** What a request asks to reserve: tokens (input and output) and spend in micro-dollars. */
export interface Estimate {
  tokens: number;
  micros: number;
}

export interface AdmitRequest {
  /** The key's name: its counters. */
  key: string;
  /** The request id: its reservation and settlement. */
  id: string;
  limits: KeyLimits;
  estimate: Estimate;
}

export type Rejection = 'requests' | 'tokens' | 'parallel' | 'budget';

/** A window's state after admission (or at rejection): what the rate-limit headers say. */
export interface WindowView {
  requests: number;
  tokens: number;
  resetMs: number;
}

export type AdmitResult =
  | { ok: true; view: WindowView; reservation: Reservation }
  | { ok: false; reason: Rejection; retryAfterMs: number; view: WindowView };

/** What admission reserved, handed back at settlement. */
export interface Reservation {
  key: string;
  id: string;
  /** The window the tokens were reserved in (its start, ms). */
  window: number;
  tokens: number;
  micros: number;
  /** The budget period (`2026-11-26`, `2026-11`), when the key has a budget. */
  period?: string;
  parallel: boolean;
  /** Set when a store admitted the request from a grant it holds (src/state/redis.ts): settled there. */
  grant?: object;
}

export interface LimitStore {
  admit(r: AdmitRequest): Promise<AdmitResult>;
  /** A reload's `state.grant_ms` (stores that take grants). */
  configure?(grantMs: number): void;
  /** Idempotent: settling the same reservation twice counts once. */
  settle(r: Reservation, actual: Estimate): Promise<void>;
  close(): Promise<void>;
}

/** The last period computed of each kind (every limited request asks; the answer changes once a day or month). */
const lastPeriod = { day: { id: '', from: 0, endsAt: 0 }, month: { id: '', from: 0, endsAt: 0 } };

/** The budget period a time falls in (UTC) and when it ends. */
export function budgetPeriod(kind: 'day' | 'month', now: number): { id: string; endsAt: number } {
  const last = lastPeriod[kind];
  if (now >= last.from && now < last.endsAt) return last;
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const p =
    kind === 'day'
      ? { id: d.toISOString().slice(0, 10), from: Date.UTC(y, m, d.getUTCDate()), endsAt: Date.UTC(y, m, d.getUTCDate() + 1) }
      : { id: d.toISOString().slice(0, 7), from: Date.UTC(y, m, 1), endsAt: Date.UTC(y, m + 1, 1) };
  lastPeriod[kind] = p;
  return p;
}

export const toMicros = (usd: number): number => Math.ceil(usd * 1e6 - 1e-6);

/** The counters in this process's memory: the same rules as the Redis scripts (src/state/redis.ts). */
export class MemoryLimits implements LimitStore {
  private windows = new Map<string, { start: number; requests: number; used: number; reserved: number }>();
  private inflight = new Map<string, Map<string, number>>();
  private budgets = new Map<string, { spent: number; reserved: number; holds: Map<string, { micros: number; until: number }> }>();
  /** Reservations already settled (a WeakSet: none outlives its request, none costs a sweep). */
  private settled = new WeakSet<Reservation>();

  async admit(r: AdmitRequest): Promise<AdmitResult> {
    return this.admitNow(r, Date.now());
  }

  admitNow({ key, id, limits, estimate }: AdmitRequest, now: number): AdmitResult {
    let w = this.windows.get(key);
    if (!w || w.start + WINDOW_MS <= now) this.windows.set(key, (w = { start: now, requests: 0, used: 0, reserved: 0 }));
    const resetMs = w.start + WINDOW_MS - now;
    const tokens = limits.tpm !== undefined ? Math.min(estimate.tokens, limits.tpm) : estimate.tokens;
    const view = (): WindowView => ({ requests: w.requests, tokens: w.used + w.reserved, resetMs });
    if (limits.rpm !== undefined && w.requests + 1 > limits.rpm) return { ok: false, reason: 'requests', retryAfterMs: resetMs, view: view() };
    if (limits.tpm !== undefined && w.used + w.reserved + tokens > limits.tpm) return { ok: false, reason: 'tokens', retryAfterMs: resetMs, view: view() };
    let slots = this.inflight.get(key);
    if (limits.max_parallel !== undefined) {
      if (!slots) this.inflight.set(key, (slots = new Map()));
      for (const [rid, until] of slots) if (until <= now) slots.delete(rid);
      if (slots.size >= limits.max_parallel) return { ok: false, reason: 'parallel', retryAfterMs: 1000, view: view() };
    }
    let micros = 0;
    let period: { id: string; endsAt: number } | undefined;
    let b: { spent: number; reserved: number; holds: Map<string, { micros: number; until: number }> } | undefined;
    if (limits.budget_usd !== undefined) {
      period = budgetPeriod(limits.budget_period, now);
      const bk = `${key}|${period.id}`;
      b = this.budgets.get(bk);
      if (!b) {
        for (const k of this.budgets.keys()) if (k.startsWith(`${key}|`)) this.budgets.delete(k); // an earlier period's
        this.budgets.set(bk, (b = { spent: 0, reserved: 0, holds: new Map() }));
      }
      for (const [rid, h] of b.holds)
        if (h.until <= now) {
          b.reserved -= h.micros;
          b.holds.delete(rid);
        }
      const budget = toMicros(limits.budget_usd);
      micros = Math.min(estimate.micros, budget);
      if (b.spent >= budget || b.spent + b.reserved + micros > budget) return { ok: false, reason: 'budget', retryAfterMs: period.endsAt - now, view: view() };
    }
    w.requests++;
    w.reserved += tokens;
    if (slots && limits.max_parallel !== undefined) slots.set(id, now + LEASE_MS);
    if (b) {
      b.reserved += micros;
      b.holds.set(id, { micros, until: now + LEASE_MS });
    }
    return { ok: true, view: view(), reservation: { key, id, window: w.start, tokens, micros, period: period?.id, parallel: limits.max_parallel !== undefined } };
  }

  async settle(r: Reservation, actual: Estimate): Promise<void> {
    // The reservation object this store handed out is what a second settlement would pass again.
    if (this.settled.has(r)) return;
    this.settled.add(r);
    const w = this.windows.get(r.key);
    if (w && w.start === r.window) {
      w.reserved -= r.tokens;
      w.used += actual.tokens;
    }
    this.inflight.get(r.key)?.delete(r.id);
    if (r.period) {
      const b = this.budgets.get(`${r.key}|${r.period}`);
      if (b) {
        const h = b.holds.get(r.id);
        if (h) {
          b.reserved -= h.micros;
          b.holds.delete(r.id);
        }
        b.spent += actual.micros;
      }
    }
  }

  async close(): Promise<void> {}
}

/** Numbers the caller may have sent as the request's output limit, by endpoint. */
function requestedOutput(body: Record<string, unknown>): number | undefined {
  for (const f of ['max_completion_tokens', 'max_tokens', 'max_output_tokens']) {
    const n = body[f];
    if (typeof n === 'number' && Number.isFinite(n) && n > 0) return n;
  }
  return undefined;
}

/**
 * The reservation of a request: its input estimated at one token per 4 bytes
 * of the request body (the estimate src/tokens.ts uses where no tokenizer is
 * known), its output at what the request allows (`max_tokens`,
 * `max_completion_tokens`, `max_output_tokens`), else the model's
 * `max_output_tokens`, else DEFAULT_OUTPUT_RESERVE; spend at the model's
 * prices for those tokens (images: its price per image times `n`).
 */
export function estimateOf(endpoint: Endpoint, body: Record<string, unknown>, bodyBytes: number, model: ModelConfig | undefined): Estimate {
  let input = Math.ceil(bodyBytes / 4);
  if (model?.context_window) input = Math.min(input, model.context_window);
  const u = zeroUsage();
  u.input_tokens = input;
  if (endpoint === 'images_generations') {
    u.images = typeof body.n === 'number' && body.n > 0 ? body.n : 1;
  } else {
    u.output_tokens = requestedOutput(body) ?? model?.max_output_tokens ?? DEFAULT_OUTPUT_RESERVE;
  }
  const cost = modelCost(u, model);
  return { tokens: u.input_tokens + u.output_tokens, micros: cost === null ? 0 : toMicros(cost) };
}

/** OpenAI's reset format: `1s`, `6m0s`, `1h2m3s`. */
export function resetText(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h ? `${h}h${m}m${sec}s` : m ? `${m}m${sec}s` : `${sec}s`;
}

/** The x-ratelimit-* headers of a limited key (only for the limits it has). */
export function rateHeaders(limits: KeyLimits, view: WindowView): Record<string, string> {
  const h: Record<string, string> = {};
  if (limits.rpm !== undefined) {
    h['x-ratelimit-limit-requests'] = String(limits.rpm);
    h['x-ratelimit-remaining-requests'] = String(Math.max(0, limits.rpm - view.requests));
    h['x-ratelimit-reset-requests'] = resetText(view.resetMs);
  }
  if (limits.tpm !== undefined) {
    h['x-ratelimit-limit-tokens'] = String(limits.tpm);
    h['x-ratelimit-remaining-tokens'] = String(Math.max(0, limits.tpm - view.tokens));
    h['x-ratelimit-reset-tokens'] = resetText(view.resetMs);
  }
  return h;
}

/** The 429 of a rejected request, with Retry-After and the rate-limit headers. */
export function rejection(key: ClientKey, limits: KeyLimits, r: Extract<AdmitResult, { ok: false }>): GatewayError {
  const headers = { ...rateHeaders(limits, r.view), 'retry-after': String(Math.max(1, Math.ceil(r.retryAfterMs / 1000))) };
  if (r.reason === 'budget')
    return new GatewayError(429, 'rate_limit_error', `Key '${key.name}' has spent its budget of $${limits.budget_usd} for this ${limits.budget_period}.`, { code: 'insufficient_quota', headers });
  const what =
    r.reason === 'requests'
      ? `its limit of ${limits.rpm} requests per minute`
      : r.reason === 'tokens'
        ? `its limit of ${limits.tpm} tokens per minute (this request reserves its input and its maximum output)`
        : `its limit of ${limits.max_parallel} requests at once`;
  return new GatewayError(429, 'rate_limit_error', `Key '${key.name}' has reached ${what}.`, { code: 'rate_limit_exceeded', headers });
}
