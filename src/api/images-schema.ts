// Validation of POST /v1/images/generations, spec 4.3 and 8. Every field the
// contract names is checked here, independently of the model; the rules that
// depend on the model (its `max_images`, whether it is an older image model
// with `capabilities.legacy_images`) are applied by `imageFit()` once the model
// is resolved (src/api/images.ts). Unknown top-level fields are kept, as on
// chat: the same-API path forwards them to OpenAI, which judges them.
import * as v from 'valibot';
import { int, str, oneOf, bool, looseObject } from '../validate.js';
import { Extra, Fallbacks, DebugList } from './chat-schema.js';

/** Sizes of the supported image models (gpt-image and the Gemini family), spec 4.3. */
export const SIZES = ['auto', '1024x1024', '1024x1536', '1536x1024'] as const;
/** Sizes only the older (dall-e) models know: 256/512 (dall-e-2), 1792x1024/1024x1792 (dall-e-3). */
export const LEGACY_SIZES = ['256x256', '512x512', '1024x1024', '1792x1024', '1024x1792'] as const;
export const QUALITIES = ['auto', 'low', 'medium', 'high'] as const;
/** dall-e-3 `standard|hd` (OpenAI API reference, images.create `quality`). */
export const LEGACY_QUALITIES = ['auto', 'standard', 'hd'] as const;
export const BACKGROUNDS = ['auto', 'transparent', 'opaque'] as const;
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;
export const MODERATIONS = ['auto', 'low'] as const;
export const RESPONSE_FORMATS = ['url', 'b64_json'] as const;
export const STYLES = ['vivid', 'natural'] as const;

/** The contract's upper bound for `n`; a model's `capabilities.max_images` may be lower. */
export const MAX_IMAGES = 10;

const ALL_SIZES = [...new Set<string>([...SIZES, ...LEGACY_SIZES])] as (typeof SIZES[number] | typeof LEGACY_SIZES[number])[];
const ALL_QUALITIES = [...new Set<string>([...QUALITIES, ...LEGACY_QUALITIES])] as (typeof QUALITIES[number] | typeof LEGACY_QUALITIES[number])[];

const STREAMING = 'streaming is not supported on /v1/images/generations';

export const ImagesBody = v.pipe(
  looseObject({
    model: v.pipe(str(), v.minLength(1, 'must not be empty')),
    prompt: v.pipe(str(), v.check((s) => s.trim().length > 0, 'must not be empty')),
    n: v.optional(v.nullable(int(1, MAX_IMAGES))),
    size: v.optional(v.nullable(oneOf(ALL_SIZES))),
    quality: v.optional(v.nullable(oneOf(ALL_QUALITIES))),
    background: v.optional(v.nullable(oneOf(BACKGROUNDS))),
    output_format: v.optional(v.nullable(oneOf(OUTPUT_FORMATS))),
    output_compression: v.optional(v.nullable(int(0, 100))),
    moderation: v.optional(v.nullable(oneOf(MODERATIONS))),
    user: v.optional(str()),
    // Spec 6/7: the images operation never streams. `stream: false` is the
    // default and is accepted; `partial_images` only means something in a stream.
    stream: v.optional(v.nullable(v.pipe(bool(), v.check((s) => s === false, `${STREAMING}: omit 'stream' or set it to false`)))),
    partial_images: v.optional(v.custom(() => false, `is a streaming option and ${STREAMING}`)),
    // Deprecated (spec 9): older image models only; see imageFit().
    response_format: v.optional(v.nullable(oneOf(RESPONSE_FORMATS))),
    style: v.optional(v.nullable(oneOf(STYLES))),
    extra: v.optional(Extra),
    fallbacks: v.optional(Fallbacks),
    debug: v.optional(DebugList),
  }),
  v.forward(
    v.check(
      (b) => b.output_compression == null || b.output_format === 'jpeg' || b.output_format === 'webp',
      "'output_compression' applies only to 'output_format' 'jpeg' or 'webp'",
    ),
    ['output_compression'],
  ),
  // A transparent background needs a format with an alpha channel (OpenAI
  // images reference: "png (default value) or webp").
  v.forward(
    v.check((b) => !(b.background === 'transparent' && b.output_format === 'jpeg'), "'transparent' needs 'output_format' 'png' or 'webp' (JPEG has no alpha channel)"),
    ['background'],
  ),
);

export type ImagesRequest = v.InferOutput<typeof ImagesBody>;
