// Tensor `data` from JSON, written straight into its raw_input_contents slot of the framed gRPC
// message: copied from the values the reader read while validating (an array of numbers), else
// re-read from its source bytes (the reader kept its range), in document order, with Triton's
// rules (ReadDataFromJson in Triton's src/http_server.cc, docs/architecture.md#json-bodies):
// a leaf past the expected count is "Shape does not match" (as is a short count; Triton 2.51 has
// no nesting limit and reports both the same way), values are checked by JSON type (rapidjson's
// IsUint64/IsInt64/IsNumber/IsBool/IsString)
// and silently truncated to the element width, FP32 is the double rounded to float.
import { GatewayError } from '../errors';
import { type Datatype, elementSize, INT64_MAX, isDatatype } from '../infer/datatype';
import type { InferRequest } from '../infer/request';
import { type NumberValue, readNumber, SCAN_DOUBLE, SCAN_INTEGER, SCAN_SLOW, scanned, scanNumber } from '../json/number-parse';
import { base64Refusal, base64Size, base64SizeMismatch, writeBase64 } from './base64/base64';
import type { JsonArray, JsonNode, NumberRun } from '../json/reader';
import { giveBackNumbers, member, NOT, parseJson, unescapedLength, unescapeInto } from '../json/reader';

/** Where each input's raw_input_contents entry comes from. */
export type InputPlan =
  /** `base64Strings`: every string element of this BYTES tensor is base64 (`content_type: "base64"`). */
  | { readonly kind: 'json'; readonly data: JsonArray; readonly elementCount: number; readonly base64Strings: boolean }
  /** A non-BYTES tensor given as one base64 string: its content range [start, end) in the body. */
  | { readonly kind: 'base64'; readonly start: number; readonly end: number }
  /** The same, decoded while the body arrived (decode/base64/base64-staging.ts): the bytes to copy into the slot. */
  | { readonly kind: 'staged'; readonly bytes: Buffer }
  | { readonly kind: 'binary' }
  | { readonly kind: 'empty' }
  | { readonly kind: 'shm' };

const scratch: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

function dataError(message: string, status: 'invalid' | 'malformed'): GatewayError {
  return new GatewayError(status === 'invalid' ? 'GW_ERR_DECODE_INVALID' : 'GW_ERR_DECODE_MALFORMED', `Unable to parse 'data': ${message}`);
}

const enum Tok { Open, Close, Leaf, End }

/** A tiny cursor over an array's source range: yields brackets and leaf token ranges. */
class Cursor {
  p: number;
  tokStart = 0;
  tokEnd = 0;
  constructor(readonly b: Uint8Array, start: number, readonly end: number) {
    this.p = start;
  }

