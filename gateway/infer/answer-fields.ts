// The header fields of a ModelInferResponse (model_name, model_version, id, parameters, outputs)
// read by hand into our InferResponse, field by field as answer-reader.ts finds them: no message
// objects, no Longs. What it accepts and what it makes of it are protobufjs's (its generated
// decoders of proto/inference.proto and its Reader, which the unit tests keep as the reference):
// its varint, tag and length rules, strings as strict UTF-8, int64 dims as Long.toNumber gives
// them, map entries in wire order with the last of equal keys kept, InferParameter's oneof set by
// its last member seen, groups skipped up to protobufjs's recursion limit. An output's
// InferTensorContents is checked as protobufjs decodes it and dropped (the answer's bytes are in
// raw_output_contents). What protobufjs refuses throws an Error, as it does.
import { I32, I64, LEN, VARINT } from '../grpc/wire';
import type { ParamValue } from './request';
import type { InferResponse, OutputTensor, ResponseParams } from './response';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
export type ResponseDraft = Mutable<Omit<InferResponse, 'outputs'>> & { outputs: OutputDraft[] };
export type OutputDraft = Mutable<OutputTensor>;

export const NO_PARAMS: ResponseParams = Object.freeze({});
/** Placeholders until the output's fields are read (answer-reader.ts gives each output its own data). */
export const NO_DATA: readonly Buffer[] = Object.freeze([]);
const NO_DIMS: readonly number[] = Object.freeze([]);

/** protobufjs's Reader.recursionLimit (protoc's default). */
const RECURSION_LIMIT = 100;
const GROUP_START = 3;
const GROUP_END = 4;

/** The kinds of InferParameter's oneof, by field number (0: none set). */
const BOOL = 1;
const INT64 = 2;
const STRING = 3;
const DOUBLE = 4;
const UINT64 = 5;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function newResponse(): ResponseDraft {
  return { modelName: '', modelVersion: '', id: '', parameters: NO_PARAMS, outputs: [] };
}

function outOfRange(c: FieldReader, n: number): RangeError {
  return new RangeError(`index out of range: ${c.pos} + ${n} > ${c.len}`);
}

/**
 * A cursor over bytes held in one buffer, reading as protobufjs's Reader does (`len`: where the
 * message being read ends). One serves every answer: reading is synchronous.
 */
class FieldReader {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  len = 0;
  /** The last varint64 read, as two uint32 halves. */
  lo = 0;
  hi = 0;
  /** Whether any of its bits was set (Reader#bool's answer, which looks at every byte). */
  nonzero = false;
  /** The InferParameter being read: its oneof member seen last, and that member's value. */
  kind = 0;
  bool = false;
  str = '';
  double = 0;

  /** A field tag as Reader#tag reads it: at most five bytes, the fifth below 16. */
  tag(): number {
    return this.#varint32(15, 'invalid tag encoding');
  }

  /** A length as Reader#size reads it: at most five bytes, the fifth at most 7. */
  size(): number {
    return this.#varint32(7, 'invalid length encoding');
  }

