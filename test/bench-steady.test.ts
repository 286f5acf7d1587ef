// The benchmark's warm-up to a steady state (BenchOptions.steady): every
// target process gets runs of its first row until its CPU per request is
// steady, and the results list them. A tiny run (a tolerance nothing misses),
// so that it cannot rot; no timing assertion.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBenchmark, type BenchOptions } from '../bench/bench.js';
import { tinyBench } from './helpers/bench.js';

/** A tiny run of the steady warm-up: the plain proxy (and the gateway where `only` names it). */
const tiny = (steady: BenchOptions['steady'], only: string[], outDir: string): Partial<BenchOptions> =>
  tinyBench({ throughputS: 0.3, pairWarmS: 0.1, warmupS: 0.1, processWarmupS: 0.1, steady, limits: false, highWater: null, bodySizes: [], only, outDir });

t.test('each target process is warmed until steady, and the runs are in the results', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-steady-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const rep = await runBenchmark(tiny({ sliceS: 0.2, window: 2, tolerance: 100, minRequests: 0, maxS: 1 }, ['plain-chat', 'gw-openai'], out));
  const w = rep.steady_warmup ?? {};
  t.same(Object.keys(w).sort(), ['gateway', 'plain'], 'the gateway and the plain proxy');
  for (const [group, s] of Object.entries(w)) {
    t.equal(s.us_per_req.length, 2, `${group}: two runs, then steady`);
    t.ok(s.us_per_req.every((us) => us > 0), `${group}: CPU per request measured`);
    t.equal(s.extra_s, 0.4);
  }
  const json = JSON.parse(fs.readFileSync(path.join(out, 'latest.json'), 'utf8'));
  t.same(json.steady_warmup, w, 'latest.json lists them');
  t.same(json.settings.steady, { sliceS: 0.2, window: 2, tolerance: 100, minRequests: 0, maxS: 1 });
  t.same(json.settings.timed_node_args, ['--no-memory-reducer'], 'the timed processes\' node flags are in the results');
});

t.test('a process that has not served minRequests goes on warming, steady or not, up to maxS', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-steady-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  // Steady at once (any two runs are within the tolerance), but owed more requests than 1 s gives.
  const rep = await runBenchmark(tiny({ sliceS: 0.2, window: 2, tolerance: 100, minRequests: 1e9, maxS: 1 }, ['plain-chat'], out));
  const w = rep.steady_warmup ?? {};
  t.same(Object.keys(w), ['plain']);
  t.equal(w.plain!.us_per_req.length, 5, 'runs until maxS');
  t.equal(w.plain!.extra_s, 1);
});
