// Per-key limits (gateway/auth/limits.ts) in front of a real Triton, seen by clients we did not
// write: curl over a key's rate gets 429 with Retry-After and the gateway's {"error"}, before the
// body is read; a key at its concurrency gets 429 GW_ERR_AUTH_CONCURRENCY_LIMITED, and its place
// comes back after curl gave up on a request (--max-time); tritonclient.grpc and grpcio get
// RESOURCE_EXHAUSTED over the rate and past the cap, and the cap's places come back after calls the
// client cancelled (limits_check.py). A fault proxy between the gateway and Triton counts the calls
// that reach Triton: exactly the admitted ones, none for a refusal.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { curl, type CurlAnswer } from '../support/curl';
import { FaultProxy, FRAME } from '../support/fault-proxy';
import { gatewayFor } from '../support/gateway';
import { prometheusSamples } from '../support/prometheus';
import { tritonVenv } from '../support/triton';
import { CURL, needs } from '../support/tools';

const TOKENS = {
  'rest-rated': 'rest_rated_0123456789abcdef',
  'rest-capped': 'rest_capped_0123456789abcdef',
  rated: 'grpc_rated_0123456789abcdef',
  capped: 'grpc_capped_0123456789abcdef',
};
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const SIMPLE = '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}';
const slow = (ms: number): string => `{"parameters":{"delay_ms":${ms}},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[0,1,2,3]}]}`;

