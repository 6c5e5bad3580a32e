// One @grpc/grpc-js client per backend address, taken in turn per call (round robin per request,
// DESIGN.md §5: HTTP/2 multiplexing makes connection-level balancing sticky). Shared by the
// control plane, the grpc-js data plane and the stream plane, so the three agree on limits and on
// how a failed call becomes a GatewayError.
import { Client, connectivityState, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import type { GatewayError } from '../errors';
import { MAX_MESSAGE_BYTES } from './data-plane';
import { GrpcStatus, upstreamError } from './status';

const MAX_RECONNECT_BACKOFF_MS = 1000;

export class GrpcClients {
  readonly all: readonly Client[];
  #next = 0;

  /** Triton's own message limit unless told otherwise; no transparent retries (DESIGN.md §7). */
  constructor(addresses: readonly string[], maxMessageBytes = MAX_MESSAGE_BYTES) {
    this.all = addresses.map((address) => new Client(address, credentials.createInsecure(), {
      'grpc.max_receive_message_length': maxMessageBytes,
      'grpc.max_send_message_length': maxMessageBytes,
      'grpc.enable_retries': 0,
      // grpc-js reconnects a failed channel after 1 s × 1.6ⁿ (±20 %), up to 120 s: with Triton
      // absent for 35 s at start, the first 200 came 2.6–11.9 s after Triton was ready, and a longer
      // outage could cost minutes (test/faults/triton-lifecycle.test.ts). Capped at 1 s: a dead
      // backend costs one connection attempt per second.
      'grpc.max_reconnect_backoff_ms': MAX_RECONNECT_BACKOFF_MS,
    }));
  }

  next(): Client {
    return this.all[this.#next++ % this.all.length]!;
  }

  close(): void {
    for (const c of this.all) c.close();
  }
}

/** The metadata of one call: Triton's restriction header when needed, then the request's own (trace context). */
export function callMetadata(restriction: readonly [string, string] | undefined, extra?: Readonly<Record<string, string>>): Metadata {
  const m = new Metadata();
  if (restriction !== undefined) m.set(restriction[0], restriction[1]);
  if (extra !== undefined) for (const [k, v] of Object.entries(extra)) m.set(k, v);
  return m;
}

/**
 * A failed grpc-js call as the client sees it. grpc-js reports a refused or dropped connection as
 * UNAVAILABLE, like Triton's own "server not ready"; the channel state tells them apart.
 */
export function grpcJsError(err: ServiceError, client: Client): GatewayError {
  const transport = err.code === GrpcStatus.UNAVAILABLE && client.getChannel().getConnectivityState(false) !== connectivityState.READY;
  return upstreamError(err.code, err.details, transport, err);
}
