// Active health checks and their verdicts, per backend (docs/production.md#backends-dns-health-retries;
// the checker itself is health-check.ts). A new backend is ready after one check answers SERVING;
// upstream.unhealthyThreshold failed checks in a row make it unhealthy, upstream.healthyThreshold
// passes in a row ready again. A check that only timed out proves nothing (a busy machine), so a
// backend whose failed checks all timed out is not known down and may still be picked, and one
// that times out while calls on the backend keep getting answers does not count. A backend that is
// not ready is checked again after a short backoff, so a returning Triton is noticed within about
// two seconds without hammering a dead address.
import { type Backend, type BackendState, type SetContext } from './backend';
import type { PoolSettings } from './pools';

/**
 * A health check's outcome: SERVING; known down (connection refused or reset, NOT_SERVING, any
 * other answer); or no answer within the timeout, which may only mean a busy machine.
 */
export type CheckResult = 'serving' | 'down' | 'timeout';

export interface HealthChecker {
  check(address: string, timeoutMs: number): Promise<CheckResult>;
  /** The backend left the set: its connection can go. */
  forget(address: string): void;
  close(): void;
  /** Why the address's last check failed, when the checker knows (TLS to Triton: the handshake's reason). */
  failure?(address: string): string | undefined;
  /**
   * The models the address has ready (its repository index): each READY entry's name, and its
   * name and version (modelKey); undefined when the index could not be read.
   */
  models?(address: string, timeoutMs: number): Promise<ReadonlySet<string> | undefined>;
}

export const RECONNECT_BASE_MS = 100;
export const RECONNECT_MAX_MS = 2000;

/**
 * The delay before checking again a backend that is not ready, after `failures` consecutive
 * failed checks (0: it is passing, on its way back): exponential, capped, with ±20 % jitter
 * (`random` in [0, 1)).
 */
export function reconnectDelayMs(failures: number, intervalMs: number, random: number): number {
  const cap = Math.min(intervalMs, RECONNECT_MAX_MS);
  const base = Math.min(cap, RECONNECT_BASE_MS * 2 ** Math.min(Math.max(failures - 1, 0), 20));
  return Math.round(base * (0.8 + 0.4 * random));
}

/** What the checks' verdicts change in the set, and tell it. */
export interface Verdicts {
  settings(pool: string): PoolSettings;
  setState(b: Backend, to: BackendState, reason: string): void;
  /** `b` passed into health: its models and queue may be read. */
  up(b: Backend): void;
  /** A check failed on a backend not known down: its name may have moved. */
  suspect(): void;
  /** A check's verdict is in (the set may be settled). */
  checked(): void;
}

export class Health {
  readonly #set: SetContext;
  readonly #checker: HealthChecker;
  readonly #verdicts: Verdicts;

  constructor(set: SetContext, checker: HealthChecker, verdicts: Verdicts) {
    this.#set = set;
    this.#checker = checker;
    this.#verdicts = verdicts;
  }

  /** Checks a backend that joined the set, now, then on and on. */
  watch(b: Backend): void {
    this.#schedule(b, 0);
  }

  /** A call on `b` got an answer: a check that times out before the next does not count. */
  answered(b: Backend): void {
    b.answered = true;
  }

  #schedule(b: Backend, ms: number): void {
    this.#set.clock.clearTimeout(b.timer);
    b.timer = this.#set.clock.setTimeout(() => void this.#check(b), ms);
  }

  async #check(b: Backend): Promise<void> {
    if (this.#set.closed() || !b.member) return;
    const o = this.#verdicts.settings(b.pool);
    const timeoutMs = Math.min(o.healthCheckIntervalMs, 1000);
    let result: CheckResult;
    try {
      result = await this.#checker.check(b.address, timeoutMs);
    } catch {
      result = 'down';
    }
    if (this.#set.closed() || !b.member) return;
    b.checked = true;
    const answered = b.answered;
    b.answered = false;
    if (result === 'serving') this.#passed(b);
    else if (!(result === 'timeout' && answered)) this.#failed(b, result);
    const next = b.state === 'ready' ? o.healthCheckIntervalMs * (0.9 + 0.2 * this.#set.random())
      : reconnectDelayMs(b.checkFailures, o.healthCheckIntervalMs, this.#set.random());
    this.#schedule(b, Math.round(next));
    this.#verdicts.checked();
  }

  #passed(b: Backend): void {
    const { healthyThreshold } = this.#verdicts.settings(b.pool);
    b.checkFailures = 0;
    b.passes++;
    // A backend known down stays known down (never picked) until it is healthy again: one SERVING
    // between refusals — a restarting Triton on a busy machine — must not let calls through, only
    // to refuse them again at the next refused check.
    if (b.verdict !== 'down' || b.passes >= healthyThreshold) b.onlyTimeouts = true;
    // A new backend needs one pass (Envoy does the same for hosts it has just learnt); one that
    // was found unhealthy needs healthyThreshold in a row.
    if (b.verdict === 'up' || (b.verdict === 'down' && b.passes < healthyThreshold)) return;
    b.verdict = 'up';
    if (b.state !== 'ejected') this.#verdicts.setState(b, 'ready', 'health check SERVING');
    this.#verdicts.up(b);
  }

  #failed(b: Backend, result: 'down' | 'timeout'): void {
    b.passes = 0;
    b.checkFailures++;
    if (result === 'down') b.onlyTimeouts = false;
    if (b.verdict !== 'down') this.#verdicts.suspect();
    if (b.verdict === 'down' || b.checkFailures < this.#verdicts.settings(b.pool).unhealthyThreshold) return;
    b.verdict = 'down';
    // The checker's reason when it has one (a name that does not resolve, a refused certificate).
    const why = this.#checker.failure?.(b.address);
    if (b.state !== 'ejected') this.#verdicts.setState(b, 'unhealthy', `${b.checkFailures} health checks failed${why === undefined ? '' : `: ${why}`}`);
  }
}
