// The benchmark machinery, run for a few seconds on tiny settings so that it
// cannot rot: real mock upstream and gateway processes from dist, the direct
// and passthrough rows, the heavy translated rows on 1 and 2 workers, a handful
// of checked streams, the report written as JSON and SVG. No timing assertion:
// only that every number is there and finite.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark, buildRows, servingProfile, FULL } from '../bench/bench.js';
import { HEAVY_DEFAULT, heavyChatBody, expectedAnthropic, checkAnthropicHeavy } from '../bench/heavy.js';
import { formatTable, svgChart, driftLine, type BenchReport, type RowResult } from '../bench/report.js';
import { startMockUpstream, expectedText } from '../bench/mock-upstream.js';
import { redisDown, IMAGE_ENV, IMAGE_MALLOC_CONF, PROJECT_ROOT, hostJemalloc, gatewayAllocator } from '../bench/processes.js';
import { manyStreams, serial, throughput } from '../bench/load.js';

const finite = (n: unknown) => typeof n === 'number' && Number.isFinite(n);

t.test('one tiny run: direct, gateway passthrough and heavy rows (1 and 2 workers), streams checked, JSON and SVG written', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const rep = await runBenchmark({
    quick: true,
    rounds: 1,
    throughputS: 0.5,
    serialS: 0.2,
    pairS: 0.2,
    pairWarmS: 0,
    warmupS: 0,
    obsPairs: { reps: 2, seconds: 0.2, warmupS: 0.2 },
    connections: 4,
    tokens: 4,
    portkey: false,
    plain: true,
    // The 2-worker gateway, for the heavy rows' ratio (and its passthrough row, not requested here).
    workers2: true,
    // The other transport (server.transport: http) answers too.
    altTransport: true,
    startupSamples: 1,
    streams: { count: 20, events: 5, paceMs: 5, rampMs: 0 },
    streamsTunedFlags: null,
    // The high-water section, tiny: a burst of 50 connections, the RSS followed for 1 s.
    highWater: { connections: 50, loadS: 0.3, afterS: 1, warmupS: 0 },
    // The agent rows have their own test (bench-bodies.test.ts).
    bodySizes: [],
    only: ['plain-chat', 'gw-openai', 'gwalt-openai', 'gw-heavy', 'gw2-heavy', 'gw-messages', 'gw-messages-stream', 'plain-cc', 'gw-messages-cc', 'gwoff-openai', 'gwship-openai', 'gwall-openai', 'gwlim-openai'],
    // --profile: the summary must be the serving process's (the gateways started only to
    // time start-up, or replaced by a re-execution, leave start-up-only profiles).
    profile: true,
    outDir: out,
    print: false,
  });
  t.same(
    rep.rows.map((r) => r.id),
    ['direct-chat', 'direct-chat-stream', 'plain-chat', 'gw-openai', 'gw-heavy', 'gw-messages', 'gw-messages-stream', 'plain-cc', 'gw-messages-cc', 'gwalt-openai', 'gwoff-openai', 'gwship-openai', 'gwall-openai', 'gw2-heavy', 'gwlim-openai'],
    'the requested rows and their direct baseline',
  );
  // The limits row needs a Redis: without one it is there, not measured, saying why.
  const limRow = rep.rows.find((r) => r.id === 'gwlim-openai')!;
  const noRedis = await redisDown(process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379');
  if (noRedis) {
    t.equal(limRow.status, 'n/a');
    t.match(limRow.note, /no Redis answers at/);
    t.comment(`no Redis (${noRedis}): the limits row was not measured`);
  } else {
    const ratio = rep.ratios['limits with Redis / none'];
    t.ok(finite(ratio) && ratio! > 0, 'limits with Redis / none: measured');
    t.ok(finite(rep.ratios['limits with Redis / main gateway']), 'and, as information, against the main gateway');
    t.match(rep.ratio_notes?.['limits with Redis / main gateway'] ?? '', /information only/, 'said to be information');
    t.equal(rep.targets.find((x) => x.name === 'limits in Redis (rpm, tpm, budget) req/s vs no limits')?.goal, '>= 0.9x', 'the limits ratio is judged');
    t.match(rep.targets.find((x) => x.name === 'limits in Redis added latency p50 (c=1) vs no limits'), { goal: '<= 0.3 ms', value: /ms$/ }, 'and the added latency');
  }
  for (const r of rep.rows) {
    if (r.id === 'gwlim-openai' && noRedis) continue;
    // A heavy row whose probe found the wrong upstream request would be 'failed' here.
    t.equal(r.status, 'ok', `${r.id} ran${r.note ? `: ${r.note}` : ''}`);
    t.ok(finite(r.rps) && r.rps! > 0, `${r.id} req/s`);
    t.ok(finite(r.p50_ms) && finite(r.p99_ms), `${r.id} percentiles`);
    t.equal(r.failed, 0, `${r.id} no failed request`);
    // The 2-worker rows are measured at 32 connections only.
    if (r.id !== 'gw2-heavy') t.ok(r.c1 && r.c1.requests > 0 && finite(r.c1.p50_ms) && finite(r.c1.p99_ms), `${r.id} concurrency-1 latency`);
    t.ok(r.cpu && finite(r.cpu.mock_pct) && finite(r.cpu.client_pct), `${r.id} CPU of the mock and the load generator`);
    if (r.target !== 'direct') t.ok(finite(r.cpu?.target_pct) && r.cpu!.target_us_per_req! > 0, `${r.id} CPU of the target, per request`);
  }
  t.equal(rep.cpu_ratios, undefined, 'no agent rows: no CPU ratios');
  t.equal(rep.bodies, undefined);
  const heavy = rep.rows.find((r) => r.id === 'gw-heavy')!;
  const heavy2 = rep.rows.find((r) => r.id === 'gw2-heavy')!;
  t.equal(heavy.path, 'anthropic-heavy');
  t.equal(heavy2.target, 'gateway-2w');
  t.match(heavy2.label, /×2 workers · Anthropic translated, \d+ KB conversation/);
  t.ok(finite(heavy2.peak_rss_mb), 'the 2-worker gateway RSS sampled (primary and workers)');
  t.same(rep.settings.heavy, { ...HEAVY_DEFAULT, bytes: Buffer.byteLength(heavyChatBody('bench/anthropic', 4)) }, 'the heavy body is described in the settings');
  const w = rep.ratios['heavy translated 2 workers / 1 worker'];
  t.ok(finite(w) && w! > 0, 'the workers ratio on the heavy rows is measured, paired');
  t.equal(rep.ratios_paired_rounds?.['heavy translated 2 workers / 1 worker']?.length, 1);
  t.equal(rep.ratios['passthrough 2 workers / 1 worker'], null, 'gw2-openai not requested: no passthrough workers ratio');
  t.match(rep.ratio_notes?.['passthrough 2 workers / 1 worker'], /information only/);
  const wt = rep.targets.find((x) => /2 workers vs 1 worker/.test(x.name))!;
  t.match(wt.name, /heavy/, 'the workers target is judged on the heavy rows');
  t.equal(wt.value, `${w!.toFixed(2)}x`);
  t.equal(wt.goal, 'shows scaling (>= 1.2x)');
  // What observability costs: the shipped gateway and one with traces too, each against all of it off.
  for (const [ratio, target] of [
    ['observability as shipped / off', 'usage store + metrics (as shipped) req/s vs all off'],
    ['observability with traces / off', 'usage store + metrics + traces req/s vs all off'],
  ]) {
    t.ok(finite(rep.ratios[ratio]) && rep.ratios[ratio]! > 0, `${ratio}: measured`);
    const judged = rep.targets.find((x) => x.name === target);
    t.equal(judged?.goal, '>= 0.95x', `${target}: judged`);
  }
  t.ok((rep.rows.find((r) => r.id === 'gwall-openai')?.cpu?.target_us_per_req ?? 0) > 0, 'the traced gateway is measured as its own process');
  // Paired several times a round, in CPU per request too; the traces reached the mock's collector in the right shape.
  t.ok((rep.ratios_paired_rounds?.['observability with traces / off']?.length ?? 0) >= 2, 'the observability ratios are paired several times a round');
  t.ok((rep.observability?.cpu_ratios['observability with traces / off']?.value ?? 0) > 0, 'and measured in CPU per request');
  t.ok(rep.observability?.otlp && rep.observability.otlp.exports > 0 && rep.observability.otlp.bytes > 0, 'the traced gateway exported spans to the mock');
  t.equal(rep.observability?.otlp?.rejected, 0, 'none of them refused by the mock collector');
  const gw = rep.rows.find((r) => r.id === 'gw-openai')!;
  const plainRow = rep.rows.find((r) => r.id === 'plain-chat')!;
  t.equal(plainRow.cpu?.target_us_per_req_rounds?.length, 1, "the reference's CPU per request is kept per round, for the drift line");
  t.equal(plainRow.rps_rounds?.length, 1);
  t.equal(gw.c1!.baseline, 'direct-chat');
  t.ok(finite(gw.c1!.added_p50_ms) && finite(gw.c1!.added_p99_ms), 'added latency computed');
  t.ok(finite(gw.peak_rss_mb) && gw.peak_rss_mb! > 10, 'gateway RSS sampled');
  t.ok(finite(rep.gateway.startup_ms) && finite(rep.gateway.idle_rss_mb) && finite(rep.gateway.peak_rss_mb), 'start-up and memory');
  t.ok(rep.gateway.log_lines! > 0, 'the access log was on');
  t.ok(rep.streams && 'gateway' in rep.streams, 'streams ran');
  if (rep.streams && 'gateway' in rep.streams) {
    t.equal(rep.streams.gateway.completed, 20, 'every stream through the gateway completed');
    t.equal(rep.streams.gateway.events, 100, 'every event arrived');
    t.equal(rep.streams.direct.completed, 20);
    t.equal(rep.streams.plain?.completed, 20, 'the same streams through the plain proxy');
    t.ok(finite(rep.streams.plain_added_ttfb_p50_ms));
    t.ok(finite(rep.streams.added_ttfb_p50_ms));
    // The shorter burst each process in the middle carried first (its warm-up), reported beside the timed streams.
    const burst = rep.streams.first_burst;
    t.equal(burst?.events_per_stream, 5, 'the burst asks for no more events than the timed streams');
    t.equal(burst?.gateway.completed, 20, 'the fresh gateway completed the burst');
    t.equal(burst?.gateway.events, 100, 'with every event');
    t.equal(burst?.plain?.completed, 20, 'and so did the plain proxy');
    t.match(formatTable(rep), /streams, the first burst \(5 events each, the warm-up before the timed streams\): gateway fresh from start-up 20\/20 complete, TTFB p50 [\d.]+ ms; plain Node proxy 20\/20 complete/, 'printed with the table');
    // What each process used while the streams ran: the gateway and the plain proxy as targets, direct without one.
    const cpu = rep.streams.cpu;
    t.ok(cpu, 'CPU measured over the stream runs');
    for (const [name, c] of Object.entries(cpu ?? {})) {
      t.ok(c.wall_s > 0 && [c.mock_cores, c.load_cores, c.machine_cores].every((v) => finite(v) && v >= 0), `${name}: wall time and cores`);
      if (name === 'direct') t.equal(c.target_cores, undefined, 'direct: nothing in the middle');
      else t.ok(finite(c.target_cores) && c.target_cores! >= 0 && finite(c.target_us_per_event), `${name}: the target's cores and CPU per event`);
    }
    t.ok(cpu?.plain && cpu.gateway, 'both targets measured');
    t.match(formatTable(rep), /streams, CPU in cores of \d+: direct: mock [\d.]+, load generator [\d.]+, machine [\d.]+; plain proxy: target [\d.]+ \([\d.]+ µs\/event\)/, 'printed with the table');
  }
  const hw = rep.high_water;
  t.ok(hw, 'the high-water section ran');
  if (hw) {
    t.equal(hw.failed, 0, 'no request of the burst failed');
    t.ok(hw.ok > 0);
    t.ok([hw.fresh_rss_mb, hw.pre_rss_mb, hw.peak_rss_mb, hw.after_rss_mb, hw.after_over_pre].every((v) => finite(v) && v > 0), 'the RSS before, at the peak and after');
    t.same(hw.series.map(([s]) => s), [0, 1], 'the RSS every second after the load');
    t.equal(hw.quick, true, 'shorter than a minute: labelled quick');
    t.match(formatTable(rep), /high-water memory \(quick: [^)]*\): fresh gateway \d+ MB; warmed up and idle \(pre-load\) \d+ MB; peak under 50 connections/, 'printed with the table');
    t.ok(rep.targets.some((x) => x.name.startsWith('RSS after 50 connections, back within 20%')), 'judged as a target');
  }
  t.ok(finite(rep.ratios['passthrough gateway/plain']) && rep.ratios['passthrough gateway/plain']! > 0, 'paired ratio measured');
  t.equal(rep.ratios_paired_rounds?.['passthrough gateway/plain']?.length, 1, 'one paired ratio per round');
  t.ok(finite(rep.ratios_of_row_medians?.['passthrough gateway/plain']), 'the ratio of the row medians is kept too');
  t.equal(rep.ratios['passthrough gateway/portkey'], null, 'no Portkey row: no ratio');
  t.equal(rep.ratios['passthrough plain/portkey'], null, 'no Portkey row: no reference ratio either');
  t.ok(rep.targets.length >= 8, 'targets listed');
  // A --profile run keeps its profiles for the reader (the report names the file); the test does not.
  if (rep.profile) t.teardown(() => fs.rmSync(path.dirname(rep.profile!.file), { recursive: true, force: true }));
  t.ok(rep.profile && rep.profile.total_ms > 1500, `the profile spans the run (${rep.profile?.total_ms} ms sampled), not only a start-up`);
  t.ok(fs.existsSync(path.join(out, 'profile-flame.svg')), 'the flame graph is written beside the results');
  for (const k of ['nproc', 'cpu_model', 'node', 'mem_total_gb'] as const) t.ok(rep.machine[k] !== undefined, `machine.${k}`);

  const json = JSON.parse(fs.readFileSync(path.join(out, 'latest.json'), 'utf8')) as BenchReport;
  t.same(
    json.rows.map((r) => r.id),
    rep.rows.map((r) => r.id),
    'latest.json holds the same rows',
  );
  const svg = fs.readFileSync(path.join(out, 'latest.svg'), 'utf8');
  t.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.match(svg, /gateway · OpenAI passthrough/);
  t.match(rep.rows.find((r) => r.id === 'gwalt-openai')!.label, /transport http/, 'the alternative transport row is labelled');
  t.match(svg, /×2 workers · Anthropic translated/, 'the heavy rows are in the chart');
  t.same(json.settings.heavy, rep.settings.heavy);
  t.same(json.rows.find((r) => r.id === 'gw-heavy')!.cpu, heavy.cpu, 'latest.json holds the CPU split');
  const table = formatTable(rep);
  t.match(table, /gateway · OpenAI passthrough/);
  t.match(table, /CPU% t\/m\/c/);
  t.match(table, /heavy translated 2 workers \/ 1 worker: \d/);
  t.match(table, /heavy request: a chat completion translated to Anthropic, \d+ messages/);
});

