// ModelInfer as our own unary gRPC call on node:http2 (docs/architecture.md#two-data-planes), on the
// one gRPC call of upstream/call/grpc-call.ts: the framed request is written by reference — whole,
// or piece by piece as the client's body arrives (cut-through) — the answer message is kept as
// views of its DATA chunks, the deadline travels as grpc-timeout, a cancelled request resets the
// stream (RST_STREAM CANCEL), which Triton honours.
//
// Written by reference means the message may be read after the call has settled: nghttp2 takes
// DATA from it without copying (NO_COPY) and Node hands those slices to the socket, whose write
// can complete later. Node reports the write done (the end() callback, without error) only once
// the socket write carrying its last byte has completed (Http2Session::ClearOutgoing); a reset
// stream cancels what nghttp2 had not taken yet, but slices already queued on the socket still
// point into the buffer. So a pooled message is held until that callback, and comes back for
// reuse only when it reported success — a stream that closes first gives it up for good.
//
// Backends come from the live set (upstream/backends/backend-set.ts): a call goes to the next ready one and,
// when its stream never opened (connection refused or closed first) or was refused
// (REFUSED_STREAM, or GOAWAY below its id), to another one (upstream/backends/retry.ts). A cut-through
// call keeps the pieces written while its stream was not open yet, to replay them there; once
// the stream is open its DATA may have reached Triton, and it is never sent again.
//
// With upstream.tls the sessions are TLS (upstream/connections/tls.ts): each new session takes the current
// material, so a reloaded client certificate is used from the next connection on. A call that
// fails because the handshake did says why (the OpenSSL error, or Triton closing right after the
// handshake: a refused client certificate).
import type { OutgoingHttpHeaders } from 'node:http2';
import type { GatewayError } from '../../errors';
import {
  type CallOptions, type CallTiming, type DataPlane, type Flow, MODEL_INFER_PATH,
  type StreamingCall, type TimedResponseMessage, type WholeCallee,
} from './data-plane';
import type { MessageHolds } from '../../buffers/pool';
import { releaseWhole } from '../../buffers/release';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import { InFlight, type Running, shutdownError } from '../connections/in-flight';
import { countRetry, mayRetry, withRetries } from '../backends/retry';
import { GrpcStatus } from '../../grpc/status';
import { clientCancelled, upstreamError } from '../status';
import type { UpstreamTls } from '../connections/tls';
import { type Connection, DEFAULT_HTTP2_CLIENT, H2Connections, type Http2Client } from '../connections/h2-sessions';
import { GrpcCall } from '../call/grpc-call';
import { MirrorCall } from '../call/mirror';
import type { ModelKey } from '../backends/pools';
import { WholeCall, WholeCalls, type WholePlane } from './whole-call';
import { nowNs } from '../../infer/clock';

const NO_HOLDS: MessageHolds = { hold: () => () => undefined };
const ONCE = { once: true } as const;

