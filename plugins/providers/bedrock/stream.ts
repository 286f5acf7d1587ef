// ConverseStream events -> chat.completion.chunk, one event at a time (never
// buffered). Event reference:
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html.
// Each event arrives as one AWS event-stream message (eventstream.ts): its
// `:event-type` is the event name, its payload the member's JSON. Order:
// messageStart, then per content block an optional contentBlockStart (tool
// use only), contentBlockDelta events and a contentBlockStop, then
// messageStop (stopReason) and metadata (usage), the last event.
import type { ChatChunk, ChunkDelta, FinishReason, ReasoningDetail } from '../../../src/types.js';
import type { SSEEvent } from '../../../src/sse.js';
import { parseEventJson, MappedEvents, type EventMapper } from '../../../src/stream/mapped.js';
import { unparseable } from '../../../src/provider/errors.js';
import type { ResponsePlan } from './request.js';
import { finishReason, mapUsage, completionId } from './response.js';
import { streamException } from './errors.js';
import type * as W from './wire.js';

type Block = { kind: 'tool'; index: number; args: string } | { kind: 'reasoning'; text: string; signature: string; redacted?: string } | { kind: 'text' };

/** The chunks of a ConverseStream answer, mapped event by event as they arrive (see ConverseChunkMapper). */
export function converseChunks(events: AsyncIterable<SSEEvent>, plan: ResponsePlan, model: string, requestId?: string): MappedEvents<ChatChunk> {
  return new MappedEvents(events, new ConverseChunkMapper(plan, model, requestId));
}

export class ConverseChunkMapper implements EventMapper<ChatChunk> {
  private readonly id: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly blocks = new Map<number, Block>();
  private tools = 0;
  private started = false;
  private stopped = false;
  // Signed reasoning, in order, sent once with the finish chunk (as the
  // anthropic family does: the openai SDK's stream helper merges deltas with
  // Object.assign, so several reasoning_details deltas would keep only the last).
  private readonly details: ReasoningDetail[] = [];

  constructor(
    private readonly plan: ResponsePlan,
    private readonly model: string,
    requestId?: string,
  ) {
    this.id = completionId(requestId);
  }

  private chunk(delta: ChunkDelta, finish: FinishReason | null = null): ChatChunk {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] };
  }

  step(ev: SSEEvent, out: ChatChunk[]): boolean {
    const kind = ev.headers?.[':message-type'];
    if (kind === 'exception') throw streamException(String(ev.headers?.[':exception-type'] ?? ev.event ?? ''), ev.data);
    if (kind === 'error') throw streamException(String(ev.headers?.[':error-code'] ?? 'internalServerException'), JSON.stringify({ message: ev.headers?.[':error-message'] }));
    const type = ev.event;
    if (!this.started) {
      this.started = true;
      out.push(this.chunk({ role: 'assistant', content: '' }));
      if (type === 'messageStart') return false;
    }
    switch (type) {
      case 'contentBlockStart': {
        const e = parseEventJson<W.ContentBlockStartEvent>(ev.data);
        const tool = e.start?.toolUse;
        if (tool) {
          // OpenAI tool_calls indices count tool calls (0, 1, …), not Converse content blocks.
          const index = this.tools++;
          this.blocks.set(e.contentBlockIndex, { kind: 'tool', index, args: '' });
          out.push(this.chunk({ tool_calls: [{ index, id: tool.toolUseId, type: 'function', function: { name: tool.name, arguments: '' } }] }));
        }
        return false;
      }
      case 'contentBlockDelta': {
        const e = parseEventJson<W.ContentBlockDeltaEvent>(ev.data);
        const d = e.delta ?? {};
        let b = this.blocks.get(e.contentBlockIndex);
        if (d.text !== undefined) {
          if (d.text) out.push(this.chunk({ content: d.text }));
        } else if (d.toolUse) {
          if (b?.kind !== 'tool') throw unparseable(`the provider sent tool input for content block ${e.contentBlockIndex}, which is not a tool use`);
          if (d.toolUse.input) {
            b.args += d.toolUse.input;
            out.push(this.chunk({ tool_calls: [{ index: b.index, function: { arguments: d.toolUse.input } }] }));
          }
        } else if (d.reasoningContent) {
          // Text and reasoning blocks have no contentBlockStart: the first delta opens them.
          if (!b) this.blocks.set(e.contentBlockIndex, (b = { kind: 'reasoning', text: '', signature: '' }));
          if (b.kind !== 'reasoning') throw unparseable(`the provider sent reasoning for content block ${e.contentBlockIndex}, which is not a reasoning block`);
          const r = d.reasoningContent;
          if (r.text) {
            b.text += r.text;
            out.push(this.chunk({ reasoning_content: r.text }));
          }
          if (r.signature) b.signature += r.signature;
          if (r.redactedContent) b.redacted = (b.redacted ?? '') + r.redactedContent;
        }
        // citation and other future delta members: nothing to map.
        return false;
      }
      case 'contentBlockStop': {
        const e = parseEventJson<W.ContentBlockStopEvent>(ev.data);
        const b = this.blocks.get(e.contentBlockIndex);
        this.blocks.delete(e.contentBlockIndex);
        if (b?.kind === 'reasoning') {
          // The signed block, whole, so the client can send it back on the next turn.
          if (b.redacted !== undefined) this.details.push({ type: 'redacted_thinking', data: b.redacted });
          else this.details.push({ type: 'thinking', thinking: b.text, signature: b.signature });
        } else if (b?.kind === 'tool' && b.args === '') {
          // A tool called without input deltas: its input is {}.
          out.push(this.chunk({ tool_calls: [{ index: b.index, function: { arguments: '{}' } }] }));
        }
        return false;
      }
      case 'messageStop': {
        const e = parseEventJson<W.MessageStopEvent>(ev.data);
        this.stopped = true;
        out.push(this.chunk(this.details.length ? { reasoning_details: this.details.splice(0) } : {}, finishReason(e.stopReason)));
        return false;
      }
      case 'metadata': {
        const e = parseEventJson<W.MetadataEvent>(ev.data);
        if (!this.stopped) throw unparseable('the provider sent the stream metadata before messageStop');
        if (this.plan.includeUsage) out.push({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: mapUsage(e.usage) });
        return true;
      }
      default:
        // messageStart after the first event, and event types added later: nothing to map.
        return false;
    }
  }

  end(): void {
    // metadata is always the last event; without messageStop the stream was cut and must not look finished.
    if (!this.stopped) throw unparseable('the provider stream ended before messageStop');
  }
}
