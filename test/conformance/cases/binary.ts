// Binary tensor data extension: JSON header + tensor bytes, mixed JSON/binary inputs, every
// datatype through the binary path (FP16 included), float formatting of binary-in/JSON-out, large
// tensors, and the header-length / byte-count errors.
import { type CaseGroup, type DType, type JsonLike, binInput, binaryRequest, failingError, infer, input, output, range, tensorBytes, text, zeroSizeError } from './types';

const A = range(16);
const B = range(16).map((i) => 5 - 2 * i);
const a = tensorBytes('INT32', A);
const b = tensorBytes('INT32', B);
const simpleHead = (extra: { [k: string]: JsonLike } = {}) => ({ ...extra, inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), binInput('INPUT1', 'INT32', [1, 16], 64)] });
const simpleBin = (name: string, extra: { [k: string]: JsonLike } = {}) => infer(name, 'simple', binaryRequest(simpleHead(extra), [a, b]));

/** identity_<t>, shape [1, n], one binary input. */
function identBin(name: string, suffix: string, dtype: DType, values: Parameters<typeof tensorBytes>[1], extra: { [k: string]: JsonLike } = {}) {
  const data = tensorBytes(dtype, values);
  return infer(name, `identity_${suffix}`, binaryRequest({ ...extra, inputs: [binInput('INPUT0', dtype, [1, values.length], data.length)] }, [data]));
}
/** Same with raw bytes given directly (for bit patterns). */
function identBytes(name: string, suffix: string, dtype: string, shape: number[], data: Buffer, extra: { [k: string]: JsonLike } = {}) {
  return infer(name, `identity_${suffix}`, binaryRequest({ ...extra, inputs: [binInput('INPUT0', dtype, shape, data.length)] }, [data]));
}

const BIN_OUT = { parameters: { binary_data_output: true } };
const PER_TYPE: Array<[string, DType, Parameters<typeof tensorBytes>[1]]> = [
  ['bool', 'BOOL', [true, false, true]],
  ['int8', 'INT8', [-128, -1, 127]],
  ['int16', 'INT16', [-32768, 5, 32767]],
  ['int32', 'INT32', [-2147483648, 7, 2147483647]],
  ['int64', 'INT64', [-9223372036854775808n, 9007199254740993n, 9223372036854775807n]],
  ['uint8', 'UINT8', [0, 200, 255]],
  ['uint16', 'UINT16', [0, 40000, 65535]],
  ['uint32', 'UINT32', [0, 3000000000, 4294967295]],
  ['uint64', 'UINT64', [0n, 9007199254740993n, 18446744073709551615n]],
  ['fp16', 'FP16', [0x3c00, 0xc000, 0x7c00, 0x0001]],
  ['fp32', 'FP32', [0.1, -2.5, 1e-45]],
  ['fp64', 'FP64', [0.1, -2.5, 5e-324]],
  ['bytes', 'BYTES', ['abc', '', 'ü日😀']],
];

/** Classifier input [1,3,224,224] with a pattern that gives distinct per-class means. */
const CLS = tensorBytes('FP32', range(3 * 224 * 224).map((i) => ((i * 37) % 1009) / 8));
const clsHead = (extra: { [k: string]: JsonLike } = {}) => ({ ...extra, inputs: [binInput('INPUT', 'FP32', [1, 3, 224, 224], CLS.length)] });

const BLOBS = tensorBytes('BYTES', [Buffer.from('ab\u0000'), Buffer.from([0, 0]), Buffer.alloc(0)]);
const FIVE_MIB = 5 * 1024 * 1024;

