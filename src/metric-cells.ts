// Counters and histograms for the metrics every request records (src/metrics.ts).
// prom-client's own Counter and Histogram validate the label object and build a
// hash string from it on every increment or observation (nine a request), then
// look the series up by that string, even through a child from labels(). These
// keep each series as a plain object found through one map per label,
// update it in place, and hand prom-client's registry the same values its
// own metrics would (get(), and getForPromString() for the text), so that the
// exposition, and the several-workers aggregation, are unchanged.
// docs/observability.md, "Metrics".
import type { Metric, Registry } from 'prom-client';

type Labels = Record<string, string>;

/**
 * One series per tuple of label values (in labelNames order), made on its
 * first update; a map per label, so that a lookup hashes no new string.
 */
class Series<S> {
  private root = new Map<string, unknown>();
  /** In the order of their first update, as prom-client lists its series. */
  list: S[] = [];

  constructor(
    private readonly names: readonly string[],
    private readonly make: (labels: Labels) => S,
  ) {}

  /** The series of these values, made when it does not exist. */
  of(values: readonly string[]): S {
    let m = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = m.get(values[i]) as Map<string, unknown> | undefined;
      if (!next) m.set(values[i], (next = new Map()));
      m = next;
    }
    let s = m.get(values[last]) as S | undefined;
    if (s === undefined) {
      const labels: Labels = {};
      for (let i = 0; i < this.names.length; i++) labels[this.names[i]] = values[i];
      s = this.make(labels);
      m.set(values[last], s);
      this.list.push(s);
    }
    return s;
  }

  clear(): void {
    this.root = new Map();
    this.list = [];
  }
}

interface Options {
  name: string;
  help: string;
  labelNames: readonly string[];
  registers: Registry[];
}

abstract class CellMetric {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly aggregator = 'sum' as const;

  constructor(o: Options) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames;
    // The registry lists any object with a name, a type and get() (prom-client's cluster aggregation registers such objects too).
    for (const r of o.registers) r.registerMetric(this as unknown as Metric);
  }

  abstract reset(): void;
}

interface CounterValue {
  value: number;
  labels: Labels;
}

/** A counter (prom-client's Counter: the same checks, the same sums in the same order). */
export class CellCounter extends CellMetric {
  readonly type = 'counter' as const;
  private series: Series<CounterValue>;

  constructor(o: Options) {
    super(o);
    this.series = new Series(o.labelNames, (labels) => ({ value: 0, labels }));
  }

  /** Add `value` (default 1) to the series of these label values. */
  inc(values: readonly string[], value = 1): void {
    if (value && !Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    if (value < 0) throw new Error('It is not possible to decrease a counter');
    this.series.of(values).value += value;
  }

  async get() {
    return { help: this.help, name: this.name, type: this.type, values: [...this.series.list], aggregator: this.aggregator };
  }

  reset(): void {
    this.series.clear();
  }
}

interface HistogramSeries {
  labels: Labels;
  /** Observations per bucket (not cumulative), in `buckets` order; above the last one, none. */
  counts: number[];
  sum: number;
  count: number;
}

interface BucketValue {
  labels: Record<string, string | number>;
  sharedLabels: Labels;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

/** A histogram (prom-client's Histogram without exemplars: the same buckets, sums and exposition). */
export class CellHistogram extends CellMetric {
  readonly type = 'histogram' as const;
  private series: Series<HistogramSeries>;

  constructor(
    o: Options,
    readonly buckets: readonly number[],
  ) {
    super(o);
    this.series = new Series(o.labelNames, (labels) => ({ labels, counts: buckets.map(() => 0), sum: 0, count: 0 }));
  }

  /** Observe `value` in the series of these label values. */
  observe(values: readonly string[], value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const s = this.series.of(values);
    const b = this.buckets;
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]) {
        s.counts[i]++;
        break;
      }
    }
    s.sum += value;
    s.count += 1;
  }

  /** As prom-client's getForPromString(): bucket lines with `le`, the series' labels shared; then +Inf, _sum, _count. */
  async getForPromString() {
    const bucket = `${this.name}_bucket`;
    const values: BucketValue[] = [];
    for (const s of this.series.list) {
      let acc = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        acc += s.counts[i];
        values.push({ labels: { le: this.buckets[i] }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's get(): the same values with each series' labels merged in (what the cluster aggregation reads). */
  async get() {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })),
    };
  }

  reset(): void {
    this.series.clear();
  }
}
