// Server-sent events, parsed once, here, for every provider
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
// Handles \n, \r\n and \r line ends (Gemini separates events with \r\n\r\n),
// multi-line data, comments, and events split across TCP chunks.

/**
 * One upstream stream event. SSE fills `event`, `data` and `id`; another
 * framing (src/stream/framing.ts, Framing) puts its event's type in `event`, its
 * payload as text in `data`, and a binary framing's message headers (the
 * event stream's `:message-type`, `:exception-type`...) in `headers`.
 */
export interface SSEEvent {
  event?: string;
  data: string;
  id?: string;
  headers?: Record<string, unknown>;
}

/**
 * The parser itself, synchronous: text goes in as it arrives, whole events
 * come out. The upstream event stream (src/stream/upstream-events.ts) feeds it from the
 * body's 'data' events, so that parsing costs no promise per event.
 */
export class SSEParser {
  private readonly decoder = new TextDecoder();
  private buf = '';
  private event: string | undefined;
  private data: string[] = [];
  private id: string | undefined;
  private lastWasCR = false;

  /** Parse a chunk; complete events are appended to `out`. */
  push(chunk: Buffer | string, out: SSEEvent[]): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    // A \r that ended the previous chunk and a \n that starts this one are one line end.
    if (this.lastWasCR && text.charCodeAt(0) === 10) text = text.slice(1);
    this.lastWasCR = false;
    const buf = this.buf.length ? this.buf + text : text;
    let start = 0;
    for (let i = 0; i < buf.length; i++) {
      const ch = buf.charCodeAt(i);
      if (ch !== 10 && ch !== 13) continue;
      const end = i;
      if (ch === 13) {
        if (i + 1 < buf.length) {
          if (buf.charCodeAt(i + 1) === 10) i++;
        } else this.lastWasCR = true;
      }
      const lineStart = start;
      start = i + 1;
      if (end === lineStart) {
        this.dispatch(out);
        continue;
      }
      if (buf.charCodeAt(lineStart) === 58) continue; // ':' comment
      this.field(buf.slice(lineStart, end));
    }
    this.buf = start === buf.length ? '' : buf.slice(start);
  }

  /** The source ended: a last event without its blank line is still delivered. */
  end(out: SSEEvent[]): void {
    const rest = this.buf + this.decoder.decode();
    this.buf = '';
    if (rest.length && rest.startsWith('data')) this.field(rest);
    this.dispatch(out);
  }

  /** A blank line (or the end): the event gathered so far, if it has data. The id carries over. */
  private dispatch(out: SSEEvent[]): void {
    if (this.data.length) out.push({ event: this.event, data: this.data.length === 1 ? this.data[0] : this.data.join('\n'), id: this.id });
    this.event = undefined;
    this.data = [];
  }

  private field(line: string): void {
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id') this.id = value;
  }
}

/** Parse an async source of chunks (tests and replays; the hot path uses SSEParser directly). */
export async function* parseSSE(source: AsyncIterable<Buffer | string>): AsyncGenerator<SSEEvent> {
  const parser = new SSEParser();
  const out: SSEEvent[] = [];
  for await (const chunk of source) {
    parser.push(chunk, out);
    for (const e of out) yield e;
    out.length = 0;
  }
  parser.end(out);
  yield* out;
}

/** One SSE frame. `data` must not contain a raw newline (JSON.stringify never emits one). */
export function sseFrame(data: string, event?: string): string {
  return event ? `event: ${event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
}

/**
 * The headers of every SSE answer. No `connection` header: Node's HTTP server
 * keeps the connection alive unless the client sent `Connection: close` or the
 * gateway is draining, and a fixed `keep-alive` here overrode both.
 */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
} as const;
