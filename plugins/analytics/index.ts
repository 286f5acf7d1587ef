// analytics: x-gateway-user-id / x-gateway-session-id go into the request's
// log record together with its token usage. They are never forwarded upstream:
// provider plugins build upstream headers from scratch.
import type { PipelinePlugin } from '../../src/plugin.js';
import { errors } from '../../src/errors.js';

export interface AnalyticsSlot {
  userId?: string;
  sessionId?: string;
}

const MAX = 256;

function header(v: string | string[] | undefined, name: string): string | undefined {
  if (v === undefined) return undefined;
  const s = Array.isArray(v) ? v[0] : v;
  if (s.length > MAX) throw errors.invalid(`Header '${name}' must be at most ${MAX} characters.`, name, 'invalid_header');
  return s;
}

export default function analytics(): PipelinePlugin {
  return {
    name: 'analytics',
    async handle(ctx, next) {
      const slot: AnalyticsSlot = {
        userId: header(ctx.headers['x-gateway-user-id'], 'x-gateway-user-id'),
        sessionId: header(ctx.headers['x-gateway-session-id'], 'x-gateway-session-id'),
      };
      ctx.state.analytics = slot;
      if (slot.userId) ctx.log.user_id = slot.userId;
      if (slot.sessionId) ctx.log.session_id = slot.sessionId;
      // The usage record: whatever the final result reports.
      ctx.finalizers.push((final) => {
        const u = (final.usage ?? (final.response as { usage?: unknown } | undefined)?.usage) as Record<string, number> | undefined;
        if (u) ctx.log.usage = { input: u.prompt_tokens ?? u.input_tokens, output: u.completion_tokens ?? u.output_tokens, total: u.total_tokens };
      });
      await next();
    },
  };
}
