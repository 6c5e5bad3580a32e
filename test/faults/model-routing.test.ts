// Model-aware routing against three real Tritons that serve different parts of the zoo
// (docs/production.md, "Pools and the model table"): each model's calls reach only the replicas
// that have it ready; a model loaded on a replica at run time gets calls within one
// upstream.modelRefreshMs, and one unloaded gets none after it; the model table sends a model to
// its pool, for REST and for the gRPC pass-through (NVIDIA's tritonclient); a 90/10 split lands
// within ±3 % over 2,000 requests, and a header pins a request to a pool; a mirror pool gets its
// share of copies while the client's answers stay byte-identical, and a mirror that never answers
// costs the client nothing (its copies are dropped past their bound). Which replica answered is
// Triton's own count (its statistics), not the gateway's.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { FaultProxy } from '../support/fault-proxy';
import { prometheusSamples } from '../support/prometheus';
import { simpleBody } from '../support/load';
import { type RunningTriton, startTritons, tritonVenv } from '../support/triton';
import { loadModel, modelSuccesses, successesGrownBy, unloadModel } from '../support/triton-repository';
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON()); // real Triton (test/support/triton.ts)

const REFRESH_MS = 500;

let a: RunningTriton;
let b: RunningTriton;
let c: RunningTriton;

beforeAll(async () => {
  // A and C have identity_fp32; B has it in its repository, not loaded. identity_uint8 is only on B.
  [a, b, c] = await startTritons([
    { models: ['simple', 'identity_fp32'] },
    { models: ['simple', 'identity_uint8', 'identity_fp32'], unloaded: ['identity_fp32'] },
    { models: ['simple', 'identity_fp32'] },
  ]) as [RunningTriton, RunningTriton, RunningTriton];
}, 600_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
}, 90_000);

const grpcOf = (t: RunningTriton): string => `127.0.0.1:${t.grpc}`;

const BODIES: Record<string, string> = {
  simple: simpleBody(),
  identity_fp32: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }),
  identity_uint8: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 4], data: [1, 2, 3, 4] }] }),
};

/** n inferences of `model` through the gateway, `concurrency` at a time: their statuses. */
async function infer(gw: RunningGateway, model: string, n: number, concurrency = 4, headers: Record<string, string> = {}): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      next++;
      const r = await send(`${gw.url}/v2/models/${model}/infer`, { body: BODIES[model]!, headers: { 'Content-Type': 'application/json', ...headers } });
      statuses.push(r.status);
    }
  }));
  return statuses;
}

/** Successful inferences of `model` on each Triton, as Triton counts them (undefined: not loaded there). */
async function counts(model: string, ts: RunningTriton[] = [a, b, c]): Promise<(number | undefined)[]> {
  return Promise.all(ts.map((t) => modelSuccesses(t, model)));
}

/** Each Triton's successes of `model` since `before`, once `total` more were counted (Triton counts late). */
const grown = (model: string, before: (number | undefined)[], total: number, ts: RunningTriton[] = [a, b, c]): Promise<number[]> =>
  successesGrownBy(ts, model, before, total);

