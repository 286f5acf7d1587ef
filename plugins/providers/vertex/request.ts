// Vertex AI URLs and the Claude body as Vertex wants it. The request mapping
// itself is the Gemini one (plugins/providers/google) for Google's models and the
// Anthropic one (plugins/providers/anthropic) for Claude: only where the request goes
// and a few body fields differ.
//
// References:
// - https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/projects.locations.publishers.models/generateContent
//   POST https://{location}-aiplatform.googleapis.com/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent
//   (the `global` location on https://aiplatform.googleapis.com);
// - https://cloud.google.com/vertex-ai/generative-ai/docs/context-cache/context-cache-create:
//   cachedContents under projects/{p}/locations/{l}, the cache's model the
//   full resource name projects/{p}/locations/{l}/publishers/google/models/{m};
// - https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude:
//   publishers/anthropic/models/{m}:rawPredict and :streamRawPredict, the
//   Messages body without `model` and with anthropic_version "vertex-2023-10-16",
//   model ids with an @ version (claude-sonnet-4-5@20250929).
import type { MessagesRequest } from '../anthropic/wire.js';
import type { NormalizationEntry } from '../../../src/types.js';
import { modelPath, type GeminiSite } from '../google/index.js';

export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

/** The host of a location: regional, or the global endpoint. */
export function locationBaseUrl(location: string): string {
  return location === 'global' ? 'https://aiplatform.googleapis.com' : `https://${location}-aiplatform.googleapis.com`;
}

/** `{base}/v1`; a base URL that already ends in a version (…/v1, …/v1beta1) is used as is. */
export function apiRoot(baseUrl: string): string {
  const b = baseUrl.replace(/\/+$/, '');
  return /\/v1(beta1)?$/.test(b) ? b : `${b}/v1`;
}

/** Where one project's models live in one location. */
export interface VertexPlace {
  base: string;
  project: string;
  location: string;
}

/** `projects/{p}/locations/{l}` (the parent of models and cached contents). */
export function parent(p: VertexPlace): string {
  return `projects/${encodeURIComponent(p.project)}/locations/${encodeURIComponent(p.location)}`;
}

/** Claude on Vertex: Anthropic's publisher. Everything else (Gemini, Imagen) is Google's. */
export function isClaude(model: string): boolean {
  return /^claude-/.test(model);
}

/** Google's models on Vertex, for the shared Gemini mapping; the token is added by the authorize step. */
export function geminiSite(p: VertexPlace): GeminiSite {
  const root = `${apiRoot(p.base)}/${parent(p)}`;
  return {
    modelUrl: (model, method) => `${root}/publishers/google/models/${modelPath(model)}:${method}`,
    cachesUrl: `${root}/cachedContents`,
    cacheModel: (model) => `projects/${p.project}/locations/${p.location}/publishers/google/models/${model.replace(/^models\//, '')}`,
    headers: {},
    // Vertex's CountTokensRequest takes the prompt's own fields at the top
    // level (contents, systemInstruction, tools, generationConfig), not the
    // Gemini API's generateContentRequest wrapper (REST reference,
    // projects.locations.publishers.models/countTokens).
    countBody: (_model, body) => {
      const out: Record<string, unknown> = {};
      for (const k of ['contents', 'systemInstruction', 'tools', 'generationConfig'] as const) if (body[k] !== undefined) out[k] = body[k];
      return out;
    },
  };
}

/** A Claude model id as a path segment: `@` kept (an RFC 3986 path character), anything else reserved escaped. */
function claudePath(model: string): string {
  return encodeURIComponent(model).replace(/%40/g, '@');
}

export function claudeUrl(p: VertexPlace, model: string, stream: boolean): string {
  return `${apiRoot(p.base)}/${parent(p)}/publishers/anthropic/models/${claudePath(model)}:${stream ? 'streamRawPredict' : 'rawPredict'}`;
}

/**
 * Claude's token count on Vertex: the count-tokens model's rawPredict, whose
 * body keeps `model` (the Vertex id) beside anthropic_version (the route
 * @anthropic-ai/vertex-sdk takes for messages.countTokens).
 */
export function claudeCountUrl(p: VertexPlace): string {
  return `${apiRoot(p.base)}/${parent(p)}/publishers/anthropic/models/count-tokens:rawPredict`;
}

export function toCountRawPredict(body: Record<string, unknown>): Record<string, unknown> {
  return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...body };
}

/** The Messages body for rawPredict: the model is in the URL, the version in the body (pure). */
export function toRawPredict(body: MessagesRequest): Record<string, unknown> {
  const { model: _model, ...rest } = body;
  return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest };
}

/**
 * The anthropic-beta flags Vertex AI serves for Claude. Vertex refuses any
 * other with a 400 ("Unexpected value(s) `x` for the `anthropic-beta`
 * header"), and clients made for Anthropic's API (Claude Code) send flags
 * Vertex does not have yet (anthropics/claude-code#1229, #12429, #21625):
 * those are not sent, with a note. An operator who needs another flag sets
 * the header in the provider's `headers`, which wins.
 */
export const VERTEX_CLAUDE_BETAS: ReadonlySet<string> = new Set([
  'interleaved-thinking-2025-05-14',
  'context-1m-2025-08-07',
  'web-search-2025-03-05',
  'token-efficient-tools-2025-02-19',
  'output-128k-2025-02-19',
  'fine-grained-tool-streaming-2025-05-14',
]);

/** The client's flags Vertex serves (undefined for none), noting the others. */
export function vertexBetas(beta: string | undefined, note: (e: NormalizationEntry) => void): string | undefined {
  if (!beta) return beta;
  const flags = beta.split(',').map((f) => f.trim()).filter(Boolean);
  const kept = flags.filter((f) => VERTEX_CLAUDE_BETAS.has(f));
  if (kept.length === flags.length) return beta;
  note({ param: 'anthropic-beta', action: 'strip', before: flags.filter((f) => !kept.includes(f)).join(','), reason: 'Vertex AI refuses anthropic-beta flags it does not serve' });
  return kept.length ? kept.join(',') : undefined;
}
