// The reference limit for one Node process doing the minimum a gateway must do:
// a plain node:http server that reads the client's JSON body, parses and
// re-serialises it (as a gateway patches `model`), sends it upstream on a
// keep-alive agent, reads the upstream JSON answer, parses and re-serialises
// it, and answers. No framework, no validation, no routing, no logging: the
// gateway's throughput is judged against this. Streams (text/event-stream) are piped as
// they come, for completeness.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';

export interface PlainProxy {
  port: number;
  close(): Promise<void>;
}

export async function startPlainProxy(upstream: string, port = 0, host = '127.0.0.1'): Promise<PlainProxy> {
  const target = new URL(upstream);
  // As many upstream connections as the gateway's bench config allows (max_sockets 8192), kept open
  // when idle as the gateway's pools keep theirs, so that the 2,000-stream run measures the same thing
  // through both; 32-connection rows never use more than 32.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8192, maxFreeSockets: 8192, scheduling: 'lifo' });
  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad json"}}');
        return;
      }
      const out = Buffer.from(JSON.stringify(body));
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': out.length, accept: 'application/json' };
      if (req.headers.authorization) headers.authorization = req.headers.authorization;
      // The other providers' credentials (the 2,000-stream run goes through in Anthropic's format).
      for (const h of ['x-api-key', 'anthropic-version', 'x-goog-api-key']) if (req.headers[h]) headers[h] = req.headers[h];
      const up = http.request({ host: target.hostname, port: target.port, method: 'POST', path: req.url, headers, agent }, (ures) => {
        const ct = String(ures.headers['content-type'] ?? '');
        if (ct.includes('text/event-stream')) {
          res.writeHead(ures.statusCode ?? 502, { 'content-type': ct, 'cache-control': 'no-cache' });
          ures.pipe(res);
          return;
        }
        const rchunks: Buffer[] = [];
        ures.on('data', (c: Buffer) => rchunks.push(c));
        ures.on('end', () => {
          let text: string;
          try {
            text = JSON.stringify(JSON.parse(Buffer.concat(rchunks).toString('utf8')));
          } catch {
            res.writeHead(502).end();
            return;
          }
          const buf = Buffer.from(text);
          res.writeHead(ures.statusCode ?? 502, { 'content-type': 'application/json', 'content-length': buf.length });
          res.end(buf);
        });
      });
      up.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.end(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// As a child process: `node dist/bench/plain-proxy.js <upstream-url> [port]`.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const upstream = process.argv[2];
  if (!upstream) {
    process.stderr.write('usage: plain-proxy <upstream-url> [port]\n');
    process.exit(2);
  }
  const p = await startPlainProxy(upstream, Number(process.argv[3] ?? 0));
  const ready = { ready: true, port: p.port, pid: process.pid };
  if (process.send) {
    process.send(ready);
    process.on('disconnect', () => process.exit(0));
  } else process.stdout.write(JSON.stringify(ready) + '\n');
}
