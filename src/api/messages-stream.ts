// Messages API streams, event by event (never buffered whole), with the
// event sequence of https://docs.anthropic.com/en/docs/build-with-claude/streaming:
// message_start, then per content block content_block_start /
// content_block_delta... / content_block_stop, then message_delta (stop
// reason, usage) and message_stop; `ping` while the upstream is silent.
//
// - Translated targets: chat IR chunks become that sequence. Every fragment of
//   a tool call's arguments is one input_json_delta; reasoning text is a
//   thinking block, closed with a signature_delta carrying the gateway's
//   signature of the reasoning state known then (signed blocks that arrive
//   later, as Gemini's thought signature on its last chunk, follow in a
//   thinking block of their own at the end).
// - Targets that serve the Messages API: the upstream events pass through
//   with `message.model` patched.
// A stream that breaks ends with an `error` event, never with message_stop.
import type { ChatChunk, ChatUsage, FinishReason, ReasoningDetail } from '../types.js';
import type { ErrorBody } from '../errors.js';
import { BatchIterator, batchesOf } from '../stream/batches.js';
import type { JsonEvent } from '../stream/mapped.js';
import { MappedFrames, namedEventFrames } from '../respond.js';
import { gatewaySignature, messageId, stopReason, usageFromChat, type MessagesUsage } from './messages-map.js';

export type MessageEvent = { type: string; [k: string]: unknown };

/** How long an upstream may stay silent before the client gets a `ping` (proxies drop idle streams). */
export const PING_INTERVAL_MS = { value: 10_000 };

export interface MessageStreamHooks {
  /** Runs the finalizers on `{usage}` (analytics, debug); returns what they added to show the client (debug). */
  finish(usage: MessagesUsage): Record<string, unknown> | undefined;
  /** The Anthropic error body for a failure mid-stream. */
  errorBody(err: unknown): { type: string; message: string };
  /** A provider's own error message, as the client may see it (its credentials cut). */
  redact?(message: string): string;
  /** The usage reported so far (message_start), for a stream cut before its end (src/usage.ts). */
  progress?(usage: MessagesUsage): void;
  /** A translated target's chat usage, as the provider reported it (reasoning tokens included). */
  chatUsage?(usage: ChatUsage): void;
}

type Open = { kind: 'text' | 'thinking'; index: number } | { kind: 'tool'; index: number; tool: number };

/** State of one translated stream; each method returns the events to send, in order. */
class ChatToMessages {
  private next = 0;
  private open: Open | undefined;
  private readonly tools = new Map<number, { index: number; args: string; closed: boolean }>();
  private details: ReasoningDetail[] = [];
  private signedUpTo = 0;
  private finish: FinishReason | null = null;
  private usage: ChatUsage | null = null;

  constructor(
    private readonly model: string,
    private readonly family: string,
  ) {}

  start(): MessageEvent {
    return {
      type: 'message_start',
      message: {
        id: messageId(),
        type: 'message',
        role: 'assistant',
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // Translated targets report usage at the end (message_delta carries it all).
        usage: usageFromChat(this.usage),
      },
    };
  }

  /** The chat usage the target reported, if it did. */
  reportedUsage(): ChatUsage | null {
    return this.usage;
  }

