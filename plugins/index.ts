// The built-in plugins. The core (src/) never imports a provider: it gets
// this registry from the CLI (or a test) and looks plugins up by name/family.
import type { BuiltinRegistry } from '../src/pipeline.js';
import auth from './auth/index.js';
import analytics from './analytics/index.js';
import route from './route/index.js';
import normalize from './normalize/index.js';
import debug from './debug/index.js';
import openai from './openai/index.js';
import anthropic from './anthropic/index.js';
import google from './google/index.js';
import vertex from './vertex/index.js';
import azure from './azure/index.js';
import bedrock from './bedrock/index.js';

export function builtins(): BuiltinRegistry {
  return {
    pipeline: { auth, analytics, route, normalize, debug },
    defaultPipeline: ['auth', 'analytics', 'route', 'normalize', 'debug'],
    providers: [openai(), anthropic(), google(), vertex(), azure(), bedrock()],
  };
}
