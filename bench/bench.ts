// `npm run bench [-- --quick] [--rounds N] [--duration S] [--no-portkey] [--profile] [--transport http]`
// (`--help` lists every option)
//
// One run on this machine: a fast mock upstream (own process), then each
// target in front of it, measured in interleaved rounds with the same load:
//   direct to the mock · a plain Node proxy (the reference limit of one Node
//   process) · the gateway (built dist, `model-gateway start`, access log ON
//   at info) for OpenAI passthrough, Anthropic and Gemini translated, plain and
//   streaming, and the Responses API on a translated family · a heavy request
//   (a ~30 KB conversation translated to Anthropic, bench/heavy.ts) · the
//   gateway with 2 workers (`server.workers: 2`) on passthrough and on the
//   heavy request · @portkey-ai/gateway (passthrough).
// Then 2,000 concurrent paced streams through a translated path, every event
// counted and its order checked. Prints one table, writes
// bench/results/latest.json and latest.svg. BENCHMARKS.md explains the rows.
//
// Workers: the `server.workers` target is judged on the heavy request. The
// load generator (autocannon, in this process) and the mock share the
// machine's cores with the gateway; a small passthrough request costs them
// together more than half what it costs the gateway, so on 2 cores a second
// worker mostly competes with them. The heavy request costs the gateway three
// to six times what it costs the client and the mock together (the table's CPU
// columns show the split), so there the ratio shows what a second worker buys.
// Its garbage also weighs on one worker's heap at 32 connections (the gateway's
// default server.node_flags bound the young generation): the µs/req column
// shows how much of the gain is less GC per worker. The passthrough 2-worker
// row and ratio stay, as information.
import { mkdtempSync, readdirSync, openSync, readSync, closeSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { throughput, serial, manyStreams, percentile, type RequestSpec, type StreamFormat, type ThroughputResult, type StreamCheck } from './load.js';
import { expectedText, tokenText, type Protocol, type MockUpstream } from './mock-upstream.js';
import { HEAVY_DEFAULT, heavyChatBody, checkAnthropicHeavy, type HeavyOptions } from './heavy.js';
import { claudeCodeBody, claudeCodeChatBody, checkClaudeCodeUpstream, checkMessagesUpstream } from './messages.js';
import { AGENT_SIZES, agentChatBody, agentMessagesBody, checkAgentAnthropic, checkAgentPassthrough } from './agent.js';
import {
  PROJECT_ROOT,
  BENCH_CLIENT_KEY,
  BENCH_LIMITED_KEY,
  redisDown,
  redisPid,
  dropRedisKeys,
  availability,
  forkReady,
  startGateway,
  gatewayYaml,
  startPortkey,
  removeDir,
  RssSampler,
  peakRssMb,
  rssMb,
  machine,
  cpuSeconds,
  machineBusySeconds,
  pinnedNode,
  type Proc,
  type GatewayProc,
  type Availability,
} from './processes.js';
import { formatTable, writeResults, type BenchReport, type RowResult, type TargetKind, type TargetCheck, type StreamCpu } from './report.js';
import { summarize, formatSummary } from './profile.js';
import { writeFlameGraph } from './flame.js';
import { highWater, HIGH_WATER_FULL, HIGH_WATER_QUICK, type HighWaterOptions } from './highwater.js';

export interface BenchOptions {
  quick: boolean;
  rounds: number;
  /** Seconds per throughput measurement (32 connections). */
  throughputS: number;
  /** Seconds per concurrency-1 measurement. */
  serialS: number;
  /** Seconds per measurement of the paired ratios (each round). */
  pairS: number;
  /**
   * An unmeasured run of this long right before each paired run of a ratio's
   * numerator, and of its denominator at the start of its chain (the
   * observability pairs: one of their own length).
   */
  pairWarmS: number;
  warmupS: number;
  /** The least warm-up each target process gets, in seconds of load over its rows (warmupS per turn). */
  processWarmupS: number;
  /**
   * Then each target process is warmed until its CPU per request is steady:
   * `sliceS` runs of its first row until the last `window` are within
   * `tolerance` of each other (max / min - 1) and it has served `minRequests`
   * since it started, or `maxS` seconds more.
   */
  steady: { sliceS: number; window: number; tolerance: number; minRequests: number; maxS: number } | null;
  connections: number;
  /** Text deltas per answer (the response size). */
  tokens: number;
  streams: { count: number; events: number; paceMs: number; rampMs: number } | null;
  portkey: boolean;
  plain: boolean;
  workers2: boolean;
  /** The heavy request's conversation (bench/heavy.ts): messages and words per text. */
  heavy: HeavyOptions;
  /** Rows for the other upstream transport (server.transport) than the main gateway's. */
  altTransport: boolean;
  /**
   * Rows for three gateways started and warmed alike, serving only the
   * passthrough: the usage store, metrics and traces all off, as shipped
   * (usage store and metrics on), and all on (traces to the mock's OTLP
   * endpoint): what observability costs.
   */
  observability: boolean;
  /**
   * The observability ratios' paired runs: each round measures the off
   * gateway before and after each of the other two, `reps` times, each run
   * `seconds` long; and the three are warmed up together, interleaved, for
   * `warmupS` seconds each first.
   */
  obsPairs: { reps: number; seconds: number; warmupS: number };
  /**
   * A row for a gateway whose key has rpm, tpm and budget limits counted in
   * Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379), beside the main
   * gateway (no limits): what limits cost on the request path. Not run, with
   * a note, when no Redis answers.
   */
  limits: boolean;
  /** Also run the streams test on a gateway started with these node flags (tuned memory). */
  streamsTunedFlags: string[] | null;
  /** High-water memory: a burst of connections on a fresh gateway, then its RSS for a while (bench/highwater.ts); null: not run. */
  highWater: HighWaterOptions | null;
  /**
   * Agent conversations of these sizes in bytes (bench/agent.ts): passthrough,
   * chat → Anthropic and Messages → OpenAI, each beside the plain proxy with
   * the same body, on a gateway of their own; empty: none.
   */
  bodySizes: number[];
  /** Seconds to wait after the load before the agent rows' gateway's RSS is read again (memory back to its baseline). */
  bodiesSettleS: number;
  /** Only these row ids (plus their baselines); absent: all. */
  only?: string[];
  startupSamples: number;
  /** server.transport for the gateway (written only when set). */
  transport?: string;
  profile: boolean;
  /** 'file' (default: a file in the run's temp dir) or 'null' (/dev/null). */
  log: 'file' | 'null';
  outDir: string | null;
  print: boolean;
}

/**
 * The gateway's profile in a --cpu-prof directory: the newest. When
 * `server.node_flags` names flags, `start` re-executes itself once to apply
 * them (src/node-flags.ts), and the process it replaced writes a profile of
 * its own start-up first; so do the gateways started only to time start-up.
 */
export function servingProfile(dir: string): string | undefined {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => ({ f, t: statSync(path.join(dir, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t)[0]?.f;
}

/** The observability rows: three gateways alike but for the usage store, metrics and traces. */
const OBS_ROWS = ['gwoff-openai', 'gwship-openai', 'gwall-openai'];

/** The ratios the targets are judged on (and some shown as information): [name, numerator row, denominator row]. */
/** Node flags of every process a row times (runBenchmark says why). */
export const TIMED_NODE_ARGS: readonly string[] = ['--no-memory-reducer'];

export const RATIOS: [string, string, string][] = [
  ['passthrough gateway/plain', 'gw-openai', 'plain-chat'],
  ['passthrough gateway/portkey', 'gw-openai', 'portkey-chat'],
  ['passthrough plain/portkey', 'plain-chat', 'portkey-chat'],
  ['anthropic translated gateway/plain', 'gw-anthropic', 'plain-chat'],
  ['gemini translated gateway/plain', 'gw-gemini', 'plain-chat'],
  ['responses translated gateway/plain', 'gw-responses', 'plain-chat'],
  ['messages translated gateway/plain', 'gw-messages', 'plain-chat'],
  ['messages 400 KB Claude Code gateway/plain', 'gw-messages-cc', 'plain-cc'],
  ['passthrough stream gateway/plain', 'gw-openai-stream', 'plain-chat-stream'],
  ['heavy translated 2 workers / 1 worker', 'gw2-heavy', 'gw-heavy'],
  ['passthrough 2 workers / 1 worker', 'gw2-openai', 'gw-openai'],
  ['observability as shipped / off', 'gwship-openai', 'gwoff-openai'],
  ['observability with traces / off', 'gwall-openai', 'gwoff-openai'],
  // Against the gateway alike but for the limits (gwship-openai: as shipped, a process of its
  // own started beside it, idle while the other rows run, as the limits gateway is); the main
  // gateway serves every row, and a ratio against it measured that too.
  ['limits with Redis / none', 'gwlim-openai', 'gwship-openai'],
  ['limits with Redis / main gateway', 'gwlim-openai', 'gw-openai'],
];

/**
 * CPU per request of the gateway against the plain proxy carrying the same
 * body, paired like RATIOS (lower is better): [name, numerator row,
 * denominator row, most allowed]. One triple per agent conversation size.
 */
export function cpuRatios(sizes: readonly number[]): [string, string, string, number][] {
  return sizes.flatMap((b) => {
    const k = agentKb(b);
    return [
      [`agent ${k} passthrough CPU/req gateway/plain`, `gw-agent-${k}`, `plain-agent-${k}`, 1.1],
      [`agent ${k} chat → Anthropic CPU/req gateway/plain`, `gw-agent-${k}-anthropic`, `plain-agent-${k}`, 1.3],
      [`agent ${k} Messages → OpenAI CPU/req gateway/plain`, `gw-agent-msg-${k}`, `plain-agent-msg-${k}`, 1.3],
    ] as [string, string, string, number][];
  });
}

/** Connections of the agent rows: enough to keep one gateway process busy, few enough to answer many requests in a paired run. */
const AGENT_CONNECTIONS = 4;

/** `30k` for 30,000 bytes: the agent rows' ids. */
export const agentKb = (bytes: number) => `${Math.round(bytes / 1000)}k`;

/** Ratios that no target is judged on, with the reason printed next to them. */
export const RATIO_NOTES: Record<string, string> = {
  'passthrough plain/portkey':
    'information only: the reference limit against Portkey; where it is under 6, the 6x target asks the gateway to outrun the plain proxy',
  'passthrough 2 workers / 1 worker':
    'information only: a small request costs the load generator and the mock, which share the cores, more than half what it costs the gateway; the workers target uses the heavy ratio',
  'limits with Redis / main gateway':
    "information only (judged where the gateway alike but for the limits did not run): the main gateway serves every row, where the limits gateway idles while the other rows run",
};

export const FULL: BenchOptions = {
  quick: false,
  rounds: 3,
  throughputS: 3,
  serialS: 1.5,
  pairS: 1,
  pairWarmS: 1,
  warmupS: 1,
  processWarmupS: 6,
  steady: { sliceS: 1, window: 3, tolerance: 0.08, minRequests: 15_000, maxS: 30 },
  connections: 32,
  tokens: 16,
  streams: { count: 2000, events: 200, paceMs: 100, rampMs: 4000 },
  portkey: true,
  plain: true,
  workers2: true,
  heavy: HEAVY_DEFAULT,
  altTransport: true,
  observability: true,
  obsPairs: { reps: 4, seconds: 0.5, warmupS: 3 },
  limits: true,
  streamsTunedFlags: ['--max-semi-space-size=16'],
  highWater: HIGH_WATER_FULL,
  bodySizes: [...AGENT_SIZES],
  bodiesSettleS: 60,
  startupSamples: 3,
  profile: false,
  log: 'file',
  outDir: path.join(PROJECT_ROOT, 'bench', 'results'),
  print: true,
};

export const QUICK: BenchOptions = {
  ...FULL,
  quick: true,
  rounds: 1,
  throughputS: 1.2,
  serialS: 0.5,
  pairS: 0.5,
  pairWarmS: 0.3,
  warmupS: 0.3,
  processWarmupS: 1.2,
  steady: { sliceS: 0.5, window: 3, tolerance: 0.1, minRequests: 0, maxS: 3 },
  obsPairs: { reps: 3, seconds: 0.4, warmupS: 1.5 },
  startupSamples: 1,
  streams: { count: 2000, events: 40, paceMs: 100, rampMs: 2000 },
  streamsTunedFlags: null,
  highWater: HIGH_WATER_QUICK,
};

// ---------------------------------------------------------------------------
// Rows

export interface RowDef {
  id: string;
  label: string;
  target: TargetKind;
  path: string;
  stream: boolean;
  format: StreamFormat;
  spec?: RequestSpec;
  /** Reason the row cannot run in this build. */
  na?: string;
  /** Measured at 32 connections (all but the direct baselines of translated protocols). */
  c32: boolean;
  /**
   * Connections of that measurement instead of `--connections`, and its paired
   * runs' length instead of the pair length: the agent rows (a 400 KB request
   * takes milliseconds of CPU; 32 in flight would make a paired run of a second
   * end with most of its requests unanswered).
   */
  connections?: number;
  pairS?: number;
  c1: boolean;
  /** Row id of the direct baseline for added latency. */
  baseline?: string;
  /** Process group whose RSS is the row's. */
  group?: string;
  /** Checked by the probe: the body the mock received for this row's request, in this upstream protocol. */
  upstreamCheck?: { protocol: Protocol; check: (body: unknown) => string | null };
}

const PROMPT = 'Say hello in five words.';

/** Events per stream of the burst each process in the middle carries before the timed streams (Method, "Streams"). */
const STREAMS_WARM_EVENTS = 10;
/** Between that burst and the timed streams: its streams' last events and closes are through. */
const STREAMS_WARM_PAUSE_MS = 1000;
/** The most the fresh streams gateway's request path is warmed after its burst, in ms. */
const STREAMS_STEADY_MAX_MS = 30_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function chatBody(model: string, tokens: number, stream: boolean): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: PROMPT }], max_completion_tokens: tokens, ...(stream ? { stream: true } : {}) });
}

