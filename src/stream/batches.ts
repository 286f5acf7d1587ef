// Async iterators that hand out items in batches: the stream writer
// (src/respond.ts) maps and writes every item that arrived together with
// one promise, where one promise per item (or a chain of async generators)
// costs several promises and iterator results per event
// (docs/performance.md, "How streams are carried").

/** The one done result every iterator here returns. */
export const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * The AsyncGenerator protocol around a stop(): return() and throw() stop the
 * source (handing the upstream connection back or dropping it) and report
 * done; the iterator is its own iterable.
 */
export abstract class StoppableIterator<T> implements AsyncGenerator<T, undefined> {
  abstract next(): Promise<IteratorResult<T, undefined>>;
  protected abstract stop(): void;

  return(): Promise<IteratorResult<T, undefined>> {
    this.stop();
    return Promise.resolve(DONE);
  }

  throw(err?: unknown): Promise<IteratorResult<T, undefined>> {
    this.stop();
    return Promise.reject(err);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stop();
  }
}

/** A source that hands out items in batches: the writer (src/respond.ts) maps and writes a batch at once. */
export interface BatchSource<T> extends AsyncIterable<T> {
  /** The next items (at least one), or null at the end. */
  nextBatch(): Promise<T[] | null>;
  return(): Promise<unknown>;
}

/**
 * The one stream abstraction of the gateway: every stream (upstream events, a
 * provider's mapping, an endpoint's translation) is a BatchIterator, and
 * anything else is adapted into one once, at the boundary (batchSource). The
 * writer and the dispatcher consume nextBatch() and prime() only; the
 * AsyncGenerator protocol is there for any other consumer. A batch kept back
 * (a primed one, or the rest of one next() began) comes first.
 */
export abstract class BatchIterator<T> extends StoppableIterator<T> implements BatchSource<T> {
  private buf: T[] = [];
  private head = 0;

  /** The next batch from the source (at least one item), or null at the end. */
  protected abstract pull(): Promise<T[] | null>;

  nextBatch(): Promise<T[] | null> {
    const kept = this.takeKept();
    return kept ? Promise.resolve(kept) : this.pull();
  }

  /** The batch kept back (primed, or the rest of one next() began), if any, handed out once. */
  private takeKept(): T[] | undefined {
    if (this.head >= this.buf.length) return undefined;
    const out = this.head === 0 ? this.buf : this.buf.slice(this.head);
    this.dropKept();
    return out;
  }

  async next(): Promise<IteratorResult<T, undefined>> {
    if (this.head >= this.buf.length) {
      const batch = await this.pull();
      if (!batch) return DONE;
      this.keep(batch);
    }
    return { done: false, value: this.buf[this.head++] };
  }

  /**
   * Whether this source can be read by push (takeReady and onReady): true
   * when every layer down to the upstream body hands on its events
   * synchronously as they arrive. The writer (src/respond.ts) then maps and
   * writes a chunk's events inside the body's own data event, with no promise
   * or microtask per chunk; any other source is read by nextBatch().
   */
  get pushes(): boolean {
    return false;
  }

  /**
   * Push reading: the items ready now (at least one), null at the end, or
   * undefined when none are ready yet (onReady's callback says when to look
   * again). Throws the source's failure. Only where `pushes` is true.
   */
  takeReady(): T[] | null | undefined {
    return this.takeKept() ?? this.pullReady();
  }

  /** takeReady's source side: what has arrived, null at the end, undefined for nothing yet. */
  protected pullReady(): T[] | null | undefined {
    return undefined;
  }

  /**
   * Push reading: `fn` is called, synchronously from the source's own event,
   * whenever takeReady may have something new (items, the end, a failure).
   * One callback per source; a source that does not push never calls it.
   */
  onReady(fn: (() => void) | undefined): void {
    void fn;
  }

  /** Whether items are kept back (primed): nextBatch() then resolves at once. */
  get ready(): boolean {
    return this.head < this.buf.length;
  }

  /** Read until the first item is ready (it stays queued for the consumer); false if the source ended without one. */
  async prime(): Promise<boolean> {
    if (this.head < this.buf.length) return true;
    const first = await this.pull();
    if (!first) return false;
    this.keep(first);
    return true;
  }

  protected keep(batch: T[]): void {
    this.buf = batch;
    this.head = 0;
  }

  protected dropKept(): void {
    this.buf = [];
    this.head = 0;
  }
}

/**
 * Any async iterable (or iterator) as a BatchIterator: the gateway's own
 * streams as they are, anything else (a plugin's async generator, its own
 * BatchSource) wrapped once, here.
 */
export function batchSource<T>(source: AsyncIterable<T> | AsyncIterator<T>): BatchIterator<T> {
  if (source instanceof BatchIterator) return source as BatchIterator<T>;
  return new ForeignBatches(source);
}

/** A foreign source read through nextBatch() when it has one, else one item per next(). */
class ForeignBatches<T> extends BatchIterator<T> {
  private readonly it: AsyncIterator<T> & Partial<BatchSource<T>>;
  private done = false;

  constructor(source: AsyncIterable<T> | AsyncIterator<T>) {
    super();
    this.it = Symbol.asyncIterator in source ? (source as AsyncIterable<T>)[Symbol.asyncIterator]() : source;
  }

  protected async pull(): Promise<T[] | null> {
    const it = this.it;
    while (!this.done) {
      const batch = typeof it.nextBatch === 'function' ? await it.nextBatch() : await it.next().then((r) => (r.done ? null : [r.value]));
      if (batch === null) this.done = true;
      else if (batch.length) return batch;
    }
    return null;
  }

  protected stop(): void {
    this.dropKept();
    if (this.done) return;
    this.done = true;
    void this.it.return?.();
  }
}

/** Read an iterator a batch at a time (batchSource's batches). */
export function batchesOf<T>(it: AsyncIterator<T> | AsyncIterable<T>): () => Promise<T[] | null> {
  const src = batchSource(it);
  return () => src.nextBatch();
}