  next(): Tok {
    const b = this.b;
    let p = this.p;
    for (;;) {
      if (p >= this.end) { this.p = p; return Tok.End; }
      const c = b[p]!;
      if (c === 0x2c || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) { p++; continue; }
      if (c === 0x5b) { this.p = p + 1; return Tok.Open; }
      if (c === 0x5d) { this.p = p + 1; return Tok.Close; }
      this.tokStart = p;
      if (c === 0x22) {
        p++;
        while (b[p] !== 0x22) p += b[p] === 0x5c ? 2 : 1;
        p++;
      } else if (c === 0x7b) {
        // An object leaf (already validated by the reader): skip it, balancing braces and strings.
        let depth = 0;
        do {
          const d = b[p]!;
          if (d === 0x22) {
            p++;
            while (b[p] !== 0x22) p += b[p] === 0x5c ? 2 : 1;
          } else if (d === 0x7b || d === 0x5b) depth++;
          else if (d === 0x7d || d === 0x5d) depth--;
          p++;
        } while (depth > 0);
      } else {
        while (p < this.end) {
          const d = b[p]!;
          if (d === 0x2c || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
          p++;
        }
      }
      this.tokEnd = p;
      this.p = p;
      return Tok.Leaf;
    }
  }
}

/**
 * The base64 content range of a BYTES element: `{"b64": "…"}` always, a plain string when the
 * input's content_type is base64; undefined for a plain text element. An object without a string
 * `b64` is Triton's non-string error.
 */
function base64Element(body: Uint8Array, s: number, e: number, base64Strings: boolean, notString: () => GatewayError): [number, number] | undefined {
  const c = body[s];
  if (c === 0x22) return base64Strings ? [s + 1, e - 1] : undefined;
  if (c !== 0x7b) throw notString();
  const obj = parseJson(body, s, e); // an already validated leaf: a few members
  const str = obj.kind === 'object' ? member(obj, 'b64') : undefined;
  if (str?.kind !== 'string') throw notString();
  return [str.start + 1, str.end - 1];
}

/**
 * Byte size of a BYTES tensor given as JSON strings or base64 elements (4-byte length + bytes
 * each), with Triton's checks; base64 sizes come from the text before anything is decoded.
 */
export function bytesArraySize(body: Uint8Array, data: JsonArray, base64Strings: boolean, name: string): number {
  const cur = new Cursor(body, data.start + 1, data.end - 1);
  const notString = (): GatewayError => new GatewayError('GW_ERR_DECODE_MALFORMED', `Unable to parse JSON bytes array: ${NOT.string}`);
  let size = 0;
  let index = 0;
  for (;;) {
    const t = cur.next();
    if (t === Tok.End) return size;
    if (t === Tok.Close || t === Tok.Open) continue;
    const b64 = base64Element(body, cur.tokStart, cur.tokEnd, base64Strings, notString);
    size += 4 + (b64 === undefined ? unescapedLength(body, cur.tokStart, cur.tokEnd) : base64Size(body, b64[0], b64[1], `input '${name}' element ${index}`));
    index++;
  }
}

/** How a BYTES tensor's string elements read: base64 when the input's content_type says so. */
export interface BytesElements {
  readonly base64Strings: boolean;
  /** The input's name (for base64 errors). */
  readonly name: string;
}

/**
 * Writes the JSON `data` array into `slot` at `offset`. `expected` is the element count (for
 * BYTES: the byte size from bytesArraySize). Returns the bytes decoded from base64 elements;
 * throws Triton's error on failure.
 */
export function writeJsonData(
  body: Uint8Array, data: JsonArray, datatype: Datatype, slot: Buffer, offset: number, expected: number,
  elements: BytesElements = { base64Strings: false, name: '' },
): number {
  if (datatype !== 'BYTES' && datatype !== 'BOOL') {
    const run = data.numbers;
    const count = run !== undefined && (run.integers || datatype === 'FP32' || datatype === 'FP64')
      ? writeRun(run, datatype, slot, offset, expected)
      : writeNumbers(body, data.start + 1, data.end - 1, datatype, slot, offset, expected);
    if (count !== expected) throw dataError("Shape does not match true shape of 'data' field", 'malformed');
    return 0;
  }
  let base64Bytes = 0;
  const cur = new Cursor(body, data.start + 1, data.end - 1);
  let counter = 0;
  let elementIndex = 0;
  const b = body;
  for (;;) {
    const t = cur.next();
    if (t === Tok.End) break;
    if (t === Tok.Close || t === Tok.Open) continue;
    const s = cur.tokStart;
    const e = cur.tokEnd;
    const c = b[s]!;
    if (datatype === 'BYTES') {
      const b64 = base64Element(b, s, e, elements.base64Strings, () => dataError(NOT.string, 'malformed'));
      const subject = `input '${elements.name}' element ${elementIndex++}`;
      const len = b64 === undefined ? unescapedLength(b, s, e) : base64Size(b, b64[0], b64[1], subject);
      if (counter + len + 4 > expected) throw new GatewayError('GW_ERR_DECODE_MALFORMED', "Unable to parse 'data': shape does not match true shape of 'data' field");
      slot.writeUInt32LE(len, offset + counter);
      if (b64 === undefined) unescapeInto(b, s, e, slot, offset + counter + 4);
      else base64Bytes += writeBase64(b, b64[0], b64[1], slot, offset + counter + 4, len, subject);
      counter += len + 4;
      continue;
    }
    if (counter >= expected) throw dataError("Shape does not match true shape of 'data' field", 'malformed');
    if (c === 0x74) slot[offset + counter] = 1;
    else if (c === 0x66) slot[offset + counter] = 0;
    else throw dataError(NOT.bool, 'malformed');
    counter++;
  }
  if (counter !== expected) throw dataError("Shape does not match true shape of 'data' field", 'malformed');
  return base64Bytes;
}

/** Element kinds of the numeric loop, decided once per tensor rather than per element. */
const FP32 = 0, FP64 = 1, INT8 = 2, UINT8 = 3, INT16 = 4, UINT16 = 5, INT32 = 6, UINT32 = 7, INT64 = 8, UINT64 = 9;
const KIND: Partial<Record<Datatype, number>> = { FP32, FP64, INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64 };

/**
 * The numeric `data` loop: the array's bytes [start, end) walked once, brackets and separators
 * skipped (Triton flattens nested arrays), each number scanned in place (scanNumber) and written
 * through a DataView. Tokens outside scanNumber's fast path go through readNumber. Returns the
 * element count (the caller checks it against `expected`).
 *
 * Called once per tensor, this function runs as on-stack-replaced code: nothing may follow the
 * loop that the interpreter never ran before the switch (an exact-count check placed here deopted
 * on every call, for lack of type feedback).
 */
function writeNumbers(b: Uint8Array, start: number, end: number, datatype: Datatype, slot: Buffer, offset: number, expected: number): number {
  const kind = KIND[datatype] ?? INT8;
  const unsigned = kind === UINT8 || kind === UINT16 || kind === UINT32 || kind === UINT64;
  const isFloat = kind === FP32 || kind === FP64;
  const view = new DataView(slot.buffer, slot.byteOffset, slot.byteLength);
  const source = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let counter = 0;
  let p = start;
  for (;;) {
    let c = b[p]!;
    while (p < end && (c === 0x2c || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x5b || c === 0x5d)) c = b[++p]!;
    if (p >= end) break;
    if (counter >= expected) throw dataError("Shape does not match true shape of 'data' field", 'malformed');
    if (!((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x4e || c === 0x49)) {
      throw dataError(isFloat ? NOT.number : unsigned ? NOT.uint : NOT.int, 'malformed');
    }
    const s = p;
    p = scanNumber(b, source, p, end);
    const scan = scanned[1]!;
    if (isFloat) {
      if (scan !== SCAN_SLOW) {
        if (kind === FP32) view.setFloat32(offset + counter * 4, scanned[0]!, true);
        else view.setFloat64(offset + counter * 8, scanned[0]!, true);
      } else {
        writeFloat(kind, readNumber(b, s, p, scratch), view, offset, counter);
      }
    } else if (scan === SCAN_INTEGER) {
      const v = scanned[0]!;
      if (unsigned && v < 0) throw dataError(NOT.uint, 'malformed');
      writeSmallInteger(kind, v, view, offset, counter);
    } else if (scan === SCAN_DOUBLE) {
      throw dataError(unsigned ? NOT.uint : NOT.int, 'malformed');
    } else {
      writeInteger(datatype, readNumber(b, s, p, scratch), slot, offset, counter);
    }
    counter++;
  }
  return counter;
}

/**
 * The numeric `data` the reader already read (JsonArray.numbers): values copied into the slot,
 * with writeNumbers' checks in its order. Integer datatypes come here only when every token was
 * an integer. Returns the element count.
 */
function writeRun(run: NumberRun, datatype: Datatype, slot: Buffer, offset: number, expected: number): number {
  const kind = KIND[datatype] ?? INT8;
  const values = run.pool.values;
  const count = run.end - run.start;
  const n = Math.min(count, expected);
  const view = new DataView(slot.buffer, slot.byteOffset, slot.byteLength);
  if (kind === FP32) {
    for (let i = 0; i < n; i++) view.setFloat32(offset + i * 4, values[run.start + i]!, true);
  } else if (kind === FP64) {
    for (let i = 0; i < n; i++) view.setFloat64(offset + i * 8, values[run.start + i]!, true);
  } else {
    const unsigned = kind === UINT8 || kind === UINT16 || kind === UINT32 || kind === UINT64;
    for (let i = 0; i < n; i++) {
      const v = values[run.start + i]!;
      if (unsigned && v < 0) throw dataError(NOT.uint, 'malformed');
      writeSmallInteger(kind, v, view, offset, i);
    }
  }
  return count;
}

function writeFloat(kind: number, n: NumberValue, view: DataView, offset: number, i: number): void {
  if (Number.isNaN(n.value)) {
    // C's quiet NaN, sign kept for "-NaN"; a double NaN cast to float keeps the quiet bit.
    if (kind === FP32) view.setUint32(offset + i * 4, n.negative ? 0xffc00000 : 0x7fc00000, true);
    else { view.setUint32(offset + i * 8, 0, true); view.setUint32(offset + i * 8 + 4, n.negative ? 0xfff80000 : 0x7ff80000, true); }
  } else if (kind === FP32) view.setFloat32(offset + i * 4, n.value, true);
  else view.setFloat64(offset + i * 8, n.value, true);
}

/** An integer |v| < 2^53 cast to the element width as C does: wrapped modulo 2^bits. */
function writeSmallInteger(kind: number, v: number, view: DataView, offset: number, i: number): void {
  switch (kind) {
    case INT8: case UINT8: view.setInt8(offset + i, v); return;
    case INT16: case UINT16: view.setInt16(offset + i * 2, v, true); return;
    case INT32: case UINT32: view.setInt32(offset + i * 4, v, true); return;
    default: { // INT64 / UINT64: 64-bit two's complement
      const at = offset + i * 8;
      view.setUint32(at, v >>> 0, true);
      view.setInt32(at + 4, Math.floor(v / 4294967296) | 0, true);
    }
  }
}

function writeInteger(datatype: Datatype, n: NumberValue, slot: Buffer, offset: number, i: number): void {
  const unsigned = datatype.startsWith('U');
  const ok = n.integer && (unsigned ? !(n.value < 0 || (n.big !== undefined && n.big < 0n)) : (n.big === undefined || n.big <= INT64_MAX));
  if (!ok) {
    throw dataError(unsigned ? NOT.uint : NOT.int, 'malformed');
  }
  // C casts the exact 64-bit integer to the element width: wrap modulo 2^bits. Beyond 2^53 the
  // double in n.value has lost the low bits, so they come from n.big.
  const v = n.big !== undefined ? Number(BigInt.asIntN(32, n.big)) : n.value;
  switch (datatype) {
    case 'INT8': slot.writeInt8((v << 24) >> 24, offset + i); return;
    case 'UINT8': slot[offset + i] = v & 0xff; return;
    case 'INT16': slot.writeInt16LE((v << 16) >> 16, offset + i * 2); return;
    case 'UINT16': slot.writeUInt16LE(v & 0xffff, offset + i * 2); return;
    case 'INT32': slot.writeInt32LE(v | 0, offset + i * 4); return;
    case 'UINT32': slot.writeUInt32LE(v >>> 0, offset + i * 4); return;
    default: { // INT64 / UINT64: 64-bit two's complement, exact
      const at = offset + i * 8;
      if (n.big !== undefined) slot.writeBigUInt64LE(BigInt.asUintN(64, n.big), at);
      else {
        slot.writeUInt32LE(v >>> 0, at);
        slot.writeInt32LE(Math.floor(v / 4294967296) | 0, at + 4);
      }
    }
  }
}

/**
 * JSON `data` converted into the slots: JSON numbers and text are a conversion that writes each
 * byte once (not counted as a copy); base64 payload bytes are decoded once, straight into the slot,
 * or copied there from where they were decoded while the body arrived, and counted — the return value.
 */
export function fillJsonSlots(
  header: Buffer, plans: readonly InputPlan[], request: InferRequest,
  slots: readonly ({ readonly offset: number; readonly length: number } | undefined)[], message: Buffer,
): number {
  let base64Bytes = 0;
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i]!;
    const slot = slots[i]!;
    const input = request.inputs[i]!;
    if (plan.kind === 'base64') {
      base64Bytes += writeBase64(header, plan.start, plan.end, message, slot.offset, slot.length, `input '${input.name}'`);
      continue;
    }
    if (plan.kind === 'staged') {
      // Cut out of the message (v2-body.ts decodeStagedBody): its bytes go upstream from staging.
      if (slot.length < plan.bytes.length) continue;
      base64Bytes += plan.bytes.copy(message, slot.offset);
      continue;
    }
    if (plan.kind !== 'json') continue;
    const datatype = input.datatype as Datatype;
    base64Bytes += writeJsonData(header, plan.data, datatype, message, slot.offset,
      datatype === 'BYTES' ? slot.length : plan.elementCount, { base64Strings: plan.base64Strings, name: input.name });
  }
  // Every value is in the message: the document's number array serves the next body (reader.ts).
  for (let i = 0; i < plans.length; i++) {
    const plan = plans[i]!;
    if (plan.kind === 'json' && plan.data.numbers !== undefined) {
      giveBackNumbers(plan.data.numbers.pool);
      break;
    }
  }
  return base64Bytes;
}

