// The Anthropic provider plugin: family `anthropic`, the Messages API
// (POST {base}/v1/messages, https://docs.anthropic.com/en/api/messages).
// Chat requests are translated from the IR (request.ts) and the answers back
// (response.ts, stream.ts); errors keep their HTTP status (errors.ts).
import type { ProviderPlugin, ProviderCall, ChatOutcome, CountRequest, MessagesCall, NativeOutcome } from '../../../src/plugin.js';
import type { ChatRequest, ChatCompletion } from '../../../src/types.js';
import { upstreamJson, upstreamEvents, joinUrl, tokenCount } from '../../../src/provider/http.js';
import { unparseable, type ErrorMapper } from '../../../src/provider/errors.js';
import { toAnthropic } from './request.js';
import { fromAnthropic } from './response.js';
import { anthropicChunks, messagesEvents } from './stream.js';
import { anthropicError } from './errors.js';
import type { MessagesRequest, MessagesResponse } from './wire.js';

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

/**
 * The fields POST /v1/messages/count_tokens takes
 * (https://docs.anthropic.com/en/api/messages-count-tokens): the prompt, not
 * the generation settings (`max_tokens`, `temperature`... are refused there).
 */
const COUNT_FIELDS = ['model', 'messages', 'system', 'tools', 'tool_choice', 'thinking'] as const;

/**
 * Where a Claude model is served and how: Anthropic's Messages API, or a
 * cloud that takes the same body with changes (Vertex AI's rawPredict,
 * plugins/providers/vertex). The mapping (request.ts, response.ts, stream.ts) is shared.
 */
export interface ClaudeSite {
  url(stream: boolean): string;
  headers: Record<string, string>;
  /** The Messages body as this site wants it (pure; e.g. the model moved to the URL). */
  adapt?(body: MessagesRequest): Record<string, unknown>;
  mapError: ErrorMapper;
  /** Where a prompt's tokens are counted, and the count body as this site wants it. */
  count: { url: string; adapt?(body: Record<string, unknown>): Record<string, unknown> };
}

/** Anthropic's own API: POST {base}/v1/messages, the key in x-api-key. */
export function anthropicSite(call: ProviderCall<unknown>): ClaudeSite {
  const url = messagesUrl(call.provider.base_url);
  return { url: () => url, headers: headers(call), mapError: anthropicError, count: { url: url + '/count_tokens' } };
}

/**
 * The prompt tokens of a request on a Claude model at `site` (null: nothing
 * to count): a Messages body as it is (the Messages ingress), else the chat
 * request translated.
 */
export async function claudeCountTokens(call: ProviderCall<CountRequest>, site: ClaudeSite): Promise<number | null> {
  const { chat, messages } = call.request;
  let count: Record<string, unknown> = {};
  if (messages) count = messages;
  else if (chat) {
    const { body } = toAnthropic(chat, call.model, call.note, false);
    for (const f of COUNT_FIELDS) if (body[f] !== undefined) count[f] = body[f];
  } else return null;
  if (site.count.adapt) count = site.count.adapt(count);
  return tokenCount((await upstreamJson<{ input_tokens?: unknown }>(call, { url: site.count.url, headers: site.headers, body: count, mapError: site.mapError })).input_tokens);
}

/**
 * Anthropic has no `n`: make n requests at once and merge their choices
 * (indexes 0..n-1, usage summed, since each request pays its prompt). The
 * chat validator already refuses n > 1 with `stream`. One failure fails the
 * attempt, and the dispatcher's abort cancels the others.
 */
const FAN_OUT = 8;

