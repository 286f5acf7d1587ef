// Vertex AI error bodies to the gateway envelope.
//
// Vertex answers in Google's shape ({"error":{"code","message","status"}},
// https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for its
// 429 RESOURCE_EXHAUSTED), mapped as the Gemini API's are (plugins/providers/google/errors.ts).
// Claude's rawPredict passes the model's own refusals through in Anthropic's
// shape ({"type":"error","error":{"type","message"}}), while Vertex's own
// (authentication, quota, unknown model) stay Google's: the mapper reads
// whichever came.
import type { ErrorMapper } from '../../../src/provider/errors.js';
import { geminiError } from '../google/errors.js';
import { anthropicError } from '../anthropic/errors.js';

function isGoogleShape(body: unknown): boolean {
  const e = (body as { error?: { code?: unknown; status?: unknown } } | undefined)?.error;
  return !!e && typeof e === 'object' && (typeof e.code === 'number' || typeof e.status === 'string');
}

export const claudeOnVertexError: ErrorMapper = (status, body, text) => (isGoogleShape(body) ? geminiError(status, body, text) : anthropicError(status, body, text));
