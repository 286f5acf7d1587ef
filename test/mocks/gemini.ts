// A strict mock of Google's Generative Language API (Gemini), v1beta.
//
// It validates requests the way Google does, so a translation bug fails a test:
// - x-goog-api-key (or ?key=) must match: a wrong key is 400 INVALID_ARGUMENT
//   with ErrorInfo reason API_KEY_INVALID, a missing one 403;
// - unknown fields anywhere are rejected ('Invalid JSON payload received.
//   Unknown name "x" at ...: Cannot find field.'), snake_case and camelCase
//   names are both accepted (but not both for one field), scalar types, enums
//   and base64 bytes are checked;
// - roles user|model only, non-empty contents and parts, exactly one data field
//   per part (an empty text is no data), named functionCall/functionResponse;
// - thinkingBudget ranges per model, not with thinkingLevel; levels per Gemini 3
//   model; penalties and logprobs only where enabled (Gemini 2.0);
// - thoughtSignature must be one this mock issued (or Google's documented
//   skip sentinel), and Gemini 3 wants one on function-call history of the
//   current turn;
// - cachedContents: create (minimum size, ttl), get, delete; a generate call
//   that names one must not set systemInstruction, tools or toolConfig;
// - models/{model}:countTokens takes `{contents}` or `{generateContentRequest}`
//   (with its own `model: "models/{model}"`), never both, and none of the
//   generate request's top-level fields (systemInstruction there is unknown).
// It answers in the recorded formats (shared/fixtures/gemini: JSON bodies,
// SSE with \r\n\r\n separators and no terminator, cumulative usageMetadata,
// thoughtSignature placement of Gemini 2.5 and 3).
//
// Extending: `routes` adds handlers by exact path or by method suffix (':predict'),
// `respond` overrides the generateContent answer for chosen models, and the
// request spec (SPEC) and helpers are exported.
import { randomBytes } from 'node:crypto';
import { startMock, type Handler, type MockServer, type Recorded, type Reply } from './server.js';

 

export const GEMINI_KEY = 'AIzaSy-test-gemini-0123456789abcdef';
export const DEFAULT_GEMINI_MODELS = [
  'gemini-2.5-flash', 'gemini-2.5-pro', 'gemini-2.5-flash-lite', 'gemini-2.0-flash', 'gemini-2.0-flash-lite',
  'gemini-3-pro-preview', 'gemini-3-flash-preview',
];
/** Google's documented values that skip thought-signature validation. */
export const SIGNATURE_SENTINELS = new Set(['skip_thought_signature_validator', 'context_engineering_is_the_way_to_go']);

// ---------------------------------------------------------------------------
// Errors in Google's shape.

export function geminiError(status: number, statusName: string, message: string, details?: unknown[]): Reply {
  return { status, json: { error: { code: status, message, status: statusName, ...(details ? { details } : {}) } } };
}

const invalid = (message: string, field?: string) =>
  geminiError(400, 'INVALID_ARGUMENT', message, field ? [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field, description: message }] }] : undefined);

/** The recorded 429 body (shared/fixtures/gemini/google-429-retry-info.json shape). */
export function rateLimitBody(retryDelay = '34.4s'): unknown {
  return {
    error: {
      code: 429,
      message: 'You exceeded your current quota, please check your plan and billing details.',
      status: 'RESOURCE_EXHAUSTED',
      details: [
        { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaMetric: 'generativelanguage.googleapis.com/generate_content_free_tier_requests', quotaId: 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier' }] },
        { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay },
      ],
    },
  };
}

export const API_KEY_INVALID_BODY = {
  error: {
    code: 400,
    message: 'API key not valid. Please pass a valid API key.',
    status: 'INVALID_ARGUMENT',
    details: [
      { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } },
      { '@type': 'type.googleapis.com/google.rpc.LocalizedMessage', locale: 'en-US', message: 'API key not valid. Please pass a valid API key.' },
    ],
  },
};

