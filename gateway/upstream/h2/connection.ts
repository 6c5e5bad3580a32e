// An HTTP/2 client connection of our own on one net.Socket (RFC 9113), for unary gRPC calls: the
// preface and SETTINGS, HEADERS (+ CONTINUATION) from a pre-built HPACK block (./hpack.ts), DATA
// cut at the peer's SETTINGS_MAX_FRAME_SIZE within both send windows, WINDOW_UPDATE for what was
// received (§6.9), PING and SETTINGS acknowledged, RST_STREAM and GOAWAY handed to the streams they
// end. A stream is one object and its handler another; the connection has no per-frame closures.
// Under the gateway's gRPC calls with upstream.http2Client: own (upstream/call/grpc-call.ts).
import { type Linked, LinkedList } from '../../linked-list';
import { StreamTable } from './stream-table';
import { connect, type Socket } from 'node:net';
import { type ConnectionOptions, connect as connectTls } from 'node:tls';
import {
  ACK, CANCEL, COMPRESSION_ERROR, INTERNAL_ERROR, CONTINUATION, DATA, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR,
  frame, FRAME_HEADER_BYTES, FRAME_SIZE_ERROR, FrameReader, type FrameSink, GOAWAY, HEADERS, MAX_MAX_FRAME_SIZE,
  MAX_WINDOW, MIN_MAX_FRAME_SIZE, NO_ERROR, PADDED, PING, PREFACE, PRIORITY, PRIORITY_FLAG, PROTOCOL_ERROR, PUSH_PROMISE,
  REFUSED_STREAM, RST_STREAM, SETTINGS, STREAM_CLOSED, SETTINGS_ENABLE_PUSH, SETTINGS_HEADER_TABLE_SIZE, SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE, WINDOW_UPDATE, writeFrameHeader,
  goawayFrame, rstStreamFrame, settingsFrame, windowUpdateFrame,
} from './frames';
import { type FieldSink, HpackDecoder } from './hpack';

/** What a stream tells its caller. After end() or closed() it says nothing more. */
export interface StreamHandler extends FieldSink {
  /** A header block was read whole (its fields came through field()); `endStream`: end() follows. */
  headers(endStream: boolean): void;
  /** A piece of the answer's DATA: a view of the connection's read buffer, valid during the call only. */
  data(chunk: Buffer, from: number, to: number): void;
  /** The peer ended the stream. */
  end(): void;
  /**
   * The stream ended without the peer ending it: reset (RST_STREAM `code`), refused by a GOAWAY, or
   * its connection failed. `processed`: false when the peer cannot have acted on it (RFC 9113 §8.7).
   */
  closed(code: number, processed: boolean, reason: string): void;
  /** The connection is up (TCP, or TLS with h2 agreed): the stream's HEADERS are on their way. */
  ready?(): void;
  /** The stream takes more (writable() was false): its DATA left within the windows, and the socket drained. */
  drain?(): void;
  /** A stream opened with `reportSent` (request()): its message's last byte went to the socket. */
  sent?(): void;
}

/** A write's report: the bytes given to it left for the socket (or never will: an error). */
export type WriteDone = (err?: Error | null) => void;

export interface H2Options {
  host: string;
  port: number;
  /** A Unix domain socket's path instead of host and port (cleartext only). */
  path?: string;
  /** Our SETTINGS_INITIAL_WINDOW_SIZE: what the peer may send of one answer ahead of our reading. */
  streamWindow?: number;
  /** Our connection window, set by a WINDOW_UPDATE after the preface. */
  connectionWindow?: number;
  /** Our SETTINGS_MAX_FRAME_SIZE. */
  maxFrameSize?: number;
  /** Our SETTINGS_HEADER_TABLE_SIZE: the peer's dynamic table for what it sends us. */
  headerTableSize?: number;
  /** Our SETTINGS_MAX_HEADER_LIST_SIZE; also bounds a header block's octets. */
  maxHeaderListSize?: number;
  /** TLS to the peer (ALPN h2): node:tls options of the connection. */
  tls?: ConnectionOptions;
}

/** A stream's empty pending lists, shared: never written to (send() gives a stream its own). */
const NO_PIECES: Buffer[] = [];
const NO_DONES: (WriteDone | undefined)[] = [];

