// Telemetry wiring: turns each finished request's record into metrics, an access log line and
// (when on) a span, and publishes it on the `tensorgate:request` diagnostics channel.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { settlesWithin } from '../deadline';
import { GRPC_ROUTE_PREFIX, requestChannel } from './record';
import { accessLine, createLogger } from './logger';
import type { BufferPoolStats } from '../buffers/pool';
import { type BackendStats, type CertificateExpiry, createMetrics, type Metrics, type SharedMemoryPoolStats } from './metrics';
import { type ObservedRequest, passThroughTraceContext, type RequestHead, type RequestObserver, type RequestRecord } from './record';
import { createTracing, type Tracing } from './tracing';
import { type BackendView, dashboardPages, type RecentAnswer } from './dashboard';
import { type RecentQuery, RecentRequests } from './recent';
import { type UsageSource, usagePage } from './usage-page';

export interface TelemetryOptions {
  readonly host: string;
  /** GET /usage/<id> on the metrics port (auth's quotas and usage); undefined: not served. */
  readonly usage?: UsageSource | undefined;
  /** undefined: no /metrics server of its own (a cluster worker). */
  readonly metricsPort: number | undefined;
  /** Fields on every log line (a cluster worker's number and pid). */
  readonly logBase?: Readonly<Record<string, unknown>>;
  readonly logLevel: string;
  readonly tracing: boolean;
  readonly traceExporter: 'otlp' | 'console';
  readonly otlpEndpoint: string;
  readonly serviceName: string;
  /** Whether Triton has confirmed this model name (bounds metric cardinality). */
  readonly knownModel: (name: string) => boolean;
  /** The message buffer pool's counts, read at each scrape. */
  readonly bufferPool?: () => BufferPoolStats;
  /** The backend set's counts, read at each scrape. */
  readonly backends?: () => BackendStats;
  /** The shared-memory pool's counts (upstream.sharedMemory), read at each scrape. */
  readonly sharedMemory?: (() => SharedMemoryPoolStats) | undefined;
  /** The certificates the gateway presents (server.tls, upstream.tls client), read at each scrape. */
  readonly certificates?: () => readonly CertificateExpiry[];
  /** telemetry.recent: the ring behind /dashboard (telemetry/recent.ts); size 0 keeps none. */
  readonly recent?: { readonly size: number; readonly perSecond: number };
  /** The backend set, listed on /dashboard. */
  readonly backendList?: () => readonly BackendView[];
  /** limits.maxInFlightRequests and limits.maxInFlightBodyBytes: exported, and drawn on /dashboard. */
  readonly limits?: { readonly maxInFlightRequests: number; readonly maxInFlightBodyBytes: number };
}

export interface Telemetry extends RequestObserver {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** This process's recent requests (telemetry.recent), for a cluster primary's /dashboard; undefined: none kept. */
  readonly recent: ((q: RecentQuery) => RecentAnswer) | undefined;
  /** GET /usage/<id> of this process (auth's quotas and usage), for a cluster primary's; undefined: no auth. */
  readonly usage: UsageSource | undefined;
  /** Flushes the log, closes /metrics and flushes the spans; gives up on what is left after `deadlineMs`. */
  close(deadlineMs: number): Promise<void>;
}

/**
 * gRPC calls whose OK from Triton says their model exists (an unknown name is NOT_FOUND). Not
 * ModelReady (OK, ready false, for any name), nor ModelStreamInfer: Triton reports an unknown model
 * inside the stream (a response's error_message) and still ends the stream OK.
 */
const CONFIRMING_CALLS: ReadonlySet<string> = new Set(['ModelInfer', 'ModelMetadata', 'ModelConfig'].map((m) => GRPC_ROUTE_PREFIX + m));
/** Model names confirmed that way, at most (Triton's repositories hold far fewer). */
const MAX_CONFIRMED = 4096;

