// Anthropic stream events -> chat.completion.chunk, one event at a time
// (never buffered). Event reference: https://docs.anthropic.com/en/docs/build-with-claude/streaming
// and shared/fixtures/WIRE-FORMATS.md section 4 "Streaming". Events are keyed
// on the JSON `type`; Anthropic pads its data lines with trailing spaces,
// which JSON.parse ignores.
import type { ChatChunk, ChunkDelta, FinishReason } from '../../src/types.js';
import type { SSEEvent } from '../../src/sse.js';
import { parseEventJson, unparseable } from '../../src/provider.js';
import type { ResponsePlan } from './request.js';
import { finishReason, mapUsage, completionId } from './response.js';
import { streamError } from './errors.js';
import type * as W from './wire.js';

type Block =
  | { kind: 'text' }
  | { kind: 'tool'; index: number; args: string; input: unknown }
  | { kind: 'answer'; args: string; input: unknown }
  | { kind: 'thinking'; text: string; signature: string }
  | { kind: 'other' };

/** Only the fields Anthropic actually reported overlay earlier ones (message_delta usage is cumulative). */
function overlay(into: W.Usage, from: W.Usage | undefined) {
  for (const [k, v] of Object.entries(from ?? {})) if (v !== null && v !== undefined) into[k] = v;
}

export async function* anthropicChunks(events: AsyncIterable<SSEEvent>, plan: ResponsePlan): AsyncGenerator<ChatChunk> {
  let id = completionId(undefined);
  let model = '';
  const created = Math.floor(Date.now() / 1000);
  const usage: W.Usage = {};
  const blocks = new Map<number, Block>();
  let tools = 0;
  let answered = false;
  let started = false;
  // Signed blocks, in order, sent once with the finish chunk: the openai SDK's
  // stream helper merges deltas with Object.assign, so several
  // reasoning_details deltas would leave a client holding only the last block.
  const details: { type: string; [k: string]: unknown }[] = [];
  const chunk = (delta: ChunkDelta, finish: FinishReason | null = null): ChatChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
  });

  for await (const ev of events) {
    const e = parseEventJson<W.StreamEvent>(ev.data);
    if (e.type === 'ping') continue;
    if (e.type === 'error') throw streamError(e.error);
    if (!started) {
      started = true;
      if (e.type === 'message_start') {
        id = completionId(e.message?.id);
        model = e.message?.model ?? '';
        overlay(usage, e.message?.usage);
      }
      yield chunk({ role: 'assistant', content: '' });
      if (e.type === 'message_start') continue;
    }
    switch (e.type) {
      case 'content_block_start': {
        const cb = e.content_block;
        if (cb.type === 'text') {
          blocks.set(e.index, { kind: 'text' });
          if (cb.text) yield chunk({ content: cb.text });
        } else if (cb.type === 'tool_use') {
          if (plan.answerTool && cb.name === plan.answerTool) {
            answered = true;
            blocks.set(e.index, { kind: 'answer', args: '', input: cb.input });
          } else {
            // OpenAI tool_calls indices count tool calls (0, 1, …), not Anthropic content blocks.
            const index = tools++;
            blocks.set(e.index, { kind: 'tool', index, args: '', input: cb.input });
            yield chunk({ tool_calls: [{ index, id: cb.id, type: 'function', function: { name: cb.name, arguments: '' } }] });
          }
        } else if (cb.type === 'thinking') {
          blocks.set(e.index, { kind: 'thinking', text: cb.thinking ?? '', signature: cb.signature ?? '' });
          if (cb.thinking) yield chunk({ reasoning_content: cb.thinking });
        } else if (cb.type === 'redacted_thinking') {
          blocks.set(e.index, { kind: 'other' });
          details.push({ type: 'redacted_thinking', data: cb.data });
        } else blocks.set(e.index, { kind: 'other' }); // server tool blocks: Anthropic runs them itself
        break;
      }
      case 'content_block_delta': {
        const b = blocks.get(e.index);
        const d = e.delta;
        if (!b) throw unparseable(`the provider sent a delta for content block ${e.index}, which was never started`);
        if (d.type === 'text_delta' && b.kind === 'text') {
          if (d.text) yield chunk({ content: d.text });
        } else if (d.type === 'input_json_delta' && (b.kind === 'tool' || b.kind === 'answer')) {
          // The first fragment is often "" (recorded): nothing to forward.
          if (!d.partial_json) break;
          b.args += d.partial_json;
          if (b.kind === 'tool') yield chunk({ tool_calls: [{ index: b.index, function: { arguments: d.partial_json } }] });
          else yield chunk({ content: d.partial_json });
        } else if (d.type === 'thinking_delta' && b.kind === 'thinking') {
          b.text += d.thinking;
          if (d.thinking) yield chunk({ reasoning_content: d.thinking });
        } else if (d.type === 'signature_delta' && b.kind === 'thinking') {
          b.signature += d.signature;
        }
        // citations_delta and future delta types: nothing to map.
        break;
      }
      case 'content_block_stop': {
        const b = blocks.get(e.index);
        blocks.delete(e.index);
        if (b?.kind === 'thinking') {
          // The signed block, whole, so the client can send it back on the next turn.
          details.push({ type: 'thinking', thinking: b.text, signature: b.signature });
        } else if ((b?.kind === 'tool' || b?.kind === 'answer') && b.args === '') {
          // No input_json_delta (or only ""): a tool without arguments means {} (recorded: anthropic-tool-no-args).
          const input = b.input && typeof b.input === 'object' ? JSON.stringify(b.input) : '{}';
          if (b.kind === 'tool') yield chunk({ tool_calls: [{ index: b.index, function: { arguments: input } }] });
          else yield chunk({ content: input });
        }
        break;
      }
      case 'message_delta':
        overlay(usage, e.usage);
        yield chunk(details.length ? { reasoning_details: details.splice(0) } : {}, finishReason(e.delta?.stop_reason, answered && tools === 0));
        break;
      case 'message_stop':
        if (plan.includeUsage) yield { id, object: 'chat.completion.chunk', created, model, choices: [], usage: mapUsage(usage) };
        return;
      default:
        // New event types may be added (Anthropic versioning policy): ignore them.
        break;
    }
  }
  // A stream that stops without message_stop was cut: never let it look finished.
  throw unparseable('the provider stream ended before message_stop');
}
