// The same-API passthrough sends the client's bytes (src/json-source.ts):
// every top-level member the gateway did not change leaves exactly as the
// client wrote it (unknown fields, escapes, spacing inside a member), only
// `model` (and `stream_options` on a stream, extension fields removed) is
// rewritten. Checked on the bytes the mock upstream received, with the openai
// SDK and with hand-written bodies; and the patch itself, member by member.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, openAIConfig, CLIENT_KEY } from './helpers/gateway.js';
import { scanJson, patch, rememberSource, sourceOf, derivedFrom, serialiseBody, utf8 } from '../src/json-source.js';

const mock = await startOpenAIMock();
const gw = await startGateway(openAIConfig(mock.url));
t.teardown(async () => {
  await gw.close();
  await mock.close();
});
t.beforeEach(() => mock.reset());

/** POST raw JSON text to the gateway's chat endpoint; the response's status and text. */
async function post(body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body });
  return { status: res.status, text: await res.text() };
}

t.test('the openai SDK: the upstream receives the bytes the client sent, model patched', async (t) => {
  let sent = '';
  const client = new OpenAI({
    apiKey: CLIENT_KEY,
    baseURL: gw.baseURL,
    maxRetries: 0,
    fetch: (async (url: string, init: RequestInit) => {
      sent = String(init.body);
      return fetch(url, init);
    }) as never,
  });
  const r = await client.chat.completions.create({
    model: 'openai/gpt-4.1-mini',
    messages: [
      { role: 'system', content: 'Answer in French — « comme ça » 😀.' },
      { role: 'user', content: 'The "model" field says "openai/gpt-4.1-mini".' },
    ],
    temperature: 0.25,
    prompt_cache_key: 'session-42',
    metadata: { team: 'ml' },
    store: false,
  });
  t.equal(r.choices[0].message.content, 'Echo: The "model" field says "openai/gpt-4.1-mini".');
  t.ok(sent.includes('"model":"openai/gpt-4.1-mini"'));
  t.equal(mock.requests[0].raw, sent.replace('"model":"openai/gpt-4.1-mini"', '"model":"gpt-4.1-mini"'), 'only the top-level model changed, byte for byte');
});

t.test('hand-written bodies: escapes, spacing, model inside content, unknown fields', async (t) => {
  const messages = '[ {"role":"user","content":"caf\\u00e9 \\ud83d\\ude00 \\"model\\":\\"openai/gpt-4.1-mini\\" \\/ tab\\t"} ]';
  const body = `{ "messages" : ${messages} ,\n  "model":"openai/gpt-4.1-mini", "prompt_cache_key" : "k\\u0031", "temperature": 1.50 }`;
  const r = await post(body);
  t.equal(r.status, 200, r.text);
  const raw = mock.requests[0].raw;
  t.equal(raw, `{"messages" : ${messages},"model":"gpt-4.1-mini","prompt_cache_key" : "k\\u0031","temperature": 1.50}`, 'each unchanged member as written, escapes and number form kept');
  t.same(mock.requests[0].body.messages[0].content, 'café 😀 "model":"openai/gpt-4.1-mini" / tab\t');
});

t.test('stream_options: added when absent, replaced when the client turned usage off, kept when on', async (t) => {
  const base = '"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],"stream":true';
  for (const [client, upstream] of [
    [`{${base}}`, `{${base.replace('openai/gpt-4.1-mini', 'gpt-4.1-mini')},"stream_options":{"include_usage":true}}`],
    [`{${base},"stream_options":{"include_usage":false}}`, `{${base.replace('openai/gpt-4.1-mini', 'gpt-4.1-mini')},"stream_options":{"include_usage":true}}`],
    [`{"stream_options": {"include_usage" : true},${base}}`, `{"stream_options": {"include_usage" : true},${base.replace('openai/gpt-4.1-mini', 'gpt-4.1-mini')}}`],
  ]) {
    mock.reset();
    const r = await post(client);
    t.equal(r.status, 200, r.text);
    t.match(r.text, /data: \[DONE\]/);
    t.equal(mock.requests[0].raw, upstream, client);
  }
});

t.test('gateway extension fields are removed, the rest is the client\'s', async (t) => {
  const r = await post('{"model":"openai/gpt-4.1-mini","extra":{"debug":true},"messages":[{"role":"user","content":"x"}],"fallbacks":["openai/gpt-4.1-mini"],"user":"u1"}');
  t.equal(r.status, 200, r.text);
  t.equal(mock.requests[0].raw, '{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"x"}],"user":"u1"}');
});