export function authError(req: Recorded, key: string): Reply | undefined {
  const given = (req.headers['x-goog-api-key'] as string | undefined) ?? req.query.get('key') ?? undefined;
  if (!given)
    return geminiError(403, 'PERMISSION_DENIED', "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
  if (given !== key) return { status: 400, json: API_KEY_INVALID_BODY };
  return undefined;
}

// ---------------------------------------------------------------------------
// The request spec: message types with their fields (camelCase; snake_case accepted).

export type Spec = 'string' | 'number' | 'int' | 'bool' | 'bytes' | 'any' | 'struct' | ObjSpec | ArrSpec | MapSpec | EnumSpec;
export interface ObjSpec { kind: 'obj'; type: string; fields: Record<string, Spec> }
export interface ArrSpec { kind: 'arr'; of: Spec }
export interface MapSpec { kind: 'map'; of: Spec }
export interface EnumSpec { kind: 'enum'; type: string; values: string[]; caseInsensitive?: boolean }

const obj = (type: string, fields: Record<string, Spec>): ObjSpec => ({ kind: 'obj', type, fields });
const arr = (of: Spec): ArrSpec => ({ kind: 'arr', of });
const mapOf = (of: Spec): MapSpec => ({ kind: 'map', of });
const en = (type: string, values: string[], caseInsensitive = false): EnumSpec => ({ kind: 'enum', type, values, caseInsensitive });

const Schema = obj('Schema', {
  type: 'string', format: 'string', title: 'string', description: 'string', nullable: 'bool', enum: arr('string'),
  maxItems: 'int', minItems: 'int', minProperties: 'int', maxProperties: 'int', minLength: 'int', maxLength: 'int',
  required: arr('string'), pattern: 'string', example: 'any', propertyOrdering: arr('string'), default: 'any',
  minimum: 'number', maximum: 'number',
});
Schema.fields.properties = mapOf(Schema);
Schema.fields.items = Schema;
Schema.fields.anyOf = arr(Schema);

const Part = obj('Part', {
  text: 'string', thought: 'bool', thoughtSignature: 'bytes',
  inlineData: obj('Blob', { mimeType: 'string', data: 'bytes' }),
  fileData: obj('FileData', { mimeType: 'string', fileUri: 'string', displayName: 'string' }),
  functionCall: obj('FunctionCall', { id: 'string', name: 'string', args: 'struct' }),
  functionResponse: obj('FunctionResponse', { id: 'string', name: 'string', response: 'struct', willContinue: 'bool', scheduling: 'string', parts: arr('any') }),
  executableCode: obj('ExecutableCode', { language: 'string', code: 'string' }),
  codeExecutionResult: obj('CodeExecutionResult', { outcome: 'string', output: 'string' }),
  videoMetadata: obj('VideoMetadata', { startOffset: 'string', endOffset: 'string', fps: 'number' }),
  partMetadata: 'struct',
});
const Content = obj('Content', { role: 'string', parts: arr(Part) });

const Tool = obj('Tool', {
  functionDeclarations: arr(obj('FunctionDeclaration', {
    name: 'string', description: 'string', behavior: 'string', parameters: Schema, parametersJsonSchema: 'any', response: Schema, responseJsonSchema: 'any',
  })),
  googleSearch: obj('GoogleSearch', { timeRangeFilter: 'struct' }),
  googleSearchRetrieval: 'struct', codeExecution: obj('CodeExecution', {}), urlContext: obj('UrlContext', {}), googleMaps: 'struct', fileSearch: 'struct', computerUse: 'struct',
});
const ToolConfig = obj('ToolConfig', {
  functionCallingConfig: obj('FunctionCallingConfig', { mode: en('FunctionCallingConfig.Mode', ['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED']), allowedFunctionNames: arr('string') }),
  retrievalConfig: 'struct',
});

export const ThinkingConfig = obj('ThinkingConfig', {
  includeThoughts: 'bool', thinkingBudget: 'int', thinkingLevel: en('ThinkingConfig.ThinkingLevel', ['THINKING_LEVEL_UNSPECIFIED', 'MINIMAL', 'LOW', 'MEDIUM', 'HIGH'], true),
});
export const GenerationConfig = obj('GenerationConfig', {
  stopSequences: arr('string'), responseMimeType: 'string', responseSchema: Schema, responseJsonSchema: 'any', responseModalities: arr('string'),
  candidateCount: 'int', maxOutputTokens: 'int', temperature: 'number', topP: 'number', topK: 'int', seed: 'int',
  presencePenalty: 'number', frequencyPenalty: 'number', responseLogprobs: 'bool', logprobs: 'int', enableEnhancedCivicAnswers: 'bool',
  speechConfig: 'struct', thinkingConfig: ThinkingConfig, imageConfig: obj('ImageConfig', { aspectRatio: 'string', imageSize: 'string' }), mediaResolution: 'string',
});

export const SPEC = {
  GenerateContentRequest: obj('GenerateContentRequest', {
    model: 'string', contents: arr(Content), systemInstruction: Content, tools: arr(Tool), toolConfig: ToolConfig,
    safetySettings: arr(obj('SafetySetting', { category: 'string', threshold: 'string' })), generationConfig: GenerationConfig,
    cachedContent: 'string', labels: mapOf('string'),
  }),
  CachedContent: obj('CachedContent', {
    model: 'string', displayName: 'string', contents: arr(Content), tools: arr(Tool), toolConfig: ToolConfig, systemInstruction: Content, ttl: 'string', expireTime: 'string',
  }),
  Part, Content, GenerationConfig, ThinkingConfig, Tool,
};

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
const camel = (k: string) => k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const BASE64 = /^(?:[A-Za-z0-9+/_-]{4})*(?:[A-Za-z0-9+/_-]{2}(?:==)?|[A-Za-z0-9+/_-]{3}=?)?$/;
const isObj = (v: unknown): v is Record<string, any> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Check `value` against `spec` like Google's JSON parser; returns the error reply or undefined. */
export function checkSpec(value: unknown, spec: Spec, path: string): Reply | undefined {
  const where = path ? ` at '${path}'` : '';
  const bad = (type: string) => invalid(`Invalid value${where} (${type}), ${JSON.stringify(value)?.slice(0, 80)}`, path);
  if (value === null) return undefined; // null means "unset" in proto JSON
  switch (spec) {
    case 'string':
      return typeof value === 'string' ? undefined : bad('TYPE_STRING');
    case 'number':
      return typeof value === 'number' ? undefined : bad('TYPE_FLOAT');
    case 'int':
      return (typeof value === 'number' && Number.isInteger(value)) || (typeof value === 'string' && /^-?\d+$/.test(value)) ? undefined : bad('TYPE_INT32');
    case 'bool':
      return typeof value === 'boolean' ? undefined : bad('TYPE_BOOL');
    case 'bytes':
      if (typeof value !== 'string') return bad('TYPE_BYTES');
      return BASE64.test(value) ? undefined : invalid(`Invalid value${where} (TYPE_BYTES), Base64 decoding failed for "${value.slice(0, 40)}"`, path);
    case 'any':
      return undefined;
    case 'struct':
      return isObj(value) ? undefined : bad('type.googleapis.com/google.protobuf.Struct');
  }
  if (spec.kind === 'enum') {
    const ok = typeof value === 'string' && spec.values.some((v) => (spec.caseInsensitive ? v.toLowerCase() === value.toLowerCase() : v === value));
    return ok ? undefined : bad(`type.googleapis.com/google.ai.generativelanguage.v1beta.${spec.type}`);
  }
  if (spec.kind === 'arr') {
    if (!Array.isArray(value)) return bad('TYPE_MESSAGE');
    for (const [i, v] of value.entries()) {
      const e = checkSpec(v, spec.of, `${path}[${i}]`);
      if (e) return e;
    }
    return undefined;
  }
  if (spec.kind === 'map') {
    if (!isObj(value)) return bad('TYPE_MESSAGE');
    for (const [k, v] of Object.entries(value)) {
      const e = checkSpec(v, spec.of, `${path}[${JSON.stringify(k)}]`);
      if (e) return e;
    }
    return undefined;
  }
  if (!isObj(value)) return bad(`type.googleapis.com/google.ai.generativelanguage.v1beta.${spec.type}`);
  const seen = new Map<string, string>();
  for (const [k, v] of Object.entries(value)) {
    const name = camel(k);
    const fieldSpec = spec.fields[name];
    if (!fieldSpec) return invalid(`Invalid JSON payload received. Unknown name ${JSON.stringify(k)}${where}: Cannot find field.`, path || undefined);
    if (seen.has(name)) return invalid(`Invalid JSON payload received. Duplicate value for field ${JSON.stringify(snake(name))}${where}: ${JSON.stringify(seen.get(name))} and ${JSON.stringify(k)} name the same field.`, path || undefined);
    seen.set(name, k);
    const e = checkSpec(v, fieldSpec, path ? `${path}.${snake(name)}` : snake(name));
    if (e) return e;
  }
  return undefined;
}

/** Read a field by its camelCase name whichever spelling the client used. */
export function field(o: any, name: string): any {
  if (!isObj(o)) return undefined;
  return o[name] ?? o[snake(name)];
}

// ---------------------------------------------------------------------------
// Models.

interface ModelInfo {
  budget?: { min: number; max: number; canDisable: boolean };
  levels?: string[];
  penalties: boolean;
  logprobs: boolean;
  signatures: boolean;
  maxOutput: number;
  minCache: number;
}

export function modelInfo(model: string): ModelInfo {
  if (/^gemini-3/.test(model)) return { levels: /-pro/.test(model) ? ['low', 'high'] : ['minimal', 'low', 'medium', 'high'], penalties: false, logprobs: false, signatures: true, maxOutput: 65536, minCache: /-pro/.test(model) ? 4096 : 1024 };
  if (/^gemini-2\.5-pro/.test(model)) return { budget: { min: 128, max: 32768, canDisable: false }, penalties: false, logprobs: false, signatures: false, maxOutput: 65536, minCache: 4096 };
  if (/^gemini-2\.5-flash-lite/.test(model)) return { budget: { min: 512, max: 24576, canDisable: true }, penalties: false, logprobs: false, signatures: false, maxOutput: 65536, minCache: 1024 };
  if (/^gemini-2\.5/.test(model)) return { budget: { min: 1, max: 24576, canDisable: true }, penalties: false, logprobs: false, signatures: false, maxOutput: 65536, minCache: 1024 };
  return { penalties: true, logprobs: true, signatures: false, maxOutput: 8192, minCache: 1024 };
}

// ---------------------------------------------------------------------------
// State: cached contents and issued signatures.

export interface StoredCache {
  name: string;
  model: string;
  contents: any[];
  systemInstruction?: any;
  tools?: any[];
  toolConfig?: any;
  tokens: number;
  createTime: string;
  expireTime: string;
}

const estimateTokens = (v: unknown) => Math.ceil(JSON.stringify(v ?? '').length / 4);
const rid = (n = 15) => randomBytes(n).toString('base64url');

export interface MockState {
  caches: Map<string, StoredCache>;
  /** Signatures this mock handed out, as hex of their bytes (any base64 spelling matches). */
  signatures: Set<string>;
}

const sigBytes = (s: string) => Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('hex');

function issueSignature(state: MockState): string {
  const s = randomBytes(48).toString('base64');
  state.signatures.add(sigBytes(s));
  return s;
}

// ---------------------------------------------------------------------------
// Validation of a generate request beyond the field spec.

const INLINE_MIME = /^(image\/(png|jpeg|webp|heic|heif|gif)|application\/pdf|audio\/.+|video\/.+|text\/.+)$/;

function checkParts(parts: any, path: string, state: MockState): Reply | undefined {
  if (!Array.isArray(parts) || parts.length === 0) return invalid(`* GenerateContentRequest.${path}.parts: contents.parts must not be empty.\n`, `${path}.parts`);
  for (const [j, p] of parts.entries()) {
    const pp = `${path}.parts[${j}]`;
    const data = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult'].filter((k) => {
      const v = field(p, k);
      return k === 'text' ? typeof v === 'string' && v !== '' : v != null;
    });
    if (data.length !== 1) return invalid(`* GenerateContentRequest.${pp}.data: required oneof field 'data' must have ${data.length ? 'only' : ''} one initialized field\n`, `${pp}.data`);
    const fc = field(p, 'functionCall');
    if (fc && !fc.name) return invalid(`* GenerateContentRequest.${pp}.function_call.name: Name cannot be empty.\n`, `${pp}.function_call.name`);
    const fr = field(p, 'functionResponse');
    if (fr && !fr.name) return invalid(`* GenerateContentRequest.${pp}.function_response.name: Name cannot be empty.\n`, `${pp}.function_response.name`);
    if (fr && !isObj(fr.response)) return invalid(`* GenerateContentRequest.${pp}.function_response.response: must be an object.\n`, `${pp}.function_response.response`);
    const inline = field(p, 'inlineData');
    if (inline && !INLINE_MIME.test(String(field(inline, 'mimeType') ?? ''))) return invalid(`Unsupported MIME type: ${field(inline, 'mimeType')}`, `${pp}.inline_data.mime_type`);
    const file = field(p, 'fileData');
    if (file && !/^(https?|gs):\/\//.test(String(field(file, 'fileUri') ?? ''))) return invalid(`Invalid or unsupported file uri: ${field(file, 'fileUri')}`, `${pp}.file_data.file_uri`);
    const sig = field(p, 'thoughtSignature');
    if (typeof sig === 'string' && !SIGNATURE_SENTINELS.has(sig) && !state.signatures.has(sigBytes(sig))) return invalid('Corrupted thought signature.', `${pp}.thought_signature`);
  }
  return undefined;
}

