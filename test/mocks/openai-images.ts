// The OpenAI Images mock, and the image files every image mock answers with.
//
// Real, tiny image files built in code: a PNG (zlib via
// node:zlib, CRCs per chunk), a baseline JPEG and a lossless WebP, each of the
// exact pixel size asked, so that a test can decode the magic bytes and the
// dimensions of what came through the gateway. One flat colour each: the
// encoders use the smallest legal entropy codes, so even 1536x1024 is a few KB.
import { deflateSync, crc32 } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import type { Handler, Recorded, Reply } from './server.js';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

const cache = new Map<string, Buffer>();

function cached(key: string, make: () => Buffer): Buffer {
  let b = cache.get(key);
  if (!b) {
    b = make();
    cache.set(key, b);
  }
  return b;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td) >>> 0);
  return Buffer.concat([len, td, crc]);
}

/** PNG (RFC 2083): signature, IHDR, one IDAT of filter-0 scanlines, IEND. RGBA when `alpha`. */
export function makePng(width: number, height: number, alpha = false): Buffer {
  return cached(`png:${width}x${height}:${alpha}`, () => {
    const channels = alpha ? 4 : 3;
    const row = Buffer.alloc(1 + width * channels);
    for (let x = 0; x < width; x++) {
      row[1 + x * channels] = 0x33;
      row[2 + x * channels] = 0x66;
      row[3 + x * channels] = 0x99;
      if (alpha) row[4 + x * channels] = 0; // fully transparent
    }
    const raw = Buffer.alloc(row.length * height);
    for (let y = 0; y < height; y++) row.copy(raw, y * row.length);
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(width, 0);
    ihdr.writeUInt32BE(height, 4);
    ihdr[8] = 8; // bit depth
    ihdr[9] = alpha ? 6 : 2; // colour type: RGBA or RGB
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk('IHDR', ihdr),
      pngChunk('IDAT', deflateSync(raw, { level: 9 })),
      pngChunk('IEND', Buffer.alloc(0)),
    ]);
  });
}

function segment(marker: number, payload: number[]): number[] {
  const len = payload.length + 2;
  return [0xff, marker, len >> 8, len & 0xff, ...payload];
}

/**
 * Baseline JPEG (ITU T.81), one grey component. Each Huffman table holds a
 * single 1-bit code (DC difference category 0, AC end-of-block), so every 8x8
 * block is the two bits `00`: a flat mid-grey image any decoder reads.
 */
export function makeJpeg(width: number, height: number): Buffer {
  return cached(`jpeg:${width}x${height}`, () => {
    const head = [
      0xff, 0xd8, // SOI
      ...segment(0xe0, [0x4a, 0x46, 0x49, 0x46, 0x00, 1, 1, 0, 0, 1, 0, 1, 0, 0]), // APP0 JFIF 1.1
      ...segment(0xdb, [0x00, ...new Array<number>(64).fill(1)]), // DQT: table 0, all ones
      ...segment(0xc0, [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0]), // SOF0
      ...segment(0xc4, [0x00, 1, ...new Array<number>(15).fill(0), 0x00]), // DHT DC0: one code -> category 0
      ...segment(0xc4, [0x10, 1, ...new Array<number>(15).fill(0), 0x00]), // DHT AC0: one code -> EOB
      ...segment(0xda, [1, 1, 0x00, 0, 63, 0]), // SOS
    ];
    const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
    const bits = blocks * 2;
    const scan = Buffer.alloc(Math.ceil(bits / 8));
    // Pad the last byte with 1-bits (T.81 F.1.2.3); zero bytes need no stuffing.
    const rem = bits % 8;
    if (rem) scan[scan.length - 1] = 0xff >> rem;
    return Buffer.concat([Buffer.from(head), scan, Buffer.from([0xff, 0xd9])]);
  });
}

