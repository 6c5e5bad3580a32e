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

/** Each element of an output as JSON text. */
function elements(o: OutputTensor): string[] {
  const data = outputBytes(o);
  const count = elementCount(o.shape);
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
      case 'FP32': out[e] = formatTritonFp32(data.readFloatLE(e * 4)); break;
      case 'FP64': out[e] = formatTritonFp64(data.readDoubleLE(e * 8)); break;
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

/** Nests elements [from, from + product(shape)) by shape. */
function nest(els: readonly string[], shape: readonly number[], from: number): string {
  if (shape.length === 0) return els[from]!;
  const [d, ...rest] = shape as [number, ...number[]];
  const step = rest.reduce((a, b) => a * b, 1);
  const parts: string[] = [];
  for (let i = 0; i < d; i++) parts.push(nest(els, rest, from + i * step));
  return `[${parts.join(',')}]`;
}

export function encodeV1Predict(res: InferResponse, row: boolean): string {
  if (!row) return `{"outputs":${outputValues(res, undefined)}}`;
  const rows = res.outputs[0]?.shape[0] ?? 0;
  const outs = res.outputs.map((o) => ({ name: o.name, shape: o.shape, els: elements(o) }));
  const preds: string[] = [];
  for (let r = 0; r < rows; r++) preds.push(rowOf(outs, r));
  return `{"predictions":[${preds.join(',')}]}`;
}

type Elements = readonly { readonly name: string; readonly shape: readonly number[]; readonly els: readonly string[] }[];

function rowOf(outs: Elements, r: number): string {
  const cell = (o: Elements[number]): string => {
    const rest = o.shape.slice(1);
    return nest(o.els, rest, r * rest.reduce((a, b) => a * b, 1));
  };
  return outs.length === 1 ? cell(outs[0]!) : `{${outs.map((o) => `${JSON.stringify(o.name)}:${cell(o)}`).join(',')}}`;
}

/**
 * The outputs as one JSON value, printed as above: bare for one output, an object by output name
 * for several; each whole (`row` undefined) or only its row `row` of dim 0 (TorchServe answers a
 * request's one item, routes/torchserve.ts).
 */
export function outputValues(res: InferResponse, row: number | undefined): string {
  const outs = res.outputs.map((o) => ({ name: o.name, shape: o.shape, els: elements(o) }));
  if (row !== undefined) return rowOf(outs, row);
  if (outs.length === 1) return nest(outs[0]!.els, outs[0]!.shape, 0);
  return `{${outs.map((o) => `${JSON.stringify(o.name)}:${nest(o.els, o.shape, 0)}`).join(',')}}`;
}
