// The Google Gemini provider plugin: family `google` (Generative Language API,
// https://ai.google.dev/api). Chat completions are translated to
// models/{model}:generateContent and :streamGenerateContent?alt=sse; a
// `cache_control` prefix becomes a cached content (cache.ts).
//
// The key goes in the x-goog-api-key header, never in the URL (`?key=` works
// too, but URLs end up in logs and traces).
import type { ProviderPlugin, ProviderCall, ChatOutcome, CountRequest } from '../../../src/plugin.js';
import type { ChatRequest } from '../../../src/types.js';
import { upstreamJson, upstreamEvents, tokenCount } from '../../../src/provider/http.js';
import { UpstreamError } from '../../../src/provider/errors.js';
import type { GenerateContentRequest, GenerateContentResponse } from './wire.js';
import { toGemini } from './request.js';
import { toCompletion } from './response.js';
import { geminiChunks } from './stream.js';
import { geminiError, reclassify } from './errors.js';
import { ensureCachedContent, evictCachedContent } from './cache.js';
import { geminiImages } from './images.js';

export const GOOGLE_FAMILY = {
  defaultBaseUrl: 'https://generativelanguage.googleapis.com',
  env: { apiKey: 'GEMINI_API_KEY', baseUrl: 'GEMINI_BASE_URL' },
};

/** `{base}/v1beta`; a base_url that already ends in a version (…/v1beta, …/v1) is used as is. */
export function apiBase(baseUrl: string): string {
  const b = baseUrl.replace(/\/+$/, '');
  return /\/v1(alpha|beta)?$/.test(b) ? b : `${b}/v1beta`;
}

export function googleHeaders(call: ProviderCall<unknown>): Record<string, string> {
  return call.provider.api_key ? { 'x-goog-api-key': call.provider.api_key } : {};
}

/** The upstream model name as the URL path wants it (`gemini-2.5-flash`, not `models/gemini-2.5-flash`). */
export function modelPath(model: string): string {
  return encodeURIComponent(model.replace(/^models\//, ''));
}

/**
 * Where a Gemini model's methods live and how calls authenticate. The
 * mapping (request.ts, response.ts, stream.ts, images.ts, cache.ts) is the
 * same on the Gemini API and on Vertex AI (plugins/providers/vertex); only the URLs,
 * the model's resource name in a cached content and the credentials differ.
 */
export interface GeminiSite {
  /** `…/models/{model}:{method}` (method with its query, e.g. `streamGenerateContent?alt=sse`). */
  modelUrl(model: string, method: string): string;
  /** POST here creates a cached content. */
  cachesUrl: string;
  /** A cached content's `model` (`models/{m}` on the Gemini API). */
  cacheModel(model: string): string;
  /** Headers of every call (the API key; none when an authorize step adds them). */
  headers: Record<string, string>;
  /** The :countTokens body that counts a whole generate request (each API has its own shape). */
  countBody(model: string, body: GenerateContentRequest): Record<string, unknown>;
}

/** The Gemini API's site: `{base}/v1beta/models/{m}:{method}`, the key in x-goog-api-key. */
export function geminiApiSite(call: ProviderCall<unknown>): GeminiSite {
  const base = apiBase(call.provider.base_url);
  return {
    modelUrl: (model, method) => `${base}/models/${modelPath(model)}:${method}`,
    cachesUrl: `${base}/cachedContents`,
    cacheModel: (model) => `models/${model.replace(/^models\//, '')}`,
    headers: googleHeaders(call),
    // models/{model}:countTokens (https://ai.google.dev/api/tokens). Its body is
    // `{contents}` or `{generateContentRequest}`, never the generate request's
    // own top-level fields: the whole request (systemInstruction, tools,
    // generationConfig) is counted only inside generateContentRequest, which
    // names its model as `models/{model}`.
    countBody: (model, body) => ({ generateContentRequest: { model: `models/${model.replace(/^models\//, '')}`, ...body } }),
  };
}

/** The prompt tokens of a chat request on a Gemini model at `site` (null: nothing to count). */
export async function geminiCountTokens(call: ProviderCall<CountRequest>, site: GeminiSite): Promise<number | null> {
  const chat = call.request.chat;
  if (!chat) return null;
  const { body } = toGemini(chat, { model: call.model, note: call.note });
  const model = chat.model.replace(/^models\//, '');
  try {
    const res = await upstreamJson<{ totalTokens?: unknown }>(call, { url: site.modelUrl(model, 'countTokens'), headers: site.headers, body: site.countBody(model, body), mapError: geminiError });
    return tokenCount(res.totalTokens ?? 0);
  } catch (err) {
    throw reclassify(err);
  }
}

async function generate(call: ProviderCall<ChatRequest>, site: GeminiSite, body: GenerateContentRequest): Promise<ChatOutcome> {
  const model = call.request.model;
  const url = site.modelUrl(model, call.stream ? 'streamGenerateContent?alt=sse' : 'generateContent');
  const headers = site.headers;
  try {
    if (call.stream) {
      const events = await upstreamEvents(call, { url, headers, body, mapError: geminiError });
      return { kind: 'stream', chunks: geminiChunks(events, { model, includeUsage: !!call.request.stream_options?.include_usage, reportUsage: call.reportUsage }) };
    }
    const res = await upstreamJson<GenerateContentResponse>(call, { url, headers, body, mapError: geminiError });
    return { kind: 'json', body: toCompletion(res, model, call.request.n ?? 1) };
  } catch (err) {
    throw reclassify(err);
  }
}

/** Google's answer when a cachedContent name is unknown: 403/404 "CachedContent not found (or permission denied)". */
function cacheGone(err: unknown): boolean {
  return err instanceof UpstreamError && (err.status === 403 || err.status === 404) && /cached ?content/i.test(err.error.message);
}

/** Chat completions on a Gemini model, at `site`; a `cache_control` prefix becomes a cached content there. */
export async function geminiChat(call: ProviderCall<ChatRequest>, site: GeminiSite): Promise<ChatOutcome> {
  const plan = toGemini(call.request, { model: call.model, note: call.note });
  if (!plan.cache) return generate(call, site, plan.body);

  const cache = await ensureCachedContent(call, site, { ...plan.cache.create, model: site.cacheModel(call.request.model) });
  if (!cache.name) {
    call.note({ param: 'cache_control', action: 'strip', reason: `the Gemini cached content could not be created (${cache.error}); the request was sent uncached` });
    return generate(call, site, plan.body);
  }
  for (const n of plan.cache.notes) call.note(n);
  try {
    return await generate(call, site, { ...plan.cache.body, cachedContent: cache.name });
  } catch (err) {
    if (!cacheGone(err)) throw err;
    // Deleted or expired early on Google's side: forget it and answer uncached.
    evictCachedContent(call, cache.key);
    call.note({ param: 'cache_control', action: 'strip', reason: `Gemini no longer knows ${cache.name}; the request was sent uncached` });
    return generate(call, site, plan.body);
  }
}

export default function google(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'google',
    families: { google: GOOGLE_FAMILY },
    // POST /v1/images/generations: Gemini image models and Imagen (images.ts).
    images: (call) => geminiImages(call, geminiApiSite(call)),
    chat: (call) => geminiChat(call, geminiApiSite(call)),
    countTokens: (call) => geminiCountTokens(call, geminiApiSite(call)),
  };
}