  /** A varint of at most five bytes whose fifth is at most `fifthMax`; beyond it, `refusal`. */
  #varint32(fifthMax: number, refusal: string): number {
    let value = 0;
    for (let i = 0; i < 4; i++) {
      const b = this.#byte();
      value += (b & 0x7f) * 2 ** (7 * i);
      if (b < 0x80) return value;
    }
    const b = this.#byte();
    if (b > fifthMax) throw new Error(refusal);
    return value + b * 2 ** 28;
  }

  /** A varint of at most ten bytes (Reader#uint32, #bool, the 64-bit reads): its low 64 bits in lo, hi. */
  varint64(): void {
    let lo = 0;
    let hi = 0;
    let nonzero = false;
    for (let i = 0; i < 10; i++) {
      const b = this.#byte();
      const bits = b & 0x7f;
      if (bits !== 0) nonzero = true;
      if (i < 4) lo = (lo | (bits << (7 * i))) >>> 0;
      else if (i === 4) {
        lo = (lo | (bits << 28)) >>> 0;
        hi = (hi | (bits >> 4)) >>> 0;
      } else hi = (hi | (bits << (7 * (i - 5) + 3))) >>> 0;
      if (b < 0x80) {
        this.lo = lo;
        this.hi = hi;
        this.nonzero = nonzero;
        return;
      }
    }
    throw new Error('invalid varint encoding');
  }

  /** Reader#skip(n). */
  skip(n: number): void {
    if (this.pos + n > this.len) throw outOfRange(this, n);
    this.pos += n;
  }

  /** Reader#stringVerify: strict UTF-8 (a byte order mark kept). */
  string(): string {
    const n = this.size();
    const start = this.pos;
    const end = start + n;
    if (end > this.len) throw outOfRange(this, n);
    this.pos = end;
    for (let i = start; i < end; i++) {
      if (this.buf[i]! >= 0x80) return strictUtf8.decode(this.buf.subarray(start, end));
    }
    return this.buf.toString('latin1', start, end);
  }

  /** Reader#skipType: a field's value of wire type `wire` (its tag read), groups included. */
  skipType(wire: number, depth: number, field: number): void {
    if (depth > RECURSION_LIMIT) throw new Error('max depth exceeded');
    if (field === 0) throw new Error('illegal tag: field number 0');
    switch (wire) {
      case VARINT:
        do if (this.pos >= this.len) throw outOfRange(this, 1);
        while (this.buf[this.pos++]! & 0x80);
        return;
      case I64: return this.skip(8);
      case LEN: return this.skip(this.size());
      case GROUP_START: return this.#skipGroup(depth, field);
      case I32: return this.skip(4);
      default: throw new Error(`invalid wire type ${wire} at offset ${this.pos}`);
    }
  }

  /** Enters a length-delimited submessage: returns the enclosing end, to hand to `leave`. */
  enter(n: number): number {
    const end = this.pos + n;
    if (end > this.len) throw outOfRange(this, n);
    const outer = this.len;
    this.len = end;
    return outer;
  }

  leave(outer: number): void {
    if (this.pos !== this.len) throw outOfRange(this, 0);
    this.len = outer;
  }

  /** The last varint64 as an int64 dim: Long.toNumber's value (hi signed). */
  int64Number(): number {
    return (this.hi | 0) * 4294967296 + this.lo;
  }

  /** The last varint64 as a bigint, signed or not. */
  bigint(signed: boolean): bigint {
    const v = (BigInt(this.hi) << 32n) | BigInt(this.lo);
    return signed ? BigInt.asIntN(64, v) : v;
  }

  #skipGroup(depth: number, field: number): void {
    for (;;) {
      const tag = this.tag();
      const nested = tag >>> 3;
      const wire = tag & 7;
      if (nested === 0) throw new Error('illegal tag: field number 0');
      if (wire === GROUP_END) {
        if (nested !== field) throw new Error('invalid end group tag');
        return;
      }
      this.skipType(wire, depth + 1, nested);
    }
  }

  #byte(): number {
    if (this.pos >= this.len) throw outOfRange(this, 1);
    return this.buf[this.pos++]!;
  }
}

const reader = new FieldReader();

/**
 * Reads the top-level fields in buf[from, to) into `res` (each one whole: answer-reader.ts found
 * their extent). Throws what protobufjs throws.
 */
export function readHeaderFields(buf: Buffer, from: number, to: number, res: ResponseDraft): void {
  const c = reader;
  c.buf = buf;
  c.pos = from;
  c.len = to;
  while (c.pos < to) {
    const tag = c.tag();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === LEN && field >= 1 && field <= 5) {
      switch (field) {
        case 1: res.modelName = c.string(); break;
        case 2: res.modelVersion = c.string(); break;
        case 3: res.id = c.string(); break;
        case 4: res.parameters = readParamEntry(c, res.parameters, 0); break;
        default: res.outputs.push(readOutput(c, 1)); break;
      }
      continue;
    }
    c.skipType(wire, 0, field);
  }
}

/** One InferOutputTensor (depth: its own, as protobufjs counts). */
function readOutput(c: FieldReader, depth: number): OutputDraft {
  const outer = c.enter(c.size());
  const o: OutputDraft = { name: '', datatype: '', shape: NO_DIMS, parameters: NO_PARAMS, data: NO_DATA, byteLength: 0 };
  let shape: number[] | undefined;
  while (c.pos < c.len) {
    const tag = c.tag();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === LEN) {
      if (field === 1) o.name = c.string();
      else if (field === 2) o.datatype = c.string();
      else if (field === 3) shape = readPackedDims(c, shape);
      else if (field === 4) o.parameters = readParamEntry(c, o.parameters, depth);
      else if (field === 5) checkContents(c, depth + 1);
      else c.skipType(wire, depth, field);
    } else if (field === 3 && wire === VARINT) {
      c.varint64();
      (shape ??= []).push(c.int64Number());
    } else c.skipType(wire, depth, field);
  }
  c.leave(outer);
  o.shape = shape ?? [];
  return o;
}

