// Shutdown: the requests in flight, and the drain that waits for them.
// The request lifecycle (lifecycle.ts) counts a request in while the gateway
// is not draining and out when its response closes, and registers the abort
// of its upstream calls; drain() waits for them, then aborts those left.
import type http from 'node:http';
import type { Logger } from 'pino';
import { errors } from '../errors.js';

/** After the shutdown deadline: how long the requests it aborted get to write their error frame or answer. */
const SHUTDOWN_GRACE_MS = 1000;
/** How often the drain looks at what is still running (and closes connections gone idle). */
const POLL_MS = 20;

/** One request in an AbortList. */
export interface AbortEntry {
  readonly ac: AbortController;
  prev: AbortEntry | undefined;
  next: AbortEntry | undefined;
}

/**
 * The AbortControllers of the requests under way, as a linked list rather
 * than a Set. A Set that thousands of requests a second enter and leave
 * rehashes its table every few thousand additions, and each table it leaves
 * behind (promoted by then, garbage until the next full collection) still
 * points at the controllers it held: V8's young-generation collections take
 * that as a reference, so those controllers, with all that hangs off their
 * signals, survived each one and were promoted. Measured on the passthrough
 * at 32 connections: 10–12% of what requests allocated survived each scavenge
 * with the Set, 2–4% without (docs/performance.md, "Where the time goes").
 * An entry taken out of the list points at nothing.
 */
export class AbortList {
  private head: AbortEntry | undefined;

  add(ac: AbortController): AbortEntry {
    const e: AbortEntry = { ac, prev: undefined, next: this.head };
    if (this.head) this.head.prev = e;
    this.head = e;
    return e;
  }

  /** Take `e` out (again: nothing). */
  delete(e: AbortEntry): void {
    if (e.prev) e.prev.next = e.next;
    else if (this.head === e) this.head = e.next;
    else return;
    if (e.next) e.next.prev = e.prev;
    e.prev = undefined;
    e.next = undefined;
  }

  /** Abort every controller in the list now (listed first: an abort's listeners may take entries out). */
  abortAll(reason: unknown): void {
    const all: AbortController[] = [];
    for (let e = this.head; e; e = e.next) all.push(e.ac);
    for (const ac of all) ac.abort(reason);
  }
}

export class Drain {
  /** Set once the drain began: new requests are refused with a 503, /healthz answers 503. */
  draining = false;
  /** Requests admitted before the drain began whose response has not closed yet. */
  inflight = 0;
  /** Requests started so far, admitted or not (the idle collection looks for a pause in them: src/idle-gc.ts). */
  started = 0;
  /** Their upstream calls: aborted, with the shutdown error as the reason, at the shutdown deadline. */
  readonly aborts = new AbortList();

  /**
   * Drain: keep listening (so that /healthz answers 503 to a load balancer,
   * and a new request is refused with a 503 it can retry elsewhere, in
   * cluster mode as well), close connections as they go idle, and wait for
   * the requests admitted before it began. At the deadline, those still
   * running are aborted with the shutdown error as the reason: a stream ends
   * with its endpoint's error frame, a request not yet answered gets a 503.
   * SHUTDOWN_GRACE_MS later, whatever is left is closed, and the server with it.
   */
  async drain(server: http.Server, deadlineMs: number, logger: Logger): Promise<void> {
    this.draining = true;
    const tick = () => new Promise((r) => setTimeout(r, POLL_MS));
    const deadline = performance.now() + deadlineMs;
    while (this.inflight > 0 && performance.now() < deadline) {
      server.closeIdleConnections();
      await tick();
    }
    if (this.inflight > 0) {
      const reason = errors.shuttingDown(`The gateway is shutting down: the request was still running at its shutdown deadline (server.shutdown_timeout_ms, ${deadlineMs} ms).`);
      logger.warn({ requests: this.inflight, deadline_ms: deadlineMs }, 'shutdown deadline: ending the requests still running');
      this.aborts.abortAll(reason);
      const grace = performance.now() + SHUTDOWN_GRACE_MS;
      while (this.inflight > 0 && performance.now() < grace) await tick();
    }
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }
}
