// A FAST mock upstream for the benchmark: plain node:http, one process, answers
// from precomputed buffers so that it costs as little as possible per request
// and the benchmark measures the gateway, not the mock.
//
// It speaks the four wire formats the gateway talks to:
// - OpenAI Chat Completions  POST …/chat/completions         JSON, SSE ending in `data: [DONE]`
// - OpenAI Responses         POST …/responses                JSON, SSE with `event:` lines
// - Anthropic Messages       POST …/messages                 JSON, SSE with `event:` lines
// - Gemini generateContent   POST …/models/{m}:generateContent, :streamGenerateContent?alt=sse
//                            (SSE separated by \r\n\r\n, no terminator)
//
// Every answer is N text deltas `t0 `, `t1 `, … where N is the request's token
// limit (max_completion_tokens / max_tokens / max_output_tokens /
// generationConfig.maxOutputTokens, default 8): a client can check that every
// event arrived, once, in order. A model name containing `paced-<ms>` makes
// the stream emit one event every <ms> milliseconds (like a model generating
// tokens) instead of writing the whole stream at once; paced streams share one
// timer per interval so thousands of them stay cheap.
//
// It validates what the real providers reject (missing max_tokens or
// anthropic-version on Anthropic, a system role inside Gemini contents, …) and
// answers with the provider's error shape, so a translation bug shows up as
// non-2xx answers in the benchmark instead of fast wrong numbers. It keeps the
// raw body of the last accepted request per protocol (a reference, no copy),
// so that a probe can check what the gateway actually sent upstream
// ({op:'last', protocol} over IPC).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';

export type Protocol = 'openai-chat' | 'openai-responses' | 'anthropic' | 'gemini';

export interface MockUpstream {
  url: string;
  port: number;
  server: http.Server;
  /**
   * Requests answered, by protocol (non-2xx included); OTLP trace exports
   * accepted (`otlp`), their bytes (`otlp_bytes`) and those refused for their
   * shape (`otlp_rejected`).
   */
  counts: Record<Protocol | 'rejected' | 'otlp' | 'otlp_bytes' | 'otlp_rejected', number>;
  /** The raw body of the last accepted request, by protocol: what the gateway sent (a probe compares it). */
  last: Partial<Record<Protocol, Buffer>>;
  close(): Promise<void>;
}

const DEFAULT_TOKENS = 8;
const MAX_TOKENS = 100_000;
const CREATED = 1_750_000_000;

export function tokenText(i: number): string {
  return `t${i} `;
}

/** The full text a mock answer with n tokens carries: what a client must reassemble. */
export function expectedText(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += tokenText(i);
  return s;
}

function paceOf(model: string): number {
  const m = /paced-(\d+)/.exec(model);
  return m ? Math.max(1, Number(m[1])) : 0;
}

// ---------------------------------------------------------------------------
// Precomputed bodies. Keyed by protocol, model and token count; the cache is
// bounded because the key space is (model × n), both chosen by the benchmark.

interface Prepared {
  json: Buffer;
  /** The SSE stream as one buffer (unpaced) and as separate events (paced). */
  sse: Buffer;
  events: Buffer[];
}

const cache = new Map<string, Prepared>();

function prepared(protocol: Protocol, model: string, n: number): Prepared {
  const key = `${protocol}|${model}|${n}`;
  let p = cache.get(key);
  if (!p) {
    const events = streamEvents(protocol, model, n).map((e) => Buffer.from(e));
    p = { json: Buffer.from(JSON.stringify(jsonBody(protocol, model, n))), sse: Buffer.concat(events), events };
    if (cache.size > 1000) cache.clear();
    cache.set(key, p);
  }
  return p;
}

function usage(n: number) {
  return { prompt_tokens: 12, completion_tokens: n, total_tokens: 12 + n };
}

function jsonBody(protocol: Protocol, model: string, n: number): unknown {
  const text = expectedText(n);
  switch (protocol) {
    case 'openai-chat':
      return {
        id: 'chatcmpl-bench0000000000000000000001',
        object: 'chat.completion',
        created: CREATED,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
        usage: { ...usage(n), prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 } },
        service_tier: 'default',
        system_fingerprint: 'fp_bench',
      };
    case 'openai-responses':
      return responseObject(model, n, 'completed', text);
    case 'anthropic':
      return {
        model,
        id: 'msg_01Bench000000000000000001',
        type: 'message',
        role: 'assistant',
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: n, service_tier: 'standard' },
      };
    case 'gemini':
      return {
        candidates: [{ content: { parts: [{ text }], role: 'model' }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 12, candidatesTokenCount: n, totalTokenCount: 12 + n, promptTokensDetails: [{ modality: 'TEXT', tokenCount: 12 }] },
        modelVersion: model,
        responseId: 'benchResponse0000000001',
      };
  }
}

