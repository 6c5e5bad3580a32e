// Every metric tensorgate exports, declared in one list (docs/metrics.md is generated from it and
// a test keeps them in sync). Those recorded per request are aggregated in telemetry/aggregate.ts;
// the buffer pool's, the backend set's and the shared-memory pool's are read by the OpenTelemetry
// SDK's observable instruments at collection; both are exported as the SDK's MetricData and served
// in Prometheus text format on the metrics port at /metrics. Every declared metric is there from
// the first scrape (Prometheus' advice: a series that is absent cannot be told from one that is
// 0), seeded at 0 for the attribute values known in advance (withSeeds).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type Attributes, type Counter, type Histogram, type Meter, type Observable, type UpDownCounter, ValueType } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AggregationTemporality, type DataPoint, DataPointType, type Histogram as HistogramValue, MeterProvider, type MetricData,
  type ResourceMetrics, type ScopeMetrics,
} from '@opentelemetry/sdk-metrics';
import { QUOTA_UNITS as USAGE_UNITS } from '../auth/quotas';
import { ERRORS } from '../errors';
import type { BufferPoolStats } from '../buffers/pool';
import { HOPS, hopRecord } from '../infer/ledger';
import { collected, HistogramAggregate, type HistogramSeries, type Series, SumAggregate } from './aggregate';
import { TLS_HANDSHAKE_FAILURES, type TlsHandshakeFailure } from './handshake';
import { GRPC_ROUTE_PREFIX, type RequestRecord } from './record';

/** The hop being read (Ledger.read): one record for every request's hops, read one at a time. */
const HOP = hopRecord();

/** Sub-millisecond to multi-second, in seconds. */
const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface MetricSpec {
  readonly name: string;
  readonly kind: 'histogram' | 'counter' | 'updown' | 'gauge';
  readonly unit: string;
  readonly attributes: readonly string[];
  /**
   * This metric's attributes whose every value is known before any request, with those values:
   * it is seeded with each combination of them (seededAttributes). Its other attributes (model,
   * route, status, pool, …) are left out of the seeded series and appear with real values as
   * requests come. Each metric names its own: two metrics' `outcome` are not the same list.
   */
  readonly values?: Readonly<Record<string, readonly string[]>>;
  readonly description: string;
  /** Recorded by the node:cluster primary only (workers > 1); every other metric by each gateway process. */
  readonly primary?: true;
  /**
   * Read when scraped (observable instruments) from the buffer pool's or the backend set's own
   * counts, not recorded per request.
   */
  readonly observed?: 'pool' | 'backends' | 'shared_memory' | 'certificates' | 'limits';
  /**
   * false: no zero point before the first observation (a certificate's expiry of 0 would read
   * "expires now" and fire alerts on a gateway without TLS); the HELP line is still there.
   */
  readonly seeds?: false;
  /**
   * With workers > 1, how the primary merges the workers' values: summed (the default), or the
   * largest one ('max') for a gauge every worker keeps of the same thing (its copy of the backend set).
   */
  readonly clusterMerge?: 'max';
}

/** The name the Prometheus exporter gives a metric: dots become underscores, counters end in _total. */
export function prometheusName(m: Pick<MetricSpec, 'name' | 'kind'>): string {
  return m.name.replace(/\./g, '_') + (m.kind === 'counter' ? '_total' : '');
}

const INFER_ATTRS = ['model', 'encoding'] as const;
const RPC_METHOD = 'ModelInfer';
const POOL_DROP_REASONS = ['bound', 'in_flight'] as const;
/** auth/guard.ts's outcomes and methods (telemetry/record.ts AuthRecord). */
const AUTH_OUTCOMES = ['allowed', 'missing', 'invalid', 'forbidden', 'unavailable'] as const;
const AUTH_METHODS = ['key', 'jwt', 'none'] as const;
/** What a per-identity limit refused for (telemetry/record.ts LimitedRecord). */
const LIMIT_REASONS = ['rate', 'concurrency', 'quota'] as const;
/** Outcomes of a server certificate reload (ingress/tls.ts). */
export const TLS_RELOAD_OUTCOMES = ['success', 'failure'] as const;
/**
 * upstream/backends/backend.ts BACKEND_STATES (telemetry does not import upstream/; a unit test
 * keeps them equal).
 */
export const BACKEND_STATE_NAMES = ['connecting', 'ready', 'unhealthy', 'ejected'] as const;
/** How a call's pool was chosen: upstream/backends/pools.ts ROUTE_DECISIONS (a unit test keeps them equal). */
export const ROUTE_DECISION_NAMES = ['table', 'split', 'header', 'default'] as const;
/** What became of a mirrored copy: upstream/backends/mirror.ts MIRROR_OUTCOMES (a unit test keeps them equal). */
export const MIRROR_OUTCOME_NAMES = ['answered', 'failed', 'dropped'] as const;

/** What the backend set counts (upstream/backends/backend-set.ts), read at each scrape. */
/** A certificate the gateway presents, and when it stops being valid (X509Certificate#validTo). */
export interface CertificateExpiry {
  /** `server`: server.tls.cert (as reloaded); `upstream_client`: upstream.tls.cert, sent to Triton. */
  readonly certificate: 'server' | 'upstream_client';
  readonly notAfterMs: number;
}

export interface BackendStats {
  readonly byState: Readonly<Record<(typeof BACKEND_STATE_NAMES)[number], number>>;
  readonly ejections: number;
  readonly retries: number;
  /** Calls routed by pool and decision (upstream.models). */
  readonly routed?: readonly { readonly pool: string; readonly decision: string; readonly calls: number }[];
  /** Mirrored copies by pool and outcome (upstream.models mirror). */
  readonly mirrored?: readonly { readonly pool: string; readonly outcome: string; readonly calls: number }[];
  /** upstream.tls certificate reloads that took effect, and those that failed (the old material stayed). */
  readonly tlsReloads?: number;
  readonly tlsReloadFailures?: number;
}

/** upstream/shared-memory/region-pool.ts SHM_FALLBACK_REASONS (a unit test keeps them equal). */
export const SHM_FALLBACK_NAMES = ['exhausted', 'too_large', 'unregistered', 'ineligible'] as const;

/**
 * What the shared-memory pool counts (upstream/shared-memory/region-pool.ts, upstream.sharedMemory),
 * read at each scrape.
 */
export interface SharedMemoryPoolStats {
  readonly regions: number;
  readonly inUse: number;
  readonly leases: number;
  readonly fallbacks: Readonly<Record<(typeof SHM_FALLBACK_NAMES)[number], number>>;
  readonly bytes: number;
  readonly outputBytes: number;
  readonly reclaimed: number;
}

const DIRECTIONS = ['in', 'out'] as const;
const RESULTS = ['ok', 'failed'] as const;

