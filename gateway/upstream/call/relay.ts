// The upstream side of a gRPC pass-through call (its client side: passthrough/grpc-relay.ts): one
// client call becomes one upstream call (grpc-call.ts) on a backend of the live set, picked per
// call (round robin over the ready ones: a client's calls spread over every replica although they
// share one connection). The frames go through by reference: each DATA chunk the client sent is
// written to the upstream stream as the same Buffer, and each answer chunk is handed back as it
// came; the answer's headers, trailers and status are told to the client side as they arrive.
//
// Retries (upstream/backends/retry.ts): only a call whose upstream stream never opened (connection
// failed) or was refused (REFUSED_STREAM, GOAWAY) before any client DATA was written to it goes to
// another backend (GrpcCall.failure): nothing is kept for a replay, so DATA once written is never
// sent again. A call of a sequence (`affinity`) is never retried.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { GatewayError } from '../../errors';
import { GrpcStatus } from '../../grpc/status';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import type { ModelKey } from '../backends/pools';
import { countRetry, mayRetry, type RetryOptions } from '../backends/retry';
import type { Connection, H2Connections } from '../connections/h2-sessions';
import { lacksModel, upstreamError } from '../status';
import { GrpcCall } from './grpc-call';
import { MirrorCall } from './mirror';
import { nowNs } from '../../infer/clock';

/** What the client side of a relayed call is told: of the current attempt only, in this order. */
export interface RelayClient {
  /** The attempt's upstream stream is open: the client's DATA may go (RelayedCall.send). */
  upstreamOpened(): void;
  /** The answer's headers (:status 200); `trailersOnly`: they hold its status, and the answer is complete. */
  answerHeaders(h: IncomingHttpHeaders, trailersOnly: boolean): void;
  /** An answer DATA chunk, to relay as it is (RelayedCall.pause while the client cannot take more). */
  answerData(chunk: Buffer): void;
  /** The answer's trailers, which hold its status. */
  answerTrailers(t: IncomingHttpHeaders): void;
  /** The answer ended after its trailers: it is complete. */
  answerEnded(): void;
  /** The call failed for good: no backend, no attempt left, or an answer that is not gRPC. */
  failed(err: GatewayError): void;
}

export class RelayedCall {
  #attempt: RelayAttempt | undefined;
  #retries = 0;
  /** The backend counting this call in flight (least-request picking), until it is settled or retried elsewhere. */
  #counted: Backend | undefined;
  /** The copy of this call going to a mirror pool, if any. */
  #mirror: MirrorCall | undefined;
  #retry: RetryOptions;
  /** The answer's headers went to the client (its status then comes in trailers). */
  #answering = false;
  /** The client has its answer's end, or the call was cancelled: later events are not relayed. */
  #done = false;
  #bytesIn = 0;
  #upstreamStartNs = 0;
  #firstByteNs = 0;

  /**
   * `headers`: what goes upstream besides what every gRPC call sets (grpc-call.ts): the client's
   * metadata and the gateway's. The call's own object: each attempt sets its pseudo-headers and
   * grpc-timeout on it (node:http2 encodes what it sends at once), rather than spreading it into a new one.
   */
  constructor(private readonly set: BackendSet, private readonly connections: H2Connections, private readonly client: RelayClient,
    private readonly path: string, private readonly headers: OutgoingHttpHeaders, private readonly deadline: number) {
    this.#retry = { deadline };
  }

  /** The backend of the last attempt. */
  get backend(): string | undefined {
    return this.#attempt?.backend.address;
  }

  /** The answer's gRPC status, once it came. */
  get status(): number | undefined {
    return this.#attempt?.status;
  }

  get statusMessage(): string {
    return this.#attempt?.statusMessage ?? '';
  }

  get retries(): number {
    return this.#retries;
  }

  /** Request bytes written upstream (prefixes included). */
  get bytesIn(): number {
    return this.#bytesIn;
  }

  /** When the first upstream stream was asked for, and when its answer's headers came; 0: never. */
  get upstreamStartNs(): number {
    return this.#upstreamStartNs;
  }

  get firstByteNs(): number {
    return this.#firstByteNs;
  }

  /**
   * Picks the call's backend — by `model` (its pool, the backends that have it) and a sequence's
   * `affinity` key, as for a REST request (upstream/backends/backend-set.ts) — and opens the call
   * there; the pick decides whether a copy goes to a mirror pool (upstream.models mirror).
   */
  begin(model: ModelKey | undefined, affinity: string | undefined): void {
    this.#retry = model === undefined ? { deadline: this.deadline, affinity } : { deadline: this.deadline, affinity, model };
    let first: Backend;
    try {
      first = this.set.pickOrFail(undefined, affinity, model);
    } catch (err) {
      this.client.failed(err as GatewayError); // GW_ERR_UPSTREAM_NO_BACKEND: UNAVAILABLE
      return;
    }
    this.#mirror = MirrorCall.start(this.set, this.connections, model, this.path, this.headers, this.deadline);
    this.#begin(first);
  }

  /**
   * Writes a client's DATA chunk upstream, and to the mirror; false: wait for onDrain. What one
   * turn brings goes upstream as one writev: a unary call's message then leaves with END_STREAM on
   * its DATA frame, with its HEADERS, in one socket write (uncorked, the end waited for the DATA's
   * socket write and went as an empty DATA frame of its own: 2 writes per call), and a large
   * message as one write per read of the client's socket instead of one per 16 KiB DATA frame
   * (strace, 600 KB: 43 writes per call).
   */
  send(chunk: Buffer): boolean {
    const a = this.#attempt!;
    a.corkTurn();
    this.#mirror?.write(chunk);
    this.#bytesIn += chunk.length;
    return a.write(chunk);
  }

