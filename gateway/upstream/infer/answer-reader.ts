// ModelInferResponse read straight from the received DATA chunks. The header fields (model_name,
// model_version, id, parameters, outputs — small) are gathered and decoded by protobufjs; every
// raw_output_contents entry (field 6, the payload) stays a list of views of the received chunks,
// so a binary answer reaches the client without a user-space copy (docs/architecture.md#answers-as-views).
import type Long from 'long';
import { inference } from '../../../proto/services';
import { GatewayError } from '../../errors';
import type { ParamValue } from '../../infer/request';
import type { InferResponse, ResponseParams } from '../../infer/response';

const RAW_OUTPUT_CONTENTS = 6;

/** A cursor over a list of chunks. */
class Chunks {
  i = 0;
  at = 0;
  constructor(readonly chunks: readonly Buffer[]) {}

  done(): boolean {
    while (this.i < this.chunks.length && this.at >= this.chunks[this.i]!.length) {
      this.i++;
      this.at = 0;
    }
    return this.i >= this.chunks.length;
  }

  byte(): number {
    if (this.done()) throw truncated();
    return this.chunks[this.i]![this.at++]!;
  }

  varint(): number {
    let result = 0;
    let mul = 1;
    for (let k = 0; k < 10; k++) {
      const b = this.byte();
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    throw truncated();
  }

  /** The next n bytes as views (no copy). */
  views(n: number, out: Buffer[]): void {
    let left = n;
    while (left > 0) {
      if (this.done()) throw truncated();
      const c = this.chunks[this.i]!;
      const take = Math.min(left, c.length - this.at);
      out.push(c.subarray(this.at, this.at + take));
      this.at += take;
      left -= take;
    }
  }
}

function truncated(): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a truncated ModelInferResponse');
}

function writeVarint(out: number[], n: number): void {
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
}

export function readInferResponse(chunks: readonly Buffer[]): InferResponse {
  const cur = new Chunks(chunks);
  const header: Buffer[] = [];
  const raws: { views: Buffer[]; length: number }[] = [];
  while (!cur.done()) {
    const tag = cur.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === RAW_OUTPUT_CONTENTS && wire === 2) {
      const len = cur.varint();
      const views: Buffer[] = [];
      cur.views(len, views);
      raws.push({ views, length: len });
      continue;
    }
    // Any other field: copy tag and value into the small header for protobufjs.
    const prefix: number[] = [];
    writeVarint(prefix, tag);
    header.push(Buffer.from(prefix));
    if (wire === 2) {
      const len = cur.varint();
      const lenBytes: number[] = [];
      writeVarint(lenBytes, len);
      header.push(Buffer.from(lenBytes));
      cur.views(len, header);
    } else if (wire === 0) {
      const v: number[] = [];
      writeVarint(v, cur.varint());
      header.push(Buffer.from(v));
    } else if (wire === 1 || wire === 5) {
      cur.views(wire === 1 ? 8 : 4, header);
    } else {
      throw truncated();
    }
  }
  let msg: inference.ModelInferResponse;
  try {
    msg = inference.ModelInferResponse.decode(Buffer.concat(header));
  } catch (err) {
    // protobufjs throws plain errors ("index out of range", "invalid wire type"): Triton's answer
    // is at fault, not a bug of ours.
    throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream sent a ModelInferResponse that does not decode: ${(err as Error).message}`, { cause: err });
  }
  return toInferResponse(msg, raws);
}

/**
 * The header fields alone (1–5: everything before the first output's bytes), for an answer
 * streamed as it arrives (egress/stream-binary.ts); outputs have no data. Throws when they do
 * not decode.
 */
export function readResponseHeader(header: Uint8Array): InferResponse {
  return toInferResponse(inference.ModelInferResponse.decode(header), []);
}

/** The decoded header fields with each output's bytes (raws[i], views; none when absent). */
function toInferResponse(msg: inference.ModelInferResponse, raws: readonly { views: Buffer[]; length: number }[]): InferResponse {
  return {
    modelName: msg.model_name,
    modelVersion: msg.model_version,
    id: msg.id,
    parameters: fromParameters(msg.parameters),
    outputs: msg.outputs.map((o, i) => ({
      name: o.name ?? '',
      datatype: o.datatype ?? '',
      shape: (o.shape ?? []).map(dimOf),
      parameters: fromParameters(o.parameters),
      data: raws[i]?.views ?? [],
      byteLength: raws[i]?.length ?? 0,
    })),
  };
}

/**
 * An int64 dim as protobufjs decodes it (a Long) as a number: Long's own conversion, the same
 * correctly rounded value as Number(d), which goes through Long's decimal string.
 */
function dimOf(d: number | Long): number {
  return typeof d === 'number' ? d : d.toNumber();
}

const NO_PARAMS: ResponseParams = Object.freeze({});

/** Triton's parameter map in its own order, each value as our ParamValue. */
function fromParameters(m: Record<string, inference.IInferParameter> | null | undefined): ResponseParams {
  if (m === null || m === undefined) return NO_PARAMS;
  const keys = Object.keys(m);
  if (keys.length === 0) return NO_PARAMS;
  const out: Record<string, ParamValue | undefined> = {};
  for (const k of keys) out[k] = fromInferParameter(m[k]!);
  return out;
}

function fromInferParameter(p: inference.IInferParameter): ParamValue | undefined {
  const v = p as inference.InferParameter;
  switch (v.parameter_choice) {
    case 'bool_param': return { type: 'bool', value: v.bool_param === true };
    case 'int64_param': return { type: 'int64', value: BigInt(String(v.int64_param)) };
    case 'uint64_param': return { type: 'uint64', value: BigInt(String(v.uint64_param)) };
    case 'double_param': return { type: 'double', value: v.double_param ?? 0 };
    case 'string_param': return { type: 'string', value: v.string_param ?? '' };
    default: return undefined;
  }
}
