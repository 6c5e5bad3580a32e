// HTTP/2 on the gateway's one port, next to HTTP/1.1: h2c with prior knowledge (the 24-byte
// connection preface tells it from HTTP/1.1 on each new TCP connection) and h2 over TLS (ALPN
// decides); the session limits (server.h2.*, server.maxHeaderBytes); and the split of each
// stream between the REST routes (Node's compatibility request/response) and gRPC.
//
// Why not http2.createSecureServer({ allowHTTP1: true }) for TLS: the cleartext side cannot use it
// (allowHTTP1 is an option of the secure server only: Node's doc/api/http2.md), so HTTP/2 there comes
// by hand-over anyway; and the secure HTTP/2 server is not node:http's server — no
// closeAllConnections() (the drain's deadline), no maxHeadersCount (server.maxHeaderCount), its
// own defaults for every timeout. (Its HTTP/1.1 fallback does run node:http's headersTimeout
// sweep on Node 24.21: checked, a TLS client sending half a head got 408 after headersTimeout.)
// So node:http(s) keeps listening and keeps every HTTP/1.1 behaviour as it was, on one code path
// for TCP and TLS; connections that speak HTTP/2 — the preface on TCP, ALPN h2 on TLS — are handed
// to a node:http2 server that never listens, by its 'connection' event (the way node:http2's own
// secure server receives them). The sniffing below is our own few lines.
import { type Linked, LinkedList } from '../linked-list';
import { letGo } from '../buffers/reclaim';
import { bodyBytesOf, CountedH2Response, type WriteWatcher } from './counted-response';
import { constants, createServer as createH2Server, type Http2Server, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Config } from '../config/schema';
import { GrpcStatus } from '../grpc/status';
import type { DiscardBound } from './body';

/** RFC 9113 §3.4: every HTTP/2 connection with prior knowledge begins with these 24 octets. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * What a connection's first bytes say: 'h2' once they hold the whole preface, 'http1' at the
 * first byte that differs from it, undefined while they are a prefix of it. No HTTP/1.1 method
 * is PRI (RFC 9113 §3.4 chose it so), so an HTTP/1.1 client is told apart by its second byte at
 * the latest (POST, PUT and PATCH share the P).
 */
export function prefaceVerdict(bytes: Buffer): 'h2' | 'http1' | undefined {
  const n = Math.min(bytes.length, PREFACE.length);
  if (bytes.compare(PREFACE, 0, n, 0, n) !== 0) return 'http1';
  return n === PREFACE.length ? 'h2' : undefined;
}

/**
 * Reads a new cleartext connection's first bytes and calls `then` with its protocol, the bytes
 * put back (unshift) for the server that takes it. A connection that has not told within
 * `timeoutMs` goes to `onTimeout` (it has not sent a whole request head in time either).
 */
export function sniffProtocol(socket: Socket, timeoutMs: number, then: (protocol: 'h2' | 'http1') => void, onTimeout: () => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const done = (): void => {
    clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('close', onClose);
  };
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const verdict = prefaceVerdict(seen);
    if (verdict === undefined) return;
    done();
    socket.pause();
    socket.unshift(seen);
    then(verdict);
  };
  const onClose = (): void => done();
  const timer = setTimeout(() => {
    done();
    onTimeout();
  }, timeoutMs);
  socket.on('data', onData);
  socket.once('close', onClose);
  // Before a server owns it, an error (a reset) only ends it; 'close' follows.
  socket.on('error', () => socket.destroy());
}

