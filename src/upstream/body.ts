// Upstream bodies: a whole (small) answer read with a size limit and an idle
// deadline, and a request body a transport forgets once it is written.
import { Readable } from 'node:stream';
import { TransportError, bodyError, idleTimeout } from './errors.js';

/**
 * Read a whole (small, non-streaming) upstream body. `idleMs`: a body that
 * stops arriving for this long fails with ETIMEDOUT_IDLE and is destroyed
 * (the headers came in time, the rest never does).
 */
export function readBody(res: Readable, limit = 64 * 1024 * 1024, idleMs?: number): Promise<Buffer> {
  // Plain 'data'/'end' listeners: `for await` over the stream builds an async
  // iterator and a promise per chunk, a measurable share of a small call.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Given up on: destroyed, its late error (undici's body errors when destroyed) not an uncaught exception.
    const drop = () => {
      cleanup();
      res.on('error', () => {});
      res.destroy();
    };
    const idle = idleMs
      ? setTimeout(() => {
          drop();
          reject(idleTimeout(idleMs));
        }, idleMs)
      : undefined;
    const cleanup = () => {
      if (idle) clearTimeout(idle);
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.off('close', onClose);
    };
    const onData = (c: Buffer) => {
      idle?.refresh();
      size += c.length;
      if (size > limit) {
        drop();
        reject(new TransportError('upstream body too large', 'EBODYTOOLARGE'));
        return;
      }
      chunks.push(c);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(bodyError(err));
    };
    // Destroyed before 'end' (abort, socket closed mid-body): the same error `for await` gives.
    const onClose = () => {
      cleanup();
      reject(bodyError(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
    };
    res.on('data', onData);
    res.once('end', onEnd);
    res.once('error', onError);
    res.once('close', onClose);
  });
}

/** releaseBody applies to bodies longer than this (bytes, or UTF-16 units for a string). */
export const ONE_SHOT_MIN_BYTES = 4096;

/**
 * A body undici forgets once it is written. undici keeps a Buffer or string
 * body referenced (its Request and its request handler) until the response
 * ends; a stream body is read once and holds nothing after. The headers (with
 * the content-length) and the body still leave in one corked write.
 */
export function oneShot(body: Buffer | string): Readable {
  let pending: Buffer | string | null = body;
  return new Readable({
    read() {
      const b = pending;
      pending = null;
      if (b !== null && b.length) this.push(b);
      this.push(null);
    },
  });
}
