// Load generators used by the benchmark and the soak test. They run in the
// benchmark's own process; every target (mock, proxies, gateway) is a separate
// process, so the load generator never shares an event loop with what it measures.
//
// - throughput(): autocannon (programmatic), N connections for D seconds:
//   req/s, p50, p99 (autocannon's histogram has 1 ms resolution).
// - serial(): one keep-alive connection, one request at a time, timed with
//   hrtime: latency and time to first byte in microseconds. This is what
//   "added latency over direct" is computed from.
// - manyStreams(): thousands of concurrent SSE streams on plain node:http
//   clients, every event counted and its order checked.
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface AutocannonResult {
  duration: number;
  '2xx': number;
  non2xx: number;
  errors: number;
  timeouts: number;
  latency: { p50: number; p99: number; average: number };
}
type AutocannonRequest = { method?: string; path?: string; headers?: Record<string, string>; body?: string };
type Autocannon = ((opts: Record<string, unknown>, cb: (err: Error | null, res: AutocannonResult) => void) => { stop(): void }) & {
  track?: unknown;
};
const autocannon = require('autocannon') as Autocannon;

export interface RequestSpec {
  /** Origin, e.g. http://127.0.0.1:8080 */
  origin: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  stream: boolean;
}

export interface ThroughputResult {
  rps: number;
  p50_ms: number;
  p99_ms: number;
  ok: number;
  failed: number;
  duration_s: number;
}

/** N connections as fast as they go, for `durationS` seconds (or mixed request specs, cycled per connection). */
export function throughput(spec: RequestSpec | RequestSpec[], connections: number, durationS: number, overallRate?: number): Promise<ThroughputResult> {
  const specs = Array.isArray(spec) ? spec : [spec];
  const first = specs[0];
  const requests: AutocannonRequest[] = specs.map((s) => ({ method: 'POST', path: s.path, headers: { ...s.headers, 'content-type': 'application/json' }, body: s.body }));
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: first.origin,
        connections,
        duration: durationS,
        requests,
        timeout: 30,
        // Stop within 100 ms of the duration (the default 1 s sampling rounds it up to whole seconds).
        sampleInt: 100,
        ...(overallRate ? { overallRate } : {}),
      },
      (err, res) => {
        if (err) return reject(err);
        const failed = res.non2xx + res.errors + res.timeouts;
        resolve({
          rps: res['2xx'] / res.duration,
          p50_ms: res.latency.p50,
          p99_ms: res.latency.p99,
          ok: res['2xx'],
          failed,
          duration_s: res.duration,
        });
      },
    );
  });
}

export interface SerialResult {
  /** Total latency per request, microseconds. */
  latency_us: number[];
  /** Time to the first body byte, microseconds (streams). */
  ttfb_us: number[];
  failed: number;
}

/** One connection, one request at a time, for `durationS` seconds (at least `minRequests`). */
export async function serial(spec: RequestSpec, durationS: number, minRequests = 20): Promise<SerialResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(spec.origin);
  const body = Buffer.from(spec.body);
  const headers = { ...spec.headers, 'content-type': 'application/json', 'content-length': String(body.length) };
  const out: SerialResult = { latency_us: [], ttfb_us: [], failed: 0 };
  const end = performance.now() + durationS * 1000;
  try {
    for (let i = 0; performance.now() < end || i < minRequests; i++) {
      const r = await once(agent, url, spec.path, headers, body);
      if (r.status !== 200) out.failed++;
      else {
        out.latency_us.push(r.totalUs);
        out.ttfb_us.push(r.ttfbUs);
      }
    }
  } finally {
    agent.destroy();
  }
  return out;
}

function once(agent: http.Agent, url: URL, path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; ttfbUs: number; totalUs: number }> {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    let ttfb = 0n;
    const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path, headers, agent }, (res) => {
      res.on('data', () => {
        if (ttfb === 0n) ttfb = process.hrtime.bigint();
      });
      res.on('end', () => {
        const t1 = process.hrtime.bigint();
        resolve({ status: res.statusCode ?? 0, ttfbUs: Number((ttfb || t1) - t0) / 1000, totalUs: Number(t1 - t0) / 1000 });
      });
      res.on('error', () => resolve({ status: 0, ttfbUs: 0, totalUs: 0 }));
    });
    req.on('error', () => resolve({ status: 0, ttfbUs: 0, totalUs: 0 }));
    req.end(body);
  });
}

// ---------------------------------------------------------------------------
// Many concurrent streams, every event checked.

/** The wire format the client reads (what the gateway emits, or the mock for direct). */
export type StreamFormat = 'openai-chat' | 'openai-responses' | 'anthropic' | 'gemini';

export interface StreamCheck {
  streams: number;
  completed: number;
  /** Streams that ended without their terminal event or with a non-200 status. */
  failed: number;
  /** Streams whose text deltas were missing, duplicated or out of order. */
  corrupted: number;
  /** Text deltas received across all streams (expected: streams × tokens). */
  events: number;
  expected_events: number;
  ttfb_ms: { p50: number; p99: number };
  duration_ms: { p50: number; p99: number; max: number };
  wall_ms: number;
  first_error?: string;
}

