// The SQLite responses database itself, synchronous (node:sqlite's
// DatabaseSync). It runs only inside the store's worker thread
// (sqlite-worker.ts): a write that waits for another connection's lock, a WAL
// checkpoint or a slow disk blocks that thread, never the gateway's event loop.
import { createRequire } from 'node:module';
import type { StatementSync } from 'node:sqlite';
import type { StoredResponse, StoredTurn } from './responses.js';

interface Row {
  id: string;
  owner: string;
  model: string;
  created_at: number;
  previous_response_id: string | null;
  input: string;
  output: string;
  response: string;
}

export interface SqliteDb {
  put(r: StoredResponse): void;
  get(id: string, owner: string): StoredResponse | undefined;
  chain(id: string, owner: string, max: number): StoredTurn[];
  items(ids: string[], owner: string): Map<string, Record<string, unknown>>;
  delete(id: string, owner: string): boolean;
  close(): void;
}

/**
 * Open (creating the tables if needed) the database at `where` (a resolved
 * path whose directory exists, or `:memory:`). `busyTimeoutMs`: how long a
 * statement waits for another connection's lock before it fails with
 * SQLITE_BUSY (the store's thread uses 0 and tries again itself).
 */
export function openSqliteDb(where: string, busyTimeoutMs: number): SqliteDb {
  const memory = where === ':memory:';
  // Loaded on first use: node:sqlite needs Node >= 22.13, and a gateway that
  // never stores a response (or `check`/`schema`) must not depend on it.
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  const db = new DatabaseSync(where);
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    if (!memory) {
      db.exec('PRAGMA journal_mode = WAL');
      db.exec('PRAGMA synchronous = NORMAL');
    }
    db.exec(`CREATE TABLE IF NOT EXISTS responses (
      id TEXT PRIMARY KEY,
      owner TEXT NOT NULL,
      model TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      previous_response_id TEXT,
      input TEXT NOT NULL,
      output TEXT NOT NULL,
      response TEXT NOT NULL
    ) STRICT`);
    // Each stored response's output items by their id, for item_reference inputs.
    db.exec(`CREATE TABLE IF NOT EXISTS response_items (
      owner TEXT NOT NULL,
      id TEXT NOT NULL,
      response_id TEXT NOT NULL,
      item TEXT NOT NULL,
      PRIMARY KEY (owner, id)
    ) STRICT`);
    db.exec('CREATE INDEX IF NOT EXISTS response_items_by_response ON response_items (owner, response_id)');
  } catch (err) {
    db.close();
    throw err;
  }
  /** Run `fn` in one transaction: all of its writes, or none. */
  const transaction = (begin: 'BEGIN' | 'BEGIN IMMEDIATE', fn: () => void) => {
    db.exec(begin);
    try {
      fn();
      db.exec('COMMIT');
    } catch (err) {
      try {
        db.exec('ROLLBACK');
      } catch {
        /* BEGIN itself failed (the lock was not had): nothing to roll back */
      }
      throw err;
    }
  };
  // Schema version 1 added response_items: a store written by an earlier
  // version gets its responses' output items indexed once, on first open
  // (IMMEDIATE: two workers opening one file do not both do it).
  const version = () => Number((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version);
  try {
    // (Read first: a store already at version 1 is opened without taking the write lock.)
    if (version() < 1)
      transaction('BEGIN IMMEDIATE', () => {
        if (version() >= 1) return;
        db.exec(`INSERT OR IGNORE INTO response_items (owner, id, response_id, item)
          SELECT r.owner, json_extract(o.value, '$.id'), r.id, o.value
          FROM responses AS r, json_each(r.output) AS o
          WHERE json_type(o.value, '$.id') = 'text' AND json_extract(o.value, '$.id') <> ''`);
        db.exec('PRAGMA user_version = 1');
      });
  } catch (err) {
    db.close();
    throw err;
  }
  const stmts: { put: StatementSync; get: StatementSync; turn: StatementSync; del: StatementSync; putItem: StatementSync; getItem: StatementSync; delItems: StatementSync } = {
    put: db.prepare(
      'INSERT OR REPLACE INTO responses (id, owner, model, created_at, previous_response_id, input, output, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    get: db.prepare('SELECT * FROM responses WHERE id = ? AND owner = ?'),
    turn: db.prepare('SELECT id, previous_response_id, input, output FROM responses WHERE id = ? AND owner = ?'),
    del: db.prepare('DELETE FROM responses WHERE id = ? AND owner = ?'),
    putItem: db.prepare('INSERT OR REPLACE INTO response_items (owner, id, response_id, item) VALUES (?, ?, ?, ?)'),
    getItem: db.prepare('SELECT item FROM response_items WHERE owner = ? AND id = ?'),
    delItems: db.prepare('DELETE FROM response_items WHERE owner = ? AND response_id = ?'),
  };
  let open = true;
  return {
    put(r) {
      // IMMEDIATE: the write lock is taken (or waited for) up front, not half-way through.
      transaction('BEGIN IMMEDIATE', () => {
        stmts.put.run(r.id, r.owner, r.model, r.created_at, r.previous_response_id, JSON.stringify(r.input), JSON.stringify(r.output), JSON.stringify(r.response));
        stmts.delItems.run(r.owner, r.id); // a replaced response keeps only its new items
        for (const it of r.output) if (typeof it.id === 'string' && it.id) stmts.putItem.run(r.owner, it.id, r.id, JSON.stringify(it));
      });
    },
    items(ids, owner) {
      const found = new Map<string, Record<string, unknown>>();
      for (const id of new Set(ids)) {
        const row = stmts.getItem.get(owner, id) as { item: string } | undefined;
        if (row) found.set(id, JSON.parse(row.item));
      }
      return found;
    },
    get(id, owner) {
      const row = stmts.get.get(id, owner) as Row | undefined;
      if (!row) return undefined;
      return {
        id: row.id,
        owner: row.owner,
        model: row.model,
        created_at: row.created_at,
        previous_response_id: row.previous_response_id,
        input: JSON.parse(row.input),
        output: JSON.parse(row.output),
        response: JSON.parse(row.response),
      };
    },
    chain(id, owner, max) {
      const turns: StoredTurn[] = [];
      const seen = new Set<string>();
      for (let cur: string | null = id; cur && !seen.has(cur) && turns.length < max; ) {
        seen.add(cur);
        const row = stmts.turn.get(cur, owner) as Pick<Row, 'id' | 'previous_response_id' | 'input' | 'output'> | undefined;
        if (!row) break;
        turns.push({ id: row.id, previous_response_id: row.previous_response_id, input: JSON.parse(row.input), output: JSON.parse(row.output) });
        cur = row.previous_response_id;
      }
      return turns;
    },
    delete(id, owner) {
      let deleted = false;
      transaction('BEGIN IMMEDIATE', () => {
        stmts.delItems.run(owner, id);
        deleted = Number(stmts.del.run(id, owner).changes) > 0;
      });
      return deleted;
    },
    close() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}
