// High-water memory: how much a gateway keeps after a burst of connections.
// A fresh gateway is warmed up (small requests at 32 connections) and left
// idle for a moment: its RSS then is the pre-load value. Then 1,000
// connections send small requests for a few seconds (the peak is sampled
// every 100 ms), and the RSS is followed for a minute after the load (a
// shorter time with --quick, labelled as such). The target: back within 20%
// of the pre-load value within that minute.
//
// By then the gateway has fallen idle and run its idle collection
// (src/idle-gc.ts), which gives the memory back but also drops V8's
// optimised code for the request path. So the small requests then run again
// at 32 connections for a few 1 s windows, and the gateway's CPU per request
// in each is reported (`rewarm_us_per_req`): the first window is what the
// collection costs the next traffic, the last ones are the steady state.
import { throughput, type RequestSpec } from './load.js';
import { rssMb, RssSampler } from './processes.js';

export interface HighWaterOptions {
  connections: number;
  /** Seconds of load at `connections`. */
  loadS: number;
  /** Seconds the RSS is followed after the load (60 in a full run). */
  afterS: number;
  /** Seconds of warm-up at 32 connections before the pre-load value. */
  warmupS: number;
}

export const HIGH_WATER_FULL: HighWaterOptions = { connections: 1000, loadS: 5, afterS: 60, warmupS: 2 };
export const HIGH_WATER_QUICK: HighWaterOptions = { connections: 1000, loadS: 2, afterS: 15, warmupS: 1 };

export interface HighWaterResult {
  connections: number;
  load_s: number;
  after_s: number;
  /** RSS of the fresh gateway, idle, 1 s after start-up. */
  fresh_rss_mb: number;
  /** After the warm-up and 2 s idle: what the burst is compared with. */
  pre_rss_mb: number;
  peak_rss_mb: number;
  /** RSS `after_s` seconds after the load ended. */
  after_rss_mb: number;
  /** after / pre. */
  after_over_pre: number;
  /** Seconds after the load until the RSS was within 20% of the pre-load value (null: not within after_s). */
  back_within_20pct_s: number | null;
  /** [seconds after the load, RSS MB], every second. */
  series: [number, number][];
  ok: number;
  failed: number;
  /** The gateway's CPU per request (µs) in 1 s windows of small requests after the minute (see above). */
  rewarm_us_per_req?: number[];
}

const REWARM_WINDOWS = 6;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Run the burst against a gateway whose processes `pids()` lists (fresh: started for this). */
export async function highWater(pids: () => number[], spec: RequestSpec, o: HighWaterOptions, freshRssMb: number, cpuSeconds?: () => number): Promise<HighWaterResult> {
  if (o.warmupS > 0) await throughput(spec, 32, o.warmupS);
  await sleep(2000);
  const pre = rssMb(pids());
  const sampler = new RssSampler(new Map([['gw', pids]]), 100);
  let load;
  try {
    load = await throughput(spec, o.connections, o.loadS);
  } finally {
    sampler.stop();
  }
  const peak = sampler.take('gw');
  const series: [number, number][] = [];
  let back: number | null = null;
  const t0 = Date.now();
  for (let s = 0; s <= o.afterS; s++) {
    await sleep(Math.max(0, t0 + s * 1000 - Date.now()));
    const v = rssMb(pids());
    series.push([s, v]);
    if (back === null && v <= pre * 1.2) back = s;
  }
  const after = series[series.length - 1][1];
  const rewarm: number[] = [];
  for (let w = 0; cpuSeconds && w < REWARM_WINDOWS; w++) {
    const c0 = cpuSeconds();
    const r = await throughput(spec, 32, 1);
    rewarm.push(Math.round(((cpuSeconds() - c0) / Math.max(1, r.ok)) * 1e6));
  }
  return {
    connections: o.connections,
    load_s: o.loadS,
    after_s: o.afterS,
    fresh_rss_mb: freshRssMb,
    pre_rss_mb: pre,
    peak_rss_mb: peak,
    after_rss_mb: after,
    after_over_pre: after / pre,
    back_within_20pct_s: back,
    series,
    ok: load.ok,
    failed: load.failed,
    ...(rewarm.length ? { rewarm_us_per_req: rewarm } : {}),
  };
}
