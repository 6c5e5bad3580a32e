// TorchServe answers: one BYTES output of one element is its bytes; everything else is JSON — a
// batching model's one row, else the whole output; bare for one output, by name for several.
import { encodeTorchServeAnswer } from '../../../gateway/encode/torchserve';
import type { InferResponse, OutputTensor } from '../../../gateway/infer/response';

const out = (name: string, datatype: string, shape: number[], data: Buffer): OutputTensor => ({
  name, datatype, shape, parameters: {}, data: [data], byteLength: data.length,
});
const res = (...outputs: OutputTensor[]): InferResponse => ({ modelName: 'm', modelVersion: '1', id: '', parameters: {}, outputs });
const element = (b: Buffer): Buffer => Buffer.concat([Buffer.from(Uint32Array.of(b.length).buffer), b]);
const int64 = (...v: number[]): Buffer => Buffer.from(BigInt64Array.from(v.map(BigInt)).buffer);

describe('encodeTorchServeAnswer', () => {
  test('one BYTES element: its bytes as they are, application/octet-stream', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0xff, 0x0d, 0x0a]);
    const a = encodeTorchServeAnswer(res(out('ECHO', 'BYTES', [1, 1], element(png))), true);
    expect([a.contentType, a.body.equals(png)]).toEqual(['application/octet-stream', true]);
  });

  test('a batching model: the request\'s one row; one output bare, several by name', () => {
    expect(encodeTorchServeAnswer(res(out('LEN', 'INT64', [1, 1], int64(3000))), true).body.toString()).toBe('[3000]');
    expect(encodeTorchServeAnswer(res(out('LEN', 'INT64', [1, 1], int64(7)), out('SUM', 'INT64', [1, 2], int64(1, 2))), true).body.toString())
      .toBe('{"LEN":[7],"SUM":[1,2]}');
  });

  test('a model without batching: the whole output; BYTES elements as text (or {"b64"}) beside others', () => {
    expect(encodeTorchServeAnswer(res(out('P', 'FP32', [2, 2], Buffer.from(Float32Array.of(0.5, 1, 2, 3).buffer))), false).body.toString()).toBe('[[0.5,1.0],[2.0,3.0]]');
    const two = Buffer.concat([element(Buffer.from('cat')), element(Buffer.from([0xff]))]);
    expect(encodeTorchServeAnswer(res(out('LABELS', 'BYTES', [2], two)), false).body.toString()).toBe('["cat",{"b64":"/w=="}]');
  });

  test('a BYTES element whose length prefix does not match is GW_ERR_ENCODE_MALFORMED', () => {
    expect(() => encodeTorchServeAnswer(res(out('ECHO', 'BYTES', [1], Buffer.from([9, 0, 0, 0, 1]))), true)).toThrow("output 'ECHO': its bytes do not match its shape and datatype");
  });
});
