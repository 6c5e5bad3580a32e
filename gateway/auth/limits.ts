// Per-identity limits (docs/production.md "Per-key limits"): a token bucket (requests per second
// with a burst) and a cap on requests in flight, for an API key (its `limits` in the key file), a
// JWT subject (auth.limits.subjects) or a group of JWTs (auth.limits.groups, shared by every token
// whose auth.limits.groupsClaim names it), with auth.limits.default for identities that have no
// limit of their own. A request is judged after auth let it in and before its body is read or
// anything goes upstream; it must pass its own limit and each of its groups' (all or nothing:
// a refused request takes no token and no place). Its places are given back when its answer is
// done, whatever way it ends (ingress/server.ts Exchange.report, passthrough/grpc-ingress.ts #end).
//
// The state is per process and bounded: an identity's bucket is kept while it is used, and past
// MAX_TRACKED identities the least recently used ones with nothing in flight are dropped (one not
// refilled yet starts full again: the price of the bound, paid only by that many identities in
// use). Keys come from a file and groups from the configuration; JWT subjects are not bounded by
// anything of ours, hence the bound. With auth.limits.store the same limits are counted in Redis
// for every process and replica instead (auth/shared-limiter.ts); this file's Limiter is then the
// fallback of storeFailure: local.
import { isObject, problemsAt } from '../config/problems';
import { parseQuotas, type Quota } from './quotas';

/** One limit as configured: undefined rate or concurrency = not limited that way. */
export interface Limit {
  /** Requests per second, refilled continuously; may be a fraction (0.5 = one every 2 s). */
  readonly ratePerSecond?: number;
  /** Requests that may come at once after a quiet time (the bucket's size); default: the rate rounded up. */
  readonly burst?: number;
  /** Requests in flight at once. */
  readonly concurrency?: number;
  /** Budgets over windows (auth/quotas.ts). */
  readonly quotas?: readonly Quota[];
}

/** What the limits read of a grant (auth/key-file.ts Grant). */
export interface LimitedIdentity {
  /** A key's id, a JWT's `sub`. */
  readonly subject: string;
  /** A key's own limits. */
  readonly limits?: Limit;
  /** A JWT's groups (auth.limits.groupsClaim). */
  readonly limitGroups?: readonly string[];
}

/** What a request meets while the store cannot answer (auth.limits.storeFailure). */
export const STORE_FAILURES = ['open', 'closed', 'local'] as const;
export type StoreFailure = (typeof STORE_FAILURES)[number];

/** auth.limits.store and its companions: where the limits are counted for every process and replica. */
export interface LimitsStoreConfig {
  /** redis:// or rediss:// URL, with its password if any; undefined: none (with workers > 1, the cluster's primary counts). */
  readonly url?: string;
  readonly failure: StoreFailure;
  /** The longest a request waits for the store before storeFailure applies. */
  readonly timeoutMs: number;
}

export const STORE_TIMEOUT_DEFAULT_MS = 5;
export const STORE_TIMEOUT_MAX_MS = 1000;

/** auth.limits (config/schema.ts): the limits of JWT subjects and groups, and the default. */
export interface LimitsConfig {
  readonly default?: Limit;
  readonly subjects: ReadonlyMap<string, Limit>;
  /** The JWT claim whose values name groups (a string of space-separated names, or a list); '' = none. */
  readonly groupsClaim: string;
  readonly groups: ReadonlyMap<string, Limit>;
  /** With a url, counted in Redis for every process and replica; else by the primary (workers > 1) or per process. */
  readonly store?: LimitsStoreConfig;
  /** Identities with a `key` label of their own in tensorgate.usage (the most requests; the rest `other`). */
  readonly usageKeys?: number;
}

export const NO_LIMITS: LimitsConfig = { subjects: new Map(), groupsClaim: '', groups: new Map() };

/** Identities whose state is kept at most (idle ones beyond it are dropped, least recently used first). */
export const MAX_TRACKED = 100_000;

/** Retry-After of a concurrency refusal: places come back as answers end, typically within a second. */
export const CONCURRENCY_RETRY_AFTER_S = 1;

/**
 * `{rate, burst?, concurrency?, quotas?}` checked (at least one of rate, concurrency and quotas);
 * problems name `at.<field>`. Shared by the key file and auth.limits.
 */
