// The VM's own speed during a benchmark run. A small child process does a
// fixed piece of work every 250 ms and records its cost in CPU time (user +
// system), not wall time. Time the process spends waiting for a core does not
// count, so the benchmark's own load barely moves it. Time the host takes from
// the VM without reporting it as steal does count: the guest charges it to
// whatever was running, and the fixed work seems to cost more. The samples
// taken before anything else starts are the idle reference.
//
// Seen on the benchmark VM: two runs of the same gateway build, the gateway
// spent 47 and 73 µs of CPU per stream event, and the VM's /proc/stat showed
// no steal at all (BENCHMARKS.md).
import { pathToFileURL } from 'node:url';

/** Deterministic integer work (xorshift32): no allocation and no memory traffic, so caches hardly matter. */
export function fixedWork(rounds: number): number {
  let x = 0x9e3779b9 | 0;
  for (let i = 0; i < rounds; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
  }
  return x;
}

/** The CPU time, in µs, that one fixedWork(rounds) costs this process. */
export function workCpuUs(rounds: number): number {
  const c0 = process.cpuUsage();
  if (fixedWork(rounds) === 0.5) throw new Error('unreachable'); // keeps the result alive
  const c = process.cpuUsage(c0);
  return c.user + c.system;
}

export interface SpeedSample {
  /** Date.now() when the sample was taken. */
  at: number;
  cpu_us: number;
}

export interface SpeedSummary {
  /** The fixed work's CPU cost before the run started (median of back-to-back samples). */
  idle_cpu_us: number;
  samples: number;
  p50_cpu_us: number;
  p90_cpu_us: number;
  max_cpu_us: number;
  /** Share of samples that cost over 1.25× the idle reference, in %. */
  slow_pct: number;
}

const SLOW = 1.25;

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;
}

export function summarizeSpeed(idleCpuUs: number, samples: SpeedSample[], from = -Infinity, to = Infinity): SpeedSummary {
  const v = samples
    .filter((s) => s.at >= from && s.at <= to)
    .map((s) => s.cpu_us)
    .sort((a, b) => a - b);
  return {
    idle_cpu_us: idleCpuUs,
    samples: v.length,
    p50_cpu_us: pct(v, 50),
    p90_cpu_us: pct(v, 90),
    max_cpu_us: v.length ? v[v.length - 1] : NaN,
    slow_pct: v.length ? (100 * v.filter((x) => x > SLOW * idleCpuUs).length) / v.length : NaN,
  };
}

/** About a millisecond of work on the benchmark VM: long next to the CPU clock's resolution, short next to the 250 ms interval. */
export const WORK_ROUNDS = 1_000_000;

// As a child process: `node dist/bench/calibrate.js [rounds] [intervalMs]`.
// Reports {ready, port: 0} over IPC once the idle reference is taken, then
// answers {op: 'speed', from?, to?} (Date.now() bounds) with {speed: SpeedSummary}.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rounds = Number(process.argv[2] ?? WORK_ROUNDS);
  const intervalMs = Number(process.argv[3] ?? 250);
  for (let i = 0; i < 10; i++) workCpuUs(rounds); // optimised before it is measured
  const idle = Array.from({ length: 15 }, () => workCpuUs(rounds)).sort((a, b) => a - b)[7];
  const samples: SpeedSample[] = [];
  setInterval(() => samples.push({ at: Date.now(), cpu_us: workCpuUs(rounds) }), intervalMs);
  process.on('message', (m: { op?: string; from?: number; to?: number }) => {
    if (m?.op === 'speed') process.send!({ speed: summarizeSpeed(idle, samples, m.from, m.to) });
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ ready: true, port: 0, pid: process.pid });
}
