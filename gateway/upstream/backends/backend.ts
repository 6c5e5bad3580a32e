// One backend of the live set, and what every part of the set shares (docs/architecture.md#the-backend-set):
// the record each part keeps its own fields on (resolution.ts adds and drains it, health.ts and
// ejection.ts move its state, model-index.ts and queue-metrics.ts read what it has and holds,
// picking.ts chooses it), its states, and the set as the parts see it.
import type { ModelKey } from './pools';

export const BACKEND_STATES = ['connecting', 'ready', 'unhealthy', 'ejected'] as const;
export type BackendState = (typeof BACKEND_STATES)[number];

/** A model's entry in a backend's set of ready models: the name alone, or with its version. */
export function modelKey(name: string, version = ''): string {
  return version === '' ? name : `${name}\u0000${version}`;
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** The set as each of its parts sees it: the backends it has now, its clock, whether it was closed. */
export interface SetContext {
  readonly clock: Clock;
  readonly random: () => number;
  backends(): readonly Backend[];
  /** Once closed, no part starts anything (a check, a read, a lookup) nor tells of one. */
  closed(): boolean;
}

export class Backend {
  state: BackendState = 'connecting';
  /** False once it left the set. */
  member = true;
  /** The health checks' own verdict, kept while ejected. */
  verdict: 'unknown' | 'up' | 'down' = 'unknown';
  /**
   * Every check that failed since it was last healthy timed out: not known down, only unanswered.
   * A known-down backend is known down until healthyThreshold passes in a row.
   */
  onlyTimeouts = true;
  /** A call on it got an answer since its last check (a timed-out check then does not count). */
  answered = false;
  passes = 0;
  checkFailures = 0;
  /** Consecutive calls that failed on the connection or with UNAVAILABLE. */
  callFailures = 0;
  /** The ejection multiplier: ejections so far, less one per ejectionBaseMs spent back in the set. */
  ejections = 0;
  /** When its last ejection ended (clock.now()). */
  unejectedAt = 0;
  checked = false;
  timer: unknown;
  ejectionTimer: unknown;
  /** Calls this process has running on it (least-request picking). */
  inFlight = 0;
  /** Requests waiting in its Triton's queues, by modelKey (upstream.queueMetrics); undefined: not read. */
  pending: ReadonlyMap<string, number> | undefined;
  /** When `pending` was read (clock.now()). */
  pendingAt = 0;
  queueTimer: unknown;
  /** Its ready models (modelKey entries); undefined until its index was read (it then counts as having every model). */
  models: Set<string> | undefined;
  modelTimer: unknown;
  constructor(readonly address: string, readonly target: string, readonly pool: string) {}

  /** Whether it is known to have the model ready (its index read, and the model in it). */
  has(model: ModelKey): boolean {
    return this.models !== undefined && this.models.has(modelKey(model.name, model.version));
  }

  /** Stops every timer a part of the set keeps on it. */
  stop(clock: Clock): void {
    clock.clearTimeout(this.timer);
    clock.clearTimeout(this.ejectionTimer);
    clock.clearTimeout(this.modelTimer);
    clock.clearTimeout(this.queueTimer);
  }
}

export function isReady(b: Backend): boolean {
  return b.state === 'ready';
}

/** Not ready, but not known down either: no verdict yet, or every failed check only timed out. */
export function mayBeUp(b: Backend): boolean {
  return b.state === 'connecting' || (b.state === 'unhealthy' && b.onlyTimeouts);
}
