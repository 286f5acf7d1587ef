// The benchmark machinery, run for a few seconds on tiny settings so that it
// cannot rot: real mock upstream and gateway processes from dist, the direct
// and passthrough rows, a handful of checked streams, the report written as
// JSON and SVG. No timing assertion: only that every number is there and finite.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark, buildRows, FULL } from '../bench/bench.js';
import { formatTable, svgChart, type BenchReport } from '../bench/report.js';
import { startMockUpstream, expectedText } from '../bench/mock-upstream.js';
import { manyStreams, serial, throughput } from '../bench/load.js';

const finite = (n: unknown) => typeof n === 'number' && Number.isFinite(n);

t.test('one tiny run: direct and gateway passthrough rows, streams checked, JSON and SVG written', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const rep = await runBenchmark({
    quick: true,
    rounds: 1,
    throughputS: 0.5,
    serialS: 0.2,
    pairS: 0.2,
    warmupS: 0,
    connections: 4,
    tokens: 4,
    portkey: false,
    plain: true,
    workers2: false,
    // The other transport (server.transport: http) answers too.
    altTransport: true,
    startupSamples: 1,
    streams: { count: 20, events: 5, paceMs: 5, rampMs: 0 },
    streamsTunedFlags: null,
    only: ['plain-chat', 'gw-openai', 'gwalt-openai'],
    outDir: out,
    print: false,
  });
  t.same(
    rep.rows.map((r) => r.id),
    ['direct-chat', 'plain-chat', 'gw-openai', 'gwalt-openai'],
    'the requested rows and their direct baseline',
  );
  for (const r of rep.rows) {
    t.equal(r.status, 'ok', `${r.id} ran`);
    t.ok(finite(r.rps) && r.rps! > 0, `${r.id} req/s`);
    t.ok(finite(r.p50_ms) && finite(r.p99_ms), `${r.id} percentiles`);
    t.equal(r.failed, 0, `${r.id} no failed request`);
    t.ok(r.c1 && r.c1.requests > 0 && finite(r.c1.p50_ms) && finite(r.c1.p99_ms), `${r.id} concurrency-1 latency`);
  }
  const gw = rep.rows.find((r) => r.id === 'gw-openai')!;
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
  }
  t.ok(finite(rep.ratios['passthrough gateway/plain']) && rep.ratios['passthrough gateway/plain']! > 0, 'paired ratio measured');
  t.equal(rep.ratios_paired_rounds?.['passthrough gateway/plain']?.length, 1, 'one paired ratio per round');
  t.ok(finite(rep.ratios_of_row_medians?.['passthrough gateway/plain']), 'the ratio of the row medians is kept too');
  t.equal(rep.ratios['passthrough gateway/portkey'], null, 'no Portkey row: no ratio');
  t.ok(rep.targets.length >= 8, 'targets listed');
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
  t.match(rep.rows[3].label, /transport http/, 'the alternative transport row is labelled');
  t.match(formatTable(rep), /gateway · OpenAI passthrough/);
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
  t.match(byId.get('portkey-chat')!.na, /Portkey did not start/);
  t.notOk(byId.get('gw-anthropic')!.spec, 'no request spec for an n/a row');

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
