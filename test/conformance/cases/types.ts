// Case data for the differential conformance suite (infer-differential.test.ts): every case is
// one HTTP request, sent byte-for-byte the same to Triton's own HTTP frontend and to tensorgate.
// Nothing here talks to a server; the builders only produce bytes and headers.
import { deflateRawSync, deflateSync, gzipSync } from 'node:zlib';

/**
 * How to compare the two bodies. Default: the (decompressed) bodies must be byte-identical.
 * `prefix-includes` is for answers carrying volatile text (tracebacks with absolute paths):
 * both bodies must start with `prefix` and contain every string of `includes`. Use sparingly
 * and say in `why` what is volatile.
 */
export type BodyCompare = { kind: 'exact' } | { kind: 'prefix-includes'; prefix: string; includes: string[]; why: string }
  /** Same JSON text once every number is replaced by 0 (keys, order, strings and nesting must agree). */
  | { kind: 'json-shape'; why: string };

export interface Case {
  /** Unique; becomes the test name ("<group>: <name>"). */
  name: string;
  method: string;
  /** Path plus optional query string, sent verbatim. */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** Send the body with Transfer-Encoding: chunked in pieces of this many bytes (no Content-Length). */
  chunked?: number;
  /** Extra response headers (lower-case names) to compare besides the standard four. */
  alsoCompareHeaders?: string[];
  compare?: BodyCompare;
  /** Per-case timeout (ms) for big payloads. */
  timeoutMs?: number;
}

export interface CaseGroup {
  group: string;
  cases: Case[];
}

// ------------------------------------------------------------------ JSON text with exact numbers

/** A literal JSON token written verbatim (NaN, Infinity, -0.0, 1e-40, 18446744073709551615 ...). */
export class Lit {
  constructor(readonly text: string) {}
}
export const lit = (text: string): Lit => new Lit(text);

export type JsonLike = string | number | boolean | null | bigint | Lit | JsonLike[] | { [k: string]: JsonLike | undefined };