export const METRICS = [
  { name: 'http.server.request.duration', kind: 'histogram', unit: 's',
    attributes: ['http.route', 'http.request.method', 'http.response.status_code', 'network.protocol.version', ...INFER_ATTRS, 'rpc.grpc.status_code', 'protocol'],
    description: 'Duration of HTTP requests (OpenTelemetry semantic conventions), with the model and request encoding of inferences; `network.protocol.version` is `1.1` or `2` (h2c and h2). Calls of the gRPC pass-through carry `protocol=grpc` (REST requests have no `protocol`), `http.route` the method (`grpc ModelInfer`, …), `model` when the call names one and `rpc.grpc.status_code` the status the client got.' },
  { name: 'tensorgate.hop.duration', kind: 'histogram', unit: 's',
    values: { hop: HOPS },
    attributes: ['hop', ...INFER_ATTRS], description: 'Duration of each hop of an inference (ingress_read … egress_write).' },
  { name: 'tensorgate.hop.bytes', kind: 'counter', unit: 'By',
    values: { hop: HOPS, direction: DIRECTIONS },
    attributes: ['hop', 'direction', ...INFER_ATTRS], description: 'Bytes into (direction=in) and out of (direction=out) each hop.' },
  { name: 'tensorgate.hop.copied', kind: 'counter', unit: 'By',
    values: { hop: HOPS },
    attributes: ['hop', ...INFER_ATTRS], description: 'Bytes copied by tensorgate\'s own code in each hop (the copy ledger).' },
  { name: 'tensorgate.hop.copies', kind: 'counter', unit: '{copy}',
    values: { hop: HOPS },
    attributes: ['hop', ...INFER_ATTRS], description: 'Copies made by tensorgate\'s own code in each hop, beside `tensorgate.hop.copied`\'s bytes: each step that moved bytes from one buffer into another counts once (gathering a chunked body, decoding base64 into the message, writing a binary section into its slots, …; docs/dialects.md "Copies"). Per request: this over the requests of `http.server.request.duration`.' },
  { name: 'tensorgate.hop.allocations', kind: 'counter', unit: '{buffer}',
    values: { hop: HOPS },
    attributes: ['hop', ...INFER_ATTRS], description: 'Buffers allocated by tensorgate\'s own code in each hop; a message buffer reused from the pool (`buffers.poolBytes`) is no allocation.' },
  { name: 'tensorgate.upstream.duration', kind: 'histogram', unit: 's',
    values: { 'rpc.method': [RPC_METHOD] },
    attributes: ['rpc.method', 'rpc.grpc.status_code', 'model', 'protocol'],
    description: 'Duration of the call to Triton, by gRPC status: the ModelInfer call of a REST inference, or the forwarded call of the gRPC pass-through (`protocol=grpc`, `rpc.method` its method; from the call\'s start to its status).' },
  { name: 'tensorgate.grpc.bytes', kind: 'counter', unit: 'By',
    values: { 'rpc.method': [RPC_METHOD], direction: DIRECTIONS },
    attributes: ['rpc.method', 'direction'],
    description: 'Bytes of the gRPC pass-through\'s messages (length prefixes included): `direction=in` from clients to Triton, `out` from Triton to clients.' },
  { name: 'tensorgate.openai.time_to_first_token', kind: 'histogram', unit: 's',
    attributes: ['model'], description: 'OpenAI API completions and chat completions: from the request\'s arrival to the first response with tokens from Triton (streamed or not; docs/openai.md "Telemetry").' },
  { name: 'tensorgate.openai.time_per_output_token', kind: 'histogram', unit: 's',
    attributes: ['model'], description: 'OpenAI API generations streamed from Triton in more than one response: from the first response with tokens to the last, over the tokens after the first (the model\'s `num_output_tokens` when it reports them, else one a response).' },
  { name: 'tensorgate.openai.output_tokens', kind: 'counter', unit: '{token}',
    attributes: ['model'], description: 'Tokens generated for OpenAI API requests (as counted above); its rate is the tokens per second served, per model.' },
  { name: 'tensorgate.requests.in_flight', kind: 'updown', unit: '{request}',
    attributes: ['http.route'], description: 'HTTP requests being served.' },
  { name: 'tensorgate.request_bytes.in_flight', kind: 'updown', unit: 'By',
    attributes: ['http.route'], description: 'Declared body bytes (Content-Length) of the requests being served.' },
  { name: 'tensorgate.requests.in_flight_limit', kind: 'gauge', unit: '{request}', observed: 'limits',
    attributes: [], description: '`limits.maxInFlightRequests`: requests beyond it are refused with 503 `GW_ERR_REQUEST_OVERLOADED` (beside `tensorgate.requests.in_flight`; with workers > 1, the sum over the workers, each with its own bound).' },
  { name: 'tensorgate.request_bytes.in_flight_limit', kind: 'gauge', unit: 'By', observed: 'limits',
    attributes: [], description: '`limits.maxInFlightBodyBytes`: a request whose declared body would pass it is refused with 503 `GW_ERR_REQUEST_OVERLOADED` (beside `tensorgate.request_bytes.in_flight`).' },
  { name: 'tensorgate.errors', kind: 'counter', unit: '{error}',
    values: { 'error.code': Object.keys(ERRORS) },
    attributes: ['error.code', 'http.route'], description: 'Error answers by GW_ERR_* code (docs/errors.md); `http.route=unparsed` for requests answered before they could be parsed (431, 400 from Node\'s parser, slow headers).' },
  { name: 'tensorgate.buffer_pool.hits', kind: 'counter', unit: '{buffer}', observed: 'pool',
    attributes: [], description: 'Message buffers taken from the pool: a reused page, no allocation (`buffers.poolBytes`).' },
  { name: 'tensorgate.buffer_pool.misses', kind: 'counter', unit: '{buffer}', observed: 'pool',
    attributes: [], description: 'Message buffers of a pooled size (64 KiB up to half of `buffers.poolBytes` plus 4 KiB) that found no idle page and allocated one; other sizes are never pooled and not counted.' },
  { name: 'tensorgate.buffer_pool.dropped', kind: 'counter', unit: '{buffer}', observed: 'pool',
    values: { reason: POOL_DROP_REASONS },
    attributes: ['reason'], description: 'Pages the pool let go: `reason=bound` evicted or not kept to stay within `buffers.poolBytes`; `reason=in_flight` the upstream stream closed before its write completed, so the page may still be read.' },
  { name: 'tensorgate.buffer_pool.retained', kind: 'gauge', unit: 'By', observed: 'pool',
    attributes: [], description: 'Idle bytes the pool keeps for reuse (whole pages), at most `buffers.poolBytes`.' },
  { name: 'tensorgate.buffer_pool.in_use', kind: 'gauge', unit: '{buffer}', observed: 'pool',
    attributes: [], description: 'Pooled pages held by requests being served or by upstream writes still in progress.' },
  { name: 'tensorgate.upstream.backends', kind: 'gauge', unit: '{backend}', observed: 'backends', clusterMerge: 'max',
    values: { state: BACKEND_STATE_NAMES },
    attributes: ['state'], description: 'Backends of `upstream.backends` (every address a `dns:///` name resolves to) by state: `connecting` (no health verdict yet), `ready`, `unhealthy` (health checks failing), `ejected` (consecutive call failures). docs/production.md.' },
  { name: 'tensorgate.upstream.ejections', kind: 'counter', unit: '{ejection}', observed: 'backends',
    attributes: [], description: 'Backends ejected after `upstream.ejectAfterFailures` consecutive calls failed on the connection or with UNAVAILABLE.' },
  { name: 'tensorgate.upstream.retries', kind: 'counter', unit: '{retry}', observed: 'backends',
    attributes: [], description: 'Upstream calls sent again on another backend because they never reached the first (connection or stream refused, backend gone; `upstream.retries`).' },
  { name: 'tensorgate.upstream.routed', kind: 'counter', unit: '{call}', observed: 'backends',
    values: { decision: ROUTE_DECISION_NAMES },
    attributes: ['pool', 'decision'], description: 'Upstream calls by the pool they went to (`upstream.pools`; `default` for `upstream.backends`) and how it was chosen: `table` (the model\'s `upstream.models` entry names one pool), `split` (drawn by the entry\'s weights), `header` (pinned by the entry\'s header), `default` (no entry). Calls naming no model are not counted.' },
  { name: 'tensorgate.upstream.mirrored', kind: 'counter', unit: '{call}', observed: 'backends',
    values: { outcome: MIRROR_OUTCOME_NAMES },
    attributes: ['pool', 'outcome'], description: 'Copies of calls sent to a mirror pool (`upstream.models` mirror), by pool and outcome: `answered` (its answer came, and was discarded), `failed`, `dropped` (not sent: `upstream.mirrorMaxInFlight` mirrors were running, or the pool had no backend).' },
  { name: 'tensorgate.upstream.tls_reloads', kind: 'counter', unit: '{reload}', observed: 'backends',
    attributes: [], description: 'Reloads of `upstream.tls` certificate files that took effect: new connections to Triton use the new material.' },
  { name: 'tensorgate.upstream.tls_reload_failures', kind: 'counter', unit: '{reload}', observed: 'backends',
    attributes: [], description: 'Changes of `upstream.tls` files that could not be used (unreadable, not PEM, key not matching the certificate): the previous material stays in use; the log line says why.' },
  { name: 'tensorgate.shared_memory.regions', kind: 'gauge', unit: '{region}', observed: 'shared_memory',
    attributes: [], description: 'Shared-memory regions registered with Triton (`upstream.sharedMemory`); 0 until Triton accepted them.' },
  { name: 'tensorgate.shared_memory.in_use', kind: 'gauge', unit: '{region}', observed: 'shared_memory',
    attributes: [], description: 'Regions leased to requests being served (from their first tensor byte to Triton\'s answer).' },
  { name: 'tensorgate.shared_memory.leases', kind: 'counter', unit: '{lease}', observed: 'shared_memory',
    attributes: [], description: 'Requests whose binary or raw tensors went to Triton through a region.' },
  { name: 'tensorgate.shared_memory.fallbacks', kind: 'counter', unit: '{request}', observed: 'shared_memory',
    values: { fallback: SHM_FALLBACK_NAMES },
    attributes: ['fallback'], description: 'Binary and raw requests sent the normal way although the mode is on: `fallback=exhausted` every region was leased, `too_large` their tensors exceed `upstream.sharedMemory.regionBytes`, `unregistered` the regions are not (yet, or no longer) registered with Triton, `ineligible` nothing to place (no tensor bytes, or a raw BYTES body).' },
  { name: 'tensorgate.shared_memory.bytes', kind: 'counter', unit: 'By', observed: 'shared_memory',
    attributes: [], description: 'Tensor bytes Triton read from regions instead of gRPC messages.' },
  { name: 'tensorgate.shared_memory.output_bytes', kind: 'counter', unit: 'By', observed: 'shared_memory',
    attributes: [], description: 'Output bytes Triton wrote into regions instead of gRPC answers (outputs of fixed size asked for as binary), answered from there.' },
  { name: 'tensorgate.shared_memory.reclaimed', kind: 'counter', unit: '{region}', observed: 'shared_memory',
    attributes: [], description: 'Regions of a gateway that is gone (killed, same `upstream.sharedMemory.prefix`) unregistered at Triton at start.' },
  { name: 'tensorgate.auth.decisions', kind: 'counter', unit: '{request}',
    values: { outcome: AUTH_OUTCOMES, method: AUTH_METHODS },
    attributes: ['outcome', 'method'], description: 'Authentication decisions (`auth.enabled`) on routes that need credentials, by `outcome` (`allowed`; `missing` 401, `invalid` 401, `forbidden` 403, `unavailable` 503: the JWKS could not be fetched) and `method` (`key`: a static key of `auth.keysFile`, `jwt`, `none`: no credentials). Routes of `auth.open` groups are not counted.' },
  { name: 'tensorgate.auth.limited', kind: 'counter', unit: '{request}',
    values: { exceeded: LIMIT_REASONS },
    attributes: ['limit', 'exceeded'], description: 'Requests and gRPC calls refused by a per-identity limit (`auth.limits`, a key\'s `limits` in `auth.keysFile`) with 429 / RESOURCE_EXHAUSTED, by `exceeded` (`rate`, `concurrency`) and `limit`: `key:<id>` (a key with limits of its own), `subject:<sub>` (`auth.limits.subjects`), `group:<name>` (`auth.limits.groups`) or `default` (`auth.limits.default`: the identity is not a label, as JWT subjects are unbounded; the access log has it as `auth_subject`). Every value comes from the key file or the configuration, so the series are bounded.' },
  { name: 'tensorgate.usage', kind: 'counter', unit: '1',
    attributes: ['key', 'model', 'unit'], values: { unit: USAGE_UNITS },
    description: 'What requests let in with credentials used, by `unit` (`requests`, `inferences`: batch size, `inputBytes`: request body, `outputBytes`: answer body sent, `tokens`: OpenAI prompt + completion), `model` and `key`: the identity (`key:<id>`, `jwt:<sub>`) for the `auth.limits.usageKeys` identities with the most requests in this process, `other` for the rest (an identity entering the top starts its own series then). Summed over replicas it is what was served; each key\'s quotas and usage: GET /usage/<id> on the metrics port (docs/production.md "Quotas and usage").' },
  { name: 'tensorgate.auth.quota_warnings', kind: 'counter', unit: '{request}',
    attributes: ['limit', 'unit'], description: 'Requests let in past a soft quota (`policy: soft`), with `X-Quota-Warning`, by `limit` (as `tensorgate.auth.limited`\'s) and `unit`.' },
  { name: 'tensorgate.auth.limits_store.up', kind: 'gauge', unit: '1', seeds: false,
    attributes: [], description: 'Whether this process is connected to `auth.limits.store` (Redis) and it answers: 1 or 0 (with workers > 1, the number of workers connected; without a store, to the cluster\'s primary, which counts for them: docs/production.md "Workers without a store"). Absent without a store and with one worker. While 0, requests with limits meet `auth.limits.storeFailure` (docs/production.md "Shared limits on Redis"); the client reconnects by itself.' },
  { name: 'tensorgate.auth.limits_store.errors', kind: 'counter', unit: '{call}', seeds: false,
    attributes: ['kind'], description: 'Calls to `auth.limits.store` that failed, by `kind`: `timeout` (no answer within `auth.limits.storeTimeoutMs`), `unavailable` (not connected, or taken as down after timeouts in a row until a PING answers; also each failed reconnection), `error` (Redis answered an error). Absent without a store.' },
  { name: 'tensorgate.auth.limits_store.round_trip', kind: 'histogram', unit: 's', seeds: false,
    attributes: [], description: 'Round trips to `auth.limits.store` that answered: a check-and-take (one per lease of tokens, one per request with a concurrency limit), a release, a renewal. Absent without a store.' },
  { name: 'tensorgate.auth.limits_store.fallbacks', kind: 'counter', unit: '{request}', seeds: false,
    attributes: ['policy'], description: 'Requests with limits judged without `auth.limits.store` because it did not answer, by `policy` (`auth.limits.storeFailure`): `open` let in, `closed` refused with 503 `GW_ERR_AUTH_LIMITS_UNAVAILABLE`, `local` judged by this process\'s own limits. Absent without a store.' },
  { name: 'tensorgate.auth.reloads', kind: 'counter', unit: '{reload}',
    values: { file: ['keys', 'jwks'], result: RESULTS },
    attributes: ['file', 'result'], description: 'Reloads of `auth.keysFile` (`file=keys`) and `auth.jwt.jwksFile` (`file=jwks`) after a change in their directory; `result=failed` kept the previous keys (the log says why).' },
  { name: 'tensorgate.tls.reloads', kind: 'counter', unit: '{reload}',
    values: { result: RESULTS },
    attributes: ['result'], description: 'Reloads of the server certificate after its files changed (`server.tls.*`): `ok` serves new connections with it; `failed` (unreadable file, bad PEM, key not matching) kept the previous one and logged why.' },
  { name: 'tensorgate.tls.certificate_expiry', kind: 'gauge', unit: 's', observed: 'certificates', seeds: false, clusterMerge: 'max',
    attributes: ['certificate'], description: 'Seconds until the notAfter time of a certificate the gateway presents (negative once expired), read at each scrape: `certificate=server` the serving certificate of `server.tls.cert` (the reloaded one once a reload took effect), `certificate=upstream_client` the client certificate of `upstream.tls.cert` sent to Triton. Absent without TLS. Alert well before 0 (e.g. below 14 days): renewal that stopped shows here first.' },
  { name: 'tensorgate.tls.certificate_not_after', kind: 'gauge', unit: 's', observed: 'certificates', seeds: false, clusterMerge: 'max',
    attributes: ['certificate'], description: 'The notAfter time of a certificate the gateway presents, in seconds since the epoch (as `tensorgate.tls.certificate_expiry`, which counts down to it): alert on `tensorgate_tls_certificate_not_after - time()` (deploy/overlays/ingress/prometheus-rule.yaml). Absent without TLS.' },
  { name: 'tensorgate.tls.handshake_failures', kind: 'counter', unit: '{handshake}',
    values: { failure: TLS_HANDSHAKE_FAILURES },
    attributes: ['failure'], description: 'TLS handshakes on the gateway\'s port (`server.tls.*`) that failed, by `failure`: `certificate` (a client refused our certificate, e.g. expired or not trusted, or its own failed `server.tls.clientCa`), `protocol` (no common version or cipher, or not TLS: plain HTTP to the TLS port), `timeout`, `reset` (the client left mid-handshake), `other`.' },
  { name: 'tensorgate.cluster.workers', kind: 'updown', unit: '{worker}', attributes: [], primary: true,
    description: 'Worker processes listening (workers > 1).' },
  { name: 'tensorgate.cluster.worker_restarts', kind: 'counter', unit: '{worker}', attributes: [], primary: true,
    description: 'Workers that exited unexpectedly and were replaced (after a backoff of 100 ms doubling up to 30 s while a worker keeps failing).' },
  { name: 'tensorgate.cluster.stale_snapshots', kind: 'counter', unit: '{snapshot}', attributes: [], primary: true,
    description: 'Scrapes on which a worker did not send its metrics within 1 s; its previous snapshot was counted instead.' },
] as const satisfies readonly MetricSpec[];

