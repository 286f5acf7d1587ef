// Amazon Bedrock Converse API wire types (POST /model/{modelId}/converse and
// /converse-stream, API version 2023-09-30), limited to what this plugin sends
// and reads. The JSON members are the Smithy shapes' own names (camelCase);
// unions are objects with exactly one member set; blobs travel as base64.
// References: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
// .../API_runtime_ConverseStream.html and the shapes of
// @aws-sdk/client-bedrock-runtime (models_0.d.ts).

export type CacheTtl = '5m' | '1h';

export interface CachePoint {
  cachePoint: { type: 'default'; ttl?: CacheTtl };
}

export type ImageFormat = 'png' | 'jpeg' | 'gif' | 'webp';

export interface ImageBlock {
  format: ImageFormat;
  source: { bytes: string } | { s3Location: { uri: string; bucketOwner?: string } };
}

export interface ReasoningText {
  text: string;
  signature?: string;
}

/** One of reasoningText or redactedContent (base64). */
export type ReasoningContent = { reasoningText: ReasoningText } | { redactedContent: string };

export interface ToolUse {
  toolUseId: string;
  name: string;
  input: unknown;
}

export type ToolResultContent = { text: string } | { json: unknown } | { image: ImageBlock };

export interface ToolResult {
  toolUseId: string;
  content: ToolResultContent[];
  status?: 'success' | 'error';
}

/** A content block: a union, exactly one member. */
export type ContentBlock =
  | { text: string }
  | { image: ImageBlock }
  | { toolUse: ToolUse }
  | { toolResult: ToolResult }
  | { reasoningContent: ReasoningContent }
  | CachePoint;

export type SystemBlock = { text: string } | CachePoint;

export interface Message {
  role: 'user' | 'assistant';
  content: ContentBlock[];
}

export interface InferenceConfig {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stopSequences?: string[];
}

export interface ToolSpec {
  name: string;
  description?: string;
  inputSchema: { json: Record<string, unknown> };
  strict?: boolean;
}

export type Tool = { toolSpec: ToolSpec } | CachePoint;

export type ToolChoice = { auto: Record<string, never> } | { any: Record<string, never> } | { tool: { name: string } };

export interface ToolConfig {
  tools: Tool[];
  toolChoice?: ToolChoice;
}

/** Structured output (https://docs.aws.amazon.com/bedrock/latest/userguide/structured-output.html): the schema is a JSON string. */
export interface OutputConfig {
  textFormat: { type: 'json_schema'; structure: { jsonSchema: { schema: string; name?: string; description?: string } } };
}

export interface ConverseRequest {
  messages: Message[];
  system?: SystemBlock[];
  inferenceConfig?: InferenceConfig;
  toolConfig?: ToolConfig;
  additionalModelRequestFields?: Record<string, unknown>;
  additionalModelResponseFieldPaths?: string[];
  outputConfig?: OutputConfig;
  requestMetadata?: Record<string, string>;
  serviceTier?: { type: 'default' | 'flex' | 'priority' | 'reserved' };
  guardrailConfig?: Record<string, unknown>;
  performanceConfig?: { latency: 'standard' | 'optimized' };
  promptVariables?: Record<string, unknown>;
}

/** The top-level Converse members a client may set through native_fields (the rest go to the model). */
export const REQUEST_MEMBERS = ['guardrailConfig', 'performanceConfig', 'serviceTier', 'requestMetadata', 'additionalModelResponseFieldPaths', 'promptVariables'] as const;

export type StopReason =
  | 'end_turn'
  | 'tool_use'
  | 'max_tokens'
  | 'stop_sequence'
  | 'guardrail_intervened'
  | 'content_filtered'
  | 'malformed_model_output'
  | 'malformed_tool_use'
  | 'model_context_window_exceeded';

export interface TokenUsage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
  cacheDetails?: { ttl: CacheTtl; inputTokens: number }[];
}

export interface ConverseResponse {
  output: { message?: Message };
  stopReason: StopReason | string;
  usage?: TokenUsage;
  metrics?: { latencyMs: number };
  additionalModelResponseFields?: unknown;
  trace?: unknown;
}

/** restJson1 error body; `__type` or the x-amzn-errortype header names the shape. */
export interface ErrorBody {
  message?: string;
  Message?: string;
  __type?: string;
}

// ConverseStream: each AWS event-stream frame has `:event-type` (an event
// below) or, for `:message-type: exception`, `:exception-type`; the payload is
// the member's JSON. Bedrock adds a padding member `p` to every event
// (ignored here).

export interface MessageStartEvent {
  role: 'assistant';
}

export interface ContentBlockStartEvent {
  contentBlockIndex: number;
  start: { toolUse?: { toolUseId: string; name: string } } & Record<string, unknown>;
}

export interface ContentBlockDeltaEvent {
  contentBlockIndex: number;
  delta: {
    text?: string;
    toolUse?: { input: string };
    reasoningContent?: { text?: string; signature?: string; redactedContent?: string };
  } & Record<string, unknown>;
}

export interface ContentBlockStopEvent {
  contentBlockIndex: number;
}

export interface MessageStopEvent {
  stopReason: StopReason | string;
  additionalModelResponseFields?: unknown;
}

export interface MetadataEvent {
  usage?: TokenUsage;
  metrics?: { latencyMs: number };
  trace?: unknown;
}

/** The stream's exceptions (`:exception-type`), with the HTTP status Smithy gives each shape. */
export const STREAM_EXCEPTIONS: Record<string, number> = {
  internalServerException: 500,
  modelStreamErrorException: 424,
  validationException: 400,
  throttlingException: 429,
  serviceUnavailableException: 503,
};