export function createTelemetry(o: TelemetryOptions): Telemetry {
  const { log, flush } = createLogger(o.logLevel, o.logBase);
  // A cluster worker keeps its ring too: the primary's /dashboard asks every worker (cluster.ts).
  const recent = o.recent === undefined || o.recent.size === 0 ? undefined : new RecentRequests(o.recent.size, o.recent.perSecond);
  const recentAnswer = recent === undefined ? undefined
    : (q: RecentQuery): RecentAnswer => ({ size: recent.size, perSecond: recent.perSecond, requests: recent.list(q), backends: o.backendList?.() ?? [] });
  const dashboard = recentAnswer === undefined || o.metricsPort === undefined ? undefined : dashboardPages({
    recent: (q) => Promise.resolve(recentAnswer(q)),
    summary: async () => ({ scopes: await metrics.snapshot(), backends: o.backendList?.() ?? [] }),
  });
  const usage = o.usage === undefined || o.metricsPort === undefined ? undefined : usagePage(o.usage);
  const pages = usage === undefined || dashboard === undefined ? usage ?? dashboard
    : (req: IncomingMessage, res: ServerResponse): boolean => usage(req, res) || dashboard(req, res);
  const metrics = createMetrics({ host: o.host, port: o.metricsPort, serviceName: o.serviceName, bufferPool: o.bufferPool, backends: o.backends,
    sharedMemory: o.sharedMemory, certificates: o.certificates, limits: o.limits, pages });
  const tracing: Tracing | undefined = o.tracing
    ? createTracing({ exporter: o.traceExporter, otlpEndpoint: o.otlpEndpoint, serviceName: o.serviceName })
    : undefined;

  // Models Triton answered a model's own gRPC call for with OK (a pass-through call learns of a
  // model no other way): it exists, so its name may be a label value. Bounded all the same.
  const confirmed = new Set<string>();
  const knownModel = (name: string): boolean => confirmed.has(name) || o.knownModel(name);
  const finish = (r: RequestRecord): void => {
    if (r.upstreamStatus === 0 && r.model !== undefined && CONFIRMING_CALLS.has(r.route) && confirmed.size < MAX_CONFIRMED) confirmed.add(r.model);
    metrics.record(r, knownModel);
    accessLine(log, r);
    if (requestChannel.hasSubscribers) requestChannel.publish(r);
  };

  return {
    log,
    metrics,
    recent: recentAnswer,
    usage: o.usage,
    start(req: RequestHead, startNs: number, route: string): ObservedRequest {
      metrics.requestStarted(route, Number(req.headers['content-length'] ?? 0) || 0);
      // One number comparison for the requests the ring does not take (telemetry/recent.ts).
      const end = recent?.take(startNs) === true ? kept(recent, req, finish) : finish;
      if (tracing === undefined) {
        return { upstreamHeaders: passThroughTraceContext(req), end };
      }
      const { span, headers } = tracing.start(req, startNs);
      return {
        upstreamHeaders: headers,
        end(r) {
          tracing.end(span, r);
          end(r);
        },
      };
    },
    async close(deadlineMs) {
      flush();
      // A collector that is down must not hold a shutdown for the exporter's 30 s timeout, nor fail
      // it (connection refused): spans not exported by the deadline are lost, and the loss logged.
      const spans = tracing?.close().catch((err: unknown) => log.warn({ err }, 'spans not exported at shutdown'));
      await settlesWithin(Promise.all([metrics.close(), spans]), deadlineMs);
    },
  };
}

/** `finish`, then the record copied into the ring of recent requests with its `x-request-id`. */
function kept(recent: RecentRequests, req: RequestHead, finish: (r: RequestRecord) => void): (r: RequestRecord) => void {
  const header = req.headers['x-request-id'];
  const xRequestId = typeof header === 'string' && header !== '' ? header : undefined;
  return (r) => {
    finish(r);
    recent.put(r, xRequestId);
  };
}
