// Wiring only: builds the upstream, the routes and the HTTP server from the frozen config.
import { DEADLINE_GRACE_MS } from './upstream/infer/whole-call';
import { UNIX_SEND_BUFFER, unixSendBufferShortfall, type LaneCounts, type LaneOptions } from './ingress/http1/lane';
import { formatGrpcTimeout } from './grpc/timeout';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Config } from './config/schema';
import type { Server as HttpsServer } from 'node:https';
import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import { GrpcPort } from './ingress/grpc-port/listener';
import { createHttpServer, type HttpServer } from './ingress/server';
import { readTlsMaterial } from './config/tls';
import { TlsReloader, tlsServerOptions } from './ingress/tls';
import { growYoungGeneration } from './young-generation';
import { remainingMs } from './deadline';
import { type ReferenceBackend, startReferenceBackend } from './reference-backend/server';
import { healthRoutes, type ProbeState, probeRoutes } from './routes/health';
import { generateRoutes } from './routes/generate';
import { DecodePool } from './decode/threads/pool';
import { inferPlan, inferRoutes } from './routes/infer';
import { sageMakerRoutes } from './routes/sagemaker';
import { type VertexAiDeps, vertexAiRoutes } from './routes/vertex-ai';
import { modelRoutes } from './routes/models';
import { repositoryRoutes } from './routes/repository';
import { settingsRoutes } from './routes/settings';
import { sharedMemoryRoutes } from './routes/shared-memory';
import { statisticsRoutes } from './routes/statistics';
import { accessTable, grpcRestrictionMetadata } from './api-access';
import { v1Routes } from './routes/v1';
import { declarativeRoutes } from './routes/declarative';
import { torchServeRoutes } from './routes/torchserve';
import { openAiRoutes } from './routes/openai';
import { passthroughRoutes } from './routes/passthrough';
import { credentialHeaders } from './auth/credential-headers';
import { BufferPool } from './buffers/pool';
import { startReclaim } from './buffers/reclaim';
import { authorityOf, socketPath } from './config/address';
import { isReady, mayBeUp } from './upstream/backends/backend';
import { BackendSet } from './upstream/backends/backend-set';
import { readPending } from './upstream/backends/queue-metrics';
import { ControlPlane } from './upstream/control/control-plane';
import { GrpcHealthChecker } from './upstream/backends/health-check';
import type { DataPlane } from './upstream/infer/data-plane';
import { GrpcJsDataPlane } from './upstream/infer/grpc-js-plane';
import { H2DataPlane } from './upstream/infer/h2-plane';
import { ModelConfigs } from './upstream/control/model-configs';
import { createTelemetry, type Telemetry } from './telemetry/telemetry';
import type { CertificateExpiry } from './telemetry/metrics';
import { handshakeFailure } from './telemetry/handshake';
import { ModelMetadatas } from './upstream/control/model-metadata';
import { StreamInferPlane } from './upstream/infer/stream-plane';
import { UpstreamTls } from './upstream/connections/tls';
import { ConfigError } from './config/load';
import { listenError, listening } from './config/listen-error';
import { Authenticator } from './auth/authenticator';
import { SharedLimiter } from './auth/shared-limiter';
import { guardRoutes } from './auth/guard';
import type { Route } from './ingress/router';
import { grpcPassthrough, type GrpcStreamHandler } from './passthrough/grpc-ingress';
import { H2Connections } from './upstream/connections/h2-sessions';
import { SharedMemoryPool, tritonRegistry } from './upstream/shared-memory/region-pool';

export interface RunningGateway {
  /** Base URL clients use, e.g. http://127.0.0.1:8000 (https:// with server.tls). */
  readonly url: string;
  readonly port: number;
  /** The Triton gRPC addresses in use (the demo backend's when --demo). */
  readonly backends: readonly string[];
  /** Set when --demo started the in-process reference backend. */
  readonly demoBackend: ReferenceBackend | undefined;
  /** Prometheus endpoint, e.g. http://127.0.0.1:8002/metrics; undefined in a cluster worker (the primary serves it). */
  readonly metricsUrl: string | undefined;
  readonly telemetry: Telemetry;
  /** The message buffer pool (buffers.poolBytes). */
  readonly bufferPool: BufferPool;
  /**
   * The gRPC pass-through (passthrough/grpc-ingress.ts): the listener hands it every HTTP/2 stream
   * whose content-type starts with application/grpc.
   */
  readonly grpc: GrpcStreamHandler;
  /** The port bound by server.grpc.enabled (ingress/grpc-port/), undefined when it is off. */
  readonly grpcPort: number | undefined;
  /** The compiled lane's counts (ingress/http1/lane.ts LaneCounts), undefined where it is off. */
  laneCounts(): LaneCounts | undefined;
  /**
   * Drains and stops. `/readyz` answers 503 at once; for `graceMs` (server.drainGraceMs; default
   * 0 here, main.ts passes the setting on a signal) everything else is served as before. Then no
   * new connections, idle ones closed at once, requests in flight get `deadlineMs`
   * (server.drainTimeoutMs) to finish; then their connections are closed and their upstream calls
   * cancelled. Everything else (upstream sessions, pass-through pools, telemetry, the demo backend)
   * is bounded by the same deadline, so close() returns within grace + deadline. Once: a second
   * call returns the first one's promise, and ends a grace still running.
   */
  close(deadlineMs?: number, graceMs?: number): Promise<CloseOutcome>;
}

