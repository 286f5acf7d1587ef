// A seeded fuzz over the three body endpoints (issue 15): a few hundred
// mutations of valid chat, responses and images bodies (wrong types, deep
// nesting, huge strings, unicode, missing and extra fields, broken JSON), sent
// over HTTP with a valid key to the shipped gateway.yaml in front of the
// OpenAI, Anthropic and Gemini mocks. Whatever the body: no 5xx, every error
// is the JSON envelope, and no stack trace in any answer or log line.
// FUZZ_SEED=<n> replays another sequence; FUZZ_N=<n> sends more bodies.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { openAIImagesRoute } from './mocks/openai-images.js';
import { startAnthropicMock, ANTHROPIC_KEY } from './mocks/anthropic.js';
import { startGeminiMock, GEMINI_KEY } from './mocks/gemini.js';
import { startGateway, CLIENT_KEY } from './helpers/gateway.js';

const SEED = Number(process.env.FUZZ_SEED ?? 15);
const N = Number(process.env.FUZZ_N ?? 360);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const responsesMock = createResponsesMock();
const [oai, ant, gem] = await Promise.all([
  startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler, '/v1/images/generations': openAIImagesRoute() } }),
  startAnthropicMock(),
  startGeminiMock(),
]);
const gw = await startGateway(fs.readFileSync(path.join(root, 'gateway.yaml'), 'utf8'), {
  OPENAI_BASE_URL: `${oai.url}/v1`,
  OPENAI_API_KEY: OPENAI_KEY,
  ANTHROPIC_BASE_URL: ant.url,
  ANTHROPIC_API_KEY: ANTHROPIC_KEY,
  GEMINI_BASE_URL: gem.url,
  GEMINI_API_KEY: GEMINI_KEY,
  GATEWAY_RESPONSES_DB: ':memory:',
});
t.teardown(async () => {
  await gw.close();
  await Promise.all([oai.close(), ant.close(), gem.close()]);
});

/** mulberry32: a small seeded PRNG, so that a failure replays exactly. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(SEED);
const int = (n: number) => Math.floor(rand() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];

const CHAT_MODELS = ['openai/gpt-4.1-mini', 'anthropic/claude-sonnet-4-5', 'google/gemini-2.5-flash'];
const tool = { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };

/** Valid bodies: the mutations start from these. */
function validBody(): { path: string; body: Record<string, unknown> } {
  const model = pick(CHAT_MODELS);
  switch (int(6)) {
    case 0:
      return { path: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: 'Say hello' }] } };
    case 1:
      return {
        path: '/v1/chat/completions',
        body: {
          model,
          stream: rand() < 0.5,
          temperature: 0.5,
          max_completion_tokens: 50,
          metadata: { a: 'b' },
          tools: [tool],
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
            { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
            { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
          ],
        },
      };
    case 2:
      return { path: '/v1/responses', body: { model, input: 'Say hello', instructions: 'Be brief.', store: false } };
    case 3:
      return {
        path: '/v1/responses',
        body: {
          model,
          stream: rand() < 0.5,
          store: false,
          tools: [{ type: 'function', name: 'get_weather', parameters: tool.function.parameters }],
          input: [
            { role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
            { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
            { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
          ],
          text: { format: { type: 'text' } },
        },
      };
    case 4:
      return { path: '/v1/responses/input_tokens', body: { model, input: 'Count me' } };
    default:
      return { path: '/v1/images/generations', body: { model: 'openai/gpt-image-1', prompt: 'a cat', n: 1, size: '1024x1024' } };
  }
}

const UNICODE = ['héllo', '日本語のテキスト', '👩‍👩‍👧‍👦🚀', '\u202Eright-to-left', 'nul\u0000byte', '\uD800 lone surrogate', '\uFFFF\uFFFE', 'e\u0301\u0301\u0301', '\\"escaped\\"'];
const nest = (n: number, leaf: unknown = 1): unknown => {
  let v = leaf;
  for (let i = 0; i < n; i++) v = rand() < 0.5 ? [v] : { k: v };
  return v;
};

/** A value of some other type than the one expected. */
function oddValue(): unknown {
  switch (int(15)) {
    case 0:
      return null;
    case 1:
      return pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, 3]);
    case 2:
      return pick([true, false]);
    case 3:
      return pick(['', ' ', 'x', 'auto', 'user', 'function', 'text', 'none']);
    case 4:
      return [];
    case 5:
      return {};
    case 6:
      return [pick([1, 'a', null, {}, []])];
    case 7:
      return { type: pick(['text', 'function', 'message', 'image_url', 'input_text', 'bogus']), [pick(['text', 'name', 'content', 'x'])]: pick([1, 'a', null]) };
    case 8:
      return pick(UNICODE);
    case 9:
      return 'L'.repeat(pick([1_000, 70_000, 400_000]));
    case 10:
      return nest(pick([3, 60, 130]));
    case 13:
      // Deeper than this process should build or stringify: a marker, made JSON text by deepen().
      return `${DEEP}${pick([2_000, 6_000, 20_000])}`;
    case 11:
      return pick(['{"json":"in a string"}', '[1,2', 'data: [DONE]', '<script>', '../../etc/passwd', '%zz', 'x'.repeat(65)]);
    case 12:
      return { __proto__x: 1, constructor: { prototype: 1 } };
    default:
      return pick(UNICODE) + 'W'.repeat(int(200));
  }
}

