// GET /v1/models and GET /v1/models/{id}: the catalog, spec 2.5. No authentication.
import type { GatewayConfig } from '../config/load.js';
import { errors, clip } from '../errors.js';
import { MODEL_STATUS, type ModelConfig } from '../config/schema.js';

export function listModels(config: GatewayConfig, status: unknown): Record<string, unknown> {
  if (status !== undefined && (typeof status !== 'string' || !(MODEL_STATUS as readonly string[]).includes(status))) {
    throw errors.invalid(`Invalid 'status': must be one of ${MODEL_STATUS.map((s) => `'${s}'`).join(', ')}.`, 'status', 'invalid_value');
  }
  const data = [...config.models.values()].filter((m) => !status || m.status === status).map(modelObject);
  return { object: 'list', data };
}

/** GET /v1/models/{owner}/{model} (the SDK's models.retrieve); an alias resolves to its model. */
export function getModel(config: GatewayConfig, id: string): Record<string, unknown> {
  const m = config.models.get(id) ?? config.models.get(config.aliases.get(id) ?? '');
  if (!m) throw errors.notFound(`The model '${clip(id)}' does not exist (see GET /v1/models).`, 'model', 'model_not_found');
  return modelObject(m);
}

function modelObject(m: ModelConfig): Record<string, unknown> {
  return {
    id: m.id,
    object: 'model',
    created: m.created,
    owned_by: m.id.slice(0, m.id.indexOf('/')),
    status: m.status,
    modalities: { input: [...m.modalities.input], output: [...m.modalities.output] },
    endpoints: [...m.endpoints],
    ...(m.context_window ? { context_window: m.context_window } : {}),
    ...(m.max_output_tokens ? { max_output_tokens: m.max_output_tokens } : {}),
  };
}

/**
 * The catalog in the shape of Anthropic's Models API
 * (https://docs.anthropic.com/en/api/models-list), for that API's clients
 * (they send `anthropic-version`: `client.models.list()` of
 * @anthropic-ai/sdk): the models that serve `messages`, newest first, paged
 * by `after_id` / `before_id` and `limit` (1 to 1000, default 20).
 */
export function listModelsAnthropic(config: GatewayConfig, query: Record<string, unknown>): Record<string, unknown> {
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw errors.invalid("Invalid 'limit': must be an integer from 1 to 1000.", 'limit', 'invalid_value');
  const all = [...config.models.values()].filter((m) => m.endpoints.includes('messages') && m.status !== 'retired').sort((a, b) => b.created - a.created || a.id.localeCompare(b.id));
  const at = (param: 'after_id' | 'before_id') => {
    const id = query[param];
    if (id === undefined) return undefined;
    const i = all.findIndex((m) => m.id === id);
    if (i === -1) throw errors.invalid(`Invalid '${param}': no model '${clip(String(id))}' in the list.`, param, 'invalid_value');
    return i;
  };
  const after = at('after_id');
  const before = at('before_id');
  const from = before !== undefined ? Math.max(0, before - limit) : after !== undefined ? after + 1 : 0;
  const to = before !== undefined ? before : Math.min(all.length, from + limit);
  const page = all.slice(from, to).map(anthropicModel);
  const hasMore = before !== undefined ? from > 0 : to < all.length;
  return { data: page, has_more: hasMore, first_id: page[0]?.id ?? null, last_id: page[page.length - 1]?.id ?? null };
}

/** One model in Anthropic's shape (`client.models.retrieve()`); an alias resolves to its model. */
export function getModelAnthropic(config: GatewayConfig, id: string): Record<string, unknown> {
  const m = config.models.get(id) ?? config.models.get(config.aliases.get(id) ?? '');
  if (!m) throw errors.notFound(`The model '${clip(id)}' does not exist (see GET /v1/models).`, 'model', 'model_not_found');
  return anthropicModel(m);
}

function anthropicModel(m: ModelConfig): { type: 'model'; id: string; display_name: string; created_at: string } {
  return { type: 'model', id: m.id, display_name: m.id, created_at: new Date(m.created * 1000).toISOString() };
}
