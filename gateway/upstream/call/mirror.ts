// A copy of a call sent to a mirror pool (upstream.models mirror), for the data plane's ModelInfer
// (upstream/infer/h2-plane.ts) and the gRPC pass-through (relay.ts) alike: the call's headers and
// request bytes, its answer read and dropped. It never holds the call: its flow control is ignored
// (a copy costs at most its request's size; upstream.mirrorMaxInFlight bounds how many run), it is
// bounded by the call's deadline, reset when the call ends before its request was whole, and its
// outcome is counted (tensorgate_upstream_mirrored_total): answered once a gRPC status came.
import type { OutgoingHttpHeaders } from 'node:http2';
import type { GatewayError } from '../../errors';
import type { BackendSet } from '../backends/backend-set';
import type { ModelKey } from '../backends/pools';
import type { H2Connections } from '../connections/h2-sessions';
import type { InFlight, Running } from '../connections/in-flight';
import { GrpcCall } from './grpc-call';

export class MirrorCall extends GrpcCall {
  #ended = false;
  #timer: NodeJS.Timeout | undefined;
  /** What the plane's close() calls; #running is its entry in the plane's InFlight. */
  readonly #onShutdown = (): void => this.reset();
  #running: Running | undefined;

  private constructor(private readonly set: BackendSet, private readonly pool: string, private readonly inFlight: InFlight | undefined) {
    super(true);
  }

  /**
   * The copy of a call for `model`, when the model table mirrors it and the pick decided so (on a
   * backend of the mirror pool); undefined when not mirrored, or dropped (upstream.mirrorMaxInFlight
   * reached, no backend, the session refused the stream). `inFlight`: the plane whose close() resets it.
   */
  static start(set: BackendSet, connections: H2Connections, model: ModelKey | undefined, path: string, headers: OutgoingHttpHeaders,
    deadline: number, inFlight?: InFlight): MirrorCall | undefined {
    const pool = model?.mirror;
    if (model === undefined || pool === undefined) return undefined;
    const b = set.mirrorBackend(model, pool);
    if (b === undefined) return undefined;
    const m = new MirrorCall(set, pool, inFlight);
    if (m.open(connections.get(b), path, headers, deadline, false) !== undefined) {
      set.mirrorEnded(pool, false);
      return undefined;
    }
    m.#timer = setTimeout(() => m.reset(), Math.max(0, deadline - Date.now()));
    m.#running = inFlight?.add(m.#onShutdown);
    return m;
  }

  /** Writes a piece of the copy (its back-pressure is ignored). */
  override write(piece: Buffer): boolean {
    if (!this.#ended) super.write(piece);
    return true;
  }

  override end(last?: Buffer): void {
    if (this.#ended) return;
    this.#ended = true;
    super.end(last);
  }

  /** The call ended before its request was whole: the copy is incomplete, and reset. */
  cancelUnlessEnded(): void {
    if (!this.#ended) this.reset();
    this.#ended = true;
  }

  protected answerHeaders(): void { /* the answer is dropped */ }
  protected chunk(): void { /* the answer is dropped */ }
  protected trailers(): void { /* its status is read by GrpcCall */ }
  protected ended(): void { /* 'close' follows */ }

  protected failed(err: GatewayError): void {
    void err;
    this.reset(); // 'close' follows and counts it
  }

  protected closed(): void {
    this.#ended = true; // nothing more is written to it
    clearTimeout(this.#timer);
    this.inFlight?.delete(this.#running);
    this.set.mirrorEnded(this.pool, this.status !== undefined);
  }
}