t.test('a family or endpoint that is not registered is a row "n/a", not a crash', async (t) => {
  const rows = buildRows(
    { ...FULL, workers2: false, altTransport: false },
    { openai: { family: 'openai', baseUrlPath: '/v1' }, responses: false },
    { mock: 'http://127.0.0.1:1', plain: 'http://127.0.0.1:2', gw: 'http://127.0.0.1:3' },
    { main: 'proxy', alt: 'http' },
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  t.notOk(byId.get('gw-openai')!.na, 'passthrough available');
  t.match(byId.get('gw-anthropic')!.na, /anthropic family is not registered/);
  t.match(byId.get('gw-gemini-stream')!.na, /gemini family is not registered/);
  t.match(byId.get('gw-responses')!.na, /Responses endpoint not registered/);
  t.match(byId.get('gw-messages-stream')!.na, /Messages endpoint not registered/);
  t.match(byId.get('gw-messages-cc')!.na, /Messages endpoint not registered/);
  t.match(byId.get('portkey-chat')!.na, /Portkey did not start/);
  t.match(byId.get('gw-heavy')!.na, /anthropic family is not registered/, 'the heavy rows need the anthropic family');
  t.notOk(byId.get('gw-anthropic')!.spec, 'no request spec for an n/a row');
  t.match(byId.get('gw-agent-400k')!.na, /agent rows' gateway did not start/);
  t.notOk(byId.get('plain-agent-400k')!.na, 'the plain proxy carries the agent bodies');

  const rep: BenchReport = {
    version: 1,
    started_at: new Date(0).toISOString(),
    duration_s: 0,
    quick: true,
    machine: { nproc: 2, cpu_model: 'x', mem_total_gb: 1, node: 'v24', os: 'Linux' },
    settings: { rounds: 1, connections: 32, throughput_s: 1, serial_s: 1, tokens: 16, log: 'info', transport: 'proxy', workers_row: false },
    gateway: { startup_ms: 1, startup_samples_ms: [1], idle_rss_mb: 1, peak_rss_mb: 1 },
    rows: [{ id: 'gw-anthropic', label: 'gateway · Anthropic translated', target: 'gateway', path: 'anthropic', stream: false, status: 'n/a', note: 'not available: x' }],
    ratios: { 'passthrough gateway/plain': null },
    targets: [{ name: 'x', goal: '>= 1x', value: 'n/a', met: null }],
  };
  t.match(formatTable(rep), /gateway · Anthropic translated\s+n\/a \(not available: x\)/);
  t.match(svgChart(rep), /<\/svg>/, 'a chart even with no measured row');
});

t.test("drift: the plain proxy's own rounds show how much the machine moved", async (t) => {
  const row = (rps_rounds: number[], us?: number[]) =>
    ({ id: 'plain-chat', label: 'plain', target: 'plain', path: 'chat', stream: false, status: 'ok', rps_rounds, ...(us ? { cpu: { mock_pct: 30, client_pct: 30, target_us_per_req_rounds: us } } : {}) }) as RowResult;
  t.equal(
    driftLine(row([8081, 4698, 4760], [150, 192, 200])),
    'drift: the plain Node proxy did 8081 / 4698 / 4760 req/s in the 3 rounds (spread 71% of the median), at 150 / 192 / 200 µs of CPU per request (26%); its work is the same every round, so the spread is the machine\'s.',
  );
  t.match(driftLine(row([9955, 9420, 9054]))!, /spread 10% of the median\); its work/, 'without CPU rounds: the rate alone');
  t.equal(driftLine(row([9000])), undefined, 'one round: no drift to show');
  t.equal(driftLine(undefined), undefined, 'no plain proxy row');
});

t.test('mock upstream: the four wire formats, strict checks, paced streams', async (t) => {
  const mock = await startMockUpstream();
  t.teardown(() => mock.close());
  const post = async (p: string, body: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(mock.url + p, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
  };
  const chat = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 3 });
  t.equal(JSON.parse(chat.text).choices[0].message.content, expectedText(3));
  const anth = await post('/v1/messages', { model: 'c', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' });
  t.equal(JSON.parse(anth.text).content[0].text, expectedText(2));
  t.same(JSON.parse(mock.last.anthropic!.toString()), { model: 'c', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }, 'the mock keeps the last accepted request body');
  const noVersion = await post('/v1/messages', { model: 'c', max_tokens: 2, messages: [] }, { 'x-api-key': 'k' });
  t.equal(noVersion.status, 400, 'Anthropic without anthropic-version is rejected');
  t.equal(JSON.parse(noVersion.text).type, 'error');
  const sys = await post('/v1/messages', { model: 'c', max_tokens: 2, messages: [{ role: 'system', content: 'x' }] }, { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' });
  t.equal(sys.status, 400, 'a system role inside Anthropic messages is rejected');
  const gem = await post('/v1beta/models/g:generateContent', { contents: [{ role: 'user', parts: [{ text: 'x' }] }], generationConfig: { maxOutputTokens: 2 } }, { 'x-goog-api-key': 'k' });
  t.equal(JSON.parse(gem.text).candidates[0].content.parts[0].text, expectedText(2));
  const gemNoSse = await post('/v1beta/models/g:streamGenerateContent', { contents: [{ role: 'user', parts: [{ text: 'x' }] }] }, { 'x-goog-api-key': 'k' });
  t.equal(gemNoSse.status, 400, 'streamGenerateContent without alt=sse is refused');
  const gemStream = await post('/v1beta/models/g:streamGenerateContent?alt=sse', { contents: [{ role: 'user', parts: [{ text: 'x' }] }], generationConfig: { maxOutputTokens: 2 } }, { 'x-goog-api-key': 'k' });
  t.match(gemStream.text, /\r\n\r\n/, 'Gemini events end with CRLF CRLF');
  const resp = await post('/v1/responses', { model: 'r', input: 'x', max_output_tokens: 2, stream: true });
  t.match(resp.type, /text\/event-stream/);
  t.match(resp.text, /event: response\.completed/);
  t.equal(mock.counts.rejected, 3);
  // The OTLP endpoint: an export in the shape of one is counted with its bytes; anything else is refused.
  const spans = JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 's' }, spans: [] }] }] });
  t.equal((await post('/v1/traces', JSON.parse(spans))).status, 200);
  t.equal((await post('/v1/traces', { spans: [] })).status, 400, 'a JSON body that is no OTLP export is refused');
  const proto = await fetch(mock.url + '/v1/traces', { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: new Uint8Array([0x0a, 0x00]) });
  t.equal(proto.status, 200, 'an OTLP protobuf export (resource_spans first) is accepted');
  t.match(mock.counts, { otlp: 2, otlp_bytes: Buffer.byteLength(spans) + 2, otlp_rejected: 1 });

  // A paced stream checked by the load generator's own parser, in each format.
  const texts = Array.from({ length: 6 }, (_, i) => `t${i} `);
  const origin = mock.url;
  const checks = await Promise.all([
    manyStreams({ origin, path: '/v1/chat/completions', headers: {}, body: JSON.stringify({ model: 'x-paced-2', messages: [{ role: 'user', content: 'x' }], max_tokens: 6, stream: true }), stream: true }, 'openai-chat', 3, texts),
    manyStreams({ origin, path: '/v1/messages', headers: { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' }, body: JSON.stringify({ model: 'c-paced-2', max_tokens: 6, messages: [{ role: 'user', content: 'x' }], stream: true }), stream: true }, 'anthropic', 3, texts),
    manyStreams({ origin, path: '/v1beta/models/g-paced-2:streamGenerateContent?alt=sse', headers: { 'x-goog-api-key': 'k' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'x' }] }], generationConfig: { maxOutputTokens: 6 } }), stream: true }, 'gemini', 3, texts),
    manyStreams({ origin, path: '/v1/responses', headers: {}, body: JSON.stringify({ model: 'r', input: 'x', max_output_tokens: 6, stream: true }), stream: true }, 'openai-responses', 3, texts),
  ]);
  for (const c of checks) {
    t.equal(c.completed, 3, c.first_error ?? 'complete');
    t.equal(c.events, 18);
  }
  // A wrong expectation is caught as corruption, not counted as complete.
  const wrong = await manyStreams({ origin, path: '/v1/chat/completions', headers: {}, body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'x' }], max_tokens: 6, stream: true }), stream: true }, 'openai-chat', 1, [...texts].reverse());
  t.equal(wrong.corrupted, 1);
  t.equal(wrong.completed, 0);

  const s = await serial({ origin, path: '/v1/chat/completions', headers: {}, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), stream: false }, 0, 5);
  t.equal(s.latency_us.length, 5);
  const tp = await throughput({ origin, path: '/v1/chat/completions', headers: {}, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), stream: false }, 2, 0.3);
  t.ok(tp.ok > 0 && tp.failed === 0);
});

