// The built-in plugins. The core (src/) never imports a provider: it gets
// this registry from the CLI (or a test) and looks plugins up by name/family.
import type { BuiltinRegistry } from '../src/pipeline.js';
import auth from './pipeline/auth/index.js';
import analytics from './pipeline/analytics/index.js';
import normalize from './pipeline/normalize/index.js';
import debug from './pipeline/debug/index.js';
import openai from './providers/openai/index.js';
import anthropic from './providers/anthropic/index.js';
import google from './providers/google/index.js';
import vertex from './providers/vertex/index.js';
import azure from './providers/azure/index.js';
import bedrock from './providers/bedrock/index.js';

export function builtins(): BuiltinRegistry {
  return {
    pipeline: { auth, analytics, normalize, debug },
    // `route`: the core's validate-and-route step (src/route.ts), placed here.
    defaultPipeline: ['auth', 'analytics', 'route', 'normalize', 'debug'],
    providers: [openai(), anthropic(), google(), vertex(), azure(), bedrock()],
  };
}
