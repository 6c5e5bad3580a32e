// Quotas judged and usage metered (docs/production.md "Quotas and usage"; auth/quotas.ts has the
// units, windows and counters). Quotas.admit runs after the rate and concurrency limits let a
// request in (auth/guard.ts takeLimits): an identity without quotas makes no store call. Every
// request let in with credentials gets a UsageMeter, which the OpenAI answer feeds tokens as they
// stream and which charges what the request used once it is over (its record's bytes, batch size
// and tokens): to the quotas' counters, to the request's record (the access line) and to this
// process's UsageBook (the tensorgate.usage metric, GET /usage/<id> on the metrics port).
import { EventEmitter } from 'node:events';
import {
  type Applied, appliedLimits, type LimitedIdentity, type LimitRefusal, type Limits, type LimitsConfig, MAX_TRACKED, type StoreFailure, where, whoOf,
} from './limits';
import { StoreError } from './limits-store';
import {
  counterKey, LocalQuotaCounter, type Quota, type QuotaCounter, type QuotaEntry, type QuotaTake, type QuotaUnit, QUOTA_UNITS, refuses, type RequestUsage,
  TOKEN_BATCH, windowOf,
} from './quotas';

/**
 * What the quotas read and write of a request's record (telemetry/record.ts RequestRecord, which
 * auth does not import): its outcome and bytes once it is over, and what it used.
 */
export interface MeteredRecord {
  readonly route: string;
  readonly status: number;
  readonly declaredBytes: number;
  readonly model?: string;
  readonly rpc?: 'grpc';
  readonly grpcStatus?: number;
  readonly upstreamStatus?: number;
  readonly bytesIn?: number;
  readonly bytesOut?: number;
  readonly inferences?: number;
  readonly ledger?: { bytesIn(hop: 'ingress_read'): number };
  limited?: { limit: string; reason: 'rate' | 'concurrency' | 'quota' };
  meter?: { tokens(total: number): void; charged(): Promise<void> } | undefined;
  usage?: RequestUsage;
  usageKey?: string;
}

/** One quota of a request: where it is configured, and its window's counter. */
interface AppliedQuota {
  readonly a: Applied;
  readonly q: Quota;
  readonly key: string;
  readonly endMs: number;
}

/** Limits with their quotas, judged after them and counted where they are (auth/guard.ts takeLimits). */
export type LimitsWithQuotas = Limits & { readonly quotas?: Quotas | undefined };

export type QuotaVerdict =
  | { readonly admitted: true; readonly meter: UsageMeter; readonly warning?: string }
  | { readonly admitted: false; readonly refusal: LimitRefusal };

export interface QuotasEvents {
  /** A soft quota spent: the request let in with a warning. */
  warning: [limit: string, unit: QuotaUnit];
  /** Judged without the store (auth.limits.storeFailure). */
  fallback: [policy: StoreFailure];
}

/** The quotas' state of an identity, as GET /usage/<id> tells it. */
export interface QuotaState {
  readonly unit: QuotaUnit;
  readonly per: string;
  readonly policy: string;
  readonly max: number;
  readonly used: number;
  readonly remaining: number;
  readonly window: { readonly start: string; readonly end: string };
}

export class Quotas extends EventEmitter<QuotasEvents> {
  readonly book: UsageBook;
  readonly #local: LocalQuotaCounter;
  /** Whether auth.limits gives quotas to anyone (none: only keys with quotas of their own have any). */
  readonly #configured: boolean;

  /** `store`: the shared counters (auth.limits.store), undefined: this process's. */
  constructor(
    private readonly config: LimitsConfig, private readonly store: QuotaCounter | undefined, private readonly failure: StoreFailure = 'local',
    private readonly nowMs: () => number = Date.now,
  ) {
    super();
    this.#local = new LocalQuotaCounter(MAX_TRACKED, nowMs);
    this.book = new UsageBook(config.usageKeys ?? USAGE_KEYS_DEFAULT);
    this.#configured = [config.default, ...config.subjects.values(), ...config.groups.values()].some((l) => l?.quotas !== undefined);
  }

