// Admission of a limited key's request and its settlement (docs/keys.md), over
// a LimitStore (memory, or Redis shared by the replicas). When the store
// cannot answer (Redis down or slow), `state.on_unavailable` decides: `open`
// serves the request unlimited (a warning at most every 10 s, and a count),
// `closed` answers 503.
import type { Logger } from 'pino';
import type { ClientKey } from '../config/load.js';
import { GatewayError } from '../errors.js';
import { rateHeaders, rejection, type Estimate, type LimitStore, type Reservation, type Rejection } from '../limits.js';

export class StateUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateUnavailable';
  }
}

export interface Admitted {
  reservation: Reservation;
  headers: Record<string, string>;
}

export class Limiter {
  /** Admissions the store could not answer (Redis unavailable): served unlimited (open) or refused with 503 (closed). */
  unavailable = 0;
  /** Requests refused by a key's limit, by the limit. */
  rejected: Record<Rejection, number> = { requests: 0, tokens: 0, parallel: 0, budget: 0 };
  /** Requests admitted by the store (Redis, or this process's memory) and by this replica from a grant (docs/keys.md#grants). */
  admitted: { store: number; grant: number } = { store: 0, grant: 0 };
  private warnedAt = 0;
  constructor(
    readonly store: LimitStore,
    private onUnavailable: 'open' | 'closed',
    private logger: Logger,
  ) {}

  configure(onUnavailable: 'open' | 'closed', grantMs: number): void {
    this.onUnavailable = onUnavailable;
    this.store.configure?.(grantMs);
  }

  /**
   * Admit a request of a limited key, reserving `estimate`: the reservation
   * and the headers to answer with, undefined when the store is unavailable
   * and the gateway fails open; throws the 429 (or the 503 when it fails closed).
   */
  async admit(key: ClientKey, id: string, estimate: Estimate): Promise<Admitted | undefined> {
    const limits = key.limits!;
    let r;
    try {
      r = await this.store.admit({ key: key.name, id, limits, estimate });
    } catch (err) {
      this.unavailable++;
      const now = Date.now();
      if (now - this.warnedAt > 10_000) {
        this.warnedAt = now;
        this.logger.warn({ err: (err as Error).message, on_unavailable: this.onUnavailable, unlimited_admissions: this.unavailable }, 'shared state unavailable: rate limits and budgets cannot be checked');
      }
      if (this.onUnavailable === 'closed')
        throw new GatewayError(503, 'service_unavailable_error', 'The gateway cannot check this key\'s limits right now (its shared state is unavailable); retry shortly.', { code: 'state_unavailable', headers: { 'retry-after': '1' } });
      return undefined;
    }
    if (!r.ok) {
      this.rejected[r.reason]++;
      throw rejection(key, limits, r);
    }
    if (r.reservation.grant) this.admitted.grant++;
    else this.admitted.store++;
    return { reservation: r.reservation, headers: rateHeaders(limits, r.view) };
  }

  /** Settle with what the request used (zero for one that failed): never throws, never waits on the caller. */
  settle(reservation: Reservation, actual: Estimate): void {
    this.store.settle(reservation, actual).catch((err: Error) => this.logger.warn({ err: err.message, request_id: reservation.id }, 'could not settle a reservation'));
  }
}
