// Writing results to the client. Streams go straight to the socket event by
// event (Koa's body piping is bypassed: faster, and we control the end), with
// back-pressure respected and no buffering of the whole stream.
import type { ServerResponse } from 'node:http';
import { once } from 'node:events';
import { SSE_HEADERS, sseFrame } from './sse.js';
import { batchSource, type BatchIterator } from './stream/batches.js';

/**
 * A JSON answer through Koa, serialised here: Koa's body setter, given an
 * object, checks whether it is a fetch `Response`, and that global's first
 * use loads Node's bundled fetch (about 13 MB; src/lazy.ts). The same bytes and
 * headers as Koa's own JSON body.
 */
export function jsonBody(kctx: { type: string; body: unknown }, value: unknown): void {
  kctx.type = 'application/json; charset=utf-8';
  kctx.body = JSON.stringify(value);
}

/**
 * Frames made from a source's items by a synchronous mapper: what the writer
 * consumes. The writer takes the source's items a batch at a time (every
 * event that arrived together), runs the mapper itself and writes the batch's
 * frames at once, so a stream pays for no generator layer between the
 * provider's items and the socket (docs/performance.md, "How streams are
 * carried"). The source is adapted once, here (batchSource); the gateway's
 * own streams already are batch sources. It is still an
 * AsyncIterable<string> for any other consumer.
 */
export class MappedFrames<T> implements AsyncIterable<string> {
  readonly source: BatchIterator<T>;

  constructor(
    source: AsyncIterable<T>,
    /** The frame(s) for one item, or '' / undefined for none yet. */
    readonly frame: (item: T) => string | undefined,
    /** The closing frame(s), after the source's last item. */
    readonly end?: () => string | undefined,
  ) {
    this.source = batchSource(source);
  }

