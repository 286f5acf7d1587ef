// POST /v1/responses (spec 4.1), GET and DELETE /v1/responses/{id},
// GET /v1/responses/{id}/input_items (responses-items.ts).
//
// Per attempt of the fallback chain the target decides the path:
// - a family whose provider plugin serves the Responses API natively
//   (`responses` hook, and the family does not opt out through
//   `families[f].native`) gets the same-API body: model patched, gateway-only
//   fields removed, stored history expanded into `input`;
// - any other family gets the request translated to the chat IR and run
//   through the plugin's `chat`, and the result mapped back (responses-map.ts,
//   responses-stream.ts).
// `stop` has no equivalent in OpenAI's Responses API, so a request with `stop`
// goes through the chat path on OpenAI targets too (the same model, via Chat
// Completions), which honours it.
//
// Stored responses (store defaults to true, as on OpenAI) let a conversation
// continue with `previous_response_id` on any provider: the gateway replays
// the stored items itself, whatever family served the earlier turns.
import type { RequestContext, ProviderPlugin, Outcome } from '../plugin.js';
import type { ChatChunk, ChatCompletion } from '../types.js';
import type { EndpointSpec } from '../server.js';
import { runTargets, primeStream, type CoreServices } from '../dispatch.js';
import type { ProviderConfig } from '../config/schema.js';
import { validate } from '../validate.js';
import { errors, GatewayError, clip, providerSecrets } from '../errors.js';
import { sseFrame } from '../sse.js';
import { runFinalizers, midStreamError } from './common.js';
import { fromChatUsage, fromResponsesUsage, type UsageMeter } from '../usage.js';
import { ResponsesBody, ResponsesCountBody } from './responses-schema.js';
import {
  normalizeInput,
  toChatRequest,
  toNativeBody,
  responseEcho,
  fromChatCompletion,
  fillUsage,
  newId,
  type Item,
  type ResponsesRequest,
  type ResponseObject,
  type Where,
} from './responses-map.js';
import { chatToResponseEvents, nativeResponseEvents, responseFrames, type StreamHooks } from './responses-stream.js';
import { fitContext, countItems } from './responses-truncate.js';
import { countInputTokens } from '../count.js';
import { openResponseStore, StoreError, type ResponseStore } from '../store/responses.js';
import { parseListQuery, pageOf, type ListQuery, type Turn } from './responses-items.js';

export function validateResponses(raw: unknown, ctx: RequestContext): Record<string, unknown> {
  const body = validate(ResponsesBody, raw) as Record<string, unknown>;
  if ((body.reasoning as { generate_summary?: unknown } | null | undefined)?.generate_summary != null)
    ctx.debug.deprecations.push({ param: 'reasoning.generate_summary', message: "'reasoning.generate_summary' is deprecated: use 'reasoning.summary'." });
  return body;
}

/** Does this plugin serve the Responses API natively for this family? */
export function servesResponsesNatively(plugin: ProviderPlugin, family: string): boolean {
  if (typeof plugin.responses !== 'function') return false;
  const native = plugin.families[family]?.native;
  return native ? native.includes('responses') : true;
}

/** The store of one gateway, opened on first use (so a gateway that never stores creates no file). */
class StoreHolder {
  private store?: ResponseStore;
  get(ctx: RequestContext): ResponseStore {
    if (this.store) return this.store;
    try {
      this.store = unavailableAs503(openResponseStore(ctx.config));
    } catch (err) {
      ctx.logger.error({ err, path: ctx.config.storage.responses_db }, 'cannot open the responses store (storage.responses_db)');
      throw new GatewayError(500, 'internal_server_error', 'The response store could not be opened; see the gateway log (storage.responses_db).', { code: 'store_unavailable' });
    }
    return this.store;
  }
  async close() {
    const s = this.store;
    this.store = undefined;
    await s?.close();
  }
}

const WHY: Record<string, string> = { STORE_LOCKED: 'locked by another connection', STORE_BUSY: 'too many operations waiting', STORE_UNAVAILABLE: 'its database is unreachable' };

/**
 * A store whose reads and deletes that could not complete (locked by another
 * process, timed out, too many waiting) fail as a 503 the client can retry,
 * not as a gateway bug. (A write that fails is not an error: see saver.)
 */