type ProcessMetric = Exclude<(typeof METRICS)[number], { primary: true } | { observed: string }>;
type Aggregates = {
  [K in ProcessMetric['name']]: SumAggregate | HistogramAggregate;
};
/**
 * Each hop's series for one model and encoding (record's hop metrics): its counters, made with the
 * keys, and its duration's key and attribute maker (the series made when the hop is first timed).
 */
type HopKeys = readonly {
  readonly hop: (typeof HOPS)[number]; readonly key: string; readonly attrs: () => Attributes; duration: HistogramSeries | undefined;
  readonly bytesIn: Series; readonly bytesOut: Series; readonly copied: Series; readonly copies: Series; readonly allocations: Series;
}[];

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
  /** A key file or JWKS file was reloaded (auth/authenticator.ts), or failed to. */
  authReloaded(file: 'keys' | 'jwks', ok: boolean): void;
  tlsReloaded(outcome: (typeof TLS_RELOAD_OUTCOMES)[number]): void;
  /** A TLS handshake on the gateway's port failed (ingress 'tlsClientError'). */
  tlsHandshakeFailed(failure: TlsHandshakeFailure): void;
  /** auth.limits.store (auth/limits-store.ts): up or not, a round trip, a failed call, a request judged without it. */
  limitsStoreUp(up: boolean): void;
  limitsStoreRoundTrip(seconds: number): void;
  limitsStoreFailed(kind: string): void;
  limitsStoreFallback(policy: string): void;
  /** A request let in past a soft quota (auth/usage.ts). */
  quotaWarning(limit: string, unit: string): void;
  /** An error answered before any request existed (a head Node's parser refused, slow headers): route `unparsed`. */
  refused(code: string): void;
  /**
   * Requests in flight that no requestStarted() told of, read at each collection and added to the
   * in-flight series of their route (the compiled lane's, which reports a request once it is over).
   */
  inFlightBesides(source: () => readonly InFlightBesides[]): void;
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

