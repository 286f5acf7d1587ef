// The JSON Schema of gateway.yaml, generated from the valibot schema, for
// editors (yaml-language-server reads `# yaml-language-server: $schema=...`).
import { toJsonSchema } from '@valibot/to-json-schema';
import { ConfigSchema } from './schema.js';

export function configJsonSchema(): Record<string, unknown> {
  const schema = toJsonSchema(ConfigSchema, { errorMode: 'ignore', typeMode: 'input' }) as Record<string, unknown>;
  return { ...schema, title: 'model-gateway configuration (gateway.yaml)' };
}
