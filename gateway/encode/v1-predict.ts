// Triton's answer as TF-Serving / KServe-V1 write it: `{"predictions": […]}` for row requests —
// every output split on dim 0, bare rows for one output, objects by output name for several —
// or `{"outputs": …}` for columnar ones. Numbers are printed as Triton prints them in V2 JSON
// (json/number-print.ts), 64-bit integers exact; BYTES elements are text when they are valid UTF-8,
// else `{"b64": …}`, and always `{"b64": …}` for outputs named `*_bytes` (TF-Serving's rule).
import { isUtf8 } from 'node:buffer';
import { GatewayError } from '../errors';
import { elementCount, elementSize, isDatatype } from '../infer/datatype';
import { type InferResponse, type OutputTensor, outputBytes } from '../infer/response';
import { formatTritonFp32, formatTritonFp64 } from '../json/number-print';
import { floatElements } from './infer-response';

/**
 * An output's elements as JSON text: `row(a, b)` is elements [a, b) comma-separated (empty when
 * b is a). FP32 and FP64 rows are printed straight into a buffer by V2's writer (floatElements):
 * no string per element, no join.
 */
interface Elements {
  readonly name: string;
  readonly shape: readonly number[];
  row(a: number, b: number): string | Buffer;
}

function elements(o: OutputTensor): Elements {
  const data = outputBytes(o);
  const count = elementCount(o.shape);
  const dt = o.datatype;
  if (dt === 'FP32' || dt === 'FP64') {
    const size = elementSize(dt);
    if (data.length !== count * size) throw malformed(o.name);
    return { name: o.name, shape: o.shape, row: (a, b) => (b === a ? '' : floatElements(data.subarray(a * size, b * size), b - a, dt === 'FP32')) };
  }
  const els = textElements(o, data, count);
  return { name: o.name, shape: o.shape, row: (a, b) => (b === a + 1 ? els[a]! : els.slice(a, b).join(',')) };
}

/** Every other datatype's elements, each as its JSON text. */
function textElements(o: OutputTensor, data: Buffer, count: number): string[] {
  const out = new Array<string>(count);
  const dt = o.datatype;
  if (dt === 'BYTES') {
    const asB64 = o.name.endsWith('_bytes');
    let at = 0;
    for (let e = 0; e < count; e++) {
      const len = at + 4 <= data.length ? data.readUInt32LE(at) : -1;
      if (len < 0 || at + 4 + len > data.length) throw malformed(o.name);
      const v = data.subarray(at + 4, at + 4 + len);
      out[e] = !asB64 && isUtf8(v) ? JSON.stringify(v.toString('utf8')) : `{"b64":"${v.toString('base64')}"}`;
      at += 4 + len;
    }
    return out;
  }
  if (!isDatatype(dt) || data.length !== count * elementSize(dt)) throw malformed(o.name);
  for (let e = 0; e < count; e++) {
    switch (dt) {
      case 'BOOL': out[e] = data[e] === 0 ? 'false' : 'true'; break;
      case 'UINT8': out[e] = String(data[e]); break;
      case 'INT8': out[e] = String(data.readInt8(e)); break;
      case 'UINT16': out[e] = String(data.readUInt16LE(e * 2)); break;
      case 'INT16': out[e] = String(data.readInt16LE(e * 2)); break;
      case 'UINT32': out[e] = String(data.readUInt32LE(e * 4)); break;
      case 'INT32': out[e] = String(data.readInt32LE(e * 4)); break;
      case 'UINT64': out[e] = String(data.readBigUInt64LE(e * 8)); break;
      case 'INT64': out[e] = String(data.readBigInt64LE(e * 8)); break;
      case 'FP16': out[e] = formatTritonFp64(fp16(data.readUInt16LE(e * 2))); break;
      case 'BF16': out[e] = formatTritonFp32(bf16(data.readUInt16LE(e * 2))); break;
      default: break;
    }
  }
  return out;
}