function checkContents(contents: any[], state: MockState, model: string): Reply | undefined {
  for (const [i, c] of contents.entries()) {
    const role = field(c, 'role');
    if (role !== undefined && role !== 'user' && role !== 'model') return invalid('Please use a valid role: user, model.', `contents[${i}].role`);
    const e = checkParts(field(c, 'parts'), `contents[${i}]`, state);
    if (e) return e;
  }
  if (modelInfo(model).signatures) {
    // Gemini 3: in the current turn (after the last user text), the first
    // functionCall of each model step must carry its thought signature.
    let start = 0;
    contents.forEach((c, i) => {
      if ((field(c, 'role') ?? 'user') === 'user' && (field(c, 'parts') ?? []).some((p: any) => typeof field(p, 'text') === 'string')) start = i + 1;
    });
    for (let i = start; i < contents.length; i++) {
      const c = contents[i];
      if (field(c, 'role') !== 'model') continue;
      const first = (field(c, 'parts') ?? []).find((p: any) => field(p, 'functionCall'));
      if (first && !field(first, 'thoughtSignature'))
        return invalid(`Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${field(first, 'functionCall').name}\` , position ${i + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`, `contents[${i}]`);
    }
  }
  return undefined;
}

function checkGenerationConfig(g: any, model: string): Reply | undefined {
  if (!g) return undefined;
  const info = modelInfo(model);
  const t = field(g, 'thinkingConfig');
  const budget = field(t, 'thinkingBudget');
  const level = field(t, 'thinkingLevel');
  if (budget != null && level != null) return invalid('You can only set only one of thinking budget and thinking level.', 'generation_config.thinking_config');
  if (budget != null && budget !== -1) {
    const b = info.budget;
    if (!b && !info.levels) return invalid(`Thinking is not enabled for models/${model}`, 'generation_config.thinking_config');
    if (b && budget === 0 && !b.canDisable) return invalid('Budget 0 is invalid. This model only works in thinking mode.', 'generation_config.thinking_config.thinking_budget');
    if (b && budget !== 0 && (budget < b.min || budget > b.max))
      return invalid(`The thinking budget ${budget} is invalid. Please choose a value between ${b.min} and ${b.max}.`, 'generation_config.thinking_config.thinking_budget');
  }
  if (level != null) {
    if (!info.levels) return invalid('Thinking level is not supported for this model.', 'generation_config.thinking_config.thinking_level');
    if (!info.levels.includes(String(level).toLowerCase())) return invalid(`Thinking level ${level} is not supported for models/${model}. Supported levels: ${info.levels.join(', ')}.`, 'generation_config.thinking_config.thinking_level');
  }
  for (const p of ['presencePenalty', 'frequencyPenalty']) if (field(g, p) && !info.penalties) return invalid(`Penalty is not enabled for models/${model}`);
  if (field(g, 'responseLogprobs') && !info.logprobs) return invalid(`Logprobs is not enabled for models/${model}`);
  if (field(g, 'logprobs') != null && !field(g, 'responseLogprobs')) return invalid('logprobs is only valid if response_logprobs is true.', 'generation_config.logprobs');
  if (field(g, 'responseSchema') && field(g, 'responseJsonSchema')) return invalid('response_schema and response_json_schema cannot both be set.', 'generation_config');
  if ((field(g, 'responseSchema') || field(g, 'responseJsonSchema')) && field(g, 'responseMimeType') !== 'application/json')
    return invalid('For response_schema (or response_json_schema), response_mime_type must be application/json.', 'generation_config.response_mime_type');
  const max = field(g, 'maxOutputTokens');
  if (max != null && (max < 1 || max > info.maxOutput)) return invalid(`Unable to submit request because it has a maxOutputTokens value of ${max} but the supported range is from 1 (inclusive) to ${info.maxOutput + 1} (exclusive).`, 'generation_config.max_output_tokens');
  const n = field(g, 'candidateCount');
  if (n != null && (n < 1 || n > 8)) return invalid('candidate_count must be between 1 and 8.', 'generation_config.candidate_count');
  return undefined;
}

