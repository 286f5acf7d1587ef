// `model-gateway keys create|list|revoke`: runtime client keys from the
// command line, in the database of the gateway.yaml given (its storage
// settings); a change is published through Redis when state.redis_url is set,
// and running gateways pick it up within a second anyway (docs/keys.md).
import { parseArgs } from 'node:util';
import * as v from 'valibot';
import type { GatewayConfig } from './config/load.js';
import { NewKeySchema, createKey, keyJson } from './keys.js';
import { openKeyStore, KeyConflict } from './store/keys.js';

export const KEYS_USAGE = `usage: model-gateway keys <command> [--config gateway.yaml]
  create <name> [--rpm N] [--tpm N] [--max-parallel N] [--budget-usd X] [--budget-period day|month]
                [--models a,b] [--endpoints chat_completions,responses,messages,images_generations]
                   create a key; prints it once (only its SHA-256 is stored)
  list             the runtime keys, without secrets
  revoke <name>    revoke a key (every replica stops accepting it within 2 s)`;

export async function keysCommand(args: string[], load: (file: string) => Promise<GatewayConfig>, defaultFile: string): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        config: { type: 'string' },
        rpm: { type: 'string' },
        tpm: { type: 'string' },
        'max-parallel': { type: 'string' },
        'budget-usd': { type: 'string' },
        'budget-period': { type: 'string' },
        models: { type: 'string' },
        endpoints: { type: 'string' },
      },
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${KEYS_USAGE}\n`);
    return 2;
  }
  const [sub, name, ...rest] = parsed.positionals;
  const o = parsed.values;
  if (!sub || rest.length || (sub !== 'list' && !name) || !['create', 'list', 'revoke'].includes(sub)) {
    process.stderr.write(KEYS_USAGE + '\n');
    return 2;
  }
  const config = await load(o.config ?? defaultFile);
  const store = await openKeyStore(config);
  try {
    if (sub === 'list') {
      process.stdout.write(JSON.stringify({ data: (await store.list()).map(keyJson) }, null, 2) + '\n');
      return 0;
    }
    if (sub === 'revoke') {
      if (!(await store.revoke(name, Date.now()))) {
        process.stderr.write(`no active runtime key named '${name}'\n`);
        return 1;
      }
      await publish(config, `revoked ${name}`);
      process.stdout.write(JSON.stringify({ name, revoked: true }) + '\n');
      return 0;
    }
    const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));
    const list = (s: string | undefined) => (s === undefined ? undefined : s.split(',').map((x) => x.trim()).filter(Boolean));
    const raw = Object.fromEntries(
      Object.entries({ name, rpm: num(o.rpm), tpm: num(o.tpm), max_parallel: num(o['max-parallel']), budget_usd: num(o['budget-usd']), budget_period: o['budget-period'], models: list(o.models), endpoints: list(o.endpoints) }).filter(([, x]) => x !== undefined),
    );
    const r = v.safeParse(NewKeySchema, raw);
    if (!r.success) {
      const issue = r.issues[0];
      const field = issue.path?.map((p) => p.key).join('.') ?? '';
      process.stderr.write(`--${field.replace(/_/g, '-').replace(/\.\d+$/, '')}: ${issue.message}\n`);
      return 2;
    }
    try {
      const { stored, secret } = await createKey(store, config, r.output);
      await publish(config, `created ${stored.name}`);
      const { revoked: _r, ...shown } = keyJson(stored);
      process.stdout.write(JSON.stringify({ name: stored.name, key: secret, ...shown }, null, 2) + '\n');
      return 0;
    } catch (err) {
      if (err instanceof KeyConflict) {
        process.stderr.write(`${err.message}\n`);
        return 1;
      }
      throw err;
    }
  } finally {
    await store.close();
  }
}

/** Tell running replicas at once (they would see it at their next poll anyway). */
async function publish(config: GatewayConfig, msg: string): Promise<void> {
  const st = config.state;
  if (!st.redis_url) return;
  const { Redis } = await import('ioredis');
  const r = new Redis(st.redis_url, { connectTimeout: 2000, commandTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.publish(`${st.key_prefix}keys`, msg);
  } catch {
    process.stderr.write('warning: Redis did not take the change; running gateways see it within a second\n');
  } finally {
    r.disconnect();
  }
}
