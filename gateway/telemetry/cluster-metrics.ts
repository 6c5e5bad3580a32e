// /metrics of a node:cluster primary (workers > 1): every worker records its own metrics with
// the OpenTelemetry SDK; on each scrape the primary asks each live worker for a snapshot of its
// cumulative values and serves their sum, plus its own tensorgate.cluster.* metrics, in the
// same Prometheus text a single process prints (docs/metrics.md says how the sums are made).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Counter, UpDownCounter } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  type DataPoint, DataPointType, type Histogram, MeterProvider, type MetricData, type ScopeMetrics,
} from '@opentelemetry/sdk-metrics';
import { attributesKey, createMetricsServer, instrument, METRICS, type MetricSpec, type MetricsSnapshot, PROMETHEUS_OPTIONS, prometheusText } from './metrics';

export interface WorkerSnapshot {
  readonly id: number;
  /** undefined: the worker did not answer in time. */
  readonly snapshot: Promise<MetricsSnapshot | undefined>;
}

export interface ClusterMetricsOptions {
  readonly host: string;
  readonly port: number;
  readonly serviceName: string;
  /** Asks every listening worker for its snapshot (the IPC and its timeout are the caller's). */
  readonly ask: () => readonly WorkerSnapshot[];
  /** Other pages of the metrics port (/dashboard, telemetry/dashboard.ts). */
  readonly pages?: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
}

export interface ClusterMetrics {
  /** The /metrics server on the metrics port. */
  readonly server: Server;
  workerListening(): void;
  /** A worker is gone: its counters and histograms as of its last snapshot stay in the sums. */
  workerExited(id: number, wasListening: boolean, unexpected: boolean): void;
  /** The Prometheus text of one scrape. */
  scrape(): Promise<string>;
  /** The workers' metrics summed, as of a fresh question to each (for /dashboard). */
  snapshot(): Promise<MetricsSnapshot>;
  close(): Promise<void>;
}

export function createClusterMetrics(o: ClusterMetricsOptions): ClusterMetrics {
  const exporter = new PrometheusExporter(PROMETHEUS_OPTIONS);
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': o.serviceName }),
    readers: [exporter],
  });
  const meter = provider.getMeter('tensorgate');
  const own = new Map(METRICS.filter((m) => 'primary' in m).map((m) => [m.name, instrument(meter, m)]));
  const workers = own.get('tensorgate.cluster.workers') as UpDownCounter;
  const restarts = own.get('tensorgate.cluster.worker_restarts') as Counter;
  const stale = own.get('tensorgate.cluster.stale_snapshots') as Counter;

  const snapshots = new WorkerSnapshots(o.ask, stale);
  let running: Promise<string> | undefined;

  const gather = async (): Promise<string> => {
    const summed = await snapshots.sum();
    const mine = (await exporter.collect()).resourceMetrics;
    // Seeded after the sum (workers send what they recorded), as a single process seeds its own.
    return prometheusText(mine.resource, [...summed, ...mine.scopeMetrics], METRICS);
  };

  const scrape = (): Promise<string> => {
    // Concurrent scrapes share one gathering: one question per worker at a time.
    running ??= gather().finally(() => { running = undefined; });
    return running;
  };

  const server = createMetricsServer(o.host, o.port, scrape, o.pages);

  return {
    server,
    workerListening() {
      workers.add(1);
    },
    workerExited(id, wasListening, unexpected) {
      if (wasListening) workers.add(-1);
      if (unexpected) restarts.add(1);
      snapshots.exited(id);
    },
    scrape,
    snapshot: () => snapshots.sum(),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await provider.shutdown();
    },
  };
}

/** Each live worker's last snapshot, and what exited workers left behind, summed when asked. */
class WorkerSnapshots {
  /** The last snapshot of each live worker. */
  readonly #last = new Map<number, MetricsSnapshot>();
  /** What exited workers left behind, summed (monotonic metrics only). */
  #retired: MetricsSnapshot = [];
  /**
   * Exits seen while a sum was gathering: folded in by that sum, so no reply lands after its
   * worker was retired.
   */
  #pendingExits: number[] = [];
  /** The workers' answers being gathered (for a scrape or /dashboard). */
  #summing: Promise<MetricsSnapshot> | undefined;

  /** `stale` counts the workers that did not answer in time. */
  constructor(private readonly ask: ClusterMetricsOptions['ask'], private readonly stale: Counter) {}

