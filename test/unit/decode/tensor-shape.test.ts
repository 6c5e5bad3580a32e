// Shapes Triton cannot hold (docs/differences.md "Shapes past 32 bits"), and where each decoder
// refuses them.
import { decodeV1Predict } from '../../../gateway/decode/dialects/v1-predict';
import { decodeV2Header } from '../../../gateway/decode/v2-header';
import { refuseShapeBeyondInt32 } from '../../../gateway/decode/tensor-shape';

const refusal = (f: () => unknown): { code: string; message: string } => {
  try {
    f();
  } catch (err) {
    const e = err as { code: string; message: string };
    return { code: e.code, message: e.message };
  }
  throw new Error('accepted');
};

describe('refuseShapeBeyondInt32', () => {
  test.each([[[]], [[0]], [[2 ** 31 - 1]], [[1, 2 ** 31 - 1]], [[-1, 2 ** 40]], [[46340, 46340]]])('%p: accepted', (shape) => {
    expect(() => refuseShapeBeyondInt32('X', shape)).not.toThrow();
  });

  test('a dim above INT32_MAX, written as the integer the client sent', () => {
    expect(refusal(() => refuseShapeBeyondInt32('X', [2 ** 62]))).toEqual({ code: 'GW_ERR_DECODE_INVALID',
      message: "input 'X': shape [4611686018427387904] has a dimension above 2147483647, which Triton cannot hold (it truncates dims to 32 bits)" });
    expect(refusal(() => refuseShapeBeyondInt32('X', [0, 2 ** 31]))).toMatchObject({ code: 'GW_ERR_DECODE_INVALID' });
  });

  test('an element count above INT32_MAX', () => {
    expect(refusal(() => refuseShapeBeyondInt32('X', [65536, 65536], 'GW_ERR_DECODE_V1_INVALID'))).toEqual({ code: 'GW_ERR_DECODE_V1_INVALID',
      message: "input 'X': shape [65536,65536] has 4294967296 elements, more than 2147483647, which Triton cannot hold (it truncates counts to 32 bits)" });
  });
});

describe('the decoders refuse them', () => {
  const ctx = { modelName: 'm', modelVersion: '', binaryBytes: 5, maxInputSizeBytes: 1 << 20 };
  test('V2 binary: a BYTES input of shape [2^62] with one element', () => {
    const h = Buffer.from('{"inputs":[{"name":"B","datatype":"BYTES","shape":[4611686018427387904],"parameters":{"binary_data_size":5}}]}');
    expect(refusal(() => decodeV2Header(h, 0, h.length, ctx)).message).toBe(
      "input 'B': shape [4611686018427387904] has a dimension above 2147483647, which Triton cannot hold (it truncates dims to 32 bits)");
  });

  test('V2 JSON: Triton\'s own checks come first (a count wrapping negative keeps its message)', () => {
    const h = Buffer.from('{"inputs":[{"name":"X","datatype":"FP32","shape":[3037000500,3037000500],"data":[1]}]}');
    expect(refusal(() => decodeV2Header(h, 0, h.length, { ...ctx, binaryBytes: 0 }))).toEqual({ code: 'GW_ERR_DECODE_MALFORMED',
      message: "Unable to parse 'data': Shape does not match true shape of 'data' field" });
  });

  test('V1: depth past the V2 bound is a 400 before JSON.parse', () => {
    const model = { name: 'm', version: '', inputs: [{ name: 'x', datatype: 'INT32', shape: [-1, -1] }] };
    const text = `{"instances":${'['.repeat(10_001)}1${']'.repeat(10_001)}}`;
    expect(refusal(() => decodeV1Predict(text, model, 1 << 20))).toEqual({ code: 'GW_ERR_DECODE_V1_INVALID',
      message: 'the body nests deeper than 10000 arrays/objects (at offset 10012)' });
    // At the bound itself: decoded without recursion (a stack overflow before).
    const atBound = `{"instances":${'['.repeat(9_999)}1${']'.repeat(9_999)}}`;
    expect(decodeV1Predict(atBound, model, 1 << 20).request.inputs[0]!.shape).toEqual([1, 1]); // one leaf, fitted to the model's dims
  });
});