test('each model is answered only by the replicas that have it ready; a model loaded at run time gets calls within one refresh, an unloaded one none after it', async () => {
  const gw = await gatewayFor(['--backend', grpcOf(a), '--backend', grpcOf(b), '--backend', grpcOf(c), '--model-refresh-ms', String(REFRESH_MS), '--api-disabled', 'none']);
  try {
    await new Promise((r) => setTimeout(r, 2 * REFRESH_MS)); // every index read once
    // identity_uint8 is on B only: round robin alone would send two calls in three elsewhere (404).
    let before = await counts('identity_uint8', [b]);
    expect(new Set(await infer(gw, 'identity_uint8', 30))).toEqual(new Set([200]));
    expect(await grown('identity_uint8', before, 30, [b])).toEqual([30]);
    // identity_fp32 is on A and C (unloaded on B): every call answered, none on B, both used.
    before = await counts('identity_fp32');
    expect(new Set(await infer(gw, 'identity_fp32', 30))).toEqual(new Set([200]));
    let d = await grown('identity_fp32', before, 30);
    expect(d[1]).toBe(0);
    expect(d[0]! + d[2]!).toBe(30);
    expect(Math.min(d[0]!, d[2]!)).toBeGreaterThan(0);

    // Loaded on B at run time: B gets calls within one refresh interval (plus the index read's own time).
    await loadModel(b, 'identity_fp32');
    const loadedAt = Date.now();
    let reachedB = Infinity;
    while (Date.now() - loadedAt < 10 * REFRESH_MS) {
      const was = (await counts('identity_fp32', [b]))[0] ?? 0;
      expect(await infer(gw, 'identity_fp32', 3, 1)).toEqual([200, 200, 200]);
      if (((await counts('identity_fp32', [b]))[0] ?? 0) > was) {
        reachedB = Date.now() - loadedAt;
        break;
      }
    }
    process.stdout.write(`[faults] model routing: identity_fp32 loaded on B at run time; first call there ${reachedB} ms later (refresh ${REFRESH_MS} ms)\n`);
    expect(reachedB).toBeLessThan(REFRESH_MS + 1500);

    // Unloaded from A: after one interval, A gets no more calls, and none fails.
    await unloadModel(a, 'identity_fp32');
    await new Promise((r) => setTimeout(r, REFRESH_MS + 500));
    before = await counts('identity_fp32');
    expect(new Set(await infer(gw, 'identity_fp32', 30))).toEqual(new Set([200]));
    d = await grown('identity_fp32', before, 30);
    expect(d[0]).toBe(0);
    expect(d[1]! + d[2]!).toBe(30);

    // Through the gateway, the repository index is the union: identity_fp32 READY (B and C have it).
    const index = JSON.parse((await send(`${gw.url}/v2/repository/index`, { body: '{}', headers: { 'Content-Type': 'application/json' } })).body.toString()) as { name: string; state: string }[];
    expect(index.filter((m) => m.name === 'identity_fp32' || m.name === 'identity_uint8')).toEqual([
      { name: 'identity_fp32', version: '1', state: 'READY' },
      { name: 'identity_uint8', version: '1', state: 'READY' },
    ]);
    // /ready of a model one replica has is 200 (asked of that replica).
    expect((await send(`${gw.url}/v2/models/identity_uint8/ready`)).status).toBe(200);
  } finally {
    await gw.close();
    await loadModel(a, 'identity_fp32').catch(() => undefined);
  }
}, 180_000);

