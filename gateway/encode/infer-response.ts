// The V2 inference response as Triton's HTTP frontend writes it (docs/architecture.md#answers): a compact JSON
// header — "id" (when set), "model_name", "model_version", "parameters" (when any), "outputs" —
// where each output carries either inline "data" (always flat) or
// "parameters":{"binary_data_size":N} with its bytes appended after the header in output order.
// Binary output bytes are never copied: they stay the views of Triton's answer.
import { GatewayError } from '../errors';
import { elementCount, elementSize, isDatatype } from '../infer/datatype';
import { gather } from '../infer/gather';
import type { InferRequest, ParamValue } from '../infer/request';
import { type InferResponse, type OutputTensor, outputBytes, type ResponseParams } from '../infer/response';
import { formatTritonFp64, MAX_TRITON_DOUBLE_LENGTH, writeTritonFp64 } from '../json/number-print';
import { printFloats } from '../json/number-print-wasm';
import { jsonStringBytesOfBytes } from '../json/string-print';

export interface EncodedResponse {
  /** The JSON header (the whole body when there is no binary output). */
  readonly header: Buffer;
  /** Binary output bytes in order: views of the upstream answer. */
  readonly binary: readonly Buffer[];
  readonly binaryLength: number;
  /** Bytes copied to render JSON outputs whose bytes arrived split across chunks. */
  readonly copied: number;
}

type Kind = 'json' | 'binary' | 'shm' | 'base64';

type OutputChoice = Pick<InferRequest, 'outputs' | 'binaryDataOutput' | 'base64Output'>;

/**
 * Which form each output takes (docs/architecture.md#answers: an explicit output without binary_data is JSON).
 * Base64 (the gateway's own, docs/dialects.md "Base64 in V2 JSON") replaces JSON: an output's `content_type: "base64"`,
 * else the request's `output_content_type: "base64"`; binary_data wins over both.
 */
export function outputKind(req: OutputChoice, name: string): Kind {
  const json = req.base64Output === true ? 'base64' : 'json';
  const o = req.outputs === undefined ? undefined : findOutput(req.outputs, name);
  if (o === undefined) return req.binaryDataOutput ? 'binary' : json;
  if (o.sharedMemory) return 'shm';
  if (o.binary === true) return 'binary';
  return o.base64 === true ? 'base64' : json;
}

function findOutput(outputs: NonNullable<OutputChoice['outputs']>, name: string): NonNullable<OutputChoice['outputs']>[number] | undefined {
  for (let i = 0; i < outputs.length; i++) if (outputs[i]!.name === name) return outputs[i];
  return undefined;
}

/** Where Parts gathers text runs: one buffer for every answer (encoding is synchronous, one at a time). */
const SCRATCH_BYTES = 16 * 1024;
const scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
/** "-9007199254740991". */
const MAX_SAFE_INTEGER_CHARS = 17;

/**
 * Builds a byte string from latin1 text runs and raw byte pieces. Text is written into the
 * scratch buffer as it comes (no string concatenated per piece) and copied out once, at a raw
 * piece or the end; a run longer than the scratch becomes a buffer of its own.
 */