  chunk(c: ChatChunk, out: MessageEvent[]): void {
    if (c.usage) this.usage = c.usage;
    const choice = c.choices?.[0];
    if (!choice) return;
    const d = choice.delta ?? {};
    if (d.reasoning_details?.length) this.details.push(...d.reasoning_details);
    if (d.reasoning_content) {
      const index = this.ensure('thinking', out);
      out.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: d.reasoning_content } });
    }
    const text = d.content || d.refusal;
    if (text) {
      const index = this.ensure('text', out);
      out.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text } });
    }
    for (const tc of d.tool_calls ?? []) {
      let slot = this.tools.get(tc.index);
      if (!slot) {
        this.close(out);
        slot = { index: this.next++, args: '', closed: false };
        this.tools.set(tc.index, slot);
        this.open = { kind: 'tool', index: slot.index, tool: tc.index };
        out.push({ type: 'content_block_start', index: slot.index, content_block: { type: 'tool_use', id: tc.id || `toolu_${messageId().slice(6)}`, name: tc.function?.name ?? '', input: {} } });
      }
      const frag = tc.function?.arguments;
      if (frag) {
        slot.args += frag;
        out.push({ type: 'content_block_delta', index: slot.index, delta: { type: 'input_json_delta', partial_json: frag } });
      }
    }
    if (choice.finish_reason) this.finish = choice.finish_reason;
  }

  /** The open block's index if it is of this kind; else the open one is closed and a new one started. */
  private ensure(kind: 'text' | 'thinking', out: MessageEvent[]): number {
    if (this.open?.kind === kind) return this.open.index;
    this.close(out);
    const index = this.next++;
    this.open = { kind, index };
    out.push({ type: 'content_block_start', index, content_block: kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' } });
    return index;
  }

  private close(out: MessageEvent[]): void {
    const o = this.open;
    if (!o) return;
    this.open = undefined;
    if (o.kind === 'thinking') out.push(this.signature(o.index));
    if (o.kind === 'tool') {
      const slot = this.tools.get(o.tool)!;
      slot.closed = true;
      // A call without argument fragments means {}: give the client the object it would have parsed.
      if (!slot.args) out.push({ type: 'content_block_delta', index: o.index, delta: { type: 'input_json_delta', partial_json: '{}' } });
    }
    out.push({ type: 'content_block_stop', index: o.index });
  }

  /** The signature_delta for a thinking block: the reasoning state received so far. */
  private signature(index: number): MessageEvent {
    const details = this.details.slice(this.signedUpTo);
    this.signedUpTo = this.details.length;
    return { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: gatewaySignature(this.family, details) } };
  }

  end(out: MessageEvent[]): { stop_reason: string; usage: MessagesUsage } {
    this.close(out);
    if (this.details.length > this.signedUpTo) {
      // Signed state that came after the thinking text (or without any): a block of its own.
      const index = this.next++;
      out.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
      out.push(this.signature(index));
      out.push({ type: 'content_block_stop', index });
    }
    return { stop_reason: stopReason(this.finish), usage: usageFromChat(this.usage) };
  }
}

const PING: MessageEvent = { type: 'ping' };

/**
 * A batch source over upstream batches with pings: when no upstream batch
 * arrived for a whole PING_INTERVAL_MS, the pending read yields a ping and
 * stays pending for the next pull. One interval timer per stream (not one
 * timer per batch: the hot path pays a Promise.race only).
 */
abstract class PingingEvents<S> extends BatchIterator<MessageEvent> {
  private pending: Promise<{ b: S[] | null }> | undefined;
  private ping: Promise<'ping'> | undefined;
  private firePing: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private quiet = false;

  constructor(private readonly read: () => Promise<S[] | null>) {
    super();
  }

  /** The next upstream batch, or 'ping' after a silence. */
  protected async upstream(): Promise<S[] | null | 'ping'> {
    if (!this.timer) {
      this.timer = setInterval(() => {
        if (this.quiet && this.firePing) {
          const fire = this.firePing;
          this.firePing = undefined;
          this.ping = undefined;
          fire();
        }
        this.quiet = true;
      }, PING_INTERVAL_MS.value);
      this.timer.unref();
    }
    this.pending ??= this.read().then((b) => ({ b }));
    this.ping ??= new Promise<'ping'>((resolve) => (this.firePing = () => resolve('ping')));
    const r = await Promise.race([this.pending, this.ping]);
    if (r === 'ping') return r;
    this.pending = undefined;
    this.quiet = false;
    return r.b;
  }

  /** No more reads: the timer goes. */
  protected quit(): void {
    clearInterval(this.timer);
    this.firePing = undefined;
  }
}

/** Chat IR chunks (already primed) as Messages events. */
export class ChatToMessageEvents extends PingingEvents<ChatChunk> {
  private readonly tr: ChatToMessages;
  private readonly chunks: AsyncIterator<ChatChunk>;
  private state: 'new' | 'open' | 'done' = 'new';

  constructor(
    chunks: AsyncIterable<ChatChunk>,
    init: { model: string; family: string },
    private readonly hooks: MessageStreamHooks,
  ) {
    const it = chunks[Symbol.asyncIterator]();
    super(batchesOf(it));
    this.chunks = it;
    this.tr = new ChatToMessages(init.model, init.family);
  }

