// A byte-level JSON reader with rapidjson's grammar and error messages, because Triton parses
// request bodies with rapidjson (NaN/Infinity literals accepted, no UTF-8 validation) and reports
// "failed to parse the request JSON buffer: <reason> at <offset>" (docs/architecture.md#json-bodies).
//
// It builds a light tree: objects keep their members in order (duplicates kept, lookups take the
// first, as rapidjson's FindMember does), scalars keep their source range, and arrays keep only
// their container children. Scalars inside arrays never become JS values: numbers are read once,
// while they are validated, into one Float64Array per document (JsonArray.numbers), from which a
// tensor's `data` is copied straight into the outgoing gRPC message (decode/json-data.ts); other
// arrays are re-read from their byte range there. A 30 MB body never becomes millions of JS values.

import { type NumberValue, readNumber, SCAN_DOUBLE, SCAN_INTEGER, scanned, scanNumber } from './number-parse';

export type JsonNode = JsonObject | JsonArray | JsonString | JsonNumber | JsonBool | JsonNull;

export interface JsonObject { readonly kind: 'object'; readonly start: number; readonly members: readonly JsonMember[] }
export interface JsonMember { readonly key: string; readonly value: JsonNode }
export interface JsonArray {
  readonly kind: 'array';
  readonly start: number;
  /** Offset just past the closing bracket. */
  readonly end: number;
  /** Direct children that are objects or arrays, in order; scalars are not materialised. */
  readonly containers: readonly (JsonObject | JsonArray)[];
  /** Number of direct children (scalars included). */
  readonly length: number;
  /**
   * The values of an array of numbers (nested arrays of numbers included), in document order, read
   * while validating; undefined when an element is anything else or a NaN, or the document's pool
   * is full (then `data` is re-read from its bytes).
   */
  readonly numbers: NumberRun | undefined;
}

/** Values of a JSON array of numbers: pool.values[start, end), exactly as rapidjson reads them. */
export interface NumberRun {
  readonly pool: NumberPool;
  readonly start: number;
  readonly end: number;
  /** Every token was one rapidjson holds as an integer, below 2^53: the values are those integers. */
  readonly integers: boolean;
}

/** One document's number values, one growing array for all its arrays (their runs are ranges of it). */
export interface NumberPool {
  values: Float64Array;
  length: number;
}
export interface JsonString { readonly kind: 'string'; readonly start: number; readonly end: number; readonly value: string }
export interface JsonNumber {
  readonly kind: 'number';
  readonly start: number;
  readonly end: number;
  /** No fraction, no exponent, not NaN/Infinity: rapidjson stores it as an integer if it fits 64 bits. */
  readonly integer: boolean;
}
export interface JsonBool { readonly kind: 'bool'; readonly value: boolean }
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
export interface JsonNull { readonly kind: 'null' }

export class JsonSyntaxError extends Error {
  constructor(readonly reason: string, readonly offset: number) {
    super(`${reason} at ${offset}`);
  }
}

/** Deeper than this and we refuse rather than recurse further (rapidjson has no limit; see docs/differences.md). */
export const MAX_CONTAINER_DEPTH = 10_000;

/**
 * Where JSON text first nests deeper than `max` arrays/objects, or -1: a scan without recursion,
 * for the decoders that hand the text to JSON.parse (V1, declarative). JSON.parse copes with any
 * depth; the code walking its result, and JSON.stringify, do not (a stack overflow near 10,000
 * levels on Node 24), so the bound is checked on the text first.
 */
export function nestedTooDeepAt(text: string, max = MAX_CONTAINER_DEPTH): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return i;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return -1;
}

const WS = new Uint8Array(256);
WS[0x20] = WS[0x09] = WS[0x0a] = WS[0x0d] = 1;

/**
 * Where the root value of a document ended, for a body that may carry more after its JSON (the
 * binary extension without Inference-Header-Content-Length). Given to parseJson, it is filled in
 * and bytes after the root are not an error; `trailing` holds the error they would have been.
 */
export interface JsonExtent {
  /** Offset just past the root value (before any blank after it). */
  rootEnd: number;
  /** Set when something other than blanks or a NUL follows the root: rapidjson's error for it. */
  trailing: JsonSyntaxError | undefined;
}

