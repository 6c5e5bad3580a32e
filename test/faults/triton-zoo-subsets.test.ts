// The harness for replicas that serve different models: two real Tritons from zoo.py, each with
// its own subset of the zoo (startTritons), serve exactly that subset; a model taken off one at
// run time through Triton's repository API (explicit model control) is UNAVAILABLE and not ready,
// and loaded again it is READY and answers, over HTTP and over gRPC with NVIDIA's tritonclient; a
// model unloaded before Triton was ready (--unloaded) loads and answers; an unload
// lets the inferences in flight finish. Also the per-model queue figures Triton's metrics port
// gives (nv_inference_pending_request_count, nv_inference_queue_duration_us), which a picker can read.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { send } from '../support/http';
import { simpleBody, slowBody } from '../support/load';
import { type RunningTriton, startTritons, tritonVenv } from '../support/triton';
import {
  indexEntry, loadModel, modelReady, modelSample, modelSuccesses, repositoryIndex, successesGrownBy, tritonMetrics, unloadModel, waitForState,
} from '../support/triton-repository';
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON()); // real Triton (test/support/triton.ts)

const SCRIPT = join(__dirname, 'tritonclient_repository.py');
const PENDING = 'nv_inference_pending_request_count';
const QUEUE_US = 'nv_inference_queue_duration_us';

let a: RunningTriton;
let b: RunningTriton;

beforeAll(async () => {
  [a, b] = await startTritons([
    { models: ['simple', 'identity_fp32'] },
    { models: ['simple', 'slow'], unloaded: ['simple'] },
  ]) as [RunningTriton, RunningTriton];
  process.stdout.write(`[faults] zoo subsets: Triton A (2 models) ready in ${(a.startupMs / 1000).toFixed(1)} s, `
    + `B (2 models, one unloaded before ready) in ${(b.startupMs / 1000).toFixed(1)} s, started two at a time\n`);
}, 400_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
}, 90_000);

