// Raw binary requests (Inference-Header-Content-Length: 0, docs/architecture.md#raw-requests): the whole body is the
// data of the model's single input, whose name, datatype and shape Triton deduces from the model
// configuration — so does the gateway, since gRPC needs them spelled out. Batching models get a
// batch of 1; the one variable dim takes what the body holds; a BYTES body becomes one element
// with its 4-byte length prepended. Every output is answered binary. Triton reports deduction
// errors from its core, after the request was created: with the "[request id: <id_unknown>] "
// prefix, and it calls the input 'raw_input' (rawInputMessage renames ours in Triton's answers).
import type { inference } from '../../proto/services';
import { GatewayError } from '../errors';
import { datatypeOfConfigEnum, elementSize } from '../infer/datatype';
import { type InferRequest, type InputTensor, NO_PARAMETERS } from '../infer/request';
import type { Frame, FramedHead, OpenSink, PayloadSink, Slot } from '../infer/framed-message';
import { type FramedHeads, type KnownHead, RAW_HEADER } from './framed-heads';
import { refuseShapeBeyondInt32 } from './tensor-shape';

const NO_ID = '[request id: <id_unknown>] ';
const NO_DIMS: readonly number[] = [];
const NO_EXTERNAL: readonly number[] = [];

/** Triton's own name for the input of a raw request, as its messages spell it. */
export function rawInputMessage(message: string, inputName: string): string {
  return message.split(`'${inputName}'`).join("'raw_input'");
}

export function deduceRawRequest(
  config: inference.ModelConfig, modelName: string, modelVersion: string, bodyBytes: number, maxInputSizeBytes: number,
): InferRequest {
  if (bodyBytes > maxInputSizeBytes) {
    throw new GatewayError('GW_ERR_DECODE_TOO_LARGE',
      `Raw input has a byte_size (${bodyBytes} bytes) that exceeds the maximum allowed value of ${maxInputSizeBytes} bytes. Use --http-max-input-size to increase the limit.`);
  }
  // The request depends on nothing else: the last one deduced for a configuration serves again.
  const last = deduced.get(config);
  if (last !== undefined && last.bodyBytes === bodyBytes && last.request.modelName === modelName && last.request.modelVersion === modelVersion) {
    return last.request;
  }
  const inputs = config.input;
  if (inputs.length !== 1) {
    throw new GatewayError('GW_ERR_DECODE_RAW_UNDEDUCIBLE',
      `${NO_ID}Raw request must only have 1 input (found 1) to be deduced but got ${inputs.length} inputs in '${modelName}' model configuration`);
  }
  const input = deduceRawInput(inputs[0]!, config.max_batch_size ?? 0, bodyBytes);
  const request: InferRequest = {
    modelName,
    modelVersion,
    id: undefined,
    parameters: NO_PARAMETERS,
    inputs: [input],
    outputs: undefined,
    binaryDataOutput: true,
  };
  deduced.set(config, { bodyBytes, request });
  return request;
}

/** The last raw request deduced for each model configuration (a configuration refreshed is a new object). */
const deduced = new WeakMap<inference.ModelConfig, { readonly bodyBytes: number; readonly request: InferRequest }>();

/**
 * One input whose data is `bytes` bytes of the body, as Triton's raw requests deduce it from the
 * model configuration: a BYTES input must be dims [1] and holds one element (its 4-byte length is
 * counted); one variable dim takes what the bytes hold; batching models get a batch of 1. Also
 * what each file part of a multipart body becomes (decode/multipart.ts).
 */
export function deduceRawInput(input: inference.ModelInput.$Properties, maxBatchSize: number, bytes: number): InputTensor {
  const name = input.name ?? '';
  const datatype = datatypeOfConfigEnum(input.data_type ?? 0) ?? 'BYTES';
  const dims = input.dims ?? NO_DIMS;
  const batched = maxBatchSize > 0 ? 1 : 0;
  let byteSize = bytes;
  const shape = new Array<number>(batched + dims.length);
  if (batched === 1) shape[0] = 1;
  if (datatype === 'BYTES') {
    if (dims.length !== 1 || Number(dims[0]) !== 1) {
      throw new GatewayError('GW_ERR_DECODE_RAW_UNDEDUCIBLE', `${NO_ID}For BYTE datatype raw input '${name}', the model must have input shape [1]`);
    }
    shape[batched] = 1;
    byteSize = bytes + 4;
  } else {
    let variable = 0;
    let fixed = 1;
    for (let i = 0; i < dims.length; i++) {
      const d = Number(dims[i]);
      if (d === -1) variable++;
      else fixed *= d;
    }
    if (variable > 1) {
      throw new GatewayError('GW_ERR_DECODE_RAW_UNDEDUCIBLE',
        `${NO_ID}The shape of the raw input '${name}' can not be deduced because there are more than one variable-sized dimension`);
    }
    const unit = fixed * elementSize(datatype);
    for (let i = 0; i < dims.length; i++) {
      const d = Number(dims[i]);
      shape[batched + i] = d === -1 ? (unit === 0 ? 0 : Math.floor(bytes / unit)) : d;
    }
  }
  refuseShapeBeyondInt32(name, shape);
  return { name, datatype, shape, parameters: NO_PARAMETERS, byteSize };
}

