// Runtime client keys (POST /admin/keys, `model-gateway keys create`), in the
// usage store's database: the SQLite file `storage.usage.db`, or PostgreSQL
// when `storage.url` names one; table `<storage.usage.table>_keys`. Only the
// SHA-256 of a key is stored. Requests never read this table: each process
// holds the active keys in memory (src/keys.ts) and reloads them when they
// change. docs/keys.md, "Runtime keys".
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { GatewayConfig } from '../config/load.js';
import type { PolicyConfig } from '../config/schema.js';

export type KeyPolicy = Omit<PolicyConfig, never>;

export interface StoredKey {
  name: string;
  /** SHA-256 of the key, hex. */
  sha256: string;
  policy: KeyPolicy;
  created_at: number;
  revoked_at: number | null;
}

export class KeyConflict extends Error {}

export interface KeyStore {
  kind: 'sqlite' | 'postgres';
  /** Adds a key; a KeyConflict when an active key has the name (a revoked one's row is replaced). */
  create(k: StoredKey): Promise<void>;
  /** Every key, revoked ones included, oldest first. */
  list(): Promise<StoredKey[]>;
  /** Marks the key revoked: false when no active key has the name. */
  revoke(name: string, at: number): Promise<boolean>;
  /** Changes whenever a key is created or revoked (cheap: polled every second). */
  version(): Promise<string>;
  close(): Promise<void>;
}

const NAME = /^[\w.-]{1,64}$/;
export const validKeyName = (s: string) => NAME.test(s);

interface Row {
  name: string;
  sha256: string;
  policy: string;
  created_at: number | string;
  revoked_at: number | string | null;
}
const fromRow = (r: Row): StoredKey => ({
  name: r.name,
  sha256: r.sha256,
  policy: JSON.parse(r.policy) as KeyPolicy,
  created_at: Number(r.created_at),
  revoked_at: r.revoked_at === null ? null : Number(r.revoked_at),
});

export function keysTable(config: GatewayConfig): string {
  return `${config.storage.usage.table}_keys`;
}

export async function openKeyStore(config: GatewayConfig): Promise<KeyStore> {
  const table = keysTable(config);
  if (config.storage.url) return openPostgresKeys(config.storage.url, table);
  return openSqliteKeys(config.storage.usage.db, table, config.dir);
}

/**
 * SQLite through node:sqlite on the calling thread, as the responses store
 * does: the table holds a few rows, read once a second (a version) and on a
 * change; the busy timeout is short so that a writer elsewhere never holds the
 * event loop long.
 */
export function openSqliteKeys(file: string, table: string, baseDir: string): KeyStore {
  const memory = file === ':memory:';
  const where = memory ? file : path.resolve(baseDir, file);
  if (!memory) mkdirSync(path.dirname(where), { recursive: true });
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  const db = new DatabaseSync(where);
  db.exec('PRAGMA busy_timeout = 200');
  if (!memory) db.exec('PRAGMA journal_mode = WAL');
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE, policy TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER, changed_at INTEGER NOT NULL)`);
  const q = {
    active: db.prepare(`SELECT name FROM ${table} WHERE name = ? AND revoked_at IS NULL`),
    upsert: db.prepare(`INSERT INTO ${table} (name, sha256, policy, created_at, revoked_at, changed_at) VALUES (?, ?, ?, ?, NULL, ?)
      ON CONFLICT(name) DO UPDATE SET sha256 = excluded.sha256, policy = excluded.policy, created_at = excluded.created_at, revoked_at = NULL, changed_at = excluded.changed_at`),
    list: db.prepare(`SELECT name, sha256, policy, created_at, revoked_at FROM ${table} ORDER BY created_at, name`),
    revoke: db.prepare(`UPDATE ${table} SET revoked_at = ?, changed_at = ? WHERE name = ? AND revoked_at IS NULL`),
    version: db.prepare(`SELECT count(*) AS n, coalesce(max(changed_at), 0) AS t, coalesce(sum(revoked_at IS NULL), 0) AS a FROM ${table}`),
  };
  return {
    kind: 'sqlite',
    async create(k) {
      db.exec('BEGIN IMMEDIATE');
      try {
        if (q.active.get(k.name)) throw new KeyConflict(`a key named '${k.name}' exists`);
        q.upsert.run(k.name, k.sha256, JSON.stringify(k.policy), k.created_at, k.created_at);
        db.exec('COMMIT');
      } catch (err) {
        db.exec('ROLLBACK');
        throw err;
      }
    },
    async list() {
      return (q.list.all() as unknown as Row[]).map(fromRow);
    },
    async revoke(name, at) {
      return Number(q.revoke.run(at, at, name).changes) > 0;
    },
    async version() {
      const r = q.version.get() as { n: number; t: number; a: number };
      return `${r.n}:${r.t}:${r.a}`;
    },
    async close() {
      if (db.isOpen) db.close();
    },
  };
}

export async function openPostgresKeys(url: string, table: string): Promise<KeyStore> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 5_000, idleTimeoutMillis: 30_000, statement_timeout: 5_000, application_name: 'model-gateway' });
  pool.on('error', () => {});
  await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE, policy TEXT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT, changed_at BIGINT NOT NULL)`);
  return {
    kind: 'postgres',
    async create(k) {
      // One statement: replaces a revoked row of the same name, never an active one.
      const r = await pool.query(
        `INSERT INTO ${table} (name, sha256, policy, created_at, revoked_at, changed_at) VALUES ($1, $2, $3, $4, NULL, $4)
         ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, policy = excluded.policy, created_at = excluded.created_at, revoked_at = NULL, changed_at = excluded.changed_at
         WHERE ${table}.revoked_at IS NOT NULL`,
        [k.name, k.sha256, JSON.stringify(k.policy), k.created_at],
      );
      if (r.rowCount === 0) throw new KeyConflict(`a key named '${k.name}' exists`);
    },
    async list() {
      return (await pool.query<Row>(`SELECT name, sha256, policy, created_at, revoked_at FROM ${table} ORDER BY created_at, name`)).rows.map(fromRow);
    },
    async revoke(name, at) {
      return ((await pool.query(`UPDATE ${table} SET revoked_at = $1, changed_at = $1 WHERE name = $2 AND revoked_at IS NULL`, [at, name])).rowCount ?? 0) > 0;
    },
    async version() {
      const r = (await pool.query<{ n: string; t: string; a: string }>(`SELECT count(*) AS n, coalesce(max(changed_at), 0) AS t, count(*) FILTER (WHERE revoked_at IS NULL) AS a FROM ${table}`)).rows[0];
      return `${r.n}:${r.t}:${r.a}`;
    },
    async close() {
      await pool.end();
    },
  };
}
