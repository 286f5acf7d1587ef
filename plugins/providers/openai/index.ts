// The OpenAI provider plugin: families `openai` and `openai-compatible`
// (vLLM, Ollama, Groq, Mistral, DeepSeek, xAI...). Chat, Responses and Images
// are the same API as the gateway's: bodies are forwarded with the model
// patched (the same-API fast path).
import type { ProviderPlugin, ProviderCall, ChatOutcome, NativeOutcome } from '../../../src/plugin.js';
import type { ChatRequest, ChatCompletion } from '../../../src/types.js';
import { upstreamJson, upstreamEvents, joinUrl, tokenCount } from '../../../src/provider/http.js';
import { jsonEvents } from '../../../src/stream/mapped.js';
import { RESPONSES_TERMINAL } from '../../../src/api/responses-stream.js';
import { toOpenAIChat } from './request.js';
import { countBody, countBodyFromChat } from './count.js';
import { openAIChunks } from './stream.js';
import { fixCompletion } from './response.js';
import { openAIError } from './errors.js';

function headers(call: ProviderCall<unknown>): Record<string, string> {
  return call.provider.api_key ? { authorization: `Bearer ${call.provider.api_key}` } : {};
}

export default function openai(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'openai',
    families: {
      openai: { defaultBaseUrl: 'https://api.openai.com/v1', env: { apiKey: 'OPENAI_API_KEY', baseUrl: 'OPENAI_BASE_URL' }, tokenizer: 'o200k_base' },
      // vLLM, Ollama, Groq... speak Chat Completions: Responses requests to them are translated to chat.
      'openai-compatible': { native: [] },
    },
    async chat(call: ProviderCall<ChatRequest>): Promise<ChatOutcome> {
      const body = toOpenAIChat(call.request, call.note);
      const o = { url: joinUrl(call.provider.base_url, '/chat/completions'), headers: headers(call), body, mapError: openAIError };
      if (call.stream) return { kind: 'stream', chunks: openAIChunks(await upstreamEvents(call, o)) };
      return { kind: 'json', body: fixCompletion(await upstreamJson<ChatCompletion>(call, o)) };
    },
    async responses(call): Promise<NativeOutcome> {
      const o = { url: joinUrl(call.provider.base_url, '/responses'), headers: headers(call), body: call.request, mapError: openAIError };
      if (call.stream) return { kind: 'stream', events: jsonEvents(await upstreamEvents(call, o), (type) => RESPONSES_TERMINAL.has(type)) };
      return { kind: 'json', body: await upstreamJson(call, o) };
    },
    // POST /responses/input_tokens. OpenAI-compatible servers have no counting
    // endpoint in common (vLLM's /tokenize is its own): the core counts locally.
    async countTokens(call) {
      if (call.provider.family !== 'openai') return null;
      const { chat, responses } = call.request;
      const body = responses ? countBody(responses) : chat ? countBodyFromChat(chat) : undefined;
      if (!body) return null;
      const o = { url: joinUrl(call.provider.base_url, '/responses/input_tokens'), headers: headers(call), body, mapError: openAIError };
      return tokenCount((await upstreamJson<{ input_tokens?: unknown }>(call, o)).input_tokens);
    },
    async images(call): Promise<NativeOutcome> {
      const o = { url: joinUrl(call.provider.base_url, '/images/generations'), headers: headers(call), body: call.request, mapError: openAIError };
      return { kind: 'json', body: await upstreamJson(call, o) };
    },
  };
}
