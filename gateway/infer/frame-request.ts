// The pre-framed ModelInferRequest (docs/architecture.md#pre-framing): one buffer holding the 5-byte gRPC message
// prefix, the protobuf header fields (model_name, model_version, id, parameters, inputs, outputs —
// encoded by protobufjs, small) and one length-delimited raw_input_contents entry per input
// (field 7, tag 0x3a) whose payload bytes are left for the decoders to fill in place. Field 7 is
// the last field, so the result is byte-identical to protobufjs encoding the whole message.
import Long from 'long';
import { inference } from '../../proto/services';
import { LEN, tagOf, varintSize, writeVarint } from '../grpc/wire';
import type { Allocate, Cut, FramedHead, FramedRequest, Slot } from './framed-message';
import type { InferRequest, ParamValue } from './request';

const RAW_INPUT_CONTENTS_TAG = tagOf(7, LEN); // 0x3a

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

/** `allocate` gets the exact message size; every byte is written here or by the slot decoders. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export function frameInferRequest(req: InferRequest, allocate: Allocate = Buffer.allocUnsafe): FramedRequest {
  return frameInferHead(req, NONE, allocate);
}

const NONE: readonly number[] = [];

/**
 * The framed message without the last `external[i]` payload bytes of input i (cut-through,
 * docs/cut-through.md): the gRPC prefix counts them, the head leaves them out, and `cuts` says where
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
