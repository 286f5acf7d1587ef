// The admin endpoints (/admin/*): authenticated by an admin key, separate from
// client keys (gateway.yaml `admin_keys` as SHA-256 digests, or plaintext
// GATEWAY_ADMIN_KEY). No key or an unknown one: 401; a client key: 403.
// docs/observability.md, "Usage API".
import { hash, timingSafeEqual } from 'node:crypto';
import type Koa from 'koa';
import type Router from '@koa/router';
import type { GatewayConfig } from './config/load.js';
import { errors, GatewayError } from './errors.js';
import { jsonBody } from './respond.js';
import { GROUPS, type Group, type UsageBackend, type UsageQuery, type UsageRow, type LatencyRow } from './store/usage.js';

/** The admin key's name, or a 401/403: every /admin route calls this first. */
export function adminKeyName(kctx: Koa.Context, config: GatewayConfig): string {
  const header = kctx.req.headers.authorization;
  if (!header) throw errors.unauthenticated("Missing 'Authorization: Bearer <admin key>' header.");
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw errors.unauthenticated("The 'Authorization' header must be 'Bearer <admin key>'.");
  const digest = hash('sha256', m[1], 'buffer');
  let admin: string | undefined;
  let client = false;
  // No early exit: the time taken does not depend on which key matched.
  for (const k of config.adminKeys) if (timingSafeEqual(digest, k.hash) && admin === undefined) admin = k.name;
  for (const k of config.keys) if (timingSafeEqual(digest, k.hash)) client = true;
  if (config.runtimeKeys?.lookup(digest)) client = true;
  if (admin !== undefined) return admin;
  if (client) throw errors.forbidden('This is a client key: the admin endpoints need an admin key (admin_keys in gateway.yaml, or GATEWAY_ADMIN_KEY).');
  throw errors.unauthenticated(config.adminKeys.length ? 'Invalid admin key.' : 'No admin key is configured (admin_keys in gateway.yaml, or GATEWAY_ADMIN_KEY).');
}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const MAX_BUCKETS = 10_000;
const DAY = 86_400_000;

function one(kctx: Koa.Context, name: string): string | undefined {
  const v = kctx.query[name];
  if (Array.isArray(v)) throw errors.invalid(`Invalid '${name}': give it once.`, name, 'invalid_value');
  return v === undefined || v === '' ? undefined : v;
}

/** A time as ISO 8601 (`2026-11-26T21:00:00Z`) or Unix seconds. */
function instant(kctx: Koa.Context, name: string): number | undefined {
  const v = one(kctx, name);
  if (v === undefined) return undefined;
  const ms = /^\d+(\.\d+)?$/.test(v) ? Number(v) * 1000 : Date.parse(v);
  if (!Number.isFinite(ms)) throw errors.invalid(`Invalid '${name}': expected an ISO 8601 time such as '2026-11-26T00:00:00Z' or Unix seconds (got '${v.slice(0, 64)}').`, name, 'invalid_value');
  return ms;
}

/** The query of GET /admin/usage, validated (400 naming the parameter). */
export function usageQuery(kctx: Koa.Context, now = Date.now()): UsageQuery {
  for (const k of Object.keys(kctx.query))
    if (!['group_by', 'from', 'to', 'interval'].includes(k)) throw errors.invalid(`Unknown query parameter '${k.slice(0, 64)}' (expected group_by, from, to, interval).`, k.slice(0, 64), 'unknown_parameter');
  const g = one(kctx, 'group_by');
  if (g !== undefined && !(g in GROUPS)) throw errors.invalid(`Invalid 'group_by': expected one of ${Object.keys(GROUPS).join(', ')} (got '${g.slice(0, 64)}').`, 'group_by', 'invalid_value');
  const to = instant(kctx, 'to') ?? now;
  const from = instant(kctx, 'from') ?? to - DAY;
  if (from > to) throw errors.invalid("Invalid 'from': it is after 'to'.", 'from', 'invalid_value');
  const iv = one(kctx, 'interval');
  let interval: number | undefined;
  if (iv !== undefined) {
    const m = /^(\d+)([smhd])$/.exec(iv);
    if (!m || Number(m[1]) === 0) throw errors.invalid(`Invalid 'interval': expected a duration such as '1m', '15m', '1h' or '1d' (got '${iv.slice(0, 64)}').`, 'interval', 'invalid_value');
    interval = Number(m[1]) * UNITS[m[2]];
    if ((to - from) / interval > MAX_BUCKETS) throw errors.invalid(`Invalid 'interval': the range would have more than ${MAX_BUCKETS} buckets; use a longer interval or a shorter range.`, 'interval', 'out_of_range');
  }
  return { group: g as Group | undefined, from, to, interval };
}

/** A row as the API shows it: the group under its own name, `start` as ISO 8601. */
export function usageJson(row: UsageRow | LatencyRow, q: UsageQuery): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (q.interval) out.start = new Date(row.start!).toISOString();
  if (q.group) out[q.group] = row.group ?? null;
  const { start: _s, group: _g, ...counts } = row;
  return Object.assign(out, counts);
}

/**
 * GET /admin/usage, GET /admin/usage/latency and GET /admin/usage/records. `usage()` is the store (undefined:
 * the usage store is off or not open: 503), `config()` the config in force.
 */
export function adminRoutes(router: Router, config: () => GatewayConfig, usage: () => UsageBackend | undefined): void {
  const store = (): UsageBackend => {
    const s = usage();
    if (!s) throw new GatewayError(503, 'service_unavailable_error', 'The usage store is not available (storage.usage.enabled is false, or the store could not be opened: see the gateway log).', { code: 'usage_store_unavailable' });
    return s;
  };
  router.get('/admin/usage', async (kctx) => {
    kctx.state.log.admin_key = adminKeyName(kctx, config());
    const q = usageQuery(kctx);
    const rows = await store().aggregate(q);
    jsonBody(kctx, { data: rows.map((r) => usageJson(r, q)) });
  });
  router.get('/admin/usage/latency', async (kctx) => {
    kctx.state.log.admin_key = adminKeyName(kctx, config());
    const q = usageQuery(kctx);
    const rows = await store().percentiles(q);
    jsonBody(kctx, { data: rows.map((r) => usageJson(r, q)) });
  });
  router.get('/admin/usage/records', async (kctx) => {
    kctx.state.log.admin_key = adminKeyName(kctx, config());
    for (const k of Object.keys(kctx.query))
      if (!['from', 'to', 'limit', 'errors'].includes(k)) throw errors.invalid(`Unknown query parameter '${k.slice(0, 64)}' (expected from, to, limit, errors).`, k.slice(0, 64), 'unknown_parameter');
    const to = instant(kctx, 'to') ?? Date.now();
    const from = instant(kctx, 'from') ?? to - DAY;
    const l = one(kctx, 'limit') ?? '50';
    if (!/^\d+$/.test(l) || Number(l) < 1 || Number(l) > 1000) throw errors.invalid(`Invalid 'limit': expected an integer from 1 to 1000 (got '${l.slice(0, 64)}').`, 'limit', 'invalid_value');
    const e = one(kctx, 'errors');
    if (e !== undefined && e !== 'true' && e !== 'false') throw errors.invalid(`Invalid 'errors': expected true or false (got '${e.slice(0, 64)}').`, 'errors', 'invalid_value');
    const rows = await store().recent({ from, to, limit: Number(l), errors: e === 'true' });
    jsonBody(kctx, { data: rows.map((r) => ({ ...r, time: new Date(Number(r.time)).toISOString(), error: !!r.error, stream: !!r.stream })) });
  });
}
