// model-gateway start | check [file] | schema
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfigFile, ConfigError, type GatewayConfig } from './config/load.js';
import { createGateway, type EndpointSpec } from './server.js';
import { PluginError, type BuiltinRegistry } from './pipeline.js';
import { builtins } from '../plugins/index.js';
import { extraEndpoints } from './api/index.js';

const USAGE = `usage: model-gateway <command>
  start            serve the gateway (PORT, GATEWAY_CONFIG, GATEWAY_API_KEYS, <FAMILY>_API_KEY/_BASE_URL)
  check [file]     validate a gateway.yaml (default: $GATEWAY_CONFIG or ./gateway.yaml); exit 1 listing every problem
  schema           print the JSON Schema of gateway.yaml`;

export function familiesOf(registry: BuiltinRegistry) {
  return Object.assign({}, ...registry.providers.map((p) => p.families));
}

export function loadFor(registry: BuiltinRegistry, file: string): GatewayConfig {
  return loadConfigFile(file, { families: familiesOf(registry) });
}

export async function main(argv: string[]): Promise<void> {
  const [cmd, arg] = argv;
  const registry = builtins();
  const file = path.resolve(arg ?? process.env.GATEWAY_CONFIG ?? './gateway.yaml');
  if (cmd === 'check') {
    try {
      const cfg = loadFor(registry, file);
      // Load the pipeline too: a bad plugin path or order is a config problem.
      const { loadPipeline } = await import('./pipeline.js');
      const { createLogger } = await import('./log.js');
      await loadPipeline(cfg, registry, createLogger('silent'));
      process.stdout.write(`${file}: OK (${cfg.providers.size} providers, ${cfg.models.size} models, ${cfg.keys.length} keys)\n`);
    } catch (err) {
      if (err instanceof ConfigError || err instanceof PluginError) {
        process.stderr.write(err.message + '\n');
        process.exitCode = 1;
        return;
      }
      throw err;
    }
    return;
  }
  if (cmd === 'schema') {
    const { configJsonSchema } = await import('./config/json-schema.js');
    process.stdout.write(JSON.stringify(configJsonSchema(), null, 2) + '\n');
    return;
  }
  if (cmd === 'start') {
    await start(registry, file);
    return;
  }
  process.stderr.write(USAGE + '\n');
  process.exitCode = cmd === undefined || cmd === '--help' || cmd === 'help' ? 0 : 2;
}

async function start(registry: BuiltinRegistry, file: string): Promise<void> {
  let config: GatewayConfig;
  try {
    config = loadFor(registry, file);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(1);
    }
    throw err;
  }
  const { runServer } = await import('./run.js');
  await runServer(config, registry, extraEndpoints());
}

export type { EndpointSpec };

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`model-gateway: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