export function buildRows(
  o: BenchOptions,
  avail: Availability,
  origins: { mock: string; plain?: string; portkey?: string; gw?: string; gw2?: string; gwAlt?: string; gwOff?: string; gwShip?: string; gwAll?: string; gwLim?: string; gwLimNa?: string; gwBodies?: string },
  transports: { main: string; alt: string },
): RowDef[] {
  const n = o.tokens;
  const rows: RowDef[] = [];
  const auth = { authorization: `Bearer ${BENCH_CLIENT_KEY}` };
  const mock = origins.mock;
  // Direct to the mock, in each upstream protocol.
  for (const stream of [false, true]) {
    const s = stream ? '-stream' : '';
    const st = stream ? ', stream' : '';
    rows.push({
      id: `direct-chat${s}`,
      label: `direct · OpenAI chat${st}`,
      target: 'direct',
      path: 'passthrough',
      stream,
      format: 'openai-chat',
      c32: true,
      c1: true,
      spec: { origin: mock, path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-bench-openai-0123456789' }, body: chatBody('gpt-bench', n, stream), stream },
    });
  }
  for (const stream of [false, true]) {
    const s = stream ? '-stream' : '';
    const st = stream ? ', stream' : '';
    rows.push({
      id: `direct-anthropic${s}`,
      label: `direct · Anthropic Messages${st}`,
      target: 'direct',
      path: 'anthropic',
      stream,
      format: 'anthropic',
      c32: false,
      c1: true,
      spec: {
        origin: mock,
        path: '/v1/messages',
        headers: { 'x-api-key': 'sk-ant-bench-0123456789', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'claude-bench', max_tokens: n, messages: [{ role: 'user', content: PROMPT }], ...(stream ? { stream: true } : {}) }),
        stream,
      },
    });
    rows.push({
      id: `direct-gemini${s}`,
      label: `direct · Gemini${st}`,
      target: 'direct',
      path: 'gemini',
      stream,
      format: 'gemini',
      c32: false,
      c1: true,
      spec: {
        origin: mock,
        path: stream ? '/v1beta/models/gemini-bench:streamGenerateContent?alt=sse' : '/v1beta/models/gemini-bench:generateContent',
        headers: { 'x-goog-api-key': 'AIzaBench0123456789' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }], generationConfig: { maxOutputTokens: n } }),
        stream,
      },
    });
  }
  if (o.plain) {
    for (const stream of [false, true]) {
      const s = stream ? '-stream' : '';
      rows.push({
        id: `plain-chat${s}`,
        label: `plain Node proxy · chat${stream ? ', stream' : ''}`,
        target: 'plain',
        path: 'passthrough',
        stream,
        format: 'openai-chat',
        c32: true,
        c1: true,
        baseline: `direct-chat${s}`,
        group: 'plain',
        na: origins.plain ? undefined : 'plain proxy did not start',
        spec: origins.plain ? { origin: origins.plain, path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-bench-openai-0123456789' }, body: chatBody('gpt-bench', n, stream), stream } : undefined,
      });
    }
  }
  if (o.portkey) {
    rows.push({
      id: 'portkey-chat',
      label: 'Portkey gateway · passthrough',
      target: 'portkey',
      path: 'passthrough',
      stream: false,
      format: 'openai-chat',
      c32: true,
      c1: true,
      baseline: 'direct-chat',
      group: 'portkey',
      na: origins.portkey ? undefined : 'Portkey did not start',
      spec: origins.portkey
        ? {
            origin: origins.portkey,
            path: '/v1/chat/completions',
            headers: { authorization: 'Bearer sk-bench-openai-0123456789', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${mock}/v1` },
            body: chatBody('gpt-bench', n, false),
            stream: false,
          }
        : undefined,
    });
  }
  const gw = origins.gw!;
  const translated = avail.anthropic ? 'anthropic' : avail.gemini ? 'gemini' : undefined;
  const gwRows: { key: string; label: string; model: string; available: boolean; na?: string; responses?: boolean; baseline: string }[] = [
    { key: 'openai', label: 'gateway · OpenAI passthrough', model: 'bench/openai', available: true, baseline: 'direct-chat' },
    { key: 'anthropic', label: 'gateway · Anthropic translated', model: 'bench/anthropic', available: !!avail.anthropic, baseline: 'direct-anthropic' },
    { key: 'gemini', label: 'gateway · Gemini translated', model: 'bench/gemini', available: !!avail.gemini, baseline: 'direct-gemini' },
    {
      key: 'responses',
      label: `gateway · Responses API → ${translated ?? 'translated'}`,
      model: `bench/${translated}`,
      available: avail.responses && !!translated,
      na: !avail.responses ? 'Responses endpoint not registered' : 'no translated family registered',
      responses: true,
      baseline: `direct-${translated ?? 'anthropic'}`,
    },
  ];
  for (const stream of [false, true]) {
    const s = stream ? '-stream' : '';
    for (const g of gwRows) {
      rows.push({
        id: `gw-${g.key}${s}`,
        label: `${g.label}${stream ? ', stream' : ''}`,
        target: 'gateway',
        path: g.key === 'openai' ? 'passthrough' : g.key,
        stream,
        format: g.responses ? 'openai-responses' : 'openai-chat',
        c32: true,
        c1: true,
        baseline: `${g.baseline}${s}`,
        group: 'gateway',
        na: g.available ? undefined : (g.na ?? `the ${g.key} family is not registered`),
        spec: g.available
          ? {
              origin: gw,
              path: g.responses ? '/v1/responses' : '/v1/chat/completions',
              headers: auth,
              body: g.responses
                ? JSON.stringify({ model: g.model, input: PROMPT, max_output_tokens: n, store: false, ...(stream ? { stream: true } : {}) })
                : chatBody(g.model, n, stream),
              stream,
            }
          : undefined,
      });
    }
  }
  // The heavy request (bench/heavy.ts): a long conversation translated to
  // Anthropic, where the gateway's CPU per request is far above the client's
  // and the mock's. The probe checks what the mock received.
  const heavyBody = avail.anthropic ? heavyChatBody('bench/anthropic', n, o.heavy) : '';
  const heavyKb = Math.round(Buffer.byteLength(heavyBody) / 1024);
  const heavyCheck = { protocol: 'anthropic' as const, check: (body: unknown) => checkAnthropicHeavy(body, 'claude-bench', n, o.heavy) };
  const heavyRow = (id: string, label: string, target: TargetKind, group: string, origin: string | undefined, na: string | undefined, c1: boolean): RowDef => ({
    id,
    label,
    target,
    path: 'anthropic-heavy',
    stream: false,
    format: 'openai-chat',
    c32: true,
    c1,
    group,
    na: na ?? (avail.anthropic ? undefined : 'the anthropic family is not registered'),
    spec: origin && avail.anthropic ? { origin, path: '/v1/chat/completions', headers: auth, body: heavyBody, stream: false } : undefined,
    upstreamCheck: heavyCheck,
  });
  rows.push(heavyRow('gw-heavy', `gateway · Anthropic translated, ${heavyKb} KB conversation`, 'gateway', 'gateway', gw, undefined, true));
  // The Messages API (Anthropic's, for Claude Code) translated to OpenAI, and a
  // Claude Code-style request of about 400 KB beside the plain proxy carrying
  // the same conversation as the chat request the gateway sends (bench/messages.ts).
  const messagesAuth = { 'x-api-key': BENCH_CLIENT_KEY, 'anthropic-version': '2023-06-01' };
  for (const stream of [false, true]) {
    const s = stream ? '-stream' : '';
    rows.push({
      id: `gw-messages${s}`,
      label: `gateway · Messages API → OpenAI translated${stream ? ', stream' : ''}`,
      target: 'gateway',
      path: 'messages',
      stream,
      format: 'anthropic',
      c32: true,
      c1: true,
      baseline: `direct-chat${s}`,
      group: 'gateway',
      na: avail.messages ? undefined : 'Messages endpoint not registered',
      spec: avail.messages
        ? { origin: gw, path: '/v1/messages', headers: messagesAuth, body: JSON.stringify({ model: 'bench/openai', max_tokens: n, messages: [{ role: 'user', content: PROMPT }], ...(stream ? { stream: true } : {}) }), stream }
        : undefined,
    });
  }
  const ccBody = avail.messages ? JSON.stringify(claudeCodeBody('bench/openai', n)) : '';
  const ccKb = Math.round(Buffer.byteLength(ccBody) / 1024);
  const plainCcBody = claudeCodeChatBody('gpt-bench', n);
  if (o.plain) {
    rows.push({
      id: 'plain-cc',
      label: `plain Node proxy · the same conversation as chat, ${Math.round(Buffer.byteLength(plainCcBody) / 1024)} KB`,
      target: 'plain',
      path: 'passthrough-heavy',
      stream: false,
      format: 'openai-chat',
      c32: true,
      c1: true,
      group: 'plain',
      na: origins.plain ? undefined : 'plain proxy did not start',
      spec: origins.plain ? { origin: origins.plain, path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-bench-openai-0123456789' }, body: plainCcBody, stream: false } : undefined,
    });
  }
  rows.push({
    id: 'gw-messages-cc',
    label: `gateway · Messages API → OpenAI, ${ccKb} KB Claude Code request`,
    target: 'gateway',
    path: 'messages-heavy',
    stream: false,
    format: 'anthropic',
    c32: true,
    c1: true,
    group: 'gateway',
    na: avail.messages ? undefined : 'Messages endpoint not registered',
    spec: avail.messages ? { origin: gw, path: '/v1/messages', headers: messagesAuth, body: ccBody, stream: false } : undefined,
    upstreamCheck: { protocol: 'openai-chat', check: (body) => checkClaudeCodeUpstream(body, 'gpt-bench', n) },
  });
  // Agent conversations (bench/agent.ts) of each size: the plain proxy with
  // the chat body and with the Messages body, and the gateway passing the chat
  // body through to OpenAI, translating it to Anthropic, and translating the
  // Messages body to OpenAI. On a gateway of their own (group gatewayBodies),
  // so that its memory after the load is theirs. Measured at 32 connections.
  for (const bytes of o.bodySizes) {
    const k = agentKb(bytes);
    const plainChat = agentChatBody('gpt-bench', n, bytes);
    const plainMsgs = agentMessagesBody('claude-bench', n, bytes);
    const kb = (body: string) => `${Math.round(Buffer.byteLength(body) / 1024)} KB (${AGENT_CONNECTIONS} conn.)`;
    const gwb = origins.gwBodies;
    const gwNa = gwb ? undefined : 'the agent rows\' gateway did not start';
    const row = (id: string, label: string, target: TargetKind, path: string, format: StreamFormat, group: string, spec: RequestSpec | undefined, na: string | undefined, upstreamCheck?: RowDef['upstreamCheck']): RowDef => ({
      id,
      label,
      target,
      path,
      stream: false,
      format,
      c32: true,
      c1: false,
      connections: AGENT_CONNECTIONS,
      pairS: Math.max(o.pairS, o.throughputS),
      group,
      na,
      spec: na ? undefined : spec,
      upstreamCheck,
    });
    const plainSpec = (body: string, headers: Record<string, string>, p: string) => (origins.plain ? { origin: origins.plain, path: p, headers, body, stream: false } : undefined);
    if (o.plain) {
      rows.push(
        row(`plain-agent-${k}`, `plain Node proxy · agent chat, ${kb(plainChat)}`, 'plain', 'passthrough-agent', 'openai-chat', 'plain',
          plainSpec(plainChat, { authorization: 'Bearer sk-bench-openai-0123456789' }, '/v1/chat/completions'), origins.plain ? undefined : 'plain proxy did not start',
          { protocol: 'openai-chat', check: (b) => checkAgentPassthrough(b, plainChat, 'gpt-bench') }),
        row(`plain-agent-msg-${k}`, `plain Node proxy · agent Messages, ${kb(plainMsgs)}`, 'plain', 'passthrough-agent', 'anthropic', 'plain',
          plainSpec(plainMsgs, { 'x-api-key': 'sk-ant-bench-0123456789', 'anthropic-version': '2023-06-01' }, '/v1/messages'), origins.plain ? undefined : 'plain proxy did not start',
          { protocol: 'anthropic', check: (b) => checkAgentPassthrough(b, plainMsgs, 'claude-bench') }),
      );
    }
    const pass = agentChatBody('bench/openai', n, bytes);
    rows.push(
      row(`gw-agent-${k}`, `gateway · agent chat → OpenAI passthrough, ${kb(pass)}`, 'gateway', 'passthrough-agent', 'openai-chat', 'gatewayBodies',
        gwb ? { origin: gwb, path: '/v1/chat/completions', headers: auth, body: pass, stream: false } : undefined, gwNa,
        { protocol: 'openai-chat', check: (b) => checkAgentPassthrough(b, pass, 'gpt-bench') }),
    );
    const toAnthropic = agentChatBody('bench/anthropic', n, bytes);
    rows.push(
      row(`gw-agent-${k}-anthropic`, `gateway · agent chat → Anthropic, ${kb(toAnthropic)}`, 'gateway', 'anthropic-agent', 'openai-chat', 'gatewayBodies',
        gwb ? { origin: gwb, path: '/v1/chat/completions', headers: auth, body: toAnthropic, stream: false } : undefined, gwNa ?? (avail.anthropic ? undefined : 'the anthropic family is not registered'),
        { protocol: 'anthropic', check: (b) => checkAgentAnthropic(b, 'claude-bench', n, bytes) }),
    );
    const msgs = agentMessagesBody('bench/openai', n, bytes);
    rows.push(
      row(`gw-agent-msg-${k}`, `gateway · agent Messages → OpenAI, ${kb(msgs)}`, 'gateway', 'messages-agent', 'anthropic', 'gatewayBodies',
        gwb ? { origin: gwb, path: '/v1/messages', headers: messagesAuth, body: msgs, stream: false } : undefined, gwNa ?? (avail.messages ? undefined : 'Messages endpoint not registered'),
        { protocol: 'openai-chat', check: (b) => checkMessagesUpstream(b, msgs, 'gpt-bench') }),
    );
  }
  if (o.altTransport) {
    const tr = transports.alt;
    const na = origins.gwAlt ? undefined : `the gateway with transport ${tr} did not start`;
    rows.push({
      id: 'gwalt-openai',
      label: `gateway, transport ${tr} · OpenAI passthrough`,
      target: 'gateway',
      path: 'passthrough',
      stream: false,
      format: 'openai-chat',
      c32: true,
      c1: true,
      baseline: 'direct-chat',
      group: 'gatewayAlt',
      na,
      spec: origins.gwAlt ? { origin: origins.gwAlt, path: '/v1/chat/completions', headers: auth, body: chatBody('bench/openai', n, false), stream: false } : undefined,
    });
    const fam = avail.anthropic ? 'anthropic' : avail.gemini ? 'gemini' : undefined;
    rows.push({
      id: 'gwalt-translated-stream',
      label: `gateway, transport ${tr} · ${fam === 'gemini' ? 'Gemini' : 'Anthropic'} translated, stream`,
      target: 'gateway',
      path: fam ?? 'anthropic',
      stream: true,
      format: 'openai-chat',
      c32: true,
      c1: true,
      baseline: `direct-${fam ?? 'anthropic'}-stream`,
      group: 'gatewayAlt',
      na: na ?? (fam ? undefined : 'no translated family registered'),
      spec: origins.gwAlt && fam ? { origin: origins.gwAlt, path: '/v1/chat/completions', headers: auth, body: chatBody(`bench/${fam}`, n, true), stream: true } : undefined,
    });
  }
  if (o.observability) {
    const variants = [
      ['gwoff-openai', 'gatewayOff', origins.gwOff, 'usage store, metrics and traces off'],
      ['gwship-openai', 'gatewayShip', origins.gwShip, 'usage store and metrics on (as shipped)'],
      ['gwall-openai', 'gatewayAll', origins.gwAll, 'usage store, metrics and traces on'],
    ] as const;
    for (const [id, group, origin, what] of variants)
      rows.push({
        id,
        label: `gateway, ${what} · OpenAI passthrough`,
        target: 'gateway',
        path: 'passthrough',
        stream: false,
        format: 'openai-chat',
        c32: true,
        c1: true,
        baseline: 'direct-chat',
        group,
        na: origin ? undefined : `the gateway with ${what} did not start`,
        spec: origin ? { origin, path: '/v1/chat/completions', headers: auth, body: chatBody('bench/openai', n, false), stream: false } : undefined,
      });
  }
  if (o.workers2) {
    rows.push({
      id: 'gw2-openai',
      label: 'gateway ×2 workers · OpenAI passthrough',
      target: 'gateway-2w',
      path: 'passthrough',
      stream: false,
      format: 'openai-chat',
      c32: true,
      c1: false,
      baseline: 'direct-chat',
      group: 'gateway2',
      na: origins.gw2 ? undefined : 'the 2-worker gateway did not start',
      spec: origins.gw2 ? { origin: origins.gw2, path: '/v1/chat/completions', headers: auth, body: chatBody('bench/openai', n, false), stream: false } : undefined,
    });
    rows.push(
      heavyRow('gw2-heavy', `gateway ×2 workers · Anthropic translated, ${heavyKb} KB conversation`, 'gateway-2w', 'gateway2', origins.gw2, origins.gw2 ? undefined : 'the 2-worker gateway did not start', false),
    );
  }
  if (o.limits)
    rows.push({
      id: 'gwlim-openai',
      label: 'gateway, key with rpm/tpm/budget limits in Redis · OpenAI passthrough',
      target: 'gateway',
      path: 'passthrough',
      stream: false,
      format: 'openai-chat',
      c32: true,
      c1: true,
      baseline: 'direct-chat',
      group: 'gatewayLim',
      na: origins.gwLim ? undefined : (origins.gwLimNa ?? 'the gateway with limits did not start'),
      spec: origins.gwLim ? { origin: origins.gwLim, path: '/v1/chat/completions', headers: { authorization: `Bearer ${BENCH_LIMITED_KEY}` }, body: chatBody('bench/openai', n, false), stream: false } : undefined,
    });
  // Stream rows next to their plain rows in the table.
  const order = (r: RowDef) => rows.indexOf(rows.find((x) => x.id === r.id.replace(/-stream$/, '')) ?? r) + (r.stream ? 0.5 : 0);
  rows.sort((a, b) => order(a) - order(b));
  if (o.only) {
    const keep = new Set(o.only);
    for (const r of rows) if (keep.has(r.id) && r.baseline) keep.add(r.baseline);
    return rows.filter((r) => keep.has(r.id));
  }
  return rows;
}

// ---------------------------------------------------------------------------
// Probe: one request per row, checked for content, before anything is timed.

function textOf(format: StreamFormat, body: any): string | undefined { // eslint-disable-line @typescript-eslint/no-explicit-any
  switch (format) {
    case 'openai-chat':
      return body?.choices?.[0]?.message?.content;
    case 'openai-responses':
      return (body?.output ?? [])
        .filter((i: { type?: string }) => i.type === 'message')
        .flatMap((i: { content?: { type: string; text?: string }[] }) => i.content ?? [])
        .filter((p: { type: string }) => p.type === 'output_text')
        .map((p: { text?: string }) => p.text)
        .join('');
    case 'anthropic':
      return body?.content?.[0]?.text;
    case 'gemini':
      return body?.candidates?.[0]?.content?.parts?.map((p: { text?: string }) => p.text ?? '').join('');
  }
}

/** The mock upstream's counts (asked over IPC); undefined if it does not answer within 5 s. */
function mockCounts(mock: Proc): Promise<MockUpstream['counts'] | undefined> {
  return new Promise((resolve) => {
    const onMessage = (m: { counts?: MockUpstream['counts'] }) => {
      if (m?.counts) done(m.counts);
    };
    const timer = setTimeout(() => done(undefined), 5000);
    const done = (v: MockUpstream['counts'] | undefined) => {
      clearTimeout(timer);
      mock.child.off('message', onMessage);
      resolve(v);
    };
    mock.child.on('message', onMessage);
    mock.child.send({ op: 'counts' });
  });
}

/** The last request body of a protocol that the mock upstream accepted (asked over IPC). */
function lastUpstreamBody(mock: Proc, protocol: Protocol): Promise<string | undefined> {
  return new Promise((resolve) => {
    const onMessage = (m: { last?: { protocol: string; body: string | null } }) => {
      if (m?.last?.protocol !== protocol) return;
      done(m.last.body ?? undefined);
    };
    const timer = setTimeout(() => done(undefined), 5000);
    const done = (v: string | undefined) => {
      clearTimeout(timer);
      mock.child.off('message', onMessage);
      resolve(v);
    };
    mock.child.on('message', onMessage);
    mock.child.send({ op: 'last', protocol });
  });
}

async function probe(row: RowDef, tokens: number, upstream?: (protocol: Protocol) => Promise<string | undefined>): Promise<string | null> {
  const spec = row.spec!;
  const texts = Array.from({ length: tokens }, (_, i) => tokenText(i));
  if (spec.stream) {
    const r = await manyStreams(spec, row.format, 1, texts);
    return r.completed === 1 ? null : (r.first_error ?? 'stream check failed');
  }
  try {
    const res = await fetch(spec.origin + spec.path, { method: 'POST', headers: { ...spec.headers, 'content-type': 'application/json' }, body: spec.body });
    const text = await res.text();
    if (res.status !== 200) return `HTTP ${res.status}: ${text.slice(0, 300)}`;
    const got = textOf(row.format, JSON.parse(text));
    if (got !== expectedText(tokens)) return `unexpected answer text: ${JSON.stringify(got)?.slice(0, 100)}`;
    if (row.upstreamCheck && upstream) {
      const sent = await upstream(row.upstreamCheck.protocol);
      if (sent === undefined) return `the mock received no ${row.upstreamCheck.protocol} request`;
      return row.upstreamCheck.check(JSON.parse(sent));
    }
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

// ---------------------------------------------------------------------------

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN;
};

const t0 = performance.now();
function log(o: BenchOptions, msg: string) {
  if (o.print) process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${msg}\n`);
}

/**
 * Run one set of streams and hand `onCpu` what each process used meanwhile
 * (StreamCpu): the target (`target` gives its pids; none for direct), the mock,
 * this process (the load generator) and the machine.
 */
async function streamCpu(run: () => Promise<StreamCheck>, mockPid: number, target: (() => number[]) | undefined, onCpu?: (c: StreamCpu) => void): Promise<StreamCheck> {
  const at0 = performance.now();
  const t0 = target ? cpuSeconds(target()) : 0;
  const m0 = cpuSeconds([mockPid]);
  const l0 = process.cpuUsage();
  const b0 = machineBusySeconds();
  const check = await run();
  const l = process.cpuUsage(l0);
  const wallS = (performance.now() - at0) / 1000;
  const cores = (s: number) => s / wallS;
  const targetS = target ? cpuSeconds(target()) - t0 : 0;
  onCpu?.({
    wall_s: wallS,
    ...(target ? { target_cores: cores(targetS), target_us_per_event: check.events ? (targetS / check.events) * 1e6 : NaN } : {}),
    mock_cores: cores(cpuSeconds([mockPid]) - m0),
    load_cores: cores((l.user + l.system) / 1e6),
    machine_cores: cores(machineBusySeconds() - b0),
  });
  return check;
}

export async function runBenchmark(opts: Partial<BenchOptions> = {}): Promise<BenchReport> {
  const o: BenchOptions = { ...(opts.quick ? QUICK : FULL), ...opts };
  const started = Date.now();
  const node = pinnedNode();
  if (!node.matches)
    process.stderr.write(
      `\nWARNING: this benchmark runs on Node ${process.version}, not the Node the project pins (${node.pinned}); the gateways run on it too, so the figures are not the project's. Run it as \`npm run bench\`.\n\n`,
    );
  const avail = availability();
  const procs: Proc[] = [];
  const dirs: string[] = [];
  const profDir = o.profile ? mkdtempSync(path.join(os.tmpdir(), 'gw-bench-prof-')) : undefined;
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  /** The Redis keys of this run's limits gateway, deleted at the end. */
  let redisPrefix: string | undefined;
  let sampler: RssSampler | undefined;
  try {
    log(o, `mock upstream, plain proxy${o.portkey ? ', Portkey' : ''} and gateway starting…`);
    const mock = await forkReady('mock-upstream.js', [], TIMED_NODE_ARGS);
    procs.push(mock);
    const mockOrigin = `http://127.0.0.1:${mock.port}`;

    // Start-up time to a ready /healthz and idle RSS (fresh processes; the last one is kept).
    const startupSamples: number[] = [];
    let gw!: GatewayProc;
    let idleRss = NaN;
    const gwOpts = { mockOrigin, avail, transport: o.transport, logFile: o.log === 'null' ? 'null' : undefined, cpuProfDir: profDir, paceMs: o.streams?.paceMs };
    // Every process a row times (the gateways, the plain proxy, Portkey, the
    // mock) serves only its own rows and sits idle, for minutes at a time,
    // while the others run. Traffic does not do that; the benchmark does. Two
    // things would then measure the pause rather than the serving:
    // - V8's memory reducer: 8 s or more after a full collection in a process
    //   that has gone quiet it runs a memory-reducing one ("Mark-Compact
    //   (reduce)" in --trace-gc), which drops the optimised code. A 30 KB agent
    //   row's gateway measured 478 µs a request in the first second after 130 s
    //   idle with the reducer off, 1,338 with it on (15 s to recover), and the
    //   rows get a 1 s warm-up before each pair: the round after such a pause
    //   measured 797 µs against 460 in the round before. All of them run with
    //   --no-memory-reducer (TIMED_NODE_ARGS).
    // - The gateway's idle collection (src/idle-gc.ts): the same after 10 s
    //   idle, as shipped. These gateways run without it
    //   (server.idle_release_ms: 0).
    // What both cost and give back is measured on fresh gateways as shipped:
    // the high-water check (its re-warm windows), the streams (each on a fresh
    // gateway) and the agent rows' memory, whose gateway gets the idle
    // collection back by a reload before its settle time.
    const steady = { ...gwOpts, idleReleaseMs: 0, nodeArgs: TIMED_NODE_ARGS };
    const pairedOpts = { ...steady, cpuProfDir: undefined };
    for (let i = 0; i < Math.max(1, o.startupSamples); i++) {
      if (gw) {
        await gw.stop();
        removeDir(gw.dir);
      }
      gw = await startGateway(steady);
      startupSamples.push(gw.startupMs);
    }
    procs.push(gw);
    dirs.push(gw.dir);
    await sleep(1000);
    idleRss = rssMb(gw.pids());

    log(o, `gateway ready in ${Math.round(median(startupSamples))} ms; starting the other targets…`);
    let plain: Proc | undefined;
    if (o.plain) plain = await forkReady('plain-proxy.js', [mockOrigin], TIMED_NODE_ARGS).catch(() => undefined);
    if (plain) procs.push(plain);
    let portkey: Proc | undefined;
    if (o.portkey) portkey = await startPortkey(TIMED_NODE_ARGS).catch((err) => (log(o, `Portkey: ${(err as Error).message}`), undefined));
    if (portkey) procs.push(portkey);
    // The schema's default (src/config/schema.ts server.transport).
    const mainTransport = o.transport ?? 'undici';
    const transports = { main: mainTransport, alt: mainTransport === 'http' ? 'undici' : 'http' };
    let gwAlt: GatewayProc | undefined;
    if (o.altTransport)
      gwAlt = await startGateway({ ...pairedOpts, transport: transports.alt }).catch((err) => (log(o, `transport ${transports.alt}: ${(err as Error).message}`), undefined));
    if (gwAlt) {
      procs.push(gwAlt);
      dirs.push(gwAlt.dir);
    }
    // What observability costs: three gateways started one after the other,
    // alike but for it (all off, as shipped, all on), each serving only the
    // passthrough row, so that they share a process history. (The main
    // gateway serves every row: its compiled code and heap are another
    // process's, and a ratio against it measured that too.)
    const wants = (id: string) => o.observability && (!o.only || o.only.includes(id));
    const obsGateway = (id: string, observability: 'off' | 'default' | 'all') =>
      wants(id) ? startGateway({ ...pairedOpts, observability }).catch((err) => (log(o, `${id}: ${(err as Error).message}`), undefined)) : undefined;
    const gwOff = await obsGateway('gwoff-openai', 'off');
    const gwShip = await obsGateway('gwship-openai', 'default');
    const gwAll = await obsGateway('gwall-openai', 'all');
    // What limits cost: a key with rpm, tpm and a budget, counted in Redis, against the main gateway (no limits).
    let gwLim: GatewayProc | undefined;
    let gwLimNa: string | undefined;
    let limRedisPid: number | undefined;
    if (o.limits && (!o.only || o.only.includes('gwlim-openai'))) {
      const down = await redisDown(redisUrl);
      if (down) {
        gwLimNa = `no Redis answers at ${redisUrl} (${down}; set BENCH_REDIS_URL): limits not measured`;
        log(o, gwLimNa);
      } else {
        redisPrefix = `mgbench:${process.pid}:${Date.now()}:`;
        gwLim = await startGateway({ ...pairedOpts, limits: { redisUrl, keyPrefix: redisPrefix } }).catch((err) => (log(o, `limits: ${(err as Error).message}`), undefined));
        // A local Redis shares the cores: its CPU is part of what the limits row costs, not background.
        if (gwLim) limRedisPid = await redisPid(redisUrl);
      }
    }
    for (const g of [gwOff, gwShip, gwAll, gwLim]) {
      if (!g) continue;
      procs.push(g);
      dirs.push(g.dir);
    }
    // The agent rows' own gateway (its RSS before and after their load is the memory check).
    const bodyIds = o.bodySizes.flatMap((b) => cpuRatios([b]).map((r) => r[1]));
    let gwBodies: GatewayProc | undefined;
    const bodiesOpts = { ...steady, cpuProfDir: undefined };
    if (bodyIds.length && (!o.only || o.only.some((id) => bodyIds.includes(id))))
      gwBodies = await startGateway(bodiesOpts).catch((err) => (log(o, `agent rows' gateway: ${(err as Error).message}`), undefined));
    if (gwBodies) {
      procs.push(gwBodies);
      dirs.push(gwBodies.dir);
    }
    let gw2: GatewayProc | undefined;
    if (o.workers2) gw2 = await startGateway({ ...steady, workers: 2, cpuProfDir: undefined }).catch((err) => (log(o, `2 workers: ${(err as Error).message}`), undefined));
    if (gw2) {
      procs.push(gw2);
      dirs.push(gw2.dir);
    }

    const rows = buildRows(o, avail, {
      mock: mockOrigin,
      plain: plain && `http://127.0.0.1:${plain.port}`,
      portkey: portkey && `http://127.0.0.1:${portkey.port}`,
      gw: `http://127.0.0.1:${gw.port}`,
      gw2: gw2 && `http://127.0.0.1:${gw2.port}`,
      gwAlt: gwAlt && `http://127.0.0.1:${gwAlt.port}`,
      gwOff: gwOff && `http://127.0.0.1:${gwOff.port}`,
      gwShip: gwShip && `http://127.0.0.1:${gwShip.port}`,
      gwAll: gwAll && `http://127.0.0.1:${gwAll.port}`,
      gwLim: gwLim && `http://127.0.0.1:${gwLim.port}`,
      gwLimNa,
      gwBodies: gwBodies && `http://127.0.0.1:${gwBodies.port}`,
    }, transports);
    const groups = new Map<string, () => number[]>([
      ['gateway', () => gw.pids()],
      ['mock', () => [mock.pid]],
    ]);
    if (plain) groups.set('plain', () => [plain.pid]);
    if (portkey) groups.set('portkey', () => [portkey.pid]);
    if (gw2) groups.set('gateway2', () => gw2.pids());
    if (gwAlt) groups.set('gatewayAlt', () => gwAlt.pids());
    if (gwOff) groups.set('gatewayOff', () => gwOff.pids());
    if (gwShip) groups.set('gatewayShip', () => gwShip.pids());
    if (gwAll) groups.set('gatewayAll', () => gwAll.pids());
    if (gwLim) groups.set('gatewayLim', () => gwLim.pids());
    if (gwBodies) groups.set('gatewayBodies', () => gwBodies.pids());
    const ours = () => [process.pid, ...procs.flatMap((p) => ('pids' in p ? (p as GatewayProc).pids() : [p.pid])), ...(limRedisPid ? [limRedisPid] : [])];
    const cpu0 = { machine: machineBusySeconds(), ours: cpuSeconds(ours()), at: performance.now() };
    sampler = new RssSampler(groups, 100);

    // Probe every row once; a row that answers wrongly is reported, not timed.
    const failures = new Map<string, string>();
    for (const r of rows) {
      if (r.na || !r.spec) continue;
      const why = await probe(r, o.tokens, (protocol) => lastUpstreamBody(mock, protocol));
      if (why) {
        failures.set(r.id, why);
        log(o, `row ${r.id} failed its probe: ${why}`);
      }
    }
    log(o, `${rows.length} rows, probed`);
    // The agent rows' gateway after one request of each (its code loaded and compiled): the baseline.
    const bodiesBaseline = gwBodies ? rssMb(gwBodies.pids()) : NaN;
    const live = rows.filter((r) => !r.na && r.spec && !failures.has(r.id));
    const c32Rows = live.filter((r) => r.c32);
    const c1Rows = live.filter((r) => r.c1);

    const steadyWarmup: NonNullable<BenchReport['steady_warmup']> = {};
    if (o.warmupS > 0) {
      log(o, `warm-up (${o.warmupS} s per row)…`);
      // A multi-worker target splits its warm-up between its workers: it gets one warm-up per worker.
      // Requests each process has served so far (the steady warm-up's `minRequests`).
      const served = new Map<string, number>();
      const warmUp = async (r: RowDef) => {
        const res = await throughput(r.spec!, r.connections ?? o.connections, o.warmupS * (r.target === 'gateway-2w' ? 2 : 1));
        if (r.group) served.set(r.group, (served.get(r.group) ?? 0) + res.ok);
      };
      for (const r of c32Rows) await warmUp(r);
      for (const r of c1Rows.filter((x) => !x.c32)) await serial(r.spec!, o.warmupS / 2, 50);
      // Every process gets the same warm-up, whatever its number of rows: a gateway's CPU per request
      // keeps falling for several seconds of load (its code is still being optimised: a limits
      // gateway did 281, 202, then 179 µs a request in 2 s runs after a 3 s warm-up), and the main
      // gateway, which serves a dozen rows, was warmed for ten times as long as the limits gateway
      // or the plain proxy it is paired with. Each process's rows take turns until it had `processWarmupS`.
      const warmed = new Map<string, number>();
      for (const r of c32Rows) if (r.group) warmed.set(r.group, (warmed.get(r.group) ?? 0) + o.warmupS);
      for (const [group, had] of warmed) {
        const mine = c32Rows.filter((r) => r.group === group);
        for (let t = had, i = 0; t < o.processWarmupS; t += o.warmupS, i++) await warmUp(mine[i % mine.length]!);
      }
      // Then until each process's CPU per request is steady. A fresh Node process goes on getting
      // cheaper for 10-15 s of load (V8 still optimising), and by different amounts: after the same 6 s,
      // a limits gateway at 419 µs a request against the main gateway's 187 measured V8's progress,
      // not limits (warm, the two were 149 and 135). What a long-running gateway costs is the steady value.
      // Steady over a few seconds is not enough on its own: V8 first compiles a hot function with
      // Maglev and moves it to TurboFan only after many more calls, and in between the CPU per
      // request holds still. With --trace-opt, a gateway serving 30 KB agent requests compiled
      // its request path (the HTTP parser's callbacks, the body reader, the handler) with TurboFan
      // after 9,000 to 13,000 requests, 8-9 s of load, and its CPU per request then fell from a
      // flat 700-800 µs to 450-500; the warm-up had stopped on the flat part (584, 613, 584).
      // So a process is also owed `minRequests` since it started.
      if (o.steady) {
        for (const group of warmed.keys()) {
          const row = c32Rows.find((r) => r.group === group)!;
          const pids = groups.get(group)?.() ?? [];
          const us: number[] = [];
          let spent = 0;
          const { sliceS, window, tolerance, minRequests, maxS } = o.steady;
          while (spent < maxS) {
            const c0 = cpuSeconds(pids);
            const r = await throughput(row.spec!, row.connections ?? o.connections, sliceS * (row.target === 'gateway-2w' ? 2 : 1));
            spent += sliceS;
            served.set(group, (served.get(group) ?? 0) + r.ok);
            if (r.ok > 0) us.push(Math.round(((cpuSeconds(pids) - c0) * 1e6) / r.ok));
            const last = us.slice(-window);
            if (last.length === window && Math.max(...last) / Math.min(...last) - 1 <= tolerance && (served.get(group) ?? 0) >= minRequests) break;
          }
          steadyWarmup[group] = { extra_s: spent, us_per_req: us };
          log(o, `${group}: steady after ${spent} s more (${us.join(', ')} µs a request)`);
        }
      }
    }
    // The observability gateways go on warming up, together, in turns: their
    // CPU per request kept falling for several seconds of load (code still
    // being optimised), and a ratio of a colder to a warmer process is not
    // what observability costs.
    const obsRows = c32Rows.filter((r) => OBS_ROWS.includes(r.id));
    if (obsRows.length > 1 && o.obsPairs.warmupS > 0) {
      const slice = o.obsPairs.seconds;
      for (let t = 0; t < o.obsPairs.warmupS; t += slice) for (const r of obsRows) await throughput(r.spec!, r.connections ?? o.connections, slice);
    }

    const tp = new Map<string, ThroughputResult[]>();
    const lat = new Map<string, { latency: number[]; ttfb: number[]; failed: number }>();
    const peaks = new Map<string, number>();
    const notePeak = (r: RowDef, v: number) => {
      if (r.group && Number.isFinite(v)) peaks.set(r.id, Math.max(peaks.get(r.id) ?? 0, v));
    };
    // Where the CPU goes during each 32-connection measurement: the row's
    // target (all its processes), the mock upstream, and this process (the
    // load generator), in % of one core; and the target's CPU per request.
    // For the limits row, also the local Redis's CPU per request.
    const cpu = new Map<string, { target: number[]; mock: number[]; client: number[]; us: number[]; redisUs: number[] }>();
    const cpuNow = (r: RowDef) => ({
      target: r.group ? cpuSeconds(groups.get(r.group)?.() ?? []) : NaN,
      mock: cpuSeconds([mock.pid]),
      client: cpuSeconds([process.pid]),
      redis: r.group === 'gatewayLim' && limRedisPid ? cpuSeconds([limRedisPid]) : NaN,
      at: performance.now(),
    });
    const noteCpu = (r: RowDef, a: ReturnType<typeof cpuNow>, b: ReturnType<typeof cpuNow>, ok: number) => {
      const wall = (b.at - a.at) / 1000;
      if (!(wall > 0)) return;
      const c = cpu.get(r.id) ?? { target: [], mock: [], client: [], us: [], redisUs: [] };
      if (r.group) {
        c.target.push(((b.target - a.target) / wall) * 100);
        if (ok > 0) c.us.push(((b.target - a.target) / ok) * 1e6);
        if (ok > 0 && Number.isFinite(a.redis)) c.redisUs.push(((b.redis - a.redis) / ok) * 1e6);
      }
      c.mock.push(((b.mock - a.mock) / wall) * 100);
      c.client.push(((b.client - a.client) / wall) * 100);
      cpu.set(r.id, c);
    };
    // Paired ratios: on a shared VM the speed drifts by ±25% within a minute,
    // so a ratio of two rows measured half a round apart is partly drift. Each
    // round therefore also measures every ratio's rows back to back, the
    // denominator before and after each numerator (den, a, den, b, den, …), and
    // the ratio is a / geometric mean of the two neighbours; the reported ratio
    // is the median over rounds.
    // The CPU ratios (cpuRatios) are paired the same way, from the target's CPU per request in each of those runs.
    const byRowId = new Map(c32Rows.map((r) => [r.id, r]));
    const cpuPairs = cpuRatios(o.bodySizes);
    const chains = [...RATIOS.map(([key, num, den]) => ({ key, num, den, cpu: false })), ...cpuPairs.map(([key, num, den]) => ({ key, num, den, cpu: true }))].reduce<
      { den: string; nums: { key: string; num: string; cpu: boolean }[] }[]
    >((acc, { key, num, den, cpu }) => {
      if (!byRowId.has(num) || !byRowId.has(den)) return acc;
      const c = acc.find((x) => x.den === den) ?? (acc.push({ den, nums: [] }), acc[acc.length - 1]);
      c.nums.push({ key, num, cpu });
      return acc;
    }, []);
    /** req/s and the target's µs of CPU per request, over one paired run. */
    const pairRun = async (id: string, seconds?: number) => {
      const r = byRowId.get(id)!;
      const a = cpuNow(r);
      const m0 = machineBusySeconds();
      const res = await throughput(r.spec!, r.connections ?? o.connections, seconds ?? r.pairS ?? o.pairS);
      const b = cpuNow(r);
      const wall = (b.at - a.at) / 1000;
      const ours = b.target - a.target + (b.mock - a.mock) + (b.client - a.client);
      return {
        rps: res.rps,
        us: res.ok > 0 ? ((b.target - a.target) / res.ok) * 1e6 : NaN,
        // Cores the target used, and cores every other process used (neither the target, the mock nor the load generator).
        cores: wall > 0 ? (b.target - a.target) / wall : NaN,
        others: wall > 0 ? Math.max(0, machineBusySeconds() - m0 - ours) / wall : NaN,
      };
    };
    /** Per paired ratio: the numerator's and denominator's CPU in those same runs (why a pair came out as it did). */
    const pairDiag = new Map<string, { numUs: number[]; denUs: number[]; numCores: number[]; denCores: number[]; others: number[] }>();
    const notePair = (key: string, a: Awaited<ReturnType<typeof pairRun>>, before: Awaited<ReturnType<typeof pairRun>>, after: Awaited<ReturnType<typeof pairRun>>) => {
      const d = pairDiag.get(key) ?? { numUs: [], denUs: [], numCores: [], denCores: [], others: [] };
      d.numUs.push(a.us);
      d.denUs.push(Math.sqrt(before.us * after.us));
      d.numCores.push(a.cores);
      d.denCores.push((before.cores + after.cores) / 2);
      d.others.push(a.others);
      pairDiag.set(key, d);
    };
    const paired = new Map<string, number[]>();
    const pairedCpu = new Map<string, number[]>();
    const obsCpu = new Map<string, number[]>();
    for (let round = 0; round < o.rounds; round++) {
      log(o, `round ${round + 1}/${o.rounds}: ${c32Rows.length} rows × ${o.throughputS} s at ${o.connections} connections, ${c1Rows.length} rows × ${o.serialS} s at 1, paired ratios…`);
      // Round-robin, starting one row later each round so no row always follows the same one.
      const rot = <T>(xs: T[]) => xs.map((_, i) => xs[(i + round) % xs.length]);
      for (const r of rot(c32Rows)) {
        if (r.group) sampler.take(r.group);
        const c0 = cpuNow(r);
        const res = await throughput(r.spec!, r.connections ?? o.connections, o.throughputS);
        noteCpu(r, c0, cpuNow(r), res.ok);
        if (r.group) notePeak(r, sampler.take(r.group));
        tp.set(r.id, [...(tp.get(r.id) ?? []), res]);
      }
      for (const c of chains) {
        // The observability ratios (a few per cent) get more and shorter pairs, the numerators' order alternating.
        const obs = OBS_ROWS.includes(c.den);
        const secs = obs ? o.obsPairs.seconds : undefined;
        const order = Array.from({ length: obs ? o.obsPairs.reps : 1 }, (_, k) => (k % 2 ? [...c.nums].reverse() : c.nums)).flat();
        // Each side is run, unmeasured, right before it is measured: a process that served nothing
        // while the other rows ran costs more in its first second of load (caches, connections,
        // code), and the rows the main gateway serves between pairs keep it warm where a
        // separate gateway (limits, observability) sat idle: the pair then measured that, not
        // what the numerator's feature costs. The first second after idle is reported separately.
        const warm = secs ?? o.pairWarmS;
        if (warm > 0) await pairRun(c.den, warm);
        let before = await pairRun(c.den, secs);
        for (const n of order) {
          if (warm > 0) await pairRun(n.num, warm);
          const a = await pairRun(n.num, secs);
          const after = await pairRun(c.den, secs);
          if (!n.cpu) notePair(n.key, a, before, after);
          if (n.cpu) {
            const den = Math.sqrt(before.us * after.us);
            if (den > 0) pairedCpu.set(n.key, [...(pairedCpu.get(n.key) ?? []), a.us / den]);
          } else {
            const den = Math.sqrt(before.rps * after.rps);
            if (den > 0) paired.set(n.key, [...(paired.get(n.key) ?? []), a.rps / den]);
            // The gateway's CPU per request, from the same runs: the steadier view of what observability costs.
            const cpuDen = Math.sqrt(before.us * after.us);
            if (obs && OBS_ROWS.includes(n.num) && cpuDen > 0) obsCpu.set(n.key, [...(obsCpu.get(n.key) ?? []), a.us / cpuDen]);
          }
          before = after;
        }
      }
      for (const r of rot(c1Rows)) {
        if (r.group) sampler.take(r.group);
        const res = await serial(r.spec!, o.serialS);
        if (r.group) notePeak(r, sampler.take(r.group));
        const acc = lat.get(r.id) ?? { latency: [], ttfb: [], failed: 0 };
        acc.latency.push(...res.latency_us);
        acc.ttfb.push(...res.ttfb_us);
        acc.failed += res.failed;
        lat.set(r.id, acc);
      }
    }

    // The agent rows' gateway a while after their load: its RSS against the baseline.
    let bodies: BenchReport['bodies'];
    if (gwBodies && Number.isFinite(bodiesBaseline)) {
      const peak = sampler.take('gatewayBodies');
      // The idle collection back on, as shipped (a reload: same process, same heap).
      writeFileSync(gwBodies.configFile, gatewayYaml({ ...bodiesOpts, idleReleaseMs: undefined }, gwBodies.port));
      process.kill(gwBodies.pid, 'SIGHUP');
      log(o, `agent rows: their gateway reloaded with its idle collection on; waiting ${o.bodiesSettleS} s, then reading its RSS…`);
      await sleep(o.bodiesSettleS * 1000);
      const after = rssMb(gwBodies.pids());
      bodies = { sizes: o.bodySizes, baseline_rss_mb: bodiesBaseline, peak_rss_mb: Math.max(peak, ...rows.filter((r) => r.group === 'gatewayBodies').map((r) => peaks.get(r.id) ?? 0)), after_rss_mb: after, settle_s: o.bodiesSettleS };
    }

    // Many concurrent streams through a translated path.
    let streams: BenchReport['streams'];
    if (o.streams) {
      const fam = avail.anthropic ? 'anthropic' : avail.gemini ? 'gemini' : undefined;
      if (!fam) streams = { path: 'translated', status: 'n/a', note: 'no translated family registered' };
      else {
        const { count, events, paceMs } = o.streams;
        log(o, `streams: ${count} concurrent × ${events} events through ${fam} (paced ${paceMs} ms)…`);
        const texts = Array.from({ length: events }, (_, i) => tokenText(i));
        // The streams straight to the mock, `n` text events each (one per output token asked for).
        const directFor = (n: number): RequestSpec =>
          fam === 'anthropic'
            ? {
                origin: mockOrigin,
                path: '/v1/messages',
                headers: { 'x-api-key': 'sk-ant-bench-0123456789', 'anthropic-version': '2023-06-01' },
                body: JSON.stringify({ model: `claude-bench-paced-${paceMs}`, max_tokens: n, messages: [{ role: 'user', content: PROMPT }], stream: true }),
                stream: true,
              }
            : {
                origin: mockOrigin,
                path: `/v1beta/models/gemini-bench-paced-${paceMs}:streamGenerateContent?alt=sse`,
                headers: { 'x-goog-api-key': 'AIzaBench0123456789' },
                body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }], generationConfig: { maxOutputTokens: n } }),
                stream: true,
              };
        const direct = directFor(events);
        const cpu: { direct?: StreamCpu; plain?: StreamCpu; gateway?: StreamCpu } = {};
        const d = await streamCpu(() => manyStreams(direct, fam, count, texts, o.streams!.rampMs), mock.pid, undefined, (c) => (cpu.direct = c));
        // Each process in the middle first carries a burst of the same streams, shorter
        // (STREAMS_WARM_EVENTS each), as every row is warmed before it is timed: the
        // measured run is then the process's steady state (optimised code, its upstream
        // connections open), and the burst's own time to first byte is reported beside
        // it as what a process fresh from start-up gives its first streams.
        const warmEvents = Math.min(events, STREAMS_WARM_EVENTS);
        const warmTexts = texts.slice(0, warmEvents);
        const firstBurst: { plain?: StreamCheck; gateway?: StreamCheck } = {};
        // The same streams through the plain Node proxy (bytes piped, nothing parsed): what one
        // Node process can do with this many events on this machine, the reference for the gateway's.
        let viaPlain: StreamCheck | undefined;
        if (plain) {
          log(o, `streams through the plain Node proxy (first a burst of ${warmEvents} events each)…`);
          const origin = `http://127.0.0.1:${plain.port}`;
          const via = { ...direct, origin };
          firstBurst.plain = await manyStreams({ ...directFor(warmEvents), origin }, fam, count, warmTexts, o.streams.rampMs);
          await sleep(STREAMS_WARM_PAUSE_MS);
          const pid = plain.pid;
          viaPlain = await streamCpu(() => manyStreams(via, fam, count, texts, o.streams!.rampMs), mock.pid, () => [pid], (c) => (cpu.plain = c));
        }
        // A fresh gateway per run, so that its peak memory is the streams' own.
        const viaFresh = async (nodeArgs: string[], onCpu?: (c: StreamCpu) => void) => {
          const fresh = await startGateway({ ...gwOpts, cpuProfDir: undefined, nodeArgs });
          dirs.push(fresh.dir);
          let s: RssSampler | undefined;
          try {
            const spec: RequestSpec = { origin: `http://127.0.0.1:${fresh.port}`, path: '/v1/chat/completions', headers: { authorization: `Bearer ${BENCH_CLIENT_KEY}` }, body: chatBody(`bench/${fam}-paced`, events, true), stream: true };
            const first = await manyStreams({ ...spec, body: chatBody(`bench/${fam}-paced`, warmEvents, true) }, 'openai-chat', count, warmTexts, o.streams!.rampMs);
            // Then its request path warmed as far as the plain proxy's, which has served every row
            // since the run began: the burst is 2,000 requests, and V8 moves the request path to
            // TurboFan only after 9,000-13,000 (Method, "Warm-up to a steady state"), so each new
            // stream of the timed run was set up by Maglev code while its events were already
            // optimised. The same streams unpaced (the same path, no 100 ms between events),
            // until the gateway has served `steady.minRequests` since it started.
            const owed = o.steady?.minRequests ?? 0;
            const unpaced = { ...spec, body: chatBody(`bench/${fam}`, warmEvents, true) };
            let served = first.completed;
            for (const t0 = performance.now(); served < owed && performance.now() - t0 < STREAMS_STEADY_MAX_MS; ) served += (await throughput(unpaced, o.connections, 1)).ok;
            if (owed) log(o, `streams: the fresh gateway has served ${served} requests (the burst, then unpaced streams of ${warmEvents} events)`);
            await sleep(STREAMS_WARM_PAUSE_MS);
            // The peak of the timed streams (the burst's own is lower: a tenth of the events, a quarter of the streams open at once).
            s = new RssSampler(new Map([['g', () => fresh.pids()]]), 50);
            const g = await streamCpu(() => manyStreams(spec, 'openai-chat', count, texts, o.streams!.rampMs), mock.pid, () => fresh.pids(), onCpu);
            return { check: g, peak: s.take('g'), first };
          } finally {
            s?.stop();
            await fresh.stop();
          }
        };
        const g = await viaFresh([], (c) => (cpu.gateway = c));
        firstBurst.gateway = g.first;
        let tuned: { flags: string[]; gateway: StreamCheck; gateway_peak_rss_mb: number; added_ttfb_p50_ms: number } | undefined;
        if (o.streamsTunedFlags?.length) {
          log(o, `streams again on a gateway started with ${o.streamsTunedFlags.join(' ')}…`);
          const t = await viaFresh(o.streamsTunedFlags);
          tuned = { flags: o.streamsTunedFlags, gateway: t.check, gateway_peak_rss_mb: t.peak, added_ttfb_p50_ms: t.check.ttfb_ms.p50 - d.ttfb_ms.p50 };
        }
        streams = {
          path: `chat completions → ${fam} (translated)`,
          streams: count,
          events_per_stream: events,
          pace_ms: paceMs,
          ramp_ms: o.streams.rampMs,
          direct: d,
          gateway: g.check,
          gateway_peak_rss_mb: g.peak,
          added_ttfb_p50_ms: g.check.ttfb_ms.p50 - d.ttfb_ms.p50,
          ...(viaPlain ? { plain: viaPlain, plain_added_ttfb_p50_ms: viaPlain.ttfb_ms.p50 - d.ttfb_ms.p50 } : {}),
          first_burst: { events_per_stream: warmEvents, gateway: firstBurst.gateway!, ...(firstBurst.plain ? { plain: firstBurst.plain } : {}) },
          ...(tuned ? { tuned } : {}),
          ...(cpu.direct && cpu.gateway ? { cpu: { direct: cpu.direct, gateway: cpu.gateway, ...(cpu.plain ? { plain: cpu.plain } : {}) } } : {}),
        };
      }
    }
    // High-water memory: 1,000 connections on a fresh gateway, then its RSS for a minute.
    let highWaterResult: BenchReport['high_water'];
    if (o.highWater) {
      log(o, `high-water memory: ${o.highWater.connections} connections for ${o.highWater.loadS} s on a fresh gateway, then the RSS for ${o.highWater.afterS} s…`);
      const fresh = await startGateway({ ...gwOpts, cpuProfDir: undefined });
      try {
        await sleep(1000);
        const spec: RequestSpec = {
          origin: `http://127.0.0.1:${fresh.port}`,
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${BENCH_CLIENT_KEY}` },
          body: chatBody('bench/openai', o.tokens, false),
          stream: false,
        };
        highWaterResult = { ...(await highWater(() => fresh.pids(), spec, o.highWater, rssMb(fresh.pids()), () => cpuSeconds(fresh.pids()))), quick: o.highWater.afterS < 60 };
      } finally {
        await fresh.stop();
        removeDir(fresh.dir);
      }
    }
    const cpu1 = { machine: machineBusySeconds(), ours: cpuSeconds(ours()), at: performance.now() };
    const wallS = (cpu1.at - cpu0.at) / 1000;
    const backgroundPct = Math.max(0, ((cpu1.machine - cpu0.machine - (cpu1.ours - cpu0.ours)) / wallS) * 100);

    const gwPeak = peakRssMb(gw.pids());
    sampler.stop();

    // Aggregate.
    const results: RowResult[] = rows.map((r) => {
      const base: RowResult = { id: r.id, label: r.label, target: r.target, path: r.path, stream: r.stream, status: 'ok' };
      if (r.na) return { ...base, status: 'n/a', note: `not available: ${r.na}` };
      const f = failures.get(r.id);
      if (f) return { ...base, status: 'failed', note: f.slice(0, 200) };
      const t = tp.get(r.id);
      if (t) {
        base.rps = median(t.map((x) => x.rps));
        base.rps_rounds = t.map((x) => Math.round(x.rps));
        base.p50_ms = median(t.map((x) => x.p50_ms));
        base.p99_ms = median(t.map((x) => x.p99_ms));
        base.failed = t.reduce((s, x) => s + x.failed, 0);
      }
      const l = lat.get(r.id);
      if (l) {
        const sl = [...l.latency].sort((a, b) => a - b);
        const st = [...l.ttfb].sort((a, b) => a - b);
        base.c1 = { requests: sl.length, p50_ms: percentile(sl, 50) / 1000, p99_ms: percentile(sl, 99) / 1000 };
        if (r.stream) base.c1.ttfb_p50_ms = percentile(st, 50) / 1000;
        base.failed = (base.failed ?? 0) + l.failed;
      }
      if (peaks.has(r.id)) base.peak_rss_mb = peaks.get(r.id);
      const c = cpu.get(r.id);
      if (c?.mock.length) {
        const m1 = (xs: number[]) => Math.round(median(xs) * 10) / 10;
        base.cpu = { mock_pct: m1(c.mock), client_pct: m1(c.client) };
        if (c.target.length) base.cpu.target_pct = m1(c.target);
        if (c.us.length) {
          base.cpu.target_us_per_req = Math.round(median(c.us));
          base.cpu.target_us_per_req_rounds = c.us.map(Math.round);
        }
        if (c.redisUs.length) {
          base.cpu.redis_us_per_req = Math.round(median(c.redisUs));
          base.cpu.redis_us_per_req_rounds = c.redisUs.map(Math.round);
        }
      }
      return base;
    });
    const byId = new Map(results.map((r) => [r.id, r]));
    for (const r of results) {
      const def = rows.find((x) => x.id === r.id)!;
      const b = def.baseline ? byId.get(def.baseline) : undefined;
      if (r.c1 && b?.c1) {
        r.c1.baseline = b.id;
        r.c1.added_p50_ms = r.c1.p50_ms - b.c1.p50_ms;
        r.c1.added_p99_ms = r.c1.p99_ms - b.c1.p99_ms;
        if (r.c1.ttfb_p50_ms !== undefined && b.c1.ttfb_p50_ms !== undefined) r.c1.added_ttfb_p50_ms = r.c1.ttfb_p50_ms - b.c1.ttfb_p50_ms;
      }
    }

    // Targets use the paired ratios; the ratio of the table's medians is kept for reference.
    const ratio = (a?: string, b?: string) => {
      const x = a ? byId.get(a)?.rps : undefined;
      const y = b ? byId.get(b)?.rps : undefined;
      return x !== undefined && y !== undefined && y > 0 ? x / y : null;
    };
    const ratios: Record<string, number | null> = {};
    const ratiosOfMedians: Record<string, number | null> = {};
    const ratioRounds: Record<string, number[]> = {};
    for (const [key, num, den] of RATIOS) {
      const p = paired.get(key);
      ratios[key] = p?.length ? median(p) : null;
      ratiosOfMedians[key] = ratio(num, den);
      if (p?.length) ratioRounds[key] = p.map((x) => Math.round(x * 1000) / 1000);
    }
    const cpuRatioValues: NonNullable<BenchReport['cpu_ratios']> = {};
    for (const [key, num, den, max] of cpuPairs) {
      if (!byRowId.has(num) || !byRowId.has(den)) continue;
      const p = pairedCpu.get(key) ?? [];
      const a = byId.get(num)?.cpu?.target_us_per_req;
      const b = byId.get(den)?.cpu?.target_us_per_req;
      cpuRatioValues[key] = { value: p.length ? median(p) : null, rounds: p.map((x) => Math.round(x * 1000) / 1000), table: a && b ? a / b : null, max };
    }

    // What observability costs in CPU per request (information), and what the mock's collector received.
    let observability: BenchReport['observability'];
    if (obsCpu.size || gwAll) {
      const counts = await mockCounts(mock);
      const round3 = (x: number) => Math.round(x * 1000) / 1000;
      observability = {
        cpu_ratios: Object.fromEntries([...obsCpu].map(([k, xs]) => [k, { value: median(xs), rounds: xs.map(round3) }])),
        ...(gwAll && counts ? { otlp: { exports: counts.otlp, bytes: counts.otlp_bytes, rejected: counts.otlp_rejected } } : {}),
      };
    }

    const targets = checkTargets(byId, ratios, streams, highWaterResult, cpuRatioValues, bodies, { startup_ms: median(startupSamples), idle_rss_mb: idleRss });
    const logStats = o.log === 'file' ? countLines(gw.logFile) : undefined;
    /** A median of cores, to two decimals. */
    const cores2 = (xs: number[]) => Math.round(median(xs) * 100) / 100;
    const report: BenchReport = {
      version: 1,
      started_at: new Date(started).toISOString(),
      duration_s: Math.round((Date.now() - started) / 1000),
      quick: o.quick,
      machine: { ...machine(), background_cpu_pct: Math.round(backgroundPct) },
      settings: {
        rounds: o.rounds,
        connections: o.connections,
        throughput_s: o.throughputS,
        serial_s: o.serialS,
        tokens: o.tokens,
        log: o.log === 'null' ? 'info, to /dev/null' : 'info, one JSON line per request to a file',
        transport: mainTransport,
        workers_row: o.workers2,
        ...(o.steady ? { steady: o.steady } : {}),
        timed_node_args: [...TIMED_NODE_ARGS],
        ...(rows.some((r) => r.id.endsWith('-heavy'))
          ? { heavy: { messages: o.heavy.messages, words: o.heavy.words, bytes: Buffer.byteLength(rows.find((r) => r.id.endsWith('-heavy') && r.spec)?.spec?.body ?? '') } }
          : {}),
      },
      ...(Object.keys(steadyWarmup).length ? { steady_warmup: steadyWarmup } : {}),
      gateway: {
        startup_ms: median(startupSamples),
        startup_samples_ms: startupSamples.map((x) => Math.round(x)),
        idle_rss_mb: idleRss,
        peak_rss_mb: gwPeak,
        ...(logStats ? { log_lines: logStats.lines, log_bytes_per_line: logStats.lines ? Math.round(logStats.bytes / logStats.lines) : 0 } : {}),
      },
      rows: results,
      streams,
      ...(highWaterResult ? { high_water: highWaterResult } : {}),
      ratios,
      ratios_paired_rounds: ratioRounds,
      paired_cpu: Object.fromEntries(
        [...pairDiag].map(([k, d]) => [
          k,
          { num_us_per_req: Math.round(median(d.numUs)), den_us_per_req: Math.round(median(d.denUs)), num_cores: cores2(d.numCores), den_cores: cores2(d.denCores), others_cores: cores2(d.others) },
        ]),
      ),
      ratios_of_row_medians: ratiosOfMedians,
      ratio_notes: RATIO_NOTES,
      ...(Object.keys(cpuRatioValues).length ? { cpu_ratios: cpuRatioValues } : {}),
      ...(bodies ? { bodies } : {}),
      ...(observability ? { observability } : {}),
      targets,
    };

    // Stop the gateway first: --cpu-prof writes its profile on exit.
    for (const p of procs.reverse()) await p.stop();
    procs.length = 0;
    if (profDir) {
      const newest = servingProfile(profDir);
      if (newest) {
        const file = path.join(profDir, newest);
        const s = summarize(file, 30);
        report.profile = { file, ...s };
        log(o, '\n' + formatSummary(s));
        // The same profile by call stack: bench/flame.ts. A failure here must not lose the run.
        try {
          const svg = writeFlameGraph(file, path.join(o.outDir ?? profDir, 'profile-flame.svg'), { title: `gateway CPU profile (${newest})` });
          log(o, `flame graph: ${svg}`);
        } catch (err) {
          log(o, `flame graph not written: ${(err as Error).message}`);
        }
      }
    }
    if (o.outDir) writeResults(report, o.outDir);
    if (o.print) process.stdout.write('\n' + formatTable(report) + '\n');
    return report;
  } finally {
    sampler?.stop();
    for (const p of procs.reverse()) await p.stop().catch(() => {});
    for (const d of dirs) removeDir(d);
    if (redisPrefix) await dropRedisKeys(redisUrl, redisPrefix).catch(() => {});
  }
}

/** Lines and bytes of the gateway's access log (read in chunks: it can be large). */
function countLines(file: string): { lines: number; bytes: number } | undefined {
  try {
    const fd = openSync(file, 'r');
    const buf = Buffer.allocUnsafe(1 << 20);
    let lines = 0;
    let bytes = 0;
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n <= 0) break;
      bytes += n;
      for (let i = buf.indexOf(10); i !== -1 && i < n; i = buf.indexOf(10, i + 1)) lines++;
    }
    closeSync(fd);
    return { lines, bytes };
  } catch {
    return undefined;
  }
}

function checkTargets(
  byId: Map<string, RowResult>,
  ratios: Record<string, number | null>,
  streams: BenchReport['streams'],
  hw: BenchReport['high_water'] | undefined,
  cpu: NonNullable<BenchReport['cpu_ratios']>,
  bodies: BenchReport['bodies'],
  start: { startup_ms: number; idle_rss_mb: number },
): TargetCheck[] {
  const t: TargetCheck[] = [];
  const rat = (name: string, key: string, goal: number) => {
    const v = ratios[key];
    t.push({ name, goal: `>= ${goal}x`, value: v === null ? 'n/a' : `${v.toFixed(2)}x`, met: v === null ? null : v >= goal });
  };
  rat('passthrough req/s vs plain proxy', 'passthrough gateway/plain', 0.85);
  rat('passthrough req/s vs Portkey', 'passthrough gateway/portkey', 6);
  rat('Anthropic translated req/s vs plain proxy', 'anthropic translated gateway/plain', 0.7);
  rat('Gemini translated req/s vs plain proxy', 'gemini translated gateway/plain', 0.7);
  rat('Messages API → OpenAI translated req/s vs plain proxy', 'messages translated gateway/plain', 0.7);
  rat('usage store + metrics (as shipped) req/s vs all off', 'observability as shipped / off', 0.95);
  rat('usage store + metrics + traces req/s vs all off', 'observability with traces / off', 0.95);
  const pass = byId.get('gw-openai')?.c1;
  const lim = (name: string, v: number | undefined, goal: number) =>
    t.push({ name, goal: `<= ${goal} ms`, value: v === undefined ? 'n/a' : `${v.toFixed(3)} ms`, met: v === undefined ? null : v <= goal });
  const limited = byId.get('gwlim-openai');
  if (limited) {
    // Against the gateway alike but for the limits; without it (--no-observability), the main gateway.
    const alike = byId.get('gwship-openai');
    const none = (ratios['limits with Redis / none'] ?? null) !== null ? 'limits with Redis / none' : 'limits with Redis / main gateway';
    rat('limits in Redis (rpm, tpm, budget) req/s vs no limits', none, 0.9);
    const base = alike?.c1 ?? pass;
    const c1 = limited.c1 && base ? limited.c1.p50_ms - base.p50_ms : undefined;
    lim('limits in Redis added latency p50 (c=1) vs no limits', c1, 0.3);
  }
  lim('passthrough added latency p50 (c=1)', pass?.added_p50_ms, 0.2);
  lim('passthrough added latency p99 (c=1)', pass?.added_p99_ms, 0.5);
  // The sidecar: a single process (workers: 1) ready fast and small when idle.
  lim('start-up to a ready /healthz (workers: 1)', start.startup_ms, 300);
  t.push({ name: 'idle RSS (workers: 1)', goal: '<= 60 MB', value: `${start.idle_rss_mb.toFixed(0)} MB`, met: start.idle_rss_mb <= 60 });
  if (streams && 'gateway' in streams) {
    const g = streams.gateway;
    t.push({
      name: `${streams.streams} concurrent streams × ${streams.events_per_stream} events complete, none lost or reordered`,
      goal: 'all',
      value: `${g.completed}/${streams.streams} complete, ${g.events}/${g.expected_events} events, ${g.corrupted} corrupted, ${g.failed} failed`,
      met: g.completed === streams.streams && g.events === g.expected_events,
    });
    lim('gateway peak RSS during the streams', streams.gateway_peak_rss_mb, 300);
    t[t.length - 1].goal = '<= 300 MB';
    t[t.length - 1].value = `${streams.gateway_peak_rss_mb.toFixed(0)} MB`;
    const plainAdded = streams.plain_added_ttfb_p50_ms;
    t.push({
      name: `added TTFB p50 under ${streams.streams} streams, against the plain proxy's in the same run`,
      goal: "<= 2x the plain proxy's",
      value: plainAdded === undefined ? `${streams.added_ttfb_p50_ms.toFixed(1)} ms (plain proxy not run)` : `${streams.added_ttfb_p50_ms.toFixed(1)} ms against ${plainAdded.toFixed(1)} ms`,
      met: plainAdded === undefined ? null : streams.added_ttfb_p50_ms <= 2 * Math.max(plainAdded, 0),
    });
    if (streams.tuned) {
      t.push({
        name: `gateway peak RSS during the streams, started with ${streams.tuned.flags.join(' ')}`,
        goal: '<= 300 MB',
        value: `${streams.tuned.gateway_peak_rss_mb.toFixed(0)} MB (${streams.tuned.gateway.completed}/${streams.streams} complete)`,
        met: streams.tuned.gateway_peak_rss_mb <= 300 && streams.tuned.gateway.completed === streams.streams,
      });
    }
  } else t.push({ name: 'concurrent streams', goal: 'all complete', value: streams ? streams.note : 'not run', met: null });
  const trans = ['gw-anthropic-stream', 'gw-gemini-stream', 'gw-openai-stream'].map((id) => byId.get(id)).find((r) => r?.c1?.added_ttfb_p50_ms !== undefined);
  lim(`added TTFB p50 at c=1 (${trans?.label ?? 'stream'})`, trans?.c1?.added_ttfb_p50_ms, 1);
  // Judged on the heavy request, where the gateway's CPU dominates; the passthrough ratio is information (RATIO_NOTES).
  const w = ratios['heavy translated 2 workers / 1 worker'];
  t.push({ name: '2 workers vs 1 worker (heavy: long conversation translated to Anthropic)', goal: 'shows scaling (>= 1.2x)', value: w === null ? 'n/a' : `${w.toFixed(2)}x`, met: w === null ? null : w >= 1.2 });
  if (hw)
    t.push({
      name: `RSS after ${hw.connections} connections, back within 20% of the pre-load value${hw.quick ? ` (quick: ${hw.after_s} s after, not 60)` : ' within a minute'}`,
      goal: '<= 1.2x the pre-load RSS',
      value: `${hw.after_rss_mb.toFixed(0)} MB after ${hw.after_s} s: ${hw.after_over_pre.toFixed(2)}x ${hw.pre_rss_mb.toFixed(0)} MB (peak ${hw.peak_rss_mb.toFixed(0)} MB)`,
      met: hw.failed === 0 ? hw.after_over_pre <= 1.2 : false,
    });
  for (const [name, r] of Object.entries(cpu)) t.push({ name, goal: `<= ${r.max}x`, value: r.value === null ? 'n/a' : `${r.value.toFixed(2)}x`, met: r.value === null ? null : r.value <= r.max });
  if (bodies) {
    const d = bodies.after_rss_mb / bodies.baseline_rss_mb - 1;
    t.push({
      name: `agent rows' gateway RSS ${bodies.settle_s} s after their load, against its baseline`,
      goal: 'within ±10%',
      value: `${bodies.after_rss_mb.toFixed(0)} MB against ${bodies.baseline_rss_mb.toFixed(0)} MB (${d >= 0 ? '+' : ''}${(d * 100).toFixed(0)}%; peak ${bodies.peak_rss_mb.toFixed(0)} MB)`,
      met: Math.abs(d) <= 0.1,
    });
  }
  return t;
}

// ---------------------------------------------------------------------------

function parseArgs(argv: string[]): Partial<BenchOptions> {
  const o: Partial<BenchOptions> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--duration') o.throughputS = Number(next());
    else if (a === '--serial') o.serialS = Number(next());
    else if (a === '--connections') o.connections = Number(next());
    else if (a === '--tokens') o.tokens = Number(next());
    else if (a === '--streams') {
      const n = Number(next());
      o.streams = n > 0 ? { ...(o.streams ?? FULL.streams!), count: n } : null;
    } else if (a === '--pace') o.streams = { ...(o.streams ?? FULL.streams!), paceMs: Number(next()) };
    else if (a === '--ramp') o.streams = { ...(o.streams ?? FULL.streams!), rampMs: Number(next()) };
    else if (a === '--events') o.streams = { ...(o.streams ?? FULL.streams!), events: Number(next()) };
    else if (a === '--no-portkey') o.portkey = false;
    else if (a === '--no-workers') o.workers2 = false;
    else if (a === '--no-observability') o.observability = false;
    else if (a === '--no-high-water') o.highWater = null;
    else if (a === '--no-limits') o.limits = false;
    else if (a === '--steady-max') {
      const max = Number(next());
      o.steady = max > 0 ? { ...FULL.steady!, maxS: max } : null;
    }
    else if (a === '--heavy-messages') o.heavy = { ...(o.heavy ?? FULL.heavy), messages: Number(next()) };
    else if (a === '--heavy-words') o.heavy = { ...(o.heavy ?? FULL.heavy), words: Number(next()) };
    else if (a === '--only') o.only = next().split(',');
    else if (a === '--bodies') o.bodySizes = next().split(',').filter(Boolean).map((x) => Math.round(Number(x.replace(/k$/i, '')) * (/k$/i.test(x) ? 1000 : 1)));
    else if (a === '--no-bodies') o.bodySizes = [];
    else if (a === '--settle') o.bodiesSettleS = Number(next());
    else if (a === '--transport') o.transport = next();
    else if (a === '--profile') o.profile = true;
    else if (a === '--log-null') o.log = 'null';
    else if (a === '--out') o.outDir = next() === '-' ? null : path.resolve(argv[i]);
    else if (a === '--help' || a === '-h') {
      process.stdout.write(
        'npm run bench -- [--quick] [--rounds N] [--duration S] [--serial S] [--connections N] [--tokens N]\n' +
          '  [--streams N|0] [--events N] [--pace MS] [--ramp MS] [--no-portkey] [--no-workers] [--no-observability] [--no-high-water] [--no-limits] [--steady-max S] [--only id,id] [--transport proxy|http] [--profile] [--log-null] [--out DIR|-]\n' +
          `  [--heavy-messages N] [--heavy-words N]   the heavy request's conversation (default ${FULL.heavy.messages} messages, ${FULL.heavy.words} words per text)\n` +
          '  --no-workers: no 2-worker gateway (rows gw2-openai, gw2-heavy); --only gw-heavy,gw2-heavy: just the workers comparison\n' +
          '  --no-limits: no gateway with a limited key in Redis (row gwlim-openai; BENCH_REDIS_URL, default redis://127.0.0.1:6379)\n' +
          '  --steady-max S: warm each target process until its CPU per request is steady, for at most S more seconds (default 30; 0: no such warm-up)\n' +
          `  [--bodies 30k,120k,400k | --no-bodies] [--settle S]   the agent conversations' sizes (default ${FULL.bodySizes.map(agentKb).join(',')}), and the wait before\n` +
          `    their gateway's RSS is read again (default ${FULL.bodiesSettleS} s); --only plain-agent-30k,gw-agent-30k: one pair\n` +
          '  --profile: the gateway runs under node --cpu-prof; prints its top functions by self time and writes a flame graph,\n' +
          '    <out DIR>/profile-flame.svg (next to the .cpuprofile with --out -); any profile: node dist/bench/flame.js <file.cpuprofile>\n',
      );
      process.exit(0);
    } else throw new Error(`unknown option ${a}`);
  }
  if (o.quick) return { ...QUICK, ...o };
  return o;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  runBenchmark(parseArgs(process.argv.slice(2))).catch((err) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}

export type { StreamCheck };
