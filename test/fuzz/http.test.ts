// Fuzzing the whole HTTP path in-process: hostile bodies and headers sent to the gateway in front
// of the reference backend (--demo). Every error answer is `{"error": …}` JSON with a GW_ERR code;
// none is the gateway's internal error; a client's mistake is a 4xx, never a 5xx (retried by load
// balancers and clients, and counted by error-rate alerts): a 5xx is only the backend failing, an
// upstream status or an answer that cannot be rendered, after the backend was called
// (docs/differences.md "Client mistakes are 4xx"); an answer the gateway gave itself sent nothing
// upstream (the backend's inferCalls); the gateway keeps serving (a health request after each property).
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, HTTP1_WAYS } from '../support/gateway';
import { send } from '../support/http';
import { fuzz, nestedText } from './harness';
import { type Hostile, ROUTES, targets } from './hostile';

/** Codes a 5xx may carry: the backend failed (its own status, or an answer that cannot be rendered). */
const BACKEND_5XX = new Set(['GW_ERR_UPSTREAM_STATUS', 'GW_ERR_ENCODE_MALFORMED']);

// On both ways of reading HTTP/1.1: the fast path and node:http.
describe.each(HTTP1_WAYS)('%s', (_, way) => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--routes', ROUTES, '--max-input-size', String(1 << 20), ...way]);
  });
  afterAll(async () => {
    await gw?.close(2000);
  });
  afterEach(async () => {
    expect((await send(`${gw.url}/v2/health/live`)).status).toBe(200);
  });

  async function expectRefusedCleanly(h: Hostile): Promise<void> {
    const stats = gw.demoBackend!.stats;
    const before = stats.inferCalls;
    const r = await send(`${gw.url}${h.path}`, { method: 'POST', body: h.body, headers: h.headers });
    if (r.status < 400) return;
    const code = String(r.headers['x-tensorgate-error'] ?? '');
    expect(code).toMatch(/^GW_ERR_/);
    expect(code).not.toBe('GW_ERR_GATEWAY_INTERNAL');
    const parsed = JSON.parse(r.body.toString()) as { error?: unknown };
    expect(typeof parsed.error).toBe('string');
    if (r.status >= 500) {
      // Only after the backend was asked: a 5xx the gateway gave by itself is a client mistake misfiled.
      expect([r.status, code, parsed.error, BACKEND_5XX.has(code), stats.inferCalls > before]).toEqual([r.status, code, parsed.error, true, true]);
    }
    if (!code.startsWith('GW_ERR_UPSTREAM_') && code !== 'GW_ERR_ENCODE_MALFORMED') expect(stats.inferCalls).toBe(before);
  }

  describe.each(targets)('HTTP: %s', (name, arb, runs) => {
    fuzz(`${name}: an error is a 4xx {"error"} (a 5xx only when the backend failed) and nothing went upstream`, runs, arb, expectRefusedCleanly);
  });

  test('a BYTES input with batch dim 2^62 and one element: 400 before Triton', async () => {
    const before = gw.demoBackend!.stats.inferCalls;
    const tensor = Buffer.from([1, 0, 0, 0, 0x61]);
    const header = Buffer.from('{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[4611686018427387904],"parameters":{"binary_data_size":5}}]}');
    const r = await send(`${gw.url}/v2/models/identity_bytes/infer`, { body: Buffer.concat([header, tensor]), headers: { 'Inference-Header-Content-Length': header.length } });
    expect([r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([400, 'GW_ERR_DECODE_INVALID',
      { error: "input 'INPUT0': shape [4611686018427387904] has a dimension above 2147483647, which Triton cannot hold (it truncates dims to 32 bits)" }]);
    expect(gw.demoBackend!.stats.inferCalls).toBe(before);
  });

  test('V1 instances nested 10,001 deep: 400, not a stack overflow', async () => {
    const r = await send(`${gw.url}/v1/models/simple:predict`, { body: `{"instances":${nestedText(10_001, '1')}}` });
    expect([r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([400, 'GW_ERR_DECODE_V1_INVALID',
      { error: 'the body nests deeper than 10000 arrays/objects (at offset 10012)' }]);
  });

  test('a corrupt deflate body: 400, never forwarded as empty', async () => {
    const before = gw.demoBackend!.stats.inferCalls;
    const r = await send(`${gw.url}/v2/models/simple/infer`, { body: 'not deflate', headers: { 'Content-Encoding': 'deflate' } });
    expect([r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([400, 'GW_ERR_REQUEST_COMPRESSED_INVALID',
      { error: 'the deflate request body could not be decompressed: incorrect header check' }]);
    expect(gw.demoBackend!.stats.inferCalls).toBe(before);
  });
});