function checkTools(tools: any[] | undefined, toolConfig: any): Reply | undefined {
  const names: string[] = [];
  for (const [i, t] of (tools ?? []).entries()) {
    for (const [j, d] of (field(t, 'functionDeclarations') ?? []).entries()) {
      const p = `tools[${i}].function_declarations[${j}]`;
      if (!/^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/.test(String(d.name ?? ''))) return invalid(`* GenerateContentRequest.${p}.name: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 64.\n`, `${p}.name`);
      if (field(d, 'parameters') && field(d, 'parametersJsonSchema')) return invalid(`* GenerateContentRequest.${p}: parameters and parameters_json_schema cannot both be set.\n`, p);
      names.push(d.name);
    }
  }
  const fcc = field(toolConfig, 'functionCallingConfig');
  const allowed = field(fcc, 'allowedFunctionNames');
  if (allowed?.length) {
    const mode = field(fcc, 'mode');
    if (mode !== 'ANY' && mode !== 'VALIDATED') return invalid('* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names is only allowed when mode is ANY or VALIDATED.\n');
    for (const n of allowed) if (!names.includes(n)) return invalid(`* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: Function "${n}" is not declared.\n`);
  }
  return undefined;
}

/**
 * How an API names models and cached contents: the Gemini API's `models/{m}`
 * and `cachedContents/{id}` by default; Vertex AI (test/mocks/vertex.ts) uses
 * full resource names under its project and location.
 */
