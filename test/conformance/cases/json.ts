// Pure JSON requests: `data` flat and nested, every output form, every datatype's edge
// values, classification, and the zoo's special models.
import { type CaseGroup, type InputSpec, type JsonLike, failingError, infer, input, jsonRequest, lit, output, range, zeroSizeError } from './types';

const A = range(16);
const B = range(16).map((i) => 5 - 2 * i);
const simpleIn = (): InputSpec[] => [input('INPUT0', 'INT32', [1, 16], A), input('INPUT1', 'INT32', [1, 16], B)];
const simple = (name: string, req: { [k: string]: JsonLike }) => infer(name, 'simple', jsonRequest({ inputs: simpleIn(), ...req }));

const strA = range(16).map(String);
const strB = range(16).map((i) => String(i * 7 - 20));

/** identity_<t> with shape [1, n] and the given JSON leaves. */
const ident = (name: string, suffix: string, dtype: string, data: JsonLike[], extra: { [k: string]: JsonLike } = {}) =>
  infer(name, `identity_${suffix}`, jsonRequest({ inputs: [input('INPUT0', dtype, [1, data.length], data)], ...extra }));

/** Edge values per datatype, written as JSON tokens (exact beyond 2^53). */
const EDGES: Array<[suffix: string, dtype: string, data: JsonLike[]]> = [
  ['bool', 'BOOL', [true, false, false, true]],
  ['int8', 'INT8', [-128, -1, 0, 1, 127]],
  ['int16', 'INT16', [-32768, -1, 0, 32767]],
  ['int32', 'INT32', [-2147483648, -1, 0, 2147483647]],
  ['int64', 'INT64', [lit('-9223372036854775808'), lit('-9007199254740993'), -1, 0, lit('9007199254740993'), lit('9223372036854775807')]],
  ['uint8', 'UINT8', [0, 1, 128, 255]],
  ['uint16', 'UINT16', [0, 1, 32768, 65535]],
  ['uint32', 'UINT32', [0, 1, 2147483648, 4294967295]],
  ['uint64', 'UINT64', [0, 1, lit('9007199254740993'), lit('9223372036854775808'), lit('18446744073709551615')]],
  ['fp32', 'FP32', [0.1, lit('1e-40'), lit('-0.0'), 1, -2.5, lit('3.4028234663852886e38'), lit('16777217'), lit('1e-45')]],
  ['fp64', 'FP64', [0.1, lit('1e-310'), lit('-0.0'), 1, -2.5, lit('1.7976931348623157e308'), lit('5e-324'), lit('1e21'), lit('1e-7'), lit('123456789012345678')]],
  ['bytes', 'BYTES', ['plain', '', 'héllo wörld', '日本語', '😀', 'quote " backslash \\ slash /', 'tab\tnewline\ncr\r', '\u0000nul', '\u0001\u001f\u007f', '\u2028\u2029']],
];

