// Endpoints beyond chat and models, registered with the core by the CLI.
import type { EndpointSpec } from '../server.js';
import { imagesEndpoint } from './images.js';

export function extraEndpoints(): EndpointSpec[] {
  return [imagesEndpoint];
}
