// The reference backend's per-model statistics, counted as Triton counts them (its
// ModelStatistics RPC, docs/protocol/extension_statistics.md of triton-inference-server/server):
// per request success or fail with its duration; for a successful one its queue, compute_input
// (inputs gathered, shared memory read), compute_infer (the model) and compute_output (outputs
// placed) durations; inference_count in batch rows; execution_count in model executions (one per
// request here: the demo does not batch requests together); the same three compute durations per
// batch size; last_inference in ms since the epoch.
import type { inference } from '../../proto/services';

interface Duration {
  count: number;
  ns: bigint;
}

interface ModelBook {
  lastInferenceMs: number;
  inferenceCount: number;
  executionCount: number;
  success: Duration;
  fail: Duration;
  queue: Duration;
  computeInput: Duration;
  computeInfer: Duration;
  computeOutput: Duration;
  batches: Map<number, { computeInput: Duration; computeInfer: Duration; computeOutput: Duration }>;
}

/** A request's stage boundaries (process.hrtime.bigint()). */
export interface RequestTimes {
  readonly received: bigint;
  /** The model started: the inputs are gathered. */
  readonly inferStart: bigint;
  /** The model returned its outputs. */
  readonly inferEnd: bigint;
  /** The response is built (outputs placed). */
  readonly done: bigint;
}

const zero = (): Duration => ({ count: 0, ns: 0n });
const add = (d: Duration, ns: bigint): void => {
  d.count++;
  d.ns += ns;
};

export class ModelStatisticsBook {
  readonly #models = new Map<string, ModelBook>();

  constructor(names: readonly string[]) {
    for (const n of names) {
      this.#models.set(n, {
        lastInferenceMs: 0, inferenceCount: 0, executionCount: 0, success: zero(), fail: zero(), queue: zero(),
        computeInput: zero(), computeInfer: zero(), computeOutput: zero(), batches: new Map(),
      });
    }
  }

  succeeded(model: string, batch: number, t: RequestTimes): void {
    const m = this.#models.get(model);
    if (m === undefined) return;
    m.lastInferenceMs = Date.now();
    m.inferenceCount += batch;
    m.executionCount++;
    add(m.success, t.done - t.received);
    add(m.queue, 0n); // no scheduler queue: a request runs as it arrives
    add(m.computeInput, t.inferStart - t.received);
    add(m.computeInfer, t.inferEnd - t.inferStart);
    add(m.computeOutput, t.done - t.inferEnd);
    let b = m.batches.get(batch);
    if (b === undefined) m.batches.set(batch, b = { computeInput: zero(), computeInfer: zero(), computeOutput: zero() });
    add(b.computeInput, t.inferStart - t.received);
    add(b.computeInfer, t.inferEnd - t.inferStart);
    add(b.computeOutput, t.done - t.inferEnd);
  }

  failed(model: string, received: bigint): void {
    const m = this.#models.get(model);
    if (m !== undefined) add(m.fail, process.hrtime.bigint() - received);
  }

  /** Version "1" of every model (`names` empty), or of the ones named. */
  statistics(names: readonly string[], version: string): inference.IModelStatistics[] {
    const d = (x: Duration): inference.IStatisticDuration => ({ count: x.count, ns: x.ns.toString() as unknown as number });
    return (names.length === 0 ? [...this.#models.keys()] : names).map((name) => {
      const m = this.#models.get(name)!;
      return {
        name,
        version,
        last_inference: m.lastInferenceMs,
        inference_count: m.inferenceCount,
        execution_count: m.executionCount,
        inference_stats: {
          success: d(m.success), fail: d(m.fail), queue: d(m.queue), compute_input: d(m.computeInput),
          compute_infer: d(m.computeInfer), compute_output: d(m.computeOutput), cache_hit: d(zero()), cache_miss: d(zero()),
        },
        batch_stats: [...m.batches].sort(([a], [b]) => a - b).map(([size, b]) => ({
          batch_size: size, compute_input: d(b.computeInput), compute_infer: d(b.computeInfer), compute_output: d(b.computeOutput),
        })),
        memory_usage: [],
      };
    });
  }
}