/** How a close() went. */
export interface CloseOutcome {
  /** Answers not finished when the drain deadline passed: their connections were cut (0: a clean drain). */
  readonly requestsCut: number;
}

/** What a node:cluster worker does differently from a single process (gateway/cluster.ts). */
export interface WorkerRole {
  /** 1..N, kept by a replacement; on every log line with the pid. */
  readonly worker: number;
  /**
   * reusePort: a socket of its own with SO_REUSEPORT on the primary's address and port; else the
   * cluster's shared handle.
   */
  readonly listen: { readonly host: string; readonly port: number; readonly reusePort: boolean };
  /** The backends to use: the primary's demo backend with --demo (one for all workers), else the configured ones. */
  readonly backends: readonly string[];
}

/** What talks to Triton, built once from the config: the backend set and every plane on it. */
interface Upstream {
  /** The Triton gRPC addresses in use (the demo backend's when --demo). */
  readonly backends: readonly string[];
  readonly demoBackend: ReferenceBackend | undefined;
  /** upstream.tls: one setting for every connection to Triton, planes and health checks alike. */
  readonly tls: UpstreamTls | undefined;
  readonly set: BackendSet;
  readonly control: ControlPlane;
  readonly bufferPool: BufferPool;
  /** Idle pool pages dropped and dead buffers collected once a burst is over (buffers/reclaim.ts). */
  readonly reclaim: { stop(): void };
  readonly dataPlane: DataPlane;
  readonly streams: StreamInferPlane;
  readonly sharedMemory: SharedMemoryPool | undefined;
  readonly configs: ModelConfigs;
  readonly metadata: ModelMetadatas;
}

export async function startGateway(config: Config, role?: WorkerRole): Promise<RunningGateway> {
  growYoungGeneration(config.limits.growYoungGeneration);
  // First: a key file or JWKS that cannot be used stops the start before anything else runs.
  const auth = config.auth.enabled ? await authenticator(config.auth, role !== undefined) : undefined;
  const up = await buildUpstream(config, role);
  const decodePool = new DecodePool({ threads: config.limits.decodeThreads, minBytes: config.limits.decodeThreadMinBytes });
  const probes: ProbeState = { draining: false };
  const passthrough = passthroughRoutes(config.passthrough,
    credentialHeaders({ keyHeader: config.auth.keyHeader, restricted: [...config.api.restricted, ...config.upstream.restricted] }));
  /** notAfter of the serving certificate in use (set once read, and on every reload that took effect). */
  const serving: { notAfterMs?: number } = {};
  const telemetry = startTelemetry(config, role, up, serving, auth);
  const metricsServer = telemetry.metrics.server;
  const metricsListening = metricsServer === undefined ? undefined : listening(metricsServer, 'server.metricsPort', config.server.host, config.server.metricsPort);
  const backendLog = logBackendEvents(up.set, telemetry);
  if (up.tls !== undefined) logTlsReloads(up.tls, telemetry);
  if (auth !== undefined) logAuthEvents(auth, telemetry);
  // Start with the backends' first verdicts when they come quickly (a check's timeout is at most
  // 1 s); a Triton still starting is picked while connecting (upstream/backends/picking.ts).
  await up.set.settled(1000);
  backendLog.started = true;
  if (up.sharedMemory !== undefined) await startSharedMemory(up.sharedMemory, telemetry);
  // Read again although loadConfig checked them: the files may have changed since (a cluster
  // worker starts long after its primary loaded the config).
  const serverTls = config.server.tls.cert === '' ? undefined : readTlsMaterial(config.server.tls);
  serving.notAfterMs = serverTls?.leaf.validToDate.getTime();
  const guard = (rs: Route[]): Route[] => (auth === undefined ? rs : guardRoutes(rs, auth, config.auth.keyHeader));
  // Vertex AI's redirect reaches the routes as served (guarded), which include its own.
  let served: readonly Route[] = [];
  served = guard(allRoutes(config, up, probes, decodePool, passthrough.routes, { guard, served: () => served }));
  // gRPC clients' calls share the data plane's sessions to each backend (one pool of connections).
  const grpcConnections = up.dataPlane instanceof H2DataPlane ? up.dataPlane.connections
    : new H2Connections(up.set, up.tls, config.upstream.http2Client);
  const { server, grpc, grpcPort } = createListener(config, up, served, { auth, telemetry, grpcConnections, probes, serverTls });
  up.configs.onEvict(() => server.forgetKept());
  // The compiled lane reports a request once it is over: its requests under way join the
  // in-flight series at each collection.
  telemetry.metrics.inFlightBesides(() => server.laneInFlight());
  // The lane calls its one backend only while the set would: ready, or not known down (picking.ts).
  const laneGate = (): void => server.laneBackendUsable(up.set.all.some((b) => isReady(b) || mayBeUp(b)));
  up.set.on('state', laneGate);
  laneGate();
  const reloader = serverTls === undefined ? undefined
    : watchCertificate(server, grpcPort, config.server.tls, serverTls, telemetry, (leaf) => { serving.notAfterMs = leaf.validToDate.getTime(); });
  const port = await bothListening(listen(server, config, role), metricsListening);
  // After server.port: a gRPC port that cannot listen stops the start as one line too (main.ts).
  const grpcBound = grpcPort === undefined ? undefined : await listenGrpc(grpcPort, config, role);
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const closer = new Closer({ up, server, grpcPort, telemetry, probes, reloader, auth, decodePool, grpcConnections, passthrough });
  return {
    url: `${serverTls === undefined ? 'http' : 'https'}://${host}:${port}`,
    port,
    backends: up.backends,
    demoBackend: up.demoBackend,
    metricsUrl: metricsServer === undefined ? undefined : `http://${host}:${(metricsServer.address() as AddressInfo).port}/metrics`,
    telemetry,
    bufferPool: up.bufferPool,
    grpc,
    grpcPort: grpcBound,
    laneCounts: () => server.laneCounts(),
    close: (deadlineMs = config.server.drainTimeoutMs, graceMs = 0) => closer.close(deadlineMs, graceMs),
  };
}

