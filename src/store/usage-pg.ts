// The usage store in PostgreSQL (storage.url: postgres://…), through `pg`'s
// pool: asynchronous I/O, nothing on the event loop waits for it. The schema
// is created and migrated at start-up (pg-migrate.ts).
import pg from 'pg';
import { migrate } from './pg-migrate.js';
import { COLUMNS, aggregateSql, percentileSql, usageRow, latencyRow, type UsageBackend, type Row, type UsageQuery, type RecentQuery } from './usage.js';

const TEXT = new Set(['request_id', 'key_name', 'user_id', 'session_id', 'endpoint', 'model', 'requested_model', 'provider', 'deployment', 'error_type', 'usage_source']);
const NOT_NULL = new Set(['time', 'request_id', 'endpoint', 'usage_source']);
const type = (c: string) => (c === 'cost_usd' ? 'DOUBLE PRECISION' : c === 'time' ? 'BIGINT' : TEXT.has(c) ? 'TEXT' : 'BIGINT') + (NOT_NULL.has(c) ? ' NOT NULL' : '');

/** Schema versions, applied in order, each once. */
const MIGRATIONS = (t: string): string[] => [
  `CREATE TABLE IF NOT EXISTS ${t} (${COLUMNS.map((c) => `${c} ${type(c)}`).join(', ')})`,
  `CREATE INDEX IF NOT EXISTS ${t}_time ON ${t} (time)`,
];

/** Rows per INSERT statement (PostgreSQL takes at most 65535 parameters). */
const ROWS_PER_INSERT = Math.floor(65535 / COLUMNS.length);

export async function openPostgresUsage(url: string, table: string): Promise<UsageBackend> {
  const pool = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000, idleTimeoutMillis: 30_000, statement_timeout: 30_000, application_name: 'model-gateway' });
  // An idle client that errors (the server restarted) must not crash the process.
  pool.on('error', () => {});
  const client = await pool.connect();
  try {
    await migrate(client, table, MIGRATIONS(table));
  } finally {
    client.release();
  }
  const insert = (n: number) =>
    `INSERT INTO ${table} (${COLUMNS.join(', ')}) VALUES ` +
    Array.from({ length: n }, (_, r) => `(${COLUMNS.map((_c, i) => `$${r * COLUMNS.length + i + 1}`).join(', ')})`).join(', ');
  return {
    kind: 'postgres',
    async write(rows: Row[]) {
      for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
        const part = rows.slice(i, i + ROWS_PER_INSERT);
        await pool.query(insert(part.length), part.flat());
      }
    },
    async aggregate(q: UsageQuery) {
      const { sql, params } = aggregateSql(table, q, (i) => `$${i}`, (e) => `(${e})::bigint`, (e) => `(${e})::double precision`);
      const { rows } = await pool.query(sql, params);
      return rows.map((r) => usageRow(r, q));
    },
    async percentiles(q: UsageQuery) {
      const { sql, params } = percentileSql(table, q, (i) => `$${i}`);
      const { rows } = await pool.query(sql, params);
      return rows.map((r) => latencyRow(r, q));
    },
    async recent(q: RecentQuery) {
      const { rows } = await pool.query(`SELECT * FROM ${table} WHERE time >= $1 AND time < $2${q.errors ? ' AND error = 1' : ''} ORDER BY time DESC LIMIT $3`, [q.from, q.to, q.limit]);
      return rows.map((r) => {
        // BIGINT columns come back as strings: numbers here are far below 2^53.
        const out: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(r)) out[k] = typeof v === 'string' && !TEXT.has(k) ? Number(v) : v;
        return out;
      });
    },
    async prune(before: number) {
      return (await pool.query(`DELETE FROM ${table} WHERE time < $1`, [before])).rowCount ?? 0;
    },
    async close() {
      await pool.end();
    },
  };
}
