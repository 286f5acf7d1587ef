// The Anthropic provider plugin: family `anthropic`, the Messages API
// (POST {base}/v1/messages, https://docs.anthropic.com/en/api/messages).
// Chat requests are translated from the IR (request.ts) and the answers back
// (response.ts, stream.ts); errors keep their HTTP status (errors.ts).
import type { ProviderPlugin, ProviderCall, ChatOutcome } from '../../src/plugin.js';
import type { ChatRequest } from '../../src/types.js';
import { upstreamJson, upstreamEvents, joinUrl } from '../../src/provider.js';
import { toAnthropic } from './request.js';
import { fromAnthropic } from './response.js';
import { anthropicChunks } from './stream.js';
import { anthropicError } from './errors.js';
import type { MessagesResponse } from './wire.js';

/** The API version this mapping is written against (https://docs.anthropic.com/en/api/versioning). */
export const ANTHROPIC_VERSION = '2023-06-01';

function headers(call: ProviderCall<unknown>): Record<string, string> {
  // x-api-key, not Authorization: Bearer (that is for OAuth tokens only).
  // Beta flags (anthropic-beta) come from the provider's `headers` in gateway.yaml.
  const h: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION };
  if (call.provider.api_key) h['x-api-key'] = call.provider.api_key;
  return h;
}

/** The base URL is the API root; an operator's trailing /v1 is tolerated. */
export function messagesUrl(base: string): string {
  return joinUrl(base.replace(/\/v1\/?$/, ''), '/v1/messages');
}

export default function anthropic(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'anthropic',
    families: {
      anthropic: { defaultBaseUrl: 'https://api.anthropic.com', env: { apiKey: 'ANTHROPIC_API_KEY', baseUrl: 'ANTHROPIC_BASE_URL' } },
    },
    async chat(call: ProviderCall<ChatRequest>): Promise<ChatOutcome> {
      const { body, plan } = toAnthropic(call.request, call.model, call.note, call.stream);
      const o = { url: messagesUrl(call.provider.base_url), headers: headers(call), body, mapError: anthropicError };
      if (call.stream) return { kind: 'stream', chunks: anthropicChunks(await upstreamEvents(call, o), plan) };
      return { kind: 'json', body: fromAnthropic(await upstreamJson<MessagesResponse>(call, o), plan) };
    },
  };
}
