// One structured access-log line per request, written asynchronously
// (pino.destination with sync: false; one line built from the request's own
// record rather than pino-http's per-request logger). Credentials are redacted even though the gateway
// never puts headers in a log line: a custom plugin might.
import pino, { type Logger, type DestinationStream } from 'pino';

// Explicit paths only: wildcard paths make redaction walk every line's
// objects (docs/performance.md, "The access log"). The core never logs headers or
// keys; these catch a plugin that logs a header bag or a provider config.
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-goog-api-key"]',
  'api_key',
  'apiKey',
  'provider.api_key',
];

/**
 * Standard output for the logger, written asynchronously (sonic-boom hands
 * each write to libuv's thread pool) and batched: lines are held until 16 KiB
 * are waiting or 50 ms have passed since the first of them. Every write is a
 * round trip to a pool thread and back; one per request line is a visible
 * share of a small request's cost (docs/performance.md, "The access log"). A quiet
 * gateway still shows each line within 50 ms, `logger.flush()` writes at once,
 * and held lines are written synchronously when the process exits.
 */
export function batchedStdout(fd = 1, maxDelayMs = 50, batchBytes = 16384): DestinationStream & { flush(cb?: (err?: Error) => void): void; flushSync(): void } {
  const boom = pino.destination({ fd, sync: false });
  let held = '';
  let timer: NodeJS.Timeout | undefined;
  const release = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (held) {
      boom.write(held);
      held = '';
    }
  };
  // Before pino's own exit hook flushes the sonic-boom synchronously.
  process.prependListener('exit', release);
  return {
    write(line: string) {
      held += line;
      if (held.length >= batchBytes) release();
      else if (!timer) {
        timer = setTimeout(release, maxDelayMs);
        timer.unref();
      }
    },
    flush(cb?: (err?: Error) => void) {
      release();
      boom.flush(cb);
    },
    flushSync() {
      release();
      boom.flushSync();
    },
  };
}

/**
 * pino's ISO timestamp, formatted at most once per millisecond: at thousands
 * of lines a second most lines share their millisecond with the one before
 * (pino's own isoTime formats a Date for every line).
 */
let lastMs = 0;
let lastStamp = '';
export function isoTimeCached(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastStamp = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastStamp;
}

export function createLogger(level: string, dest?: DestinationStream): Logger {
  const stream = dest ?? batchedStdout();
  return pino(
    {
      level,
      base: undefined,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
      timestamp: isoTimeCached,
    },
    stream,
  );
}

/** REDACT_PATHS as key lists: `headers["x-api-key"]` → ['headers', 'x-api-key']. */
const REDACT_KEYS: string[][] = REDACT_PATHS.map((p) => [...p.matchAll(/([^.[\]"]+)|\["([^"]+)"\]/g)].map((m) => m[2] ?? m[1]));

/** `rec` with every REDACT_PATHS value censored; the objects along a censored path are copied, never changed. */
export function redactCopy(rec: Record<string, unknown>): Record<string, unknown> {
  let out = rec;
  for (const keys of REDACT_KEYS) {
    let o: unknown = out;
    for (const k of keys) {
      o = o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined;
      if (o === undefined) break;
    }
    if (o === undefined) continue;
    out = { ...out };
    let parent = out;
    for (let i = 0; i < keys.length - 1; i++) {
      parent = parent[keys[i]] = { ...(parent[keys[i]] as Record<string, unknown>) };
    }
    parent[keys[keys.length - 1]] = '[redacted]';
  }
  return out;
}

/**
 * The access-log line writer: the same line pino would write for
 * `logger.info(rec, 'request')` (level, time, the logger's bindings, the
 * record, msg; REDACT_PATHS censored), serialised with one JSON.stringify
 * instead of pino's per-key serialiser (docs/performance.md, "The access
 * log"). A record JSON.stringify cannot take (a cycle a plugin made)
 * goes through pino, which can.
 */
export function accessLogWriter(logger: Logger): (rec: Record<string, unknown>) => void {
  const l = logger as unknown as Record<symbol, unknown>;
  const stream = l[pino.symbols.streamSym] as DestinationStream | undefined;
  const bindings = (l[pino.symbols.chindingsSym] as string | undefined) ?? '';
  if (!stream) return (rec) => logger.info(rec, 'request');
  return (rec) => {
    if (!logger.isLevelEnabled('info')) return;
    let json: string;
    try {
      json = JSON.stringify(redactCopy(rec));
    } catch {
      logger.info(rec, 'request');
      return;
    }
    stream.write(`{"level":"info"${isoTimeCached()}${bindings},${json.slice(1, -1)},"msg":"request"}\n`);
  };
}