t.test('a duplicate top-level key is sent re-serialised: the upstream sees the value the gateway validated', async (t) => {
  const r = await post('{"model":"openai/gpt-4.1-mini","temperature":2,"messages":[{"role":"user","content":"x"}],"temperature":0.5}');
  t.equal(r.status, 200, r.text);
  const raw = mock.requests[0].raw;
  t.equal(raw.split('"temperature"').length, 2, 'one temperature');
  t.equal(mock.requests[0].body.temperature, 0.5, 'the last, as JSON.parse (and the validation) read it');
});

t.test('scanJson: the top-level members, escaped keys decoded; duplicates and non-objects refused', async (t) => {
  const text = ' { "a" : 1 , "b\\u0063":[1,{"x":"}"}], "d":"\\"," }';
  const { members } = scanJson(Buffer.from(text), 0);
  t.same(members?.map((m) => [m.key, text.slice(m.start, m.valueEnd)]), [
    ['a', '"a" : 1'],
    ['bc', '"b\\u0063":[1,{"x":"}"}]'],
    ['d', '"d":"\\","'],
  ]);
  t.equal(scanJson(Buffer.from('{"a":1,"a":2}'), 0).members, null, 'a duplicate key');
  t.equal(scanJson(Buffer.from('[{"a":1}]'), 0).members, null, 'an array');
  t.same(scanJson(Buffer.from('{"mod\\el":[[[1]]]}'), 3), { deep: true, members: null }, 'a key that is not valid JSON: no members, the nesting still measured');
  t.same(scanJson(Buffer.from('{"mod\\el":1}'), 3), { deep: false, members: null });
  t.same(scanJson(Buffer.from('{}'), 0).members, []);
  t.equal(scanJson(Buffer.from('{"a":[[[1]]]}'), 3).deep, true);
  t.equal(scanJson(Buffer.from('{"a":[["[[[["]]}'), 3).deep, false, 'brackets in strings do not count');
});

t.test('scanJson: strings of every length around the short-string loop, with escaped quotes and backslashes anywhere', async (t) => {
  // Deterministic pseudo-random strings (a fixed LCG): lengths 0-160 cross the 48-byte loop's end, and
  // quotes, backslashes and multi-byte characters fall before, on and after it.
  let seed = 7;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  const alphabet = ['a', 'b', ' ', '"', '\\', '\\"', 'é', '€', '\n', '{', ']', ':', ','];
  const str = (len: number) => Array.from({ length: len }, () => alphabet[rnd(alphabet.length)]).join('');
  let checked = 0;
  for (let k = 0; k < 400; k++) {
    const obj: Record<string, unknown> = {};
    for (let m = 0; m < 1 + rnd(5); m++) obj[`${str(rnd(60))}#${m}`] = rnd(2) ? str(rnd(160)) : [str(rnd(100)), { x: str(rnd(70)) }];
    const text = JSON.stringify(obj);
    const { members } = scanJson(Buffer.from(text), 0);
    t.ok(members, `members of ${text.slice(0, 40)}…`);
    const buf = Buffer.from(text);
    t.same(members!.map((x) => x.key), Object.keys(obj));
    for (const x of members!) {
      t.same(JSON.parse(buf.toString('utf8', x.valueStart, x.valueEnd)), obj[x.key], 'the value bytes parse to the value');
      checked++;
    }
  }
  t.ok(checked > 500, `${checked} members checked`);
});

