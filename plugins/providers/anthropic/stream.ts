// Anthropic stream events -> chat.completion.chunk, one event at a time
// (never buffered). Event reference: https://docs.anthropic.com/en/docs/build-with-claude/streaming
// Events are keyed
// on the JSON `type`; Anthropic pads its data lines with trailing spaces,
// which JSON.parse ignores.
import type { ChatChunk, ChatUsage, ChunkDelta, FinishReason } from '../../../src/types.js';
import type { SSEEvent } from '../../../src/sse.js';
import { parseEventJson, MappedEvents, type EventMapper, type JsonEvent } from '../../../src/stream/mapped.js';
import { unparseable } from '../../../src/provider/errors.js';
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

/** The chunks of an Anthropic stream, mapped event by event as they arrive (see AnthropicChunkMapper). */
export function anthropicChunks(events: AsyncIterable<SSEEvent>, plan: ResponsePlan, reportUsage?: (u: ChatUsage) => void): MappedEvents<ChatChunk> {
  return new MappedEvents(events, new AnthropicChunkMapper(plan, reportUsage));
}

export class AnthropicChunkMapper implements EventMapper<ChatChunk> {
  private id = completionId(undefined);
  private model = '';
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly usage: W.Usage = {};
  private readonly blocks = new Map<number, Block>();
  private tools = 0;
  private answered = false;
  private started = false;
  // Signed blocks, in order, sent once with the finish chunk: the openai SDK's
  // stream helper merges deltas with Object.assign, so several
  // reasoning_details deltas would leave a client holding only the last block.
  private readonly details: { type: string; [k: string]: unknown }[] = [];

  constructor(
    private readonly plan: ResponsePlan,
    /** The usage so far (ProviderCall.reportUsage): the input at message_start, the running output at each message_delta. */
    private readonly reportUsage?: (u: ChatUsage) => void,
  ) {}

  private chunk(delta: ChunkDelta, finish: FinishReason | null = null): ChatChunk {
    return { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] };
  }

  step(ev: SSEEvent, out: ChatChunk[]): boolean {
    // Most events of a stream are text deltas: read without building the event.
    if (this.started) {
      const text = textDelta(ev.data);
      if (text !== undefined && this.blocks.get(deltaIndex)?.kind === 'text') {
        if (text) out.push(this.chunk({ content: text }));
        return false;
      }
    }
    const e = parseEventJson<W.StreamEvent>(ev.data);
    if (e.type === 'ping') return false;
    if (e.type === 'error') throw streamError(e.error);
    if (!this.started) {
      this.started = true;
      if (e.type === 'message_start') {
        this.id = completionId(e.message?.id);
        this.model = e.message?.model ?? '';
        overlay(this.usage, e.message?.usage);
        this.reportUsage?.(mapUsage(this.usage));
      }
      out.push(this.chunk({ role: 'assistant', content: '' }));
      if (e.type === 'message_start') return false;
    }
    switch (e.type) {
      case 'content_block_start': {
        const cb = e.content_block;
        if (cb.type === 'text') {
          this.blocks.set(e.index, { kind: 'text' });
          if (cb.text) out.push(this.chunk({ content: cb.text }));
        } else if (cb.type === 'tool_use') {
          if (this.plan.answerTool && cb.name === this.plan.answerTool) {
            this.answered = true;
            this.blocks.set(e.index, { kind: 'answer', args: '', input: cb.input });
          } else {
            // OpenAI tool_calls indices count tool calls (0, 1, …), not Anthropic content blocks.
            const index = this.tools++;
            this.blocks.set(e.index, { kind: 'tool', index, args: '', input: cb.input });
            out.push(this.chunk({ tool_calls: [{ index, id: cb.id, type: 'function', function: { name: cb.name, arguments: '' } }] }));
          }
        } else if (cb.type === 'thinking') {
          this.blocks.set(e.index, { kind: 'thinking', text: cb.thinking ?? '', signature: cb.signature ?? '' });
          if (cb.thinking) out.push(this.chunk({ reasoning_content: cb.thinking }));
        } else if (cb.type === 'redacted_thinking') {
          this.blocks.set(e.index, { kind: 'other' });
          this.details.push({ type: 'redacted_thinking', data: cb.data });
        } else this.blocks.set(e.index, { kind: 'other' }); // server tool blocks: Anthropic runs them itself
        return false;
      }
      case 'content_block_delta': {
        const b = this.blocks.get(e.index);
        const d = e.delta;
        if (!b) throw unparseable(`the provider sent a delta for content block ${e.index}, which was never started`);
        if (d.type === 'text_delta' && b.kind === 'text') {
          if (d.text) out.push(this.chunk({ content: d.text }));
        } else if (d.type === 'input_json_delta' && (b.kind === 'tool' || b.kind === 'answer')) {
          // The first fragment is often "" (recorded): nothing to forward.
          if (!d.partial_json) return false;
          b.args += d.partial_json;
          if (b.kind === 'tool') out.push(this.chunk({ tool_calls: [{ index: b.index, function: { arguments: d.partial_json } }] }));
          else out.push(this.chunk({ content: d.partial_json }));
        } else if (d.type === 'thinking_delta' && b.kind === 'thinking') {
          b.text += d.thinking;
          if (d.thinking) out.push(this.chunk({ reasoning_content: d.thinking }));
        } else if (d.type === 'signature_delta' && b.kind === 'thinking') {
          b.signature += d.signature;
        }
        // citations_delta and future delta types: nothing to map.
        return false;
      }
      case 'content_block_stop': {
        const b = this.blocks.get(e.index);
        this.blocks.delete(e.index);
        if (b?.kind === 'thinking') {
          // The signed block, whole, so the client can send it back on the next turn.
          this.details.push({ type: 'thinking', thinking: b.text, signature: b.signature });
        } else if ((b?.kind === 'tool' || b?.kind === 'answer') && b.args === '') {
          // No input_json_delta (or only ""): a tool without arguments means {} (recorded: anthropic-tool-no-args).
          const input = b.input && typeof b.input === 'object' ? JSON.stringify(b.input) : '{}';
          if (b.kind === 'tool') out.push(this.chunk({ tool_calls: [{ index: b.index, function: { arguments: input } }] }));
          else out.push(this.chunk({ content: input }));
        }
        return false;
      }
      case 'message_delta':
        overlay(this.usage, e.usage);
        this.reportUsage?.(mapUsage(this.usage));
        out.push(this.chunk(this.details.length ? { reasoning_details: this.details.splice(0) } : {}, finishReason(e.delta?.stop_reason, this.answered && this.tools === 0)));
        return false;
      case 'message_stop':
        if (this.plan.includeUsage) out.push({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices: [], usage: mapUsage(this.usage) });
        return true;
      default:
        // New event types may be added (Anthropic versioning policy): ignore them.
        return false;
    }
  }

  end(): void {
    // A stream that stops without message_stop was cut: never let it look finished.
    throw unparseable('the provider stream ended before message_stop');
  }
}

