// Every metric tensorgate exports, declared in one list (docs/metrics.md is generated from it and
// a test keeps them in sync), recorded with the OpenTelemetry metrics SDK and served in
// Prometheus text format on the metrics port at /metrics.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Attributes, Counter, Histogram, Meter, Observable, UpDownCounter } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, type ScopeMetrics } from '@opentelemetry/sdk-metrics';
import type { BufferPoolStats } from '../upstream/buffer-pool';
import { HOPS } from './ledger';
import type { RequestRecord } from './record';

/** Sub-millisecond to multi-second, in seconds. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface MetricSpec {
  readonly name: string;
  readonly kind: 'histogram' | 'counter' | 'updown' | 'gauge';
  readonly unit: string;
  readonly attributes: readonly string[];
  readonly description: string;
  /** Recorded by the node:cluster primary only (workers > 1); every other metric by each gateway process. */
  readonly primary?: true;
  /** Read from the buffer pool's own counts when scraped (observable instruments), not recorded per request. */
  readonly observed?: true;
}

/** The name the Prometheus exporter gives a metric: dots become underscores, counters end in _total. */
export function prometheusName(m: Pick<MetricSpec, 'name' | 'kind'>): string {
  return m.name.replace(/\./g, '_') + (m.kind === 'counter' ? '_total' : '');
}

const INFER_ATTRS = ['model', 'encoding'] as const;

export const METRICS = [
  { name: 'http.server.request.duration', kind: 'histogram', unit: 's',
    attributes: ['http.route', 'http.request.method', 'http.response.status_code', ...INFER_ATTRS],
    description: 'Duration of HTTP requests (OpenTelemetry semantic conventions), with the model and request encoding of inferences.' },
  { name: 'tensorgate.hop.duration', kind: 'histogram', unit: 's',
    attributes: ['hop', ...INFER_ATTRS], description: 'Duration of each hop of an inference (ingress_read … egress_write).' },
  { name: 'tensorgate.hop.bytes', kind: 'counter', unit: 'By',
    attributes: ['hop', 'direction', ...INFER_ATTRS], description: 'Bytes into (direction=in) and out of (direction=out) each hop.' },
  { name: 'tensorgate.hop.copied', kind: 'counter', unit: 'By',
    attributes: ['hop', ...INFER_ATTRS], description: 'Bytes copied by tensorgate\'s own code in each hop (the copy ledger).' },
  { name: 'tensorgate.hop.allocations', kind: 'counter', unit: '{buffer}',
    attributes: ['hop', ...INFER_ATTRS], description: 'Buffers allocated by tensorgate\'s own code in each hop; a message buffer reused from the pool (`buffers.poolBytes`) is no allocation.' },
  { name: 'tensorgate.upstream.duration', kind: 'histogram', unit: 's',
    attributes: ['rpc.method', 'rpc.grpc.status_code', 'model'], description: 'Duration of the ModelInfer call to Triton, by gRPC status.' },
  { name: 'tensorgate.requests.in_flight', kind: 'updown', unit: '{request}',
    attributes: ['http.route'], description: 'HTTP requests being served.' },
  { name: 'tensorgate.request_bytes.in_flight', kind: 'updown', unit: 'By',
    attributes: ['http.route'], description: 'Declared body bytes (Content-Length) of the requests being served.' },
  { name: 'tensorgate.errors', kind: 'counter', unit: '{error}',
    attributes: ['error.code', 'http.route'], description: 'Error answers by GW_ERR_* code (docs/errors.md).' },
  { name: 'tensorgate.buffer_pool.hits', kind: 'counter', unit: '{buffer}', observed: true,
    attributes: [], description: 'Message buffers taken from the pool: a reused page, no allocation (`buffers.poolBytes`).' },
  { name: 'tensorgate.buffer_pool.misses', kind: 'counter', unit: '{buffer}', observed: true,
    attributes: [], description: 'Message buffers of a pooled size (64 KiB up to half of `buffers.poolBytes` plus 4 KiB) that found no idle page and allocated one; other sizes are never pooled and not counted.' },
  { name: 'tensorgate.buffer_pool.dropped', kind: 'counter', unit: '{buffer}', observed: true,
    attributes: ['reason'], description: 'Pages the pool let go: `reason=bound` evicted or not kept to stay within `buffers.poolBytes`; `reason=in_flight` the upstream stream closed before its write completed, so the page may still be read.' },
  { name: 'tensorgate.buffer_pool.retained', kind: 'gauge', unit: 'By', observed: true,
    attributes: [], description: 'Idle bytes the pool keeps for reuse (whole pages), at most `buffers.poolBytes`.' },
  { name: 'tensorgate.buffer_pool.in_use', kind: 'gauge', unit: '{buffer}', observed: true,
    attributes: [], description: 'Pooled pages held by requests being served or by upstream writes still in progress.' },
  { name: 'tensorgate.cluster.workers', kind: 'updown', unit: '{worker}', attributes: [], primary: true,
    description: 'Worker processes listening (workers > 1).' },
  { name: 'tensorgate.cluster.worker_restarts', kind: 'counter', unit: '{worker}', attributes: [], primary: true,
    description: 'Workers that exited unexpectedly and were replaced (after a backoff of 100 ms doubling up to 30 s while a worker keeps failing).' },
  { name: 'tensorgate.cluster.stale_snapshots', kind: 'counter', unit: '{snapshot}', attributes: [], primary: true,
    description: 'Scrapes on which a worker did not send its metrics within 1 s; its previous snapshot was counted instead.' },
] as const satisfies readonly MetricSpec[];

