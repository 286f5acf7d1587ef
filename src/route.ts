// Routing: the core step that resolves the requested model (aliases
// included) and the fallback chain into the route slot the fallback loop
// (src/dispatch.ts) runs: primary, then `fallbacks` and `extra.fallbacks`,
// then the model's default chain; duplicates removed; capped at
// routing.max_attempts targets (docs/routing.md).
//
// It runs where `route` stands in gateway.yaml's `plugins:` (src/pipeline.ts),
// right after the endpoint validated the body: plugins ahead of it see the
// raw body, plugins after it the validated body and the route slot
// (`ctx.state.route`, for plugins that list `route` in `needs`).
import type { RouteSlot, Target, RequestContext } from './plugin.js';
import type { ModelConfig } from './config/schema.js';
import { errors, clip } from './errors.js';

/** The name of the routing step in `plugins:` and of the slot it fills. */
export const ROUTE = 'route';

function globMatch(pattern: string, id: string): boolean {
  const re = new RegExp('^' + pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return re.test(id);
}

function allowed(ctx: RequestContext, id: string): boolean {
  const list = ctx.client?.models;
  return !list || list.some((p) => globMatch(p, id));
}

const ENDPOINT_NAMES: Record<string, string> = {
  chat_completions: 'chat completions',
  responses: 'responses',
  images_generations: 'image generation',
  messages: 'messages',
};

/**
 * Route a validated request (POST endpoints; the others name no model):
 * fills `ctx.state.route`, or throws the client's error (an unknown,
 * retired or forbidden model, an unknown fallback).
 */
export function routeRequest(ctx: RequestContext): void {
  if (ctx.method !== 'POST') return;
  const { config } = ctx;
  const resolve = (name: string) => config.models.get(name) ?? config.models.get(config.aliases.get(name) ?? '');
  const requested = String(ctx.body.model);
  const primary = resolve(requested);
  if (!primary) throw errors.notFound(`The model '${clip(requested)}' does not exist (see GET /v1/models).`, 'model', 'model_not_found');
  if (primary.status === 'retired') throw errors.notFound(`The model '${primary.id}' is retired and no longer served.`, 'model', 'model_retired');
  if (!primary.endpoints.includes(ctx.endpoint))
    throw errors.invalid(`The model '${primary.id}' does not support ${ENDPOINT_NAMES[ctx.endpoint]} (it supports: ${primary.endpoints.join(', ')}).`, 'model', 'unsupported_model');
  if (!allowed(ctx, primary.id)) throw errors.forbidden(`This key may not use the model '${primary.id}'.`, 'model');
  ctx.log.model = primary.id;
  if (primary.status === 'deprecated') ctx.debug.deprecations.push({ param: 'model', message: `The model '${primary.id}' is deprecated and may be retired.` });

  const targets: ModelConfig[] = [primary];
  const add = (m: ModelConfig | undefined) => {
    if (!m || targets.includes(m)) return;
    if (m.status === 'retired' || !m.endpoints.includes(ctx.endpoint) || !allowed(ctx, m.id)) return;
    targets.push(m);
  };
  const extra = ctx.body.extra as { fallbacks?: string[] } | undefined;
  for (const [field, list] of [['fallbacks', ctx.body.fallbacks as string[] | undefined], ['extra.fallbacks', extra?.fallbacks]] as const) {
    (list ?? []).forEach((name, i) => {
      const m = resolve(name);
      if (!m) throw errors.invalid(`Invalid '${field}[${i}]': the model '${clip(name)}' does not exist.`, `${field}[${i}]`, 'model_not_found');
      add(m);
    });
  }
  for (const name of primary.fallbacks) add(resolve(name));
  const slot: RouteSlot = {
    requested,
    primary: primary.id,
    targets: targets.slice(0, config.routing.max_attempts).map((model): Target => ({ model })),
  };
  ctx.state[ROUTE] = slot;
}
