// model-gateway start | check [file] | schema
import path from 'node:path';
import { pathToFileURL } from 'node:url';
// Only the flag helpers are loaded up front: `start` holds V8's optimising
// compilers off before anything else runs (node-flags.ts, STARTUP_V8_FLAGS),
// and may re-execute itself with its Node flags before it loads the rest of
// the gateway (the config loader, the plugins, the server), so that the
// process it replaces has loaded as little as possible.
import type { GatewayConfig, FamilyDefaults } from './config/load.js';
import { applyStartFlags, holdStartupV8Flags } from './node-flags.js';
import { enableCompileCache } from './compile-cache.js';
import type { EndpointSpec } from './server.js';
import type { BuiltinRegistry } from './pipeline.js';

const USAGE = `usage: model-gateway <command>
  start            serve the gateway (PORT, GATEWAY_CONFIG, GATEWAY_API_KEYS, <FAMILY>_API_KEY/_BASE_URL)
  check [file]     validate a gateway.yaml (default: $GATEWAY_CONFIG or ./gateway.yaml); exit 1 listing every problem
  schema           print the JSON Schema of gateway.yaml
  keys create|list|revoke   runtime client keys (model-gateway keys --help)`;

export function familiesOf(registry: BuiltinRegistry): Record<string, FamilyDefaults> {
  return Object.assign({}, ...registry.providers.map((p) => p.families));
}

/** Load a gateway.yaml and the plugin modules it names (their provider families are checked with the rest). */
export async function loadFor(registry: BuiltinRegistry, file: string): Promise<{ config: GatewayConfig; registry: BuiltinRegistry }> {
  const { loadGatewayConfig } = await import('./pipeline.js');
  return loadGatewayConfig(file, registry);
}

async function registry(): Promise<BuiltinRegistry> {
  const { builtins } = await import('../plugins/index.js');
  return builtins();
}

export async function main(argv: string[]): Promise<void> {
  const [cmd, arg] = argv;
  const file = path.resolve(arg ?? process.env.GATEWAY_CONFIG ?? './gateway.yaml');
  // Before the config loader (valibot, yaml and the schemas) is even evaluated.
  if (cmd === 'start') return start(file);
  const { ConfigError } = await import('./config/load.js');
  if (cmd === 'check') {
    const { loadPipeline, PluginError } = await import('./pipeline.js');
    try {
      const { config: cfg, registry: reg } = await loadFor(await registry(), file);
      // Load the pipeline too: a bad plugin path or order is a config problem.
      const { createLogger } = await import('./log.js');
      const pipeline = await loadPipeline(cfg, reg, createLogger('silent'));
      await pipeline.close();
      process.stdout.write(`${file}: OK (${cfg.providers.size} providers, ${cfg.models.size} models, ${cfg.keys.length} keys)\n`);
    } catch (err) {
      if (err instanceof ConfigError || err instanceof PluginError) {
        process.stderr.write((err instanceof PluginError ? `${file}: ${err.code}: ` : '') + err.message + '\n');
        process.exitCode = 1;
        return;
      }
      throw err;
    }
    return;
  }
  if (cmd === 'schema') {
    const { configJsonSchema } = await import('./config/json-schema.js');
    // The built-in families' own provider keys are part of the schema.
    process.stdout.write(JSON.stringify(configJsonSchema(familiesOf(await registry())), null, 2) + '\n');
    return;
  }
  if (cmd === 'keys') {
    const { keysCommand } = await import('./keys-cli.js');
    const defaultFile = path.resolve(process.env.GATEWAY_CONFIG ?? './gateway.yaml');
    const load = async (f: string) => {
      try {
        return (await loadFor(await registry(), path.resolve(f))).config;
      } catch (err) {
        if (err instanceof ConfigError) {
          process.stderr.write(err.message + '\n');
          process.exit(1);
        }
        throw err;
      }
    };
    process.exitCode = await keysCommand(argv.slice(1), load, defaultFile);
    return;
  }
  process.stderr.write(USAGE + '\n');
  process.exitCode = cmd === undefined || cmd === '--help' || cmd === 'help' ? 0 : 2;
}

async function start(file: string): Promise<void> {
  // Before the rest of the gateway is loaded: its modules' compiled code from the last start (src/compile-cache.ts).
  enableCompileCache();
  // Until the gateway is ready (runServer releases them); the flags of the
  // command line and NODE_OPTIONS win now, server.node_flags once read.
  holdStartupV8Flags([]);
  const { peekNodeFlags, ConfigError } = await import('./config/load.js');
  // A file that fails the schema is reported by the full load below, by this process.
  const early = peekNodeFlags(file);
  if (early) holdStartupV8Flags(early);
  const earlyLacking = early ? applyStartFlags(early) : undefined;
  let config: GatewayConfig;
  let reg: BuiltinRegistry;
  try {
    ({ config, registry: reg } = await loadFor(await registry(), file));
  } catch (err) {
    const { PluginError } = await import('./pipeline.js');
    if (err instanceof ConfigError || err instanceof PluginError) {
      process.stderr.write((err instanceof PluginError ? `${file}: ${err.code}: ` : '') + err.message + '\n');
      process.exit(1);
    }
    throw err;
  }
  // (Only a file the peek could not read, and the full load could, comes this far without its flags applied.)
  const lacking = earlyLacking ?? applyStartFlags(config.server.node_flags);
  const [{ runServer }, { extraEndpoints }] = await Promise.all([import('./run.js'), import('./api/index.js')]);
  await runServer(config, reg, extraEndpoints(), lacking);
}

export type { EndpointSpec };

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((err) => {
    process.stderr.write(`model-gateway: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