export interface Naming {
  /** The model resource name a cached content records (`models/gemini-2.5-flash`). */
  model(model: string): string;
  /** The bare model of a cached content's `model` field, or undefined when the form is wrong. */
  parseModel(name: string): string | undefined;
  /** A new cached content's name. */
  newCache(): string;
  /** A cached content the request names, looked up whatever spelling of its parent it uses. */
  lookup?(name: string): string;
}

export const GEMINI_NAMING: Naming = {
  model: (m) => `models/${m}`,
  parseModel: (name) => (name.startsWith('models/') ? name.slice(7) : undefined),
  newCache: () => `cachedContents/${randomBytes(8).toString('hex')}`,
};

/** Full validation of a generate body; returns the error reply, or the cache it uses. */
export function validateGenerate(body: any, model: string, state: MockState, models: Set<string>, naming: Naming = GEMINI_NAMING): { error?: Reply; cache?: StoredCache } {
  if (!models.has(model))
    return { error: geminiError(404, 'NOT_FOUND', `${naming.model(model)} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.`) };
  if (!isObj(body)) return { error: invalid('Invalid JSON payload received. Expected an object.') };
  const shape = checkSpec(body, SPEC.GenerateContentRequest, '');
  if (shape) return { error: shape };
  let cache: StoredCache | undefined;
  const cachedName = field(body, 'cachedContent');
  if (cachedName) {
    cache = state.caches.get(naming.lookup?.(cachedName) ?? cachedName);
    if (!cache || Date.parse(cache.expireTime) <= Date.now()) return { error: geminiError(403, 'PERMISSION_DENIED', 'CachedContent not found (or permission denied)') };
    if (field(body, 'systemInstruction') || field(body, 'tools') || field(body, 'toolConfig'))
      return { error: invalid('CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request.') };
    if (cache.model !== naming.model(model)) return { error: invalid(`Model used by GenerateContent request (${naming.model(model)}) and CachedContent (${cache.model}) has to be the same.`) };
  }
  const contents = field(body, 'contents');
  if (!Array.isArray(contents) || contents.length === 0) return { error: invalid('* GenerateContentRequest.contents: contents is not specified\n', 'contents') };
  const si = field(body, 'systemInstruction');
  const error =
    (si ? checkParts(field(si, 'parts'), 'system_instruction', state) : undefined) ??
    checkContents([...(cache?.contents ?? []), ...contents], state, model) ??
    checkGenerationConfig(field(body, 'generationConfig'), model) ??
    checkTools(cache?.tools ?? field(body, 'tools'), cache?.toolConfig ?? field(body, 'toolConfig'));
  return { error, cache };
}

// ---------------------------------------------------------------------------
// What the mock model says: deterministic, derived from the conversation.

function lastUserTurn(contents: any[]): { text: string; toolResult: boolean; images: number } {
  for (let i = contents.length - 1; i >= 0; i--) {
    const c = contents[i];
    if ((field(c, 'role') ?? 'user') !== 'user') continue;
    const parts: any[] = field(c, 'parts') ?? [];
    const fr = parts.map((p) => field(p, 'functionResponse')).filter(Boolean);
    if (fr.length) {
      const said = fr.map((r: any) => (typeof r.response?.content === 'string' ? r.response.content : JSON.stringify(r.response))).join('; ');
      return { text: `tool said ${said}`, toolResult: true, images: 0 };
    }
    const images = parts.filter((p) => field(p, 'inlineData') || field(p, 'fileData')).length;
    return { text: parts.map((p) => field(p, 'text') ?? '').filter(Boolean).join(' '), toolResult: false, images };
  }
  return { text: '', toolResult: false, images: 0 };
}

/** A value that fits a JSON Schema (for JSON-mode answers). */
function sample(schema: any, text: string): unknown {
  const type = Array.isArray(schema?.type) ? schema.type[0] : schema?.type;
  switch (String(type ?? (schema?.properties ? 'object' : 'string')).toLowerCase()) {
    case 'object':
      return Object.fromEntries(Object.entries(schema?.properties ?? { answer: { type: 'string' } }).map(([k, s]) => [k, sample(s, text)]));
    case 'array':
      return [sample(schema.items, text)];
    case 'integer':
    case 'number':
      return 42;
    case 'boolean':
      return true;
    default:
      return schema?.enum?.[0] ?? text;
  }
}

export interface Plan {
  thought?: string;
  text?: string;
  call?: { name: string; args: Record<string, unknown> };
  finish: string;
  blocked?: string;
  words: number;
  /** Google Search grounding: the queries "run" (as Gemini lists them: an empty string and a repeat included). */
  searches?: string[];
}

