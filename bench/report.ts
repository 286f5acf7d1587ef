// The benchmark report: its JSON shape, the console table, and a hand-written
// SVG bar chart (no dependency). bench/results/latest.{json,svg} are written here.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { StreamCheck } from './load.js';
import type { ProfileEntry } from './profile.js';
import type { HighWaterResult } from './highwater.js';

export type RowStatus = 'ok' | 'n/a' | 'failed';
export type TargetKind = 'direct' | 'plain' | 'portkey' | 'gateway' | 'gateway-2w';

export interface RowResult {
  id: string;
  label: string;
  target: TargetKind;
  /** What the row exercises: passthrough, anthropic, gemini, responses (on a translated family), anthropic-heavy (a long conversation translated). */
  path: string;
  stream: boolean;
  status: RowStatus;
  note?: string;
  /** 32 connections: median over rounds. */
  rps?: number;
  rps_rounds?: number[];
  p50_ms?: number;
  p99_ms?: number;
  failed?: number;
  /** One connection: latency and TTFB in ms, and what the row adds over its direct baseline. */
  c1?: {
    requests: number;
    p50_ms: number;
    p99_ms: number;
    added_p50_ms?: number;
    added_p99_ms?: number;
    ttfb_p50_ms?: number;
    added_ttfb_p50_ms?: number;
    baseline?: string;
  };
  peak_rss_mb?: number;
  /**
   * CPU during the 32-connection measurement, median over rounds, in % of one
   * core: the row's target (all its processes; absent for direct rows), the
   * mock upstream, and the benchmark process (the load generator); and the
   * target's CPU time per answered request, in µs.
   */
  cpu?: { target_pct?: number; mock_pct: number; client_pct: number; target_us_per_req?: number; target_us_per_req_rounds?: number[]; redis_us_per_req?: number; redis_us_per_req_rounds?: number[] };
}

export interface TargetCheck {
  name: string;
  goal: string;
  value: string;
  met: boolean | null;
}

/**
 * CPU over one run of the many streams, in cores (CPU seconds over wall
 * seconds): the process in the middle (gateway or plain proxy; absent for
 * direct), the mock, the load generator (the benchmark process) and the whole
 * machine (every process and the kernel's loopback work). A target near one
 * core is saturated: new streams then queue behind the events it has not yet
 * relayed, and their time to first byte shows it.
 */
export interface StreamCpu {
  wall_s: number;
  target_cores?: number;
  /** The target's CPU per delivered text delta, stream set-up included. */
  target_us_per_event?: number;
  mock_cores: number;
  load_cores: number;
  machine_cores: number;
}

