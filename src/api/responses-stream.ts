// Responses streams, event by event (never buffered whole).
//
// - Translated targets: chat IR chunks become the OpenAI Responses event
//   sequence (docs/responses.md "Streaming"; event shapes from
//   https://platform.openai.com/docs/api-reference/responses-streaming):
//   response.created, response.in_progress, then per output item
//   output_item.added … (content_part / output_text / refusal /
//   function_call_arguments / reasoning_summary events) … output_item.done,
//   then exactly one terminal event carrying the whole response.
// - OpenAI-family targets: upstream events pass through with `response.model`
//   patched to the gateway id; sequence numbers are only filled in when the
//   upstream lacks them (recordings before mid-2025).
// A stream that breaks ends with an `error` event then `response.failed`,
// never with `response.completed`.
import type { ChatChunk, ChatUsage, FinishReason, ReasoningDetail } from '../types.js';
import type { ErrorBody } from '../errors.js';
import { TransportError } from '../upstream/errors.js';
import { BatchIterator, batchesOf } from '../stream/batches.js';
import type { JsonEvent } from '../stream/mapped.js';
import { MappedFrames, namedEventFrames } from '../respond.js';
import {
  newId,
  responseShell,
  usageFromChat,
  statusOf,
  reasoningItem,
  outputTextPart,
  fillUsage,
  responseError,
  type Item,
  type Part,
  type ResponseEcho,
  type ResponseObject,
} from './responses-map.js';

/** The Responses API events that end a stream (provider plugins of the same API stop reading there). */
export const RESPONSES_TERMINAL: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

export type ResponseEvent = { type: string; sequence_number: number; [k: string]: unknown };

export interface StreamHooks {
  /** The final response, before the terminal event goes out: store it, attach debug. */
  finish(response: ResponseObject): void | Promise<void>;
  /** The failed response, before `response.failed` goes out (debug). */
  fail(response: ResponseObject): void;
  /** The envelope for a failure (midStreamError). */
  errorBody(err: unknown): ErrorBody;
}

export interface StreamInit {
  id: string;
  created_at: number;
  model: string;
  echo: ResponseEcho;
}

/**
 * State of one translated stream; each method returns the events to send, in
 * order. A response has at most one reasoning item: it opens with the first
 * reasoning text (or, without any, at the end), and its `output_item.done`
 * waits for the end of the stream because providers send the signed blocks
 * late: Gemini puts the thought signature on the chunk that carries
 * finishReason, after the text (plugins/providers/google/stream.ts). Its summary part is
 * closed as soon as the answer starts, so clients see thinking end there.
 */
class ChatStreamTranslator {
  private seq = 0;
  private output: Item[] = [];
  private next = 0;
  private reasoning?: { index: number; id: string; parts: string[]; partOpen: boolean };
  private details: ReasoningDetail[] = [];
  private message?: { index: number; id: string; parts: Part[] };
  private tools = new Map<number, { index: number; item: Item }>();
  private finishReason: FinishReason | null = null;
  private usage: ChatUsage | null = null;
  private opened = { message: false, tool: false };

  constructor(private init: StreamInit) {}