function unavailableAs503(store: ResponseStore): ResponseStore {
  const as503 = (err: unknown): never => {
    if (!(err instanceof StoreError)) throw err;
    throw new GatewayError(503, 'service_unavailable_error', `The response store did not answer (${WHY[err.code] ?? 'timed out'}); retry.`, { code: 'store_unavailable' });
  };
  return {
    put: (r) => store.put(r),
    get: (id, owner) => store.get(id, owner).catch(as503),
    chain: (id, owner, max) => store.chain(id, owner, max).catch(as503),
    items: (ids, owner) => store.items(ids, owner).catch(as503),
    delete: (id, owner) => store.delete(id, owner).catch(as503),
    close: () => store.close(),
  };
}

/** The response header of a JSON answer whose response could not be stored (its body says `store: false`). */
export const STORE_FAILED_HEADER = { 'x-gateway-warning': 'store_failed' } as const;

// Owner: a gateway.yaml key by its name (its secret can be rotated and keep its
// responses); a GATEWAY_API_KEYS key by its SHA-256, since its positional name
// (env-1, env-2…) would change hands if the variable were reordered.
const ownerOf = (ctx: RequestContext) =>
  !ctx.client ? '' : ctx.client.source === 'file' ? `key:${ctx.client.name}` : `sha256:${ctx.client.hash.toString('hex')}`;

const MAX_CHAIN = 10_000;

/**
 * The stored turns along a chain of `previous_response_id`s, newest first,
 * starting at `id`: empty when `id` itself is not the owner's; an earlier turn
 * that was deleted ends the chain (the conversation starts after it).
 */
async function storedChain(store: ResponseStore, id: string, owner: string): Promise<{ id: string; input: Item[]; output: Item[] }[]> {
  return (await store.chain(id, owner, MAX_CHAIN)) as unknown as { id: string; input: Item[]; output: Item[] }[];
}

/** The stored conversation behind `previous_response_id`: every turn's input and output items, oldest first. */
async function loadHistory(store: ResponseStore, id: string, owner: string): Promise<Item[]> {
  const turns = await storedChain(store, id, owner);
  if (!turns.length) throw errors.notFound(`Previous response with id '${clip(id)}' not found.`, 'previous_response_id', 'previous_response_not_found');
  const items: Item[] = [];
  for (let i = turns.length - 1; i >= 0; i--) items.push(...turns[i].input, ...turns[i].output);
  return items;
}

/**
 * GET /v1/responses/{id}/input_items: the response's context (the earlier
 * turns of its chain, input and output, then its own input), one page of it.
 */
async function listInputItems(ctx: RequestContext, holder: StoreHolder, id: string): Promise<void> {
  const owner = ownerOf(ctx);
  const store = holder.get(ctx);
  const r = await store.get(id, owner);
  if (!r) throw notFound(id);
  const earlier = r.previous_response_id ? await storedChain(store, r.previous_response_id, owner) : [];
  const turns: Turn[] = earlier.reverse().map((t) => ({ responseId: t.id, items: [...t.input, ...t.output] }));
  turns.push({ responseId: r.id, items: r.input as Item[] });
  ctx.outcome = { kind: 'json', body: pageOf(turns, ctx.body as unknown as ListQuery) };
}

/**
 * Each `item_reference` replaced by the stored output item it names (the
 * owner's responses only), so that every later step, and the input stored for
 * this turn, sees the item itself.
 */
async function resolveReferences(items: Item[], owner: string, store: () => ResponseStore): Promise<Item[]> {
  if (!items.some((it) => it.type === 'item_reference')) return items;
  const found = await store().items(
    items.filter((it) => it.type === 'item_reference').map((it) => String(it.id)),
    owner,
  );
  return items.map((it, i) => {
    if (it.type !== 'item_reference') return it;
    const item = found.get(String(it.id));
    if (!item)
      throw errors.notFound(
        `Item with id '${clip(it.id)}' not found. The gateway keeps the output items of responses created through it with 'store' true, for the key that created them; send the item itself instead.`,
        `input[${i}]`,
        'item_not_found',
      );
    return item as Item;
  });
}

