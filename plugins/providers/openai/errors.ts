// OpenAI error bodies -> the gateway envelope. OpenAI answers
// {"error":{"message","type","param","code"}}
// (https://platform.openai.com/docs/guides/error-codes), the envelope the
// gateway answers with itself, so the answer maps as it is (envelopeError;
// most OpenAI-compatible servers and Azure answer the same way). A stream
// that fails after its 200 sends the same object as a chunk's `error`.
import { UpstreamError, envelopeError, statusType, type ErrorMapper } from '../../../src/provider/errors.js';
import type { OpenAIErrorObject } from './wire.js';

export const openAIError: ErrorMapper = envelopeError;

/** A chunk's `error` (the stream already answered 200) as an UpstreamError: a server fault. */
export function streamError(e: OpenAIErrorObject): UpstreamError {
  return new UpstreamError(500, { message: e.message ?? 'upstream stream error', type: e.type ?? statusType(500), param: null, code: e.code ?? null });
}