class BitWriter {
  private bytes: number[] = [];
  private acc = 0;
  private n = 0;
  /** LSB-first, as VP8L reads (RFC 9649 section 3.1). */
  write(value: number, count: number) {
    for (let i = 0; i < count; i++) {
      this.acc |= ((value >> i) & 1) << this.n;
      if (++this.n === 8) {
        this.bytes.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
  }
  done(): Buffer {
    if (this.n) this.bytes.push(this.acc);
    return Buffer.from(this.bytes);
  }
}

/**
 * Lossless WebP (RFC 9649): RIFF/WEBP/VP8L. No transforms, no colour cache,
 * and five "simple" prefix codes of one symbol each, so every pixel decodes
 * from zero bits to the same ARGB value, whatever the size.
 */
export function makeWebp(width: number, height: number, alpha = false): Buffer {
  return cached(`webp:${width}x${height}:${alpha}`, () => {
    const w = new BitWriter();
    w.write(0x2f, 8); // signature
    w.write(width - 1, 14);
    w.write(height - 1, 14);
    w.write(alpha ? 1 : 0, 1); // alpha_is_used
    w.write(0, 3); // version
    w.write(0, 1); // no transform
    w.write(0, 1); // no colour cache
    w.write(0, 1); // no meta prefix codes
    const simple = (symbol: number) => {
      w.write(1, 1); // simple code
      w.write(0, 1); // one symbol
      if (symbol < 2) {
        w.write(0, 1);
        w.write(symbol, 1);
      } else {
        w.write(1, 1);
        w.write(symbol, 8);
      }
    };
    simple(0x66); // green
    simple(0x33); // red
    simple(0x99); // blue
    simple(alpha ? 0x00 : 0xff); // alpha
    simple(0); // distance
    const data = w.done();
    const padded = data.length % 2 ? Buffer.concat([data, Buffer.alloc(1)]) : data;
    const chunkHead = Buffer.alloc(8);
    chunkHead.write('VP8L', 0, 'latin1');
    chunkHead.writeUInt32LE(data.length, 4);
    const riff = Buffer.alloc(12);
    riff.write('RIFF', 0, 'latin1');
    riff.writeUInt32LE(4 + 8 + padded.length, 4);
    riff.write('WEBP', 8, 'latin1');
    return Buffer.concat([riff, chunkHead, padded]);
  });
}

export function makeImage(format: ImageFormat, width: number, height: number, alpha = false): Buffer {
  if (format === 'jpeg') return makeJpeg(width, height);
  if (format === 'webp') return makeWebp(width, height, alpha);
  return makePng(width, height, alpha);
}

export const MIME: Record<ImageFormat, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/** Which format a byte string is, by its magic bytes. */
export function sniff(b: Buffer): ImageFormat | undefined {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return undefined;
}

// ---------------------------------------------------------------------------
// POST /v1/images/generations, as OpenAI answers it (shared/fixtures/WIRE-FORMATS.md
// section 3; recorded bodies in shared/fixtures/openai-images/). Plug it into
// startOpenAIMock({routes: {'/v1/images/generations': openAIImagesRoute()}}):
// the OpenAI mock checks the key first.
//
// It validates as the API does per model generation: gpt-image takes
// background/output_format/output_compression/moderation and rejects the
// dall-e-only `response_format` and `style` with `unknown_parameter`
// (gpt-image-response-format-error.json); dall-e takes those and rejects the
// gpt-image ones; sizes, qualities and `n` per model.

function err(status: number, message: string, param: string | null, code: string | null, type = 'invalid_request_error'): Reply {
  return { status, json: { error: { message, type, param, code } } };
}

interface ModelRules {
  params: Set<string>;
  sizes: string[];
  qualities: string[];
  maxN: number;
}

const GPT_IMAGE: ModelRules = {
  params: new Set(['model', 'prompt', 'n', 'size', 'quality', 'background', 'output_format', 'output_compression', 'moderation', 'user', 'stream', 'partial_images']),
  sizes: ['1024x1024', '1024x1536', '1536x1024', 'auto'],
  qualities: ['low', 'medium', 'high', 'auto'],
  maxN: 10,
};
const DALL_E_2: ModelRules = {
  params: new Set(['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'user']),
  sizes: ['256x256', '512x512', '1024x1024'],
  qualities: ['standard', 'auto'],
  maxN: 10,
};
const DALL_E_3: ModelRules = {
  params: new Set(['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'style', 'user']),
  sizes: ['1024x1024', '1792x1024', '1024x1792'],
  qualities: ['standard', 'hd', 'auto'],
  maxN: 1,
};

export function imageModelRules(model: string): ModelRules | undefined {
  if (/^gpt-image-/.test(model)) return GPT_IMAGE;
  if (model === 'dall-e-2') return DALL_E_2;
  if (model === 'dall-e-3') return DALL_E_3;
  return undefined;
}

const supported = (xs: string[]) => xs.map((x) => `'${x}'`).join(', ').replace(/, ([^,]*)$/, ', and $1');
const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x);

/** The API's own checks, in its order: unknown parameters, required prompt, values, combinations. */
export function validateImagesRequest(body: any): Reply | undefined {
  if (!body || typeof body !== 'object') return err(400, 'We could not parse the JSON body of your request.', null, null);
  const model = body.model ?? 'dall-e-2';
  const rules = imageModelRules(model);
  if (!rules) return err(400, `Invalid value: '${model}'. Value must be 'dall-e-2', 'dall-e-3', 'gpt-image-1', 'gpt-image-1-mini' or 'gpt-image-1.5'.`, 'model', 'invalid_value');
  for (const k of Object.keys(body)) if (!rules.params.has(k)) return err(400, `Unknown parameter: '${k}'.`, k, 'unknown_parameter');
  if (typeof body.prompt !== 'string') return err(400, "Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
  if (body.prompt.length === 0) return err(400, "Invalid 'prompt': empty string. Expected a string with minimum length 1, but got an empty string instead.", 'prompt', 'empty_string');
  if (body.n != null) {
    if (!isInt(body.n)) return err(400, "Invalid type for 'n': expected an integer.", 'n', 'invalid_type');
    if (body.n < 1) return err(400, `Invalid 'n': integer below minimum value. Expected a value >= 1, but got ${body.n} instead.`, 'n', 'integer_below_min_value');
    if (body.n > 10) return err(400, `Invalid 'n': integer above maximum value. Expected a value <= 10, but got ${body.n} instead.`, 'n', 'integer_above_max_value');
    if (body.n > rules.maxN) return err(400, `You requested ${body.n} images, but ${model} only supports n=${rules.maxN}.`, 'n', null);
  }
  if (body.size != null && !rules.sizes.includes(body.size)) return err(400, `Invalid value: '${body.size}'. Supported values are: ${supported(rules.sizes)}.`, 'size', 'invalid_value');
  if (body.quality != null && !rules.qualities.includes(body.quality)) return err(400, `Invalid value: '${body.quality}'. Supported values are: ${supported(rules.qualities)}.`, 'quality', 'invalid_value');
  const enums: [string, string[]][] = [
    ['background', ['transparent', 'opaque', 'auto']],
    ['output_format', ['png', 'jpeg', 'webp']],
    ['moderation', ['low', 'auto']],
    ['response_format', ['url', 'b64_json']],
    ['style', ['vivid', 'natural']],
  ];
  for (const [k, values] of enums) if (body[k] != null && !values.includes(body[k])) return err(400, `Invalid value: '${body[k]}'. Supported values are: ${supported(values)}.`, k, 'invalid_value');
  if (body.output_compression != null) {
    if (!isInt(body.output_compression) || body.output_compression < 0 || body.output_compression > 100)
      return err(400, "Invalid 'output_compression': expected an integer between 0 and 100.", 'output_compression', 'invalid_value');
    if ((body.output_format ?? 'png') === 'png') return err(400, 'Compression less than 100 is not supported for PNG output format.', 'output_compression', 'unsupported_value');
  }
  if (body.background === 'transparent' && body.output_format === 'jpeg')
    return err(400, 'Transparent background is not supported for JPEG output format. Use png or webp.', 'background', 'unsupported_value');
  if (body.stream === true || body.partial_images != null) return err(400, 'mock: image streaming is not implemented here (the gateway never asks for it)', 'stream', null);
  return undefined;
}

/** gpt-image-1 output tokens per image (OpenAI pricing table: quality x size). */
function imageTokens(quality: string, size: string): number {
  const square = size === '1024x1024';
  if (quality === 'low') return square ? 272 : 408;
  if (quality === 'medium') return square ? 1056 : 1584;
  return square ? 4160 : 6240;
}

export interface OpenAIImagesOptions {
  /** Leave `usage.output_tokens_details` out, as the API may (WIRE-FORMATS section 3). */
  omitOutputDetails?: boolean;
}

export function openAIImagesRoute(opts: OpenAIImagesOptions = {}): Handler {
  return (req: Recorded): Reply => {
    if (req.method !== 'POST') return err(405, `Invalid method for URL (${req.method} ${req.path})`, null, null);
    const bad = validateImagesRequest(req.body);
    if (bad) return bad;
    const b = req.body;
    const model: string = b.model ?? 'dall-e-2';
    const n: number = b.n ?? 1;
    const created = Math.floor(Date.now() / 1000);
    if (!/^gpt-image-/.test(model)) {
      // dall-e: a URL by default (expires in about an hour), no usage; dall-e-3 revises the prompt.
      const size = b.size ?? '1024x1024';
      const [w, h] = size.split('x').map(Number);
      const data = Array.from({ length: n }, () => ({
        ...(b.response_format === 'b64_json'
          ? { b64_json: makePng(w, h).toString('base64') }
          : { url: `https://images.example.invalid/private/img-${randomBytes(12).toString('hex')}.png?se=${created + 3600}` }),
        ...(model === 'dall-e-3' ? { revised_prompt: `A detailed rendering of: ${b.prompt}` } : {}),
      }));
      return { status: 200, json: { created, data } };
    }
    const format: ImageFormat = b.output_format ?? 'png';
    const size = !b.size || b.size === 'auto' ? '1024x1024' : b.size;
    const quality = !b.quality || b.quality === 'auto' ? 'high' : b.quality;
    const background = b.background === 'transparent' ? 'transparent' : 'opaque';
    const [w, h] = size.split('x').map(Number);
    const image = makeImage(format, w, h, background === 'transparent').toString('base64');
    const text = Math.max(1, Math.ceil(b.prompt.length / 4));
    const out = imageTokens(quality, size) * n;
    return {
      status: 200,
      headers: { 'x-request-id': `req_${randomBytes(8).toString('hex')}` },
      json: {
        created,
        background,
        data: Array.from({ length: n }, () => ({ b64_json: image })),
        output_format: format,
        quality,
        size,
        usage: {
          input_tokens: text,
          input_tokens_details: { text_tokens: text, image_tokens: 0 },
          output_tokens: out,
          ...(opts.omitOutputDetails ? {} : { output_tokens_details: { text_tokens: 0, image_tokens: out } }),
          total_tokens: text + out,
        },
      },
    };
  };
}
