// ModelInfer as our own unary gRPC call on node:http2 (docs/architecture.md#two-data-planes): the framed request is
// written by reference — whole, or piece by piece as the client's body arrives (cut-through) —
// response DATA chunks are kept as views, status comes from the trailers
// (or from trailers-only headers), the deadline travels as grpc-timeout, a cancelled request
// resets the stream (RST_STREAM CANCEL), which Triton honours.
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
import { type ClientHttp2Session, type ClientHttp2Stream, constants, type IncomingHttpHeaders, type IncomingHttpStatusHeader } from 'node:http2';
import { GatewayError } from '../../errors';
import {
  type CallOptions, type CallTiming, type DataPlane, type Flow, MAX_MESSAGE_BYTES, MODEL_INFER_PATH,
  type StreamingCall, type TimedResponseMessage,
} from './data-plane';
import type { MessageHolds } from '../../buffers/pool';
import { releaseWhole } from '../../buffers/release';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import { InFlight, shutdownError } from '../connections/in-flight';
import { countRetry, mayRetry, withRetries } from '../backends/retry';
import { EnvelopeDecoder } from '../../grpc/envelope';
import { decodeGrpcMessage, GrpcStatus } from '../../grpc/status';
import { formatGrpcTimeout } from '../../grpc/timeout';
import { clientCancelled, notSent, upstreamError } from '../status';
import type { UpstreamTls } from '../connections/tls';
import { cancel, type Connection, H2Connections } from '../connections/h2-sessions';
import { unhook } from '../../unhook';

const NO_HOLDS: MessageHolds = { hold: () => () => undefined };
const ONCE = { once: true } as const;

export class H2DataPlane implements DataPlane {
  readonly #set: BackendSet;
  readonly #connections: H2Connections;
  readonly #headers: Record<string, string>;
  readonly #holds: MessageHolds;
  readonly #inFlight = new InFlight();

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `holds`: the buffer pool the messages may come from.
   * `tls`: upstream.tls, when the connections to Triton use TLS.
   */
  constructor(backends: BackendSet, restriction?: readonly [string, string], holds: MessageHolds = NO_HOLDS, tls?: UpstreamTls) {
    this.#set = backends;
    this.#headers = restriction === undefined ? {} : { [restriction[0]]: restriction[1] };
    this.#holds = holds;
    this.#connections = new H2Connections(backends, tls);
  }

  /**
   * The sessions to the backends, one per backend: the gRPC pass-through
   * (passthrough/grpc-upstream.ts) shares them.
   */
  get connections(): H2Connections {
    return this.#connections;
  }

