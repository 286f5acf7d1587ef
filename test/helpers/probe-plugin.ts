// A pipeline plugin loaded by path in test/reload.test.ts: it records when
// each instance is initialised and closed, and tags the access-log line of the
// requests it handles with its `tag` option, so a test can see which
// instance (which config) served a request.
import type { PipelinePlugin } from 'model-gateway/plugin';

/** init/close of every instance, in order (shared with the test, which imports this module from the same file). */
export const events: string[] = [];

export default function probe(options: { tag?: string } = {}): PipelinePlugin {
  const tag = options.tag ?? 'untagged';
  return {
    name: 'probe',
    init() {
      events.push(`init ${tag}`);
    },
    async handle(ctx, next) {
      ctx.log.probe = tag;
      await next();
    },
    close() {
      events.push(`close ${tag}`);
    },
  };
}
