// The per-identity limits of auth/limits.ts counted for every process and replica in Redis
// (auth.limits.store; auth/limits-store.ts has the keys and scripts). docs/production.md "Shared
// limits on Redis" explains the design; in short:
//
// - An identity without a limit costs what it costs without a store: no store call.
// - Rates: a local lease in front of the shared bucket (Envoy's global rate limit pattern). A
//   process takes a lease of LEASE_S × rate tokens at once (at least 1, at most the burst) and
//   spends it locally; it asks again when it is spent, so a steady stream makes about one round
//   trip per lease, not per request. Tokens leased and not spent within LEASE_MS are dropped.
//   Whatever the replicas do, the shared bucket gave out no more than burst + rate × t, so the
//   total admitted over t is at most that plus the leases held at the start (≤ replicas × lease);
//   the leases left unspent make the error the other way. A refusal is remembered for the time the
//   shared bucket needs to refill a lease (never past its burst, so no token is lost by waiting): a
//   client hammering past its rate costs about one round trip per lease per process, not one per
//   request.
// - Concurrency: a place is a lease in Redis, taken with the check (one round trip), renewed while
//   the request runs, removed when it ends. No local lease: places cannot be spent ahead.
// - When the store cannot answer within auth.limits.storeTimeoutMs, auth.limits.storeFailure says
//   what the request meets: open (let in, counted as such), closed (503
//   GW_ERR_AUTH_LIMITS_UNAVAILABLE), local (this process's own Limiter, as without a store).
import { EventEmitter } from 'node:events';
import {
  ADMITTED_FREE, admittedHolding, type Applied, appliedLimits, concurrencyRefusal, configuresLimits, type Limit, type LimitedIdentity,
  type LimitRefusal, Limiter, type Limits, type LimitsConfig, type LimitVerdict, MAX_TRACKED, rateRefusal, type StoreFailure,
} from './limits';
import { type SharedStore, type StoreAsk, StoreError, type StoreVerdict } from './limits-store';
import { Quotas } from './usage';

/** A lease is this long a share of the rate: 100 ms of it (20 req/s: 2 tokens a lease). */
export const LEASE_S = 0.1;
/** Leased tokens not spent within this are dropped. */
export const LEASE_MS = 1000;

/** The tokens a process leases at once for `limit`: LEASE_S of its rate, at least 1, at most its burst. */
export function leaseSize(limit: Limit): number {
  return Math.max(1, Math.min(limit.burst!, Math.floor(limit.ratePerSecond! * LEASE_S)));
}

/** One rate limit's share held by this process. */
interface Lease {
  tokens: number;
  expiresMs: number;
  /** The shared bucket had no token: refused without asking until then. */
  refusedUntilMs: number;
  /** Its tokens when it refused (for the refusal's Retry-After). */
  refusedTokens: number;
}

export interface SharedLimiterEvents {
  /** A request judged without the store, by the policy that judged it. */
  fallback: [policy: StoreFailure];
}

export class SharedLimiter extends EventEmitter<SharedLimiterEvents> implements Limits {
  /** The rate leases, least recently used first (bounded by MAX_TRACKED, as the Limiter's buckets). */
  readonly #leases = new Map<string, Lease>();
  readonly #configured: boolean;
  /** storeFailure: local's limits (made when first needed). */
  #local: Limiter | undefined;
  /** Counted in the store too, under the same policy. */
  readonly quotas: Quotas;

  constructor(
    private readonly config: LimitsConfig, readonly store: SharedStore, readonly failure: StoreFailure,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    super();
    this.#configured = configuresLimits(config);
    this.quotas = new Quotas(config, store.quotas, failure);
    this.quotas.on('fallback', (policy) => this.emit('fallback', policy));
  }

