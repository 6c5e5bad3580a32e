// HTTP/2 framing (RFC 9113 §4, §6): frame types, flags, error codes and settings, the 9-octet frame
// header, and a reader that cuts a byte stream into frames wherever the reads split it.

export const DATA = 0x0;
export const HEADERS = 0x1;
export const PRIORITY = 0x2;
export const RST_STREAM = 0x3;
export const SETTINGS = 0x4;
export const PUSH_PROMISE = 0x5;
export const PING = 0x6;
export const GOAWAY = 0x7;
export const WINDOW_UPDATE = 0x8;
export const CONTINUATION = 0x9;

export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY_FLAG = 0x20;

/** Error codes (RFC 9113 §7). */
export const NO_ERROR = 0x0;
export const PROTOCOL_ERROR = 0x1;
export const INTERNAL_ERROR = 0x2;
export const FLOW_CONTROL_ERROR = 0x3;
export const STREAM_CLOSED = 0x5;
export const FRAME_SIZE_ERROR = 0x6;
export const REFUSED_STREAM = 0x7;
export const CANCEL = 0x8;
export const COMPRESSION_ERROR = 0x9;
export const ENHANCE_YOUR_CALM = 0xb;

/** Settings identifiers (RFC 9113 §6.5.2). */
export const SETTINGS_HEADER_TABLE_SIZE = 0x1;
export const SETTINGS_ENABLE_PUSH = 0x2;
export const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
export const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
export const SETTINGS_MAX_FRAME_SIZE = 0x5;
export const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

/** The largest flow-control window (RFC 9113 §6.9.1) and the smallest SETTINGS_MAX_FRAME_SIZE (§6.5.2). */
export const MAX_WINDOW = 0x7fffffff;
export const MIN_MAX_FRAME_SIZE = 16384;
export const MAX_MAX_FRAME_SIZE = 16777215;

/** The client connection preface (RFC 9113 §3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FRAME_HEADER_BYTES = 9;

/** Writes a frame header (RFC 9113 §4.1) at `at`; returns its end. */
export function writeFrameHeader(out: Buffer, at: number, length: number, type: number, flags: number, stream: number): number {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(stream, at + 5);
  return at + FRAME_HEADER_BYTES;
}

