// debug: when the client asks (`debug: [...]`, `extra.debug: [...]` or
// `extra.debug: true`), attach a top-level `debug` object with the asked
// categories to the final result (JSON body, or last chunk / final response of
// a stream). Shapes per docs/routing.md ("Debug").
import type { PipelinePlugin, DebugCategory, RouteSlot } from '../../../src/plugin.js';

const ALL: DebugCategory[] = ['normalizations', 'deprecations', 'routing'];

export function requestedCategories(body: Record<string, unknown>): DebugCategory[] {
  const out = new Set<DebugCategory>();
  for (const d of [body.debug, (body.extra as { debug?: unknown } | undefined)?.debug]) {
    if (d === true) ALL.forEach((c) => out.add(c));
    else if (Array.isArray(d)) d.forEach((c) => out.add(c as DebugCategory));
  }
  return [...out];
}

export default function debug(): PipelinePlugin {
  return {
    name: 'debug',
    needs: ['route'],
    async handle(ctx, next) {
      const cats = requestedCategories(ctx.body);
      ctx.state.debug = { categories: cats };
      if (cats.length) {
        ctx.finalizers.push((final) => {
          const out: Record<string, unknown> = {};
          if (cats.includes('normalizations')) out.normalizations = ctx.debug.normalizations;
          if (cats.includes('deprecations')) out.deprecations = ctx.debug.deprecations;
          if (cats.includes('routing')) {
            const route = ctx.state.route as RouteSlot | undefined;
            out.routing = { requested: route?.requested, targets: route?.targets.map((t) => t.model.id) ?? [], attempts: ctx.attempts };
          }
          final.debug = out;
        });
      }
      await next();
    },
  };
}
