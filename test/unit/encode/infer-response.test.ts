// JSON `data` of FP32/FP64 outputs is printed straight into one buffer (floatElements): it must be
// Triton's text for every element, comma-separated, whatever the values and however the bytes
// arrived (one buffer or split across chunks).
import { encodeGenerateResponse, encodeInferResponse } from '../../../gateway/encode/infer-response';
import type { InferResponse, OutputTensor } from '../../../gateway/infer/response';
import { tritonDoubleReference } from '../../support/grisu2-reference';
import { float32Bits, seeded as random } from '../../support/random';

function output(datatype: string, values: number[], chunks = 1): OutputTensor {
  const width = datatype === 'FP32' ? 4 : 8;
  const bytes = Buffer.alloc(values.length * width);
  values.forEach((v, i) => (width === 4 ? bytes.writeFloatLE(v, i * 4) : bytes.writeDoubleLE(v, i * 8)));
  const cut = Math.floor(bytes.length / 2) + 1; // not on an element boundary
  const data = chunks === 1 ? [bytes] : [bytes.subarray(0, cut), bytes.subarray(cut)];
  return { name: 'OUT', datatype, shape: [values.length], parameters: {}, data, byteLength: bytes.length };
}

function response(o: OutputTensor): InferResponse {
  return { modelName: 'm', modelVersion: '1', id: '', parameters: {}, outputs: [o] };
}

const json = { outputs: undefined, binaryDataOutput: false, base64Output: false };

describe('FP32/FP64 output data as Triton prints it', () => {
  const rnd = random(5);
  const specials = [0, -0, NaN, Infinity, -Infinity, 1, -2.5, 0.1, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 2 ** 54];
  const fp64 = [...specials, ...Array.from({ length: 20_000 }, () => (rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 40 - 20))];
  const fp32 = [...specials.map(Math.fround), ...Array.from({ length: 20_000 }, () => float32Bits(rnd))];

  test.each([
    ['FP32', 1],
    ['FP32', 2],
    ['FP64', 1],
    ['FP64', 2],
  ] as const)('%s, %d chunk(s)', (datatype, chunks) => {
    const values = datatype === 'FP32' ? fp32 : fp64;
    const r = encodeInferResponse(response(output(datatype, values, chunks)), json);
    const want = `{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"${datatype}","shape":[${values.length}],`
      + `"data":[${values.map(tritonDoubleReference).join(',')}]}]}`;
    expect(r.header.toString('latin1')).toBe(want);
    expect(r.copied).toBe(chunks === 1 ? 0 : values.length * (datatype === 'FP32' ? 4 : 8));
  });

  test('one element and none', () => {
    expect(encodeInferResponse(response(output('FP32', [0.5])), json).header.toString()).toContain('"data":[0.5]}');
    expect(encodeInferResponse(response(output('FP64', [])), json).header.toString()).toContain('"shape":[0],"data":[]}');
  });

  test('the generate extension prints a single element as a scalar, others as an array', () => {
    expect(encodeGenerateResponse(response(output('FP32', [Math.fround(0.1)]))).toString()).toBe('{"OUT":0.10000000149011612,"model_name":"m","model_version":"1"}');
    expect(encodeGenerateResponse(response(output('FP64', [0.1, 0.2]))).toString()).toBe('{"OUT":[0.1,0.2],"model_name":"m","model_version":"1"}');
  });
});

