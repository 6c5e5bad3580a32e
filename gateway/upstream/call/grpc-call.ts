// One gRPC call to Triton on node:http2, under every upstream call the gateway makes on its own
// sessions (upstream/connections/h2-sessions.ts): the data plane's ModelInfer, whole or cut
// through (upstream/infer/h2-plane.ts), the gRPC pass-through's relay (relay.ts) and the copies
// sent to a mirror pool (mirror.ts). As grpc-js has one Http2SubchannelCall under every call, this
// is written once: the request headers (grpc-timeout from the deadline), the request's DATA with
// back-pressure, the answer's headers, its DATA (raw chunks, or the one answer message read
// through its 5-byte envelope, grpc/envelope.ts, as views of the chunks), its gRPC status (from
// the trailers, or from the headers of a trailers-only answer), the reset (RST_STREAM CANCEL), and
// whether a failure happened before anything of the call reached Triton, the one condition under
// which a call may go to another backend (upstream/backends/retry.ts).
//
// A subclass is one kind of call: it is told the stream's events through the protected methods
// below, and keeps its own outcome. The stream's listeners are static methods shared by every call,
// which find their call through the stream: a call costs its object, not a closure per event.
//
// Two transports carry it (upstream.http2Client, docs/architecture.md#the-upstream-http2-client):
// node:http2's ClientHttp2Stream, or a stream of our own HTTP/2 connection (upstream/h2/), whose
// events come to the call through one OwnEvents object per call. The call's outcome, its errors and
// what it reports are the same on both; what differs is below each `#own` test.
import { type ClientHttp2Session, type ClientHttp2Stream, constants, type IncomingHttpHeaders, type IncomingHttpStatusHeader, type OutgoingHttpHeaders } from 'node:http2';
import { letGo } from '../../buffers/reclaim';
import { GatewayError } from '../../errors';
import { EnvelopeDecoder, type EnvelopeEvents } from '../../grpc/envelope';
import { decodeGrpcMessage, GrpcStatus, grpcStatusOfHttp } from '../../grpc/status';
import { formatGrpcTimeout } from '../../grpc/timeout';
import { unhook } from '../../unhook';
import { cancel, type Connection } from '../connections/h2-sessions';
import { CANCEL, type H2Connection, type H2Stream, NO_ERROR, type StreamHandler } from '../h2/connection';
import { BlockWriter } from '../h2/hpack';
import { notSent, upstreamError } from '../status';
import { nowNs } from '../../infer/clock';

/** Triton's own gRPC limit, both directions (docs/architecture.md#limits). */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1;

/** The call a stream belongs to, for the shared listeners. */
const CALL = Symbol('grpcCall');
type CallStream = ClientHttp2Stream & { [CALL]: GrpcCall | undefined };

function uncorkStream(s: ClientHttp2Stream): void {
  s.uncork();
}

/** The events of a stream of our own connection, for its call (set in GrpcCall's static block). */
let OwnEvents: new (call: GrpcCall) => StreamHandler;

/** What an own stream of a call has: its connection and stream, and its answer as node:http2 would tell it. */
interface Own {
  readonly h2: H2Connection;
  stream: H2Stream | undefined;
  /** Answer DATA held (copies) while the call is paused, and their bytes; `endHeld`: the end comes after them. */
  held: Buffer[] | undefined;
  heldBytes: number;
  /** The answer's bytes copied piece by piece so far; past SMALL_ANSWER, the arena they go to and its use. */
  copied: number;
  arena: Buffer | undefined;
  arenaAt: number;
  paused: boolean;
  endHeld: boolean;
  /** The peer's or our RST_STREAM code (as ClientHttp2Stream.rstCode), once the stream ended without END_STREAM. */
  rstCode: number | undefined;
  /** The request's END_STREAM was asked for; the stream is over on the connection; closed() was told. */
  ending: boolean;
  over: boolean;
  closed: boolean;
}