const TEXT_DELTA_HEAD = '{"type":"content_block_delta","index":';
const TEXT_DELTA_MID = ',"delta":{"type":"text_delta","text":"';
/** The block index of the last text delta textDelta() read. */
let deltaIndex = -1;

/**
 * The text of a text delta's data as Anthropic writes it,
 * `{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}`
 * (trailing whitespace allowed), with its block index in `deltaIndex`; undefined
 * for anything else, which is parsed in full. It accepts only data that
 * JSON.parse would read as exactly that object: a string with a raw control
 * character, or any other shape, goes to the full parse (and its errors).
 */
export function textDelta(data: string): string | undefined {
  if (!data.startsWith(TEXT_DELTA_HEAD)) return undefined;
  let i = TEXT_DELTA_HEAD.length;
  const digits = i;
  let index = 0;
  for (let c = data.charCodeAt(i); c >= 48 && c <= 57 && i - digits < 9; c = data.charCodeAt(++i)) index = index * 10 + (c - 48);
  // A number JSON reads: digits, no leading zero.
  if (i === digits || (i - digits > 1 && data.charCodeAt(digits) === 48) || !data.startsWith(TEXT_DELTA_MID, i)) return undefined;
  const open = i + TEXT_DELTA_MID.length - 1;
  let escaped = false;
  let close = -1;
  for (let j = open + 1; j < data.length; j++) {
    const c = data.charCodeAt(j);
    if (c === 34) {
      close = j;
      break;
    }
    if (c < 32) return undefined;
    if (c === 92) {
      escaped = true;
      j++; // the escaped character (an escaped quote does not end the string)
    }
  }
  if (close === -1 || data.charCodeAt(close + 1) !== 125 || data.charCodeAt(close + 2) !== 125) return undefined;
  for (let j = close + 3; j < data.length; j++) {
    const c = data.charCodeAt(j);
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return undefined;
  }
  let text: string;
  if (!escaped) text = data.slice(open + 1, close);
  else
    try {
      text = JSON.parse(data.slice(open, close + 1)) as string;
    } catch {
      return undefined;
    }
  deltaIndex = index;
  return text;
}

/**
 * A Messages API stream passed through as parsed events (the same-API path of
 * POST /v1/messages), ending at message_stop or at an `error` event. An
 * `error` event before anything else fails the attempt (it falls back, as an
 * error status would); after that it goes to the client as it came.
 */
export function messagesEvents(events: AsyncIterable<SSEEvent>): MappedEvents<JsonEvent> {
  let first = true;
  return new MappedEvents(events, {
    step(ev, out) {
      const data = parseEventJson<Record<string, unknown>>(ev.data);
      const type = typeof data.type === 'string' ? data.type : (ev.event ?? '');
      if (type === 'error' && first) throw streamError(data.error as { type?: string; message?: string } | undefined);
      first = false;
      out.push({ event: ev.event, data });
      return type === 'message_stop' || type === 'error';
    },
    end() {},
  });
}