  private ev(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.seq++, ...fields };
  }

  private shell(status: 'in_progress' | 'completed' | 'incomplete' | 'failed', extra: Partial<Parameters<typeof responseShell>[1]> = {}): ResponseObject {
    return responseShell(this.init.echo, { id: this.init.id, created_at: this.init.created_at, model: this.init.model, status, output: [], usage: null, ...extra });
  }

  start(): ResponseEvent[] {
    return [this.ev('response.created', { response: this.shell('in_progress') }), this.ev('response.in_progress', { response: this.shell('in_progress') })];
  }

  chunk(c: ChatChunk): ResponseEvent[] {
    const out: ResponseEvent[] = [];
    if (c.usage) this.usage = c.usage;
    const choice = c.choices?.[0];
    if (!choice) return out;
    const d = choice.delta ?? {};
    if (d.reasoning_details?.length) this.details.push(...d.reasoning_details);
    if (d.reasoning_content) {
      if (!this.reasoning) out.push(this.openReasoning());
      const r = this.reasoning!;
      if (!r.partOpen) {
        r.partOpen = true;
        r.parts.push('');
        out.push(this.ev('response.reasoning_summary_part.added', { item_id: r.id, output_index: r.index, summary_index: r.parts.length - 1, part: { type: 'summary_text', text: '' } }));
      }
      r.parts[r.parts.length - 1] += d.reasoning_content;
      out.push(this.ev('response.reasoning_summary_text.delta', { item_id: r.id, output_index: r.index, summary_index: r.parts.length - 1, delta: d.reasoning_content }));
    }
    if (d.content) out.push(...this.text('output_text', d.content));
    if (d.refusal) out.push(...this.text('refusal', d.refusal));
    if (d.tool_calls?.length) {
      out.push(...this.closeSummaryPart());
      if (this.message) out.push(...this.closeMessage('completed'));
      for (const tc of d.tool_calls) {
        let slot = this.tools.get(tc.index);
        if (!slot) {
          const item: Item = { id: newId('fc'), type: 'function_call', status: 'in_progress', arguments: '', call_id: tc.id || newId('call'), name: tc.function?.name ?? '' };
          slot = { index: this.next++, item };
          this.tools.set(tc.index, slot);
          this.opened.tool = true;
          out.push(this.ev('response.output_item.added', { output_index: slot.index, item: { ...item } }));
        } else if (tc.function?.name && !slot.item.name) slot.item.name = tc.function.name;
        const delta = tc.function?.arguments;
        if (delta) {
          slot.item.arguments += delta;
          out.push(this.ev('response.function_call_arguments.delta', { item_id: slot.item.id, output_index: slot.index, delta }));
        }
      }
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    return out;
  }

  private openReasoning(): ResponseEvent {
    const id = newId('rs');
    this.reasoning = { index: this.next++, id, parts: [], partOpen: false };
    return this.ev('response.output_item.added', { output_index: this.reasoning.index, item: { id, type: 'reasoning', summary: [] } });
  }

  private closeSummaryPart(): ResponseEvent[] {
    const r = this.reasoning;
    if (!r?.partOpen) return [];
    r.partOpen = false;
    const summary_index = r.parts.length - 1;
    const text = r.parts[summary_index];
    return [
      this.ev('response.reasoning_summary_text.done', { item_id: r.id, output_index: r.index, summary_index, text }),
      this.ev('response.reasoning_summary_part.done', { item_id: r.id, output_index: r.index, summary_index, part: { type: 'summary_text', text } }),
    ];
  }

  private closeReasoning(): ResponseEvent[] {
    const out = this.closeSummaryPart();
    if (!this.reasoning && this.details.length) out.push(this.openReasoning());
    const r = this.reasoning;
    if (!r) return out;
    this.reasoning = undefined;
    const item = reasoningItem(r.parts, this.details, r.id);
    this.output[r.index] = item;
    out.push(this.ev('response.output_item.done', { output_index: r.index, item }));
    return out;
  }

  /** Open the message item and a content part of this kind if needed; returns the part's index. */
  private ensurePart(kind: 'output_text' | 'refusal', out: ResponseEvent[]): number {
    out.push(...this.closeSummaryPart());
    if (!this.message) {
      const id = newId('msg');
      this.message = { index: this.next++, id, parts: [] };
      this.opened.message = true;
      out.push(this.ev('response.output_item.added', { output_index: this.message.index, item: { id, type: 'message', status: 'in_progress', content: [], role: 'assistant' } }));
    }
    const m = this.message;
    let ci = m.parts.length - 1;
    if (ci < 0 || m.parts[ci].type !== kind) {
      if (ci >= 0) out.push(...this.closePart(ci));
      m.parts.push(kind === 'output_text' ? outputTextPart('') : { type: 'refusal', refusal: '' });
      ci = m.parts.length - 1;
      out.push(this.ev('response.content_part.added', { item_id: m.id, output_index: m.index, content_index: ci, part: { ...m.parts[ci] } }));
    }
    return ci;
  }

  private text(kind: 'output_text' | 'refusal', delta: string): ResponseEvent[] {
    const out: ResponseEvent[] = [];
    const ci = this.ensurePart(kind, out);
    const m = this.message!;
    const part = m.parts[ci];
    if (kind === 'output_text') {
      part.text += delta;
      out.push(this.ev('response.output_text.delta', { item_id: m.id, output_index: m.index, content_index: ci, delta, logprobs: [] }));
    } else {
      part.refusal += delta;
      out.push(this.ev('response.refusal.delta', { item_id: m.id, output_index: m.index, content_index: ci, delta }));
    }
    return out;
  }

  private closePart(ci: number): ResponseEvent[] {
    const m = this.message!;
    const part = m.parts[ci];
    const base = { item_id: m.id, output_index: m.index, content_index: ci };
    const done =
      part.type === 'output_text'
        ? this.ev('response.output_text.done', { ...base, text: part.text, logprobs: [] })
        : this.ev('response.refusal.done', { ...base, refusal: part.refusal });
    return [done, this.ev('response.content_part.done', { ...base, part: { ...part } })];
  }

  private closeMessage(status: 'completed' | 'incomplete'): ResponseEvent[] {
    const m = this.message!;
    const out = m.parts.length ? this.closePart(m.parts.length - 1) : [];
    this.message = undefined;
    const item: Item = { id: m.id, type: 'message', status, content: m.parts, role: 'assistant' };
    this.output[m.index] = item;
    out.push(this.ev('response.output_item.done', { output_index: m.index, item }));
    return out;
  }

  /** Close every open item. Returns the closing events. */
  end(): ResponseEvent[] {
    const out: ResponseEvent[] = [];
    const { status } = statusOf(this.finishReason);
    // As the non-streamed mapping: a turn without text or tool calls still has a (empty) message.
    if (!this.opened.message && !this.opened.tool) this.ensurePart('output_text', out);
    out.push(...this.closeSummaryPart());
    if (this.message) out.push(...this.closeMessage(status === 'incomplete' ? 'incomplete' : 'completed'));
    for (const slot of [...this.tools.values()].sort((a, b) => a.index - b.index)) {
      const item = { ...slot.item, status: 'completed' };
      this.output[slot.index] = item;
      out.push(this.ev('response.function_call_arguments.done', { item_id: item.id, output_index: slot.index, arguments: item.arguments }));
      out.push(this.ev('response.output_item.done', { output_index: slot.index, item }));
    }
    this.tools.clear();
    out.push(...this.closeReasoning());
    return out;
  }

  final(): ResponseObject {
    const { status, incomplete_details } = statusOf(this.finishReason);
    return this.shell(status, { output: this.output.filter(Boolean), usage: usageFromChat(this.usage), incomplete_details });
  }

  terminal(response: ResponseObject): ResponseEvent {
    return this.ev(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response });
  }

  failed(err: ErrorBody): { response: ResponseObject; events: (response: ResponseObject) => ResponseEvent[] } {
    const response = this.shell('failed', { output: this.output.filter(Boolean), usage: usageFromChat(this.usage), error: responseError(err) });
    return {
      response,
      events: (r) => [this.ev('error', { code: err.code, message: err.message, param: err.param }), this.ev('response.failed', { response: r })],
    };
  }
}

