// bench:sinks (bench/sinks.ts), run on a few hundred records so that it
// cannot rot: each receiver of the request records fed and charged its CPU.
// No timing assertion: only that every number is there and positive.
import t from 'tap';
import { runSinks } from '../bench/sinks.js';

t.test('the CPU per record of the metrics, the usage store, the exporter and the access log', async (t) => {
  const out = await runSinks({ records: 500, rounds: 1, print: false });
  t.same(
    out.map((s) => s.sink),
    ['metrics', 'usage store', 'traces', 'traces (OTLP/JSON)', 'access log'],
  );
  for (const s of out) t.ok(Number.isFinite(s.us_per_record) && s.us_per_record > 0 && s.rounds.length === 1, `${s.sink}: ${s.us_per_record} µs a record`);
});