export function parseJson(b: Uint8Array, start = 0, end = b.length, extent?: JsonExtent): JsonNode {
  // rapidjson skips a UTF-8 byte order mark and reads a NUL byte as the end of the stream, so
  // Triton accepts a header followed by NULs (e.g. binary tensor bytes starting with zeros).
  const bom = b[start] === 0xef && b[start + 1] === 0xbb && b[start + 2] === 0xbf ? 3 : 0;
  const r = new Reader(b, start + bom, end);
  r.skipWs();
  const root = readRoot(r, start);
  const rootEnd = r.pos;
  r.skipWs();
  let trailing: JsonSyntaxError | undefined;
  if (r.pos < end && b[r.pos] !== 0) trailing = new JsonSyntaxError('The document root must not be followed by other values.', r.pos - start);
  if (extent === undefined) {
    if (trailing !== undefined) throw trailing;
  } else {
    extent.rootEnd = rootEnd;
    extent.trailing = trailing;
  }
  return root;
}

/**
 * One value at `start` of a document read by someone else (decode/v2-header-known.ts): as
 * parseJson, without a byte order mark or blanks before it, and what follows it is the caller's
 * (`extent.rootEnd` is where it ended; `trailing` is left undefined).
 */
export function parseJsonValue(b: Uint8Array, start: number, end: number, extent: JsonExtent): JsonNode {
  const r = new Reader(b, start, end);
  const root = readRoot(r, start);
  extent.rootEnd = r.pos;
  extent.trailing = undefined;
  return root;
}

/** The root value at r.pos; offsets in errors count from `start`. */
function readRoot(r: Reader, start: number): JsonNode {
  if (r.pos >= r.end || r.b[r.pos] === 0) throw new JsonSyntaxError('The document is empty.', r.pos - start);
  try {
    return r.value(0);
  } catch (err) {
    if (err instanceof RangeError) throw new JsonSyntaxError('Nesting too deep.', r.pos - start); // call stack exhausted
    throw err;
  } finally {
    memberStack.length = 0; // what a failed read left
    containerStack.length = 0;
  }
}

const NO_MEMBERS: readonly JsonMember[] = Object.freeze([]);
const NO_CONTAINERS: readonly (JsonObject | JsonArray)[] = Object.freeze([]);
/** The members of the objects being read, innermost last (parsing is synchronous: one stack serves every document). */
const memberStack: JsonMember[] = [];
/** The objects and arrays in the arrays being read, as memberStack. */
const containerStack: (JsonObject | JsonArray)[] = [];

function takeMembers(base: number): JsonMember[] {
  const members = memberStack.slice(base);
  memberStack.length = base;
  return members;
}

class Reader {
  pos: number;
  /** Values of the numbers met in arrays so far. */
  readonly pool: NumberPool = { values: takeSpare(), length: 0 };
  /**
   * At most a quarter as many values as the document has bytes (8 bytes each: twice the document),
   * so that a body of "0,0,0,…" cannot make the pool four times its size; past it, arrays are
   * re-read from their bytes instead.
   */
  readonly poolLimit: number;
  readonly view: DataView;
  /** Offsets in errors count from here (the start of the JSON, before any byte order mark). */
  readonly origin: number;
  constructor(readonly b: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    this.poolLimit = Math.max(64, Math.floor((end - start) / 4));
    this.origin = start - (start > 0 && b[start - 1] === 0xbf && b[start - 2] === 0xbb && b[start - 3] === 0xef ? 3 : 0);
  }

  fail(reason: string, at = this.pos): never {
    throw new JsonSyntaxError(reason, at - this.origin);
  }

  skipWs(): void {
    const b = this.b;
    let p = this.pos;
    while (p < this.end && WS[b[p]!] === 1) p++;
    this.pos = p;
  }

  peek(): number {
    return this.pos < this.end ? this.b[this.pos]! : -1;
  }

  value(depth: number): JsonNode {
    const c = this.peek();
    switch (c) {
      case 0x7b: return this.object(depth + 1); // {
      case 0x5b: return this.array(depth + 1); // [
      case 0x22: { // "
        const start = this.pos;
        this.skipString();
        return stringNode(this.b, start, this.pos);
      }
      case 0x74: this.literal('true'); return { kind: 'bool', value: true };
      case 0x66: this.literal('false'); return { kind: 'bool', value: false };
      case 0x6e: this.literal('null'); return { kind: 'null' };
      default: {
        const start = this.pos;
        const integer = this.number();
        return { kind: 'number', start, end: this.pos, integer };
      }
    }
  }

  literal(word: string): void {
    const at = this.pos;
    for (let i = 0; i < word.length; i++) {
      if (this.b[this.pos + i] !== word.charCodeAt(i) || this.pos + i >= this.end) this.fail('Invalid value.', at);
    }
    this.pos += word.length;
  }

