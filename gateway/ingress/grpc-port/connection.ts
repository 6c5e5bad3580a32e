// The server side of an HTTP/2 connection of our own (RFC 9113), for the gRPC port: the client's
// preface and SETTINGS, HEADERS (+ CONTINUATION) decoded by ../../upstream/h2/hpack.ts into a
// request's header object, DATA handed to the stream's 'data' listeners as views of the socket's
// reads, answers framed here (HEADERS from an HPACK block that never indexes, DATA cut at the
// client's SETTINGS_MAX_FRAME_SIZE within both its windows, trailers), WINDOW_UPDATE for what was
// read (§6.9), PING and SETTINGS acknowledged, RST_STREAM and GOAWAY both ways. It is the framing
// the client side already has (../../upstream/h2/connection.ts), turned around; node:http2's
// server costs ~60 % of a pass-through call's CPU (docs/architecture.md, "The gRPC port"). Frames
// on streams no longer open, PRIORITY's form and a request's trailers are checked as RFC 9113 says
// (§5.1, §6.1, §5.3.1, §6.3, §8.1); h2spec's suite passes whole (test/interop/h2spec.test.ts).
//
// Its stream (ServerStream) speaks the part of node:http2's ServerHttp2Stream the gRPC pass-through
// uses (ingress/h2.ts GrpcStream): respond, write, end, sendTrailers on 'wantTrailers', close,
// pause/resume, and the events 'data', 'end', 'drain', 'wantTrailers' and 'close'. A stream is one
// object; the connection has no closure per stream or frame.
//
// Bounds, each the node:http2 side's (ingress/h2.ts), so the two ports refuse alike:
// - SETTINGS_MAX_CONCURRENT_STREAMS (server.h2.maxConcurrentStreams): a stream past it is refused
//   with RST_STREAM REFUSED_STREAM, which clients retry;
// - SETTINGS_MAX_HEADER_LIST_SIZE (server.maxHeaderBytes): a header list past it, or more than
//   server.maxHeaderCount fields, is reset with ENHANCE_YOUR_CALM; a header block's octets past it
//   (CONTINUATION without end) end the connection with ENHANCE_YOUR_CALM;
// - our windows (server.h2.streamWindowBytes, server.h2.connectionWindowBytes): a peer sending past
//   them is a FLOW_CONTROL_ERROR; a paused stream gives nothing back, so its client stops after a
//   stream window (what one paused stream holds, copied into one buffer of its own); the
//   connection's window is given back as DATA is read, less what streams hold unread, so a
//   connection holds about its window at most; a small piece of a large read is copied, never kept
//   as a view that would pin the read;
// - rapid reset (CVE-2023-44487): more than server.h2.maxResetsPerSecond open streams reset by the
//   client in one second (any code), GOAWAY ENHANCE_YOUR_CALM and the connection closed;
// - floods of frames that cost an answer or nothing but work (PING, SETTINGS, PRIORITY, empty
//   DATA, unknown types, streams refused; CVE-2019-9512, -9515, -9518): more than
//   CONTROL_PER_SECOND in one second, ENHANCE_YOUR_CALM; and a client that does not read what we
//   write is not read either once the socket holds MAX_UNREAD_WRITES for it;
// - the client's preface and SETTINGS within server.headersTimeoutMs; no stream open for
//   server.keepAliveTimeoutMs, GOAWAY and the connection ended; a connection we ended is destroyed
//   CLOSE_GRACE_MS later if the client has not closed it.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { Socket } from 'node:net';
import { type Linked, LinkedList } from '../../linked-list';
import {
  ACK, CANCEL, COMPRESSION_ERROR, INTERNAL_ERROR, CONTINUATION, DATA, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR, frame,
  FrameBatch, FRAME_SIZE_ERROR, FrameReader, type FrameSink, GOAWAY, HEADERS, MAX_MAX_FRAME_SIZE, MAX_WINDOW,
  MIN_MAX_FRAME_SIZE, NO_ERROR, PADDED, PING, PREFACE, PRIORITY, PRIORITY_FLAG, PROTOCOL_ERROR, PUSH_PROMISE, REFUSED_STREAM,
  RST_STREAM, SETTINGS, SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_CONCURRENT_STREAMS,
  SETTINGS_HEADER_TABLE_SIZE, SETTINGS_MAX_FRAME_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE, STREAM_CLOSED, WINDOW_UPDATE,
  goawayFrame, rstStreamFrame, settingsFrame, windowUpdateFrame,
} from '../../upstream/h2/frames';
import { BlockWriter, type FieldSink, HpackDecoder } from '../../upstream/h2/hpack';
import { StreamTable } from '../../upstream/h2/stream-table';

export interface ServerConnectionOptions {
  readonly maxConcurrentStreams: number;
  /** Our SETTINGS_INITIAL_WINDOW_SIZE, and the connection window set after the preface. */
  readonly streamWindow: number;
  readonly connectionWindow: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2 sizes); also bounds a header block's octets. */
  readonly maxHeaderListSize: number;
  /** Regular fields a request may have (pseudo-header fields aside). */
  readonly maxHeaderCount: number;
  readonly maxResetsPerSecond: number;
  /** The client's preface and SETTINGS must come within it. */
  readonly settingsTimeoutMs: number;
  /** No stream open for this long: GOAWAY, and the connection ends. */
  readonly idleTimeoutMs: number;
}

/** Who a connection tells of its streams and its end. */
export interface ConnectionOwner {
  /** A request's headers were read whole (valid, within bounds): the stream is the handler's from here. */
  stream(stream: ServerStream, headers: IncomingHttpHeaders): void;
  /** The connection was closed for the client's resets (rapid reset) or a flood of frames. */
  calmed(conn: ServerConnection, why: string): void;
  /** The socket closed. */
  closed(conn: ServerConnection): void;
}

/** PING, SETTINGS, PRIORITY, empty DATA and resets of closed streams one client may send in one second. */
export const CONTROL_PER_SECOND = 1000;
/** CONTINUATION frames one header block may take, whatever their size. */
const MAX_CONTINUATIONS = 64;
/** How many ranges of stream ids the client skipped are remembered (#skipped). */
const SKIPPED_RANGES = 16;
/** How many closed streams' ends are remembered (#endedIds): the last this many ids the client opened. */
const ENDED_SLOTS = 1024;
/** How a stream closed: both ends sent END_STREAM, we reset it (or refused it), or the client reset it. */
const enum Ended { Unknown = 0, Both = 1, ByUs = 2, ByClient = 3 }
/**
 * What the socket may hold for a client before its frames are no longer read: answers are bounded by
 * the client's windows, but acks and resets of its frames are not (CVE-2019-9512, -9515).
 */
