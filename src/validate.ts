// Turns valibot issues into the 400 envelope with a message that names the
// field (`param` is the field's path, e.g. `messages[2].content`).
import * as v from 'valibot';
import { errors, GatewayError } from './errors.js';

export function paramPath(issue: Pick<v.BaseIssue<unknown>, 'path'>): string {
  let out = '';
  for (const item of issue.path ?? []) {
    const key = item.key as string | number;
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${key}` : String(key);
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
    const input = deepest.input;
    const quote = deepest.received && deepest.kind !== 'schema' && (input === null || typeof input !== 'object');
    message = `Invalid '${param ?? 'body'}': ${deepest.message}${quote ? ` (got ${deepest.received})` : ''}.`;
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