function fp16(h: number): number {
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac === 0 ? sign * Infinity : NaN;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

const bf16Scratch = Buffer.alloc(4);
function bf16(h: number): number {
  bf16Scratch.writeUInt32LE(h << 16 >>> 0, 0);
  return bf16Scratch.readFloatLE(0);
}

function malformed(name: string): GatewayError {
  return new GatewayError('GW_ERR_ENCODE_MALFORMED', `output '${name}': its bytes do not match its shape and datatype`);
}

/** The JSON text being written: strings and views, concatenated once (done). */
class Text {
  readonly #pieces: Buffer[] = [];
  #pending = '';

  add(piece: string | Buffer): void {
    if (typeof piece === 'string') {
      this.#pending += piece;
      return;
    }
    if (this.#pending !== '') this.#pieces.push(Buffer.from(this.#pending));
    this.#pending = '';
    this.#pieces.push(piece);
  }

  done(): Buffer {
    if (this.#pending !== '') this.#pieces.push(Buffer.from(this.#pending));
    return this.#pieces.length === 1 ? this.#pieces[0]! : Buffer.concat(this.#pieces);
  }
}

const product = (shape: readonly number[], from: number): number => {
  let n = 1;
  for (let i = from; i < shape.length; i++) n *= shape[i]!;
  return n;
};

/** Writes elements [from, from + product(shape from dim on)) nested by the shape's dims from `dim` on. */
function nest(out: Text, els: Elements, dim: number, from: number): void {
  const { shape } = els;
  if (dim >= shape.length) { // a scalar (a row of a scalar output too)
    out.add(els.row(from, from + 1));
    return;
  }
  const d = shape[dim]!;
  out.add('[');
  if (dim === shape.length - 1) {
    out.add(els.row(from, from + d));
  } else {
    const step = product(shape, dim + 1);
    for (let i = 0; i < d; i++) {
      if (i > 0) out.add(',');
      nest(out, els, dim + 1, from + i * step);
    }
  }
  out.add(']');
}

export function encodeV1Predict(res: InferResponse, row: boolean): Buffer {
  const out = new Text();
  if (!row) {
    out.add('{"outputs":');
    writeOutputValues(out, res, undefined);
    out.add('}');
    return out.done();
  }
  const rows = res.outputs[0]?.shape[0] ?? 0;
  const outs = res.outputs.map(elements);
  out.add('{"predictions":[');
  for (let r = 0; r < rows; r++) {
    if (r > 0) out.add(',');
    writeRow(out, outs, r);
  }
  out.add(']}');
  return out.done();
}

/** Row r of dim 0: bare for one output, an object by output name for several. */
function writeRow(out: Text, outs: readonly Elements[], r: number): void {
  if (outs.length === 1) {
    nestRow(out, outs[0]!, r);
    return;
  }
  out.add('{');
  outs.forEach((o, i) => {
    out.add(`${i > 0 ? ',' : ''}${JSON.stringify(o.name)}:`);
    nestRow(out, o, r);
  });
  out.add('}');
}

/** Row r of one output; an output without that row (its dim 0 shorter than the first output's) is refused. */
function nestRow(out: Text, o: Elements, r: number): void {
  const step = product(o.shape, 1);
  if ((r + 1) * step > product(o.shape, 0) && step > 0) {
    throw new GatewayError('GW_ERR_ENCODE_MALFORMED', `output '${o.name}' has no row ${r}: every output of a row answer needs the same first dimension`);
  }
  nest(out, o, 1, r * step);
}

/**
 * The outputs as one JSON value, printed as above: bare for one output, an object by output name
 * for several; each whole (`row` undefined) or only its row `row` of dim 0 (TorchServe answers a
 * request's one item, routes/torchserve.ts).
 */
export function outputValues(res: InferResponse, row: number | undefined): Buffer {
  const out = new Text();
  writeOutputValues(out, res, row);
  return out.done();
}

function writeOutputValues(out: Text, res: InferResponse, row: number | undefined): void {
  const outs = res.outputs.map(elements);
  if (row !== undefined) {
    writeRow(out, outs, row);
    return;
  }
  if (outs.length === 1) {
    nest(out, outs[0]!, 0, 0);
    return;
  }
  out.add('{');
  outs.forEach((o, i) => {
    out.add(`${i > 0 ? ',' : ''}${JSON.stringify(o.name)}:`);
    nest(out, o, 0, 0);
  });
  out.add('}');
}
