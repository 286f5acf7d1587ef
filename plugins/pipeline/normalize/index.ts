// normalize: per attempt, fit the request to the target model's rules and
// record each change (debug.normalizations). Reasoning models (OpenAI o-series
// and gpt-5, or any catalog model with capabilities.reasoning) accept only the
// default temperature and reject sampling knobs and `max_tokens`
// (OpenAI answers 400 "Unsupported parameter: 'max_tokens' ... Use 'max_completion_tokens'").
// `extra.normalize: false` turns it off: the provider's own error comes back.
import type { PipelinePlugin, RequestContext, AttemptInfo } from '../../../src/plugin.js';
import type { NormalizationEntry } from '../../../src/types.js';

const STRIP_ON_REASONING = ['top_p', 'frequency_penalty', 'presence_penalty', 'logprobs', 'top_logprobs', 'logit_bias'] as const;

export function normalizeChat(body: Record<string, unknown>, attempt: AttemptInfo): { body: Record<string, unknown>; notes: NormalizationEntry[] } {
  const caps = attempt.target.model.capabilities;
  const notes: NormalizationEntry[] = [];
  if (!caps.reasoning && !caps.thinking && body.reasoning_effort == null) return { body, notes };
  const out = { ...body };
  const model = attempt.target.model.id;
  if (caps.reasoning) {
    if (out.temperature != null && out.temperature !== 1) {
      notes.push({ param: 'temperature', action: 'override', before: out.temperature, after: 1, reason: `${model} is a reasoning model and only supports temperature 1` });
      out.temperature = 1;
    }
    for (const f of STRIP_ON_REASONING) {
      if (out[f] != null) {
        notes.push({ param: f, action: 'strip', before: out[f], reason: `${model} is a reasoning model and does not support ${f}` });
        delete out[f];
      }
    }
    if (out.max_tokens != null) {
      if (out.max_completion_tokens == null) {
        notes.push({ param: 'max_tokens', action: 'rename', before: 'max_tokens', after: 'max_completion_tokens', reason: `${model} is a reasoning model and requires max_completion_tokens` });
        out.max_completion_tokens = out.max_tokens;
      } else {
        notes.push({ param: 'max_tokens', action: 'strip', before: out.max_tokens, reason: 'max_completion_tokens is also set' });
      }
      delete out.max_tokens;
    }
    if (caps.no_stop && out.stop != null) {
      notes.push({ param: 'stop', action: 'strip', before: out.stop, reason: `${model} does not support stop sequences` });
      delete out.stop;
    }
  } else if (!caps.thinking && out.reasoning_effort != null) {
    notes.push({ param: 'reasoning_effort', action: 'strip', before: out.reasoning_effort, reason: `${model} is not a reasoning model` });
    delete out.reasoning_effort;
  }
  return { body: out, notes };
}

export default function normalize(): PipelinePlugin {
  return {
    name: 'normalize',
    needs: ['route'],
    prepareAttempt<T extends Record<string, unknown>>(ctx: RequestContext, attempt: AttemptInfo, request: T): T {
      if ((ctx.body.extra as { normalize?: boolean } | undefined)?.normalize === false) return request;
      if (ctx.endpoint !== 'chat_completions' && !('messages' in request)) return request;
      const { body, notes } = normalizeChat(request, attempt);
      ctx.debug.normalizations.push(...notes);
      return body as T;
    },
  };
}
