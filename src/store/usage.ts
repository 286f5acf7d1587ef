// The usage store: one row per request (src/usage.ts, RequestRecord), written
// off the request path. Records go into a bounded queue and are written in
// batches by a backend that never blocks the event loop: SQLite in a worker
// thread (usage-sqlite.ts) or PostgreSQL through `pg` (usage-pg.ts). A full
// queue or a slow store drops records (counted, logged, in /metrics); it never
// slows or fails a request. docs/observability.md, "Usage store".
import type { Logger } from 'pino';
import { USAGE_KINDS, type RequestRecord } from '../usage.js';
import type { GatewayConfig } from '../config/load.js';

/** The columns of a usage row, in order. */
export const COLUMNS = [
  'time',
  'request_id',
  'key_name',
  'user_id',
  'session_id',
  'endpoint',
  'model',
  'requested_model',
  'provider',
  'deployment',
  'attempts',
  'fallbacks',
  'status',
  'error_type',
  'error',
  'stream',
  'usage_source',
  ...USAGE_KINDS,
  'cost_usd',
  'latency_ms',
  'ttfb_ms',
  'upstream_ms',
] as const;

export type Row = (string | number | null)[];

/** Whether a record counts as an error: a 4xx/5xx answer or a stream that broke (a client that left is not one). */
export function isError(r: RequestRecord): boolean {
  if (r.status >= 400) return r.status !== 499;
  return !!r.error_type && r.error_type !== 'client_closed';
}

/** A record as a row of COLUMNS. */
export function toRow(r: RequestRecord): Row {
  const u = r.usage;
  return [
    r.time,
    r.request_id,
    r.key ?? null,
    r.user ?? null,
    r.session ?? null,
    r.endpoint,
    r.model ?? null,
    r.requested_model ?? null,
    r.provider ?? null,
    r.deployment ?? null,
    r.attempts,
    r.fallbacks,
    r.status,
    r.error_type ?? null,
    isError(r) ? 1 : 0,
    r.stream ? 1 : 0,
    r.usage_source,
    u?.input_tokens ?? 0,
    u?.cached_input_tokens ?? 0,
    u?.cache_write_tokens ?? 0,
    u?.input_image_tokens ?? 0,
    u?.output_tokens ?? 0,
    u?.reasoning_tokens ?? 0,
    u?.output_image_tokens ?? 0,
    u?.images ?? 0,
    u?.web_searches ?? 0,
    r.cost_usd,
    Math.round(r.latency_ms),
    r.ttfb_ms === undefined ? null : Math.round(r.ttfb_ms),
    Math.round(r.upstream_ms),
  ];
}

/** `group_by` of GET /admin/usage, and the column each names. */
export const GROUPS = { model: 'model', provider: 'provider', key: 'key_name', user: 'user_id', session: 'session_id' } as const;
export type Group = keyof typeof GROUPS;

export interface UsageQuery {
  group?: Group;
  /** Unix ms, inclusive. */
  from: number;
  /** Unix ms, exclusive. */
  to: number;
  /** Bucket width in ms. */
  interval?: number;
}

export interface UsageRow {
  /** Bucket start (Unix ms), with an interval. */
  start?: number;
  /** The group's value (null: requests without one, e.g. no user header). */
  group?: string | null;
  requests: number;
  errors: number;
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  images: number;
  web_searches: number;
  /** Null when no request in the row had a cost. */
  cost_usd: number | null;
}

/**
 * The aggregate query of GET /admin/usage, for a backend's placeholders
 * (`?` for SQLite, `$n` for PostgreSQL). Only whitelisted column names are
 * ever put in the SQL text; values go as parameters.
 */