  /** Frames as the writer takes them: these, or ready-made frames (any async iterable of strings) adapted once. */
  static of(frames: AsyncIterable<string>): MappedFrames<unknown> {
    return (frames instanceof MappedFrames ? frames : new MappedFrames<string>(frames, asFrame)) as MappedFrames<unknown>;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string> {
    for await (const item of this.source) {
      const f = this.frame(item);
      if (f) yield f;
    }
    const last = this.end?.();
    if (last) yield last;
  }
}

const asFrame = (f: string): string => f;

/** Events with a `type` as SSE frames: `event: <type>` plus the JSON (the Responses and Messages APIs' framing). */
export function namedEventFrames<E extends { type: string }>(events: AsyncIterable<E>): MappedFrames<E> {
  return new MappedFrames(events, (e) => sseFrame(JSON.stringify(e), e.type));
}

/**
 * Pipe SSE frames to the client. Returns when the stream is over, the client
 * left, or the source failed (then `onError` supplies a closing frame).
 */
export async function pipeFrames(
  res: ServerResponse,
  extraHeaders: Record<string, string>,
  frames: AsyncIterable<string>,
  onError: (err: unknown) => string | null,
): Promise<'completed' | 'client_closed' | 'failed'> {
  const { source, frame, end } = MappedFrames.of(frames);
  res.writeHead(200, { ...SSE_HEADERS, ...extraHeaders });
  // The first frame is usually ready at once (the dispatcher read the first
  // event before committing): the headers then leave with it in one write
  // instead of a write of their own. If it is not ready by the end of this
  // turn of the event loop, the headers go out alone so the client sees them
  // (flushHeaders after the first write sends nothing). A primed source's
  // first batch is taken in this turn: the flush is armed only if it made no frame.
  const flushNow = () => {
    if (!res.destroyed && !res.writableEnded) res.flushHeaders();
  };
  let flush = source.ready ? undefined : setImmediate(flushNow);
  if (source.pushes) {
    const r = await pushFrames(res, source, frame, end, onError, () => (flush ??= setImmediate(flushNow)));
    if (flush) clearImmediate(flush);
    return r;
  }
  // After a write the socket did not take at once: wait for it; false if the client left meanwhile.
  const drained = async (): Promise<boolean> => {
    await Promise.race([once(res, 'drain'), once(res, 'close')]);
    return !res.destroyed;
  };
  try {
    try {
      // Every item that arrived together becomes frames in one go, and leaves in one write.
      for (let batch = await source.nextBatch(); batch !== null; batch = await source.nextBatch()) {
        if (res.destroyed) return 'client_closed';
        let out = '';
        for (let i = 0; i < batch.length; i++) out += frame(batch[i]) ?? '';
        if (!out) flush ??= setImmediate(flushNow);
        else if (!res.write(out) && !(await drained())) return 'client_closed';
      }
    } finally {
      // Stopped early (client gone, a frame that threw): let the upstream go.
      void source.return();
    }
    const last = end?.();
    if (last && !res.write(last) && !(await drained())) return 'client_closed';
    if (res.destroyed) return 'client_closed';
    res.end();
    return 'completed';
  } catch (err) {
    if (res.destroyed) return 'client_closed';
    const last = onError(err);
    if (last) res.write(last);
    res.end();
    return 'failed';
  } finally {
    if (flush) clearImmediate(flush);
  }
}

type StreamResult = 'completed' | 'client_closed' | 'failed';

/**
 * pipeFrames for a source read by push (BatchIterator.pushes): the frames of
 * a chunk's events are made and written inside the upstream body's own data
 * event, with no promise, async step or microtask per chunk (docs/performance.md,
 * "How streams are carried"). The same outcomes as the loop: back-pressure
 * (the source's queue fills and pauses the upstream body while the client's
 * socket drains), the client leaving, a failure's closing frame.
 */
function pushFrames<T>(
  res: ServerResponse,
  source: BatchIterator<T>,
  frame: (item: T) => string | undefined,
  end: (() => string | undefined) | undefined,
  onError: (err: unknown) => string | null,
  flushLater: () => void,
): Promise<StreamResult> {
  return new Promise<StreamResult>((resolve) => {
    let state: 'reading' | 'draining' | 'ending' | 'done' = 'reading';
    /** A pump under way (a source's event inside one of its own calls): it reads on, the nested call does nothing. */
    let pumping = false;
    let again = false;
    const finish = (r: StreamResult) => {
      state = 'done';
      source.onReady(undefined);
      res.off('drain', onDrain);
      res.off('close', onClose);
      // Stopped (the end, the client gone, a failure): let the upstream go.
      void source.return();
      resolve(r);
    };
    const complete = () => {
      if (res.destroyed) return finish('client_closed');
      res.end();
      finish('completed');
    };
    const pump = () => {
      if (pumping) {
        again = true;
        return;
      }
      pumping = true;
      try {
        do {
          again = false;
          while (state === 'reading') {
            if (res.destroyed) return finish('client_closed');
            const batch = source.takeReady();
            if (batch === undefined) break;
            if (batch === null) {
              void source.return();
              const last = end?.();
              if (last && !res.write(last)) state = 'ending';
              else complete();
              break;
            }
            // Every item that arrived together becomes frames in one go, and leaves in one write.
            let out = '';
            for (let i = 0; i < batch.length; i++) out += frame(batch[i]) ?? '';
            if (!out) flushLater();
            else if (!res.write(out)) state = 'draining';
          }
        } while (again && state === 'reading');
      } catch (err) {
        if (res.destroyed) return finish('client_closed');
        const last = onError(err);
        if (last) res.write(last);
        res.end();
        finish('failed');
      } finally {
        pumping = false;
      }
    };
    const onDrain = () => {
      if (state === 'ending') complete();
      else if (state === 'draining') {
        state = 'reading';
        pump();
      }
    };
    const onClose = () => {
      if (state !== 'done') finish('client_closed');
    };
    res.on('drain', onDrain);
    res.on('close', onClose);
    source.onReady(pump);
    pump();
  });
}