t.test('patch: a member changed in place after parsing is re-serialised; nothing shared: no patch', async (t) => {
  const text = '{"model":"m","messages":[{"role":"user","content":"one"}],"n":1}';
  const bytes = Buffer.from(text);
  const parsed = JSON.parse(text);
  const copy = structuredClone(parsed);
  copy.model = 'up';
  t.equal(patch({ bytes, parsed }, copy)?.toString(), '{"model":"up","messages":[{"role":"user","content":"one"}],"n":1}');
  copy.messages[0].content = 'two';
  t.equal(patch({ bytes, parsed }, copy)?.toString(), '{"model":"up","messages":[{"role":"user","content":"two"}],"n":1}', 'a nested change is seen');
  t.equal(patch({ bytes, parsed }, { ...copy, model: 'm', messages: parsed.messages, n: 2 })?.toString(), '{"model":"m","messages":[{"role":"user","content":"one"}],"n":2}');
  copy.messages[0].content = 'one';
  delete copy.n;
  copy.added = { z: [1, 'é'] };
  copy.gone = undefined;
  t.equal(patch({ bytes, parsed }, copy)?.toString(), '{"model":"up","messages":[{"role":"user","content":"one"}],"added":{"z":[1,"é"]}}', 'removed, added, undefined left out');
  t.equal(patch({ bytes, parsed }, { other: 1 }), undefined, 'nothing of the client\'s left');
  for (const out of [copy, { ...parsed, model: 'x', extra: new Date(0) }, { ...parsed, messages: [...parsed.messages, { role: 'assistant', content: null }] }])
    t.same(JSON.parse(patch({ bytes, parsed }, out)!.toString()), JSON.parse(JSON.stringify(out)), 'parses as JSON.stringify would');
});

t.test('a body\'s source: invisible to readers, not carried by copies, used once when sent', async (t) => {
  const text = '{"model":"m","messages" : [{"role":"user","content":"one"}]}';
  const bytes = Buffer.from(text);
  const parsed = JSON.parse(text);
  const source = { bytes, parsed };
  rememberSource(parsed, source);
  t.equal(sourceOf(parsed), source);
  t.equal(JSON.stringify(parsed), JSON.stringify(JSON.parse(text)), 'JSON.stringify does not see it');
  t.same(Object.keys(parsed), ['model', 'messages'], 'nor Object.keys');
  const keys: string[] = [];
  for (const k in parsed) keys.push(k);
  t.same(keys, ['model', 'messages'], 'nor for-in');
  t.equal(sourceOf({ ...parsed }), undefined, 'a spread copy has no source');
  t.equal(sourceOf(Object.assign({}, parsed)), undefined, 'nor an Object.assign copy');
  t.equal(sourceOf(structuredClone(parsed)), undefined, 'nor a structured clone');
  t.equal(sourceOf(Object.create(parsed)), undefined, 'nor an object inheriting from it');
  t.equal(sourceOf({}), undefined);
  const frozen = Object.freeze({ model: 'm' });
  rememberSource(frozen, source);
  t.equal(sourceOf(frozen), undefined, 'a frozen object is left alone');

  const out = derivedFrom({ ...parsed, model: 'up' }, source);
  t.same(Object.keys(out), ['model', 'messages']);
  t.equal(serialiseBody(out).toString(), '{"model":"up","messages" : [{"role":"user","content":"one"}]}', 'sent from the client\'s bytes');
  t.equal(serialiseBody(out).toString(), JSON.stringify(out), 'once: a second serialisation does not hold on to the bytes');
  const frozenOut = derivedFrom(Object.freeze({ ...parsed, model: 'up' }), source);
  t.equal(serialiseBody(frozenOut).toString(), JSON.stringify(frozenOut), 'a frozen body is serialised on its own');
});

t.test('utf8: the bytes Buffer.from gives, for every kind of text around the sizes where it switches', async (t) => {
  const pieces = ['a', 'é', '“', '—', '😀', '\ud800', '\udc00', '\u0000', '"\\'];
  let seed = 7;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) / 0x1000000;
  for (const len of [0, 1, 100, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 40_000, 300_000]) {
    for (const mix of [0, 0.001, 0.2, 1]) {
      let s = '';
      while (s.length < len) s += rnd() < mix ? pieces[Math.floor(rnd() * pieces.length)] : 'x';
      s = s.slice(0, len); // may cut a surrogate pair: a lone surrogate, encoded as U+FFFD by both
      t.ok(utf8(s).equals(Buffer.from(s)), `${len} units, ${mix * 100}% beyond ASCII`);
    }
  }
  // The guess (1/8 more than the length) is short: the rest is encoded after, pairs kept whole across the seam.
  const astral = '😀'.repeat(20_000);
  t.ok(utf8(astral).equals(Buffer.from(astral)), 'astral characters only');
  const seam = 'x'.repeat(18_000) + '😀'.repeat(5_000);
  t.ok(utf8(seam).equals(Buffer.from(seam)), 'ASCII, then 4-byte characters');
  t.equal(utf8('x'.repeat(20_000)).length, 20_000);
});