/** Compact JSON like JSON.stringify, plus bigint (exact) and Lit (verbatim) leaves. */
export function toJson(v: JsonLike): string {
  if (v instanceof Lit) return v.text;
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const parts: string[] = [];
    for (const [k, x] of Object.entries(v)) if (x !== undefined) parts.push(`${JSON.stringify(k)}:${toJson(x)}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(v);
}

export const text = (s: string): Buffer => Buffer.from(s, 'utf8');
export const json = (v: JsonLike): Buffer => text(toJson(v));

// ------------------------------------------------------------------ tensor bytes (little-endian)

export type DType = 'BOOL' | 'UINT8' | 'UINT16' | 'UINT32' | 'UINT64' | 'INT8' | 'INT16' | 'INT32' | 'INT64' | 'FP16' | 'FP32' | 'FP64' | 'BYTES';

/** Encodes values as the binary tensor format of §4. FP16 values are given as raw uint16 bit patterns. */
export function tensorBytes(dtype: DType, values: readonly (number | bigint | boolean | string | Buffer)[]): Buffer {
  if (dtype === 'BYTES') {
    return Buffer.concat(
      values.map((v) => {
        const b = Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8');
        const len = Buffer.alloc(4);
        len.writeUInt32LE(b.length);
        return Buffer.concat([len, b]);
      }),
    );
  }
  const size = { BOOL: 1, UINT8: 1, INT8: 1, UINT16: 2, INT16: 2, FP16: 2, UINT32: 4, INT32: 4, FP32: 4, UINT64: 8, INT64: 8, FP64: 8 }[dtype];
  const out = Buffer.alloc(size * values.length);
  values.forEach((v, i) => {
    const o = i * size;
    switch (dtype) {
      case 'BOOL': out.writeUInt8(v ? 1 : 0, o); break;
      case 'UINT8': out.writeUInt8(Number(v), o); break;
      case 'INT8': out.writeInt8(Number(v), o); break;
      case 'UINT16': case 'FP16': out.writeUInt16LE(Number(v), o); break;
      case 'INT16': out.writeInt16LE(Number(v), o); break;
      case 'UINT32': out.writeUInt32LE(Number(v), o); break;
      case 'INT32': out.writeInt32LE(Number(v), o); break;
      case 'FP32': out.writeFloatLE(Number(v), o); break;
      case 'FP64': out.writeDoubleLE(Number(v), o); break;
      case 'UINT64': out.writeBigUInt64LE(BigInt(v as number | bigint), o); break;
      case 'INT64': out.writeBigInt64LE(BigInt(v as number | bigint), o); break;
    }
  });
  return out;
}

export const range = (n: number, start = 0): number[] => Array.from({ length: n }, (_, i) => start + i);

// ------------------------------------------------------------------ request bodies

export interface Body {
  body: Buffer;
  headers: Record<string, string>;
}

/** Pure JSON request: no Inference-Header-Content-Length. */
export function jsonRequest(v: JsonLike): Body {
  return { body: json(v), headers: {} };
}

/**
 * Binary tensor extension (§4): JSON header followed by raw tensor bytes;
 * `Inference-Header-Content-Length` = JSON length unless overridden (a string is sent verbatim).
 */
export function binaryRequest(header: JsonLike | Buffer, chunks: Buffer[], headerLength?: string): Body {
  const head = Buffer.isBuffer(header) ? header : json(header);
  return { body: Buffer.concat([head, ...chunks]), headers: { 'Inference-Header-Content-Length': headerLength ?? String(head.length) } };
}

/** Raw binary request (§5): the whole body is one input's data, header length 0. */
export function rawRequest(data: Buffer): Body {
  return { body: data, headers: { 'Inference-Header-Content-Length': '0' } };
}

/** Compresses a request body and marks it with Content-Encoding (header lengths stay uncompressed). */
export function compressed(b: Body, encoding: 'gzip' | 'deflate' | 'deflate-raw' | 'gzip-as-deflate' | 'deflate-as-gzip'): Body {
  switch (encoding) {
    case 'gzip': return { body: gzipSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'gzip' } };
    case 'deflate': return { body: deflateSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'deflate' } };
    // Raw RFC 1951 stream labelled deflate: Triton only inflates zlib/gzip wrappers.
    case 'deflate-raw': return { body: deflateRawSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'deflate' } };
    // Triton's inflater auto-detects the wrapper, so the label and the wrapper need not agree.
    case 'gzip-as-deflate': return { body: gzipSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'deflate' } };
    case 'deflate-as-gzip': return { body: deflateSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'gzip' } };
  }
}

/** An infer case: POST /v2/models/<model>[/versions/<v>]/infer with the given body. */
export function infer(name: string, model: string, b: Body, extra: Partial<Case> & { version?: string } = {}): Case {
  const { version, headers, ...rest } = extra;
  const path = `/v2/models/${model}${version === undefined ? '' : `/versions/${version}`}/infer`;
  return { name, method: 'POST', path, ...rest, headers: { ...b.headers, ...headers }, body: b.body };
}

export function get(name: string, path: string, extra: Partial<Case> = {}): Case {
  return { name, method: 'GET', path, ...extra };
}

// ------------------------------------------------------------------ request JSON pieces

export type InputSpec = {
  name: string;
  datatype: string;
  shape: JsonLike[];
  data?: JsonLike;
  parameters?: { [k: string]: JsonLike };
};

export const input = (name: string, datatype: string, shape: JsonLike[], data?: JsonLike, parameters?: { [k: string]: JsonLike }): InputSpec => ({
  name,
  datatype,
  shape,
  ...(data === undefined ? {} : { data }),
  ...(parameters === undefined ? {} : { parameters }),
});

/** A binary input's JSON part: `parameters.binary_data_size` = byteLength. */
export const binInput = (name: string, datatype: string, shape: JsonLike[], byteLength: number): InputSpec =>
  input(name, datatype, shape, undefined, { binary_data_size: byteLength });

export const output = (name: string, parameters?: { [k: string]: JsonLike }): { [k: string]: JsonLike } =>
  parameters === undefined ? { name } : { name, parameters };

/** Prefix/substring comparison for the PyTriton traceback errors (absolute paths and line numbers). */
export function pytritonError(instance: string, includes: string[], why = 'PyTriton traceback text with absolute workspace/venv paths and source line numbers'): BodyCompare {
  return {
    kind: 'prefix-includes',
    prefix: `{"error":"Failed to process the request(s) for model '${instance}', message: TritonModelException: Model execute error: Traceback (most recent call last):`,
    includes,
    why,
  };
}

/** The `failing` model's error (RuntimeError raised by zoo.py, wrapped in PyTriton's traceback). */
export const failingError = (): BodyCompare => pytritonError('failing_0_0', ['RuntimeError: failing model always fails', '"}']);

/**
 * Zero-element input on identity_fp32 (PyTriton limitation, FACTS.md). Observed nondeterminism:
 * the traceback goes through concurrent/futures/_base.py at line 449 or 456 depending on whether
 * the future had already completed - a race inside PyTriton, so only prefix and cause are compared.
 */
export const zeroSizeError = (): BodyCompare =>
  pytritonError('identity_fp32_0_0', ['TypeError: memoryview: cannot cast view with zeros in shape or strides'], 'PyTriton traceback whose frames vary between runs (future completion race)');