const groupCases = [
  // ---- simple: request data forms
  simple('simple: flat data, implicit outputs, id echoed', { id: 'json-1' }),
  infer('simple: nested data [[...]]', 'simple', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], [A]), input('INPUT1', 'INT32', [1, 16], [B])] })),
  infer('simple: irregular nesting (only the leaf count matters)', 'simple', jsonRequest({
    inputs: [input('INPUT0', 'INT32', [1, 16], [[A.slice(0, 3)], A.slice(3, 10), [[A.slice(10)]]]), input('INPUT1', 'INT32', [1, 16], B)],
  })),
  infer('simple: batch 8 (nested per row)', 'simple', jsonRequest({
    inputs: [input('INPUT0', 'INT32', [8, 16], range(8).map((r) => A.map((a) => a * r))), input('INPUT1', 'INT32', [8, 16], range(8).map(() => B))],
  })),
  infer('simple: /versions/1/infer', 'simple', jsonRequest({ inputs: simpleIn() }), { version: '1' }),
  simple('simple: model_name in the body is ignored', { model_name: 'identity_fp32', model_version: '7' }),
  infer('simple: request Content-Type is ignored (text/plain)', 'simple', jsonRequest({ inputs: simpleIn() }), { headers: { 'Content-Type': 'text/plain' } }),
  infer('simple: request Content-Type application/octet-stream is ignored', 'simple', jsonRequest({ inputs: simpleIn() }), { headers: { 'Content-Type': 'application/octet-stream' } }),
  infer('simple: whitespace-formatted JSON body', 'simple', { body: Buffer.from(JSON.stringify({ inputs: simpleIn() }, null, 2)), headers: {} }),

  // ---- simple: output forms
  simple('simple: explicit outputs, no parameters → JSON', { outputs: [output('OUTPUT0'), output('OUTPUT1')] }),
  simple('simple: explicit outputs binary_data:true → binary', { outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1', { binary_data: true })] }),
  simple('simple: binary_data_output:true, no outputs → all binary', { parameters: { binary_data_output: true } }),
  simple('simple: binary_data_output:false, no outputs → JSON', { parameters: { binary_data_output: false } }),
  simple('simple: binary_data_output:true + explicit outputs without binary_data → JSON', {
    parameters: { binary_data_output: true },
    outputs: [output('OUTPUT0'), output('OUTPUT1')],
  }),
  simple('simple: binary_data_output:true + OUTPUT0 binary_data:false, OUTPUT1 no params', {
    parameters: { binary_data_output: true },
    outputs: [output('OUTPUT0', { binary_data: false }), output('OUTPUT1')],
  }),
  simple('simple: OUTPUT0 binary, OUTPUT1 binary_data:false', { outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1', { binary_data: false })] }),
  simple('simple: OUTPUT0 binary, OUTPUT1 without parameters', { outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1')] }),
  simple('simple: OUTPUT1 binary, OUTPUT0 JSON, id echoed', { id: 'mixed-out', outputs: [output('OUTPUT0'), output('OUTPUT1', { binary_data: true })] }),
  simple('simple: only OUTPUT1 requested', { outputs: [output('OUTPUT1')] }),
  simple('simple: outputs requested in reverse order', { outputs: [output('OUTPUT1'), output('OUTPUT0')] }),
  simple('simple: outputs [] (empty array)', { outputs: [] }),
  simple('simple: output parameters {} and classification 0 (off)', { outputs: [output('OUTPUT0', {}), output('OUTPUT1', { classification: 0 })] }),

  // ---- id forms
  simple('simple: id "" is not echoed', { id: '' }),
  simple('simple: id with quotes, backslash, unicode', { id: 'q"\\ ü 日 \u0001' }),
  simple('simple: long id', { id: 'x'.repeat(300) }),

  // ---- simple_string
  infer('simple_string: flat JSON strings', 'simple_string', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 16], strA), input('INPUT1', 'BYTES', [1, 16], strB)] })),
  infer('simple_string: nested JSON strings, binary_data_output', 'simple_string', jsonRequest({
    inputs: [input('INPUT0', 'BYTES', [1, 16], [strA]), input('INPUT1', 'BYTES', [1, 16], [strB])],
    parameters: { binary_data_output: true },
  })),
  infer('simple_string: OUTPUT0 binary, OUTPUT1 JSON', 'simple_string', jsonRequest({
    inputs: [input('INPUT0', 'BYTES', [1, 16], strA), input('INPUT1', 'BYTES', [1, 16], strB)],
    outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1', { binary_data: false })],
  })),

  // ---- every datatype's edge values, JSON in; JSON out and binary out
  ...EDGES.map(([s, dt, data]) => ident(`identity_${s}: edge values, JSON out`, s, dt, data)),
  ...EDGES.map(([s, dt, data]) => ident(`identity_${s}: edge values, binary_data_output`, s, dt, data, { parameters: { binary_data_output: true } })),
  ident('identity_fp32: NaN / Infinity / -Infinity tokens', 'fp32', 'FP32', [lit('NaN'), lit('Infinity'), lit('-Infinity'), 0]),
  ident('identity_fp64: NaN / Infinity / -Infinity tokens', 'fp64', 'FP64', [lit('NaN'), lit('Infinity'), lit('-Infinity'), 0]),
  ident('identity_fp32: 1e39 overflows float to Infinity', 'fp32', 'FP32', [lit('1e39'), lit('-1e39')]),
  ident('identity_fp32: integers and exponent forms', 'fp32', 'FP32', [lit('2'), lit('-7'), lit('1E2'), lit('2.5e-3'), lit('123456789')]),
  ident('identity_fp64: 18446744073709551615 as FP64', 'fp64', 'FP64', [lit('18446744073709551615'), lit('-9223372036854775808')]),
  ident('identity_int8: values wrap to 8 bits (200, -129, 256)', 'int8', 'INT8', [200, -129, 256]),
  ident('identity_uint8: 256 and 511 wrap', 'uint8', 'UINT8', [256, 511]),
  ident('identity_int16: 40000 wraps', 'int16', 'INT16', [40000, -40000]),
  ident('identity_uint16: 65536 and 70000 wrap', 'uint16', 'UINT16', [65536, 70000]),
  ident('identity_int32: 2^31 and 2^32+5 wrap', 'int32', 'INT32', [lit('2147483648'), lit('4294967301'), lit('-2147483649')]),
  ident('identity_uint32: 2^32 and 2^40+1 wrap', 'uint32', 'UINT32', [lit('4294967296'), lit('1099511627777')]),
  ident('identity_bytes: empty strings only', 'bytes', 'BYTES', ['', '', '']),
  ident('identity_bytes: JSON \\u escapes incl. surrogate pair', 'bytes', 'BYTES', [lit('"\\u00e9\\u65e5\\ud83d\\ude00"'), lit('"\\/\\b\\f"')]),
  infer('identity_bytes: nested [2,2]', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [2, 2], [['a', 'bb'], ['ccc', '']])] })),
  infer('identity_int32: batch 3 rows', 'identity_int32', jsonRequest({ inputs: [input('INPUT0', 'INT32', [3, 2], [[1, 2], [3, 4], [5, 6]])] })),
  infer('identity_fp32_nobatch: [2,3] nested', 'identity_fp32_nobatch', jsonRequest({ inputs: [input('INPUT0', 'FP32', [2, 3], [[1.5, 2, 3], [4, 5, 6.25]])] })),
  infer('identity_fp32_nobatch: [1,1], binary_data_output', 'identity_fp32_nobatch', jsonRequest({
    inputs: [input('INPUT0', 'FP32', [1, 1], [42])],
    parameters: { binary_data_output: true },
  })),

  // ---- FP16 in JSON is refused by Triton's HTTP layer
  ident('identity_fp16: JSON data → 400', 'fp16', 'FP16', [1, 2]),

  // ---- other zoo models
  infer('image_stats: [2,4] JSON (LEN INT64, SUM UINT64)', 'image_stats', jsonRequest({ inputs: [input('IMAGE', 'UINT8', [2, 4], [1, 2, 3, 255, 0, 0, 0, 1])] })),
  infer('image_stats: SUM binary, LEN JSON', 'image_stats', jsonRequest({
    inputs: [input('IMAGE', 'UINT8', [1, 3], [255, 255, 255])],
    outputs: [output('LEN'), output('SUM', { binary_data: true })],
  })),
  infer('blob_len: three strings incl. empty', 'blob_len', jsonRequest({ inputs: [input('BLOB', 'BYTES', [3, 1], ['abc', '', 'héllo'])] })),
  infer('big_output: N=10, JSON out', 'big_output', jsonRequest({ inputs: [input('N', 'INT64', [1], [10])] })),
  infer('big_output: N=300, binary out (values wrap at 251)', 'big_output', jsonRequest({ inputs: [input('N', 'INT64', [1], [300])], parameters: { binary_data_output: true } })),
  infer('big_output: N=0, JSON out (empty data)', 'big_output', jsonRequest({ inputs: [input('N', 'INT64', [1], [0])] })),
  infer('big_output: N=0, binary requested (0 bytes → application/json)', 'big_output', jsonRequest({
    inputs: [input('N', 'INT64', [1], [0])],
    outputs: [output('DATA', { binary_data: true })],
  })),
  infer('failing: JSON → 500 with the model traceback', 'failing', jsonRequest({ inputs: [input('INPUT0', 'FP32', [1, 2], [1, 2])] }), { compare: failingError() }),
  // PyTriton limitation (FACTS.md): zero-element inputs fail inside the model (same Triton error on
  // both paths, but the traceback frames vary between runs - see zeroSizeError).
  infer('identity_fp32: zero-size input [1,0] (PyTriton error)', 'identity_fp32', jsonRequest({ inputs: [input('INPUT0', 'FP32', [1, 0], [])] }), { compare: zeroSizeError() }),

  // ---- classification (computed by Triton)
  ident('identity_fp32: classification 3, JSON', 'fp32', 'FP32', [0.5, 3.3, -1, 2, 2], { outputs: [output('OUTPUT0', { classification: 3 })] }),
  ident('identity_fp32: classification 3, binary', 'fp32', 'FP32', [0.5, 3.3, -1, 2, 2], { outputs: [output('OUTPUT0', { classification: 3, binary_data: true })] }),
  ident('identity_fp32: classification 10 > element count', 'fp32', 'FP32', [0.25, 0.75, 0.5], { outputs: [output('OUTPUT0', { classification: 10 })] }),
  infer('identity_fp32: classification 2 on batch 2', 'identity_fp32', jsonRequest({
    inputs: [input('INPUT0', 'FP32', [2, 3], [[1, 2, 3], [6, 5, 4]])],
    outputs: [output('OUTPUT0', { classification: 2 })],
  })),
  infer('identity_fp32_nobatch: classification 2 on [2,3]', 'identity_fp32_nobatch', jsonRequest({
    inputs: [input('INPUT0', 'FP32', [2, 3], [[1, 2, 3], [6, 5, 4]])],
    outputs: [output('OUTPUT0', { classification: 2 })],
  })),
  ident('identity_int32: classification 2', 'int32', 'INT32', [7, -3, 12, 0], { outputs: [output('OUTPUT0', { classification: 2 })] }),
  ident('identity_uint64: classification 2', 'uint64', 'UINT64', [lit('18446744073709551615'), 3, 9], { outputs: [output('OUTPUT0', { classification: 2 })] }),
  ident('identity_fp64: classification 1', 'fp64', 'FP64', [lit('1e-310'), 0.1, -5], { outputs: [output('OUTPUT0', { classification: 1 })] }),
  // No case for classification of a BYTES output: Triton 2.51 dies on it (tritonserver exits,
  // the HTTP connection is dropped without an answer), which would take the whole suite down.
  ident('identity_bool: classification', 'bool', 'BOOL', [true, false, true], { outputs: [output('OUTPUT0', { classification: 2 })] }),
  simple('simple: classification on OUTPUT0 only, OUTPUT1 binary', { outputs: [output('OUTPUT0', { classification: 3 }), output('OUTPUT1', { binary_data: true })] }),
];

export const jsonCases: CaseGroup = { group: 'json', cases: groupCases };
