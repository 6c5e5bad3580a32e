// Restricted API groups (docs/endpoints.md#restricted-api-groups) and the gateway's own probes, against the reference
// backend: each category blocked by default or by api.disabled, allowed, and guarded by a header;
// the restricted check runs before the method check; pass-through and declarative routes are
// guarded by their group; Triton's restricted gRPC gets its header as triton-grpc-protocol-<key> metadata.
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_CATEGORIES, type ApiCategory } from '../../gateway/api-access';
import type { RunningGateway } from '../../gateway/gateway';
import { inferenceService } from '../../proto/services';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';

/** One request per category (method, path, body). */
const PROBE: Record<ApiCategory, [string, string, string?]> = {
  health: ['GET', '/v2/health/ready'],
  metadata: ['GET', '/v2/models/simple'],
  inference: ['POST', '/v2/models/simple/infer', '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}'],
  'shared-memory': ['GET', '/v2/systemsharedmemory/status'],
  'model-config': ['GET', '/v2/models/simple/config'],
  'model-repository': ['POST', '/v2/repository/index'],
  statistics: ['GET', '/v2/models/stats'],
  trace: ['GET', '/v2/trace/setting'],
  logging: ['GET', '/v2/logging'],
};

const call = (gw: RunningGateway, c: ApiCategory, headers: Record<string, string> = {}) => {
  const [method, path, body] = PROBE[c];
  return send(`${gw.url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
};

describe('defaults of an edge gateway', () => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--demo']); });
  afterAll(() => gw.close());

  test.each(['model-repository', 'shared-memory', 'trace', 'logging'] as const)('%s is disabled: 403', async (c) => {
    const r = await call(gw, c);
    expect([r.status, r.headers['content-type'], r.headers['x-tensorgate-error'], r.body.toString()]).toEqual([403, 'text/plain', 'GW_ERR_ROUTE_DISABLED',
      `{"error":"This API is restricted, the '${c}' API group is disabled on this gateway (api.disabled)"}`]);
  });

  test.each(['health', 'metadata', 'inference', 'model-config', 'statistics'] as const)('%s is open', async (c) => {
    const r = await call(gw, c);
    expect(r.status).not.toBe(403);
  });

  test('the check comes before the method check (Triton\'s order)', async () => {
    const r = await send(`${gw.url}/v2/repository/index`, { method: 'GET' });
    expect(r.status).toBe(403);
  });

  test('/healthz and /readyz are outside every group', async () => {
    const h = await send(`${gw.url}/healthz`);
    expect([h.status, h.body.toString()]).toEqual([200, 'ok\n']);
    const r = await send(`${gw.url}/readyz`);
    expect([r.status, r.body.toString()]).toEqual([200, 'ready\n']);
  });
});

describe('every category behind a header', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--api-restricted', 'health,metadata,inference,model-config:x-api=a', '--api-restricted', 'shared-memory,model-repository,statistics,trace,logging:admin-key=s3cret=1']);
  });
  afterAll(() => gw.close());

  test.each(API_CATEGORIES.map((c) => [c]))('%s: no header → 403, wrong value → 403, right value → through', async (c) => {
    const key = ['health', 'metadata', 'inference', 'model-config'].includes(c) ? 'x-api' : 'admin-key';
    const value = key === 'x-api' ? 'a' : 's3cret=1';
    const none = await call(gw, c);
    expect([none.status, none.headers['content-type'], none.headers['x-tensorgate-error'], none.body.toString()])
      .toEqual([403, 'text/plain', 'GW_ERR_ROUTE_RESTRICTED', `{"error":"This API is restricted, expecting header '${key}'"}`]);
    const wrong = await call(gw, c, { [key]: `${value}x` });
    expect(wrong.status).toBe(403);
    const right = await call(gw, c, { [key]: value });
    expect(right.status).not.toBe(403);
    // the reference backend serves every group (repository index, statistics, shared memory, trace and logging too)
    expect(right.status).toBe(200);
  });

  test('probes need no header', async () => {
    expect((await send(`${gw.url}/healthz`)).status).toBe(200);
  });
});

describe('api.disabled lists categories; none opens all', () => {
  test('inference disabled, repository enabled', async () => {
    const gw = await gatewayFor(['--demo', '--api-disabled', 'inference']);
    try {
      expect((await call(gw, 'inference')).status).toBe(403);
      expect((await call(gw, 'model-repository')).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});

describe('pass-through and declarative routes belong to an API group', () => {
  test('a pass-through route of its category, a declarative route of inference: guarded by header or disabled', async () => {
    const legacy = createServer((req, res) => res.end('legacy'));
    await new Promise<void>((r) => legacy.listen(0, '127.0.0.1', r));
    const upstream = `http://127.0.0.1:${(legacy.address() as AddressInfo).port}`;
    const gw = await gatewayFor(['--demo', '--api-restricted', 'inference:x-api=a',
      '--routes', JSON.stringify([{ path: '/api/text-length', model: 'blob_len', inputs: { BLOB: { from: '/document/text', decode: 'text' } }, response: 'v1' }]),
      '--passthrough', JSON.stringify([{ prefix: '/legacy', upstream }, { prefix: '/ops', upstream, category: 'model-repository' }])]);
    try {
      for (const [path, body] of [['/legacy/x', undefined], ['/api/text-length', '{"document":{"text":"hi"}}']] as const) {
        const none = await send(`${gw.url}${path}`, { method: 'POST', ...(body === undefined ? {} : { body }) });
        expect([path, none.status, none.headers['x-tensorgate-error']]).toEqual([path, 403, 'GW_ERR_ROUTE_RESTRICTED']);
        const right = await send(`${gw.url}${path}`, { method: 'POST', headers: { 'x-api': 'a' }, ...(body === undefined ? {} : { body }) });
        expect([path, right.status]).toEqual([path, 200]);
      }
      // model-repository is disabled by default: so is a pass-through route of that group.
      const ops = await send(`${gw.url}/ops/reload`, { method: 'POST', headers: { 'x-api': 'a' } });
      expect([ops.status, ops.headers['x-tensorgate-error']]).toEqual([403, 'GW_ERR_ROUTE_DISABLED']);
    } finally {
      await gw.close();
      legacy.closeAllConnections();
      await new Promise((r) => legacy.close(r));
    }
  });
});

