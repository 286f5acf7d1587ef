// The "heavy" benchmark request: a long chat conversation translated to
// Anthropic, where the gateway's own CPU (parse, field-by-field validation,
// translation, re-serialisation) is the bottleneck rather than the load
// generator or the mock upstream. It is what the `server.workers` scaling is
// judged on: a small passthrough request costs the gateway so little that on a
// 2-core machine the client and the mock take a third of the CPU or more, and a
// second worker only competes with them.
//
// The body is deterministic (same bytes every run): a system prompt, two
// function tools, and alternating user / assistant messages, some with
// content-part arrays, some assistant turns calling a tool followed by the
// tool's result. Roles alternate after translation (a tool result becomes a user
// turn and is followed by an assistant turn), so the Anthropic request the mock
// receives has exactly one message per non-system chat message; `expectedAnthropic`
// writes that request down independently of the gateway's code, and
// `checkAnthropicHeavy` compares what the mock received with it.
import { isDeepStrictEqual } from 'node:util';

export interface HeavyOptions {
  /** Chat messages after the system message, at most (the last one is a user message; the count comes out odd). */
  messages: number;
  /** Words per text (a content part, or a whole string message). */
  words: number;
}

/**
 * 191 messages of 14 words per text: 31 KB of JSON. The gateway's work grows
 * with the number of messages and parts (each is validated, mapped and
 * re-serialised), the mock's and the client's mostly with the bytes, so the
 * budget goes into many short messages. Measured on 2 vCPUs with Node's default
 * heap settings (quick runs; gateway CPU per request against the mock's and the
 * client's together; 2 workers / 1 worker): 63 messages × 42 words (22 KB)
 * ~280 µs against ~100 µs, ~1.0x; 127 × 20 (26 KB) ~400 against ~135 µs,
 * ~1.2-1.45x; 191 × 14 ~460-700 against ~165 µs, ~1.3x.
 */
export const HEAVY_DEFAULT: HeavyOptions = { messages: 191, words: 14 };

const WORDS = (
  'the migration plan moves every tenant from the old cluster to the new one in batches of fifty accounts ' +
  'while the read replicas keep serving traffic and the write path is paused for less than a minute per batch ' +
  'we checked the foreign keys the partial indexes the triggers and the nightly export job which still reads ' +
  'from a view that joins invoices payments refunds and the audit table so it has to be rewritten first ' +
  'latency on the reporting endpoints went up by twelve percent after the schema change and the query planner ' +
  'now prefers a sequential scan on the events table unless the statistics target is raised for the tenant column ' +
  'rollback means restoring the snapshot replaying the write ahead log up to the cutover mark and pointing the ' +
  'connection pooler back at the old primary which we rehearsed twice on staging with production sized data'
).split(' ');

const SYSTEM_PROMPT =
  'You are a senior database reliability engineer helping a team migrate a multi-tenant PostgreSQL ' +
  'deployment to a new cluster. Answer precisely, cite the tool results you rely on, prefer reversible ' +
  'steps, and say so when a question cannot be answered from the information in the conversation. ' +
  'When a query is needed, call run_sql with a read-only statement; when documentation is needed, call ' +
  'search_docs. Keep answers short: a few sentences, then a numbered list of concrete steps if any.';

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'search_docs',
      description: 'Search the internal runbooks and the PostgreSQL documentation. Returns the best matching passages with their source.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to look for, in a few keywords.' },
          top_k: { type: 'integer', minimum: 1, maximum: 20, description: 'How many passages to return.' },
          filters: {
            type: 'object',
            properties: {
              source: { type: 'string', enum: ['runbooks', 'postgres-docs', 'incident-reports'] },
              updated_after: { type: 'string', format: 'date' },
            },
            additionalProperties: false,
          },
        },
        required: ['query'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'run_sql',
      description: 'Run one read-only SQL statement on a replica and return at most 100 rows as JSON.',
      parameters: {
        type: 'object',
        properties: {
          statement: { type: 'string', description: 'A single SELECT or EXPLAIN statement.' },
          database: { type: 'string', enum: ['billing', 'events', 'accounts'] },
          timeout_s: { type: 'number', minimum: 1, maximum: 60 },
        },
        required: ['statement', 'database'],
        additionalProperties: false,
      },
    },
  },
];

/** Deterministic text: `n` words taken from WORDS, starting at a place that depends on `seed`. */
function text(seed: number, n: number): string {
  const out: string[] = [];
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(WORDS[(x >>> 8) % WORDS.length]);
  }
  const s = out.join(' ');
  return s[0].toUpperCase() + s.slice(1) + '.';
}

type ChatMsg = Record<string, unknown>;

