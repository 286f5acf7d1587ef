// Stored responses (`store: true`), for GET/DELETE /v1/responses/{id},
// `previous_response_id` and `item_reference` inputs. The interface is small
// and asynchronous so that another backend (Redis, Postgres...) can replace
// the embedded one; the built-in backend is SQLite through `node:sqlite`
// (built into Node 24: no native addon), in WAL mode so that several worker
// processes can share one file (https://www.sqlite.org/wal.html).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { StatementSync } from 'node:sqlite';

/** One stored response: what it was asked (its own input items only) and what it answered. */
export interface StoredResponse {
  id: string;
  /** The SHA-256 (hex) of the client key: responses are visible to that key only. */
  owner: string;
  /** The gateway model id that served it. */
  model: string;
  created_at: number;
  previous_response_id: string | null;
  /** This turn's input items (not the expanded history). */
  input: Record<string, unknown>[];
  output: Record<string, unknown>[];
  /** The response object as returned to the client (without `debug`). */
  response: Record<string, unknown>;
}

export interface ResponseStore {
  put(r: StoredResponse): Promise<void>;
  /** Undefined when the id is unknown or belongs to another owner. */
  get(id: string, owner: string): Promise<StoredResponse | undefined>;
  /**
   * Output items of the owner's stored responses, by item id, for `item_reference`
   * inputs (the Vercel AI SDK sends its earlier turns' output that way). Ids not
   * found are absent from the map.
   */
  items(ids: string[], owner: string): Promise<Map<string, Record<string, unknown>>>;
  /** False when the id is unknown or belongs to another owner. */
  delete(id: string, owner: string): Promise<boolean>;
  close(): Promise<void>;
}

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

/**
 * Open (creating if needed) the SQLite store at `file`; `:memory:` keeps it in
 * the process. A relative path is resolved against `baseDir` (the directory of
 * gateway.yaml), and the directory is created.
 */
export function openSqliteResponseStore(file: string, baseDir = process.cwd()): ResponseStore {
  const memory = file === ':memory:';
  const where = memory ? file : path.resolve(baseDir, file);
  if (!memory) mkdirSync(path.dirname(where), { recursive: true });
  // Loaded on first use: node:sqlite needs Node >= 22.13, and a gateway that
  // never stores a response (or `check`/`schema`) must not depend on it.
  const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  const db = new DatabaseSync(where);
  if (!memory) {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
  }
  db.exec('PRAGMA busy_timeout = 5000');
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
  /** Run `fn` in one transaction: all of its writes, or none. */
  const transaction = (begin: 'BEGIN' | 'BEGIN IMMEDIATE', fn: () => void) => {
    db.exec(begin);
    try {
      fn();
      db.exec('COMMIT');
    } catch (err) {
      db.exec('ROLLBACK');
      throw err;
    }
  };
  // Schema version 1 added response_items: a store written by an earlier
  // version gets its responses' output items indexed once, on first open
  // (IMMEDIATE: two workers opening one file do not both do it).
  transaction('BEGIN IMMEDIATE', () => {
    if (Number((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version) >= 1) return;
    db.exec(`INSERT OR IGNORE INTO response_items (owner, id, response_id, item)
      SELECT r.owner, json_extract(o.value, '$.id'), r.id, o.value
      FROM responses AS r, json_each(r.output) AS o
      WHERE json_type(o.value, '$.id') = 'text' AND json_extract(o.value, '$.id') <> ''`);
    db.exec('PRAGMA user_version = 1');
  });
  const stmts: { put: StatementSync; get: StatementSync; del: StatementSync; putItem: StatementSync; getItem: StatementSync; delItems: StatementSync } = {
    put: db.prepare(
      'INSERT OR REPLACE INTO responses (id, owner, model, created_at, previous_response_id, input, output, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    get: db.prepare('SELECT * FROM responses WHERE id = ? AND owner = ?'),
    del: db.prepare('DELETE FROM responses WHERE id = ? AND owner = ?'),
    putItem: db.prepare('INSERT OR REPLACE INTO response_items (owner, id, response_id, item) VALUES (?, ?, ?, ?)'),
    getItem: db.prepare('SELECT item FROM response_items WHERE owner = ? AND id = ?'),
    delItems: db.prepare('DELETE FROM response_items WHERE owner = ? AND response_id = ?'),
  };
  let open = true;
  return {
    async put(r) {
      transaction('BEGIN', () => {
        stmts.put.run(r.id, r.owner, r.model, r.created_at, r.previous_response_id, JSON.stringify(r.input), JSON.stringify(r.output), JSON.stringify(r.response));
        stmts.delItems.run(r.owner, r.id); // a replaced response keeps only its new items
        for (const it of r.output) if (typeof it.id === 'string' && it.id) stmts.putItem.run(r.owner, it.id, r.id, JSON.stringify(it));
      });
    },
    async items(ids, owner) {
      const found = new Map<string, Record<string, unknown>>();
      for (const id of new Set(ids)) {
        const row = stmts.getItem.get(owner, id) as { item: string } | undefined;
        if (row) found.set(id, JSON.parse(row.item));
      }
      return found;
    },
    async get(id, owner) {
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
    async delete(id, owner) {
      stmts.delItems.run(owner, id);
      return Number(stmts.del.run(id, owner).changes) > 0;
    },
    async close() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}