export function aggregateSql(table: string, q: UsageQuery, placeholder: (i: number) => string, int: (expr: string) => string, real: (expr: string) => string): { sql: string; params: number[] } {
  const params: number[] = [q.from, q.to];
  const select: string[] = [];
  const group: string[] = [];
  if (q.interval) {
    params.push(q.interval);
    const i = `CAST(${placeholder(3)} AS BIGINT)`;
    select.push(`${int(`(time / ${i}) * ${i}`)} AS start`);
    group.push('start');
  }
  if (q.group) {
    select.push(`${GROUPS[q.group]} AS grp`);
    group.push('grp');
  }
  const sum = (c: string) => `${int(`COALESCE(SUM(${c}), 0)`)} AS ${c}`;
  select.push(
    `${int('COUNT(*)')} AS requests`,
    `${int('COALESCE(SUM(error), 0)')} AS errors`,
    ...['input_tokens', 'cached_input_tokens', 'cache_write_tokens', 'output_tokens', 'reasoning_tokens', 'images', 'web_searches'].map(sum),
    `${real('SUM(cost_usd)')} AS cost_usd`,
  );
  const sql =
    `SELECT ${select.join(', ')} FROM ${table} WHERE time >= ${placeholder(1)} AND time < ${placeholder(2)}` +
    (group.length ? ` GROUP BY ${group.join(', ')} ORDER BY ${group.join(', ')}` : '');
  return { sql, params };
}

/** A result row of aggregateSql as a UsageRow. */
export function usageRow(r: Record<string, unknown>, q: UsageQuery): UsageRow {
  const num = (x: unknown) => Number(x ?? 0);
  const out: UsageRow = {
    requests: num(r.requests),
    errors: num(r.errors),
    input_tokens: num(r.input_tokens),
    cached_input_tokens: num(r.cached_input_tokens),
    cache_write_tokens: num(r.cache_write_tokens),
    output_tokens: num(r.output_tokens),
    reasoning_tokens: num(r.reasoning_tokens),
    images: num(r.images),
    web_searches: num(r.web_searches),
    cost_usd: r.cost_usd === null || r.cost_usd === undefined ? null : Math.round(Number(r.cost_usd) * 1e9) / 1e9,
  };
  if (q.interval) out.start = num(r.start);
  if (q.group) out.group = r.grp === null || r.grp === undefined ? null : String(r.grp);
  return out;
}

/** The percentiles GET /admin/usage/latency reports (nearest rank), in per mille. */
export const PERCENTILES = { p50: 500, p90: 900, p95: 950, p99: 990 } as const;

/** Percentiles of one measure (ms); null where the row has no value of it. */
export type Percentiles = Record<keyof typeof PERCENTILES | 'max', number | null>;

export interface LatencyRow {
  start?: number;
  group?: string | null;
  /** The requests measured: those answered without an error (status < 400, stream not broken). */
  requests: number;
  latency_ms: Percentiles;
  /** Over the requests that have a time to first byte. */
  ttfb_ms: Percentiles;
}

/**
 * The percentile query of GET /admin/usage/latency: latency and time to first
 * byte, nearest rank (the smallest value at or above the given fraction of
 * the sorted values), per bucket and group, over the requests answered
 * without an error. Window functions only, so that SQLite and PostgreSQL
 * compute the same numbers; integer arithmetic (per mille), no float rounding.
 */
export function percentileSql(table: string, q: UsageQuery, placeholder: (i: number) => string): { sql: string; params: number[] } {
  const params: number[] = [q.from, q.to];
  const parts: string[] = [];
  const cols: string[] = [];
  if (q.interval) {
    params.push(q.interval);
    const i = `CAST(${placeholder(3)} AS BIGINT)`;
    parts.push(`(time / ${i}) * ${i}`);
    cols.push('start');
  }
  if (q.group) {
    parts.push(GROUPS[q.group]);
    cols.push('grp');
  }
  const by = parts.length ? `PARTITION BY ${parts.join(', ')}` : '';
  const inner = [
    ...(q.interval ? [`${parts[0]} AS start`] : []),
    ...(q.group ? [`${GROUPS[q.group]} AS grp`] : []),
    'latency_ms',
    'ttfb_ms',
    `ROW_NUMBER() OVER (${by} ORDER BY latency_ms) AS lrn`,
    `COUNT(*) OVER (${by}) AS ln`,
    `ROW_NUMBER() OVER (PARTITION BY ${[...parts, '(ttfb_ms IS NULL)'].join(', ')} ORDER BY ttfb_ms) AS trn`,
    `COUNT(ttfb_ms) OVER (${by}) AS tn`,
  ];
  const outer = [...cols, 'MAX(ln) AS requests'];
  for (const [name, pm] of Object.entries(PERCENTILES)) {
    outer.push(`MIN(CASE WHEN lrn * 1000 >= ${pm} * ln THEN latency_ms END) AS latency_${name}`);
    outer.push(`MIN(CASE WHEN ttfb_ms IS NOT NULL AND trn * 1000 >= ${pm} * tn THEN ttfb_ms END) AS ttfb_${name}`);
  }
  outer.push('MAX(latency_ms) AS latency_max', 'MAX(ttfb_ms) AS ttfb_max');
  const sql =
    `WITH r AS (SELECT ${inner.join(', ')} FROM ${table} WHERE time >= ${placeholder(1)} AND time < ${placeholder(2)} AND error = 0 AND status < 400) ` +
    `SELECT ${outer.join(', ')} FROM r` +
    (cols.length ? ` GROUP BY ${cols.join(', ')} ORDER BY ${cols.join(', ')}` : '');
  return { sql, params };
}

