// The request body reader: JSON only, with a byte limit (413), a read deadline
// (408), gzip/deflate/br request bodies, and `__proto__` keys refused.
//
// It replaces koa-body on the ingress: the gateway accepts one media type and
// one charset, so koa-body's general machinery bought nothing and cost the
// most CPU of any library on the request path (docs/performance.md, "The
// request body reader").
import type { IncomingMessage } from 'node:http';
import zlib from 'node:zlib';
import { errors, GatewayError, clip } from './errors.js';
import { scanJson, rememberSource } from './json-source.js';

export interface BodyOptions {
  /** Largest body accepted, in bytes (after decompression). */
  limit: number;
  /** Whole-body read deadline; 0 disables it. */
  timeoutMs: number;
  /** Deepest nesting of objects and arrays accepted (the body itself is level 1); 0 disables the check. */
  maxDepth?: number;
}

/**
 * Whether the parsed `value` nests objects and arrays deeper than `max` (the
 * value itself is level 1). Checked after the parse, on the parsed value: V8's
 * JSON.parse does not recurse, so a value 5,000 levels deep parses, but
 * JSON.stringify and every recursive walk after it (a provider plugin's
 * mapping, a log line) would throw a RangeError on it, far from the client's
 * mistake. The walk goes no deeper than `max` + 1 and visits objects, not
 * bytes: 4-15 µs on the benchmark's 30-400 KB agent conversations, where a
 * pass over their bytes before the parse cost 40-290 µs (docs/performance.md,
 * "Large requests").
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  return deepSteps(value, 1, max) !== null;
}

/**
 * The steps (array indexes, object keys) from `v`, at level `depth`, to the
 * first value nested deeper than `max`, innermost first; null when there is
 * none. Built only on the way back from a find: the walk itself makes nothing.
 */
function deepSteps(v: unknown, depth: number, max: number): (string | number)[] | null {
  if (v === null || typeof v !== 'object') return null;
  if (depth > max) return [];
  // Children that are not objects are skipped here, not in a call each (most of a body's values).
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const e: unknown = v[i];
      const steps = e !== null && typeof e === 'object' ? deepSteps(e, depth + 1, max) : null;
      if (steps) return (steps.push(i), steps);
    }
    return null;
  }
  for (const k in v) {
    const e: unknown = (v as Record<string, unknown>)[k];
    const steps = e !== null && typeof e === 'object' ? deepSteps(e, depth + 1, max) : null;
    if (steps) return (steps.push(k), steps);
  }
  return null;
}

/** The path of the first value nested deeper than `max` levels (`tools[0].function.parameters.properties.a…`), or null. */
export function deepPath(value: unknown, max: number): string | null {
  const steps = deepSteps(value, 1, max);
  if (!steps) return null;
  let path = '';
  for (let i = steps.length - 1; i >= 0; i--) {
    const step = steps[i];
    path += typeof step === 'number' ? `[${step}]` : path ? `.${clip(step, 40)}` : clip(step, 40);
  }
  return path;
}

