// The two zoos are twins: for every model, our reference backend and real Triton (PyTriton,
// test/triton/zoo.py) return the same model metadata over gRPC. And the gateway, pointed at
// real Triton, answers the health probes.
import { rmSync, writeFileSync } from 'node:fs';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { createZoo } from '../../gateway/reference-backend/zoo';
import type { ControlPlane } from '../../gateway/upstream/control/control-plane';
import type { inference } from '../../proto/services';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { grpcClient } from '../support/upstream';

const TRITON_GRPC = process.env.TRITON_GRPC!;
/** Models PyTriton cannot declare (BF16 has no numpy dtype). */
const REFERENCE_ONLY = new Set(['identity_bf16']);
const MODELS = createZoo({ slowCancellations: 0, streamCancellations: 0, streamCalls: 0, inferCalls: 0 }, 0)
  .map((m) => m.name).filter((n) => !REFERENCE_ONLY.has(n));

let reference: ReferenceBackend;
let ours: ControlPlane;
let triton: ControlPlane;

beforeAll(async () => {
  reference = await startReferenceBackend();
  ours = grpcClient(reference.address);
  triton = grpcClient(TRITON_GRPC);
});
afterAll(async () => {
  ours.close();
  triton.close();
  await reference.close();
});

describe('zoo twins: reference backend and real Triton', () => {
  test('real Triton is the version we target', async () => {
    const meta = await triton.call('ServerMetadata', {});
    expect(meta.name).toBe('triton');
    expect(meta.version).toBe(process.env.TRITON_VERSION);
    const mine = await ours.call('ServerMetadata', {});
    expect(mine.toJSON()).toEqual(meta.toJSON());
  });

  test.each(MODELS)('%s: same model metadata', async (name) => {
    const [a, b] = await Promise.all([ours.call('ModelMetadata', { name }), triton.call('ModelMetadata', { name })]);
    expect(a.toJSON()).toEqual(b.toJSON());
  });

  test('Triton serves no model the reference zoo lacks', async () => {
    const index = await triton.call('RepositoryIndex', { ready: true });
    const names = index.models.map((m) => m.name).sort();
    expect(names).toEqual([...MODELS].sort());
  });
});

describe('zoo twins: the same answers to bad requests', () => {
  const int32 = (n: number): Buffer => Buffer.alloc(n * 4, 1);
  const simple = (overrides: Record<string, unknown>) => ({
    model_name: 'simple',
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
    raw_input_contents: [int32(16), int32(16)],
    ...overrides,
  });
  const bytes = (elements: Buffer, shape: number[]) => ({
    model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape }], raw_input_contents: [elements],
  });
  const cases: [string, Record<string, unknown>][] = [
    ['unknown model', { model_name: 'nonexistent' }],
    ['unknown version', simple({ model_version: '2' })],
    ['bad version string', simple({ model_version: 'abc' })],
    ['one input missing', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [int32(16)] })],
    ['raw data missing', simple({ raw_input_contents: [int32(16)] })],
    ['wrong datatype', simple({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }] })],
    ['wrong byte size', simple({ id: 'my-id', raw_input_contents: [int32(15), int32(16)] })],
    ['wrong shape', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 15] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [int32(15), int32(16)] })],
    ['no batch dim', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [16] }, { name: 'INPUT1', datatype: 'INT32', shape: [16] }] })],
    ['batch too large', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [9, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [9, 16] }], raw_input_contents: [int32(144), int32(144)] })],
    ['unknown input', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUTX', datatype: 'INT32', shape: [1, 16] }] })],
    ['unknown output', simple({ outputs: [{ name: 'NOPE' }] })],
    ['truncated BYTES element', bytes(Buffer.from([10, 0, 0, 0, 97, 98, 99]), [1, 1])],
    ['too few BYTES elements', bytes(Buffer.from([1, 0, 0, 0, 97, 1, 0, 0, 0, 98]), [1, 3])],
    ['too many BYTES elements', bytes(Buffer.from([1, 0, 0, 0, 97, 1, 0, 0, 0, 98]), [1, 1])],
    // (The rank mismatch of identity_fp32_nobatch is checked through the gateway, in the
    // differential suite: Triton's message ends in a blank, which grpc-js's strict HTTP/2
    // header validation drops, so this grpc-js client would see an empty message.)
  ];

  test.each(cases)('%s', async (_name, request) => {
    const outcome = async (c: ControlPlane) => {
      try {
        await c.call('ModelInfer', request);
        return { ok: true };
      } catch (err) {
        const e = err as { status: number; message: string };
        return { status: e.status, message: e.message };
      }
    };
    expect(await outcome(ours)).toEqual(await outcome(triton));
  });

  test('ModelReady of an unknown model is false, not an error', async () => {
    const [a, b] = await Promise.all([ours.call('ModelReady', { name: 'nonexistent' }), triton.call('ModelReady', { name: 'nonexistent' })]);
    expect([a.ready, b.ready]).toEqual([false, false]);
  });
});

