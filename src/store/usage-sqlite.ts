// The embedded usage store: SQLite through node:sqlite, in a worker thread
// (usage-sqlite-worker.ts) so that no statement runs on the event loop. The
// file is in WAL mode: several gateway processes (cluster workers) share it.
import { Worker } from 'node:worker_threads';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { usageRow, latencyRow, type UsageBackend, type Row, type UsageQuery, type RecentQuery, type UsageRow, type LatencyRow } from './usage.js';

/**
 * Open (creating if needed) the usage table in the SQLite file `file`
 * (`:memory:` keeps it in the worker's memory); a relative path is resolved
 * against `baseDir` (the directory of gateway.yaml).
 */
export async function openSqliteUsage(file: string, table: string, baseDir = process.cwd()): Promise<UsageBackend> {
  const memory = file === ':memory:';
  const where = memory ? file : path.resolve(baseDir, file);
  if (!memory) mkdirSync(path.dirname(where), { recursive: true });
  const worker = new Worker(new URL('./usage-sqlite-worker.js', import.meta.url), { workerData: { file: where, table } });
  worker.unref();
  let next = 0;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let failure: Error | undefined;
  const failAll = (err: Error) => {
    failure = err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('message', (m: { id: number; ok: boolean; result?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(`usage store: ${m.error}`));
  });
  worker.on('error', (err) => failAll(err));
  worker.on('exit', () => failAll(new Error('usage store: the SQLite worker has stopped')));
  const call = <T>(msg: Record<string, unknown>): Promise<T> => {
    if (failure) return Promise.reject(failure);
    const id = ++next;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ ...msg, id });
    });
  };
  // The table exists once the worker answers its first message.
  await call<number>({ op: 'prune', before: 0 });
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
        if (failure) return;
        await call<boolean>({ op: 'close' }).catch(() => undefined);
        await worker.terminate();
      })();
      return closed;
    },
  };
}
