// Loads gateway.yaml: parse (keeping source positions), interpolate ${VAR}
// and ${VAR:-default} inside string values, validate with valibot, then check
// cross-references. Every problem names its path and line; all are reported at once.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import * as v from 'valibot';
import { LineCounter, parseDocument, isScalar, visit, type Document } from 'yaml';
import { ConfigSchema, PluginsSchema, MODEL_ID, PROVIDER_KEYS, type RawConfig, type ProviderConfig, type ModelConfig, type KeyConfig, type PolicyConfig, type Endpoint } from './schema.js';

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

/** A provider block as the family's hooks see it: the core keys, and the family's own keys (`options`) as its schema returned them. */
export type ProviderBlock = Omit<ProviderConfig, 'base_url' | 'missing_credentials' | 'secret_options'> & { base_url?: string };

/**
 * What a provider family tells the loader: where its defaults come from, the
 * schema of its own keys in a provider block, and whether a block has the
 * credentials it needs. docs/plugins.md, "What a provider plugin implements".
 */
export interface FamilyDefaults {
  defaultBaseUrl?: string;
  /**
   * The base URL worked out from the block (region, location, project...) when
   * neither `base_url` nor its environment variable gives one; undefined when
   * the block lacks what it needs (the check then asks for `base_url`).
   */
  baseUrl?(provider: ProviderBlock): string | undefined;
  /**
   * Environment defaults: provider-block key -> environment variable, used
   * when the block leaves the key out (or empty). `apiKey` and `baseUrl` are
   * the older names of `api_key` and `base_url`. Applies to the core keys
   * (`api_key`, `base_url`, `region`) and to the family's own keys alike.
   */
  env?: { apiKey?: string; baseUrl?: string; [key: string]: string | undefined };
  /** Values for provider-block keys the block and the environment leave out (e.g. `region: us-east-1`). */
  defaults?: Record<string, unknown>;
  /**
   * A valibot schema of the family's own keys of a provider block (everything
   * but the core keys: name, family, base_url, api_key, headers, timeout_ms,
   * stream_idle_timeout_ms, region, retries, max_sockets). Its output is the provider's `options`. A
   * family without one takes no other key.
   */
  schema?: v.GenericSchema;
  /**
   * Why a provider block cannot call its upstream (no key, no key pair...), or
   * undefined when it has what it needs (`base_url` is undefined when none
   * was given or derived: a provider without credentials needs none). Without this hook, a family whose
   * `env` names an `api_key` variable needs an `api_key`. A provider without
   * credentials is skipped by routing (the model's next deployment serves).
   */
  missingCredentials?(provider: ProviderBlock): string | undefined;
  /**
   * The family's own keys whose values are secrets (an AWS secret key, a
   * session token, a client secret): like `api_key` and header values, they
   * are cut out of every upstream error text before it reaches a client or a
   * log line. Other keys (a project, a location, a key file's path) are shown
   * as they are: they are what an operator needs to see in an error.
   */
  secrets?: readonly string[];
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
  /** `file`: a named key from gateway.yaml; `env`: from GATEWAY_API_KEYS (named by position); `runtime`: created through the admin API or `model-gateway keys` (src/keys.ts). */
  source: 'file' | 'env' | 'runtime';
  models?: string[];
  endpoints?: string[];
  /** The policy the key follows, by name (gateway.yaml `policies`), if any. */
  policy?: string;
  /** Its rate limits and budget (docs/keys.md); absent: none. */
  limits?: KeyLimits;
}

/** A key's limits: each absent one does not apply. */
export interface KeyLimits {
  rpm?: number;
  tpm?: number;
  max_parallel?: number;
  budget_usd?: number;
  budget_period: 'day' | 'month';
}

/** The limits of a policy (its fields merged over a named policy's): undefined when it sets none. */
export function limitsOf(p: Pick<PolicyConfig, 'rpm' | 'tpm' | 'max_parallel' | 'budget_usd' | 'budget_period'>): KeyLimits | undefined {
  if (p.rpm === undefined && p.tpm === undefined && p.max_parallel === undefined && p.budget_usd === undefined) return undefined;
  return { rpm: p.rpm, tpm: p.tpm, max_parallel: p.max_parallel, budget_usd: p.budget_usd, budget_period: p.budget_period ?? 'month' };
}

/** An admin key (gateway.yaml `admin_keys`, or GATEWAY_ADMIN_KEY): its name and SHA-256 digest. */
export interface AdminKey {
  name: string;
  hash: Buffer;
}