export function plan(body: any, cache: StoredCache | undefined): Plan {
  const contents = [...(cache?.contents ?? []), ...field(body, 'contents')];
  const g = field(body, 'generationConfig') ?? {};
  const last = lastUserTurn(contents);
  if (/BLOCK_ME/.test(last.text)) return { finish: 'SAFETY', blocked: 'SAFETY', words: 0 };
  if (/UNSAFE_OUTPUT/.test(last.text)) return { finish: 'SAFETY', words: 0 };
  const t = field(g, 'thinkingConfig');
  const thought = field(t, 'includeThoughts') ? `**Considering the request**\n\nThe user wrote: "${last.text}". I will answer plainly.\n\n` : undefined;
  const tools = cache?.tools ?? field(body, 'tools') ?? [];
  const decls: any[] = tools.flatMap((x: any) => field(x, 'functionDeclarations') ?? []);
  const fcc = field(cache?.toolConfig ?? field(body, 'toolConfig'), 'functionCallingConfig');
  const mode = field(fcc, 'mode') ?? 'AUTO';
  if (decls.length && mode !== 'NONE' && !last.toolResult && (mode === 'ANY' || /weather|use the tool/i.test(last.text))) {
    const name = field(fcc, 'allowedFunctionNames')?.[0] ?? decls[0].name;
    return { thought, call: { name, args: { city: 'Paris' } }, finish: 'STOP', words: 3 };
  }
  // With the googleSearch tool, a prompt that asks to search is grounded; Gemini
  // lists the queries it ran, sometimes with empty strings and repeats.
  const searches = tools.some((x: any) => field(x, 'googleSearch')) && /search/i.test(last.text) ? [`${last.text} latest`, '', `${last.text} sources`, `${last.text} latest`] : undefined;
  let text: string;
  if (field(g, 'responseMimeType') === 'application/json') text = JSON.stringify(sample(field(g, 'responseJsonSchema') ?? field(g, 'responseSchema') ?? { type: 'object', properties: { answer: { type: 'string' } } }, last.text));
  else text = `Echo: ${last.text}${last.images ? ` [${last.images} image${last.images > 1 ? 's' : ''}]` : ''}`;
  let finish = 'STOP';
  for (const s of field(g, 'stopSequences') ?? []) {
    const at = text.indexOf(s);
    if (at >= 0) text = text.slice(0, at);
  }
  const words = text.split(/(?<= )/);
  const max = field(g, 'maxOutputTokens');
  if (max != null && words.length > max) {
    text = words.slice(0, max).join('');
    finish = 'MAX_TOKENS';
  }
  return { thought, text, finish, words: Math.min(words.length, max ?? Infinity), searches };
}

/** A grounded candidate's groundingMetadata (https://ai.google.dev/api/generate-content#GroundingMetadata). */
function groundingMetadata(queries: string[]): Record<string, unknown> {
  return {
    webSearchQueries: queries,
    searchEntryPoint: { renderedContent: '<style>.container{}</style><div class="container">Search suggestions</div>' },
    groundingChunks: [{ web: { uri: 'https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC1', title: 'example.com' } }],
    groundingSupports: [{ segment: { startIndex: 0, endIndex: 4, text: 'Echo' }, groundingChunkIndices: [0] }],
  };
}

function usage(body: any, cache: StoredCache | undefined, p: Plan, thinking: boolean): Record<string, unknown> {
  const prompt = estimateTokens([field(body, 'contents'), field(body, 'systemInstruction'), field(body, 'tools')]) + (cache?.tokens ?? 0);
  const thoughts = thinking ? 24 : 0;
  const u: Record<string, unknown> = { promptTokenCount: prompt, candidatesTokenCount: p.words, totalTokenCount: prompt + p.words + thoughts, promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }] };
  if (thoughts) u.thoughtsTokenCount = thoughts;
  if (cache) {
    u.cachedContentTokenCount = cache.tokens;
    u.cacheTokensDetails = [{ modality: 'TEXT', tokenCount: cache.tokens }];
  }
  return u;
}

const isThinking = (model: string, g: any) => {
  const info = modelInfo(model);
  const budget = field(field(g, 'thinkingConfig'), 'thinkingBudget');
  return !!(info.budget || info.levels) && budget !== 0;
};

function logprobsResult(text: string, top: number | undefined) {
  const tokens = text.split(/(?<= )/).filter(Boolean);
  return {
    chosenCandidates: tokens.map((token, i) => ({ token, tokenId: 1000 + i, logProbability: -0.05 * (i + 1) })),
    topCandidates: tokens.map((token, i) => ({ candidates: Array.from({ length: top ?? 0 }, (_, k) => ({ token: k ? `${token.trim()}${k}` : token, tokenId: 1000 + i + k, logProbability: -0.05 * (i + 1) - k })) })),
  };
}

/** The model turn's parts for one candidate, with thoughtSignature placed as Gemini 2.5 / 3 place it. */
function candidateParts(p: Plan, model: string, state: MockState, i: number): any[] {
  const parts: any[] = [];
  if (p.thought) parts.push({ text: p.thought, thought: true });
  if (p.call) parts.push({ functionCall: { name: p.call.name, args: p.call.args }, thoughtSignature: issueSignature(state) });
  else if (p.text !== undefined) {
    const text = i ? `${p.text} (${i + 1})` : p.text;
    // Gemini 3 signs the last part; Gemini 2.5 the first part after the thoughts.
    parts.push(modelInfo(model).signatures ? { text } : { text, thoughtSignature: issueSignature(state) });
    if (modelInfo(model).signatures) parts[parts.length - 1].thoughtSignature = issueSignature(state);
  }
  return parts;
}

export function generateResponse(body: any, cache: StoredCache | undefined, model: string, state: MockState): any {
  const p = plan(body, cache);
  const g = field(body, 'generationConfig') ?? {};
  const base = { usageMetadata: usage(body, cache, p, isThinking(model, g) && !p.blocked), modelVersion: model, responseId: rid() };
  if (p.blocked)
    return { promptFeedback: { blockReason: p.blocked, safetyRatings: [{ category: 'HARM_CATEGORY_HARASSMENT', probability: 'HIGH', blocked: true }] }, ...base };
  if (p.finish === 'SAFETY')
    return { candidates: [{ content: {}, finishReason: 'SAFETY', index: 0, safetyRatings: [{ category: 'HARM_CATEGORY_HATE_SPEECH', probability: 'LOW', blocked: true }, { category: 'HARM_CATEGORY_HARASSMENT', probability: 'NEGLIGIBLE' }] }], ...base };
  const n = field(g, 'candidateCount') ?? 1;
  const candidates = Array.from({ length: n }, (_, i) => {
    const c: any = { content: { parts: candidateParts(p, model, state, i), role: 'model' }, finishReason: p.finish, index: i };
    if (p.call) c.finishMessage = 'Model generated function call(s).';
    if (p.searches) c.groundingMetadata = groundingMetadata(p.searches);
    if (field(g, 'responseLogprobs') && p.text) {
      c.logprobsResult = logprobsResult(p.text, field(g, 'logprobs'));
      c.avgLogprobs = -0.1;
    }
    return c;
  });
  return { candidates, ...base };
}

