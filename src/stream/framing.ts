// Stream framings: how an upstream stream's bytes become events. SSE (the
// parser is src/sse.ts) and newline-delimited JSON are built in; a provider
// plugin may supply its own (a binary event stream with checksums).
import { SSEParser, type SSEEvent } from '../sse.js';

/** Parses an upstream stream's bytes into events as they arrive; synchronous (no promise per event). */
export interface FrameParser {
  /** Parse a chunk; complete events are appended to `out`. */
  push(chunk: Buffer, out: SSEEvent[]): void;
  /** The body ended: push a last complete event, or throw if the bytes left are a cut frame. */
  end(out: SSEEvent[]): void;
}

/**
 * A stream framing: how an upstream stream's bytes become events. Events
 * have the SSE shape whatever the framing: `event` is the event's type (an
 * SSE `event:` line, a binary frame's event-type header...), `data`
 * its payload as text, `headers` a binary framing's message headers.
 */
export interface Framing {
  name: string;
  /** Content types a stream in this framing is answered with (substring match); empty: any. */
  contentTypes: readonly string[];
  parser(): FrameParser;
}

/** Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html). */
export const sseFraming: Framing = { name: 'sse', contentTypes: ['text/event-stream'], parser: () => new SSEParser() };

/** Newline-delimited JSON (https://github.com/ndjson/ndjson-spec): one event per non-empty line, `data` the line. */
export const ndjsonFraming: Framing = {
  name: 'ndjson',
  contentTypes: ['application/x-ndjson', 'application/jsonl', 'application/json', 'application/jsonlines'],
  parser: () => new NdjsonParser(),
};

export class NdjsonParser implements FrameParser {
  private readonly decoder = new TextDecoder();
  private buf = '';

  push(chunk: Buffer, out: SSEEvent[]): void {
    const text = this.buf + this.decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      const line = text.slice(start, nl).trim();
      start = nl + 1;
      if (line) out.push({ data: line });
    }
    this.buf = text.slice(start);
  }

  end(out: SSEEvent[]): void {
    const line = (this.buf + this.decoder.decode()).trim();
    this.buf = '';
    if (line) out.push({ data: line });
  }
}
