// Stored responses in PostgreSQL (storage.url), so that every replica of a
// fleet finds what any of them stored: `previous_response_id`,
// GET/DELETE /v1/responses/{id} and `item_reference` work whichever replica
// served the earlier turn.
//
// Through `pg`'s pool: asynchronous I/O, the event loop never waits on it.
// Each operation is one statement (a put writes the response and indexes its
// output items atomically in one round trip; a conversation's chain is one
// recursive query), and every wait is bounded by storage.responses_timeout_ms:
// the wait for a connection (the pool's queue included), and the statement
// itself (`statement_timeout` and `lock_timeout` on the server, a read
// timeout on this side a little later). So a put the server did not commit
// within its timeout is cancelled there, not committed after the gateway has
// answered `store: false`. At most `maxPending` operations wait at once.
//
// The tables are created, and migrated, by the first operation (pg-migrate.ts;
// a failed attempt is made again by the next one): a gateway that never
// stores a response connects to nothing for it.
import type pg from 'pg';
import { migrate } from './pg-migrate.js';
import { StoreError, STORE_MAX_PENDING, STORE_TIMEOUT_MS, type ResponseStore, type StoredResponse, type StoredTurn, type StoreOptions } from './responses.js';

/** Schema versions of `<table>` and `<table>_items`, applied in order, each once. */
const MIGRATIONS = (t: string): string[] => [
  `CREATE TABLE IF NOT EXISTS ${t} (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    model TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    previous_response_id TEXT,
    input TEXT NOT NULL,
    output TEXT NOT NULL,
    response TEXT NOT NULL
  );
  CREATE TABLE IF NOT EXISTS ${t}_items (
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (owner, id)
  );
  CREATE INDEX IF NOT EXISTS ${t}_items_resp ON ${t}_items (owner, response_id)`,
];

/** Connections per process: operations beyond it wait in the pool's queue (bounded by the timeout). */
const POOL_SIZE = 10;
/** The read timeout on this side trails the server's statement timeout by this much. */
const REPLY_MARGIN_MS = 250;

// JSON columns are TEXT, not JSONB: a stored response comes back byte for byte
// as it was answered (JSONB would reorder its keys).
interface Row {
  id: string;
  owner: string;
  model: string;
  created_at: string | number;
  previous_response_id: string | null;
  input: string;
  output: string;
  response: string;
}

/** A failure of `pg` as a StoreError whose message names neither a host nor a credential. */
function storeError(err: unknown): StoreError {
  if (err instanceof StoreError) return err;
  const e = err as { code?: string; message?: string };
  const msg = e?.message ?? String(err);
  // SQLSTATE: 57014 query_canceled (statement_timeout), 55P03 lock_not_available (lock_timeout).
  if (e?.code === '57014' || msg === 'Query read timeout') return new StoreError('PostgreSQL did not answer within the timeout', 'STORE_TIMEOUT');
  if (e?.code === '55P03') return new StoreError('PostgreSQL: the rows stayed locked by another connection until the timeout', 'STORE_LOCKED');
  if (/timeout exceeded when trying to connect/i.test(msg)) return new StoreError('no PostgreSQL connection could be had within the timeout', 'STORE_TIMEOUT');
  // Socket errors (ECONNREFUSED, ENOTFOUND, ...), a connection that ended, the server shutting down (57P0x), too many clients (53300).
  if ((e?.code && /^(E[A-Z]+|57P0\d|53300|08\w{3})$/.test(e.code)) || /Connection terminated|connection.*(closed|ended)/i.test(msg))
    return new StoreError(`PostgreSQL is unreachable (${e?.code ?? 'connection ended'})`, 'STORE_UNAVAILABLE');
  // A server-side error: its message is the server's (no address in it).
  return new StoreError(`PostgreSQL: ${e?.code && /^[0-9A-Z]{5}$/.test(e.code) ? msg : 'the operation failed'}`, 'STORE_FAILED');
}

const turnOf = (r: Pick<Row, 'id' | 'previous_response_id' | 'input' | 'output'>): StoredTurn => ({
  id: r.id,
  previous_response_id: r.previous_response_id,
  input: JSON.parse(r.input),
  output: JSON.parse(r.output),
});

