// Stored responses (`store: true`), for GET/DELETE /v1/responses/{id},
// `previous_response_id` and `item_reference` inputs, behind one small
// asynchronous interface with two backends, chosen by `storage`:
// - PostgreSQL when `storage.url` names one (responses-pg.ts): every replica
//   of a fleet reads what any of them stored;
// - else the embedded SQLite file `storage.responses_db`, through
//   `node:sqlite` (built into Node 24: no native addon), in WAL mode so that
//   several worker processes can share one file (https://www.sqlite.org/wal.html).
//
// node:sqlite is synchronous: a write that waits for another connection's
// lock (another process, a backup holding the file) blocked the event loop,
// and every request of the process with it, for the whole busy timeout. The
// connection lives in a worker thread (sqlite-worker.ts) instead; this side
// posts each operation with a deadline and never waits longer than that, and
// a bounded number of operations may wait at once.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { StoreReply, StoreRequest } from './sqlite-worker.js';
import type { GatewayConfig } from '../config/load.js';
import { openPostgresResponseStore } from './responses-pg.js';

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

/** One turn of a stored conversation: what `previous_response_id` replays. */
export type StoredTurn = Pick<StoredResponse, 'id' | 'previous_response_id' | 'input' | 'output'>;

export interface ResponseStore {
  put(r: StoredResponse): Promise<void>;
  /** Undefined when the id is unknown or belongs to another owner. */
  get(id: string, owner: string): Promise<StoredResponse | undefined>;
  /**
   * The owner's stored turns along the chain of `previous_response_id`s that
   * starts at `id`, newest first, in one operation: empty when `id` itself is
   * not the owner's; a turn that is missing (deleted, another owner's) ends
   * the chain, and so does one already in it; at most `max` turns.
   */
  chain(id: string, owner: string, max: number): Promise<StoredTurn[]>;
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

/** A store operation that did not complete: timed out, locked out, queue full, database unreachable, closed, or failed in the database. */
export class StoreError extends Error {
  constructor(
    message: string,
    /** STORE_TIMEOUT, STORE_LOCKED, STORE_BUSY (too many waiting), STORE_UNAVAILABLE (the database cannot be reached), STORE_CLOSED or STORE_FAILED. */
    readonly code: string,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

export interface StoreOptions {
  /** Longest an operation may take, waiting for a lock included (ms). */
  timeoutMs?: number;
  /** Operations that may wait at once; more fail at once with STORE_BUSY. */
  maxPending?: number;
}

/** Defaults: a stored response is written in well under a millisecond; 2 s is a lock held by someone else. */
export const STORE_TIMEOUT_MS = 2_000;
export const STORE_MAX_PENDING = 1_000;
/** The store's thread loads in well under a second; on a host too busy to start it within this, operations fail. */
const STORE_START_MS = 10_000;
/** The worker's answer may trail the operation's deadline by its message; past this margin the caller stops waiting. */
const REPLY_MARGIN_MS = 250;

/**
 * The store `storage` names: PostgreSQL for a postgres:// `url` (tables
 * created on first use), else the SQLite file `responses_db` (relative to the
 * config's directory). Nothing connects or opens a file until an operation.
 */
export function openResponseStore(config: GatewayConfig): ResponseStore {
  const { url, responses_db, responses_table, responses_timeout_ms } = config.storage;
  const opts = { timeoutMs: responses_timeout_ms };
  return url ? openPostgresResponseStore(url, responses_table, opts) : openSqliteResponseStore(responses_db, config.dir, opts);
}

/**
 * Open (creating if needed) the SQLite store at `file`; `:memory:` keeps it in
 * the store's thread. A relative path is resolved against `baseDir` (the
 * directory of gateway.yaml), and the directory is created. The database is
 * opened by the thread on first use; an open that fails is tried again by the
 * next operation.
 */
export function openSqliteResponseStore(file: string, baseDir = process.cwd(), opts: StoreOptions = {}): ResponseStore {
  const memory = file === ':memory:';
  const where = memory ? file : path.resolve(baseDir, file);
  if (!memory) mkdirSync(path.dirname(where), { recursive: true });
  const timeoutMs = opts.timeoutMs ?? STORE_TIMEOUT_MS;
  const maxPending = opts.maxPending ?? STORE_MAX_PENDING;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  let nextId = 1;
  let worker: Worker | undefined;
  /** Settles when the thread has loaded (or failed to): an operation's deadline starts then, not while a busy host starts a thread. */
  let ready: Promise<void> = Promise.resolve();
  /** Operations waiting for the thread to load (they count toward maxPending). */
  let starting = 0;
  let closed = false;

  const settle = (id: number, fn: (p: { resolve(v: unknown): void; reject(e: Error): void }) => void) => {
    const p = pending.get(id);
    if (!p) return; // given up on already
    pending.delete(id);
    clearTimeout(p.timer);
    fn(p);
  };
  const failAll = (err: StoreError) => {
    for (const id of [...pending.keys()]) settle(id, (p) => p.reject(err));
  };
  const start = (): Worker => {
    const w = new Worker(new URL('./sqlite-worker.js', import.meta.url), { workerData: { where } });
    // The thread alone does not keep the process alive: a pending operation's timer does.
    w.unref();
    let loaded: () => void = () => {};
    let failed: (err: StoreError) => void = () => {};
    ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => failed(new StoreError(`the response store's thread did not start within ${STORE_START_MS} ms`, 'STORE_TIMEOUT')), STORE_START_MS);
      loaded = () => {
        clearTimeout(timer);
        resolve();
      };
      failed = (err) => {
        clearTimeout(timer);
        reject(err);
      };
    });
    ready.catch(() => {});
    w.on('message', (m: StoreReply | { ready: true }) => {
      if ('ready' in m) loaded();
      else settle(m.id, (p) => (m.ok ? p.resolve(m.value) : p.reject(new StoreError(`the response store: ${m.message}`, m.code))));
    });
    w.on('error', (err) => {
      const e = new StoreError(`the response store's thread failed: ${err.message}`, 'STORE_FAILED');
      failed(e);
      failAll(e);
    });
    w.on('exit', () => {
      if (worker === w) worker = undefined; // the next operation starts another
      const e = new StoreError("the response store's thread stopped", 'STORE_FAILED');
      failed(e);
      failAll(e);
    });
    return w;
  };
  const call = async <T>(op: StoreRequest['op'], args: unknown[]): Promise<T> => {
    if (closed) throw new StoreError('the response store is closed', 'STORE_CLOSED');
    if (pending.size + starting >= maxPending) throw new StoreError(`the response store has ${pending.size + starting} operations waiting`, 'STORE_BUSY');
    worker ??= start();
    const w = worker;
    starting++;
    try {
      await ready; // bounded: STORE_START_MS
    } finally {
      starting--;
    }
    if (closed || worker !== w) throw new StoreError('the response store is closed', 'STORE_CLOSED');
    const id = nextId++;
    const msg: StoreRequest = { id, op, args, deadline: Date.now() + timeoutMs };
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => settle(id, (p) => p.reject(new StoreError(`the response store did not answer within ${timeoutMs} ms`, 'STORE_TIMEOUT'))),
        timeoutMs + REPLY_MARGIN_MS,
      );
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      w.postMessage(msg);
    });
  };

  return {
    put: (r) => call<void>('put', [r]),
    get: (id, owner) => call<StoredResponse | undefined>('get', [id, owner]),
    chain: (id, owner, max) => call<StoredTurn[]>('chain', [id, owner, max]),
    items: (ids, owner) => call<Map<string, Record<string, unknown>>>('items', [ids, owner]),
    delete: (id, owner) => call<boolean>('delete', [id, owner]),
    async close() {
      if (closed) return;
      closed = true;
      const w = worker;
      worker = undefined;
      failAll(new StoreError('the response store is closed', 'STORE_CLOSED'));
      if (!w) return;
      // The thread closes the database and ends; one that does not within a second is stopped.
      const exited = new Promise<void>((r) => w.once('exit', () => r()));
      w.postMessage({ op: 'close' });
      const t = setTimeout(() => void w.terminate(), 1000);
      await exited;
      clearTimeout(t);
    },
  };
}