t.test('the framework-floor / A-B harness runs: plain proxy, a Koa variant, this build', async (t) => {
  const { runFloor } = await import('../bench/floor.js');
  const { PROJECT_ROOT } = await import('../bench/processes.js');
  const rows = await runFloor({ rounds: 1, durationS: 0.3, gateways: [['gateway', PROJECT_ROOT]], variants: ['koa-bare'], print: false });
  t.same(
    rows.map((r) => r.label),
    ['plain', 'koa-bare', 'gateway'],
  );
  for (const r of rows) {
    t.ok(finite(r.ratio) && r.ratio > 0, `${r.label}: ratio`);
    t.ok(finite(r.rps) && r.rps > 0, `${r.label}: req/s`);
    t.ok(finite(r.cpu_us) && r.cpu_us > 0, `${r.label}: CPU per request`);
  }
  t.equal(rows[0].ratio, 1, 'the plain proxy is the reference');
});

t.test('heavy request: a valid long conversation, and the upstream check catches a wrong translation', async (t) => {
  const body = JSON.parse(heavyChatBody('bench/anthropic', 16));
  t.equal(body.messages.length, HEAVY_DEFAULT.messages + 1, 'system message + the requested messages');
  t.equal(body.messages[0].role, 'system');
  t.equal(body.messages.at(-1).role, 'user', 'ends with the question');
  t.ok(body.messages.some((m: { content: unknown }) => Array.isArray(m.content)), 'content-part arrays');
  t.ok(body.messages.some((m: { tool_calls?: unknown[] }) => m.tool_calls?.length), 'tool calls');
  t.ok(body.messages.some((m: { role: string }) => m.role === 'tool'), 'tool results');
  t.equal(body.tools.length, 2);
  const small = { messages: 9, words: 4 };
  t.equal(JSON.parse(heavyChatBody('m', 4, small)).messages.length, 10);

  const want = expectedAnthropic('claude-bench', 16);
  t.equal((want.messages as unknown[]).length, HEAVY_DEFAULT.messages, 'one Anthropic message per chat message: roles alternate after translation');
  t.equal(checkAnthropicHeavy(want, 'claude-bench', 16), null, 'the expected translation passes');
  // What the gateway adds on its own (cache_control marks, stream: false) is not a difference.
  const marked = structuredClone(want) as { system: Record<string, unknown>[]; tools: Record<string, unknown>[] };
  marked.system[0].cache_control = { type: 'ephemeral' };
  marked.tools[1].cache_control = { type: 'ephemeral' };
  t.equal(checkAnthropicHeavy(marked, 'claude-bench', 16), null, 'cache_control marks are ignored');
  const wrong = (f: (b: { system?: unknown; messages: { role: string; content: Record<string, unknown>[] }[]; max_tokens: number }) => void) => {
    const b = structuredClone(want) as Parameters<typeof f>[0];
    f(b);
    return checkAnthropicHeavy(b, 'claude-bench', 16);
  };
  t.match(wrong((b) => void b.messages.pop()), /messages, expected/, 'a lost message');
  t.match(
    wrong((b) => {
      delete b.system;
    }),
    /system differs/,
    'no system prompt',
  );
  t.match(wrong((b) => void b.messages.unshift({ role: 'user', content: [{ type: 'text', text: 'x' }] })), /messages/, 'an extra message');
  t.match(wrong((b) => void (b.messages[5].content[0].text = 'changed')), /messages\[5\] differs/, 'a changed text');
  t.match(wrong((b) => void b.messages.reverse()), /messages\[0\] differs/, 'reordered');
  t.match(wrong((b) => void (b.max_tokens = 4096)), /max_tokens differs/);
  t.match(checkAnthropicHeavy(undefined, 'claude-bench', 16), /no Anthropic request/);
});

