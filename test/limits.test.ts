// Key policies in one process (docs/keys.md): requests and tokens per minute,
// requests at once, budgets; the OpenAI-style rate-limit headers on every
// answer of a limited key, 429 with Retry-After over a limit,
// `insufficient_quota` past a budget; reservations settled with the real usage
// (JSON, streams, the Messages API) and released when a request fails.
import t from 'tap';
import { createHash } from 'node:crypto';
import OpenAI, { APIError } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, until } from './helpers/gateway.js';
import { loadConfigText } from '../src/config/load.js';
import { builtins } from '../plugins/index.js';
import { familiesOf } from '../src/cli.js';

const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const KEYS = { rpm: 'gw-rpm-key-0001', tpm: 'gw-tpm-key-0001', par: 'gw-par-key-0001', budget: 'gw-budget-key-01', teamA: 'gw-team-a-key-01', teamB: 'gw-team-b-key-01', free: 'gw-free-key-0001', msg: 'gw-msg-key-00001' };

const oai = await startOpenAIMock();
const gw = await startGateway(
  openAIConfig(
    oai.url,
    `
policies:
  team:
    rpm: 2
    models: [openai/gpt-4.1-mini]
keys:
  - { name: rpm, sha256: ${sha(KEYS.rpm)}, rpm: 3 }
  - { name: tpm, sha256: ${sha(KEYS.tpm)}, tpm: 2000 }
  - { name: par, sha256: ${sha(KEYS.par)}, max_parallel: 1 }
  - { name: budget, sha256: ${sha(KEYS.budget)}, budget_usd: 0.01, budget_period: day }
  - { name: team-a, sha256: ${sha(KEYS.teamA)}, policy: team }
  - { name: team-b, sha256: ${sha(KEYS.teamB)}, policy: team, rpm: 5 }
  - { name: free, sha256: ${sha(KEYS.free)} }
  - { name: msg, sha256: ${sha(KEYS.msg)}, rpm: 1, tpm: 5000 }
`,
    {
      models: `
  - id: x/priced
    deployments: [{ provider: openai, model: gpt-4.1 }]
    pricing: { input: 2, output: 8 }
    max_output_tokens: 500
  - id: x/any
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
`,
    },
  ),
);
t.teardown(async () => {
  await gw.close();
  await oai.close();
});
const client = (key: string) => new OpenAI({ apiKey: key, baseURL: gw.baseURL, maxRetries: 0 });
const ask = (key: string, extra: Record<string, unknown> = {}, opts: Record<string, unknown> = {}) =>
  client(key).chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hi' }], ...extra } as never, opts).withResponse();
