// Wiring only: builds the upstream, the routes and the HTTP server from the frozen config.
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import type { Config } from './config/schema';
import { createHttpServer } from './ingress/server';
import { type ReferenceBackend, startReferenceBackend } from './reference-backend/server';
import { healthRoutes } from './routes/health';
import { inferRoutes } from './routes/infer';
import { modelRoutes } from './routes/models';
import { v1Routes } from './routes/v1';
import { ControlPlane } from './upstream/control-plane';
import type { DataPlane } from './upstream/data-plane';
import { GrpcJsDataPlane } from './upstream/grpc-js-call';
import { H2DataPlane } from './upstream/h2-call';
import { ModelConfigs } from './upstream/model-configs';
import { ModelMetadatas } from './upstream/model-metadata';

export interface RunningGateway {
  /** Base URL clients use, e.g. http://127.0.0.1:8000 */
  readonly url: string;
  readonly port: number;
  /** The Triton gRPC addresses in use (the demo backend's when --demo). */
  readonly backends: readonly string[];
  /** Set when --demo started the in-process reference backend. */
  readonly demoBackend: ReferenceBackend | undefined;
  close(): Promise<void>;
}

export async function startGateway(config: Config): Promise<RunningGateway> {
  const demoBackend = config.demo ? await startReferenceBackend({ host: '127.0.0.1' }) : undefined;
  const backends = demoBackend ? [demoBackend.address] : config.upstream.backends;

  const upstream = new ControlPlane({
    backends,
    timeoutMs: config.upstream.timeoutMs,
    maxMessageBytes: config.limits.maxInputSizeBytes,
  });
  const dataPlane: DataPlane = config.upstream.transport === 'h2' ? new H2DataPlane(backends) : new GrpcJsDataPlane(backends);
  const configs = new ModelConfigs(upstream);
  const server = createHttpServer([
    ...healthRoutes(upstream),
    ...inferRoutes({
      dataPlane,
      configs,
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
    }),
    ...modelRoutes(upstream),
    ...v1Routes({
      dataPlane,
      upstream,
      metadata: new ModelMetadatas(upstream),
      timeoutMs: config.upstream.timeoutMs,
      maxInputSizeBytes: config.limits.maxInputSizeBytes,
      maxBodyBytes: config.limits.maxBodyBytes,
      statusFormat: config.v1.statusFormat,
    }),
  ]);
  server.listen(config.server.port, config.server.host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;

  return {
    url: `http://${host}:${port}`,
    port,
    backends,
    demoBackend,
    async close() {
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      upstream.close();
      dataPlane.close();
      await demoBackend?.close();
    },
  };
}
