// The plugin contract: a custom plugin loads from a path in gateway.yaml and
// runs in the pipeline; the runner refuses bad plugins, missing dependencies
// and wrong order at start-up with coded errors.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startGateway, openAIConfig, CLIENT_KEY, until } from './helpers/gateway.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const examplePath = path.resolve(here, '../plugins/pipeline/example/max-tokens-cap.js');
const mock = await startOpenAIMock({ routes: { '/v1/responses': createResponsesMock().handler } });
t.teardown(() => mock.close());

const pipeline = (extra: string) => `
plugins:
  - name: auth
  - name: analytics
  - name: route
  - name: normalize
${extra}
  - name: debug
`;

t.test('a custom plugin from a path runs with its options', async (t) => {
  const gw = await startGateway(openAIConfig(mock.url, pipeline(`  - name: max-tokens-cap\n    path: ${examplePath}\n    options: { max: 50 }`)));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  mock.reset();
  const r: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 500, debug: ['normalizations'] } as any);
  t.equal(mock.requests[0].body.max_completion_tokens, 50);
  t.match(r.debug.normalizations, [{ param: 'max_completion_tokens', action: 'override', before: 500, after: 50 }]);
  const r2: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 20 } as any);
  t.equal(mock.requests[1].body.max_completion_tokens, 20, 'under the cap: untouched');
  t.ok(r2.id);
});

t.test('prepareAttempt runs on every request a provider plugin gets, whichever path the ingress takes', async (t) => {
  const gw = await startGateway(openAIConfig(mock.url, pipeline(`  - name: max-tokens-cap\n    path: ${examplePath}\n    options: { max: 50 }`)));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  mock.reset();
  // The Responses API to a family that serves it natively: the same-API body.
  const r: any = await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'x', max_output_tokens: 500, store: false, debug: ['normalizations'] } as any);
  t.equal(mock.requests[0].path, '/v1/responses');
  t.equal(mock.requests[0].body.max_output_tokens, 50, 'the same-API body was prepared');
  t.equal(mock.requests[0].body.model, 'gpt-4.1-mini', 'with the deployment model');
  t.match(r.debug.normalizations, [{ param: 'max_output_tokens', action: 'override', before: 500, after: 50 }]);
  // `stop` takes the chat path on the same target: the chat IR is prepared.
  await client.responses.create({ model: 'openai/gpt-4.1-mini', input: 'x', max_output_tokens: 500, store: false, stop: ['z'] } as any);
  t.equal(mock.requests[1].path, '/v1/chat/completions');
  t.equal(mock.requests[1].body.max_completion_tokens, 50, 'the translated chat request was prepared');
});

async function startFails(t: any, yaml: string, code: string, msg: RegExp) {
  const err: any = await startGateway(yaml).then(
    (gw) => gw.close().then(() => null),
    (e) => e,
  );
  t.ok(err, 'start-up refused');
  t.equal(err?.code, code);
  t.match(err?.message, msg);
}

function tmpModule(src: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-plugin-'));
  const file = path.join(dir, 'p.mjs');
  fs.writeFileSync(file, src);
  return file;
}

t.test('start-up checks', async (t) => {
  await startFails(t, openAIConfig(mock.url, pipeline(`  - name: max-tokens-cap\n    path: ${examplePath}`).replace('  - name: route\n', '')), 'PLUGIN_MISSING_DEPENDENCY', /needs "route"/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: debug\n  - name: auth\n  - name: route\n`), 'PLUGIN_ORDER', /must come before/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - name: nope\n`), 'PLUGIN_UNKNOWN', /no built-in plugin "nope"/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - name: auth\n  - name: route\n`), 'PLUGIN_DUPLICATE', /listed twice/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n`), 'PLUGIN_MISSING_ROUTE', /no "route" step/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - name: route\n  - name: route\n`), 'PLUGIN_DUPLICATE', /"route" is listed twice/);
  // `route` is the core's routing step: a module may not take its name.
  const fakeRoute = tmpModule("export default { name: 'route', async handle(ctx, next) { await next(); } };");
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: ${fakeRoute}\n`), 'PLUGIN_INVALID', /"route" is the gateway's routing step/);
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: /nonexistent/plugin.js\n  - name: route\n`), 'PLUGIN_LOAD_FAILED', /cannot load/);
  const notObj = tmpModule('export default 42;');
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: ${notObj}\n  - name: route\n`), 'PLUGIN_INVALID', /must be an object/);
  const noHandle = tmpModule("export default { name: 'x' };");
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: ${noHandle}\n  - name: route\n`), 'PLUGIN_INVALID', /needs `handle`, `beforeBody` or `prepareAttempt`/);
  const badHandle = tmpModule("export default { name: 'x', handle: 'no' };");
  await startFails(t, openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: ${badHandle}\n  - name: route\n`), 'PLUGIN_INVALID', /`handle` must be a function/);
});

