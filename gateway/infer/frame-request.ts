// The pre-framed ModelInferRequest (docs/architecture.md#pre-framing): one buffer holding the 5-byte gRPC message
// prefix, the protobuf header fields (model_name, model_version, id, parameters, inputs, outputs)
// and one length-delimited raw_input_contents entry per input (field 7, tag 0x3a) whose payload
// bytes are left for the decoders to fill in place. Field 7 is the last field, so the result is
// byte-identical to protobufjs encoding the whole message. The header fields are written here, in
// place, as protobufjs's generated encoder writes them (proto/generated/inference.js: fields in
// number order, empty strings of fields 1–3 left out, maps in the order of an object's keys): no
// message object, no Writer per request (test/unit/infer/frame-request.test.ts compares the two).
import { LEN, tagOf, varintSize, writeVarint } from '../grpc/wire';
import type { Allocate, Cut, FramedHead, FramedRequest, Slot } from './framed-message';
import type { InferRequest, ParamValue } from './request';

const RAW_INPUT_CONTENTS_TAG = tagOf(7, LEN); // 0x3a

/** Tags of the header fields (inference.proto): every one is a single byte. */
const TAG = {
  modelName: tagOf(1, LEN), modelVersion: tagOf(2, LEN), id: tagOf(3, LEN), parameters: tagOf(4, LEN), input: tagOf(5, LEN), output: tagOf(6, LEN),
  tensorName: tagOf(1, LEN), datatype: tagOf(2, LEN), shape: tagOf(3, LEN), inputParameters: tagOf(4, LEN), outputParameters: tagOf(2, LEN),
  mapKey: tagOf(1, LEN), mapValue: tagOf(2, LEN),
  bool: tagOf(1, 0), int64: tagOf(2, 0), string: tagOf(3, LEN), double: tagOf(4, 1), uint64: tagOf(5, 0),
} as const;

/** A length-delimited field of `n` bytes: tag, length, bytes. */
const lenField = (n: number): number => 1 + varintSize(n) + n;

/**
 * A parameter map's entries in the order protobufjs wrote them: the own keys of an object built
 * from the map (integer-like keys first; `__proto__` sets the prototype and is no key). Undefined
 * when there are none.
 */
function paramObject(m: ReadonlyMap<string, ParamValue>): Record<string, ParamValue> | undefined {
  if (m.size === 0) return undefined;
  const out: Record<string, ParamValue> = {};
  for (const [k, v] of m) out[k] = v;
  return out;
}

function paramSize(v: ParamValue): number {
  switch (v.type) {
    case 'bool': return 2;
    case 'double': return 9;
    case 'string': return lenField(Buffer.byteLength(v.value));
    default: return 1 + varint64Size(BigInt.asUintN(64, v.value));
  }
}

function mapSize(m: ReadonlyMap<string, ParamValue>): number {
  const o = paramObject(m);
  if (o === undefined) return 0;
  let size = 0;
  for (const k of Object.keys(o)) size += lenField(lenField(Buffer.byteLength(k)) + lenField(paramSize(o[k]!)));
  return size;
}

const strField = (s: string, skipEmpty: boolean): number => (skipEmpty && s === '' ? 0 : lenField(Buffer.byteLength(s)));

function shapeSize(shape: readonly number[]): number {
  if (shape.length === 0) return 0;
  let n = 0;
  for (let i = 0; i < shape.length; i++) n += dimSize(shape[i]!);
  return lenField(n);
}

const dimSize = (d: number): number => (d >= 0 && d <= Number.MAX_SAFE_INTEGER ? varintSize(d) : varint64Size(BigInt.asUintN(64, BigInt(d))));

function inputSize(t: InferRequest['inputs'][number]): number {
  return strField(t.name, true) + strField(t.datatype, true) + shapeSize(t.shape) + mapSize(t.parameters);
}

function outputSize(o: NonNullable<InferRequest['outputs']>[number]): number {
  return strField(o.name, true) + mapSize(o.parameters);
}

/** Bytes of the header fields (1–6). */
function headerSize(req: InferRequest): number {
  let size = strField(req.modelName, true) + strField(req.modelVersion, true) + strField(req.id ?? '', true) + mapSize(req.parameters);
  for (let i = 0; i < req.inputs.length; i++) size += lenField(inputSize(req.inputs[i]!));
  if (req.outputs !== undefined) for (let i = 0; i < req.outputs.length; i++) size += lenField(outputSize(req.outputs[i]!));
  return size;
}

function varint64Size(u: bigint): number {
  let size = 1;
  for (; u >= 0x80n; u >>= 7n) size++;
  return size;
}

function writeVarint64(b: Buffer, at: number, u: bigint): number {
  for (; u >= 0x80n; u >>= 7n) b[at++] = Number(u & 0x7fn) | 0x80;
  b[at++] = Number(u);
  return at;
}

/**
 * A string field's length and bytes. protobufjs writes a string under 40 characters with its own
 * UTF-8 writer (a lone surrogate as its three bytes) and a longer one with Buffer's (U+FFFD).
 */
function writeStr(b: Buffer, at: number, tag: number, s: string): number {
  b[at++] = tag;
  at = writeVarint(b, at, Buffer.byteLength(s));
  if (s.length >= 40) return at + b.write(s, at, 'utf8');
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      b[at++] = c;
    } else if (c < 0x800) {
      b[at++] = (c >> 6) | 0xc0;
      b[at++] = (c & 0x3f) | 0x80;
    } else if ((c & 0xfc00) === 0xd800 && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      c = 0x10000 + ((c & 0x3ff) << 10) + (s.charCodeAt(++i) & 0x3ff);
      b[at++] = (c >> 18) | 0xf0;
      b[at++] = ((c >> 12) & 0x3f) | 0x80;
      b[at++] = ((c >> 6) & 0x3f) | 0x80;
      b[at++] = (c & 0x3f) | 0x80;
    } else {
      b[at++] = (c >> 12) | 0xe0;
      b[at++] = ((c >> 6) & 0x3f) | 0x80;
      b[at++] = (c & 0x3f) | 0x80;
    }
  }
  return at;
}