async function fanOut(call: ProviderCall<ChatRequest>, site: ClaudeSite, n: number): Promise<ChatCompletion> {
  const one: ChatRequest = { ...call.request, n: undefined };
  // At most FAN_OUT requests in flight: n may be up to 128, and a burst that
  // size would meet the provider's rate limit rather than serve faster.
  const results: ChatCompletion[] = new Array(n);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      // Every copy makes the same notes: record the first copy's only.
      const { body, plan } = toAnthropic(one, call.model, i === 0 ? call.note : () => {}, false);
      const o = { url: site.url(false), headers: site.headers, body: site.adapt ? site.adapt(body) : body, mapError: site.mapError };
      results[i] = fromAnthropic(await upstreamJson<MessagesResponse>(call, o), plan);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, FAN_OUT) }, worker));
  call.note({ param: 'n', action: 'override', before: n, after: 1, reason: `Anthropic has no 'n': the gateway sent ${n} requests and merged their choices` });
  const merged = results[0];
  merged.choices = results.map((r, i) => ({ ...r.choices[0], index: i }));
  const u = results.map((r) => r.usage!).filter(Boolean);
  if (u.length) {
    const sum = (f: (x: (typeof u)[number]) => number) => u.reduce((s, x) => s + (f(x) ?? 0), 0);
    // Every detail count summed (cache writes included), not only the first answer's.
    const details = <K extends 'prompt_tokens_details' | 'completion_tokens_details'>(k: K) => {
      const out = { ...u[0][k] };
      for (const f of new Set(u.flatMap((x) => Object.keys(x[k])))) out[f] = sum((x) => x[k][f] ?? 0);
      return out;
    };
    merged.usage = {
      prompt_tokens: sum((x) => x.prompt_tokens),
      completion_tokens: sum((x) => x.completion_tokens),
      total_tokens: sum((x) => x.total_tokens),
      prompt_tokens_details: details('prompt_tokens_details'),
      completion_tokens_details: details('completion_tokens_details'),
    };
    const searches = sum((x) => x.server_tool_use?.web_search_requests ?? 0);
    if (searches) merged.usage.server_tool_use = { web_search_requests: searches };
  }
  return merged;
}

/** Chat completions on a Claude model at `site`. */
export async function claudeChat(call: ProviderCall<ChatRequest>, site: ClaudeSite): Promise<ChatOutcome> {
  const n = call.request.n ?? 1;
  if (n > 1 && !call.stream) return { kind: 'json', body: await fanOut(call, site, n) };
  const { body, plan } = toAnthropic(call.request, call.model, call.note, call.stream);
  const o = { url: site.url(call.stream), headers: site.headers, body: site.adapt ? site.adapt(body) : body, mapError: site.mapError };
  if (call.stream) return { kind: 'stream', chunks: anthropicChunks(await upstreamEvents(call, o), plan, call.reportUsage) };
  return { kind: 'json', body: fromAnthropic(await upstreamJson<MessagesResponse>(call, o), plan) };
}

/**
 * POST /v1/messages on a Claude model at `site`, same API: the body as the
 * ingress patched it, the client's beta flags in `anthropic-beta`; the
 * answer and the events come back as Anthropic sent them.
 */
export async function claudeMessages(call: ProviderCall<MessagesCall>, site: ClaudeSite): Promise<NativeOutcome> {
  const { body, beta } = call.request;
  const headers = beta ? { ...site.headers, 'anthropic-beta': beta } : site.headers;
  const payload = site.adapt ? site.adapt(body as MessagesRequest) : body;
  const o = { url: site.url(call.stream), headers, body: payload, mapError: site.mapError };
  if (call.stream) return { kind: 'stream', events: messagesEvents(await upstreamEvents(call, o)) };
  const msg = await upstreamJson<Record<string, unknown>>(call, o);
  if (!msg || typeof msg !== 'object' || !Array.isArray(msg.content)) throw unparseable('the provider answered with a body that is not an Anthropic message');
  return { kind: 'json', body: msg };
}

export default function anthropic(): ProviderPlugin {
  return {
    kind: 'provider',
    name: 'anthropic',
    families: {
      anthropic: { defaultBaseUrl: 'https://api.anthropic.com', env: { apiKey: 'ANTHROPIC_API_KEY', baseUrl: 'ANTHROPIC_BASE_URL' } },
    },
    chat: (call) => claudeChat(call, anthropicSite(call)),
    countTokens: (call) => claudeCountTokens(call, anthropicSite(call)),
    messages: (call) => claudeMessages(call, anthropicSite(call)),
  };
}