/**
 * The HTTP/2 twin of discardRest (ingress/body.ts), for an answer given before the request's body
 * was read to its end (a GET nobody reads, a 404, a 413, a 408). RFC 9113 §8.1: a server may ask
 * the client to stop sending with RST_STREAM NO_ERROR only *after* a complete response, and a
 * request that has already ended (END_STREAM received, read or not) needs no reset at all.
 *
 * The stream's 'finish' is not "complete": Node fires it once the last write and the end were
 * handed to nghttp2, before nghttp2 has framed the last DATA with END_STREAM — and nghttp2 sends an
 * RST_STREAM ahead of the DATA still queued, dropping it (the client then sees HEADERS and maybe
 * some DATA, and a reset: httpx and Go's net/http report the answer as lost). So the reset waits
 * for nghttp2's own word that END_STREAM is out (the stream's local close, `state.localClose`),
 * and only while the request is still arriving (`state.remoteClose` unset).
 *
 * Even then the reset is a last resort: the rest of the request is read and dropped, as HTTP/1.1's
 * discardRest does, and the stream is reset only once the client has sent more than `bound.bytes`
 * of it, or has not ended it within `bound.ms` of the answer (server.discardBodyBytes,
 * server.discardBodyMs). RFC 9113 allows the reset, but a client still uploading when it arrives
 * may fail the whole exchange: curl 7.88 (nghttp2 1.52) then exits 92 "Stream error in the HTTP/2
 * framing layer" with no status for an early 413, 1 time in 40 here. A client that ends its
 * request in time sees a plain end of stream. An answer that cannot go out within `bound.ms` (at
 * least 1 s, as 0 there means "close at once", not "cut the answer"; a client that opens no
 * flow-control window) is cut with RST_STREAM CANCEL, the stream's resources freed.
 */
export function endUnreadBody(req: Http2ServerRequest, bound: DiscardBound): void {
  const stream = req.stream;
  stream.once('finish', () => {
    if (req.complete) return;
    let dropped = 0;
    let timer: NodeJS.Timeout | undefined;
    const stop = (): void => {
      clearTimeout(timer);
      if (!stream.closed && !stream.destroyed && stream.state.remoteClose !== 1) stream.close(constants.NGHTTP2_NO_ERROR);
    };
    req.on('data', (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > bound.bytes && stream.state.localClose === 1) stop();
    });
    req.resume(); // what arrives is dropped, and its flow-control window given back
    afterEndStream(stream, Math.max(bound.ms, 1000), () => {
      if (stream.state.remoteClose === 1) return; // the request ended too: the stream closes by itself
      if (dropped > bound.bytes) {
        stop();
        return;
      }
      timer = setTimeout(stop, bound.ms);
      timer.unref();
      stream.once('close', () => clearTimeout(timer));
    });
  });
}

/**
 * Calls `then` once nghttp2 has sent the stream's END_STREAM (its local close), checked on the
 * next turn and then at growing intervals (1 ms doubling up to 50 ms); a stream that is gone meanwhile
 * needs nothing. Past `ms` the stream is reset with CANCEL instead: its answer is not out.
 */
export function afterEndStream(stream: ServerHttp2Stream, ms: number, then: () => void): void {
  const deadline = performance.now() + ms;
  let wait = 1;
  const check = (): void => {
    if (stream.closed || stream.destroyed) return;
    if (stream.state.localClose === 1) {
      then();
      return;
    }
    if (performance.now() >= deadline) {
      cancelStream(stream);
      return;
    }
    setTimeout(check, wait).unref();
    wait = Math.min(wait * 2, 50);
  };
  setImmediate(check);
}

/**
 * Streams the gateway reset itself (an answer not out in time, a slow reader cut): the rapid-reset
 * bound counts the client's resets, not these, or cutting many slow streams of one client at once
 * would end its whole session with ENHANCE_YOUR_CALM.
 */
const resetHere = new WeakSet<object>();

/** RST_STREAM CANCEL from the gateway's side. */
function cancelStream(stream: GrpcStream): void {
  resetHere.add(stream);
  stream.close(constants.NGHTTP2_CANCEL);
}

/** `content-type: application/grpc` or `application/grpc+proto` etc. (gRPC over HTTP/2, PROTOCOL-HTTP2.md). */
export function isGrpc(headers: IncomingHttpHeaders): boolean {
  return headers['content-type']?.startsWith('application/grpc') === true;
}

/**
 * What the gRPC pass-through asks of a stream: the part of node:http2's ServerHttp2Stream it uses,
 * which the gRPC port's own streams speak too (ingress/grpc-port/connection.ts ServerStream).
 */
