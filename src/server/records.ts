// Where a finished request's record goes. Each metered request has a record
// (src/usage.ts) that the core, the pipeline and the stream writer fill in;
// when its response closes, finishRecord settles its usage and cost, settles
// the key's limit reservation, copies the usage onto the access-log line and
// hands the record to the sinks (the usage store, metrics, traces).
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/load.js';
import type { RequestContext } from '../plugin.js';
import { modelCost, type RequestRecord } from '../usage.js';
import { UsageRecorder, openUsageBackend } from '../store/usage.js';
import { toMicros } from '../limits.js';
import type { Admitted, Limiter } from '../state/limiter.js';

/** Where finished request records go (the usage store, metrics): called soon after the response's close (in the same turn of the event loop, with the others of that turn), must not block. */
export type RecordSink = (rec: RequestRecord) => void;

/** How long a usage store that could not be opened waits before the next try. */
const STORE_RETRY_MS = 30_000;

/**
 * The usage store (src/store/usage.ts), when storage.usage.enabled: records
 * queue until it is open; a database that cannot be reached at start-up is
 * retried every STORE_RETRY_MS. (storage.* takes effect at start-up: a reload
 * does not reopen it.) `stop()` ends the retries.
 */
export async function openUsageStore(config: GatewayConfig, logger: Logger): Promise<{ recorder: UsageRecorder | undefined; stop(): void }> {
  const usageOpts = config.storage.usage;
  if (!usageOpts.enabled) return { recorder: undefined, stop() {} };
  const recorder = new UsageRecorder(usageOpts, logger);
  let retry: NodeJS.Timeout | undefined;
  const open = async () => {
    try {
      recorder.attach(await openUsageBackend(config));
    } catch (err) {
      logger.error({ error: (err as Error).message, backend: config.storage.url ? 'postgres' : 'sqlite' }, 'cannot open the usage store (storage.url / storage.usage); retrying in 30 s');
      retry = setTimeout(() => void open(), STORE_RETRY_MS);
      retry.unref();
    }
  };
  await open();
  return {
    recorder,
    stop() {
      if (retry) clearTimeout(retry);
    },
  };
}

/** Records handed to the sinks at once, at most: past it, a record's close hands them over itself. */
const SINK_BATCH = 512;

export class RecordFinisher {
  /** Finished records the sinks have not been handed yet (drain). */
  private pending: RequestRecord[] = [];
  private scheduled = false;

  constructor(
    /** Added to as the gateway starts (the usage store, traces, metrics). */
    private readonly sinks: RecordSink[],
    private readonly limiter: Limiter,
    private readonly logger: Logger,
  ) {}

  /** The request's record, finished when its response closes: usage settled, cost, onto the access line, to the sinks. */
  finish(ctx: RequestContext, line: Record<string, unknown>, admitted: Admitted | undefined): void {
    const r = ctx.record;
    r.status = line.status as number;
    r.latency_ms = line.latency_ms as number;
    ctx.meter.settle(r);
    const stream = ctx.log.stream as string | undefined;
    // A stream that did not complete (cut, abandoned): whatever was seen is partial.
    if (r.stream && stream !== 'completed' && r.usage_source !== 'reported') r.usage_source = 'partial';
    r.error_type = (line.error as string | undefined) ?? (ctx.log.stream_error as string | undefined) ?? (line.client_closed ? 'client_closed' : undefined);
    r.key ??= ctx.client?.name;
    r.model ??= r.requested_model;
    r.cost_usd = r.usage && r.model ? modelCost(r.usage, ctx.config.models.get(r.model)) : null;
    // The key's reservation settled with what the request used (nothing, when it failed before any usage).
    if (admitted)
      this.limiter.settle(admitted.reservation, { tokens: r.usage ? r.usage.input_tokens + r.usage.output_tokens : 0, micros: r.cost_usd ? toMicros(r.cost_usd) : 0 });
    if (r.usage) {
      line.usage = r.usage;
      line.cost_usd = r.cost_usd;
      if (r.usage_source === 'partial') line.usage_partial = true;
    }
    if (!this.sinks.length) return;
    // The sinks are handed the records of this turn of the event loop
    // together (drain): each sink's code then runs over a batch, hot, instead
    // of once between two requests' work, which costs it several times more
    // (docs/performance.md, "What observability costs").
    this.pending.push(r);
    if (this.pending.length >= SINK_BATCH) this.drain();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.drain);
    }
  }

  /**
   * Hand the finished records to the sinks, sink by sink, in the order they
   * finished. Also called before anything reads what the sinks hold (a
   * scrape, a flush of the usage store or of the traces, shutdown).
   */
  readonly drain = (): void => {
    this.scheduled = false;
    const batch = this.pending;
    if (!batch.length) return;
    this.pending = [];
    for (const sink of this.sinks)
      for (const r of batch) {
        try {
          sink(r);
        } catch (err) {
          this.logger.error({ err, request_id: r.request_id }, 'a usage record sink failed');
        }
      }
  };
}
