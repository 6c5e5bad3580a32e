// Triton's model repository API on one real Triton, over its own HTTP port (the KServe V2 model
// repository extension as Triton serves it: POST /v2/repository/index, .../models/<m>/load and
// .../unload). zoo.py runs Triton with explicit model control, so load and unload take effect at
// run time; this is how tests take a model off one replica and put it back. Also what one Triton
// counts per model: its statistics and its metrics port. Every call and every wait is bounded and
// fails naming what did not happen.
import { request } from 'node:http';
import { prometheusSamples } from './prometheus';

/** Where a Triton listens (RunningTriton has these). */
export interface TritonPorts {
  readonly http: number;
  readonly metrics: number;
}

/**
 * One entry of Triton's repository index. A model in the repository that was never loaded has
 * neither version nor state; one that was unloaded is UNAVAILABLE with reason "unloaded".
 */
export interface IndexEntry {
  readonly name: string;
  readonly version?: string;
  readonly state?: string;
  readonly reason?: string;
}

const CALL_TIMEOUT_MS = 10_000;
const POLL_MS = 50;

function call(port: number, method: 'GET' | 'POST', path: string, ms: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent: false, headers: method === 'POST' ? { 'Content-Length': 0 } : {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => { body += s; });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.setTimeout(ms, () => req.destroy(new Error(`${method} ${path} on 127.0.0.1:${port}: no answer within ${ms} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** The repository index: every model in the repository, loaded or not. */
export async function repositoryIndex(t: TritonPorts): Promise<IndexEntry[]> {
  const r = await call(t.http, 'POST', '/v2/repository/index', CALL_TIMEOUT_MS);
  if (r.status !== 200) throw new Error(`repository index on 127.0.0.1:${t.http} answered ${r.status}: ${r.body}`);
  return JSON.parse(r.body) as IndexEntry[];
}

/** `model`'s entry in the index (undefined: not in the repository). */
export async function indexEntry(t: TritonPorts, model: string): Promise<IndexEntry | undefined> {
  return (await repositoryIndex(t)).find((e) => e.name === model);
}

/**
 * Loads `model` and resolves once Triton says it is READY (Triton answers the load call when the
 * load is over; a python backend model takes a second or more). Rejects with Triton's error.
 */
export async function loadModel(t: TritonPorts, model: string, ms = 120_000): Promise<void> {
  const r = await call(t.http, 'POST', `/v2/repository/models/${encodeURIComponent(model)}/load`, ms);
  if (r.status !== 200) throw new Error(`load of ${model} on 127.0.0.1:${t.http} answered ${r.status}: ${r.body}`);
  await waitForState(t, model, (e) => e?.state === 'READY', 'READY', ms);
}

/**
 * Unloads `model` and resolves once it is UNAVAILABLE. Triton answers the unload call at once
 * (state UNLOADING) and finishes after the model's in-flight inferences (~1-3 s for the zoo's).
 */
export async function unloadModel(t: TritonPorts, model: string, ms = 60_000): Promise<void> {
  const r = await call(t.http, 'POST', `/v2/repository/models/${encodeURIComponent(model)}/unload`, ms);
  if (r.status !== 200) throw new Error(`unload of ${model} on 127.0.0.1:${t.http} answered ${r.status}: ${r.body}`);
  await waitForState(t, model, (e) => e?.state === 'UNAVAILABLE', 'UNAVAILABLE', ms);
}

/** Polls the index until `model`'s entry satisfies `done`; throws naming `what` after `ms`. */
export async function waitForState(
  t: TritonPorts, model: string, done: (e: IndexEntry | undefined) => boolean, what: string, ms = 60_000,
): Promise<IndexEntry | undefined> {
  const end = Date.now() + ms;
  for (;;) {
    const e = await indexEntry(t, model);
    if (done(e)) return e;
    if (Date.now() >= end) throw new Error(`${model} on 127.0.0.1:${t.http} not ${what} after ${ms} ms (index entry: ${JSON.stringify(e)})`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** GET /v2/models/<m>/ready: true on 200 (Triton answers 400 for a model that is not ready). */
export async function modelReady(t: TritonPorts, model: string): Promise<boolean> {
  return (await call(t.http, 'GET', `/v2/models/${encodeURIComponent(model)}/ready`, CALL_TIMEOUT_MS)).status === 200;
}

/**
 * Successful inferences of `model` (all versions) Triton counted: its statistics extension,
 * GET /v2/models/<m>/stats. Which replica answered a call routed by the gateway. Undefined while the
 * model is not loaded (Triton answers 400); the count starts again at 0 when it is loaded again.
 */
export async function modelSuccesses(t: TritonPorts, model: string): Promise<number | undefined> {
  const r = await call(t.http, 'GET', `/v2/models/${encodeURIComponent(model)}/stats`, CALL_TIMEOUT_MS);
  if (r.status === 400) return undefined;
  if (r.status !== 200) throw new Error(`stats of ${model} on 127.0.0.1:${t.http} answered ${r.status}: ${r.body}`);
  const stats = JSON.parse(r.body) as { model_stats: { inference_stats: { success: { count: number } } }[] };
  return stats.model_stats.reduce((n, s) => n + s.inference_stats.success.count, 0);
}

/**
 * The summed successes of `model` on `ts` less `before` (per Triton), once their total has grown by
 * `total`: Triton counts a success when the model's execution is released, which can come a moment
 * after the client has its answer (seen: a count read right after a 200 was still 0). Waits at
 * most `ms`, then returns what it has (the caller's assertion says what is missing).
 */
export async function successesGrownBy(ts: readonly TritonPorts[], model: string, before: readonly (number | undefined)[], total: number,
  ms = 10_000): Promise<number[]> {
  const end = Date.now() + ms;
  for (;;) {
    const now = await Promise.all(ts.map((t) => modelSuccesses(t, model)));
    const grown = now.map((x, i) => (x ?? 0) - (before[i] ?? 0));
    if (grown.reduce((a, b) => a + b, 0) >= total || Date.now() > end) return grown;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/**
 * Triton's metrics port, "family{labels}" → value. Per-model families are labelled
 * {model="m",version="1"}: see modelSample(). An unloaded model's series are gone.
 */
export async function tritonMetrics(t: TritonPorts): Promise<Map<string, number>> {
  const r = await call(t.metrics, 'GET', '/metrics', CALL_TIMEOUT_MS);
  if (r.status !== 200) throw new Error(`metrics on 127.0.0.1:${t.metrics} answered ${r.status}`);
  return prometheusSamples(r.body);
}

/** `family`'s sample for one model version (undefined: Triton has no such series now). */
export function modelSample(samples: Map<string, number>, family: string, model: string, version = '1'): number | undefined {
  return samples.get(`${family}{model="${model}",version="${version}"}`);
}