export interface GrpcStream extends EventEmitter {
  readonly closed: boolean;
  readonly destroyed: boolean;
  readonly headersSent: boolean;
  readonly readableEnded: boolean;
  /** Answer bytes written and not yet sent (waiting for the client's window). */
  readonly writableLength: number;
  respond(headers: OutgoingHttpHeaders, options?: { readonly endStream?: boolean; readonly waitForTrailers?: boolean }): void;
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): void;
  /** With respond's waitForTrailers, in answer to 'wantTrailers'. */
  sendTrailers(headers: OutgoingHttpHeaders): void;
  /** RST_STREAM `code`. */
  close(code?: number): void;
  pause(): this;
  resume(): this;
}

/**
 * The gRPC handler (gRPC pass-through): owns the stream from its headers on — answers it, reads it,
 * resets it. Called for every HTTP/2 stream whose content-type starts with application/grpc,
 * never for REST requests; synchronously from node:http2's 'stream' event. Its answer is bounded
 * as a REST one is (server.h2.maxUnreadAnswerBytes, server.h2.unreadAnswerMs) through `bound`.
 */
export type GrpcHandler = (stream: GrpcStream, headers: IncomingHttpHeaders, bound: AnswerBound) => void;

/**
 * What bounds a gRPC stream's answer for a client that does not read it: the handler tells it after
 * each write() and end() of the stream (a REST answer's counted response tells it itself), and asks
 * it whether it reset the stream for that (the stream's 'close' follows). One object per
 * connection, not per stream: nothing is wrapped or bound per call.
 */
export interface AnswerBound {
  afterWrite(stream: GrpcStream): void;
  cutOff(stream: GrpcStream): boolean;
}

/** No bound: a stream without a session (closed before its handler ran) or a handler called outside a listener. */
export const UNBOUNDED: AnswerBound = { afterWrite: () => undefined, cutOff: () => false };

/**
 * No gRPC handler wired: gRPC status UNIMPLEMENTED in trailers-only form (the gRPC spec's
 * doc/PROTOCOL-HTTP2.md: HEADERS with :status 200 and the status, END_STREAM), never an HTTP
 * error, so gRPC clients report a status rather than a transport failure.
 */
export function grpcUnimplemented(stream: GrpcStream): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({
    ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(GrpcStatus.UNIMPLEMENTED),
    'grpc-message': 'gRPC is not served on this port',
  }, { endStream: true });
}

export interface H2Options {
  readonly h2: Config['server']['h2'];
  readonly head: Pick<Config['server'], 'maxHeaderBytes' | 'maxHeaderCount'>;
  readonly timeouts: Pick<Config['server'], 'headersTimeoutMs' | 'keepAliveTimeoutMs'>;
  /** gRPC streams; unset: UNIMPLEMENTED. */
  readonly grpc?: GrpcHandler;
  /** A session ended for too many resets (server.h2.maxResetsPerSecond), with the client's address. */
  readonly calmed?: (remote: string | undefined) => void;
}

/** The HTTP/2 side: a node:http2 server that never listens, its live sessions, and their drain. */
export interface H2Side {
  readonly server: Http2Server;
  /**
   * Bounds what a REST stream's answer may hold for a client that does not read it
   * (server.h2.maxUnreadAnswerBytes per connection, server.h2.unreadAnswerMs per stream): past
   * either, `cut` is told and the stream is reset with CANCEL (its response's 'close' aborts the
   * handler's upstream call).
   */
  watchAnswer(req: Http2ServerRequest, res: Http2ServerResponse, cut: () => void): void;
  /** gRPC streams open now (the drain's deadline counts them as cut). Their answers are bounded as REST ones are. */
  grpcStreamsOpen(): number;
  /** Sends GOAWAY on every session (and on each one that starts later): streams in flight finish, no new ones. */
  goAway(): void;
  /** Destroys every session (the drain's deadline). */
  destroyAll(): void;
}

/**
 * The HTTP/2 server. `request` gets the REST streams as Node's compatibility objects. Node's
 * compatibility layer is itself a 'stream' listener, added when a 'request' listener is; it is
 * taken off here and called only for streams that are not gRPC, so a gRPC stream never gets a
 * compatibility request (which would read its DATA into a Readable nobody drains, and stall it).
 */