function writeParam(b: Buffer, at: number, v: ParamValue): number {
  switch (v.type) {
    case 'bool':
      b[at] = TAG.bool;
      b[at + 1] = v.value ? 1 : 0;
      return at + 2;
    case 'double':
      b[at] = TAG.double;
      return b.writeDoubleLE(v.value, at + 1);
    case 'string': return writeStr(b, at, TAG.string, v.value);
    default:
      b[at] = v.type === 'int64' ? TAG.int64 : TAG.uint64;
      return writeVarint64(b, at + 1, BigInt.asUintN(64, v.value));
  }
}

function writeMap(b: Buffer, at: number, tag: number, m: ReadonlyMap<string, ParamValue>): number {
  const o = paramObject(m);
  if (o === undefined) return at;
  for (const k of Object.keys(o)) {
    const v = o[k]!;
    const value = paramSize(v);
    b[at++] = tag;
    at = writeVarint(b, at, lenField(Buffer.byteLength(k)) + lenField(value));
    at = writeStr(b, at, TAG.mapKey, k);
    b[at++] = TAG.mapValue;
    at = writeParam(b, writeVarint(b, at, value), v);
  }
  return at;
}

function writeShape(b: Buffer, at: number, shape: readonly number[]): number {
  if (shape.length === 0) return at;
  let n = 0;
  for (let i = 0; i < shape.length; i++) n += dimSize(shape[i]!);
  b[at++] = TAG.shape;
  at = writeVarint(b, at, n);
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    at = d >= 0 && d <= Number.MAX_SAFE_INTEGER ? writeVarint(b, at, d) : writeVarint64(b, at, BigInt.asUintN(64, BigInt(d)));
  }
  return at;
}

const writeStrField = (b: Buffer, at: number, tag: number, s: string): number => (s === '' ? at : writeStr(b, at, tag, s));

/** Writes the header fields (1–6) at b[at]; returns where they end. */
function writeHeader(b: Buffer, at: number, req: InferRequest): number {
  at = writeStrField(b, at, TAG.modelName, req.modelName);
  at = writeStrField(b, at, TAG.modelVersion, req.modelVersion);
  at = writeStrField(b, at, TAG.id, req.id ?? '');
  at = writeMap(b, at, TAG.parameters, req.parameters);
  for (let i = 0; i < req.inputs.length; i++) {
    const t = req.inputs[i]!;
    b[at++] = TAG.input;
    at = writeVarint(b, at, inputSize(t));
    at = writeStrField(b, at, TAG.tensorName, t.name);
    at = writeStrField(b, at, TAG.datatype, t.datatype);
    at = writeShape(b, at, t.shape);
    at = writeMap(b, at, TAG.inputParameters, t.parameters);
  }
  const outputs = req.outputs ?? NO_OUTPUTS;
  for (let i = 0; i < outputs.length; i++) {
    const o = outputs[i]!;
    b[at++] = TAG.output;
    at = writeVarint(b, at, outputSize(o));
    at = writeStrField(b, at, TAG.tensorName, o.name);
    at = writeMap(b, at, TAG.outputParameters, o.parameters);
  }
  return at;
}

const NO_OUTPUTS: NonNullable<InferRequest['outputs']> = [];

/** `allocate` gets the exact message size; every byte is written here or by the slot decoders. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export function frameInferRequest(req: InferRequest, allocate: Allocate = Buffer.allocUnsafe): FramedRequest {
  return frameInferHead(req, NONE, allocate);
}

const NONE: readonly number[] = [];
const NO_CUTS: readonly Cut[] = Object.freeze([]);

/**
 * The framed message without the last `external[i]` payload bytes of input i (cut-through,
 * docs/cut-through.md): the gRPC prefix counts them, the head leaves them out, and `cuts` says where
 * they go. Slots cover only the bytes held in the head.
 */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export function frameInferHead(req: InferRequest, external: readonly number[], allocate: Allocate = Buffer.allocUnsafe): FramedHead {
  const header = headerSize(req);
  let size = header;
  let held = header;
  for (let i = 0; i < req.inputs.length; i++) {
    const t = req.inputs[i]!;
    if (t.byteSize === undefined) continue;
    const entry = 1 + varintSize(t.byteSize) + t.byteSize;
    size += entry;
    held += entry - (external[i] ?? 0);
  }
  const message = allocate(5 + held);
  message[0] = 0;
  message.writeUInt32BE(size, 1);
  let at = writeHeader(message, 5, req);
  let cuts: Cut[] | undefined;
  const slots: (Slot | undefined)[] = new Array<Slot | undefined>(req.inputs.length);
  for (let i = 0; i < req.inputs.length; i++) {
    const t = req.inputs[i]!;
    slots[i] = undefined;
    if (t.byteSize === undefined) continue;
    message[at++] = RAW_INPUT_CONTENTS_TAG;
    at = writeVarint(message, at, t.byteSize);
    const length = t.byteSize - (external[i] ?? 0);
    slots[i] = { offset: at, length };
    at += length;
    if (length < t.byteSize) (cuts ??= []).push({ at, length: t.byteSize - length });
  }
  return { message, slots, cuts: cuts ?? NO_CUTS };
}
