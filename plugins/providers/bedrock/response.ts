// Converse response -> chat.completion. Also the pieces the stream mapper
// shares: finish_reason and usage. Reasoning comes back as
// reasoning_content plus reasoning_details in the anthropic family's format
// ({type: 'thinking', thinking, signature} / {type: 'redacted_thinking', data}),
// so a client sends it back the same way whichever family served the turn.
import type { ChatCompletion, ChatUsage, FinishReason, ReasoningDetail, ToolCall } from '../../../src/types.js';
import { unparseable } from '../../../src/provider/errors.js';
import type * as W from './wire.js';

/** stopReason -> finish_reason (API reference: ConverseResponse stopReason). */
export function finishReason(stop: string | null | undefined): FinishReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'guardrail_intervened':
    case 'content_filtered':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, and malformed_model_output / malformed_tool_use
      // (the model's output could not be parsed; what it said is the answer).
      return 'stop';
  }
}

/**
 * Bedrock's inputTokens exclude cache reads and writes (cacheReadInputTokens,
 * cacheWriteInputTokens): the prompt is the sum of the three. Cache writes are
 * reported as prompt_tokens_details.cache_write_tokens.
 */
export function mapUsage(u: W.TokenUsage | undefined): ChatUsage {
  const read = u?.cacheReadInputTokens ?? 0;
  const write = u?.cacheWriteInputTokens ?? 0;
  const prompt = (u?.inputTokens ?? 0) + read + write;
  const completion = u?.outputTokens ?? 0;
  const details: ChatUsage['prompt_tokens_details'] = { cached_tokens: read };
  if (write) details.cache_write_tokens = write;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: details,
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

/** Bedrock answers carry no id in the body: one is made (the x-amzn-requestid header is the transport's). */
export function completionId(requestId?: string): string {
  return `chatcmpl-${requestId ?? Date.now().toString(36) + Math.random().toString(36).slice(2, 10)}`;
}

export function fromConverse(res: W.ConverseResponse, model: string, requestId?: string): ChatCompletion {
  const content = res?.output?.message?.content;
  if (!Array.isArray(content)) throw unparseable('the provider answered with a body that is not a Converse response');
  const text: string[] = [];
  const reasoning: string[] = [];
  const details: ReasoningDetail[] = [];
  const toolCalls: ToolCall[] = [];
  for (const b of content) {
    if ('text' in b) text.push(b.text);
    else if ('toolUse' in b) toolCalls.push({ id: b.toolUse.toolUseId, type: 'function', function: { name: b.toolUse.name, arguments: JSON.stringify(b.toolUse.input ?? {}) } });
    else if ('reasoningContent' in b) {
      const r = b.reasoningContent;
      if ('reasoningText' in r) {
        reasoning.push(r.reasoningText.text);
        details.push({ type: 'thinking', thinking: r.reasoningText.text, signature: r.reasoningText.signature ?? '' });
      } else if ('redactedContent' in r) details.push({ type: 'redacted_thinking', data: r.redactedContent });
    }
    // citationsContent, image and other blocks have no chat counterpart.
  }
  const message: ChatCompletion['choices'][number]['message'] = { role: 'assistant', content: text.length ? text.join('') : null, refusal: null };
  if (reasoning.length) message.reasoning_content = reasoning.join('');
  if (details.length) message.reasoning_details = details;
  if (toolCalls.length) message.tool_calls = toolCalls;
  return {
    id: completionId(requestId),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    system_fingerprint: null,
    choices: [{ index: 0, message, finish_reason: finishReason(res.stopReason), logprobs: null }],
    usage: mapUsage(res.usage),
  };
}