export const binaryCases: CaseGroup = {
  group: 'binary',
  cases: [
    // ---- simple, output forms
    simpleBin('simple: binary inputs, implicit outputs (JSON)'),
    simpleBin('simple: binary inputs, binary_data_output', BIN_OUT),
    simpleBin('simple: binary inputs, explicit binary outputs, id', { id: 'bin-1', outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1', { binary_data: true })] }),
    simpleBin('simple: binary inputs, OUTPUT0 JSON + OUTPUT1 binary', { outputs: [output('OUTPUT0', { binary_data: false }), output('OUTPUT1', { binary_data: true })] }),
    simpleBin('simple: binary inputs, only OUTPUT1 binary', { outputs: [output('OUTPUT1', { binary_data: true })] }),
    infer('simple: mixed, INPUT0 binary + INPUT1 JSON', 'simple', binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), input('INPUT1', 'INT32', [1, 16], B)] }, [a])),
    infer('simple: mixed, INPUT0 JSON + INPUT1 binary, binary out', 'simple', binaryRequest({ ...BIN_OUT, inputs: [input('INPUT0', 'INT32', [1, 16], A), binInput('INPUT1', 'INT32', [1, 16], 64)] }, [b])),
    infer('simple: binary inputs listed INPUT1 first (bytes follow inputs order)', 'simple', binaryRequest({ inputs: [binInput('INPUT1', 'INT32', [1, 16], 64), binInput('INPUT0', 'INT32', [1, 16], 64)] }, [b, a])),
    infer('simple: header-only body with the header set (pure JSON through the binary path)', 'simple', binaryRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], A), input('INPUT1', 'INT32', [1, 16], B)] }, [])),
    infer('simple: lower-case inference-header-content-length', 'simple', {
      body: Buffer.concat([text(JSON.stringify(simpleHead())), a, b]),
      headers: { 'inference-header-content-length': String(JSON.stringify(simpleHead()).length) },
    }),
    infer('simple: chunked transfer, binary', 'simple', binaryRequest(simpleHead(BIN_OUT), [a, b]), { chunked: 50 }),
    infer('simple_string: binary BYTES in and out', 'simple_string', binaryRequest({
      ...BIN_OUT,
      inputs: [binInput('INPUT0', 'BYTES', [1, 16], tensorBytes('BYTES', A.map(String)).length), binInput('INPUT1', 'BYTES', [1, 16], tensorBytes('BYTES', B.map(String)).length)],
    }, [tensorBytes('BYTES', A.map(String)), tensorBytes('BYTES', B.map(String))])),
    infer('simple_string: binary in, JSON out', 'simple_string', binaryRequest({
      inputs: [binInput('INPUT0', 'BYTES', [1, 16], tensorBytes('BYTES', A.map(String)).length), binInput('INPUT1', 'BYTES', [1, 16], tensorBytes('BYTES', B.map(String)).length)],
    }, [tensorBytes('BYTES', A.map(String)), tensorBytes('BYTES', B.map(String))])),

    // ---- every datatype through the binary path
    ...PER_TYPE.map(([s, dt, v]) => identBin(`identity_${s}: binary in, binary out`, s, dt, v, BIN_OUT)),
    ...PER_TYPE.filter(([s]) => s !== 'fp16').map(([s, dt, v]) => identBin(`identity_${s}: binary in, JSON out`, s, dt, v)),
    identBin('identity_fp16: binary in, JSON out → 400', 'fp16', 'FP16', [0x3c00, 0xc000]),
    identBin('identity_fp16: binary in, explicit binary output', 'fp16', 'FP16', [0x7e00, 0x8000], { outputs: [output('OUTPUT0', { binary_data: true })] }),
    // ---- float formatting (rapidjson shortest digits) for values only reachable via binary
    identBin('identity_fp32: formatting of awkward floats', 'fp32', 'FP32', [1 / 3, 16777217, 1e38, 3.4028234663852886e38, 123.456, 1e7, 1e-7, 65504, 0.5, 100, 1e21, 1.17549435e-38]),
    identBin('identity_fp64: formatting of awkward doubles', 'fp64', 'FP64', [1 / 3, 1e21, 1e22, 1e-7, 123456789012345680000, 2 ** 53 + 2, 0.000001, 1e300, -1e-300, 4.9e-324, 100, 1.5]),
    identBytes('identity_fp32: NaN payloads and -0.0 (bit patterns)', 'fp32', 'FP32', [1, 4], Buffer.from('0000c07f0000c0ff0100807f00000080', 'hex')),
    identBytes('identity_fp64: -0.0, +Inf, -Inf (bit patterns)', 'fp64', 'FP64', [1, 3], Buffer.from('0000000000000080000000000000f07f000000000000f0ff', 'hex')),
    identBytes('identity_bool: non-0/1 bytes in, JSON out', 'bool', 'BOOL', [1, 3], Buffer.from([2, 0, 255])),
    identBytes('identity_bool: non-0/1 bytes in, binary out', 'bool', 'BOOL', [1, 3], Buffer.from([2, 0, 255]), BIN_OUT),
    // ---- BYTES content that JSON cannot carry in requests
    identBin('identity_bytes: NULs and control characters, JSON out', 'bytes', 'BYTES', [Buffer.from([0]), Buffer.from('a\u0000b'), Buffer.from([1, 8, 9, 10, 12, 13, 27, 31, 127])]),
    identBin('identity_bytes: invalid UTF-8, JSON out', 'bytes', 'BYTES', [Buffer.from([0xff, 0xfe, 0x41]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80])]),
    identBin('identity_bytes: quotes, backslash, U+2028, JSON out', 'bytes', 'BYTES', ['"', '\\', '\u2028', '</script>']),
    identBin('identity_bytes: invalid UTF-8, binary out', 'bytes', 'BYTES', [Buffer.from([0xff, 0x00, 0x80])], BIN_OUT),
    identBytes('identity_bytes: truncated element (core 400)', 'bytes', 'BYTES', [1, 1], Buffer.concat([tensorBytes('UINT32', [10]), text('abc')])),
    identBytes('identity_bytes: 2 elements for shape [1,3] (core 400)', 'bytes', 'BYTES', [1, 3], tensorBytes('BYTES', ['a', 'b'])),
    identBytes('identity_fp32: byte size mismatch vs shape (core 400)', 'fp32', 'FP32', [1, 4], tensorBytes('FP32', [1, 2, 3])),
    { ...identBytes('identity_fp32: binary_data_size 0 → zero-size input (PyTriton error)', 'fp32', 'FP32', [1, 0], Buffer.alloc(0)), compare: zeroSizeError() },
    infer('identity_int32: batch 8 binary', 'identity_int32', binaryRequest({ ...BIN_OUT, inputs: [binInput('INPUT0', 'INT32', [8, 3], 96)] }, [tensorBytes('INT32', range(24, -12))])),
    infer('identity_fp32_nobatch: [3,2] binary', 'identity_fp32_nobatch', binaryRequest({ inputs: [binInput('INPUT0', 'FP32', [3, 2], 24)] }, [tensorBytes('FP32', [1, 2, 3, 4, 5, 6.5])])),

    // ---- other models
    infer('classifier_fp32: binary input, PROBS as JSON', 'classifier_fp32', binaryRequest(clsHead(), [CLS])),
    infer('classifier_fp32: binary input, PROBS binary', 'classifier_fp32', binaryRequest(clsHead(BIN_OUT), [CLS])),
    infer('classifier_fp32: classification 3 on PROBS (JSON)', 'classifier_fp32', binaryRequest(clsHead({ outputs: [output('PROBS', { classification: 3 })] }), [CLS])),
    infer('classifier_fp32: classification 3 on PROBS (binary)', 'classifier_fp32', binaryRequest(clsHead({ outputs: [output('PROBS', { classification: 3, binary_data: true })] }), [CLS])),
    infer('image_stats: binary image [2,4]', 'image_stats', binaryRequest({ inputs: [binInput('IMAGE', 'UINT8', [2, 4], 8)] }, [Buffer.from([1, 2, 3, 255, 0, 0, 0, 1])])),
    infer('image_stats: binary image, binary outputs', 'image_stats', binaryRequest({ ...BIN_OUT, inputs: [binInput('IMAGE', 'UINT8', [1, 5], 5)] }, [Buffer.from([9, 9, 9, 9, 9])])),
    infer('blob_len: binary BYTES with NULs', 'blob_len', binaryRequest({ inputs: [binInput('BLOB', 'BYTES', [3, 1], BLOBS.length)] }, [BLOBS])),
    infer('big_output: N=5 MiB, binary output (response > 4 MiB)', 'big_output', binaryRequest({ ...BIN_OUT, inputs: [binInput('N', 'INT64', [1], 8)] }, [tensorBytes('INT64', [FIVE_MIB])]), { timeoutMs: 60_000 }),
    infer('big_output: N=5 MiB, explicit binary output, id', 'big_output', binaryRequest({ id: 'big', inputs: [binInput('N', 'INT64', [1], 8)], outputs: [output('DATA', { binary_data: true })] }, [tensorBytes('INT64', [FIVE_MIB])]), { timeoutMs: 60_000 }),
    infer('big_output: N=100000, JSON output', 'big_output', binaryRequest({ inputs: [binInput('N', 'INT64', [1], 8)] }, [tensorBytes('INT64', [100000])]), { timeoutMs: 60_000 }),
    infer('failing: binary input → 500 traceback', 'failing', binaryRequest({ inputs: [binInput('INPUT0', 'FP32', [1, 1], 4)] }, [tensorBytes('FP32', [1])]), { compare: failingError() }),

    // ---- header length variants (stoi semantics) and errors
    infer('header length with leading "+"', 'simple', binaryRequest(simpleHead(), [a, b], `+${JSON.stringify(simpleHead()).length}`)),
    infer('header length with trailing junk', 'simple', binaryRequest(simpleHead(), [a, b], `${JSON.stringify(simpleHead()).length}abc`)),
    infer('header length larger than the body', 'simple', binaryRequest(simpleHead(), [a, b], '100000')),
    infer('header length non-numeric', 'simple', binaryRequest(simpleHead(), [a, b], 'abc')),
    infer('header length negative', 'simple', binaryRequest(simpleHead(), [a, b], '-1')),
    infer('header length out of int32 range', 'simple', binaryRequest(simpleHead(), [a, b], '99999999999')),
    infer('header length shorter than the JSON', 'simple', binaryRequest(simpleHead(), [a, b], String(JSON.stringify(simpleHead()).length - 5))),
    infer('header length longer than the JSON (covers tensor bytes)', 'simple', binaryRequest(simpleHead(), [a, b], String(JSON.stringify(simpleHead()).length + 4))),
    infer('not enough binary bytes', 'simple', binaryRequest(simpleHead(), [a, b.subarray(0, 40)])),
    infer('not enough binary bytes for the first input', 'simple', binaryRequest(simpleHead(), [a.subarray(0, 10)])),
    infer('extra binary bytes', 'simple', binaryRequest(simpleHead(), [a, b, Buffer.from([1, 2, 3])])),
    infer('binary inputs without the header', 'simple', { body: Buffer.concat([text(JSON.stringify(simpleHead())), a, b]), headers: {} }),
    infer('binary_data_size non-integer', 'simple', binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), input('INPUT1', 'INT32', [1, 16], undefined, { binary_data_size: 64.5 })] }, [a, b])),
    infer('binary_data_size negative', 'simple', binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), input('INPUT1', 'INT32', [1, 16], undefined, { binary_data_size: -64 })] }, [a, b])),
    infer('binary_data_size string', 'simple', binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), input('INPUT1', 'INT32', [1, 16], undefined, { binary_data_size: '64' })] }, [a, b])),
    infer('binary_data_size larger than the shape (core byte-size 400)', 'simple', binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 68), binInput('INPUT1', 'INT32', [1, 16], 60)] }, [a, b])),
  ],
};