export function parseLimit(v: unknown, at: string): Limit | string[] {
  if (!isObject(v)) return [`${at}: must be a mapping {rate, burst, concurrency, quotas}`];
  const problems: string[] = [];
  const bad = problemsAt(problems, at);
  for (const k of Object.keys(v)) if (!['rate', 'burst', 'concurrency', 'quotas'].includes(k)) bad(k, 'unknown key (rate, burst, concurrency, quotas)');
  const { rate, burst, concurrency } = v;
  const quotas = v.quotas === undefined ? undefined : parseQuotas(v.quotas, `${at}.quotas`);
  if (quotas !== undefined && typeof quotas[0] === 'string') problems.push(...(quotas as string[]));
  if (rate !== undefined && (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0 || rate > 1e9)) {
    bad('rate', `must be requests per second, a number above 0 (0.5 = one every 2 s), got ${JSON.stringify(rate)}`);
  }
  if (burst !== undefined && (!Number.isInteger(burst) || (burst as number) < 1 || (burst as number) > 1e9)) {
    bad('burst', `must be an integer of at least 1, got ${JSON.stringify(burst)}`);
  } else if (burst !== undefined && rate === undefined) bad('burst', 'needs a rate');
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || (concurrency as number) < 1 || (concurrency as number) > 1e9)) {
    bad('concurrency', `must be an integer of at least 1, got ${JSON.stringify(concurrency)}`);
  }
  if (rate === undefined && concurrency === undefined && quotas === undefined) bad('', 'give a rate, a concurrency, quotas or some of them');
  if (problems.length > 0) return problems;
  return {
    ...(rate === undefined ? {} : { ratePerSecond: rate as number, burst: (burst as number | undefined) ?? Math.max(1, Math.ceil(rate as number)) }),
    ...(concurrency === undefined ? {} : { concurrency: concurrency as number }),
    ...(quotas === undefined || quotas.length === 0 ? {} : { quotas: quotas as Quota[] }),
  };
}

/** The auth.limits value checked; problems name `auth.limits.<key>`. */
export function parseLimits(raw: unknown): { value: LimitsConfig } | { problem: string[] } {
  if (raw === undefined || raw === null || raw === '') return { value: NO_LIMITS };
  if (!isObject(raw)) return { problem: [`auth.limits: must be a mapping {${LIMITS_KEYS.join(', ')}}`] };
  const problems: string[] = [];
  const bad = problemsAt(problems, 'auth.limits');
  for (const k of Object.keys(raw)) if (!LIMITS_KEYS.includes(k)) bad(k, `unknown key (${LIMITS_KEYS.join(', ')})`);
  const one = (v: unknown, at: string): Limit | undefined => {
    const l = parseLimit(v, at);
    if (Array.isArray(l)) {
      problems.push(...l);
      return undefined;
    }
    return l;
  };
  const table = (v: unknown, key: string): Map<string, Limit> => {
    const out = new Map<string, Limit>();
    if (v === undefined) return out;
    if (!isObject(v)) {
      bad(key, 'must be a mapping of names to {rate, burst, concurrency, quotas}');
      return out;
    }
    for (const [name, l] of Object.entries(v)) {
      const limit = one(l, `auth.limits.${key}.${name}`);
      if (limit !== undefined) out.set(name, limit);
    }
    return out;
  };
  const def = raw.default === undefined ? undefined : one(raw.default, 'auth.limits.default');
  const subjects = table(raw.subjects, 'subjects');
  const groups = table(raw.groups, 'groups');
  const claim = raw.groupsClaim ?? '';
  if (typeof claim !== 'string') bad('groupsClaim', 'must be the name of a JWT claim');
  else if (groups.size > 0 && claim === '') bad('groups', 'needs auth.limits.groupsClaim, the JWT claim that names a token\'s groups');
  const store = parseStore(raw, bad);
  const { usageKeys } = raw;
  const n = usageKeys as number;
  if (usageKeys !== undefined && (!Number.isInteger(n) || n < 0 || n > 1000)) {
    bad('usageKeys', `must be an integer in [0, 1000], got ${JSON.stringify(usageKeys)}`);
  }
  if (problems.length > 0) return { problem: problems };
  const value = {
    ...(def === undefined ? {} : { default: def }), subjects, groupsClaim: claim as string, groups,
    ...(usageKeys === undefined ? {} : { usageKeys: usageKeys as number }),
  };
  return { value: store === undefined ? value : { ...value, store } };
}

