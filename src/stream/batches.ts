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

export function isBatchSource<T>(s: unknown): s is BatchSource<T> {
  return typeof (s as BatchSource<T> | undefined)?.nextBatch === 'function';
}

/** Read an iterator a batch at a time: its own batches when it has them, else one item per next(). */
export function batchesOf<T>(it: AsyncIterator<T>): () => Promise<T[] | null> {
  if (isBatchSource<T>(it)) return () => it.nextBatch();
  return () => it.next().then((r) => (r.done ? null : [r.value]));
}

/** The AsyncGenerator protocol over a pull() of batches; a batch kept back (a primed one, or the rest of one next() began) comes first. */
export abstract class BatchIterator<T> extends StoppableIterator<T> implements BatchSource<T> {
  private buf: T[] = [];
  private head = 0;

  /** The next batch from the source (at least one item), or null at the end. */
  protected abstract pull(): Promise<T[] | null>;

  nextBatch(): Promise<T[] | null> {
    if (this.head < this.buf.length) {
      const out = this.head === 0 ? this.buf : this.buf.slice(this.head);
      this.dropKept();
      return Promise.resolve(out);
    }
    return this.pull();
  }

  async next(): Promise<IteratorResult<T, undefined>> {
    if (this.head >= this.buf.length) {
      const batch = await this.pull();
      if (!batch) return DONE;
      this.keep(batch);
    }
    return { done: false, value: this.buf[this.head++] };
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