export abstract class GrpcCall implements EnvelopeEvents {
  #connection: Connection | undefined;
  #session: ClientHttp2Session | undefined;
  #stream: ClientHttp2Stream | undefined;
  /** When the stream opened on a connected session (its HEADERS queued); 0: not (yet). */
  #openedNs = 0;
  #sentNs = 0;
  #headersSeen = false;
  #status: number | undefined;
  #statusMessage = '';
  #streamError: Error | undefined;
  /** Request DATA was written: it cannot be sent again unless the caller keeps it (`replays`). */
  #wrote = false;
  /** Corked at open (corkFirst) until the second write or the end; `#pieces`: writes so far. */
  #corked = false;
  #pieces = 0;
  /** Writers waiting for the stream to take more (onDrain); 'drain' is listened to from the first wait. */
  #waiting: (() => void)[] | undefined;
  #drainHeard = false;
  /** The answer message's envelope (readMessage), its declared length (-1: none yet) and bytes read. */
  #envelope: EnvelopeDecoder | undefined;
  #expected = -1;
  #received = 0;
  /** On upstream.http2Client own: the call's stream of our own connection. */
  #own: Own | undefined;

  /**
   * `replays`: the caller keeps what it writes and can send it again elsewhere, so a call refused
   * after its DATA was written is still "never sent" (the pass-through keeps nothing: false).
   */
  constructor(private readonly replays: boolean) {}

  /** The gRPC status of the answer, once read (trailers, or a trailers-only answer's headers). */
  get status(): number | undefined {
    return this.#status;
  }

  get statusMessage(): string {
    return this.#statusMessage;
  }

  /** When the stream opened (nowNs()); 0 while it has not. */
  get openedNs(): number {
    return this.#openedNs;
  }

  /** When the request's last byte went to the socket; 0 until then, or when its write failed. */
  get sentNs(): number {
    return this.#sentNs;
  }

  /** The request's last byte went to the socket now: a whole call's (openWhole), or as end()'s callback told. */
  protected sentNow(): void {
    this.#sentNs = nowNs();
  }

  /** The answer's headers have come. */
  get headersSeen(): boolean {
    return this.#headersSeen;
  }

  /** The answer's bytes received and not read yet (a paused stream's). */
  buffered(): number {
    return this.#own?.heldBytes ?? this.#stream?.readableLength ?? 0;
  }

