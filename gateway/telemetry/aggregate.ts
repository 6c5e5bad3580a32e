// The metrics recorded per request: aggregated here in plain maps instead of through
// the OpenTelemetry SDK's instruments, which hash every call's attributes (sort the keys, build a
// string) and allocate per call — in an allocation profile of 600 KB binary requests at c=8, 30 %
// of the gateway's JS heap allocation was theirs (bench/RESULTS.md, "Issue 16: CPU per request").
// The caller names each series with a key it builds cheaply (the attribute values in a fixed
// order); the attributes themselves are made once, when a series first appears. At collection the
// series become MetricData exactly as the SDK reports a cumulative counter, up-down counter or
// explicit-bucket histogram (same descriptor, temporality, buckets, min/max, start and end time),
// so the Prometheus text, the seeds and the cluster's sums are unchanged.
import type { Attributes } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import type { DataPoint, Histogram as HistogramValue, MetricData } from '@opentelemetry/sdk-metrics';

type Time = DataPoint<unknown>['startTime'];

/** One series of a sum: a caller that keeps it adds to `value` itself. */
export interface Series {
  readonly attributes: Attributes;
  readonly startTime: Time;
  value: number;
}

/** One series of a histogram: a caller that keeps it records through HistogramAggregate.recordIn. */
export interface HistogramSeries {
  readonly attributes: Attributes;
  readonly startTime: Time;
  readonly counts: number[];
  count: number;
  sum: number;
  min: number;
  max: number;
}

/** A counter or up-down counter: a sum per series. */
export class SumAggregate {
  readonly #series = new Map<string, Series>();

  /** Adds `v` to the series `key`; `attributes()` is called only when the series is new. */
  add(key: string, attributes: () => Attributes, v: number): void {
    const s = this.#series.get(key);
    if (s !== undefined) s.value += v;
    else this.#series.set(key, { attributes: attributes(), startTime: hrTime(), value: v });
  }

  /** The series `key`, made now (at 0, and reported so) when new: its `value` is added to directly from then on. */
  series(key: string, attributes: () => Attributes): Series {
    let s = this.#series.get(key);
    if (s === undefined) this.#series.set(key, s = { attributes: attributes(), startTime: hrTime(), value: 0 });
    return s;
  }

  points(endTime: Time): DataPoint<number>[] {
    return [...this.#series.values()].map((s) => ({ startTime: s.startTime, endTime, attributes: s.attributes, value: s.value }));
  }
}

/** An explicit-bucket histogram per series: bucket i counts values ≤ boundaries[i] (as the SDK), the last the rest. */
export class HistogramAggregate {
  readonly #series = new Map<string, HistogramSeries>();

  constructor(readonly boundaries: readonly number[]) {}

  record(key: string, attributes: () => Attributes, v: number): void {
    if (Number.isNaN(v)) return;
    this.recordIn(this.series(key, attributes), v);
  }

  /** The series `key`, made now (empty, and reported so) when new: recorded in with recordIn from then on. */
  series(key: string, attributes: () => Attributes): HistogramSeries {
    let s = this.#series.get(key);
    if (s === undefined) {
      const counts = new Array<number>(this.boundaries.length + 1).fill(0);
      s = { attributes: attributes(), startTime: hrTime(), counts, count: 0, sum: 0, min: Infinity, max: -Infinity };
      this.#series.set(key, s);
    }
    return s;
  }

  /** `v` in the series `s` (of this histogram's series()). */
  recordIn(s: HistogramSeries, v: number): void {
    if (Number.isNaN(v)) return;
    s.count++;
    s.sum += v;
    if (v < s.min) s.min = v;
    if (v > s.max) s.max = v;
    const b = this.boundaries;
    let i = 0;
    while (i < b.length && b[i]! < v) i++;
    s.counts[i]!++;
  }

  points(endTime: Time): DataPoint<HistogramValue>[] {
    return [...this.#series.values()].map((s) => ({
      startTime: s.startTime, endTime, attributes: s.attributes,
      value: { buckets: { boundaries: [...this.boundaries], counts: [...s.counts] }, count: s.count, sum: s.sum, min: s.min, max: s.max },
    }));
  }
}

/** The series of `a` as `metric` makes them (metrics.ts emptyMetric), or undefined when it has none. */
export function collected(a: SumAggregate | HistogramAggregate,
  metric: (points: DataPoint<number>[] | DataPoint<HistogramValue>[]) => MetricData): MetricData | undefined {
  const points = a.points(hrTime());
  return points.length === 0 ? undefined : metric(points);
}
