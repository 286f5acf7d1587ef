// OpenAI's Chat Completions wire format is the gateway's internal
// representation (src/types.ts: ChatRequest, ChatCompletion, ChatChunk are
// its shapes, https://platform.openai.com/docs/api-reference/chat), so only
// what arrives beyond it is typed here: the error object (OpenAI's and the
// gateway's envelope) and the fields OpenAI-compatible servers add
// (docs/providers-openai.md).
import type { ChatChunk, ChatCompletion, ChunkDelta } from '../../../src/types.js';

/** The `error` of an error answer, or of a stream chunk a server fails mid-stream with. */
export interface OpenAIErrorObject {
  message?: string;
  type?: string;
  param?: string | null;
  code?: string | null;
}

/** A chunk as a server sends it: possibly an `error` instead of choices. */
export type WireChunk = ChatChunk & { error?: OpenAIErrorObject };

/** A delta as compatible servers send it: reasoning as `reasoning` (vLLM, Ollama, Groq) instead of `reasoning_content`. */
export type WireDelta = ChunkDelta & { reasoning?: string };

/** An answer's message as compatible servers send it (the same `reasoning` field). */
export type WireMessage = ChatCompletion['choices'][number]['message'] & { reasoning?: string };