export interface BenchReport {
  version: 1;
  started_at: string;
  duration_s: number;
  quick: boolean;
  /** background_cpu_pct: CPU used by other processes on the machine during the measurements, in % of one core. */
  machine: { nproc: number; cpu_model: string; mem_total_gb: number; node: string; node_pinned?: string; allocator?: string; os: string; background_cpu_pct?: number };
  settings: {
    rounds: number;
    connections: number;
    throughput_s: number;
    serial_s: number;
    tokens: number;
    log: string;
    transport: string;
    workers_row: boolean;
    /** The steady-state warm-up (BenchOptions.steady). */
    steady?: { sliceS: number; window: number; tolerance: number; minRequests: number; maxS: number };
    /** Node flags of every process a row times (TIMED_NODE_ARGS); absent in runs before 2026-11-28. */
    timed_node_args?: string[];
    /** The heavy request (bench/heavy.ts): chat messages, words per text, body size in bytes. */
    heavy?: { messages: number; words: number; bytes: number };
  };
  /** Each target process's warm-up past the fixed one, until its CPU per request was steady: seconds, and µs a request per slice. */
  steady_warmup?: Record<string, { extra_s: number; us_per_req: number[] }>;
  gateway: { startup_ms: number; startup_samples_ms: number[]; idle_rss_mb: number; peak_rss_mb: number; log_lines?: number; log_bytes_per_line?: number };
  rows: RowResult[];
  streams?: {
    path: string;
    streams: number;
    events_per_stream: number;
    pace_ms: number;
    ramp_ms: number;
    direct: StreamCheck;
    gateway: StreamCheck;
    gateway_peak_rss_mb: number;
    added_ttfb_p50_ms: number;
    /** The same streams through the plain Node proxy (the reference for one Node process on this machine). */
    plain?: StreamCheck;
    plain_added_ttfb_p50_ms?: number;
    /** The same on a gateway started with extra node flags (memory tuning). */
    tuned?: { flags: string[]; gateway: StreamCheck; gateway_peak_rss_mb: number; added_ttfb_p50_ms: number };
    /**
     * The burst of the same streams, `events_per_stream` each, that the plain
     * proxy and each fresh gateway carry first (their warm-up): its time to
     * first byte is what a process fresh from start-up gives its first streams.
     */
    first_burst?: { events_per_stream: number; gateway: StreamCheck; plain?: StreamCheck };
    /** CPU while each of the runs lasted: how much of the machine the target, the mock and the load generator took. */
    cpu?: { direct: StreamCpu; plain?: StreamCpu; gateway: StreamCpu };
  } | { path: string; status: 'n/a' | 'failed'; note: string };
  /** High-water memory (bench/highwater.ts); `quick`: followed for less than the minute the target names. */
  high_water?: HighWaterResult & { quick: boolean };
  /** Median over rounds of the paired ratios (see bench.ts); the targets use these. */
  ratios: Record<string, number | null>;
  ratios_paired_rounds?: Record<string, number[]>;
  /**
   * The CPU behind each paired ratio, medians over its pairs: the numerator's and the denominator's CPU per
   * request, the cores each used, and the cores the machine's other processes used during the numerator's run.
   */
  paired_cpu?: Record<string, { num_us_per_req: number; den_us_per_req: number; num_cores: number; den_cores: number; others_cores: number }>;
  /**
   * The observability ratios as the gateway's CPU per request (the same
   * paired runs; information, lower is better), and the trace exports the
   * mock's OTLP endpoint received from the gateway with traces on.
   */
  observability?: {
    cpu_ratios: Record<string, { value: number; rounds: number[] }>;
    otlp?: { exports: number; bytes: number; rejected: number };
  };
  /** The same ratios from the table's per-row medians (rows measured apart in time). */
  ratios_of_row_medians?: Record<string, number | null>;
  /** Ratios shown as information only (no target is judged on them), with the reason. */
  ratio_notes?: Record<string, string>;
  /**
   * The gateway's CPU per request over the plain proxy's with the same body
   * (bench.ts cpuRatios; lower is better): the median over rounds of paired
   * runs, per round, from the table's medians, and the most the target allows.
   */
  cpu_ratios?: Record<string, { value: number | null; rounds: number[]; table: number | null; max: number }>;
  /** The agent rows' gateway: RSS after one request of each (baseline), at the peak of their load, and `settle_s` after it. */
  bodies?: { sizes: number[]; baseline_rss_mb: number; peak_rss_mb: number; after_rss_mb: number; settle_s: number };
  targets: TargetCheck[];
  /** With --profile: the gateway's CPU profile, summarised (bench/profile.ts). */
  profile?: { file: string; total_ms: number; functions: ProfileEntry[]; files: ProfileEntry[] };
}

const r1 = (n: number | undefined, d = 1) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(d));

/**
 * How much the machine drifted during the run, seen through the reference
 * itself: the plain Node proxy's rate and CPU per request in each round. Its
 * work is the same every round, so a spread is the machine's (a shared VM's
 * speed moves by tens of percent within minutes), and the reason the targets
 * use paired ratios.
 */
export function driftLine(plain: RowResult | undefined): string | undefined {
  const rps = plain?.rps_rounds ?? [];
  if (rps.length < 2) return undefined;
  const spread = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted[Math.floor(sorted.length / 2)];
    return mid > 0 ? Math.round(((sorted[sorted.length - 1] - sorted[0]) / mid) * 100) : NaN;
  };
  const us = plain?.cpu?.target_us_per_req_rounds ?? [];
  return (
    `drift: the plain Node proxy did ${rps.join(' / ')} req/s in the ${rps.length} rounds (spread ${spread(rps)}% of the median)` +
    (us.length === rps.length ? `, at ${us.join(' / ')} µs of CPU per request (${spread(us)}%)` : '') +
    '; its work is the same every round, so the spread is the machine\'s.'
  );
}