/** This turn's items (references resolved) and the stored history before them, with where each came from. */
async function conversation(ctx: RequestContext, body: ResponsesRequest, owner: string, holder: StoreHolder, store?: ResponseStore) {
  const given = body.input == null ? [] : normalizeInput(body.input);
  const fresh = await resolveReferences(given, owner, () => store ?? holder.get(ctx));
  // A same-API target gets the referenced items themselves, as it gets a replayed history.
  const referenced = fresh !== given;
  const history = body.previous_response_id ? await loadHistory(store ?? holder.get(ctx), body.previous_response_id, owner) : [];
  const items = history.length ? [...history, ...fresh] : fresh;
  // Error messages name the client's field: input[i] for this turn's items.
  const origin = new Map<Item, number>(items.map((it, i) => [it, i]));
  const whereIn =
    (list: Item[]): Where =>
    (i) => {
      const at = origin.get(list[i]) ?? i;
      return at < history.length ? 'previous_response_id' : `input[${at - history.length}]`;
    };
  return { fresh, referenced, history, items, whereIn };
}

/**
 * POST /v1/responses/input_tokens: the input tokens a POST /v1/responses with
 * this body would use on the model (the conversation of `previous_response_id`
 * included, and with `truncation: 'auto'` what truncation would keep).
 * Same-API targets count through the provider's own endpoint with the body
 * they would get; others count the chat request they would get (src/count.ts).
 */
async function countResponseTokens(ctx: RequestContext, core: CoreServices, holder: StoreHolder): Promise<void> {
  const body = ctx.body as ResponsesRequest;
  const { referenced, history, items, whereIn } = await conversation(ctx, body, ownerOf(ctx), holder);
  if (!items.length) throw errors.invalid("Missing required parameter: 'input'.", 'input', 'missing_required_parameter');
  const normalize = body.extra?.normalize !== false;
  const { input_tokens } = await countInputTokens(ctx, core, async (attempt, plugin) => {
    const model = attempt.target.model;
    const tokenizer = plugin.families[attempt.provider.family]?.tokenizer;
    const fit =
      body.truncation === 'auto'
        ? await fitContext(items, { modelId: model.id, contextWindow: model.context_window, truncation: 'auto', tokenizer, instructions: body.instructions, tools: body.tools })
        : { items, changed: false };
    if (servesResponsesNatively(plugin, attempt.provider.family)) {
      const nb = toNativeBody(body, { upstreamModel: attempt.deployment.model, model, items: history.length || fit.changed || referenced ? fit.items : undefined, normalize });
      return { responses: nb.body, local: (count) => countItems(fit.items, body, count) };
    }
    const { request } = toChatRequest(body, fit.items, { model, stream: false, where: whereIn(fit.items) });
    return { chat: { ...request, model: attempt.deployment.model } };
  });
  const out: Record<string, unknown> = { object: 'response.input_tokens', input_tokens };
  runFinalizers(ctx, out);
  ctx.outcome = { kind: 'json', body: out };
}

type Result =
  | { kind: 'native-json'; body: Record<string, unknown> }
  | { kind: 'native-stream'; events: AsyncGenerator<{ event?: string; data: Record<string, unknown> }> }
  | { kind: 'chat-json'; body: ChatCompletion }
  | { kind: 'chat-stream'; chunks: AsyncGenerator<ChatChunk> };