const refusal = async (p: Promise<unknown>): Promise<APIError> => {
  try {
    await p;
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
};
const settled = (n: number) => until(() => gw.records.length >= n);

t.test('rpm: the headers count down, the request past the limit gets 429 rate_limit_error with Retry-After', async (t) => {
  for (let i = 0; i < 3; i++) {
    const { response } = await ask(KEYS.rpm);
    t.equal(response.headers.get('x-ratelimit-limit-requests'), '3');
    t.equal(response.headers.get('x-ratelimit-remaining-requests'), String(2 - i));
    t.match(response.headers.get('x-ratelimit-reset-requests'), /^(\d+m)?\d+s$/);
    t.equal(response.headers.get('x-ratelimit-limit-tokens'), null, 'no token limit: no token headers');
  }
  const err = await refusal(ask(KEYS.rpm));
  t.equal(err.status, 429);
  t.match(err.error, { type: 'rate_limit_error', code: 'rate_limit_exceeded', message: /3 requests per minute/ });
  t.ok(Number(err.headers?.get('retry-after')) >= 1, 'Retry-After in seconds');
  t.equal(err.headers?.get('x-ratelimit-remaining-requests'), '0');
  t.equal(oai.requests.filter((r) => r.headers.authorization).length >= 3, true);
});

t.test('a key without limits gets no rate-limit headers', async (t) => {
  const { response } = await ask(KEYS.free);
  t.equal(response.headers.get('x-ratelimit-limit-requests'), null);
});

t.test('tpm: the estimate (input size + max_tokens) is reserved, then settled with the real usage', async (t) => {
  const before = gw.records.length;
  const { response } = await ask(KEYS.tpm, { max_tokens: 1500 });
  const remaining = Number(response.headers.get('x-ratelimit-remaining-tokens'));
  t.equal(response.headers.get('x-ratelimit-limit-tokens'), '2000');
  t.ok(remaining <= 500, `1500 output tokens and the input reserved (remaining ${remaining})`);
  await settled(before + 1);
  // Settled with the mock's usage (a few tokens): the next request finds the reservation released.
  const used = gw.records.at(-1)!.usage!;
  const next = await ask(KEYS.tpm, { max_tokens: 1500 });
  const left = Number(next.response.headers.get('x-ratelimit-remaining-tokens'));
  t.ok(left >= 2000 - (used.input_tokens + used.output_tokens) - 1500 - 50, `settled to the real usage: ${left} tokens left`);
  await settled(before + 2);
  // A request whose reservation does not fit while another one holds its own: 429 on tokens.
  oai.reset();
  oai.fail({ hang: true });
  const ac = new AbortController();
  const held = ask(KEYS.tpm, { max_tokens: 1500 }, { signal: ac.signal });
  await until(() => oai.requests.length === 1);
  const err = await refusal(ask(KEYS.tpm, { max_tokens: 1500 }));
  t.equal(err.status, 429);
  t.match(err.error, { type: 'rate_limit_error', message: /2000 tokens per minute/ });
  t.ok(Number(err.headers?.get('x-ratelimit-remaining-tokens')) < 1500);
  ac.abort();
  await held.catch(() => {});
  oai.reset();
  // The aborted request's reservation is released: a request fits again.
  await settled(before + 4);
  const again = await ask(KEYS.tpm, { max_tokens: 1500 });
  t.equal(again.response.status, 200);
});

t.test('tpm: a stream settles when it ends', async (t) => {
  const before = gw.records.length;
  const stream = await client(KEYS.tpm).chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'hello there' }], stream: true, max_tokens: 1800 });
  for await (const _ of stream);
  await settled(before + 1);
  const u = gw.records.at(-1)!.usage!;
  t.ok(u.output_tokens > 0 && u.output_tokens < 50, 'the stream reported its usage');
  const { response } = await ask(KEYS.tpm, { max_tokens: 10 });
  t.equal(response.status, 200, 'the 1800 reserved for the stream were released at its end');
});

t.test('max_parallel: a second request while one is under way gets 429; the slot frees when the first fails', async (t) => {
  oai.reset();
  oai.fail({ hang: true });
  const before = gw.records.length;
  const ac = new AbortController();
  const held = ask(KEYS.par, {}, { signal: ac.signal });
  await until(() => oai.requests.length === 1);
  const err = await refusal(ask(KEYS.par));
  t.equal(err.status, 429);
  t.match(err.error, { type: 'rate_limit_error', message: /1 requests at once/ });
  ac.abort();
  await held.catch(() => {});
  oai.reset();
  await settled(before + 2);
  const { response } = await ask(KEYS.par);
  t.equal(response.status, 200);
});

t.test('budget: priced requests reserve their maximum cost; past the budget, 429 insufficient_quota', async (t) => {
  // x/priced: $2/M input, $8/M output, 500 output tokens at most: about $0.004 reserved per request.
  let ok = 0;
  let err: APIError | undefined;
  for (let i = 0; i < 100 && !err; i++) {
    const before = gw.records.length;
    try {
      await ask(KEYS.budget, { model: 'x/priced', messages: [{ role: 'user', content: 'x'.repeat(40) }] });
      ok++;
    } catch (e) {
      if (!(e instanceof APIError)) throw e;
      err = e;
    }
    await settled(before + 1);
  }
  t.ok(err, 'refused once the budget is spent');
  t.equal(err!.status, 429);
  t.match(err!.error, { type: 'rate_limit_error', code: 'insufficient_quota', message: /budget of \$0.01 for this day/ });
  const spent = gw.records.filter((r) => r.key === 'budget' && r.status === 200).reduce((s, r) => s + (r.cost_usd ?? 0), 0);
  t.ok(ok >= 2, `${ok} requests served`);
  t.ok(spent <= 0.01, `spent $${spent}: within the budget (each request reserved its maximum)`);
  t.ok(Number(err!.headers?.get('retry-after')) <= 86_400, 'Retry-After: the end of the day at most');
});

