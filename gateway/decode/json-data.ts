// Tensor `data` from JSON, written straight into its raw_input_contents slot of the framed gRPC
// message. The array is re-read from its source bytes (the reader kept only its range), in
// document order, with Triton's rules (http_server's ReadDataFromJson, PROTOCOL.md §3):
// a leaf past the expected count is "Shape does not match" (as is a short count; Triton 2.51 has
// no nesting limit and reports both the same way), values are checked by JSON type (rapidjson's IsUint64/IsInt64/IsNumber/IsBool/IsString)
// and silently truncated to the element width, FP32 is the double rounded to float.
import { GatewayError } from '../errors';
import type { Datatype } from '../infer/datatype';
import type { InferRequest } from '../infer/request';
import { type NumberValue, readNumber } from './json-number';
import { base64Size, writeBase64 } from './base64';
import type { JsonArray } from './json-reader';
import type { InputPlan } from './v2-header';
import { member, NOT, parseJson, unescapedLength, unescapeInto } from './json-reader';

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
    const isNum = (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x4e || c === 0x49;
    switch (datatype) {
      case 'BOOL':
        if (c === 0x74) slot[offset + counter] = 1;
        else if (c === 0x66) slot[offset + counter] = 0;
        else throw dataError(NOT.bool, 'malformed');
        break;
      case 'FP32':
      case 'FP64': {
        if (!isNum) throw dataError(NOT.number, 'malformed');
        const n = readNumber(b, s, e, scratch);
        const at = offset + counter * (datatype === 'FP32' ? 4 : 8);
        if (Number.isNaN(n.value)) {
          // C's quiet NaN, sign kept for "-NaN"; a double NaN cast to float keeps the quiet bit.
          if (datatype === 'FP32') slot.writeUInt32LE(n.negative ? 0xffc00000 : 0x7fc00000, at);
          else { slot.writeUInt32LE(0, at); slot.writeUInt32LE(n.negative ? 0xfff80000 : 0x7ff80000, at + 4); }
        } else if (datatype === 'FP32') slot.writeFloatLE(n.value, at);
        else slot.writeDoubleLE(n.value, at);
        break;
      }
      default: {
        if (!isNum) throw dataError(datatype.startsWith('U') ? NOT.uint : NOT.int, 'malformed');
        const n = readNumber(b, s, e, scratch);
        writeInteger(datatype, n, slot, offset, counter);
      }
    }
    counter++;
  }
  if (counter !== expected) throw dataError("Shape does not match true shape of 'data' field", 'malformed');
  return base64Bytes;
}

const INT64_MAX = 2n ** 63n - 1n;

function writeInteger(datatype: Datatype, n: NumberValue, slot: Buffer, offset: number, i: number): void {
  const unsigned = datatype.startsWith('U');
  const ok = n.integer && (unsigned ? !(n.value < 0 || (n.big !== undefined && n.big < 0n)) : (n.big === undefined || n.big <= INT64_MAX));
  if (!ok) {
    throw dataError(unsigned ? NOT.uint : NOT.int, 'malformed');
  }
  const v = n.value;
  // C casts to the element width: wrap modulo 2^bits.
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
 * and counted — the return value.
 */
export function fillJsonSlots(header: Buffer, plans: readonly InputPlan[], request: InferRequest, slots: readonly ({ readonly offset: number; readonly length: number } | undefined)[], message: Buffer): number {
  let base64Bytes = 0;
  plans.forEach((plan, i) => {
    const slot = slots[i]!;
    const input = request.inputs[i]!;
    if (plan.kind === 'base64') {
      base64Bytes += writeBase64(header, plan.start, plan.end, message, slot.offset, slot.length, `input '${input.name}'`);
      return;
    }
    if (plan.kind !== 'json') return;
    const datatype = input.datatype as Datatype;
    base64Bytes += writeJsonData(header, plan.data, datatype, message, slot.offset,
      datatype === 'BYTES' ? slot.length : plan.elementCount, { base64Strings: plan.base64Strings, name: input.name });
  });
  return base64Bytes;
}
