// The pre-framed ModelInferRequest (DESIGN.md §3.1): one buffer holding the 5-byte gRPC message
// prefix, the protobuf header fields (model_name, model_version, id, parameters, inputs, outputs —
// encoded by protobufjs, small) and one length-delimited raw_input_contents entry per input
// (field 7, tag 0x3a) whose payload bytes are left for the decoders to fill in place. Field 7 is
// the last field, so the result is byte-identical to protobufjs encoding the whole message.
import Long from 'long';
import { inference } from '../../proto/services';
import type { InferRequest, ParamValue } from '../infer/request';

export interface Slot {
  /** Offset of the payload in `message`. */
  readonly offset: number;
  readonly length: number;
}

export interface FramedRequest {
  /** gRPC length-prefixed message: 1 byte compressed flag (0), uint32 BE length, protobuf. */
  readonly message: Buffer;
  /** One per input, aligned with request.inputs; undefined for shared-memory inputs (no entry). */
  readonly slots: readonly (Slot | undefined)[];
}

/** Where a framed message's memory comes from: a request's pooled buffers (upstream/buffer-pool.ts). */
export type Allocate = (byteLength: number) => Buffer;

const RAW_INPUT_CONTENTS_TAG = 0x3a; // field 7, wire type 2

export function toInferParameter(p: ParamValue): inference.IInferParameter {
  switch (p.type) {
    case 'bool': return { bool_param: p.value };
    case 'string': return { string_param: p.value };
    case 'double': return { double_param: p.value };
    case 'int64': return { int64_param: longOf(p.value, false) };
    case 'uint64': return { uint64_param: longOf(p.value, true) };
  }
}

function longOf(v: bigint, unsigned: boolean): number | Long {
  if (v >= -9007199254740991n && v <= 9007199254740991n) return Number(v);
  const u = BigInt.asUintN(64, v);
  return Long.fromBits(Number(u & 0xffffffffn) | 0, Number(u >> 32n) | 0, unsigned);
}

function parameterMap(m: ReadonlyMap<string, ParamValue>): Record<string, inference.IInferParameter> | undefined {
  if (m.size === 0) return undefined;
  const out: Record<string, inference.IInferParameter> = {};
  for (const [k, v] of m) out[k] = toInferParameter(v);
  return out;
}

/** The header fields (1–6) as the protobufjs message object. */
export function headerMessage(req: InferRequest): inference.IModelInferRequest {
  const msg: inference.IModelInferRequest = { model_name: req.modelName };
  if (req.modelVersion !== '') msg.model_version = req.modelVersion;
  if (req.id !== undefined && req.id !== '') msg.id = req.id;
  const params = parameterMap(req.parameters);
  if (params) msg.parameters = params;
  msg.inputs = req.inputs.map((t) => {
    const input: inference.ModelInferRequest.IInferInputTensor = { name: t.name, datatype: t.datatype, shape: [...t.shape] };
    const p = parameterMap(t.parameters);
    if (p) input.parameters = p;
    return input;
  });
  if (req.outputs !== undefined) {
    msg.outputs = req.outputs.map((o) => {
      const out: inference.ModelInferRequest.IInferRequestedOutputTensor = { name: o.name };
      const p = parameterMap(o.parameters);
      if (p) out.parameters = p;
      return out;
    });
  }
  return msg;
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

/** `allocate` gets the exact message size; every byte is written here or by the slot decoders. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export function frameInferRequest(req: InferRequest, allocate: Allocate = Buffer.allocUnsafe): FramedRequest {
  return frameInferHead(req, NONE, allocate);
}

const NONE: readonly number[] = [];

/** Where bytes that are not in the head go on the wire: before head[at], `length` of them. */
export interface Cut {
  readonly at: number;
  readonly length: number;
}

export interface FramedHead extends FramedRequest {
  /** In order; the wire is head[0, cut0.at) + cut0's bytes + head[cut0.at, cut1.at) + … + the rest of head. */
  readonly cuts: readonly Cut[];
}

/**
 * The framed message without the last `external[i]` payload bytes of input i (cut-through,
 * DESIGN.md §3.4): the gRPC prefix counts them, the head leaves them out, and `cuts` says where
 * they go. Slots cover only the bytes held in the head.
 */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export function frameInferHead(req: InferRequest, external: readonly number[], allocate: Allocate = Buffer.allocUnsafe): FramedHead {
  const header = inference.ModelInferRequest.encode(headerMessage(req)).finish();
  let size = header.byteLength;
  let held = header.byteLength;
  req.inputs.forEach((t, i) => {
    if (t.byteSize === undefined) return;
    const entry = 1 + varintSize(t.byteSize) + t.byteSize;
    size += entry;
    held += entry - (external[i] ?? 0);
  });
  const message = allocate(5 + held);
  message[0] = 0;
  message.writeUInt32BE(size, 1);
  message.set(header, 5);
  let at = 5 + header.byteLength;
  const cuts: Cut[] = [];
  const slots = req.inputs.map((t, i): Slot | undefined => {
    if (t.byteSize === undefined) return undefined;
    message[at++] = RAW_INPUT_CONTENTS_TAG;
    at = writeVarint(message, at, t.byteSize);
    const length = t.byteSize - (external[i] ?? 0);
    const slot = { offset: at, length };
    at += length;
    if (length < t.byteSize) cuts.push({ at, length: t.byteSize - length });
    return slot;
  });
  return { message, slots, cuts };
}
