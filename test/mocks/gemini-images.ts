// Google's image models for the Gemini mock (test/mocks/gemini.ts), plugged in
// through its `routes` extension:
// - Gemini image models on POST /v1beta/models/{m}:generateContent: the whole
//   GenerateContentRequest is checked by the Gemini mock's own validator
//   (unknown fields, types, roles, parts), then what image models add:
//   responseModalities values, imageConfig.aspectRatio / imageSize values
//   (imageSize on the models that have it only), no candidateCount above 1. The
//   answer is one inlineData PNG of the pixel size Google documents for the
//   model, aspect ratio and image size, with usageMetadata per modality.
// - Imagen on POST /v1beta/models/{m}:predict: {instances:[{prompt}],
//   parameters:{sampleCount, aspectRatio, sampleImageSize (Imagen 4 and Ultra
//   only; 2K doubles the pixels), outputOptions:{mimeType,
//   compressionQuality}, ...}} checked field by field (unknown names rejected as
//   Google's JSON parser does); the answer is predictions[] of
//   {bytesBase64Encoded, mimeType} (https://ai.google.dev/gemini-api/docs/imagen).
// Prompts steer the mock model: BLOCK_ME (prompt blocked / all filtered),
// UNSAFE_IMAGE (IMAGE_SAFETY finish), NO_IMAGE (a text answer, finish NO_IMAGE),
// FILTER_ONE (Imagen filters one of the images).
import { randomBytes } from 'node:crypto';
import type { Handler, Recorded, Reply } from './server.js';
import { startGeminiMock, geminiError, validateGenerate, checkSpec, field, DEFAULT_GEMINI_MODELS, type GeminiMock, type GeminiMockOptions, type Spec, type MockState, type Naming } from './gemini.js';
import { makeImage, MIME, type ImageFormat } from './openai-images.js';

 

export const GEMINI_IMAGE_MODELS = ['gemini-2.5-flash-image', 'gemini-3-pro-image-preview'];
export const IMAGEN_MODELS = ['imagen-4.0-generate-001', 'imagen-4.0-fast-generate-001', 'imagen-4.0-ultra-generate-001'];

/** gemini-2.5-flash-image output size per aspect ratio (Gemini image generation docs, 1K). */
export const GEMINI_IMAGE_PIXELS: Record<string, [number, number]> = {
  '1:1': [1024, 1024], '2:3': [832, 1248], '3:2': [1248, 832], '3:4': [864, 1184], '4:3': [1184, 864],
  '4:5': [896, 1152], '5:4': [1152, 896], '9:16': [768, 1344], '16:9': [1344, 768], '21:9': [1536, 672],
};
/** gemini-3-pro-image-preview output size per aspect ratio at 1K (Gemini image generation docs); 2K and 4K are 2 and 4 times as large. */
export const GEMINI_3_PRO_IMAGE_PIXELS: Record<string, [number, number]> = {
  '1:1': [1024, 1024], '2:3': [848, 1264], '3:2': [1264, 848], '3:4': [896, 1200], '4:3': [1200, 896],
  '4:5': [928, 1152], '5:4': [1152, 928], '9:16': [768, 1376], '16:9': [1376, 768], '21:9': [1584, 672],
};
/** The Gemini image models with a resolution setting (imageConfig.imageSize). */
const IMAGE_SIZE_MODELS = new Set(['gemini-3-pro-image-preview']);
const SCALE: Record<string, number> = { '1K': 1, '2K': 2, '4K': 4 };
/** Imagen models with an output resolution setting (parameters.sampleImageSize, 1K or 2K): Imagen 4 and Imagen 4 Ultra, not Fast. */
const IMAGEN_SIZE_MODELS = new Set(['imagen-4.0-generate-001', 'imagen-4.0-ultra-generate-001']);
/** Imagen 4 output size per aspect ratio (1K; 2K is twice as large). */
export const IMAGEN_PIXELS: Record<string, [number, number]> = {
  '1:1': [1024, 1024], '3:4': [896, 1280], '4:3': [1280, 896], '9:16': [768, 1408], '16:9': [1408, 768],
};

const invalid = (message: string, field?: string): Reply =>
  geminiError(400, 'INVALID_ARGUMENT', message, field ? [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field, description: message }] }] : undefined);

const notFound = (model: string, method: string): Reply =>
  geminiError(404, 'NOT_FOUND', `models/${model} is not found for API version v1beta, or is not supported for ${method}. Call ListModels to see the list of available models and their supported methods.`);

const rid = () => randomBytes(15).toString('base64url');
const tokens = (s: string) => Math.max(1, Math.ceil(s.length / 4));
/** Output tokens of one 1K image on gemini-2.5-flash-image (Google's pricing page). */
const IMAGE_TOKENS = 1290;

function promptText(body: any): string {
  const contents: any[] = field(body, 'contents') ?? [];
  return contents.flatMap((c) => field(c, 'parts') ?? []).map((p: any) => field(p, 'text') ?? '').join(' ');
}