function responseObject(model: string, n: number, status: 'in_progress' | 'completed', text: string) {
  const done = status === 'completed';
  return {
    id: 'resp_bench0000000000000000000001',
    object: 'response',
    created_at: CREATED,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: n,
    model,
    output: done
      ? [{ id: 'msg_bench0000000000000001', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] }]
      : [],
    parallel_tool_calls: true,
    temperature: 1,
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    store: false,
    truncation: 'disabled',
    usage: done ? { input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: n, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 + n } : null,
    metadata: {},
  };
}

function streamEvents(protocol: Protocol, model: string, n: number): string[] {
  const out: string[] = [];
  switch (protocol) {
    case 'openai-chat': {
      const base = { id: 'chatcmpl-bench0000000000000000000001', object: 'chat.completion.chunk', created: CREATED, model, service_tier: 'default', system_fingerprint: 'fp_bench' };
      const chunk = (delta: object, finish: string | null, extra: object = {}) =>
        `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null, ...extra })}\n\n`;
      out.push(chunk({ role: 'assistant', content: '', refusal: null }, null, { obfuscation: 'aB3x' }));
      for (let i = 0; i < n; i++) out.push(chunk({ content: tokenText(i) }, null));
      out.push(chunk({}, 'stop'));
      out.push(`data: ${JSON.stringify({ ...base, choices: [], usage: usage(n) })}\n\n`);
      out.push('data: [DONE]\n\n');
      break;
    }
    case 'anthropic': {
      const ev = (name: string, data: object) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
      out.push(
        ev('message_start', {
          message: { model, id: 'msg_01Bench000000000000000001', type: 'message', role: 'assistant', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1, service_tier: 'standard' } },
        }),
      );
      out.push(ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
      out.push(ev('ping', {}));
      // Anthropic pads some data lines with trailing spaces (as recorded from the real API).
      for (let i = 0; i < n; i++) out.push(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: tokenText(i) } }).replace('}\n\n', '}   \n\n'));
      out.push(ev('content_block_stop', { index: 0 }));
      out.push(ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: n } }));
      out.push(ev('message_stop', {}));
      break;
    }
    case 'gemini': {
      const usageMetadata = (k: number) => ({ promptTokenCount: 12, candidatesTokenCount: k, totalTokenCount: 12 + k });
      for (let i = 0; i < n; i++) {
        const last = i === n - 1;
        const cand: Record<string, unknown> = { content: { parts: [{ text: tokenText(i) }], role: 'model' }, index: 0 };
        if (last) cand.finishReason = 'STOP';
        out.push(`data: ${JSON.stringify({ candidates: [cand], usageMetadata: usageMetadata(i + 1), modelVersion: model, responseId: 'benchResponse0000000001' })}\r\n\r\n`);
      }
      if (n === 0)
        out.push(`data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'STOP', index: 0 }], usageMetadata: usageMetadata(0), modelVersion: model })}\r\n\r\n`);
      break;
    }
    case 'openai-responses': {
      let seq = 0;
      const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
      const item = 'msg_bench0000000000000001';
      out.push(ev('response.created', { response: responseObject(model, n, 'in_progress', '') }));
      out.push(ev('response.in_progress', { response: responseObject(model, n, 'in_progress', '') }));
      out.push(ev('response.output_item.added', { output_index: 0, item: { id: item, type: 'message', status: 'in_progress', role: 'assistant', content: [] } }));
      out.push(ev('response.content_part.added', { item_id: item, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } }));
      for (let i = 0; i < n; i++) out.push(ev('response.output_text.delta', { item_id: item, output_index: 0, content_index: 0, delta: tokenText(i), logprobs: [], obfuscation: 'x' }));
      const text = expectedText(n);
      out.push(ev('response.output_text.done', { item_id: item, output_index: 0, content_index: 0, text, logprobs: [] }));
      out.push(ev('response.content_part.done', { item_id: item, output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [], logprobs: [] } }));
      out.push(ev('response.output_item.done', { output_index: 0, item: { id: item, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] } }));
      out.push(ev('response.completed', { response: responseObject(model, n, 'completed', text) }));
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Request checks: what the real provider would reject, in its error shape.

