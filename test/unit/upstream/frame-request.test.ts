import { inference } from '../../../proto/services';
import type { InferRequest } from '../../../gateway/infer/request';
import { frameInferRequest, headerMessage } from '../../../gateway/upstream/frame-request';

const request: InferRequest = {
  modelName: 'simple',
  modelVersion: '3',
  id: 'abc',
  parameters: new Map([
    ['sequence_id', { type: 'int64', value: -2n }],
    ['priority', { type: 'uint64', value: 18446744073709551615n }],
    ['flag', { type: 'bool', value: true }],
    ['ratio', { type: 'double', value: 0.5 }],
    ['name', { type: 'string', value: 'x' }],
  ]),
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 2], parameters: new Map(), byteSize: 8 },
    { name: 'EMPTY', datatype: 'FP32', shape: [1, 0], parameters: new Map(), byteSize: 0 },
    { name: 'SHM', datatype: 'FP32', shape: [1], parameters: new Map([['shared_memory_region', { type: 'string', value: 'r' }]]), byteSize: undefined },
    { name: 'BIG', datatype: 'UINT8', shape: [1, 300], parameters: new Map(), byteSize: 300 },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: new Map([['classification', { type: 'int64', value: 3n }]]), binary: true, sharedMemory: false }],
  binaryDataOutput: false,
};

describe('frameInferRequest', () => {
  test('byte-identical to protobufjs encoding the whole message, with the gRPC prefix', () => {
    const framed = frameInferRequest(request);
    const payloads = [Buffer.from([1, 0, 0, 0, 2, 0, 0, 0]), Buffer.alloc(0), Buffer.alloc(300, 7)];
    let k = 0;
    framed.slots.forEach((slot) => {
      if (slot === undefined) return;
      payloads[k++]!.copy(framed.message, slot.offset);
    });
    const expected = inference.ModelInferRequest.encode({ ...headerMessage(request), raw_input_contents: payloads }).finish();
    expect(framed.message[0]).toBe(0);
    expect(framed.message.readUInt32BE(1)).toBe(expected.length);
    expect(framed.message.subarray(5)).toEqual(Buffer.from(expected));
  });

  test('no entry for shared-memory inputs, an empty entry for empty tensors', () => {
    const framed = frameInferRequest(request);
    expect(framed.slots.map((s) => s?.length)).toEqual([8, 0, undefined, 300]);
    const decoded = inference.ModelInferRequest.decode(framed.message.subarray(5));
    expect(decoded.raw_input_contents.map((b) => b.length)).toEqual([8, 0, 300]);
    expect(decoded.parameters.priority!.uint64_param!.toString()).toBe('18446744073709551615');
    expect(decoded.parameters.sequence_id!.int64_param!.toString()).toBe('-2');
  });
});