  take(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none'): LimitVerdict | Promise<LimitVerdict> {
    if (grant.limits === undefined && !this.#configured) return ADMITTED_FREE;
    const applied = appliedLimits(this.config, grant, method);
    if (applied.length === 0) return ADMITTED_FREE;
    const now = this.nowMs();
    const leases = applied.map((a) => (a.limit.ratePerSecond === undefined ? undefined : this.#lease(a.id, now)));
    // A refusal remembered: the shared bucket has no token yet.
    let refusal: LimitRefusal | undefined;
    for (let i = 0; i < applied.length; i++) {
      const l = leases[i];
      if (l === undefined || l.refusedUntilMs <= now) continue;
      const r = rateRefusal(grant, applied[i]!, l.refusedTokens);
      if (refusal === undefined || r.retryAfterS > refusal.retryAfterS) refusal = r;
    }
    if (refusal !== undefined) return refusal;
    const asks = applied.map((a, i): StoreAsk => ({
      id: a.id, ratePerSecond: a.limit.ratePerSecond ?? 0, burst: a.limit.burst ?? 0, concurrency: a.limit.concurrency ?? 0,
      want: leases[i] === undefined || leases[i].tokens >= 1 ? 0 : leaseSize(a.limit),
    }));
    if (asks.every((a) => a.want === 0 && a.concurrency === 0)) {
      for (const l of leases) if (l !== undefined) l.tokens -= 1;
      return ADMITTED_FREE;
    }
    return this.#onStore(grant, method, applied, asks);
  }

  async #onStore(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none', applied: readonly Applied[], asks: readonly StoreAsk[]): Promise<LimitVerdict> {
    let v: StoreVerdict;
    try {
      v = await this.store.take(asks);
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      return this.#fallback(grant, method, err);
    }
    const now = this.nowMs();
    if (!v.admitted) return this.#refusal(grant, applied, v, now);
    for (let i = 0; i < applied.length; i++) {
      if (applied[i]!.limit.ratePerSecond === undefined) continue;
      const l = this.#lease(applied[i]!.id, now);
      // What was granted joins what is left (another request may have leased meanwhile); one is this request's.
      if (asks[i]!.want > 0) {
        l.tokens = Math.max(0, l.tokens) + v.granted[i]!;
        l.expiresMs = now + LEASE_MS;
      }
      l.tokens -= 1;
    }
    const lease = v.lease;
    if (lease === undefined) return ADMITTED_FREE;
    return admittedHolding(() => this.store.release(lease));
  }

  /** The store's refusal told as the per-process Limiter tells it: the longest wait; rate refusals remembered. */
  #refusal(grant: LimitedIdentity, applied: readonly Applied[], v: Extract<StoreVerdict, { admitted: false }>, now: number): LimitRefusal {
    let refusal: LimitRefusal | undefined;
    for (let i = 0; i < applied.length; i++) {
      const a = applied[i]!;
      const tokens = v.tokens[i];
      const held = v.held[i];
      let r: LimitRefusal | undefined;
      if (tokens !== undefined && tokens < 1) {
        r = rateRefusal(grant, a, tokens);
        const l = this.#lease(a.id, now);
        l.refusedUntilMs = now + ((leaseSize(a.limit) - tokens) * 1000) / a.limit.ratePerSecond!;
        l.refusedTokens = tokens;
      } else if (held !== undefined && held >= a.limit.concurrency!) r = concurrencyRefusal(grant, a, held);
      if (r !== undefined && (refusal === undefined || r.retryAfterS > refusal.retryAfterS)) refusal = r;
    }
    // The store refuses only past a limit; a reply without one is a bug of the script.
    return refusal ?? concurrencyRefusal(grant, applied[0]!, 0);
  }

  /** What auth.limits.storeFailure says when the store did not answer. */
  #fallback(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none', err: StoreError): LimitVerdict {
    this.emit('fallback', this.failure);
    if (this.failure === 'open') return ADMITTED_FREE;
    if (this.failure === 'local') return (this.#local ??= new Limiter(this.config)).take(grant, method);
    return {
      admitted: false, reason: 'unavailable', label: 'store', retryAfterS: 1,
      message: `the limits of these credentials cannot be judged now: ${err.message}; auth.limits.storeFailure is closed, retry after 1 s`,
    };
  }

  /** A rate limit's lease, made when first needed (the least recently used dropped past the bound). */
  #lease(id: string, now: number): Lease {
    let l = this.#leases.get(id);
    if (l !== undefined) this.#leases.delete(id);
    else {
      if (this.#leases.size >= MAX_TRACKED) this.#leases.delete(this.#leases.keys().next().value!);
      l = { tokens: 0, expiresMs: 0, refusedUntilMs: 0, refusedTokens: 0 };
    }
    this.#leases.set(id, l);
    if (now >= l.expiresMs) l.tokens = 0;
    return l;
  }

  close(): void {
    this.store.close();
  }
}
