// The two zoos are twins: for every model, our reference backend and real Triton (PyTriton,
// test/triton/zoo.py) return the same model metadata over gRPC. And the gateway, pointed at
// real Triton, answers the health probes.
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { createZoo } from '../../gateway/reference-backend/zoo';
import type { ControlPlane } from '../../gateway/upstream/control-plane';
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