  object(depth: number): JsonObject {
    if (depth > MAX_CONTAINER_DEPTH) this.fail('Nesting too deep.');
    const start = this.pos;
    this.pos++; // {
    this.skipWs();
    if (this.peek() === 0x7d) {
      this.pos++;
      return { kind: 'object', start, members: NO_MEMBERS };
    }
    // Members gather on the shared stack (a nested object's above them, gone before the next
    // member), then leave it as one array of their number: no growing array per object.
    const base = memberStack.length;
    for (;;) {
      if (this.peek() !== 0x22) this.fail('Missing a name for object member.');
      const key = this.string();
      this.skipWs();
      if (this.peek() !== 0x3a) this.fail('Missing a colon after a name of object member.');
      this.pos++;
      this.skipWs();
      memberStack.push({ key, value: this.value(depth) });
      this.skipWs();
      const c = this.peek();
      if (c === 0x2c) {
        this.pos++;
        this.skipWs();
      } else if (c === 0x7d) {
        this.pos++;
        return { kind: 'object', start, members: takeMembers(base) };
      } else {
        this.fail("Missing a comma or '}' after an object member.");
      }
    }
  }

  array(depth: number): JsonArray {
    if (depth > MAX_CONTAINER_DEPTH) this.fail('Nesting too deep.');
    // The node is built in place: fewer locals, a smaller frame for the one function deep nesting
    // repeats. With start, containers and length as locals too, nested arrays exhausted the stack
    // ~5,400 levels deep; this way ~5,800, against ~6,000 before the number runs (fresh process).
    const node: Mutable<JsonArray> = { kind: 'array', start: this.pos, end: 0, containers: NO_CONTAINERS, length: 0, numbers: undefined };
    const base = containerStack.length; // as the members of objects (takeMembers)
    // The pool's length at the start, × 4, plus RUN while every element is a number the pool
    // holds or an array of them, plus INTEGERS while every one of them is an exact integer.
    let run = this.pool.length * 4 + RUN + INTEGERS;
    this.pos++; // [
    this.skipWs();
    if (this.peek() === 0x5d) {
      this.pos++;
    } else {
      for (;;) {
        const c = this.peek();
        if ((c >= 0x30 && c <= 0x39) || c === 0x2d) {
          run -= (run & 3) - (run & this.numbers(run & 3));
          node.length += this.count;
          if (this.closed) break;
          continue;
        }
        if (c === 0x7b) {
          containerStack.push(this.object(depth + 1));
          run -= run & 3;
        } else if (c === 0x5b) {
          const a = this.array(depth + 1);
          containerStack.push(a);
          run -= (run & 3) - (run & (a.numbers === undefined ? 0 : a.numbers.integers ? RUN + INTEGERS : RUN));
        } else {
          this.scalar();
          run -= run & 3;
        }
        node.length++;
        this.skipWs();
        const d = this.peek();
        if (d === 0x2c) {
          this.pos++;
          this.skipWs();
        } else if (d === 0x5d) {
          this.pos++;
          break;
        } else {
          this.fail("Missing a comma or ']' after an array element.");
        }
      }
    }
    node.end = this.pos;
    node.numbers = this.runOf(run);
    if (containerStack.length > base) {
      node.containers = containerStack.slice(base);
      containerStack.length = base;
    }
    return node;
  }

  /** The run of an array from its `run` state (see array()), or undefined. */
  runOf(run: number): NumberRun | undefined {
    return (run & RUN) === 0 ? undefined : { pool: this.pool, start: run >>> 2, end: this.pool.length, integers: (run & INTEGERS) !== 0 };
  }

  /** numbers(): how many elements it read, and whether it read the array's closing bracket. */
  count = 0;
  closed = false;

