// Modules the gateway loads with require() rather than an ES import, and
// libraries it loads only when first needed (docs/performance.md, "Start-up").
//
// - node:http: an ES import of a built-in reads every one of its exports, and
//   http's WebSocket, CloseEvent and MessageEvent getters then load Node's
//   bundled fetch/WebSocket implementation, about 13 MB of memory and tens of
//   milliseconds at start-up for code the gateway never runs. require() leaves
//   the getters alone. (Type-only imports of node:http are fine; so is an
//   import of a CommonJS package that requires it.)
// - node:https: loaded on first use (https(), below).
// - undici: its index loads fetch, WebSocket, the caches and the cookie helpers
//   too (and, through them, that same bundled copy); the gateway uses a Pool and
//   its request API only, loaded on the first upstream call.
import { createRequire } from 'node:module';
import type { Pool as PoolType } from 'undici';

const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof import('node:http');
let httpsMod: typeof import('node:https') | undefined;
/**
 * node:https, loaded on the first https upstream of the `http` transport (src/upstream/http.ts,
 * agents.ts): it brings node:tls, about 3.5 MB of idle RSS for a gateway whose upstreams are
 * plain http (a sidecar in front of a local model server, the benchmark) or that uses undici.
 */
export function https(): typeof import('node:https') {
  return (httpsMod ??= require('node:https') as typeof import('node:https'));
}
/** @koa/router's CommonJS build: its ES build imports node:http. */
export const KoaRouter = require('@koa/router') as typeof import('@koa/router').default;

let PoolClass: typeof PoolType | undefined;

/**
 * undici's Pool with its request API (`request`, `stream`, … as the package's
 * index installs them), without the rest of the package. Falls back to the
 * whole package should a release move these files (`undiciSource()` says
 * which one was loaded: test/startup.test.ts checks it).
 */
export function undiciPool(): typeof PoolType {
  if (PoolClass) return PoolClass;
  try {
    const Dispatcher = require('undici/lib/dispatcher/dispatcher.js') as { prototype: object };
    const api = require('undici/lib/api/index.js') as Record<string, unknown>;
    const Pool = require('undici/lib/dispatcher/pool.js') as typeof PoolType;
    if (!(Pool.prototype instanceof (Dispatcher as unknown as typeof PoolType))) throw new Error('undici layout changed');
    // What undici's index does on load (idempotent: the same functions).
    Object.assign(Dispatcher.prototype, api);
    PoolClass = Pool;
    source = 'parts';
  } catch {
    PoolClass = (require('undici') as typeof import('undici')).Pool;
    source = 'index';
  }
  return PoolClass;
}

let source: 'parts' | 'index' | undefined;
/** Which undici undiciPool() loaded: its parts, or (a release that moved them) the whole package. */
export function undiciSource(): 'parts' | 'index' | undefined {
  return source;
}

/** undici's `request` (the whole package: only the OTLP exporter uses it, when traces are on). */
export function undiciRequest(): typeof import('undici').request {
  return (require('undici') as typeof import('undici')).request;
}
