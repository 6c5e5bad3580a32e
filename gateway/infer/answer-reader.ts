// ModelInferResponse read straight from the received DATA chunks, the one place that splits an
// answer into its header fields and its outputs' bytes: whole (readInferResponse), or as it arrives
// (nextOutput for the head, OutputEntries after it: a binary answer streamed, docs/cut-through.md).
// The header fields (model_name, model_version, id, parameters, outputs — small) are gathered and
// decoded by protobufjs; every raw_output_contents entry (field 6, the payload) stays a list of
// views of the received chunks, so a binary answer reaches the client without a user-space copy
// (docs/architecture.md#answers-as-views).
import type Long from 'long';
import { inference } from '../../proto/services';
import { GatewayError } from '../errors';
import { I32, I64, LEN, PushVarint, tagOf, VARINT, WireReader } from '../grpc/wire';
import { gather } from './gather';
import type { ParamValue } from './request';
import type { InferResponse, OutputTensor, ResponseParams } from './response';

/** raw_output_contents: field 6, length-delimited. */
const RAW_OUTPUT_CONTENTS_TAG = tagOf(6, LEN);

/** nextOutput's answers other than an entry's length. */
export const END = -1;
export const TRUNCATED = -2;
export const MALFORMED = -3;

/**
 * Reads fields from the cursor up to the next raw_output_contents entry: every other field goes to
 * `header` (views, tag included). Returns the entry's length, the cursor at its first byte; END
 * when the chunks end between fields; TRUNCATED when they end inside one (or a varint is longer
 * than ten bytes); MALFORMED for a wire type that is not read here (a group; 6, 7).
 */
export function nextOutput(r: WireReader, header: Buffer[]): number {
  while (!r.done()) {
    const { chunk, at } = r;
    const tag = r.varint();
    if (tag < 0) return TRUNCATED;
    if (tag === RAW_OUTPUT_CONTENTS_TAG) {
      const length = r.varint();
      return length < 0 ? TRUNCATED : length;
    }
    const wire = tag % 8;
    if (wire !== VARINT && wire !== I64 && wire !== LEN && wire !== I32) return MALFORMED;
    if (!r.skipValue(wire)) return TRUNCATED;
    r.viewsSince(chunk, at, header);
  }
  return END;
}

function truncated(): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a truncated ModelInferResponse');
}

export function readInferResponse(chunks: readonly Buffer[]): InferResponse {
  const r = new WireReader(chunks);
  const header: Buffer[] = [];
  const raws: { views: Buffer[]; length: number }[] = [];
  for (;;) {
    const length = nextOutput(r, header);
    if (length === END) break;
    if (length < 0) throw truncated();
    const views: Buffer[] = [];
    if (!r.views(length, views)) throw truncated();
    raws.push({ views, length });
  }
  let msg: inference.ModelInferResponse;
  try {
    msg = decodeHeader(header);
  } catch (err) {
    // protobufjs throws plain errors ("index out of range", "invalid wire type"): Triton's answer
    // is at fault, not a bug of ours.
    throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream sent a ModelInferResponse that does not decode: ${(err as Error).message}`, { cause: err });
  }
  return toInferResponse(msg, raws);
}

/**
 * The header fields alone (nextOutput's `header`: everything before the first output's bytes),
 * for an answer streamed as it arrives; outputs have no data. Throws when they do not decode.
 */
export function readResponseHeader(header: readonly Buffer[]): InferResponse {
  return toInferResponse(decodeHeader(header), []);
}

/** The header fields (views) decoded by protobufjs, from one buffer: the only view, or a copy of several (small). */
function decodeHeader(header: readonly Buffer[]): inference.ModelInferResponse {
  return inference.ModelInferResponse.decode(gather(header));
}

/**
 * The raw_output_contents entries after the head of a streamed answer (nextOutput found the first
 * one): each entry's bytes handed on as views as they arrive, the tag and length between entries
 * read a byte at a time (split anywhere), each length checked against the size its output's
 * shape gives.
 */
export class OutputEntries {
  /** Bytes the current entry still has. */
  #left: number;
  #entry = 0;
  /** Between entries: the tag seen, its length being read. */
  #tagSeen = false;
  readonly #length = new PushVarint();

  /** `expected`: each output's size; `first`: the first entry's length (its tag and length read). */
  constructor(private readonly expected: readonly number[], first: number) {
    this.#left = first;
  }

  /**
   * Hands the entry bytes of piece[from..] to `write` (the whole piece when it is all entry
   * bytes); returns what is wrong when the answer does not fit its header, and reads no further.
   */
  push(piece: Buffer, from: number, write: (view: Buffer) => void): string | undefined {
    let at = from;
    while (at < piece.length) {
      if (this.#left > 0) {
        const n = Math.min(this.#left, piece.length - at);
        write(n === piece.length ? piece : piece.subarray(at, at + n));
        at += n;
        this.#left -= n;
        continue;
      }
      const b = piece[at++]!;
      if (!this.#tagSeen) {
        if (b !== RAW_OUTPUT_CONTENTS_TAG || this.#entry + 1 >= this.expected.length) return 'upstream answer has more than its outputs after the header';
        this.#tagSeen = true;
        continue;
      }
      if (!this.#length.add(b)) continue;
      const length = this.#length.value;
      this.#length.reset();
      this.#tagSeen = false;
      this.#entry++;
      if (length !== this.expected[this.#entry]) return `upstream output ${this.#entry} has ${length} bytes where its shape says ${this.expected[this.#entry]}`;
      this.#left = length;
    }
    return undefined;
  }

  /** Every entry arrived whole. */
  get complete(): boolean {
    return this.#left === 0 && !this.#tagSeen && this.#entry === this.expected.length - 1;
  }
}

/** The decoded header fields with each output's bytes (raws[i], views; none when absent). */
function toInferResponse(msg: inference.ModelInferResponse, raws: readonly { views: Buffer[]; length: number }[]): InferResponse {
  return {
    modelName: msg.model_name,
    modelVersion: msg.model_version,
    id: msg.id,
    parameters: fromParameters(msg.parameters),
    outputs: outputsOf(msg.outputs, raws),
  };
}

function outputsOf(outputs: inference.ModelInferResponse['outputs'], raws: readonly { views: Buffer[]; length: number }[]): OutputTensor[] {
  const out = new Array<OutputTensor>(outputs.length);
  for (let i = 0; i < outputs.length; i++) {
    const o = outputs[i]!;
    out[i] = {
      name: o.name ?? '',
      datatype: o.datatype ?? '',
      shape: shapeOf(o.shape),
      parameters: fromParameters(o.parameters),
      data: raws[i]?.views ?? [],
      byteLength: raws[i]?.length ?? 0,
    };
  }
  return out;
}

function shapeOf(dims: (number | Long)[] | null | undefined): number[] {
  const n = dims?.length ?? 0;
  const shape = new Array<number>(n);
  for (let i = 0; i < n; i++) shape[i] = dimOf(dims![i]!);
  return shape;
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
  for (let i = 0; i < keys.length; i++) out[keys[i]!] = fromInferParameter(m[keys[i]!]!);
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
