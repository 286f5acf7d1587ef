// The OpenTelemetry GenAI semantic conventions' names for what the gateway
// serves, shared by the metrics and the traces.
//
// Maps, not objects: a property read with a key that varies (`obj[family]`)
// is specialised by V8 on the names it has seen, and an unseen one (a record
// without a provider, a family of a plugin's) dropped the metrics' optimised
// `record` ("unexpected name in keyed access" in --trace-deopt) over and over
// under load; and a family named like an Object.prototype member must not
// find one.

/** gen_ai.operation.name for each endpoint. */
const OPERATION = new Map<string, string>([
  ['chat_completions', 'chat'],
  ['responses', 'chat'],
  ['messages', 'chat'],
  ['images_generations', 'generate_content'],
]);

/** gen_ai.provider.name for the built-in families. */
const PROVIDER_NAME = new Map<string, string>([
  ['openai', 'openai'],
  ['azure', 'azure.ai.openai'],
  ['anthropic', 'anthropic'],
  ['google', 'gcp.gemini'],
  ['vertex', 'gcp.vertex_ai'],
  ['bedrock', 'aws.bedrock'],
]);

/** gen_ai.operation.name of an endpoint (another endpoint is named as it is). */
export function operationName(endpoint: string): string {
  return OPERATION.get(endpoint) ?? endpoint;
}

/** gen_ai.provider.name of a provider family (another family is named as it is). */
export function providerName(family: string): string {
  return PROVIDER_NAME.get(family) ?? family;
}
