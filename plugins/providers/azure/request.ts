// Where an Azure OpenAI request goes; its body is the OpenAI plugin's
// (../openai/request.ts). Two URL schemes
// (https://learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle):
// - the v1 API, when no api_version is set: {endpoint}/openai/v1/chat/completions,
//   /openai/v1/responses, /openai/v1/images/generations, the deployment name as `model`;
// - the dated API, with api_version: /openai/deployments/{deployment}/chat/completions
//   and /images/generations, /openai/responses (deployment as `model`), each with ?api-version=.
import { joinUrl } from '../../../src/provider/http.js';

/** The resource endpoint: an operator's `…/openai` or `…/openai/v1` suffix is tolerated. */
export function resourceBase(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/openai(\/v1)?$/, '');
}

export type Operation = 'chat/completions' | 'responses' | 'images/generations';

/** The URL of one operation for one deployment, in the scheme the provider's api_version selects. */
export function azureUrl(baseUrl: string, op: Operation, deployment: string, apiVersion: string | undefined): string {
  const base = resourceBase(baseUrl);
  if (!apiVersion) return joinUrl(base, `/openai/v1/${op}`);
  const q = `?api-version=${encodeURIComponent(apiVersion)}`;
  // The Responses API has no deployments path: the deployment goes in `model`.
  if (op === 'responses') return joinUrl(base, `/openai/responses${q}`);
  return joinUrl(base, `/openai/deployments/${encodeURIComponent(deployment)}/${op}${q}`);
}