/** Observable instruments of the metrics read from `source` at each collection: nothing on the request path. */
function observables(meter: Meter, source: NonNullable<MetricSpec['observed']>): Map<string, Observable> {
  const o = new Map<string, Observable>();
  for (const m of METRICS as readonly MetricSpec[]) {
    if (m.observed !== source) continue;
    const opts = { unit: m.unit, description: m.description };
    o.set(m.name, m.kind === 'gauge' ? meter.createObservableGauge(m.name, opts) : meter.createObservableCounter(m.name, opts));
  }
  return o;
}

/** The pool's metrics, read from its counts at each collection. */
function observePool(meter: Meter, counts: () => BufferPoolStats): void {
  const o = observables(meter, 'pool');
  const get = (name: string): Observable => o.get(name)!;
  meter.addBatchObservableCallback((r) => {
    const s = counts();
    r.observe(get('tensorgate.buffer_pool.hits'), s.hits);
    r.observe(get('tensorgate.buffer_pool.misses'), s.misses);
    r.observe(get('tensorgate.buffer_pool.dropped'), s.droppedBound, { reason: POOL_DROP_REASONS[0] });
    r.observe(get('tensorgate.buffer_pool.dropped'), s.droppedInFlight, { reason: POOL_DROP_REASONS[1] });
    r.observe(get('tensorgate.buffer_pool.retained'), s.retainedBytes);
    r.observe(get('tensorgate.buffer_pool.in_use'), s.inUse);
  }, [...o.values()]);
}

/** The backend set's metrics, read from its counts at each collection. */
function observeBackends(meter: Meter, counts: () => BackendStats): void {
  const o = observables(meter, 'backends');
  const get = (name: string): Observable => o.get(name)!;
  meter.addBatchObservableCallback((r) => {
    const s = counts();
    for (const state of BACKEND_STATE_NAMES) r.observe(get('tensorgate.upstream.backends'), s.byState[state], { state });
    r.observe(get('tensorgate.upstream.ejections'), s.ejections);
    r.observe(get('tensorgate.upstream.retries'), s.retries);
    for (const x of s.routed ?? []) r.observe(get('tensorgate.upstream.routed'), x.calls, { pool: x.pool, decision: x.decision });
    for (const x of s.mirrored ?? []) r.observe(get('tensorgate.upstream.mirrored'), x.calls, { pool: x.pool, outcome: x.outcome });
    r.observe(get('tensorgate.upstream.tls_reloads'), s.tlsReloads ?? 0);
    r.observe(get('tensorgate.upstream.tls_reload_failures'), s.tlsReloadFailures ?? 0);
  }, [...o.values()]);
}