type ProcessMetric = Exclude<(typeof METRICS)[number], { primary: true } | { observed: true }>;
type Instruments = {
  [K in ProcessMetric['name']]: Histogram | Counter | UpDownCounter;
};

/**
 * One process's cumulative metrics as the OpenTelemetry SDK collects them; plain data (crosses
 * cluster IPC as JSON).
 */
export type MetricsSnapshot = readonly ScopeMetrics[];

export interface Metrics {
  /** The /metrics server on the metrics port (none in a cluster worker: the primary serves the sum). */
  readonly server: Server | undefined;
  requestStarted(route: string, declaredBytes: number): void;
  record(r: RequestRecord, knownModel: (name: string) => boolean): void;
  /** The current cumulative values, for the cluster primary's /metrics. */
  snapshot(): Promise<MetricsSnapshot>;
  close(): Promise<void>;
}

export function instrument(meter: Meter, m: MetricSpec): Histogram | Counter | UpDownCounter {
  switch (m.kind) {
    case 'histogram':
      return meter.createHistogram(m.name, { unit: m.unit, description: m.description, advice: { explicitBucketBoundaries: DURATION_BUCKETS } });
    case 'counter':
      return meter.createCounter(m.name, { unit: m.unit, description: m.description });
    case 'updown':
    case 'gauge': // only observed so far (observePool)
      return meter.createUpDownCounter(m.name, { unit: m.unit, description: m.description });
  }
}

/** The pool's metrics, read from its counts at each collection: nothing on the request path. */
function observePool(meter: Meter, counts: () => BufferPoolStats): void {
  const o = new Map<string, Observable>();
  for (const m of METRICS as readonly MetricSpec[]) {
    if (m.observed !== true) continue;
    const opts = { unit: m.unit, description: m.description };
    o.set(m.name, m.kind === 'gauge' ? meter.createObservableGauge(m.name, opts) : meter.createObservableCounter(m.name, opts));
  }
  const get = (name: string): Observable => o.get(name)!;
  meter.addBatchObservableCallback((r) => {
    const s = counts();
    r.observe(get('tensorgate.buffer_pool.hits'), s.hits);
    r.observe(get('tensorgate.buffer_pool.misses'), s.misses);
    r.observe(get('tensorgate.buffer_pool.dropped'), s.droppedBound, { reason: 'bound' });
    r.observe(get('tensorgate.buffer_pool.dropped'), s.droppedInFlight, { reason: 'in_flight' });
    r.observe(get('tensorgate.buffer_pool.retained'), s.retainedBytes);
    r.observe(get('tensorgate.buffer_pool.in_use'), s.inUse);
  }, [...o.values()]);
}

const seconds = (ns: bigint): number => Number(ns) / 1e9;

/** The exporter's options, shared with the cluster primary's serializer so both print alike. */
export const PROMETHEUS_OPTIONS = { preventServerStart: true, withoutScopeInfo: true } as const;

/** The /metrics server: `handle` answers GET /metrics, anything else is 404. */
export function createMetricsServer(host: string, port: number, handle: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer((req, res) => {
    if (req.url === '/metrics' || req.url?.startsWith('/metrics?')) handle(req, res);
    else {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('Not Found');
    }
  });
  server.listen(port, host);
  return server;
}