/** The chat messages, system message first. */
export function heavyMessages(o: HeavyOptions = HEAVY_DEFAULT): ChatMsg[] {
  const msgs: ChatMsg[] = [{ role: 'system', content: SYSTEM_PROMPT }];
  const n = Math.max(1, o.messages);
  let call = 0;
  // Each turn is user, assistant; every fifth turn (when room is left) is
  // user, assistant calling a tool, tool result, assistant. A final user
  // message (the question the model answers) closes the conversation.
  for (let t = 0; ; t++) {
    const room = n - (msgs.length - 1);
    if (room < 3) break;
    const seed = t * 7;
    msgs.push(
      t % 3 === 1
        ? { role: 'user', content: [{ type: 'text', text: text(seed, o.words) }, { type: 'text', text: text(seed + 1, Math.ceil(o.words / 2)) }] }
        : { role: 'user', content: text(seed, o.words) },
    );
    if (t % 5 === 2 && room >= 5) {
      const id = `call_bench${String(++call).padStart(4, '0')}`;
      const sql = call % 2 === 1;
      msgs.push({
        role: 'assistant',
        content: text(seed + 2, Math.ceil(o.words / 3)),
        tool_calls: [
          {
            id,
            type: 'function',
            function: sql
              ? { name: 'run_sql', arguments: JSON.stringify({ statement: `EXPLAIN SELECT tenant_id, count(*) FROM events WHERE created_at > now() - interval '${call} days' GROUP BY 1`, database: 'events', timeout_s: 30 }) }
              : { name: 'search_docs', arguments: JSON.stringify({ query: text(seed + 3, 5).slice(0, -1), top_k: 5, filters: { source: 'runbooks' } }) },
          },
        ],
      });
      msgs.push({ role: 'tool', tool_call_id: id, content: JSON.stringify({ rows: [{ plan: text(seed + 4, o.words) }, { plan: text(seed + 5, Math.ceil(o.words / 2)) }], truncated: false }) });
      msgs.push({ role: 'assistant', content: text(seed + 6, o.words) });
    } else if (t % 4 === 3) {
      msgs.push({ role: 'assistant', content: [{ type: 'text', text: text(seed + 2, o.words) }, { type: 'text', text: text(seed + 3, Math.ceil(o.words / 3)) }] });
    } else msgs.push({ role: 'assistant', content: text(seed + 2, o.words) });
  }
  msgs.push({ role: 'user', content: text(9999, o.words) });
  return msgs;
}

/** The chat completion request body (JSON). */
export function heavyChatBody(model: string, tokens: number, o: HeavyOptions = HEAVY_DEFAULT): string {
  return JSON.stringify({ model, messages: heavyMessages(o), tools: TOOLS, tool_choice: 'auto', temperature: 0.2, max_completion_tokens: tokens });
}

type Block = Record<string, unknown>;

/** The Anthropic Messages request the heavy chat request must become (cache_control marks aside). */
export function expectedAnthropic(upstreamModel: string, tokens: number, o: HeavyOptions = HEAVY_DEFAULT): Record<string, unknown> {
  const msgs = heavyMessages(o);
  const textBlocks = (c: unknown): Block[] => (typeof c === 'string' ? [{ type: 'text', text: c }] : (c as { text: string }[]).map((p) => ({ type: 'text', text: p.text })));
  const messages: { role: string; content: Block[] }[] = [];
  for (const m of msgs.slice(1)) {
    if (m.role === 'tool') messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content }] });
    else if (m.role === 'user') messages.push({ role: 'user', content: textBlocks(m.content) });
    else {
      const calls = (m.tool_calls as { id: string; function: { name: string; arguments: string } }[] | undefined) ?? [];
      messages.push({
        role: 'assistant',
        content: [...textBlocks(m.content), ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) }))],
      });
    }
  }
  return {
    model: upstreamModel,
    max_tokens: tokens,
    system: [{ type: 'text', text: SYSTEM_PROMPT }],
    messages,
    tools: TOOLS.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters })),
    tool_choice: { type: 'auto' },
    temperature: 0.2,
  };
}

/** A copy without the cache_control marks the gateway adds (they are its choice, not part of the conversation). */
function withoutCacheControl(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutCacheControl);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (k !== 'cache_control') out[k] = withoutCacheControl(x);
    return out;
  }
  return v;
}

/**
 * Compares the request body the mock upstream received with the expected
 * translation: the system prompt lifted to `system`, every message in order
 * with the same blocks, the tools, the limit. Returns why it differs, or null.
 */
export function checkAnthropicHeavy(received: unknown, upstreamModel: string, tokens: number, o: HeavyOptions = HEAVY_DEFAULT): string | null {
  return compareAnthropic(received, expectedAnthropic(upstreamModel, tokens, o));
}

/** What an Anthropic upstream received against the translation expected (cache_control aside): why it differs, or null. */
export function compareAnthropic(received: unknown, want: Record<string, unknown>): string | null {
  if (!received || typeof received !== 'object') return 'the mock received no Anthropic request';
  const got = withoutCacheControl(received) as Record<string, unknown>;
  for (const key of Object.keys(want)) {
    if (key === 'messages') continue;
    if (!isDeepStrictEqual(got[key], want[key])) return `upstream ${key} differs: ${JSON.stringify(got[key])?.slice(0, 160)}`;
  }
  const gm = got.messages as unknown[] | undefined;
  const wm = want.messages as unknown[];
  if (!Array.isArray(gm) || gm.length !== wm.length) return `upstream has ${Array.isArray(gm) ? gm.length : 'no'} messages, expected ${wm.length}`;
  for (let i = 0; i < wm.length; i++) if (!isDeepStrictEqual(gm[i], wm[i])) return `upstream messages[${i}] differs: ${JSON.stringify(gm[i]).slice(0, 160)}`;
  const extra = Object.keys(got).filter((k) => !(k in want) && k !== 'stream');
  if (extra.length) return `unexpected upstream fields: ${extra.join(', ')}`;
  return null;
}
