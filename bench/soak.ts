// `npm run soak [-- --minutes 10] [--rate 400] [--connections 16] [--sample 5] [--transport http]`
//
// A long run at steady mixed load (not in CI): the gateway (built dist,
// access log on) in front of the mock upstream, every available path in turn
// (OpenAI passthrough, Anthropic and Gemini translated, the Responses API;
// plain and streaming), at a fixed overall rate, plus a few streams every
// sample period that the client abandons half-way (the client-disconnect
// path must not leak either). RSS is sampled every few seconds; the report
// gives the growth after warm-up (median of the last minute against the
// median of the first minute after warm-up, and a least-squares slope) and
// every failed request. Exit code 1 when a request failed.
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';
import { writeFileSync, mkdirSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { availability, forkReady, startGateway, removeDir, rssMb, PROJECT_ROOT, BENCH_CLIENT_KEY, machine, type Proc, type GatewayProc } from './processes.js';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (opts: Record<string, unknown>, cb: (err: Error | null, res: { '2xx': number; non2xx: number; errors: number; timeouts: number; duration: number }) => void) => {
  on(ev: 'response', fn: (client: unknown, status: number) => void): void;
  on(ev: 'reqError', fn: (err: Error) => void): void;
  stop(): void;
};

export interface SoakOptions {
  minutes: number;
  /** Requests per second, all connections together. */
  rate: number;
  connections: number;
  sampleS: number;
  /** Samples before this are warm-up (JIT, pools, heap sizing). */
  warmupMinutes: number;
  transport?: string;
  /** Streams opened and abandoned by the client every sample period. */
  abandonPerSample: number;
  out: string | null;
}

const DEFAULTS: SoakOptions = { minutes: 10, rate: 400, connections: 16, sampleS: 5, warmupMinutes: 2, abandonPerSample: 10, out: path.join(PROJECT_ROOT, 'bench', 'results', 'soak-latest.json') };

function parseArgs(argv: string[]): SoakOptions {
  const o = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--minutes') o.minutes = Number(v());
    else if (a === '--rate') o.rate = Number(v());
    else if (a === '--connections') o.connections = Number(v());
    else if (a === '--sample') o.sampleS = Number(v());
    else if (a === '--warmup') o.warmupMinutes = Number(v());
    else if (a === '--transport') o.transport = v();
    else if (a === '--abandon') o.abandonPerSample = Number(v());
    else if (a === '--out') o.out = v() === '-' ? null : path.resolve(argv[i]);
    else throw new Error(`unknown option ${a} (see the header of bench/soak.ts)`);
  }
  // Short runs (smoke tests of the soak itself) keep a proportionate warm-up.
  o.warmupMinutes = Math.min(o.warmupMinutes, o.minutes / 3);
  return o;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den ? num / den : NaN;
}