const DEEP = 'DEEP-MARKER:';
/** Each deep-nesting marker in the JSON text replaced by that many levels of arrays and objects. */
const deepen = (text: string) => text.replace(new RegExp(`"${DEEP}(\\d+)"`, 'g'), (_m, n) => '[{"k":'.repeat(Number(n) / 2) + '1' + '}]'.repeat(Number(n) / 2));

/** Every path to a value inside `v` (objects and arrays), the empty path included. */
function paths(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  return out;
}

function mutate(body: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(body);
  const rounds = 1 + int(3);
  for (let r = 0; r < rounds; r++) {
    const all = paths(copy).filter((p) => p.length > 0);
    if (!all.length) {
      copy[pick(['model', 'messages', 'input', 'prompt', 'x'])] = oddValue();
      continue;
    }
    const target = pick(all);
    const parentPath = target.slice(0, -1);
    let parent: any = copy;
    for (const k of parentPath) parent = parent[k];
    const key = target[target.length - 1];
    switch (int(4)) {
      case 0: // another type or value
        parent[key] = oddValue();
        break;
      case 1: // a field gone
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key];
        break;
      case 2: // an extra field, where one is expected or not
        if (parent && typeof parent === 'object' && !Array.isArray(parent)) parent[pick(['extra_field', 'role', 'type', 'tool_calls', 'tool_call_id', 'function_call', 'name', 'n', 'stream', 'native_fields', 'debug', 'fallbacks', 'refusal', 'logit_bias', 'stop'])] = oddValue();
        else parent.push(oddValue());
        break;
      default: // a value duplicated where a list is
        if (Array.isArray(parent)) parent.push(structuredClone(parent[Number(key)]));
        else parent[key] = [parent[key], oddValue()];
    }
  }
  return copy;
}

/** JSON text that is broken in one of the ways clients break it. */
function breakJson(text: string): string {
  switch (int(7)) {
    case 0:
      return text.slice(0, int(text.length));
    case 1: {
      const i = int(text.length);
      return text.slice(0, i) + pick(['"', '{', ']', ',', '\\', '\u0000', 'NaN', 'undefined']) + text.slice(i);
    }
    case 2:
      return text.replace(/,/, ',,');
    case 3:
      return `{"__proto__":{"polluted":true},${text.slice(1)}`;
    case 4:
      return '[' + text + ']';
    case 5:
      return pick(['', 'null', '42', '"a string"', 'true', '{}', '[]', '{"model":']);
    default:
      return text + text;
  }
}

const STACK = /\bat \S+ \(|\bat (async )?\S+:\d+:\d+|\.(js|ts):\d+(:\d+)?|node:internal|\/work\/|\/src\//;

t.test(`fuzz: ${N} mutated bodies, seed ${SEED}`, async (t) => {
  const seen: Record<number, number> = {};
  const failures: string[] = [];
  const logsBefore = gw.rawLogs.length;
  for (let i = 0; i < N; i++) {
    const { path: p, body } = validBody();
    const kind = rand();
    let text: string;
    if (kind < 0.1) text = JSON.stringify(body);
    else if (kind < 0.85) text = deepen(JSON.stringify(mutate(body)));
    else text = breakJson(JSON.stringify(body));
    const res = await fetch(gw.url + p, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: text });
    const answer = await res.text();
    seen[res.status] = (seen[res.status] ?? 0) + 1;
    const where = `#${i} POST ${p} ${text.length > 300 ? text.slice(0, 300) + '…' : text}`;
    if (res.status >= 500) failures.push(`${where}\n  -> ${res.status} ${answer.slice(0, 400)}`);
    if (STACK.test(answer)) failures.push(`${where}\n  -> a stack trace or file path in the answer: ${answer.slice(0, 400)}`);
    if (res.status >= 300) {
      let err: any;
      try {
        err = JSON.parse(answer).error;
      } catch {
        err = undefined;
      }
      const ok = err && typeof err.message === 'string' && typeof err.type === 'string' && 'param' in err && 'code' in err;
      if (!ok) failures.push(`${where}\n  -> ${res.status} without the envelope: ${answer.slice(0, 300)}`);
      else if (answer.length > 8192) failures.push(`${where}\n  -> an error body of ${answer.length} bytes`);
    }
  }
  const lines = gw.rawLogs.slice(logsBefore);
  for (const l of lines) {
    if (STACK.test(l)) failures.push(`a stack trace or file path in a log line: ${l.slice(0, 500)}`);
    else if (/"level":(50|60)|"level":"(error|fatal)"/.test(l)) failures.push(`an error logged: ${l.slice(0, 500)}`);
  }
  t.same(failures, [], `no 5xx, every error an envelope, no stack trace (statuses: ${JSON.stringify(seen)})`);
  t.ok((seen[200] ?? 0) > N / 20, 'some bodies were served');
  t.ok(Object.keys(seen).length >= 3, 'the bodies reached several kinds of answer');
});