/** SSE frames: the answer cut into chunks, cumulative usage, Gemini's \r\n\r\n separator, no terminator. */
export function streamFrames(full: any, model: string): string[] {
  const frame = (o: unknown) => `data: ${JSON.stringify(o)}\r\n\r\n`;
  const { usageMetadata: u, modelVersion, responseId } = full;
  const meta = { modelVersion, responseId };
  if (!full.candidates) return [frame(full)];
  const c = full.candidates[0];
  const parts: any[] = c.content?.parts ?? [];
  const total = u.candidatesTokenCount ?? 0;
  const events: { parts: any[]; tokens: number }[] = [];
  for (const part of parts) {
    if (part.thought || part.functionCall) {
      events.push({ parts: [part], tokens: part.thought ? 0 : total });
      continue;
    }
    const words: string[] = part.text.split(/(?<= )/);
    const per = Math.max(1, Math.ceil(words.length / 3));
    for (let i = 0; i < words.length; i += per) {
      const piece: any = { text: words.slice(i, i + per).join('') };
      // Gemini 2.5 puts the signature on the first text chunk, Gemini 3 on a final empty part.
      if (i === 0 && part.thoughtSignature && !modelInfo(model).signatures) piece.thoughtSignature = part.thoughtSignature;
      events.push({ parts: [piece], tokens: Math.min(total, Math.ceil(((i + per) / words.length) * total)) });
    }
    if (part.thoughtSignature && modelInfo(model).signatures) events.push({ parts: [{ text: '', thoughtSignature: part.thoughtSignature }], tokens: total });
  }
  if (!parts.length || parts[parts.length - 1].functionCall) events.push({ parts: [{ text: '' }], tokens: total });
  return events.map((e, i) => {
    const last = i === events.length - 1;
    const cand: any = { content: { parts: e.parts, role: 'model' }, index: 0 };
    if (last) cand.finishReason = c.finishReason;
    // Streamed, the grounding metadata comes with the last event.
    if (last && c.groundingMetadata) cand.groundingMetadata = c.groundingMetadata;
    const usage = { ...u, candidatesTokenCount: e.tokens, totalTokenCount: (u.promptTokenCount ?? 0) + e.tokens + (u.thoughtsTokenCount ?? 0) };
    if (!e.tokens) delete usage.candidatesTokenCount;
    return frame({ candidates: [cand], usageMetadata: usage, ...meta });
  });
}

// ---------------------------------------------------------------------------
// Cached contents.

/** POST cachedContents: checks the body as Google does and stores the cache under a name from `naming`. */
export function createCache(body: any, state: MockState, models: Set<string>, minCacheTokens?: number, naming: Naming = GEMINI_NAMING): Reply {
  const shape = checkSpec(body, SPEC.CachedContent, '');
  if (shape) return shape;
  const model = String(field(body, 'model') ?? '');
  const bare = naming.parseModel(model);
  if (bare === undefined) return invalid(`* CreateCachedContentRequest.cached_content.model: model must be of the form ${naming.model('{model}')}\n`, 'cached_content.model');
  if (!models.has(bare)) return geminiError(404, 'NOT_FOUND', `${model} is not found for API version v1beta, or is not supported for createCachedContent.`);
  const ttl = field(body, 'ttl');
  if (ttl !== undefined && !/^\d+(\.\d{1,9})?s$/.test(ttl)) return invalid(`Invalid value at 'cached_content.ttl' (type.googleapis.com/google.protobuf.Duration), "${ttl}"`, 'cached_content.ttl');
  const contents = field(body, 'contents') ?? [];
  const si = field(body, 'systemInstruction');
  const tools = field(body, 'tools');
  const err = (si ? checkParts(field(si, 'parts'), 'system_instruction', state) : undefined) ?? checkContents(contents, state, bare) ?? checkTools(tools, field(body, 'toolConfig'));
  if (err) return err;
  const tokens = estimateTokens([contents, si, tools]);
  const min = minCacheTokens ?? modelInfo(bare).minCache;
  if (tokens < min) return invalid(`Cached content is too small. total_token_count=${tokens}, min_total_token_count=${min}`);
  const now = Date.now();
  const seconds = ttl ? Number(ttl.slice(0, -1)) : 3600;
  const cache: StoredCache = {
    name: naming.newCache(),
    model: naming.model(bare), contents, systemInstruction: si, tools, toolConfig: field(body, 'toolConfig'), tokens,
    createTime: new Date(now).toISOString(), expireTime: new Date(now + seconds * 1000).toISOString(),
  };
  state.caches.set(cache.name, cache);
  return { status: 200, json: cacheView(cache) };
}

/** GET or DELETE of a cached content by its stored name (undefined for another method). */
export function cacheResource(method: string, name: string, state: MockState): Reply | undefined {
  const c = state.caches.get(name);
  if (method !== 'GET' && method !== 'DELETE') return undefined;
  if (!c || Date.parse(c.expireTime) <= Date.now()) return geminiError(403, 'PERMISSION_DENIED', 'CachedContent not found (or permission denied)');
  if (method === 'DELETE') {
    state.caches.delete(name);
    return { status: 200, json: {} };
  }
  return { status: 200, json: cacheView(c) };
}

export const cacheView = (c: StoredCache) => ({ name: c.name, model: c.model, createTime: c.createTime, updateTime: c.createTime, expireTime: c.expireTime, displayName: '', usageMetadata: { totalTokenCount: c.tokens } });

// ---------------------------------------------------------------------------
// The server.

