// POST /v1/messages and POST /v1/messages/count_tokens: the Anthropic
// Messages API as a second front door (https://docs.anthropic.com/en/api/messages),
// for Claude Code, the Claude Agent SDK and @anthropic-ai/sdk applications.
//
// Per attempt of the fallback chain the target decides the path:
// - a provider plugin with a `messages` hook that takes this target (Claude
//   on Anthropic's API or on Vertex AI) gets the same-API body: model
//   patched, gateway-only fields removed, the client's `anthropic-beta`
//   passed on; its answer and events come back with `model` patched;
// - any other target gets the request translated to the chat IR
//   (messages-map.ts) and run through the plugin's `chat`, and the result
//   and stream mapped back (messages-map.ts, messages-stream.ts).
// Errors on these routes use Anthropic's shape
// ({"type":"error","error":{"type","message"}}), also as a mid-stream `error` event.
import type { RequestContext, ProviderPlugin, RouteSlot } from '../plugin.js';
import type { ChatChunk, ChatCompletion, ChatRequest } from '../types.js';
import type { EndpointSpec } from '../server.js';
import { runTargets, primeStream, type CoreServices } from '../dispatch.js';
import { validate } from '../validate.js';
import { GatewayError, providerSecrets, scrubSecrets } from '../errors.js';
import type { JsonEvent } from '../stream/mapped.js';
import { countInputTokens } from '../count.js';
import { countChatTokens } from '../tokens.js';
import { runFinalizers, midStreamError } from './common.js';
import { fromChatUsage, fromMessagesUsage } from '../usage.js';
import { MessagesBody, MessagesCountBody } from './messages-schema.js';
import { nativeBody, toChatRequest, fromChatCompletion, type MessagesRequest, type MessagesUsage } from './messages-map.js';
import { ChatToMessageEvents, NativeMessageEvents, messageFrames, type MessageStreamHooks } from './messages-stream.js';

/** Gateway error type -> Anthropic error type (https://docs.anthropic.com/en/api/errors). */
const ERROR_TYPES: Record<string, string> = {
  invalid_request_error: 'invalid_request_error',
  authentication_error: 'authentication_error',
  permission_denied_error: 'permission_error',
  not_found_error: 'not_found_error',
  request_timeout_error: 'timeout_error',
  rate_limit_error: 'rate_limit_error',
  api_error: 'api_error',
  internal_server_error: 'api_error',
  service_unavailable_error: 'overloaded_error',
};

export function anthropicErrorType(type: string, status: number): string {
  if (status === 413) return 'request_too_large';
  if (status === 529) return 'overloaded_error';
  return ERROR_TYPES[type] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

/** The error body of these routes: Anthropic's shape, with the request id as Anthropic gives it. */
export function messagesErrorBody(err: GatewayError, requestId: string): Record<string, unknown> {
  return { type: 'error', error: { type: anthropicErrorType(err.type, err.status), message: err.message }, request_id: requestId };
}

/** A failure after the stream started, as the `error` event's body. */
function streamErrorBody(err: unknown, secrets?: string[]): { type: string; message: string } {
  const e = midStreamError(err, secrets);
  const status = (err as { status?: number })?.status ?? 500;
  return { type: anthropicErrorType(e.type, status), message: e.message };
}

/** The client's beta flags, passed on to targets that serve the Messages API (and to no other). */
function betaHeader(ctx: RequestContext): string | undefined {
  const h = ctx.headers['anthropic-beta'];
  return Array.isArray(h) ? h.join(',') : h || undefined;
}

/** The id the client asked for: a Messages result names it, as Anthropic's does. */
function requestedModel(ctx: RequestContext): string {
  return (ctx.state.route as RouteSlot | undefined)?.requested ?? String(ctx.body.model);
}

type Result =
  | { kind: 'native-json'; body: Record<string, unknown> }
  | { kind: 'native-stream'; events: AsyncGenerator<JsonEvent> }
  | { kind: 'chat-json'; body: ChatCompletion; family: string }
  | { kind: 'chat-stream'; chunks: AsyncGenerator<ChatChunk>; family: string };

async function createMessage(ctx: RequestContext, core: CoreServices): Promise<void> {
  const body = ctx.body as MessagesRequest;
  const stream = !!body.stream;
  const beta = betaHeader(ctx);
  const served = await runTargets<Result>(ctx, core, (p: ProviderPlugin) => typeof p.messages === 'function' || typeof p.chat === 'function', async (attempt, upstream) => {
    const { plugin } = upstream;
    if (plugin.messages) {
      const out = await upstream.messages({ body: nativeBody(body, attempt.deployment.model, upstream.note), beta }, stream);
      if (out?.kind === 'stream') return { kind: 'native-stream', events: await primeStream(out.events, attempt.provider.timeout_ms) };
      if (out) return { kind: 'native-json', body: out.body };
    }
    if (!plugin.chat) throw new GatewayError(503, 'service_unavailable_error', `The ${attempt.provider.family} family serves no Messages requests for ${attempt.target.model.id}.`, { code: 'no_target_available' });
    const family = attempt.provider.family;
    const { request, notes } = toChatRequest(body, { family, stream, upstreamModel: attempt.deployment.model, maxOutput: attempt.target.model.max_output_tokens });
    notes.forEach(upstream.note);
    const out = await upstream.chat(request, stream);
    if (out.kind === 'stream') return { kind: 'chat-stream', chunks: await primeStream(out.chunks, attempt.provider.timeout_ms), family };
    return { kind: 'chat-json', body: out.body, family };
  });
  const result = served.value;

  const model = requestedModel(ctx);
  if (result.kind === 'native-json' || result.kind === 'chat-json') {
    const msg: Record<string, unknown> = result.kind === 'chat-json' ? fromChatCompletion(result.body, model, result.family) : result.body;
    if (result.kind === 'chat-json') {
      if (result.body.usage) ctx.meter.done(fromChatUsage(result.body.usage));
    } else if (msg.usage) ctx.meter.done(fromMessagesUsage(msg.usage as Record<string, unknown>));
    msg.model = model;
    runFinalizers(ctx, msg);
    ctx.outcome = { kind: 'json', body: msg };
    return;
  }
  const hooks = streamHooks(ctx, providerSecrets(served.provider));
  const events = result.kind === 'native-stream' ? new NativeMessageEvents(result.events, model, hooks) : new ChatToMessageEvents(result.chunks, { model, family: result.family }, hooks);
  ctx.outcome = {
    kind: 'frames',
    frames: messageFrames(events),
    onError: errorEvent,
    provider: served.provider,
  };
}

/**
 * A stream's failure as an `error` event. Not a closure made in createMessage:
 * it would share that scope's context, which holds the request body (the
 * attempt callback reads it), and keep it reachable for the life of the stream.
 */
function errorEvent(err: unknown): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', error: streamErrorBody(err) })}\n\n`;
}

