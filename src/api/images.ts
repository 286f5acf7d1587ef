// POST /v1/images/generations (spec 4.3, result 2.4): validate, check the
// request against each target model's own limits, run the fallback loop over
// the provider plugins' `images` hook, and return the image generation result.
//
// The request keeps the OpenAI Images shape all the way to the provider plugin
// (there is no image IR): an OpenAI-family plugin forwards it with the model
// patched (same-API fast path), other families translate it and answer in the
// same result shape. Image results are never turned into chat choices.
import type { RequestContext, RouteSlot } from '../plugin.js';
import type { ModelConfig } from '../config/schema.js';
import type { NormalizationEntry } from '../types.js';
import { runTargets, type CoreServices } from '../dispatch.js';
import type { EndpointSpec } from '../server.js';
import { validate } from '../validate.js';
import { errors } from '../errors.js';
import { unparseable } from '../provider/errors.js';
import { withoutExtensions, runFinalizers } from './common.js';
import { fromImagesResult } from '../usage.js';
import { ImagesBody, SIZES, LEGACY_SIZES, QUALITIES, LEGACY_QUALITIES, MAX_IMAGES, type ImagesRequest } from './images-schema.js';

type Body = ImagesRequest & Record<string, unknown>;

export function validateImages(raw: unknown): Record<string, unknown> {
  return validate(ImagesBody, raw) as Record<string, unknown>;
}

/** Fields only the gpt-image generation (and the Gemini family) takes; older models refuse them. */
const NEW_ONLY = ['background', 'output_format', 'output_compression', 'moderation'] as const;

export interface Misfit {
  param: string;
  code: string;
  message: string;
}

const list = (xs: readonly string[]) => xs.map((x) => `'${x}'`).join(', ');

/**
 * The rules that depend on the model, from its catalog entry: `max_images`
 * narrows `n`; `legacy_images` (dall-e generation) decides which sizes and
 * qualities apply and whether the deprecated `response_format` / `style` may
 * be sent. Returns the first problem, or undefined when the model can serve it.
 */
export function imageFit(body: Body, model: ModelConfig): Misfit | undefined {
  const caps = model.capabilities;
  const max = Math.min(caps.max_images ?? MAX_IMAGES, MAX_IMAGES);
  if ((body.n ?? 1) > max)
    return { param: 'n', code: 'out_of_range', message: `Invalid 'n': the model '${model.id}' generates at most ${max} image${max === 1 ? '' : 's'} per request (got ${body.n}).` };
  const sizes: readonly string[] = caps.legacy_images ? LEGACY_SIZES : SIZES;
  if (body.size != null && !sizes.includes(body.size))
    return { param: 'size', code: 'unsupported_value', message: `Invalid 'size': the model '${model.id}' supports ${list(sizes)} (got '${body.size}').` };
  const qualities: readonly string[] = caps.legacy_images ? LEGACY_QUALITIES : QUALITIES;
  if (body.quality != null && !qualities.includes(body.quality))
    return { param: 'quality', code: 'unsupported_value', message: `Invalid 'quality': the model '${model.id}' supports ${list(qualities)} (got '${body.quality}').` };
  if (caps.legacy_images) {
    for (const f of NEW_ONLY)
      if (body[f] != null)
        return { param: f, code: 'unsupported_parameter', message: `Invalid '${f}': the older image model '${model.id}' does not support it (gpt-image and Gemini image models do).` };
    return undefined;
  }
  // Spec 4.3: "Supported image models return base64 payloads." Asking one for
  // a URL cannot be honoured; asking for `b64_json` is what it does anyway.
  if (body.response_format === 'url')
    return { param: 'response_format', code: 'unsupported_value', message: `Invalid 'response_format': the model '${model.id}' returns base64 images ('b64_json') only; 'response_format' is deprecated and applies to older image models.` };
  if (body.style != null)
    return { param: 'style', code: 'unsupported_parameter', message: `Invalid 'style': it is deprecated and applies to older image models only; the model '${model.id}' does not support it.` };
  return undefined;
}