t.test('named policies: shared by keys, each key has its own counters, a key overrides a field', async (t) => {
  for (let i = 0; i < 2; i++) await ask(KEYS.teamA);
  t.equal((await refusal(ask(KEYS.teamA))).status, 429, 'team-a: rpm 2 from the policy');
  const { response } = await ask(KEYS.teamB);
  t.equal(response.headers.get('x-ratelimit-limit-requests'), '5', 'team-b: its own rpm, over the policy');
  const denied = await refusal(ask(KEYS.teamB, { model: 'x/priced' }));
  t.equal(denied.status, 403, 'the policy\'s models apply to the key');
});

t.test('the Messages API: limits and headers apply there too', async (t) => {
  const anth = new Anthropic({ apiKey: KEYS.msg, baseURL: gw.url, maxRetries: 0 });
  const { response } = await anth.messages.create({ model: 'x/any', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
  t.equal(response.headers.get('x-ratelimit-limit-tokens'), '5000');
  t.equal(response.headers.get('x-ratelimit-remaining-requests'), '0');
  try {
    await anth.messages.create({ model: 'x/any', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    t.fail('one request a minute');
  } catch (err) {
    t.ok(err instanceof Anthropic.APIError);
    t.equal((err as InstanceType<typeof Anthropic.APIError>).status, 429);
    t.match((err as InstanceType<typeof Anthropic.APIError>).error, { type: 'error', error: { type: 'rate_limit_error' } });
  }
});

t.test('a key naming an unknown policy is a config problem', async (t) => {
  t.throws(
    () => loadConfigText(`keys:\n  - { name: k, sha256: ${sha('x')}, policy: nope }\n`, 'g.yaml', { families: familiesOf(builtins()), env: {} }),
    /keys\.0\.policy.*no policy named "nope"/,
  );
});

t.test('the shipped gateway.yaml takes state.redis_url from REDIS_URL when it is set', async (t) => {
  const { readFileSync } = await import('node:fs');
  const text = readFileSync(new URL('../../gateway.yaml', import.meta.url), 'utf8');
  const families = familiesOf(builtins());
  t.equal(loadConfigText(text, 'gateway.yaml', { families, env: {} }).state.redis_url, '');
  t.equal(loadConfigText(text, 'gateway.yaml', { families, env: { REDIS_URL: 'redis://cache:6379/0' } }).state.redis_url, 'redis://cache:6379/0');
});

t.test('/metrics counts the refusals by limit', async (t) => {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const count = (limit: string) => Number(new RegExp(`^gateway_key_limit_rejections_total\\{limit="${limit}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
  // Above: rpm (1), the team policy (1) and the Messages key (1); tpm (1); max_parallel (1); the budget (1).
  t.equal(count('requests'), 3);
  t.equal(count('tokens'), 1);
  t.equal(count('parallel'), 1);
  t.equal(count('budget'), 1);
  t.match(text, /^gateway_state_unavailable_total 0$/m);
});

t.test('several workers without Redis: the primary warns that each worker counts on its own', async (t) => {
  const { startGatewayProcess } = await import('./helpers/process.js');
  const g = await startGatewayProcess(t, openAIConfig(oai.url, `server: { workers: 2 }\nkeys:\n  - { name: rpm, sha256: ${sha(KEYS.rpm)}, rpm: 3 }\n`));
  t.ok(g.lines().some((l) => /each worker counts on its own/.test(l.msg)), 'the warning');
  g.stop();
});

t.test('in memory: a settlement counts once', async (t) => {
  const { MemoryLimits } = await import('../src/limits.js');
  const store = new MemoryLimits();
  const limits = { tpm: 1000, budget_usd: 1, budget_period: 'day' as const };
  const first = store.admitNow({ key: 'k', id: 'r1', limits, estimate: { tokens: 300, micros: 400_000 } }, Date.now());
  if (!first.ok) throw new Error('admitted');
  await store.settle(first.reservation, { tokens: 100, micros: 100_000 });
  await store.settle(first.reservation, { tokens: 100, micros: 100_000 });
  const next = store.admitNow({ key: 'k', id: 'r2', limits, estimate: { tokens: 900, micros: 900_000 } }, Date.now());
  t.equal(next.ok, true, 'the tokens and spend were counted once (100 + 900 ≤ 1000, $0.1 + $0.9 ≤ $1)');
  t.equal(next.view.tokens, 1000);
  const again = store.admitNow({ key: 'k', id: 'r3', limits, estimate: { tokens: 1, micros: 1 } }, Date.now());
  t.equal(again.ok, false, 'and the window is full');
});