/** A text delta (or null) and whether this event ends the stream, per format. Parsed independently of the gateway's own SSE reader. */
function readEvent(format: StreamFormat, data: string): { text: string | null; done: boolean } {
  if (format === 'openai-chat') {
    if (data === '[DONE]') return { text: null, done: true };
    const c = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; error?: unknown };
    if (c.error) throw new Error(`stream error: ${JSON.stringify(c.error)}`);
    const t = c.choices?.[0]?.delta?.content;
    return { text: t ? t : null, done: false };
  }
  const e = JSON.parse(data) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  if (format === 'anthropic') {
    if (e.type === 'error') throw new Error(`stream error: ${JSON.stringify(e.error)}`);
    return { text: e.type === 'content_block_delta' && e.delta?.type === 'text_delta' ? e.delta.text : null, done: e.type === 'message_stop' };
  }
  if (format === 'openai-responses') {
    if (e.type === 'error' || e.type === 'response.failed') throw new Error(`stream error: ${data.slice(0, 200)}`);
    return { text: e.type === 'response.output_text.delta' ? e.delta : null, done: e.type === 'response.completed' };
  }
  const cand = e.candidates?.[0];
  const text = (cand?.content?.parts ?? []).map((p: { text?: string }) => p.text ?? '').join('');
  return { text: text || null, done: !!cand?.finishReason };
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Open `count` streams at once (plain node:http clients on an agent with
 * enough sockets), read every event, and check that each stream's text deltas
 * are exactly `expectedTexts` in order.
 */
export async function manyStreams(spec: RequestSpec, format: StreamFormat, count: number, expectedTexts: string[], rampMs = 0): Promise<StreamCheck> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: count + 16 });
  const url = new URL(spec.origin);
  const body = Buffer.from(spec.body);
  const headers = { ...spec.headers, 'content-type': 'application/json', 'content-length': String(body.length) };
  const ttfbs: number[] = [];
  const durations: number[] = [];
  const res: StreamCheck = {
    streams: count,
    completed: 0,
    failed: 0,
    corrupted: 0,
    events: 0,
    expected_events: count * expectedTexts.length,
    ttfb_ms: { p50: NaN, p99: NaN },
    duration_ms: { p50: NaN, p99: NaN, max: NaN },
    wall_ms: 0,
  };
  const fail = (why: string) => {
    res.failed++;
    res.first_error ??= why;
  };
  const started = performance.now();
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let got = 0;
      let inOrder = true;
      let done = false;
      let firstByte = true;
      let buf = '';
      const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: spec.path, headers, agent }, (r) => {
        if (r.statusCode !== 200) {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => {
            fail(`HTTP ${r.statusCode}: ${text.slice(0, 200)}`);
            resolve();
          });
          return;
        }
        r.setEncoding('utf8');
        r.on('data', (chunk: string) => {
          if (firstByte) {
            firstByte = false;
            ttfbs.push(performance.now() - t0);
          }
          buf += chunk;
          // Events end with a blank line; Gemini uses \r\n\r\n (both are valid SSE).
          for (;;) {
            const m = /\r?\n\r?\n/.exec(buf);
            if (!m) break;
            const block = buf.slice(0, m.index);
            buf = buf.slice(m.index + m[0].length);
            const data = block
              .split(/\r?\n/)
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(l.charCodeAt(5) === 32 ? 6 : 5))
              .join('\n');
            if (!data) continue;
            try {
              const ev = readEvent(format, data);
              if (ev.text !== null) {
                if (ev.text !== expectedTexts[got]) inOrder = false;
                got++;
              }
              if (ev.done) done = true;
            } catch (err) {
              inOrder = false;
              res.first_error ??= (err as Error).message;
            }
          }
        });
        r.on('end', () => {
          res.events += got;
          durations.push(performance.now() - t0);
          if (!done) fail(`stream ended without its terminal event after ${got} deltas`);
          else if (!inOrder || got !== expectedTexts.length) {
            res.corrupted++;
            res.first_error ??= `stream had ${got}/${expectedTexts.length} deltas${inOrder ? '' : ', out of order or wrong'}`;
          } else res.completed++;
          resolve();
        });
        r.on('error', (err) => {
          fail(`response error: ${err.message}`);
          resolve();
        });
      });
      req.on('error', (err) => {
        fail(`request error: ${err.message}`);
        resolve();
      });
      req.end(body);
    });
  try {
    // Open the streams over `rampMs` (in steps of 10 ms), not in one burst: a
    // burst of thousands of SYNs overflows the listen backlog and measures
    // kernel retransmits, not the gateway.
    const steps = Math.max(1, Math.floor(rampMs / 10));
    const all: Promise<void>[] = [];
    for (let step = 0; step < steps; step++) {
      const from = Math.floor((step * count) / steps);
      const to = Math.floor(((step + 1) * count) / steps);
      for (let i = from; i < to; i++) all.push(one());
      if (step < steps - 1) await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(all);
  } finally {
    agent.destroy();
  }
  res.wall_ms = performance.now() - started;
  ttfbs.sort((a, b) => a - b);
  durations.sort((a, b) => a - b);
  res.ttfb_ms = { p50: percentile(ttfbs, 50), p99: percentile(ttfbs, 99) };
  res.duration_ms = { p50: percentile(durations, 50), p99: percentile(durations, 99), max: durations[durations.length - 1] ?? NaN };
  return res;
}