/** One request: null when it answered 200 with a complete body, else why not. */
async function probeOk(url: string, headers: Record<string, string>, body: string): Promise<string | null> {
  try {
    const r = await fetch(url, { method: 'POST', headers, body });
    const text = await r.text();
    if (r.status !== 200) return `HTTP ${r.status}: ${text.slice(0, 200)}`;
    if (JSON.parse(body).stream && !/\[DONE\]|response\.completed/.test(text)) return 'stream ended without its terminal event';
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Open streams and close them from the client side after `afterMs`. */
function abandonStreams(origin: string, model: string, count: number, afterMs: number): Promise<void> {
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }], max_completion_tokens: 200, stream: true });
  const url = new URL(origin);
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const req = http.request(
            { host: url.hostname, port: url.port, method: 'POST', path: '/v1/chat/completions', agent: false, headers: { authorization: `Bearer ${BENCH_CLIENT_KEY}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
            (res) => {
              res.resume();
              setTimeout(() => {
                req.destroy();
                resolve();
              }, afterMs);
              res.on('end', resolve);
            },
          );
          req.on('error', () => resolve());
          req.end(body);
        }),
    ),
  ).then(() => undefined);
}

export async function runSoak(o: SoakOptions) {
  const avail = availability();
  const procs: Proc[] = [];
  let gw: GatewayProc | undefined;
  try {
    const mock = await forkReady('mock-upstream.js', []);
    procs.push(mock);
    const mockOrigin = `http://127.0.0.1:${mock.port}`;
    gw = await startGateway({ mockOrigin, avail, transport: o.transport, paceMs: 20 });
    procs.push(gw);
    const origin = `http://127.0.0.1:${gw.port}`;

    const headers = { authorization: `Bearer ${BENCH_CLIENT_KEY}`, 'content-type': 'application/json' };
    const chat = (model: string, stream: boolean) => ({
      method: 'POST',
      path: '/v1/chat/completions',
      headers,
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello in five words.' }], max_completion_tokens: 16, ...(stream ? { stream: true } : {}) }),
    });
    const models = ['bench/openai', ...(avail.anthropic ? ['bench/anthropic'] : []), ...(avail.gemini ? ['bench/gemini'] : [])];
    const requests = models.flatMap((m) => [chat(m, false), chat(m, true)]);
    const translated = avail.anthropic ? 'bench/anthropic' : avail.gemini ? 'bench/gemini' : undefined;
    if (avail.responses && translated) {
      for (const stream of [false, true])
        requests.push({ method: 'POST', path: '/v1/responses', headers, body: JSON.stringify({ model: translated, input: 'Say hello.', max_output_tokens: 16, store: false, ...(stream ? { stream: true } : {}) }) });
    }
    // Every request kind must work before a long run is worth starting.
    for (const r of requests) {
      const why = await probeOk(origin + r.path, r.headers, r.body);
      if (why) throw new Error(`${r.path} ${r.body.slice(0, 60)}…: ${why}`);
    }

    process.stderr.write(
      `soak: ${o.minutes} min at ${o.rate} req/s over ${o.connections} connections, ${requests.length} request kinds (${models.join(', ')}${avail.responses ? ', responses' : ''}), ` +
        `${o.abandonPerSample} abandoned streams every ${o.sampleS} s; RSS sampled every ${o.sampleS} s\n`,
    );
    const started = performance.now();
    const samples: { t_s: number; rss_mb: number; ok: number; failed: number }[] = [];
    let ok = 0;
    let failed = 0;
    const failures = new Map<string, number>();
    let abandoned = 0;
    const done = new Promise<{ '2xx': number; non2xx: number; errors: number; timeouts: number; duration: number }>((resolve, reject) => {
      const inst = autocannon(
        { url: origin, connections: o.connections, duration: o.minutes * 60, overallRate: o.rate, requests, timeout: 30, sampleInt: 1000 },
        (err, res) => (err ? reject(err) : resolve(res)),
      );
      inst.on('response', (_c, status) => {
        if (status >= 200 && status < 300) ok++;
        else {
          failed++;
          failures.set(`HTTP ${status}`, (failures.get(`HTTP ${status}`) ?? 0) + 1);
        }
      });
      inst.on('reqError', (err) => {
        failed++;
        failures.set(err.message, (failures.get(err.message) ?? 0) + 1);
      });
    });
    const timer = setInterval(() => {
      const t = (performance.now() - started) / 1000;
      const rss = rssMb(gw!.pids());
      samples.push({ t_s: Math.round(t), rss_mb: Math.round(rss * 10) / 10, ok, failed });
      process.stderr.write(`  ${String(Math.round(t)).padStart(5)} s  RSS ${rss.toFixed(1).padStart(6)} MB  ok ${ok}  failed ${failed}\n`);
      if (o.abandonPerSample > 0 && translated) {
        abandoned += o.abandonPerSample;
        void abandonStreams(origin, `${translated}-paced`, o.abandonPerSample, 300);
      }
    }, o.sampleS * 1000);
    const res = await done;
    clearInterval(timer);

    const after = samples.filter((s) => s.t_s >= o.warmupMinutes * 60);
    const firstMinute = after.filter((s) => s.t_s < o.warmupMinutes * 60 + 60).map((s) => s.rss_mb);
    const lastMinute = after.filter((s) => s.t_s >= o.minutes * 60 - 60).map((s) => s.rss_mb);
    const report = {
      started_at: new Date(Date.now() - (performance.now() - started)).toISOString(),
      machine: machine(),
      settings: { ...o, request_kinds: requests.length, models, responses: avail.responses },
      requests: { ok: res['2xx'], failed: res.non2xx + res.errors + res.timeouts, non2xx: res.non2xx, errors: res.errors, timeouts: res.timeouts, by_reason: Object.fromEntries(failures), abandoned_streams: abandoned },
      rss_mb: {
        after_warmup: median(firstMinute),
        last_minute: median(lastMinute),
        growth_after_warmup: median(lastMinute) - median(firstMinute),
        slope_mb_per_min: slope(
          after.map((s) => s.t_s / 60),
          after.map((s) => s.rss_mb),
        ),
        max: Math.max(...samples.map((s) => s.rss_mb)),
      },
      samples,
    };
    process.stdout.write(
      `\nsoak: ${report.requests.ok} ok, ${report.requests.failed} failed (${JSON.stringify(report.requests.by_reason)}), ${abandoned} streams abandoned by the client\n` +
        `RSS after warm-up ${report.rss_mb.after_warmup.toFixed(1)} MB, last minute ${report.rss_mb.last_minute.toFixed(1)} MB, ` +
        `growth ${report.rss_mb.growth_after_warmup.toFixed(1)} MB, slope ${report.rss_mb.slope_mb_per_min.toFixed(2)} MB/min, max ${report.rss_mb.max.toFixed(1)} MB\n`,
    );
    if (o.out) {
      mkdirSync(path.dirname(o.out), { recursive: true });
      writeFileSync(o.out, JSON.stringify(report, null, 2) + '\n');
      process.stdout.write(`written ${path.relative(process.cwd(), o.out)}\n`);
    }
    return report;
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => {});
    if (gw) removeDir(gw.dir);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  runSoak(parseArgs(process.argv.slice(2)))
    .then((r) => {
      if (r.requests.failed > 0) process.exitCode = 1;
    })
    .catch((err) => {
      process.stderr.write(`soak: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
