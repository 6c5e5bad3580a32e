// GET /v2/health/{live,ready} through the gateway: ServerLive/ServerReady over gRPC, answered
// as Triton's HTTP does (200/400, empty bodies); an unreachable backend is the gateway's 503.
import { createServer } from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { inferenceService } from '../../proto/services';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';

async function get(url: string): Promise<{ status: number; body: string; headers: Headers }> {
  const r = await fetch(url);
  return { status: r.status, body: await r.text(), headers: r.headers };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

describe('health through the demo backend', () => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--demo']); });
  afterAll(() => gw.close());

  test.each(['live', 'ready'])('GET /v2/health/%s → 200, empty body', async (what) => {
    const r = await get(`${gw.url}/v2/health/${what}`);
    expect([r.status, r.body, r.headers.get('content-length')]).toEqual([200, '', '0']);
  });

  test('wrong method → 405, unknown path → 404, with Triton\'s bodies', async () => {
    const r = await fetch(`${gw.url}/v2/health/ready`, { method: 'POST' });
    expect([r.status, await r.text()]).toEqual([405, '{"error":"Method Not Allowed"}']);
    const n = await get(`${gw.url}/v2/health/readyz`);
    expect([n.status, n.body, n.headers.get('content-type')]).toEqual([404, '{"error":"Not Found"}', 'text/plain']);
  });
});

describe('health when the backend says no', () => {
  let peer: Server;
  let gw: RunningGateway;
  beforeAll(async () => {
    // A peer that is live but not ready, as Triton is while loading models.
    peer = new Server();
    peer.addService(inferenceService, {
      ServerLive: (_call: unknown, cb: (e: null, r: object) => void) => cb(null, { live: true }),
      ServerReady: (_call: unknown, cb: (e: null, r: object) => void) => cb(null, { ready: false }),
    });
    const port = await new Promise<number>((res, rej) => peer.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    gw = await gatewayFor(['--backend', `127.0.0.1:${port}`]);
  });
  afterAll(async () => {
    await gw.close();
    peer.forceShutdown();
  });

  test('not ready → 400 with an empty body', async () => {
    expect(await get(`${gw.url}/v2/health/ready`)).toMatchObject({ status: 400, body: '' });
    expect(await get(`${gw.url}/v2/health/live`)).toMatchObject({ status: 200, body: '' });
  });
});

describe('health when no backend answers', () => {
  test('503 with GW_ERR_UPSTREAM_UNAVAILABLE, and the gateway keeps serving', async () => {
    const gw = await gatewayFor(['--backend', `127.0.0.1:${await closedPort()}`]);
    try {
      for (let i = 0; i < 2; i++) {
        const r = await get(`${gw.url}/v2/health/ready`);
        expect(r.status).toBe(503);
        expect(r.headers.get('x-tensorgate-error')).toBe('GW_ERR_UPSTREAM_UNAVAILABLE');
        expect(JSON.parse(r.body).error).toMatch(/^upstream unavailable: /);
      }
    } finally {
      await gw.close();
    }
  });
});
