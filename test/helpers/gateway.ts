// Starts a real gateway on port 0 for a test, from YAML text (as an operator
// writes it), with its log lines captured for assertions.
import { Writable } from 'node:stream';
import pino from 'pino';
import { createGateway, type Gateway } from '../../src/server.js';
import { builtins } from '../../plugins/index.js';
import { extraEndpoints } from '../../src/api/index.js';
import { loadGatewayConfig, type BuiltinRegistry } from '../../src/pipeline.js';
import { REDACT_PATHS } from '../../src/log.js';
import { reloadGateway, type ReloadOutcome } from '../../src/reload.js';
import type { RequestRecord } from '../../src/usage.js';

export const CLIENT_KEY = 'gw-test-client-key-abcdef123456';

export interface TestGateway {
  url: string;
  baseURL: string;
  gw: Gateway;
  /** The registry the gateway started with (plugins loaded by path included): what a reload starts from. */
  registry: BuiltinRegistry;
  logs: Record<string, any>[];  
  rawLogs: string[];
  /** Reload the gateway from new YAML text (same file, same environment), as SIGHUP does. */
  reload(yaml: string): Promise<ReloadOutcome>;
  /** Every request record, as the usage sinks receive it when the response closes. */
  records: RequestRecord[];
  close(): Promise<void>;
}

/**
 * `file`: where the config is taken to live (paths in it are relative to its
 * folder); the text is `yaml`. `opts.usageStore`: keep the usage store on (off
 * otherwise, so that tests write no usage database unless they are about it).
 */
export async function startGateway(yaml: string, env: Record<string, string> = {}, file = 'test-gateway.yaml', opts: { usageStore?: boolean } = {}): Promise<TestGateway> {
  // The plugin modules the config names by path are loaded first, as `start` does.
  const fullEnv = { GATEWAY_API_KEYS: CLIENT_KEY, ...env };
  const { config, registry } = await loadGatewayConfig(file, builtins(), { text: yaml, env: fullEnv });
  // The usage store writes files: only the tests about it turn it on (usageStore).
  if (!opts.usageStore) config.storage.usage.enabled = false;
  // GATEWAY_TEST_TRANSPORT=http|proxy runs every test gateway on another upstream transport.
  const tr = process.env.GATEWAY_TEST_TRANSPORT;
  if (tr === 'http' || tr === 'proxy' || tr === 'undici') config.server.transport = tr;
  const rawLogs: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      const line = chunk.toString();
      rawLogs.push(line);
      try {
        logs.push(JSON.parse(line));
      } catch {
        /* partial line */
      }
      cb();
    },
  });
  const logger = pino({ level: 'info', base: undefined, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
  const records: RequestRecord[] = [];
  const gw = await createGateway({ config, registry, logger, endpoints: extraEndpoints(), recordSinks: [(r) => records.push(r)] });
  const addr = await gw.listen(0, '127.0.0.1');
  const url = `http://127.0.0.1:${addr.port}`;
  // (A GATEWAY_TEST_TRANSPORT above is kept: server.transport needs a restart.)
  const reload = (text: string) => reloadGateway(gw, registry, file, { text, env: fullEnv, trigger: 'test' });
  return { url, baseURL: `${url}/v1`, gw, registry, logs, rawLogs, reload, records, close: () => gw.close(1000) };
}

/** Read a client stream until `after` items arrived, then abort it (the client leaves mid-stream); returns the items read. */
export async function readThenAbort(stream: AsyncIterable<unknown>, ac: AbortController, after: number): Promise<number> {
  let n = 0;
  try {
    for await (const _ of stream) if (++n === after) ac.abort();
  } catch {
    /* the client's own abort error */
  }
  return n;
}

/** Wait until a predicate holds (for log lines written on response close). */
export async function until(pred: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** until() for a predicate that must ask something (a server, a database). */
export async function untilAsync(pred: () => Promise<boolean>, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A minimal gateway.yaml around one OpenAI mock. `extra` adds top-level
 * sections; `providers` / `models` add list items (YAML text, 2-space indent).
 */
export function openAIConfig(baseUrl: string, extra = '', more: { providers?: string; models?: string } = {}): string {
  return `
providers:${more.providers ?? ''}
  - name: openai
    family: openai
    base_url: ${baseUrl}/v1
    api_key: sk-test-openai-0123456789
    region: us-east
    timeout_ms: 2000
    retries: 0
routing:
  max_retry_wait_ms: 200
models:
  - id: openai/gpt-4.1-mini
    endpoints: [chat_completions, responses]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: openai/gpt-5-mini
    endpoints: [chat_completions, responses]
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
  - id: openai/gpt-4o-mini
    status: deprecated
    deployments: [{ provider: openai, model: gpt-4o-mini }]
  - id: openai/old-model
    status: retired
    deployments: [{ provider: openai, model: gpt-4o-mini }]
  - id: openai/gpt-image-1
    endpoints: [images_generations]
    modalities: { input: [text], output: [image] }
    deployments: [{ provider: openai, model: gpt-image-1 }]
${more.models ?? ''}
${extra}`;
}
