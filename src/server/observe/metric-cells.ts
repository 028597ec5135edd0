/**
 * Counters and histograms that cost a few additions per observation. prom-client hashes the label set of every
 * observation (`inc`, `observe`, even through a `labels()` child); here a label set is resolved once, when its cell is
 * first asked for, and the request path keeps the cell and adds to plain numbers. The registry reads the cells only at
 * scrape time: each class below is registered in a prom-client Registry as a metric of its own and answers `get()` with
 * the same JSON a prom-client Counter or Histogram would give for the same observations (same names, types, label
 * order, bucket series, aggregator), so the text format and the cluster's aggregation (AggregatorRegistry) are
 * unchanged.
 */
import type { Metric, MetricObjectWithValues, MetricValue, Registry } from 'prom-client';

export type Labels = Record<string, string>;

/** One label set of a counter: add to `value`. */
export interface CounterCell {
  value: number;
}

/** One label set of a histogram. */
export class HistogramCell {
  /** Observations per bucket (not cumulative): `counts[i]` holds those in (bounds[i-1], bounds[i]]. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/** The label set in the declared order of the label names (the order prom-client would print them in). */
function ordered(labelNames: readonly string[], labels: Labels): Labels {
  const out: Labels = {};
  for (const n of labelNames) out[n] = String(labels[n] ?? '');
  return out;
}

const idOf = (labelNames: readonly string[], labels: Labels): string => labelNames.map((n) => labels[n] ?? '').join('\u0000');

abstract class CellMetric<C> {
  readonly aggregator = 'sum' as const;
  protected readonly cells: Array<{ labels: Labels; cell: C }> = [];
  private readonly byId = new Map<string, C>();

  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  protected abstract create(): C;

  /** The cell of `labels`, made (and listed from now on, at zero) the first time it is asked for. Keep it. */
  cell(labels: Labels = {}): C {
    const id = idOf(this.labelNames, labels);
    let c = this.byId.get(id);
    if (!c) {
      c = this.create();
      this.byId.set(id, c);
      this.cells.push({ labels: ordered(this.labelNames, labels), cell: c });
    }
    return c;
  }
}

/** A counter (type `counter`, summed across workers). */
export class CellCounter extends CellMetric<CounterCell> {
  readonly type = 'counter' as const;

  constructor(name: string, help: string, labelNames: readonly string[], registry: Registry) {
    super(name, help, labelNames, registry);
    if (labelNames.length === 0) this.cell();
  }

  protected create(): CounterCell {
    return { value: 0 };
  }

  /**
   * For a counter of one label: a lookup of the cell of each value of that label, kept in a map of its own (no label
   * object is built again for a value already seen).
   */
  byLabel(name: string): (value: string) => CounterCell {
    const cells = new Map<string, CounterCell>();
    return (value) => {
      let c = cells.get(value);
      if (!c) {
        c = this.cell({ [name]: value });
        cells.set(value, c);
      }
      return c;
    };
  }

  async get(): Promise<MetricJson> {
    const values = this.cells.map(({ labels, cell }) => ({ labels: { ...labels }, value: cell.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values } as unknown as MetricJson;
  }

  reset(): void {
    for (const { cell } of this.cells) cell.value = 0;
  }
}

/** A histogram (type `histogram`: `_bucket` series with `le`, then `_sum` and `_count`; summed across workers). */
export class CellHistogram extends CellMetric<HistogramCell> {
  readonly type = 'histogram' as const;

  constructor(name: string, help: string, labelNames: readonly string[], private readonly bounds: readonly number[], registry: Registry) {
    super(name, help, labelNames, registry);
    if (labelNames.length === 0) this.cell();
  }

  protected create(): HistogramCell {
    return new HistogramCell(this.bounds);
  }

  async get(): Promise<MetricJson> {
    const values: Array<MetricValue<string> & { metricName: string }> = [];
    const bucket = `${this.name}_bucket`;
    for (const { labels, cell } of this.cells) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += cell.counts[i]!;
        values.push({ metricName: bucket, labels: { le: this.bounds[i]!, ...labels } as never, value: acc });
      }
      values.push({ metricName: bucket, labels: { le: '+Inf', ...labels } as never, value: cell.count });
      values.push({ metricName: `${this.name}_sum`, labels: { ...labels }, value: cell.sum });
      values.push({ metricName: `${this.name}_count`, labels: { ...labels }, value: cell.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values } as unknown as MetricJson;
  }

  reset(): void {
    for (const { cell } of this.cells) cell.reset();
  }
}