/** The store on the database at `url`, tables `table` and `<table>_items` (created on first use). */
export function openPostgresResponseStore(url: string, table: string, opts: StoreOptions = {}): ResponseStore {
  const timeoutMs = opts.timeoutMs ?? STORE_TIMEOUT_MS;
  const maxPending = opts.maxPending ?? STORE_MAX_PENDING;
  const items = `${table}_items`;
  let pool: pg.Pool | undefined;
  /** The pool, with the tables migrated; undefined until an operation asks, and again after a failed attempt. */
  let ready: Promise<pg.Pool> | undefined;
  /** The pool once ready resolved (no race with a timer then). */
  let opened: pg.Pool | undefined;
  let pending = 0;
  let closed = false;

  const connect = async (): Promise<pg.Pool> => {
    if (!pool) {
      const { default: PG } = await import('pg');
      if (closed) throw new StoreError('the response store is closed', 'STORE_CLOSED');
      pool = new PG.Pool({
        connectionString: url,
        max: POOL_SIZE,
        connectionTimeoutMillis: timeoutMs,
        idleTimeoutMillis: 30_000,
        statement_timeout: timeoutMs,
        lock_timeout: timeoutMs,
        query_timeout: timeoutMs + REPLY_MARGIN_MS,
        keepAlive: true,
        application_name: 'model-gateway',
      });
      // An idle client that errors (the server restarted) must not crash the process.
      pool.on('error', () => {});
    }
    const client = await pool.connect();
    try {
      await migrate(client, table, MIGRATIONS(table));
      client.release();
    } catch (err) {
      client.release(err as Error);
      throw err;
    }
    // Closed meanwhile (a shutdown during the first operation): close() found no pool to end, or ended this one.
    if (closed) {
      const p = pool;
      pool = undefined;
      await p?.end().catch(() => undefined);
      throw new StoreError('the response store is closed', 'STORE_CLOSED');
    }
    opened = pool;
    return pool;
  };

  /** Run `fn` on the pool, within the bounds above; its failures as StoreErrors. */
  const run = async <T>(fn: (p: pg.Pool) => Promise<T>): Promise<T> => {
    if (closed) throw new StoreError('the response store is closed', 'STORE_CLOSED');
    if (pending >= maxPending) throw new StoreError(`the response store has ${pending} operations waiting`, 'STORE_BUSY');
    pending++;
    try {
      if (opened) return await fn(opened);
      if (!ready) {
        const attempt = connect();
        ready = attempt;
        // A failed attempt is made again by the next operation.
        attempt.catch(() => {
          if (ready === attempt) ready = undefined;
        });
      }
      let timer: NodeJS.Timeout | undefined;
      // The tables' creation may take longer than this operation may wait (another replica migrating): it goes on for the next one.
      const p = await Promise.race([
        ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new StoreError(`the response store's tables were not ready within ${timeoutMs} ms`, 'STORE_TIMEOUT')), timeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
      if (closed) throw new StoreError('the response store is closed', 'STORE_CLOSED');
      return await fn(p);
    } catch (err) {
      throw storeError(err);
    } finally {
      pending--;
    }
  };

  return {
    put: (r) =>
      run(async (p) => {
        // Output items by id, the last of a repeated id kept (as SQLite's INSERT OR REPLACE does).
        const byId = new Map<string, string>();
        for (const it of r.output) if (typeof it.id === 'string' && it.id) byId.set(it.id, JSON.stringify(it));
        // One statement, so one transaction: the response (replaced if its id exists), its new items, and the
        // items a replaced response no longer has deleted (never a row both deleted and written).
        await p.query(
          `WITH r AS (
             INSERT INTO ${table} (id, owner, model, created_at, previous_response_id, input, output, response)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, model = excluded.model, created_at = excluded.created_at,
               previous_response_id = excluded.previous_response_id, input = excluded.input, output = excluded.output, response = excluded.response
           ), d AS (
             DELETE FROM ${items} WHERE owner = $2 AND response_id = $1 AND NOT (id = ANY($9::text[]))
           )
           INSERT INTO ${items} (owner, id, response_id, item)
           SELECT $2, u.id, $1, u.item FROM unnest($9::text[], $10::text[]) AS u(id, item)
           ON CONFLICT (owner, id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item`,
          [r.id, r.owner, r.model, r.created_at, r.previous_response_id, JSON.stringify(r.input), JSON.stringify(r.output), JSON.stringify(r.response), [...byId.keys()], [...byId.values()]],
        );
      }),
    get: (id, owner) =>
      run(async (p) => {
        const row = (await p.query<Row>(`SELECT * FROM ${table} WHERE id = $1 AND owner = $2`, [id, owner])).rows[0];
        if (!row) return undefined;
        return { ...turnOf(row), owner: row.owner, model: row.model, created_at: Number(row.created_at), response: JSON.parse(row.response) } satisfies StoredResponse;
      }),
    chain: (id, owner, max) =>
      run(async (p) => {
        // Newest first; the depth bound ends a cycle (ids are unique, so only a replaced response could make one).
        const { rows } = await p.query<Row & { depth: number }>(
          `WITH RECURSIVE c AS (
             SELECT id, previous_response_id, input, output, 1 AS depth FROM ${table} WHERE id = $1 AND owner = $2
             UNION ALL
             SELECT r.id, r.previous_response_id, r.input, r.output, c.depth + 1 FROM ${table} r JOIN c ON r.id = c.previous_response_id
             WHERE r.owner = $2 AND c.depth < $3
           )
           SELECT id, previous_response_id, input, output FROM c ORDER BY depth`,
          [id, owner, max],
        );
        const seen = new Set<string>();
        const turns: StoredTurn[] = [];
        for (const row of rows) {
          if (seen.has(row.id)) break;
          seen.add(row.id);
          turns.push(turnOf(row));
        }
        return turns;
      }),
    items: (ids, owner) =>
      run(async (p) => {
        const { rows } = await p.query<{ id: string; item: string }>(`SELECT id, item FROM ${items} WHERE owner = $1 AND id = ANY($2::text[])`, [owner, [...new Set(ids)]]);
        return new Map(rows.map((r) => [r.id, JSON.parse(r.item) as Record<string, unknown>]));
      }),
    delete: (id, owner) =>
      run(async (p) => {
        const { rows } = await p.query<{ n: number }>(
          `WITH d AS (DELETE FROM ${table} WHERE id = $1 AND owner = $2 RETURNING id), i AS (DELETE FROM ${items} WHERE owner = $2 AND response_id = $1)
           SELECT count(*)::int AS n FROM d`,
          [id, owner],
        );
        return rows[0].n > 0;
      }),
    async close() {
      if (closed) return;
      closed = true;
      const p = pool;
      pool = opened = undefined;
      // Operations under way end with their own timeouts; pool.end() waits for them.
      await p?.end().catch(() => undefined);
    },
  };
}