/** The backend set and the planes on it; with --demo (and no cluster role) the reference backend first. */
async function buildUpstream(config: Config, role: WorkerRole | undefined): Promise<Upstream> {
  const demoBackend = config.demo && role === undefined ? await startReferenceBackend({ host: '127.0.0.1' }) : undefined;
  const backends = role?.backends ?? (demoBackend ? [demoBackend.address] : config.upstream.backends);
  // One TLS setting for every connection to Triton, planes and health checks alike (upstream/connections/tls.ts).
  const upTls = upstreamTls(config.upstream.tls);
  // One live set for every plane (upstream/backends/backend-set.ts): pools and the model table,
  // health, ejection, DNS, the models each backend has ready, picking, retries. With --demo the
  // demo backend stands in for every pool's backends too.
  const pools = demoBackend === undefined ? config.upstream.pools : config.upstream.pools.map((p) => ({ ...p, targets: [demoBackend.address] }));
  const qm = config.upstream.queueMetrics;
  const set = new BackendSet({
    ...config.upstream, targets: backends, pools,
    ...qm.port === 0 ? {} : { queue: { intervalMs: qm.intervalMs, read: (address: string, ms: number) => readPending(address, qm.port, ms) } },
    checker: new GrpcHealthChecker(upTls, grpcRestrictionMetadata(config.upstream.restricted, 'RepositoryIndex')),
  });

  const control = new ControlPlane({
    backends: set,
    timeoutMs: config.upstream.timeoutMs,
    maxMessageBytes: config.limits.maxInputSizeBytes,
    restricted: config.upstream.restricted,
    tls: upTls,
  });
  const inferRestriction = grpcRestrictionMetadata(config.upstream.restricted, 'ModelInfer');
  const bufferPool = new BufferPool(config.buffers.poolBytes);
  const dataPlane: DataPlane = config.upstream.transport === 'h2'
    ? new H2DataPlane(set, inferRestriction, bufferPool, upTls, config.upstream.http2Client)
    : new GrpcJsDataPlane(set, inferRestriction, upTls);
  const streams = new StreamInferPlane(set, grpcRestrictionMetadata(config.upstream.restricted, 'ModelStreamInfer'), upTls);
  const shm = config.upstream.sharedMemory;
  const sharedMemory = shm.enabled
    ? new SharedMemoryPool({ regions: shm.regions, regionBytes: shm.regionBytes, prefix: shm.prefix, registry: tritonRegistry(control) })
    : undefined;
  return {
    backends, demoBackend, tls: upTls, set, control, bufferPool, reclaim: startReclaim(bufferPool), dataPlane, streams, sharedMemory,
    configs: new ModelConfigs(control), metadata: new ModelMetadatas(control),
  };
}

