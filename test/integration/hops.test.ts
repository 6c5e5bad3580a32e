// Every request form records its hops (issue 11 item 5): one request per form through the gateway
// (cut-through on, the default) against the reference backend; each hop that happened has a
// positive duration, lies within the request, and together they cover at most the request's
// total (cut-through hops overlap on purpose — ingress_read with upstream_send — so "add up" is
// the time they cover, not the sum of their durations).
import type { RunningGateway } from '../../gateway/gateway';
import { type Hop, HOPS } from '../../gateway/infer/ledger';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { RecordTap } from '../support/records';

const ROUTES = JSON.stringify([{ path: '/api/stats', model: 'image_stats', inputs: { IMAGE: { from: '/image', decode: 'base64' } }, response: 'v2' }]);
const ALL: readonly Hop[] = HOPS;

const int32 = (n: number): Buffer => Buffer.alloc(n * 4, 1);
const FORMS: readonly (readonly [string, string, { headers?: Record<string, string | number>; body: Buffer | string }, readonly Hop[]])[] = [
  ['V2 JSON', '/v2/models/simple/infer', {
    body: JSON.stringify({ inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(2) },
    ] }),
  }, ALL],
  ['binary extension', '/v2/models/simple/infer', binaryBody({ inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
  ] }, int32(16), int32(16)), ALL],
  ['raw', '/v2/models/identity_uint8/infer', { headers: { 'Inference-Header-Content-Length': 0 }, body: Buffer.alloc(4096, 7) }, ALL],
  ['base64', '/v2/models/identity_uint8/infer', {
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 6], data: { b64: Buffer.from('abcdef').toString('base64') } }] }),
  }, ALL],
  ['V1 predict', '/v1/models/identity_fp32:predict', { body: JSON.stringify({ instances: [[1, 2, 3]] }) }, ALL],
  ['generate', '/v2/models/identity_int32/generate', { body: '{"INPUT0":[4,5]}' }, ALL],
  ['declarative', '/api/stats', { body: JSON.stringify({ image: Buffer.alloc(300, 3).toString('base64') }) }, ALL],
];

/** Nanoseconds covered by the union of the hops' intervals. */
function covered(r: RequestRecord): bigint {
  const spans = HOPS.map((h) => r.ledger!.hops[h]).filter((h) => h.startNs !== 0n && h.endNs !== 0n)
    .map((h) => [h.startNs, h.endNs] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  let total = 0n;
  let end = 0n;
  for (const [s, e] of spans) {
    const from = s > end ? s : end;
    if (e > from) total += e - from;
    if (e > end) end = e;
  }
  return total;
}

describe('hops of every request form', () => {
  let gw: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--routes', ROUTES]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
  });

  test.each(FORMS)('%s', async (_name, path, request, hops) => {
    const mark = tap.mark();
    const r = await send(`${gw.url}${path}`, { method: 'POST', headers: request.headers, body: request.body });
    expect(r.status).toBe(200);
    const rec = await tap.after(mark);
    expect(rec.ledger).toBeDefined();
    for (const hop of hops) {
      const h = rec.ledger!.hops[hop];
      expect({ hop, started: h.startNs > 0n, positive: h.endNs > h.startNs }).toEqual({ hop, started: true, positive: true });
      expect(h.startNs >= rec.startNs && h.endNs <= rec.endNs).toBe(true);
    }
    expect(covered(rec) <= rec.endNs - rec.startNs).toBe(true);
    // Server-Timing (infer answers) names the upstream hops with their real durations.
    const timing = r.headers['server-timing'];
    if (typeof timing === 'string') {
      for (const hop of ['upstream_send', 'triton'] as const) expect(timing).toMatch(new RegExp(`${hop};dur=(?!0\\.000)`));
    }
  });
});
