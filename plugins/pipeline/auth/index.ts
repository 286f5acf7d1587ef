// auth: Bearer (or x-api-key) keys on every POST (and stored-response reads),
// checked from the headers before the body is read (PipelinePlugin.beforeBody), compared in
// constant time. Keys are held only as SHA-256 digests: gateway.yaml stores
// digests, GATEWAY_API_KEYS is hashed at load, and the presented key is hashed
// before comparison, so every comparison is of two 64-character hex digests.
// The presented key is hashed on every request, never cached: a cache would
// have to hold presented keys (or something as costly to derive as their
// digest) in memory, where only digests are held (docs/keys.md).
import { hash } from 'node:crypto';
import type { PipelinePlugin } from '../../../src/plugin.js';
import type { ClientKey } from '../../../src/config/load.js';
import { errors } from '../../../src/errors.js';

export interface AuthSlot {
  key: string;
}

/**
 * The client key: `Authorization: Bearer <key>`, or `x-api-key: <key>` (the
 * Anthropic API's header, which Claude Code and raw Anthropic clients send).
 */
function presentedKey(authorization: string | undefined, apiKey: string | string[] | undefined): string {
  if (authorization) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!m) throw errors.unauthenticated("The 'Authorization' header must be 'Bearer <key>'.");
    return m[1];
  }
  const k = Array.isArray(apiKey) ? apiKey[0] : apiKey;
  if (k?.trim()) return k.trim();
  throw errors.unauthenticated("Missing 'Authorization: Bearer <key>' (or 'x-api-key: <key>') header.");
}

/**
 * Whether two SHA-256 hex digests are equal, in time that does not depend on
 * where they differ (what timingSafeEqual gives two Buffers): every character
 * is compared, with no early exit.
 */
export function sameDigest(a: string, b: string): boolean {
  if (a.length !== 64 || b.length !== 64) return false;
  let diff = 0;
  for (let i = 0; i < 64; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

export default function auth(): PipelinePlugin {
  let keys: ClientKey[] = [];
  let digests: string[] = [];
  return {
    name: 'auth',
    init({ config, logger }) {
      keys = config.keys;
      digests = keys.map((k) => k.hash.toString('hex'));
      if (!keys.length) logger.warn('no client keys configured (keys in gateway.yaml or GATEWAY_API_KEYS): every authenticated request will get 401');
    },
    // On the headers alone, before the core reads the body: a request without
    // a valid key costs no body read and no parse, and its connection closes.
    beforeBody(ctx) {
      const presented = presentedKey(ctx.headers.authorization, ctx.headers['x-api-key']);
      // One-shot, as hex: a string costs less to make than a Buffer digest (no
      // ArrayBuffer), and less than createHash on the hot path.
      const digest = hash('sha256', presented, 'hex');
      let found: ClientKey | undefined;
      // No early exit: the time taken does not depend on which key matched.
      for (let i = 0; i < keys.length; i++) if (sameDigest(digest, digests[i]) && !found) found = keys[i];
      // Keys created at runtime (docs/keys.md): held in memory by the core, revoked ones dropped.
      found ??= ctx.config.runtimeKeys?.lookup(digest);
      if (!found) throw errors.unauthenticated('Invalid API key.');
      if (found.endpoints && !found.endpoints.includes(ctx.endpoint))
        throw errors.forbidden(`This key may not call ${ctx.endpoint}.`);
      ctx.client = found;
      ctx.state.auth = { key: found.name } satisfies AuthSlot;
      ctx.log.key_name = found.name; // the key's label, never the key
    },
  };
}
