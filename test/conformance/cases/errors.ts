// JSON-request errors: malformed bodies, structural mistakes in inputs/outputs, data-count
// mismatches (too many and too few leaves: 2.51 gives one 500 message for both), nesting depth, and
// the core checks (datatype, shape, batch size, duplicates, unknown names) that Triton reports
// identically over gRPC.
import { type Body, type CaseGroup, type JsonLike, infer, input, jsonRequest, lit, output, range, text } from './types';

const Z16 = Array<number>(16).fill(1);
const in0 = input('INPUT0', 'INT32', [1, 16], Z16);
const in1 = input('INPUT1', 'INT32', [1, 16], Z16);
const simple = (name: string, b: Body) => infer(name, 'simple', b);
const raw = (s: string): Body => ({ body: text(s), headers: {} });

/** `depth` nested arrays around a single leaf. */
function nested(depth: number, leaf: JsonLike): JsonLike {
  let v: JsonLike = [leaf];
  for (let i = 1; i < depth; i++) v = [v];
  return v;
}

export const errorCases: CaseGroup = {
  group: 'errors',
  cases: [
    // ---- malformed JSON (500)
    simple('malformed JSON', raw('{not json')),
    simple('truncated JSON', raw('{"inputs":[{"name":"INPUT0"')),
    simple('trailing garbage after the object', raw(`${JSON.stringify({ inputs: [in0, in1] })} x`)),
    simple('top-level array', raw('[]')),
    simple('top-level string', raw('"inputs"')),
    simple('UTF-8 BOM before the JSON', { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), text(JSON.stringify({ inputs: [in0, in1] }))]), headers: {} }),
    simple('whitespace-only body', raw('   ')),
    // Long member strings are decoded while the body arrives (decode/base64/base64-staging.ts); the
    // answers for bodies that staging cannot place must stay Triton's, offsets counted in the
    // original text.
    simple('a long base64-looking data string, then trailing garbage', raw(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":"${'A'.repeat(20_000)}"}]} x`)),
    simple('a long base64-looking data string, then a missing bracket', raw(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":"${'QUJD'.repeat(5_000)}"}`)),
    simple('a long data string with a raw control character', raw(`{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":"${'A'.repeat(20_000)}\u0001AAA"}]}`)),
    simple('a long base64-looking id (echoed)', jsonRequest({ id: 'QUJD'.repeat(5_000), inputs: [in0, in1] })),
    // ---- structure
    simple('missing inputs key', jsonRequest({})),
    simple('inputs is an object', jsonRequest({ inputs: {} })),
    simple('inputs is null', jsonRequest({ inputs: null })),
    simple('inputs is empty', jsonRequest({ inputs: [] })),
    simple('input is not an object', jsonRequest({ inputs: [1] })),
    simple('input missing name', jsonRequest({ inputs: [{ datatype: 'INT32', shape: [1, 16], data: Z16 }, in1] })),
    simple('input missing datatype', jsonRequest({ inputs: [{ name: 'INPUT0', shape: [1, 16], data: Z16 }, in1] })),
    simple('input missing shape', jsonRequest({ inputs: [{ name: 'INPUT0', datatype: 'INT32', data: Z16 }, in1] })),
    simple('input name is a number', jsonRequest({ inputs: [{ name: 0, datatype: 'INT32', shape: [1, 16], data: Z16 }, in1] })),
    simple('shape is not an array', jsonRequest({ inputs: [input('INPUT0', 'INT32', 16 as unknown as JsonLike[], Z16), in1] })),
    simple('shape with a float dim', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16.5], Z16), in1] })),
    simple('negative shape dim', jsonRequest({ inputs: [input('INPUT0', 'INT32', [-5, 16], Z16), in1] })),
    simple('shape [] (empty: data not read, core rejects the shape)', jsonRequest({ inputs: [input('INPUT0', 'INT32', [], Z16), in1] })),
    simple('both data and binary_data_size', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], Z16, { binary_data_size: 64 }), in1] })),
    simple('neither data nor binary_data_size', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16]), in1] })),
    simple('unknown datatype string', jsonRequest({ inputs: [input('INPUT0', 'FLOAT32', [1, 16], Z16), in1] })),
    simple('lower-case datatype', jsonRequest({ inputs: [input('INPUT0', 'int32', [1, 16], Z16), in1] })),
    simple('data is a scalar', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], 1), in1] })),
    simple('data has a string leaf for INT32', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], [...Z16.slice(1), '1']), in1] })),
    simple('data has a float leaf for INT32', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], [...Z16.slice(1), lit('1.5')]), in1] })),
    // Triton's message ends in ". ": HTTP/2 header values with trailing blanks are refused by a
    // strict peer (RFC 9113 §8.2.1); our h2 data plane must still carry grpc-message through.
    infer('identity_fp32_nobatch: rank 1 for dims [-1,-1] (message ends with a blank)', 'identity_fp32_nobatch',
      jsonRequest({ inputs: [input('INPUT0', 'FP32', [6], [1, 2, 3, 4, 5, 6])] })),
    infer('INT32 leaf written 1.0', 'identity_int32', { body: text('{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1.0]}]}'), headers: {} }),
    infer('INT64 leaf written 1e2', 'identity_int64', { body: text('{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,1],"data":[1e2]}]}'), headers: {} }),
    infer('INT64 leaf 2^63 (not int64)', 'identity_int64', { body: text('{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,1],"data":[9223372036854775808]}]}'), headers: {} }),
    infer('UINT8 negative leaf', 'identity_uint8', jsonRequest({ inputs: [input('INPUT0', 'UINT8', [1, 1], [-1])] })),
    infer('UINT64 above 2^64', 'identity_uint64', { body: text('{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[1,1],"data":[18446744073709551616]}]}'), headers: {} }),
    infer('BOOL leaf 1', 'identity_bool', jsonRequest({ inputs: [input('INPUT0', 'BOOL', [1, 2], [true, 1])] })),
    infer('FP32 leaf is a string', 'identity_fp32', jsonRequest({ inputs: [input('INPUT0', 'FP32', [1, 1], ['1'])] })),
    infer('BYTES leaf is a number', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 2], ['a', 1])] })),
    infer('BYTES leaf is null', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 1], [null])] })),
    // ---- element count vs shape
    simple('too many data elements (18 for [1,16])', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], range(18)), in1] })),
    simple('too few data elements (15 for [1,16])', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], range(15)), in1] })),
    infer('BYTES too few elements (core 400)', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 3], ['a', 'b'])] })),
    infer('BYTES too many elements (core 400)', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 1], ['a', 'b'])] })),
    infer('shape element count wraps to 0 (2^32 x 2^32)', 'identity_fp32', { body: text('{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4294967296,4294967296],"data":[1]}]}'), headers: {} }),
    infer('shape element count just above int64 max', 'identity_fp32', { body: text('{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[3037000500,3037000500],"data":[1]}]}'), headers: {} }),
    // No byte-size-overflow case (FP64 [1, 2^62]): Triton 2.51 dies on it (connection dropped,
    // tritonserver exits), which would take the whole suite down.
    // ---- nesting depth
    infer('nesting depth 50 (INT64) is fine', 'identity_int64', jsonRequest({ inputs: [input('INPUT0', 'INT64', [1, 1], nested(50, 3))] })),
    infer('nesting depth 50 (BYTES) is fine', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 1], nested(50, 'deep'))] })),
    infer('nesting depth 99', 'identity_int64', jsonRequest({ inputs: [input('INPUT0', 'INT64', [1, 1], nested(99, 3))] })),
    infer('nesting depth 100', 'identity_int64', jsonRequest({ inputs: [input('INPUT0', 'INT64', [1, 1], nested(100, 3))] })),
    infer('nesting depth 120 (no depth limit in Triton 2.51)', 'identity_int64', jsonRequest({ inputs: [input('INPUT0', 'INT64', [1, 1], nested(120, 3))] })),
    infer('nesting depth 120 (BYTES)', 'identity_bytes', jsonRequest({ inputs: [input('INPUT0', 'BYTES', [1, 1], nested(120, 'x'))] })),
    infer('nesting depth 1000', 'identity_int64', jsonRequest({ inputs: [input('INPUT0', 'INT64', [1, 1], nested(1000, 3))] })),
    // ---- core checks (identical over gRPC)
    simple('only INPUT0 (missing required input)', jsonRequest({ inputs: [in0] })),
    simple('duplicate input', jsonRequest({ inputs: [in0, in0, in1] })),
    simple('unknown input name', jsonRequest({ inputs: [in0, in1, input('INPUTX', 'INT32', [1, 16], Z16)] })),
    simple('wrong datatype (FP32 for INT32)', jsonRequest({ inputs: [input('INPUT0', 'FP32', [1, 16], Z16), in1] })),
    simple('wrong shape [1,15]', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 15], range(15)), in1] })),
    simple('both inputs wrong shape (error names INPUT1)', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 15], range(15)), input('INPUT1', 'INT32', [1, 15], range(15))] })),
    simple('no batch dim [16] (read as batch 16)', jsonRequest({ inputs: [input('INPUT0', 'INT32', [16], Z16), input('INPUT1', 'INT32', [16], Z16)] })),
    simple('batch 9 > max_batch_size 8', jsonRequest({ inputs: [input('INPUT0', 'INT32', [9, 16], Array(144).fill(1)), input('INPUT1', 'INT32', [9, 16], Array(144).fill(2))] })),
    simple('duplicate output (Triton 2.51 answers 200 with one output)', jsonRequest({ inputs: [in0, in1], outputs: [output('OUTPUT0'), output('OUTPUT0')] })),
    simple('unknown output', jsonRequest({ inputs: [in0, in1], outputs: [output('NOPE')] })),
    simple('outputs is an object', jsonRequest({ inputs: [in0, in1], outputs: { name: 'OUTPUT0' } })),
    simple('output without name', jsonRequest({ inputs: [in0, in1], outputs: [{ parameters: { binary_data: true } }] })),
    simple('output binary_data non-bool', jsonRequest({ inputs: [in0, in1], outputs: [output('OUTPUT0', { binary_data: 1 })] })),
    simple('output classification negative', jsonRequest({ inputs: [in0, in1], outputs: [output('OUTPUT0', { classification: -1 })] })),
    simple('output classification string', jsonRequest({ inputs: [in0, in1], outputs: [output('OUTPUT0', { classification: '3' })] })),
    simple('error order: bad id wins over bad inputs', jsonRequest({ id: 1, inputs: {} })),
    simple('error order: bad parameters win over bad inputs', jsonRequest({ parameters: { triton_x: 1 }, inputs: {} })),
    simple('error order: bad input wins over unknown output', jsonRequest({ inputs: [input('INPUT0', 'INT32', [1, 16], range(15)), in1], outputs: [output('NOPE')] })),
    // ---- unknown model / version on infer
    infer('unknown model', 'nonexistent', jsonRequest({ inputs: [in0, in1] })),
    infer('unknown version 2', 'simple', jsonRequest({ inputs: [in0, in1] }), { version: '2' }),
    infer('version 0', 'simple', jsonRequest({ inputs: [in0, in1] }), { version: '0' }),
    infer('unknown model with malformed body (routing/model errors vs parse order)', 'nonexistent', raw('{not json')),
  ],
};