  /**
   * Validates the array elements from pos on while they are numbers, with their separators: the
   * bulk of a tensor's `data`, in one loop with its state in locals. Each number is read here, once
   * (scanNumber, or readNumber off its fast path), and its value appended to the pool while the
   * array is still a run (`run`). Stops after the closing bracket (closed), or before an element
   * that is not a number; returns `run` less what the numbers read took from it.
   */
  numbers(run: number): number {
    const b = this.b;
    const end = this.end;
    const pool = this.pool;
    let values = pool.values;
    let n = pool.length;
    const from = this.pos;
    let p = from;
    let count = 0;
    let closed = false;
    let separated = false;
    for (;;) {
      const q = scanNumber(b, this.view, p, end);
      let kind = scanned[1]!;
      let value = scanned[0]!;
      if (kind === SCAN_DOUBLE || kind === SCAN_INTEGER) {
        p = q;
      } else {
        // Off the fast path: the checked reader validates it (rapidjson's error if it is not a
        // number) and readNumber reads it.
        this.pos = p;
        this.number();
        const v = readNumber(b, p, this.pos, scratch);
        value = v.value;
        kind = v.integer && v.big === undefined ? SCAN_INTEGER : SCAN_DOUBLE;
        if (Number.isNaN(value)) run = 0; // its sign bit would not survive the pool
        p = this.pos;
      }
      count++;
      if (run !== 0) {
        if (n === values.length) {
          if (n >= this.poolLimit) run = 0;
          // Grown to what the rest of the document holds at this run's bytes per number.
          else values = growPool(pool, Math.min(this.poolLimit, Math.max(2 * n, n + Math.ceil((end - p) * count / (p - from)))));
        }
        if (run !== 0) {
          values[n++] = value;
          if (kind === SCAN_DOUBLE) run &= RUN;
        }
      }
      let d = p < end ? b[p]! : -1;
      while (d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) d = ++p < end ? b[p]! : -1;
      if (d === 0x2c) {
        d = ++p < end ? b[p]! : -1;
        while (d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) d = ++p < end ? b[p]! : -1;
        if ((d >= 0x30 && d <= 0x39) || d === 0x2d) continue;
        separated = true; // the next element is something else: the caller reads it
      } else if (d === 0x5d) {
        p++;
        closed = true;
      }
      break;
    }
    pool.length = n;
    this.pos = p;
    this.count = count;
    this.closed = closed;
    if (!closed && !separated) this.fail("Missing a comma or ']' after an array element.");
    return run;
  }

  /** Validates and skips a scalar without materialising it. */
  scalar(): void {
    const c = this.peek();
    if (c === 0x22) this.skipString();
    else if (c === 0x74) this.literal('true');
    else if (c === 0x66) this.literal('false');
    else if (c === 0x6e) this.literal('null');
    else this.number();
  }

  /** Scans a number; returns whether rapidjson would hold it as an integer. */
  number(): boolean {
    const b = this.b;
    const start = this.pos;
    let p = this.pos;
    if (b[p] === 0x2d) p++; // -
    const c = p < this.end ? b[p]! : -1;
    if (c === 0x4e) { // NaN
      this.pos = p;
      this.literalAt('NaN', start);
      return false;
    }
    if (c === 0x49) { // Inf or Infinity
      this.pos = p;
      if (this.matches('Infinity')) this.pos += 8;
      else this.literalAt('Inf', start);
      return false;
    }
    if (c === 0x30) {
      p++;
    } else if (c >= 0x31 && c <= 0x39) {
      while (p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39) p++;
    } else {
      this.fail('Invalid value.', p);
    }
    let integer = true;
    if (p < this.end && b[p] === 0x2e) { // .
      p++;
      if (!(p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39)) this.fail('Miss fraction part in number.', p);
      while (p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39) p++;
      integer = false;
    }
    let hasExp = false;
    if (p < this.end && (b[p] === 0x65 || b[p] === 0x45)) { // e E
      hasExp = true;
      p++;
      if (p < this.end && (b[p] === 0x2b || b[p] === 0x2d)) p++;
      if (!(p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39)) this.fail('Miss exponent in number.', p);
      while (p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39) p++;
      integer = false;
    }
    this.pos = p;
    // Integers beyond 64 bits become doubles in rapidjson; a double beyond DBL_MAX is an error.
    // Only an exponent or a very long digit run can get there, so only those are read here.
    if (hasExp || p - start > 19) {
      const v = readNumber(b, start, p, scratch);
      if (!Number.isFinite(v.value)) this.fail('Number too big to be stored in double.', start);
      integer = v.integer;
    }
    return integer;
  }

  matches(word: string): boolean {
    for (let i = 0; i < word.length; i++) if (this.b[this.pos + i] !== word.charCodeAt(i) || this.pos + i >= this.end) return false;
    return true;
  }

  literalAt(word: string, errorAt: number): void {
    if (!this.matches(word)) this.fail('Invalid value.', errorAt);
    this.pos += word.length;
  }

