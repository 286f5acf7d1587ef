// The HTTP server's own edges, before Koa sees a request: what a client gets
// when Node's parser refuses its request (headers over 16 KB, malformed
// HTTP), and the cap on concurrent connections. Every answer is the JSON
// envelope of docs/errors.md, as on every route.
import type http from 'node:http';
import type { Socket } from 'node:net';
import { GatewayError, errors, envelope } from './errors.js';
import { http as httpModule } from './lazy.js';

export interface ConnectionLimits {
  /** Open connections served at once (server.max_connections, read on each new connection: a reload applies); above it a new connection's request gets a 503. */
  maxConnections: () => number;
}

/** An answer written straight to a socket (no request or response object exists), then the connection closed. */
function writeRaw(socket: Socket, err: GatewayError): void {
  const body = JSON.stringify(envelope(err));
  const extra = Object.entries(err.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${err.status} ${httpModule.STATUS_CODES[err.status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\n\r\n${body}`,
  );
  // Let the answer go out before the socket is torn down; a client that keeps sending gets no more than a moment.
  const t = setTimeout(() => socket.destroy(), 1000).unref();
  socket.once('close', () => clearTimeout(t));
}

/** What Node's parser refused, as the envelope (the same statuses Node's own bare answers use). */
export function clientErrorAnswer(code: string | undefined): GatewayError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new GatewayError(431, 'invalid_request_error', 'The request headers are too large: the gateway accepts at most 16 KB of request line and headers.', {
        code: 'request_header_fields_too_large',
      });
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return errors.tooLarge('The chunk extensions of the request body are too large.');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return errors.timeout('The request headers were not received in time.');
    default:
      return errors.invalid('The request is not valid HTTP/1.1.', null, 'invalid_http');
  }
}

/**
 * An http.Server serving `handler`, with the JSON envelope on the answers
 * Node writes itself (431 for headers over 16 KB, 400 for malformed HTTP,
 * 408) and a cap on concurrent connections: a connection accepted while
 * `maxConnections` are open gets 503 `too_many_connections` for its request
 * and is closed; beyond twice the cap Node closes new connections at once
 * (server.maxConnections), so a flood cannot exhaust file descriptors.
 */
export function createHttpServer(options: http.ServerOptions, handler: http.RequestListener, limits: ConnectionLimits): http.Server {
  const server = httpModule.createServer(options);
  const overCap = new WeakSet<Socket>();
  let open = 0;
  server.maxConnections = limits.maxConnections() * 2;
  server.on('connection', (socket: Socket) => {
    open++;
    socket.once('close', () => open--);
    const cap = limits.maxConnections();
    server.maxConnections = cap * 2;
    if (open > cap) {
      overCap.add(socket);
      // It is answered on its first request; one that sends none does not stay long.
      const t = setTimeout(() => socket.destroy(), 5000).unref();
      socket.once('close', () => clearTimeout(t));
    }
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!overCap.has(req.socket)) return handler(req, res);
    const err = new GatewayError(503, 'service_unavailable_error', `The gateway is serving as many connections as it accepts (server.max_connections: ${limits.maxConnections()}); retry shortly.`, {
      code: 'too_many_connections',
      headers: { 'retry-after': '1' },
    });
    const body = JSON.stringify(envelope(err));
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'retry-after': '1', connection: 'close' });
    res.end(body);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // A connection reset, or one whose answer has begun: nothing can be written.
    const current = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || current?.headersSent) {
      socket.destroy();
      return;
    }
    writeRaw(socket, clientErrorAnswer(err.code));
  });
  return server;
}