t.test('plugins before the routing step see the raw body, plugins after it the validated body and the route slot', async (t) => {
  const seen: Record<string, unknown>[] = [];
  (globalThis as any).__routeProbe = seen;
  const probe = (name: string) =>
    tmpModule(`export default { name: '${name}', async handle(ctx, next) {
  globalThis.__routeProbe.push({ name: '${name}', route: ctx.state.route?.primary ?? null, temperature: ctx.body.temperature });
  await next();
} };`);
  const gw = await startGateway(openAIConfig(mock.url, `plugins:\n  - name: auth\n  - path: ${probe('before')}\n  - name: route\n  - path: ${probe('after')}\n`));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }], temperature: 0.5 });
  t.same(seen, [
    { name: 'before', route: null, temperature: 0.5 },
    { name: 'after', route: 'openai/gpt-4.1-mini', temperature: 0.5 },
  ]);
  seen.length = 0;
  // A body validation refuses reaches the plugins ahead of the step only.
  const e: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' } as any).catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'temperature');
  t.same(seen, [{ name: 'before', route: null, temperature: 'hot' }]);
});

t.test('a plugin can reject a request with the envelope', async (t) => {
  const file = tmpModule(`
import { errors } from ${JSON.stringify(path.resolve(here, '../src/errors.js'))};
export default { name: 'no-swearing', needs: ['route'], async handle(ctx, next) {
  if (JSON.stringify(ctx.body.messages).includes('darn')) throw errors.invalid('Please be polite.', 'messages', 'content_policy');
  await next();
} };`);
  const gw = await startGateway(openAIConfig(mock.url, pipeline(`  - path: ${file}`)));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  const e: any = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'darn it' }] }).catch((e) => e);
  t.equal(e.status, 400);
  t.equal(e.error.code, 'content_policy');
  const ok = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hello' }] });
  t.ok(ok.id);
});

t.test('a plugin that throws unexpectedly gives a 500 without a stack trace', async (t) => {
  const file = tmpModule(`export default { name: 'buggy', async handle() { throw new TypeError('secret internals at /srv/x.js:10'); } };`);
  const gw = await startGateway(openAIConfig(mock.url, pipeline(`  - path: ${file}`)));
  t.teardown(() => gw.close());
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }),
  });
  t.equal(res.status, 500);
  const text = await res.text();
  t.equal(JSON.parse(text).error.type, 'internal_server_error');
  t.notMatch(text, /secret internals|\.js:\d+/);
});

t.test('a plugin that logs the request headers still leaks no key', async (t) => {
  const file = tmpModule(`export default { name: 'nosy', async handle(ctx, next) { ctx.log.headers = ctx.headers; ctx.logger.info({ req: { headers: ctx.headers } }, 'nosy'); await next(); } };`);
  const gw = await startGateway(openAIConfig(mock.url, pipeline(`  - path: ${file}`)));
  t.teardown(() => gw.close());
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0 });
  await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'x' }] }, { headers: { 'x-api-key': 'sk-other-secret-123456' } });
  // The access-log line (with the plugin's ctx.log.headers) is written on response close.
  await until(() => gw.logs.some((l) => l.headers && l.request_id));
  const all = gw.rawLogs.join('');
  t.match(all, /"authorization":"\[redacted\]"/, 'the header is there, redacted');
  t.notOk(all.includes(CLIENT_KEY), 'no client key');
  t.notOk(all.includes('sk-other-secret'), 'no x-api-key');
});
