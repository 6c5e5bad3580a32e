// The strict HTTP/1.1 request-head parser of the fast path (docs/architecture.md, "ingress/http1/"):
// it reads, byte by byte and across reads split anywhere, the one shape of head that inference
// clients send, and says "hand to node:http" at the first byte of anything else. It refuses
// nothing itself: node:http (llhttp) reads every head outside the subset, so what is malformed is
// answered as it always was (ingress/client-errors.ts), and whatever this parser accepts, llhttp
// reads the same way (test/fuzz/http1-head.test.ts checks it against llhttp).
//
// The subset (RFC 9112 §3, §5, §6.3; anything else is handed off):
// - request line `GET|POST SP origin-form SP HTTP/1.1 CRLF`, one SP each; the target starts
//   with "/" and holds only RFC 3986 pchar, "/" and "?" (no "#", no byte ≥ 0x80), at most
//   server.maxUrlBytes bytes. HTTP/1.0 is handed off (its keep-alive and Host rules differ).
// - header lines `token ":" OWS value OWS CRLF`: name of tchar (RFC 9110 §5.6.2), the colon right
//   after it (whitespace before it, RFC 9112 §5.1, handed off), value of HTAB, SP, VCHAR and
//   obs-text (0x80–0xFF, which llhttp accepts), OWS trimmed as llhttp trims it. A line starting
//   with SP or HTAB (obs-fold, §5.2), a bare CR or LF anywhere (§2.2), any other control byte or
//   DEL: handed off at that byte.
// - framing: no Transfer-Encoding (chunked bodies go to node:http), at most one Content-Length of
//   1–15 digits (leading zeros read as llhttp reads them; § 8.6 of RFC 9110), none means no body.
// - exactly one Host (§3.2); Connection, one field, exactly `keep-alive` or `close`; Expect, one
//   field, exactly `100-continue` (the fast path writes the 100 itself, as node:http does); no
//   Upgrade and no Proxy-Connection (llhttp reads that one as Connection); no HTAB in
//   Content-Length, Connection or Expect (llhttp reads the first two its own way); no other name of
//   KNOWN_NAMES twice (node:http keeps the first of some and joins others with ", ": Node's
//   lib/_http_incoming.js matchKnownFields; one of each leaves nothing to decide).
// - at most server.maxHeaderCount fields and server.maxHeaderBytes bytes from the request line to
//   the blank line inclusive (node:http counts fewer of them, so it accepts all we accept).
// All names and values are case-insensitive where RFC 9110 says so; nothing else is.
//
// Per request nothing is allocated: the reading is offsets into the bytes (the read buffer when
// the head came in one read, else the parser's own copy), header names are recognised from a
// table of the ones the gateway reads, and a value becomes a string only when asked for.

/** What feed() says. */
export const PARTIAL = 0;
export const ACCEPTED = 1;
export const HAND_OFF = 2;
export type Verdict = typeof PARTIAL | typeof ACCEPTED | typeof HAND_OFF;

/** Why a head was handed to node:http (HeadParser.handOff), by number; the names for logs and tests. */
export const HAND_OFF_REASONS = [
  '', 'method', 'target', 'version', 'url-too-long', 'field-name', 'field-value', 'bare-cr', 'bare-lf',
  'obs-fold', 'head-too-large', 'too-many-fields', 'content-length', 'transfer-encoding', 'connection',
  'proxy-connection', 'upgrade', 'expect', 'host', 'repeated-field',
] as const;
export type HandOffReason = (typeof HAND_OFF_REASONS)[number];
const R_METHOD = 1, R_TARGET = 2, R_VERSION = 3, R_URL = 4, R_NAME = 5, R_VALUE = 6, R_CR = 7, R_LF = 8, R_FOLD = 9,
  R_HEAD = 10, R_COUNT = 11, R_CL = 12, R_TE = 13, R_CONN = 14, R_PCONN = 15, R_UPGRADE = 16, R_EXPECT = 17, R_HOST = 18, R_REPEAT = 19;

/** The header names the gateway or the framing reads, by id (HeadParser.known); 0 is any other. */
export const KNOWN_NAMES = [
  '', 'host', 'content-length', 'transfer-encoding', 'connection', 'proxy-connection', 'upgrade', 'expect',
  'content-type', 'content-encoding', 'inference-header-content-length', 'authorization', 'grpc-timeout',
  'traceparent', 'tracestate', 'x-request-id', 'accept', 'accept-encoding', 'user-agent',
] as const;
export type KnownName = (typeof KNOWN_NAMES)[number];
const H_HOST = 1, H_CL = 2, H_TE = 3, H_CONN = 4, H_PCONN = 5, H_UPGRADE = 6, H_EXPECT = 7;