  skipString(): void {
    const b = this.b;
    let p = this.pos + 1;
    for (;;) {
      if (p >= this.end) this.fail('Missing a closing quotation mark in string.', p);
      const c = b[p]!;
      if (c === 0x22) { this.pos = p + 1; return; }
      if (c === 0x5c) {
        p = this.checkEscape(p);
        continue;
      }
      // Triton 2.51's rapidjson names a raw control character an invalid escape
      // (observed: test/conformance/cases/errors.ts).
      if (c < 0x20) this.fail(c === 0 ? 'Missing a closing quotation mark in string.' : 'Invalid escape character in string.', p);
      p++;
    }
  }

  /** Validates the escape at p (a backslash); returns the offset after it. */
  checkEscape(p: number): number {
    const e = p + 1 < this.end ? this.b[p + 1]! : -1;
    if (e === 0x75) { // \u
      const cu = this.hex4(p + 2);
      if (cu >= 0xd800 && cu <= 0xdbff) {
        // rapidjson requires a following \uDC00-\uDFFF low surrogate.
        if (this.b[p + 6] !== 0x5c || this.b[p + 7] !== 0x75) this.fail('The surrogate pair in string is invalid.', p + 6);
        const lo = this.hex4(p + 8);
        if (lo < 0xdc00 || lo > 0xdfff) this.fail('The surrogate pair in string is invalid.', p + 8);
        return p + 12;
      }
      return p + 6;
    }
    if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) return p + 2;
    return this.fail('Invalid escape character in string.', p + 1);
  }

  hex4(p: number): number {
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const c = p + i < this.end ? this.b[p + i]! : -1;
      const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
      if (d < 0) this.fail('Incorrect hex digit after \\u escape in string.', p + i);
      v = (v << 4) | d;
    }
    return v;
  }

  /** Reads a string token into a JS string (UTF-8, escapes resolved). */
  string(): string {
    const start = this.pos;
    this.skipString();
    return decodeStringToken(this.b, start, this.pos);
  }
}

/**
 * Strings longer than this keep their value unread until asked: a base64 tensor payload is decoded
 * from its source bytes (decode/base64/base64.ts) and never becomes a UTF-8 JS string.
 */
const LAZY_STRING_BYTES = 1024;

function stringNode(b: Uint8Array, start: number, end: number): JsonString {
  if (end - start <= LAZY_STRING_BYTES) return { kind: 'string', start, end, value: decodeStringToken(b, start, end) };
  let value: string | undefined;
  return {
    kind: 'string', start, end,
    get value(): string {
      value ??= decodeStringToken(b, start, end);
      return value;
    },
  };
}

const RUN = 1;
const INTEGERS = 2;

/**
 * The values array of a document already read, kept for the next one: a 600 KB FP32 tensor's
 * values are a 1.2 MB array, which is a fresh mmap whose every page faults on first write
 * (malloc's mmap threshold is 128 KiB, bin/tensorgate). Only a user that has finished with a
 * document's numbers gives them back (giveBackNumbers); a document nobody gives back keeps its own.
 */
let spare: Float64Array | undefined;
/** Larger arrays are not kept: a 30 MB body's numbers stay the collector's (8 bytes a value: 4 MiB kept at most). */
export const SPARE_MAX_VALUES = 1 << 19;
const NONE = new Float64Array(0);

function takeSpare(): Float64Array {
  const s = spare;
  spare = undefined;
  return s ?? new Float64Array(64);
}

/**
 * The document's numbers are read for good: its pool's values go to the next document. Any run
 * of it reads nothing after this (its pool is emptied), so call it only once they were copied out.
 */
export function giveBackNumbers(pool: NumberPool): void {
  const v = pool.values;
  pool.values = NONE;
  pool.length = 0;
  if (v.length <= SPARE_MAX_VALUES && v.length > (spare?.length ?? 0)) spare = v;
}

function growPool(pool: NumberPool, capacity: number): Float64Array {
  const values = new Float64Array(capacity);
  values.set(pool.values);
  pool.values = values;
  return values;
}

function latin1(b: Uint8Array, start: number, end: number): string {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start).toString('latin1');
}

const scratch: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

/** The raw bytes a string token stands for (escapes resolved, other bytes verbatim). */
export function stringTokenBytes(b: Uint8Array, start: number, end: number): Buffer {
  if (!hasEscape(b, start, end)) return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).subarray(start + 1, end - 1);
  const out = Buffer.allocUnsafe(end - start);
  const n = unescapeInto(b, start, end, out, 0);
  return out.subarray(0, n);
}