export interface GatewayConfig {
  file: string | null;
  dir: string;
  server: RawConfig['server'];
  routing: RawConfig['routing'];
  storage: RawConfig['storage'];
  state: RawConfig['state'];
  telemetry: RawConfig['telemetry'];
  keys: ClientKey[];
  /** The runtime keys (src/keys.ts), set by the core on each config it serves: looked up in memory, never in a database. */
  runtimeKeys?: { lookup(digest: Buffer | string): ClientKey | undefined };
  adminKeys: AdminKey[];
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

/**
 * The `plugins:` list of a gateway.yaml's text, read before the rest is
 * checked (its modules are imported first: a provider plugin loaded from a
 * path brings the families the providers use); undefined when it does not
 * parse (the full load then reports why).
 */
export function peekPlugins(text: string, env: NodeJS.ProcessEnv = process.env): RawConfig['plugins'] {
  const parsed = parseInterpolated(text, env, []);
  if (!parsed) return undefined;
  const r = v.safeParse(PluginsSchema, (parsed.doc.toJS() as { plugins?: unknown } | null)?.plugins);
  return r.success ? r.output : undefined;
}

export function loadConfigText(text: string, file: string, opts: LoadOptions): GatewayConfig {
  const env = opts.env ?? process.env;
  const problems: ConfigProblem[] = [];
  const source = parseInterpolated(text, env, problems);
  if (!source) throw new ConfigError(file, problems);
  const { doc, lines } = source;
  const lineOf = (p: (string | number)[]): number | undefined => lineAt(doc, lines, p);

  const data = doc.toJS() ?? {};
  const fromEnv = applyProviderDefaults(data, opts.families, env);
  const parsed = v.safeParse(ConfigSchema, data);
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const p = (issue.path ?? []).map((x) => x.key as string | number);
      const received = issue.kind === 'schema' && issue.received && issue.received !== 'undefined' ? ` (got ${issue.received})` : '';
      let message = issue.message;
      if ((issue.type as string) === 'strict_object' || (issue.type as string) === 'never') message = `unknown key`;
      problems.push({ path: p.join('.'), line: lineOf(p), message: message + (message === 'unknown key' ? '' : received) + envNote(fromEnv, p) });
    }
    throw new ConfigError(file, problems);
  }
  const raw = parsed.output;
  const cfg = resolve(raw, file, env, opts.families, problems, lineOf, fromEnv);
  if (problems.length) throw new ConfigError(file, problems);
  return cfg;
}

/** Where a provider key's value came from when the file left it out: `providers.<i>.<key>` -> environment variable. */
type EnvOrigins = Map<string, string>;

/** " (from VAR)" for a problem with a value the environment gave. */
function envNote(fromEnv: EnvOrigins, p: (string | number)[]): string {
  const from = p.length >= 3 && p[0] === 'providers' ? fromEnv.get(`providers.${p[1]}.${p[2]}`) : undefined;
  return from ? ` (from ${from})` : '';
}

/**
 * Fill each provider block's missing keys from its family's environment
 * variables and defaults, before the schema runs, so that a value from the
 * environment is checked like one written in the file.
 */
function applyProviderDefaults(data: unknown, families: Record<string, FamilyDefaults>, env: NodeJS.ProcessEnv): EnvOrigins {
  const origins: EnvOrigins = new Map();
  const list = (data as { providers?: unknown } | null)?.providers;
  if (!Array.isArray(list)) return origins;
  list.forEach((block: unknown, i) => {
    if (!block || typeof block !== 'object' || Array.isArray(block)) return;
    const b = block as Record<string, unknown>;
    const fam = typeof b.family === 'string' && Object.hasOwn(families, b.family) ? families[b.family] : undefined;
    if (!fam) return;
    const missing = (k: string) => b[k] === undefined || b[k] === null || b[k] === '';
    for (const [k, name] of Object.entries(fam.env ?? {})) {
      const key = k === 'apiKey' ? 'api_key' : k === 'baseUrl' ? 'base_url' : k;
      const val = name ? env[name] : undefined;
      if (val === undefined || val === '' || !missing(key)) continue;
      b[key] = val;
      origins.set(`providers.${i}.${key}`, name!);
    }
    for (const [k, val] of Object.entries(fam.defaults ?? {})) if (missing(k)) b[k] = val;
  });
  return origins;
}

/** The family's own keys of a provider block, checked by its schema; problems name their path and line. */
function familyOptions(
  p: Record<string, unknown>,
  i: number,
  fam: FamilyDefaults,
  problems: ConfigProblem[],
  lineOf: (p: (string | number)[]) => number | undefined,
  fromEnv: EnvOrigins,
): Record<string, unknown> | undefined {
  const own: Record<string, unknown> = {};
  for (const k of Object.keys(p)) if (!PROVIDER_KEYS.has(k)) own[k] = p[k];
  if (!fam.schema) {
    const extra = Object.keys(own);
    for (const k of extra) problems.push({ path: `providers.${i}.${k}`, line: lineOf(['providers', i, k]), message: `unknown key (family ${p.family as string} takes no key of its own)` });
    return extra.length ? undefined : {};
  }
  const r = v.safeParse(fam.schema, own);
  if (r.success) return (r.output ?? {}) as Record<string, unknown>;
  for (const issue of r.issues) {
    const sub = (issue.path ?? []).map((x) => x.key as string | number);
    const at = ['providers', i, ...sub];
    const t = issue.type as string;
    const message = t === 'strict_object' || t === 'never' ? 'unknown key' : issue.message;
    problems.push({ path: at.join('.'), line: lineOf(at), message: message + envNote(fromEnv, at) });
  }
  return undefined;
}

