// auth: Bearer (or x-api-key) keys on every POST (and stored-response reads),
// checked from the headers before the body is read (PipelinePlugin.beforeBody), compared in
// constant time. Keys are held only as SHA-256 digests: gateway.yaml stores
// digests, GATEWAY_API_KEYS is hashed at load, and the presented key is hashed
// before comparison, so timingSafeEqual always compares 32 bytes.
import { hash, timingSafeEqual } from 'node:crypto';
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

export default function auth(): PipelinePlugin {
  let keys: ClientKey[] = [];
  return {
    name: 'auth',
    init({ config, logger }) {
      keys = config.keys;
      if (!keys.length) logger.warn('no client keys configured (keys in gateway.yaml or GATEWAY_API_KEYS): every authenticated request will get 401');
    },
    // On the headers alone, before the core reads the body: a request without
    // a valid key costs no body read and no parse, and its connection closes.
    beforeBody(ctx) {
      const presented = presentedKey(ctx.headers.authorization, ctx.headers['x-api-key']);
      const digest = hash('sha256', presented, 'buffer'); // one-shot: cheaper than createHash on the hot path
      let found: ClientKey | undefined;
      // No early exit: the time taken does not depend on which key matched.
      for (const k of keys) if (timingSafeEqual(digest, k.hash) && !found) found = k;
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
