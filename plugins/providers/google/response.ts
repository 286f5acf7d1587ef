// Gemini GenerateContentResponse -> OpenAI chat completion (the IR).
//
// - text parts -> content; `thought: true` parts -> reasoning_content;
// - functionCall parts -> tool_calls with synthesized ids (the public API
//   usually sends none) and finish_reason tool_calls (Gemini says STOP);
// - thoughtSignature values -> message.reasoning_details as
//   {type:'thought_signature', signature, tool_call_id} for a function call and
//   {type:'thought_signature', signature, part_index: 0} for the text, so the
//   request mapper can put them back on the same parts next turn;
// - finishReason and usage as docs/providers-google.md tabulates them.
import { randomHex, randomBase64url } from '../../../src/random.js';
import type { ChatCompletion, ChatChoice, ChatUsage, FinishReason, LogprobContent, ReasoningDetail, ToolCall } from '../../../src/types.js';
import type { GeminiCandidate, GeminiLogprobsResult, GeminiPart, GeminiUsage, GenerateContentResponse } from './wire.js';

export function toolCallId(): string {
  return 'call_' + randomHex(12);
}

export function completionId(responseId?: string): string {
  return 'chatcmpl-' + (responseId || randomBase64url(12));
}

const FILTERED = new Set(['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION']);

export function mapFinish(reason: string | undefined, hasToolCalls: boolean): FinishReason {
  if (reason === 'MAX_TOKENS') return 'length';
  if (reason && FILTERED.has(reason)) return 'content_filter';
  // Gemini reports STOP for function calls; the tool-call failures
  // (MALFORMED_FUNCTION_CALL, ...), OTHER, LANGUAGE map to stop.
  return hasToolCalls ? 'tool_calls' : 'stop';
}

export function mapUsage(u: GeminiUsage | undefined): ChatUsage | undefined {
  if (!u) return undefined;
  const prompt = (u.promptTokenCount ?? 0) + (u.toolUsePromptTokenCount ?? 0);
  const thoughts = u.thoughtsTokenCount ?? 0;
  const completion = (u.candidatesTokenCount ?? 0) + thoughts;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: u.totalTokenCount ?? prompt + completion,
    prompt_tokens_details: { cached_tokens: u.cachedContentTokenCount ?? 0 },
    completion_tokens_details: { reasoning_tokens: thoughts },
  };
}

/**
 * The Google Search queries a response ran (grounding), added to `seen`:
 * Gemini bills the distinct non-empty ones (empty strings in
 * `webSearchQueries` are not searches), https://ai.google.dev/gemini-api/docs/google-search.
 */
export function addSearchQueries(candidates: GeminiCandidate[] | undefined, seen?: Set<string>): Set<string> | undefined {
  if (candidates)
    for (const c of candidates) {
      const queries = c.groundingMetadata?.webSearchQueries;
      if (Array.isArray(queries)) for (const q of queries) if (typeof q === 'string' && q) (seen ??= new Set()).add(q);
    }
  return seen;
}

/** `usage` with the web searches a response ran (`server_tool_use.web_search_requests`, only when not 0). */
export function withSearches(usage: ChatUsage, searches: number): ChatUsage {
  return searches > 0 ? { ...usage, server_tool_use: { web_search_requests: searches } } : usage;
}

const bytes = (s: string) => [...Buffer.from(s, 'utf8')];

export function mapLogprobs(l: GeminiLogprobsResult | undefined): LogprobContent[] | null {
  if (!l?.chosenCandidates) return null;
  return l.chosenCandidates.map((c, i) => {
    const token = c.token ?? '';
    return {
      token,
      logprob: c.logProbability ?? 0,
      bytes: bytes(token),
      top_logprobs: (l.topCandidates?.[i]?.candidates ?? []).map((t) => ({ token: t.token ?? '', logprob: t.logProbability ?? 0, bytes: bytes(t.token ?? '') })),
    };
  });
}

/** Code execution parts (a native `code_execution` tool) rendered as Markdown text. */
export function codeText(p: GeminiPart): string | undefined {
  if (p.executableCode) return `\n\`\`\`${(p.executableCode.language ?? '').toLowerCase().replace('language_unspecified', '')}\n${p.executableCode.code ?? ''}\n\`\`\`\n`;
  if (p.codeExecutionResult) return `\n\`\`\`\n${p.codeExecutionResult.output ?? ''}\n\`\`\`\n`;
  return undefined;
}

export function signatureDetail(signature: string, toolCallId?: string): ReasoningDetail {
  return toolCallId ? { type: 'thought_signature', signature, tool_call_id: toolCallId } : { type: 'thought_signature', signature, part_index: 0 };
}

function choiceOf(c: GeminiCandidate, index: number): ChatChoice {
  let text = '';
  let reasoning = '';
  let textSignature: string | undefined;
  const toolCalls: ToolCall[] = [];
  const details: ReasoningDetail[] = [];
  for (const p of c.content?.parts ?? []) {
    if (p.functionCall) {
      const id = p.functionCall.id || toolCallId();
      toolCalls.push({ id, type: 'function', function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } });
      if (p.thoughtSignature) details.push(signatureDetail(p.thoughtSignature, id));
      continue;
    }
    if (p.thoughtSignature) textSignature ??= p.thoughtSignature;
    if (p.thought) reasoning += p.text ?? '';
    else if (typeof p.text === 'string') text += p.text;
    else text += codeText(p) ?? '';
  }
  if (textSignature) details.unshift(signatureDetail(textSignature));
  const message: ChatChoice['message'] = { role: 'assistant', content: text || (toolCalls.length ? null : ''), refusal: null };
  if (reasoning) message.reasoning_content = reasoning;
  if (toolCalls.length) message.tool_calls = toolCalls;
  if (details.length) message.reasoning_details = details;
  const logprobs = mapLogprobs(c.logprobsResult);
  return { index, message, finish_reason: mapFinish(c.finishReason, toolCalls.length > 0), logprobs: logprobs ? { content: logprobs, refusal: null } : null };
}

/** No candidates: a blocked prompt (promptFeedback.blockReason), or nothing generated. */
function emptyChoice(index: number, blocked: boolean): ChatChoice {
  return { index, message: { role: 'assistant', content: '', refusal: null }, finish_reason: blocked ? 'content_filter' : 'stop', logprobs: null };
}

export function toCompletion(res: GenerateContentResponse, model: string, n = 1): ChatCompletion {
  const candidates = res.candidates ?? [];
  const choices = candidates.length
    ? candidates.map((c, pos) => choiceOf(c, c.index ?? pos)).sort((a, b) => a.index - b.index)
    : Array.from({ length: Math.max(1, n) }, (_, i) => emptyChoice(i, !!res.promptFeedback?.blockReason));
  const out: ChatCompletion = {
    id: completionId(res.responseId),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: null,
    choices,
  };
  const usage = mapUsage(res.usageMetadata);
  if (usage) out.usage = withSearches(usage, addSearchQueries(candidates)?.size ?? 0);
  return out;
}
