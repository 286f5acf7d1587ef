// The benchmark's agent-conversation rows (bench/agent.ts), run for a few
// seconds on one small conversation so that they cannot rot: each row probed
// (the passthrough upstream gets the client's request with only model
// changed, the Anthropic upstream the independently written translation, the
// OpenAI upstream the Messages translation), the CPU-per-request ratios paired
// and judged, the rows' gateway's memory read before, at the peak and after.
// No timing assertion: only that every number is there and finite.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark } from '../bench/bench.js';
import { tinyBench } from './helpers/bench.js';
import { formatTable } from '../bench/report.js';
import { agentChatBody, checkAgentPassthrough, checkAgentAnthropic, expectedAnthropic } from '../bench/agent.js';

const finite = (n: unknown) => typeof n === 'number' && Number.isFinite(n);
const ROWS = ['plain-agent-12k', 'plain-agent-msg-12k', 'gw-agent-12k', 'gw-agent-12k-anthropic', 'gw-agent-msg-12k'];

t.test('one tiny run of the agent rows: probed, CPU ratios paired and judged, memory after the load', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-bodies-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const rep = await runBenchmark(
    tinyBench({
      // A second per row: a busy machine (npm test runs files side by side) can starve a shorter run.
      throughputS: 1,
      pairWarmS: 0,
      warmupS: 0,
      bodySizes: [12_000],
      bodiesSettleS: 0,
      only: ROWS,
      outDir: out,
    }),
  );
  t.same(rep.rows.map((r) => r.id), ROWS, 'the five rows of one size');
  for (const r of rep.rows) {
    // A row whose probe found the wrong upstream request would be 'failed' here.
    t.equal(r.status, 'ok', `${r.id} ran${r.note ? `: ${r.note}` : ''}`);
    t.ok(finite(r.rps) && r.rps! > 0 && r.failed === 0, `${r.id} answered`);
    t.ok(r.cpu && r.cpu.target_us_per_req! > 0, `${r.id} CPU per request`);
    t.match(r.label, /\d+ KB \(4 conn\.\)$/, `${r.id}: size and connections in the label`);
  }
  t.same(Object.keys(rep.cpu_ratios ?? {}), ['agent 12k passthrough CPU/req gateway/plain', 'agent 12k chat → Anthropic CPU/req gateway/plain', 'agent 12k Messages → OpenAI CPU/req gateway/plain']);
  for (const [name, r] of Object.entries(rep.cpu_ratios ?? {})) {
    t.ok(finite(r.value) && r.value! > 0 && r.rounds.length === 1 && finite(r.table), `${name}: measured, paired`);
    t.equal(rep.targets.find((x) => x.name === name)?.goal, `<= ${r.max}x`, `${name}: judged`);
  }
  t.equal(rep.cpu_ratios?.['agent 12k passthrough CPU/req gateway/plain'].max, 1.1);
  t.equal(rep.cpu_ratios?.['agent 12k chat → Anthropic CPU/req gateway/plain'].max, 1.3);
  t.ok(rep.bodies && [rep.bodies.baseline_rss_mb, rep.bodies.peak_rss_mb, rep.bodies.after_rss_mb].every((x) => finite(x) && x > 10), "the agent rows' gateway's memory, before, at the peak and after");
  t.match(rep.targets.find((x) => /RSS \d+ s after their load/.test(x.name))?.goal, '±10%');
  const table = formatTable(rep);
  t.match(table, /agent 12k passthrough CPU\/req gateway\/plain: [\d.]+x \[[\d.]+; table [\d.]+x\] \(at most 1\.1x\)/);
  t.match(table, /agent rows' gateway: RSS \d+ MB after one request of each, \d+ MB at the peak of their load, \d+ MB 0 s after it/);
});

t.test('the probes refuse what is not the client\'s request or its translation', async (t) => {
  const body = agentChatBody('bench/openai', 4, 12_000);
  const sent = { ...JSON.parse(body), model: 'gpt-bench' };
  t.equal(checkAgentPassthrough(sent, body, 'gpt-bench'), null);
  t.match(checkAgentPassthrough({ ...sent, prompt_cache_key: undefined }, body, 'gpt-bench'), /prompt_cache_key differs/, 'an unknown field dropped');
  t.match(checkAgentPassthrough({ ...sent, model: 'bench/openai' }, body, 'gpt-bench'), /model differs/);
  const msgs = [...sent.messages];
  msgs[3] = { ...msgs[3], content: 'changed' };
  t.match(checkAgentPassthrough({ ...sent, messages: msgs }, body, 'gpt-bench'), /messages differs/);
  const want = expectedAnthropic('claude-bench', 4, 12_000);
  t.equal(checkAgentAnthropic(want, 'claude-bench', 4, 12_000), null);
  const wm = [...(want.messages as unknown[])];
  wm.splice(2, 1);
  t.match(checkAgentAnthropic({ ...want, messages: wm }, 'claude-bench', 4, 12_000), /messages/, 'a turn lost');
  t.match(checkAgentAnthropic({ ...want, temperature: 1 }, 'claude-bench', 4, 12_000), /temperature differs/);
  t.match(checkAgentAnthropic({ ...want, prompt_cache_key: 'x' }, 'claude-bench', 4, 12_000), /unexpected upstream fields: prompt_cache_key/);
});