/** A result row of percentileSql as a LatencyRow. */
export function latencyRow(r: Record<string, unknown>, q: UsageQuery): LatencyRow {
  const n = (x: unknown) => (x === null || x === undefined ? null : Number(x));
  const pick = (prefix: string): Percentiles => {
    const out = {} as Percentiles;
    for (const name of [...Object.keys(PERCENTILES), 'max'] as (keyof Percentiles)[]) out[name] = n(r[`${prefix}_${name}`]);
    return out;
  };
  const out: LatencyRow = { requests: Number(r.requests ?? 0), latency_ms: pick('latency'), ttfb_ms: pick('ttfb') };
  if (q.interval) out.start = Number(r.start);
  if (q.group) out.group = r.grp === null || r.grp === undefined ? null : String(r.grp);
  return out;
}

export interface RecentQuery {
  /** Only failed requests (isError). */
  errors?: boolean;
  limit: number;
  from: number;
  to: number;
}

/** A backend: every method is asynchronous and none blocks the event loop. */
export interface UsageBackend {
  readonly kind: 'sqlite' | 'postgres';
  write(rows: Row[]): Promise<void>;
  aggregate(q: UsageQuery): Promise<UsageRow[]>;
  /** Latency and time-to-first-byte percentiles (percentileSql). */
  percentiles(q: UsageQuery): Promise<LatencyRow[]>;
  /** The most recent records (newest first), as column -> value. */
  recent(q: RecentQuery): Promise<Record<string, unknown>[]>;
  /** Delete records older than `before` (Unix ms); the number deleted. */
  prune(before: number): Promise<number>;
  close(): Promise<void>;
}

export interface RecorderStats {
  written: number;
  dropped: number;
  queued: number;
}

type UsageOptions = GatewayConfig['storage']['usage'];

/**
 * The bounded queue in front of a backend. `record()` is O(1) and never
 * waits: a full queue drops the record. One write at a time, of up to
 * `batch_size` rows, when a batch is full or `flush_ms` after the first
 * record waiting; a write that fails or outlasts `write_timeout_ms` drops its
 * rows. Dropped records are counted and logged (at most every 10 s).
 */
