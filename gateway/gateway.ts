// Wiring only: builds the upstream, the routes and the HTTP server from the frozen config.
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { Config } from './config/schema';
import { createHttpServer } from './ingress/server';
import { type ReferenceBackend, startReferenceBackend } from './reference-backend/server';
import { healthRoutes } from './routes/health';
import { generateRoutes } from './routes/generate';
import { inferRoutes } from './routes/infer';
import { modelRoutes } from './routes/models';
import { type ProbeState, probeRoutes } from './routes/probes';
import { repositoryRoutes } from './routes/repository';
import { settingsRoutes } from './routes/settings';
import { sharedMemoryRoutes } from './routes/shared-memory';
import { statisticsRoutes } from './routes/statistics';
import { accessTable, grpcRestrictionMetadata } from './api-access';
import { v1Routes } from './routes/v1';
import { declarativeRoutes } from './routes/declarative';
import { passthroughRoutes } from './routes/passthrough';
import { BufferPool } from './upstream/buffer-pool';
import { ControlPlane } from './upstream/control-plane';
import type { DataPlane } from './upstream/data-plane';
import { GrpcJsDataPlane } from './upstream/grpc-js-call';
import { H2DataPlane } from './upstream/h2-call';
import { ModelConfigs } from './upstream/model-configs';
import { createTelemetry, type Telemetry } from './telemetry/telemetry';
import { ModelMetadatas } from './upstream/model-metadata';
import { StreamInferPlane } from './upstream/stream-call';

export interface RunningGateway {
  /** Base URL clients use, e.g. http://127.0.0.1:8000 */
  readonly url: string;
  readonly port: number;
  /** The Triton gRPC addresses in use (the demo backend's when --demo). */
  readonly backends: readonly string[];
  /** Set when --demo started the in-process reference backend. */
  readonly demoBackend: ReferenceBackend | undefined;
  /** Prometheus endpoint, e.g. http://127.0.0.1:8002/metrics */
  readonly metricsUrl: string;
  readonly telemetry: Telemetry;
  /** The message buffer pool (buffers.poolBytes). */
  readonly bufferPool: BufferPool;
  close(): Promise<void>;
}

export async function startGateway(config: Config): Promise<RunningGateway> {
  const demoBackend = config.demo ? await startReferenceBackend({ host: '127.0.0.1' }) : undefined;
  const backends = demoBackend ? [demoBackend.address] : config.upstream.backends;

  const upstream = new ControlPlane({
    backends,
    timeoutMs: config.upstream.timeoutMs,
    maxMessageBytes: config.limits.maxInputSizeBytes,
    restricted: config.upstream.restricted,
  });
  const inferRestriction = grpcRestrictionMetadata(config.upstream.restricted, 'ModelInfer');
  const bufferPool = new BufferPool(config.buffers.poolBytes);
  const dataPlane: DataPlane = config.upstream.transport === 'h2'
    ? new H2DataPlane(backends, inferRestriction, bufferPool)
    : new GrpcJsDataPlane(backends, inferRestriction);
  const streams = new StreamInferPlane(backends, grpcRestrictionMetadata(config.upstream.restricted, 'ModelStreamInfer'));
  const configs = new ModelConfigs(upstream);
  const metadata = new ModelMetadatas(upstream);
  const probes: ProbeState = { draining: false };
  const passthrough = passthroughRoutes(config.passthrough);
  const control = { upstream, maxBodyBytes: config.limits.maxInputSizeBytes };
  const t = config.telemetry;
  const telemetry = createTelemetry({
    host: config.server.host,
    metricsPort: config.server.metricsPort,
    logLevel: t.logLevel,
    tracing: t.tracing,
    traceExporter: t.traceExporter,
    otlpEndpoint: t.otlpEndpoint,
    serviceName: t.serviceName,
    knownModel: (name) => configs.has(name),
    bufferPool: () => bufferPool.stats(),
  });
  const server = createHttpServer([
    ...probeRoutes(upstream, probes),
    ...healthRoutes(upstream),
    // before model metadata: /v2/models/stats is not a model
    ...statisticsRoutes(upstream),
    ...repositoryRoutes({ ...control, configs }),
    ...sharedMemoryRoutes(control),
    ...settingsRoutes(control),
    ...inferRoutes({
      dataPlane,
      configs,
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
      serverTiming: t.serverTiming,
      headerlessBinary: config.binary.headerless,
    }),
    ...generateRoutes({
      streams,
      metadata,
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
    }),
    ...modelRoutes(upstream),
    ...v1Routes({
      dataPlane,
      upstream,
      metadata,
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
      statusFormat: config.v1.statusFormat,
    }),
    ...declarativeRoutes({
      routes: config.routes,
      dataPlane,
      metadata,
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
    }),
    ...passthrough.routes,
  ], telemetry, { corsOrigin: config.server.corsOrigin, access: accessTable(config.api.restricted, config.api.disabled), bufferPool });
  server.listen(config.server.port, config.server.host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  if (!telemetry.metrics.server.listening) await once(telemetry.metrics.server, 'listening');
  const metricsPort = (telemetry.metrics.server.address() as AddressInfo).port;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;

  return {
    url: `http://${host}:${port}`,
    port,
    backends,
    demoBackend,
    metricsUrl: `http://${host}:${metricsPort}/metrics`,
    telemetry,
    bufferPool,
    async close() {
      probes.draining = true;
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      upstream.close();
      dataPlane.close();
      streams.close();
      await passthrough.close();
      await telemetry.close();
      await demoBackend?.close();
    },
  };
}