/** generateContent for a Gemini image model. */
function geminiImageHandler(models: Set<string>): Handler {
  const state: MockState = { caches: new Map(), signatures: new Set() };
  return (req: Recorded): Reply => {
    const m = /^\/v1beta\/models\/([^/:]+):generateContent$/.exec(req.path);
    if (!m || req.method !== 'POST') return geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
    return geminiImageReply(decodeURIComponent(m[1]), req.body, state, models);
  };
}

/** The answer of a Gemini image model to a generateContent body (also served by the Vertex mock). */
export function geminiImageReply(model: string, body: any, state: MockState, models: Set<string>, naming?: Naming): Reply {
  const { error } = validateGenerate(body, model, state, models, naming);
  if (error) return error;
  const g = field(body, 'generationConfig') ?? {};
  const modalities: string[] = (field(g, 'responseModalities') ?? ['TEXT', 'IMAGE']).map((x: string) => String(x).toUpperCase());
  for (const x of modalities) if (!['TEXT', 'IMAGE'].includes(x)) return invalid(`* GenerateContentRequest.generation_config.response_modalities: unsupported modality ${x} for models/${model}\n`, 'generation_config.response_modalities');
  const candidates = field(g, 'candidateCount');
  if (candidates != null && candidates > 1) return invalid(`Multiple candidates is not enabled for models/${model}`, 'generation_config.candidate_count');
  const ic = field(g, 'imageConfig');
  const ratio: string = field(ic, 'aspectRatio') ?? '1:1';
  if (!GEMINI_IMAGE_PIXELS[ratio]) return invalid(`* GenerateContentRequest.generation_config.image_config.aspect_ratio: Aspect ratio ${ratio} is not supported. Supported values: ${Object.keys(GEMINI_IMAGE_PIXELS).join(', ')}\n`, 'generation_config.image_config.aspect_ratio');
  const imageSize = field(ic, 'imageSize');
  if (imageSize != null && !IMAGE_SIZE_MODELS.has(model)) return invalid(`* GenerateContentRequest.generation_config.image_config.image_size: image size is not supported for models/${model}\n`, 'generation_config.image_config.image_size');
  if (imageSize != null && !['1K', '2K', '4K'].includes(imageSize)) return invalid(`* GenerateContentRequest.generation_config.image_config.image_size: Invalid image size ${imageSize}\n`, 'generation_config.image_config.image_size');

  const prompt = promptText(body);
  const promptTokens = tokens(prompt);
  const base = { modelVersion: model, responseId: rid() };
  const usage = (out: { IMAGE?: number; TEXT?: number }) => {
    const cand = (out.IMAGE ?? 0) + (out.TEXT ?? 0);
    return {
      promptTokenCount: promptTokens,
      ...(cand ? { candidatesTokenCount: cand } : {}),
      totalTokenCount: promptTokens + cand,
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: promptTokens }],
      ...(cand ? { candidatesTokensDetails: Object.entries(out).filter(([, n]) => n).map(([modality, tokenCount]) => ({ modality, tokenCount })) } : {}),
    };
  };
  if (/BLOCK_ME/.test(prompt)) return { status: 200, json: { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, usageMetadata: usage({}), ...base } };
  if (/UNSAFE_IMAGE/.test(prompt)) return { status: 200, json: { candidates: [{ content: {}, finishReason: 'IMAGE_SAFETY', index: 0 }], usageMetadata: usage({}), ...base } };
  const text = 'Here is the image you asked for.';
  if (/NO_IMAGE/.test(prompt) || !modalities.includes('IMAGE'))
    return { status: 200, json: { candidates: [{ content: { parts: [{ text: "I can't draw that, but I can describe it." }], role: 'model' }, finishReason: modalities.includes('IMAGE') ? 'NO_IMAGE' : 'STOP', index: 0 }], usageMetadata: usage({ TEXT: 12 }), ...base } };
  const scale = SCALE[imageSize ?? '1K'];
  const [w, h] = (IMAGE_SIZE_MODELS.has(model) ? GEMINI_3_PRO_IMAGE_PIXELS : GEMINI_IMAGE_PIXELS)[ratio].map((x) => x * scale);
  const parts: any[] = [];
  if (modalities.includes('TEXT')) parts.push({ text });
  parts.push({ inlineData: { mimeType: 'image/png', data: makeImage('png', w, h).toString('base64') } });
  return {
    status: 200,
    json: { candidates: [{ content: { parts, role: 'model' }, finishReason: 'STOP', index: 0 }], usageMetadata: usage({ IMAGE: IMAGE_TOKENS, TEXT: modalities.includes('TEXT') ? tokens(text) : 0 }), ...base },
  };
}

const obj = (type: string, fields: Record<string, Spec>): Spec => ({ kind: 'obj', type, fields });
const PredictRequest = obj('PredictRequest', {
  instances: { kind: 'arr', of: obj('Instance', { prompt: 'string' }) },
  parameters: obj('Parameters', {
    sampleCount: 'int', aspectRatio: 'string', personGeneration: 'string', safetySetting: 'string', includeRaiReason: 'bool',
    includeSafetyAttributes: 'bool', language: 'string', negativePrompt: 'string', guidanceScale: 'number', sampleImageSize: 'string',
    outputOptions: obj('OutputOptions', { mimeType: 'string', compressionQuality: 'int' }),
  }),
});