/** One stream of the connection: its windows, and what it has still to send. */
export class H2Stream implements Linked<H2Stream> {
  /** What the peer lets us send on it (its SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATEs). */
  sendWindow: number;
  /** What it received and we have not given back yet. */
  unacked = 0;
  /**
   * A paused stream gives nothing back: the peer stops once it has sent a window's worth, and the
   * rest waits in its flow control (the connection's window is given back all the same, so the
   * other streams go on). resume() gives back what was held.
   */
  paused = false;
  /** Its window left for the peer. */
  recvWindow: number;
  /** DATA waiting for a window (NO_PIECES, shared, until a piece waits: most calls send whole). */
  pending: Buffer[] = NO_PIECES;
  /** The report of each pending buffer's write, told once its last byte went to the socket. */
  pendingDone: (WriteDone | undefined)[] = NO_DONES;
  /** The offset sent of pending[0]. */
  pendingAt = 0;
  /** Octets of pending not sent yet. */
  queued = 0;
  /** Its DATA is framed when this turn's batch is written (H2Connection's #deferred): what a turn brings, gathered. */
  deferred = false;
  endPending = false;
  endDone: WriteDone | undefined;
  /** Its handler waits for drain(). */
  wantsDrain = false;
  /** DATA of it waits for a window: its links in the connection's list of such streams (linked: it is in it). */
  linkPrev: H2Stream | undefined;
  linkNext: H2Stream | undefined;
  linked = false;
  /** Its END_STREAM is out, and the peer's has come. */
  localEnded = false;
  remoteEnded = false;
  /** Its handler hears sent() (request()'s `reportSent`) once its last write is the socket's. */
  reportsSent = false;
  /** The next stream whose last write the socket is to report (H2Connection's #sentFirst). */
  sentNext: H2Stream | undefined;

  constructor(readonly id: number, readonly handler: StreamHandler, sendWindow: number, recvWindow: number) {
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }
}

/**
 * The largest message request() copies behind its HEADERS into one buffer; a larger one is written by
 * reference (a copy of 600 KB into a fresh buffer cost more than it saved, bench/h2-call.js).
 */
const COPY_BYTES = 16 * 1024;
/** The connection's read buffer. */
const READ_BYTES = 64 * 1024;
/**
 * What the socket may queue (by reference) before a stream is told to wait (writable()): at the
 * streams' default (64 KiB since Node 22), a relayed or cut-through upload went upstream one 64 KiB read
 * per turn of the event loop, each its own writev (a 600 KB gRPC pass-through call: ten writevs over
 * ~0.6 ms at c=1); at 1 MiB what a turn read goes out in one.
 */
const WRITE_HIGH_WATER = 1024 * 1024;
const NOTHING: FieldSink = { field: () => undefined };
const DEFAULT_WINDOW = 65535;

function totalBytes(pieces: readonly Buffer[]): number {
  let n = 0;
  for (let i = 0; i < pieces.length; i++) n += pieces[i]!.length;
  return n;
}

export class H2Connection implements FrameSink {
  readonly socket: Socket;
  readonly #streams = new StreamTable<H2Stream>();
  /** Streams with DATA waiting for a window, in the order they began to wait (a list through them). */
  readonly #blocked = new LinkedList<H2Stream>();
  /** Streams sent DATA this turn, framed when the batch is written (#flushBatch); and the list for the next. */
  #deferred: H2Stream[] = [];
  #deferredSpare: H2Stream[] = [];
  /** How many streams wait for drain() (H2Stream.wantsDrain). */
  #waiting = 0;
  readonly #reader = new FrameReader(this);
  readonly #hpack: HpackDecoder;
  readonly #streamWindow: number;
  readonly #connectionWindow: number;
  readonly #maxFrameSize: number;
  readonly #maxHeaderList: number;
  #nextId = 1;
  /** The peer's settings (RFC 9113 §6.5.2 defaults until its SETTINGS come). */
  #peerWindow = DEFAULT_WINDOW;
  #peerMaxFrame = MIN_MAX_FRAME_SIZE;
  #peerMaxStreams = Infinity;
  #sendWindow = DEFAULT_WINDOW;
  #recvWindow = DEFAULT_WINDOW;
  #unacked = 0;
  #settingsSeen = false;
  /** The frame being read: its header, and the DATA state (padding). */
  #type = 0;
  #flags = 0;
  #stream = 0;
  #length = 0;
  #dataStream: H2Stream | undefined;
  #padLength = -1;
  #dataLeft = 0;
  /** A header block being gathered (HEADERS then CONTINUATION) and its stream. */
  #block: Buffer[] | undefined;
  #blockBytes = 0;
  #blockStream = 0;
  #blockEnd = false;
  #goaway = false;
  #error: string | undefined;
  readonly #readBuffer = Buffer.allocUnsafeSlow(READ_BYTES);
  /**
   * The streams whose last write went to the socket with #onSent, in that order, first to last:
   * the socket reports writes in the order they were made (node:stream Writable), so one shared
   * callback serves every stream — no callback made per call, and one tick for the writes of a turn.
   */
  #sentFirst: H2Stream | undefined;
  #sentLast: H2Stream | undefined;
  readonly #onSent = (err?: Error | null): void => {
    const s = this.#sentFirst;
    if (s === undefined) return;
    this.#sentFirst = s.sentNext;
    if (this.#sentFirst === undefined) this.#sentLast = undefined;
    s.sentNext = undefined;
    // A stream closed meanwhile (its connection destroyed: the write in flight still completes) hears nothing more.
    if (err == null && this.#streams.get(s.id) === s) s.handler.sent?.();
  };

  /** What one read makes us write (acks, window updates, DATA the windows let go) leaves in one writev. */
  readonly #onRead = (n: number): boolean => {
    this.socket.cork();
    this.#reader.push(this.#readBuffer, n);
    this.socket.uncork();
    return true;
  };

  /** The peer's port, as asked for (the socket's remotePort is unset until it connects). */
  readonly port: number;

