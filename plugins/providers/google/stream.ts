// Gemini streamGenerateContent?alt=sse events -> chat.completion.chunk objects,
// one upstream event at a time (never buffered).
//
// Every event is a whole GenerateContentResponse holding only the new parts;
// usageMetadata is cumulative (the last one counts); finishReason comes on the
// last event, and the connection then closes: there is no terminator
// (https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent). A
// `data: {"error":...}` event is a failure mid-stream.
//
// thoughtSignature values are gathered and sent once, in the finish chunk's
// delta.reasoning_details: clients that merge deltas with Object.assign (the
// openai SDK's stream helper) would otherwise keep only the last one.
import type { ChatChunk, ChunkDelta, FinishReason, ReasoningDetail, ChatUsage } from '../../../src/types.js';
import type { SSEEvent } from '../../../src/sse.js';
import { UpstreamError } from '../../../src/provider/errors.js';
import { parseEventJson, MappedEvents, type EventMapper } from '../../../src/stream/mapped.js';
import type { GeminiErrorBody, GenerateContentResponse } from './wire.js';
import { streamError } from './errors.js';
import { completionId, mapFinish, mapLogprobs, mapUsage, signatureDetail, toolCallId, codeText, addSearchQueries, withSearches } from './response.js';

export interface StreamOptions {
  model: string;
  includeUsage: boolean;
  reportUsage?: (u: ChatUsage) => void;
}

interface ChoiceState {
  started: boolean;
  toolCalls: number;
  textSignature?: string;
  details: ReasoningDetail[];
  finished: boolean;
}

/** The chunks of a Gemini stream, mapped event by event as they arrive (see GeminiChunkMapper). */
export function geminiChunks(events: AsyncIterable<SSEEvent>, opts: StreamOptions): MappedEvents<ChatChunk> {
  return new MappedEvents(events, new GeminiChunkMapper(opts));
}

export class GeminiChunkMapper implements EventMapper<ChatChunk> {
  private id: string | undefined;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly choices = new Map<number, ChoiceState>();
  private usage: ChatUsage | undefined;
  /** The Google Search queries run so far (grounding metadata comes with the last events). */
  private searches: Set<string> | undefined;

  constructor(private readonly opts: StreamOptions) {}

  private chunk(index: number, delta: ChunkDelta, finish: FinishReason | null = null, logprobs?: unknown): ChatChunk {
    return { id: this.id!, object: 'chat.completion.chunk', created: this.created, model: this.opts.model, system_fingerprint: null, choices: [{ index, delta, finish_reason: finish, logprobs: logprobs ?? null }] };
  }

  private stateOf(index: number): ChoiceState {
    let s = this.choices.get(index);
    if (!s) this.choices.set(index, (s = { started: false, toolCalls: 0, details: [], finished: false }));
    return s;
  }

  /** The first delta of a choice carries the role. */
  private open(s: ChoiceState, delta: ChunkDelta): ChunkDelta {
    if (s.started) return delta;
    s.started = true;
    return { role: 'assistant', ...delta };
  }

  step(ev: SSEEvent, out: ChatChunk[]): boolean {
    const res = parseEventJson<GenerateContentResponse & GeminiErrorBody>(ev.data);
    if (res.error) throw streamError(res);
    this.id ??= completionId(res.responseId);
    this.searches = addSearchQueries(res.candidates, this.searches);
    if (res.usageMetadata) {
      const u = mapUsage(res.usageMetadata);
      this.usage = u && this.searches ? withSearches(u, this.searches.size) : u;
      // Cumulative: what a stream cut now has cost so far (ProviderCall.reportUsage).
      if (this.usage) this.opts.reportUsage?.(this.usage);
    }

    const candidates = res.candidates ?? [];
    if (!candidates.length && res.promptFeedback?.blockReason) {
      const s = this.stateOf(0);
      if (!s.finished) {
        s.finished = true;
        out.push(this.chunk(0, this.open(s, { content: '' }), 'content_filter'));
      }
      return false;
    }
    for (const [pos, cand] of candidates.entries()) {
      const index = cand.index ?? pos;
      const s = this.stateOf(index);
      const logprobs = mapLogprobs(cand.logprobsResult);
      let logprobsSent = false;
      for (const p of cand.content?.parts ?? []) {
        if (p.functionCall) {
          // Calls arrive whole: one delta with id, name and complete arguments.
          const callId = p.functionCall.id || toolCallId();
          if (p.thoughtSignature) s.details.push(signatureDetail(p.thoughtSignature, callId));
          out.push(this.chunk(index, this.open(s, { content: null, tool_calls: [{ index: s.toolCalls++, id: callId, type: 'function', function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } }] })));
          continue;
        }
        if (p.thoughtSignature) s.textSignature ??= p.thoughtSignature;
        const text = p.thought ? undefined : (p.text ?? codeText(p));
        if (p.thought && p.text) out.push(this.chunk(index, this.open(s, { reasoning_content: p.text })));
        else if (text) {
          out.push(this.chunk(index, this.open(s, { content: text }), null, logprobs && !logprobsSent ? { content: logprobs, refusal: null } : undefined));
          logprobsSent = true;
        }
      }
      if (cand.finishReason && !s.finished) {
        s.finished = true;
        const details = s.textSignature ? [signatureDetail(s.textSignature), ...s.details] : s.details;
        const delta: ChunkDelta = details.length ? { reasoning_details: details } : {};
        out.push(this.chunk(index, this.open(s, s.started ? delta : { content: '', ...delta }), mapFinish(cand.finishReason, s.toolCalls > 0)));
      }
    }
    // Gemini has no terminator: the stream ends with the connection (end()).
    return false;
  }

  end(out: ChatChunk[]): void {
    if (!this.id) throw new UpstreamError(502, { message: 'The provider closed the stream without sending an event.', type: 'api_error', param: null, code: 'upstream_stream_incomplete' });
    const states = [...this.choices.values()];
    if (!states.some((s) => s.finished) || states.some((s) => !s.finished)) {
      // The connection closed before finishReason: a broken stream must not look finished.
      throw new UpstreamError(502, { message: 'The provider closed the stream before it finished (no finishReason).', type: 'api_error', param: null, code: 'upstream_stream_incomplete' });
    }
    if (this.opts.includeUsage && this.usage) out.push({ id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.opts.model, system_fingerprint: null, choices: [], usage: this.usage });
  }
}
