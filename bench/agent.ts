// Agent conversations of a chosen size, for the rows where the gateway's cost
// must grow with the body and no faster (BENCHMARKS.md, "Large agent
// conversations"): a system prompt, twenty-two tools with JSON Schemas
// (test/fixtures/claude-code-session.ts), and many tool turns — an assistant
// text with one or two tool calls, their results (file contents, search
// output, command output of varied length), now and then a user message —
// until the chat request reaches the size asked for (30, 120 and 400 KB in
// the benchmark).
//
// One conversation, written twice: as a chat completion request (the
// passthrough and chat → Anthropic rows) and as an Anthropic Messages request
// (the Messages → OpenAI rows). The two forms are built from the same turns,
// independently of the gateway's code, so each is what the other must become
// upstream: `expectedAnthropic` is the Messages form the chat request must be
// translated into (`checkAgentAnthropic` compares what the mock received with
// it), and the passthrough check (`checkAgentPassthrough`) requires the mock
// to receive the client's request with only `model` changed, unknown fields
// included. Deterministic: the same bytes every run.
import { isDeepStrictEqual } from 'node:util';
import { compareAnthropic } from './heavy.js';
import { claudeCodeTools, toolResultText } from '../test/fixtures/claude-code-session.js';

type Json = Record<string, unknown>;

/** The sizes of the benchmark's rows, in bytes of the chat request's JSON. */
export const AGENT_SIZES = [30_000, 120_000, 400_000] as const;

const SYSTEM_PROMPT = [
  'You are a coding agent working in a TypeScript monorepo. Use the tools to read, search and change files, and to run commands.',
  'Before you edit a file, read it. Prefer small, reviewable changes; run the relevant tests after each change and report what failed.',
  'When a task is ambiguous, ask one short question instead of guessing. Never commit secrets, and never run commands that delete data outside the working directory.',
  '# Conventions\nStrict TypeScript, ES modules, two-space indentation, no default exports in libraries, tests next to the code they cover (tap).',
  '# Environment\n<env>\nWorking directory: /home/dev/project\nIs directory a git repo: Yes\nPlatform: linux\nNode: v24\n</env>',
].join('\n\n');

/** The tools in chat form (OpenAI function tools). */
function chatTools(): Json[] {
  return claudeCodeTools().map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } }));
}

/** A deterministic sequence of numbers in [0, 1). */
function lcg(seed: number): () => number {
  let x = (seed * 2654435761) >>> 0;
  return () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x >>> 8) / 0x1000000;
  };
}

interface Call {
  id: string;
  name: string;
  input: Json;
  result: string;
}
type Turn = { kind: 'user'; text: string } | { kind: 'assistant'; text: string; calls: Call[] };

const ASKS = [
  'Run the failing test again and show me the first error.',
  'Good. Now look for other callers of that function and fix them too.',
  'Check that the build still passes, then summarise the change in two sentences.',
  'The CI log says the lint step fails on the new file: please fix it — and keep the “exact” wording of the error message.',
];

/** The conversation's turns, until the chat request is about `bytes` long. */
function turns(bytes: number): Turn[] {
  const rnd = lcg(bytes);
  const out: Turn[] = [{ kind: 'user', text: 'The parser tests fail since yesterday\'s merge. Find out why and fix it.' }];
  // The fixed part (system prompt, tools, framing) is about 9 KB; tool turns fill the rest.
  let size = 9_000;
  for (let i = 0; size < bytes; i++) {
    const calls: Call[] = [];
    const n = rnd() < 0.3 ? 2 : 1;
    for (let j = 0; j < n; j++) {
      const k = `${i}_${j}`;
      const pick = rnd();
      let name: string;
      let input: Json;
      let len: number;
      if (pick < 0.45) {
        name = 'Read';
        input = { file_path: `/home/dev/project/packages/parser/src/module${i}_${j}.ts`, limit: 400 };
        len = 1500 + Math.floor(rnd() * 4500);
      } else if (pick < 0.7) {
        name = 'Grep';
        input = { pattern: `parseExpression\\(token${i}`, path: 'packages', output_mode: 'content', '-n': true };
        len = 200 + Math.floor(rnd() * 1200);
      } else if (pick < 0.9) {
        name = 'Bash';
        input = { command: `npx tap --disable-coverage dist/test/parser-${i}.test.js`, description: 'Run the parser tests', timeout: 120000 };
        len = 300 + Math.floor(rnd() * 2000);
      } else {
        name = 'Edit';
        input = { file_path: `/home/dev/project/packages/parser/src/module${i}.ts`, old_string: `if (token.kind === Kind.EOF) return;`, new_string: `if (token.kind === Kind.EOF) return parseError(token, "unexpected end of input");` };
        len = 0;
      }
      const result = len ? toolResultText(name, input, len) : `The file /home/dev/project/packages/parser/src/module${i}.ts has been updated.`;
      calls.push({ id: `call_agent${k.padStart(8, '0')}`, name, input, result });
      size += result.length + JSON.stringify(input).length + 160;
    }
    const text = `Step ${i + 1}: ${calls.map((c) => `${c.name.toLowerCase()} ${String(c.input.file_path ?? c.input.pattern ?? c.input.command)}`).join(', then ')}.`;
    out.push({ kind: 'assistant', text, calls });
    size += text.length + 60;
    if (i % 6 === 5) {
      const ask = ASKS[(i / 6) % ASKS.length | 0];
      out.push({ kind: 'assistant', text: `Done with this part. The tests in module ${i} pass now.`, calls: [] });
      out.push({ kind: 'user', text: ask });
      size += ask.length + 120;
    }
  }
  out.push({ kind: 'assistant', text: 'All the parser tests pass now.', calls: [] });
  out.push({ kind: 'user', text: 'Summarize what you changed, file by file.' });
  return out;
}

