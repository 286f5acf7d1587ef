// `model-gateway start` keeps V8's compiled code of its modules on disk and
// loads it at the next start (src/compile-cache.ts). What it saves in time is
// the benchmark's to say (start-up, BENCHMARKS.md); here: that the code is
// written, read back and used by a gateway that then serves, that the switch
// turns it off, and that a directory it cannot use changes nothing.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { CLIENT_KEY, until } from './helpers/gateway.js';
import { startGatewayProcess, type GatewayProcess } from './helpers/process.js';
import { PACKAGE_COMPILE_CACHE } from '../src/compile-cache.js';

const files = (dir: string): string[] => (fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name)) : []);

async function serves(t: Test, g: GatewayProcess): Promise<void> {
  const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: g.baseURL, maxRetries: 0 });
  const r = await client.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(r.model, 'openai/gpt-4.1-mini', 'and answers through the OpenAI SDK');
  t.ok(r.choices[0].message.content, 'with the upstream answer');
}

t.test('compile cache', async (t) => {
  const oai = await startOpenAIMock();
  t.teardown(() => oai.close());
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-compile-cache-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const yaml = `server: { workers: 1 }
storage: { usage: { enabled: false } }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: ${OPENAI_KEY} }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`;
  const start = (env: Record<string, string>) => startGatewayProcess(t, yaml, { GATEWAY_API_KEYS: CLIENT_KEY, ...env });

  t.test('a start writes its compiled modules where NODE_COMPILE_CACHE says; the next start loads them', async (t) => {
    const dir = path.join(tmp, 'cache');
    const first = await start({ NODE_COMPILE_CACHE: dir, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
    // Written once the gateway is ready (not only at exit: a killed process keeps what it wrote).
    await until(() => /module\.flushCompileCache\(\) finished/.test(first.stderr()), 10_000);
    const written = files(dir).length;
    first.stop();
    t.ok(written >= 50, `the first start wrote the code of ${written} modules`);

    const second = await start({ NODE_COMPILE_CACHE: dir, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
    const accepted = second.stderr().split('\n').filter((l) => / for ESM .* was accepted/.test(l));
    t.ok(
      accepted.some((l) => l.includes('/dist/src/server.js')),
      "the second start loaded the server's compiled code from it",
    );
    t.ok(accepted.length >= 50, `and ${accepted.length} modules in all`);
    t.notMatch(second.stderr(), /was rejected/, 'none of it refused as stale');
    await serves(t, second);
  });

  t.test('NODE_DISABLE_COMPILE_CACHE turns it off', async (t) => {
    const dir = path.join(tmp, 'off');
    const g = await start({ NODE_COMPILE_CACHE: dir, NODE_DISABLE_COMPILE_CACHE: '1' });
    await serves(t, g);
    t.same(files(dir), [], 'nothing written');
  });

  t.test('a directory it cannot write to changes nothing', async (t) => {
    const blocker = path.join(tmp, 'a-file');
    fs.writeFileSync(blocker, 'not a directory');
    const g = await start({ NODE_COMPILE_CACHE: path.join(blocker, 'cache') });
    await serves(t, g);
    t.equal(fs.readFileSync(blocker, 'utf8'), 'not a directory', 'the file in the way is left alone');
  });

  t.test("without NODE_COMPILE_CACHE: the package's own node_modules/.cache, not the system's temporary directory", async (t) => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
    t.equal(PACKAGE_COMPILE_CACHE, path.join(root, 'node_modules', '.cache', 'model-gateway'), "in the gateway's package");
    t.not(PACKAGE_COMPILE_CACHE, path.join(os.tmpdir(), 'node-compile-cache'), "not Node's default in the shared temporary directory");
    const saved = process.env.NODE_COMPILE_CACHE;
    delete process.env.NODE_COMPILE_CACHE;
    t.teardown(() => {
      if (saved !== undefined) process.env.NODE_COMPILE_CACHE = saved;
    });
    const g = await start({ NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
    await until(() => /module\.flushCompileCache\(\) finished/.test(g.stderr()), 10_000);
    t.ok(g.stderr().includes(`resolved path ${PACKAGE_COMPILE_CACHE} + `), 'the directory the gateway chose');
    t.ok(files(PACKAGE_COMPILE_CACHE).length >= 50, 'with the compiled modules in it');
    await serves(t, g);
  });
});