class Rejection {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

function tokenLimit(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? Math.min(v, MAX_TOKENS) : DEFAULT_TOKENS;
}

interface Parsed {
  protocol: Protocol;
  model: string;
  stream: boolean;
  n: number;
}

function openAIError(message: string, param: string | null): Rejection {
  return new Rejection(400, { error: { message, type: 'invalid_request_error', param, code: null } });
}
function anthropicError(status: number, type: string, message: string): Rejection {
  return new Rejection(status, { type: 'error', error: { type, message }, request_id: 'req_bench' });
}
function geminiError(status: number, message: string): Rejection {
  return new Rejection(status, { error: { code: status, message, status: status === 400 ? 'INVALID_ARGUMENT' : 'UNAUTHENTICATED' } });
}

function classify(req: http.IncomingMessage, path: string, query: string, body: Record<string, unknown>): Parsed {
  if (path.endsWith('/chat/completions')) {
    if (typeof body.model !== 'string') throw openAIError("you must provide a model parameter", 'model');
    if (!Array.isArray(body.messages) || body.messages.length === 0) throw openAIError("Invalid 'messages': empty array.", 'messages');
    return { protocol: 'openai-chat', model: body.model, stream: body.stream === true, n: tokenLimit(body.max_completion_tokens ?? body.max_tokens) };
  }
  if (path.endsWith('/responses')) {
    if (typeof body.model !== 'string') throw openAIError('Missing required parameter: \'model\'.', 'model');
    if (body.input === undefined) throw openAIError("Missing required parameter: 'input'.", 'input');
    return { protocol: 'openai-responses', model: body.model, stream: body.stream === true, n: tokenLimit(body.max_output_tokens) };
  }
  if (path.endsWith('/messages')) {
    if (!req.headers['x-api-key']) throw anthropicError(401, 'authentication_error', 'x-api-key header is required');
    if (!req.headers['anthropic-version']) throw anthropicError(400, 'invalid_request_error', 'anthropic-version: header is required');
    if (typeof body.model !== 'string') throw anthropicError(400, 'invalid_request_error', 'model: Field required');
    if (typeof body.max_tokens !== 'number') throw anthropicError(400, 'invalid_request_error', 'max_tokens: Field required');
    if (!Array.isArray(body.messages)) throw anthropicError(400, 'invalid_request_error', 'messages: Field required');
    for (const [i, m] of (body.messages as { role?: string }[]).entries()) {
      if (m.role !== 'user' && m.role !== 'assistant') throw anthropicError(400, 'invalid_request_error', `messages.${i}.role: Input should be 'user' or 'assistant'`);
    }
    return { protocol: 'anthropic', model: body.model, stream: body.stream === true, n: tokenLimit(body.max_tokens) };
  }
  const g = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path);
  if (g) {
    if (!req.headers['x-goog-api-key'] && !/(^|&)key=/.test(query)) throw geminiError(403, 'Method doesn\'t allow unregistered callers. Please use API Key.');
    const stream = g[2] === 'streamGenerateContent';
    if (stream && !/(^|&)alt=sse(&|$)/.test(query)) throw geminiError(400, 'This mock serves streamGenerateContent with alt=sse only.');
    if (!Array.isArray(body.contents) || body.contents.length === 0) throw geminiError(400, '* GenerateContentRequest.contents: contents is not specified');
    for (const c of body.contents as { role?: string; parts?: unknown }[]) {
      if (c.role !== undefined && c.role !== 'user' && c.role !== 'model') throw geminiError(400, `Please use a valid role: user, model.`);
      if (!Array.isArray(c.parts)) throw geminiError(400, '* GenerateContentRequest.contents.parts: contents.parts must not be empty.');
    }
    const gen = body.generationConfig as { maxOutputTokens?: unknown } | undefined;
    return { protocol: 'gemini', model: decodeURIComponent(g[1]), stream, n: tokenLimit(gen?.maxOutputTokens) };
  }
  throw new Rejection(404, { error: { message: `mock upstream: no route for ${path}`, type: 'not_found_error' } });
}

// ---------------------------------------------------------------------------
// Paced streams: one timer per interval advances every stream by one event.

interface PacedStream {
  res: http.ServerResponse;
  events: Buffer[];
  next: number;
}
const paced = new Map<number, { streams: Set<PacedStream>; timer: NodeJS.Timeout }>();