  /** Checks and takes what is known now (1 request, the declared body); refuses a hard quota already spent. */
  admit(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none', declaredBytes: number): QuotaVerdict | Promise<QuotaVerdict> {
    const identity = method === 'none' ? 'none' : `${method}:${grant.subject}`;
    // No quota can apply: the meter alone (what the request uses still goes in the book and /metrics).
    if (grant.limits?.quotas === undefined && !this.#configured) return { admitted: true, meter: new UsageMeter(this, identity, NO_QUOTAS, declaredBytes) };
    const applied = this.#applied(appliedLimits(this.config, grant, method));
    if (applied.length === 0) return { admitted: true, meter: new UsageMeter(this, identity, NO_QUOTAS, declaredBytes) };
    const entries = applied.map((x) => entry(x, x.q.unit === 'requests' ? 1 : x.q.unit === 'inputBytes' ? declaredBytes : 0));
    const judge = (t: QuotaTake): QuotaVerdict => this.#verdict(grant, identity, applied, entries, t, declaredBytes);
    if (this.store === undefined) return judge(this.#local.take(entries));
    return (async () => {
      try {
        return judge(await this.store!.take(entries));
      } catch (err) {
        if (!(err instanceof StoreError)) throw err;
        return this.#fallback(grant, identity, applied, entries, err, judge);
      }
    })();
  }

  /** The quotas that apply to `limits` now, with their windows' counters. */
  #applied(limits: readonly Applied[], now = this.nowMs()): AppliedQuota[] {
    const out: AppliedQuota[] = [];
    for (const a of limits) {
      for (const q of a.limit.quotas ?? []) {
        const w = windowOf(q.per, now);
        out.push({ a, q, key: counterKey(a.id, q, w.start), endMs: w.end });
      }
    }
    return out;
  }

  #verdict(
    grant: LimitedIdentity, identity: string, applied: readonly AppliedQuota[], entries: readonly QuotaEntry[], t: QuotaTake, declared: number,
  ): QuotaVerdict {
    const now = this.nowMs();
    let refusal: LimitRefusal | undefined;
    let warning: string | undefined;
    for (let i = 0; i < applied.length; i++) {
      const x = applied[i]!;
      const used = t.used[i]!;
      if (!t.ok && refuses(entries[i]!, used)) {
        const r = quotaRefusal(grant, x, used, now);
        if (refusal === undefined || r.retryAfterS > refusal.retryAfterS) refusal = r;
      } else if (x.q.policy === 'soft' && refuses({ ...entries[i]!, hard: true }, used)) {
        this.emit('warning', x.a.label, x.q.unit);
        warning ??= `${x.q.unit} quota of ${x.a.label} spent: ${used + entries[i]!.add} of ${x.q.max} per ${x.q.per} (${where(x.a)})`;
      }
    }
    if (refusal !== undefined) return { admitted: false, refusal };
    return { admitted: true, meter: new UsageMeter(this, identity, applied, declared), ...(warning === undefined ? {} : { warning }) };
  }

