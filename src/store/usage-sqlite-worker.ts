// The SQLite usage store's worker thread: node:sqlite is synchronous, so every
// statement runs here, off the gateway's event loop (usage-sqlite.ts is the
// other side). One message in, one answer out, in order.
import { parentPort, workerData } from 'node:worker_threads';
import { DatabaseSync } from 'node:sqlite';
import { COLUMNS, aggregateSql, percentileSql, type Row, type UsageQuery, type RecentQuery } from './usage.js';

const { file, table } = workerData as { file: string; table: string };
const db = new DatabaseSync(file);
if (file !== ':memory:') {
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
}
// Several gateway processes may share the file: a writer waits for another's lock.
db.exec('PRAGMA busy_timeout = 30000');
const TYPES: Record<string, string> = { request_id: 'TEXT NOT NULL', endpoint: 'TEXT NOT NULL', usage_source: 'TEXT NOT NULL', cost_usd: 'REAL', time: 'INTEGER NOT NULL' };
const TEXT = new Set(['key_name', 'user_id', 'session_id', 'model', 'requested_model', 'provider', 'deployment', 'error_type']);
db.exec(`CREATE TABLE IF NOT EXISTS ${table} (${COLUMNS.map((c) => `${c} ${TYPES[c] ?? (TEXT.has(c) ? 'TEXT' : 'INTEGER')}`).join(', ')}) STRICT`);
db.exec(`CREATE INDEX IF NOT EXISTS ${table}_time ON ${table} (time)`);

const insert = db.prepare(`INSERT INTO ${table} (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`);
const prune = db.prepare(`DELETE FROM ${table} WHERE time < ?`);

type Message =
  | { id: number; op: 'write'; rows: Row[] }
  | { id: number; op: 'aggregate'; q: UsageQuery }
  | { id: number; op: 'percentiles'; q: UsageQuery }
  | { id: number; op: 'recent'; q: RecentQuery }
  | { id: number; op: 'prune'; before: number }
  | { id: number; op: 'close' };

function handle(m: Message): unknown {
  switch (m.op) {
    case 'write':
      db.exec('BEGIN IMMEDIATE');
      try {
        for (const row of m.rows) insert.run(...row);
        db.exec('COMMIT');
      } catch (err) {
        db.exec('ROLLBACK');
        throw err;
      }
      return m.rows.length;
    case 'aggregate': {
      const { sql, params } = aggregateSql(table, m.q, (i) => `?${i}`, (e) => e, (e) => e);
      return db.prepare(sql).all(...params);
    }
    case 'percentiles': {
      const { sql, params } = percentileSql(table, m.q, (i) => `?${i}`);
      return db.prepare(sql).all(...params);
    }
    case 'recent': {
      const where = `time >= ? AND time < ?${m.q.errors ? ' AND error = 1' : ''}`;
      return db.prepare(`SELECT * FROM ${table} WHERE ${where} ORDER BY time DESC LIMIT ?`).all(m.q.from, m.q.to, m.q.limit);
    }
    case 'prune':
      return Number(prune.run(m.before).changes);
    case 'close':
      db.close();
      return true;
  }
}

parentPort!.on('message', (m: Message) => {
  try {
    parentPort!.postMessage({ id: m.id, ok: true, result: handle(m) });
  } catch (err) {
    parentPort!.postMessage({ id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) });
  }
  if (m.op === 'close') parentPort!.close();
});