  /** Concurrent scrapes and dashboard polls share one gathering: one question per worker at a time. */
  sum(): Promise<MetricsSnapshot> {
    return (this.#summing ??= this.#gather().finally(() => { this.#summing = undefined; }));
  }

  exited(id: number): void {
    if (this.#summing === undefined) this.#retire(id);
    else this.#pendingExits.push(id);
  }

  #retire(id: number): void {
    const s = this.#last.get(id);
    this.#last.delete(id);
    if (s !== undefined) this.#retired = mergeSnapshots([this.#retired, monotonicOnly(s)]);
  }

  /** Asks every worker; returns the sum of what they (and the exited ones) recorded. */
  async #gather(): Promise<MetricsSnapshot> {
    const replies = this.ask();
    const fresh = await Promise.all(replies.map(async ({ id, snapshot }) => ({ id, s: await snapshot })));
    for (const { id, s } of fresh) {
      if (s === undefined) this.stale.add(1);
      else this.#last.set(id, s);
    }
    for (const id of this.#pendingExits) this.#retire(id);
    this.#pendingExits = [];
    return mergeSnapshots([...this.#last.values(), this.#retired]);
  }
}

/** Drops up-down counters and gauges: the in-flight values of a worker that is gone. */
function monotonicOnly(s: MetricsSnapshot): MetricsSnapshot {
  return s.map((scope) => ({
    scope: scope.scope,
    metrics: scope.metrics.filter((m) => m.dataPointType === DataPointType.HISTOGRAM || (m.dataPointType === DataPointType.SUM && m.isMonotonic)),
  }));
}

type Time = DataPoint<unknown>['startTime'];
const earlier = (a: Time, b: Time): Time => (a[0] < b[0] || (a[0] === b[0] && a[1] <= b[1]) ? a : b);
const later = (a: Time, b: Time): Time => (earlier(a, b) === a ? b : a);

/**
 * Sums snapshots per scope, metric and attribute set: sums (monotonic or not) add, histograms
 * add bucket by bucket (same boundaries: every process declares the same buckets), with min/max
 * of the set; gauges add too (each is a per-process quantity: a pool's bytes and pages), except
 * those declared `clusterMerge: 'max'` (every worker's copy of the same backend set), whose
 * largest value is kept. Metrics keep their first-seen order.
 */
export function mergeSnapshots(snapshots: readonly MetricsSnapshot[]): ScopeMetrics[] {
  const scopes = new Map<string, { scope: ScopeMetrics['scope']; metrics: Map<string, { data: MetricData; points: Map<string, DataPoint<unknown>> }> }>();
  for (const snapshot of snapshots) {
    for (const sm of snapshot) {
      const scopeKey = `${sm.scope.name}@${sm.scope.version ?? ''}`;
      let scope = scopes.get(scopeKey);
      if (scope === undefined) scopes.set(scopeKey, scope = { scope: sm.scope, metrics: new Map() });
      for (const m of sm.metrics) {
        if (m.dataPointType === DataPointType.EXPONENTIAL_HISTOGRAM) continue; // none declared
        let merged = scope.metrics.get(m.descriptor.name);
        if (merged === undefined) scope.metrics.set(m.descriptor.name, merged = { data: m, points: new Map() });
        else if (merged.data.dataPointType !== m.dataPointType) continue;
        for (const p of m.dataPoints as readonly DataPoint<unknown>[]) {
          const key = attributesKey(p.attributes);
          const q = merged.points.get(key);
          merged.points.set(key, q === undefined ? p : MAX_MERGED.has(m.descriptor.name) ? maxPoint(q, p) : addPoint(m.dataPointType, q, p));
        }
      }
    }
  }
  return [...scopes.values()].map(({ scope, metrics }) => ({
    scope,
    metrics: [...metrics.values()].map(({ data, points }) => ({ ...data, dataPoints: [...points.values()] }) as MetricData),
  }));
}

const MAX_MERGED: ReadonlySet<string> = new Set((METRICS as readonly MetricSpec[]).filter((m) => m.clusterMerge === 'max').map((m) => m.name));

function maxPoint(a: DataPoint<unknown>, b: DataPoint<unknown>): DataPoint<unknown> {
  const value = Math.max(a.value as number, b.value as number);
  return { startTime: earlier(a.startTime, b.startTime), endTime: later(a.endTime, b.endTime), attributes: a.attributes, value };
}

/** Either value may be missing (or null: JSON's ±Infinity after IPC). */
function both(x: number | undefined, y: number | undefined, f: (u: number, v: number) => number): number | undefined {
  const u = typeof x === 'number' ? x : undefined;
  const v = typeof y === 'number' ? y : undefined;
  return u === undefined ? v : v === undefined ? u : f(u, v);
}

function addPoint(type: DataPointType, a: DataPoint<unknown>, b: DataPoint<unknown>): DataPoint<unknown> {
  const times = { startTime: earlier(a.startTime, b.startTime), endTime: later(a.endTime, b.endTime), attributes: a.attributes };
  switch (type) {
    case DataPointType.SUM:
    case DataPointType.GAUGE:
      return { ...times, value: (a.value as number) + (b.value as number) };
    default: {
      const x = a.value as Histogram;
      const y = b.value as Histogram;
      const bx = x.buckets.boundaries;
      const by = y.buckets.boundaries;
      if (bx.length !== by.length || bx.some((v, i) => v !== by[i])) return a;
      const value: Histogram = {
        buckets: { boundaries: bx, counts: x.buckets.counts.map((c, i) => c + (y.buckets.counts[i] ?? 0)) },
        count: x.count + y.count,
        sum: both(x.sum, y.sum, (u, v) => u + v),
        min: both(x.min, y.min, Math.min),
        max: both(x.max, y.max, Math.max),
      };
      return { ...times, value };
    }
  }
}