/** Logs, metrics (their own port unless a cluster worker) and traces, with the gauges read from the parts. */
function startTelemetry(
  config: Config, role: WorkerRole | undefined, up: Upstream, serving: { notAfterMs?: number }, auth: Authenticator | undefined,
): Telemetry {
  const t = config.telemetry;
  const { configs, metadata, bufferPool, set, sharedMemory, tls: upTls } = up;
  return createTelemetry({
    host: config.server.host,
    metricsPort: role === undefined ? config.server.metricsPort : undefined,
    usage: auth === undefined ? undefined : (id) => auth.usage(id),
    logBase: role === undefined ? undefined : { worker: role.worker, pid: process.pid },
    logLevel: t.logLevel,
    tracing: t.tracing,
    traceExporter: t.traceExporter,
    otlpEndpoint: t.otlpEndpoint,
    serviceName: t.serviceName,
    // V2 infer confirms a model through its config, V1 and declarative routes through its metadata.
    knownModel: (name) => configs.has(name) || metadata.has(name),
    bufferPool: () => bufferPool.stats(),
    backends: () => ({
      byState: set.counts(), ejections: set.ejectionsTotal, retries: set.retriesTotal,
      routed: [...set.routed].map(([k, calls]) => ({ pool: k.split('\u0000')[0]!, decision: k.split('\u0000')[1]!, calls })),
      mirrored: [...set.mirrored].map(([k, calls]) => ({ pool: k.split('\u0000')[0]!, outcome: k.split('\u0000')[1]!, calls })),
      tlsReloads: upTls?.reloads ?? 0, tlsReloadFailures: upTls?.reloadFailures ?? 0,
    }),
    sharedMemory: sharedMemory === undefined ? undefined : () => sharedMemory.stats(),
    certificates: () => presentedCertificates(serving.notAfterMs, upTls?.clientCertNotAfterMs),
    recent: t.recent,
    backendList: () => set.all.map((b) => ({
      address: b.address, target: b.target, pool: b.pool, state: b.state, ejections: b.ejections, inFlight: b.inFlight,
    })),
    limits: config.limits,
  });
}

/** Every REST route, in the order they are matched. */
function allRoutes(config: Config, up: Upstream, probes: ProbeState, decodePool: DecodePool, passthrough: readonly Route[],
  serving: Pick<VertexAiDeps, 'guard' | 'served'>): Route[] {
  const { control, configs, metadata, dataPlane, streams, sharedMemory } = up;
  const shm = config.upstream.sharedMemory;
  const plan = inferPlan({
    dataPlane, streams, configs, upstream: config.upstream, limits: config.limits, telemetry: config.telemetry, binary: config.binary, sharedMemory,
    decodePool,
  });
  const generate = { streams, metadata, upstream: config.upstream, limits: config.limits, telemetry: config.telemetry };
  const { sagemaker, vertexAi } = config;
  return [
    ...probeRoutes(control, probes),
    ...healthRoutes(control),
    // before model metadata: /v2/models/stats is not a model
    ...statisticsRoutes(control),
    ...repositoryRoutes({ control, configs, limits: config.limits }),
    ...sharedMemoryRoutes({ control, limits: config.limits, reservedPrefix: shm.enabled ? shm.prefix : undefined }),
    ...settingsRoutes({ control, limits: config.limits }),
    ...inferRoutes(plan),
    ...generateRoutes(generate),
    ...modelRoutes(control),
    // before V1: under openai.prefix /v1, GET /v1/models/{id} of an OpenAI model id is OpenAI's
    ...config.openai.enabled ? openAiRoutes({
      prefix: config.openai.prefix, models: config.openai.models, streams, configs, timeoutMs: config.openai.timeoutMs, limits: config.limits,
      telemetry: config.telemetry,
    }) : [],
    ...v1Routes({ dataPlane, control, metadata, upstream: config.upstream, limits: config.limits, v1: config.v1, telemetry: config.telemetry }),
    ...sagemaker.enabled ? sageMakerRoutes({ control, plan, generate, ...sagemaker }) : [],
    ...vertexAi.enabled ? vertexAiRoutes({ control, plan, ...vertexAi, access: accessTable(config.api.restricted, config.api.disabled), ...serving }) : [],
    ...declarativeRoutes({ routes: config.routes, plan, metadata }),
    ...torchServeRoutes({
      dataPlane, streams, configs, control, upstream: config.upstream, limits: config.limits, telemetry: config.telemetry, binary: config.binary,
      sharedMemory, decodePool, torchserve: config.torchserve,
    }),
    ...passthrough,
  ];
}

interface ListenerParts {
  readonly auth: Authenticator | undefined;
  readonly telemetry: Telemetry;
  readonly grpcConnections: H2Connections;
  readonly probes: ProbeState;
  readonly serverTls: ReturnType<typeof readTlsMaterial> | undefined;
}

