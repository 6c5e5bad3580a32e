// The cluster primary's /metrics (workers > 1): the sum of the workers' snapshots prints what one
// process that saw every request would print; stale and exited workers keep totals monotonic.
import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { createClusterMetrics, mergeSnapshots, type WorkerSnapshot } from '../../../gateway/telemetry/cluster-metrics';
import { Ledger } from '../../../gateway/infer/ledger';
import { createMetrics, METRICS, type Metrics, type MetricsSnapshot, prometheusName } from '../../../gateway/telemetry/metrics';
import type { RequestRecord } from '../../../gateway/telemetry/record';
import { prometheusSamples } from '../../support/prometheus';

const known = (): boolean => true;

/** An inference record with exact binary-fraction durations, so sums are order-independent. */
function infer(status: number, durationNs: number, encoding: string, bytes: number): RequestRecord {
  const ledger = new Ledger();
  ledger.startedAt('decode', 1);
  ledger.endedAt('decode', 1 + durationNs / 2);
  ledger.bytes('decode', bytes, bytes);
  ledger.copied('decode', bytes);
  ledger.allocated('decode');
  return {
    route: 'infer', method: 'POST', status, startNs: 0, endNs: durationNs, declaredBytes: bytes,
    model: 'identity_fp32', encoding, ledger, upstreamStatus: status === 200 ? 0 : 5, upstreamDurationNs: durationNs / 4,
  };
}

const RECORDS: readonly RequestRecord[] = [
  infer(200, 500_000_000, 'json', 64),
  infer(200, 250_000_000, 'binary', 4096),
  infer(404, 125_000_000, 'json', 10),
  infer(200, 2_000_000_000, 'json', 64),
  { route: 'health_ready', method: 'GET', status: 200, startNs: 0, endNs: 62_500_000, declaredBytes: 0, errorCode: undefined },
  { route: 'infer', method: 'POST', status: 400, startNs: 0, endNs: 31_250_000, declaredBytes: 3, errorCode: 'GW_ERR_DECODE_JSON_INVALID' },
];

function serve(m: Metrics, records: readonly RequestRecord[], leaveInFlight = 0): void {
  for (const r of records) {
    m.requestStarted(r.route, r.declaredBytes);
    m.record(r, known);
  }
  for (let i = 0; i < leaveInFlight; i++) m.requestStarted('infer', 100);
}

/** What crosses cluster IPC: JSON. */
async function snapshotOf(m: Metrics): Promise<MetricsSnapshot> {
  return JSON.parse(JSON.stringify(await m.snapshot())) as MetricsSnapshot;
}

const serializer = new PrometheusSerializer(undefined, false, undefined, false, true);
const text = (s: MetricsSnapshot): string =>
  serializer.serialize({ resource: resourceFromAttributes({ 'service.name': 'tensorgate' }), scopeMetrics: [...s] });
const sortedLines = (t: string): string[] => t.split('\n').sort();

const COUNT_200 = 'http_server_request_duration_count{http_route="infer",http_request_method="POST",http_response_status_code="200",network_protocol_version="1.1",model="identity_fp32",encoding="json"}';
const IN_FLIGHT = 'tensorgate_requests_in_flight{http_route="infer"}';

describe('mergeSnapshots', () => {
  const made: Metrics[] = [];
  const metrics = (): Metrics => {
    const m = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
    made.push(m);
    return m;
  };
  afterAll(async () => { await Promise.all(made.map((m) => m.close())); });

  test('two workers summed print what one process that saw every request prints', async () => {
    const [a, b, all] = [metrics(), metrics(), metrics()];
    serve(a, RECORDS.filter((_, i) => i % 2 === 0), 1);
    serve(b, RECORDS.filter((_, i) => i % 2 === 1), 2);
    serve(all, RECORDS, 3);
    const merged = text(mergeSnapshots([await snapshotOf(a), await snapshotOf(b)]));
    expect(sortedLines(merged)).toEqual(sortedLines(text(await snapshotOf(all))));
    const m = prometheusSamples(merged);
    expect(m.get(COUNT_200)).toBe(2);
    expect(m.get(IN_FLIGHT)).toBe(3);
    // Buckets add bucket by bucket: 0.5 s and 2 s.
    expect(m.get(COUNT_200.replace('_count{', '_bucket{').replace('}', ',le="0.5"}'))).toBe(1);
    expect(m.get(COUNT_200.replace('_count{', '_bucket{').replace('}', ',le="2.5"}'))).toBe(2);
    expect(m.get(COUNT_200.replace('_count{', '_sum{'))).toBe(2.5);
  });

  test('the backend-state gauge is the largest any worker reports (each keeps its own copy of the set); their counters add', async () => {
    const stats = (ready: number, ejected: number, ejections: number) => () => ({
      byState: { connecting: 0, ready, unhealthy: 0, ejected }, ejections, retries: 1,
    });
    const a = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate', backends: stats(3, 0, 1) });
    const b = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate', backends: stats(2, 1, 2) });
    made.push(a, b);
    const m = prometheusSamples(text(mergeSnapshots([await snapshotOf(a), await snapshotOf(b)])));
    expect([m.get('tensorgate_upstream_backends{state="ready"}'), m.get('tensorgate_upstream_backends{state="ejected"}')]).toEqual([3, 1]);
    expect([m.get('tensorgate_upstream_ejections_total'), m.get('tensorgate_upstream_retries_total')]).toEqual([3, 2]);
  });

  test('one snapshot merges to itself; nothing merges to nothing', async () => {
    const a = metrics();
    serve(a, RECORDS);
    const s = await snapshotOf(a);
    expect(text(mergeSnapshots([s]))).toBe(text(s));
    expect(mergeSnapshots([])).toEqual([]);
  });
});

