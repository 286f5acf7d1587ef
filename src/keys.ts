// Runtime client keys (docs/keys.md, "Runtime keys"): created and revoked
// through the admin API or `model-gateway keys`, stored hashed
// (src/store/keys.ts). Each process holds the active ones in memory, so that
// authenticating a request reads no database: the table's version is polled
// every second and the keys reloaded when it changes, and with shared state a
// change is also published through Redis, so that a revoked key stops working
// on every replica at once (within the poll interval without Redis).
import { randomBytes, hash } from 'node:crypto';
import type { Logger } from 'pino';
import * as v from 'valibot';
import { limitsOf, type ClientKey, type GatewayConfig } from './config/load.js';
import { ENDPOINTS } from './config/schema.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { KeyConflict, openKeyStore, type KeyPolicy, type KeyStore, type StoredKey } from './store/keys.js';

export const POLL_MS = 1000;

const positiveInt = v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1'));
/** The body of POST /admin/keys (and the options of `model-gateway keys create`). */
export const NewKeySchema = v.strictObject({
  name: v.pipe(v.string(), v.regex(/^[\w.-]{1,64}$/, 'must be 1 to 64 letters, digits, dot, dash or underscore')),
  rpm: v.optional(positiveInt),
  tpm: v.optional(positiveInt),
  max_parallel: v.optional(positiveInt),
  budget_usd: v.optional(v.pipe(v.number(), v.minValue(0, 'must be at least 0'))),
  budget_period: v.optional(v.picklist(['day', 'month'])),
  models: v.optional(v.array(v.pipe(v.string(), v.minLength(1, 'must not be empty')))),
  endpoints: v.optional(v.array(v.picklist(ENDPOINTS))),
});
export type NewKey = v.InferOutput<typeof NewKeySchema>;

/** A runtime key as a client key. */
export function clientKeyOf(k: StoredKey): ClientKey {
  const limits = limitsOf(k.policy);
  return {
    name: k.name,
    hash: Buffer.from(k.sha256, 'hex'),
    source: 'runtime',
    models: k.policy.models,
    endpoints: k.policy.endpoints,
    ...(limits ? { limits } : {}),
  };
}

/** What the API shows of a key: never its hash. */
export function keyJson(k: StoredKey): Record<string, unknown> {
  return { name: k.name, ...k.policy, created_at: Math.floor(k.created_at / 1000), revoked: k.revoked_at !== null, ...(k.revoked_at !== null ? { revoked_at: Math.floor(k.revoked_at / 1000) } : {}) };
}

/** A new secret: `sk-gw-` and 32 random bytes (base64url). */
export function newSecret(): string {
  return `sk-gw-${randomBytes(32).toString('base64url')}`;
}

/** Create a key in the store: its stored form and the secret, shown once. */
export async function createKey(store: KeyStore, config: GatewayConfig, body: NewKey): Promise<{ stored: StoredKey; secret: string }> {
  if (config.keys.some((k) => k.name === body.name)) throw new KeyConflict(`a key named '${body.name}' is in gateway.yaml`);
  const secret = newSecret();
  const { name, ...policy } = body;
  const stored: StoredKey = { name, sha256: hash('sha256', secret, 'hex'), policy: policy as KeyPolicy, created_at: Date.now(), revoked_at: null };
  await store.create(stored);
  return { stored, secret };
}

function sqliteExists(config: GatewayConfig): boolean {
  const f = config.storage.usage.db;
  return f === ':memory:' || existsSync(path.resolve(config.dir, f));
}

/** How replicas hear of key changes (Redis pub/sub when state is shared). */
export interface KeyBus {
  publish(msg: string): void;
  subscribe(onMessage: (msg: string) => void): void;
}

/** The runtime keys of this process. */
export class RuntimeKeys {
  private byDigest = new Map<string, ClientKey>();
  store?: KeyStore;
  private version = '';
  private timer?: NodeJS.Timeout;
  private retry?: NodeJS.Timeout;
  private closed = false;
  private failures = 0;
  constructor(
    private logger: Logger,
    private bus?: KeyBus,
  ) {
    bus?.subscribe((msg) => {
      // `revoked <name>`: drop it at once, then reload; anything else: reload.
      if (msg.startsWith('revoked ')) this.drop(msg.slice(8));
      void this.refresh(true);
    });
  }

  /**
   * Open the store (retried every 30 s when it cannot be opened) and start
   * following it. An embedded SQLite file that does not exist yet, on a
   * gateway without an admin key, is not created: it is opened once it
   * appears (`model-gateway keys create` creates it).
   */
  async open(config: GatewayConfig): Promise<void> {
    if (!config.storage.url && !config.adminKeys.length && !sqliteExists(config)) {
      this.retry = setTimeout(() => void this.open(config), POLL_MS);
      this.retry.unref();
      return;
    }
    try {
      this.store = await openKeyStore(config);
      await this.refresh(true);
      this.timer = setInterval(() => void this.refresh(false), POLL_MS);
      this.timer.unref();
    } catch (err) {
      if (this.closed) return;
      // Retried after 1 s, 2 s, 4 s… up to 30 s (a file another process is creating is busy for a moment).
      const wait = Math.min(30_000, POLL_MS * 2 ** this.failures++);
      if (this.failures === 1 || wait === 30_000)
        this.logger.error({ error: (err as Error).message }, `cannot open the key store (storage.url / storage.usage.db): runtime keys are unavailable; retrying in ${wait / 1000} s`);
      this.retry = setTimeout(() => void this.open(config), wait);
      this.retry.unref();
    }
  }

  /** The active runtime key with this SHA-256 digest (bytes, or lower-case hex). */
  lookup(digest: Buffer | string): ClientKey | undefined {
    return this.byDigest.size ? this.byDigest.get(typeof digest === 'string' ? digest : digest.toString('hex')) : undefined;
  }

  private drop(name: string): void {
    for (const [d, k] of this.byDigest) if (k.name === name) this.byDigest.delete(d);
  }

  /** Reload the keys when the table changed (or `force`). */
  async refresh(force: boolean): Promise<void> {
    const store = this.store;
    if (!store) return;
    try {
      const version = await store.version();
      if (!force && version === this.version) return;
      const keys = await store.list();
      const next = new Map<string, ClientKey>();
      for (const k of keys) if (k.revoked_at === null) next.set(k.sha256, clientKeyOf(k));
      this.byDigest = next;
      this.version = version;
    } catch (err) {
      this.logger.warn({ error: (err as Error).message }, 'runtime keys: cannot read the key store; keeping the keys known');
    }
  }

  /** A key was created or revoked here: reload now, and tell the other replicas. */
  async changed(msg: string): Promise<void> {
    if (msg.startsWith('revoked ')) this.drop(msg.slice(8));
    await this.refresh(true);
    this.bus?.publish(msg);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.retry);
    await this.store?.close();
  }
}