/** The server on the gateway's port (ingress/server.ts) and the gRPC pass-through it hands gRPC streams to. */
function createListener(config: Config, up: Upstream, routes: readonly Route[], parts: ListenerParts):
{ server: HttpServer; grpc: GrpcStreamHandler; grpcPort: GrpcPort | undefined } {
  const { auth, telemetry, probes, serverTls } = parts;
  const shm = config.upstream.sharedMemory;
  // The listener hands it every HTTP/2 stream whose content-type starts with application/grpc.
  const grpc = grpcPassthrough({
    backends: up.set, connections: parts.grpcConnections, upstream: config.upstream, limits: config.limits,
    access: accessTable(config.api.restricted, config.api.disabled), auth, keyHeader: config.auth.keyHeader, apiRestricted: config.api.restricted,
    observer: telemetry, draining: () => probes.draining,
    ...shm.enabled ? { reservedPrefix: shm.prefix } : {},
    // One in-flight count for REST requests and gRPC calls (limits.maxInFlightRequests).
    admit: () => server.admit(),
  });
  const lane = laneOf(config, up.backends);
  const short = lane.lane !== undefined && lane.lane.backend.port === 0 ? unixSendBufferShortfall(readText) : undefined;
  if (short !== undefined) {
    telemetry.log.warn({ backend: up.backends[0], wmem_max: short.wmemMax, wanted: UNIX_SEND_BUFFER },
      'the Unix socket backend\'s send buffer is capped by net.core.wmem_max: large requests cost more CPU than they would; '
      + 'raise it (sysctl -w net.core.wmem_max=4194304) or give the gateway CAP_NET_ADMIN');
  }
  const calmed = (remote: string | undefined): void => telemetry.log.warn({ remote, max_resets_per_second: config.server.h2.maxResetsPerSecond },
    'an HTTP/2 connection was closed with ENHANCE_YOUR_CALM: too many stream resets or control frames (server.h2.maxResetsPerSecond)');
  const server = createHttpServer(routes, telemetry, {
    corsOrigin: config.server.corsOrigin, access: accessTable(config.api.restricted, config.api.disabled), bufferPool: up.bufferPool,
    limits: config.limits, timeouts: config.server, head: config.server,
    fastPath: config.server.fastPath,
    plannedInfer: config.server.plannedInfer,
    ...lane,
    tls: serverTls === undefined ? undefined : tlsServerOptions(config.server.tls, serverTls),
    refused: (code) => telemetry.metrics.refused(code),
    h2: config.server.h2,
    grpc,
    calmed,
  });
  const grpcPort = !config.server.grpc.enabled ? undefined : new GrpcPort({
    h2: config.server.h2, head: config.server, timeouts: config.server, grpc, calmed,
    tls: serverTls === undefined ? undefined : tlsServerOptions(config.server.tls, serverTls),
  });
  return { server, grpc, grpcPort };
}

/** A file's text, or undefined where it cannot be read (a /proc file off Linux). */
function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * The compiled lane's options (ingress/http1/lane.ts), where server.compiledLane is on and the
 * configuration decides every repeated planned request the same way: one backend at a literal IPv4
 * address or a Unix socket, cleartext HTTP/2, no pools, model table, restricted protocols, shared memory, tracing,
 * CORS or TLS on server.port. Decided here, once: the lane compares bytes and takes no decision of its own.
 */
function laneOf(config: Config, backends: readonly string[]): { lane: LaneOptions } | Record<string, never> {
  const { server, upstream, telemetry } = config;
  // HTTPS on server.port: the fast path, and so the lane, serve cleartext connections only.
  if (!server.compiledLane || !server.fastPath || !server.plannedInfer || server.corsOrigin !== '' || telemetry.tracing || server.tls.cert !== '') return {};
  if (upstream.transport !== 'h2' || upstream.tls.ca !== '' || upstream.pools.length > 0 || upstream.models.length > 0
    || upstream.restricted.length > 0 || upstream.sharedMemory.enabled || backends.length !== 1) return {};
  const path = socketPath(backends[0]!);
  const m = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(backends[0]!);
  if (m === null && path === undefined) return {};
  return {
    lane: {
      backend: m === null ? { host: path!, port: 0, authority: authorityOf(backends[0]!) } : { host: m[1]!, port: Number(m[2]), authority: backends[0]! },
      // The data plane's call headers (upstream/infer/h2-plane.ts), grpc-timeout a planned call's (upstream.timeoutMs).
      headers: ['content-type', 'application/grpc', 'te', 'trailers', 'user-agent', 'tensorgate', 'grpc-timeout', formatGrpcTimeout(upstream.timeoutMs)],
      callTimeoutMs: upstream.timeoutMs + DEADLINE_GRACE_MS,
      bounds: { headersTimeoutMs: server.headersTimeoutMs, requestTimeoutMs: server.requestTimeoutMs, keepAliveTimeoutMs: server.keepAliveTimeoutMs },
    },
  };
}