/**
 * The chat completion request (JSON text): with `prompt_cache_key`, a field
 * the gateway's schema does not name, which the passthrough must forward as
 * sent (translated paths drop it with a note).
 */
export function agentChatBody(model: string, tokens: number, bytes: number): string {
  const messages: Json[] = [{ role: 'system', content: SYSTEM_PROMPT }];
  for (const t of turns(bytes)) {
    if (t.kind === 'user') messages.push({ role: 'user', content: t.text });
    else {
      const m: Json = { role: 'assistant', content: t.text };
      if (t.calls.length) m.tool_calls = t.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }));
      messages.push(m);
      for (const c of t.calls) messages.push({ role: 'tool', tool_call_id: c.id, content: c.result });
    }
  }
  return JSON.stringify({ model, messages, tools: chatTools(), tool_choice: 'auto', parallel_tool_calls: true, temperature: 0.2, max_completion_tokens: tokens, prompt_cache_key: 'agent-session-0001' });
}

/** The Messages turns: tool results of one assistant turn go back together in the next user turn. */
function messagesOf(ts: Turn[]): Json[] {
  const out: Json[] = [];
  for (const t of ts) {
    if (t.kind === 'user') {
      const last = out[out.length - 1];
      // A user message after tool results joins their turn (roles alternate).
      if (last?.role === 'user') (last.content as Json[]).push({ type: 'text', text: t.text });
      else out.push({ role: 'user', content: [{ type: 'text', text: t.text }] });
      continue;
    }
    out.push({ role: 'assistant', content: [{ type: 'text', text: t.text }, ...t.calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input }))] });
    if (t.calls.length) out.push({ role: 'user', content: t.calls.map((c) => ({ type: 'tool_result', tool_use_id: c.id, content: c.result })) });
  }
  return out;
}

/** The same conversation as an Anthropic Messages request (JSON text), for the Messages → OpenAI rows. */
export function agentMessagesBody(model: string, tokens: number, bytes: number): string {
  return JSON.stringify(expectedAnthropic(model, tokens, bytes));
}

/**
 * The Anthropic request the chat request must become (cache_control marks
 * aside: they are the gateway's choice); the Messages rows send it as is.
 */
export function expectedAnthropic(upstreamModel: string, tokens: number, bytes: number): Json {
  return {
    model: upstreamModel,
    max_tokens: tokens,
    system: [{ type: 'text', text: SYSTEM_PROMPT }],
    tools: claudeCodeTools(),
    tool_choice: { type: 'auto' },
    temperature: 0.2,
    messages: messagesOf(turns(bytes)),
  };
}

/** What the mock received for a chat → Anthropic row, against the expected translation; why it differs, or null. */
export function checkAgentAnthropic(received: unknown, upstreamModel: string, tokens: number, bytes: number): string | null {
  return compareAnthropic(received, expectedAnthropic(upstreamModel, tokens, bytes));
}

/**
 * What the mock received for a passthrough row: the client's request with
 * only `model` changed to the upstream model, every other field (the unknown
 * `prompt_cache_key` too) as the client sent it.
 */
export function checkAgentPassthrough(received: unknown, clientBody: string, upstreamModel: string): string | null {
  const want: Json = { ...(JSON.parse(clientBody) as Json), model: upstreamModel };
  const got = received as Json | undefined;
  if (!got || typeof got !== 'object') return 'the mock received no chat request';
  for (const key of new Set([...Object.keys(want), ...Object.keys(got)])) {
    if (!isDeepStrictEqual(got[key], want[key])) return `upstream ${key} differs from the client's: ${JSON.stringify(got[key])?.slice(0, 160)}`;
  }
  return null;
}