/** NVIDIA's tritonclient.grpc: ModelInfer of `simple` through `address` (tritonclient_repository.py infer-simple). */
function tritonclientSimple(address: string): Promise<Record<string, unknown>> {
  const python = join(tritonVenv(), 'bin', 'python');
  return new Promise((resolve, reject) => {
    execFile(python, [join(__dirname, 'tritonclient_repository.py'), address, 'infer-simple'], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`tritonclient_repository.py infer-simple: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>);
    });
  });
}

test('the model table sends a model to its pool, over REST and through the gRPC pass-through; other models stay in the default pool', async () => {
  const gw = await gatewayFor(['--backend', grpcOf(a), '--backend', grpcOf(b), '--pools', `{side: {backends: ["${grpcOf(c)}"]}}`,
    '--models', '[{model: simple, pool: side}]', '--model-refresh-ms', String(REFRESH_MS)]);
  try {
    let before = await counts('simple');
    expect(new Set(await infer(gw, 'simple', 20))).toEqual(new Set([200]));
    expect(await grown('simple', before, 20)).toEqual([0, 0, 20]);
    before = await counts('simple');
    const viaGrpc = await tritonclientSimple(gw.url.replace('http://', ''));
    expect(viaGrpc.error).toBeUndefined();
    expect(await grown('simple', before, 1)).toEqual([0, 0, 1]);
    // identity_fp32 is on A and C, but no entry names it: the default pool (A, B) only.
    before = await counts('identity_fp32');
    expect(new Set(await infer(gw, 'identity_fp32', 10))).toEqual(new Set([200]));
    expect((await grown('identity_fp32', before, 10))[2]).toBe(0);
  } finally {
    await gw.close();
  }
}, 120_000);

test('a 90/10 split lands within ±3 % over 2,000 requests; a header pins a request to a pool of the entry', async () => {
  const gw = await gatewayFor(['--backend', grpcOf(a), '--pools', `{side: {backends: ["${grpcOf(c)}"]}}`,
    '--models', '[{model: simple, split: {default: 90, side: 10}, header: x-pool}]']);
  try {
    let before = await counts('simple', [a, c]);
    const statuses = await infer(gw, 'simple', 2000, 8);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const [onA, onC] = await grown('simple', before, 2000, [a, c]) as [number, number];
    process.stdout.write(`[faults] model routing: split 90/10 over 2000 requests: default ${onA}, side ${onC} (${(100 * onC / 2000).toFixed(1)} %)\n`);
    expect(onA + onC).toBe(2000);
    expect(Math.abs(onC / 2000 - 0.1)).toBeLessThanOrEqual(0.03);
    before = await counts('simple', [a, c]);
    expect(await infer(gw, 'simple', 10, 2, { 'x-pool': 'side' })).toEqual(Array(10).fill(200));
    expect(await grown('simple', before, 10, [a, c])).toEqual([0, 10]);
  } finally {
    await gw.close();
  }
}, 300_000);

const FP32 = Buffer.from(new Float32Array(64 * 1024).map((_, i) => i / 7).buffer); // 256 KiB: cut through
const binaryFp32 = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, FP32.length / 4], parameters: { binary_data_size: FP32.length } }],
  outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }, FP32);

/** The answers of `n` calls, one at a time (their bodies, and each call's latency). */
async function answers(gw: RunningGateway, n: number): Promise<{ bodies: string[]; ms: number[] }> {
  const bodies: string[] = [];
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const json = await send(`${gw.url}/v2/models/simple/infer`, { body: BODIES.simple!, headers: { 'Content-Type': 'application/json' } });
    const bin = await send(`${gw.url}/v2/models/identity_fp32/infer`, { body: binaryFp32.body, headers: binaryFp32.headers });
    ms.push(performance.now() - t0);
    expect([json.status, bin.status]).toEqual([200, 200]);
    bodies.push(json.body.toString('latin1'), bin.body.toString('latin1'));
  }
  return { bodies, ms };
}

const p50 = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

test('a mirror pool gets its share of copies (REST whole and cut through, gRPC); the client\'s answers are byte-identical; a mirror that never answers costs nothing', async () => {
  const plain = await gatewayFor(['--backend', grpcOf(a)]);
  const mirrored = await gatewayFor(['--backend', grpcOf(a), '--pools', `{shadow: {backends: ["${grpcOf(c)}"]}}`, '--models',
    '[{model: simple, pool: default, mirror: {pool: shadow, percent: 100}}, {model: identity_fp32, pool: default, mirror: {pool: shadow, percent: 50}}]']);
  const hole = await FaultProxy.start({ port: c.grpc });
  hole.setMode('black-hole');
  const stalled = await gatewayFor(['--backend', grpcOf(a), '--pools', `{shadow: {backends: ["${hole.address}"]}}`, '--mirror-max-in-flight', '2',
    '--health-check-interval-ms', '60000', '--models', '[{model: simple, pool: default, mirror: {pool: shadow, percent: 100}}]']);
  try {
    const before = { simple: await counts('simple', [a, c]), fp32: await counts('identity_fp32', [a, c]) };
    const without = await answers(plain, 20);
    const withMirror = await answers(mirrored, 20);
    expect(withMirror.bodies).toEqual(without.bodies); // byte for byte
    // 20 + 20 simple on A (both gateways), 20 copies on C; identity_fp32: 40 on A, 10 copies (50 %) on C.
    expect(await grown('simple', before.simple, 60, [a, c])).toEqual([40, 20]);
    expect(await grown('identity_fp32', before.fp32, 50, [a, c])).toEqual([40, 10]);
    // The gRPC pass-through mirrors too (NVIDIA's tritonclient through the gateway).
    const beforeGrpc = await counts('simple', [a, c]);
    expect((await tritonclientSimple(mirrored.url.replace('http://', ''))).error).toBeUndefined();
    expect(await grown('simple', beforeGrpc, 2, [a, c])).toEqual([1, 1]);
    const m = prometheusSamples(await (await fetch(mirrored.metricsUrl!)).text());
    expect([m.get('tensorgate_upstream_mirrored_total{pool="shadow",outcome="answered"}'), m.get('tensorgate_upstream_mirrored_total{pool="shadow",outcome="dropped"}')])
      .toEqual([31, undefined]);

    // A mirror pool that accepts and never answers: the client's calls are as fast as without a
    // mirror; two copies wait there (the bound), the rest are dropped and counted.
    const t0 = performance.now();
    const statuses = await infer(stalled, 'simple', 20, 1);
    const elapsed = performance.now() - t0;
    expect(statuses).toEqual(Array(20).fill(200));
    const s = prometheusSamples(await (await fetch(stalled.metricsUrl!)).text());
    expect(s.get('tensorgate_upstream_mirrored_total{pool="shadow",outcome="dropped"}')).toBe(18);
    process.stdout.write(`[faults] mirroring: p50 of a JSON + a 256 KiB binary call, one at a time: ${p50(without.ms).toFixed(1)} ms without a mirror, `
      + `${p50(withMirror.ms).toFixed(1)} ms with one; 20 calls with a black-holed mirror pool took ${elapsed.toFixed(0)} ms, 18 copies dropped\n`);
  } finally {
    await Promise.all([plain.close(), mirrored.close(), stalled.close()]);
    await hole.close();
  }
}, 180_000);
