// One structured access-log line per request, written asynchronously
// (pino.destination with sync: false; shared/STACK.md measured pino-http at a
// third of the throughput). Credentials are redacted even though the gateway
// never puts headers in a log line: a custom plugin might.
import pino, { type Logger, type DestinationStream } from 'pino';

export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
  'headers["x-goog-api-key"]',
  '*.headers["x-goog-api-key"]',
  'api_key',
  '*.api_key',
  'apiKey',
  '*.apiKey',
  'key',
];

export function createLogger(level: string, dest?: DestinationStream): Logger {
  // Asynchronous writes without a minimum batch: a quiet gateway still shows its lines at once.
  const stream = dest ?? pino.destination({ fd: 1, sync: false });
  return pino(
    {
      level,
      base: undefined,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    stream,
  );
}

/** Mask anything that looks like a bearer key or API key inside a free-text message. */
export function scrubSecrets(text: string): string {
  return text
    .replace(/(bearer\s+)[A-Za-z0-9._~+/=-]{6,}/gi, '$1[redacted]')
    .replace(/\b(sk|sk-ant|sk-proj|AIza|gw|key)[-_A-Za-z0-9]{8,}/g, '[redacted]');
}