/** The shared-memory pool's metrics, read from its counts at each collection. */
function observeSharedMemory(meter: Meter, counts: () => SharedMemoryPoolStats): void {
  const o = observables(meter, 'shared_memory');
  const get = (name: string): Observable => o.get(name)!;
  meter.addBatchObservableCallback((r) => {
    const s = counts();
    r.observe(get('tensorgate.shared_memory.regions'), s.regions);
    r.observe(get('tensorgate.shared_memory.in_use'), s.inUse);
    r.observe(get('tensorgate.shared_memory.leases'), s.leases);
    for (const fallback of SHM_FALLBACK_NAMES) r.observe(get('tensorgate.shared_memory.fallbacks'), s.fallbacks[fallback], { fallback });
    r.observe(get('tensorgate.shared_memory.bytes'), s.bytes);
    r.observe(get('tensorgate.shared_memory.output_bytes'), s.outputBytes);
    r.observe(get('tensorgate.shared_memory.reclaimed'), s.reclaimed);
  }, [...o.values()]);
}

/** The certificates' expiry, read at each collection (a reload shows at the next scrape). */
function observeCertificates(meter: Meter, certificates: () => readonly CertificateExpiry[]): void {
  const o = observables(meter, 'certificates');
  const gauge = o.get('tensorgate.tls.certificate_expiry')!;
  const notAfter = o.get('tensorgate.tls.certificate_not_after')!;
  meter.addBatchObservableCallback((r) => {
    const now = Date.now();
    for (const c of certificates()) {
      r.observe(gauge, Math.round((c.notAfterMs - now) / 1000), { certificate: c.certificate });
      r.observe(notAfter, Math.round(c.notAfterMs / 1000), { certificate: c.certificate });
    }
  }, [...o.values()]);
}

/** The in-flight bounds (configuration, constant for the process). */
function observeLimits(meter: Meter, limits: { readonly maxInFlightRequests: number; readonly maxInFlightBodyBytes: number }): void {
  const o = observables(meter, 'limits');
  meter.addBatchObservableCallback((r) => {
    r.observe(o.get('tensorgate.requests.in_flight_limit')!, limits.maxInFlightRequests);
    r.observe(o.get('tensorgate.request_bytes.in_flight_limit')!, limits.maxInFlightBodyBytes);
  }, [...o.values()]);
}

const seconds = (ns: number): number => ns / 1e9;

/** The exporter's options: it only collects, the text is printed by prometheusText. */
export const PROMETHEUS_OPTIONS = { preventServerStart: true, withoutScopeInfo: true } as const;
const serializer = new PrometheusSerializer(undefined, false, undefined, false, PROMETHEUS_OPTIONS.withoutScopeInfo);

/** One scrape's text: `specs`' seeds added to what was collected (a process's, or the cluster's sum). */
export function prometheusText(resource: ResourceMetrics['resource'], scopes: readonly ScopeMetrics[], specs: readonly MetricSpec[]): string {
  return serializer.serialize({ resource, scopeMetrics: withSeeds(scopes, specs) });
}

/**
 * The /metrics server: GET /metrics answers `scrape()`'s text; `other` may answer the rest
 * (/dashboard, telemetry/dashboard.ts) and says whether it did; anything else is 404.
 */
export function createMetricsServer(host: string, port: number, scrape: () => Promise<string>,
  other?: (req: IncomingMessage, res: ServerResponse) => boolean): Server {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics' && req.url?.startsWith('/metrics?') !== true) {
      if (other?.(req, res) === true) return;
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('Not Found');
      return;
    }
    scrape().then((text) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(text);
    }, (err: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`# failed to export metrics: ${String(err)}`);
    });
  });
  server.listen(port, host);
  return server;
}

/** The attribute sets `m` is seeded with: every combination of its own known `values` ([{}] when it has none). */
export function seededAttributes(m: Pick<MetricSpec, 'attributes' | 'values' | 'seeds'>): Attributes[] {
  if (m.seeds === false) return [];
  let sets: Attributes[] = [{}];
  for (const a of m.attributes) {
    const values = m.values?.[a];
    if (values !== undefined) sets = sets.flatMap((s) => values.map((v) => ({ ...s, [a]: v })));
  }
  return sets;
}

/** Identifies a data point's attribute set, whatever the order of its keys. */
export const attributesKey = (attributes: Attributes): string =>
  JSON.stringify(Object.keys(attributes).sort().map((k) => [k, attributes[k]]));

/**
 * The collected metrics plus, for each of `specs`, a zero point (counters and gauges 0,
 * histograms empty) for every seeded attribute set it has no point for yet — also for a metric
 * nothing has recorded, which the SDK does not report at all. Added to the output only: the
 * instruments, and the snapshots workers send, stay as recorded.
 */
export function withSeeds(scopes: readonly ScopeMetrics[], specs: readonly MetricSpec[]): ScopeMetrics[] {
  const found = new Map<string, MetricData>();
  for (const s of scopes) for (const m of s.metrics) if (!found.has(m.descriptor.name)) found.set(m.descriptor.name, m);
  const time = hrTime();
  const seeded = new Map<MetricData, MetricData>();
  const absent: MetricData[] = [];
  for (const spec of specs) {
    const m = found.get(spec.name);
    const have = new Set(m?.dataPoints.map((p) => attributesKey(p.attributes)));
    const zeros = seededAttributes(spec).filter((a) => !have.has(attributesKey(a))).map((attributes) => zeroPoint(spec, attributes, time));
    if (m === undefined) absent.push(emptyMetric(spec, zeros));
    else if (zeros.length > 0) seeded.set(m, { ...m, dataPoints: [...m.dataPoints, ...zeros] } as MetricData);
  }
  const out = scopes.map((s) => ({ scope: s.scope, metrics: s.metrics.map((m) => seeded.get(m) ?? m) }));
  if (absent.length > 0) out.push({ scope: { name: 'tensorgate' }, metrics: absent });
  return out;
}

type Point = DataPoint<number> | DataPoint<HistogramValue>;

function zeroPoint(spec: MetricSpec, attributes: Attributes, time: DataPoint<unknown>['startTime']): Point {
  const value: number | HistogramValue = spec.kind !== 'histogram' ? 0
    : { buckets: { boundaries: DURATION_BUCKETS, counts: DURATION_BUCKETS.map(() => 0).concat(0) }, count: 0, sum: 0 };
  return { startTime: time, endTime: time, attributes, value } as Point;
}

/** A metric as the SDK would report it once recorded: the same descriptor, type and temporality. */
function emptyMetric(spec: MetricSpec, dataPoints: Point[]): MetricData {
  const descriptor = { name: spec.name, description: spec.description, unit: spec.unit, valueType: ValueType.DOUBLE };
  const aggregationTemporality = AggregationTemporality.CUMULATIVE;
  switch (spec.kind) {
    case 'histogram':
      return { descriptor, aggregationTemporality, dataPointType: DataPointType.HISTOGRAM, dataPoints: dataPoints as DataPoint<HistogramValue>[] };
    case 'gauge':
      return { descriptor, aggregationTemporality, dataPointType: DataPointType.GAUGE, dataPoints: dataPoints as DataPoint<number>[] };
    case 'counter':
    case 'updown':
      return { descriptor, aggregationTemporality, dataPointType: DataPointType.SUM, isMonotonic: spec.kind === 'counter', dataPoints: dataPoints as DataPoint<number>[] };
  }
}

