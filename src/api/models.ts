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
