// Turns valibot issues into the 400 envelope with a message that names the
// field (`param` is the field's path, e.g. `messages[2].content`).
import * as v from 'valibot';
import { errors, GatewayError, clip, QUOTE_MAX } from './errors.js';

/** The field's path; a key the client made up (a `metadata` key) is quoted at most QUOTE_MAX characters long. */
export function paramPath(issue: Pick<v.BaseIssue<unknown>, 'path'>): string {
  let out = '';
  for (const item of issue.path ?? []) {
    const key = item.key as string | number;
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${clip(key)}` : clip(key);
  }
  return out;
}

function codeOf(issue: v.BaseIssue<unknown>): string {
  if (issue.kind === 'schema' && issue.received === 'undefined') return 'missing_required_parameter';
  switch (issue.type) {
    case 'min_value':
    case 'max_value':
    case 'min_length':
    case 'max_length':
    case 'max_entries':
    case 'integer':
      return 'out_of_range';
    case 'picklist':
    case 'literal':
    case 'variant':
    case 'regex':
    case 'check':
    case 'custom':
      return 'invalid_value';
    default:
      return issue.kind === 'schema' ? 'invalid_type' : 'invalid_value';
  }
}

/** Parse or throw the 400 envelope for the first problem. */
export function validate<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const r = v.safeParse(schema, input, { abortPipeEarly: true });
  if (r.success) return r.output;
  throw issueError(r.issues[0]);
}

export function issueError(issue: v.BaseIssue<unknown>): GatewayError {
  // A union/variant issue nests one issue per option, with paths relative to
  // the union's input: follow the option that got furthest, and join paths,
  // so the message names the real field (messages[0].content[0].type).
  let deepest = issue;
  let path = [...(issue.path ?? [])];
  while (deepest.issues?.length) {
    const next = deepest.issues.reduce((a, b) => ((b.path?.length ?? 0) > (a.path?.length ?? 0) ? b : a));
    if (!next.path?.length) break;
    const last = path[path.length - 1];
    const relative = !last || next.path[0].input === last.value;
    path = relative ? [...path, ...next.path] : [...next.path];
    deepest = next;
  }
  const param = paramPath({ ...deepest, path } as v.BaseIssue<unknown>) || null;
  const code = codeOf(deepest);
  let message: string;
  if (code === 'missing_required_parameter') message = `Missing required parameter: '${param}'.`;
  else {
    // The value is quoted back when it says something ("got 5"); a check over a whole
    // object or array (n with stream, an assistant message's content) would only say "got Object".
    // A string is quoted at most QUOTE_MAX characters long: a 3 MB value must not come back in a 3 MB error.
    const input = deepest.input;
    const quote = deepest.received && deepest.kind !== 'schema' && (input === null || typeof input !== 'object');
    const received = typeof input === 'string' ? `"${clip(input)}"` : deepest.received;
    // valibot's own messages ("Expected ... but received ...") quote the whole value too.
    const text = deepest.received && deepest.received.length > QUOTE_MAX + 2 ? deepest.message.split(deepest.received).join(received) : deepest.message;
    message = `Invalid '${param ?? 'body'}': ${text}${quote ? ` (got ${received})` : ''}.`;
  }
  return errors.invalid(message, param, code);
}

// Small schema builders with messages that read well after the field name.
export const num = (min: number, max: number) =>
  v.pipe(v.number('must be a number'), v.minValue(min, `must be at least ${min}`), v.maxValue(max, `must be at most ${max}`));
export const int = (min: number, max: number) =>
  v.pipe(v.number('must be an integer'), v.integer('must be an integer'), v.minValue(min, `must be at least ${min}`), v.maxValue(max, `must be at most ${max}`));
export const str = (msg = 'must be a string') => v.string(msg);
export const bool = () => v.boolean('must be a boolean');
export const oneOf = <T extends string>(values: readonly T[]) => v.picklist(values as T[], `must be one of ${values.map((x) => `'${x}'`).join(', ')}`);
/** A function, tool or schema name as OpenAI accepts it (1-64 of a-z A-Z 0-9 _ -). */
export const FN_NAME = v.pipe(v.string('must be a string'), v.regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, underscores or dashes'));

type ObjectSchema = v.GenericSchema & { message?: unknown };

/**
 * `schema` (an object or a record) refusing what is not a plain object.
 * valibot's object and record schemas take any `typeof 'object'`, arrays
 * included: `metadata: []` passed as `{}` and `logit_bias: [5]` as
 * `{"0": 5}`. The issue is the schema's own type issue (its message, or
 * "must be an object"), at the field's path.
 */
function plainObjectOnly<S extends ObjectSchema>(schema: S): S {
  const run = schema['~run'].bind(schema);
  const wrapped: S = {
    ...schema,
    '~run'(dataset: v.UnknownDataset, config: v.Config<v.BaseIssue<unknown>>) {
      const x = dataset.value;
      if (x === null || typeof x !== 'object' || Array.isArray(x)) {
        v._addIssue(wrapped as never, 'type', dataset as never, config, { message: (schema.message as string | undefined) ?? 'must be an object' });
        return dataset as never;
      }
      return run(dataset, config);
    },
  };
  return wrapped;
}

// The object and record schemas of the request bodies: valibot's, with arrays refused.
export const looseObject = ((entries: v.ObjectEntries, message?: string) => plainObjectOnly(v.looseObject(entries, message))) as typeof v.looseObject;
export const strictObject = ((entries: v.ObjectEntries, message?: string) => plainObjectOnly(v.strictObject(entries, message))) as typeof v.strictObject;
export const object = ((entries: v.ObjectEntries, message?: string) => plainObjectOnly(v.object(entries, message))) as typeof v.object;
export const record = ((key: v.GenericSchema<string, string | number | symbol>, value: v.GenericSchema, message?: string) =>
  plainObjectOnly(v.record(key as never, value, message))) as unknown as typeof v.record;

/** What a fast check returns for a value it does not vouch for. */
export const UNSURE: unique symbol = Symbol('unsure');

let fastPaths = true;

/** `fn` run with every fast check off: the schemas as valibot alone runs them (tests compare the two). */
export function withoutFastPaths<T>(fn: () => T): T {
  fastPaths = false;
  try {
    return fn();
  } finally {
    fastPaths = true;
  }
}

/**
 * `schema`, with `fast` tried first. `fast` is a hand-written check of the
 * common shapes of a hot schema (a chat message, a tool) that returns what
 * `schema` would output (a copy of the same objects, the same members and
 * values), or UNSURE for anything it does not vouch for: a value it is unsure
 * of, valid or not, goes through `schema`, so every error (its message, its
 * path) is valibot's. valibot's generic run costs about 0.5-0.9x a JSON.parse
 * of a large conversation, the fast checks 0.1-0.3x (docs/performance.md,
 * "Large requests").
 */
export function withFastPath<S extends v.GenericSchema>(schema: S, fast: (x: unknown) => unknown): S {
  const run = schema['~run'].bind(schema);
  return {
    ...schema,
    '~run'(dataset: v.UnknownDataset, config: v.Config<v.BaseIssue<unknown>>) {
      const out = fastPaths ? fast(dataset.value) : UNSURE;
      if (out === UNSURE) return run(dataset, config);
      const done = dataset as unknown as v.SuccessDataset<unknown>;
      done.typed = true;
      done.value = out;
      return done as never;
    },
  };
}
