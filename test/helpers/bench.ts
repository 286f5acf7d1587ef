// A tiny benchmark run for the tests that keep bench/ from rotting: one
// round of the quick settings on the plain proxy and one gateway, nothing
// else (no Portkey, no second worker or transport, no observability
// gateways, no streams), with no output printed. Each test adds what it
// exercises.
import type { BenchOptions } from '../../bench/bench.js';

export function tinyBench(o: Partial<BenchOptions>): Partial<BenchOptions> {
  return {
    quick: true,
    rounds: 1,
    serialS: 0.2,
    pairS: 0.2,
    connections: 4,
    tokens: 4,
    portkey: false,
    plain: true,
    workers2: false,
    altTransport: false,
    observability: false,
    startupSamples: 1,
    streams: null,
    streamsTunedFlags: null,
    print: false,
    ...o,
  };
}
