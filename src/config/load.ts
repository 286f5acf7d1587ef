// Loads gateway.yaml: parse (keeping source positions), interpolate ${VAR}
// and ${VAR:-default} inside string values, validate with valibot, then check
// cross-references. Every problem names its path and line; all are reported at once.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import * as v from 'valibot';
import { LineCounter, parseDocument, isScalar, visit, type Document } from 'yaml';
import { ConfigSchema, MODEL_ID, type RawConfig, type ProviderConfig, type ModelConfig, type KeyConfig, type Endpoint } from './schema.js';

export interface ConfigProblem {
  path: string;
  line?: number;
  message: string;
}

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: ConfigProblem[],
  ) {
    super(
      `${file}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n` +
        problems.map((p) => `  ${p.path || '(root)'}${p.line ? ` (line ${p.line})` : ''}: ${p.message}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}

/** What a provider family tells the loader: where its defaults come from. */
export interface FamilyDefaults {
  defaultBaseUrl?: string;
  env?: { apiKey?: string; baseUrl?: string };
  /**
   * Endpoints this family serves through the plugin's same-API hooks
   * (`responses`, `images`). Absent: every hook the plugin has. A family that
   * lists fewer (OpenAI-compatible servers speak Chat Completions only) gets
   * the other endpoints translated to chat where the gateway can.
   */
  native?: readonly Endpoint[];
  /**
   * The tokenizer of this family's models, when the gateway has it
   * (`o200k_base`): local token counts (truncation, input-token counts the
   * provider cannot make) are then exact; otherwise they are estimates.
   */
  tokenizer?: 'o200k_base';
}

export interface ClientKey {
  name: string;
  hash: Buffer;
  /** `file`: a named key from gateway.yaml; `env`: from GATEWAY_API_KEYS (named by position). */
  source: 'file' | 'env';
  models?: string[];
  endpoints?: string[];
}

export interface GatewayConfig {
  file: string | null;
  dir: string;
  server: RawConfig['server'];
  routing: RawConfig['routing'];
  storage: RawConfig['storage'];
  keys: ClientKey[];
  providers: Map<string, ProviderConfig>;
  models: Map<string, ModelConfig>;
  aliases: Map<string, string>;
  plugins: RawConfig['plugins'];
}

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  families: Record<string, FamilyDefaults>;
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

export function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export function loadConfigFile(file: string, opts: LoadOptions): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [{ path: '', message: `cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})` }]);
  }
  return loadConfigText(text, file, opts);
}

/** Parse a gateway.yaml and replace ${VAR} inside its scalar strings; YAML errors and unset variables are problems. */
function parseInterpolated(text: string, env: NodeJS.ProcessEnv, problems: ConfigProblem[]): { doc: Document; lines: LineCounter } | undefined {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  for (const e of doc.errors) {
    problems.push({ path: '', line: lines.linePos(e.pos[0]).line, message: e.message.split('\n')[0] });
  }
  if (problems.length) return undefined;
  // Interpolate inside scalar strings only, so a variable can never inject YAML.
  visit(doc, {
    Scalar(_key, node, ancestry) {
      if (typeof node.value !== 'string' || !node.value.includes('${')) return;
      node.value = node.value.replace(VAR, (_m, name: string, dflt: string | undefined) => {
        const val = env[name];
        if (val !== undefined && val !== '') return val;
        if (dflt !== undefined) return dflt;
        const p = pathOf(ancestry, node);
        problems.push({ path: p.join('.'), line: node.range ? lines.linePos(node.range[0]).line : undefined, message: `environment variable ${name} is not set (write \${${name}:-default} to allow that)` });
        return '';
      });
    },
  });
  return { doc, lines };
}

/**
 * `server.node_flags` of a gateway.yaml, read before anything else is loaded
 * (so that `start` can re-execute itself early); undefined when the file
 * does not pass the schema: the full load then reports why.
 */
export function peekNodeFlags(file: string, env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const problems: ConfigProblem[] = [];
  const parsed = parseInterpolated(text, env, problems);
  if (!parsed || problems.length) return undefined;
  const r = v.safeParse(ConfigSchema, parsed.doc.toJS() ?? {});
  return r.success ? r.output.server.node_flags : undefined;
}

export function loadConfigText(text: string, file: string, opts: LoadOptions): GatewayConfig {
  const env = opts.env ?? process.env;
  const problems: ConfigProblem[] = [];
  const source = parseInterpolated(text, env, problems);
  if (!source) throw new ConfigError(file, problems);
  const { doc, lines } = source;
  const lineOf = (p: (string | number)[]): number | undefined => lineAt(doc, lines, p);

  const data = doc.toJS() ?? {};
  const parsed = v.safeParse(ConfigSchema, data);
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const p = (issue.path ?? []).map((x) => x.key as string | number);
      const received = issue.kind === 'schema' && issue.received && issue.received !== 'undefined' ? ` (got ${issue.received})` : '';
      let message = issue.message;
      if ((issue.type as string) === 'strict_object' || (issue.type as string) === 'never') message = `unknown key`;
      problems.push({ path: p.join('.'), line: lineOf(p), message: message + (message === 'unknown key' ? '' : received) });
    }
    throw new ConfigError(file, problems);
  }
  const raw = parsed.output;
  const cfg = resolve(raw, file, env, opts.families, problems, lineOf);
  if (problems.length) throw new ConfigError(file, problems);
  return cfg;
}

function resolve(
  raw: RawConfig,
  file: string,
  env: NodeJS.ProcessEnv,
  families: Record<string, FamilyDefaults>,
  problems: ConfigProblem[],
  lineOf: (p: (string | number)[]) => number | undefined,
): GatewayConfig {
  const providers = new Map<string, ProviderConfig>();
  raw.providers.forEach((p, i) => {
    const fam = families[p.family];
    if (!fam) {
      problems.push({ path: `providers.${i}.family`, line: lineOf(['providers', i, 'family']), message: `unknown provider family "${p.family}" (known: ${Object.keys(families).join(', ')})` });
      return;
    }
    if (providers.has(p.name)) problems.push({ path: `providers.${i}.name`, line: lineOf(['providers', i, 'name']), message: `duplicate provider name "${p.name}"` });
    const baseUrl = p.base_url || (fam.env?.baseUrl && env[fam.env.baseUrl]) || fam.defaultBaseUrl;
    if (!baseUrl) {
      problems.push({ path: `providers.${i}.base_url`, line: lineOf(['providers', i]), message: `family ${p.family} has no default base URL: set base_url` });
      return;
    }
    const apiKey = p.api_key || (fam.env?.apiKey ? env[fam.env.apiKey] : undefined) || undefined;
    providers.set(p.name, { ...p, base_url: baseUrl.replace(/\/+$/, ''), api_key: apiKey });
  });

  const models = new Map<string, ModelConfig>();
  raw.models.forEach((m, i) => {
    if (models.has(m.id)) problems.push({ path: `models.${i}.id`, line: lineOf(['models', i, 'id']), message: `duplicate model id "${m.id}"` });
    m.deployments.forEach((d, j) => {
      if (!raw.providers.some((p) => p.name === d.provider))
        problems.push({ path: `models.${i}.deployments.${j}.provider`, line: lineOf(['models', i, 'deployments', j, 'provider']), message: `no provider named "${d.provider}"` });
    });
    models.set(m.id, m);
  });
  raw.models.forEach((m, i) =>
    m.fallbacks.forEach((f, j) => {
      if (!models.has(f) && !raw.aliases[f]) problems.push({ path: `models.${i}.fallbacks.${j}`, line: lineOf(['models', i, 'fallbacks', j]), message: `no model "${f}" in the catalog` });
    }),
  );

  const aliases = new Map<string, string>();
  for (const [alias, target] of Object.entries(raw.aliases)) {
    if (!models.has(target)) problems.push({ path: `aliases.${alias}`, line: lineOf(['aliases', alias]), message: `alias points to unknown model "${target}"` });
    if (models.has(alias)) problems.push({ path: `aliases.${alias}`, line: lineOf(['aliases', alias]), message: `alias shadows the model of the same id` });
    aliases.set(alias, target);
  }

  const keys: ClientKey[] = raw.keys.map((k: KeyConfig) => ({
    name: k.name,
    hash: Buffer.from(k.sha256.toLowerCase(), 'hex'),
    source: 'file' as const,
    models: k.models,
    endpoints: k.endpoints,
  }));
  const envKeys = (env.GATEWAY_API_KEYS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  envKeys.forEach((k, i) => keys.push({ name: `env-${i + 1}`, hash: Buffer.from(sha256Hex(k), 'hex'), source: 'env' }));

  const port = env.PORT !== undefined && env.PORT !== '' ? Number(env.PORT) : raw.server.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push({ path: 'PORT', message: `PORT must be an integer from 0 to 65535, got "${env.PORT}"` });

  return {
    file,
    dir: path.dirname(path.resolve(file)),
    server: { ...raw.server, port },
    routing: raw.routing,
    storage: raw.storage,
    keys,
    providers,
    models,
    aliases,
    plugins: raw.plugins,
  };
}

function pathOf(ancestry: readonly unknown[], node: unknown): (string | number)[] {
  const out: (string | number)[] = [];
  const chain = [...ancestry, node];
  for (let i = 0; i < chain.length - 1; i++) {
    const parent = chain[i] as { items?: unknown[] };
    const child = chain[i + 1];
    if (parent && Array.isArray(parent.items)) {
      const idx = parent.items.indexOf(child);
      if (idx >= 0) {
        const isSeq = (parent as { constructor: { name: string } }).constructor.name === 'YAMLSeq';
        if (isSeq) out.push(idx);
      }
    } else if (parent && (parent as { key?: unknown }).key !== undefined) {
      const key = (parent as { key: unknown }).key;
      out.push(isScalar(key) ? String(key.value) : String(key));
    }
  }
  return out;
}

function lineAt(doc: Document, lines: LineCounter, p: (string | number)[]): number | undefined {
  for (let n = p.length; n >= 0; n--) {
    const node = doc.getIn(p.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node && node.range) return lines.linePos(node.range[0]).line;
    // For a missing key, point at the enclosing map.
  }
  return undefined;
}

export function isModelId(s: string): boolean {
  return MODEL_ID.test(s);
}
