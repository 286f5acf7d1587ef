// POST /v1/images/generations on the Gemini API: the OpenAI Images request
// (already validated, model patched to the upstream name) to Google's image
// models, and their answer back to the OpenAI image result (spec 2.4).
//
// Two model lines, told apart by the upstream model name:
// - Gemini image models (gemini-2.5-flash-image and kin) answer
//   POST /v1beta/models/{m}:generateContent with
//   generationConfig.responseModalities ['IMAGE'] and imageConfig.aspectRatio,
//   plus imageConfig.imageSize (1K, 2K, 4K) on the models that have a
//   resolution setting (Gemini 3 Pro Image)
//   (https://ai.google.dev/gemini-api/docs/image-generation). They return one
//   image per call as an inlineData part: n > 1 is n calls, in parallel.
// - Imagen (imagen-4.0-generate-001 and kin) answers
//   POST /v1beta/models/{m}:predict {instances:[{prompt}], parameters:{sampleCount,
//   aspectRatio, sampleImageSize (1K, 2K: Imagen 4 and Imagen 4 Ultra),
//   outputOptions:{mimeType, compressionQuality}}}
//   (https://ai.google.dev/gemini-api/docs/imagen; field names as js-genai's
//   generateImagesConfigToMldev writes them) and returns predictions[] of
//   {bytesBase64Encoded, mimeType}.
//
// `quality` asks for the model's output resolution where it has one (low: the
// smallest, medium: 2K, high: the largest) and is echoed as asked. Nothing is
// converted: what the API cannot be asked for is not faked. The result
// reports what came back (format, alpha, and as `size` the size the contract
// allows that is nearest to the image's real aspect ratio, all read from the
// image bytes) and debug.normalizations records each difference from the ask.
import type { ProviderCall, NativeOutcome } from '../../../src/plugin.js';
import type { NormalizationEntry } from '../../../src/types.js';
import { upstreamJson } from '../../../src/provider/http.js';
import { unparseable, UpstreamError } from '../../../src/provider/errors.js';
import { geminiError, reclassify } from './errors.js';
import type { GeminiSite } from './index.js';

type Note = (e: NormalizationEntry) => void;
type Format = 'png' | 'jpeg' | 'webp';
type Req = Record<string, unknown> & { model: string; prompt: string };

const MIME: Record<Format, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };
const FORMAT_OF_MIME: Record<string, Format> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/jpg': 'jpeg', 'image/webp': 'webp' };

// ---------------------------------------------------------------------------
// What came back: format, size and alpha from the bytes themselves.

export interface ImageInfo {
  format: Format;
  width: number;
  height: number;
  alpha: boolean;
}