  /** The store did not answer: auth.limits.storeFailure. */
  #fallback(
    grant: LimitedIdentity, identity: string, applied: readonly AppliedQuota[], entries: readonly QuotaEntry[], err: StoreError,
    judge: (t: QuotaTake) => QuotaVerdict,
  ): QuotaVerdict {
    this.emit('fallback', this.failure);
    if (this.failure === 'local') return judge(this.#local.take(entries));
    if (this.failure === 'open') {
      this.#local.add(entries);
      return { admitted: true, meter: new UsageMeter(this, identity, applied, 0) };
    }
    return {
      admitted: false,
      refusal: {
        admitted: false, reason: 'unavailable', label: 'store', retryAfterS: 1,
        message: `the quotas of these credentials cannot be judged now: ${err.message}; auth.limits.storeFailure is closed, retry after 1 s`,
      },
    };
  }

  /** Charged without a check: to the store (settled once it answered), else to this process's counters. */
  charge(entries: readonly QuotaEntry[]): Promise<void> | undefined {
    if (entries.length === 0) return undefined;
    if (this.store === undefined) {
      this.#local.add(entries);
      return undefined;
    }
    return Promise.resolve(this.store.add(entries)).catch(() => this.#local.add(entries));
  }

  /** An identity's quotas (`limits`: what applies to it) in their current windows: used and remaining. */
  async state(limits: readonly Applied[]): Promise<QuotaState[]> {
    const applied = this.#applied(limits);
    const keys = applied.map((x) => x.key);
    // A store that cannot be read fails the read (500): this process's counts are not every replica's.
    const used = this.store === undefined ? this.#local.read(keys) : await this.store.read(keys);
    return applied.map((x, i) => ({
      unit: x.q.unit, per: x.q.per, policy: x.q.policy, max: x.q.max, used: used[i]!, remaining: Math.max(0, x.q.max - used[i]!),
      window: { start: new Date(windowOf(x.q.per, this.nowMs()).start).toISOString(), end: new Date(x.endMs).toISOString() },
    }));
  }
}

const NO_QUOTAS: readonly AppliedQuota[] = [];

const entry = (x: AppliedQuota, add: number): QuotaEntry => ({ key: x.key, add, max: x.q.max, hard: x.q.policy === 'hard', endMs: x.endMs });

const quotaRefusal = (grant: LimitedIdentity, x: AppliedQuota, used: number, now: number): LimitRefusal => {
  // RFC 9110 §10.2.3: whole seconds, rounded up: a retry then is in the next window.
  const retryAfterS = Math.max(1, Math.ceil((x.endMs - now) / 1000));
  return {
    admitted: false, reason: 'quota', label: x.a.label, retryAfterS,
    message: `${whoOf(grant, x.a)} has spent its quota of ${x.q.max} ${x.q.unit} per ${x.q.per} (${used} used, ${where(x.a)}); `
      + `the window ends at ${new Date(x.endMs).toISOString()}, retry after ${retryAfterS} s`,
  };
};

/** What one request used, charged as it goes and when it is over. */
export class UsageMeter {
  #tokens = 0;
  #tokensCharged = 0;

  constructor(
    private readonly quotas: Quotas, readonly identity: string, private readonly applied: readonly AppliedQuota[], private readonly declaredBytes: number,
  ) {}

  /** The tokens of the generation so far (prompt + completion): charged every TOKEN_BATCH. */
  tokens(total: number): void {
    this.#tokens = total;
    if (total - this.#tokensCharged >= TOKEN_BATCH) void this.#chargeTokens();
  }

  /**
   * The generation is over: the tokens not charged yet are, and the answer's end waits until they
   * are counted (at most the store's timeout), so that a client sending its next request on reading
   * it, to any replica, finds them (pipeline/generate.ts streamCall).
   */
  async charged(): Promise<void> {
    await this.#chargeTokens();
  }

  #chargeTokens(): Promise<void> | undefined {
    const n = this.#tokens - this.#tokensCharged;
    if (n <= 0) return undefined;
    this.#tokensCharged = this.#tokens;
    return this.quotas.charge(this.#entries('tokens', n));
  }

  #entries(unit: QuotaUnit, n: number): QuotaEntry[] {
    return n <= 0 ? [] : this.applied.filter((x) => x.q.unit === unit).map((x) => entry(x, n));
  }

  /** The request is over: what it used goes in its record, the quotas and the book. */
  finish(r: MeteredRecord): void {
    r.meter = undefined;
    // A gRPC call's own status is recorded after its places are given back: the upstream's then.
    const ok = r.rpc === 'grpc' ? (r.grpcStatus ?? r.upstreamStatus) === 0 : r.status >= 200 && r.status < 300;
    const called = r.ledger !== undefined || r.route === 'grpc ModelInfer' || r.route === 'grpc ModelStreamInfer';
    const inputBytes = r.bytesIn ?? r.ledger?.bytesIn('ingress_read') ?? this.declaredBytes;
    const usage: RequestUsage = {
      requests: 1, inferences: ok && called ? (r.inferences ?? 1) : 0, inputBytes: Math.max(inputBytes, this.declaredBytes),
      outputBytes: r.bytesOut ?? 0, tokens: this.#tokens,
    };
    r.usage = usage;
    void this.#chargeTokens();
    if (this.applied.length > 0) {
      void this.quotas.charge([
        ...this.#entries('inferences', usage.inferences), ...this.#entries('inputBytes', usage.inputBytes - this.declaredBytes),
        ...this.#entries('outputBytes', usage.outputBytes),
      ]);
    }
    r.usageKey = this.quotas.book.add(this.identity, r.model ?? '', usage);
  }
}

/** Models an identity's usage is kept for by name in this process; the rest are summed under OTHER_MODELS. */
const MAX_MODELS = 256;
const OTHER_MODELS = '_other';

/** tensorgate.usage's `key` values besides `other`, by default. */
export const USAGE_KEYS_DEFAULT = 20;

/**
 * This process's usage by identity and model (bounded by MAX_TRACKED identities, the least
 * recently used dropped), and the labels of tensorgate.usage: the `topN` identities with the most
 * requests have their own, the others share `other`. An identity that enters the top N starts its
 * own series then (what it used before stays in `other`), one that leaves it goes on in `other`:
 * each series only grows, and their sum is always the whole.
 */
export class UsageBook {
  readonly #by = new Map<string, { requests: number; models: Map<string, RequestUsage> }>();
  readonly #named = new Set<string>();

  constructor(readonly topN: number) {}

  /** Adds a request's usage; returns the identity's label. */
  add(identity: string, model: string, u: RequestUsage): string {
    let e = this.#by.get(identity);
    if (e === undefined) {
      if (this.#by.size >= MAX_TRACKED) this.#drop();
      e = { requests: 0, models: new Map() };
    } else this.#by.delete(identity);
    this.#by.set(identity, e);
    e.requests += u.requests;
    // The model as the request named it: bounded per identity (names Triton does not know included).
    const name = e.models.has(model) || e.models.size < MAX_MODELS ? model : OTHER_MODELS;
    const m = e.models.get(name);
    if (m === undefined) e.models.set(name, { ...u });
    else for (const k of QUOTA_UNITS) m[k] += u[k];
    return this.#label(identity, e.requests);
  }

  #label(identity: string, requests: number): string {
    if (this.#named.has(identity)) return identity;
    if (this.#named.size < this.topN) {
      this.#named.add(identity);
      return identity;
    }
    let least: string | undefined;
    let leastN = requests;
    for (const n of this.#named) {
      const r = this.#by.get(n)?.requests ?? 0;
      if (r < leastN) {
        least = n;
        leastN = r;
      }
    }
    if (least === undefined) return 'other';
    this.#named.delete(least);
    this.#named.add(identity);
    return identity;
  }

  #drop(): void {
    const oldest = this.#by.keys().next().value!;
    this.#by.delete(oldest);
    this.#named.delete(oldest);
  }

  /** An identity's usage by model in this process. */
  of(identity: string): Record<string, RequestUsage> {
    return Object.fromEntries(this.#by.get(identity)?.models ?? []);
  }
}
