// The transport `server.transport` names (transport.ts has the contract).
import type { Transport, TransportKind } from './transport.js';
import { createUndiciTransport } from './undici.js';
import { createHttpTransport } from './http.js';
import { createProxyTransport } from './proxy.js';

/**
 * `undici` is the default (server.transport): its connection pool and parser
 * cost less CPU per call than node:http's client (docs/performance.md); `http` is
 * node:http on keep-alive agents, `proxy` is http-proxy-3.
 */
export function createTransport(kind: TransportKind = 'undici'): Transport {
  return kind === 'undici' ? createUndiciTransport() : kind === 'http' ? createHttpTransport() : createProxyTransport();
}
