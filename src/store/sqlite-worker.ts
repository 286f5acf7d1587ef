// The thread that owns the SQLite connection of a responses store
// (responses.ts starts it). SQLite's own busy wait is off (busy_timeout 0):
// a statement that finds another connection's lock fails at once with
// SQLITE_BUSY, and this thread tries it again a little later, until the
// operation's deadline, handling other messages meanwhile. So a write that
// waits for a lock held elsewhere (another process, a backup) holds up
// neither the gateway's event loop nor the reads behind it (in WAL mode a
// reader does not wait for a writer). Writes keep their order: they wait in
// one queue, the first one being retried. An operation whose deadline has
// passed is not run: the gateway has stopped waiting for it and told its
// client so (a response answered as not stored must not be stored later).
import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteDb, type SqliteDb } from './sqlite-db.js';

export interface StoreRequest {
  id: number;
  op: 'put' | 'get' | 'chain' | 'items' | 'delete';
  args: unknown[];
  /** Date.now() after which the operation is not started (or tried again). */
  deadline: number;
}
export type StoreReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; code: string; message: string };

const { where } = workerData as { where: string };
let db: SqliteDb | undefined;
/** Writes in order; the first is being tried (or waits for its next try). */
const writes: StoreRequest[] = [];
let retry: NodeJS.Timeout | undefined;
/** Next try of a locked-out statement: soon at first, then less often. */
const RETRY_MS = [2, 5, 10, 20, 50];

class Busy extends Error {}

function run(m: StoreRequest): unknown {
  try {
    // Opened on first use, and again after a failed open (a directory made writable, a lock gone).
    db ??= openSqliteDb(where, 0);
    const [a, b, c] = m.args as [never, string, number];
    switch (m.op) {
      case 'put':
        return db.put(a);
      case 'get':
        return db.get(a, b);
      case 'chain':
        return db.chain(a, b, c);
      case 'items':
        return db.items(a, b);
      case 'delete':
        return db.delete(a, b);
    }
  } catch (err) {
    // node:sqlite errors carry SQLite's result code: 5 SQLITE_BUSY, 6 SQLITE_LOCKED.
    const code = (err as { errcode?: number }).errcode;
    if (code === 5 || code === 6) throw new Busy((err as Error).message);
    throw err;
  }
}

const reply = (r: StoreReply) => parentPort!.postMessage(r);
const expired = (m: StoreRequest) =>
  reply({ id: m.id, ok: false, code: m.op === 'put' || m.op === 'delete' ? 'STORE_LOCKED' : 'STORE_TIMEOUT', message: `the database stayed locked by another connection until the operation's deadline` });

/** Run `m`; false when it found a lock (it is to be tried again). */
function attempt(m: StoreRequest): boolean {
  try {
    reply({ id: m.id, ok: true, value: run(m) });
  } catch (err) {
    if (err instanceof Busy) return false;
    reply({ id: m.id, ok: false, code: 'STORE_FAILED', message: (err as Error).message ?? String(err) });
  }
  return true;
}

/** Run the queued writes in order, until one finds a lock (then try it again later) or none are left. */
function drainWrites(tries = 0): void {
  retry = undefined;
  while (writes.length) {
    const m = writes[0];
    if (Date.now() >= m.deadline) {
      writes.shift();
      expired(m);
      continue;
    }
    if (!attempt(m)) {
      retry = setTimeout(() => drainWrites(tries + 1), RETRY_MS[Math.min(tries, RETRY_MS.length - 1)]);
      return;
    }
    writes.shift();
    tries = 0;
  }
}

/** A read that found a lock (rare in WAL mode: a checkpoint, a recovery): tried again until its deadline. */
function read(m: StoreRequest, tries = 0): void {
  if (Date.now() >= m.deadline) return expired(m);
  if (!attempt(m)) setTimeout(() => read(m, tries + 1), RETRY_MS[Math.min(tries, RETRY_MS.length - 1)]);
}

// Loaded: the gateway's side starts its operations' deadlines from here.
parentPort!.postMessage({ ready: true });

parentPort!.on('message', (m: StoreRequest | { op: 'close' }) => {
  if (m.op === 'close') {
    if (retry) clearTimeout(retry);
    db?.close();
    db = undefined;
    // Ends this thread only (whatever else its loop holds, e.g. a preloaded module's handle).
    process.exit(0);
  }
  if (m.op === 'put' || m.op === 'delete') {
    writes.push(m);
    if (writes.length === 1 && !retry) drainWrites();
  } else read(m);
});
