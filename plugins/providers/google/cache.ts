// Gemini cached contents for `cache_control` prefixes (docs/providers-google.md
// "Prompt caching"; https://ai.google.dev/gemini-api/docs/caching).
//
// A marked prefix becomes one cached content, created once per (provider,
// model, prefix) and reused until shortly before it expires. The store lives in
// the core's cross-request `shared` map and, with several replicas on one
// Redis (ProviderCall.replicas), in Redis too: a replica that has not seen a
// prefix first looks for the cached content another one created. Concurrent
// requests with the same prefix wait for one creation (per replica: two
// replicas that miss at the same moment may each create one). A creation Google refuses as invalid (typically
// "Cached content is too small": 1,024 tokens minimum on Flash, 4,096 on Pro)
// is remembered for a while so that every request does not pay the round trip;
// other failures (429, 5xx, network) are retried by the next request.
import { createHash } from 'node:crypto';
import type { ProviderCall } from '../../../src/plugin.js';
import { UpstreamError } from '../../../src/provider/errors.js';
import { upstreamJson } from '../../../src/provider/http.js';
import type { CachedContent, CachedContentCreate } from './wire.js';
import { geminiError, parseDuration } from './errors.js';
import type { GeminiSite } from './index.js';

const STORE = 'google.cachedContents';
const MAX_ENTRIES = 512;
/** How long a refused (4xx) creation is remembered. */
const REFUSED_FOR_MS = 10 * 60_000;

type Outcome = { name: string; created: boolean } | { error: string };

interface Entry {
  name?: string;
  expiresAt: number;
  pending?: Promise<Outcome>;
  refused?: string;
}

function storeOf(shared: Map<string, unknown>): Map<string, Entry> {
  let s = shared.get(STORE) as Map<string, Entry> | undefined;
  if (!s) shared.set(STORE, (s = new Map()));
  return s;
}

function prune(store: Map<string, Entry>, now: number): void {
  if (store.size < MAX_ENTRIES) return;
  for (const [k, e] of store) if (!e.pending && e.expiresAt <= now) store.delete(k);
  // Still full: drop the oldest (Map keeps insertion order).
  for (const k of store.keys()) {
    if (store.size < MAX_ENTRIES) break;
    store.delete(k);
  }
}

export function cacheKey(provider: string, base: string, create: CachedContentCreate): string {
  const { ttl: _ttl, ...content } = create;
  return createHash('sha256').update(`${provider}\0${base}\0${JSON.stringify(content)}`).digest('hex');
}

export interface CacheResult {
  key: string;
  /** The cached content's name (`cachedContents/...`), or why there is none. */
  name?: string;
  error?: string;
  created: boolean;
}

/** Find or create the cached content for a prefix. Never throws for an upstream refusal: the caller sends the request uncached. */
export async function ensureCachedContent(call: ProviderCall<unknown>, site: GeminiSite, create: CachedContentCreate): Promise<CacheResult> {
  const store = storeOf(call.shared);
  const key = cacheKey(call.provider.name, site.cachesUrl, create);
  const ttlMs = parseDuration(create.ttl) ?? 600_000;
  // Stop using an entry a little before Google expires it, so that a request in flight does not miss.
  const margin = Math.min(10_000, ttlMs / 4);
  const now = Date.now();
  const found = store.get(key);
  if (found?.name && found.expiresAt - margin > now) return { key, name: found.name, created: false };
  if (found?.refused && found.expiresAt > now) return { key, error: found.refused, created: false };
  if (found?.pending) {
    const o = await found.pending;
    return 'name' in o ? { key, name: o.name, created: false } : { key, error: o.error, created: false };
  }

  const pending = (async (): Promise<Outcome> => {
    // Another replica's (its entry expires with the cached content); Redis unavailable is a miss.
    const remote = await call.replicas?.get(key).catch(() => undefined);
    if (remote) {
      const r = JSON.parse(remote) as { name?: unknown; expiresAt?: unknown };
      if (typeof r.name === 'string' && typeof r.expiresAt === 'number' && r.expiresAt - margin > Date.now()) {
        store.set(key, { name: r.name, expiresAt: r.expiresAt });
        return { name: r.name, created: false };
      }
    }
    try {
      const res = await upstreamJson<CachedContent>(call, { url: site.cachesUrl, headers: site.headers, body: create, mapError: geminiError });
      if (typeof res.name !== 'string' || !res.name) throw new Error('no name in the cachedContents answer');
      const expiresAt = Date.parse(res.expireTime ?? '') || Date.now() + ttlMs;
      store.set(key, { name: res.name, expiresAt });
      // Shared without waiting: the request goes on whether Redis takes it or not.
      call.replicas?.set(key, JSON.stringify({ name: res.name, expiresAt }), expiresAt - Date.now()).catch(() => {});
      return { name: res.name, created: true };
    } catch (err) {
      const refused = err instanceof UpstreamError && err.status >= 400 && err.status < 500 && err.status !== 429;
      const error = err instanceof UpstreamError ? `${err.status} ${err.error.message}` : (err as Error).message;
      if (refused) store.set(key, { refused: error, expiresAt: Date.now() + Math.min(ttlMs, REFUSED_FOR_MS) });
      else store.delete(key);
      return { error };
    }
  })();
  prune(store, now);
  store.set(key, { pending, expiresAt: 0 });
  const o = await pending;
  return 'name' in o ? { key, name: o.name, created: o.created } : { key, error: o.error, created: false };
}

/** Forget a cached content Google no longer knows (deleted or expired early), here and for the other replicas. */
export function evictCachedContent(call: Pick<ProviderCall<unknown>, 'shared' | 'replicas'>, key: string): void {
  storeOf(call.shared).delete(key);
  call.replicas?.delete(key).catch(() => {});
}
