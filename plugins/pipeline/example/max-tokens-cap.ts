// An example custom plugin (see docs/plugins.md): caps the output tokens a
// request may ask for, per gateway.yaml options, and reports what it did.
//
//   plugins:
//     - name: auth
//     - name: analytics
//     - name: route
//     - name: normalize
//     - name: max-tokens-cap
//       path: ./dist/plugins/pipeline/example/max-tokens-cap.js
//       options: { max: 1024 }
//     - name: debug
//
// It shows the three parts of the contract: `handle` (middleware, owns the
// `max-tokens-cap` slot), `needs` (reads the route slot, so it must come after
// `route`), and `prepareAttempt` (a pure per-target rewrite, run again for each
// fallback target).
import type { PipelinePlugin, RouteSlot } from '../../../src/plugin.js';

export interface CapSlot {
  max: number;
  capped: boolean;
}

export default function maxTokensCap(options: { max?: unknown } = {}): PipelinePlugin {
  const max = Number(options.max ?? 4096);
  if (!Number.isInteger(max) || max < 1) throw new Error('max-tokens-cap: options.max must be a positive integer');
  return {
    name: 'max-tokens-cap',
    needs: ['route'],
    async handle(ctx, next) {
      const slot: CapSlot = { max, capped: false };
      ctx.state['max-tokens-cap'] = slot;
      await next();
      if (slot.capped) ctx.log.max_tokens_capped = max;
      void (ctx.state.route as RouteSlot | undefined);
    },
    prepareAttempt(ctx, _attempt, request) {
      const field = 'max_completion_tokens' in request ? 'max_completion_tokens' : 'max_output_tokens' in request ? 'max_output_tokens' : 'max_completion_tokens';
      const asked = request[field] as number | undefined;
      if (asked !== undefined && asked <= max) return request;
      (ctx.state['max-tokens-cap'] as CapSlot).capped = true;
      ctx.debug.normalizations.push({ param: field, action: asked === undefined ? 'add' : 'override', before: asked, after: max, reason: `capped by the max-tokens-cap plugin (max ${max})` });
      return { ...request, [field]: max };
    },
  };
}