/** The gRPC port listening (ingress/grpc-port/): in a cluster worker, shared or SO_REUSEPORT as server.port is. */
async function listenGrpc(grpcPort: GrpcPort, config: Config, role: WorkerRole | undefined): Promise<number> {
  const { host } = config.server;
  const { port } = config.server.grpc;
  try {
    return await grpcPort.listen(port, host, role?.listen.reusePort === true);
  } catch (err) {
    throw listenError(err, 'server.grpc.port', host, port);
  }
}

/** Listens on server.port, or as a cluster worker says; resolves with the port bound. */
async function listen(server: HttpServer, config: Config, role: WorkerRole | undefined): Promise<number> {
  if (role === undefined) server.listen(config.server.port, config.server.host);
  // reusePort implies exclusive: the worker binds itself instead of asking the primary for a handle.
  else if (role.listen.reusePort) server.listen({ port: role.listen.port, host: role.listen.host, reusePort: true });
  else server.listen(role.listen.port, role.listen.host);
  await listening(server, 'server.port', role?.listen.host ?? config.server.host, role?.listen.port ?? config.server.port);
  return (server.address() as AddressInfo).port;
}

/**
 * The main port once both listeners listen. Both are tried before either failure is reported, so
 * a second gateway on a host where the first holds both ports hears of both at once.
 */
async function bothListening(main: Promise<number>, metrics: Promise<void> | undefined): Promise<number> {
  const [m, x] = await Promise.allSettled([main, metrics]);
  const failures = [m, x].flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  const problems = failures.flatMap((e) => (e instanceof ConfigError ? e.problems : []));
  // A host that is not this machine's fails both the same way: said once.
  if (failures.length === 2 && problems.length === 2) throw new ConfigError([...new Set(problems)]);
  if (failures.length > 0) throw failures[0];
  return (m as PromiseFulfilledResult<number>).value;
}

/** What close() stops, besides the upstream parts. */
interface ClosingParts {
  readonly up: Upstream;
  readonly server: HttpServer;
  readonly grpcPort: GrpcPort | undefined;
  readonly telemetry: Telemetry;
  readonly probes: ProbeState;
  readonly reloader: TlsReloader | undefined;
  readonly auth: Authenticator | undefined;
  readonly decodePool: DecodePool;
  readonly grpcConnections: H2Connections;
  readonly passthrough: { close(ms: number): Promise<void> };
}

/** The gateway's close() (RunningGateway.close): once, a grace, the drain, then every part within the deadline. */
class Closer {
  #closing: Promise<CloseOutcome> | undefined;
  #endGrace: () => void = () => undefined;

  constructor(private readonly parts: ClosingParts) {}

  close(deadlineMs: number, graceMs: number): Promise<CloseOutcome> {
    if (this.#closing !== undefined) {
      this.#endGrace();
      return this.#closing;
    }
    this.parts.probes.draining = true;
    this.parts.reloader?.close();
    this.#closing = this.#run(deadlineMs, graceMs);
    return this.#closing;
  }

  async #run(deadlineMs: number, graceMs: number): Promise<CloseOutcome> {
    const { up, server, grpcPort, telemetry, auth, decodePool, grpcConnections, passthrough } = this.parts;
    if (graceMs > 0) await this.#grace(deadlineMs, graceMs);
    const until = Date.now() + deadlineMs;
    // Both listeners at once, to the same deadline.
    const [port, grpc] = await Promise.all([server.drain(deadlineMs), grpcPort?.drain(deadlineMs)]);
    const drained = grpc === undefined ? port : { inTime: port.inTime && grpc.inTime, requestsCut: port.requestsCut + grpc.requestsCut };
    if (!drained.inTime || drained.requestsCut > 0) {
      telemetry.log.warn({ requests_cut: drained.requestsCut, drain_timeout_ms: deadlineMs }, drained.inTime
        ? 'answers were cut during the drain (their clients closed the connection)'
        : 'connections still open at the drain deadline were closed');
    }
    // Calls still running belong to no client any more (a readiness probe, a handler that has
    // not noticed its aborted signal yet): cancelled, not waited for.
    // Before the control plane closes: the regions are unregistered through it.
    const shmClosed = await Promise.allSettled([up.sharedMemory?.close(remainingMs(until)), decodePool.close()]);
    up.set.close();
    up.reclaim.stop();
    up.tls?.close();
    auth?.close();
    up.control.close();
    up.dataPlane.close();
    grpcConnections.close();
    up.streams.close();
    // A step that fails (a collector refusing the last spans) is logged; the others still run,
    // or a process would be left holding what they were to close.
    const steps = [...shmClosed, ...await Promise.allSettled([passthrough.close(remainingMs(until)), telemetry.close(remainingMs(until))])];
    // Last: the gateway's calls to it have ended, so it has nothing left to wait for.
    steps.push(...await Promise.allSettled([up.demoBackend?.close(remainingMs(until))]));
    for (const s of steps) if (s.status === 'rejected') telemetry.log.warn({ err: s.reason }, 'a part of the gateway failed to close');
    return { requestsCut: drained.requestsCut };
  }

  /** server.drainGraceMs: /readyz says 503 while everything else is served; a second close() ends it. */
  #grace(deadlineMs: number, graceMs: number): Promise<void> {
    this.parts.telemetry.log.info({ drain_grace_ms: graceMs, drain_timeout_ms: deadlineMs },
      'stopping: /readyz answers 503, requests are still served for server.drainGraceMs');
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, graceMs);
      this.#endGrace = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/**
 * Reclaims what a killed gateway left and registers the regions, waiting at most 2 s: a Triton not
 * ready yet is tried again on later requests, which meanwhile go the normal way.
 */