/** Built outside createMessage's scope, so that a long stream does not keep the request reachable. */
function streamHooks(ctx: RequestContext, secrets: string[]): MessageStreamHooks {
  const meter = ctx.meter;
  return {
    progress: (usage) => meter.seen(fromMessagesUsage(usage as unknown as Record<string, unknown>)),
    chatUsage: (usage) => meter.done(fromChatUsage(usage)),
    finish(usage: MessagesUsage) {
      // A translated stream's chat usage (chatUsage) is the more detailed one.
      if (!meter.final) meter.done(fromMessagesUsage(usage as unknown as Record<string, unknown>));
      const final: Record<string, unknown> = { usage };
      runFinalizers(ctx, final);
      return final.debug === undefined ? undefined : { debug: final.debug };
    },
    // The provider's own error text, without its credentials (the core scrubs only the frames it writes).
    errorBody: (err) => streamErrorBody(err, secrets),
    redact: (message) => scrubSecrets(message, secrets),
  };
}

/** The prompt fields POST /v1/messages/count_tokens takes (https://docs.anthropic.com/en/api/messages-count-tokens). */
const COUNT_FIELDS = ['model', 'messages', 'system', 'tools', 'tool_choice', 'thinking', 'mcp_servers'] as const;

/**
 * POST /v1/messages/count_tokens: for every model. A target that serves the
 * Messages API counts the body as it is (Anthropic's endpoint, Vertex's
 * count-tokens model); others count the chat IR they would get (Gemini's
 * :countTokens, or locally with the tools and the system prompt).
 */
async function countTokens(ctx: RequestContext, core: CoreServices): Promise<void> {
  const body = ctx.body as MessagesRequest;
  const { input_tokens } = await countInputTokens(ctx, core, (attempt, plugin) => {
    const family = attempt.provider.family;
    const messages = plugin.messages ? nativeBody(body, attempt.deployment.model, () => {}, COUNT_FIELDS) : undefined;
    let chat: ChatRequest | undefined;
    try {
      chat = { ...toChatRequest(body, { family, stream: false, upstreamModel: attempt.deployment.model }).request, model: attempt.deployment.model };
    } catch (err) {
      // A block only Claude reads (a PDF, a Files API image): fine where the Messages body is counted as it is.
      if (!messages) throw err;
    }
    return { messages, chat, local: chat ? undefined : (count) => countChatTokens({ model: body.model, messages: [{ role: 'user', content: JSON.stringify(messages) }] }, count) };
  });
  const out: Record<string, unknown> = { input_tokens };
  runFinalizers(ctx, out);
  ctx.outcome = { kind: 'json', body: out };
}

export function messagesEndpoints(): EndpointSpec[] {
  return [
    {
      endpoint: 'messages',
      method: 'POST',
      path: '/v1/messages',
      validate: (raw) => validate(MessagesBody, raw) as Record<string, unknown>,
      terminal: createMessage,
      errorBody: messagesErrorBody,
      releaseOnStream: ['messages', 'system', 'tools'],
    },
    {
      endpoint: 'messages',
      method: 'POST',
      path: '/v1/messages/count_tokens',
      validate: (raw) => validate(MessagesCountBody, raw) as Record<string, unknown>,
      terminal: countTokens,
      errorBody: messagesErrorBody,
      metered: false,
    },
  ];
}
