// Local token counts: what the gateway counts itself when a provider has no
// counting endpoint (or its count failed), and what `truncation` measures.
//
// - A family whose plugin declares `tokenizer: 'o200k_base'` (FamilyDefaults)
//   is counted with that encoding (gpt-tokenizer): the encoding of GPT-4o,
//   GPT-4.1, GPT-5 and the o-series.
// - Other families publish no tokenizer; their count is an estimate: one token
//   per 4 characters, rounded up, per text.
// Each message adds a small framing overhead (role and separators: 4 tokens,
// as in OpenAI's chat format), and an image a fixed cost (85 tokens at detail
// 'low', 765 otherwise: OpenAI's cost of one 512-px tile plus base for a
// 1024-px image, a fair middle for other providers too).
import type { ChatRequest, ContentPart } from './types.js';

export const ITEM_OVERHEAD = 4;
export const IMAGE_TOKENS = { low: 85, other: 765 } as const;
/** A file part (PDF...) is priced per page by providers; without parsing it, a flat estimate. */
export const FILE_TOKENS = 1_500;

export type Counter = (text: string) => number;

export const estimateTokens: Counter = (text) => Math.ceil(text.length / 4);

/** A run of this many characters without whitespace is counted in pieces (boundedCount). */
const LONG_RUN = /\S{256,}/g;
const PIECE = 128;

/**
 * `count(text)`, with each run of 256 or more characters without whitespace
 * counted in pieces of 128. BPE over one pre-token is quadratic in its
 * length: a 20,000-letter word took 0.4 s of CPU to count and a 400 KB one
 * minutes, on the event loop, for any client with a key (input_tokens, and
 * every count truncation makes). Ordinary text has no such run and is
 * counted exactly; a long run's count may differ by a token at a piece's edge.
 */
export function boundedCount(text: string, count: Counter): number {
  if (text.length < 256) return count(text);
  let n = 0;
  let last = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    n += count(text.slice(last, m.index));
    for (let i = 0; i < m[0].length; i += PIECE) n += count(m[0].slice(i, i + PIECE));
    last = m.index + m[0].length;
  }
  return last === 0 ? count(text) : n + count(text.slice(last));
}

let o200k: Counter | undefined;
/** The o200k_base counter, loaded on first use (its table is large and most requests never need it). */
export async function exactCounter(): Promise<Counter> {
  if (!o200k) {
    const mod = await import('gpt-tokenizer/encoding/o200k_base');
    const count = (text: string) => (text ? mod.countTokens(text) : 0);
    o200k = (text) => boundedCount(text, count);
  }
  return o200k;
}

/** The counter for a family: exact when its plugin names a tokenizer the gateway has, an estimate otherwise. */
export async function counterFor(tokenizer: string | undefined): Promise<Counter> {
  return tokenizer === 'o200k_base' ? exactCounter() : estimateTokens;
}

function contentCost(content: string | ContentPart[] | null | undefined, count: Counter): number {
  if (content == null) return 0;
  if (typeof content === 'string') return count(content);
  let n = 0;
  for (const p of content) n += p.type === 'image_url' ? (p.image_url.detail === 'low' ? IMAGE_TOKENS.low : IMAGE_TOKENS.other) : count(p.text ?? '');
  return n;
}

/**
 * The input tokens of a chat IR request, counted locally: every message
 * (system and developer ones included) with its framing, the tool calls an
 * assistant made, and the tool definitions (their JSON, as providers render
 * them into the prompt).
 */
export function countChatTokens(req: ChatRequest, count: Counter): number {
  let n = 0;
  for (const m of req.messages) {
    n += ITEM_OVERHEAD + contentCost(m.content, count);
    if (m.reasoning_content) n += count(m.reasoning_content);
    for (const tc of m.tool_calls ?? []) n += count(tc.function.name) + count(tc.function.arguments);
  }
  if (req.tools?.length) n += count(JSON.stringify(req.tools.map((t) => t.function)));
  return n;
}