async function createResponse(ctx: RequestContext, core: CoreServices, holder: StoreHolder): Promise<void> {
  const body = ctx.body as ResponsesRequest;
  const owner = ownerOf(ctx);
  const wantsStore = body.store !== false;
  const store = wantsStore || body.previous_response_id ? holder.get(ctx) : undefined;
  const { fresh, referenced, history, items, whereIn } = await conversation(ctx, body, owner, holder, store);
  const stream = !!body.stream;
  const normalize = body.extra?.normalize !== false;
  const echo = responseEcho(body);

  const served = await runTargets<Result>(ctx, core, (p) => typeof p.chat === 'function' || typeof p.responses === 'function', async (attempt, upstream) => {
    const { plugin, model } = upstream;
    const native = servesResponsesNatively(plugin, attempt.provider.family) && body.stop == null;
    if (!native && typeof plugin.chat !== 'function') {
      if (body.stop != null) throw errors.invalid(`Invalid 'stop': the model '${model.id}' takes no stop sequences on the Responses API; remove 'stop'.`, 'stop', 'unsupported_parameter');
      throw errors.unavailable(`The ${attempt.provider.family} family serves no Responses requests (its plugin has neither a native Responses API nor chat).`);
    }
    const fit = await fitContext(items, {
      modelId: model.id,
      contextWindow: model.context_window,
      maxOutputTokens: body.max_output_tokens,
      truncation: body.truncation ?? 'disabled',
      tokenizer: plugin.families[attempt.provider.family]?.tokenizer,
      instructions: body.instructions,
      tools: body.tools,
    });
    if (fit.note) upstream.note(fit.note);
    if (native) {
      const nb = toNativeBody(body, { upstreamModel: attempt.deployment.model, model, items: history.length || fit.changed || referenced ? fit.items : undefined, normalize });
      nb.notes.forEach(upstream.note);
      const out = await upstream.responses(nb.body, stream);
      if (out.kind === 'stream') return { kind: 'native-stream', events: await primeStream(out.events, attempt.provider.timeout_ms) };
      return { kind: 'native-json', body: out.body };
    }
    const { request, notes } = toChatRequest(body, fit.items, { model, stream, where: whereIn(fit.items) });
    notes.forEach(upstream.note);
    const out = await upstream.chat(request, stream);
    if (out.kind === 'stream') return { kind: 'chat-stream', chunks: await primeStream(out.chunks, attempt.provider.timeout_ms) };
    return { kind: 'chat-json', body: out.body };
  });

  const result = served.value;
  const model = served.target.model.id;
  // Built outside this function's scope: a stream's hooks live as long as the
  // stream, and a closure made here would keep the whole request (body,
  // items) reachable with this scope's variables.
  const save = saver(ctx, { store: wantsStore ? store : undefined, owner, model, previousResponseId: body.previous_response_id ?? null, input: wantsStore ? fresh : [] });
  if (result.kind === 'native-json' || result.kind === 'chat-json') {
    let r: Record<string, unknown>;
    if (result.kind === 'chat-json') {
      if (result.body.usage) ctx.meter.done(fromChatUsage(result.body.usage));
      r = fromChatCompletion(result.body, echo, model);
    } else {
      r = result.body;
      r.model = model;
      if (history.length) r.previous_response_id = body.previous_response_id;
      if (r.usage) ctx.meter.done(fromResponsesUsage(r.usage as Record<string, unknown>, r.output));
      fillUsage(r);
    }
    const stored = await save(r);
    runFinalizers(ctx, r);
    ctx.outcome = stored === false ? { kind: 'json', body: r, headers: { ...STORE_FAILED_HEADER } } : { kind: 'json', body: r };
    return;
  }

  ctx.outcome = streamOutcome(ctx, result, { model, provider: served.provider, previousResponseId: history.length ? (body.previous_response_id ?? null) : null, echo, save });
}

/**
 * Store a finished response (when the request asked for it and a store is
 * configured). True when stored, undefined when not asked. False when the
 * store failed (locked by another process past storage.responses_timeout_ms, ...):
 * the client still gets its answer, which then says `store: false` (a
 * response is never reported as stored when it was not), and the failure is
 * logged.
 */
function saver(ctx: RequestContext, o: { store?: ResponseStore; owner: string; model: string; previousResponseId: string | null; input: Item[] }): (r: ResponseObject | Record<string, unknown>) => Promise<boolean | undefined> {
  return async (r) => {
    if (!o.store || (r.status !== 'completed' && r.status !== 'incomplete')) return undefined;
    try {
      await o.store.put({
        id: String(r.id),
        owner: o.owner,
        model: o.model,
        created_at: Number(r.created_at) || Math.floor(Date.now() / 1000),
        previous_response_id: o.previousResponseId,
        input: o.input,
        output: (r.output as Item[] | undefined) ?? [],
        response: r,
      });
      return true;
    } catch (err) {
      // The client still gets its answer, marked as not stored; a later previous_response_id to it will 404.
      const e = err as { code?: string; message?: string };
      ctx.logger.error({ request_id: ctx.id, response_id: String(r.id), code: e?.code, error: e?.message }, 'storing the response failed: answered with store: false');
      ctx.log.store_error = e?.code ?? 'error';
      r.store = false;
      return false;
    }
  };
}

