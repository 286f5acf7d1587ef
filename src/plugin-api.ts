// The published plugin API: `import { … } from 'model-gateway/plugin'`
// (package.json `exports`, with type declarations). A plugin written outside
// this repository imports only from here; what is not exported here is not
// part of the contract and may change. docs/plugins.md is the guide.
export type {
  Plugin,
  PipelinePlugin,
  PluginInitApi,
  ProviderPlugin,
  ProviderCall,
  ChatOutcome,
  NativeOutcome,
  CountRequest,
  RequestContext,
  AttemptInfo,
  Target,
  RouteSlot,
  Outcome,
  ReplicaStore,
} from './plugin.js';
export { slot } from './plugin.js';

export type { FamilyDefaults, ProviderBlock, GatewayConfig, ClientKey } from './config/load.js';
export type { ProviderConfig, ModelConfig, DeploymentConfig, Endpoint } from './config/schema.js';

export type { ErrorMapper } from './provider/errors.js';
export type { OutgoingRequest, Authorizer, UpstreamCallOptions } from './provider/http.js';
export type { Framing, FrameParser } from './stream/framing.js';
export type { EventMapper, JsonEvent } from './stream/mapped.js';
export type { BatchSource } from './stream/batches.js';
export { upstreamJson, upstreamEvents, upstreamRequest, parseRetryAfter, joinUrl } from './provider/http.js';
export { UpstreamError, unparseable, envelopeError, statusType } from './provider/errors.js';
export { MappedEvents, jsonEvents, parseEventJson } from './stream/mapped.js';
export { sseFraming, ndjsonFraming, NdjsonParser } from './stream/framing.js';
export { RESPONSES_TERMINAL } from './api/responses-stream.js';
/** @deprecated envelopeError's earlier name, kept for plugins written against 0.1.0. */
export { envelopeError as openAIStyleError } from './provider/errors.js';

export type { SSEEvent } from './sse.js';
export { SSEParser } from './sse.js';
export type { Transport, UpstreamRequest, UpstreamResponse } from './upstream/transport.js';
export { TransportError } from './upstream/errors.js';
export { readBody } from './upstream/body.js';
export type { ErrorBody, ErrorType } from './errors.js';
export { GatewayError, errors, clip } from './errors.js';
export type {
  ChatRequest,
  ChatMessage,
  ChatCompletion,
  ChatChoice,
  ChatChunk,
  ChunkDelta,
  ChatUsage,
  ContentPart,
  TextPart,
  ImagePart,
  ToolCall,
  FunctionTool,
  ToolChoice,
  ResponseFormat,
  FinishReason,
  NormalizationEntry,
  DeprecationEntry,
  RoutingAttempt,
} from './types.js';
export { emptyUsage } from './types.js';