function startPaced(res: http.ServerResponse, events: Buffer[], intervalMs: number): void {
  let group = paced.get(intervalMs);
  if (!group) {
    const streams = new Set<PacedStream>();
    const timer = setInterval(() => {
      for (const s of streams) {
        if (s.res.destroyed) {
          streams.delete(s);
          continue;
        }
        s.res.write(s.events[s.next++]);
        if (s.next >= s.events.length) {
          streams.delete(s);
          s.res.end();
        }
      }
      if (streams.size === 0) {
        clearInterval(timer);
        paced.delete(intervalMs);
      }
    }, intervalMs);
    group = { streams, timer };
    paced.set(intervalMs, group);
  }
  // The first event goes out at once: time to first byte is not paced.
  res.write(events[0]);
  if (events.length === 1) {
    res.end();
    return;
  }
  group.streams.add({ res, events, next: 1 });
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
const GEMINI_SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/**
 * An OpenTelemetry collector's OTLP/HTTP traces endpoint, for the gateway with
 * traces on. It costs the machine about what a real receiver's socket reads
 * would: it counts the bytes and checks the export's shape from its first and
 * last bytes (an OTLP/JSON `{"resourceSpans":[…]}` object, or an OTLP protobuf
 * message starting with its `resource_spans` field), without copying or
 * parsing the body. The tests' strict collector (test/tracing.test.ts) checks
 * every span.
 */
function otlpReceiver(req: http.IncomingMessage, res: http.ServerResponse, counts: MockUpstream['counts']): void {
  const json = (req.headers['content-type'] ?? '').startsWith('application/json');
  let bytes = 0;
  let first: Buffer | undefined;
  let lastByte = -1;
  req.on('data', (c: Buffer) => {
    first ??= c;
    bytes += c.length;
    lastByte = c[c.length - 1];
  });
  req.on('end', () => {
    const ok =
      !req.headers['content-encoding'] &&
      first !== undefined &&
      (json ? first.subarray(0, 32).toString('latin1').replace(/\s+/g, '').startsWith('{"resourceSpans":[') && lastByte === 0x7d : first[0] === 0x0a);
    if (!ok) {
      counts.otlp_rejected++;
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"code":3,"message":"not an OTLP traces export"}');
      return;
    }
    counts.otlp++;
    counts.otlp_bytes += bytes;
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf', 'content-length': json ? 2 : 0 });
    res.end(json ? '{}' : undefined);
  });
}

export function createMockHandler(counts: MockUpstream['counts'], last: MockUpstream['last'] = {}): http.RequestListener {
  return (req, res) => {
    if (req.method === 'POST' && req.url === '/v1/traces') return otlpReceiver(req, res, counts);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q === -1 ? url : url.slice(0, q);
      const query = q === -1 ? '' : url.slice(q + 1);
      let parsed: Parsed;
      const raw = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      try {
        if (req.method !== 'POST') throw new Rejection(405, { error: { message: 'POST only' } });
        let body: unknown;
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          throw new Rejection(400, { error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error' } });
        }
        if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Rejection(400, { error: { message: 'body must be a JSON object' } });
        parsed = classify(req, path, query, body as Record<string, unknown>);
      } catch (err) {
        if (!(err instanceof Rejection)) throw err;
        counts.rejected++;
        const buf = Buffer.from(JSON.stringify(err.body));
        res.writeHead(err.status, { 'content-type': 'application/json', 'content-length': buf.length });
        res.end(buf);
        return;
      }
      counts[parsed.protocol]++;
      last[parsed.protocol] = raw;
      const p = prepared(parsed.protocol, parsed.model, parsed.n);
      if (!parsed.stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': p.json.length });
        res.end(p.json);
        return;
      }
      res.writeHead(200, parsed.protocol === 'gemini' ? GEMINI_SSE_HEADERS : SSE_HEADERS);
      const pace = paceOf(parsed.model);
      if (pace) startPaced(res, p.events, pace);
      else res.end(p.sse);
    });
  };
}

export async function startMockUpstream(port = 0, host = '127.0.0.1'): Promise<MockUpstream> {
  const counts: MockUpstream['counts'] = { 'openai-chat': 0, 'openai-responses': 0, anthropic: 0, gemini: 0, rejected: 0, otlp: 0, otlp_bytes: 0, otlp_rejected: 0 };
  const last: MockUpstream['last'] = {};
  // A long keep-alive: the gateway's pooled sockets must not be closed under it
  // between two requests (that would show up as resets, not as latency).
  const server = http.createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 60_000 }, createMockHandler(counts, last));
  server.maxConnections = 100_000;
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${host}:${addr.port}`,
    port: addr.port,
    server,
    counts,
    last,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// As a child process: `node dist/bench/mock-upstream.js [port]`. Reports
// {ready, port} over IPC (or a JSON line on stdout) and answers {op:'counts'}
// and {op:'last', protocol} (the last accepted request body of that protocol, as text, or null).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const mock = await startMockUpstream(Number(process.argv[2] ?? 0));
  const ready = { ready: true, port: mock.port, pid: process.pid };
  if (process.send) {
    process.send(ready);
    process.on('message', (m: { op?: string; protocol?: Protocol }) => {
      if (m?.op === 'counts') process.send!({ counts: mock.counts });
      else if (m?.op === 'last' && m.protocol) process.send!({ last: { protocol: m.protocol, body: mock.last[m.protocol]?.toString('utf8') ?? null } });
    });
    process.on('disconnect', () => process.exit(0));
  } else process.stdout.write(JSON.stringify(ready) + '\n');
}
