// Gemini (Generative Language API v1beta) wire types, limited to what the
// gateway sends and reads. Field names are the API's camelCase JSON names
// (https://ai.google.dev/api/generate-content, https://ai.google.dev/api/caching).

export type GeminiRole = 'user' | 'model';

export interface GeminiFunctionCall {
  name: string;
  args?: Record<string, unknown>;
  id?: string;
}

export interface GeminiFunctionResponse {
  name: string;
  response: Record<string, unknown>;
  id?: string;
}

/** One part: exactly one data field (text, inlineData, fileData, functionCall, functionResponse...). */
export interface GeminiPart {
  text?: string;
  /** A thought summary part (with thinkingConfig.includeThoughts). */
  thought?: boolean;
  /** Opaque, base64; must be sent back on the same part in later turns. */
  thoughtSignature?: string;
  inlineData?: { mimeType: string; data: string };
  fileData?: { mimeType?: string; fileUri: string };
  functionCall?: GeminiFunctionCall;
  functionResponse?: GeminiFunctionResponse;
  executableCode?: { language?: string; code?: string };
  codeExecutionResult?: { outcome?: string; output?: string };
}

export interface GeminiContent {
  role?: GeminiRole;
  parts?: GeminiPart[];
}

export interface GeminiFunctionDeclaration {
  name: string;
  description?: string;
  /** JSON Schema passed as is (the gateway's choice over the OpenAPI-subset `parameters`). */
  parametersJsonSchema?: Record<string, unknown>;
}

export interface GeminiTool {
  functionDeclarations?: GeminiFunctionDeclaration[];
  googleSearch?: Record<string, unknown>;
}

export interface GeminiToolConfig {
  functionCallingConfig: { mode: 'AUTO' | 'ANY' | 'NONE' | 'VALIDATED'; allowedFunctionNames?: string[] };
}

export interface GeminiThinkingConfig {
  thinkingBudget?: number;
  thinkingLevel?: 'minimal' | 'low' | 'medium' | 'high';
  includeThoughts?: boolean;
}

export interface GeminiGenerationConfig {
  temperature?: number;
  topP?: number;
  topK?: number;
  maxOutputTokens?: number;
  stopSequences?: string[];
  candidateCount?: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseMimeType?: string;
  responseJsonSchema?: Record<string, unknown>;
  responseLogprobs?: boolean;
  logprobs?: number;
  thinkingConfig?: GeminiThinkingConfig;
  /** native_fields land here under the name the client used (snake_case or camelCase). */
  [native: string]: unknown;
}

export interface GenerateContentRequest {
  contents: GeminiContent[];
  systemInstruction?: GeminiContent;
  tools?: GeminiTool[];
  toolConfig?: GeminiToolConfig;
  generationConfig?: GeminiGenerationConfig;
  cachedContent?: string;
  /** native_fields (safetySettings, labels...) land here under the name the client used. */
  [native: string]: unknown;
}

/** POST /v1beta/cachedContents body. */
export interface CachedContentCreate {
  model: string;
  contents?: GeminiContent[];
  systemInstruction?: GeminiContent;
  tools?: GeminiTool[];
  toolConfig?: GeminiToolConfig;
  ttl: string;
}

export interface CachedContent {
  name: string;
  model?: string;
  expireTime?: string;
  usageMetadata?: { totalTokenCount?: number };
}

export interface GeminiLogprobCandidate {
  token?: string;
  tokenId?: number;
  logProbability?: number;
}

export interface GeminiLogprobsResult {
  topCandidates?: { candidates?: GeminiLogprobCandidate[] }[];
  chosenCandidates?: GeminiLogprobCandidate[];
}

export interface GeminiCandidate {
  content?: GeminiContent;
  /** Grounding with Google Search: the queries the model ran (https://ai.google.dev/api/generate-content#GroundingMetadata). */
  groundingMetadata?: { webSearchQueries?: string[] };
  finishReason?: string;
  finishMessage?: string;
  index?: number;
  safetyRatings?: unknown[];
  logprobsResult?: GeminiLogprobsResult;
  avgLogprobs?: number;
}

export interface GeminiUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  totalTokenCount?: number;
  thoughtsTokenCount?: number;
  cachedContentTokenCount?: number;
  toolUsePromptTokenCount?: number;
}

export interface GenerateContentResponse {
  candidates?: GeminiCandidate[];
  promptFeedback?: { blockReason?: string; blockReasonMessage?: string; safetyRatings?: unknown[] };
  usageMetadata?: GeminiUsage;
  modelVersion?: string;
  responseId?: string;
}

/** Google's error body: {error:{code, message, status, details}}. */
export interface GeminiErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    details?: ({ '@type'?: string; reason?: string; retryDelay?: string } & Record<string, unknown>)[];
  };
}