/** Known names by length: [id, lower-case bytes] pairs, compared with ASCII letters folded. */
const BY_LENGTH: (readonly [number, Buffer])[][] = [];
KNOWN_NAMES.forEach((name, id) => {
  if (id === 0) return;
  (BY_LENGTH[name.length] ??= []).push([id, Buffer.from(name, 'latin1')]);
});

/** tchar (RFC 9110 §5.6.2). */
const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TCHAR[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TCHAR[c] = TCHAR[c + 0x20] = 1;
/** A target's bytes after its "/": pchar, "/" and "?" (RFC 3986 §3.3, §3.4). */
const TARGET = new Uint8Array(256);
for (const c of "-._~!$&'()*+,;=:@/?%") TARGET[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TARGET[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TARGET[c] = TARGET[c + 0x20] = 1;
/** field-content bytes (RFC 9110 §5.5): HTAB, SP, VCHAR, obs-text. */
const VALUE = new Uint8Array(256).fill(1);
for (let c = 0; c < 0x20; c++) VALUE[c] = 0;
VALUE[0x09] = 1;
VALUE[0x7f] = 0;

const CR = 0x0d, LF = 0x0a, SP = 0x20, HTAB = 0x09, COLON = 0x3a, SLASH = 0x2f;
const GET = Buffer.from('GET ', 'latin1');
const POST = Buffer.from('POST ', 'latin1');
const VERSION = Buffer.from('HTTP/1.1', 'latin1');
const KEEP_ALIVE = Buffer.from('keep-alive', 'latin1');
const CLOSE = Buffer.from('close', 'latin1');
const CONTINUE = Buffer.from('100-continue', 'latin1');

// Where the scan is, within a line.
const S_METHOD = 0, S_TARGET = 1, S_VERSION = 2, S_LINE_LF = 3, S_NAME = 4, S_VALUE = 5, S_END_LF = 6;

export interface HeadLimits {
  /** server.maxHeaderBytes: the request line to the blank line, inclusive. */
  readonly maxHeaderBytes: number;
  /** server.maxHeaderCount */
  readonly maxHeaderCount: number;
  /** server.maxUrlBytes */
  readonly maxUrlBytes: number;
}

/**
 * One connection's request head: fed the bytes of each read until it says ACCEPTED (the
 * reading below is valid until the next feed) or HAND_OFF (the bytes go to node:http: carried()
 * and then the rest of the read from `start`). Offsets are relative to `base` in `bytes`.
 */
export class HeadParser {
  // ---- the reading, once ACCEPTED
  /** The bytes the offsets point into: the read buffer, or this parser's copy of a split head. */
  bytes: Buffer = EMPTY;
  /** Where the head starts in `bytes`; every offset below is relative to it. */
  base = 0;
  /** 'GET' or 'POST' */
  method: 'GET' | 'POST' = 'GET';
  targetStart = 0;
  targetEnd = 0;
  fieldCount = 0;
  /** Per field i: name start, name end, value start, value end (OWS trimmed), at 4i…4i+3. */
  readonly fields: Int32Array;
  /** Per field: its id in KNOWN_NAMES (0: another name). */
  readonly known: Uint8Array;
  /** The declared body length; 0 without Content-Length. */
  contentLength = 0;
  keepAlive = true;
  /** Expect: 100-continue: the fast path writes `HTTP/1.1 100 Continue` before reading the body. */
  expectContinue = false;
  /** ACCEPTED: where the body starts in the buffer last fed (the head's end in it). */
  bodyStart = 0;
  /** ACCEPTED: the head's length in bytes, from the request line to the blank line inclusive. */
  headBytes = 0;
  /** HAND_OFF: why (an index of HAND_OFF_REASONS). */
  handOff = 0;

  // ---- the scan, across reads
  private state = S_METHOD;
  /** Head bytes seen so far (the offset of the next one). */
  private seen = 0;
  /** S_METHOD and S_VERSION: the literal matched and how far. */
  private literal: Buffer = EMPTY;
  private matched = 0;
  private lineStart = 0;
  private colon = 0;
  private hosts = 0;
  private connections = 0;
  private expects = 0;
  /** Bit i: a field named KNOWN_NAMES[i] was seen. */
  private names = 0;
  /** A head split across reads is copied here (grown as needed, up to maxHeaderBytes). */
  private held: Buffer = EMPTY;
  /** Head bytes of earlier reads, in `held` (carried()). */
  private carriedBytes = 0;

  constructor(private readonly limits: HeadLimits) {
    this.fields = new Int32Array(4 * limits.maxHeaderCount);
    this.known = new Uint8Array(limits.maxHeaderCount);
  }

  /** HAND_OFF: the head's bytes from earlier reads, to go to node:http before the current read's. */
  carried(): Buffer {
    return this.held.subarray(0, this.carriedBytes);
  }

  /** HAND_OFF: why, by name. */
  get handOffReason(): HandOffReason {
    return HAND_OFF_REASONS[this.handOff]!;
  }

  /**
   * Reads head bytes from buf[start, end): PARTIAL (all taken, more needed), ACCEPTED (the body
   * starts at `bodyStart`) or HAND_OFF. A feed after ACCEPTED or HAND_OFF begins a new head.
   */
  feed(buf: Buffer, start: number, end: number): Verdict {
    if (this.seen === 0) return this.first(buf, start, end);
    const from = this.seen;
    const take = Math.min(end - start, this.limits.maxHeaderBytes - from);
    this.carriedBytes = from;
    this.room(from + take);
    buf.copy(this.held, from, start, start + take);
    const v = this.scan(this.held, 0, from, from + take);
    if (v === ACCEPTED) {
      this.bodyStart = start + (this.headBytes - from);
      this.bytes = this.held;
      this.base = 0;
    } else if (v === PARTIAL && this.seen === this.limits.maxHeaderBytes) {
      return this.stop(R_HEAD); // a head of the bound would have ended at its last byte
    }
    return v;
  }

  /** The value of the field named `id` (KNOWN_NAMES: each comes at most once), or undefined. */
  value(id: number): string | undefined {
    for (let i = 0; i < this.fieldCount; i++) if (this.known[i] === id) return this.fieldValue(i);
    return undefined;
  }

  /** Field i's value as node:http's string (latin1, one char per byte). */
  fieldValue(i: number): string {
    return latin1Slice.call(this.bytes, this.base + this.fields[4 * i + 2]!, this.base + this.fields[4 * i + 3]!);
  }

  /** Field i's name, lower-cased (allocates: for fields the fast path does not know). */
  name(i: number): string {
    const id = this.known[i]!;
    if (id !== 0) return KNOWN_NAMES[id]!;
    return latin1Slice.call(this.bytes, this.base + this.fields[4 * i]!, this.base + this.fields[4 * i + 1]!).toLowerCase();
  }

  /**
   * The head has been read into strings: the read it lies in is not kept (a fast-path read may be
   * a page of 1 MiB, buffers/reads.ts, and a connection may then idle for its keep-alive bound).
   */
  letGo(): void {
    this.bytes = this.held;
    this.base = 0;
  }

  /** The request target as node:http's req.url. */
  target(): string {
    return latin1Slice.call(this.bytes, this.base + this.targetStart, this.base + this.targetEnd);
  }

  /** A new head's first read: scanned where it lies; copied only when it does not end there. */
  private first(buf: Buffer, start: number, end: number): Verdict {
    this.reset();
    const stop = Math.min(end, start + this.limits.maxHeaderBytes);
    const v = this.scan(buf, start, 0, stop - start);
    if (v === ACCEPTED) {
      this.bytes = buf;
      this.base = start;
      this.bodyStart = start + this.headBytes;
      return v;
    }
    if (v === HAND_OFF) return v;
    if (this.seen === this.limits.maxHeaderBytes) return this.stop(R_HEAD);
    this.room(this.seen);
    buf.copy(this.held, 0, start, end);
    return PARTIAL;
  }

  private reset(): void {
    this.state = S_METHOD;
    this.seen = 0;
    this.matched = 0;
    this.lineStart = 0;
    this.fieldCount = 0;
    this.contentLength = -1;
    this.keepAlive = true;
    this.expectContinue = false;
    this.hosts = this.connections = this.expects = this.names = 0;
    this.carriedBytes = 0;
    this.handOff = 0;
  }

  /** `held` of at least n bytes (doubling from 1 KiB: most split heads are small). */
  private room(n: number): void {
    if (this.held.length >= n) return;
    let size = Math.max(1024, this.held.length * 2);
    while (size < n) size *= 2;
    const grown = Buffer.allocUnsafe(Math.min(size, this.limits.maxHeaderBytes));
    this.held.copy(grown, 0, 0, this.seen);
    this.held = grown;
  }

  private stop(reason: number): typeof HAND_OFF {
    this.handOff = reason;
    this.seen = 0;
    return HAND_OFF;
  }

  /** stop() for the checks that answer whether the head goes on. */
  private stopped(reason: number): false {
    this.stop(reason);
    return false;
  }

  /** The method's byte at offset `i`: the state after it, or -1 when it hands the head off. */
  private methodByte(c: number, i: number): number {
    if (this.matched === 0) this.literal = c === 0x47 ? GET : POST;
    if (c !== this.literal[this.matched]) {
      this.stop(R_METHOD);
      return -1;
    }
    if (++this.matched < this.literal.length) return S_METHOD;
    this.method = this.literal === GET ? 'GET' : 'POST';
    this.targetStart = i + 1;
    return S_TARGET;
  }

  /**
   * Scans head bytes at offsets [from, to) of the head, found at b[base + offset]. The states
   * follow the grammar above; a byte outside it hands the head off there.
   */
  private scan(b: Buffer, base: number, from: number, to: number): Verdict {
    let state = this.state;
    for (let i = from; i < to; i++) {
      const c = b[base + i]!;
      switch (state) {
        case S_METHOD:
          state = this.methodByte(c, i);
          if (state < 0) return HAND_OFF;
          break;
        case S_TARGET:
          if (i === this.targetStart) {
            if (c !== SLASH) return this.stop(R_TARGET);
          } else if (c === SP) {
            this.targetEnd = i;
            this.matched = 0;
            state = S_VERSION;
          } else if (TARGET[c] === 0) {
            return this.stop(R_TARGET);
          } else if (i - this.targetStart >= this.limits.maxUrlBytes) {
            return this.stop(R_URL);
          } else {
            // The rest of the run at once, up to the bound (the per-byte switch costs 2–3× per byte).
            const cap = Math.min(to, this.targetStart + this.limits.maxUrlBytes) - 1;
            while (i < cap && TARGET[b[base + i + 1]!] === 1) i++;
          }
          break;
        case S_VERSION:
          if (this.matched === VERSION.length) {
            if (c !== CR) return this.stop(c === LF ? R_LF : R_VERSION);
            state = S_LINE_LF;
          } else if (c !== VERSION[this.matched++]) {
            return this.stop(R_VERSION);
          }
          break;
        case S_LINE_LF:
          if (c !== LF) return this.stop(R_CR);
          this.lineStart = i + 1;
          state = S_NAME;
          break;
        case S_NAME:
          if (TCHAR[c] === 1) {
            while (i + 1 < to && TCHAR[b[base + i + 1]!] === 1) i++;
            break;
          }
          if (i === this.lineStart) {
            if (c === CR) {
              state = S_END_LF;
              break;
            }
            return this.stop(c === SP || c === HTAB ? R_FOLD : c === LF ? R_LF : R_NAME);
          }
          if (c !== COLON) return this.stop(R_NAME);
          if (this.fieldCount === this.limits.maxHeaderCount) return this.stop(R_COUNT);
          this.colon = i;
          state = S_VALUE;
          break;
        case S_VALUE:
          if (VALUE[c] === 1) {
            while (i + 1 < to && VALUE[b[base + i + 1]!] === 1) i++;
            break;
          }
          if (c !== CR) return this.stop(c === LF ? R_LF : R_VALUE);
          if (!this.field(b, base, i)) return HAND_OFF;
          state = S_LINE_LF;
          break;
        case S_END_LF:
          if (c !== LF) return this.stop(R_CR);
          this.seen = i + 1;
          this.state = S_METHOD;
          return this.ended();
        default:
          throw new Error(`head scan state ${state}`);
      }
    }
    this.seen = to;
    this.state = state;
    return PARTIAL;
  }

  /** A header line ended at `cr` (its name ends at this.colon): recorded, and its meaning checked. */
  private field(b: Buffer, base: number, cr: number): boolean {
    let vs = this.colon + 1;
    while (vs < cr && (b[base + vs] === SP || b[base + vs] === HTAB)) vs++;
    let ve = cr;
    while (ve > vs && (b[base + ve - 1] === SP || b[base + ve - 1] === HTAB)) ve--;
    const n = this.fieldCount++;
    const f = 4 * n;
    this.fields[f] = this.lineStart;
    this.fields[f + 1] = this.colon;
    this.fields[f + 2] = vs;
    this.fields[f + 3] = ve;
    const id = knownName(b, base + this.lineStart, base + this.colon);
    this.known[n] = id;
    if (id > H_EXPECT) { // the ones up to Expect have rules of their own below
      if ((this.names & (1 << id)) !== 0) return this.stopped(R_REPEAT);
      this.names |= 1 << id;
    }
    // llhttp reads Content-Length and Connection tokens itself and takes HTAB for neither OWS nor
    // a delimiter there: `Content-Length: 7<HTAB>` is refused, `Connection: close<HTAB>` read as
    // keep-alive (found by test/fuzz/http1-head.test.ts). So no HTAB in the fields it reads.
    if ((id === H_CL || id === H_CONN || id === H_EXPECT) && hasTab(b, base + this.colon, base + cr)) {
      return this.stopped(id === H_CL ? R_CL : id === H_CONN ? R_CONN : R_EXPECT);
    }
    switch (id) {
      case H_HOST: this.hosts++; return true;
      case H_CL: return this.contentLengthOf(b, base + vs, base + ve);
      case H_TE: return this.stopped(R_TE);
      case H_PCONN: return this.stopped(R_PCONN);
      case H_UPGRADE: return this.stopped(R_UPGRADE);
      case H_CONN:
        if (this.connections++ === 0 && equalsFolded(b, base + vs, base + ve, KEEP_ALIVE)) return true;
        if (this.connections === 1 && equalsFolded(b, base + vs, base + ve, CLOSE)) {
          this.keepAlive = false;
          return true;
        }
        return this.stopped(R_CONN);
      case H_EXPECT:
        if (this.expects++ === 0 && equalsFolded(b, base + vs, base + ve, CONTINUE)) {
          this.expectContinue = true;
          return true;
        }
        return this.stopped(R_EXPECT);
      default: return true;
    }
  }

  /** Content-Length: one field of 1–15 digits (below 2^53, so a number holds it exactly). */
  private contentLengthOf(b: Buffer, from: number, to: number): boolean {
    if (this.contentLength >= 0 || to === from || to - from > 15) return this.stopped(R_CL);
    let n = 0;
    for (let i = from; i < to; i++) {
      const d = b[i]! - 0x30;
      if (d < 0 || d > 9) return this.stopped(R_CL);
      n = n * 10 + d;
    }
    this.contentLength = n;
    return true;
  }

  /** The blank line has come: what the whole head must have. */
  private ended(): Verdict {
    if (this.hosts !== 1) return this.stop(R_HOST);
    if (this.contentLength < 0) this.contentLength = 0;
    this.headBytes = this.seen;
    this.seen = 0; // the next feed begins the next head
    return ACCEPTED;
  }
}

const EMPTY = Buffer.alloc(0);
/** Buffer's own latin1 decoder, without toString's argument checks (as json/reader.ts takes utf8Slice). */
const latin1Slice = (Buffer.prototype as unknown as { latin1Slice: (this: Uint8Array, start: number, end: number) => string }).latin1Slice;

/** Whether b[from, to) holds an HTAB. */
function hasTab(b: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (b[i] === HTAB) return true;
  return false;
}

/** The id of the name in b[from, to) in KNOWN_NAMES, letters folded; 0 when it is none of them. */
function knownName(b: Buffer, from: number, to: number): number {
  const candidates = BY_LENGTH[to - from];
  if (candidates === undefined) return 0;
  for (let i = 0; i < candidates.length; i++) if (equalsFolded(b, from, to, candidates[i]![1])) return candidates[i]![0];
  return 0;
}

/**
 * Whether b[from, to) is `lower` with ASCII letters in either case. Folding with | 0x20 is exact
 * here: `lower` holds letters, digits and "-" only, and no other tchar or field byte folds onto
 * one of those (0x0d folds onto "-", but a CR is never inside a field).
 */
function equalsFolded(b: Buffer, from: number, to: number, lower: Buffer): boolean {
  if (to - from !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) if ((b[from + i]! | 0x20) !== lower[i]) return false;
  return true;
}
