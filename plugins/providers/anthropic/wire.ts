// Anthropic Messages API wire types (POST /v1/messages, anthropic-version
// 2023-06-01), limited to what this plugin sends and reads.
// Reference: https://docs.anthropic.com/en/api/messages.

export interface CacheControl {
  type: 'ephemeral';
  ttl?: '5m' | '1h';
}

export interface TextBlock {
  type: 'text';
  text: string;
  cache_control?: CacheControl;
  citations?: unknown[];
}

export type ImageSource = { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };

export interface ImageBlock {
  type: 'image';
  source: ImageSource;
  cache_control?: CacheControl;
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
  cache_control?: CacheControl;
}

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string | TextBlock[];
  is_error?: boolean;
  cache_control?: CacheControl;
}

export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

/** Server-tool blocks (web search) come back in responses; the chat mapping skips them. */
export interface ServerToolBlock {
  type: 'server_tool_use' | 'web_search_tool_result';
  [field: string]: unknown;
}

export type RequestBlock = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock;
export type ResponseBlock = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock | ServerToolBlock;

export interface Message {
  role: 'user' | 'assistant';
  content: RequestBlock[];
}

export interface CustomTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
  cache_control?: CacheControl;
}

/** Anthropic's hosted web search (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool). */
export interface WebSearchTool {
  type: 'web_search_20250305';
  name: 'web_search';
  max_uses?: number;
  allowed_domains?: string[];
  blocked_domains?: string[];
  user_location?: Record<string, unknown>;
  cache_control?: CacheControl;
}

export type Tool = CustomTool | WebSearchTool;

export type ToolChoice =
  | { type: 'auto'; disable_parallel_tool_use?: boolean }
  | { type: 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' };

export type Thinking = { type: 'enabled'; budget_tokens: number } | { type: 'disabled' } | { type: string; [k: string]: unknown };

export interface MessagesRequest {
  model: string;
  max_tokens: number;
  messages: Message[];
  system?: TextBlock[];
  tools?: Tool[];
  tool_choice?: ToolChoice;
  stop_sequences?: string[];
  temperature?: number;
  top_p?: number;
  thinking?: Thinking;
  metadata?: { user_id: string };
  stream?: boolean;
  [nativeField: string]: unknown;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal' | 'model_context_window_exceeded';

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number } | null;
  output_tokens_details?: { thinking_tokens?: number } | null;
  server_tool_use?: { web_search_requests?: number } | null;
  service_tier?: string | null;
  [k: string]: unknown;
}

export interface MessagesResponse {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ResponseBlock[];
  stop_reason: StopReason | null;
  stop_sequence?: string | null;
  usage: Usage;
}

export interface ErrorBody {
  type: 'error';
  error: { type: string; message: string };
  request_id?: string;
}

/** Stream events, keyed on the JSON `type` (which always equals the SSE `event:` name). */
export type StreamEvent =
  | { type: 'message_start'; message: MessagesResponse }
  | { type: 'content_block_start'; index: number; content_block: ResponseBlock }
  | { type: 'content_block_delta'; index: number; delta: BlockDelta }
  | { type: 'content_block_stop'; index: number }
  | { type: 'message_delta'; delta: { stop_reason: StopReason | null; stop_sequence?: string | null }; usage?: Usage }
  | { type: 'message_stop' }
  | { type: 'ping' }
  | { type: 'error'; error: { type: string; message: string } };

export type BlockDelta =
  | { type: 'text_delta'; text: string }
  | { type: 'input_json_delta'; partial_json: string }
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'signature_delta'; signature: string }
  | { type: 'citations_delta'; citation: unknown };