const LIMITS_KEYS = ['default', 'subjects', 'groupsClaim', 'groups', 'store', 'storeFailure', 'storeTimeoutMs', 'usageKeys'];

/** auth.limits.store, storeFailure, storeTimeoutMs; the URL's password never goes in a problem. */
function parseStore(raw: Record<string, unknown>, bad: (key: string, problem: string) => void): LimitsStoreConfig | undefined {
  const { store, storeFailure = 'local', storeTimeoutMs = STORE_TIMEOUT_DEFAULT_MS } = raw;
  if (!STORE_FAILURES.includes(storeFailure as StoreFailure)) bad('storeFailure', `must be one of ${STORE_FAILURES.join(', ')}, got ${JSON.stringify(storeFailure)}`);
  if (!Number.isInteger(storeTimeoutMs) || (storeTimeoutMs as number) < 1 || (storeTimeoutMs as number) > STORE_TIMEOUT_MAX_MS) {
    bad('storeTimeoutMs', `must be an integer of milliseconds in [1, ${STORE_TIMEOUT_MAX_MS}], got ${JSON.stringify(storeTimeoutMs)}`);
  }
  // Without a store they apply to the cluster's primary (workers > 1), which counts for its workers then.
  if (store === undefined || store === '') {
    return raw.storeFailure === undefined && raw.storeTimeoutMs === undefined ? undefined
      : { failure: storeFailure as StoreFailure, timeoutMs: storeTimeoutMs as number };
  }
  const problem = storeUrlProblem(store);
  if (problem !== undefined) {
    bad('store', problem);
    return undefined;
  }
  return { url: store as string, failure: storeFailure as StoreFailure, timeoutMs: storeTimeoutMs as number };
}

/** Why `v` is not a Redis URL (redis://[[user]:password@]host[:port][/db], rediss:// for TLS), or undefined. */
function storeUrlProblem(v: unknown): string | undefined {
  const usage = 'give redis://[[user]:password@]host[:port][/db], or rediss:// for TLS';
  if (typeof v !== 'string') return `must be a URL; ${usage}`;
  const u = URL.canParse(v) ? new URL(v) : undefined;
  if (u === undefined || (u.protocol !== 'redis:' && u.protocol !== 'rediss:') || u.hostname === '') {
    return `${JSON.stringify(redactedUrl(v))} is not a redis:// or rediss:// URL; ${usage}`;
  }
  if (!/^\/?(\d+)?$/.test(u.pathname)) return `${redactedUrl(v)}: the path must be a database number (/0); ${usage}`;
  return undefined;
}

/** `url` with its credentials hidden, for problems and logs. */
export function redactedUrl(url: string): string {
  return url.replace(/\/\/[^/@]*@/, '//***@');
}

/** The groups a JWT's claim names (a space-separated string or a list of strings); others are ignored. */
export function claimGroups(v: unknown): string[] {
  if (typeof v === 'string') return v.split(' ').filter((s) => s !== '');
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === 'string' && x !== '');
  return [];
}

/** One identity's state: its bucket and its requests in flight. */
class Bucket {
  tokens: number;
  updatedMs: number;
  inFlight = 0;

  constructor(limit: Limit, nowMs: number) {
    this.tokens = limit.burst ?? 0;
    this.updatedMs = nowMs;
  }

  /** The tokens now, refilled at `limit`'s rate up to its burst (a burst lowered by a reload clamps them). */
  refill(limit: Limit, nowMs: number): void {
    if (limit.ratePerSecond === undefined) return;
    const elapsed = Math.max(0, nowMs - this.updatedMs);
    this.tokens = Math.min(limit.burst!, this.tokens + (elapsed * limit.ratePerSecond) / 1000);
    this.updatedMs = nowMs;
  }
}

/** A limit that applies to a request: its state's key, its label, and the limit itself. */
export interface Applied {
  /** Where its state is kept: `key:<id>`, `jwt:<sub>`, `group:<name>`. */
  readonly id: string;
  /** What the metric and the log call it (bounded: `default` for every identity under auth.limits.default). */
  readonly label: string;
  readonly limit: Limit;
}