t.test('--profile summarises the newest profile: the serving process, not the start-up that re-executed itself', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-prof-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  t.equal(servingProfile(dir), undefined, 'no profile: none');
  // Names as node --cpu-prof writes them; the process that re-executed keeps its pid, so only the time tells them apart.
  const names = ['CPU.20261125.034604.6130.0.001.cpuprofile', 'CPU.20261125.034603.6130.0.001.cpuprofile', 'CPU.20261125.034602.6100.0.001.cpuprofile'];
  const now = Date.now() / 1000;
  names.forEach((n, i) => {
    fs.writeFileSync(path.join(dir, n), '{}');
    fs.utimesSync(path.join(dir, n), now - 100 + i * 10, now - 100 + i * 10);
  });
  fs.writeFileSync(path.join(dir, 'notes.txt'), '');
  t.equal(servingProfile(dir), names[2], 'the last one written, whatever its name');
});

t.test("the benchmark starts the gateway with the container image's environment", async (t) => {
  // The runtime stage's ENV lines (the last stage), continuation lines joined.
  const dockerfile = fs.readFileSync(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const line of runtime.split('\n').filter((l) => l.startsWith('ENV '))) for (const m of line.matchAll(/(\w+)=(\S+)/g)) env[m[1]!] = m[2]!;
  t.ok(Object.keys(IMAGE_ENV).length > 0);
  // The preload is the same library, at this machine's path for it (undefined where libjemalloc2 is not installed).
  for (const [k, v] of Object.entries(IMAGE_ENV)) if (k !== 'LD_PRELOAD') t.equal(env[k], v, `${k} as the image sets it`);
  t.match(env.LD_PRELOAD, /\/libjemalloc\.so\.2$/, 'the image preloads jemalloc');
  t.equal(IMAGE_ENV.MALLOC_CONF, IMAGE_MALLOC_CONF);
  const host = hostJemalloc();
  t.equal(IMAGE_ENV.LD_PRELOAD, host, host ? 'the benchmark preloads this machine\'s jemalloc' : 'no jemalloc here: the benchmark says its gateways run on glibc');
  t.match(gatewayAllocator(), host ? /^jemalloc/ : /^glibc malloc .*apt-get install libjemalloc2/);
});
