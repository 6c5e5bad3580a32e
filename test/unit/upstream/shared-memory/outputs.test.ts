import type { InferRequest, RequestedOutput } from '../../../../gateway/infer/request';
import { outputKind } from '../../../../gateway/encode/infer-response';
import { fixedByteSize, regionOutputs as place, requestedOutputs } from '../../../../gateway/upstream/shared-memory/outputs';
import { inference } from '../../../../proto/services';

const T = inference.DataType;

const out = (name: string, dataType: number, dims: number[]): inference.IModelOutput => ({ name, data_type: dataType, dims });

const config = (maxBatch: number, ...output: inference.IModelOutput[]): inference.IModelConfig => ({ name: 'm', max_batch_size: maxBatch, output });

function request(shapes: number[][], o: Partial<InferRequest> = {}): InferRequest {
  return {
    modelName: 'm', modelVersion: '', id: undefined, parameters: new Map(), outputs: undefined, binaryDataOutput: true,
    inputs: shapes.map((shape, i) => ({
      name: `IN${i}`, datatype: 'UINT8', shape, parameters: new Map(), byteSize: shape.reduce((a, d) => a * d, 1),
    })),
    ...o,
  };
}

const listed = (name: string, extra: Partial<RequestedOutput> = {}): RequestedOutput => ({
  name, parameters: new Map(), binary: true, sharedMemory: false, ...extra,
});

describe('fixedByteSize', () => {
  test.each([
    ['FP32 [1000], 1 row', out('P', T.TYPE_FP32, [1000]), 1, 4000],
    ['FP32 [1000], batch 3', out('P', T.TYPE_FP32, [1000]), 3, 12000],
    ['UINT8 [2,3,4]', out('P', T.TYPE_UINT8, [2, 3, 4]), 1, 24],
    ['INT64 [] (a scalar)', out('P', T.TYPE_INT64, []), 2, 16],
    ['BF16 [8]', out('P', T.TYPE_BF16, [8]), 1, 16],
    ['a zero dim', out('P', T.TYPE_FP32, [0, 5]), 1, 0],
  ])('%s', (_t, o, batch, want) => {
    expect(fixedByteSize(o, batch)).toBe(want);
  });

  test.each([
    ['a variable dim', out('P', T.TYPE_FP32, [-1])],
    ['a variable dim among fixed ones', out('P', T.TYPE_FP32, [3, -1, 4])],
    ['BYTES (TYPE_STRING)', out('P', T.TYPE_STRING, [4])],
    ['TYPE_INVALID', out('P', T.TYPE_INVALID, [4])],
    ['no datatype', { name: 'P', dims: [4] }],
  ])('%s: not known in advance', (_t, o) => {
    expect(fixedByteSize(o, 1)).toBeUndefined();
  });
});

const regionOutputs = (cfg: inference.IModelConfig, r: InferRequest) => place(cfg, r, (name) => outputKind(r, name) === 'binary');

describe('regionOutputs', () => {
  const cfg = config(8, out('A', T.TYPE_INT32, [16]), out('B', T.TYPE_FP32, [-1]), out('C', T.TYPE_STRING, [1]), out('D', T.TYPE_UINT8, [4]));

  test('binary by default (binary_data_output, raw): the fixed, fixed-size ones, the batch from the inputs', () => {
    expect(regionOutputs(cfg, request([[3, 10], [3, 2]]))).toEqual([{ name: 'A', byteSize: 3 * 64 }, { name: 'D', byteSize: 12 }]);
  });

  test('a model without batching takes the dims as they are', () => {
    expect(regionOutputs(config(0, out('A', T.TYPE_INT32, [2, 16])), request([[7]]))).toEqual([{ name: 'A', byteSize: 128 }]);
  });

  test('listed outputs: only those asked for as binary, never one in the client\'s own region or classified', () => {
    const r = request([[2, 1]], {
      binaryDataOutput: false,
      outputs: [listed('A'), listed('D', { binary: undefined })],
    });
    expect(regionOutputs(cfg, r)).toEqual([{ name: 'A', byteSize: 128 }]);
    const own = request([[2, 1]], { outputs: [listed('A', { sharedMemory: true, binary: undefined }), listed('D')] });
    expect(regionOutputs(cfg, own)).toEqual([{ name: 'D', byteSize: 8 }]);
    const cls = request([[2, 1]], { outputs: [listed('A', { parameters: new Map([['classification', { type: 'int64', value: 3n }]]) })] });
    expect(regionOutputs(cfg, cls)).toEqual([]);
  });

  test('JSON answers (binary_data_output false, nothing listed): none', () => {
    expect(regionOutputs(cfg, request([[2, 1]], { binaryDataOutput: false }))).toEqual([]);
  });

  test('inputs that disagree on the batch dim, or a batch of 0: none (Triton judges the request)', () => {
    expect(regionOutputs(cfg, request([[2, 1], [3, 1]]))).toEqual([]);
    expect(regionOutputs(cfg, request([[0, 4]]))).toEqual([]);
    expect(regionOutputs(cfg, request([[]]))).toEqual([]);
  });
});

describe('requestedOutputs', () => {
  const cfg = config(8, out('A', T.TYPE_INT32, [16]), out('B', T.TYPE_FP32, [-1]));
  const placed = new Map([['A', { offset: 128, byteSize: 64 }]]);
  const shm = [
    ['shared_memory_region', { type: 'string', value: 'r' }],
    ['shared_memory_offset', { type: 'int64', value: 128n }],
    ['shared_memory_byte_size', { type: 'int64', value: 64n }],
  ] as const;

  test('nothing listed: every config output, the placed one with the region\'s parameters', () => {
    const got = requestedOutputs(cfg, request([[1, 1]]), 'r', placed);
    expect(got.map((o) => [o.name, [...o.parameters]])).toEqual([['A', shm], ['B', []]]);
  });

  test('listed: the client\'s list, its other parameters kept', () => {
    const r = request([[1, 1]], { outputs: [listed('B'), listed('A', { parameters: new Map([['x', { type: 'bool', value: true }]]) })] });
    const got = requestedOutputs(cfg, r, 'r', placed);
    expect(got.map((o) => [o.name, [...o.parameters]])).toEqual([['B', []], ['A', [['x', { type: 'bool', value: true }], ...shm]]]);
  });
});
