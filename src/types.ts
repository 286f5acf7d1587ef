// The internal representation (IR) between ingress APIs and providers.
// It is the OpenAI Chat Completions shape: the chat ingress validates into it,
// the Responses ingress translates into it, and every provider maps from it and
// back to it. An OpenAI target therefore needs no translation (same-API path).

export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface TextPart {
  type: 'text';
  text: string;
  cache_control?: CacheControl;
}
export interface ImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: 'auto' | 'low' | 'high' | 'original' };
  cache_control?: CacheControl;
}
export type ContentPart = TextPart | ImagePart;

export interface CacheControl {
  type: 'ephemeral';
  ttl?: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** Provider-signed reasoning, returned to clients and restored on the next turn. */
export interface ReasoningDetail {
  type: string; // 'thinking' | 'redacted_thinking' | 'thought_signature' | provider-specific
  [field: string]: unknown;
}

export interface ChatMessage {
  role: Role;
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
  reasoning_details?: ReasoningDetail[];
  cache_control?: CacheControl;
  refusal?: string | null;
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
  cache_control?: CacheControl;
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean; description?: string } };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean; [k: string]: unknown };
  frequency_penalty?: number;
  presence_penalty?: number;
  stop?: string | string[];
  seed?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  tools?: FunctionTool[];
  tool_choice?: ToolChoice;
  response_format?: ResponseFormat;
  reasoning_effort?: string;
  user?: string;
  n?: number;
  parallel_tool_calls?: boolean;
  service_tier?: string;
  store?: boolean;
  metadata?: Record<string, string>;
  logit_bias?: Record<string, number>;
  /** Gateway extension: provider-specific fields under the provider's own names. */
  native_fields?: Record<string, unknown>;
  /** Gateway extension: hosted web search (from the Responses `web_search_preview` tool). */
  web_search?: { enabled: true; options?: Record<string, unknown> };
  /** Gateway extension: reasoning summary mode (from Responses `reasoning.summary`). */
  reasoning_summary?: string;
}

/**
 * Chat usage. `prompt_tokens` counts every input token (cache reads and
 * writes included). Beyond OpenAI's fields, a provider reports cache writes as
 * `prompt_tokens_details.cache_write_tokens` and its own web searches as
 * `server_tool_use.web_search_requests` (both only when not 0).
 */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; [k: string]: number };
  completion_tokens_details: { reasoning_tokens: number; [k: string]: number };
  server_tool_use?: { web_search_requests: number };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface LogprobContent {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs?: { token: string; logprob: number; bytes: number[] | null }[];
}

export interface ChatChoice {
  index: number;
  message: ChatMessage & { role: 'assistant'; content: string | null };
  finish_reason: FinishReason | null;
  logprobs: { content: LogprobContent[] | null; refusal: LogprobContent[] | null } | null;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  system_fingerprint?: string | null;
  service_tier?: string | null;
  choices: ChatChoice[];
  usage?: ChatUsage;
  [vendor: string]: unknown;
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string | null;
  refusal?: string | null;
  reasoning_content?: string;
  reasoning_details?: ReasoningDetail[];
  tool_calls?: { index: number; id?: string; type?: 'function'; function?: { name?: string; arguments?: string } }[];
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint?: string | null;
  service_tier?: string | null;
  choices: { index: number; delta: ChunkDelta; finish_reason: FinishReason | null; logprobs?: unknown }[];
  usage?: ChatUsage | null;
  [vendor: string]: unknown;
}

export interface RoutingAttempt {
  provider: string;
  region: string;
  /** `skipped`: not tried (its provider has no credentials); `error` says why. */
  status: 'succeeded' | 'failed' | 'skipped';
  model: string;
  latency_ms: number;
  error?: string;
}

export interface NormalizationEntry {
  param: string;
  action: 'strip' | 'override' | 'add' | 'rename';
  before?: unknown;
  after?: unknown;
  reason: string;
}

export interface DeprecationEntry {
  param: string;
  message: string;
}

export function emptyUsage(): ChatUsage {
  return {
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}
