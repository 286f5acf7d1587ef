// The AWS event stream framing (application/vnd.amazon.eventstream), in which
// ConverseStream answers: binary messages, each a prelude (total length,
// headers length, prelude CRC32), typed headers, a payload and a message
// CRC32 (https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html
// describes the encoding). @smithy/eventstream-codec decodes a message and
// checks both CRCs; this parser only cuts the byte stream at the lengths the
// preludes give, synchronously as chunks arrive.
import { createRequire } from 'node:module';
import type { EventStreamCodec } from '@smithy/eventstream-codec';
import type { SSEEvent } from '../../../src/sse.js';
import type { Framing, FrameParser } from '../../../src/stream/framing.js';

const require = createRequire(import.meta.url);

/** The codec, loaded with the first Bedrock stream rather than with the gateway (docs/performance.md, "Start-up"). */
function newCodec(): EventStreamCodec {
  const { EventStreamCodec: Codec } = require('@smithy/eventstream-codec') as typeof import('@smithy/eventstream-codec');
  const { fromUtf8, toUtf8 } = require('@smithy/util-utf8') as typeof import('@smithy/util-utf8');
  return new Codec(toUtf8, fromUtf8);
}

export const EVENT_STREAM_CONTENT_TYPE = 'application/vnd.amazon.eventstream';

/** A message larger than this is refused (Bedrock's events are a few KB; a broken prelude must not make us buffer gigabytes). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const PRELUDE_BYTES = 12;

/**
 * One event per message: `event` is its `:event-type` (or `:exception-type`
 * for `:message-type: exception`), `data` the payload as text, `headers` the
 * message headers by name.
 */
export class EventStreamParser implements FrameParser {
  private readonly codec = newCodec();
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer, out: SSEEvent[]): void {
    let buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (buf.length >= PRELUDE_BYTES) {
      const total = buf.readUInt32BE(0);
      if (total < 16 || total > MAX_MESSAGE_BYTES) throw new Error(`an event-stream message declares ${total} bytes`);
      if (buf.length < total) break;
      out.push(toEvent(this.codec.decode(buf.subarray(0, total))));
      buf = buf.subarray(total);
    }
    // Keep the partial message's own bytes, not a view into the last chunk.
    this.buf = buf.length ? Buffer.from(buf) : Buffer.alloc(0);
  }

  end(_out?: SSEEvent[]): void {
    if (this.buf.length) throw new Error(`the stream ended inside an event-stream message (${this.buf.length} bytes left)`);
  }
}

function toEvent(m: { headers: Record<string, { type: string; value: unknown }>; body: Uint8Array }): SSEEvent {
  const headers: Record<string, unknown> = {};
  for (const [name, h] of Object.entries(m.headers)) headers[name] = h.value;
  const type = headers[':message-type'] === 'exception' ? headers[':exception-type'] : headers[':event-type'];
  return { event: typeof type === 'string' ? type : undefined, data: Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength).toString('utf8'), headers };
}

/** ConverseStream's framing, for upstreamEvents. */
export const eventStreamFraming: Framing = { name: 'aws-eventstream', contentTypes: [EVENT_STREAM_CONTENT_TYPE], parser: () => new EventStreamParser() };
