// Writing results to the client. Streams go straight to the socket event by
// event (Koa's body piping is bypassed: faster, and we control the end), with
// back-pressure respected and no buffering of the whole stream.
import type { ServerResponse } from 'node:http';
import { once } from 'node:events';
import { SSE_HEADERS } from './sse.js';

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
  res.writeHead(200, { ...SSE_HEADERS, ...extraHeaders });
  // The first frame is usually ready at once (the dispatcher read the first
  // event before committing): the headers then leave with it in one write
  // instead of a write of their own. If it is not ready by the end of this
  // turn of the event loop, the headers go out alone so the client sees them.
  // (flushHeaders after the first write sends nothing.)
  const flush = setImmediate(() => {
    if (!res.destroyed && !res.writableEnded) res.flushHeaders();
  });
  try {
    for await (const frame of frames) {
      if (res.destroyed) return 'client_closed';
      if (!res.write(frame)) {
        await Promise.race([once(res, 'drain'), once(res, 'close')]);
        if (res.destroyed) return 'client_closed';
      }
    }
    res.end();
    return 'completed';
  } catch (err) {
    if (res.destroyed) return 'client_closed';
    const last = onError(err);
    if (last) res.write(last);
    res.end();
    return 'failed';
  } finally {
    clearImmediate(flush);
  }
}
