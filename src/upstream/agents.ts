// The node:http side shared by the http and proxy transports: one keep-alive
// agent per provider (pool) and scheme, the body and headers a request is
// sent with, and the release of a response the consumer stopped reading.
import type { IncomingMessage, Agent } from 'node:http';
import { http, https } from '../lazy.js';
import { poolIn, type UpstreamRequest } from './transport.js';

/** release() for a node:http response: drain a complete one into the pool, give one still arriving 100 ms. */
export function releaseIncoming(body: IncomingMessage): void {
  if (body.destroyed || body.readableEnded) return;
  if (!body.complete) {
    const t = setTimeout(() => body.destroy(), 100);
    const clear = () => clearTimeout(t);
    body.once('end', clear);
    body.once('close', clear);
  }
  body.resume();
}

/** One keep-alive agent per provider (pool) and scheme. */
export function createAgents() {
  const agents = new Map<string, Agent>();
  return {
    get(pool: string, isHttps: boolean, maxSockets: number): Agent {
      const key = `${isHttps ? 's' : ''}:${pool}`;
      let a = agents.get(key);
      if (!a) {
        const opts = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo' as const };
        a = isHttps ? new (https().Agent)(opts) : new http.Agent(opts);
        agents.set(key, a);
      }
      return a;
    },
    retire(pools: ReadonlySet<string>) {
      for (const [key, a] of agents) {
        if (!poolIn(key.slice(key.indexOf(':') + 1), pools)) continue;
        agents.delete(key);
        // A socket handed back is destroyed from now on; the ones in use finish their call.
        a.maxFreeSockets = 0;
        for (const list of Object.values(a.freeSockets)) for (const s of list ?? []) s.destroy();
      }
    },
    close() {
      for (const a of agents.values()) a.destroy();
      agents.clear();
    },
  };
}

/** The body as one Buffer, and the headers node:http sends it with: the plugin's, the host and the length. */
export function outgoing(r: UpstreamRequest, host: string): { body: Buffer | undefined; headers: Record<string, string> } {
  const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body);
  const headers: Record<string, string> = { ...r.headers, host };
  if (body) headers['content-length'] = String(body.length);
  else if (r.method !== 'GET') headers['content-length'] = '0';
  return { body, headers };
}
