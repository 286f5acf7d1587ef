// Preloaded (`node --import`) into a spawned gateway by test/startup.test.ts:
// records every module the process loads, and on SIGUSR2 writes them, with
// Node's built-ins and the worker threads started so far, as JSON to the file
// LOADED_MODULES_OUT names. A worker thread (which runs this preload too) only
// notes that it exists.
import module from 'node:module';
import { appendFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isMainThread, threadId } from 'node:worker_threads';

const out = process.env.LOADED_MODULES_OUT!;
const urls: string[] = [];
module.registerHooks({
  load(url, context, next) {
    urls.push(url);
    return next(url, context);
  },
});

export interface LoadedModules {
  /** Module URLs (file:, node:) loaded on the main thread. */
  urls: string[];
  /** process.moduleLoadList: Node's internal modules included. */
  builtins: string[];
  /** The ids of the worker threads started so far. */
  threads: number[];
}

if (isMainThread) {
  process.on('SIGUSR2', () => {
    let threads: number[] = [];
    try {
      threads = readFileSync(`${out}.threads`, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      /* none yet */
    }
    const report: LoadedModules = { urls, builtins: (process as unknown as { moduleLoadList: string[] }).moduleLoadList, threads };
    writeFileSync(`${out}.tmp`, JSON.stringify(report));
    renameSync(`${out}.tmp`, out);
  });
} else appendFileSync(`${out}.threads`, `${threadId}\n`);
