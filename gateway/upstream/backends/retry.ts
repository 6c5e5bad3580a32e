// Safe retries (docs/production.md): a call is sent again, on another ready backend, only when no byte
// of it reached Triton — the connection was refused, the stream was refused (GOAWAY or
// REFUSED_STREAM before it was accepted), or the backend was gone before the call started —
// at most upstream.retries times, never for a sequence request (Triton keeps sequence state per
// server: a sequence's calls all go to the backend its key picks) and never past the request's
// deadline. Every attempt's outcome feeds the backend set's passive outlier detection.
import type { Backend, BackendSet } from './backend-set';
import { backendAnswered, failsBackend, wasNotSent } from '../status';

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
}

/** Reports one attempt's failure to the set; true when the call may go to `set.pick(backend)` next. */
export function mayRetry(set: BackendSet, backend: Backend, err: unknown, attempt: number, o: RetryOptions): boolean {
  if (failsBackend(err)) set.failed(backend);
  else if (backendAnswered(err)) set.succeeded(backend);
  return wasNotSent(err) && attempt < set.retries && o.affinity === undefined && Date.now() < o.deadline;
}

/** Counts a retry from `from` (metric, log event, the request's record). */
export function countRetry(set: BackendSet, from: Backend, err: unknown, o: RetryOptions): void {
  set.retried(from, (err as Error).message);
  o.retried?.();
}

/** Runs `attempt` on a picked backend, and again on another one while mayRetry allows. */
export async function withRetries<T>(set: BackendSet, o: RetryOptions, attempt: (b: Backend) => Promise<T>): Promise<T> {
  let backend = set.pickOrFail(undefined, o.affinity);
  for (let n = 0; ; n++) {
    try {
      const value = await attempt(backend);
      set.succeeded(backend);
      return value;
    } catch (err) {
      const next = mayRetry(set, backend, err, n, o) ? set.pick(backend) : undefined;
      if (next === undefined) throw err;
      countRetry(set, backend, err, o);
      backend = next;
    }
  }
}