class Parts {
  readonly list: Buffer[] = [];
  #at = 0;
  add(s: string): void {
    if (this.#at + s.length > SCRATCH_BYTES) {
      this.#flush();
      if (s.length > SCRATCH_BYTES) {
        this.list.push(Buffer.from(s, 'latin1'));
        return;
      }
    }
    this.#at += scratch.write(s, this.#at, 'latin1');
  }
  raw(b: Buffer): void {
    this.#flush();
    this.list.push(b);
  }
  /** A number as String(n) writes it; a safe integer's digits straight into the scratch (no string). */
  num(n: number): void {
    if (!Number.isSafeInteger(n)) {
      this.add(String(n));
      return;
    }
    if (this.#at + MAX_SAFE_INTEGER_CHARS > SCRATCH_BYTES) this.#flush();
    if (n < 0) {
      scratch[this.#at++] = 0x2d; // -
      n = -n;
    }
    let digits = 1;
    for (let m = n; m >= 10; m = Math.floor(m / 10)) digits++;
    for (let i = this.#at + digits - 1; i >= this.#at; i--) {
      scratch[i] = 0x30 + (n % 10);
      n = Math.floor(n / 10);
    }
    this.#at += digits;
  }
  str(s: string): void {
    // Printable ASCII without '"' or a backslash (names, datatypes, versions) is its own token: no Buffers for it.
    if (plainAscii(s)) {
      this.add('"');
      this.add(s);
      this.add('"');
      return;
    }
    const b = Buffer.from(s, 'utf8');
    this.raw(jsonStringBytesOfBytes(b, 0, b.length));
  }
  done(): Buffer {
    this.#flush();
    return gather(this.list);
  }
  /** Empty again, for the next answer (whatever an encoding that threw left). */
  reset(): this {
    this.list.length = 0;
    this.#at = 0;
    return this;
  }
  #flush(): void {
    if (this.#at === 0) return;
    const b = Buffer.allocUnsafe(this.#at);
    scratch.copy(b, 0, 0, this.#at);
    this.list.push(b);
    this.#at = 0;
  }
}

/** Every character is one that rapidjson copies unchanged and that is one byte in UTF-8 (json/string-print.ts). */
function plainAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7f || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

function paramJson(p: Parts, v: ParamValue | undefined): void {
  switch (v?.type) {
    case 'bool': p.add(v.value ? 'true' : 'false'); break;
    case 'int64':
    case 'uint64': p.add(String(v.value)); break;
    case 'double': p.add(formatTritonFp64(v.value)); break;
    case 'string': p.str(v.value); break;
    default: p.add('null');
  }
}

function parameters(p: Parts, params: ResponseParams): void {
  // The streaming API's own marker is not part of a non-streaming answer.
  let first = true;
  for (const k in params) {
    if (k === 'triton_final_response') continue;
    p.add(first ? ',"parameters":{' : ',');
    first = false;
    p.str(k);
    p.add(':');
    paramJson(p, params[k]);
  }
  if (!first) p.add('}');
}

/**
 * `binaryAsBase64`: the answer must be text (a server-sent event, docs/dialects.md "Decoupled
 * models"): outputs asked for as binary are written as base64 instead.
 */
export function encodeInferResponse(res: InferResponse, req: OutputChoice, binaryAsBase64 = false): EncodedResponse {
  const p = answerParts.reset();
  p.add('{');
  if (res.id !== '') {
    p.add('"id":');
    p.str(res.id);
    p.add(',');
  }
  p.add('"model_name":');
  p.str(res.modelName);
  p.add(',"model_version":');
  p.str(res.modelVersion);
  parameters(p, res.parameters);
  p.add(',"outputs":[');
  const out: Encoding = { header: NO_BYTES, binary: [], binaryLength: 0, copied: 0 };
  for (let i = 0; i < res.outputs.length; i++) {
    if (i > 0) p.add(',');
    encodeOutput(p, res.outputs[i]!, req, binaryAsBase64, out);
  }
  p.add(']}');
  out.header = p.done();
  return out;
}

/** encodeInferResponse's text: one for every answer (encoding is synchronous, one at a time). */
const answerParts = new Parts();
const NO_BYTES = Buffer.alloc(0);

type Encoding = { -readonly [K in keyof EncodedResponse]: K extends 'binary' ? Buffer[] : EncodedResponse[K] };

/** One output of encodeInferResponse: its binary bytes and copies added to `out`. */
function encodeOutput(p: Parts, o: OutputTensor, req: OutputChoice, binaryAsBase64: boolean, out: Encoding): void {
  p.add('{"name":');
  p.str(o.name);
  p.add(',"datatype":');
  p.str(o.datatype);
  p.add(',"shape":[');
  for (let d = 0; d < o.shape.length; d++) {
    if (d > 0) p.add(',');
    p.num(o.shape[d]!);
  }
  p.add(']');
  let kind = outputKind(req, o.name);
  if (kind === 'binary' && binaryAsBase64) kind = 'base64';
  if (kind === 'binary') {
    p.add(',"parameters":{"binary_data_size":');
    p.num(o.byteLength);
    p.add('}');
    for (let d = 0; d < o.data.length; d++) out.binary.push(o.data[d]!);
    out.binaryLength += o.byteLength;
  } else if (kind === 'json') {
    p.add(',"data":[');
    if (o.data.length > 1) out.copied += o.byteLength;
    jsonData(p, o);
    p.add(']');
  } else if (kind === 'base64') {
    // Marked as the input side marks it, so the answer can be sent back as an input unchanged.
    p.add(',"parameters":{"content_type":"base64"},"data":');
    if (o.data.length > 1) out.copied += o.byteLength;
    base64Data(p, o);
  }
  p.add('}');
}

function sizeMismatch(name: string): GatewayError {
  return new GatewayError('GW_ERR_ENCODE_MALFORMED', `Failed to write 'data' field: output tensor shape does not match size of output for '${name}'`);
}

/** Numeric outputs: one base64 string of the little-endian bytes; BYTES: one base64 string per element. */
function base64Data(p: Parts, o: OutputTensor): void {
  const data = outputBytes(o);
  if (o.datatype !== 'BYTES') {
    if (isDatatype(o.datatype) && data.length !== elementCount(o.shape) * elementSize(o.datatype)) throw sizeMismatch(o.name);
    p.add(`"${data.toString('base64')}"`);
    return;
  }
  const count = elementCount(o.shape);
  const out: string[] = new Array<string>(count);
  let at = 0;
  for (let e = 0; e < count; e++) {
    if (at + 4 > data.length) throw sizeMismatch(o.name);
    const len = data.readUInt32LE(at);
    if (at + 4 + len > data.length) throw sizeMismatch(o.name);
    out[e] = `"${data.toString('base64', at + 4, at + 4 + len)}"`;
    at += 4 + len;
  }
  p.add(`[${out.join(',')}]`);
}

/** Writes an output's elements as Triton does (WriteDataToJson). */
function jsonData(p: Parts, o: OutputTensor): void {
  const dt = o.datatype;
  if (dt === 'FP16' || dt === 'BF16') {
    throw new GatewayError('GW_ERR_ENCODE_UNSUPPORTED', `sending ${dt} data via JSON is not supported. Please use the binary data format for output`);
  }
  const data = outputBytes(o);
  const count = elementCount(o.shape);
  if (dt === 'BYTES') {
    // Elements follow each other as uint32 length + bytes; a short buffer is Triton's size error.
    let at = 0;
    for (let e = 0; e < count; e++) {
      if (at + 4 > data.length) throw sizeMismatch(o.name);
      const len = data.readUInt32LE(at);
      if (at + 4 + len > data.length) throw sizeMismatch(o.name);
      if (e > 0) p.add(',');
      p.raw(jsonStringBytesOfBytes(data, at + 4, at + 4 + len));
      at += 4 + len;
    }
    return;
  }
  if (!isDatatype(dt)) return; // Triton writes no elements for an unknown type
  if (data.length !== count * elementSize(dt)) throw sizeMismatch(o.name);
  if (dt === 'FP32' || dt === 'FP64') {
    p.raw(floatElements(data, count, dt === 'FP32'));
    return;
  }
  p.add(otherElements(data, count, dt));
}

/**
 * Elements of a type other than FP32, FP64, FP16, BF16 and BYTES, comma-separated, as Triton
 * prints them (json-answer-head.ts finds integers' text in an answer by this function too).
 */
export function otherElements(data: Buffer, count: number, dt: string): string {
  const out: string[] = new Array<string>(count);
  switch (dt) {
    case 'BOOL': for (let e = 0; e < count; e++) out[e] = data[e] === 0 ? 'false' : 'true'; break;
    case 'UINT8': for (let e = 0; e < count; e++) out[e] = String(data[e]); break;
    case 'INT8': for (let e = 0; e < count; e++) out[e] = String(data.readInt8(e)); break;
    case 'UINT16': for (let e = 0; e < count; e++) out[e] = String(data.readUInt16LE(e * 2)); break;
    case 'INT16': for (let e = 0; e < count; e++) out[e] = String(data.readInt16LE(e * 2)); break;
    case 'UINT32': for (let e = 0; e < count; e++) out[e] = String(data.readUInt32LE(e * 4)); break;
    case 'INT32': for (let e = 0; e < count; e++) out[e] = String(data.readInt32LE(e * 4)); break;
    case 'UINT64': for (let e = 0; e < count; e++) out[e] = String(data.readBigUInt64LE(e * 8)); break;
    case 'INT64': for (let e = 0; e < count; e++) out[e] = String(data.readBigInt64LE(e * 8)); break;
    default: break;
  }
  return out.join(',');
}

/**
 * FP32/FP64 elements, comma-separated, printed as Triton prints them (FP32 widened to double)
 * straight into one buffer: no string per element and no join (150,528 FP32 values: see
 * bench/RESULTS.md, "JSON request decode and FP32 output formatting"). By the WebAssembly printer
 * (json/number-print-wasm.ts, a third of the CPU), or number-print.ts's where WebAssembly is missing.
 */
export function floatElements(data: Buffer, count: number, fp32: boolean): Buffer {
  const printed = printFloats(data, count, fp32);
  if (printed !== undefined) return printed;
  const out = Buffer.allocUnsafe(count * (MAX_TRITON_DOUBLE_LENGTH + 1));
  return out.subarray(0, writeFloats(new DataView(data.buffer, data.byteOffset, data.length), count, fp32, out));
}

/**
 * The loop of floatElements, on its own: it runs as on-stack-replaced code, and anything after the
 * loop that the interpreter had not run before the switch deopted every call.
 */
function writeFloats(view: DataView, count: number, fp32: boolean, out: Buffer): number {
  let at = 0;
  for (let e = 0; e < count; e++) {
    if (e > 0) out[at++] = 0x2c; // ,
    at = writeTritonFp64(fp32 ? view.getFloat32(e * 4, true) : view.getFloat64(e * 8, true), out, at);
  }
  return at;
}

/**
 * One response of the generate extension (docs/architecture.md#generate, as Triton 2.51 writes it): a flat object
 * of "id" (when set), "model_name", "model_version", each response parameter (the streaming marker
 * `triton_final_response` dropped) and each output by name (a single-element tensor as a scalar,
 * else a flat array), in the byte order of the keys — Triton gathers them in a std::map
 * (http_server.cc FinalizeResponse), where the first of two equal keys stays. Always JSON.
 */
export function encodeGenerateResponse(res: InferResponse): Buffer {
  const entries = new Map<string, (p: Parts) => void>();
  const put = (k: string, write: (p: Parts) => void): void => {
    if (!entries.has(k)) entries.set(k, write);
  };
  if (res.id !== '') put('id', (p) => p.str(res.id));
  put('model_name', (p) => p.str(res.modelName));
  put('model_version', (p) => p.str(res.modelVersion));
  for (const [k, v] of Object.entries(res.parameters)) {
    if (k !== 'triton_final_response') put(k, (p) => paramJson(p, v));
  }
  for (const o of res.outputs) {
    put(o.name, (p) => {
      const single = elementCount(o.shape) === 1;
      if (!single) p.add('[');
      jsonData(p, o);
      if (!single) p.add(']');
    });
  }
  const keys = [...entries.keys()].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
  const p = new Parts();
  p.add('{');
  keys.forEach((k, i) => {
    if (i > 0) p.add(',');
    p.str(k);
    p.add(':');
    entries.get(k)!(p);
  });
  p.add('}');
  return p.done();
}

/** An error as a generate answer or event: `{"error": message}`. */
export function encodeGenerateError(message: string): Buffer {
  return Buffer.from(JSON.stringify({ error: message }));
}
