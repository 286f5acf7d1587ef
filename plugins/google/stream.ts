// Gemini streamGenerateContent?alt=sse events -> chat.completion.chunk objects,
// one upstream event at a time (never buffered).
//
// Every event is a whole GenerateContentResponse holding only the new parts;
// usageMetadata is cumulative (the last one counts); finishReason comes on the
// last event, and the connection then closes: there is no terminator
// (shared/fixtures/WIRE-FORMATS.md section 5, gemini/*.chunks.txt). A
// `data: {"error":...}` event is a failure mid-stream.
//
// thoughtSignature values are gathered and sent once, in the finish chunk's
// delta.reasoning_details: clients that merge deltas with Object.assign (the
// openai SDK's stream helper) would otherwise keep only the last one.
import type { ChatChunk, ChunkDelta, FinishReason, ReasoningDetail, ChatUsage } from '../../src/types.js';
import type { SSEEvent } from '../../src/sse.js';
import { UpstreamError, parseEventJson } from '../../src/provider.js';
import type { GeminiErrorBody, GenerateContentResponse } from './wire.js';
import { streamError } from './errors.js';
import { completionId, mapFinish, mapLogprobs, mapUsage, signatureDetail, toolCallId, codeText } from './response.js';

export interface StreamOptions {
  model: string;
  includeUsage: boolean;
}

interface ChoiceState {
  started: boolean;
  toolCalls: number;
  textSignature?: string;
  details: ReasoningDetail[];
  finished: boolean;
}

export async function* geminiChunks(events: AsyncIterable<SSEEvent>, opts: StreamOptions): AsyncGenerator<ChatChunk> {
  let id: string | undefined;
  const created = Math.floor(Date.now() / 1000);
  const choices = new Map<number, ChoiceState>();
  let usage: ChatUsage | undefined;

  const chunk = (index: number, delta: ChunkDelta, finish: FinishReason | null = null, logprobs?: unknown): ChatChunk => {
    const c: ChatChunk = { id: id!, object: 'chat.completion.chunk', created, model: opts.model, system_fingerprint: null, choices: [{ index, delta, finish_reason: finish, logprobs: logprobs ?? null }] };
    return c;
  };
  const stateOf = (index: number): ChoiceState => {
    let s = choices.get(index);
    if (!s) choices.set(index, (s = { started: false, toolCalls: 0, details: [], finished: false }));
    return s;
  };
  /** The first delta of a choice carries the role. */
  const open = (s: ChoiceState, delta: ChunkDelta): ChunkDelta => {
    if (s.started) return delta;
    s.started = true;
    return { role: 'assistant', ...delta };
  };

  for await (const ev of events) {
    const res = parseEventJson<GenerateContentResponse & GeminiErrorBody>(ev.data);
    if (res.error) throw streamError(res);
    id ??= completionId(res.responseId);
    if (res.usageMetadata) usage = mapUsage(res.usageMetadata);

    const candidates = res.candidates ?? [];
    if (!candidates.length && res.promptFeedback?.blockReason) {
      const s = stateOf(0);
      if (!s.finished) {
        s.finished = true;
        yield chunk(0, open(s, { content: '' }), 'content_filter');
      }
      continue;
    }
    for (const [pos, cand] of candidates.entries()) {
      const index = cand.index ?? pos;
      const s = stateOf(index);
      const logprobs = mapLogprobs(cand.logprobsResult);
      let logprobsSent = false;
      for (const p of cand.content?.parts ?? []) {
        if (p.functionCall) {
          // Calls arrive whole: one delta with id, name and complete arguments.
          const callId = p.functionCall.id || toolCallId();
          if (p.thoughtSignature) s.details.push(signatureDetail(p.thoughtSignature, callId));
          yield chunk(index, open(s, { content: null, tool_calls: [{ index: s.toolCalls++, id: callId, type: 'function', function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } }] }));
          continue;
        }
        if (p.thoughtSignature) s.textSignature ??= p.thoughtSignature;
        const text = p.thought ? undefined : (p.text ?? codeText(p));
        if (p.thought && p.text) yield chunk(index, open(s, { reasoning_content: p.text }));
        else if (text) {
          yield chunk(index, open(s, { content: text }), null, logprobs && !logprobsSent ? { content: logprobs, refusal: null } : undefined);
          logprobsSent = true;
        }
      }
      if (cand.finishReason && !s.finished) {
        s.finished = true;
        const details = s.textSignature ? [signatureDetail(s.textSignature), ...s.details] : s.details;
        const delta: ChunkDelta = details.length ? { reasoning_details: details } : {};
        yield chunk(index, open(s, s.started ? delta : { content: '', ...delta }), mapFinish(cand.finishReason, s.toolCalls > 0));
      }
    }
  }

  if (!id) throw new UpstreamError(502, { message: 'The provider closed the stream without sending an event.', type: 'api_error', param: null, code: 'upstream_stream_incomplete' });
  if (![...choices.values()].some((s) => s.finished) || [...choices.values()].some((s) => !s.finished)) {
    // The connection closed before finishReason: a broken stream must not look finished.
    throw new UpstreamError(502, { message: 'The provider closed the stream before it finished (no finishReason).', type: 'api_error', param: null, code: 'upstream_stream_incomplete' });
  }
  if (opts.includeUsage && usage) yield { id, object: 'chat.completion.chunk', created, model: opts.model, system_fingerprint: null, choices: [], usage };
}
