// One @grpc/grpc-js client per backend of the live set (upstream/backends/backend-set.ts), made when the
// backend is first picked and closed when it leaves the set (grpc-js lets calls already running
// finish). Shared by the control plane, the grpc-js data plane and the stream plane, so the three
// agree on limits, on picking (round robin per call over ready backends, docs/architecture.md#calls-to-triton: HTTP/2
// multiplexing makes connection-level balancing sticky) and on how a failed call becomes a
// GatewayError. With upstream.tls their channels take TLS credentials that follow certificate
// reloads (upstream/connections/tls.ts).
import { Client, connectivityState, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import type { GatewayError } from '../../errors';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import { MAX_MESSAGE_BYTES } from '../infer/data-plane';
import { GrpcStatus } from '../../grpc/status';
import { notSent, upstreamError } from '../status';
import { InFlight } from './in-flight';
import { closedAfterHandshake, tlsFailure, type UpstreamTls } from './tls';

const MAX_RECONNECT_BACKOFF_MS = 1000;

export class GrpcClients {
  readonly set: BackendSet;
  readonly #maxMessageBytes: number;
  readonly #tls: UpstreamTls | undefined;
  readonly #clients = new Map<Backend, Client>();
  readonly #removed = (b: Backend): void => {
    this.#clients.get(b)?.close();
    this.#clients.delete(b);
  };

  /** Triton's own message limit unless told otherwise; no grpc-js retries (upstream/backends/retry.ts decides). */
  constructor(set: BackendSet, maxMessageBytes = MAX_MESSAGE_BYTES, tls?: UpstreamTls) {
    this.set = set;
    this.#maxMessageBytes = maxMessageBytes;
    this.#tls = tls;
    set.on('removed', this.#removed);
  }

  client(b: Backend): Client {
    let c = this.#clients.get(b);
    if (c === undefined) {
      const tls = this.#tls;
      c = new Client(b.address, tls === undefined ? credentials.createInsecure() : tls.channelCredentials(), {
        ...tls?.channelOptions(),
        'grpc.max_receive_message_length': this.#maxMessageBytes,
        'grpc.max_send_message_length': this.#maxMessageBytes,
        'grpc.enable_retries': 0,
        // A backend the set calls ready again must not stay behind grpc-js' own backoff: 1 s × 1.6ⁿ
        // up to 120 s. With Triton absent for 35 s at start, the first 200 came 2.6–11.9 s after
        // Triton was ready (test/faults/triton-lifecycle.test.ts). Capped: a dead backend costs
        // one connection attempt a second.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': MAX_RECONNECT_BACKOFF_MS,
      });
      this.#clients.set(b, c);
      if (tls !== undefined) tlsClients.set(c, { tls, address: b.address });
    }
    return c;
  }

  close(): void {
    this.set.off('removed', this.#removed);
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }
}

/** The metadata of one call: Triton's restriction header when needed, then the request's own (trace context). */
export function callMetadata(restriction: readonly [string, string] | undefined, extra?: Readonly<Record<string, string>>): Metadata {
  const m = new Metadata();
  if (restriction !== undefined) m.set(restriction[0], restriction[1]);
  if (extra !== undefined) for (const [k, v] of Object.entries(extra)) m.set(k, v);
  return m;
}

/** The TLS settings and backend of clients made with them, for grpcJsError's message. */
const tlsClients = new WeakMap<Client, { readonly tls: UpstreamTls; readonly address: string }>();

/**
 * grpc-js' words for a failed connection ("No connection established. Last error: …"), with the
 * TLS reason spelled out when there is one: the verification error OpenSSL gave, or — what
 * grpc-js calls "Failed to connect", a connection that closed before Triton's HTTP/2 settings —
 * on a TLS channel, Triton refusing the client certificate (upstream/connections/tls.ts closedAfterHandshake).
 */
export function grpcJsTransportDetails(details: string, address: string, tls: UpstreamTls | undefined): string {
  if (tls === undefined) return details;
  const last = /Last error: (?:Error: )?(.*?)(?:\. Resolution note:.*)?$/s.exec(details)?.[1] ?? details;
  if (/^Failed to connect\b/.test(last)) return closedAfterHandshake(address, tls.mutual);
  return tlsFailure(last, address) ?? details;
}

/**
 * A failed grpc-js call as the client sees it. grpc-js reports a refused or dropped connection as
 * UNAVAILABLE, like Triton's own "server not ready"; the channel state tells them apart.
 */
export function grpcJsError(err: ServiceError, client: Client): GatewayError {
  const transport = err.code === GrpcStatus.UNAVAILABLE && client.getChannel().getConnectivityState(false) !== connectivityState.READY;
  const t = transport ? tlsClients.get(client) : undefined;
  const details = t === undefined ? err.details : grpcJsTransportDetails(err.details, t.address, t.tls);
  const e = upstreamError(err.code, details, transport, err);
  // grpc-js fails a call with "No connection established" only at the pick, before it has a
  // transport to send on (grpc-js picker.ts, load-balancer-pick-first.ts): nothing left.
  return transport && err.details.includes('No connection established') ? notSent(e) : e;
}

/**
 * What a plane of calls on grpc-js channels holds: a channel per backend, the restriction's
 * metadata, and the calls in flight, which close() cancels before it closes the channels.
 */
export abstract class GrpcJsPlane {
  protected readonly clients: GrpcClients;
  protected readonly inFlight = new InFlight();

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `tls`: upstream.tls, when the connections to Triton use TLS.
   */
  constructor(backends: BackendSet, protected readonly restriction?: readonly [string, string], tls?: UpstreamTls) {
    this.clients = new GrpcClients(backends, undefined, tls);
  }

  /** Cancels the calls still running (they reject with GW_ERR_UPSTREAM_UNAVAILABLE) and closes the channels. */
  close(): void {
    this.inFlight.cancelAll();
    this.clients.close();
  }
}