export function formatTable(rep: BenchReport): string {
  const head = ['target', 'req/s', 'p50 ms', 'p99 ms', 'c=1 p50', '+p50 ms', '+p99 ms', 'TTFB', '+TTFB', 'RSS MB', 'CPU% t/m/c', 'µs/req', 'fail'];
  const pct = (n: number | undefined) => (n === undefined ? '–' : Math.round(n).toString());
  const ok = rep.rows.filter((r) => r.status === 'ok');
  const cells = (r: RowResult): string[] => {
    const c = r.c1;
    return [
      r.label,
      r.rps === undefined ? '–' : Math.round(r.rps).toString(),
      r1(r.p50_ms, 0),
      r1(r.p99_ms, 0),
      c ? r1(c.p50_ms, 3) : '–',
      r1(c?.added_p50_ms, 3),
      r1(c?.added_p99_ms, 3),
      r1(c?.ttfb_p50_ms, 3),
      r1(c?.added_ttfb_p50_ms, 3),
      r1(r.peak_rss_mb, 0),
      r.cpu ? `${pct(r.cpu.target_pct)}/${pct(r.cpu.mock_pct)}/${pct(r.cpu.client_pct)}` : '–',
      r.cpu?.target_us_per_req === undefined ? '–' : String(r.cpu.target_us_per_req),
      r.failed === undefined ? '–' : String(r.failed),
    ];
  };
  const widths = head.map((h, i) => Math.max(h.length, ...rep.rows.map((r) => (i === 0 ? r.label.length : 0)), ...ok.map((r) => cells(r)[i].length)));
  const line = (cs: string[]) => cs.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const lines = [line(head), widths.map((w) => '-'.repeat(w)).join('  ')];
  for (const r of rep.rows) lines.push(r.status === 'ok' ? line(cells(r)) : `${r.label.padEnd(widths[0])}  ${r.status}${r.note ? ` (${r.note})` : ''}`);
  lines.push('');
  lines.push(
    `req/s, p50, p99: ${rep.settings.connections} connections, median of ${rep.settings.rounds} interleaved round(s) of ${rep.settings.throughput_s} s. ` +
      `c=1: one connection, ${rep.settings.serial_s} s per round; +p50/+p99/+TTFB: over the direct row of the same upstream protocol. ` +
      `CPU% t/m/c: % of one core used by the target, the mock upstream and the load generator during the 32-connection run; µs/req: the target's CPU per request. ` +
      `Gateway logging: ${rep.settings.log}; upstream transport: ${rep.settings.transport}; Node ${rep.machine.node}; allocator: ${rep.machine.allocator ?? 'glibc malloc'}. ` +
      `Other processes used ${rep.machine.background_cpu_pct ?? '?'}% of one core meanwhile (${rep.machine.nproc} cores).`,
  );
  const lim = rep.rows.find((r) => r.id === 'gwlim-openai')?.cpu;
  if (lim?.redis_us_per_req !== undefined)
    lines.push(`gwlim-openai: Redis (a local redis-server) used ${lim.redis_us_per_req} µs of CPU per request beside the gateway's ${lim.target_us_per_req ?? '?'} (per round: ${(lim.redis_us_per_req_rounds ?? []).join(', ')}).`);
  const drift = driftLine(rep.rows.find((r) => r.id === 'plain-chat'));
  if (drift) lines.push(drift);
  const h = rep.settings.heavy;
  if (h) lines.push(`heavy request: a chat completion translated to Anthropic, ${h.messages} messages of ${h.words} words per text, a system prompt and 2 tools, ${(h.bytes / 1024).toFixed(1)} KB of JSON.`);
  const g = rep.gateway;
  lines.push(
    `gateway start-up to a ready /healthz: ${r1(g.startup_ms, 0)} ms; idle RSS ${r1(g.idle_rss_mb, 0)} MB; peak RSS (VmHWM) ${r1(g.peak_rss_mb, 0)} MB` +
      (g.log_lines !== undefined ? `; access log: ${g.log_lines} lines, ${g.log_bytes_per_line} bytes each.` : '.'),
  );
  const s = rep.streams;
  if (s && 'gateway' in s) {
    lines.push(
      `streams: ${s.streams} concurrent × ${s.events_per_stream} events (${s.path}, one event every ${s.pace_ms} ms, opened over ${s.ramp_ms} ms): ` +
        `gateway ${s.gateway.completed}/${s.streams} complete, ${s.gateway.events}/${s.gateway.expected_events} events, ${s.gateway.corrupted} corrupted, ${s.gateway.failed} failed; ` +
        `TTFB p50 ${r1(s.gateway.ttfb_ms.p50, 2)} ms (direct ${r1(s.direct.ttfb_ms.p50, 2)} ms); peak RSS ${r1(s.gateway_peak_rss_mb, 0)} MB; wall ${r1(s.gateway.wall_ms / 1000, 1)} s (direct ${r1(s.direct.wall_ms / 1000, 1)} s).`,
    );
    if (s.plain)
      lines.push(
        `streams through the plain Node proxy: ${s.plain.completed}/${s.streams} complete, ${s.plain.events}/${s.plain.expected_events} events; TTFB p50 ${r1(s.plain.ttfb_ms.p50, 2)} ms; wall ${r1(s.plain.wall_ms / 1000, 1)} s.`,
      );
    if (s.first_burst) {
      const f = s.first_burst;
      const one = (x: StreamCheck) => `${x.completed}/${s.streams} complete, TTFB p50 ${r1(x.ttfb_ms.p50, 2)} ms`;
      lines.push(
        `streams, the first burst (${f.events_per_stream} events each, the warm-up before the timed streams): gateway fresh from start-up ${one(f.gateway)}` +
          (f.plain ? `; plain Node proxy ${one(f.plain)}` : '') + '.',
      );
    }
    if (s.tuned)
      lines.push(
        `streams, gateway started with ${s.tuned.flags.join(' ')}: ${s.tuned.gateway.completed}/${s.streams} complete, ${s.tuned.gateway.events}/${s.tuned.gateway.expected_events} events; ` +
          `TTFB p50 ${r1(s.tuned.gateway.ttfb_ms.p50, 2)} ms; peak RSS ${r1(s.tuned.gateway_peak_rss_mb, 0)} MB.`,
      );
    if (s.cpu) {
      const c = (x: StreamCpu) =>
        (x.target_cores !== undefined ? `target ${r1(x.target_cores, 2)} (${r1(x.target_us_per_event ?? NaN, 1)} µs/event), ` : '') +
        `mock ${r1(x.mock_cores, 2)}, load generator ${r1(x.load_cores, 2)}, machine ${r1(x.machine_cores, 2)}`;
      lines.push(
        `streams, CPU in cores of ${rep.machine.nproc}: direct: ${c(s.cpu.direct)}` + (s.cpu.plain ? `; plain proxy: ${c(s.cpu.plain)}` : '') + `; gateway: ${c(s.cpu.gateway)}.`,
      );
    }
  } else if (s) lines.push(`streams: ${s.status} (${s.note})`);
  const hw = rep.high_water;
  if (hw)
    lines.push(
      `high-water memory${hw.quick ? ' (quick: a shorter burst, followed for less than a minute)' : ''}: fresh gateway ${r1(hw.fresh_rss_mb, 0)} MB; warmed up and idle (pre-load) ${r1(hw.pre_rss_mb, 0)} MB; ` +
        `peak under ${hw.connections} connections for ${hw.load_s} s ${r1(hw.peak_rss_mb, 0)} MB (${hw.ok} ok, ${hw.failed} failed); ${hw.after_s} s after ${r1(hw.after_rss_mb, 0)} MB (${r1(hw.after_over_pre, 2)}x pre-load; ` +
        (hw.back_within_20pct_s === null ? 'not back within 20%' : `within 20% after ${hw.back_within_20pct_s} s`) +
        `); RSS every 10 s after the load: ${hw.series.filter(([t]) => t % 10 === 0).map(([, v]) => v.toFixed(0)).join(' ')} MB.` +
        (hw.rewarm_us_per_req ? ` Then small requests again, after the idle collection: ${hw.rewarm_us_per_req.join(', ')} µs of gateway CPU per request in successive 1 s windows.` : ''),
    );
  lines.push('');
  lines.push('ratios (median over rounds of back-to-back measurements; in brackets: per round, and from the table\'s row medians):');
  for (const [k, v] of Object.entries(rep.ratios)) {
    const rounds = rep.ratios_paired_rounds?.[k];
    const m = rep.ratios_of_row_medians?.[k];
    const note = rep.ratio_notes?.[k];
    lines.push(`${k}: ${v === null ? 'n/a' : v.toFixed(2) + 'x'}${rounds ? ` [${rounds.map((x) => x.toFixed(2)).join(' ')}; table ${m == null ? 'n/a' : m.toFixed(2) + 'x'}]` : ''}${note ? ` (${note})` : ''}`);
  }
  if (rep.paired_cpu && Object.keys(rep.paired_cpu).length) {
    lines.push('');
    lines.push('the paired runs\' CPU (medians over pairs): µs per request, numerator / denominator; cores each used; cores other processes used meanwhile:');
    for (const [k, d] of Object.entries(rep.paired_cpu))
      lines.push(`${k}: ${d.num_us_per_req} / ${d.den_us_per_req} µs (${(d.num_us_per_req / d.den_us_per_req).toFixed(2)}x); cores ${d.num_cores.toFixed(2)} / ${d.den_cores.toFixed(2)}; others ${d.others_cores.toFixed(2)}`);
  }
  const ob = rep.observability;
  if (ob) {
    for (const [k, r] of Object.entries(ob.cpu_ratios)) lines.push(`${k}, CPU per request: ${r.value.toFixed(3)}x [${r.rounds.map((x) => x.toFixed(2)).join(' ')}] (information; lower is better)`);
    if (ob.otlp) lines.push(`traces received by the mock collector: ${ob.otlp.exports} exports, ${(ob.otlp.bytes / 1e6).toFixed(1)} MB, ${ob.otlp.rejected} refused.`);
  }
  if (rep.cpu_ratios) {
    lines.push('');
    lines.push('CPU per request, gateway over the plain proxy with the same body (paired, median over rounds; lower is better; in brackets: per round, and from the table):');
    for (const [k, r] of Object.entries(rep.cpu_ratios))
      lines.push(`${k}: ${r.value === null ? 'n/a' : r.value.toFixed(2) + 'x'} [${r.rounds.map((x) => x.toFixed(2)).join(' ')}; table ${r.table === null ? 'n/a' : r.table.toFixed(2) + 'x'}] (at most ${r.max}x)`);
  }
  const b = rep.bodies;
  if (b)
    lines.push(
      `agent rows' gateway: RSS ${r1(b.baseline_rss_mb, 0)} MB after one request of each, ${r1(b.peak_rss_mb, 0)} MB at the peak of their load, ${r1(b.after_rss_mb, 0)} MB ${b.settle_s} s after it.`,
    );
  lines.push('');
  lines.push('targets:');
  for (const t of rep.targets) lines.push(`  [${t.met === null ? ' n/a' : t.met ? ' met' : 'MISS'}] ${t.name}: ${t.value} (goal ${t.goal})`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// SVG: two horizontal bar charts, throughput (32 connections) and added
// latency at concurrency 1 (p50 and p99). Plain SVG 1.1, readable on GitHub.

const COLORS: Record<TargetKind, string> = {
  direct: '#9aa5b1',
  plain: '#5b8def',
  portkey: '#e8833a',
  gateway: '#2f9e44',
  'gateway-2w': '#087f5b',
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function svgChart(rep: BenchReport): string {
  const tp = rep.rows.filter((r) => r.status === 'ok' && r.rps !== undefined);
  const lat = rep.rows.filter((r) => r.status === 'ok' && r.c1?.added_p50_ms !== undefined);
  // About 6.7 px per character at 12 px Helvetica/Arial: room for the longest label.
  const labelW = Math.max(200, Math.ceil(Math.max(0, ...[...tp, ...lat].map((r) => r.label.length)) * 6.7) + 16);
  const barMax = 480;
  const W = labelW + barMax + 120;
  const rowH = 22;
  const parts: string[] = [];
  let y = 0;
  const title = (text: string, sub: string) => {
    y += 28;
    parts.push(`<text x="10" y="${y}" font-size="16" font-weight="bold">${esc(text)}</text>`);
    y += 18;
    parts.push(`<text x="10" y="${y}" font-size="11" fill="#555">${esc(sub)}</text>`);
    y += 10;
  };
  title('Throughput, 32 connections (req/s, higher is better)', `${rep.machine.nproc} cores, ${rep.machine.cpu_model}, Node ${rep.machine.node}; gateway logging ${rep.settings.log}`);
  const maxRps = Math.max(1, ...tp.map((r) => r.rps!));
  for (const r of tp) {
    const w = Math.max(1, (r.rps! / maxRps) * barMax);
    parts.push(`<text x="${labelW - 8}" y="${y + 15}" font-size="12" text-anchor="end">${esc(r.label)}</text>`);
    parts.push(`<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${COLORS[r.target]}"/>`);
    parts.push(`<text x="${(labelW + w + 6).toFixed(1)}" y="${y + 15}" font-size="12">${Math.round(r.rps!)}</text>`);
    y += rowH;
  }
  if (lat.length) {
    title('Added latency over direct, concurrency 1 (ms, lower is better)', 'dark: p50, light: p99');
    const maxLat = Math.max(0.05, ...lat.map((r) => Math.max(r.c1!.added_p50_ms ?? 0, r.c1!.added_p99_ms ?? 0)));
    for (const r of lat) {
      const p50 = Math.max(0, r.c1!.added_p50_ms ?? 0);
      const p99 = Math.max(0, r.c1!.added_p99_ms ?? 0);
      const w50 = Math.max(1, (p50 / maxLat) * barMax);
      const w99 = Math.max(1, (p99 / maxLat) * barMax);
      parts.push(`<text x="${labelW - 8}" y="${y + 15}" font-size="12" text-anchor="end">${esc(r.label)}</text>`);
      parts.push(`<rect x="${labelW}" y="${y + 3}" width="${w99.toFixed(1)}" height="${rowH - 6}" fill="${COLORS[r.target]}" fill-opacity="0.35"/>`);
      parts.push(`<rect x="${labelW}" y="${y + 3}" width="${w50.toFixed(1)}" height="${rowH - 6}" fill="${COLORS[r.target]}"/>`);
      parts.push(`<text x="${(labelW + Math.max(w50, w99) + 6).toFixed(1)}" y="${y + 15}" font-size="12">${p50.toFixed(3)} / ${p99.toFixed(3)}</text>`);
      y += rowH;
    }
  }
  y += 14;
  const legend = (Object.keys(COLORS) as TargetKind[]).map((k, i) => `<rect x="${10 + i * 150}" y="${y}" width="12" height="12" fill="${COLORS[k]}"/><text x="${28 + i * 150}" y="${y + 11}" font-size="12">${k}</text>`);
  parts.push(...legend);
  y += 24;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="#ffffff"/>
${parts.join('\n')}
</svg>
`;
}

export function writeResults(rep: BenchReport, dir: string, name = 'latest'): { json: string; svg: string } {
  mkdirSync(dir, { recursive: true });
  const json = path.join(dir, `${name}.json`);
  const svg = path.join(dir, `${name}.svg`);
  writeFileSync(json, JSON.stringify(rep, null, 2) + '\n');
  writeFileSync(svg, svgChart(rep));
  return { json, svg };
}

/** The rows as a Markdown table (for BENCHMARKS.md): `node dist/bench/report.js bench/results/latest.json [--svg]`. */
export function formatMarkdown(rep: BenchReport): string {
  const f = (n: number | undefined, d: number) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(d));
  const lines = [
    '| target | req/s (32 conn.) | p50 ms | p99 ms | c=1 p50 ms | added p50 ms | added p99 ms | TTFB ms | added TTFB ms | peak RSS MB |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of rep.rows) {
    if (r.status !== 'ok') {
      lines.push(`| ${r.label} | ${r.status}${r.note ? `: ${r.note}` : ''} | | | | | | | | |`);
      continue;
    }
    const c = r.c1;
    lines.push(
      `| ${r.label} | ${r.rps === undefined ? '–' : Math.round(r.rps)} | ${f(r.p50_ms, 0)} | ${f(r.p99_ms, 0)} | ${f(c?.p50_ms, 3)} | ${f(c?.added_p50_ms, 3)} | ${f(c?.added_p99_ms, 3)} | ${f(c?.ttfb_p50_ms, 3)} | ${f(c?.added_ttfb_p50_ms, 3)} | ${f(r.peak_rss_mb, 0)} |`,
    );
  }
  return lines.join('\n');
}

if (import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1] ?? '').href) {
  const { readFileSync } = await import('node:fs');
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node dist/bench/report.js <latest.json>\n');
    process.exit(2);
  }
  const rep = JSON.parse(readFileSync(file, 'utf8')) as BenchReport;
  if (process.argv[3] === '--svg') {
    // Re-draw the chart next to the JSON (after a change to svgChart).
    const { writeFileSync } = await import('node:fs');
    writeFileSync(file.replace(/\.json$/, '.svg'), svgChart(rep));
  }
  process.stdout.write(formatMarkdown(rep) + '\n\n' + formatTable(rep) + '\n');
}