export class H2DataPlane implements DataPlane {
  readonly #set: BackendSet;
  readonly #connections: H2Connections;
  readonly #headers: Record<string, string>;
  readonly #holds: MessageHolds;
  readonly #inFlight = new InFlight();
  /** What the plane lends its whole calls (whole-call.ts). */
  readonly #whole: WholePlane;

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `holds`: the buffer pool the messages may come from.
   * `tls`: upstream.tls, when the connections to Triton use TLS. `client`: upstream.http2Client.
   */
  constructor(backends: BackendSet, restriction?: readonly [string, string], holds: MessageHolds = NO_HOLDS, tls?: UpstreamTls,
    client: Http2Client = DEFAULT_HTTP2_CLIENT) {
    this.#set = backends;
    this.#headers = restriction === undefined ? {} : { [restriction[0]]: restriction[1] };
    this.#holds = holds;
    this.#connections = new H2Connections(backends, tls, client);
    const connections = this.#connections;
    const inFlight = this.#inFlight;
    this.#whole = {
      set: backends, calls: new WholeCalls(),
      connection: (b) => connections.get(b),
      sharedHeadersOf: (metadata) => this.#sharedHeadersOf(metadata),
      mirror: (model: ModelKey, headers: OutgoingHttpHeaders, deadline: number) =>
        MirrorCall.start(backends, connections, model, MODEL_INFER_PATH, headers, deadline, inFlight),
    };
  }

  /**
   * The sessions to the backends, one per backend: the gRPC pass-through
   * (upstream/call/relay.ts) shares them.
   */
  get connections(): H2Connections {
    return this.#connections;
  }

  async modelInfer(message: Buffer, options: CallOptions): Promise<TimedResponseMessage> {
    const written = allWritten(this.#holds.hold(message));
    try {
      const answer = withRetries(this.#set, options, (b) => {
        const call = startCall(this.#connection(b), this.#headersOf(options.metadata), options, this.#inFlight, written.one());
        call.end(message);
        return call.response;
      });
      // The primary's pick (above, before its first await) decided whether a copy is mirrored.
      this.#mirror(options)?.end(Buffer.from(message));
      return await answer;
    } finally {
      written.seal();
    }
  }

  /** A call whose message is all in hand, as `pieces` in order (whole-call.ts); its outcome goes to `callee`. */
  callWhole(pieces: readonly Buffer[], callee: WholeCallee): { cancel(): void } {
    return WholeCall.start(this.#whole, pieces, callee);
  }

  startModelInfer(options: CallOptions): StreamingCall {
    const primary = new ReplayingCall(this.#set, options,
      (b, written) => startCall(this.#connection(b), this.#headersOf(options.metadata), options, this.#inFlight, written));
    const mirror = this.#mirror(options);
    return mirror === undefined ? primary : new MirroredCall(primary, mirror);
  }

  /** A call's request headers but those every gRPC call sets (grpc-call.ts): a new object, sent as it is. */
  #headersOf(metadata: Readonly<Record<string, string>>): OutgoingHttpHeaders {
    return { 'content-type': 'application/grpc', te: 'trailers', 'user-agent': 'tensorgate', ...this.#headers, ...metadata };
  }

  /** The headers of the last metadata a whole call had: most calls have the same (none: no trace context). */
  #shared: { metadata: Readonly<Record<string, string>>; headers: Readonly<OutgoingHttpHeaders> } | undefined;

  /** #headersOf for whole calls (whole-call.ts WholePlane.sharedHeadersOf): the same object for the same metadata. */
  #sharedHeadersOf(metadata: Readonly<Record<string, string>>): Readonly<OutgoingHttpHeaders> {
    const s = this.#shared;
    if (s !== undefined && s.metadata === metadata) return s.headers;
    const headers = this.#headersOf(metadata);
    // Frozen: a write into the object every such call shares would throw, not leak into the next call.
    if (Object.isFrozen(metadata)) this.#shared = { metadata, headers: Object.freeze(headers) };
    return headers;
  }

  /**
   * The copy of a request the model table mirrors (upstream.models mirror, upstream/call/mirror.ts),
   * or undefined. It has the request's deadline and metadata but not its signal nor its receiver.
   */
  #mirror(options: CallOptions): MirrorCall | undefined {
    if (options.model?.mirror === undefined) return undefined;
    return MirrorCall.start(this.#set, this.#connections, options.model, MODEL_INFER_PATH, this.#headersOf(options.metadata), options.deadline, this.#inFlight);
  }

  #connection(b: Backend): Connection {
    return this.#connections.get(b);
  }

  /**
   * Resets the calls still running (RST_STREAM CANCEL; they reject with GW_ERR_UPSTREAM_UNAVAILABLE)
   * and closes the sessions.
   */
  close(): void {
    this.#whole.calls.closeAll();
    this.#inFlight.cancelAll();
    this.#connections.close();
  }
}

/**
 * The pool hold of a message sent by several attempts: let go once every attempt reported and
 * no more will start, reusable only when each write completed.
 */
function allWritten(letGo: (ok: boolean) => void): { one(first?: (ok: boolean) => void): (ok: boolean) => void; seal(): void } {
  let open = 0;
  let ok = true;
  let sealed = false;
  const settle = (): void => {
    if (sealed && open === 0) letGo(ok);
  };
  return {
    /** One attempt's report, taken once (later ones are ignored); `first` hears it before the rest. */
    one(first) {
      open++;
      let reported = false;
      return (w) => {
        if (reported) return;
        reported = true;
        first?.(w);
        ok &&= w;
        open--;
        settle();
      };
    },
    seal() {
      sealed = true;
      settle();
    },
  };
}

/**
 * A cut-through call over attempts: pieces written while the current attempt's stream is not open
 * yet are kept, and replayed on another backend when that attempt fails without having sent any
 * (upstream/backends/retry.ts). Once the stream is open they are dropped and the call is never sent again.
 * Body chunks handed to release() are freed once no attempt can read them. One written to an open
 * stream goes once its own writes have left for the socket. One kept for a replay goes once an
 * attempt put its last byte on the socket with nothing kept, or every attempt wrote its last byte
 * and the call settled. When a write failed, they are left to the collector.
 */
class ReplayingCall implements StreamingCall {
  readonly response: Promise<TimedResponseMessage>;
  #attempt!: H2Call;
  #kept: Buffer[] | undefined = [];
  #last: Buffer | undefined;
  #cancelled = false;
  #resolve!: (m: TimedResponseMessage) => void;
  #reject!: (e: unknown) => void;
  /**
   * Chunks to free once sent for good; `#sent`: whether they were (true), or never will be
   * (false: an attempt ended without its last byte on the socket, so slices may still be queued).
   */
  #owned: Buffer[] | undefined;
  #sent: boolean | undefined;
  /**
   * Writes to an open stream (nothing kept for a replay): how many were issued and how many
   * completed, in order; `#waiting`: chunks released whose last write (`seq`) has not completed.
   * Each goes once its own writes are done, so an upload holds only what is still queued, not
   * every chunk until its last byte. After a failed write, the rest are left to the collector.
   */
  #issued = 0;
  #completed = 0;
  #waiting: { readonly piece: Buffer; readonly seq: number }[] = [];
  #failed = false;
  readonly #written = allWritten((ok) => {
    if (ok) this.#free();
  });

  constructor(private readonly set: BackendSet, private readonly options: CallOptions,
    private readonly start: (b: Backend, written: (ok: boolean) => void) => H2Call) {
    this.response = new Promise<TimedResponseMessage>((res, rej) => {
      this.#resolve = res;
      this.#reject = rej;
    });
    let first: Backend;
    try {
      first = set.pickOrFail(undefined, options.affinity, options.model);
    } catch (err) {
      this.#attempt = failedCall(err);
      this.#written.seal();
      this.#reject(err);
      return;
    }
    this.#begin(first, 0);
  }

  #begin(b: Backend, n: number): void {
    // The attempt's last byte on the socket, its pieces not kept for a replay (its stream opened
    // before its end), and no earlier attempt that may still have slices of them queued: no
    // attempt will read them again, so they are freed now rather than once the answer is in,
    // which for a large answer is much later.
    const a = this.start(b, this.#written.one((ok) => {
      if (!ok) {
        this.#sent = false;
        this.#owned = undefined;
      } else if (this.#kept === undefined && this.#sent === undefined) {
        this.#free();
      }
    }));
    this.#attempt = a;
    this.set.started(b);
    for (const piece of this.#kept ?? []) a.write(piece);
    if (this.#last !== undefined) a.end(this.#last);
    a.response.then((m) => {
      this.set.ended(b);
      this.set.succeeded(b);
      this.#written.seal();
      this.#resolve(m);
    }, (err: unknown) => {
      this.set.ended(b);
      // mayRetry first: it reports the failure to the set (and a model the backend lacks) even
      // when the call can no longer be replayed.
      const may = mayRetry(this.set, b, err, n, this.options);
      const next = !this.#cancelled && this.#kept !== undefined && may ? this.set.pick(b, undefined, this.options.model) : undefined;
      if (next === undefined) {
        this.#written.seal();
        this.#reject(err);
        return;
      }
      countRetry(this.set, b, err, this.options);
      this.#begin(next, n + 1);
    });
  }

  write(piece: Buffer): boolean {
    if (this.#keeping()) {
      this.#kept!.push(piece);
      return this.#attempt.write(piece);
    }
    const seq = ++this.#issued;
    return this.#attempt.write(piece, (err) => this.#wrote(seq, err));
  }

  #wrote(seq: number, err?: Error | null): void {
    if (err != null) {
      this.#failed = true;
      this.#waiting = [];
      return;
    }
    this.#completed = seq;
    let i = 0;
    while (i < this.#waiting.length && this.#waiting[i]!.seq <= seq) releaseWhole(this.#waiting[i++]!.piece);
    if (i > 0) this.#waiting.splice(0, i);
  }

  end(last: Buffer): void {
    this.#keeping();
    this.#last = last;
    this.#attempt.end(last);
  }

  onDrain(resume: () => void): void {
    this.#attempt.onDrain(resume);
  }

  cancel(): void {
    this.#cancelled = true;
    this.#attempt.cancel();
  }

  release(piece: Buffer): void {
    if (this.#kept !== undefined) {
      // Kept for a replay: freed once no attempt can read it (#free).
      if (this.#sent === undefined) (this.#owned ??= []).push(piece);
      else if (this.#sent) releaseWhole(piece);
      return;
    }
    // Written to the open stream: all its writes were issued before this (Upload.write).
    if (this.#failed) return;
    if (this.#completed >= this.#issued) releaseWhole(piece);
    else this.#waiting.push({ piece, seq: this.#issued });
  }

  /** The owned chunks are freed, and any released from now on at once. */
  #free(): void {
    this.#sent = true;
    const owned = this.#owned;
    this.#owned = undefined;
    if (owned !== undefined) for (const b of owned) releaseWhole(b);
  }

  /** Whether pieces are still kept for a replay: not once the current stream has opened. */
  #keeping(): boolean {
    if (this.#kept !== undefined && this.#attempt.opened()) this.#kept = undefined;
    return this.#kept !== undefined;
  }
}

/**
 * A request sent twice: to its backend, and a copy to a mirror (upstream/call/mirror.ts). The
 * mirror gets copies of the pieces (the originals may be pooled, staged or released once the
 * primary has written them), never slows the primary, and is reset when the primary is cancelled
 * before its message was whole. The answer is the primary's alone.
 */
class MirroredCall implements StreamingCall {
  constructor(private readonly primary: StreamingCall, private readonly mirror: MirrorCall) {}

  get response(): Promise<TimedResponseMessage> {
    return this.primary.response;
  }

  write(piece: Buffer): boolean {
    this.mirror.write(Buffer.from(piece));
    return this.primary.write(piece);
  }

  end(last: Buffer): void {
    this.mirror.end(Buffer.from(last));
    this.primary.end(last);
  }

  onDrain(resume: () => void): void {
    this.primary.onDrain(resume);
  }

  cancel(): void {
    this.mirror.cancelUnlessEnded();
    this.primary.cancel();
  }

  release(piece: Buffer): void {
    this.primary.release(piece); // the mirror has its own copy
  }
}

/** A call that failed before it started (no backend): it takes nothing and ends at once. */
function failedCall(err: unknown): H2Call {
  const response = Promise.reject(err);
  response.catch(() => undefined);
  return { write: () => true, end: () => undefined, onDrain: (resume) => resume(), cancel: () => undefined, response, opened: () => false };
}

/**
 * A call of this file: one attempt, which says whether its stream has opened (after that it is
 * never sent again); what it may free is decided over all attempts (ReplayingCall).
 */
interface H2Call extends Omit<StreamingCall, 'release' | 'write'> {
  /** StreamingCall.write; `done` hears when the piece left for the socket (an error: it may never). */
  write(piece: Buffer, done?: (err?: Error | null) => void): boolean;
  opened(): boolean;
}

/**
 * Opens the call's HTTP/2 stream; the request message is written by the caller. Response DATA
 * is kept as views; the status comes from trailers (or trailers-only headers). Any failure —
 * before, during or after the upload — rejects `response` once and resets the stream.
 * `written(ok)` is told once whether the request's last byte reached the socket (true) or the
 * call ended without it (false): then queued slices may still point into the message.
 */
function startCall(connection: Connection, headers: OutgoingHttpHeaders, options: CallOptions, inFlight: InFlight,
  written: (ok: boolean) => void = () => undefined): H2Call {
  const call = new UnaryCall(connection, options, inFlight, written);
  call.start(headers);
  return call;
}

/**
 * One unary ModelInfer call (a GrpcCall, upstream/call/grpc-call.ts): its outcome is fields, and
 * every way it ends goes through #finish, once. It is also the Flow a Receiver is handed with each
 * piece of the answer. The call's CallTiming (data-plane.ts) is taken from the stream's own events:
 * the stream opened (HEADERS queued), the end() callback (last byte on the socket), the first
 * DATA, the trailers.
 */
class UnaryCall extends GrpcCall implements H2Call, Flow {
  readonly response: Promise<TimedResponseMessage>;
  #resolveResponse!: (m: TimedResponseMessage) => void;
  #rejectResponse!: (e: GatewayError) => void;
  #settled = false;
  #timer: NodeJS.Timeout | undefined;
  #firstByteNs = 0;
  #endNs = 0;
  /** The answer message's pieces the receiver did not take. */
  readonly #chunks: Buffer[] = [];
  /** The signal's listener; also the call's cancel(). */
  readonly #onAbort = (): void => this.#finish(clientCancelled());
  /** What the plane's close() calls; #running is its entry in the plane's InFlight. */
  readonly #onShutdown = (): void => this.#finish(shutdownError());
  #running: Running | undefined;

  constructor(
    private readonly connection: Connection, private readonly options: CallOptions, private readonly inFlight: InFlight,
    private readonly written: (ok: boolean) => void,
  ) {
    super(true); // the caller keeps the message: ReplayingCall, or modelInfer's whole one
    this.response = new Promise<TimedResponseMessage>((res, rej) => {
      this.#resolveResponse = res;
      this.#rejectResponse = rej;
    });
  }

  opened(): boolean {
    return this.openedNs !== 0;
  }

  override write(piece: Buffer, done?: (err?: Error | null) => void): boolean {
    return this.#settled || super.write(piece, done);
  }

  override end(last: Buffer): void {
    if (this.#settled) return;
    super.end(last, (err?: Error | null): void => {
      if (err == null) this.sentNow();
      this.written(err == null);
    });
  }

  override onDrain(resume: () => void): void {
    if (this.#settled) resume();
    else super.onDrain(resume);
  }

  cancel(): void {
    this.#onAbort();
  }

  // An event can be seen late — the end() callback a turn after its socket write, a paused
  // stream's first 'data' after the trailers — so each mark is bounded by the next: in order.
  timing(): CallTiming {
    const endNs = this.#endNs;
    const firstByte = endNs !== 0 && (this.#firstByteNs === 0 || this.#firstByteNs > endNs) ? endNs : this.#firstByteNs;
    const sent = firstByte !== 0 && (this.sentNs === 0 || this.sentNs > firstByte) ? firstByte : this.sentNs;
    const firstSent = this.openedNs === 0 || this.openedNs > sent ? sent : this.openedNs;
    return { firstSentNs: firstSent, sentNs: sent, firstByteNs: firstByte, endNs };
  }

  /** Starts the call: refused at once after the plane's close() or past the deadline, else its stream opened. */
  start(headers: OutgoingHttpHeaders): void {
    const { options, inFlight, written } = this;
    if (inFlight.closed) {
      written(true); // nothing was written
      this.#finish(shutdownError());
      return;
    }
    const remaining = options.deadline - Date.now();
    if (remaining <= 0) {
      written(true); // nothing was written
      this.#finish(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false));
      return;
    }
    // Our own deadline, in case the server never answers: a little after Triton's.
    this.#timer = setTimeout(() => this.#finish(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false)), remaining + 50);
    // The first piece (a cut-through call's framed head) waits, corked, for the next one (the
    // body's first bytes) or the end, and what one turn writes goes to nghttp2 as one writev: the
    // HEADERS, the head and a small body then leave in one socket write, the last DATA frame
    // carrying END_STREAM. Uncorked, each write waited for the previous one's socket write
    // (Writable keeps one write in flight), and Node's END_STREAM-on-the-last-DATA check runs too
    // late after such a wait: a 64 B request went out as three socket writes (strace: HEADERS and
    // the head; the tensor's DATA; an empty DATA with END_STREAM). end() uncorks at once.
    const refused = this.open(this.connection, MODEL_INFER_PATH, headers, options.deadline, true);
    if (refused !== undefined) {
      // The session was closed or had received GOAWAY before the call started.
      written(true); // nothing was written
      this.#finish(refused);
      return;
    }
    this.#running = inFlight.add(this.#onShutdown);
    if (options.signal.aborted) {
      this.#onAbort();
      return;
    }
    options.signal.addEventListener('abort', this.#onAbort, ONCE);
  }

  protected answerHeaders(): void { /* the status of a trailers-only answer is read; 'end' follows */ }

  protected chunk(c: Buffer): void {
    if (this.#firstByteNs === 0) this.#firstByteNs = nowNs();
    this.readMessage(c);
  }

  /** A range of the answer's message, kept as a view (or handed to the receiver). */
  protected override message(view: Buffer): void {
    if (this.options.receiver?.data(view, this) !== true) this.#chunks.push(view);
  }

  protected trailers(): void {
    this.#endNs = nowNs(); // 'end' can come later: a receiver may hold the answer back
  }

  // The answer is complete when the server's side ends — possibly while our side is still
  // uploading (an error answered mid-upload, which resets the rest) — or the stream closes.
  protected ended(): void {
    this.#done(true);
  }

  // One 'close' for both: the write's report (nothing if it already reported, see the top of this
  // file) and the answer's end (#done: nothing once settled).
  protected closed(): void {
    this.written(false);
    this.#done(false);
  }

  protected failed(err: GatewayError): void {
    this.#finish(err);
  }

  #finish(err: GatewayError | undefined, value?: TimedResponseMessage): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    this.options.signal.removeEventListener('abort', this.#onAbort);
    this.inFlight.delete(this.#running);
    if (err) {
      this.reset();
      this.#rejectResponse(err);
    } else {
      this.#resolveResponse(value!);
    }
    this.wake();
  }

  /** `ended`: the server ended its side itself (END_STREAM), rather than the stream being reset. */
  #done(ended: boolean): void {
    if (this.#settled) return;
    const err = this.verdict(ended);
    if (err !== undefined) {
      this.#finish(err);
      return;
    }
    if (this.#endNs === 0) this.#endNs = nowNs(); // the status came without trailers
    this.#finish(undefined, { chunks: this.#chunks, byteLength: this.received, timing: this.timing() });
  }
}
