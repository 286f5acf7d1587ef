// The embedded usage store: SQLite through node:sqlite, in a worker thread
// (usage-sqlite-worker.ts) so that no statement runs on the event loop. The
// file is in WAL mode: several gateway processes (cluster workers) share it.
import { Worker } from 'node:worker_threads';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { usageRow, latencyRow, type UsageBackend, type Row, type UsageQuery, type RecentQuery, type UsageRow, type LatencyRow } from './usage.js';

/** After the thread failed (the file cannot be opened, say), calls fail at once for this long before one starts it again. */
const RESTART_AFTER_MS = 30_000;

/**
 * The usage table in the SQLite file `file` (`:memory:` keeps it in the
 * worker's memory); a relative path is resolved against `baseDir` (the
 * directory of gateway.yaml), and the directory is created now. The worker
 * thread, which opens the file and creates the table, starts on the first
 * call (the first batch of records, or a query): an idle gateway holds no
 * thread (docs/performance.md, "Start-up"). A thread that fails is started
 * again by a call RESTART_AFTER_MS later.
 */
export async function openSqliteUsage(file: string, table: string, baseDir = process.cwd()): Promise<UsageBackend> {
  const memory = file === ':memory:';
  const where = memory ? file : path.resolve(baseDir, file);
  if (!memory) mkdirSync(path.dirname(where), { recursive: true });
  let worker: Worker | undefined;
  let next = 0;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let failure: { err: Error; at: number } | undefined;
  const failAll = (err: Error) => {
    failure = { err, at: Date.now() };
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const start = (): Worker => {
    const w = new Worker(new URL('./usage-sqlite-worker.js', import.meta.url), { workerData: { file: where, table } });
    w.unref();
    w.on('message', (m: { id: number; ok: boolean; result?: unknown; error?: string }) => {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(`usage store: ${m.error}`));
    });
    w.on('error', (err) => failAll(err));
    w.on('exit', () => {
      if (worker === w) worker = undefined;
      failAll(new Error('usage store: the SQLite worker has stopped'));
    });
    return w;
  };
  let closing = false;
  const call = <T>(msg: Record<string, unknown>): Promise<T> => {
    if (closing) return Promise.reject(new Error('usage store: closed'));
    if (!worker && failure && Date.now() - failure.at < RESTART_AFTER_MS) return Promise.reject(failure.err);
    const w = (worker ??= start());
    const id = ++next;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ ...msg, id });
    });
  };
  let closed: Promise<void> | undefined;
  return {
    kind: 'sqlite',
    async write(rows: Row[]) {
      await call<number>({ op: 'write', rows });
    },
    async aggregate(q: UsageQuery): Promise<UsageRow[]> {
      const rows = await call<Record<string, unknown>[]>({ op: 'aggregate', q });
      return rows.map((r) => usageRow(r, q));
    },
    async percentiles(q: UsageQuery): Promise<LatencyRow[]> {
      const rows = await call<Record<string, unknown>[]>({ op: 'percentiles', q });
      return rows.map((r) => latencyRow(r, q));
    },
    recent(q: RecentQuery) {
      return call<Record<string, unknown>[]>({ op: 'recent', q });
    },
    prune(before: number) {
      return call<number>({ op: 'prune', before });
    },
    close() {
      closed ??= (async () => {
        const w = worker;
        if (w) {
          await call<boolean>({ op: 'close' }).catch(() => undefined);
          await w.terminate();
        }
        closing = true;
      })();
      return closed;
    },
  };
}
