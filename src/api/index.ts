// Endpoints beyond chat and models, registered with the core by the CLI.
import type { EndpointSpec } from '../server.js';
import { imagesEndpoint } from './images.js';
import { responsesEndpoints } from './responses.js';
import { messagesEndpoints } from './messages.js';

export function extraEndpoints(): EndpointSpec[] {
  return [imagesEndpoint, ...responsesEndpoints(), ...messagesEndpoints()];
}
