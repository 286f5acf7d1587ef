// POST /v1/chat/completions: validate into the IR, run the fallback loop over
// provider plugins' `chat`, and return OpenAI-shaped results and streams.
import type { RequestContext, ProviderPlugin } from '../plugin.js';
import type { ChatRequest, ChatChunk, ChatCompletion } from '../types.js';
import { runTargets, primeStream, type CoreServices } from '../dispatch.js';
import type { Served } from '../attempt.js';
import type { EndpointSpec } from '../server.js';
import { validate } from '../validate.js';
import { ChatBody } from './chat-schema.js';
import { createHash } from 'node:crypto';
import { sseFrame } from '../sse.js';
import { MappedFrames } from '../respond.js';
import { TextChunkFrames } from './text-frames.js';
import { withoutExtensions, runFinalizers, midStreamError } from './common.js';
import { fromChatUsage, type UsageMeter } from '../usage.js';
import { sourceOf, type JsonSource } from '../json-source.js';

export function validateChat(raw: unknown, ctx: RequestContext): Record<string, unknown> {
  const body = validate(ChatBody, raw) as Record<string, unknown>;
  if (body.max_tokens != null) ctx.debug.deprecations.push({ param: 'max_tokens', message: "'max_tokens' is deprecated: use 'max_completion_tokens'." });
  return body;
}

type Committed = { kind: 'json'; body: ChatCompletion } | { kind: 'stream'; chunks: AsyncGenerator<ChatChunk> };

const servesChat = (p: ProviderPlugin) => typeof p.chat === 'function';

/**
 * Run the chat IR through the targets. `source`: the client's bytes the
 * request was parsed from (a provider that sends the request on unchanged
 * sends those bytes: src/json-source.ts).
 */
function dispatchChat(ctx: RequestContext, core: CoreServices, request: ChatRequest, source: JsonSource | undefined): Promise<Served<Committed>> {
  const stream = !!request.stream;
  return runTargets<Committed>(ctx, core, servesChat, async (attempt, upstream) => {
    const out = await upstream.chat(request, stream, source);
    if (out.kind === 'stream') return { kind: 'stream', chunks: await primeStream(out.chunks, attempt.provider.timeout_ms) };
    return out;
  });
}

export async function chatTerminal(ctx: RequestContext, core: CoreServices): Promise<void> {
  const request = withoutExtensions(ctx.body) as unknown as ChatRequest;
  const served = await dispatchChat(ctx, core, request, sourceOf(ctx.body));
  const result = served.value;
  const model = served.target.model.id;
  const backend = backendFields(served);
  const decorate = (final: Record<string, unknown>) => {
    final.extra = { ...(final.extra as object | undefined), routing: { attempts: ctx.attempts } };
    runFinalizers(ctx, final);
  };
  if (result.kind === 'json') {
    if (result.body.usage) ctx.meter.done(fromChatUsage(result.body.usage));
    const body = result.body as unknown as Record<string, unknown>;
    body.model = model;
    fillBackend(body, backend);
    decorate(body);
    ctx.outcome = { kind: 'json', body };
    return;
  }
  ctx.outcome = {
    kind: 'frames',
    frames: chatFrames(result.chunks, model, backend, decorate, ctx.meter, !!request.stream_options?.include_usage),
    onError: (err) => sseFrame(JSON.stringify({ error: midStreamError(err) })),
    provider: served.provider,
  };
}

/**
 * Chunks to frames, mapped by the writer as they arrive. Content chunks go out
 * as they come; the tail chunks (finish_reason, usage) are held back one step
 * so that the very last one can carry `extra.routing` and `debug` before
 * `[DONE]`. The stream's usage goes to the meter; a client that did not ask
 * for it (`stream_options.include_usage`) gets neither the usage chunk nor a
 * `usage` field (the gateway asked the provider for it: withStreamUsage).
 */
function chatFrames(
  chunks: AsyncIterable<ChatChunk>,
  model: string,
  backend: Backend,
  decorate: (c: Record<string, unknown>) => void,
  meter: UsageMeter,
  clientWantsUsage: boolean,
): MappedFrames<ChatChunk> {
  let held: ChatChunk | undefined;
  let template: ChatChunk | undefined;
  const frames = new TextChunkFrames();
  const frame = (chunk: ChatChunk): string => {
    if (chunk.usage !== undefined) {
      if (chunk.usage) meter.done(fromChatUsage(chunk.usage));
      if (!clientWantsUsage) {
        delete chunk.usage;
        if (chunk.choices.length === 0) return '';
      }
    }
    chunk.model = model;
    fillBackend(chunk as unknown as Record<string, unknown>, backend);
    template ??= chunk;
    const isTail = chunk.choices.length === 0 || chunk.choices.some((c) => c.finish_reason);
    const before = held ? sseFrame(JSON.stringify(held)) : '';
    held = isTail ? chunk : undefined;
    return isTail ? before : before + frames.frame(chunk);
  };
  const end = (): string => {
    const last: ChatChunk = held ?? {
      id: template?.id ?? 'chatcmpl-gateway',
      object: 'chat.completion.chunk',
      created: template?.created ?? Math.floor(Date.now() / 1000),
      model,
      system_fingerprint: backend.system_fingerprint,
      service_tier: backend.service_tier,
      choices: [],
    };
    decorate(last as unknown as Record<string, unknown>);
    return sseFrame(JSON.stringify(last)) + 'data: [DONE]\n\n';
  };
  return new MappedFrames(chunks, frame, end);
}

interface Backend {
  system_fingerprint: string;
  service_tier: string;
}

/**
 * Spec 2.3 types `system_fingerprint` and `service_tier` as strings. Providers
 * that report them (OpenAI) are passed through; for the others the gateway
 * gives a fingerprint of the backend that served (provider + upstream model)
 * and the default tier.
 */
const fingerprints = new Map<string, string>();
function backendFields(s: Served<unknown>): Backend {
  const served = `${s.provider.name}|${s.target.model.id}|${s.deployment.model}`;
  let fp = fingerprints.get(served);
  if (fp === undefined) {
    fp = 'fp_' + createHash('sha256').update(served).digest('hex').slice(0, 10);
    if (fingerprints.size >= 10_000) fingerprints.clear(); // served combinations come from the config: a bound, not an eviction policy
    fingerprints.set(served, fp);
  }
  return { system_fingerprint: fp, service_tier: 'default' };
}

function fillBackend(o: Record<string, unknown>, b: Backend): void {
  if (typeof o.system_fingerprint !== 'string' || !o.system_fingerprint) o.system_fingerprint = b.system_fingerprint;
  if (typeof o.service_tier !== 'string' || !o.service_tier) o.service_tier = b.service_tier;
}

export const chatEndpoint: EndpointSpec = {
  endpoint: 'chat_completions',
  method: 'POST',
  path: '/v1/chat/completions',
  validate: validateChat,
  terminal: chatTerminal,
  releaseOnStream: ['messages', 'tools', 'functions', 'prediction', 'response_format'],
};
