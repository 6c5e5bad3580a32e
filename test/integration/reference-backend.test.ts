// The reference backend answers the Triton protocol with Triton's semantics.
import { frameBytesElements, unframeBytesElements } from '../../gateway/infer/bytes-element';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { FAILING_MESSAGE } from '../../gateway/reference-backend/zoo';
import type { ControlPlane } from '../../gateway/upstream/control-plane';
import { callError, grpcClient } from '../support/upstream';
import { nextEvent } from '../support/wait';

let backend: ReferenceBackend;
let client: ControlPlane;

beforeAll(async () => {
  backend = await startReferenceBackend();
  client = grpcClient(backend.address);
});
afterAll(async () => {
  client.close();
  await backend.close();
});

const int32 = (xs: number[]): Buffer => {
  const b = Buffer.alloc(xs.length * 4);
  xs.forEach((x, i) => b.writeInt32LE(x, i * 4));
  return b;
};
const readInt32 = (b: Uint8Array): number[] => {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  return Array.from({ length: buf.length / 4 }, (_, i) => buf.readInt32LE(i * 4));
};
const range = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));

function simpleRequest(overrides: Record<string, unknown> = {}) {
  return {
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    raw_input_contents: [int32(range(16, (i) => i)), int32(range(16, () => 1))],
    ...overrides,
  };
}

