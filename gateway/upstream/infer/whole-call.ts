// A ModelInfer call whose message is all in hand when it starts (a planned request's, pipeline/
// infer-planned.ts), at the least per-call cost the one gRPC call (upstream/call/grpc-call.ts)
// allows: one object is the call, its model key for routing, its retry options and its entry in
// the plane's list of running calls; its outcome goes to its caller's methods, not a promise; the
// client's leaving cancels it directly, not through an AbortSignal; one timer per plane, not per
// call, watches the deadlines. The message (pieces: the framed head and views of the client's body
// between them) goes out with the HEADERS, in one buffer when small (h2/connection.ts request()).
//
// What it does is what the data plane's other calls do (h2-plane.ts): the same backend picking,
// safe retries on another backend while nothing reached Triton (upstream/backends/retry.ts), a
// mirror's copy when the model table asks for one, the same errors, the same CallTiming, the
// plane's close() ending it with the shutdown's error.
import { type Linked, LinkedList } from '../../linked-list';
import type { OutgoingHttpHeaders } from 'node:http2';
import type { GatewayError } from '../../errors';
import { GrpcStatus } from '../../grpc/status';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import type { ModelKey, RouteDecision } from '../backends/pools';
import { countRetry, mayRetry, type RetryOptions } from '../backends/retry';
import { GrpcCall } from '../call/grpc-call';
import type { MirrorCall } from '../call/mirror';
import type { Connection } from '../connections/h2-sessions';
import { shutdownError } from '../connections/in-flight';
import { clientCancelled, upstreamError } from '../status';
import { type CallTiming, MODEL_INFER_PATH, type WholeCallee } from './data-plane';
import { nowNs } from '../../infer/clock';

/** What a plane lends its whole calls. */
export interface WholePlane {
  readonly set: BackendSet;
  readonly calls: WholeCalls;
  connection(b: Backend): Connection;
  /**
   * A call's request headers but those every gRPC call sets, for `metadata`: frozen and shared
   * between calls of the same frozen metadata (GrpcCall.open() copies such a set for node:http2,
   * which writes into what it takes), else a new object.
   */
  sharedHeadersOf(metadata: Readonly<Record<string, string>>): Readonly<OutgoingHttpHeaders>;
  /** The copy the model table mirrors, when the pick decided one (mirror.ts). */
  mirror(model: ModelKey, headers: OutgoingHttpHeaders, deadline: number): MirrorCall | undefined;
}

/** Our own deadline, in case the server never answers: a little after Triton's (h2-plane.ts's). */
export const DEADLINE_GRACE_MS = 50;

/**
 * A plane's running whole calls, in the order they started (a list through the calls themselves,
 * ../../linked-list.ts), which close() ends, and whose one timer ends each call whose deadline has
 * passed. Calls start with the deadline upstream.timeoutMs gives them, so their deadlines come in
 * that order; a retry (listed again, its deadline unchanged) or a changed timeout can put an
 * earlier deadline behind a later one, which then ends it at most that much late.
 */
export class WholeCalls {
  readonly #running = new LinkedList<WholeCall>();
  #armed = false;
  #closed = false;
  readonly #expire = (): void => this.#sweep();

  get closed(): boolean {
    return this.#closed;
  }

  add(c: WholeCall): void {
    this.#running.add(c);
    if (!this.#armed) this.#arm(c.deadline);
  }

  remove(c: WholeCall): void {
    this.#running.delete(c);
  }

  /** Ends every running call with the shutdown's error; later calls fail at once with it. */
  closeAll(): void {
    this.#closed = true;
    for (let c = this.#running.first; c !== undefined; c = this.#running.first) c.settle(shutdownError());
  }

  #arm(deadline: number): void {
    this.#armed = true;
    setTimeout(this.#expire, Math.max(0, deadline + DEADLINE_GRACE_MS - Date.now())).unref();
  }

  #sweep(): void {
    this.#armed = false;
    const now = Date.now();
    for (let c = this.#running.first; c !== undefined && c.deadline + DEADLINE_GRACE_MS <= now; c = this.#running.first) {
      c.settle(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false));
    }
    const { first } = this.#running;
    if (first !== undefined) this.#arm(first.deadline);
  }
}

/** One attempt of a whole call; a retry is a new attempt on another backend, with the same message. */
export class WholeCall extends GrpcCall implements ModelKey, RetryOptions, Linked<WholeCall> {
  // ModelKey (the first attempt's pick sets pool and mirror; a retry's keeps them).
  readonly name: string;
  readonly version: string;
  pool: string | undefined;
  mirror: string | undefined;
  // RetryOptions
  readonly deadline: number;
  readonly affinity: string | undefined;
  // WholeCalls' list
  linkPrev: WholeCall | undefined;
  linkNext: WholeCall | undefined;
  linked = false;
  #backend: Backend | undefined;
  #settled = false;
  #cancelled = false;
  /** The attempt that followed this one (cancel() goes to it). */
  #retry: WholeCall | undefined;
  readonly #chunks: Buffer[] = [];
  #firstByteNs = 0;
  #endNs = 0;