/**
 * A raw body decoded as it arrives (`push(chunk)` … `end()`): the input is deduced up front from
 * the model configuration and the declared length, the request framed, and every byte of the body
 * goes to the sink opened for it — its slot, or upstream by reference when `external`.
 */
export class RawDecoder {
  readonly request: InferRequest;
  /** The kept head the request is (decode/framed-heads.ts): found, or kept now; undefined when not kept. */
  readonly known: KnownHead | undefined;
  readonly #sink: PayloadSink;

  constructor(o: RawOptions, frame: Frame, open: OpenSink) {
    // A raw request's head depends on nothing but the model, its configuration and the body's
    // length: kept as a binary-extension header is, under an empty header (no header bytes).
    const heads = o.external && o.bodyBytes <= o.maxInputSizeBytes ? o.heads : undefined;
    const known = heads?.find(o.config, o.modelName, o.modelVersion, RAW_HEADER, 0, o.bodyBytes);
    if (known !== undefined) {
      this.request = known.request;
      this.known = known;
      this.#sink = open(known.request, known.framed, known.slots);
      return;
    }
    const { request, framed, body } = frameRawRequest(o, frame);
    this.request = request;
    const slots = [body];
    this.known = heads?.keep(o.config, RAW_HEADER, 0, { bodyBytes: o.bodyBytes, request, framed, slots, copied: 0 });
    this.#sink = open(request, framed, slots);
  }

  push(chunk: Buffer): void {
    this.#sink.write(chunk);
  }

  end(): InferRequest {
    return this.request;
  }
}

export interface RawOptions {
  readonly config: inference.ModelConfig;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly bodyBytes: number;
  readonly maxInputSizeBytes: number;
  /** Leave the body out of the framed head: it goes upstream as it arrives (cut-through). */
  readonly external: boolean;
  /**
   * With `external`: heads framed before, taken again for the same model and body length
   * (decode/framed-heads.ts). Only for heads framed into memory of their own (not a request's pool).
   */
  readonly heads?: FramedHeads | undefined;
}

/**
 * A raw request ready for its body: the deduced request, its framed message (BYTES length already
 * written) and where the body goes — `body` in the message, or, when `external` (cut-through),
 * the message's one cut.
 */
export function frameRawRequest(o: RawOptions, frame: Frame): { request: InferRequest; framed: FramedHead; body: Slot } {
  const request = deduceRawRequest(o.config, o.modelName, o.modelVersion, o.bodyBytes, o.maxInputSizeBytes);
  const framed = frame(request, o.external ? [o.bodyBytes] : NO_EXTERNAL);
  let offset = framed.slots[0]!.offset;
  if (request.inputs[0]!.datatype === 'BYTES') {
    framed.message.writeUInt32LE(o.bodyBytes, offset); // Triton prepends the element length
    offset += 4;
  }
  return { request, framed, body: { offset, length: o.external ? 0 : o.bodyBytes } };
}

/** The model takes uploads: it has exactly one input, BYTES or UINT8, which decodes what it is given. */
export function takesUploads(config: inference.ModelConfig): boolean {
  const inputs = config.input;
  const datatype = inputs.length === 1 ? datatypeOfConfigEnum(inputs[0]!.data_type ?? 0) : undefined;
  return datatype === 'BYTES' || datatype === 'UINT8';
}

/**
 * An upload (a file's bytes under a file's media type, decode/framing.ts) goes to a model whose
 * one input takes encoded bytes (DALI, a Python model decodes them). Raw tensor data of other
 * datatypes is what Inference-Header-Content-Length: 0 says.
 */
export function refuseUnfitUpload(config: inference.ModelConfig, modelName: string, type: string): void {
  if (takesUploads(config)) return;
  const inputs = config.input;
  const list = inputs.map((i) => `'${i.name ?? ''}' ${datatypeOfConfigEnum(i.data_type ?? 0) ?? '?'}`).join(', ');
  throw new GatewayError('GW_ERR_DECODE_UPLOAD_UNFIT',
    `a body of type ${type} is an upload: it goes to a model with exactly one BYTES or UINT8 input, and model '${modelName}' has ${inputs.length === 0 ? 'none' : list}; send raw tensor data with 'Inference-Header-Content-Length: 0', or a V2 request`);
}