/** Writes the bytes of the string token [start, end) into out at `at`; returns the byte count. */
export function unescapeInto(b: Uint8Array, start: number, end: number, out: Uint8Array, at: number): number {
  let o = at;
  let p = start + 1;
  const last = end - 1;
  while (p < last) {
    const c = b[p]!;
    if (c !== 0x5c) {
      out[o++] = c;
      p++;
      continue;
    }
    const e = b[p + 1]!;
    switch (e) {
      case 0x62: out[o++] = 0x08; p += 2; break;
      case 0x66: out[o++] = 0x0c; p += 2; break;
      case 0x6e: out[o++] = 0x0a; p += 2; break;
      case 0x72: out[o++] = 0x0d; p += 2; break;
      case 0x74: out[o++] = 0x09; p += 2; break;
      case 0x75: {
        let cp = hexAt(b, p + 2);
        p += 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (hexAt(b, p + 2) - 0xdc00);
          p += 6;
        }
        o = writeUtf8(out, o, cp);
        break;
      }
      default: out[o++] = e; p += 2; // \" \\ \/
    }
  }
  return o - at;
}

/** Byte length of the string token's content once unescaped. */
export function unescapedLength(b: Uint8Array, start: number, end: number): number {
  let n = 0;
  let p = start + 1;
  const last = end - 1;
  while (p < last) {
    if (b[p] !== 0x5c) { n++; p++; continue; }
    if (b[p + 1] === 0x75) {
      let cp = hexAt(b, p + 2);
      p += 6;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (hexAt(b, p + 2) - 0xdc00);
        p += 6;
      }
      n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    } else {
      n++;
      p += 2;
    }
  }
  return n;
}

function hexAt(b: Uint8Array, p: number): number {
  return parseInt(String.fromCharCode(b[p]!, b[p + 1]!, b[p + 2]!, b[p + 3]!), 16);
}

function writeUtf8(out: Uint8Array, o: number, cp: number): number {
  /* eslint-disable @stylistic/brace-style -- one line per UTF-8 length, read as a table */
  if (cp < 0x80) out[o++] = cp;
  else if (cp < 0x800) { out[o++] = 0xc0 | (cp >> 6); out[o++] = 0x80 | (cp & 63); }
  else if (cp < 0x10000) { out[o++] = 0xe0 | (cp >> 12); out[o++] = 0x80 | ((cp >> 6) & 63); out[o++] = 0x80 | (cp & 63); }
  else { out[o++] = 0xf0 | (cp >> 18); out[o++] = 0x80 | ((cp >> 12) & 63); out[o++] = 0x80 | ((cp >> 6) & 63); out[o++] = 0x80 | (cp & 63); }
  /* eslint-enable @stylistic/brace-style */
  return o;
}

/** Whether the string token [start, end) holds a backslash escape. */
function hasEscape(b: Uint8Array, start: number, end: number): boolean {
  for (let p = start + 1; p < end - 1; p++) if (b[p] === 0x5c) return true;
  return false;
}

/**
 * Buffer's own UTF-8 decoder (what `toString('utf8', s, e)` calls), applied to the body's bytes in
 * place: a string without escapes (every member name, most values) becomes a JS string with no
 * Buffer made for it.
 */
const utf8Slice = (Buffer.prototype as unknown as { utf8Slice: (this: Uint8Array, start: number, end: number) => string }).utf8Slice;

function decodeStringToken(b: Uint8Array, start: number, end: number): string {
  if (!hasEscape(b, start, end)) return utf8Slice.call(b, start + 1, end - 1);
  return stringTokenBytes(b, start, end).toString('utf8');
}

// ---- typed access, with Triton's TritonJson wording -------------------------------------------

/** TritonJson's wording for a value of the wrong JSON type (Triton prefixes it with the field). */
export const NOT = {
  string: 'attempt to access JSON non-string as string',
  bool: 'attempt to access JSON non-boolean as boolean',
  uint: 'attempt to access JSON non-unsigned-integer as unsigned-integer',
  int: 'attempt to access JSON non-signed-integer as signed-integer',
  number: 'attempt to access JSON non-number as double',
  array: 'attempt to access JSON non-array as array',
  object: 'attempt to access JSON non-object as object',
} as const;

export function member(o: JsonObject, key: string): JsonNode | undefined {
  const members = o.members;
  for (let i = 0; i < members.length; i++) if (members[i]!.key === key) return members[i]!.value;
  return undefined;
}

/** The source text of a number node. */
export function numberText(b: Uint8Array, n: JsonNumber): string {
  return latin1(b, n.start, n.end);
}