/** Chat IR chunks (already primed) to Responses events. */
export function chatToResponseEvents(chunks: AsyncIterable<ChatChunk>, init: StreamInit, hooks: StreamHooks): ChatToResponseEvents {
  return new ChatToResponseEvents(chunks, init, hooks);
}

/**
 * The translation as a batch source: the events of every chunk that arrived
 * together (a provider's MappedEvents batch) come as one batch, which the
 * writer frames and writes at once. The order of events is that of the
 * translator: start, the chunks', end (written before the store is updated),
 * then the terminal event; a failing source ends with error and
 * response.failed.
 */
export class ChatToResponseEvents extends BatchIterator<ResponseEvent> {
  private readonly tr: ChatStreamTranslator;
  private readonly chunks: AsyncIterator<ChatChunk>;
  private readonly read: () => Promise<ChatChunk[] | null>;
  private state: 'new' | 'open' | 'ended' | 'done' = 'new';

  constructor(
    chunks: AsyncIterable<ChatChunk>,
    init: StreamInit,
    private readonly hooks: StreamHooks,
  ) {
    super();
    this.tr = new ChatStreamTranslator(init);
    this.chunks = chunks[Symbol.asyncIterator]();
    this.read = batchesOf(this.chunks);
  }

  protected async pull(): Promise<ResponseEvent[] | null> {
    const out: ResponseEvent[] = [];
    if (this.state === 'new') {
      this.state = 'open';
      out.push(...this.tr.start());
    }
    while (this.state === 'open') {
      let batch: ChatChunk[] | null;
      try {
        batch = await this.read();
        if (batch) for (const c of batch) out.push(...this.tr.chunk(c));
      } catch (err) {
        this.state = 'done';
        void this.chunks.return?.();
        const f = this.tr.failed(this.hooks.errorBody(err));
        this.hooks.fail(f.response);
        out.push(...f.events(f.response));
        return out;
      }
      if (batch === null) {
        this.state = 'ended';
        out.push(...this.tr.end());
      }
      if (out.length) return out;
    }
    if (this.state === 'ended') {
      this.state = 'done';
      const response = this.tr.final();
      await this.hooks.finish(response);
      return [this.tr.terminal(response)];
    }
    return null;
  }

  protected stop(): void {
    this.dropKept();
    if (this.state === 'done') return;
    this.state = 'done';
    void this.chunks.return?.();
  }
}

