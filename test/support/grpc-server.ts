// The server a gRPC pass-through test serves its handler on: node:http2's (as server.port does), or
// the gRPC port's own HTTP/2 server (ingress/grpc-port/). A test file runs its suite on the gRPC
// port by calling serveOnGrpcPort() before it loads the suite (test/integration/grpc-port-passthrough.test.ts).
import { createServer, type Http2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { GrpcPort } from '../../gateway/ingress/grpc-port/listener';
import type { GrpcHandler } from '../../gateway/ingress/h2';

let onPort = false;

export function serveOnGrpcPort(): void {
  onPort = true;
}

export function servedOnGrpcPort(): boolean {
  return onPort;
}

export interface GrpcServing {
  readonly address: string;
  close(): Promise<void>;
}

/** The gRPC port's bounds as the gateway's defaults set them (gateway/config/schema.ts). */
export const PORT_DEFAULTS = {
  h2: {
    maxConcurrentStreams: 100, maxSessionMemoryMb: 32, streamWindowBytes: 1024 * 1024, connectionWindowBytes: 8 * 1024 * 1024,
    maxResetsPerSecond: 200, maxUnreadAnswerBytes: 32 * 1024 * 1024, unreadAnswerMs: 30_000,
  },
  head: { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100 },
  timeouts: { headersTimeoutMs: 10_000, keepAliveTimeoutMs: 65_000 },
};

/** `handler` served on 127.0.0.1, a free port. */
export async function serveGrpc(handler: GrpcHandler): Promise<GrpcServing> {
  if (onPort) {
    const port = new GrpcPort({ ...PORT_DEFAULTS, grpc: handler });
    const bound = await port.listen(0, '127.0.0.1');
    return { address: `127.0.0.1:${bound}`, close: async () => { await port.drain(0); } };
  }
  const server = createServer();
  const sessions = new Set<Http2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });
  server.on('stream', (stream, headers) => handler(stream, headers, { afterWrite: () => undefined, cutOff: () => false }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const s of sessions) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
