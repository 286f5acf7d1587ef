// Anthropic Messages response -> chat.completion (https://docs.anthropic.com/en/api/messages;
// docs/providers-anthropic.md "Answers and streams"). Also the pieces the stream mapper shares: finish_reason
// and usage.
import type { ChatCompletion, ChatUsage, FinishReason, ReasoningDetail, ToolCall } from '../../../src/types.js';
import { unparseable } from '../../../src/provider/errors.js';
import type { ResponsePlan } from './request.js';
import type * as W from './wire.js';

export function finishReason(stop: W.StopReason | string | null | undefined, answeredWithTool: boolean): FinishReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      // The response_format tool is the answer, not a call for the client to run.
      return answeredWithTool ? 'stop' : 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn (a paused server-tool loop; the answer so far is final for the client).
      return 'stop';
  }
}

/**
 * Anthropic's input_tokens exclude cache reads and writes: the prompt is the
 * sum of the three; cache writes are reported as
 * prompt_tokens_details.cache_write_tokens. output_tokens include thinking; a
 * separate count only exists on newer models
 * (output_tokens_details.thinking_tokens). Web searches Anthropic ran
 * (server_tool_use.web_search_requests) are kept under the same name.
 */
export function mapUsage(u: W.Usage): ChatUsage {
  const cacheRead = u.cache_read_input_tokens ?? 0;
  const cacheWrite = u.cache_creation_input_tokens ?? 0;
  const prompt = (u.input_tokens ?? 0) + cacheWrite + cacheRead;
  const completion = u.output_tokens ?? 0;
  const out: ChatUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cacheRead },
    completion_tokens_details: { reasoning_tokens: u.output_tokens_details?.thinking_tokens ?? 0 },
  };
  if (cacheWrite) out.prompt_tokens_details.cache_write_tokens = cacheWrite;
  const searches = u.server_tool_use?.web_search_requests;
  if (typeof searches === 'number' && searches > 0) out.server_tool_use = { web_search_requests: searches };
  return out;
}

export function completionId(messageId: string | undefined): string {
  return `chatcmpl-${messageId ?? Date.now().toString(36)}`;
}

export function fromAnthropic(msg: W.MessagesResponse, plan: ResponsePlan): ChatCompletion {
  if (!msg || typeof msg !== 'object' || !Array.isArray(msg.content)) throw unparseable('the provider answered with a body that is not an Anthropic message');
  const text: string[] = [];
  const thinking: string[] = [];
  const details: ReasoningDetail[] = [];
  const toolCalls: ToolCall[] = [];
  let answered = false;
  for (const b of msg.content) {
    if (b.type === 'text') text.push(b.text);
    else if (b.type === 'thinking') {
      thinking.push(b.thinking);
      details.push({ type: 'thinking', thinking: b.thinking, signature: b.signature });
    } else if (b.type === 'redacted_thinking') details.push({ type: 'redacted_thinking', data: b.data });
    else if (b.type === 'tool_use') {
      if (plan.answerTool && b.name === plan.answerTool) {
        text.push(JSON.stringify(b.input ?? {}));
        answered = true;
      } else toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    }
    // server_tool_use / web_search_tool_result: Anthropic ran the search itself; the text carries the answer.
  }
  const message: ChatCompletion['choices'][number]['message'] = { role: 'assistant', content: text.length ? text.join('') : null, refusal: null };
  if (thinking.length) message.reasoning_content = thinking.join('');
  if (details.length) message.reasoning_details = details;
  if (toolCalls.length) message.tool_calls = toolCalls;
  return {
    id: completionId(msg.id),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: msg.model,
    system_fingerprint: null,
    choices: [{ index: 0, message, finish_reason: finishReason(msg.stop_reason, answered && !toolCalls.length), logprobs: null }],
    usage: mapUsage(msg.usage ?? {}),
  };
}
