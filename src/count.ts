// Input-token counting for any ingress (POST /v1/responses/input_tokens, and
// the Messages API's count_tokens): the route slot's targets are tried as for
// a generation, and each target is counted by its provider plugin's
// `countTokens` (the provider's own counting endpoint) where it has one, or
// locally (src/tokens.ts) otherwise.
//
// A count is advice, not a generation: when the provider's counting endpoint
// fails for a reason that is not the caller's (5xx, 429, a connection error,
// an endpoint the provider does not have), the same target is counted locally
// rather than falling back to another model, whose count would answer a
// different question. A provider 400 is the caller's and goes back as it is.
import type { AttemptInfo, CountRequest, ProviderPlugin, RequestContext } from './plugin.js';
import type { ChatRequest } from './types.js';
import { runTargets, describeFailure, type CoreServices } from './dispatch.js';
import { errors } from './errors.js';
import { counterFor, countChatTokens, type Counter } from './tokens.js';

/** What an ingress gives for one target. */
export interface CountInput extends CountRequest {
  /**
   * The local count, for a request that is not (only) chat IR, e.g. a
   * Responses body with file parts. Defaults to counting `chat`.
   */
  local?: (count: Counter) => number;
}

export interface TokenCount {
  input_tokens: number;
  /** `provider`: the provider's counting endpoint; `local`: the gateway's tokenizer (exact) or estimate. */
  source: 'provider' | 'local';
}

/**
 * Count the input tokens of a request on the route slot's targets. `build`
 * maps the request for one target (it may throw a 400, as a translation does).
 * The pipeline's `prepareAttempt` runs on the chat IR (upstream.prepare), as
 * for a generation, so a plugin that adds to the prompt is counted too.
 */
export async function countInputTokens(
  ctx: RequestContext,
  core: CoreServices,
  build: (attempt: AttemptInfo, plugin: ProviderPlugin) => CountInput | Promise<CountInput>,
): Promise<TokenCount> {
  const serves = (p: ProviderPlugin) => typeof p.countTokens === 'function' || typeof p.chat === 'function' || typeof p.responses === 'function';
  const { value: result } = await runTargets<TokenCount>(ctx, core, serves, async (attempt, upstream) => {
    const plugin = upstream.plugin;
    const input = await build(attempt, plugin);
    const chat = input.chat ? (upstream.prepare(input.chat as unknown as Record<string, unknown>) as unknown as ChatRequest) : undefined;
    const local = async (): Promise<TokenCount> => {
      const count = await counterFor(plugin.families[attempt.provider.family]?.tokenizer);
      if (input.local) return { input_tokens: input.local(count), source: 'local' };
      if (!chat) throw errors.internal();
      return { input_tokens: countChatTokens(chat, count), source: 'local' };
    };
    if (!plugin.countTokens) return local();
    try {
      const n = await upstream.countTokens({ chat, responses: input.responses, messages: input.messages });
      return n == null ? local() : { input_tokens: n, source: 'provider' };
    } catch (err) {
      if (upstream.signal.aborted || !describeFailure(err).fallback) throw err;
      ctx.logger.warn({ request_id: ctx.id, provider: attempt.provider.name, error: describeFailure(err).error }, 'provider token count failed; counted locally');
      return local();
    }
  });
  ctx.log.token_count = result.source;
  return result;
}
