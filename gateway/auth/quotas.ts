// Quotas over windows (docs/production.md "Quotas and usage"): a budget of a unit over a calendar
// window (UTC), per identity as auth.limits names them (auth/limits.ts Applied: `key:<id>`,
// `jwt:<sub>`, `group:<name>`), counted in Redis with auth.limits.store (auth/limits-store.ts), in
// this process without. A window is [start, end) of a UTC minute, hour, day or calendar month;
// its counter is `<id>:quota:<unit>:<per>:<start>` and expires at the window's end.
//
// Units and when they are charged:
//   requests     1 per request let in, checked and taken at admission (all or nothing);
//   inputBytes   the request body's bytes: its Content-Length checked and taken at admission, what
//                came beyond it (a chunked body) charged when the request is over;
//   inferences   the batch size: the first dimension of the first input of a V2 infer (TorchServe,
//                declarative) request when it has two or more; else 1; 1 per other call that
//                reaches the model;
//   outputBytes  the answer body's bytes handed to the client's connection (a cut answer: what left);
//   tokens       OpenAI generations: prompt + completion tokens as the model reports them, charged
//                as they stream (every TOKEN_BATCH tokens) and the rest once the generation is
//                over, before the answer's end is written; a cut stream's rest when the request is over.
// Units known only after the call cannot be refused in advance: admission refuses only a window
// already spent, so a window may end past its budget by what the requests admitted before it was
// spent go on to use (at most one request's worth per request in flight across the replicas).
//
// A hard quota refuses once its window is spent: 429 GW_ERR_AUTH_QUOTA_EXHAUSTED with Retry-After
// at the window's end. A soft one only warns: X-Quota-Warning and tensorgate.auth.quota_warnings.
import { isObject, problemsAt } from '../config/problems';

export const QUOTA_UNITS = ['requests', 'inferences', 'inputBytes', 'outputBytes', 'tokens'] as const;
export type QuotaUnit = (typeof QUOTA_UNITS)[number];
export const QUOTA_WINDOWS = ['minute', 'hour', 'day', 'month'] as const;
export type QuotaWindow = (typeof QUOTA_WINDOWS)[number];
export const QUOTA_POLICIES = ['hard', 'soft'] as const;

/** What one request used, in the units of quotas. */
export type RequestUsage = Record<QuotaUnit, number>;

/** One quota as configured: at most `max` of `unit` per `per`. */
export interface Quota {
  readonly unit: QuotaUnit;
  readonly per: QuotaWindow;
  readonly max: number;
  readonly policy: 'hard' | 'soft';
}

/** Streamed tokens are charged in batches of this many (and the rest when the request is over). */
export const TOKEN_BATCH = 16;

/** `[{unit, per, max, policy?}]` checked; problems name `at[i].<field>`. */
export function parseQuotas(v: unknown, at: string): Quota[] | string[] {
  if (!Array.isArray(v)) return [`${at}: must be a list of {unit, per, max, policy}`];
  const problems: string[] = [];
  const out: Quota[] = [];
  v.forEach((q: unknown, i) => {
    const bad = problemsAt(problems, `${at}[${i}]`);
    if (!isObject(q)) {
      bad('', 'must be a mapping {unit, per, max, policy}');
      return;
    }
    for (const k of Object.keys(q)) if (!['unit', 'per', 'max', 'policy'].includes(k)) bad(k, 'unknown key (unit, per, max, policy)');
    const { unit, per, max, policy = 'hard' } = q;
    if (!QUOTA_UNITS.includes(unit as QuotaUnit)) bad('unit', `must be one of ${QUOTA_UNITS.join(', ')}, got ${JSON.stringify(unit)}`);
    if (!QUOTA_WINDOWS.includes(per as QuotaWindow)) bad('per', `must be one of ${QUOTA_WINDOWS.join(', ')} (UTC; month: the calendar month), got ${JSON.stringify(per)}`);
    if (!Number.isSafeInteger(max) || (max as number) < 1) bad('max', `must be an integer of at least 1, got ${JSON.stringify(max)}`);
    if (!QUOTA_POLICIES.includes(policy as 'hard')) bad('policy', `must be hard (refuse once spent) or soft (warn), got ${JSON.stringify(policy)}`);
    if (problems.length === 0) out.push({ unit: unit as QuotaUnit, per: per as QuotaWindow, max: max as number, policy: policy as 'hard' | 'soft' });
  });
  return problems.length > 0 ? problems : out;
}

