// The Azure OpenAI provider plugin: family `azure`. Azure serves the OpenAI
// API on a resource endpoint (https://{resource}.openai.azure.com), so the
// request and response mapping is the OpenAI plugin's (plugins/providers/openai); what
// differs is here: the URLs (request.ts), the `api-key` header, and Azure's
// content-filter annotations and errors (response.ts, stream.ts, errors.ts).
// A catalog deployment's `model` is the Azure deployment name.
import * as v from 'valibot';
import type { ProviderPlugin, ProviderCall, ChatOutcome, NativeOutcome } from '../../../src/plugin.js';
import type { ProviderBlock } from '../../../src/config/load.js';
import type { ChatRequest, ChatCompletion } from '../../../src/types.js';
import { upstreamJson, upstreamEvents } from '../../../src/provider/http.js';
import { jsonEvents, MappedEvents } from '../../../src/stream/mapped.js';
import { RESPONSES_TERMINAL } from '../../../src/api/responses-stream.js';
import { toOpenAIChat } from '../openai/request.js';
import { fixCompletion } from '../openai/response.js';
import { azureUrl, type Operation } from './request.js';
import { AzureChunkMapper } from './stream.js';
import { withoutFilterResults, imagesWithoutFilterResults } from './response.js';
import { azureError } from './errors.js';

/** The family's own keys of a provider block. */
const AzureOptions = v.strictObject({
  /**
   * A dated API version (`2024-10-21`, `2025-04-01-preview`): calls go to the
   * deployments paths with `?api-version=`. Absent: the v1 API.
   */
  api_version: v.optional(v.pipe(v.string(), v.regex(/^\d{4}-\d{2}-\d{2}(-preview)?$/, "must be a dated API version such as '2024-10-21' or '2025-04-01-preview' (leave it out for the v1 API)"))),
});

export interface AzureOptions {
  api_version?: string;
}

function headers(call: ProviderCall<unknown>): Record<string, string> {
  // Azure's key header (https://learn.microsoft.com/azure/ai-foundry/openai/reference#authentication).
  return call.provider.api_key ? { 'api-key': call.provider.api_key } : {};
}

function missingCredentials(p: ProviderBlock): string | undefined {
  if (!p.api_key) return 'no API key configured (api_key or AZURE_OPENAI_API_KEY)';
  if (!p.base_url) return 'no Azure OpenAI endpoint configured (base_url or AZURE_OPENAI_ENDPOINT)';
  return undefined;
}

export default function azure(): ProviderPlugin {
  const url = (call: ProviderCall<unknown>, op: Operation) => azureUrl(call.provider.base_url, op, call.deployment.model, (call.provider.options as AzureOptions).api_version);
  return {
    kind: 'provider',
    name: 'azure',
    families: {
      azure: {
        env: { api_key: 'AZURE_OPENAI_API_KEY', base_url: 'AZURE_OPENAI_ENDPOINT', api_version: 'AZURE_OPENAI_API_VERSION' },
        schema: AzureOptions,
        missingCredentials,
      },
    },
    async chat(call: ProviderCall<ChatRequest>): Promise<ChatOutcome> {
      const body = toOpenAIChat(call.request, call.note);
      const o = { url: url(call, 'chat/completions'), headers: headers(call), body, mapError: azureError };
      if (call.stream) return { kind: 'stream', chunks: new MappedEvents(await upstreamEvents(call, o), new AzureChunkMapper()) };
      return { kind: 'json', body: withoutFilterResults(fixCompletion(await upstreamJson<ChatCompletion>(call, o))) };
    },
    async responses(call): Promise<NativeOutcome> {
      const o = { url: url(call, 'responses'), headers: headers(call), body: call.request, mapError: azureError };
      if (call.stream) return { kind: 'stream', events: jsonEvents(await upstreamEvents(call, o), (type) => RESPONSES_TERMINAL.has(type)) };
      return { kind: 'json', body: await upstreamJson(call, o) };
    },
    async images(call): Promise<NativeOutcome> {
      const o = { url: url(call, 'images/generations'), headers: headers(call), body: call.request, mapError: azureError };
      return { kind: 'json', body: imagesWithoutFilterResults(await upstreamJson(call, o)) };
    },
  };
}