  /** `resume` runs once the upstream stream takes more. */
  onDrain(resume: () => void): void {
    this.#attempt!.onDrain(resume);
  }

  /** The client's request has ended (its END_STREAM): so does the upstream's, and the copy's. */
  end(): void {
    if (!this.#done) this.#attempt?.end();
    this.#mirror?.end();
  }

  /** Holds the answer while the client cannot take more (HTTP/2 flow control reaches Triton). */
  pause(): void {
    this.#attempt?.pause();
  }

  resume(): void {
    this.#attempt?.resume();
  }

  /** The answer is complete while the client may still be sending: the rest is not forwarded. */
  stopSending(): void {
    this.#attempt?.stopSending();
  }

  /** The gateway ends the call (its own status): the upstream stream is reset, an incomplete copy too. */
  cancel(): void {
    this.#done = true;
    this.#mirror?.cancelUnlessEnded();
    this.#attempt?.reset();
  }

  /** The call is over: its backend no longer counts it, and an incomplete copy is reset. */
  settle(): void {
    this.#done = true;
    this.#uncount();
    this.#mirror?.cancelUnlessEnded();
  }

  #uncount(): void {
    if (this.#counted !== undefined) this.set.ended(this.#counted);
    this.#counted = undefined;
  }

  #begin(b: Backend): void {
    this.#uncount();
    this.set.started(b);
    this.#counted = b;
    if (this.#upstreamStartNs === 0) this.#upstreamStartNs = nowNs();
    const a = new RelayAttempt(this, b);
    this.#attempt = a;
    const refused = a.start(this.connections.get(b), this.path, this.headers, this.deadline);
    if (refused !== undefined) this.#attemptFailed(a, refused);
    else if (a.openedNs !== 0) this.client.upstreamOpened();
  }

  #attemptFailed(a: RelayAttempt, err: GatewayError): void {
    const b = a.backend;
    const o = this.#retry;
    const next = mayRetry(this.set, b, err, this.#retries, o) ? this.set.pick(b, undefined, o.model) : undefined;
    if (next === undefined) {
      this.#done = true;
      this.client.failed(err); // GW_ERR_UPSTREAM_UNAVAILABLE: UNAVAILABLE
      return;
    }
    countRetry(this.set, b, err, o);
    this.#retries++;
    this.#begin(next);
  }

  /** Triton says the model is not there (or not ready): that backend gets no more of its calls. */
  #statusRead(a: RelayAttempt): void {
    const status = a.status;
    const model = this.#retry.model;
    if (model !== undefined && status !== undefined && status !== GrpcStatus.OK
      && lacksModel(upstreamError(status, a.statusMessage, false))) this.set.lacks(a.backend, model);
  }

  /** Whether `a` is the call's attempt and its events still go to the client. */
  #current(a: RelayAttempt): boolean {
    return this.#attempt === a && !this.#done;
  }

  // The events of the call's attempts (RelayAttempt), relayed while the attempt is the current one.

  opened(a: RelayAttempt): void {
    if (this.#current(a)) this.client.upstreamOpened();
  }

  answerHeaders(a: RelayAttempt, h: IncomingHttpHeaders): void {
    if (!this.#current(a)) return;
    if (this.#firstByteNs === 0) this.#firstByteNs = nowNs();
    if (a.status === undefined) {
      this.#answering = true;
      this.client.answerHeaders(h, false);
      return;
    }
    // Trailers-only: the status is in the headers, and the stream ends with them.
    this.#statusRead(a);
    this.set.succeeded(a.backend);
    this.#done = true;
    this.client.answerHeaders(h, true);
  }

  answerData(a: RelayAttempt, chunk: Buffer): void {
    if (this.#current(a)) this.client.answerData(chunk);
  }

  answerTrailers(a: RelayAttempt, t: IncomingHttpHeaders): void {
    if (!this.#current(a)) return;
    this.#statusRead(a);
    this.client.answerTrailers(t);
  }

  answerEnded(a: RelayAttempt): void {
    if (!this.#current(a) || !this.#answering) return;
    this.#done = true;
    if (a.status === undefined) {
      this.client.failed(a.failure(true));
      return;
    }
    this.set.succeeded(a.backend);
    this.client.answerEnded();
  }

  closed(a: RelayAttempt): void {
    if (this.#current(a)) this.#attemptFailed(a, a.failure(false));
  }

  /** An answer that is not gRPC (not HTTP 200): the backend is failed, and so is the call. */
  refused(a: RelayAttempt, err: GatewayError): void {
    if (!this.#current(a)) return;
    this.set.failed(a.backend);
    this.#done = true;
    this.client.failed(err);
  }
}

/** One attempt of a relayed call on one backend: its stream's events go to the RelayedCall. */
class RelayAttempt extends GrpcCall {
  constructor(private readonly relay: RelayedCall, readonly backend: Backend) {
    super(false); // the pass-through keeps nothing of what it forwards
  }

  start(connection: Connection, path: string, headers: OutgoingHttpHeaders, deadline: number): GatewayError | undefined {
    return this.open(connection, path, headers, deadline, false);
  }

  protected override ready(): void {
    this.relay.opened(this);
  }

  protected answerHeaders(h: IncomingHttpHeaders): void {
    this.relay.answerHeaders(this, h);
  }

  protected chunk(c: Buffer): void {
    this.relay.answerData(this, c);
  }

  protected trailers(t: IncomingHttpHeaders): void {
    this.relay.answerTrailers(this, t);
  }

  protected ended(): void {
    this.relay.answerEnded(this);
  }

  protected closed(): void {
    this.relay.closed(this);
  }

  protected failed(err: GatewayError): void {
    this.relay.refused(this, err);
  }
}