describe('an answer that must be text (binaryAsBase64: server-sent events)', () => {
  const fp64 = output('FP64', [1.5, -2]);
  const b64 = Buffer.concat(fp64.data).toString('base64');
  const asked = (binary: boolean | undefined) => ({ outputs: [{ name: 'OUT', parameters: new Map(), binary, sharedMemory: false }], binaryDataOutput: false });

  test('outputs asked for as binary become base64, marked content_type; the others stay as asked', () => {
    const base64 = `{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"FP64","shape":[2],"parameters":{"content_type":"base64"},"data":"${b64}"}]}`;
    const plain = '{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"FP64","shape":[2],"data":[1.5,-2.0]}]}';
    for (const [choice, want] of [
      [asked(true), base64],
      [{ outputs: undefined, binaryDataOutput: true }, base64],
      [asked(false), plain],
      [{ ...asked(false), binaryDataOutput: true }, plain],
      [json, plain],
    ] as const) {
      const r = encodeInferResponse(response(fp64), choice, true);
      expect([r.header.toString(), r.binary, r.binaryLength]).toEqual([want, [], 0]);
    }
  });

  test('without it, binary outputs stay binary', () => {
    const r = encodeInferResponse(response(fp64), asked(true));
    expect([r.header.toString(), r.binaryLength]).toEqual(['{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"FP64","shape":[2],"parameters":{"binary_data_size":16}}]}', 16]);
  });
});

describe('text runs of any length (gathered in a scratch buffer, copied out at raw pieces and the end)', () => {
  const ints = (n: number, name: string): OutputTensor => {
    const bytes = Buffer.alloc(n * 4);
    for (let i = 0; i < n; i++) bytes.writeInt32LE(i * 7919 - 1_000_000, i * 4);
    return { name, datatype: 'INT32', shape: [n], parameters: {}, data: [bytes], byteLength: bytes.length };
  };
  const text = (o: OutputTensor): string => `{"name":${JSON.stringify(o.name)},"datatype":"INT32","shape":[${o.shape[0]}],"data":[${
    Array.from({ length: o.shape[0]! }, (_, i) => o.data[0]!.readInt32LE(i * 4)).join(',')}]}`;

  test.each([0, 1, 1500, 3000, 20_000])('INT32 outputs of %i elements, between FP32 ones and a non-ASCII name', (n) => {
    const outputs = [ints(n, 'A'), output('FP32', [0.5, 1]), ints(n, 'B'), ints(3, 'é"')];
    const r = encodeInferResponse({ modelName: 'm', modelVersion: '1', id: 'x', parameters: {}, outputs }, json);
    const want = `{"id":"x","model_name":"m","model_version":"1","outputs":[${text(outputs[0]!)},`
      + '{"name":"OUT","datatype":"FP32","shape":[2],"data":[0.5,1.0]},'
      + `${text(outputs[2]!)},${text(outputs[3]!)}]}`;
    expect(r.header.toString('utf8')).toBe(want);
  });
});

describe('numbers written as digits (shapes, binary_data_size): what String(n) writes', () => {
  const dims = [0, -0, 1, 9, 10, -1, -10, 1234567, 2 ** 31, -(2 ** 31), 2 ** 32, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 2 ** 53 + 2,
    -(2 ** 63), 2 ** 64, 1e21, -1e22];
  const binary = { outputs: undefined, binaryDataOutput: true, base64Output: false };

  test.each(dims)('a dim of %p', (d) => {
    const o: OutputTensor = { name: 'OUT', datatype: 'FP32', shape: [3, d, d], parameters: {}, data: [Buffer.alloc(12)], byteLength: 12 };
    const r = encodeInferResponse({ modelName: 'm', modelVersion: '1', id: '', parameters: {}, outputs: [o] }, binary);
    const head = '{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"FP32"';
    expect(r.header.toString('latin1')).toBe(`${head},"shape":[${[3, d, d].join(',')}],"parameters":{"binary_data_size":12}}]}`);
  });

  test('an encoding that threw leaves nothing behind for the next answer', () => {
    const fp16: OutputTensor = { name: 'OUT', datatype: 'FP16', shape: [1], parameters: {}, data: [Buffer.alloc(2)], byteLength: 2 };
    expect(() => encodeInferResponse(response(fp16), json)).toThrow('FP16');
    expect(encodeInferResponse(response(output('FP32', [1])), json).header.toString('latin1'))
      .toBe('{"model_name":"m","model_version":"1","outputs":[{"name":"OUT","datatype":"FP32","shape":[1],"data":[1.0]}]}');
  });
});