/** A committed stream's frames: everything it needs is passed in, so the request itself can go. */
function streamOutcome(
  ctx: RequestContext,
  result: Extract<Result, { kind: 'native-stream' | 'chat-stream' }>,
  o: { model: string; provider: ProviderConfig; previousResponseId: string | null; echo: ReturnType<typeof responseEcho>; save: ReturnType<typeof saver> },
): Outcome {
  const meter = ctx.meter;
  const hooks: StreamHooks = {
    finish: async (r) => {
      meterResponse(meter, r, true);
      await o.save(r);
      runFinalizers(ctx, r);
    },
    fail: (r) => {
      meterResponse(meter, r, false);
      runFinalizers(ctx, r);
    },
    // The failure becomes events of the stream (error, response.failed): the access log says what it was.
    errorBody: (err) => {
      // The provider's own error text, without its credentials (the core scrubs only the frames it writes).
      const body = midStreamError(err, providerSecrets(o.provider));
      ctx.log.stream_error = (err as { code?: string })?.code ?? body.code ?? 'error';
      return body;
    },
  };
  const events =
    result.kind === 'native-stream'
      ? nativeResponseEvents(result.events, { model: o.model, previousResponseId: o.previousResponseId }, hooks)
      : chatToResponseEvents(result.chunks, { id: newId('resp'), created_at: Math.floor(Date.now() / 1000), model: o.model, echo: o.echo }, hooks);
  return {
    kind: 'frames',
    frames: responseFrames(events),
    onError: (err) => sseFrame(JSON.stringify({ ...midStreamError(err), type: 'error' }), 'error'),
    provider: o.provider,
  };
}

/**
 * A streamed response's usage onto the meter: final when the stream finished;
 * when it failed, only usage the response actually reports counts (seen, not
 * final): a stream the gateway ended keeps what its provider reported so far.
 */
function meterResponse(meter: UsageMeter, r: ResponseObject, finished: boolean): void {
  const u = r.usage as unknown as Record<string, unknown> | null | undefined;
  if (finished) {
    if (u) meter.done(fromResponsesUsage(u, r.output));
    return;
  }
  const usage = fromResponsesUsage(u, r.output);
  if (usage.input_tokens || usage.output_tokens) meter.seen(usage);
}

function notFound(id: string): GatewayError {
  return errors.notFound(`Response with id '${clip(id)}' not found.`, null, 'response_not_found');
}

/** POST /v1/responses, GET and DELETE /v1/responses/:id, sharing one store. */
export function responsesEndpoints(): EndpointSpec[] {
  const holder = new StoreHolder();
  const noBody = () => ({});
  return [
    {
      endpoint: 'responses',
      method: 'POST',
      path: '/v1/responses/input_tokens',
      validate: (raw) => validate(ResponsesCountBody, raw) as Record<string, unknown>,
      terminal: (ctx, core) => countResponseTokens(ctx, core, holder),
      metered: false,
    },
    {
      endpoint: 'responses',
      method: 'POST',
      path: '/v1/responses',
      validate: validateResponses,
      terminal: (ctx, core) => createResponse(ctx, core, holder),
      releaseOnStream: ['input', 'instructions', 'tools', 'text'],
      close: () => holder.close(),
    },
    {
      endpoint: 'responses',
      method: 'GET',
      path: '/v1/responses/:id',
      validate: noBody,
      async terminal(ctx, _core, params) {
        const r = await holder.get(ctx).get(params.id, ownerOf(ctx));
        if (!r) throw notFound(params.id);
        ctx.outcome = { kind: 'json', body: r.response };
      },
    },
    {
      endpoint: 'responses',
      method: 'GET',
      path: '/v1/responses/:id/input_items',
      // The query, checked after authentication like a body: a bad value is a 400 naming the parameter.
      validate: (_raw, ctx) => parseListQuery(ctx.query ?? new URLSearchParams()) as unknown as Record<string, unknown>,
      terminal: (ctx, _core, params) => listInputItems(ctx, holder, params.id),
    },
    {
      endpoint: 'responses',
      method: 'DELETE',
      path: '/v1/responses/:id',
      validate: noBody,
      async terminal(ctx, _core, params) {
        if (!(await holder.get(ctx).delete(params.id, ownerOf(ctx)))) throw notFound(params.id);
        ctx.outcome = { kind: 'json', body: { id: params.id, object: 'response.deleted', deleted: true } };
      },
    },
  ];
}