/** `text` parsed, or undefined when it is not JSON (only to name where a refused body nests too deep). */
function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The 400 for a body nested deeper than `max`, naming where (`parsed`: the body's value, when it is valid JSON). */
function tooDeep(max: number, parsed?: unknown): GatewayError {
  const param = parsed === undefined ? null : deepPath(parsed, max);
  const where = param ? `'${clip(param, 200)}' is` : 'the body is';
  return errors.invalid(`Invalid request: ${where} nested more than ${max} levels deep (server.json_max_depth).`, param, 'nesting_too_deep');
}

/** `application/json`, with an optional `charset=utf-8` (or us-ascii) parameter. */
export function contentTypeIsJson(header: string | undefined): boolean {
  if (!header) return false;
  const semi = header.indexOf(';');
  const type = (semi === -1 ? header : header.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json';
}

function charsetOf(header: string): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(header);
  return m?.[1].toLowerCase();
}

// `"__proto__"` as a key, possibly with JSON escapes in it.
const SUSPECT = /"(?:_|\\u005[fF])(?:_|\\u005[fF])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[fF])(?:t|\\u0074)(?:o|\\u006[fF])(?:_|\\u005[fF])(?:_|\\u005[fF])"\s*:/;

/**
 * Parse JSON text; a `__proto__` key anywhere is refused (it would re-prototype an object a plugin copies into).
 * `bytes` (the text's UTF-8 bytes, when at hand) lets a large body skip the pattern: it can only match
 * where the bytes hold `__proto` or a `\u` escape, and a byte search finds neither faster. (`__proto`, not
 * `__proto__`: Buffer#indexOf found the shorter needle 15-40x faster in the agent conversations, whose
 * `_` and `__` are frequent, 60-150 µs a 120 KB body for the longer one.)
 */
export function parseJsonText(text: string, bytes?: Buffer): unknown {
  if (bytes && bytes.indexOf('__proto') === -1 && bytes.indexOf('\\u') === -1) return JSON.parse(text);
  if (!SUSPECT.test(text)) return JSON.parse(text);
  return JSON.parse(text, (k, v) => {
    if (k === '__proto__') throw new GatewayError(400, 'invalid_request_error', "Request body must not contain a '__proto__' key.", { code: 'invalid_json' });
    return v;
  });
}

/**
 * Read and parse the JSON body of `req`. Errors are GatewayErrors with the
 * statuses of docs/errors.md: 415 for another media type, charset or encoding,
 * 413 over the limit, 408 past the deadline, 400 for an empty or invalid body.
 * After an error the connection is marked to close (the rest of the body is
 * not read).
 */
export function readJsonBody(req: IncomingMessage, o: BodyOptions): Promise<unknown> {
  const ct = req.headers['content-type'];
  if (!contentTypeIsJson(ct)) {
    const len = req.headers['content-length'];
    if (len === '0' || (!len && !req.headers['transfer-encoding'])) return Promise.reject(errors.invalid('Request body is required (JSON).', null, 'missing_body'));
    return Promise.reject(errors.unsupportedMedia("Content-Type must be 'application/json'."));
  }
  const charset = charsetOf(ct!);
  if (charset && charset !== 'utf-8' && charset !== 'utf8' && charset !== 'us-ascii')
    return Promise.reject(errors.unsupportedMedia(`Unsupported charset '${clip(charset)}' in Content-Type: JSON bodies must be UTF-8.`));
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  let source: NodeJS.ReadableStream & { destroy?(): void } = req;
  if (encoding !== 'identity') {
    const make = encoding === 'gzip' || encoding === 'x-gzip' ? zlib.createGunzip : encoding === 'deflate' ? zlib.createInflate : encoding === 'br' ? zlib.createBrotliDecompress : undefined;
    if (!make) return Promise.reject(errors.unsupportedMedia(`Unsupported Content-Encoding '${clip(encoding)}': use gzip, deflate, br or none.`));
    source = req.pipe(make());
  } else {
    const declared = Number(req.headers['content-length']);
    if (declared > o.limit) return Promise.reject(errors.tooLarge('Request body is larger than the configured limit (server.body_limit).'));
  }

  return new Promise<unknown>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const timer = o.timeoutMs > 0 ? setTimeout(() => fail(errors.timeout(`The request body was not received within ${o.timeoutMs} ms.`)), o.timeoutMs) : undefined;
    const cleanup = () => {
      done = true;
      if (timer) clearTimeout(timer);
      source.removeListener('data', onData);
      source.removeListener('end', onEnd);
      source.removeListener('error', onDecodeError);
      req.removeListener('error', onAborted);
      req.removeListener('close', onClose);
    };
    // What is left of the body is not read; the caller closes the connection (req.complete is false).
    const fail = (err: Error) => {
      if (done) return;
      cleanup();
      if (source !== req) {
        req.unpipe();
        source.destroy?.();
      }
      req.pause();
      reject(err);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > o.limit) return fail(errors.tooLarge('Request body is larger than the configured limit (server.body_limit).'));
      chunks.push(c);
    };
    const onEnd = () => {
      if (done) return;
      cleanup();
      const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      // The chunks go once the bytes are in one piece: a large body is not
      // held once more (chunks, bytes, text) while it parses.
      chunks.length = 0;
      if (!buf.length) return reject(errors.invalid('Request body is required (JSON).', null, 'missing_body'));
      const text = buf.toString('utf8');
      const max = o.maxDepth ?? 0;
      let parsed: unknown;
      try {
        parsed = parseJsonText(text, buf);
      } catch (err) {
        // Text that is not JSON and nests too deep as well is named for its nesting, as a valid one is.
        if (max > 0 && scanJson(buf, max).deep) return reject(tooDeep(max, parseOrUndefined(text)));
        return reject(err instanceof GatewayError ? err : errors.invalid('Request body is not valid JSON.', null, 'invalid_json'));
      }
      if (max > 0 && nestsDeeperThan(parsed, max)) return reject(tooDeep(max, parsed));
      // The client's bytes stay known behind the body; where its top-level members are is found
      // only when a same-API target sends them on (json-source.ts, patch).
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) rememberSource(parsed, { bytes: buf, parsed: parsed as Record<string, unknown> });
      resolve(parsed);
    };
    const onDecodeError = () => fail(errors.invalid(`The request body is not valid ${clip(encoding)} data.`, null, 'invalid_encoding'));
    const onAborted = () => fail(errors.invalid('The client aborted the request.', null, 'client_aborted'));
    const onClose = () => {
      if (!req.complete) onAborted();
    };
    source.on('data', onData);
    source.once('end', onEnd);
    if (source !== req) source.once('error', onDecodeError);
    req.once('error', onAborted);
    req.once('close', onClose);
  });
}