export type LimitReason = 'rate' | 'concurrency' | 'quota';

/**
 * The verdict: let in (with the function that gives its places back, once), or refused and why:
 * past a limit, or `unavailable` when the store cannot judge and auth.limits.storeFailure is closed.
 */
export type LimitVerdict =
  | { readonly admitted: true; readonly release: () => void }
  | {
    readonly admitted: false; readonly reason: LimitReason | 'unavailable'; readonly label: string; readonly retryAfterS: number; readonly message: string;
  };

export type LimitRefusal = Extract<LimitVerdict, { admitted: false }>;

/** What judges requests against their limits: this file's Limiter, or auth/shared-limiter.ts's on a store. */
export interface Limits {
  /** Judges a request of `grant` (let in by auth as `method`): takes a token and a place of each limit, or none. */
  take(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none'): LimitVerdict | Promise<LimitVerdict>;
  close(): void;
}

/** The limits of a grant: its own (the key's, the subject's, or the default), and its groups'. */
export function appliedLimits(config: LimitsConfig, grant: LimitedIdentity, method: 'key' | 'jwt' | 'none'): Applied[] {
  const out: Applied[] = [];
  if (method === 'key') {
    if (grant.limits !== undefined) out.push({ id: `key:${grant.subject}`, label: `key:${grant.subject}`, limit: grant.limits });
    else if (config.default !== undefined) out.push({ id: `key:${grant.subject}`, label: 'default', limit: config.default });
  } else if (method === 'jwt') {
    const own = config.subjects.get(grant.subject);
    if (own !== undefined) out.push({ id: `jwt:${grant.subject}`, label: `subject:${grant.subject}`, limit: own });
    else if (config.default !== undefined) out.push({ id: `jwt:${grant.subject}`, label: 'default', limit: config.default });
    for (const g of grant.limitGroups ?? []) {
      const limit = config.groups.get(g);
      if (limit !== undefined) out.push({ id: `group:${g}`, label: `group:${g}`, limit });
    }
  }
  return out;
}

/** Whether auth.limits sets any limit (none: only keys with limits of their own are judged). */
export function configuresLimits(config: LimitsConfig): boolean {
  return config.default !== undefined || config.subjects.size > 0 || config.groups.size > 0;
}

/** The release of a request no limit applies to: nothing held (callers need not keep it). */
export const NOTHING_HELD = (): void => {};
/** Admitted with nothing held. */
export const ADMITTED_FREE: LimitVerdict = { admitted: true, release: NOTHING_HELD };

/** Admitted holding places that `giveBack` returns, once however often the release is called. */
export function admittedHolding(giveBack: () => void): LimitVerdict {
  let held = true;
  return {
    admitted: true,
    release: () => {
      if (!held) return;
      held = false;
      giveBack();
    },
  };
}

export class Limiter implements Limits {
  /** Identities' state, least recently used first (a Map keeps insertion order; a use moves it last). */
  private readonly buckets = new Map<string, Bucket>();
  /** Whether auth.limits sets any limit (none: only keys with limits of their own are judged). */
  private readonly configured: boolean;
  /** `nowMs`: a monotonic clock (tests give their own); `maxTracked`: the bound of identities kept. */
  constructor(
    private readonly config: LimitsConfig, private readonly nowMs: () => number = () => performance.now(), private readonly maxTracked = MAX_TRACKED,
  ) {
    this.configured = configuresLimits(config);
  }

  /** Nothing to stop: the state is in this process. */
  close(): void {}

  /** Identities whose state is kept now (for tests and the bound). */
  get tracked(): number {
    return this.buckets.size;
  }