export interface NativeInit {
  /** The gateway's model id, patched into every `response`. */
  model: string;
  /** When the gateway expanded a stored conversation, the client's previous_response_id to echo. */
  previousResponseId?: string | null;
}

/** Upstream Responses events (OpenAI family) passed through. */
export function nativeResponseEvents(events: AsyncIterable<JsonEvent>, init: NativeInit, hooks: StreamHooks): NativeResponseEvents {
  return new NativeResponseEvents(events, init, hooks);
}

/**
 * The passthrough as a batch source: the upstream events of one batch (a
 * provider's MappedEvents, e.g. jsonEvents) are patched (the gateway's model,
 * the client's previous_response_id, sequence numbers) and come out as one
 * batch. The store is updated before the terminal event goes out, and after
 * the events before it; a failing or cut source ends with error and
 * response.failed.
 */
export class NativeResponseEvents extends BatchIterator<ResponseEvent> {
  private readonly events: AsyncIterator<JsonEvent>;
  private readonly read: () => Promise<JsonEvent[] | null>;
  private seq = -1;
  private snapshot: Record<string, unknown> | undefined;
  private readonly done: Item[] = [];
  /** A terminal event that came after others in its batch: those go out first, then the store is updated and it follows. */
  private terminal: Record<string, unknown> | undefined;
  private state: 'open' | 'done' = 'open';

  constructor(
    events: AsyncIterable<JsonEvent>,
    private readonly init: NativeInit,
    private readonly hooks: StreamHooks,
  ) {
    super();
    this.events = events[Symbol.asyncIterator]();
    this.read = batchesOf(this.events);
  }

  protected async pull(): Promise<ResponseEvent[] | null> {
    if (this.state === 'done') return null;
    try {
      if (this.terminal) return [await this.end(this.terminal)];
      const batch = await this.read();
      if (batch === null) throw new TransportError('the provider ended the stream without a terminal event', 'EPREMATURE_END');
      const out: ResponseEvent[] = [];
      for (const { event, data } of batch) {
        if (this.patch(event, data)) {
          if (!out.length) return [await this.end(data)];
          this.terminal = data;
          return out;
        }
        out.push(data as ResponseEvent);
      }
      return out;
    } catch (err) {
      return this.fail(err);
    }
  }

  /** Patch one upstream event in place; true when it ends the stream. */
  private patch(event: string | undefined, data: Record<string, unknown>): boolean {
    if (typeof data.type !== 'string') data.type = event ?? 'message';
    if (typeof data.sequence_number === 'number') this.seq = data.sequence_number;
    else data.sequence_number = ++this.seq;
    const r = data.response as Record<string, unknown> | undefined;
    if (r && typeof r === 'object') {
      r.model = this.init.model;
      if (this.init.previousResponseId) r.previous_response_id = this.init.previousResponseId;
      this.snapshot = r;
    }
    if (data.type === 'response.output_item.done' && typeof data.output_index === 'number') this.done[data.output_index] = data.item as Item;
    return RESPONSES_TERMINAL.has(data.type as string) && !!r;
  }

  /** The terminal event, once the store has what it ends. */
  private async end(data: Record<string, unknown>): Promise<ResponseEvent> {
    this.terminal = undefined;
    this.close();
    const r = data.response as ResponseObject;
    fillUsage(r as unknown as Record<string, unknown>);
    if (data.type === 'response.failed') this.hooks.fail(r);
    else await this.hooks.finish(r);
    return data as ResponseEvent;
  }

  private fail(err: unknown): ResponseEvent[] {
    this.close();
    const e = this.hooks.errorBody(err);
    const response = { ...(this.snapshot ?? {}), model: this.init.model, status: 'failed', error: responseError(e), output: this.done.filter(Boolean) } as unknown as ResponseObject;
    this.hooks.fail(response);
    return [
      { type: 'error', sequence_number: ++this.seq, code: e.code, message: e.message, param: e.param },
      { type: 'response.failed', sequence_number: ++this.seq, response },
    ];
  }

  /** Nothing more is read: the source (and its connection) is let go. */
  private close(): void {
    if (this.state === 'done') return;
    this.state = 'done';
    void this.events.return?.();
  }

  protected stop(): void {
    this.dropKept();
    this.close();
  }
}

/** Events to SSE frames: `event: <type>` plus the JSON (https://html.spec.whatwg.org/multipage/server-sent-events.html). */
export const responseFrames: (events: AsyncIterable<ResponseEvent>) => MappedFrames<ResponseEvent> = namedEventFrames;
