// A deadline a REST client asks for with grpc-timeout, against real Triton (docs/production.md
// "Deadlines and drain"): it reaches Triton's gRPC frontend as the call's grpc-timeout, and the
// client gets 504 at that deadline — not at upstream.timeoutMs, nor when the model finishes.
// Triton's own HTTP frontend ignores the header (docs/differences.md).
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';

/** PyTriton's `slow` sleeps `delay_ms` and cannot be interrupted: its one instance stays busy that long. */
const DELAY_MS = 1500;
const body = JSON.stringify({ parameters: { delay_ms: DELAY_MS }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] });

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

test('grpc-timeout: 300m gives 504 GW_ERR_UPSTREAM_DEADLINE at about 300 ms; Triton\'s HTTP frontend answers the same request 200', async () => {
  const t0 = performance.now();
  const r = await send(`${gw.url}/v2/models/slow/infer`, { body, headers: { 'grpc-timeout': '300m' } });
  const took = performance.now() - t0;
  expect([r.status, r.headers['x-tensorgate-error']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE']);
  expect(JSON.parse(r.body.toString())).toEqual({ error: 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for' });
  expect(took).toBeGreaterThanOrEqual(295);
  expect(took).toBeLessThan(DELAY_MS - 200);

  // Triton over HTTP: no deadline from the header; the answer comes when the model is done
  // (after the cancelled call's execution, which the instance finishes first).
  const direct = await send(`http://${process.env.TRITON_HTTP!}/v2/models/slow/infer`, { body, headers: { 'grpc-timeout': '300m' } });
  expect(direct.status).toBe(200);
}, 30_000);
