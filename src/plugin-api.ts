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

export type {
  ErrorMapper,
  OutgoingRequest,
  Authorizer,
  Framing,
  FrameParser,
  UpstreamCallOptions,
  EventMapper,
  BatchSource,
  JsonEvent,
} from './provider.js';
export {
  upstreamJson,
  upstreamEvents,
  upstreamRequest,
  UpstreamError,
  MappedEvents,
  jsonEvents,
  parseEventJson,
  parseRetryAfter,
  unparseable,
  joinUrl,
  envelopeError,
  statusType,
  sseFraming,
  ndjsonFraming,
  NdjsonParser,
  RESPONSES_TERMINAL,
} from './provider.js';
/** @deprecated envelopeError's earlier name, kept for plugins written against 0.1.0. */
export { envelopeError as openAIStyleError } from './provider.js';

export type { SSEEvent } from './sse.js';
export { SSEParser } from './sse.js';
export type { Transport, UpstreamRequest, UpstreamResponse } from './upstream.js';
export { TransportError, readBody } from './upstream.js';
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