  protected async pull(): Promise<MessageEvent[] | null> {
    if (this.state === 'done') return null;
    const out: MessageEvent[] = [];
    let started = this.state === 'open';
    this.state = 'open';
    for (;;) {
      let batch: ChatChunk[] | null | 'ping';
      try {
        batch = await this.upstream();
      } catch (err) {
        this.state = 'done';
        this.quit();
        void this.chunks.return?.();
        if (!started) out.push(this.tr.start());
        out.push({ type: 'error', error: this.hooks.errorBody(err) });
        return out;
      }
      if (batch === 'ping') {
        if (!started) out.push(this.tr.start());
        out.push(PING);
        return out;
      }
      if (batch === null) {
        this.state = 'done';
        this.quit();
        if (!started) out.push(this.tr.start());
        const { stop_reason, usage } = this.tr.end(out);
        const reported = this.tr.reportedUsage();
        if (reported) this.hooks.chatUsage?.(reported);
        const extra = this.hooks.finish(usage);
        out.push({ type: 'message_delta', delta: { stop_reason, stop_sequence: null }, usage, ...extra });
        out.push({ type: 'message_stop' });
        return out;
      }
      // message_start goes out with what the first batch says (usage, if the target reports it early).
      const body: MessageEvent[] = [];
      for (const c of batch) this.tr.chunk(c, body);
      if (!started) {
        started = true;
        out.push(this.tr.start());
      }
      out.push(...body);
      if (out.length) return out;
    }
  }

  protected stop(): void {
    this.dropKept();
    this.quit();
    if (this.state === 'done') return;
    this.state = 'done';
    void this.chunks.return?.();
  }
}

/**
 * A native Messages stream passed through: `message.model` patched on
 * message_start, usage gathered for the finalizers (whose `debug` rides on
 * message_delta). Ends at message_stop or at an upstream `error` event; an
 * upstream that stops before either ends with an `error` event.
 */
export class NativeMessageEvents extends PingingEvents<JsonEvent> {
  private readonly events: AsyncIterator<JsonEvent>;
  private state: 'open' | 'done' = 'open';
  private readonly usage: MessagesUsage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };

  constructor(
    events: AsyncIterable<JsonEvent>,
    private readonly model: string,
    private readonly hooks: MessageStreamHooks,
  ) {
    const it = events[Symbol.asyncIterator]();
    super(batchesOf(it));
    this.events = it;
  }

  private overlay(u: unknown): void {
    if (!u || typeof u !== 'object') return;
    for (const [k, v] of Object.entries(u)) if (typeof v === 'number' && k in this.usage) this.usage[k as keyof MessagesUsage] = v;
  }

  protected async pull(): Promise<MessageEvent[] | null> {
    if (this.state === 'done') return null;
    let batch: JsonEvent[] | null | 'ping';
    try {
      batch = await this.upstream();
    } catch (err) {
      return this.fail(err);
    }
    if (batch === 'ping') return [PING];
    if (batch === null) return this.fail(Object.assign(new Error('the provider stream ended before message_stop'), { code: 'EPREMATURE_END' }));
    const out: MessageEvent[] = [];
    for (const { event, data } of batch) {
      const e = data as MessageEvent;
      if (typeof e.type !== 'string') e.type = event ?? 'message';
      if (e.type === 'message_start' && e.message && typeof e.message === 'object') {
        const m = e.message as Record<string, unknown>;
        m.model = this.model;
        this.overlay(m.usage);
        this.hooks.progress?.({ ...this.usage });
      } else if (e.type === 'message_delta') {
        this.overlay(e.usage);
        Object.assign(e, this.hooks.finish({ ...this.usage }));
      }
      if (e.type === 'error' && this.hooks.redact) {
        const error = e.error as { message?: unknown } | undefined;
        if (error && typeof error.message === 'string') error.message = this.hooks.redact(error.message);
      }
      out.push(e);
      if (e.type === 'message_stop' || e.type === 'error') {
        this.close();
        break;
      }
    }
    return out;
  }

  private fail(err: unknown): MessageEvent[] {
    this.close();
    return [{ type: 'error', error: this.hooks.errorBody(err) }];
  }

  private close(): void {
    this.quit();
    if (this.state === 'done') return;
    this.state = 'done';
    void this.events.return?.();
  }

  protected stop(): void {
    this.dropKept();
    this.close();
  }
}

/** Events to SSE frames: `event: <type>` plus the JSON, as Anthropic writes them. */
export const messageFrames: (events: AsyncIterable<MessageEvent>) => MappedFrames<MessageEvent> = namedEventFrames;

export type { ErrorBody };