/** NVIDIA's tritonclient.grpc against one Triton's gRPC port (tritonclient_repository.py): its one JSON line. */
function tritonclient(t: RunningTriton, ...args: string[]): Promise<Record<string, unknown>> {
  const python = join(tritonVenv(), 'bin', 'python');
  return new Promise((resolve, reject) => {
    execFile(python, [SCRIPT, `127.0.0.1:${t.grpc}`, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`tritonclient_repository.py ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>);
    });
  });
}

function infer(t: RunningTriton, model: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return send(`http://127.0.0.1:${t.http}/v2/models/${model}/infer`, { body, headers: { 'Content-Type': 'application/json' } })
    .then((r) => ({ status: r.status, json: JSON.parse(r.body.toString()) as Record<string, unknown> }));
}

const i16 = Array.from({ length: 16 }, (_, i) => i);
/** `simple` on simpleBody() (INPUT0 = INPUT1 = 0..15): sums and differences. */
const SIMPLE_ANSWER = {
  model_name: 'simple', model_version: '1', outputs: [
    { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: i16.map((i) => 2 * i) },
    { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(0) },
  ],
};
/** tritonclient_repository.py infer-simple (INPUT0 = 0..15, INPUT1 = 1). */
const TRITONCLIENT_SIMPLE = { OUTPUT0: [i16.map((i) => i + 1)], OUTPUT1: [i16.map((i) => i - 1)] };

test('each Triton holds and serves only its subset of the zoo', async () => {
  expect(await repositoryIndex(a)).toEqual([
    { name: 'identity_fp32', version: '1', state: 'READY' },
    { name: 'simple', version: '1', state: 'READY' },
  ]);
  // B has `simple` in its repository, unloaded (--unloaded)
  expect(await repositoryIndex(b)).toEqual([
    { name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
    { name: 'slow', version: '1', state: 'READY' },
  ]);

  const notOnA = await send(`http://127.0.0.1:${a.http}/v2/models/slow`);
  expect([notOnA.status, notOnA.body.toString()]).toEqual([404, '{"error":"Request for unknown model: \'slow\' is not found"}']);
  const notOnB = await send(`http://127.0.0.1:${b.http}/v2/models/identity_fp32`);
  expect([notOnB.status, notOnB.body.toString()]).toEqual([404, '{"error":"Request for unknown model: \'identity_fp32\' is not found"}']);
  expect(await modelReady(b, 'simple')).toBe(false);
  const simpleOnB = await infer(b, 'simple', simpleBody());
  expect(simpleOnB).toEqual({ status: 404, json: { error: "Request for unknown model: 'simple' has no available versions" } });

  expect(await infer(a, 'simple', simpleBody())).toEqual({ status: 200, json: SIMPLE_ANSWER });
  // per-model series only for the models a Triton has loaded
  const metricsA = await tritonMetrics(a);
  expect(modelSample(metricsA, PENDING, 'simple')).toBe(0);
  expect(modelSample(metricsA, PENDING, 'slow')).toBeUndefined();
  expect(modelSample(await tritonMetrics(b), PENDING, 'simple')).toBeUndefined();
}, 60_000);

test('the metrics port counts requests waiting for a model (pending: queued, not executing) and their queue time', async () => {
  const before = modelSample(await tritonMetrics(b), QUEUE_US, 'slow')!;
  // `slow` runs one request at a time: of three sent together, one executes and two wait
  const answers = Array.from({ length: 3 }, () => infer(b, 'slow', slowBody(1000)));
  const end = Date.now() + 20_000;
  let pending = 0;
  while (pending !== 2) {
    if (Date.now() > end) throw new Error(`${PENDING}{model="slow"} never reached 2 (last ${pending})`);
    pending = modelSample(await tritonMetrics(b), PENDING, 'slow')!;
    await new Promise((r) => setTimeout(r, 20));
  }
  for (const r of await Promise.all(answers)) expect(r.status).toBe(200);
  const after = await tritonMetrics(b);
  expect(modelSample(after, PENDING, 'slow')).toBe(0);
  // the last of the three waited at least for its predecessor's whole 1 s run (a cumulative counter, µs)
  expect(modelSample(after, QUEUE_US, 'slow')! - before).toBeGreaterThanOrEqual(1_000_000);
}, 60_000);

test('a model unloaded at run time is UNAVAILABLE and not ready; loaded again it is READY and answers (HTTP, then gRPC with tritonclient)', async () => {
  expect(await modelSuccesses(a, 'simple')).toBeGreaterThan(0);
  await unloadModel(a, 'simple');
  expect(await modelSuccesses(a, 'simple')).toBeUndefined();
  expect(await indexEntry(a, 'simple')).toEqual({ name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' });
  expect(await modelReady(a, 'simple')).toBe(false);
  expect(await infer(a, 'simple', simpleBody())).toEqual({ status: 404, json: { error: "Request for unknown model: 'simple' has no available versions" } });
  expect(modelSample(await tritonMetrics(a), PENDING, 'simple')).toBeUndefined(); // its series are gone
  expect(await modelReady(a, 'identity_fp32')).toBe(true); // the other model is untouched

  await loadModel(a, 'simple');
  expect(await indexEntry(a, 'simple')).toEqual({ name: 'simple', version: '1', state: 'READY' });
  expect(await modelReady(a, 'simple')).toBe(true);
  expect(await modelSuccesses(a, 'simple')).toBe(0); // a new model instance: its statistics start again
  expect(await infer(a, 'simple', simpleBody())).toEqual({ status: 200, json: SIMPLE_ANSWER });
  expect(await successesGrownBy([a], 'simple', [0], 1)).toEqual([1]); // counted a moment after the answer
  expect(modelSample(await tritonMetrics(a), PENDING, 'simple')).toBe(0);

  // The same cycle over gRPC (RepositoryModelUnload / RepositoryModelLoad), a second reload of the model.
  expect(await tritonclient(a, 'unload', 'simple')).toEqual({ ready: false });
  await waitForState(a, 'simple', (e) => e?.state === 'UNAVAILABLE', 'UNAVAILABLE');
  expect(await tritonclient(a, 'infer-simple')).toEqual({ error: 'StatusCode.NOT_FOUND', message: "Request for unknown model: 'simple' has no available versions" });
  expect(await tritonclient(a, 'load', 'simple')).toEqual({ ready: true });
  expect(await tritonclient(a, 'infer-simple')).toEqual(TRITONCLIENT_SIMPLE);
  expect(await infer(a, 'simple', simpleBody())).toEqual({ status: 200, json: SIMPLE_ANSWER });
}, 180_000);

test('a model unloaded before Triton was ready (--unloaded) loads at run time and answers (gRPC, tritonclient)', async () => {
  expect(await tritonclient(b, 'load', 'simple')).toEqual({ ready: true });
  expect(await tritonclient(b, 'index')).toEqual({ models: [
    { name: 'simple', version: '1', state: 'READY' },
    { name: 'slow', version: '1', state: 'READY' },
  ] });
  expect(await tritonclient(b, 'infer-simple')).toEqual(TRITONCLIENT_SIMPLE);
  expect(await infer(b, 'simple', simpleBody())).toEqual({ status: 200, json: SIMPLE_ANSWER });
}, 180_000);

test('an unload lets the inferences in flight finish (the one executing and the one queued); loaded again the model answers', async () => {
  const answers = [infer(b, 'slow', slowBody(1500)), infer(b, 'slow', slowBody(1500))];
  // one executes, the other waits in Triton's queue: both are in flight when the unload comes
  await (async () => {
    const end = Date.now() + 20_000;
    while (modelSample(await tritonMetrics(b), PENDING, 'slow') !== 1) {
      if (Date.now() > end) throw new Error('the second slow request never queued');
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await unloadModel(b, 'slow');
  for (const r of await Promise.all(answers)) {
    expect(r).toEqual({ status: 200, json: { model_name: 'slow', model_version: '1', outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1], data: [1] }] } });
  }
  expect(await indexEntry(b, 'slow')).toEqual({ name: 'slow', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' });
  await loadModel(b, 'slow');
  expect((await infer(b, 'slow', slowBody(0))).status).toBe(200);
}, 180_000);

test('zoo.py refuses a model the zoo does not have, or an --unloaded one outside --models, naming them (exit 2)', async () => {
  const python = join(tritonVenv(), 'bin', 'python');
  const zoo = (...args: string[]): Promise<{ code: number | null; stderr: string }> => new Promise((resolve) => {
    execFile(python, [join(__dirname, '..', 'triton', 'zoo.py'), ...args], { timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stderr });
    });
  });
  const unknown = await zoo('--models', 'simple,nope');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/zoo\.py: error: --models: unknown model\(s\) nope; the zoo has simple,simple_string,identity_fp16,.*,failing\n$/);
  const outside = await zoo('--models', 'simple', '--unloaded', 'slow');
  expect(outside.code).toBe(2);
  expect(outside.stderr).toMatch(/zoo\.py: error: --unloaded: slow not in the repository \(--models\)\n$/);
}, 120_000);