function resolve(
  raw: RawConfig,
  file: string,
  env: NodeJS.ProcessEnv,
  families: Record<string, FamilyDefaults>,
  problems: ConfigProblem[],
  lineOf: (p: (string | number)[]) => number | undefined,
  fromEnv: EnvOrigins,
): GatewayConfig {
  const providers = new Map<string, ProviderConfig>();
  raw.providers.forEach((p, i) => {
    const fam = Object.hasOwn(families, p.family) ? families[p.family] : undefined;
    if (!fam) {
      problems.push({ path: `providers.${i}.family`, line: lineOf(['providers', i, 'family']), message: `unknown provider family "${p.family}" (known: ${Object.keys(families).join(', ')})` });
      return;
    }
    if (providers.has(p.name)) problems.push({ path: `providers.${i}.name`, line: lineOf(['providers', i, 'name']), message: `duplicate provider name "${p.name}"` });
    const options = familyOptions(p as Record<string, unknown>, i, fam, problems, lineOf, fromEnv);
    if (!options) return;
    const core: Record<string, unknown> = {};
    for (const k of PROVIDER_KEYS) if ((p as Record<string, unknown>)[k] !== undefined) core[k] = (p as Record<string, unknown>)[k];
    const block = { ...(core as Omit<ProviderBlock, 'options'>), api_key: p.api_key || undefined, options } as ProviderBlock;
    const baseUrl = p.base_url || fam.baseUrl?.(block) || fam.defaultBaseUrl;
    const needsKey = fam.env?.apiKey ?? fam.env?.api_key;
    const missing = fam.missingCredentials ? fam.missingCredentials({ ...block, base_url: baseUrl }) : needsKey && !block.api_key ? 'no API key configured' : undefined;
    // Without credentials the provider is skipped by routing: a URL it lacks too (an unset endpoint variable) is no config error.
    if (!baseUrl && missing === undefined) {
      const envName = fam.env?.baseUrl ?? fam.env?.base_url;
      problems.push({ path: `providers.${i}.base_url`, line: lineOf(['providers', i]), message: `family ${p.family} has no default base URL: set base_url${envName ? ` (or ${envName})` : ''}` });
      return;
    }
    providers.set(p.name, {
      ...block,
      base_url: (baseUrl ?? '').replace(/\/+$/, ''),
      missing_credentials: missing,
      ...(fam.secrets?.length ? { secret_options: fam.secrets } : {}),
    });
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

  const keys: ClientKey[] = raw.keys.map((k: KeyConfig, i) => {
    const named = k.policy !== undefined ? raw.policies[k.policy] : undefined;
    if (k.policy !== undefined && !named)
      problems.push({ path: `keys.${i}.policy`, line: lineOf(['keys', i, 'policy']), message: `no policy named "${k.policy}" under policies (known: ${Object.keys(raw.policies).join(', ') || 'none'})` });
    // The key's own fields override its named policy's, field by field.
    const p: PolicyConfig = { ...named };
    for (const [f, val] of Object.entries(k)) if (val !== undefined && f !== 'name' && f !== 'sha256' && f !== 'policy') (p as Record<string, unknown>)[f] = val;
    return {
      name: k.name,
      hash: Buffer.from(k.sha256.toLowerCase(), 'hex'),
      source: 'file' as const,
      models: p.models,
      endpoints: p.endpoints,
      ...(k.policy !== undefined ? { policy: k.policy } : {}),
      ...(limitsOf(p) ? { limits: limitsOf(p) } : {}),
    };
  });
  const envKeys = (env.GATEWAY_API_KEYS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  envKeys.forEach((k, i) => keys.push({ name: `env-${i + 1}`, hash: Buffer.from(sha256Hex(k), 'hex'), source: 'env' }));
  const adminKeys: AdminKey[] = raw.admin_keys.map((k) => ({ name: k.name, hash: Buffer.from(k.sha256.toLowerCase(), 'hex') }));
  const envAdmin = (env.GATEWAY_ADMIN_KEY ?? '').trim();
  if (envAdmin) adminKeys.push({ name: 'env-admin', hash: Buffer.from(sha256Hex(envAdmin), 'hex') });

  const port = env.PORT !== undefined && env.PORT !== '' ? Number(env.PORT) : raw.server.port;
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push({ path: 'PORT', message: `PORT must be an integer from 0 to 65535, got "${env.PORT}"` });

  return {
    file,
    dir: path.dirname(path.resolve(file)),
    server: { ...raw.server, port },
    routing: raw.routing,
    storage: raw.storage,
    state: raw.state,
    telemetry: raw.telemetry,
    keys,
    adminKeys,
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