  /**
   * The calls one turn of the event loop starts or writes to (each client request read in it) go
   * out in one writev: the socket is corked at the first and uncorked once the turn's I/O
   * callbacks have run (setImmediate), as nghttp2 under node:http2 sends a session's frames once
   * per turn. At c=8 a turn started ~6 calls, each its own write before.
   */
  #batched = false;
  readonly #flushBatch = (): void => {
    this.#batched = false;
    const streams = this.#deferred;
    if (streams.length > 0) {
      // A stream flushed may be sent more from its drain(): it goes in the other list, for the next batch.
      this.#deferred = this.#deferredSpare;
      this.#deferredSpare = streams;
      for (let i = 0; i < streams.length; i++) {
        const s = streams[i]!;
        s.deferred = false;
        if (this.#streams.get(s.id) === s) this.#flush(s);
      }
      streams.length = 0;
    }
    this.socket.uncork();
  };

  #batch(): void {
    if (this.#batched) return;
    this.#batched = true;
    this.socket.cork();
    setImmediate(this.#flushBatch);
  }

  constructor(options: H2Options) {
    this.port = options.port;
    this.#streamWindow = options.streamWindow ?? 1024 * 1024;
    this.#connectionWindow = options.connectionWindow ?? 32 * 1024 * 1024;
    this.#maxFrameSize = options.maxFrameSize ?? 1024 * 1024;
    this.#maxHeaderList = options.maxHeaderListSize ?? 64 * 1024;
    this.#hpack = new HpackDecoder(options.headerTableSize ?? 4096);
    // Reads land in one buffer of the connection's (onread): no Buffer per read. What a handler
    // keeps of a DATA piece it copies. node:tls has no onread: its reads come as 'data'.
    if (options.tls === undefined) {
      // net.Socket hands its options to stream.Duplex, which takes writableHighWaterMark (@types/node's
      // NetConnectOpts does not list it).
      const socketOptions = {
        ...(options.path === undefined ? { host: options.host, port: options.port, noDelay: true } : { path: options.path }),
        writableHighWaterMark: WRITE_HIGH_WATER, onread: { buffer: this.#readBuffer, callback: this.#onRead },
      };
      this.socket = connect(socketOptions);
      this.socket.once('connect', () => this.#up());
    } else {
      // tls.connect does not hand writableHighWaterMark on: over TLS its own default (64 KiB) stands.
      this.socket = connectTls({ host: options.host, port: options.port, ...options.tls, ALPNProtocols: ['h2'] });
      this.socket.setNoDelay(true);
      this.socket.once('secureConnect', () => this.#up());
      this.socket.on('data', (c: Buffer) => {
        this.socket.cork();
        this.#reader.push(c);
        this.socket.uncork();
      });
    }
    this.socket.on('error', (err) => {
      this.lastError ??= err;
      this.#lost(`connection error: ${err.message}`);
    });
    this.socket.on('close', () => this.#lost('connection closed'));
    this.socket.on('drain', () => this.#drained());
    this.socket.write(Buffer.concat([PREFACE, this.#settingsFrame(), this.#connectionWindowUpdate()]));
  }

  /** The socket's first error (a TLS handshake's says why), if any. */
  lastError: Error | undefined;
  #connected = false;

  /** The connection is up: its streams' HEADERS go out (a stream opened now is at once). */
  get connected(): boolean {
    return this.#connected;
  }

  /** Up over TLS, and the peer has sent nothing yet (no SETTINGS): a close now is its refusal. */
  get handshakeOnly(): boolean {
    return this.#connected && !this.#settingsSeen;
  }

  #up(): void {
    this.#connected = true;
    // In id order: a stream's HEADERS may not follow a higher one's (RFC 9113 §5.1.1).
    for (const s of this.#streams.values().sort(byId)) s.handler.ready?.();
  }

  /**
   * Whether a stream opened now stays within the peer's SETTINGS_MAX_CONCURRENT_STREAMS, or `limit`
   * while its SETTINGS have not come (what another connection to the same server was told).
   */
  hasRoom(limit = Infinity): boolean {
    const max = this.#settingsSeen ? this.#peerMaxStreams : limit;
    return this.unusable === undefined && this.#streams.size < max && this.#nextId <= MAX_WINDOW;
  }

  /** The peer's SETTINGS_MAX_CONCURRENT_STREAMS, once its SETTINGS came (Infinity until then, or none sent). */
  get maxStreams(): number {
    return this.#settingsSeen ? this.#peerMaxStreams : Infinity;
  }

  /**
   * Whether `s` takes more DATA now: nothing of it waits for a window, less than WRITE_HIGH_WATER of
   * it waits for this turn's batch, and the socket has room.
   */
  writable(s: H2Stream): boolean {
    return !s.linked && s.queued < WRITE_HIGH_WATER && !this.socket.writableNeedDrain;
  }

  /** `s`'s handler hears drain() once it takes more (at once, next tick, when it does now). */
  whenWritable(s: H2Stream): void {
    if (!s.wantsDrain) {
      s.wantsDrain = true;
      this.#waiting++;
    }
    if (this.writable(s)) process.nextTick(this.#drainTick, s);
  }

  readonly #drainTick = (s: H2Stream): void => this.#drainOne(s);

  #drainOne(s: H2Stream): void {
    if (!s.wantsDrain || !this.writable(s)) return;
    s.wantsDrain = false;
    this.#waiting--;
    s.handler.drain?.();
  }

  /** The socket drained: the streams waiting for it hear drain() (a copy: a handler may wait again). */
  #drained(): void {
    if (this.#waiting === 0) return;
    for (const s of this.#streams.values()) if (s.wantsDrain && this.#streams.get(s.id) === s) this.#drainOne(s);
  }

  #settingsFrame(): Buffer {
    return settingsFrame([
      [SETTINGS_HEADER_TABLE_SIZE, this.#hpack.limit], [SETTINGS_ENABLE_PUSH, 0],
      [SETTINGS_INITIAL_WINDOW_SIZE, this.#streamWindow], [SETTINGS_MAX_FRAME_SIZE, this.#maxFrameSize],
      [SETTINGS_MAX_HEADER_LIST_SIZE, this.#maxHeaderList],
    ]);
  }

  #connectionWindowUpdate(): Buffer {
    this.#recvWindow = this.#connectionWindow;
    return windowUpdateFrame(0, this.#connectionWindow - DEFAULT_WINDOW);
  }

  /** Why no stream can open any more (GOAWAY, a connection error, closed), or undefined. */
  get unusable(): string | undefined {
    return this.#error ?? (this.#goaway ? 'the server sent GOAWAY' : undefined);
  }

  get activeStreams(): number {
    return this.#streams.size;
  }

  /**
   * Opens a stream: HEADERS from `block` (an HPACK block, ./hpack.ts headerBlock), then `body` as DATA
   * (one buffer, or pieces in order) with END_STREAM when `end`, as far as the windows let it (the
   * rest goes as they open). Throws when the connection cannot take a stream (unusable, or at the
   * peer's SETTINGS_MAX_CONCURRENT_STREAMS). `reportSent` (with `end`): the handler hears sent()
   * once the stream's last byte went to the socket.
   */
  request(block: Buffer, handler: StreamHandler, body: Buffer | readonly Buffer[] | undefined, end: boolean, reportSent = false): H2Stream {
    const why = this.unusable ?? (this.#streams.size >= this.#peerMaxStreams ? 'at the server\'s concurrent stream limit'
      : this.#nextId > MAX_WINDOW ? 'stream ids used up' : undefined);
    if (why !== undefined) throw new Error(why);
    this.#batch();
    const s = new H2Stream(this.#nextId, handler, this.#peerWindow, this.#streamWindow);
    this.#nextId += 2;
    this.#streams.add(s);
    s.reportsSent = reportSent && end;
    const bytes = body === undefined ? 0 : Buffer.isBuffer(body) ? body.length : totalBytes(body);
    if (body !== undefined && end && bytes <= COPY_BYTES && block.length + bytes <= this.#peerMaxFrame
      && bytes <= s.sendWindow && bytes <= this.#sendWindow) {
      // HEADERS and a small message copied into one buffer: one socket write, one Buffer.
      const out = Buffer.allocUnsafe(2 * FRAME_HEADER_BYTES + block.length + bytes);
      let at = writeFrameHeader(out, 0, block.length, HEADERS, END_HEADERS, s.id);
      // TypedArray's set: Buffer's copy() is a call into C++, dearer than these few bytes.
      out.set(block, at);
      at = writeFrameHeader(out, at + block.length, bytes, DATA, END_STREAM, s.id);
      if (Buffer.isBuffer(body)) out.set(body, at);
      else {
        for (let i = 0; i < body.length; i++) {
          out.set(body[i]!, at);
          at += body[i]!.length;
        }
      }
      s.sendWindow -= bytes;
      this.#sendWindow -= bytes;
      s.localEnded = true;
      this.socket.write(out, this.#sentBy(s));
      return s;
    }
    this.socket.cork();
    this.#writeHeaders(s, block, body === undefined && end);
    if (body === undefined || Buffer.isBuffer(body)) {
      if (body !== undefined || end) this.send(s, body, end);
    } else {
      const last = body.length - 1;
      for (let i = 0; i < last; i++) this.send(s, body[i], false);
      this.send(s, body[last], end);
    }
    this.socket.uncork();
    return s;
  }

  /** The callback of `s`'s last write: #onSent when it reports it (the stream queued for it), else none. */
  #sentBy(s: H2Stream): WriteDone | undefined {
    if (!s.reportsSent) return undefined;
    s.reportsSent = false;
    if (this.#sentLast === undefined) this.#sentFirst = s;
    else this.#sentLast.sentNext = s;
    this.#sentLast = s;
    return this.#onSent;
  }

  #writeHeaders(s: H2Stream, block: Buffer, endStream: boolean): void {
    const max = this.#peerMaxFrame;
    let at = 0;
    do {
      const n = Math.min(max, block.length - at);
      const last = at + n === block.length;
      const type = at === 0 ? HEADERS : CONTINUATION;
      const flags = (last ? END_HEADERS : 0) | (type === HEADERS && endStream ? END_STREAM : 0);
      this.socket.write(frame(type, flags, s.id, block.subarray(at, at + n)), last && endStream ? this.#sentBy(s) : undefined);
      at += n;
    } while (at < block.length);
    if (endStream) s.localEnded = true;
  }

  /** Queues DATA on a stream (by reference until copied into a batch) and sends what the windows let. */
  send(s: H2Stream, chunk: Buffer | undefined, end: boolean, done?: WriteDone): void {
    if (s.localEnded || s.endPending || this.#streams.get(s.id) !== s) {
      if (done !== undefined) process.nextTick(done, new Error('the stream is closed'));
      return;
    }
    this.#batch();
    if (chunk !== undefined && chunk.length > 0) {
      if (s.pending === NO_PIECES) {
        s.pending = [];
        s.pendingDone = [];
      }
      s.pending.push(chunk);
      s.pendingDone.push(done);
      s.queued += chunk.length;
    } else if (done !== undefined) {
      if (!end) process.nextTick(done);
      else s.endDone = done;
    }
    if (end) s.endPending = true;
    // Framed with the batch (#flushBatch): the pieces one turn brings (a relayed upload's DATA
    // frames, 16 KiB each from most clients) go upstream as one DATA frame as the windows let.
    if (!s.deferred && !s.linked) {
      s.deferred = true;
      this.#deferred.push(s);
    }
  }

  /**
   * Sends what the windows let of a stream's DATA, in frames cut at the peer's
   * SETTINGS_MAX_FRAME_SIZE (16 KiB unless it says more; Triton says 4 MiB), each a 9-octet header
   * and views of the caller's buffers: copying them into one buffer per flush cost more (fresh
   * large buffers fault their pages in: 600 KB calls took 0.9–1.1 ms of CPU against 0.55–0.64 ms by
   * reference, bench/h2-call.js). One frame takes as many of the pending buffers as it may.
   */
  #flush(s: H2Stream): void {
    while (s.queued > 0) {
      const n = Math.min(s.queued, s.sendWindow, this.#sendWindow, this.#peerMaxFrame);
      if (n <= 0) {
        if (!s.linked) this.#blocked.add(s);
        return;
      }
      const last = s.endPending && n === s.queued;
      const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeFrameHeader(h, 0, n, DATA, last ? END_STREAM : 0, s.id);
      this.socket.write(h);
      s.sendWindow -= n;
      this.#sendWindow -= n;
      s.queued -= n;
      for (let left = n; left > 0;) {
        const head = s.pending[0]!;
        const k = Math.min(head.length - s.pendingAt, left);
        s.pendingAt += k;
        left -= k;
        const whole = s.pendingAt === head.length;
        const done = whole ? s.pendingDone[0] : undefined;
        this.socket.write(head.subarray(s.pendingAt - k, s.pendingAt), last && left === 0 ? this.#sentBy(s) ?? done : done);
        if (whole) {
          s.pending.shift();
          s.pendingDone.shift();
          s.pendingAt = 0;
        }
      }
      if (last) this.#localEnd(s, undefined);
    }
    this.#blocked.delete(s);
    if (s.endPending && !s.localEnded) this.#localEnd(s, frame(DATA, END_STREAM, s.id));
    if (s.wantsDrain) this.#drainOne(s);
  }

  /** The stream's END_STREAM is out (`out`: its frame, when not written yet); the end's report follows it. */
  #localEnd(s: H2Stream, out: Buffer | undefined): void {
    s.localEnded = true;
    const done = s.endDone;
    s.endDone = undefined;
    if (out !== undefined) this.socket.write(out, this.#sentBy(s) ?? done);
    else if (done !== undefined) this.socket.write(EMPTY, done);
  }

  /** Ends a stream from our side: RST_STREAM `code` (CANCEL by default); its handler hears nothing more. */
  reset(s: H2Stream, code = CANCEL): void {
    if (this.#streams.get(s.id) !== s) return;
    this.#forget(s);
    if (this.#error === undefined) this.socket.write(rstStreamFrame(s.id, code));
  }

  #forget(s: H2Stream): void {
    this.#streams.delete(s);
    this.#blocked.delete(s);
    if (s.wantsDrain) {
      s.wantsDrain = false;
      this.#waiting--;
    }
    unsent(s);
    if (this.#goaway && this.#streams.size === 0) this.socket.end();
  }

  /** GOAWAY NO_ERROR: no new streams; the socket ends once the open ones are done. */
  close(): void {
    if (this.#error !== undefined || this.#goaway) return;
    this.#goaway = true;
    this.socket.write(this.#goawayFrame(NO_ERROR));
    if (this.#streams.size === 0) this.socket.end();
  }

  /** Closes at once: every open stream hears closed(CANCEL). */
  destroy(reason = 'connection destroyed'): void {
    this.#fail(CANCEL, reason, false);
  }

  /** GOAWAY `code`; its last stream id 0: we accept no streams from the server. */
  #goawayFrame(code: number): Buffer {
    return goawayFrame(0, code);
  }

  /** A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, the socket closed, every stream told. */
  #connectionError(code: number, reason: string): boolean {
    this.#fail(code, `connection error: ${reason}`, true);
    return false;
  }

  #fail(code: number, reason: string, goaway: boolean): void {
    if (this.#error !== undefined) return;
    this.#error = reason;
    if (goaway) this.socket.end(this.#goawayFrame(code));
    this.socket.destroySoon();
    const streams = this.#streams.values();
    this.#streams.clear();
    this.#waiting = 0;
    for (const s of streams) {
      this.#blocked.delete(s);
      s.wantsDrain = false;
      unsent(s);
      s.handler.closed(code, true, reason);
    }
  }

  #lost(reason: string): void {
    this.#fail(INTERNAL_ERROR, reason, false);
  }

  // ---- reading (FrameSink)

  frameStart(length: number, type: number, flags: number, stream: number): boolean {
    if (length > this.#maxFrameSize) return this.#connectionError(FRAME_SIZE_ERROR, `a ${length}-octet frame (SETTINGS_MAX_FRAME_SIZE ${this.#maxFrameSize})`);
    if (!this.#settingsSeen && type !== SETTINGS) return this.#connectionError(PROTOCOL_ERROR, 'the server\'s preface is not SETTINGS');
    if (this.#block !== undefined && (type !== CONTINUATION || stream !== this.#blockStream)) {
      return this.#connectionError(PROTOCOL_ERROR, 'a frame inside a header block');
    }
    this.#type = type;
    this.#flags = flags;
    this.#stream = stream;
    this.#length = length;
    return type === DATA ? this.#dataStart() : true;
  }

  frameEnd(payload: Buffer | undefined): boolean {
    const p = payload ?? EMPTY;
    switch (this.#type) {
      case DATA: return this.#dataEnd();
      case HEADERS: return this.#headersFrame(p);
      case CONTINUATION: return this.#continuation(p);
      case PRIORITY: return this.#priority();
      case RST_STREAM: return this.#rstStream(p);
      case SETTINGS: return this.#settings(p);
      case PUSH_PROMISE: return this.#connectionError(PROTOCOL_ERROR, 'PUSH_PROMISE with push disabled');
      case PING: return this.#ping(p);
      case GOAWAY: return this.#goawayFrom(p);
      case WINDOW_UPDATE: return this.#windowUpdate(p);
      default: return true; // unknown types are ignored (RFC 9113 §5.5)
    }
  }

  #dataStart(): boolean {
    const id = this.#stream;
    if (id === 0) return this.#connectionError(PROTOCOL_ERROR, 'DATA on stream 0');
    if (id >= this.#nextId || (id & 1) === 0) return this.#connectionError(PROTOCOL_ERROR, `DATA on idle stream ${id}`);
    const n = this.#length;
    // Flow control counts the whole payload, padding included (RFC 9113 §6.9.1).
    this.#recvWindow -= n;
    if (this.#recvWindow < 0) return this.#connectionError(FLOW_CONTROL_ERROR, 'DATA past the connection window');
    this.#unacked += n;
    if (this.#unacked >= this.#connectionWindow / 2) {
      this.socket.write(windowUpdateFrame(0, this.#unacked));
      this.#recvWindow += this.#unacked;
      this.#unacked = 0;
    }
    this.#padLength = (this.#flags & PADDED) !== 0 ? -1 : 0;
    this.#dataLeft = (this.#flags & PADDED) !== 0 ? -1 : n;
    const s = this.#streams.get(id);
    this.#dataStream = s;
    if (s === undefined) return true; // a stream we reset: its DATA is dropped
    if (s.remoteEnded) return this.#streamError(s, STREAM_CLOSED, 'DATA after END_STREAM');
    s.recvWindow -= n;
    if (s.recvWindow < 0) return this.#streamError(s, FLOW_CONTROL_ERROR, 'DATA past the stream window');
    s.unacked += n;
    this.#giveBack(s);
    return true;
  }

  /** Gives back a stream's window (RFC 9113 §6.9) once half of it was taken, unless it is paused. */
  #giveBack(s: H2Stream): void {
    if (s.paused || s.unacked < this.#streamWindow / 2) return;
    this.socket.write(windowUpdateFrame(s.id, s.unacked));
    s.recvWindow += s.unacked;
    s.unacked = 0;
  }

  /** Holds a stream's window: the peer may send what is left of it, then waits. */
  pause(s: H2Stream): void {
    s.paused = true;
  }

  resume(s: H2Stream): void {
    s.paused = false;
    if (this.#streams.get(s.id) === s && this.#error === undefined) this.#giveBack(s);
  }

  dataPiece(chunk: Buffer, from: number, to: number): void {
    if (this.#dataLeft < 0) { // PADDED: the first octet is the padding's length
      this.#padLength = chunk[from++]!;
      this.#dataLeft = this.#length - 1 - this.#padLength;
      if (this.#dataLeft < 0) {
        this.#connectionError(PROTOCOL_ERROR, 'padding longer than the frame');
        return;
      }
    }
    const n = Math.min(this.#dataLeft, to - from);
    this.#dataLeft -= n;
    if (n > 0 && this.#dataStream !== undefined && this.#streams.get(this.#stream) !== undefined) this.#dataStream.handler.data(chunk, from, from + n);
  }

  #dataEnd(): boolean {
    if (this.#dataLeft < 0) return this.#connectionError(PROTOCOL_ERROR, 'a PADDED DATA frame without its padding length');
    const s = this.#dataStream;
    this.#dataStream = undefined;
    if (s !== undefined && (this.#flags & END_STREAM) !== 0 && this.#streams.get(s.id) === s) this.#remoteEnd(s);
    return this.#error === undefined;
  }

  #remoteEnd(s: H2Stream): void {
    s.remoteEnded = true;
    // DATA waiting only for this turn's batch is framed now, as it was sent before the answer ended.
    if (s.deferred && !s.linked) this.#flush(s);
    // The answer is whole: what we had still to send of the request is not needed (RFC 9113 §8.1).
    if (!s.localEnded) {
      this.#forget(s);
      this.socket.write(rstStreamFrame(s.id, CANCEL));
    } else {
      this.#forget(s);
    }
    s.handler.end();
  }

  #streamError(s: H2Stream, code: number, reason: string): boolean {
    this.reset(s, code);
    s.handler.closed(code, true, reason);
    return true;
  }

  #headersFrame(p: Buffer): boolean {
    const id = this.#stream;
    if (id === 0 || (id & 1) === 0 || id >= this.#nextId) return this.#connectionError(PROTOCOL_ERROR, `HEADERS on stream ${id}`);
    let from = 0;
    let to = p.length;
    if (this.#flags & PADDED) {
      if (p.length < 1) return this.#connectionError(FRAME_SIZE_ERROR, 'HEADERS too short for its padding');
      to -= p[0]!;
      from = 1;
    }
    if (this.#flags & PRIORITY_FLAG) from += 5;
    if (from > to) return this.#connectionError(PROTOCOL_ERROR, 'HEADERS padding longer than the frame');
    this.#blockStream = id;
    this.#blockEnd = (this.#flags & END_STREAM) !== 0;
    const block = from === 0 && to === p.length ? p : p.subarray(from, to);
    if ((this.#flags & END_HEADERS) !== 0) {
      // The whole block in one frame (an answer's headers and trailers are): decoded as it lies.
      if (block.length > this.#maxHeaderList) return this.#connectionError(ENHANCE_YOUR_CALM, `a header block over ${this.#maxHeaderList} octets`);
      return this.#headerBlock(block);
    }
    this.#block = [];
    this.#blockBytes = 0;
    return this.#fragment(block);
  }

  #continuation(p: Buffer): boolean {
    if (this.#block === undefined) return this.#connectionError(PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
    return this.#fragment(p);
  }

  /** A piece of a header block; the whole block is decoded at END_HEADERS. */
  #fragment(p: Buffer): boolean {
    this.#blockBytes += p.length;
    if (this.#blockBytes > this.#maxHeaderList) {
      return this.#connectionError(ENHANCE_YOUR_CALM, `a header block over ${this.#maxHeaderList} octets`);
    }
    // A view of the read: copied when the block continues (the read's buffer is not ours to keep).
    this.#block!.push((this.#flags & END_HEADERS) !== 0 && this.#block!.length === 0 ? p : Buffer.from(p));
    if ((this.#flags & END_HEADERS) === 0) return true;
    const block = this.#block!.length === 1 ? this.#block![0]! : Buffer.concat(this.#block!);
    this.#block = undefined;
    return this.#headerBlock(block);
  }

  #headerBlock(block: Buffer): boolean {
    const s = this.#streams.get(this.#blockStream);
    // Decoded whatever became of the stream: the dynamic table must follow the peer's.
    const result = this.#hpack.decode(block, s?.handler ?? NOTHING, this.#maxHeaderList);
    if (result === 'compression') return this.#connectionError(COMPRESSION_ERROR, 'a malformed header block');
    if (s === undefined) return true;
    if (result === 'too large') return this.#streamError(s, ENHANCE_YOUR_CALM, `a header list over ${this.#maxHeaderList} octets`);
    if (s.remoteEnded) return this.#streamError(s, STREAM_CLOSED, 'HEADERS after END_STREAM');
    s.handler.headers(this.#blockEnd);
    if (this.#blockEnd && this.#streams.get(s.id) === s) this.#remoteEnd(s);
    return this.#error === undefined;
  }

  #priority(): boolean {
    if (this.#stream === 0) return this.#connectionError(PROTOCOL_ERROR, 'PRIORITY on stream 0');
    const s = this.#streams.get(this.#stream);
    if (this.#length !== 5 && s !== undefined) return this.#streamError(s, FRAME_SIZE_ERROR, 'PRIORITY of a wrong length');
    return true;
  }

  #rstStream(p: Buffer): boolean {
    if (this.#stream === 0 || this.#stream >= this.#nextId) return this.#connectionError(PROTOCOL_ERROR, `RST_STREAM on stream ${this.#stream}`);
    if (p.length !== 4) return this.#connectionError(FRAME_SIZE_ERROR, 'RST_STREAM of a wrong length');
    const s = this.#streams.get(this.#stream);
    if (s === undefined) return true;
    this.#forget(s);
    const code = p.readUInt32BE(0);
    // REFUSED_STREAM: no application processing happened (RFC 9113 §8.7).
    s.handler.closed(code, code !== REFUSED_STREAM, `stream reset by the server (code ${code})`);
    return this.#error === undefined;
  }

  #settings(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (this.#flags & ACK) return p.length === 0 || this.#connectionError(FRAME_SIZE_ERROR, 'a SETTINGS ACK with a payload');
    if (p.length % 6 !== 0) return this.#connectionError(FRAME_SIZE_ERROR, 'SETTINGS of a wrong length');
    for (let at = 0; at < p.length; at += 6) {
      if (!this.#setting(p.readUInt16BE(at), p.readUInt32BE(at + 2))) return false;
    }
    this.#settingsSeen = true;
    this.socket.write(frame(SETTINGS, ACK, 0));
    this.#flushAll();
    return this.#error === undefined;
  }

  #setting(id: number, v: number): boolean {
    switch (id) {
      case SETTINGS_MAX_CONCURRENT_STREAMS: this.#peerMaxStreams = v; return true;
      case SETTINGS_INITIAL_WINDOW_SIZE: {
        if (v > MAX_WINDOW) return this.#connectionError(FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1');
        const delta = v - this.#peerWindow; // applies to every open stream (RFC 9113 §6.9.2)
        this.#peerWindow = v;
        for (const s of this.#streams.values()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW) return this.#connectionError(FLOW_CONTROL_ERROR, 'a stream window over 2^31-1');
        }
        return true;
      }
      case SETTINGS_MAX_FRAME_SIZE:
        if (v < MIN_MAX_FRAME_SIZE || v > MAX_MAX_FRAME_SIZE) return this.#connectionError(PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${v}`);
        this.#peerMaxFrame = v;
        return true;
      case SETTINGS_ENABLE_PUSH:
        return v <= 1 || this.#connectionError(PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${v}`);
      default: return true; // HEADER_TABLE_SIZE (we never index), MAX_HEADER_LIST_SIZE (advisory), unknown ones
    }
  }

  #ping(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'PING on a stream');
    if (p.length !== 8) return this.#connectionError(FRAME_SIZE_ERROR, 'PING of a wrong length');
    if ((this.#flags & ACK) === 0) this.socket.write(frame(PING, ACK, 0, p));
    return true;
  }

  #goawayFrom(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (p.length < 8) return this.#connectionError(FRAME_SIZE_ERROR, 'GOAWAY too short');
    const last = p.readUInt32BE(0) & MAX_WINDOW;
    const code = p.readUInt32BE(4);
    this.#goaway = true;
    // Streams above the last one the server processes were not acted on: another connection may take them.
    for (const s of this.#streams.values()) {
      if (s.id <= last) continue;
      this.#forget(s);
      s.handler.closed(REFUSED_STREAM, false, `refused by the server's GOAWAY (code ${code})`);
    }
    if (this.#streams.size === 0) this.socket.end();
    return this.#error === undefined;
  }

  #windowUpdate(p: Buffer): boolean {
    if (p.length !== 4) return this.#connectionError(FRAME_SIZE_ERROR, 'WINDOW_UPDATE of a wrong length');
    const inc = p.readUInt32BE(0) & MAX_WINDOW;
    if (this.#stream === 0) {
      if (inc === 0) return this.#connectionError(PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
      this.#sendWindow += inc;
      if (this.#sendWindow > MAX_WINDOW) return this.#connectionError(FLOW_CONTROL_ERROR, 'the connection window over 2^31-1');
      this.#flushAll();
      return this.#error === undefined;
    }
    const s = this.#streams.get(this.#stream);
    if (s === undefined) return true;
    if (inc === 0) return this.#streamError(s, PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return this.#streamError(s, FLOW_CONTROL_ERROR, 'a stream window over 2^31-1');
    if (s.linked) this.#flush(s);
    return true;
  }

  #flushAll(): void {
    // In the order they began to wait; one flushed may end another (it leaves the list then).
    for (let s = this.#blocked.first, next; s !== undefined; s = next) {
      next = s.linkNext;
      this.#flush(s);
      if (next !== undefined && !next.linked) next = this.#blocked.first;
    }
  }
}

const EMPTY = Buffer.alloc(0);

const byId = (a: H2Stream, b: H2Stream): number => a.id - b.id;

/** What a stream had still to send never will be: each waiting write hears so. */
function unsent(s: H2Stream): void {
  const dones = s.pendingDone;
  const end = s.endDone;
  s.pending = NO_PIECES;
  s.pendingDone = NO_DONES;
  s.queued = 0;
  s.endDone = undefined;
  if (dones.length === 0 && end === undefined) return;
  const err = new Error('the stream closed before its DATA was sent');
  for (const d of dones) if (d !== undefined) process.nextTick(d, err);
  if (end !== undefined) process.nextTick(end, err);
}

export { CANCEL, NO_ERROR, REFUSED_STREAM };
