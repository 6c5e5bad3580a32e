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
const MODELS = createZoo({ slowCancellations: 0 }, 0).map((m) => m.name).filter((n) => !REFERENCE_ONLY.has(n));

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
