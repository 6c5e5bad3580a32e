// Our .proto files state Triton's wire contract; these checks pin the field numbers and wire
// types that the hand-framed data plane (issue: V2 inference) and Triton rely on.
import { join } from 'node:path';
import { Root } from 'protobufjs';
import { inference } from '../../../proto/services';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

describe('inference.proto wire contract', () => {
  test('ModelInferRequest: model_name=1, model_version=2, id=3, inputs=5, outputs=6, raw_input_contents=7', () => {
    const bytes = inference.ModelInferRequest.encode({
      model_name: 'm', model_version: '1', id: 'x',
      inputs: [{ name: 'I', datatype: 'FP32', shape: [1, 2] }],
      outputs: [{ name: 'O' }],
      raw_input_contents: [Buffer.from([0xaa, 0xbb])],
    }).finish();
    expect(hex(bytes)).toBe([
      '0a016d', '120131', '1a0178',
      '2a0d' + '0a0149' + '120446503332' + '1a020102', // InferInputTensor: name=1, datatype=2, shape=3 packed
      '3203' + '0a014f',
      '3a02aabb', // raw_input_contents: tag 0x3a = field 7, length-delimited
    ].join(''));
  });

  test('InferParameter oneof members keep their numbers and types', () => {
    const p = (v: inference.IInferParameter): string => hex(inference.InferParameter.encode(v).finish());
    expect(p({ bool_param: true })).toBe('0801');
    expect(p({ int64_param: -1 })).toBe('10ffffffffffffffffff01');
    expect(p({ string_param: 'a' })).toBe('1a0161');
    expect(p({ double_param: 1 })).toBe('21000000000000f03f');
    expect(p({ uint64_param: 5 })).toBe('2805');
  });

  test('ModelInferResponse: raw_output_contents=6 decodes as views of the received buffer', () => {
    const wire = Buffer.from(inference.ModelInferResponse.encode({
      model_name: 'm', outputs: [{ name: 'O', datatype: 'UINT8', shape: [3] }], raw_output_contents: [Buffer.from([1, 2, 3])],
    }).finish());
    expect(wire.subarray(wire.length - 5).toString('hex')).toBe('3203010203');
    const r = inference.ModelInferResponse.decode(wire);
    expect(r.raw_output_contents[0]!.buffer).toBe(wire.buffer);
  });

  test('ModelConfig declares its fields in Triton\'s order (the /config JSON printer walks it)', () => {
    const root = new Root().loadSync(join(__dirname, '../../../proto/inference.proto'), { keepCase: true });
    const fields = root.lookupType('inference.ModelConfig').fieldsArray.map((f) => f.name);
    expect(fields).toEqual([
      'name', 'platform', 'backend', 'runtime', 'version_policy', 'max_batch_size', 'input', 'output',
      'batch_input', 'batch_output', 'optimization', 'dynamic_batching', 'sequence_batching',
      'ensemble_scheduling', 'instance_group', 'default_model_filename', 'cc_model_filenames',
      'metric_tags', 'parameters', 'model_warmup', 'model_operations', 'model_transaction_policy',
      'model_repository_agents', 'response_cache', 'model_metrics',
    ]);
    expect(root.lookupType('inference.ModelInstanceGroup').fieldsArray.map((f) => f.name)).toEqual([
      'name', 'kind', 'count', 'rate_limiter', 'gpus', 'secondary_devices', 'profile', 'passive', 'host_policy',
    ]);
    expect(inference.DataType.TYPE_STRING).toBe(13);
    expect(inference.DataType.TYPE_BF16).toBe(14);
  });
});
