// Endpoints beyond chat and models, registered with the core by the CLI.
import type { EndpointSpec } from '../server.js';

export function extraEndpoints(): EndpointSpec[] {
  return [];
}
