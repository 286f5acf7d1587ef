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
  res.flushHeaders();
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
  }
}