/** Reads the header of a PNG (IHDR), JPEG (SOFn marker) or WebP (VP8 / VP8L / VP8X chunk). */
export function imageInfo(b: Buffer): ImageInfo | undefined {
  if (b.length >= 26 && b.readUInt32BE(0) === 0x89504e47 && b.toString('latin1', 12, 16) === 'IHDR') {
    const colourType = b[25];
    return { format: 'png', width: b.readUInt32BE(16), height: b.readUInt32BE(20), alpha: colourType === 4 || colourType === 6 };
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    let i = 2;
    while (i + 9 < b.length && b[i] === 0xff) {
      const marker = b[i + 1];
      if (marker === 0xff) {
        i++; // fill byte
        continue;
      }
      if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
        i += 2;
        continue;
      }
      // SOF0..SOF15 carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) are not frames.
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return { format: 'jpeg', height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7), alpha: false };
      }
      i += 2 + b.readUInt16BE(i + 2);
    }
    return undefined;
  }
  if (b.length >= 30 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') {
    const chunk = b.toString('latin1', 12, 16);
    if (chunk === 'VP8X') return { format: 'webp', width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3), alpha: (b[20] & 0x10) !== 0 };
    if (chunk === 'VP8L' && b[20] === 0x2f) {
      const bits = b.readUInt32LE(21);
      return { format: 'webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1, alpha: ((bits >>> 28) & 1) === 1 };
    }
    if (chunk === 'VP8 ' && b[23] === 0x9d && b[24] === 0x01 && b[25] === 0x2a) {
      return { format: 'webp', width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff, alpha: false };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// The request.

/** OpenAI sizes to Gemini aspect ratios; `auto` leaves the choice to the model. */
const ASPECT: Record<string, string> = { '1024x1024': '1:1', '1536x1024': '3:2', '1024x1536': '2:3' };
/**
 * Imagen offers 1:1, 3:4, 4:3, 9:16 and 16:9 only (Imagen docs, `aspectRatio`):
 * 3:2 and 2:3 go to the nearest of the same orientation.
 */
const IMAGEN_ASPECT: Record<string, string> = { '1:1': '1:1', '3:2': '4:3', '2:3': '3:4' };
/** Imagen `outputOptions.mimeType` takes image/png and image/jpeg. */
const IMAGEN_FORMATS: Format[] = ['png', 'jpeg'];

/**
 * The output resolutions a model can be asked for, smallest first, or
 * undefined when it has no such setting: Gemini 3 Pro Image takes
 * imageConfig.imageSize 1K, 2K or 4K (Gemini image generation docs); Imagen 4
 * and Imagen 4 Ultra take parameters.sampleImageSize 1K or 2K (Vertex AI,
 * "Set output resolution"; Imagen 4 Fast and Gemini 2.5 Flash Image have none).
 */
export function resolutionsOf(model: string): readonly string[] | undefined {
  const m = model.replace(/^models\//, '');
  if (/^gemini-3(\.\d+)?-pro-image/.test(m)) return ['1K', '2K', '4K'];
  if (/^imagen-4\.0-(ultra-)?generate-/.test(m)) return ['1K', '2K'];
  return undefined;
}

/** `quality` as the model's resolution: low the smallest, high the largest, medium 2K; auto (or none) leaves the model's default. */
export function resolutionFor(model: string, quality: unknown): string | undefined {
  const sizes = resolutionsOf(model);
  if (!sizes || quality == null || quality === 'auto') return undefined;
  if (quality === 'low') return sizes[0];
  if (quality === 'high') return sizes[sizes.length - 1];
  return sizes.includes('2K') ? '2K' : sizes[sizes.length - 1];
}

/** The sizes an image result may report (spec 4.3), by aspect ratio. */
const REPORTED: readonly [string, number][] = [
  ['1024x1024', 1],
  ['1536x1024', 3 / 2],
  ['1024x1536', 2 / 3],
];

/** The reportable size whose aspect ratio is nearest to the image's (compared on a log scale, so 2:1 and 1:2 are as far from 1:1). */
export function nearestSize(width: number, height: number): string {
  const r = Math.log(width / height);
  let best = REPORTED[0];
  for (const s of REPORTED) if (Math.abs(r - Math.log(s[1])) < Math.abs(r - Math.log(best[1]))) best = s;
  return best[0];
}

/** Fields this mapping reads. Anything else is not sent: the Gemini API rejects unknown fields. */
const MAPPED = new Set(['model', 'prompt', 'n', 'size', 'output_format', 'output_compression', 'stream']);

/** OpenAI image fields the Gemini API has nothing for, at their non-default values. */
function dropUnsupported(req: Req, note: Note, imagen: boolean): void {
  const model = req.model;
  if (req.quality != null && req.quality !== 'auto' && !resolutionsOf(model))
    note({ param: 'quality', action: 'strip', before: req.quality, reason: `${model} has no rendering-quality or resolution setting` });
  if (req.moderation != null && req.moderation !== 'auto')
    note({ param: 'moderation', action: 'strip', before: req.moderation, reason: `the Gemini API applies its own safety filters to ${model}` });
  if (req.user != null) note({ param: 'user', action: 'strip', before: req.user, reason: 'the Gemini API has no end-user identifier' });
  if (req.background === 'transparent')
    note({ param: 'background', action: 'override', before: 'transparent', after: 'opaque', reason: `${model} cannot be asked for a transparent background` });
  if (!imagen && req.output_compression != null)
    note({ param: 'output_compression', action: 'strip', before: req.output_compression, reason: `the Gemini API has no output compression option for ${model}` });
  for (const k of Object.keys(req)) {
    if (MAPPED.has(k) || ['quality', 'moderation', 'user', 'background'].includes(k) || req[k] == null) continue;
    note({ param: k, action: 'strip', before: req[k], reason: `the Gemini API has no equivalent of '${k}'` });
  }
}

function aspectRatio(req: Req, note: Note, imagen: boolean): string | undefined {
  const size = typeof req.size === 'string' ? req.size : 'auto';
  const ratio = ASPECT[size];
  if (!ratio) return undefined;
  if (!imagen) return ratio;
  const nearest = IMAGEN_ASPECT[ratio];
  if (nearest !== ratio) note({ param: 'size', action: 'override', before: size, after: nearest, reason: `${req.model} offers the aspect ratios 1:1, 3:4, 4:3, 9:16 and 16:9 only` });
  return nearest;
}

/** generateContent body for one image (pure). */
export function toGenerateContent(req: Req, note: Note): Record<string, unknown> {
  dropUnsupported(req, note, false);
  const ratio = aspectRatio(req, note, false);
  const imageSize = resolutionFor(req.model, req.quality);
  const imageConfig = { ...(ratio ? { aspectRatio: ratio } : {}), ...(imageSize ? { imageSize } : {}) };
  return {
    contents: [{ role: 'user', parts: [{ text: req.prompt }] }],
    generationConfig: { responseModalities: ['IMAGE'], ...(Object.keys(imageConfig).length ? { imageConfig } : {}) },
  };
}

/** :predict body (pure). */
export function toPredict(req: Req, note: Note): Record<string, unknown> {
  dropUnsupported(req, note, true);
  const ratio = aspectRatio(req, note, true);
  const asked = (req.output_format as Format | undefined) ?? 'png';
  const outputOptions: Record<string, unknown> = {};
  if (IMAGEN_FORMATS.includes(asked)) {
    outputOptions.mimeType = MIME[asked];
    if (asked === 'jpeg' && req.output_compression != null) outputOptions.compressionQuality = req.output_compression;
  } else if (req.output_compression != null) {
    note({ param: 'output_compression', action: 'strip', before: req.output_compression, reason: `${req.model} cannot produce ${asked}` });
  }
  return {
    instances: [{ prompt: req.prompt }],
    parameters: {
      sampleCount: (req.n as number | null | undefined) ?? 1,
      ...(ratio ? { aspectRatio: ratio } : {}),
      ...(resolutionFor(req.model, req.quality) ? { sampleImageSize: resolutionFor(req.model, req.quality) } : {}),
      ...(Object.keys(outputOptions).length ? { outputOptions } : {}),
      // Filtered images then come back with their reason instead of silently missing.
      includeRaiReason: true,
    },
  };
}

// ---------------------------------------------------------------------------
// The answer.

interface Usage {
  input_tokens: number;
  input_tokens_details: { text_tokens: number; image_tokens: number };
  output_tokens: number;
  output_tokens_details: { text_tokens: number; image_tokens: number };
  total_tokens: number;
}

interface ModalityCount {
  modality?: string;
  tokenCount?: number;
}

interface GeminiImageResponse {
  candidates?: { content?: { parts?: { text?: string; thought?: boolean; inlineData?: { mimeType?: string; data?: string } }[] }; finishReason?: string; finishMessage?: string }[];
  promptFeedback?: { blockReason?: string };
  usageMetadata?: {
    promptTokenCount?: number;
    candidatesTokenCount?: number;
    thoughtsTokenCount?: number;
    totalTokenCount?: number;
    promptTokensDetails?: ModalityCount[];
    candidatesTokensDetails?: ModalityCount[];
  };
}

interface PredictResponse {
  predictions?: { bytesBase64Encoded?: string; mimeType?: string; raiFilteredReason?: string }[];
}

const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
const byModality = (list: ModalityCount[] | undefined, m: string): number | undefined =>
  Array.isArray(list) ? list.filter((d) => d.modality === m).reduce((s, d) => s + num(d.tokenCount), 0) : undefined;

/**
 * usageMetadata to the image usage (https://ai.google.dev/api/generate-content#UsageMetadata): promptTokenCount
 * is the input (text unless the details say image), candidatesTokenCount the
 * output (image unless the details say text); thoughts count as text output.
 */
export function imageUsage(u: GeminiImageResponse['usageMetadata']): Usage {
  const input = num(u?.promptTokenCount);
  const inImage = byModality(u?.promptTokensDetails, 'IMAGE') ?? 0;
  const candidates = num(u?.candidatesTokenCount);
  const thoughts = num(u?.thoughtsTokenCount);
  const outText = byModality(u?.candidatesTokensDetails, 'TEXT') ?? 0;
  const outImage = byModality(u?.candidatesTokensDetails, 'IMAGE') ?? Math.max(0, candidates - outText);
  const output = candidates + thoughts;
  return {
    input_tokens: input,
    input_tokens_details: { text_tokens: Math.max(0, input - inImage), image_tokens: inImage },
    output_tokens: output,
    output_tokens_details: { text_tokens: output - outImage, image_tokens: outImage },
    total_tokens: num(u?.totalTokenCount) || input + output,
  };
}

function addUsage(a: Usage, b: Usage): Usage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    input_tokens_details: { text_tokens: a.input_tokens_details.text_tokens + b.input_tokens_details.text_tokens, image_tokens: a.input_tokens_details.image_tokens + b.input_tokens_details.image_tokens },
    output_tokens: a.output_tokens + b.output_tokens,
    output_tokens_details: { text_tokens: a.output_tokens_details.text_tokens + b.output_tokens_details.text_tokens, image_tokens: a.output_tokens_details.image_tokens + b.output_tokens_details.image_tokens },
    total_tokens: a.total_tokens + b.total_tokens,
  };
}

/** A refusal by the provider's safety filters: the caller's prompt, so a 400 (OpenAI answers such prompts with code content_policy_violation). */
function blocked(model: string, reason: string): UpstreamError {
  return new UpstreamError(400, {
    message: `${model} refused to generate this image (${reason}).`,
    type: 'invalid_request_error',
    param: 'prompt',
    code: 'content_policy_violation',
  });
}

const SAFETY_REASONS = new Set(['SAFETY', 'IMAGE_SAFETY', 'PROHIBITED_CONTENT', 'IMAGE_PROHIBITED_CONTENT', 'BLOCKLIST', 'SPII', 'RECITATION', 'IMAGE_RECITATION']);

interface Image {
  b64: string;
  info: ImageInfo | undefined;
  mime: string | undefined;
}

/** The one image of a generateContent answer, or the reason there is none. */
export function imageOfResponse(model: string, r: GeminiImageResponse): Image {
  if (r.promptFeedback?.blockReason) throw blocked(model, `prompt blocked: ${r.promptFeedback.blockReason}`);
  const cand = r.candidates?.[0];
  const part = cand?.content?.parts?.find((p) => !p.thought && typeof p.inlineData?.data === 'string' && p.inlineData.data.length > 0);
  if (part?.inlineData?.data) {
    const b64 = part.inlineData.data;
    return { b64, info: imageInfo(Buffer.from(b64.slice(0, 65536), 'base64')), mime: part.inlineData.mimeType };
  }
  const reason = cand?.finishReason ?? 'no candidates';
  if (SAFETY_REASONS.has(reason)) throw blocked(model, `finishReason ${reason}`);
  const said = cand?.content?.parts?.map((p) => p.text ?? '').join('').trim();
  throw unparseable(`${model} returned no image (finishReason ${reason}${said ? `: ${said.slice(0, 200)}` : ''})`);
}

function formatOf(img: Image): Format | undefined {
  return img.info?.format ?? (img.mime ? FORMAT_OF_MIME[img.mime.toLowerCase()] : undefined);
}

/** The OpenAI image result from the images that came back, reporting what they are. */
function result(req: Req, images: Image[], note: Note, usage?: Usage): Record<string, unknown> {
  const first = images[0];
  const format = formatOf(first) ?? 'png';
  const asked = (req.output_format as Format | undefined) ?? 'png';
  if (format !== asked) note({ param: 'output_format', action: 'override', before: asked, after: format, reason: `${req.model} returned ${MIME[format]}; the gateway converts nothing` });
  const askedSize = typeof req.size === 'string' ? req.size : 'auto';
  // The size the contract allows nearest to what came back (a 1248x832 image is 1536x1024).
  const size = first.info ? nearestSize(first.info.width, first.info.height) : askedSize !== 'auto' ? askedSize : undefined;
  if (first.info && askedSize !== 'auto' && size !== askedSize)
    note({ param: 'size', action: 'override', before: askedSize, after: size, reason: `${req.model} returned a ${first.info.width}x${first.info.height} image; size reports the nearest size the API allows` });
  return {
    created: Math.floor(Date.now() / 1000),
    background: first.info?.alpha ? 'transparent' : 'opaque',
    data: images.map((img) => ({ b64_json: img.b64 })),
    output_format: format,
    // As asked: a model with a resolution setting got it as one (resolutionFor), the others have none (a strip note says so).
    quality: typeof req.quality === 'string' ? req.quality : 'auto',
    ...(size ? { size } : {}),
    ...(usage ? { usage } : {}),
  };
}

// ---------------------------------------------------------------------------
// The calls.

async function post<T>(call: ProviderCall<unknown>, site: GeminiSite, url: string, body: unknown): Promise<T> {
  try {
    return await upstreamJson<T>(call, { url, headers: site.headers, body, mapError: geminiError });
  } catch (err) {
    throw reclassify(err);
  }
}

async function viaGenerateContent(call: ProviderCall<Record<string, unknown>>, site: GeminiSite, req: Req): Promise<Record<string, unknown>> {
  const body = toGenerateContent(req, call.note);
  const url = site.modelUrl(req.model, 'generateContent');
  const n = (req.n as number | null | undefined) ?? 1;
  // One image per call (these models refuse candidateCount > 1): n calls at
  // once; the first failure aborts the others and fails the attempt.
  const group = new AbortController();
  const signal = AbortSignal.any([call.signal, group.signal]);
  const one = async () => {
    const r = await post<GeminiImageResponse>({ ...call, signal }, site, url, body);
    return { image: imageOfResponse(req.model, r), usage: imageUsage(r.usageMetadata) };
  };
  let outs: { image: Image; usage: Usage }[];
  try {
    outs = await Promise.all(Array.from({ length: n }, one));
  } catch (err) {
    group.abort();
    throw err;
  }
  return result(req, outs.map((o) => o.image), call.note, outs.map((o) => o.usage).reduce(addUsage));
}

async function viaPredict(call: ProviderCall<Record<string, unknown>>, site: GeminiSite, req: Req): Promise<Record<string, unknown>> {
  const r = await post<PredictResponse>(call, site, site.modelUrl(req.model, 'predict'), toPredict(req, call.note));
  const predictions = Array.isArray(r.predictions) ? r.predictions : [];
  const images: Image[] = predictions
    .filter((p) => typeof p.bytesBase64Encoded === 'string' && p.bytesBase64Encoded.length > 0)
    .map((p) => ({ b64: p.bytesBase64Encoded!, info: imageInfo(Buffer.from(p.bytesBase64Encoded!.slice(0, 65536), 'base64')), mime: p.mimeType }));
  if (!images.length) {
    const reason = predictions.find((p) => p.raiFilteredReason)?.raiFilteredReason;
    if (reason) throw blocked(req.model, reason);
    throw unparseable(`${req.model} returned no image`);
  }
  const asked = (req.n as number | null | undefined) ?? 1;
  if (images.length < asked) {
    const reason = predictions.find((p) => p.raiFilteredReason)?.raiFilteredReason ?? 'not returned';
    call.note({ param: 'n', action: 'override', before: asked, after: images.length, reason: `${req.model} filtered ${asked - images.length} of the images: ${reason}` });
  }
  // Imagen reports no token usage (it is priced per image): the result has no usage.
  return result(req, images, call.note);
}

export function isImagen(model: string): boolean {
  return /^(models\/)?imagen-/.test(model);
}

/** The `images` hook of a provider serving Google's image models at `site` (the Gemini API, Vertex AI). */
export async function geminiImages(call: ProviderCall<Record<string, unknown>>, site: GeminiSite): Promise<NativeOutcome> {
  const req = call.request as Req;
  const body = isImagen(req.model) ? await viaPredict(call, site, req) : await viaGenerateContent(call, site, req);
  return { kind: 'json', body };
}