/** `port` undefined: no /metrics server (a cluster worker; the primary asks for snapshot()). */
export function createMetrics(options: { host: string; port: number | undefined; serviceName: string; bufferPool?: () => BufferPoolStats }): Metrics {
  const exporter = new PrometheusExporter(PROMETHEUS_OPTIONS);
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    readers: [exporter],
  });
  const meter = provider.getMeter('tensorgate');
  const ins = Object.fromEntries(METRICS.filter((m: MetricSpec) => m.primary !== true && m.observed !== true)
    .map((m) => [m.name, instrument(meter, m)])) as Instruments;
  if (options.bufferPool !== undefined) observePool(meter, options.bufferPool);
  const h = (name: keyof Instruments) => ins[name] as Histogram;
  const c = (name: keyof Instruments) => ins[name] as Counter;
  const inFlight = ins['tensorgate.requests.in_flight'] as UpDownCounter;
  const bytesInFlight = ins['tensorgate.request_bytes.in_flight'] as UpDownCounter;

  const server = options.port === undefined
    ? undefined
    : createMetricsServer(options.host, options.port, (req, res) => exporter.getMetricsRequestHandler(req, res));

  return {
    server,
    requestStarted(route, declaredBytes) {
      inFlight.add(1, { 'http.route': route });
      if (declaredBytes > 0) bytesInFlight.add(declaredBytes, { 'http.route': route });
    },
    record(r, knownModel) {
      inFlight.add(-1, { 'http.route': r.route });
      if (r.declaredBytes > 0) bytesInFlight.add(-r.declaredBytes, { 'http.route': r.route });
      // Cardinality stays bounded: a model name counts only once Triton confirmed it exists.
      const model = r.model === undefined ? '' : knownModel(r.model) ? r.model : '_unknown';
      const inferAttrs: Attributes = r.route === 'infer' ? { model, encoding: r.encoding ?? '' } : {};
      h('http.server.request.duration').record(seconds(r.endNs - r.startNs), {
        'http.route': r.route, 'http.request.method': r.method, 'http.response.status_code': r.status, ...inferAttrs,
      });
      if (r.errorCode !== undefined) c('tensorgate.errors').add(1, { 'error.code': r.errorCode, 'http.route': r.route });
      if (r.upstreamStatus !== undefined && r.upstreamDurationNs !== undefined) {
        h('tensorgate.upstream.duration').record(seconds(r.upstreamDurationNs), { 'rpc.method': 'ModelInfer', 'rpc.grpc.status_code': r.upstreamStatus, model });
      }
      if (r.ledger === undefined) return;
      for (const hop of HOPS) {
        const x = r.ledger.hops[hop];
        const attrs = { hop, ...inferAttrs };
        if (x.startNs !== 0n && x.endNs !== 0n) h('tensorgate.hop.duration').record(seconds(x.endNs - x.startNs), attrs);
        if (x.bytesIn > 0) c('tensorgate.hop.bytes').add(x.bytesIn, { ...attrs, direction: 'in' });
        if (x.bytesOut > 0) c('tensorgate.hop.bytes').add(x.bytesOut, { ...attrs, direction: 'out' });
        if (x.bytesCopied > 0) c('tensorgate.hop.copied').add(x.bytesCopied, attrs);
        if (x.allocations > 0) c('tensorgate.hop.allocations').add(x.allocations, attrs);
      }
    },
    async snapshot() {
      return (await exporter.collect()).resourceMetrics.scopeMetrics;
    },
    async close() {
      if (server !== undefined) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      await provider.shutdown();
    },
  };
}

/** docs/metrics.md, generated from METRICS (a unit test compares it with the committed file). */
export function renderMetricsDoc(): string {
  const rows = METRICS.map((m: MetricSpec) => `| \`${prometheusName(m)}\` | \`${m.name}\` | ${m.kind} | ${m.unit} | ${m.attributes.map((a) => `\`${a}\``).join(', ')} | ${m.primary === true ? 'Cluster primary only. ' : ''}${m.description} |`);
  return [
    '# Metrics',
    '',
    'Generated from `gateway/telemetry/metrics.ts` (`npm run docs`); a unit test fails when this file is stale.',
    'Served in Prometheus text format at `http://<host>:<server.metricsPort>/metrics` (default port 8002, as Triton).',
    `Durations are histograms in seconds with buckets ${DURATION_BUCKETS.join(', ')}.`,
    `Hops: ${HOPS.map((x) => `\`${x}\``).join(', ')}. \`model\` is the model name once Triton has confirmed it exists,`,
    'otherwise `_unknown` (bounded cardinality); `encoding` is the request form: `json`, `binary` or `raw`.',
    '',
    '**Several workers** (`workers` > 1, README "All cores"). The node:cluster primary alone serves `/metrics`. On each',
    'scrape it asks every live worker over cluster IPC for its cumulative values (the OpenTelemetry SDK\'s `collect()`)',
    'and sums them per metric and attribute set: counters, up-down counters and gauges (in flight, pool) and histograms (bucket by',
    'bucket, with their sum and count; min and max of the set). The output has the same names and labels as a single',
    'process; there is no per-worker label. A worker that does not answer within 1 s is counted with its previous',
    'snapshot (`tensorgate_cluster_stale_snapshots_total`). A worker that exits keeps its counters and histograms as of',
    'the last scrape, so totals never go down (Prometheus sees no counter reset); what it served after that scrape is',
    'lost, and its in-flight values drop out. The `tensorgate.cluster.*` metrics are the primary\'s own.',
    '',
    '| Prometheus name | OpenTelemetry name | kind | unit | attributes | meaning |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