const FORMAT_OF: Record<string, ImageFormat> = { 'image/png': 'png', 'image/jpeg': 'jpeg' };

/** :predict for Imagen. */
function imagenHandler(): Handler {
  return (req: Recorded): Reply => {
    const m = /^\/v1beta\/models\/([^/:]+):predict$/.exec(req.path);
    if (!m || req.method !== 'POST') return geminiError(404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
    return imagenReply(decodeURIComponent(m[1]), req.body);
  };
}

/** The answer of an Imagen model to a :predict body (also served by the Vertex mock). */
export function imagenReply(model: string, body: any): Reply {
  if (!IMAGEN_MODELS.includes(model)) return notFound(model, 'predict');
  if (!body || typeof body !== 'object' || Array.isArray(body)) return invalid('Invalid JSON payload received. Expected an object.');
  const shape = checkSpec(body, PredictRequest, '');
  if (shape) return shape;
  const instances = field(body, 'instances');
  if (!Array.isArray(instances) || instances.length !== 1) return invalid('Exactly one instance is supported.', 'instances');
  const prompt = field(instances[0], 'prompt');
  if (typeof prompt !== 'string' || !prompt.trim()) return invalid('The prompt is empty.', 'instances[0].prompt');
  const p = field(body, 'parameters') ?? {};
  const n = Number(field(p, 'sampleCount') ?? 4);
  if (!Number.isInteger(n) || n < 1 || n > 4) return invalid(`sampleCount must be between 1 and 4, got ${n}.`, 'parameters.sample_count');
  const ratio: string = field(p, 'aspectRatio') ?? '1:1';
  if (!IMAGEN_PIXELS[ratio]) return invalid(`Unsupported aspect ratio: ${ratio}. Supported values are 1:1, 3:4, 4:3, 9:16 and 16:9.`, 'parameters.aspect_ratio');
  const out = field(p, 'outputOptions') ?? {};
  const mime: string = field(out, 'mimeType') ?? 'image/png';
  const format = FORMAT_OF[mime];
  if (!format) return invalid(`Unsupported output mime type: ${mime}. Supported values are image/png and image/jpeg.`, 'parameters.output_options.mime_type');
  const quality = field(out, 'compressionQuality');
  if (quality != null && (quality < 0 || quality > 100)) return invalid('compressionQuality must be between 0 and 100.', 'parameters.output_options.compression_quality');
  const size = field(p, 'sampleImageSize');
  if (size != null && !IMAGEN_SIZE_MODELS.has(model)) return invalid(`sampleImageSize is not supported for ${model}.`, 'parameters.sample_image_size');
  if (size != null && !['1K', '2K'].includes(size)) return invalid(`Unsupported image size: ${size}. Supported values are 1K and 2K.`, 'parameters.sample_image_size');
  const why = field(p, 'includeRaiReason')
    ? (reason: string) => [{ raiFilteredReason: reason }]
    : () => [];
  const reason = "Your current safety filter threshold filtered out the generated image. You will not be charged for blocked images. Try rephrasing the prompt. Support codes: 56562880";
  if (/BLOCK_ME/.test(prompt)) {
    const filtered = why(reason);
    return { status: 200, json: filtered.length ? { predictions: filtered } : {} };
  }
  const [w, h] = IMAGEN_PIXELS[ratio].map((x) => x * (size === '2K' ? 2 : 1));
  const image = { bytesBase64Encoded: makeImage(format, w, h).toString('base64'), mimeType: MIME[format] };
  const kept = /FILTER_ONE/.test(prompt) ? n - 1 : n;
  const predictions: any[] = [...Array.from({ length: kept }, () => ({ ...image })), ...(kept < n ? why(reason) : [])];
  return { status: 200, json: predictions.length ? { predictions } : {} };
}

/** Routes for startGeminiMock({routes}): exact paths for the Gemini image models, the ':predict' suffix for Imagen. */
export function geminiImageRoutes(models: Set<string>): Record<string, Handler> {
  const gen = geminiImageHandler(models);
  const routes: Record<string, Handler> = { ':predict': imagenHandler() };
  for (const m of GEMINI_IMAGE_MODELS) routes[`/v1beta/models/${m}:generateContent`] = gen;
  return routes;
}

/** The Gemini mock with the image models added (chat models keep working on the same server). */
export async function startGeminiImagesMock(opts: GeminiMockOptions = {}): Promise<GeminiMock> {
  const models = new Set([...(opts.models ?? DEFAULT_GEMINI_MODELS), ...GEMINI_IMAGE_MODELS]);
  return startGeminiMock({ ...opts, models: [...models], routes: { ...geminiImageRoutes(models), ...opts.routes } });
}