export class UsageRecorder {
  private queue: Row[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private pruner: NodeJS.Timeout | undefined;
  /** The first prune waits for the first batch written. */
  private pruneAfterWrite = false;
  private closed = false;
  private droppedSinceLog = 0;
  private lastDropLog = 0;
  readonly stats: RecorderStats = { written: 0, dropped: 0, queued: 0 };
  /** Called with the number of records dropped (metrics). */
  onDrop?: (n: number) => void;

  /** Where records are written; until it is attached (a database still connecting), they wait in the queue. */
  backend: UsageBackend | undefined;

  constructor(
    private readonly opts: UsageOptions,
    private readonly logger: Logger,
  ) {}

  /**
   * The backend is open: write what waited, and prune old records after the
   * first batch is written, then hourly (not at once: the SQLite store starts
   * its thread on its first call, and an idle gateway has written nothing).
   */
  attach(backend: UsageBackend): void {
    this.backend = backend;
    if (this.opts.retention_days > 0) {
      this.pruneAfterWrite = true;
      this.pruner = setInterval(() => void this.prune(), 3_600_000);
      this.pruner.unref();
    }
    this.kick();
  }

  /** A finished request's record: queued, or dropped when the queue is full. Never waits. */
  record(r: RequestRecord): void {
    if (this.closed) return;
    if (this.queue.length >= this.opts.queue_size) return this.drop(1, 'the usage queue is full (storage.usage.queue_size)');
    this.queue.push(toRow(r));
    this.stats.queued = this.queue.length;
    if (this.queue.length >= this.opts.batch_size) this.kick();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.kick(), this.opts.flush_ms);
      this.timer.unref();
    }
  }

  private drop(n: number, why: string, err?: unknown): void {
    this.stats.dropped += n;
    this.droppedSinceLog += n;
    this.onDrop?.(n);
    const now = Date.now();
    if (now - this.lastDropLog >= 10_000 || err) {
      this.logger.warn({ dropped: this.droppedSinceLog, dropped_total: this.stats.dropped, err }, `usage records dropped: ${why}`);
      this.lastDropLog = now;
      this.droppedSinceLog = 0;
    }
  }

  /** Start a write if none is running. */
  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.writing || !this.queue.length || !this.backend) return;
    this.writing = this.writeBatch().finally(() => {
      this.writing = undefined;
      if (this.queue.length >= this.opts.batch_size || (this.closed && this.queue.length)) this.kick();
      else if (this.queue.length && !this.timer) {
        this.timer = setTimeout(() => this.kick(), this.opts.flush_ms);
        this.timer.unref();
      }
    });
  }

  private async writeBatch(): Promise<void> {
    const batch = this.queue.length <= this.opts.batch_size ? this.queue : this.queue.slice(0, this.opts.batch_size);
    this.queue = batch === this.queue ? [] : this.queue.slice(batch.length);
    this.stats.queued = this.queue.length;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.backend!.write(batch),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the write took longer than ${this.opts.write_timeout_ms} ms`)), this.opts.write_timeout_ms);
        }),
      ]);
      this.stats.written += batch.length;
      if (this.pruneAfterWrite) {
        this.pruneAfterWrite = false;
        void this.prune();
      }
    } catch (err) {
      this.drop(batch.length, 'the usage store failed to write them', err);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Hands this recorder the records finished but not yet recorded (RecordFinisher.drain): flush() calls it first. */
  drainFirst?: () => void;

  /** Write what is queued now (tests, shutdown); resolves when it is written or dropped. */
  async flush(): Promise<void> {
    this.drainFirst?.();
    while (this.backend && (this.writing || this.queue.length)) {
      if (!this.writing) this.kick();
      await this.writing;
    }
  }

  async prune(): Promise<void> {
    if (this.opts.retention_days <= 0 || this.closed || !this.backend) return;
    try {
      const n = await this.backend.prune(Date.now() - this.opts.retention_days * 86_400_000);
      if (n) this.logger.info({ deleted: n, retention_days: this.opts.retention_days }, 'old usage records deleted');
    } catch (err) {
      this.logger.error({ err }, 'deleting old usage records failed');
    }
  }

  /** Write what is queued (bounded by write_timeout_ms), then close the backend. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.pruner) clearInterval(this.pruner);
    await this.flush();
    if (this.queue.length) this.drop(this.queue.length, 'the usage store never opened');
    await this.backend?.close();
  }
}

/** The backend `storage` names: PostgreSQL for a postgres:// `url`, else the SQLite file `usage.db`. */
export async function openUsageBackend(config: GatewayConfig): Promise<UsageBackend> {
  const { url, usage } = config.storage;
  if (url) {
    const { openPostgresUsage } = await import('./usage-pg.js');
    return openPostgresUsage(url, usage.table);
  }
  const { openSqliteUsage } = await import('./usage-sqlite.js');
  return openSqliteUsage(usage.db, usage.table, config.dir);
}