  /**
   * Opens the stream: `headers` (the caller's object, with its content-type, te and metadata) gets
   * the method, the path, grpc-timeout from `deadline` and the connection's :authority, and is sent
   * as it is (node:http2 encodes it at once). Returns the error when the session refused the
   * stream (closed, or GOAWAY received): never sent. `corkFirst`: the first write waits, corked,
   * for the next one or the end (write()).
   */
  protected open(connection: Connection, path: string, headers: OutgoingHttpHeaders, deadline: number, corkFirst: boolean): GatewayError | undefined {
    if (connection.own) return this.#openOwn(connection, path, headers, deadline, corkFirst, undefined);
    // A shared header set (frozen) is only read by our own connection's call: node:http2's gets a copy.
    if (Object.isFrozen(headers)) headers = { ...headers };
    this.#prepare(connection, path, headers, deadline);
    let s: ClientHttp2Stream;
    try {
      this.#session = connection.session();
      s = this.#session.request(headers);
    } catch (err) {
      this.#streamError = err as Error;
      return this.failure(false);
    }
    this.#stream = s;
    if (corkFirst) {
      s.cork();
      this.#corked = true;
    }
    (s as CallStream)[CALL] = this;
    // On a connected session the stream opens within request(); on a new one, once it connects.
    if (!s.pending) this.#openedNs = nowNs();
    else s.once('ready', GrpcCall.#onReady);
    s.on('response', GrpcCall.#onResponse);
    s.on('data', GrpcCall.#onData);
    s.on('trailers', GrpcCall.#onTrailers);
    s.on('end', GrpcCall.#onEnd);
    s.on('error', GrpcCall.#onError);
    s.on('close', GrpcCall.#onClose);
    return undefined;
  }

  /**
   * Opens the stream with the whole request message, `pieces` in order (a framed head and views
   * of the payload between its pieces), and ends it: on our own connection the HEADERS and a small
   * message go out as one buffer (h2/connection.ts request()). `sentNs` tells when its last byte
   * went to the socket. Returns what open() returns.
   */
  protected openWhole(connection: Connection, path: string, headers: Readonly<OutgoingHttpHeaders>, deadline: number,
    pieces: readonly Buffer[]): GatewayError | undefined {
    if (connection.own) return this.#openOwn(connection, path, headers, deadline, false, pieces);
    // A shared header set is frozen (whole-call.ts WholePlane.sharedHeadersOf): open() copies it.
    const refused = this.open(connection, path, headers, deadline, true);
    if (refused !== undefined) return refused;
    for (let i = 0; i < pieces.length - 1; i++) this.write(pieces[i]!);
    this.end(pieces[pieces.length - 1], (err) => {
      if (err == null) this.sentNow();
    });
    return undefined;
  }

  /** What every call's headers get: the method, the path, grpc-timeout from `deadline`, the connection's :authority. */
  #prepare(connection: Connection, path: string, headers: OutgoingHttpHeaders, deadline: number): void {
    headers[':method'] = 'POST';
    headers[':path'] = path;
    headers['grpc-timeout'] = formatGrpcTimeout(deadline - Date.now());
    const authority = connection.authority[':authority'];
    if (authority !== undefined) headers[':authority'] = authority;
    else if (headers[':authority'] !== undefined) delete headers[':authority']; // a retry on another connection
    this.#connection = connection;
  }

  /**
   * The stream on our own connection (a new one when none has room): HEADERS as an HPACK block
   * that never indexes (upstream/h2/hpack.ts) — the fields #prepare gives node:http2's, then
   * `headers`, then grpc-timeout; `headers` is only read. `corkFirst` corks the socket as the
   * node:http2 path corks its stream. `whole`: the request's message, sent and ended with the
   * HEADERS, its last byte's leaving told by sent() (sentNs).
   */
  #openOwn(connection: Connection, path: string, headers: OutgoingHttpHeaders, deadline: number, corkFirst: boolean,
    whole: readonly Buffer[] | undefined): GatewayError | undefined {
    this.#connection = connection;
    const block = BLOCK;
    block.begin();
    // A shared header set (frozen: whole-call.ts sharedHeadersOf) has its fields encoded once per connection and path.
    let f = connection.headerFields.get(headers);
    if ((f === undefined || f.path !== path) && Object.isFrozen(headers)) {
      connection.headerFields.set(headers, f = { path, block: headerFields(connection, path, headers, new BlockWriter()) });
    }
    if (f !== undefined && f.path === path) block.bytes(f.block);
    else headerFields(connection, path, headers, block);
    block.field('grpc-timeout', formatGrpcTimeout(deadline - Date.now()));
    let h2: H2Connection;
    try {
      h2 = connection.ownConnection();
      const own: Own = {
        h2, stream: undefined, held: undefined, heldBytes: 0, copied: 0, arena: undefined, arenaAt: 0, paused: false, endHeld: false,
        rstCode: undefined, ending: false, over: false, closed: false,
      };
      this.#own = own;
      own.stream = h2.request(block.end(), new OwnEvents(this), whole, whole !== undefined, whole !== undefined);
      if (whole !== undefined) {
        own.ending = true;
        this.#wrote = true;
      }
    } catch (err) {
      this.#own = undefined;
      this.#streamError = err as Error;
      return this.failure(false);
    }
    if (corkFirst) {
      h2.socket.cork();
      this.#corked = true;
    }
    if (h2.connected) this.#openedNs = nowNs();
    return undefined;
  }

  /** Writes a piece of the request by reference; false: wait for onDrain. `done`: it left for the socket. */
  write(piece: Buffer, done?: (err?: Error | null) => void): boolean {
    const own = this.#own;
    if (own !== undefined) return this.#writeOwn(own, piece, done);
    const s = this.#stream;
    if (s === undefined) return true;
    this.#wrote = true;
    const ok = s.write(piece, done);
    // The first piece (a framed head) went out with the HEADERS and the next piece in one writev.
    if (this.#corked && ++this.#pieces > 1) {
      this.#corked = false;
      process.nextTick(uncorkStream, s);
    }
    return ok;
  }

  /**
   * Corks the stream until this turn's I/O is done, unless it is already: what one turn writes
   * goes to nghttp2 as one writev (end() uncorks).
   */
  corkTurn(): void {
    if (this.#corked) return;
    if (this.#own !== undefined) this.#own.h2.socket.cork();
    else if (this.#stream !== undefined) this.#stream.cork();
    else return;
    this.#corked = true;
    setImmediate(GrpcCall.#uncorkTurn, this);
  }

  #writeOwn(own: Own, piece: Buffer, done: ((err?: Error | null) => void) | undefined): boolean {
    const s = own.stream!;
    this.#wrote = true;
    own.h2.send(s, piece, false, done);
    if (this.#corked && ++this.#pieces > 1) {
      this.#corked = false;
      process.nextTick(uncorkSocket, own.h2);
    }
    return own.h2.writable(s);
  }

  #endOwn(own: Own, last: Buffer | undefined, done: ((err?: Error | null) => void) | undefined): void {
    if (own.ending) return;
    own.ending = true;
    if (last !== undefined && last.length > 0) this.#wrote = true;
    own.h2.send(own.stream!, last, true, done);
    if (this.#corked) {
      this.#corked = false;
      own.h2.socket.uncork();
    }
  }

  /** Ends the request with `last` (none, or empty: END_STREAM alone); `done` as for write(). */
  end(last?: Buffer, done?: (err?: Error | null) => void): void {
    if (this.#own !== undefined) {
      this.#endOwn(this.#own, last, done);
      return;
    }
    const s = this.#stream;
    if (s === undefined || s.writableEnded) return;
    this.#corked = false;
    // Node 24 completes a zero-length write queued behind others only when the stream closes
    // (observed): ending with one reported the request sent after its answer.
    if (last === undefined || last.length === 0) {
      s.end(done);
      return;
    }
    this.#wrote = true;
    s.end(last, done);
  }

  /** `resume` runs once the stream takes more, or at once when it has none. */
  onDrain(resume: () => void): void {
    const own = this.#own;
    if (own !== undefined && !own.closed) {
      (this.#waiting ??= []).push(resume);
      own.h2.whenWritable(own.stream!);
      return;
    }
    const s = this.#stream;
    if (s === undefined) {
      resume();
      return;
    }
    if (!this.#drainHeard) {
      this.#drainHeard = true;
      s.on('drain', GrpcCall.#onDrain);
    }
    (this.#waiting ??= []).push(resume);
  }

  /** Runs the writers waiting for onDrain (the stream takes more, or the call is over). */
  wake(): void {
    const w = this.#waiting;
    if (w === undefined || w.length === 0) return;
    this.#waiting = undefined;
    for (const resume of w) resume();
  }

  pause(): void {
    const own = this.#own;
    if (own === undefined) {
      this.#stream?.pause();
      return;
    }
    own.paused = true;
    if (own.stream !== undefined) own.h2.pause(own.stream);
  }

  resume(): void {
    const own = this.#own;
    if (own === undefined) {
      this.#stream?.resume();
      return;
    }
    if (!own.paused) return;
    own.paused = false;
    if (own.stream !== undefined) own.h2.resume(own.stream);
    // What was held goes on a later turn, as a resumed Readable's does.
    if (own.heldBytes > 0 || own.endHeld) process.nextTick(GrpcCall.#release, this);
  }

  /** RST_STREAM CANCEL, and what the stream buffered let go (h2-sessions.ts cancel()). */
  reset(): void {
    if (this.#own !== undefined) this.#closeOwn(this.#own, CANCEL);
    else if (this.#stream !== undefined) cancel(this.#stream);
  }

  /**
   * Our side of an own stream ends with RST_STREAM `code` (when it is still open), what it held
   * is let go, and the call hears closed() on a later turn, as node:http2's 'close'.
   */
  #closeOwn(own: Own, code: number): void {
    if (own.closed) return;
    if (!own.over) {
      own.over = true;
      own.rstCode = code;
      own.h2.reset(own.stream!, code);
    }
    this.#uncorkOwn(own);
    if (own.heldBytes > 0) letGo(own.heldBytes);
    own.held = undefined;
    own.heldBytes = 0;
    own.endHeld = false;
    process.nextTick(GrpcCall.#ownClosed, this);
  }

  /**
   * The answer has its status while the request is still being sent: our side is closed too
   * (NO_ERROR), or the stream would stay open on the shared session.
   */
  stopSending(): void {
    const own = this.#own;
    if (own !== undefined) {
      if (!own.ending && !own.over) this.#closeOwn(own, NO_ERROR);
      return;
    }
    const s = this.#stream;
    if (s !== undefined && !s.writableEnded && !s.closed && !s.destroyed) s.close(constants.NGHTTP2_NO_ERROR);
  }

  /** Reads the answer's DATA as its one message (chunk()), handed on as views to message(). */
  protected readMessage(chunk: Buffer): void {
    (this.#envelope ??= new EnvelopeDecoder(this)).push(chunk);
  }

  /** EnvelopeEvents: one message, uncompressed, within MAX_MESSAGE_BYTES; bytes after it are not read. */
  prefix(compressed: boolean, length: number): boolean {
    if (this.#expected >= 0) return false;
    if (compressed) {
      this.failed(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression'));
      return false;
    }
    this.#expected = length;
    if (length <= MAX_MESSAGE_BYTES) return true;
    this.failed(upstreamError(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs. ${MAX_MESSAGE_BYTES})`, false));
    return false;
  }

  /** EnvelopeEvents: a range of the answer message, as a view. */
  data(c: Buffer, from: number, to: number): void {
    this.#received += to - from;
    this.message(from === 0 && to === c.length ? c : c.subarray(from, to));
  }

  /** The answer message's bytes received (readMessage). */
  get received(): number {
    return this.#received;
  }

  /**
   * How a call that read its answer (readMessage) ended, once the stream has: undefined when it
   * answered OK with one whole message, else the error. `ended`: the server ended the stream.
   */
  protected verdict(ended: boolean): GatewayError | undefined {
    const status = this.#status;
    if (status === undefined) return this.failure(ended);
    if (status !== GrpcStatus.OK) return upstreamError(status, this.#statusMessage, false);
    const expected = this.#expected;
    if (expected >= 0 && this.#received === expected) return undefined;
    return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response ended after ${this.#received} of ${Math.max(expected, 0)} message bytes`);
  }

  /**
   * The failure of a call whose answer has no gRPC status: one that ended without it breaks the
   * protocol (`ended`: the server ended the stream after its headers); a connection or stream
   * that broke off first is a transport failure, marked never sent (notSent: it may go to another
   * backend) when nothing reached Triton: the stream never opened (the connection failed first),
   * or was refused — REFUSED_STREAM, which nghttp2 also reports for streams above a GOAWAY's last
   * stream id, means no application processing happened (RFC 9113 §8.7) — and nothing written is
   * lost (the caller keeps it, or wrote none). So is a stream the session refused to open (it was
   * closed, or had received GOAWAY): open() returns this.
   */
  failure(ended: boolean): GatewayError {
    const address = this.#connection!.address;
    const headersSeen = this.#headersSeen;
    if (ended && headersSeen) {
      return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response from ${address} ended without a gRPC status`);
    }
    const s = this.#stream;
    const own = this.#own;
    if (s === undefined && own === undefined) return notSent(upstreamError(GrpcStatus.UNAVAILABLE, this.#streamError!.message, true, this.#streamError));
    const code = own !== undefined ? own.rstCode : s!.rstCode;
    const opened = this.#openedNs !== 0;
    const tls = headersSeen ? undefined : own !== undefined ? this.#connection!.ownTlsFailure(own.h2, this.#streamError)
      : this.#connection!.tlsFailure(this.#session!, this.#streamError);
    const e = upstreamError(GrpcStatus.UNAVAILABLE, tls
      ?? (!headersSeen ? `no answer from ${address} (${!opened || code === undefined ? 'connection failed' : `stream reset ${code}`})`
        : `stream from ${address} reset (${code ?? 'connection closed'}) before its gRPC status`), true);
    const unsent = !headersSeen && (!opened || code === constants.NGHTTP2_REFUSED_STREAM) && (this.replays || !this.#wrote);
    return unsent ? notSent(e) : e;
  }

  /** The stream opened on a connected session. */
  protected ready(): void { /* most calls have nothing to do then */ }
  /** The answer's headers (:status 200); `status` is set when they are a trailers-only answer's. */
  protected abstract answerHeaders(h: IncomingHttpHeaders): void;
  /** An answer DATA chunk, as received (readMessage reads it as the answer message). */
  protected abstract chunk(c: Buffer): void;
  /** A range of the answer message (readMessage), a view of the chunk it came in. */
  protected message(view: Buffer): void { void view; }
  /** The answer's trailers; `status` is read from them. */
  protected abstract trailers(t: IncomingHttpHeaders): void;
  /** The server ended its side (END_STREAM). */
  protected abstract ended(): void;
  /** The stream has closed, however; its listeners go after this. */
  protected abstract closed(): void;
  /** The call cannot go on: answered without gRPC (not HTTP 200), or a message it cannot read. */
  protected abstract failed(err: GatewayError): void;

  /** The one place the answer's gRPC status is read: trailers, or trailers-only headers. */
  #statusFrom(h: IncomingHttpHeaders): void {
    const v = h['grpc-status'];
    if (v === undefined) return;
    this.#status = Number(v);
    this.#statusMessage = decodeGrpcMessage(h['grpc-message']);
  }

  // The stream's listeners, shared by every call: each finds its call through the stream.
  static #onReady(this: ClientHttp2Stream): void {
    const call = (this as CallStream)[CALL]!;
    call.#openedNs = nowNs();
    call.ready();
  }

  static #onResponse(this: ClientHttp2Stream, h: IncomingHttpHeaders & IncomingHttpStatusHeader): void {
    (this as CallStream)[CALL]!.#response(h);
  }

  #response(h: IncomingHttpHeaders & IncomingHttpStatusHeader): void {
    this.#headersSeen = true;
    const httpStatus = h[':status'] ?? 0;
    if (httpStatus !== 200) {
      this.failed(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL',
        `upstream ${this.#connection!.address} answered HTTP ${httpStatus} instead of a gRPC response`, { grpcCode: grpcStatusOfHttp(httpStatus) }));
      return;
    }
    this.#statusFrom(h); // a trailers-only answer: the status is in the headers
    this.answerHeaders(h);
  }

  static #onData(this: ClientHttp2Stream, c: Buffer): void {
    (this as CallStream)[CALL]!.chunk(c);
  }

  static #onTrailers(this: ClientHttp2Stream, t: IncomingHttpHeaders): void {
    const call = (this as CallStream)[CALL]!;
    call.#statusFrom(t);
    call.trailers(t);
  }

  static #onEnd(this: ClientHttp2Stream): void {
    (this as CallStream)[CALL]!.ended();
  }

  static #onError(this: ClientHttp2Stream, err: Error): void {
    (this as CallStream)[CALL]!.#streamError = err; // 'close' follows and reports
  }

  static #onDrain(this: ClientHttp2Stream): void {
    (this as CallStream)[CALL]!.wake();
  }

  static #onClose(this: ClientHttp2Stream): void {
    const s = this as CallStream;
    s[CALL]!.closed();
    // Closed: the stream lets go of the call (Node keeps a closed stream until a full collection).
    unhook(s);
    s[CALL] = undefined;
  }

  static #uncorkTurn(call: GrpcCall): void {
    if (!call.#corked) return;
    call.#corked = false;
    if (call.#own !== undefined) call.#own.h2.socket.uncork();
    else call.#stream?.uncork();
  }

  // ---- the own transport's events (OwnEvents), told as node:http2 tells them above

  /** A header block of the answer: its headers, or its trailers. */
  #ownHeaders(): void {
    const h = blockFields(this);
    if (!this.#headersSeen) {
      this.#response(h);
      return;
    }
    this.#statusFrom(h);
    this.trailers(h);
  }

  /** A piece of the answer, copied (it is a view of the connection's read buffer); held while paused. */
  #ownData(own: Own, chunk: Buffer, from: number, to: number): void {
    const c = ownPiece(own, chunk, from, to);
    if (!own.paused && own.heldBytes === 0) {
      this.chunk(c);
      return;
    }
    (own.held ??= []).push(c);
    own.heldBytes += c.length;
  }

  #ownEnd(own: Own): void {
    own.over = true;
    if (own.paused || own.heldBytes > 0) {
      own.endHeld = true;
      return;
    }
    this.ended();
    GrpcCall.#ownClosed(this);
  }

  /** Hands on what was held while paused, until paused again. */
  static #release(call: GrpcCall): void {
    const own = call.#own!;
    while (!own.paused && own.held !== undefined && own.held.length > 0 && !own.closed) {
      const c = own.held.shift()!;
      own.heldBytes -= c.length;
      call.chunk(c);
    }
    if (!own.paused && (own.held?.length ?? 0) === 0 && own.endHeld && !own.closed) {
      own.endHeld = false;
      call.ended();
      GrpcCall.#ownClosed(call);
    }
  }

  /**
   * A call corked at open (corkFirst) that ends before its second write or its end: the socket is
   * the connection's, shared by every call on it, and must not stay corked.
   */
  #uncorkOwn(own: Own): void {
    if (!this.#corked) return;
    this.#corked = false;
    own.h2.socket.uncork();
  }

  static #ownClosed(call: GrpcCall): void {
    const own = call.#own!;
    if (own.closed) return;
    own.arena = undefined;
    call.#uncorkOwn(own);
    own.closed = true;
    call.closed();
    call.wake();
  }

  static {
    OwnEvents = class implements StreamHandler {
      readonly #call: GrpcCall;
      constructor(call: GrpcCall) {
        this.#call = call;
      }

      field(name: string, value: string): void {
        const b = ANSWER_BLOCK;
        if (b.call !== this.#call) {
          b.call = this.#call;
          b.n = 0;
        }
        b.names[b.n] = name;
        b.values[b.n++] = value;
      }

      headers(): void {
        this.#call.#ownHeaders();
      }

      data(chunk: Buffer, from: number, to: number): void {
        this.#call.#ownData(this.#call.#own!, chunk, from, to);
      }

      end(): void {
        this.#call.#ownEnd(this.#call.#own!);
      }

      closed(code: number, processed: boolean, reason: string): void {
        const call = this.#call;
        const own = call.#own!;
        if (own.closed) return;
        own.over = true;
        own.rstCode ??= code;
        call.#streamError ??= own.h2.lastError === undefined ? new Error(reason) : new Error(reason, { cause: own.h2.lastError });
        void processed; // REFUSED_STREAM is its code (upstream/h2/connection.ts)
        own.held = undefined;
        if (own.heldBytes > 0) letGo(own.heldBytes);
        own.heldBytes = 0;
        GrpcCall.#ownClosed(call);
      }

      ready(): void {
        const call = this.#call;
        call.#openedNs = nowNs();
        call.ready();
      }

      drain(): void {
        this.#call.wake();
      }

      sent(): void {
        this.#call.sentNow();
      }
    };
  }
}

/**
 * The answer's header block being decoded, for every own call: a block is decoded whole and told
 * (StreamHandler.headers) before the connection reads another, so one is enough. Its fields are
 * kept as names and values and made into node:http2's object once whole (blockFields).
 */
const ANSWER_BLOCK = { call: undefined as GrpcCall | undefined, n: 0, names: [] as string[], values: [] as string[] };

/**
 * `call`'s header block as node:http2 gives it (`:status` a number, a repeated name's values joined
 * with ", "). The blocks Triton answers every call with — its headers, and its trailers when the
 * call succeeded — are each made as one object literal: field by field, the object takes a map
 * transition per field at one store site that sees every name, megamorphic (its loads and stores,
 * ~0.9 % of a 64 B request's CPU).
 */
function blockFields(call: GrpcCall): IncomingHttpHeaders {
  const b = ANSWER_BLOCK;
  const n = b.call === call ? b.n : 0;
  b.call = undefined;
  const { names, values } = b;
  if (n === 3 && names[0] === ':status' && names[1] === 'content-type' && names[2] === 'grpc-accept-encoding') {
    // node:http2's types give `:status` a number only beside the index signature's strings.
    return { ':status': Number(values[0]), 'content-type': values[1], 'grpc-accept-encoding': values[2] } as unknown as IncomingHttpHeaders;
  }
  if (n === 1 && names[0] === 'grpc-status') return { 'grpc-status': values[0] };
  const f: IncomingHttpHeaders = {};
  for (let i = 0; i < n; i++) {
    const name = names[i]!, value = values[i]!;
    if (name === ':status') (f as IncomingHttpStatusHeader)[':status'] = Number(value);
    else f[name] = Object.hasOwn(f, name) ? `${String(f[name])}, ${value}` : value; // not Object.prototype's ("constructor")
  }
  return f;
}

/** Every own call's request header block, written in place: request() copies it into its frame at once. */
const BLOCK = new BlockWriter();

/**
 * A call's fields but grpc-timeout, into `block`: those #prepare gives node:http2's, then
 * `headers` (but pseudo-fields and grpc-timeout); returns the block's bytes so far.
 */
function headerFields(connection: Connection, path: string, headers: Readonly<OutgoingHttpHeaders>, block: BlockWriter): Buffer {
  block.field(':method', 'POST');
  block.field(':scheme', connection.scheme);
  block.field(':path', path);
  block.field(':authority', connection.authority[':authority'] ?? connection.address);
  for (const name in headers) {
    const v = headers[name];
    if (name[0] !== ':' && name !== 'grpc-timeout' && v !== undefined) block.field(name, Array.isArray(v) ? v.join(', ') : String(v));
  }
  return block.end();
}

/** An answer's first bytes up to this many are copied piece by piece, each into a buffer of its size. */
const SMALL_ANSWER = 64 * 1024;
/**
 * A call's arena: above glibc's mmap threshold as bin/tensorgate sets it (128 KiB), so it is its
 * own mapping, unmapped when its last view is collected, and the pages it never touched are never
 * resident. Pieces copied into 16 KiB buffers of their own came from malloc's arenas, which did not
 * give back what the held answers of clients that left had used (docs/architecture.md, "The
 * upstream HTTP/2 client").
 */
const ARENA_BYTES = 256 * 1024;

/**
 * The answer piece `chunk[from, to)` copied out of the connection's read buffer, which the next
 * read overwrites: the first SMALL_ANSWER bytes each into a buffer of its size (Node's pool below
 * 4 KiB), the rest into the call's own arenas, handed on as views. A call's views pin only its own
 * arenas, and a small answer costs no mapping.
 */
function ownPiece(own: Own, chunk: Buffer, from: number, to: number): Buffer {
  const n = to - from;
  let arena = own.arena;
  if (arena === undefined && own.copied + n <= SMALL_ANSWER) {
    own.copied += n;
    return Buffer.from(chunk.subarray(from, to));
  }
  if (arena === undefined || arena.length - own.arenaAt < n) {
    arena = own.arena = Buffer.allocUnsafe(Math.max(n, ARENA_BYTES));
    own.arenaAt = 0;
  }
  const at = own.arenaAt;
  chunk.copy(arena, at, from, to);
  own.arenaAt = at + n;
  return arena.subarray(at, at + n);
}

function uncorkSocket(h2: H2Connection): void {
  h2.socket.uncork();
}
