// GET /v1/responses/{id}/input_items through the gateway, driven by the
// official openai SDK (`responses.inputItems.list`, its pages and its
// auto-pagination): OpenAI's list shape and cursor pagination (`after`,
// `limit` 1-100 default 20, `order` default desc), the items of a chained
// response (earlier turns, then its own input) with ids as OpenAI gives
// them and stable from one call to the next, on a same-API target (OpenAI)
// and a translated one, scoped to the key that created the response, and a
// 400 naming each bad query parameter.
import t from 'tap';
import OpenAI from 'openai';
import { startOpenAIMock, OPENAI_KEY } from './mocks/openai.js';
import { createResponsesMock } from './mocks/openai-responses.js';
import { startGateway } from './helpers/gateway.js';
import { derivedItemId, listedItem, pageOf } from '../src/api/responses-items.js';

type Any = any;

const responsesMock = createResponsesMock();
const mock = await startOpenAIMock({ routes: { '/v1/responses': responsesMock.handler } });
const KEY_A = 'key-a-items-1111111111';
const KEY_B = 'key-b-items-2222222222';
const gw = await startGateway(
  `
providers:
  - { name: openai, family: openai, base_url: "${mock.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 3000, retries: 0 }
  - { name: compat, family: openai-compatible, base_url: "${mock.url}/v1", api_key: ${OPENAI_KEY}, timeout_ms: 3000, retries: 0 }
storage: { responses_db: ":memory:" }
models:
  - id: openai/gpt-4.1-mini
    endpoints: [chat_completions, responses]
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
  - id: compat/gpt
    endpoints: [chat_completions, responses]
    deployments: [{ provider: compat, model: gpt-4.1-mini }]
`,
  { GATEWAY_API_KEYS: `${KEY_A},${KEY_B}` },
);
const a = new OpenAI({ apiKey: KEY_A, baseURL: gw.baseURL, maxRetries: 0 });
const b = new OpenAI({ apiKey: KEY_B, baseURL: gw.baseURL, maxRetries: 0 });
t.teardown(async () => {
  await gw.close();
  await mock.close();
});

const ID = /^(msg|fc|fco)_[0-9a-f]{48}$|^(msg|fc)_\w+$/;

for (const model of ['openai/gpt-4.1-mini', 'compat/gpt']) {
  t.test(`${model}: a chained response lists its context, newest first by default, in OpenAI's shape`, async (t) => {
    const weather = { type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false };
    const r1 = await a.responses.create({ model, input: 'weather in Paris? use the tool', tools: [weather] });
    const call = r1.output.find((o: Any) => o.type === 'function_call') as Any;
    t.ok(call, 'a tool call');
    const r2 = await a.responses.create({
      model,
      previous_response_id: r1.id,
      tools: [weather],
      input: [
        { type: 'function_call_output', call_id: call.call_id, output: '18C' },
        { role: 'user', content: [{ type: 'input_text', text: 'and tomorrow?' }] },
      ],
    });

    const page = await a.responses.inputItems.list(r2.id);
    const items = page.data as Any[];
    t.same(
      items.map((i) => [i.type, i.role ?? null]),
      [
        ['message', 'user'],
        ['function_call_output', null],
        ['function_call', null],
        ['message', 'user'],
      ],
      'desc: this turn (last item first), then the earlier turn',
    );
    t.same(items[0], { id: items[0].id, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'and tomorrow?' }], status: 'completed' });
    t.same(items[1], { id: items[1].id, type: 'function_call_output', call_id: call.call_id, output: '18C', status: 'completed' });
    t.equal(items[2].id, call.id, 'an output item keeps the id it was answered with');
    t.same(items[3].content, [{ type: 'input_text', text: 'weather in Paris? use the tool' }], 'a string input is listed as an input_text part');
    t.match(items[0].id, /^msg_[0-9a-f]{48}$/);
    t.match(items[1].id, /^fco_[0-9a-f]{48}$/);
    for (const i of items) t.match(i.id, ID);
    t.equal(new Set(items.map((i) => i.id)).size, 4, 'ids are unique');
    t.equal((page as Any).has_more, false);

    // Stable ids, ascending order, and cursor pages of one.
    const asc = await a.responses.inputItems.list(r2.id, { order: 'asc' });
    t.same(
      asc.data.map((i: Any) => i.id),
      items.map((i) => i.id).reverse(),
      'the same ids on another call, oldest first',
    );
    const first = await a.responses.inputItems.list(r2.id, { order: 'asc', limit: 1 });
    t.equal(first.data.length, 1);
    t.equal(first.has_more, true);
    t.ok(first.hasNextPage());
    const second = await first.getNextPage();
    t.equal(second.data[0].id, asc.data[1].id, 'after = the last id of the page before');
    const seen: string[] = [];
    for await (const it of a.responses.inputItems.list(r2.id, { limit: 1 })) seen.push((it as Any).id);
    t.same(seen, items.map((i) => i.id), 'auto-pagination walks every item once, in order');

    // The first turn alone.
    const own = await a.responses.inputItems.list(r1.id);
    t.equal(own.data.length, 1);
    t.equal(own.data[0].id, items[3].id, "the first turn's input item has the same id whichever response lists it");
  });
}