  take(grant: LimitedIdentity, method: 'key' | 'jwt' | 'none'): LimitVerdict {
    // The common case without limits allocates nothing.
    if (grant.limits === undefined && !this.configured) return ADMITTED_FREE;
    const applied = appliedLimits(this.config, grant, method);
    if (applied.length === 0) return ADMITTED_FREE;
    const now = this.nowMs();
    const buckets = applied.map((a) => this.bucket(a, now));
    // Every limit is judged: the refusal told is the one with the longest wait, so that a client
    // retrying after its Retry-After is not refused by another of its limits at once.
    let refusal: LimitRefusal | undefined;
    for (let i = 0; i < applied.length; i++) {
      const r = refusalOf(grant, applied[i]!, buckets[i]!, now);
      if (r !== undefined && (refusal === undefined || r.retryAfterS > refusal.retryAfterS)) refusal = r;
    }
    if (refusal !== undefined) return refusal;
    for (let i = 0; i < applied.length; i++) {
      const b = buckets[i]!;
      if (applied[i]!.limit.ratePerSecond !== undefined) b.tokens -= 1;
      b.inFlight++;
    }
    return admittedHolding(() => {
      for (const b of buckets) b.inFlight--;
    });
  }

  /** An identity's state, made when first needed (dropping the least recently used idle ones past the bound). */
  private bucket(a: Applied, now: number): Bucket {
    let b = this.buckets.get(a.id);
    if (b !== undefined) {
      this.buckets.delete(a.id); // moved last: most recently used
      this.buckets.set(a.id, b);
      return b;
    }
    if (this.buckets.size >= this.maxTracked) this.evict();
    b = new Bucket(a.limit, now);
    this.buckets.set(a.id, b);
    return b;
  }

  /**
   * Drops the least recently used identity with nothing in flight. Its bucket may not be full
   * (then a retry soon after starts from a full one): the price of a bound, paid only past
   * MAX_TRACKED identities in use. Ones with requests in flight are kept (limits.maxInFlightRequests
   * bounds how many there are), or their places would never come back.
   */
  private evict(): void {
    for (const [id, b] of this.buckets) {
      if (b.inFlight === 0) {
        this.buckets.delete(id);
        return;
      }
    }
  }
}

const requests = (n: number): string => `${n} request${n === 1 ? '' : 's'}`;

/** A limit's refusal of one more request now, or undefined. */
function refusalOf(grant: LimitedIdentity, a: Applied, b: Bucket, now: number): LimitRefusal | undefined {
  // The rate first: its wait is never shorter than a concurrency refusal's.
  if (a.limit.ratePerSecond !== undefined) {
    b.refill(a.limit, now);
    if (b.tokens < 1) return rateRefusal(grant, a, b.tokens);
  }
  if (a.limit.concurrency === undefined || b.inFlight < a.limit.concurrency) return undefined;
  return concurrencyRefusal(grant, a, b.inFlight);
}

/** The refusal of a limit whose bucket has `tokens` (< 1) now. */
export function rateRefusal(grant: LimitedIdentity, a: Applied, tokens: number): LimitRefusal {
  const { limit, label } = a;
  const rate = limit.ratePerSecond!;
  // RFC 9110 §10.2.3: whole seconds; rounded up, so a retry at that time finds a token.
  const retryAfterS = Math.max(1, Math.ceil((1 - tokens) / rate));
  return {
    admitted: false, reason: 'rate', label, retryAfterS,
    message: `${whoOf(grant, a)} is over its rate of ${requests(rate)} per second (burst ${limit.burst}, ${where(a)}); retry after ${retryAfterS} s`,
  };
}

/** The refusal of a limit that has `inFlight` requests in flight, its concurrency. */
export function concurrencyRefusal(grant: LimitedIdentity, a: Applied, inFlight: number): LimitRefusal {
  return {
    admitted: false, reason: 'concurrency', label: a.label, retryAfterS: CONCURRENCY_RETRY_AFTER_S,
    message: `${whoOf(grant, a)} already has ${requests(inFlight)} in flight, its concurrency limit (${where(a)}); retry after ${CONCURRENCY_RETRY_AFTER_S} s`,
  };
}

export function whoOf(grant: LimitedIdentity, a: Applied): string {
  if (a.id.startsWith('group:')) return `group '${a.id.slice('group:'.length)}'`;
  return grant.subject === '' ? 'these credentials' : `'${grant.subject}'`;
}

/** Where the limit is configured, for the message. */
export function where(a: Applied): string {
  if (a.label === 'default') return 'auth.limits.default';
  if (a.id.startsWith('key:')) return 'the key\'s limits in auth.keysFile';
  if (a.id.startsWith('group:')) return `auth.limits.groups.${a.id.slice('group:'.length)}`;
  return `auth.limits.subjects.${a.id.slice('jwt:'.length)}`;
}