  async modelInfer(message: Buffer, options: CallOptions): Promise<TimedResponseMessage> {
    const written = allWritten(this.#holds.hold(message));
    try {
      const answer = withRetries(this.#set, options, (b) => {
        const call = startCall(this.#connection(b), MODEL_INFER_PATH, options, this.#headers, this.#inFlight, written.one());
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

  startModelInfer(options: CallOptions): StreamingCall {
    const primary = new ReplayingCall(this.#set, options,
      (b, written) => startCall(this.#connection(b), MODEL_INFER_PATH, options, this.#headers, this.#inFlight, written));
    const mirror = this.#mirror(options);
    return mirror === undefined ? primary : new MirroredCall(primary, mirror);
  }

  /**
   * The mirror call of a request the model table mirrors (upstream.models mirror), on a backend of
   * the mirror pool, or undefined (not mirrored, or dropped: upstream.mirrorMaxInFlight reached,
   * no backend). It has the request's deadline and metadata but not its signal nor its receiver:
   * its answer is read and discarded, and counted (tensorgate_upstream_mirrored_total).
   */
  #mirror(options: CallOptions): H2Call | undefined {
    const model = options.model;
    const pool = model?.mirror;
    if (model === undefined || pool === undefined) return undefined;
    const b = this.#set.mirrorBackend(model, pool);
    if (b === undefined) return undefined;
    const call = startCall(this.#connection(b), MODEL_INFER_PATH,
      { deadline: options.deadline, signal: new AbortController().signal, metadata: options.metadata }, this.#headers, this.#inFlight);
    call.response.then(() => this.#set.mirrorEnded(pool, true), () => this.#set.mirrorEnded(pool, false));
    return call;
  }

  #connection(b: Backend): Connection {
    return this.#connections.get(b);
  }

  /**
   * Resets the calls still running (RST_STREAM CANCEL; they reject with GW_ERR_UPSTREAM_UNAVAILABLE)
   * and closes the sessions.
   */
  close(): void {
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
 * A request sent twice: to its backend, and a copy to a mirror. The mirror gets copies of the
 * pieces (the originals may be pooled, staged or released once the primary has written them),
 * never slows the primary (its flow control is ignored: its memory is the request's size, and
 * the mirrors running at once are bounded), and is cancelled with the primary (its message would
 * be incomplete). The answer is the primary's alone.
 */
class MirroredCall implements StreamingCall {
  constructor(private readonly primary: StreamingCall, private readonly mirror: H2Call) {}

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
    this.mirror.cancel();
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
function startCall(backend: Connection, path: string, options: CallOptions, headers: Record<string, string>, inFlight: InFlight,
  written: (ok: boolean) => void = () => undefined): H2Call {
  const call = new UnaryCall(backend, options, inFlight, written);
  call.open(path, headers);
  return call;
}

function uncorkStream(s: ClientHttp2Stream): void {
  s.uncork();
}

/**
 * One unary gRPC call on its own HTTP/2 stream: its state is fields, the stream's events are
 * methods, and every way it ends goes through #finish, once. It is also the Flow a Receiver is
 * handed with each piece of the answer. The call's CallTiming (data-plane.ts) is taken from the
 * stream's own events: 'ready' (HEADERS queued), the end() callback (last byte on the socket), the
 * first DATA, the trailers.
 */
class UnaryCall implements H2Call, Flow {
  readonly response: Promise<TimedResponseMessage>;
  #resolveResponse!: (m: TimedResponseMessage) => void;
  #rejectResponse!: (e: GatewayError) => void;
  #stream: ClientHttp2Stream | undefined;
  #session: ClientHttp2Session | undefined;
  #settled = false;
  #timer: NodeJS.Timeout | undefined;
  /** Writers waiting for the stream to take more (onDrain). */
  #waiting: (() => void)[] = [];
  /** The stream holds its first piece until the next one or the end (open). */
  #corked = false;
  #pieces = 0;
  #drainHeard = false;
  #firstSentNs = 0n;
  #sentNs = 0n;
  #firstByteNs = 0n;
  #endNs = 0n;
  /** The answer: its gRPC status, whether its headers came, its message's pieces. */
  #status: number | undefined;
  #statusMessage = '';
  #headersSeen = false;
  readonly #chunks: Buffer[] = [];
  /** The answer is one message (grpc/envelope.ts reads its prefix): bytes after it are not read. */
  readonly #envelope = new EnvelopeDecoder({
    prefix: (compressed, length) => this.#prefix(compressed, length),
    data: (c, from, to) => this.#message(c, from, to),
  });
  #expected = -1;
  #received = 0;
  #streamError: Error | undefined;
  /** The signal's listener; also the call's cancel(). */
  readonly #onAbort = (): void => this.#finish(clientCancelled());
  /** What the plane's close() calls (InFlight keeps it by identity). */
  readonly #onShutdown = (): void => this.#finish(shutdownError());

  constructor(
    private readonly backend: Connection, private readonly options: CallOptions, private readonly inFlight: InFlight,
    private readonly written: (ok: boolean) => void,
  ) {
    this.response = new Promise<TimedResponseMessage>((res, rej) => {
      this.#resolveResponse = res;
      this.#rejectResponse = rej;
    });
  }

  opened(): boolean {
    return this.#firstSentNs !== 0n;
  }

  write(piece: Buffer, done?: (err?: Error | null) => void): boolean {
    const stream = this.#stream;
    if (this.#settled || stream === undefined) return true;
    const ok = stream.write(piece, done);
    if (this.#corked && ++this.#pieces > 1) {
      this.#corked = false;
      process.nextTick(uncorkStream, stream);
    }
    return ok;
  }

  end(last: Buffer): void {
    const stream = this.#stream;
    if (this.#settled || stream === undefined) return;
    const flushed = (err?: Error | null): void => {
      if (err == null) this.#sentNs = process.hrtime.bigint();
      this.written(err == null);
    };
    // Node 24 completes a zero-length write queued behind others only when the stream closes
    // (observed): ending with one reported the request sent after its answer.
    if (last.length === 0) stream.end(flushed);
    else stream.end(last, flushed);
  }

  onDrain(resume: () => void): void {
    const stream = this.#stream;
    if (this.#settled || stream === undefined) {
      resume();
      return;
    }
    // 'drain' is listened to from the first wait on: most calls never wait.
    if (!this.#drainHeard) {
      this.#drainHeard = true;
      stream.on('drain', () => this.#wake());
    }
    this.#waiting.push(resume);
  }

  cancel(): void {
    this.#onAbort();
  }

  pause(): void {
    this.#stream!.pause();
  }

  resume(): void {
    this.#stream!.resume();
  }

  buffered(): number {
    return this.#stream?.readableLength ?? 0;
  }

  // An event can be seen late — the end() callback a turn after its socket write, a paused
  // stream's first 'data' after the trailers — so each mark is bounded by the next: in order.
  timing(): CallTiming {
    const endNs = this.#endNs;
    const firstByte = endNs !== 0n && (this.#firstByteNs === 0n || this.#firstByteNs > endNs) ? endNs : this.#firstByteNs;
    const sent = firstByte !== 0n && (this.#sentNs === 0n || this.#sentNs > firstByte) ? firstByte : this.#sentNs;
    const firstSent = this.#firstSentNs === 0n || this.#firstSentNs > sent ? sent : this.#firstSentNs;
    return { firstSentNs: firstSent, sentNs: sent, firstByteNs: firstByte, endNs };
  }

  /** Starts the call: refused at once after the plane's close() or past the deadline, else its stream opened. */
  open(path: string, headers: Record<string, string>): void {
    const { backend, options, inFlight, written } = this;
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
    let s: ClientHttp2Stream;
    try {
      this.#session = backend.session();
      s = this.#session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': formatGrpcTimeout(remaining),
        'user-agent': 'tensorgate',
        ...backend.authority,
        ...headers,
        ...options.metadata,
      });
    } catch (err) {
      // The session was closed or had received GOAWAY before the call started.
      written(true); // nothing was written
      this.#finish(notSent(upstreamError(GrpcStatus.UNAVAILABLE, (err as Error).message, true, err)));
      return;
    }
    this.#stream = s;
    // The first piece (a cut-through call's framed head) waits, corked, for the next one (the
    // body's first bytes) or the end, and what one turn writes goes to nghttp2 as one writev: the
    // HEADERS, the head and a small body then leave in one socket write, the last DATA frame
    // carrying END_STREAM. Uncorked, each write waited for the previous one's socket write
    // (Writable keeps one write in flight), and Node's END_STREAM-on-the-last-DATA check runs too
    // late after such a wait: a 64 B request went out as three socket writes (strace: HEADERS and
    // the head; the tensor's DATA; an empty DATA with END_STREAM). end() uncorks at once.
    s.cork();
    this.#corked = true;
    inFlight.add(this.#onShutdown);
    // One 'close' listener for both: the write's report (nothing if it already reported, see the
    // top of this file) and the answer's end (#done: nothing once settled). Then the stream lets go
    // of the call (unhook).
    s.on('close', () => {
      written(false);
      this.#done(false);
      unhook(s);
    });
    // On a connected session the stream opens within request(); on a new one, once it connects.
    if (!s.pending) this.#firstSentNs = process.hrtime.bigint();
    else s.once('ready', () => { this.#firstSentNs = process.hrtime.bigint(); });
    if (options.signal.aborted) {
      this.#onAbort();
      return;
    }
    options.signal.addEventListener('abort', this.#onAbort, ONCE);
    this.#listen(s);
  }

  #listen(s: ClientHttp2Stream): void {
    s.on('response', (h) => this.#onResponse(h));
    s.on('data', (chunk: Buffer) => this.#onData(chunk));
    s.on('trailers', (t: IncomingHttpHeaders) => {
      this.#endNs = process.hrtime.bigint(); // 'end' can come later: a receiver may hold the answer back
      this.#statusFrom(t);
    });
    // The answer is complete when the server's side ends — possibly while our side is still
    // uploading (an error answered mid-upload, which resets the rest) — or the stream closes.
    s.on('end', () => this.#done(true));
    s.on('error', (err: Error) => { this.#streamError = err; /* 'close' follows and reports */ });
  }

  #wake(): void {
    const w = this.#waiting;
    this.#waiting = [];
    for (const resume of w) resume();
  }

  #finish(err: GatewayError | undefined, value?: TimedResponseMessage): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    this.options.signal.removeEventListener('abort', this.#onAbort);
    this.inFlight.delete(this.#onShutdown);
    if (err) {
      if (this.#stream !== undefined) cancel(this.#stream);
      this.#rejectResponse(err);
    } else {
      this.#resolveResponse(value!);
    }
    this.#wake();
  }

  #statusFrom(h: IncomingHttpHeaders): void {
    const v = h['grpc-status'];
    if (v !== undefined) {
      this.#status = Number(v);
      this.#statusMessage = decodeGrpcMessage(h['grpc-message']);
    }
  }

  #onResponse(h: IncomingHttpHeaders & IncomingHttpStatusHeader): void {
    this.#headersSeen = true;
    const httpStatus = h[':status'];
    if (httpStatus !== 200) {
      this.#finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream answered HTTP ${httpStatus} instead of a gRPC response`));
      return;
    }
    this.#statusFrom(h); // trailers-only answer: the status is in the headers
  }

  #onData(chunk: Buffer): void {
    if (this.#firstByteNs === 0n) this.#firstByteNs = process.hrtime.bigint();
    this.#envelope.push(chunk);
  }

  /** The answer's prefix: false stops the reading (a second message, or a refusal). */
  #prefix(compressed: boolean, length: number): boolean {
    if (this.#expected >= 0) return false;
    if (compressed) {
      this.#finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression'));
      return false;
    }
    this.#expected = length;
    if (length <= MAX_MESSAGE_BYTES) return true;
    this.#finish(upstreamError(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs. ${MAX_MESSAGE_BYTES})`, false));
    return false;
  }

  /** A range of the answer's message, kept as a view (or handed to the receiver). */
  #message(c: Buffer, from: number, to: number): void {
    const view = from === 0 && to === c.length ? c : c.subarray(from, to);
    this.#received += to - from;
    if (this.options.receiver?.data(view, this) !== true) this.#chunks.push(view);
  }

  /** `ended`: the server ended its side itself (END_STREAM), rather than the stream being reset. */
  #done(ended: boolean): void {
    if (this.#settled) return;
    const status = this.#status;
    if (status === undefined) {
      this.#finish(this.#unfinished(ended));
      return;
    }
    if (status !== GrpcStatus.OK) {
      this.#finish(upstreamError(status, this.#statusMessage, false));
      return;
    }
    const expected = this.#expected;
    const received = this.#received;
    if (expected < 0 || received !== expected) {
      this.#finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response ended after ${received} of ${Math.max(expected, 0)} message bytes`));
      return;
    }
    if (this.#endNs === 0n) this.#endNs = process.hrtime.bigint(); // the status came without trailers
    this.#finish(undefined, { chunks: this.#chunks, byteLength: received, timing: this.timing() });
  }

  /**
   * An answer that ends without grpc-status breaks the protocol; a connection or stream that
   * breaks off before the status is a transport failure, whether or not headers had come.
   */
  #unfinished(ended: boolean): GatewayError {
    const { backend } = this;
    const headersSeen = this.#headersSeen;
    if (ended && headersSeen) {
      return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response from ${backend.address} ended without a gRPC status`);
    }
    const code = this.#stream!.rstCode;
    const tls = headersSeen ? undefined : backend.tlsFailure(this.#session!, this.#streamError);
    const e = upstreamError(GrpcStatus.UNAVAILABLE, tls
      ?? (!headersSeen ? `no answer from ${backend.address} (${code === undefined ? 'connection failed' : `stream reset ${code}`})`
        : `stream from ${backend.address} reset (${code ?? 'connection closed'}) before its gRPC status`), true);
    // Nothing reached Triton when the stream never opened (the connection failed first) or
    // was refused: REFUSED_STREAM, which nghttp2 also reports for streams above a GOAWAY's
    // last stream id, means no application processing happened (RFC 9113 §8.7).
    const unsent = !headersSeen && (this.#firstSentNs === 0n || code === constants.NGHTTP2_REFUSED_STREAM);
    return unsent ? notSent(e) : e;
  }
}