t.test('the raw list object: data, first_id, last_id, has_more; limit defaults to 20', async (t) => {
  const input = Array.from({ length: 25 }, (_, i) => ({ role: 'user' as const, content: `line ${i}` }));
  const r = await a.responses.create({ model: 'compat/gpt', input });
  const res = await fetch(`${gw.baseURL}/responses/${r.id}/input_items`, { headers: { authorization: `Bearer ${KEY_A}` } });
  t.equal(res.status, 200);
  const body: Any = await res.json();
  t.same(Object.keys(body).sort(), ['data', 'first_id', 'has_more', 'last_id', 'object']);
  t.equal(body.object, 'list');
  t.equal(body.data.length, 20);
  t.equal(body.has_more, true);
  t.equal(body.first_id, body.data[0].id);
  t.equal(body.last_id, body.data[19].id);
  t.same(body.data[0].content, [{ type: 'input_text', text: 'line 24' }], 'desc: the last input item first');
  const rest: Any = await (await fetch(`${gw.baseURL}/responses/${r.id}/input_items?after=${body.last_id}&limit=100`, { headers: { authorization: `Bearer ${KEY_A}` } })).json();
  t.equal(rest.data.length, 5);
  t.equal(rest.has_more, false);
  t.same(rest.data.at(-1).content, [{ type: 'input_text', text: 'line 0' }]);
  let n = 0;
  for await (const _ of a.responses.inputItems.list(r.id, { limit: 7 })) n++;
  t.equal(n, 25, 'the SDK walks 4 pages');
});

t.test("another key's response is a 404, as for GET /v1/responses/{id}; an unknown id too", async (t) => {
  const r = await a.responses.create({ model: 'compat/gpt', input: 'private' });
  const e1: Any = await b.responses.inputItems.list(r.id).catch((e) => e);
  const e2: Any = await b.responses.retrieve(r.id).catch((e) => e);
  t.equal(e1.status, 404);
  t.same(e1.error, e2.error, 'the same answer as retrieving it');
  t.same(e1.error, { message: `Response with id '${r.id}' not found.`, type: 'not_found_error', param: null, code: 'response_not_found' });
  const e3: Any = await a.responses.inputItems.list('resp_nope').catch((e) => e);
  t.equal(e3.status, 404);
  const noKey = await fetch(`${gw.baseURL}/responses/${r.id}/input_items`);
  t.equal(noKey.status, 401);
  const post = await fetch(`${gw.baseURL}/responses/${r.id}/input_items`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}` } });
  t.equal(post.status, 404, 'another method on the sub-path names nothing');
});

t.test('a bad query parameter is a 400 naming it', async (t) => {
  const r = await a.responses.create({ model: 'compat/gpt', input: 'query checks' });
  const cases: [string, string, string][] = [
    ['limit=0', 'limit', 'integer_below_min_value'],
    ['limit=101', 'limit', 'integer_above_max_value'],
    ['limit=ten', 'limit', 'invalid_type'],
    ['limit=1.5', 'limit', 'invalid_type'],
    ['limit=1&limit=2', 'limit', 'invalid_value'],
    ['order=newest', 'order', 'invalid_value'],
    ['after=msg_unknown', 'after', 'invalid_value'],
    ['after=', 'after', 'empty_string'],
    ['include[]=everything', 'include', 'invalid_value'],
  ];
  for (const [q, param, code] of cases) {
    const res = await fetch(`${gw.baseURL}/responses/${r.id}/input_items?${q}`, { headers: { authorization: `Bearer ${KEY_A}` } });
    t.equal(res.status, 400, q);
    const body: Any = await res.json();
    t.match(body.error, { type: 'invalid_request_error', param, code, message: new RegExp(`'${param}'`) }, q);
  }
  const e: Any = await a.responses.inputItems.list(r.id, { limit: 500 }).catch((x) => x);
  t.equal(e.status, 400);
  t.equal(e.error.param, 'limit');
  const ok = await a.responses.inputItems.list(r.id, { include: ['message.input_image.image_url'] });
  t.equal(ok.data.length, 1, 'a known include value is accepted');
});

t.test('unit: listed items and pages are pure and deterministic', async (t) => {
  t.equal(derivedItemId('message', 'resp_1', 0), derivedItemId('message', 'resp_1', 0));
  t.not(derivedItemId('message', 'resp_1', 0), derivedItemId('message', 'resp_1', 1));
  t.match(derivedItemId('function_call_output', 'resp_1', 0), /^fco_[0-9a-f]{48}$/);
  t.same(listedItem({ type: 'message', role: 'assistant', content: 'earlier answer' } as Any, 'resp_1', 2), {
    id: derivedItemId('message', 'resp_1', 2),
    type: 'message',
    role: 'assistant',
    content: [{ type: 'output_text', text: 'earlier answer', annotations: [] }],
    status: 'completed',
  });
  const turns = [{ responseId: 'resp_1', items: [{ type: 'message', role: 'user', content: 'a', id: 'msg_given' }, { type: 'message', role: 'user', content: 'b' }] as Any }];
  t.same(pageOf(turns, { limit: 1, order: 'asc' }), { object: 'list', data: [{ id: 'msg_given', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a' }], status: 'completed' }], first_id: 'msg_given', last_id: 'msg_given', has_more: true });
  t.same(pageOf(turns, { limit: 5, order: 'asc', after: pageOf(turns, { limit: 5, order: 'asc' }).last_id as string }), { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
});