export function createH2Side(options: H2Options, request: (req: Http2ServerRequest, res: Http2ServerResponse) => void): H2Side {
  const { h2, head } = options;
  const server = createH2Server({
    // Every answer's body bytes counted as they are written (ingress/counted-response.ts).
    Http2ServerResponse: CountedH2Response as typeof Http2ServerResponse,
    maxSessionMemory: h2.maxSessionMemoryMb,
    // Pseudo-header fields (4) and one field more than server.maxHeaderCount, so that the
    // request's own check answers 431 for the first field past it; far more is a reset of the stream.
    maxHeaderListPairs: head.maxHeaderCount + 5,
    settings: {
      maxConcurrentStreams: h2.maxConcurrentStreams,
      initialWindowSize: h2.streamWindowBytes,
      // RFC 9113 §6.5.2: names, values and 32 octets per field. A header list past it is refused
      // by Node with RST_STREAM ENHANCE_YOUR_CALM before any handler runs; the session lives on.
      maxHeaderListSize: head.maxHeaderBytes,
      enablePush: false,
    },
  });
  // The connections come from node:http's listener, whose sockets stay half-open after the
  // client's FIN (allowHalfOpen): the session, its streams and their upstream calls would stay
  // open until the drain. An HTTP/2 connection has no half-closed state (RFC 9113 §5.1 half-closes
  // streams): the FIN ends it, as it does on node:http2's own listening server.
  server.on('connection', (socket: Socket) => { socket.allowHalfOpen = false; });
  server.on('request', request);
  const compat = server.listeners('stream') as ((...args: unknown[]) => void)[];
  server.removeAllListeners('stream');
  const sessions = new Set<ServerHttp2Session>();
  const side: SideCounts = { grpcOpen: 0 };
  let goingAway = false;

  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    const bounds = new SessionBounds(session, options, side);
    // Before the server's own listener, which emits the server's 'stream' (on Node 20 a stream the
    // client reset in the same read as its HEADERS was destroyed, its session gone, by then).
    session.prependListener('stream', (stream: ServerHttp2Stream) => bounds.opened(stream));
    if (goingAway) session.close();
  });

  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    // Set by the session's own 'stream' listener, which runs first (SessionBounds.opened).
    const bounds = (stream as BoundedStream)[BOUNDS];
    // A stream's error (a reset by the client) ends it; the request's 'close' tells the handler.
    stream.on('error', ignore);
    if (isGrpc(headers)) {
      side.grpcOpen++;
      (stream as BoundedStream)[GRPC] = true;
      // A gRPC answer's headers go out before its messages, and its trailers wait for the client's
      // window like its DATA: a client that opens none would hold the stream (and its upstream
      // call, and the drain) past any deadline. Bounded as a REST answer is; the handler tells the
      // bound of each write.
      if (options.grpc !== undefined) options.grpc(stream, headers, bounds === undefined ? UNBOUNDED : bounds.grpcBound(stream));
      else grpcUnimplemented(stream);
      return;
    }
    for (const listener of compat) listener.call(server, stream, headers, flags, rawHeaders);
  });

  return {
    server,
    watchAnswer(req, res, cut) {
      const bounds = (req.stream as BoundedStream)[BOUNDS];
      if (bounds === undefined) return;
      bounds.unread().watch(req.stream, res as CountedH2Response, () => Number(res.getHeader('content-length')), cut);
    },
    grpcStreamsOpen: () => side.grpcOpen,
    goAway() {
      goingAway = true;
      for (const s of sessions) s.close();
    },
    destroyAll() {
      for (const s of sessions) s.destroy();
    },
  };
}

/** What every session of one H2Side counts together. */
interface SideCounts {
  /** gRPC streams open (the drain's deadline counts them as cut). */
  grpcOpen: number;
}

/** A session's bounds, on each of its streams (set at the session's 'stream', cleared at close). */
const BOUNDS = Symbol('tensorgate.sessionBounds');
/** Set on a gRPC stream: its close is counted in SideCounts.grpcOpen. */
const GRPC = Symbol('tensorgate.grpcStream');
type BoundedStream = ServerHttp2Stream & { [BOUNDS]?: SessionBounds; [GRPC]?: boolean };