describe('createClusterMetrics', () => {
  test('stale workers count with their previous snapshot; exited workers keep their counters, not their in-flight', async () => {
    const w1 = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
    const w2 = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
    serve(w1, [RECORDS[0]!], 1);
    serve(w2, [RECORDS[3]!, RECORDS[3]!], 0);

    let answers: Map<number, () => Promise<MetricsSnapshot | undefined>> = new Map([
      [1, () => snapshotOf(w1)],
      [2, () => snapshotOf(w2)],
    ]);
    let gate: Promise<void> = Promise.resolve();
    const cm = createClusterMetrics({
      host: '127.0.0.1', port: 0, serviceName: 'tensorgate',
      ask: (): WorkerSnapshot[] => [...answers].map(([id, f]) => ({ id, snapshot: gate.then(f) })),
    });
    try {
      cm.workerListening();
      cm.workerListening();
      let m = prometheusSamples(await cm.scrape());
      expect(m.get(COUNT_200)).toBe(3);
      expect(m.get(IN_FLIGHT)).toBe(1);
      expect(m.get('tensorgate_cluster_workers')).toBe(2);

      // Worker 2 does not answer: its previous snapshot counts, and the scrape says so.
      serve(w2, [RECORDS[0]!]);
      answers.set(2, async () => undefined);
      m = prometheusSamples(await cm.scrape());
      expect(m.get(COUNT_200)).toBe(3);
      expect(m.get('tensorgate_cluster_stale_snapshots_total')).toBe(1);

      // Worker 1 dies: its counters stay, its request in flight goes.
      answers = new Map([[2, () => snapshotOf(w2)]]);
      cm.workerExited(1, true, true);
      m = prometheusSamples(await cm.scrape());
      expect(m.get(COUNT_200)).toBe(4);
      expect(m.get(IN_FLIGHT)).toBe(0);
      expect(m.get('tensorgate_cluster_workers')).toBe(1);
      expect(m.get('tensorgate_cluster_worker_restarts_total')).toBe(1);

      // Worker 2 answers a scrape, then exits before the scrape is done: its fresh values are kept once.
      serve(w2, [RECORDS[0]!]);
      let open!: () => void;
      gate = new Promise((r) => { open = r; });
      const during = cm.scrape();
      cm.workerExited(2, true, false);
      open();
      expect(prometheusSamples(await during).get(COUNT_200)).toBe(5);
      answers = new Map();
      m = prometheusSamples(await cm.scrape());
      expect(m.get(COUNT_200)).toBe(5);
      expect(m.get('tensorgate_cluster_worker_restarts_total')).toBe(1);
    } finally {
      await cm.close();
      await w1.close();
      await w2.close();
    }
  });

  test('fresh workers: every declared metric is in the first scrape, seeded at 0, and the seeds do not disturb the sums', async () => {
    const w1 = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
    const w2 = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
    const cm = createClusterMetrics({
      host: '127.0.0.1', port: 0, serviceName: 'tensorgate',
      ask: (): WorkerSnapshot[] => [{ id: 1, snapshot: snapshotOf(w1) }, { id: 2, snapshot: snapshotOf(w2) }],
    });
    try {
      const first = await cm.scrape();
      for (const spec of METRICS) expect(first).toContain(`# HELP ${prometheusName(spec)} `);
      let m = prometheusSamples(first);
      expect([m.get('tensorgate_cluster_workers'), m.get('tensorgate_cluster_stale_snapshots_total'), m.get('tensorgate_cluster_worker_restarts_total')]).toEqual([0, 0, 0]);
      expect(m.get('tensorgate_hop_copied_total{hop="decode"}')).toBe(0);
      expect(m.get('tensorgate_hop_duration_count{hop="decode"}')).toBe(0);
      expect(m.get('tensorgate_buffer_pool_dropped_total{reason="in_flight"}')).toBe(0);

      serve(w1, [RECORDS[0]!]);
      serve(w2, [RECORDS[0]!, RECORDS[1]!]);
      m = prometheusSamples(await cm.scrape());
      expect(m.get('tensorgate_hop_copied_total{hop="decode",model="identity_fp32",encoding="json"}')).toBe(128);
      // Both workers created the pair's hop counters at 0: summed, still 0.
      expect(m.get('tensorgate_hop_copied_total{hop="triton",model="identity_fp32",encoding="json"}')).toBe(0);
      expect(m.get('tensorgate_hop_duration_count{hop="decode",model="identity_fp32",encoding="binary"}')).toBe(1);
      expect([m.get('tensorgate_hop_copied_total{hop="decode"}'), m.get('tensorgate_hop_duration_count{hop="decode"}')]).toEqual([0, 0]);
    } finally {
      await cm.close();
      await w1.close();
      await w2.close();
    }
  });

  test('concurrent scrapes ask each worker once', async () => {
    let asked = 0;
    const cm = createClusterMetrics({
      host: '127.0.0.1', port: 0, serviceName: 'tensorgate',
      ask: () => { asked++; return [{ id: 1, snapshot: new Promise((r) => setTimeout(() => r([]), 20)) }]; },
    });
    try {
      const [x, y] = await Promise.all([cm.scrape(), cm.scrape()]);
      expect(x).toBe(y);
      expect(asked).toBe(1);
    } finally {
      await cm.close();
    }
  });
});