/** What jsonInput needs of the header's context (decode/v2-header.ts HeaderContext). */
export interface JsonInputContext {
  readonly maxInputSizeBytes: number;
  readonly staged?: ReadonlyMap<number, Buffer> | undefined;
}

const malformed = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_MALFORMED', msg);
const invalid = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', msg);

/** The base64 content range of a non-BYTES tensor's `data`: one string, or `{"b64": string}`. */
function base64Data(data: JsonNode): { start: number; end: number } | undefined {
  const str = data.kind === 'object' ? member(data, 'b64') : data;
  return str?.kind === 'string' ? { start: str.start + 1, end: str.end - 1 } : undefined;
}

/**
 * The byte size and plan of an input given as JSON `data` (an array, or base64 for a non-BYTES
 * tensor), checked in Triton's order after its name, datatype and shape.
 */
export function jsonInput(
  body: Uint8Array, data: JsonNode, name: string, datatype: string, shape: readonly number[], ctx: JsonInputContext, base64Strings: boolean,
): { byteSize: number; plan: InputPlan } {
  // Element count as Triton 2.51 computes it: 0 for [] or any 0 dim, -2 for a negative dim, else
  // the int64 product, which wraps silently (2^32 x 2^32 is 0 elements; a negative product fails
  // the data count).
  let count = shape.length === 0 ? 0n : 1n;
  let invalidDim = false;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (d < 0) invalidDim = true;
    count = BigInt.asIntN(64, count * BigInt(d));
  }
  if (invalidDim) throw invalid(`invalid shape for input '${name}': shape [${shape.join(',')}] contains one or more invalid dimensions`);
  if (count === 0n) return { byteSize: 0, plan: { kind: 'empty' } };
  // The JSON twin of the binary extension: a non-BYTES tensor as its little-endian bytes in base64.
  const b64 = datatype === 'BYTES' ? undefined : base64Data(data);
  if (data.kind !== 'array' && b64 === undefined) throw malformed(`Unable to parse 'data': ${NOT.array}`);
  if (count < 0n) throw malformed("Unable to parse 'data': Shape does not match true shape of 'data' field");

  let byteSize: bigint;
  if (datatype === 'BYTES') {
    byteSize = BigInt(bytesArraySize(body, data as JsonArray, base64Strings, name));
  } else {
    const size = isDatatype(datatype) ? elementSize(datatype) : 0;
    if (size > 1 && count > INT64_MAX / BigInt(size)) {
      throw invalid(`byte size overflow for input '${name}': element count (${count}) * data type size (${size}) exceeds maximum allowed size (9223372036854775807)`);
    }
    byteSize = count * BigInt(size);
  }
  if (byteSize > BigInt(ctx.maxInputSizeBytes)) {
    throw new GatewayError('GW_ERR_DECODE_TOO_LARGE',
      `JSON input '${name}' has a byte_size (${byteSize} bytes) that exceeds the maximum allowed value of ${ctx.maxInputSizeBytes} bytes. Use --http-max-input-size to increase the limit.`);
  }
  if (b64 !== undefined) {
    if (!isDatatype(datatype)) throw invalid(`invalid datatype for input ${name}`);
    const staged = ctx.staged?.get(b64.start - 1);
    if (staged !== undefined) {
      if (BigInt(staged.length) !== byteSize) throw base64SizeMismatch(`input '${name}'`, String(staged.length), Number(byteSize));
      return { byteSize: Number(byteSize), plan: { kind: 'staged', bytes: staged } };
    }
    // Checked from the text's length before a byte is decoded (the budget was checked above).
    const decoded = base64Size(body, b64.start, b64.end, `input '${name}'`);
    if (BigInt(decoded) !== byteSize) throw base64Refusal(body, b64.start, b64.end, `input '${name}'`, Number(byteSize));
    return { byteSize: Number(byteSize), plan: { kind: 'base64', start: b64.start, end: b64.end } };
  }
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw invalid(`receiving ${datatype} data via JSON is not supported. Please use the binary data format for input ${name}`);
  }
  if (!isDatatype(datatype)) throw invalid(`invalid datatype for input ${name}`);
  return { byteSize: Number(byteSize), plan: { kind: 'json', data: data as JsonArray, elementCount: Number(count), base64Strings } };
}
