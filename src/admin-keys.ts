// POST /admin/keys, GET /admin/keys, DELETE /admin/keys/{name}: runtime client
// keys (docs/keys.md, "Runtime keys"), behind the admin key (src/admin.ts).
import type Koa from 'koa';
import type Router from '@koa/router';
import type { GatewayConfig } from './config/load.js';
import { errors, GatewayError, clip } from './errors.js';
import { validate } from './validate.js';
import { readJsonBody, type BodyOptions } from './body.js';
import { adminKeyName } from './admin.js';
import { jsonBody } from './respond.js';
import { NewKeySchema, createKey, keyJson, type RuntimeKeys } from './keys.js';
import { KeyConflict, type KeyStore } from './store/keys.js';

function storeOf(keys: RuntimeKeys): KeyStore {
  if (!keys.store) throw new GatewayError(503, 'service_unavailable_error', 'The key store is not available (it could not be opened: see the gateway log).', { code: 'key_store_unavailable' });
  return keys.store;
}

const conflict = (err: unknown): never => {
  if (err instanceof KeyConflict) throw new GatewayError(409, 'invalid_request_error', `Invalid 'name': ${err.message}; revoke it first or choose another name.`, { param: 'name', code: 'key_exists' });
  throw err;
};

export function adminKeyRoutes(router: Router, config: () => GatewayConfig, keys: RuntimeKeys, bodyOptions: () => BodyOptions): void {
  router.post('/admin/keys', async (kctx: Koa.Context) => {
    const cfg = config();
    kctx.state.log.admin_key = adminKeyName(kctx, cfg);
    // Read after the admin key is checked: an unauthenticated caller's body is never read.
    const raw = await readJsonBody(kctx.req, bodyOptions()).catch((err: unknown) => {
      // The rest of an unread body would stall the connection: close it after the answer.
      if (!kctx.req.complete) kctx.res.setHeader('connection', 'close');
      throw err;
    });
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw errors.invalid('Request body must be a JSON object.', null, 'invalid_json');
    const body = validate(NewKeySchema, raw);
    const { stored, secret } = await createKey(storeOf(keys), cfg, body).catch(conflict);
    await keys.changed(`created ${stored.name}`);
    kctx.status = 201;
    // The key itself, this once: only its SHA-256 is kept.
    const { revoked: _r, ...shown } = keyJson(stored);
    jsonBody(kctx, { name: stored.name, key: secret, ...shown });
  });
  router.get('/admin/keys', async (kctx: Koa.Context) => {
    kctx.state.log.admin_key = adminKeyName(kctx, config());
    jsonBody(kctx, { data: (await storeOf(keys).list()).map(keyJson) });
  });
  router.delete('/admin/keys/:name', async (kctx: Koa.Context) => {
    kctx.state.log.admin_key = adminKeyName(kctx, config());
    const name = String(kctx.params.name);
    if (!(await storeOf(keys).revoke(name, Date.now()))) throw errors.notFound(`No active runtime key named '${clip(name)}'.`, null, 'key_not_found');
    await keys.changed(`revoked ${name}`);
    jsonBody(kctx, { name, revoked: true });
  });
}
