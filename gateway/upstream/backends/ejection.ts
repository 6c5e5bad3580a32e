// Passive ejection, Envoy's outlier detection (docs/production.md#backends-dns-health-retries):
// upstream.ejectAfterFailures calls in a row that failed on the connection or with UNAVAILABLE take
// a backend out for ejectionBaseMs × its ejections so far (at most 10 ×, Envoy's 300 s
// max_ejection_time over its 30 s base), never more than upstream.maxEjectionPercent of its pool and
// never the pool's last backend. The multiplier falls by one per ejectionBaseMs the backend then
// stays in (Envoy decrements it per interval without an ejection), so an old failure fades. The
// health checks go on meanwhile, and an ejection ends in the state they found.
import type { Backend, BackendState, SetContext } from './backend';
import type { Verdicts } from './health';

/** Envoy's max_ejection_time (300 s) over its base (30 s). */
const MAX_EJECTION_FACTOR = 10;

/** How long the `ejections`-th ejection lasts. */
export function ejectionMs(ejections: number, baseMs: number): number {
  return baseMs * Math.min(ejections, MAX_EJECTION_FACTOR);
}

export class Ejection {
  readonly #set: SetContext;
  readonly #verdicts: Pick<Verdicts, 'settings' | 'setState' | 'suspect'>;
  /** Ejections so far, for the metrics. */
  total = 0;

  constructor(set: SetContext, verdicts: Pick<Verdicts, 'settings' | 'setState' | 'suspect'>) {
    this.#set = set;
    this.#verdicts = verdicts;
  }

  /** A call on `b` got an answer (whatever its gRPC status, UNAVAILABLE aside): the connection works. */
  succeeded(b: Backend): void {
    b.callFailures = 0;
  }

  /** A call on `b` failed on the connection or with UNAVAILABLE. */
  failed(b: Backend): void {
    if (this.#set.closed() || !b.member) return;
    b.callFailures++;
    this.#verdicts.suspect();
    if (b.state !== 'ejected' && b.callFailures >= this.#verdicts.settings(b.pool).ejectAfterFailures) this.#eject(b);
  }

  #eject(b: Backend): void {
    const o = this.#verdicts.settings(b.pool);
    const pool = this.#set.backends().filter((x) => x.pool === b.pool);
    const n = pool.length;
    const ejected = pool.filter((x) => x.state === 'ejected').length;
    // Never more than the configured share of its pool, and never the pool's last backend standing.
    if ((ejected + 1) * 100 > o.maxEjectionPercent * n || ejected + 1 >= n) return;
    const clock = this.#set.clock;
    if (b.ejections > 0) b.ejections = Math.max(0, b.ejections - Math.floor((clock.now() - b.unejectedAt) / o.ejectionBaseMs));
    b.ejections++;
    this.total++;
    const ms = ejectionMs(b.ejections, o.ejectionBaseMs);
    this.#verdicts.setState(b, 'ejected', `${b.callFailures} consecutive calls failed; ejected for ${ms} ms (ejection ${b.ejections})`);
    b.ejectionTimer = clock.setTimeout(() => this.#uneject(b), ms);
  }

  #uneject(b: Backend): void {
    if (this.#set.closed() || !b.member) return;
    b.callFailures = 0;
    b.unejectedAt = this.#set.clock.now();
    const to: BackendState = b.verdict === 'up' ? 'ready' : b.verdict === 'down' ? 'unhealthy' : 'connecting';
    this.#verdicts.setState(b, to, 'ejection ended');
  }
}