/** The per-request series: the aggregates by name, the ones every request touches, and the hop keys made so far. */
interface RequestSeries {
  readonly h: (name: keyof Aggregates) => HistogramAggregate;
  readonly c: (name: keyof Aggregates) => SumAggregate;
  readonly inFlight: SumAggregate;
  readonly bytesInFlight: SumAggregate;
  readonly requestDuration: HistogramAggregate;
  readonly hopDuration: HistogramAggregate;
  readonly hopBytes: SumAggregate;
  readonly hopCopied: SumAggregate;
  readonly hopCopies: SumAggregate;
  readonly hopAllocations: SumAggregate;
  /** Per model and encoding ('' for other routes): the series keys of each hop's metrics, made once. */
  readonly hopKeys: Map<string, HopKeys>;
  /** The labels of the per-request series (LabelTree): in flight by route, infer, gRPC, duration, upstream duration. */
  readonly routes: LabelTree;
  readonly infers: LabelTree;
  readonly grpcs: LabelTree;
  readonly durations: LabelTree;
  readonly upstream: LabelTree;
  /** The pass-through's routes: each one's RPC method and bytes series, made once (grpcRouteOf). */
  readonly grpcRoutes: Map<string, GrpcRoute>;
}

function requestSeries(agg: Aggregates): RequestSeries {
  const h = (name: keyof Aggregates): HistogramAggregate => agg[name] as HistogramAggregate;
  const c = (name: keyof Aggregates): SumAggregate => agg[name] as SumAggregate;
  return {
    h, c,
    inFlight: c('tensorgate.requests.in_flight'),
    bytesInFlight: c('tensorgate.request_bytes.in_flight'),
    requestDuration: h('http.server.request.duration'),
    hopDuration: h('tensorgate.hop.duration'),
    hopBytes: c('tensorgate.hop.bytes'),
    hopCopied: c('tensorgate.hop.copied'),
    hopCopies: c('tensorgate.hop.copies'),
    hopAllocations: c('tensorgate.hop.allocations'),
    hopKeys: new Map<string, HopKeys>(),
    routes: new LabelTree(), infers: new LabelTree(), grpcs: new LabelTree(), durations: new LabelTree(), upstream: new LabelTree(),
    grpcRoutes: new Map(),
  };
}

type Collected = { resource: ResourceMetrics['resource']; scopeMetrics: ScopeMetrics[] };

/** What the SDK collected (observed metrics) and the aggregates (with requests in flight elsewhere), as one scope. */
async function collectAll(exporter: PrometheusExporter, processSpecs: readonly MetricSpec[], agg: Aggregates, besides: Besides): Promise<Collected> {
  besides.read();
  const { resource, scopeMetrics } = (await exporter.collect()).resourceMetrics;
  const recorded: MetricData[] = [];
  for (const spec of processSpecs) {
    const m = collected(agg[spec.name as keyof Aggregates], (points) => emptyMetric(spec, points));
    if (m !== undefined) recorded.push(m);
  }
  const first = scopeMetrics[0];
  if (first === undefined) return { resource, scopeMetrics: recorded.length === 0 ? [] : [{ scope: { name: 'tensorgate' }, metrics: recorded }] };
  return { resource, scopeMetrics: [{ scope: first.scope, metrics: [...first.metrics, ...recorded] }, ...scopeMetrics.slice(1)] };
}

/** A series' key and its attribute set's maker: made once per distinct label values (LabelTree). */
interface SeriesLabels {
  readonly key: string;
  readonly attrs: () => Attributes;
  /** The series these labels name in the one aggregate they are used with, once it has one. */
  sum?: Series;
  histogram?: HistogramSeries;
  /** Route labels (addInFlight): their series of bytes in flight, once it has one. */
  bytes?: Series;
}

/**
 * The series labels of requests, one level per label value (a string, or a status number), made
 * the first time a combination is seen and kept, as the aggregates keep their series: a request
 * finds its series' key and attribute maker by lookups, with no string or closure of its own.
 */
class LabelTree {
  readonly #children = new Map<string | number, LabelTree>();
  labels: SeriesLabels | undefined;

  at(value: string | number): LabelTree {
    let child = this.#children.get(value);
    if (child === undefined) this.#children.set(value, child = new LabelTree());
    return child;
  }
}

const NO_LABELS: SeriesLabels = { key: '\u0002', attrs: () => ({}) };

/** Requests of a route in flight elsewhere (Metrics.inFlightBesides), and their declared body bytes. */
export interface InFlightBesides {
  readonly route: string;
  readonly requests: number;
  readonly bytes: number;
}

/** A request of `route` (and its declared body bytes) in flight from now (`sign` 1), or no more (-1). */
function addInFlight(a: RequestSeries, route: string, declaredBytes: number, sign: 1 | -1): void {
  shiftInFlight(a, route, sign, sign * declaredBytes);
}

/** `requests` more requests of `route` in flight, with `bytes` more declared body bytes (negative: fewer). */
function shiftInFlight(a: RequestSeries, route: string, requests: number, bytes: number): void {
  const node = a.routes.at(route);
  const labels: SeriesLabels = node.labels ??= { key: route, attrs: () => ({ 'http.route': route }), sum: undefined, bytes: undefined };
  (labels.sum ??= a.inFlight.series(labels.key, labels.attrs)).value += requests;
  if (bytes !== 0) (labels.bytes ??= a.bytesInFlight.series(labels.key, labels.attrs)).value += bytes;
}

/** A request over (Metrics.record). */
function recordRequest(a: RequestSeries, r: RequestRecord, knownModel: (name: string) => boolean): void {
  const route = r.route;
  addInFlight(a, route, r.declaredBytes, -1);
  // Cardinality stays bounded: a model name counts only once Triton confirmed it exists.
  const model = r.model === undefined ? '' : knownModel(r.model) ? r.model : '_unknown';
  const grpc = r.rpc === 'grpc';
  // Inferences: V2 infer (labelled even when refused before its form was known), and the
  // routes that set a request form (V1 predict, declarative, generate).
  const infer = route === 'infer' || r.encoding !== undefined ? inferLabels(a, model, r.encoding ?? '') : NO_LABELS;
  const rpc = grpc ? grpcLabels(a, r, model) : NO_LABELS;
  const protocol = r.protocol ?? '1.1';
  const duration = a.durations.at(route).at(r.method).at(r.status).at(protocol).at(infer.key).at(rpc.key);
  const d = duration.labels ??= {
    // Each key lists the attribute values of the object its series gets, in the same order.
    key: `${route}\u0001${r.method}\u0001${r.status}\u0001${protocol}\u0001${infer.key}\u0001${rpc.key}`,
    attrs: durationAttrs(route, r.method, r.status, protocol, infer.attrs(), rpc.attrs()),
  };
  a.requestDuration.recordIn(d.histogram ??= a.requestDuration.series(d.key, d.attrs), seconds(r.endNs - r.startNs));
  recordOutcome(a, r, route, model);
  const grpcRoute = grpc ? grpcRouteOf(a, route) : undefined;
  const rpcMethod = grpcRoute?.method ?? RPC_METHOD;
  const upstreamStatus = r.upstreamStatus;
  if (upstreamStatus !== undefined && r.upstreamDurationNs !== undefined) {
    const node = a.upstream.at(rpcMethod).at(upstreamStatus).at(model).at(grpc ? 'grpc' : '');
    const u: SeriesLabels = node.labels ??= {
      key: `${rpcMethod}\u0001${upstreamStatus}\u0001${model}\u0001${grpc ? 'grpc' : ''}`,
      attrs: () => ({ 'rpc.method': rpcMethod, 'rpc.grpc.status_code': upstreamStatus, model, ...(grpc ? { protocol: 'grpc' } : {}) }),
    };
    const h = a.h('tensorgate.upstream.duration');
    h.recordIn(u.histogram ??= h.series(u.key, u.attrs), seconds(r.upstreamDurationNs));
  }
  if (grpcRoute !== undefined) {
    grpcRoute.bytesIn.value += r.bytesIn ?? 0;
    grpcRoute.bytesOut.value += r.bytesOut ?? 0;
  }
  if (r.ledger !== undefined) recordHops(a, r.ledger, infer.key, infer.attrs);
  if (r.firstTokenNs !== undefined) recordTokens(a, r, model);
}