/** The UTC window of `per` that holds `nowMs`: [start, end) in ms since the epoch. */
export function windowOf(per: QuotaWindow, nowMs: number): { readonly start: number; readonly end: number } {
  const d = new Date(nowMs);
  const y = d.getUTCFullYear();
  const mo = d.getUTCMonth();
  if (per === 'month') return { start: Date.UTC(y, mo, 1), end: Date.UTC(y, mo + 1, 1) };
  const size = per === 'day' ? 86_400_000 : per === 'hour' ? 3_600_000 : 60_000;
  const start = nowMs - (nowMs % size);
  return { start, end: start + size };
}

/** A window's counter (under the store's prefix): `<id>:quota:<unit>:<per>:<start, ISO 8601>`. */
export function counterKey(id: string, q: Quota, start: number): string {
  return `${id}:quota:${q.unit}:${q.per}:${new Date(start).toISOString().replace('.000Z', 'Z')}`;
}

/** One counter of a check-and-take: add `add` unless a hard one would pass its max (add 0: unless spent). */
export interface QuotaEntry {
  readonly key: string;
  readonly add: number;
  readonly max: number;
  readonly hard: boolean;
  /** The window's end, when the counter expires (ms since the epoch). */
  readonly endMs: number;
}

/** A check-and-take's answer: whether it took, and each counter's value before it. */
export interface QuotaTake {
  readonly ok: boolean;
  readonly used: readonly number[];
}

/** Where quota counters are kept: this process (LocalQuotaCounter) or Redis (auth/limits-store.ts). */
export interface QuotaCounter {
  /** All or nothing: adds each entry's `add` unless a hard entry refuses. */
  take(entries: readonly QuotaEntry[]): QuotaTake | Promise<QuotaTake>;
  /** Charged without a check (units known after the call). */
  add(entries: readonly QuotaEntry[]): void | Promise<void>;
  read(keys: readonly string[]): readonly number[] | Promise<readonly number[]>;
}

/** Whether a hard counter at `used` refuses `add` more against `max`. */
export const refuses = (e: QuotaEntry, used: number): boolean => e.hard && (e.add > 0 ? used + e.add > e.max : used >= e.max);

/** Counters kept in this process (no store, or storeFailure open/local); ended windows, then the oldest, go first. */
export class LocalQuotaCounter implements QuotaCounter {
  readonly #counts = new Map<string, { used: number; endMs: number }>();

  constructor(private readonly maxTracked: number, private readonly nowMs: () => number = Date.now) {}

  take(entries: readonly QuotaEntry[]): QuotaTake {
    const used = this.read(entries.map((e) => e.key));
    const ok = !entries.some((e, i) => refuses(e, used[i]!));
    if (ok) this.add(entries);
    return { ok, used };
  }

  add(entries: readonly QuotaEntry[]): void {
    for (const e of entries) {
      if (e.add <= 0) continue;
      let c = this.#live(e.key);
      if (c === undefined) {
        if (this.#counts.size >= this.maxTracked) this.#evict();
        c = { used: 0, endMs: e.endMs };
        this.#counts.set(e.key, c);
      }
      c.used += e.add;
    }
  }

  read(keys: readonly string[]): number[] {
    return keys.map((k) => this.#live(k)?.used ?? 0);
  }

  #live(key: string): { used: number; endMs: number } | undefined {
    const c = this.#counts.get(key);
    if (c !== undefined && c.endMs <= this.nowMs()) {
      this.#counts.delete(key);
      return undefined;
    }
    return c;
  }

  #evict(): void {
    const now = this.nowMs();
    for (const [k, c] of this.#counts) if (c.endMs <= now) this.#counts.delete(k);
    if (this.#counts.size >= this.maxTracked) this.#counts.delete(this.#counts.keys().next().value!);
  }
}