describe('zoo twins: the APIs besides inference answer as Triton\'s', () => {
  const key = `/tg-twins-${process.pid}`;
  beforeAll(() => writeFileSync(`/dev/shm${key}`, Buffer.alloc(4096)));
  afterAll(async () => {
    await Promise.allSettled([ours, triton].map((c) => c.call('SystemSharedMemoryUnregister', { name: '' })));
    rmSync(`/dev/shm${key}`, { force: true });
  });
  type Call = [string, (c: ControlPlane) => Promise<{ toJSON(): unknown }>];
  const outcome = async (c: ControlPlane, call: Call[1]) => {
    try {
      return { ok: (await call(c)).toJSON() };
    } catch (err) {
      const e = err as { status: number; message: string };
      return { status: e.status, message: e.message };
    }
  };
  const place = (region: string, offset: number, size: number) => ({
    shared_memory_region: { string_param: region }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: size },
  });
  const simpleShm = (region: string, offset: number, size: number, outputs: inference.ModelInferRequest.IInferRequestedOutputTensor[] = []) => ({
    model_name: 'simple', outputs,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: place(region, offset, size) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
    raw_input_contents: [Buffer.alloc(64, 1)],
  });
  // In order: each step on both servers, the same outcome.
  const steps: Call[] = [
    ['register', (c) => c.call('SystemSharedMemoryRegister', { name: 'twin', key, offset: 0, byte_size: 4096 })],
    ['register again', (c) => c.call('SystemSharedMemoryRegister', { name: 'twin', key, offset: 0, byte_size: 4096 })],
    ['register a missing object', (c) => c.call('SystemSharedMemoryRegister', { name: 'x', key: '/tg-twins-no-such-object', offset: 0, byte_size: 8 })],
    ['register past the end', (c) => c.call('SystemSharedMemoryRegister', { name: 'x', key, offset: 4000, byte_size: 200 })],
    ['status of one', (c) => c.call('SystemSharedMemoryStatus', { name: 'twin' })],
    ['status of an unknown region', (c) => c.call('SystemSharedMemoryStatus', { name: 'x' })],
    ['infer: an input in an unknown region', (c) => c.call('ModelInfer', simpleShm('x', 0, 64))],
    ['infer: an offset past the region', (c) => c.call('ModelInfer', simpleShm('twin', 4096, 64))],
    ['infer: offset + size past the region', (c) => c.call('ModelInfer', simpleShm('twin', 4090, 64))],
    ['infer: a byte size that does not fit the input', (c) => c.call('ModelInfer', simpleShm('twin', 0, 60))],
    ['infer: an output region too small', (c) => c.call('ModelInfer', simpleShm('twin', 0, 64, [{ name: 'OUTPUT0', parameters: place('twin', 1024, 32) }]))],
    ['infer: input and output in the region', (c) => c.call('ModelInfer', simpleShm('twin', 0, 64, [{ name: 'OUTPUT0', parameters: place('twin', 1024, 64) }, { name: 'OUTPUT1' }]))],
    ['unregister', (c) => c.call('SystemSharedMemoryUnregister', { name: 'twin' })],
    ['unregister an unknown region', (c) => c.call('SystemSharedMemoryUnregister', { name: 'twin' })],
    ['statistics of an unknown model', (c) => c.call('ModelStatistics', { name: 'nonexistent', version: '' })],
    ['statistics of an unknown version', (c) => c.call('ModelStatistics', { name: 'simple', version: '7' })],
    ['register a key of Triton\'s python backend', (c) => c.call('SystemSharedMemoryRegister', { name: 'y', key: '/triton_python_backend_shm_region_1', offset: 0, byte_size: 8 })],
    ['repository index of a named repository', (c) => c.call('RepositoryIndex', { repository_name: 'models', ready: false })],
    ['trace: the file is not settable', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_file: { value: ['/tmp/t'] } } })],
    ['trace: OFF with another level', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_level: { value: ['OFF', 'TENSORS'] } } })],
    ['trace: a rate that is no number', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_rate: { value: ['x'] } } })],
    ['trace: an unknown model', (c) => c.call('TraceSetting', { model_name: 'nonexistent', settings: {} })],
    ['log: the file is not settable', (c) => c.call('LogSettings', { settings: { log_file: { string_param: '/tmp/l' } } })],
    ['log: a level of the wrong type', (c) => c.call('LogSettings', { settings: { log_error: { string_param: 'no' } } })],
  ];
  test('every step', async () => {
    const mine: unknown[] = [];
    const theirs: unknown[] = [];
    for (const [name, call] of steps) {
      mine.push({ name, ...(await outcome(ours, call)) });
      theirs.push({ name, ...(await outcome(triton, call)) });
    }
    expect(mine).toEqual(theirs);
  });
});

describe('gateway in front of real Triton', () => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--backend', TRITON_GRPC]); });
  afterAll(() => gw.close());

  test.each(['live', 'ready'])('GET /v2/health/%s → 200, empty body, as Triton\'s own HTTP', async (what) => {
    const viaGateway = await fetch(`${gw.url}/v2/health/${what}`);
    const direct = await fetch(`http://${process.env.TRITON_HTTP}/v2/health/${what}`);
    expect([viaGateway.status, await viaGateway.text()]).toEqual([direct.status, await direct.text()]);
    expect(viaGateway.status).toBe(200);
  });
});

describe('telemetry in front of real Triton', () => {
  test('with tracing on, Triton takes the traceparent and answers', async () => {
    const gw = await gatewayFor(['--backend', TRITON_GRPC, '--tracing', '--otlp-endpoint', 'http://127.0.0.1:9/v1/traces']);
    try {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1, 2] }] });
      const r = await fetch(`${gw.url}/v2/models/identity_fp32/infer`, {
        method: 'POST', body, headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('server-timing')).toMatch(/triton;dur=/);
    } finally {
      await gw.close(); // the collector address is closed: shutdown must still be quick
    }
  }, 15_000);
});