interface GrpcRoute {
  readonly method: string;
  readonly bytesIn: Series;
  readonly bytesOut: Series;
}

/** A pass-through route ("grpc:ModelInfer"): its RPC method ("ModelInfer") and bytes series, made the first time. */
function grpcRouteOf(a: RequestSeries, route: string): GrpcRoute {
  let g = a.grpcRoutes.get(route);
  if (g === undefined) {
    const method = route.slice(GRPC_ROUTE_PREFIX.length);
    const c = a.c('tensorgate.grpc.bytes');
    g = {
      method,
      bytesIn: c.series(`${method}\u0001in`, () => ({ 'rpc.method': method, direction: 'in' })),
      bytesOut: c.series(`${method}\u0001out`, () => ({ 'rpc.method': method, direction: 'out' })),
    };
    a.grpcRoutes.set(route, g);
  }
  return g;
}

/** The duration series' attribute maker: route, method, status, protocol, the inference's and the pass-through's. */
function durationAttrs(route: string, method: string, status: number, protocol: string, infer: Attributes, rpc: Attributes): () => Attributes {
  return () => ({
    'http.route': route, 'http.request.method': method, 'http.response.status_code': status,
    'network.protocol.version': protocol, ...infer, ...rpc,
  });
}

/** An inference's labels: its model and encoding. */
function inferLabels(a: RequestSeries, model: string, encoding: string): SeriesLabels {
  const node = a.infers.at(model).at(encoding);
  return node.labels ??= { key: `${model}\u0001${encoding}`, attrs: () => ({ model, encoding }) };
}

/** protocol="grpc" on the pass-through's series only: HTTP requests' series stay as they were. */
function grpcLabels(a: RequestSeries, r: RequestRecord, model: string): SeriesLabels {
  const named = r.model !== undefined;
  const status = r.grpcStatus ?? -1;
  const node = a.grpcs.at(named ? model : '\u0002').at(status);
  return node.labels ??= {
    key: `${named ? model : '\u0002'}\u0001${status}`,
    attrs: () => ({ ...(named ? { model } : {}), 'rpc.grpc.status_code': status, protocol: 'grpc' }),
  };
}

/** What the request's outcome adds: the auth decision, the limit that refused it, its error code. */
function recordOutcome(a: RequestSeries, r: RequestRecord, route: string, model: string): void {
  const auth = r.auth;
  if (auth !== undefined) a.c('tensorgate.auth.decisions').add(`${auth.outcome}\u0001${auth.method}`, () => ({ outcome: auth.outcome, method: auth.method }), 1);
  const limited = r.limited;
  if (limited !== undefined) a.c('tensorgate.auth.limited').add(`${limited.limit}\u0001${limited.reason}`, () => ({ limit: limited.limit, exceeded: limited.reason }), 1);
  const code = r.errorCode;
  if (code !== undefined) a.c('tensorgate.errors').add(`${code}\u0001${route}`, () => ({ 'error.code': code, 'http.route': route }), 1);
  if (r.usage !== undefined) recordUsage(a, r, model);
}

/** What a request let in with credentials used (auth/usage.ts), under its bounded key and model labels. */
function recordUsage(a: RequestSeries, r: RequestRecord, model: string): void {
  const key = r.usageKey ?? 'other';
  for (const unit of USAGE_UNITS) {
    const n = r.usage![unit];
    if (n > 0) a.c('tensorgate.usage').add(`${key}\u0001${model}\u0001${unit}`, () => ({ key, model, unit }), n);
  }
}

/** An OpenAI API generation's token timings (pipeline/openai/answer.ts). */
function recordTokens(a: RequestSeries, r: RequestRecord, model: string): void {
  const tokens = r.outputTokens ?? 0;
  const first = r.firstTokenNs!;
  a.h('tensorgate.openai.time_to_first_token').record(model, () => ({ model }), seconds(first - r.startNs));
  if (tokens > 1 && r.lastTokenNs !== undefined) a.h('tensorgate.openai.time_per_output_token').record(model, () => ({ model }), seconds(r.lastTokenNs - first) / (tokens - 1));
  a.c('tensorgate.openai.output_tokens').add(model, () => ({ model }), tokens);
}

/** The hops of an inference, from its ledger. */
function recordHops(a: RequestSeries, ledger: NonNullable<RequestRecord['ledger']>, inferKey: string, inferAttrs: () => Attributes): void {
  // The first inference of a model and encoding creates all of its hop counters, so one that
  // never moves reads 0 (copies when every request is cut through); later ones add what moved.
  // A hop's duration series appears when it is first timed.
  let keys = a.hopKeys.get(inferKey);
  if (keys === undefined) {
    // inferAttrs depends on nothing but what inferKey spells: the makers are kept with the keys.
    const base = inferAttrs();
    keys = HOPS.map((hop) => {
      const attrs = (): Attributes => ({ hop, ...base });
      const key = `${hop}\u0001${inferKey}`;
      return {
        hop, key, attrs, duration: undefined,
        bytesIn: a.hopBytes.series(`${key}\u0001in`, () => ({ ...attrs(), direction: 'in' })),
        bytesOut: a.hopBytes.series(`${key}\u0001out`, () => ({ ...attrs(), direction: 'out' })),
        copied: a.hopCopied.series(key, attrs), copies: a.hopCopies.series(key, attrs), allocations: a.hopAllocations.series(key, attrs),
      };
    });
    a.hopKeys.set(inferKey, keys);
  }
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const x = ledger.read(k.hop, HOP);
    if (x.startNs !== 0 && x.endNs !== 0) a.hopDuration.recordIn(k.duration ??= a.hopDuration.series(k.key, k.attrs), seconds(x.endNs - x.startNs));
    k.bytesIn.value += x.bytesIn;
    k.bytesOut.value += x.bytesOut;
    k.copied.value += x.bytesCopied;
    k.copies.value += x.copies;
    k.allocations.value += x.allocations;
  }
}

/** Metrics.inFlightBesides: its source read at each collection, what it said the last time taken back first. */
class Besides {
  source: (() => readonly InFlightBesides[]) | undefined;
  #added: readonly InFlightBesides[] = [];

  constructor(private readonly series: RequestSeries) {}