export interface GeminiMockOptions {
  key?: string;
  models?: string[];
  /** Extra routes, by exact path ('/v1beta/models/imagen-4.0-generate-001:predict') or method suffix (':predict'). */
  routes?: Record<string, Handler>;
  /** Answer generateContent for some models differently (e.g. image output); undefined keeps the default answer. */
  respond?: (model: string, body: any, state: MockState) => any | undefined;
  /** Smallest cached content in (estimated) tokens; defaults to Google's per-model minimum (1,024 Flash, 4,096 Pro). */
  minCacheTokens?: number;
}

export interface StreamFailure {
  /** Normal events sent before the error event. */
  afterEvents: number;
  error?: { code: number; message: string; status: string };
}

/**
 * The answer of generateContent (JSON), or of streamGenerateContent: SSE with
 * `alt=sse`, else one JSON array; a queued failure ends the stream with an
 * error event as Google does.
 */
export function generateReply(full: any, model: string, stream: boolean, alt: string | null, failure?: StreamFailure): Reply {
  if (!stream) return { status: 200, json: full };
  if (alt !== 'sse') return { status: 200, json: [full] };
  const frames = streamFrames(full, model);
  if (failure) {
    const err = failure.error ?? { code: 500, message: 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting', status: 'INTERNAL' };
    return { status: 200, headers: { 'content-disposition': 'attachment' }, sse: [...frames.slice(0, failure.afterEvents), `data: ${JSON.stringify({ error: err })}\r\n\r\n`] };
  }
  return { status: 200, headers: { 'content-disposition': 'attachment' }, sse: frames };
}

export interface GeminiMock extends MockServer {
  state: MockState;
  /** The next stream sends `afterEvents` events, then `data: {"error": ...}`, then closes. */
  failStream(f: StreamFailure): void;
}

const GENERATE = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
const COUNT = /^\/v1beta\/models\/([^/:]+):countTokens$/;

/** POST models/{model}:countTokens (https://ai.google.dev/api/tokens#method:-models.counttokens). */
function countTokens(body: any, model: string, state: MockState, models: Set<string>): Reply {
  if (!models.has(model)) return geminiError(404, 'NOT_FOUND', `models/${model} is not found for API version v1beta, or is not supported for countTokens. Call ListModels to see the list of available models and their supported methods.`);
  const shape = checkSpec(body, obj('CountTokensRequest', { model: 'string', contents: arr(Content), generateContentRequest: 'struct' }), '');
  if (shape) return shape;
  const contents = field(body, 'contents');
  const gcr = field(body, 'generateContentRequest');
  if (contents && gcr) return invalid('contents and generate_content_request are mutually exclusive. You can either send Model + Contents or a generate_content_request, but never both.');
  if (!gcr) {
    if (!Array.isArray(contents) || !contents.length) return invalid('* CountTokensRequest.contents: contents is not specified\n', 'contents');
    const err = checkContents(contents, state, model);
    if (err) return err;
    const n = estimateTokens(contents);
    return { status: 200, json: { totalTokens: n, promptTokensDetails: [{ modality: 'TEXT', tokenCount: n }] } };
  }
  const named = field(gcr, 'model');
  if (typeof named !== 'string' || !named.startsWith('models/'))
    return invalid('* CountTokensRequest.generate_content_request.model: model must be of the form models/{model}\n', 'generate_content_request.model');
  const { error, cache } = validateGenerate(gcr, named.slice(7), state, models);
  if (error) return error;
  const n = estimateTokens([field(gcr, 'contents'), field(gcr, 'systemInstruction'), field(gcr, 'tools')]) + (cache?.tokens ?? 0);
  return { status: 200, json: { totalTokens: n, ...(cache ? { cachedContentTokenCount: cache.tokens } : {}), promptTokensDetails: [{ modality: 'TEXT', tokenCount: n }] } };
}

export async function startGeminiMock(opts: GeminiMockOptions = {}): Promise<GeminiMock> {
  const key = opts.key ?? GEMINI_KEY;
  const models = new Set(opts.models ?? DEFAULT_GEMINI_MODELS);
  const state: MockState = { caches: new Map(), signatures: new Set() };
  const streamFailures: StreamFailure[] = [];

  const handler: Handler = (req) => {
    const auth = authError(req, key);
    if (auth) return auth;
    const verb = /:[A-Za-z]+$/.exec(req.path)?.[0];
    const extra = opts.routes?.[req.path] ?? (verb ? opts.routes?.[verb] : undefined);
    if (extra) return extra(req);

    const g = GENERATE.exec(req.path);
    if (g && req.method === 'POST') {
      const model = decodeURIComponent(g[1]);
      const { error, cache } = validateGenerate(req.body, model, state, models);
      if (error) return error;
      const full = opts.respond?.(model, req.body, state) ?? generateResponse(req.body, cache, model, state);
      const stream = g[2] === 'streamGenerateContent';
      return generateReply(full, model, stream, req.query.get('alt'), stream && req.query.get('alt') === 'sse' ? streamFailures.shift() : undefined);
    }
    const ct = COUNT.exec(req.path);
    if (ct && req.method === 'POST') return countTokens(req.body, decodeURIComponent(ct[1]), state, models);
    if (req.path === '/v1beta/cachedContents' && req.method === 'POST') return createCache(req.body, state, models, opts.minCacheTokens);
    const cm = /^\/v1beta\/(cachedContents\/[^/]+)$/.exec(req.path);
    const found = cm ? cacheResource(req.method, cm[1], state) : undefined;
    if (found) return found;
    return geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
  };

  const server = await startMock(handler);
  const reset = server.reset;
  return Object.assign(server, {
    state,
    failStream: (f: StreamFailure) => void streamFailures.push(f),
    reset() {
      reset();
      streamFailures.length = 0;
    },
  });
}