async function startSharedMemory(pool: SharedMemoryPool, telemetry: Telemetry): Promise<void> {
  pool.onError = (err) => telemetry.log.warn({ err }, 'shared-memory regions could not be registered with Triton; requests go the normal way until they are');
  if (await pool.start(2000)) {
    const s = pool.stats();
    telemetry.log.info({ regions: s.regions, region_bytes: pool.regionBytes, reclaimed: s.reclaimed }, 'shared-memory regions registered with Triton');
  }
}

/** Key file and JWKS reloads in the log and the metrics (auth/ does not import telemetry); never a credential. */
function logAuthEvents(auth: Authenticator, telemetry: Telemetry): void {
  const log = telemetry.log;
  const plainWarning = (ids: readonly string[]): void => {
    if (ids.length > 0) log.warn({ keys: ids }, 'auth.keysFile holds these tokens in plain text; store sha256:<hex> of each instead');
  };
  plainWarning(auth.plainKeys);
  if (auth.limiter instanceof SharedLimiter) logLimitsStore(auth.limiter, telemetry);
  auth.limiter.quotas?.on('warning', (limit, unit) => telemetry.metrics.quotaWarning(limit, unit));
  auth.on('reload', (e) => {
    telemetry.metrics.authReloaded(e.file, e.ok);
    if (e.ok) {
      log.info({ file: e.path, keys: e.keys }, e.file === 'keys' ? 'auth keys reloaded' : 'JWKS reloaded');
      plainWarning(e.plain ?? []);
    } else log.warn({ file: e.path, reason: e.problem }, `${e.file === 'keys' ? 'auth keys' : 'JWKS'} not reloaded; the previous ones stay`);
  });
}

/** auth.limits.store's state, round trips and failures: metrics; its state changes: the log (once each). */
function logLimitsStore(limiter: SharedLimiter, telemetry: Telemetry): void {
  const { store } = limiter;
  const { log, metrics } = telemetry;
  if (store.up) metrics.limitsStoreUp(true); // told before this was listening
  store.on('state', (up) => {
    metrics.limitsStoreUp(up);
    if (up) log.info({ store: store.where }, 'limits store answering: limits are counted there again');
    else log.warn({ store: store.where, storeFailure: limiter.failure }, 'limits store down: requests with limits meet auth.limits.storeFailure until it answers');
  });
  store.on('roundTrip', (s) => metrics.limitsStoreRoundTrip(s));
  store.on('failure', (kind) => metrics.limitsStoreFailed(kind));
  limiter.on('fallback', (policy) => metrics.limitsStoreFallback(policy));
}

/** The certificates the gateway presents, for tensorgate.tls.certificate_expiry. */
function presentedCertificates(server: number | undefined, upstreamClient: number | undefined): CertificateExpiry[] {
  const out: CertificateExpiry[] = [];
  if (server !== undefined) out.push({ certificate: 'server', notAfterMs: server });
  if (upstreamClient !== undefined) out.push({ certificate: 'upstream_client', notAfterMs: upstreamClient });
  return out;
}

/**
 * The certificate reload (ingress/tls.ts) logged and counted; failed handshakes (a client without
 * the certificate server.tls.clientCa asks for, an old TLS version) at debug level: at an edge
 * they are scanners' daily noise.
 */
