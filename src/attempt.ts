// One attempt of the fallback loop (src/dispatch.ts), as the ingress sees it.
//
// The loop picks a target and a deployment, then hands the ingress an
// `Upstream`: the only way to the provider plugin for that attempt. The
// ingress translates its request for the target (chat IR, a same-API body)
// and calls one of the upstream's hooks; the hook runs the pipeline's
// `prepareAttempt` hooks on it (so every request a provider plugin gets was
// prepared for its target, whichever ingress built it), sets the
// deployment's model and calls the plugin with the attempt's call (transport,
// signal, shared state). The loop returns `Served`: the attempt that answered
// and what the ingress made of it.
import type { RequestContext, AttemptInfo, ProviderPlugin, ProviderCall, ChatOutcome, NativeOutcome, CountRequest, MessagesCall, ReplicaStore } from './plugin.js';
import type { DeploymentConfig, ModelConfig, ProviderConfig } from './config/schema.js';
import type { ChatRequest, ChatUsage, NormalizationEntry } from './types.js';
import type { Transport } from './upstream/transport.js';
import type { Authorizer } from './provider/http.js';
import { derivedFrom, type JsonSource } from './json-source.js';

/** The pipeline's prepareAttempt hooks, in order (LoadedPipeline.prepare). */
export type PrepareAttempt = <T extends Record<string, unknown>>(ctx: RequestContext, attempt: AttemptInfo, request: T) => T;

/** What the fallback loop returns: the attempt that answered (target, deployment, provider block) and what the ingress made of it. */
export interface Served<R> extends AttemptInfo {
  value: R;
}

/** What every attempt of a gateway shares (CoreServices): the transport, the provider blocks' state, the pipeline's hooks. */
export interface AttemptServices {
  transport: Transport;
  shared: { of(p: ProviderConfig): Map<string, unknown> };
  replicas?: { of(p: ProviderConfig): ReplicaStore };
  /** The pipeline's prepareAttempt hooks (LoadedPipeline.prepare), run on every request an Upstream sends. */
  prepare: PrepareAttempt;
}

/**
 * One attempt's way to its provider plugin. Each hook prepares the request
 * for the attempt (`prepare`), sets `model` to the deployment's upstream
 * model, and calls the plugin; the Messages API's same-API body is the
 * exception (sent as the client wrote it, model patched by the ingress):
 * prepareAttempt hooks rewrite OpenAI-shaped requests, and a request that
 * takes the chat path is prepared there.
 */
export class Upstream {
  readonly provider: ProviderConfig;
  readonly deployment: DeploymentConfig;
  /** The target's catalog entry. */
  readonly model: ModelConfig;
  /** Record a change made to fit the target (debug.normalizations). */
  readonly note: (entry: NormalizationEntry) => void;
  private readonly authorize: Authorizer | undefined;

  constructor(
    private readonly ctx: RequestContext,
    readonly attempt: AttemptInfo,
    readonly plugin: ProviderPlugin,
    private readonly services: AttemptServices,
    /** Aborted when the attempt is abandoned, the client leaves or the gateway's shutdown deadline passes. */
    readonly signal: AbortSignal,
    private readonly reportUsage: ((usage: ChatUsage) => void) | undefined,
    private readonly traceparent: string | undefined,
  ) {
    this.provider = attempt.provider;
    this.deployment = attempt.deployment;
    this.model = attempt.target.model;
    this.note = (e) => ctx.debug.normalizations.push(e);
    this.authorize = plugin.authorize && ((req, c) => plugin.authorize!(req, c));
  }

  /**
   * The pipeline's prepareAttempt hooks on a request for this attempt. The
   * hooks below run it; a token count runs it on the chat request it counts
   * (src/count.ts), which it may also count locally.
   */
  prepare<T extends Record<string, unknown>>(request: T): T {
    return this.services.prepare(this.ctx, this.attempt, request);
  }

  /**
   * A chat IR request (stream usage asked for: withStreamUsage). `source`:
   * the client's bytes, when `request` is the client's own chat request (the
   * plugin's body, if it sends the request on, is written from them).
   */
  chat(request: ChatRequest, stream: boolean, source?: JsonSource): Promise<ChatOutcome> {
    const prepared = this.prepare(request as unknown as Record<string, unknown>) as unknown as ChatRequest;
    return this.plugin.chat!(this.call(derivedFrom({ ...withStreamUsage(prepared, this.provider, this.note), model: this.deployment.model }, source), stream));
  }

  /** A Responses API body for a plugin that serves that API natively. */
  responses(request: Record<string, unknown>, stream: boolean): Promise<NativeOutcome> {
    return this.plugin.responses!(this.call({ ...this.prepare(request), model: this.deployment.model }, stream));
  }

  /** An Images API body (never streamed). */
  images(request: Record<string, unknown>): Promise<NativeOutcome> {
    return this.plugin.images!(this.call({ ...this.prepare(request), model: this.deployment.model }, false));
  }

  /** A Messages API body for a plugin that serves that API natively (not prepared: see the class). */
  messages(request: MessagesCall, stream: boolean): Promise<NativeOutcome | null> {
    return this.plugin.messages!(this.call(request, stream));
  }

  /** The provider's own count, or null when the plugin has none; `request.chat` as prepare() returned it. */
  countTokens(request: CountRequest): Promise<number | null> {
    return this.plugin.countTokens ? this.plugin.countTokens(this.call(request, false)) : Promise.resolve(null);
  }

  private call<T>(request: T, stream: boolean): ProviderCall<T> {
    return {
      request,
      stream,
      provider: this.provider,
      deployment: this.deployment,
      model: this.model,
      transport: this.services.transport,
      signal: this.signal,
      requestId: this.ctx.id,
      shared: this.services.shared.of(this.provider),
      replicas: this.services.replicas?.of(this.provider),
      note: this.note,
      authorize: this.authorize,
      reportUsage: this.reportUsage,
      traceparent: this.traceparent,
    };
  }
}

/**
 * A chat IR stream request as one provider gets it: asking for the stream's
 * usage (`stream_options.include_usage`) whether or not the client did, so
 * that every stream is accounted; the chat ingress drops the usage chunk a
 * client did not ask for. A provider marked `stream_usage: false` rejects the
 * option: it is removed instead (with a note when the client had sent it).
 */
export function withStreamUsage(req: ChatRequest, provider: ProviderConfig, note: (e: NormalizationEntry) => void): ChatRequest {
  if (!req.stream) return req;
  if (provider.stream_usage === false) {
    if (req.stream_options == null) return req;
    const { stream_options, ...rest } = req;
    if (stream_options.include_usage) note({ param: 'stream_options', action: 'strip', before: stream_options, reason: `the provider '${provider.name}' rejects stream_options (stream_usage: false)` });
    return rest;
  }
  if (req.stream_options?.include_usage) return req;
  return { ...req, stream_options: { ...req.stream_options, include_usage: true } };
}