describe('Triton\'s own restricted gRPC: the header travels as triton-grpc-protocol-<key>', () => {
  let server: Server;
  let address: string;
  const seen: Record<string, unknown>[] = [];
  beforeAll(async () => {
    server = new Server();
    const metaOf = (call: ServerUnaryCall<unknown, unknown>): Record<string, unknown> => call.metadata.getMap();
    server.addService(inferenceService, {
      ServerReady: (call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => { seen.push({ rpc: 'ServerReady', ...metaOf(call) }); cb(null, { ready: true }); },
      ModelStatistics: (call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => {
        const m = metaOf(call);
        seen.push({ rpc: 'ModelStatistics', ...m });
        if (m['triton-grpc-protocol-stats-key'] !== 'v1') cb({ code: status.UNAVAILABLE, details: "This protocol is restricted, expecting header 'triton-grpc-protocol-stats-key'" });
        else cb(null, { model_stats: [] });
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => server.forceShutdown());

  test('statistics carries the metadata, health does not', async () => {
    const gw = await gatewayFor(['--backend', address, '--upstream-restricted', 'statistics:stats-key=v1']);
    try {
      const r = await send(`${gw.url}/v2/models/stats`);
      expect([r.status, r.body.toString()]).toEqual([200, '{"model_stats":[]}']);
      expect((await send(`${gw.url}/readyz`)).status).toBe(200);
      expect(seen.find((s) => s.rpc === 'ModelStatistics')).toMatchObject({ 'triton-grpc-protocol-stats-key': 'v1' });
      expect(seen.find((s) => s.rpc === 'ServerReady')).not.toHaveProperty('triton-grpc-protocol-stats-key');
    } finally {
      await gw.close();
    }
  });
});

describe('/readyz', () => {
  test('503 when no backend answers', async () => {
    const gw = await gatewayFor(['--backend', '127.0.0.1:1']);
    try {
      const r = await send(`${gw.url}/readyz`);
      expect([r.status, r.body.toString()]).toEqual([503, 'no backend is ready\n']);
      expect((await send(`${gw.url}/healthz`)).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
