// How the gateway treats its upstream: deadlines travel as grpc-timeout and end as 504, a client
// that goes away cancels the gRPC call (RST_STREAM on h2), several backends share the load.
import { request } from 'node:http';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
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
      expect(JSON.parse(r.body.toString()).error).toBe('Deadline Exceeded: no answer from upstream within upstream.timeoutMs');
      const ok = await send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(10) });
      expect(ok.status).toBe(200);
    } finally {
      await gw.close();
    }
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
