// POST /v1/chat/completions: validate into the IR, run the fallback loop over
// provider plugins' `chat`, and return OpenAI-shaped results and streams.
import type { RequestContext, ProviderPlugin, ChatOutcome } from '../plugin.js';
import type { ChatRequest, ChatChunk, ChatCompletion } from '../types.js';
import { runTargets, primeStream, type CoreServices } from '../dispatch.js';
import type { LoadedPipeline } from '../pipeline.js';
import { validate } from '../validate.js';
import { ChatBody } from './chat-schema.js';
import { sseFrame } from '../sse.js';
import { withoutExtensions, servedModel, runFinalizers, midStreamError } from './common.js';

export function validateChat(raw: unknown, ctx: RequestContext): Record<string, unknown> {
  const body = validate(ChatBody, raw) as Record<string, unknown>;
  if (body.max_tokens != null) ctx.debug.deprecations.push({ param: 'max_tokens', message: "'max_tokens' is deprecated: use 'max_completion_tokens'." });
  return body;
}

type Committed = { kind: 'json'; body: ChatCompletion } | { kind: 'stream'; chunks: AsyncGenerator<ChatChunk> };

/** Run the chat IR through the targets; shared by the chat and responses endpoints. */
export async function dispatchChat(ctx: RequestContext, core: CoreServices, pipeline: LoadedPipeline, request: ChatRequest): Promise<Committed> {
  const stream = !!request.stream;
  return runTargets<Committed>(ctx, core, (p: ProviderPlugin) => typeof p.chat === 'function', async (attempt, plugin, base) => {
    const prepared = pipeline.prepare(ctx, attempt, request as unknown as Record<string, unknown>) as unknown as ChatRequest;
    const out: ChatOutcome = await plugin.chat!({ ...base, request: { ...prepared, model: attempt.deployment.model }, stream });
    if (out.kind === 'stream') return { kind: 'stream', chunks: await primeStream(out.chunks, attempt.provider.timeout_ms, base.signal) };
    return out;
  });
}

export async function chatTerminal(ctx: RequestContext, core: CoreServices, pipeline: LoadedPipeline): Promise<void> {
  const request = withoutExtensions(ctx.body) as unknown as ChatRequest;
  const result = await dispatchChat(ctx, core, pipeline, request);
  const model = servedModel(ctx);
  const decorate = (final: Record<string, unknown>) => {
    final.extra = { ...(final.extra as object | undefined), routing: { attempts: ctx.attempts } };
    runFinalizers(ctx, final);
  };
  if (result.kind === 'json') {
    const body = result.body as unknown as Record<string, unknown>;
    body.model = model;
    decorate(body);
    ctx.outcome = { kind: 'json', body };
    return;
  }
  ctx.outcome = {
    kind: 'frames',
    frames: chatFrames(result.chunks, model, decorate),
    onError: (err) => sseFrame(JSON.stringify({ error: midStreamError(err) })),
  };
}

/**
 * Chunks to frames. Content chunks go out as they come; the tail chunks
 * (finish_reason, usage) are held back one step so that the very last one can
 * carry `extra.routing` and `debug` before `[DONE]`.
 */
async function* chatFrames(chunks: AsyncIterable<ChatChunk>, model: string, decorate: (c: Record<string, unknown>) => void): AsyncGenerator<string> {
  let held: ChatChunk | undefined;
  let template: ChatChunk | undefined;
  for await (const chunk of chunks) {
    chunk.model = model;
    template ??= chunk;
    const isTail = chunk.choices.length === 0 || chunk.choices.some((c) => c.finish_reason);
    if (held) {
      yield sseFrame(JSON.stringify(held));
      held = undefined;
    }
    if (isTail) held = chunk;
    else yield sseFrame(JSON.stringify(chunk));
  }
  const last: ChatChunk = held ?? {
    id: template?.id ?? 'chatcmpl-gateway',
    object: 'chat.completion.chunk',
    created: template?.created ?? Math.floor(Date.now() / 1000),
    model,
    choices: [],
  };
  decorate(last as unknown as Record<string, unknown>);
  yield sseFrame(JSON.stringify(last));
  yield 'data: [DONE]\n\n';
}