/**
 * Reader#int64s: the dims after `shape`'s, or in a new array of their number (each varint ends
 * with its one byte below 0x80).
 */
function readPackedDims(c: FieldReader, shape: number[] | undefined): number[] {
  const outer = c.enter(c.size());
  let out = shape;
  let i = shape === undefined ? 0 : shape.length;
  if (out === undefined) {
    let n = 0;
    for (let k = c.pos; k < c.len; k++) if (c.buf[k]! < 0x80) n++;
    out = new Array<number>(n);
  }
  while (c.pos < c.len) {
    c.varint64();
    out[i++] = c.int64Number();
  }
  c.leave(outer);
  return out;
}

/**
 * One map<string, InferParameter> entry added to `params` (a new object for the first): the key
 * and value read last, a value merged over the ones before it as protobufjs merges them. `depth`:
 * the map's message's.
 */
function readParamEntry(c: FieldReader, params: ResponseParams, depth: number): ResponseParams {
  const outer = c.enter(c.size());
  let key = '';
  c.kind = 0;
  while (c.pos < c.len) {
    const tag = c.tag();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === LEN && field === 1) key = c.string();
    else if (wire === LEN && field === 2) readParamValue(c, depth + 1);
    else c.skipType(wire, depth, field);
  }
  c.leave(outer);
  const out = (params === NO_PARAMS ? {} : params) as Record<string, ParamValue | undefined>;
  const value = paramValue(c);
  // protobufjs makes '__proto__' an own key of its map (the last entry's value), which the gateway
  // then assigned to a plain object: that value became the prototype, or none did.
  if (key === '__proto__') Object.setPrototypeOf(out, value ?? Object.prototype);
  else out[key] = value;
  return out;
}

/** One InferParameter, over the oneof member seen before in the same entry. */
function readParamValue(c: FieldReader, depth: number): void {
  const outer = c.enter(c.size());
  while (c.pos < c.len) {
    const tag = c.tag();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === VARINT && (field === BOOL || field === INT64 || field === UINT64)) {
      c.varint64();
      c.kind = field;
      c.bool = c.nonzero;
    } else if (wire === LEN && field === STRING) {
      c.str = c.string();
      c.kind = STRING;
    } else if (wire === I64 && field === DOUBLE) {
      if (c.pos + 8 > c.len) throw outOfRange(c, 8);
      c.double = c.buf.readDoubleLE(c.pos);
      c.pos += 8;
      c.kind = DOUBLE;
    } else c.skipType(wire, depth, field);
  }
  c.leave(outer);
}

function paramValue(c: FieldReader): ParamValue | undefined {
  switch (c.kind) {
    case BOOL: return { type: 'bool', value: c.bool };
    case INT64: return { type: 'int64', value: c.bigint(true) };
    case UINT64: return { type: 'uint64', value: c.bigint(false) };
    case DOUBLE: return { type: 'double', value: c.double };
    case STRING: return { type: 'string', value: c.str };
    default: return undefined;
  }
}

/**
 * An InferTensorContents checked as protobufjs decodes it, and dropped: packed varints (fields
 * 1-5) read whole, packed floats (6) and doubles (7) a whole number of values, bytes (8) in range.
 */
function checkContents(c: FieldReader, depth: number): void {
  const outer = c.enter(c.size());
  while (c.pos < c.len) {
    const tag = c.tag();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field >= 1 && field <= 5 && wire === LEN) {
      const inner = c.enter(c.size());
      while (c.pos < c.len) c.varint64();
      c.leave(inner);
    } else if (field >= 1 && field <= 5 && wire === VARINT) c.varint64();
    else if ((field === 6 || field === 7) && wire === LEN) {
      const n = c.size();
      if (c.pos + n > c.len) throw outOfRange(c, n);
      if (n % (field === 6 ? 4 : 8) !== 0) throw outOfRange(c, field === 6 ? 4 : 8);
      c.pos += n;
    } else if (field === 6 && wire === I32) c.skip(4);
    else if (field === 7 && wire === I64) c.skip(8);
    else if (field === 8 && wire === LEN) c.skip(c.size());
    else c.skipType(wire, depth, field);
  }
  c.leave(outer);
}
