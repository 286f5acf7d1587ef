// GET /v1/responses/{id}/input_items (the SDKs' `responses.inputItems.list`):
// the items a stored response was generated from, in OpenAI's list shape and
// with OpenAI's cursor pagination
// (https://platform.openai.com/docs/api-reference/responses/input-items):
// `after` (an item id), `limit` (1 to 100, default 20), `order` (`asc` or
// `desc`, default `desc`), answered as `{object: 'list', data, first_id,
// last_id, has_more}`.
//
// The items are the response's whole context, oldest first: the stored
// conversation behind its `previous_response_id` (every earlier turn's input
// and output), then its own input. Each comes back as OpenAI lists it: a
// message with `type`, `status` and its content as parts (`input_text`, or
// `output_text` for an assistant turn), and an `id`. An item the client sent
// with an id keeps it; the others get one derived from the response that
// stored them and their position (`msg_…`, `fc_…`, `fco_…`), so that ids are
// stable from one call to the next (a cursor must be) without the store
// having to keep them.
import { createHash } from 'node:crypto';
import { errors, clip } from '../errors.js';
import type { Item } from './responses-map.js';

export interface ListQuery {
  after?: string;
  limit: number;
  order: 'asc' | 'desc';
}

/** `include` values the list accepts (those of POST /v1/responses; they change nothing here: image URLs always come back). */
const INCLUDABLE = new Set([
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  'message.output_text.logprobs',
]);

function one(q: URLSearchParams, name: string): string | undefined {
  const all = q.getAll(name);
  if (all.length > 1) throw errors.invalid(`Invalid '${name}': the query parameter is given ${all.length} times; give it once.`, name, 'invalid_value');
  return all[0];
}

/** The query of a list request, checked: a bad value is a 400 naming its parameter. */
export function parseListQuery(q: URLSearchParams): ListQuery {
  const limitText = one(q, 'limit');
  let limit = 20;
  if (limitText !== undefined) {
    if (!/^-?\d+$/.test(limitText)) throw errors.invalid(`Invalid 'limit': expected an integer, but got '${clip(limitText)}' instead.`, 'limit', 'invalid_type');
    limit = Number(limitText);
    if (limit < 1) throw errors.invalid(`Invalid 'limit': integer below minimum value. Expected a value >= 1, but got ${clip(limitText)} instead.`, 'limit', 'integer_below_min_value');
    if (limit > 100) throw errors.invalid(`Invalid 'limit': integer above maximum value. Expected a value <= 100, but got ${clip(limitText)} instead.`, 'limit', 'integer_above_max_value');
  }
  const order = one(q, 'order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw errors.invalid(`Invalid 'order': expected one of 'asc' or 'desc', but got '${clip(order)}' instead.`, 'order', 'invalid_value');
  const after = one(q, 'after');
  if (after === '') throw errors.invalid("Invalid 'after': expected an item id, but got an empty string instead.", 'after', 'empty_string');
  // The SDKs send an array as include[]=a&include[]=b; a plain include=a is accepted too.
  for (const name of ['include[]', 'include']) {
    for (const v of q.getAll(name)) if (!INCLUDABLE.has(v)) throw errors.invalid(`Invalid 'include': '${clip(v)}' is not one of the values 'include' takes.`, 'include', 'invalid_value');
  }
  return { after, limit, order };
}

const PREFIX: Record<string, string> = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  reasoning: 'rs',
  web_search_call: 'ws',
  custom_tool_call: 'ctc',
  custom_tool_call_output: 'ctco',
};

/** A stable id for an item stored without one: OpenAI's prefix for its type, then 48 hex digits derived from where it was stored. */
export function derivedItemId(type: string, responseId: string, index: number): string {
  const hex = createHash('sha256').update(`${responseId}\0${index}`).digest('hex').slice(0, 48);
  return `${PREFIX[type] ?? 'item'}_${hex}`;
}

/** One stored item as OpenAI lists it (pure). */
export function listedItem(it: Item, responseId: string, index: number): Record<string, unknown> {
  const src = it as Record<string, unknown>;
  const type = typeof src.type === 'string' ? src.type : 'message';
  const id = typeof src.id === 'string' && src.id ? src.id : derivedItemId(type, responseId, index);
  if (type === 'message') {
    const assistant = src.role === 'assistant';
    const content = typeof src.content === 'string' ? [assistant ? { type: 'output_text', text: src.content, annotations: [] } : { type: 'input_text', text: src.content }] : src.content;
    return { id, type, role: src.role, content, status: src.status ?? 'completed' };
  }
  if (type === 'function_call' || type === 'function_call_output') return { ...src, id, type, status: src.status ?? 'completed' };
  return { ...src, id, type };
}

/** The items of a stored turn, each with its id, in the order they were given. */
export interface Turn {
  responseId: string;
  items: Item[];
}

/** One page of the list, in OpenAI's shape. */
export function pageOf(turns: Turn[], q: ListQuery): Record<string, unknown> {
  const all: Record<string, unknown>[] = [];
  for (const t of turns) t.items.forEach((it, i) => all.push(listedItem(it, t.responseId, i)));
  if (q.order === 'desc') all.reverse();
  let start = 0;
  if (q.after !== undefined) {
    const at = all.findIndex((it) => it.id === q.after);
    if (at === -1) throw errors.invalid(`Invalid 'after': no input item of this response has the id '${clip(q.after)}'.`, 'after', 'invalid_value');
    start = at + 1;
  }
  const data = all.slice(start, start + q.limit);
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data.at(-1)?.id as string | undefined) ?? null,
    has_more: start + data.length < all.length,
  };
}
