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
  /** The event's data lines so far, joined with \n; undefined before the first. */
  private data: string | undefined;
  private id: string | undefined;
  private lastWasCR = false;

  /** Parse a chunk; complete events are appended to `out`. */
  push(chunk: Buffer | string, out: SSEEvent[]): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, STREAM);
    // A \r that ended the previous chunk and a \n that starts this one are one line end.
    if (this.lastWasCR && text.charCodeAt(0) === 10) text = text.slice(1);
    this.lastWasCR = false;
    const buf = this.buf.length ? this.buf + text : text;
    // Lines end with \n alone (most providers): found by indexOf, not char by char.
    const start = buf.indexOf('\r') === -1 ? this.lines(buf, out) : this.anyLines(buf, out);
    this.buf = start === buf.length ? '' : buf.slice(start);
  }

  /** The lines of `buf` that end with \n; returns where the unfinished rest starts. */
  private lines(buf: string, out: SSEEvent[]): number {
    let start = 0;
    for (let end = buf.indexOf('\n'); end !== -1; end = buf.indexOf('\n', start)) {
      this.line(buf, start, end, out);
      start = end + 1;
    }
    return start;
  }

  /** The lines of `buf` ending with \n, \r\n or \r; returns where the unfinished rest starts. */
  private anyLines(buf: string, out: SSEEvent[]): number {
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
      this.line(buf, start, end, out);
      start = i + 1;
    }
    return start;
  }

  /** One line, buf[start, end): a blank line dispatches the event. */
  private line(buf: string, start: number, end: number, out: SSEEvent[]): void {
    if (end === start) return this.dispatch(out);
    const first = buf.charCodeAt(start);
    if (first === 58) return; // ':' comment
    // The usual `data: …` line without slicing its field name first.
    if (first === 100 /* d */ && buf.startsWith('data:', start)) {
      const from = start + (buf.charCodeAt(start + 5) === 32 ? 6 : 5);
      return this.addData(from >= end ? '' : buf.slice(from, end));
    }
    this.field(buf.slice(start, end));
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
    if (this.data !== undefined) out.push({ event: this.event, data: this.data, id: this.id });
    this.event = undefined;
    this.data = undefined;
  }

  private addData(value: string): void {
    this.data = this.data === undefined ? value : this.data + '\n' + value;
  }

  private field(line: string): void {
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.addData(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id') this.id = value;
  }
}

const STREAM = { stream: true } as const;

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