  private constructor(private readonly plane: WholePlane, private readonly pieces: readonly Buffer[],
    private readonly callee: WholeCallee, private readonly attempt: number, from: WholeCall | undefined) {
    super(true); // the pieces stay in hand for a retry
    this.name = callee.modelName;
    this.version = callee.modelVersion;
    this.deadline = callee.deadline;
    this.affinity = callee.affinity;
    this.pool = from?.pool;
    this.mirror = from?.mirror;
  }

  /**
   * Starts the call on a picked backend; its outcome goes to `callee`. A call without a backend
   * fails at once (callee.failed within this call).
   */
  static start(plane: WholePlane, pieces: readonly Buffer[], callee: WholeCallee): WholeCall {
    const c = new WholeCall(plane, pieces, callee, 0, undefined);
    let b: Backend;
    try {
      b = plane.set.pickOrFail(undefined, c.affinity, c);
    } catch (err) {
      c.#settled = true;
      callee.failed(err as GatewayError);
      return c;
    }
    // The pick decided whether a copy is mirrored: it gets the message whole, copied.
    if (c.mirror !== undefined) plane.mirror(c, plane.sharedHeadersOf(callee.metadata), c.deadline)?.end(Buffer.concat(pieces));
    c.#begin(b);
    return c;
  }

  /** RetryOptions.model: the call is its own model key. */
  get model(): ModelKey {
    return this;
  }

  header(name: string): string | undefined {
    return this.callee.header(name);
  }

  routed(pool: string, decision: RouteDecision, mirror: string | undefined): void {
    this.callee.routed(pool, decision, mirror);
  }

  retried(): void {
    this.callee.retried();
  }

  /** The client has gone: the call is reset and fails with clientCancelled(), never retried. */
  cancel(): void {
    if (this.#retry !== undefined) {
      this.#retry.cancel();
      return;
    }
    this.#cancelled = true;
    this.settle(clientCancelled());
  }

  #begin(b: Backend): void {
    const { plane } = this;
    this.#backend = b;
    plane.set.started(b);
    if (plane.calls.closed) {
      this.settle(shutdownError());
      return;
    }
    if (this.deadline - Date.now() <= 0) {
      this.settle(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false));
      return;
    }
    const refused = this.openWhole(plane.connection(b), MODEL_INFER_PATH, plane.sharedHeadersOf(this.callee.metadata), this.deadline,
      this.pieces);
    if (refused !== undefined) {
      this.settle(refused); // the session was closed or had received GOAWAY: never sent
      return;
    }
    plane.calls.add(this);
  }

  protected answerHeaders(): void { /* the status of a trailers-only answer is read; 'end' follows */ }

  protected chunk(c: Buffer): void {
    if (this.#firstByteNs === 0) this.#firstByteNs = nowNs();
    this.readMessage(c);
  }

  protected override message(view: Buffer): void {
    this.#chunks.push(view);
  }

  protected trailers(): void {
    this.#endNs = nowNs();
  }

  protected ended(): void {
    this.#done(true);
  }

  protected closed(): void {
    this.#done(false);
  }

  protected failed(err: GatewayError): void {
    this.settle(err);
  }

  #done(ended: boolean): void {
    if (this.#settled) return;
    const err = this.verdict(ended);
    if (err !== undefined) {
      this.settle(err);
      return;
    }
    if (this.#endNs === 0) this.#endNs = nowNs(); // the status came without trailers
    this.settle(undefined);
  }

  /**
   * The attempt is over: answered (`err` undefined), or failed — then another attempt on another
   * backend when nothing reached Triton and retry.ts allows it, else the caller hears the error.
   */
  settle(err: GatewayError | undefined): void {
    if (this.#settled) return;
    this.#settled = true;
    const { plane, callee } = this;
    const { set } = plane;
    const b = this.#backend!;
    plane.calls.remove(this);
    set.ended(b); // before the next pick: least-request must not count the failed attempt
    if (err === undefined) {
      set.succeeded(b);
      // A retry's message is an earlier attempt's too: that attempt's writes may still be queued on
      // its socket (a stalled connection), so its buffers are not the callee's to reuse.
      callee.answered({ chunks: this.#chunks, byteLength: this.received, timing: this.#timing() }, this.attempt === 0 && this.sentNs !== 0);
      this.wake();
      return;
    }
    this.reset();
    this.wake();
    // mayRetry first: it reports the failure to the set (and a model the backend lacks).
    const may = mayRetry(set, b, err, this.attempt, this);
    const next = !this.#cancelled && !plane.calls.closed && may ? set.pick(b, undefined, this) : undefined;
    if (next === undefined) {
      callee.failed(err);
      return;
    }
    countRetry(set, b, err, this);
    const retry = this.#retry = new WholeCall(plane, this.pieces, callee, this.attempt + 1, this);
    retry.#begin(next);
  }

  /** As h2-plane.ts's calls: each mark bounded by the next, in order. */
  #timing(): CallTiming {
    const endNs = this.#endNs;
    const firstByte = this.#firstByteNs === 0 || this.#firstByteNs > endNs ? endNs : this.#firstByteNs;
    const sent = this.sentNs === 0 || this.sentNs > firstByte ? firstByte : this.sentNs;
    const firstSent = this.openedNs === 0 || this.openedNs > sent ? sent : this.openedNs;
    return { firstSentNs: firstSent, sentNs: sent, firstByteNs: firstByte, endNs };
  }
}
