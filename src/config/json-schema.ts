// The JSON Schema of gateway.yaml, generated from the valibot schema, for
// editors (yaml-language-server reads `# yaml-language-server: $schema=...`).
// A provider block's own keys come from its family's schema (the built-in
// provider plugins' families, given by the CLI): each family adds them under
// an `if family is … then` clause, so an editor checks and completes them.
import { toJsonSchema } from '@valibot/to-json-schema';
import type * as v from 'valibot';
import { ConfigSchema } from './schema.js';
import type { FamilyDefaults } from './load.js';

type Json = Record<string, unknown>;

function familyClauses(families: Record<string, FamilyDefaults>): Json[] {
  const out: Json[] = [];
  for (const [name, fam] of Object.entries(families).sort(([a], [b]) => a.localeCompare(b))) {
    if (!fam.schema) continue;
    const js = toJsonSchema(fam.schema as v.GenericSchema, { errorMode: 'ignore', typeMode: 'input' }) as Json;
    // No `required`: a family's keys may come from the environment.
    const then: Json = { properties: js.properties ?? {} };
    out.push({ if: { properties: { family: { const: name } }, required: ['family'] }, then });
  }
  return out;
}

export function configJsonSchema(families: Record<string, FamilyDefaults> = {}): Record<string, unknown> {
  const schema = toJsonSchema(ConfigSchema, { errorMode: 'ignore', typeMode: 'input' }) as Json;
  const clauses = familyClauses(families);
  if (clauses.length) {
    const providers = (schema.properties as Json).providers as Json;
    const items = providers.items as Json;
    providers.items = { ...items, allOf: clauses };
  }
  return { ...schema, title: 'model-gateway configuration (gateway.yaml)' };
}