describe('reference backend', () => {
  test('server health and metadata', async () => {
    expect((await client.call('ServerLive', {})).live).toBe(true);
    expect((await client.call('ServerReady', {})).ready).toBe(true);
    const meta = await client.call('ServerMetadata', {});
    expect(meta.name).toBe('triton');
    expect(meta.extensions).toContain('binary_tensor_data');
  });

  test('model metadata has a -1 batch dim when the model batches', async () => {
    const m = await client.call('ModelMetadata', { name: 'simple' });
    expect(m.toJSON()).toEqual({
      name: 'simple', versions: ['1'], platform: 'python',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: ['-1', '16'] }, { name: 'INPUT1', datatype: 'INT32', shape: ['-1', '16'] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: ['-1', '16'] }, { name: 'OUTPUT1', datatype: 'INT32', shape: ['-1', '16'] }],
    });
    const nb = await client.call('ModelMetadata', { name: 'identity_fp32_nobatch' });
    expect(nb.inputs[0]!.shape!.map(Number)).toEqual([-1, -1]);
    const bf16 = await client.call('ModelMetadata', { name: 'identity_bf16' });
    expect(bf16.inputs[0]!.datatype).toBe('BF16');
  });

  test('model config carries what raw-input deduction needs', async () => {
    const { config } = await client.call('ModelConfig', { name: 'identity_bytes' });
    expect(config!.max_batch_size).toBe(8);
    expect(config!.input![0]!.data_type).toBe(13);
    expect(config!.input![0]!.dims!.map(Number)).toEqual([-1]);
  });

  test('simple: sum and difference, raw_output_contents always', async () => {
    const r = await client.call('ModelInfer', simpleRequest({ id: 'r1' }));
    expect([r.model_name, r.model_version, r.id]).toEqual(['simple', '1', 'r1']);
    expect(r.outputs.map((o) => [o.name, o.datatype, o.shape!.map(Number)])).toEqual([
      ['OUTPUT0', 'INT32', [1, 16]], ['OUTPUT1', 'INT32', [1, 16]],
    ]);
    expect(readInt32(r.raw_output_contents[0]!)).toEqual(range(16, (i) => i + 1));
    expect(readInt32(r.raw_output_contents[1]!)).toEqual(range(16, (i) => i - 1));
  });

  test('requested outputs only, in request order', async () => {
    const r = await client.call('ModelInfer', simpleRequest({ outputs: [{ name: 'OUTPUT1' }] }));
    expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
  });

  test('simple_string works on decimal text', async () => {
    const text = (xs: number[]) => frameBytesElements(xs.map((x) => Buffer.from(String(x))));
    const r = await client.call('ModelInfer', {
      model_name: 'simple_string',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 16] }, { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16] }],
      raw_input_contents: [text(range(16, (i) => i)), text(range(16, () => 2))],
    });
    const u = unframeBytesElements(Buffer.from(r.raw_output_contents[0]!));
    expect(u.ok && u.elements.map(String)).toEqual(range(16, (i) => i + 2).map(String));
  });

  test('identity over every datatype keeps the bytes', async () => {
    for (const [model, datatype, size] of [['identity_fp16', 'FP16', 2], ['identity_bf16', 'BF16', 2], ['identity_uint64', 'UINT64', 8], ['identity_bool', 'BOOL', 1]] as const) {
      const data = Buffer.from(range(3 * size, (i) => (i * 37) & 1));
      const r = await client.call('ModelInfer', {
        model_name: model, inputs: [{ name: 'INPUT0', datatype, shape: [1, 3] }], raw_input_contents: [data],
      });
      expect(Buffer.from(r.raw_output_contents[0]!)).toEqual(data);
    }
  });

  test('image_stats, blob_len, classifier_fp32', async () => {
    const img = Buffer.from(range(1000, (i) => i % 256));
    const s = await client.call('ModelInfer', { model_name: 'image_stats', inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 1000] }], raw_input_contents: [img] });
    expect(Buffer.from(s.raw_output_contents[0]!).readBigInt64LE(0)).toBe(1000n);
    expect(Buffer.from(s.raw_output_contents[1]!).readBigUInt64LE(0)).toBe(BigInt(img.reduce((a, b) => a + b, 0)));

    const blob = await client.call('ModelInfer', {
      model_name: 'blob_len', inputs: [{ name: 'BLOB', datatype: 'BYTES', shape: [2, 1] }],
      raw_input_contents: [frameBytesElements([Buffer.alloc(5), Buffer.alloc(0)])],
    });
    const lens = Buffer.from(blob.raw_output_contents[0]!);
    expect([lens.readBigInt64LE(0), lens.readBigInt64LE(8)]).toEqual([5n, 0n]);

    const x = Buffer.alloc(3 * 224 * 224 * 4);
    for (let i = 0; i < 3 * 224 * 224; i++) x.writeFloatLE(i / 7, i * 4);
    const c = await client.call('ModelInfer', { model_name: 'classifier_fp32', inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }], raw_input_contents: [x] });
    expect(c.outputs[0]!.shape!.map(Number)).toEqual([1, 1000]);
    expect(Buffer.from(c.raw_output_contents[0]!).readFloatLE(4)).toBe(Math.fround(Math.fround(1 / 7) + Math.fround(1001 / 7)));
  });

  test('big_output answers more than grpc-js\'s 4 MiB default', async () => {
    const n = Buffer.alloc(8);
    n.writeBigInt64LE(6_000_000n);
    const r = await client.call('ModelInfer', { model_name: 'big_output', inputs: [{ name: 'N', datatype: 'INT64', shape: [1] }], raw_input_contents: [n] });
    const data = r.raw_output_contents[0]!;
    expect(data.byteLength).toBe(6_000_000);
    expect([data[250], data[251], data[5_999_999]]).toEqual([250, 0, 5_999_999 % 251]);
  });

  test('failing is INTERNAL with its fixed message', async () => {
    const e = await callError(client.call('ModelInfer', { model_name: 'failing', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1] }], raw_input_contents: [Buffer.alloc(4)] }));
    expect(e.status).toBe(500);
    expect(e.message).toMatch(/^Failed to process the request\(s\) for model 'failing_0_0', message: TritonModelException: Model execute error: /);
    expect(e.message).toContain(`RuntimeError: ${FAILING_MESSAGE}`);
  });

  test('slow honours delay_ms and records a cancellation', async () => {
    const req = (delay: number) => ({
      model_name: 'slow', parameters: { delay_ms: { int64_param: delay } },
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
    });
    const t0 = Date.now();
    await client.call('ModelInfer', req(50));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);

    const before = backend.stats.slowCancellations;
    const ctl = new AbortController();
    const started = nextEvent(backend.events, 'slow-started');
    const call = callError(client.call('ModelInfer', req(5000), ctl.signal));
    await started;
    const cancelled = nextEvent(backend.events, 'slow-cancelled');
    ctl.abort();
    expect((await call).code).toBe('GW_ERR_UPSTREAM_CANCELLED');
    await cancelled;
    expect(backend.stats.slowCancellations).toBe(before + 1);
  });

  describe('Triton\'s errors', () => {
    test.each([
      ['unknown model', { model_name: 'nope' }, 404, "Request for unknown model: 'nope' is not found"],
      ['unknown version', { model_version: '2' }, 404, "Request for unknown model: 'simple' version 2 is not found"],
      ['missing raw data', { raw_input_contents: [int32(range(16, () => 0))] }, 400,
        "unable to find data for input tensor 'INPUT1' for model 'simple' in request."],
      ['unknown output', { outputs: [{ name: 'NOPE' }] }, 400, "unexpected inference output 'NOPE' for model 'simple'"],
      ['wrong datatype', { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }] }, 400,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"],
      ['wrong byte size', { id: 'b', raw_input_contents: [int32(range(15, () => 0)), int32(range(16, () => 0))] }, 400,
        "[request id: b] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"],
    ])('%s', async (_name, overrides, status, message) => {
      const e = await callError(client.call('ModelInfer', simpleRequest(overrides)));
      expect([e.status, e.message]).toEqual([status, message]);
    });

    test('metadata of an unknown model is NOT_FOUND', async () => {
      const e = await callError(client.call('ModelMetadata', { name: 'nope' }));
      expect([e.status, e.message]).toEqual([404, "Request for unknown model: 'nope' is not found"]);
    });
  });
});
