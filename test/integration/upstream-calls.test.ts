// How the gateway treats its upstream: deadlines (upstream.timeoutMs, or a shorter grpc-timeout
// the client asks for) travel as grpc-timeout and end as 504 with the call cancelled, a client
// that goes away cancels the gRPC call (RST_STREAM on h2), several backends share the load.
import { request } from 'node:http';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { nextEvent } from '../support/wait';

const slowBody = (delayMs: number): string => JSON.stringify({
  parameters: { delay_ms: delayMs },
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }],
});

describe.each(['h2', 'grpc-js'])('upstream calls over %s', (transport) => {
  test('the deadline ends as 504 and the gateway keeps serving', async () => {
    const gw = await gatewayFor(['--demo', '--transport', transport, '--upstream-timeout-ms', '300']);
    try {
      const t0 = Date.now();
      const r = await send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(3000) });
      expect(Date.now() - t0).toBeLessThan(2500);
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE']);
      expect(JSON.parse(r.body.toString()).error).toBe('Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for');
      const ok = await send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(10) });
      expect(ok.status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  describe('a deadline the client asks for (grpc-timeout)', () => {
    let gw: RunningGateway;
    beforeAll(async () => {
      gw = await gatewayFor(['--demo', '--transport', transport, '--upstream-timeout-ms', '2000']);
    });
    afterAll(async () => {
      await gw.close();
    });

    /** Sends a slow request asking for `asked`: the answer, how long it took, and the backend's cancellation event. */
    async function askFor(asked: string, delayMs: number, body?: { body: Buffer; headers: Record<string, number> }) {
      const { events } = gw.demoBackend!;
      const cancelled = nextEvent(events, 'slow-cancelled', 10_000);
      cancelled.catch(() => undefined);
      const t0 = performance.now();
      const r = await send(`${gw.url}/v2/models/slow/infer`, {
        body: body?.body ?? slowBody(delayMs), headers: { 'grpc-timeout': asked, ...body?.headers },
      });
      return { r, took: performance.now() - t0, cancelled };
    }

    test('200m: 504 GW_ERR_UPSTREAM_DEADLINE with {"error"} after about 200 ms, and the backend sees the call cancelled', async () => {
      const { r, took, cancelled } = await askFor('200m', 10_000);
      expect([r.status, r.headers['x-tensorgate-error'], r.headers['content-type']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE', 'application/json']);
      expect(JSON.parse(r.body.toString())).toEqual({ error: 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for' });
      expect(took).toBeGreaterThanOrEqual(195);
      expect(took).toBeLessThan(1500); // upstream.timeoutMs is 2000 here
      await cancelled;
    });

    test('the same over the binary extension (on h2 the call opens while the body arrives)', async () => {
      const { r, took, cancelled } = await askFor('200000u', 10_000, binaryBody({
        parameters: { delay_ms: 10_000 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } }],
      }, Buffer.alloc(4)));
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE']);
      expect(took).toBeGreaterThanOrEqual(195);
      expect(took).toBeLessThan(1500);
      await cancelled;
    });

    test('asking for more than upstream.timeoutMs is capped by it', async () => {
      const { r, took, cancelled } = await askFor('1M', 10_000);
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE']);
      expect(took).toBeGreaterThanOrEqual(1995);
      expect(took).toBeLessThan(4000);
      await cancelled;
    });

    test('an answer within the asked deadline is a normal 200', async () => {
      const { r } = await askFor('5S', 20);
      expect(r.status).toBe(200);
    });

    test('a grpc-timeout that is not one is a 400 before any upstream call; other routes ignore the header', async () => {
      const { stats } = gw.demoBackend!;
      const calls = stats.inferCalls;
      const r = await send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(10), headers: { 'grpc-timeout': '200ms' } });
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([400, 'GW_ERR_REQUEST_HEADER_INVALID']);
      expect(JSON.parse(r.body.toString())).toEqual({
        error: "Unable to parse 'grpc-timeout': '200ms' is not a gRPC timeout (1 to 8 digits and a unit H, M, S, m, u or n)",
      });
      expect(stats.inferCalls).toBe(calls);
      expect((await send(`${gw.url}/v2/health/ready`, { headers: { 'grpc-timeout': '200ms' } })).status).toBe(200);
    });
  });

  test('a client that goes away cancels the upstream call', async () => {
    const gw: RunningGateway = await gatewayFor(['--demo', '--transport', transport]);
    try {
      const { stats, events } = gw.demoBackend!;
      const before = stats.slowCancellations;
      const started = nextEvent(events, 'slow-started');
      const req = request(`${gw.url}/v2/models/slow/infer`, { method: 'POST' });
      req.on('error', () => { /* we close it ourselves */ });
      req.end(slowBody(5000));
      await started;
      const cancelled = nextEvent(events, 'slow-cancelled');
      req.destroy();
      await cancelled;
      expect(stats.slowCancellations).toBe(before + 1);
    } finally {
      await gw.close();
    }
  });
});

test('several backends are used round robin, per request', async () => {
  const a: ReferenceBackend = await startReferenceBackend();
  const b: ReferenceBackend = await startReferenceBackend();
  const gw = await gatewayFor(['--backend', a.address, '--backend', b.address]);
  try {
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [7] }] });
    for (let i = 0; i < 6; i++) expect((await send(`${gw.url}/v2/models/identity_uint8/infer`, { body })).status).toBe(200);
    expect([a.stats.inferCalls, b.stats.inferCalls]).toEqual([3, 3]);
  } finally {
    await gw.close();
    await a.close();
    await b.close();
  }
});
