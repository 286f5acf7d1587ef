// analytics: x-gateway-user-id / x-gateway-session-id go into the request's
// log line and its usage record (src/usage.ts; the core adds the usage and
// cost). They are never forwarded upstream: provider plugins build upstream
// headers from scratch.
import type { PipelinePlugin } from '../../../src/plugin.js';
import { errors } from '../../../src/errors.js';

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
      if (slot.userId) ctx.log.user_id = ctx.record.user = slot.userId;
      if (slot.sessionId) ctx.log.session_id = ctx.record.session = slot.sessionId;
      await next();
    },
  };
}