function watchCertificate(
  server: HttpServer, grpcPort: GrpcPort | undefined, config: Config['server']['tls'], tls: ReturnType<typeof readTlsMaterial>, telemetry: Telemetry,
  served: (leaf: typeof tls.leaf) => void,
): TlsReloader {
  const log = telemetry.log;
  // The gRPC port serves the same certificate: a reload reaches both listeners.
  const both = {
    setSecureContext(options: SecureContextOptions): void {
      (server as HttpsServer).setSecureContext(options);
      (grpcPort?.server as TlsServer | undefined)?.setSecureContext(options);
    },
  };
  const reloader = new TlsReloader(both, config, tls);
  const leafLine = (leaf: typeof tls.leaf): Record<string, unknown> =>
    ({ subject: leaf.subject, serial: leaf.serialNumber, fingerprint256: leaf.fingerprint256, valid_to: leaf.validTo });
  // debug: nothing is logged before the listening line (tools read it as the first line of stdout).
  log.debug({ ...leafLine(tls.leaf), client_ca: config.clientCa !== '' }, 'TLS certificate loaded');
  reloader.on('reload', (r) => {
    telemetry.metrics.tlsReloaded(r.outcome);
    if (r.outcome === 'success') {
      served(r.leaf);
      log.info(leafLine(r.leaf), 'TLS certificate reloaded');
    } else {
      log.error({ reason: r.error.message }, 'TLS certificate reload failed; the previous certificate is still served');
    }
  });
  reloader.on('watchError', (err) => log.error({ err }, 'TLS certificate directory no longer watched; reloads stopped'));
  server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
    telemetry.metrics.tlsHandshakeFailed(handshakeFailure(err.code));
    log.debug({ reason: err.message, code: err.code }, 'TLS handshake failed');
  });
  return reloader;
}

/**
 * Every change of the backend set in the log (upstream/ does not import telemetry). Until
 * `started`, the expected ones (a backend added, a connecting one found ready) are debug lines:
 * the listening line stays the first one a healthy start prints.
 */
function logBackendEvents(set: BackendSet, telemetry: Telemetry): { started: boolean } {
  const log = telemetry.log;
  const state = { started: false };
  set.on('state', (e) => {
    const line = { backend: e.address, from: e.from, to: e.to, reason: e.reason };
    if (e.to !== 'ready') log.warn(line, 'backend state');
    else if (state.started || e.from !== 'connecting') log.info(line, 'backend state');
    else log.debug(line, 'backend state');
  });
  set.on('added', (b) => {
    const line = { backend: b.address, target: b.target, pool: b.pool };
    if (state.started) log.info(line, 'backend added');
    else log.debug(line, 'backend added');
  });
  set.on('removed', (b) => log.info({ backend: b.address, target: b.target }, 'backend removed from DNS: drained'));
  set.on('retry', (e) => log.info({ backend: e.address, reason: e.reason }, 'upstream call retried on another backend'));
  set.on('resolveFailed', (e) => log.warn({ target: e.target, reason: e.message }, 'backend name not resolved; its backends stay'));
  // A backend's first read (every model it has) is a debug line: it comes at start, and the listening
  // line stays the first a healthy start prints. Later changes, a model loaded or unloaded at run
  // time, are info.
  set.on('models', (e) => {
    const line = { backend: e.address, pool: e.pool, loaded: e.loaded, unloaded: e.unloaded, models: e.count };
    if (e.first) log.debug(line, 'backend models read');
    else log.info(line, 'backend models changed');
  });
  return state;
}

/**
 * A key file or JWKS that cannot be used stops the start: its message names the key and the file.
 * So does a limits store that cannot be used (its message names auth.limits.store).
 */
async function authenticator(auth: Config['auth'], clustered: boolean): Promise<Authenticator> {
  let a: Authenticator;
  try {
    a = new Authenticator(auth, clustered);
  } catch (err) {
    throw new ConfigError([`${(err as Error).message}; fix the file or the key (docs/production.md#authentication)`]);
  }
  try {
    await a.start();
  } catch (err) {
    a.close();
    throw new ConfigError([(err as Error).message]);
  }
  return a;
}

/**
 * upstream.tls read at start (undefined when no CA is set). Unreadable or unusable files stop the
 * start with a configuration error naming the key.
 */
function upstreamTls(files: Config['upstream']['tls']): UpstreamTls | undefined {
  if (files.ca === '') return undefined;
  try {
    return new UpstreamTls(files);
  } catch (err) {
    throw new ConfigError([(err as Error).message]);
  }
}

/** Certificate reloads of upstream.tls in the log; counted in metrics (tensorgate.upstream.tls_reloads). */
function logTlsReloads(tls: UpstreamTls, telemetry: Telemetry): void {
  tls.on('reloaded', (e) => telemetry.log.info({ files: e.files }, 'upstream TLS certificates reloaded: new connections to Triton use them'));
  tls.on('reloadFailed', (e) => telemetry.log.error({ files: e.files, reason: e.message }, 'upstream TLS certificates not reloaded: the previous ones stay in use'));
}
