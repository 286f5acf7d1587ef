// Server-sent events, parsed once, here, for every provider
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
// Handles \n, \r\n and \r line ends (Gemini separates events with \r\n\r\n),
// multi-line data, comments, and events split across TCP chunks.

export interface SSEEvent {
  event?: string;
  data: string;
  id?: string;
}

export async function* parseSSE(source: AsyncIterable<Buffer | string>): AsyncGenerator<SSEEvent> {
  const decoder = new TextDecoder();
  let buf = '';
  let event: string | undefined;
  let data: string[] = [];
  let id: string | undefined;
  let lastWasCR = false;

  for await (const chunk of source) {
    let text = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    // A \r that ended the previous chunk and a \n that starts this one are one line end.
    if (lastWasCR && text.charCodeAt(0) === 10) text = text.slice(1);
    lastWasCR = false;
    buf += text;
    let start = 0;
    for (let i = 0; i < buf.length; i++) {
      const ch = buf.charCodeAt(i);
      if (ch !== 10 && ch !== 13) continue;
      const line = buf.slice(start, i);
      if (ch === 13) {
        if (i + 1 < buf.length) {
          if (buf.charCodeAt(i + 1) === 10) i++;
        } else lastWasCR = true;
      }
      start = i + 1;
      if (line === '') {
        if (data.length) yield { event, data: data.join('\n'), id };
        event = undefined;
        data = [];
        continue;
      }
      if (line.charCodeAt(0) === 58) continue; // ':' comment
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'event') event = value;
      else if (field === 'id') id = value;
    }
    buf = buf.slice(start);
  }
  buf += decoder.decode();
  if (buf.length && buf.startsWith('data')) {
    const colon = buf.indexOf(':');
    let value = colon === -1 ? '' : buf.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    data.push(value);
  }
  // A stream that ends without a blank line still delivers its last event.
  if (data.length) yield { event, data: data.join('\n'), id };
}

/** One SSE frame. `data` must not contain a raw newline (JSON.stringify never emits one). */
export function sseFrame(data: string, event?: string): string {
  return event ? `event: ${event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;