/**
 * Every stream's one 'close' listener (`this`: the stream): its session's count of open streams
 * and of resets, the gRPC streams' count, and its watched answer let go.
 */
function streamClosed(this: BoundedStream): void {
  const bounds = this[BOUNDS];
  if (bounds === undefined) return;
  this[BOUNDS] = undefined;
  if (this[GRPC] === true) bounds.side.grpcOpen--;
  bounds.closed(this);
}

/**
 * The bounds of one HTTP/2 session: its window, the client's SETTINGS within the headers' bound,
 * the idle timeout, the rapid-reset bound, and what its answers hold for a client that does not
 * read them (UnreadAnswers, made at the first answer watched).
 */
class SessionBounds {
  /** Streams open. */
  #streams = 0;
  /** The rapid-reset bound's second, and the client's resets in it. */
  #windowStart = 0;
  #resets = 0;
  #unread: UnreadAnswers | undefined;

  constructor(private readonly session: ServerHttp2Session, private readonly options: H2Options, readonly side: SideCounts) {
    const { h2, timeouts } = options;
    // Errors of a session end it ('close' follows); nothing to answer.
    session.on('error', ignore);
    session.setLocalWindowSize(h2.connectionWindowBytes);
    // The client's SETTINGS (part of its preface) within the headers' bound, or the connection goes.
    const settingsTimer = setTimeout(() => session.destroy(), timeouts.headersTimeoutMs);
    session.once('remoteSettings', () => clearTimeout(settingsTimer));
    session.once('close', () => clearTimeout(settingsTimer));
    // Idle: no stream open for server.keepAliveTimeoutMs, as an HTTP/1.1 keep-alive connection.
    // Node's session timeout counts frames only; a long inference sends none, so a session with
    // streams open is left alone (the timer starts again with the next frame). The listener is ours,
    // not setTimeout's callback, which Node adds with once(): after one firing with a stream open
    // nothing would ever close the session. And the wait starts again when the last stream closes,
    // since a stream can end with no frame of its own (a reset we send is not activity to Node).
    session.setTimeout(timeouts.keepAliveTimeoutMs);
    session.on('timeout', () => {
      if (this.#streams === 0) session.close();
    });
  }

  /** The session's UnreadAnswers, made when first asked for. */
  unread(): UnreadAnswers {
    return this.#unread ??= new UnreadAnswers(this.options.h2.maxUnreadAnswerBytes, this.options.h2.unreadAnswerMs);
  }

  /** A gRPC stream's answer bound: the session's UnreadAnswers, now watching it. */
  grpcBound(stream: ServerHttp2Stream): AnswerBound {
    return this.unread().grpcBound(stream);
  }

  /** A stream of the session: counted, and heard at its close by one listener shared by all (streamClosed). */
  opened(stream: BoundedStream): void {
    stream[BOUNDS] = this;
    this.#streams++;
    stream.on('close', streamClosed);
  }

  /**
   * A stream closed: its watched answer let go, the idle wait started again when it was the last,
   * and a reset by the client counted. Rapid reset (CVE-2023-44487): streams the client opens and
   * resets at once cost us their start, never a request slot. Past server.h2.maxResetsPerSecond in
   * one second the session gets GOAWAY ENHANCE_YOUR_CALM and is closed, as nghttp2 and Envoy do.
   */
  closed(stream: ServerHttp2Stream): void {
    this.#unread?.closed(stream);
    const { session, options } = this;
    this.#streams--;
    if (this.#streams === 0 && !session.closed && !session.destroyed) session.setTimeout(options.timeouts.keepAliveTimeoutMs);
    if (stream.rstCode === constants.NGHTTP2_NO_ERROR || stream.rstCode === undefined || resetHere.has(stream)) return;
    const now = performance.now();
    if (now - this.#windowStart > 1000) {
      this.#windowStart = now;
      this.#resets = 0;
    }
    const max = options.h2.maxResetsPerSecond;
    if (++this.#resets > max && !session.destroyed) {
      options.calmed?.(session.socket?.remoteAddress);
      session.destroy(new Error(`more than ${max} streams reset in one second`), constants.NGHTTP2_ENHANCE_YOUR_CALM);
    }
  }
}

/**
 * Slow readers on one HTTP/2 connection. An answer waits in the stream (Node's writable buffer and
 * nghttp2's queue) until the client's flow-control window lets it out. An answer streamed from
 * the upstream call (pipeline/binary-streamer.ts) is not held whole: the call is paused once the
 * stream's buffer is full, and holds at most what its upstream stream's window let in since
 * (upstream/connections/h2-sessions.ts); Triton's flow control holds the rest. A client that
 * opens no window (SETTINGS_INITIAL_WINDOW_SIZE 0) and never reads would keep every answer it
 * asked for — and its upstream call — for as long as it likes.
 *
 * What a stream holds for its client is counted from above: an answer built whole, its
 * Content-Length less what the client has taken (bytes written less bytes still queued), or,
 * without a Content-Length, what is queued; a streamed answer (`holdsUpstream`), what is queued
 * plus what its paused upstream call has buffered. The connection's streams together hold at
 * most `maxBytes`: after every write of a watched stream, and at every sweep (a paused call's
 * buffer fills with no write), the newest streams holding anything are cut while the sum is past
 * it — an answer built whole at its first write (the head), before the rest is written — but
 * never the last one holding anything (one answer of any size still goes out; the gateway had to
 * build it anyway). And a stream whose queued bytes have not moved for `stallMs` is cut. Sweeps
 * run every quarter of `stallMs`, at most every second. Answers are written in slices of at most
 * 64 KiB (egress/write.ts), so a client that reads, however slowly, moves them.
 */
export class UnreadAnswers implements WriteWatcher, AnswerBound {
  /** The watched answers, a list through them (../linked-list.ts); each is on its stream and writer too (WATCHED). */
  private readonly streams = new LinkedList<Watched>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly maxBytes: number, private readonly stallMs: number) {}

  /**
   * Watches `stream`, whose answer is written through `writer`: the compatibility response of a
   * REST stream, which counts its body bytes and tells its watcher of each write
   * (ingress/counted-response.ts), or the stream itself for gRPC, whose handler tells it
   * (AnswerBound); `declared`: the answer's Content-Length, if any.
   */
  watch(stream: GrpcStream, writer: Writer, declared: (() => number) | undefined, cut: () => void): void {
    const w: Watched = {
      stream, declared, upstream: undefined, writer, queued: 0, since: performance.now(), cut, linkPrev: undefined, linkNext: undefined, linked: false,
    };
    this.streams.add(w);
    (stream as Holder)[WATCHED] = w;
    (writer as Holder)[WATCHED] = w;
    if (writer instanceof CountedH2Response) writer.watcher = this;
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), this.stallMs > 0 ? Math.max(10, Math.min(1000, Math.floor(this.stallMs / 4))) : 1000);
      this.timer.unref();
    }
  }

  /** A gRPC stream's answer, watched: this is its bound (the handler tells it of each write). */
  grpcBound(stream: GrpcStream): AnswerBound {
    this.watch(stream, stream, undefined, ignore);
    return this;
  }

  /** A stream has closed: its answer, if watched, is let go. */
  closed(stream: GrpcStream): void {
    const w = (stream as Holder)[WATCHED];
    if (w !== undefined) this.unwatch(w);
  }

  /** The watched stream has closed: its answer is let go. */
  private unwatch(w: Watched): void {
    if (w.linked) this.streams.delete(w);
    const writer = w.writer;
    (w.stream as Holder)[WATCHED] = (writer as Holder)[WATCHED] = undefined;
    // The response stays until a full collection (unhook.ts): it must not keep the request's
    // record, nor this connection's table.
    w.cut = ignore;
    w.declared = w.upstream = undefined;
    if (writer instanceof CountedH2Response) writer.watcher = undefined;
    if (this.streams.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** What `stream` holds for its client, counted from above. */
  private held(w: Watched): number {
    const queued = w.stream.writableLength;
    if (w.upstream !== undefined) return queued + w.upstream.held();
    const declared = w.declared === undefined ? NaN : w.declared();
    return Number.isFinite(declared) && declared > 0 ? Math.max(queued, declared - (bodyBytesOf(w.writer) - queued)) : queued;
  }

  /** After each write of a watched answer (WriteWatcher, AnswerBound). */
  afterWrite(stream: GrpcStream): void {
    if (!stream.destroyed && (stream as Holder)[WATCHED]?.linked === true) this.shed();
  }

  /** Whether `stream` was reset here for a client that did not read its answer (AnswerBound). */
  cutOff(stream: GrpcStream): boolean {
    return cutStreams.has(stream);
  }

  /** While the streams hold more than `maxBytes`, the newest one holding anything is cut, never the last. */
  private shed(): void {
    // Summed without allocating (every write of every watched answer comes here); the list of
    // streams to cut is made only past the budget.
    let total = 0;
    for (let w = this.streams.first; w !== undefined; w = w.linkNext) total += this.held(w);
    if (total <= this.maxBytes) return;
    const holding: Watched[] = [];
    const heldBytes: number[] = [];
    for (let w = this.streams.first; w !== undefined; w = w.linkNext) {
      const held = this.held(w);
      if (held === 0) continue;
      holding.push(w);
      heldBytes.push(held);
    }
    for (let i = holding.length - 1; i > 0 && total > this.maxBytes; i--) {
      this.cut(holding[i]!);
      total -= heldBytes[i]!;
    }
  }

  private sweep(): void {
    this.shed();
    if (this.stallMs === 0) return;
    const now = performance.now();
    for (let w = this.streams.first, next; w !== undefined; w = next) {
      next = w.linkNext; // cut() takes w off the list
      const s = w.stream;
      const q = s.writableLength;
      if (q === 0 || q !== w.queued) {
        w.queued = q;
        w.since = now;
      } else if (now - w.since >= this.stallMs) {
        this.cut(w);
      }
    }
  }

  private cut(w: Watched): void {
    const { stream } = w;
    if (!w.linked || stream.destroyed) return;
    this.streams.delete(w);
    cutStreams.add(stream);
    w.cut();
    // What was queued to the client is garbage once the stream is reset: told to the reclaim, as
    // a cancelled upstream call's unread answer is (buffers/reclaim.ts letGo), else a stall that
    // held still looked quiet, was collected at its held level, and kept it as the floor.
    const queued = stream.writableLength;
    cancelStream(stream);
    if (queued > 0) letGo(queued);
  }
}

/** The streams UnreadAnswers reset (AnswerBound.cutOff). */
const cutStreams = new WeakSet<GrpcStream>();

/** A watched answer on its stream and its writer (for `holdsUpstream`). */
const WATCHED = Symbol('tensorgate.watched');
type Holder = { [WATCHED]?: Watched | undefined };

/**
 * Says that the answer written through `res` is streamed from its upstream call, which holds
 * `call.held()` bytes of it beyond what is queued to the client: counted instead of the rest of
 * its Content-Length (UnreadAnswers). Nothing on HTTP/1.1, whose answers are not watched.
 */
export function holdsUpstream(res: object, call: UpstreamHold): void {
  const w = (res as Holder)[WATCHED];
  if (w !== undefined) w.upstream = call;
}

/** A streamed answer's upstream call: the bytes of the answer it holds (pipeline/binary-streamer.ts). */
export interface UpstreamHold { held(): number }

/** What an answer is written through: a REST stream's counted response, or a gRPC stream. */
type Writer = CountedH2Response | GrpcStream;

interface Watched extends Linked<Watched> {
  readonly stream: GrpcStream;
  /** The answer's Content-Length (NaN: none). */
  declared: (() => number) | undefined;
  /** A streamed answer: what its upstream call holds (holdsUpstream). */
  upstream: UpstreamHold | undefined;
  /** The answer's body bytes written so far: `bodyBytesOf(writer)`. */
  writer: Writer;
  /** writableLength at the last sweep, and since when it has not changed. */
  queued: number;
  since: number;
  cut: () => void;
}

/** Nothing to do: a closed stream's cut, a gRPC stream's error (its 'close' tells the handler). */
function ignore(): void { /* nothing */ }