let proxy: FaultProxy;
let gw: RunningGateway;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tg-limits-'));
  const keys = join(dir, 'keys.yaml');
  writeFileSync(keys, [
    'keys:',
    `  - { id: rest-rated, token: "${sha(TOKENS['rest-rated'])}", groups: "*", limits: { rate: 0.1, burst: 2 } }`,
    `  - { id: rest-capped, token: "${sha(TOKENS['rest-capped'])}", groups: "*", limits: { concurrency: 1 } }`,
    `  - { id: rated, token: "${sha(TOKENS.rated)}", groups: "*", limits: { rate: 0.1, burst: 1 } }`,
    `  - { id: capped, token: "${sha(TOKENS.capped)}", groups: "*", limits: { concurrency: 2 } }`,
  ].join('\n'));
  proxy = await FaultProxy.start({ port: Number(process.env.TRITON_GRPC!.split(':')[1]) });
  // No health checks once the backend is ready: every call the proxy sees is a request's.
  // Every HEADERS frame to Triton counts as a call (upstreamCalls): the gateway's own calls are
  // kept out of the window, health checks by a long interval, repository-index reads (model-aware
  // routing) by turning them off.
  gw = await gatewayFor(['--backend', proxy.address, '--auth', '--auth-keys-file', keys, '--health-check-interval-ms', '600000', '--model-refresh-ms', '0']);
});
afterAll(async () => {
  await gw?.close(2000);
  await proxy?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Calls that reached Triton: the streams the gateway opened (one HEADERS frame each). */
const upstreamCalls = (): number => proxy.framesOf(FRAME.HEADERS, 'up').length;

/** curl (HTTP/1.1) with a key's token. */
const keyed = (key: keyof typeof TOKENS, path: string, body: string, extra: string[] = []): Promise<CurlAnswer> =>
  curl('--http1.1', '-H', `Authorization: Bearer ${TOKENS[key]}`, '-H', 'Content-Type: application/json', '--data-binary', body, ...extra, `${gw.url}${path}`);

async function limited(name: string): Promise<number> {
  return prometheusSamples(await (await fetch(gw.metricsUrl!)).text()).get(name) ?? 0;
}

needs(CURL()).test('over its rate, curl gets 429 with Retry-After and the code, before the body is read; nothing reaches Triton', async () => {
  expect((await keyed('rest-rated', '/v2/models/simple/infer', SIMPLE)).status).toBe(200);
  expect((await keyed('rest-rated', '/v2/models/simple/infer', SIMPLE)).status).toBe(200);
  const before = upstreamCalls();
  for (let i = 0; i < 3; i++) {
    const r = await keyed('rest-rated', '/v2/models/simple/infer', SIMPLE);
    expect(r.status).toBe(429);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_AUTH_RATE_LIMITED');
    // One request per 10 s: the bucket has one again within 10 s, less the time since it emptied.
    const after = Number(r.headers['retry-after']);
    expect(after).toBeGreaterThanOrEqual(5);
    expect(after).toBeLessThanOrEqual(10);
    expect(JSON.parse(r.body.toString())).toEqual({ error: `'rest-rated' is over its rate of 0.1 requests per second (burst 2, the key's limits in auth.keysFile); retry after ${after} s` });
  }
  // A 64 MiB body declared and none sent: the 429 comes at once.
  const head = await new Promise<string>((resolve, reject) => {
    const s = connect(gw.port, '127.0.0.1');
    let got = '';
    s.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', reject);
    s.write(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKENS['rest-rated']}\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n`);
  });
  expect(head).toMatch(/^HTTP\/1\.1 429 /);
  expect(head).toMatch(/\r\nRetry-After: \d+\r\n/i);
  expect(upstreamCalls()).toBe(before);
  expect(await limited('tensorgate_auth_limited_total{limit="key:rest-rated",exceeded="rate"}')).toBe(4);
}, 120_000);

needs(CURL()).test('at its concurrency, curl gets 429 GW_ERR_AUTH_CONCURRENCY_LIMITED; the place comes back after curl gave up, and only once', async () => {
  for (let round = 0; round < 3; round++) {
    // curl leaves after 1 s of a 3 s inference: the gateway cancels the call and gives the place back.
    const gaveUp = await keyed('rest-capped', '/v2/models/slow/infer', slow(3000), ['--max-time', '1']);
    expect(gaveUp.exit).toBe(28);
    let r: CurlAnswer;
    const until = Date.now() + 5000;
    do r = await keyed('rest-capped', '/v2/models/simple/infer', SIMPLE);
    while (r.status === 429 && Date.now() < until);
    expect(r.status).toBe(200);
  }
  const inFlight = keyed('rest-capped', '/v2/models/slow/infer', slow(1500));
  await new Promise((r) => setTimeout(r, 500));
  const before = upstreamCalls();
  const refused = await keyed('rest-capped', '/v2/models/simple/infer', SIMPLE);
  expect([refused.status, refused.headers['x-tensorgate-error'], refused.headers['retry-after']]).toEqual([429, 'GW_ERR_AUTH_CONCURRENCY_LIMITED', '1']);
  expect(JSON.parse(refused.body.toString())).toEqual({ error: '\'rest-capped\' already has 1 request in flight, its concurrency limit (the key\'s limits in auth.keysFile); retry after 1 s' });
  expect(upstreamCalls()).toBe(before);
  expect((await inFlight).status).toBe(200);
  expect(await limited('tensorgate_auth_limited_total{limit="key:rest-capped",exceeded="concurrency"}')).toBeGreaterThanOrEqual(1);
}, 120_000);

test('tritonclient.grpc and grpcio: RESOURCE_EXHAUSTED over the rate and past the cap, places back after cancelled calls; Triton sees the admitted calls only', async () => {
  const before = upstreamCalls();
  const python = join(tritonVenv(), 'bin', 'python');
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [join(__dirname, 'limits_check.py'), '--gateway', `127.0.0.1:${gw.port}`, '--rated', TOKENS.rated, '--capped', TOKENS.capped],
      { timeout: 150_000 }, (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
      });
  });
  if (run.code !== 0) throw new Error(`limits_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  const summary = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; checks?: number; admitted?: number };
  expect(summary).toMatchObject({ ok: true, checks: 14, admitted: 15 });
  expect(upstreamCalls() - before).toBe(summary.admitted);
  expect(await limited('tensorgate_auth_limited_total{limit="key:rated",exceeded="rate"}')).toBe(2);
  expect(await limited('tensorgate_auth_limited_total{limit="key:capped",exceeded="concurrency"}')).toBeGreaterThanOrEqual(5);
}, 180_000);