  read(): void {
    if (this.source === undefined) return;
    const now = this.source(); // read first: a source that throws leaves the series as they were
    for (const x of this.#added) shiftInFlight(this.series, x.route, -x.requests, -x.bytes);
    this.#added = now;
    for (const x of now) shiftInFlight(this.series, x.route, x.requests, x.bytes);
  }
}

/** What the gauges read, each when given. */
interface Observed {
  bufferPool?: () => BufferPoolStats; backends?: () => BackendStats;
  sharedMemory?: (() => SharedMemoryPoolStats) | undefined; certificates?: () => readonly CertificateExpiry[];
  /** limits.maxInFlightRequests and limits.maxInFlightBodyBytes, exported beside the in-flight counts. */
  limits?: { readonly maxInFlightRequests: number; readonly maxInFlightBodyBytes: number };
}

function observeAll(meter: Meter, o: Observed): void {
  if (o.bufferPool !== undefined) observePool(meter, o.bufferPool);
  if (o.backends !== undefined) observeBackends(meter, o.backends);
  if (o.sharedMemory !== undefined) observeSharedMemory(meter, o.sharedMemory);
  if (o.certificates !== undefined) observeCertificates(meter, o.certificates);
  if (o.limits !== undefined) observeLimits(meter, o.limits);
}

/** `port` undefined: no /metrics server (a cluster worker; the primary asks for snapshot()). */
export function createMetrics(options: Observed & {
  host: string; port: number | undefined; serviceName: string;
  /** Other pages of the metrics port (telemetry/dashboard.ts). */
  pages?: (req: IncomingMessage, res: ServerResponse) => boolean;
}): Metrics {
  const exporter = new PrometheusExporter(PROMETHEUS_OPTIONS);
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    readers: [exporter],
  });
  const meter = provider.getMeter('tensorgate');
  // Per-request metrics: aggregated in plain maps (telemetry/aggregate.ts), not SDK instruments.
  const processSpecs = (METRICS as readonly MetricSpec[]).filter((m) => m.primary !== true && m.observed === undefined);
  const agg = Object.fromEntries(processSpecs.map((m) => [m.name, m.kind === 'histogram' ? new HistogramAggregate(DURATION_BUCKETS) : new SumAggregate()])) as Aggregates;
  observeAll(meter, options);
  const series = requestSeries(agg);
  const { c } = series;
  const besides = new Besides(series);
  const collect = (): Promise<Collected> => collectAll(exporter, processSpecs, agg, besides);

  const mine = METRICS.filter((m: MetricSpec) => m.primary !== true);
  const server = options.port === undefined
    ? undefined
    : createMetricsServer(options.host, options.port, async () => {
      const { resource, scopeMetrics } = await collect();
      return prometheusText(resource, scopeMetrics, mine);
    }, options.pages);
  return {
    server,
    requestStarted(route, declaredBytes) {
      addInFlight(series, route, declaredBytes, 1);
    },
    record(r, knownModel) {
      recordRequest(series, r, knownModel);
    },
    authReloaded(file, ok) {
      const result = ok ? 'ok' : 'failed';
      c('tensorgate.auth.reloads').add(`${file}\u0001${result}`, () => ({ file, result }), 1);
    },
    inFlightBesides(source) {
      besides.source = source;
    },
    refused(code) {
      c('tensorgate.errors').add(`${code}\u0001unparsed`, () => ({ 'error.code': code, 'http.route': 'unparsed' }), 1);
    },
    tlsReloaded(outcome) {
      const result = outcome === 'success' ? 'ok' : 'failed';
      c('tensorgate.tls.reloads').add(result, () => ({ result }), 1);
    },
    tlsHandshakeFailed(failure) {
      c('tensorgate.tls.handshake_failures').add(failure, () => ({ failure }), 1);
    },
    limitsStoreUp(up) {
      // Set, not counted: the state is told only when it changes, starting from 0.
      c('tensorgate.auth.limits_store.up').add('', () => ({}), up ? 1 : -1);
    },
    limitsStoreRoundTrip(seconds) {
      series.h('tensorgate.auth.limits_store.round_trip').record('', () => ({}), seconds);
    },
    limitsStoreFailed(kind) {
      c('tensorgate.auth.limits_store.errors').add(kind, () => ({ kind }), 1);
    },
    quotaWarning(limit, unit) {
      c('tensorgate.auth.quota_warnings').add(`${limit}\u0001${unit}`, () => ({ limit, unit }), 1);
    },
    limitsStoreFallback(policy) {
      c('tensorgate.auth.limits_store.fallbacks').add(policy, () => ({ policy }), 1);
    },
    async snapshot() {
      return (await collect()).scopeMetrics;
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

function knownDoc(attribute: string, values: readonly string[]): string {
  const which = attribute === 'hop' ? 'the hops above' : attribute === 'error.code' ? 'every code of docs/errors.md' : values.map((v) => `\`${v}\``).join(', ');
  return `\`${attribute}\` (${which})`;
}

/** The "seeded" column: which series a fresh process exports. */
function seedsDoc(m: MetricSpec): string {
  if (m.seeds === false) return 'none';
  const known = m.attributes.filter((a) => m.values?.[a] !== undefined);
  return known.length === 0 ? 'one series, no attributes' : `each ${known.map((a) => knownDoc(a, m.values![a]!)).join(' × ')}: ${seededAttributes(m).length}`;
}

/** docs/metrics.md, generated from METRICS (a unit test compares it with the committed file). */
export function renderMetricsDoc(): string {
  const rows = METRICS.map((m: MetricSpec) => `| \`${prometheusName(m)}\` | \`${m.name}\` | ${m.kind} | ${m.unit} | ${m.attributes.map((a) => `\`${a}\``).join(', ')} | ${seedsDoc(m)} | ${m.primary === true ? 'Cluster primary only. ' : ''}${m.description} |`);
  return [
    '# Metrics',
    '',
    'Generated from `gateway/telemetry/metrics.ts` (`npm run docs`); a unit test fails when this file is stale.',
    'Served in Prometheus text format at `http://<host>:<server.metricsPort>/metrics` (default port 8002, as Triton).',
    `Durations are histograms in seconds with buckets ${DURATION_BUCKETS.join(', ')}.`,
    `Hops: ${HOPS.map((x) => `\`${x}\``).join(', ')}. \`model\` is the model name once Triton has confirmed it exists`,
    '(its configuration or metadata read, or a gRPC ModelInfer, ModelMetadata or ModelConfig of it answered OK),',
    'otherwise `_unknown` (bounded cardinality); `encoding` is the request form: `json`, `json_base64` (a V2 JSON body with',
    'tensor bytes in base64), `binary`, `raw` (uploads of a file\'s media type too), `multipart`, `v1`, `v1_base64`, `declarative`,',
    '`declarative_base64` or `generate`.',
    '',
    '**Several workers** (`workers` > 1, docs/workers.md). The node:cluster primary alone serves `/metrics`. On each',
    'scrape it asks every live worker over cluster IPC for its cumulative values (the OpenTelemetry SDK\'s `collect()`)',
    'and sums them per metric and attribute set: counters, up-down counters and gauges (in flight, pool) and histograms (bucket by',
    'bucket, with their sum and count; min and max of the set), except `tensorgate_upstream_backends`: every worker keeps',
    'its own copy of the backend set, so each state\'s count is the largest any worker reports. The output has the same names and labels as a single',
    'process; there is no per-worker label. A worker that does not answer within 1 s is counted with its previous',
    'snapshot (`tensorgate_cluster_stale_snapshots_total`). A worker that exits keeps its counters and histograms as of',
    'the last scrape, so totals never go down (Prometheus sees no counter reset); what it served after that scrape is',
    'lost, and its in-flight values drop out. The `tensorgate.cluster.*` metrics are the primary\'s own.',
    '',
    '**From the first scrape** every metric below is exported (Prometheus cannot tell an absent series from one that',
    'is 0): counters and gauges at 0, histograms empty (count 0), one series for each combination of the values of its',
    'attributes known in advance, each metric its own (column "seeded"), with the other attributes left out. Series with',
    'a model, route, status or pool appear as requests come.',
    'The first inference of a model and encoding creates all of its hop counters, so a counter that stays at 0 reads 0',
    '(`tensorgate_hop_copied_total` when every request is cut through).',
    '',
    '| Prometheus name | OpenTelemetry name | kind | unit | attributes | seeded | meaning |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