/**
 * The body one target receives: gateway fields removed, and for a supported
 * model `response_format: 'b64_json'` stripped (it asks for what the model
 * returns anyway; OpenAI's gpt-image rejects the field with unknown_parameter).
 * Pure: returns a new object, records what it changed.
 */
export function imagesForTarget(body: Body, model: ModelConfig, normalize: boolean, note: (e: NormalizationEntry) => void): Record<string, unknown> {
  const out: Record<string, unknown> = withoutExtensions(body);
  if (normalize && !model.capabilities.legacy_images && out.response_format != null) {
    note({ param: 'response_format', action: 'strip', before: out.response_format, reason: `${model.id} always returns base64 images; the deprecated 'response_format' applies to older image models only` });
    delete out.response_format;
  }
  return out;
}

/**
 * Fill what spec 2.4 lists and an upstream may leave out: `quality` and `size`
 * echo the request when the provider did not say, and the usage details
 * (OpenAI documents `output_tokens_details` as optional): a text prompt is all
 * text tokens, a generation's output is all image tokens unless told otherwise.
 */
export function completeResult(result: Record<string, unknown>, body: Body): Record<string, unknown> {
  if (result.quality == null && body.quality != null) result.quality = body.quality;
  if (result.size == null && body.size != null) result.size = body.size;
  const u = result.usage as Record<string, unknown> | undefined;
  if (u && typeof u === 'object') {
    const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
    const input = num(u.input_tokens);
    const output = num(u.output_tokens);
    const inDetails = { ...(u.input_tokens_details as Record<string, number> | undefined) };
    if (inDetails.text_tokens == null) inDetails.text_tokens = Math.max(0, input - num(inDetails.image_tokens));
    const outDetails = { ...(u.output_tokens_details as Record<string, number> | undefined) };
    if (outDetails.image_tokens == null) outDetails.image_tokens = Math.max(0, output - num(outDetails.text_tokens));
    result.usage = { ...u, input_tokens: input, output_tokens: output, total_tokens: u.total_tokens ?? input + output, input_tokens_details: inDetails, output_tokens_details: outDetails };
  }
  return result;
}

export async function imagesTerminal(ctx: RequestContext, core: CoreServices): Promise<void> {
  const body = ctx.body as Body;
  const route = ctx.state.route as RouteSlot | undefined;
  if (!route?.targets.length) throw errors.internal();
  for (const f of ['response_format', 'style'] as const) {
    if (body[f] != null) ctx.debug.deprecations.push({ param: f, message: `'${f}' is deprecated: it applies to older image models only; supported image models return base64 images.` });
  }
  // The requested model's own limits are the client's to meet (400 naming the
  // field); a fallback target that cannot take the request is skipped.
  const misfit = imageFit(body, route.targets[0].model);
  if (misfit) throw errors.invalid(misfit.message, misfit.param, misfit.code);
  const normalize = (body.extra as { normalize?: boolean } | undefined)?.normalize !== false;

  const { value: result } = await runTargets<Record<string, unknown>>(
    ctx,
    core,
    (plugin, target) => {
      if (typeof plugin.images !== 'function') return false;
      return imageFit(body, target.model)?.message ?? true;
    },
    async (attempt, upstream) => {
      const out = await upstream.images(imagesForTarget(body, attempt.target.model, normalize, upstream.note));
      if (out.kind !== 'json') throw unparseable('the provider answered an image request with a stream');
      if (!Array.isArray(out.body.data)) throw unparseable('the provider answered an image request without a data array');
      return out.body;
    },
  );
  completeResult(result, body);
  ctx.meter.done(fromImagesResult(result));
  runFinalizers(ctx, result);
  ctx.outcome = { kind: 'json', body: result };
}

export const imagesEndpoint: EndpointSpec = {
  endpoint: 'images_generations',
  method: 'POST',
  path: '/v1/images/generations',
  validate: validateImages,
  terminal: imagesTerminal,
};
