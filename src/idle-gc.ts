// One full garbage collection when the gateway falls idle after serving.
//
// Under load V8 grows its heap (the young generation to 2 × 64 MB on a large
// host, the old one with the requests in flight), and only a collection gives
// that memory back. An idle process allocates nothing, so V8 starts no
// collection: after a burst of large requests the heap kept about 190 MB,
// more than a hundred of it garbage, for as long as the process stayed idle
// (docs/performance.md, "Memory"). V8's own memory reducer runs only after a
// full (mark-compact) collection, which a load of short-lived objects never
// needed.
//
// So: every `intervalMs` the collector looks at the requests. When some were
// served since the last collection, none is running now and none has started
// for a whole interval, and the heap is larger than after the last
// collection, it runs one full collection, which also shrinks the young
// generation back (the allocation rate is then low). It runs on an idle
// process only: no request waits for it. Nothing runs while requests come in,
// nor again before more requests have been served.
//
// What it costs: with no request in flight, nothing holds the per-request
// objects' hidden classes (maps), and a memory-reducing collection (the only
// kind that shrinks the young generation and hands pages back) lets them die.
// V8 then throws away every optimised function that embedded one ("embedded
// weak objects cleared": about 400 functions, undici's included), and the
// next requests run unoptimised until V8 optimises them again: 2-3x the CPU
// per request in the first second, about three seconds to recover (a regular
// collection with `--retain-maps-for-n-gc` kept the code but not the memory).
// `server.idle_release_ms` sets the wait, 0 turns it off for a gateway that
// would rather keep its memory than pay that after every pause.
//
// Start-up leaves garbage too (the config's text and parse trees, the
// schemas' checks, the modules' set-up): about 5 MB of RSS. One look
// `afterStartMs` after the collector starts collects it when no request has
// come in by then (a sidecar that starts and waits); otherwise the requests'
// collection above takes it with theirs.
import v8 from 'node:v8';
import vm from 'node:vm';

export interface IdleCollectorOptions {
  /** Requests started so far (a counter that only grows). */
  started: () => number;
  /** Requests running now. */
  running: () => number;
  /**
   * How long the gateway must go without a new request (between one and two
   * of these) before it collects; 0: never after requests (the start-up's look
   * still runs). Read again at every look, so a reload that changes it applies.
   * Default 10 s.
   */
  intervalMs?: number | (() => number);
  /** Collect only when the heap has grown by this many bytes since the last collection (or the start). */
  minGrowthBytes?: number;
  /** The collection (tests); default: V8's full collection. */
  collect?: () => void;
  /** The heap's size in bytes (tests); default: V8's total heap size. */
  heapBytes?: () => number;
  /** The start-up's look: this long after the start, collect if no request came (0: none). Default 500 ms. */
  afterStartMs?: number;
}

export interface IdleCollector {
  /** Full collections run so far. */
  readonly collections: number;
  /** One look, as the timer takes it (tests call it directly). */
  check(): void;
  stop(): void;
}

/**
 * V8's full collection, reachable without starting Node with --expose-gc (the
 * flag is read when a context is made). The `last-resort` flavour is the one
 * V8 runs on a low-memory notification: collections until nothing more is
 * freed, compacting, and the freed pages handed back to the system at once
 * rather than pooled for the next allocations.
 */
function fullCollection(): () => void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as (o?: { type: string; execution: string; flavor: string }) => void;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

export function startIdleCollector(o: IdleCollectorOptions): IdleCollector {
  const heapBytes = o.heapBytes ?? (() => v8.getHeapStatistics().total_heap_size);
  const minGrowth = o.minGrowthBytes ?? 16 * 1024 * 1024;
  let collect = o.collect;
  let seen = o.started();
  let servedSinceCollection = false;
  let heapAfter = heapBytes();
  let collections = 0;
  const run = () => {
    collect ??= fullCollection();
    collect();
    collections++;
    heapAfter = heapBytes();
  };
  const initial = seen;
  const afterStart = () => {
    if (o.started() === initial && o.running() === 0) run();
  };
  /** Whether requests started since the last look (they are then owed a collection once idle). */
  const sawRequests = () => {
    const started = o.started();
    if (started === seen) return false;
    seen = started;
    servedSinceCollection = true;
    return true;
  };
  const check = () => {
    // Busy during this interval: look again at the next one.
    if (sawRequests()) return;
    if (!servedSinceCollection || o.running() > 0) return;
    if (heapBytes() - heapAfter < minGrowth) return;
    run();
    servedSinceCollection = false;
  };
  const interval = typeof o.intervalMs === 'function' ? o.intervalMs : () => (o.intervalMs as number | undefined) ?? 10_000;
  // Off (0): look again in a second, in case a reload turns it on; nothing is collected meanwhile.
  let timer: NodeJS.Timeout;
  const arm = () => {
    const ms = interval();
    timer = setTimeout(() => {
      if (interval() > 0) check();
      // Off: requests served meanwhile still count once it is turned on.
      else sawRequests();
      arm();
    }, ms > 0 ? ms : 1000);
    timer.unref();
  };
  arm();
  const afterStartMs = o.afterStartMs ?? 500;
  const startTimer = afterStartMs > 0 ? setTimeout(afterStart, afterStartMs) : undefined;
  startTimer?.unref();
  return {
    get collections() {
      return collections;
    },
    check,
    stop: () => {
      clearTimeout(timer);
      clearTimeout(startTimer);
    },
  };
}