/** A whole frame with its payload in one buffer. */
export function frame(type: number, flags: number, stream: number, payload?: Uint8Array): Buffer {
  const n = payload?.length ?? 0;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
  writeFrameHeader(out, 0, n, type, flags, stream);
  if (payload !== undefined) out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** SETTINGS with `pairs` of [identifier, value] (RFC 9113 §6.5.1). */
export function settingsFrame(pairs: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(6 * pairs.length);
  pairs.forEach(([id, v], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(v, 6 * i + 2);
  });
  return frame(SETTINGS, 0, 0, payload);
}

/** WINDOW_UPDATE of `increment` on `stream` (0: the connection); nothing for an increment of 0 or less. */
export function windowUpdateFrame(stream: number, increment: number): Buffer {
  if (increment <= 0) return Buffer.alloc(0);
  return frame(WINDOW_UPDATE, 0, stream, u32(increment));
}

export function rstStreamFrame(stream: number, code: number): Buffer {
  return frame(RST_STREAM, 0, stream, u32(code));
}

/** GOAWAY with the last stream id the sender took and `code`. */
export function goawayFrame(lastStreamId: number, code: number): Buffer {
  const p = Buffer.allocUnsafe(8);
  p.writeUInt32BE(lastStreamId, 0);
  p.writeUInt32BE(code, 4);
  return frame(GOAWAY, 0, 0, p);
}

function u32(v: number): Buffer {
  const p = Buffer.allocUnsafe(4);
  p.writeUInt32BE(v, 0);
  return p;
}

/** What the reader hands on. DATA payloads come in pieces as they arrive; every other payload whole. */
export interface FrameSink {
  /** A frame's header was read; false stops the reading (a connection error was raised). */
  frameStart(length: number, type: number, flags: number, stream: number): boolean;
  /** A piece of the current DATA frame's payload (padding included: the sink strips it). */
  dataPiece(chunk: Buffer, from: number, to: number): void;
  /** The current frame is read to its end; `payload` is its whole payload unless it is DATA. */
  frameEnd(payload: Buffer | undefined): boolean;
}

/**
 * Cuts the connection's bytes into frames: a frame header split across reads is gathered in nine
 * octets of its own; a payload other than DATA is a view of the read when it lies whole in it, else
 * gathered (at most SETTINGS_MAX_FRAME_SIZE, which frameStart checks); DATA is passed on as it comes.
 */
export class FrameReader {
  readonly #header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  #headerHave = 0;
  /** Payload octets of the current frame still to come; -1 between frames. */
  #left = -1;
  #isData = false;
  #payload: Buffer | undefined;
  #payloadHave = 0;
  /** The payload is a view of the read it lies in (nothing to copy). */
  #view = false;
  #stopped = false;

  constructor(private readonly sink: FrameSink) {}

  /** Reads `chunk[0, end)` (the whole chunk by default). */
  push(chunk: Buffer, end = chunk.length): void {
    let at = 0;
    while (!this.#stopped && (at < end || this.#left === 0)) {
      if (this.#left < 0) {
        if (this.#headerHave === 0 && end - at >= FRAME_HEADER_BYTES) {
          // The usual case: the header lies whole in the read, and is read there.
          at += FRAME_HEADER_BYTES;
          if (!this.#start(chunk, at - FRAME_HEADER_BYTES, chunk, at, end)) return;
          continue;
        }
        const n = Math.min(FRAME_HEADER_BYTES - this.#headerHave, end - at);
        this.#header.set(chunk.subarray(at, at + n), this.#headerHave);
        this.#headerHave += n;
        at += n;
        if (this.#headerHave < FRAME_HEADER_BYTES) return;
        this.#headerHave = 0;
        if (!this.#start(this.#header, 0, chunk, at, end)) return;
        continue;
      }
      at = this.#take(chunk, at, end);
    }
  }

  /** The frame whose header is h[o, o + 9) starts; its payload from chunk[at, end). */
  #start(h: Buffer, o: number, chunk: Buffer, at: number, end: number): boolean {
    const length = (h[o]! << 16) | (h[o + 1]! << 8) | h[o + 2]!;
    const type = h[o + 3]!;
    const stream = ((h[o + 5]! << 24) | (h[o + 6]! << 16) | (h[o + 7]! << 8) | h[o + 8]!) & MAX_WINDOW;
    if (!this.sink.frameStart(length, type, h[o + 4]!, stream)) {
      this.#stopped = true;
      return false;
    }
    this.#left = length;
    this.#isData = type === DATA;
    this.#payloadHave = 0;
    this.#view = end - at >= length;
    this.#payload = this.#isData || length === 0 ? undefined
      : this.#view ? chunk.subarray(at, at + length) : Buffer.allocUnsafe(length);
    return true;
  }

  /** Takes what `chunk` holds of the current payload from `at`; ends the frame when it is whole. */
  #take(chunk: Buffer, at: number, end: number): number {
    const n = Math.min(this.#left, end - at);
    if (this.#isData) {
      if (n > 0) this.sink.dataPiece(chunk, at, at + n);
    } else if (n > 0 && !this.#view) {
      chunk.copy(this.#payload!, this.#payloadHave, at, at + n);
    }
    this.#payloadHave += n;
    this.#left -= n;
    if (this.#left === 0) {
      this.#left = -1;
      const payload = this.#payload;
      this.#payload = undefined;
      if (!this.sink.frameEnd(payload)) this.#stopped = true;
    }
    return at + n;
  }
}

/** Octets a FrameBatch copies rather than hands to the socket by reference (a frame, a small payload). */
export const BATCH_COPY_BYTES = 1024;
/** The slab a FrameBatch copies into: a new one when the last is full (the old goes with its writes). */
const BATCH_SLAB_BYTES = 16 * 1024;

/** What a FrameBatch writes to: a socket, or anything that takes buffers in order. */
export interface BatchTarget {
  write(chunk: Buffer): boolean;
}

/**
 * The octets one batch of a connection (one turn of the event loop) writes, gathered: frame headers,
 * small frames and small payloads are copied into a slab, and each run of them goes to the socket as
 * one buffer; a large payload goes by reference, after the run before it. A corked socket keeps an
 * entry (and its callback slot) per write and hands them on as one writev: the answer of a 64 B
 * call on the gRPC port was four writes, each an entry; gathered, a batch of answers is one. The
 * slab is written only past what was handed on, so a write in flight is never touched; a full slab
 * is left to the writes that hold views of it.
 */
export class FrameBatch {
  #slab = Buffer.allocUnsafe(0);
  /** The first octet not handed on yet, and the end of what is gathered. */
  #from = 0;
  #to = 0;

  constructor(private readonly target: BatchTarget) {}

  /** Octets gathered and not handed on yet. */
  get gathered(): number {
    return this.#to - this.#from;
  }

  /** Room for `n` more octets: the offset to write them at, in #slab. */
  #room(n: number): number {
    if (this.#to + n > this.#slab.length) {
      this.flush();
      this.#slab = Buffer.allocUnsafe(Math.max(BATCH_SLAB_BYTES, n));
      this.#from = this.#to = 0;
    }
    const at = this.#to;
    this.#to += n;
    return at;
  }

  /** A frame header (RFC 9113 §4.1), its payload to follow. */
  header(length: number, type: number, flags: number, stream: number): void {
    const at = this.#room(FRAME_HEADER_BYTES); // first: it may put a new slab in place
    writeFrameHeader(this.#slab, at, length, type, flags, stream);
  }

  /** A whole frame, its payload (payload[from, to)) copied. */
  frame(type: number, flags: number, stream: number, payload: Buffer, from = 0, to = payload.length): void {
    const n = to - from;
    const at = this.#room(FRAME_HEADER_BYTES + n);
    writeFrameHeader(this.#slab, at, n, type, flags, stream);
    // A whole buffer by TypedArray's set, cheaper than copy() (a call into C++) for a few octets.
    if (from === 0 && to === payload.length) this.#slab.set(payload, at + FRAME_HEADER_BYTES);
    else payload.copy(this.#slab, at + FRAME_HEADER_BYTES, from, to);
  }

  /** Octets in order: copied when small (BATCH_COPY_BYTES), else handed on by reference after what is gathered. */
  push(chunk: Buffer): void {
    if (chunk.length <= BATCH_COPY_BYTES) {
      const at = this.#room(chunk.length); // first: it may put a new slab in place
      this.#slab.set(chunk, at);
      return;
    }
    this.flush();
    this.target.write(chunk);
  }

  /** Hands what is gathered to the socket, as one buffer. */
  flush(): void {
    if (this.#to === this.#from) return;
    const from = this.#from;
    this.#from = this.#to;
    this.target.write(this.#slab.subarray(from, this.#to));
  }
}
