// Provider stream mappings: items (chat chunks, JSON events) made from
// upstream events by a synchronous step per event, read in batches.
import type { SSEEvent } from '../sse.js';
import { unparseable } from '../provider/errors.js';
import { BatchIterator, batchSource } from './batches.js';

/**
 * A provider's stream mapping as a synchronous step per upstream event, so
 * that the writer can map a whole chunk of events to frames with one promise
 * (where an async generator per provider costs a promise, an iterator result
 * and several microtasks per event; docs/performance.md, "How streams are
 * carried").
 */
export interface EventMapper<T> {
  /** Push the items for one event to `out`; return true when this event ends the stream (nothing after it is read). */
  step(ev: SSEEvent, out: T[]): boolean;
  /** The upstream ended without a terminal event: push any closing items, or throw (a cut stream must not look finished). */
  end(out: T[]): void;
}

/**
 * Items mapped from upstream events by an EventMapper, every event that
 * arrived together in one go (nextBatch). Its source is adapted once
 * (batchSource): UpstreamEvents as it is, a plain async iterable one event
 * per next().
 */
export class MappedEvents<T> extends BatchIterator<T> {
  private readonly source: BatchIterator<SSEEvent>;
  private done = false;
  /** An error raised after some items of the same batch: thrown once those are delivered. */
  private failed: unknown;

  constructor(
    source: AsyncIterable<SSEEvent>,
    private readonly mapper: EventMapper<T>,
  ) {
    super();
    this.source = batchSource(source);
  }

  /** The items of the next upstream event(s) that made any (at least one), or null at the end. */
  protected async pull(): Promise<T[] | null> {
    this.rethrow();
    const out: T[] = [];
    try {
      while (!this.done && out.length === 0) this.map(await this.source.nextBatch(), out);
    } catch (err) {
      this.failedAfter(err, out);
    }
    return out.length ? out : null;
  }

  override get pushes(): boolean {
    return this.source.pushes;
  }

  /** pull() by push: what the events that have arrived made, null at the end, undefined for nothing yet. */
  protected override pullReady(): T[] | null | undefined {
    this.rethrow();
    const out: T[] = [];
    try {
      while (!this.done && out.length === 0) {
        const events = this.source.takeReady();
        if (events === undefined) return undefined;
        this.map(events, out);
      }
    } catch (err) {
      this.failedAfter(err, out);
    }
    return out.length ? out : null;
  }

  override onReady(fn: (() => void) | undefined): void {
    this.source.onReady(fn);
  }

  /** An error kept back by failedAfter: thrown once, after the items before it went out. */
  private rethrow(): void {
    if (this.failed === undefined) return;
    const err = this.failed;
    this.failed = undefined;
    throw err;
  }

  /** Map a batch of upstream events (null: the end) into `out`. */
  private map(events: SSEEvent[] | null, out: T[]): void {
    if (events === null) this.finish(out);
    else for (let i = 0; i < events.length && !this.done; i++) if (this.mapper.step(events[i], out)) this.terminal();
  }

  /** The source or the mapper failed: stop; what the events before the failing one made still goes out first, as it would have one by one. */
  private failedAfter(err: unknown, out: T[]): void {
    this.stop();
    if (!out.length) throw err;
    this.failed = err;
  }

  private finish(out: T[]): void {
    this.done = true;
    this.mapper.end(out);
  }

  /** The mapper saw the terminal event: hand the connection back at once. */
  private terminal(): void {
    this.done = true;
    void this.source.return();
  }

  protected stop(): void {
    this.dropKept();
    if (this.done) return;
    this.done = true;
    void this.source.return();
  }
}

/** An upstream event with its JSON data parsed. */
export interface JsonEvent {
  event?: string;
  data: Record<string, unknown>;
}

/**
 * A same-API stream's events with their JSON parsed, read in batches (a
 * MappedEvents, so the writer frames every event that arrived together at
 * once). `ends(type)` names the event that ends the stream (the data's
 * `type`, else the SSE event name): the connection goes back to the pool then.
 */
export function jsonEvents(source: AsyncIterable<SSEEvent>, ends: (type: string) => boolean): MappedEvents<JsonEvent> {
  return new MappedEvents(source, {
    step(ev, out) {
      const data = parseEventJson(ev.data);
      out.push({ event: ev.event, data });
      return ends(typeof data.type === 'string' ? data.type : (ev.event ?? ''));
    },
    end() {},
  });
}

/** Parse one SSE data payload, or fail the stream as an upstream fault. */
export function parseEventJson<T = Record<string, unknown>>(data: string): T {
  try {
    return JSON.parse(data) as T;
  } catch {
    throw unparseable('the provider sent a stream event that is not JSON');
  }
}