const MAX_UNREAD_WRITES = 4 * 1024 * 1024;
/** How long a connection we ended (GOAWAY, an error) may take to close before its socket is destroyed. */
const CLOSE_GRACE_MS = 5000;
/** What write() queues on a stream before it says "wait for 'drain'" (node:http2's highWaterMark is 16 KiB). */
const HIGH_WATER = 64 * 1024;
const DEFAULT_WINDOW = 65535;
const EMPTY = Buffer.alloc(0);
/** A dynamic table size update to 0 (RFC 7541 §6.3). */
const TABLE_SIZE_ZERO = Buffer.from([0x20]);

/** Fields a request may not carry (RFC 9113 §8.2.2): connection-specific. */
const CONNECTION_FIELDS: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** ServerHttp2Stream.respond's options that the gRPC pass-through uses. */
export interface RespondOptions {
  readonly endStream?: boolean;
  readonly waitForTrailers?: boolean;
}

/**
 * One request stream. Reading: 'data' (a view of the socket's read, the listener's to keep), then
 * 'end'; pause() holds what arrives (and the stream's window) until resume(). Writing: respond(),
 * write() (false: wait for 'drain'), end(), and with waitForTrailers 'wantTrailers' once the last
 * DATA is out, answered by sendTrailers(). close(code) resets it. 'close' is emitted once, on the
 * next tick after it closed, whichever way.
 */
export class ServerStream extends EventEmitter implements Linked<ServerStream> {
  /** What the client lets us send on it (its SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATEs). */
  sendWindow: number;
  /** Its window left for the client, and what was read of it and not given back yet. */
  recvWindow: number;
  unacked = 0;
  /**
   * As a Readable's: null until a 'data' listener or resume() (what arrives is held till then),
   * false once paused, true while flowing.
   */
  #flowing: boolean | null = null;
  /**
   * What arrived while not flowing (at most the stream's window: the client stops there), in order:
   * pieces of HOLD_BY_REFERENCE octets or more as they came, smaller ones copied together into
   * buffers of the stream's (#tail), so that many small pieces cost neither an object each nor
   * their reads. #heldAt: the next piece to emit.
   */
  #held: Buffer[] | undefined;
  #heldAt = 0;
  #heldBytes = 0;
  /** The last held buffer when it is ours (small pieces copied into it), and its octets used. */
  #tail: Buffer | undefined;
  #tailUsed = 0;
  /** The client's END_STREAM has come, and 'end' was emitted. */
  remoteEnded = false;
  readableEnded = false;
  /** A content-length the request declared (-1: none), and the DATA octets read (RFC 9113 §8.1.1). */
  declaredLength = -1;
  receivedLength = 0;
  /** The answer: headers out, DATA waiting for a window (by reference), end() called, END_STREAM out. */
  headersSent = false;
  pending: Buffer[] = [];
  pendingAt = 0;
  writableLength = 0;
  #endCalled = false;
  #trailersWanted = false;
  #trailersAsked = false;
  localEnded = false;
  /** Its handler waits for 'drain'. */
  needDrain = false;
  closed = false;
  /** RST_STREAM's code when it was reset (by either side); undefined when it closed by both ends. */
  rstCode: number | undefined;
  /** Why we reset it for the client's error (a stream error), if we did. */
  resetReason: string | undefined;
  /** Waiting for a window: links in the connection's list of such streams. */
  linkPrev: ServerStream | undefined;
  linkNext: ServerStream | undefined;
  linked = false;

  constructor(readonly id: number, readonly connection: ServerConnection, sendWindow: number, recvWindow: number) {
    super();
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }

  get destroyed(): boolean {
    return this.closed;
  }

  get remoteAddress(): string | undefined {
    return this.connection.socket.remoteAddress;
  }

  respond(headers: OutgoingHttpHeaders, options?: RespondOptions): void {
    if (this.closed || this.headersSent) return;
    this.headersSent = true;
    const end = options?.endStream === true;
    if (end) this.#endCalled = true;
    this.#trailersWanted = options?.waitForTrailers === true;
    this.connection.writeHeaders(this, headers, end);
  }

