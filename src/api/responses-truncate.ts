// `truncation` for POST /v1/responses (spec 4.1 and 7): measure the input
// against the target model's catalog `context_window` before any upstream call.
//
// Counting (src/tokens.ts): o200k_base for a family whose plugin declares that
// tokenizer, an estimate of one token per 4 characters otherwise; each item
// adds a framing overhead, an image and a file a fixed cost.
//
// `disabled` (the default): too long is a 400 `context_length_exceeded`.
// `auto`: items are dropped from the middle of the conversation (never the
// system/developer messages, the first user turn or the latest user turn and
// what follows it; a function call is never separated from its output) until
// the input plus `max_output_tokens` fits.
import type { NormalizationEntry } from '../types.js';
import { errors } from '../errors.js';
import { ITEM_OVERHEAD, IMAGE_TOKENS, FILE_TOKENS, counterFor, type Counter } from '../tokens.js';
import type { Item, Part } from './responses-map.js';

/** An upper bound that needs no tokenizer: a BPE token is at least one UTF-8 byte. */
const byteBound: Counter = (text) => Buffer.byteLength(text, 'utf8');

function partsCost(content: string | Part[] | null | undefined, count: Counter): number {
  if (content == null) return 0;
  if (typeof content === 'string') return count(content);
  let n = 0;
  for (const p of content) {
    if (p.type === 'input_image') n += p.detail === 'low' ? IMAGE_TOKENS.low : IMAGE_TOKENS.other;
    else if (p.type === 'input_file') n += FILE_TOKENS;
    else n += count(p.text ?? p.refusal ?? '');
  }
  return n;
}

export function itemCost(it: Item, count: Counter): number {
  switch (it.type) {
    case 'message':
      return ITEM_OVERHEAD + partsCost(it.content, count);
    case 'function_call':
      return ITEM_OVERHEAD + count(it.name ?? '') + count(it.arguments ?? '');
    case 'function_call_output':
      return ITEM_OVERHEAD + partsCost(it.output, count);
    case 'reasoning':
      return count((it.summary ?? []).map((s) => s.text).join('\n'));
    default:
      return ITEM_OVERHEAD;
  }
}

/**
 * Units that are dropped together: a run of function calls with their outputs
 * (wherever those sit) and the reasoning and hosted-tool records before them.
 * Returns the unit of each item.
 */
export function unitsOf(items: Item[]): number[] {
  const unit = new Array<number>(items.length);
  const byCall = new Map<string, number>();
  let pending: number[] = [];
  let u = -1;
  let lastWasCall = false;
  items.forEach((it, i) => {
    if (it.type === 'reasoning' || it.type === 'web_search_call') {
      pending.push(i);
      return;
    }
    let mine: number;
    if (it.type === 'function_call') {
      mine = lastWasCall && pending.length === 0 ? u : ++u;
      u = Math.max(u, mine);
      if (it.call_id) byCall.set(it.call_id, mine);
      lastWasCall = true;
    } else if (it.type === 'function_call_output' && it.call_id && byCall.has(it.call_id)) {
      mine = byCall.get(it.call_id)!;
      lastWasCall = false;
    } else {
      mine = ++u;
      lastWasCall = false;
    }
    for (const p of pending) unit[p] = mine;
    pending = [];
    unit[i] = mine;
  });
  if (pending.length) {
    const mine = ++u;
    for (const p of pending) unit[p] = mine;
  }
  return unit;
}

export interface FitOptions {
  modelId: string;
  contextWindow?: number;
  maxOutputTokens?: number | null;
  truncation: 'auto' | 'disabled';
  /** The target family's tokenizer (FamilyDefaults.tokenizer); an estimate without one. */
  tokenizer?: string;
  instructions?: string | null;
  tools?: unknown[] | null;
}

export interface FitResult {
  items: Item[];
  changed: boolean;
  note?: NormalizationEntry;
}

/** What every request carries besides its items: the instructions (a system message) and the tool definitions. */
function fixedCost(o: { instructions?: string | null; tools?: unknown[] | null }, count: Counter): number {
  return count((o.instructions ?? '') + (o.tools?.length ? JSON.stringify(o.tools) : '')) + (o.instructions ? ITEM_OVERHEAD : 0);
}

/** The input tokens of a Responses request counted locally: its items, instructions and tools. */
export function countItems(items: Item[], o: { instructions?: string | null; tools?: unknown[] | null }, count: Counter): number {
  let n = fixedCost(o, count);
  for (const it of items) n += itemCost(it, count);
  return n;
}

function tooLong(tokens: number, o: FitOptions, after: string): never {
  throw errors.invalid(
    `The input is too long for ${o.modelId}: about ${tokens} tokens against a context window of ${o.contextWindow} tokens${after}.` +
      (o.truncation === 'auto' ? '' : " Shorten it, or send truncation: 'auto' to drop items from the middle of the conversation."),
    'input',
    'context_length_exceeded',
  );
}

export async function fitContext(items: Item[], o: FitOptions): Promise<FitResult> {
  const window = o.contextWindow;
  if (!window) return { items, changed: false };
  const reserve = o.truncation === 'auto' ? (o.maxOutputTokens ?? 0) : 0;
  const limit = window - reserve;
  // Fast path: most inputs are far below the window even counted in bytes.
  if (countItems(items, o, byteBound) <= limit) return { items, changed: false };

  const count = await counterFor(o.tokenizer);
  const costs = items.map((it) => itemCost(it, count));
  let total = fixedCost(o, count) + costs.reduce((a, b) => a + b, 0);
  if (total <= limit) return { items, changed: false };
  if (o.truncation !== 'auto') tooLong(total, o, '');

  // Which units may go: not system/developer, not the first user message,
  // not the last user message or anything after it.
  const unit = unitsOf(items);
  const isUser = (it: Item) => it.type === 'message' && it.role === 'user';
  const firstUser = items.findIndex(isUser);
  let lastUser = -1;
  items.forEach((it, i) => {
    if (isUser(it)) lastUser = i;
  });
  const protectedUnits = new Set<number>();
  items.forEach((it, i) => {
    if (it.type === 'message' && (it.role === 'system' || it.role === 'developer')) protectedUnits.add(unit[i]);
    if (i === firstUser || (lastUser >= 0 && i >= lastUser)) protectedUnits.add(unit[i]);
  });
  if (lastUser < 0 && items.length) protectedUnits.add(unit[items.length - 1]);
  const unitCost = new Map<number, number>();
  items.forEach((_, i) => unitCost.set(unit[i], (unitCost.get(unit[i]) ?? 0) + costs[i]));
  const order = [...new Set(unit)].filter((u) => !protectedUnits.has(u)).sort((a, b) => a - b); // oldest first
  const dropped = new Set<number>();
  for (const u of order) {
    if (total <= limit) break;
    dropped.add(u);
    total -= unitCost.get(u)!;
  }
  if (total > limit) tooLong(total, o, reserve ? ` (keeping ${reserve} for max_output_tokens) even after dropping every item that may be dropped` : ' even after dropping every item that may be dropped');
  const kept = items.filter((_, i) => !dropped.has(unit[i]));
  return {
    items: kept,
    changed: true,
    note: {
      param: 'input',
      action: 'strip',
      before: items.length,
      after: kept.length,
      reason: `truncation 'auto': dropped ${items.length - kept.length} item(s) from the middle of the conversation to fit the ${window}-token context window of ${o.modelId} (now about ${total} tokens${reserve ? `, plus ${reserve} for max_output_tokens` : ''})`,
    },
  };
}
