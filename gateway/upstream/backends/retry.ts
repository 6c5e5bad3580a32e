// Safe retries (docs/production.md): a call is sent again, on another ready backend, only when no byte
// of it reached Triton — the connection was refused, the stream was refused (GOAWAY or
// REFUSED_STREAM before it was accepted), or the backend was gone before the call started —
// at most upstream.retries times, never for a sequence request (Triton keeps sequence state per
// server: a sequence's calls all go to the backend its key picks) and never past the request's
// deadline. Every attempt's outcome feeds the backend set's passive outlier detection, and an
// answer that the call's model is unknown (or not ready) on the backend takes the model off that
// backend (model-aware routing); such a call, which Triton did not run, goes to another backend
// that has the model, within the same limits.
import type { Backend } from './backend';
import type { BackendSet } from './backend-set';
import type { ModelKey } from './pools';
import { backendAnswered, failsBackend, lacksModel, wasNotSent } from '../status';

export interface RetryOptions {
  /** Absolute deadline (Date.now() milliseconds): no retry starts after it. */
  readonly deadline: number;
  /**
   * A sequence request (`sequence_id` set): its key (model and sequence_id), which picks its
   * backend (BackendSet.pick's rendezvous hashing); never retried.
   */
  readonly affinity?: string;
  /** Told of each retry (the request's record counts them). */
  readonly retried?: () => void;
  /** The model the call names: it picks the pool and the backends that have the model (BackendSet.pick). */
  readonly model?: ModelKey;
}

/** Reports one attempt's failure to the set; true when the call may go to `set.pick(backend)` next. */
export function mayRetry(set: BackendSet, backend: Backend, err: unknown, attempt: number, o: RetryOptions): boolean {
  const within = attempt < set.retries && o.affinity === undefined && Date.now() < o.deadline;
  if (o.model !== undefined && lacksModel(err)) {
    // The server answered, about the model: no fault of the backend's.
    set.succeeded(backend);
    set.lacks(backend, o.model);
    return within && set.anotherHas(o.model, backend);
  }
  if (failsBackend(err)) set.failed(backend);
  else if (backendAnswered(err)) set.succeeded(backend);
  return wasNotSent(err) && within;
}

/** Counts a retry from `from` (metric, log event, the request's record). */
export function countRetry(set: BackendSet, from: Backend, err: unknown, o: RetryOptions): void {
  set.retried(from, (err as Error).message);
  o.retried?.();
}

/** Runs `attempt` on a picked backend, and again on another one while mayRetry allows. */
export async function withRetries<T>(set: BackendSet, o: RetryOptions, attempt: (b: Backend) => Promise<T>): Promise<T> {
  let backend = set.pickOrFail(undefined, o.affinity, o.model);
  for (let n = 0; ; n++) {
    const on = backend;
    set.started(on);
    let value: T;
    try {
      value = await attempt(on);
    } catch (err) {
      set.ended(on); // before the next pick: least-request must not count the failed attempt
      const next = mayRetry(set, on, err, n, o) ? set.pick(on, undefined, o.model) : undefined;
      if (next === undefined) throw err;
      countRetry(set, on, err, o);
      backend = next;
      continue;
    }
    set.ended(on);
    set.succeeded(on);
    return value;
  }
}