  /** Queues `chunk` as DATA, sent as the windows let; false once the queue is past HIGH_WATER or the socket full. */
  write(chunk: Buffer): boolean {
    if (this.closed || this.#endCalled || this.localEnded) return false;
    if (chunk.length === 0) return true;
    this.pending.push(chunk);
    this.writableLength += chunk.length;
    this.connection.flush(this);
    const more = this.writableLength < HIGH_WATER && !this.connection.socket.writableNeedDrain;
    if (!more) this.needDrain = true;
    return more;
  }

  end(chunk?: Buffer): void {
    if (this.closed || this.#endCalled || this.localEnded) return;
    if (!this.headersSent) this.respond({ ':status': 200 });
    if (chunk !== undefined && chunk.length > 0) {
      this.pending.push(chunk);
      this.writableLength += chunk.length;
    }
    this.#endCalled = true;
    this.connection.flush(this);
  }

  /** The DATA queued is out and end() was called (ServerConnection.flush): trailers, or an empty END_STREAM DATA. */
  allSent(): void {
    if (!this.#endCalled || this.localEnded || this.closed) return;
    if (this.#trailersWanted) {
      if (this.#trailersAsked) return;
      this.#trailersAsked = true;
      this.emit('wantTrailers');
      return;
    }
    this.connection.endData(this);
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    if (this.closed || this.localEnded) return;
    this.connection.writeHeaders(this, trailers, true);
  }

  /** Resets the stream (RST_STREAM `code`); a stream closed already stays as it is. */
  close(code: number = NO_ERROR): void {
    this.connection.reset(this, code);
  }

  pause(): this {
    this.#flowing = false;
    return this;
  }

  /** Flowing again: what was held is emitted next tick (as a Readable's resume() does); the window given back. */
  resume(): this {
    if (this.#flowing === true) return this;
    this.#flowing = true;
    if (this.#heldBytes > 0 || (this.remoteEnded && !this.readableEnded)) process.nextTick(flowHeld, this);
    else this.connection.giveBack(this);
    return this;
  }

  /** A 'data' listener starts the flow unless the stream was paused, as on a Readable. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- EventEmitter's own listener type
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    super.on(event, listener);
    if (event === 'data' && this.#flowing !== false) this.resume();
    return this;
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- EventEmitter's own listener type
  override addListener(event: string | symbol, listener: (...args: any[]) => void): this {
    return this.on(event, listener);
  }

  get flowing(): boolean {
    return this.#flowing === true;
  }

  /** What was held while not flowing goes out, until a listener pauses the stream again. */
  flowHeld(): void {
    if (this.#flowing !== true || this.closed) return;
    const held = this.#held;
    while (held !== undefined && this.#heldAt < held.length) {
      let piece = held[this.#heldAt]!;
      held[this.#heldAt++] = EMPTY_PIECE;
      if (piece === this.#tail) {
        piece = piece.subarray(0, this.#tailUsed);
        this.#tail = undefined;
      }
      this.#heldBytes -= piece.length;
      this.connection.released(piece.length);
      this.#emitData(piece);
      if (this.#flowing !== true || this.closed) return;
    }
    this.#held = undefined;
    this.#heldAt = 0;
    if (this.remoteEnded && !this.readableEnded) this.#emitEnd();
    if (!this.closed) this.connection.giveBack(this);
  }

  /** A piece of the request's DATA (ServerConnection). */
  received(chunk: Buffer): void {
    if (this.#flowing !== true || this.#heldBytes > 0) {
      this.#hold(chunk);
      return;
    }
    this.#emitData(chunk);
  }

  #hold(chunk: Buffer): void {
    const held = this.#held ??= [];
    this.#heldBytes += chunk.length;
    this.connection.held(chunk.length);
    if (chunk.length >= HOLD_BY_REFERENCE) {
      this.#closeTail();
      held.push(chunk);
      return;
    }
    let tail = this.#tail;
    if (tail === undefined || tail.length - this.#tailUsed < chunk.length) {
      this.#closeTail();
      tail = this.#tail = Buffer.allocUnsafe(TAIL_BYTES);
      this.#tailUsed = 0;
      held.push(tail);
    }
    chunk.copy(tail, this.#tailUsed);
    this.#tailUsed += chunk.length;
  }

  /** The open tail, if any, is held as what it has: nothing more is copied into it. */
  #closeTail(): void {
    const tail = this.#tail;
    if (tail === undefined) return;
    this.#tail = undefined;
    this.#held![this.#held!.length - 1] = tail.subarray(0, this.#tailUsed);
  }

  /** The client's END_STREAM (ServerConnection). */
  receivedEnd(): void {
    this.remoteEnded = true;
    if (this.#flowing === true && this.#heldBytes === 0) this.#emitEnd();
  }

  #emitData(chunk: Buffer): void {
    this.unacked += chunk.length;
    this.emit('data', chunk);
  }

  #emitEnd(): void {
    this.readableEnded = true;
    this.emit('end');
  }

  /** The stream closed (ServerConnection): 'close' on the next tick; what it held let go. */
  closedNow(rstCode: number | undefined): void {
    this.closed = true;
    this.rstCode = rstCode;
    this.pending = NO_PIECES;
    this.writableLength = 0;
    if (this.#heldBytes > 0) this.connection.released(this.#heldBytes);
    this.#held = this.#tail = undefined;
    this.#heldAt = this.#heldBytes = 0;
    process.nextTick(emitClose, this);
  }
}

const NO_PIECES: Buffer[] = [];
/** A request header block longer than this is decoded each time (ServerConnection.#repeat). */
const REPEAT_BLOCK_MAX = 1024;
/** Held pieces this large are kept as they came (an eighth of their read at least); smaller ones copied together. */
const HOLD_BY_REFERENCE = 4096;
const TAIL_BYTES = 16 * 1024;
const EMPTY_PIECE = Buffer.alloc(0);

function destroySocket(socket: Socket): void {
  socket.destroy();
}

function flowHeld(s: ServerStream): void {
  s.flowHeld();
}

function emitClose(s: ServerStream): void {
  s.emit('close');
}

/**
 * The prototype of a request's header object: empty and frozen, so a field name is never one of
 * Object.prototype's (`constructor`, `__proto__`) and nothing is inherited, as with node:http2's
 * objects that have none. An object made by Object.create(null) is a dictionary in V8, whose every
 * `for…in` (the relay's copy of the metadata) is a runtime call; one with this prototype is not.
 */
const FIELDS_PROTO: object = Object.freeze(Object.create(null) as object);

/** A request's header fields as they are decoded, checked as RFC 9113 §8.2 and §8.3.1 say. */
class RequestFields implements FieldSink {
  headers: IncomingHttpHeaders = Object.create(FIELDS_PROTO) as IncomingHttpHeaders;
  /** Why the request is malformed (a stream error PROTOCOL_ERROR), if it is. */
  malformed: string | undefined;
  count = 0;
  #regular = false;

  /** `trailers`: the fields of a request's trailers, where no pseudo-header field may be (RFC 9113 §8.1). */
  constructor(private readonly maxCount: number, private readonly trailers = false) {}

  field(name: string, value: string): void {
    if (this.malformed !== undefined) return;
    if (!validValue(value)) {
      this.malformed = `the value of ${name.slice(0, 64)} holds a character a field may not`;
      return;
    }
    if (name.charCodeAt(0) === 0x3a /* : */) {
      if (this.trailers) this.malformed = `the pseudo-header field ${name.slice(0, 64)}`;
      else if (this.#regular) this.malformed = 'a pseudo-header field after a regular one';
      else if (name !== ':method' && name !== ':scheme' && name !== ':path' && name !== ':authority') this.malformed = `the pseudo-header field ${name.slice(0, 64)}`;
      else if (this.headers[name] !== undefined) this.malformed = `${name} twice`;
      else this.headers[name] = value;
      return;
    }
    this.#regular = true;
    if (++this.count > this.maxCount) return; // told by the connection (too many fields)
    if (!validName(name)) {
      this.malformed = `the field name ${name.slice(0, 64)} is not a lowercase token`;
      return;
    }
    if (CONNECTION_FIELDS.has(name) || (name === 'te' && value !== 'trailers')) {
      this.malformed = `the connection-specific field ${name}`;
      return;
    }
    const had = this.headers[name];
    // Repeated fields are joined as node:http2 joins them (a list with ", "); set-cookie is not a request's.
    this.headers[name] = had === undefined ? value : `${had as string}, ${value}`;
  }

  /** Why the request cannot be served as one (a missing pseudo-header field), if so. */
  incomplete(): string | undefined {
    const h = this.headers;
    if (this.malformed !== undefined) return this.malformed;
    if (h[':method'] === undefined || h[':scheme'] === undefined || h[':path'] === undefined || h[':path'] === '') {
      return 'a request without :method, :scheme or :path';
    }
    return undefined;
  }
}

/** RFC 9113 §8.2.1: lowercase, and a token's characters (RFC 9110 §5.6.2). */
function validName(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || (c >= 0x41 && c <= 0x5a) || c === 0x3a) return false;
  }
  return true;
}

/** RFC 9113 §8.2.1: no NUL, CR or LF, and no whitespace at either end. */
function validValue(value: string): boolean {
  const n = value.length;
  if (n === 0) return true;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (c === 0 || c === 0x0a || c === 0x0d) return false;
  }
  return true;
}

/** A header block nobody reads (a refused or closed stream's): decoded for the dynamic table only. */
const NOBODY: FieldSink = { field: () => undefined };

export class ServerConnection implements FrameSink {
  readonly #streams = new StreamTable<ServerStream>();
  /** Streams with DATA waiting for a window, in the order they began to wait. */
  readonly #blocked = new LinkedList<ServerStream>();
  readonly #reader = new FrameReader(this);
  readonly #hpack = new HpackDecoder(4096);
  /**
   * The last request header block that decoded well formed and left the dynamic table as it was,
   * and its fields: a client sends the same block for each call of a method (every field indexed,
   * or literals it does not index), and the same bytes under the same table read the same fields,
   * so a repeat is not decoded and checked again. Its header object is frozen and shared by the
   * calls that repeat it (the pass-through relays its metadata once, passthrough/grpc-ingress.ts).
   */
  #repeat: { readonly block: Buffer; readonly generation: number; readonly fields: RequestFields } | undefined;
  readonly #out = new BlockWriter();
  /** What a batch writes, gathered into few socket writes (FrameBatch). */
  readonly #written: FrameBatch;
  /** The preface octets matched so far (24 once whole). */
  #preface = 0;
  #settingsSeen = false;
  /** The client's settings (RFC 9113 §6.5.2 defaults until its SETTINGS come). */
  #peerWindow = DEFAULT_WINDOW;
  #peerMaxFrame = MIN_MAX_FRAME_SIZE;
  #sendWindow = DEFAULT_WINDOW;
  #recvWindow = DEFAULT_WINDOW;
  #unacked = 0;
  /** The highest stream id the client took (GOAWAY's last stream id), and the highest it used at all. */
  #lastId = 0;
  #seenId = 0;
  /**
   * The ids a new stream's id skipped (past the next odd one), the last SKIPPED_RANGES ranges as
   * first and last pairs. HEADERS on one is a stream opened below one already opened: a connection
   * error (RFC 9113 §5.1.1). HEADERS on a stream that was open and is closed is judged by how it
   * closed (#endedHow). Clients skip ids rarely if ever; a skip older than the last SKIPPED_RANGES is
   * taken for a closed stream's.
   */
  readonly #skipped: number[] = [];
  /**
   * How the streams of the last ENDED_SLOTS ids closed (slot (id >>> 1) % ENDED_SLOTS): DATA or
   * HEADERS on a stream closed from both ends is the client's error, a connection error (RFC 9113
   * §5.1, §6.1); after the client's own RST_STREAM a stream error; after a reset of ours it is ignored
   * (frames already in flight, §5.1). A stream closed before the last ENDED_SLOTS ids is not known:
   * its frames are ignored.
   */
  readonly #endedIds = new Int32Array(ENDED_SLOTS);
  readonly #endedHow = new Uint8Array(ENDED_SLOTS);
  /** The frame being read. */
  #type = 0;
  #flags = 0;
  #stream = 0;
  #length = 0;
  #dataStream: ServerStream | undefined;
  #dataLeft = 0;
  /** The current DATA frame's payload octets handed on (its length less them: the padding). */
  #dataRead = 0;
  /** A header block being gathered (HEADERS then CONTINUATION). */
  #block: Buffer[] | undefined;
  #blockBytes = 0;
  #blockFrames = 0;
  #blockStream = 0;
  #blockFlags = 0;
  /** GOAWAY sent: no stream past #lastId is taken. */
  #goingAway = false;
  #error: string | undefined;
  #closed = false;
  /** The rapid-reset and flood bounds' second, and what the client spent of them in it. */
  #second = 0;
  #resets = 0;
  #control = 0;
  /** The idle bound: since when no stream has been open (0: one is). */
  #idleSince: number;
  #timer: NodeJS.Timeout | undefined;
  /** The client's SETTINGS_HEADER_TABLE_SIZE came: our next header block begins with a size update. */
  #tableSizeUpdate = false;
  /** Reads stopped while the socket holds more than MAX_UNREAD_WRITES for the client (#send). */
  #readsPaused = false;
  /** Writes from outside a read (a relayed answer) wait in a cork until the turn's end. */
  #batched = false;
  readonly #flushBatch = (): void => {
    this.#batched = false;
    this.#written.flush();
    this.socket.uncork();
  };

  constructor(readonly socket: Socket, private readonly options: ServerConnectionOptions, readonly owner: ConnectionOwner) {
    this.#idleSince = performance.now();
    this.#written = new FrameBatch(socket);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('error', () => this.#fail('the connection failed'));
    socket.on('end', () => this.#fail('the client closed the connection'));
    socket.on('close', () => this.#gone());
    socket.on('drain', () => this.#drained());
    this.#send(Buffer.concat([this.#settingsFrame(), windowUpdateFrame(0, options.connectionWindow - DEFAULT_WINDOW)]));
    this.#recvWindow = options.connectionWindow;
    // The preface and SETTINGS within the headers' bound; then the same timer is the idle bound's.
    this.#timer = setTimeout(this.#onTimer, options.settingsTimeoutMs);
    this.#timer.unref();
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    if (this.#closed || this.#goingAway || this.#error !== undefined) return;
    if (!this.#settingsSeen) {
      this.#fail('no preface and SETTINGS within server.headersTimeoutMs');
      return;
    }
    this.#armIdle();
  };

  /** The idle bound: checked when due, re-armed for what is left while streams open and close. */
  #armIdle(): void {
    const { idleTimeoutMs } = this.options;
    if (this.#streams.size === 0 && this.#idleSince > 0) {
      const left = this.#idleSince + idleTimeoutMs - performance.now();
      if (left <= 0) {
        this.close();
        return;
      }
      this.#timer = setTimeout(this.#onTimer, left);
    } else {
      this.#timer = setTimeout(this.#onTimer, idleTimeoutMs);
    }
    this.#timer.unref();
  }

  get openStreams(): number {
    return this.#streams.size;
  }

  /** The last stream id taken (GOAWAY's). */
  get lastStreamId(): number {
    return this.#lastId;
  }

  #settingsFrame(): Buffer {
    const o = this.options;
    return settingsFrame([
      [SETTINGS_MAX_CONCURRENT_STREAMS, o.maxConcurrentStreams], [SETTINGS_ENABLE_PUSH, 0],
      [SETTINGS_INITIAL_WINDOW_SIZE, o.streamWindow], [SETTINGS_MAX_HEADER_LIST_SIZE, o.maxHeaderListSize],
    ]);
  }

  /**
   * Writes to the socket, unless it is ended or gone (a late PING or DATA after our GOAWAY gets no
   * answer): within a batch gathered (#written), else at once.
   */
  #send(chunk: Buffer): void {
    if (!this.#writable()) return;
    if (this.#batched) this.#written.push(chunk);
    else this.socket.write(chunk);
    this.#bound();
  }

  #writable(): boolean {
    return !this.socket.writableEnded && !this.socket.destroyed;
  }

  /** A client that does not read what it makes us write (acks, resets) is not read any more until it does. */
  #bound(): void {
    if (this.socket.writableLength + this.#written.gathered > MAX_UNREAD_WRITES && !this.#readsPaused) {
      this.#readsPaused = true;
      this.socket.pause();
    }
  }

  #batch(): void {
    if (this.#batched || this.#closed) return;
    this.#batched = true;
    this.socket.cork();
    setImmediate(this.#flushBatch);
  }

  #read(chunk: Buffer): void {
    if (this.#closed || this.#error !== undefined) return;
    let at = 0;
    if (this.#preface < PREFACE.length) {
      const n = Math.min(PREFACE.length - this.#preface, chunk.length);
      if (chunk.compare(PREFACE, this.#preface, this.#preface + n, 0, n) !== 0) {
        this.#fail('not the HTTP/2 connection preface');
        return;
      }
      this.#preface += n;
      at = n;
      if (at === chunk.length) return;
    }
    this.#batch();
    this.#reader.push(at === 0 ? chunk : chunk.subarray(at));
  }

  // ---- writing

  /** HEADERS (+ CONTINUATION) of an answer or its trailers; `end`: END_STREAM. */
  writeHeaders(s: ServerStream, headers: OutgoingHttpHeaders, end: boolean): void {
    if (this.#closed || this.#error !== undefined) return;
    const w = this.#out;
    w.begin();
    const status = headers[':status'];
    if (status !== undefined) w.field(':status', String(status));
    for (const name in headers) {
      if (name.charCodeAt(0) === 0x3a) continue;
      const v = headers[name];
      if (v === undefined) continue;
      const lower = name.toLowerCase();
      if (Array.isArray(v)) for (const one of v) w.field(lower, String(one));
      else w.field(lower, String(v));
    }
    let block = w.end();
    if (this.#tableSizeUpdate) {
      this.#tableSizeUpdate = false;
      block = Buffer.concat([TABLE_SIZE_ZERO, block]);
    }
    this.#batch();
    const max = this.#peerMaxFrame;
    let at = 0;
    do {
      const n = Math.min(max, block.length - at);
      const last = at + n === block.length;
      const type = at === 0 ? HEADERS : CONTINUATION;
      const flags = (last ? END_HEADERS : 0) | (type === HEADERS && end ? END_STREAM : 0);
      // The block is the writer's, reused: its frame is a copy.
      if (this.#writable()) this.#written.frame(type, flags, s.id, block, at, at + n);
      at += n;
    } while (at < block.length);
    this.#bound();
    if (end) this.#localEnd(s);
  }

  /**
   * Sends what the windows let of a stream's DATA, in frames of at most the client's
   * SETTINGS_MAX_FRAME_SIZE, each a 9-octet header and a view of the writer's buffer; then, when
   * all is out and end() was called, the stream's end (ServerStream.allSent).
   */
  flush(s: ServerStream): void {
    if (this.#closed || this.#error !== undefined || s.closed) return;
    this.#batch();
    while (s.pending.length > 0) {
      const head = s.pending[0]!;
      const n = Math.min(head.length - s.pendingAt, s.sendWindow, this.#sendWindow, this.#peerMaxFrame);
      if (n <= 0) {
        if (!s.linked) this.#blocked.add(s);
        return;
      }
      if (this.#writable()) this.#written.header(n, DATA, 0, s.id);
      this.#send(s.pendingAt === 0 && n === head.length ? head : head.subarray(s.pendingAt, s.pendingAt + n));
      s.sendWindow -= n;
      this.#sendWindow -= n;
      s.pendingAt += n;
      s.writableLength -= n;
      if (s.pendingAt === head.length) {
        s.pending.shift();
        s.pendingAt = 0;
      }
    }
    this.#blocked.delete(s);
    s.allSent();
    if (s.needDrain && !s.closed && s.writableLength < HIGH_WATER && !this.socket.writableNeedDrain) {
      s.needDrain = false;
      s.emit('drain');
    }
  }

  /** An empty DATA with END_STREAM: the answer ends without trailers. */
  endData(s: ServerStream): void {
    this.#send(frame(DATA, END_STREAM, s.id));
    this.#localEnd(s);
  }

  #localEnd(s: ServerStream): void {
    s.localEnded = true;
    if (s.remoteEnded) this.#close(s, undefined);
  }

  /** Resets `s` from our side (RST_STREAM `code`). */
  reset(s: ServerStream, code: number): void {
    if (s.closed || this.#streams.get(s.id) !== s) return;
    if (this.#error === undefined && !this.#closed) {
      this.#batch();
      this.#send(rstStreamFrame(s.id, code));
    }
    this.#close(s, code);
  }

  /** `s` closed: by both ends' END_STREAM (no `rstCode`), our reset, or the client's (`byClient`). */
  #close(s: ServerStream, rstCode: number | undefined, byClient = false): void {
    if (s.closed) return;
    this.#ended(s.id, rstCode === undefined ? Ended.Both : byClient ? Ended.ByClient : Ended.ByUs);
    this.#streams.delete(s);
    this.#blocked.delete(s);
    s.closedNow(rstCode);
    if (this.#streams.size === 0) {
      this.#idleSince = performance.now();
      if (this.#goingAway) this.#endSocket();
    }
  }

  #ended(id: number, how: Ended): void {
    const i = (id >>> 1) & (ENDED_SLOTS - 1);
    this.#endedIds[i] = id;
    this.#endedHow[i] = how;
  }

  #howEnded(id: number): Ended {
    const i = (id >>> 1) & (ENDED_SLOTS - 1);
    return this.#endedIds[i] === id ? this.#endedHow[i]! : Ended.Unknown;
  }

  /**
   * DATA or HEADERS on stream `id`, opened once and no longer open: a connection error STREAM_CLOSED
   * when both ends had ended it, RST_STREAM STREAM_CLOSED after the client's own reset (RFC 9113 §5.1,
   * §6.1), nothing after ours or when too old to know.
   */
  #closedStreamFrame(id: number, what: string): boolean {
    switch (this.#howEnded(id)) {
      case Ended.Both: return this.#connectionError(STREAM_CLOSED, `${what} on stream ${id}, which both ends had ended`);
      case Ended.ByClient: return this.#resetClosed(id, STREAM_CLOSED, `${what} on a stream the client reset`);
      default: return true;
    }
  }

  /** A stream error on a stream not open: RST_STREAM names it, counted as the frames of a flood are. */
  #resetClosed(id: number, code: number, what: string): boolean {
    if (!this.#spend(0, 1, what)) return false;
    this.#batch();
    this.#send(rstStreamFrame(id, code));
    return true;
  }

  /** The connection's window given back once half of it was read (less what streams hold: held()). */
  #giveBackConnection(): void {
    if (this.#unacked < this.options.connectionWindow / 2 || this.#error !== undefined || this.#closed) return;
    this.#batch();
    this.#send(windowUpdateFrame(0, this.#unacked));
    this.#recvWindow += this.#unacked;
    this.#unacked = 0;
  }

  /**
   * `n` octets a stream holds unread (it is not flowing): not given back to the connection's
   * window until they flow or the stream closes (released()), so the streams of one connection
   * hold at most about its window (server.h2.connectionWindowBytes), not one stream window each.
   */
  held(n: number): void {
    this.#unacked -= n;
  }

  released(n: number): void {
    this.#unacked += n;
    this.#giveBackConnection();
  }

  /** Gives back what a stream's reader took of its window (RFC 9113 §6.9), once half of it; none while paused. */
  giveBack(s: ServerStream): void {
    if (!s.flowing || s.closed || s.unacked < this.options.streamWindow / 2 || s.remoteEnded || this.#closed || this.#error !== undefined) return;
    this.#batch();
    this.#send(windowUpdateFrame(s.id, s.unacked));
    s.recvWindow += s.unacked;
    s.unacked = 0;
  }

  /** GOAWAY NO_ERROR (the drain, the idle bound): open streams finish, no new one is taken; then the socket ends. */
  close(): void {
    if (this.#goingAway || this.#closed || this.#error !== undefined) return;
    this.#goingAway = true;
    this.#batch();
    this.#send(this.#goaway(NO_ERROR));
    if (this.#streams.size === 0) this.#endSocket();
  }

  /** Closes at once (the drain's deadline): every open stream is closed with CANCEL. */
  destroy(): void {
    this.#fail('the connection was destroyed', CANCEL);
  }

  #goaway(code: number): Buffer {
    return goawayFrame(this.#lastId, code);
  }

  #endSocket(): void {
    if (this.#batched) {
      this.#batched = false;
      this.#written.flush();
      this.socket.uncork();
    }
    this.socket.end();
    this.#destroyLater();
  }

  /** A socket we ended closes when the client closes its side, or CLOSE_GRACE_MS later, destroyed. */
  #destroyLater(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(destroySocket, CLOSE_GRACE_MS, this.socket);
    this.#timer.unref();
  }

  /** A connection error (RFC 9113 §5.4.1): GOAWAY `code`, then the socket ends; every stream closes. */
  #connectionError(code: number, reason: string): boolean {
    if (this.#error === undefined && !this.#closed) this.#send(this.#goaway(code));
    this.#fail(reason, code);
    return false;
  }

  #fail(reason: string, code = CANCEL): void {
    if (this.#error !== undefined) return;
    this.#error = reason;
    if (this.#batched) {
      this.#batched = false;
      this.#written.flush();
      this.socket.uncork();
    }
    this.socket.end();
    this.#destroyLater();
    this.#closeAll(code);
  }

  #closeAll(code: number): void {
    const streams = this.#streams.values();
    for (const s of streams) this.#close(s, code);
  }

  #gone(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#error ??= 'the connection closed';
    clearTimeout(this.#timer);
    this.#closeAll(CANCEL);
    this.owner.closed(this);
  }

  #drained(): void {
    if (this.#readsPaused) {
      this.#readsPaused = false;
      this.socket.resume();
    }
    for (const s of this.#streams.values()) {
      if (!s.needDrain || s.closed || s.writableLength >= HIGH_WATER) continue;
      s.needDrain = false;
      s.emit('drain');
    }
  }

  /** One more frame of the kinds a flood is made of: past CONTROL_PER_SECOND in a second, the connection is calmed. */
  #spend(resets: number, control: number, what: string): boolean {
    const now = performance.now();
    if (now - this.#second > 1000) {
      this.#second = now;
      this.#resets = 0;
      this.#control = 0;
    }
    this.#resets += resets;
    this.#control += control;
    const max = this.options.maxResetsPerSecond;
    if (this.#resets > max || this.#control > CONTROL_PER_SECOND) {
      const why = this.#resets > max ? `more than ${max} streams reset in one second` : `more than ${CONTROL_PER_SECOND} ${what} frames in one second`;
      this.owner.calmed(this, why);
      return this.#connectionError(ENHANCE_YOUR_CALM, why);
    }
    return true;
  }

  // ---- reading (FrameSink)

  frameStart(length: number, type: number, flags: number, stream: number): boolean {
    if (length > MIN_MAX_FRAME_SIZE) return this.#connectionError(FRAME_SIZE_ERROR, `a ${length}-octet frame (SETTINGS_MAX_FRAME_SIZE 16384)`);
    if (!this.#settingsSeen && (type !== SETTINGS || (flags & ACK) !== 0)) return this.#connectionError(PROTOCOL_ERROR, 'the client\'s preface is not SETTINGS');
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
      case PRIORITY: return this.#priority(p);
      case RST_STREAM: return this.#rstStream(p);
      case SETTINGS: return this.#settings(p);
      case PUSH_PROMISE: return this.#connectionError(PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case PING: return this.#ping(p);
      case GOAWAY: return this.#goawayFrom(p);
      case WINDOW_UPDATE: return this.#windowUpdate(p);
      default: return this.#spend(0, 1, 'unknown'); // unknown types are ignored (RFC 9113 §5.5)
    }
  }

  #dataStart(): boolean {
    const id = this.#stream;
    if (id === 0) return this.#connectionError(PROTOCOL_ERROR, 'DATA on stream 0');
    if (id > this.#seenId) return this.#connectionError(PROTOCOL_ERROR, `DATA on idle stream ${id}`);
    const n = this.#length;
    // Flow control counts the whole payload, padding included (RFC 9113 §6.9.1); the connection's
    // window is given back as it is read, whatever becomes of the stream.
    this.#recvWindow -= n;
    if (this.#recvWindow < 0) return this.#connectionError(FLOW_CONTROL_ERROR, 'DATA past the connection window');
    this.#unacked += n;
    this.#giveBackConnection();
    this.#dataLeft = (this.#flags & PADDED) !== 0 ? -1 : n;
    this.#dataRead = 0;
    if (n === 0 && (this.#flags & END_STREAM) === 0 && !this.#spend(0, 1, 'empty DATA')) return false;
    const s = this.#streams.get(id);
    this.#dataStream = s;
    if (s === undefined) return this.#closedStreamFrame(id, 'DATA'); // its DATA is dropped
    if (s.remoteEnded) return this.#streamError(s, STREAM_CLOSED, 'DATA after END_STREAM');
    s.recvWindow -= n;
    if (s.recvWindow < 0) return this.#streamError(s, FLOW_CONTROL_ERROR, 'DATA past the stream window');
    return true;
  }

  dataPiece(chunk: Buffer, from: number, to: number): void {
    if (this.#dataLeft < 0) { // PADDED: the first octet is the padding's length
      const pad = chunk[from++]!;
      this.#dataLeft = this.#length - 1 - pad;
      if (this.#dataLeft < 0) {
        this.#connectionError(PROTOCOL_ERROR, 'padding longer than the frame');
        return;
      }
    }
    const n = Math.min(this.#dataLeft, to - from);
    this.#dataLeft -= n;
    this.#dataRead += n;
    const s = this.#dataStream;
    if (n <= 0 || s === undefined || s.closed) return;
    s.receivedLength += n;
    if (s.declaredLength >= 0 && s.receivedLength > s.declaredLength) {
      this.#streamError(s, PROTOCOL_ERROR, 'DATA past the request\'s content-length');
      return;
    }
    // A piece is a view of the read, kept by whoever takes it; a small piece of a large read would
    // keep the whole read alive (a client can put one octet for a stream in each read), so it is
    // copied: what a stream holds pins at most 8 times its size.
    s.received(8 * n < chunk.length ? Buffer.from(chunk.subarray(from, from + n)) : chunk.subarray(from, from + n));
    this.giveBack(s);
  }

  #dataEnd(): boolean {
    if (this.#dataLeft < 0) return this.#connectionError(PROTOCOL_ERROR, 'a PADDED DATA frame without its padding length');
    const s = this.#dataStream;
    this.#dataStream = undefined;
    // Padding (and its length octet) took window too (RFC 9113 §6.9.1): given back as read.
    const padding = this.#length - this.#dataRead;
    if (padding > 0 && s !== undefined && !s.closed) {
      s.unacked += padding;
      this.giveBack(s);
    }
    if (s !== undefined && !s.closed && (this.#flags & END_STREAM) !== 0) this.#remoteEnd(s);
    return this.#error === undefined;
  }

  #remoteEnd(s: ServerStream): void {
    if (s.declaredLength >= 0 && s.receivedLength !== s.declaredLength) {
      this.#streamError(s, PROTOCOL_ERROR, 'a request shorter than its content-length');
      return;
    }
    s.receivedEnd();
    if (s.localEnded && !s.closed) this.#close(s, undefined);
  }

  /** A stream error (RFC 9113 §5.4.2): the stream reset with `code`, `reason` kept on it for its handler. */
  #streamError(s: ServerStream, code: number, reason: string): boolean {
    s.resetReason = reason;
    this.reset(s, code);
    return this.#error === undefined;
  }

  /** A stream id the client used: the ids it skipped to get there are remembered (#skipped). */
  #advance(id: number): void {
    const next = this.#seenId === 0 ? 1 : this.#seenId + 2;
    if (id > next) {
      if (this.#skipped.length >= 2 * SKIPPED_RANGES) this.#skipped.splice(0, 2);
      this.#skipped.push(next, id - 2);
    }
    this.#seenId = id;
  }

  #wasSkipped(id: number): boolean {
    const r = this.#skipped;
    for (let i = 0; i < r.length; i += 2) if (id >= r[i]! && id <= r[i + 1]!) return true;
    return false;
  }

  #headersFrame(p: Buffer): boolean {
    const id = this.#stream;
    if (id === 0 || (id & 1) === 0) return this.#connectionError(PROTOCOL_ERROR, `HEADERS on stream ${id}`);
    let from = 0;
    let to = p.length;
    if (this.#flags & PADDED) {
      if (p.length < 1) return this.#connectionError(FRAME_SIZE_ERROR, 'HEADERS too short for its padding');
      to -= p[0]!;
      from = 1;
    }
    if (this.#flags & PRIORITY_FLAG) {
      if (p.length >= from + 4 && (p.readUInt32BE(from) & MAX_WINDOW) === id) return this.#connectionError(PROTOCOL_ERROR, 'a stream depending on itself');
      from += 5;
    }
    if (from > to) return this.#connectionError(PROTOCOL_ERROR, 'HEADERS padding longer than the frame');
    this.#blockStream = id;
    this.#blockFlags = this.#flags;
    const block = p.subarray(from, to);
    this.#block = [];
    this.#blockBytes = 0;
    this.#blockFrames = 0;
    return this.#fragment(block);
  }

  #continuation(p: Buffer): boolean {
    if (this.#block === undefined) return this.#connectionError(PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
    if (++this.#blockFrames > MAX_CONTINUATIONS) return this.#connectionError(ENHANCE_YOUR_CALM, `a header block in more than ${MAX_CONTINUATIONS} CONTINUATION frames`);
    return this.#fragment(p);
  }

  /** A piece of a header block; the whole block is decoded at END_HEADERS. */
  #fragment(p: Buffer): boolean {
    this.#blockBytes += p.length;
    // Twice the list's bound: a list past its bound is refused per stream once decoded (the block
    // read whole keeps the table in step), a block far past it ends the connection.
    if (this.#blockBytes > 2 * this.options.maxHeaderListSize) {
      return this.#connectionError(ENHANCE_YOUR_CALM, `a header block over ${2 * this.options.maxHeaderListSize} octets`);
    }
    const block = this.#block!;
    const whole = (this.#flags & END_HEADERS) !== 0;
    // A view of the read, copied when the block continues (the read may be gone by its end).
    block.push(whole && block.length === 0 ? p : Buffer.from(p));
    if (!whole) return true;
    this.#block = undefined;
    return this.#headerBlock(block.length === 1 ? block[0]! : Buffer.concat(block));
  }

  #headerBlock(block: Buffer): boolean {
    const id = this.#blockStream;
    const endStream = (this.#blockFlags & END_STREAM) !== 0;
    const open = this.#streams.get(id);
    if (open !== undefined) { // trailers of the request: read and checked (RFC 9113 §8.1), then the request's end
      const trailers = new RequestFields(this.options.maxHeaderCount, true);
      const result = this.#hpack.decode(block, trailers, this.options.maxHeaderListSize);
      if (result === 'compression') return this.#connectionError(COMPRESSION_ERROR, 'a malformed header block');
      if (open.remoteEnded) return this.#streamError(open, STREAM_CLOSED, 'HEADERS after END_STREAM');
      if (!endStream) return this.#streamError(open, PROTOCOL_ERROR, 'a second header block without END_STREAM');
      if (trailers.malformed !== undefined) return this.#streamError(open, PROTOCOL_ERROR, `trailers with ${trailers.malformed}`);
      if (result === 'too large' || trailers.count > this.options.maxHeaderCount) return this.#streamError(open, ENHANCE_YOUR_CALM, 'trailers past the bounds');
      this.#remoteEnd(open);
      return this.#error === undefined;
    }
    if (id <= this.#seenId || this.#goingAway) {
      // A stream closed already (reset by us, its frames in flight), or past our GOAWAY: ignored, its block read.
      if (this.#hpack.decode(block, NOBODY) === 'compression') return this.#connectionError(COMPRESSION_ERROR, 'a malformed header block');
      if (id <= this.#seenId && this.#wasSkipped(id)) return this.#connectionError(PROTOCOL_ERROR, `HEADERS opening stream ${id} after stream ${this.#seenId}`);
      if (id > this.#seenId) this.#advance(id);
      else return this.#closedStreamFrame(id, 'HEADERS');
      return true;
    }
    this.#advance(id);
    this.#lastId = id;
    const o = this.options;
    let fields: RequestFields;
    let result: 'compression' | 'too large' | undefined;
    const repeat = this.#repeat;
    if (repeat !== undefined && repeat.generation === this.#hpack.generation && block.equals(repeat.block)) {
      fields = repeat.fields;
    } else {
      fields = new RequestFields(o.maxHeaderCount);
      const generation = this.#hpack.generation;
      result = this.#hpack.decode(block, fields, o.maxHeaderListSize);
      if (result === undefined && this.#hpack.generation === generation && block.length <= REPEAT_BLOCK_MAX
        && fields.count <= o.maxHeaderCount && fields.incomplete() === undefined) {
        Object.freeze(fields.headers);
        this.#repeat = { block: Buffer.from(block), generation, fields };
      }
    }
    if (result === 'compression') return this.#connectionError(COMPRESSION_ERROR, 'a malformed header block');
    const refusal = result === 'too large' || fields.count > o.maxHeaderCount ? ENHANCE_YOUR_CALM
      : this.#streams.size >= o.maxConcurrentStreams ? REFUSED_STREAM
        : fields.incomplete() !== undefined ? PROTOCOL_ERROR : NO_ERROR;
    if (refusal !== NO_ERROR) {
      // A stream refused costs a reset of ours: counted as the frames of a flood are.
      if (!this.#spend(0, 1, 'refused HEADERS')) return false;
      this.#ended(id, Ended.ByUs);
      this.#batch();
      this.#send(rstStreamFrame(id, refusal));
      return true;
    }
    const s = new ServerStream(id, this, this.#peerWindow, o.streamWindow);
    const declared = fields.headers['content-length'];
    if (declared !== undefined) {
      if (!/^\d{1,15}$/.test(declared)) {
        this.#ended(id, Ended.ByUs);
        this.#batch();
        this.#send(rstStreamFrame(id, PROTOCOL_ERROR));
        return true;
      }
      s.declaredLength = Number(declared);
    }
    this.#streams.add(s);
    this.#idleSince = 0;
    try {
      this.owner.stream(s, fields.headers);
    } catch {
      // A handler that throws loses its stream, not the connection (nor the process).
      this.reset(s, INTERNAL_ERROR);
      return this.#error === undefined;
    }
    if (endStream && !s.closed) this.#remoteEnd(s);
    return this.#error === undefined;
  }

  /** PRIORITY: its signal is not used (RFC 9113 §5.3.2), its form is checked (§5.3.1, §6.3). */
  #priority(p: Buffer): boolean {
    const id = this.#stream;
    if (id === 0) return this.#connectionError(PROTOCOL_ERROR, 'PRIORITY on stream 0');
    if (p.length !== 5) return this.#priorityError(id, FRAME_SIZE_ERROR, 'PRIORITY of a wrong length');
    if ((p.readUInt32BE(0) & MAX_WINDOW) === id) return this.#priorityError(id, PROTOCOL_ERROR, 'a stream depending on itself');
    return this.#spend(0, 1, 'PRIORITY');
  }

  /**
   * A PRIORITY frame's stream error: an open stream is reset, a closed one named by RST_STREAM; an
   * idle one (past the client's last, or an even id: streams we never open) may not be (RFC 9113
   * §6.4), so the error is the connection's.
   */
  #priorityError(id: number, code: number, why: string): boolean {
    const s = this.#streams.get(id);
    if (s !== undefined) return this.#streamError(s, code, why);
    if (id > this.#seenId || (id & 1) === 0) return this.#connectionError(code, why);
    return this.#resetClosed(id, code, 'PRIORITY');
  }

  #rstStream(p: Buffer): boolean {
    if (this.#stream === 0 || this.#stream > this.#seenId) return this.#connectionError(PROTOCOL_ERROR, `RST_STREAM on stream ${this.#stream}`);
    if (p.length !== 4) return this.#connectionError(FRAME_SIZE_ERROR, 'RST_STREAM of a wrong length');
    const s = this.#streams.get(this.#stream);
    const code = p.readUInt32BE(0);
    if (s === undefined) return true; // a stream closed already: its reset crossed our end
    this.#close(s, code, true);
    // Rapid reset: every stream the client resets while open is counted, NO_ERROR too (a stream
    // opened and reset with NO_ERROR in a loop costs a handler's start as much as any other).
    return this.#spend(1, 0, 'RST_STREAM');
  }

  #settings(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (this.#flags & ACK) return p.length === 0 || this.#connectionError(FRAME_SIZE_ERROR, 'a SETTINGS ACK with a payload');
    if (p.length % 6 !== 0) return this.#connectionError(FRAME_SIZE_ERROR, 'SETTINGS of a wrong length');
    if (!this.#spend(0, 1, 'SETTINGS')) return false;
    for (let at = 0; at < p.length; at += 6) {
      if (!this.#setting(p.readUInt16BE(at), p.readUInt32BE(at + 2))) return false;
    }
    if (!this.#settingsSeen) {
      this.#settingsSeen = true;
      clearTimeout(this.#timer);
      this.#armIdle();
    }
    this.#send(frame(SETTINGS, ACK, 0));
    this.#flushAll();
    return this.#error === undefined;
  }

  #setting(id: number, v: number): boolean {
    switch (id) {
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
      case SETTINGS_HEADER_TABLE_SIZE:
        // We never index, but a decoder whose table the SETTINGS changed expects the next block
        // to say so (RFC 7541 §4.2): it begins with a size update, to 0.
        this.#tableSizeUpdate = true;
        return true;
      default: return true; // advisory or unknown
    }
  }

  #ping(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'PING on a stream');
    if (p.length !== 8) return this.#connectionError(FRAME_SIZE_ERROR, 'PING of a wrong length');
    if ((this.#flags & ACK) !== 0) return true;
    if (!this.#spend(0, 1, 'PING')) return false;
    this.#send(frame(PING, ACK, 0, p));
    return true;
  }

  /** The client's GOAWAY: it takes no stream of ours (we open none); its own streams finish. */
  #goawayFrom(p: Buffer): boolean {
    if (this.#stream !== 0) return this.#connectionError(PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (p.length < 8) return this.#connectionError(FRAME_SIZE_ERROR, 'GOAWAY too short');
    if (p.readUInt32BE(4) !== NO_ERROR) this.#fail('the client sent GOAWAY with an error');
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
    if (this.#stream > this.#seenId) return this.#connectionError(PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${this.#stream}`);
    const s = this.#streams.get(this.#stream);
    if (s === undefined) return true;
    if (inc === 0) return this.#streamError(s, PROTOCOL_ERROR, 'a WINDOW_UPDATE of 0');
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return this.#streamError(s, FLOW_CONTROL_ERROR, 'a stream window over 2^31-1');
    if (s.linked) this.flush(s);
    return true;
  }

  #flushAll(): void {
    for (let s = this.#blocked.first, next; s !== undefined; s = next) {
      next = s.linkNext;
      this.flush(s);
      if (next !== undefined && !next.linked) next = this.#blocked.first;
    }
  }
}
