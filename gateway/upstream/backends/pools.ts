// Pools and the model table (docs/production.md, "Pools and the model table"): each pool's health
// and ejection settings, and which pool a call's model goes to — the first upstream.models entry
// whose pattern matches (one pool, a split's weighted draw, or the pool a header pins), else the
// default pool — and whether a copy of the call goes to the entry's mirror pool.
import type { Config } from '../../config/schema';
import { DEFAULT_POOL, type ModelRoute, POOL_KEYS, type PoolKeys, type PoolSpec } from '../../config/pools';

/** upstream.*'s health and ejection keys, as one pool sets them. */
export type PoolSettings = Pick<Config['upstream'], PoolKeys>;

/** How a call's pool was chosen: its model's table entry (one pool, a split's draw, a header's pin), or no entry. */
export type RouteDecision = 'table' | 'split' | 'header' | 'default';
export const ROUTE_DECISIONS: readonly RouteDecision[] = ['table', 'split', 'header', 'default'];

/**
 * The model a call is for, when it names one: it picks the pool, and the backends that have it.
 * One object per call: the pool is chosen at its first pick and kept on it, so a retry stays in the
 * pool a split drew.
 */
export interface ModelKey {
  readonly name: string;
  /** '' or absent: any version. */
  readonly version?: string;
  /** The request's header, by lower-case name, for a table entry's `header` pin. */
  readonly header?: (name: string) => string | undefined;
  /** Told once, when the pool is chosen (the request's record, the span); `mirror`: where a copy goes too. */
  readonly routed?: (pool: string, decision: RouteDecision, mirror: string | undefined) => void;
  /** Set by Pools.poolOf. */
  pool?: string;
  /** Set by Pools.poolOf when a copy of this call goes to a mirror pool (upstream.models mirror). */
  mirror?: string;
}

/** An upstream.models entry, with its split's smooth weighted round-robin state. */
interface TableEntry {
  readonly pattern: RegExp;
  readonly header: string | undefined;
  readonly split: { readonly pool: string; readonly weight: number; current: number }[];
  readonly total: number;
  /** The mirror, and its share so far (a call is mirrored each time it reaches 100). */
  readonly mirror: { readonly pool: string; readonly percent: number; credit: number } | undefined;
}

/** A model pattern of upstream.models as a RegExp: `*` is any run of characters, the rest literal. */
export function modelPattern(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`, 's');
}

/**
 * The next pool of a split: smooth weighted round robin (nginx's), so that every run of `total`
 * calls has each pool's exact share, interleaved (90/10: one canary call in every ten).
 */
function draw(entry: TableEntry): string {
  if (entry.split.length === 1) return entry.split[0]!.pool;
  let best = entry.split[0]!;
  for (const s of entry.split) {
    s.current += s.weight;
    if (s.current > best.current) best = s;
  }
  best.current -= entry.total;
  return best.pool;
}

function pickPoolKeys(o: PoolSettings): PoolSettings {
  return Object.fromEntries(POOL_KEYS.map((k) => [k, o[k]])) as PoolSettings;
}

export class Pools {
  /** Each pool's settings: upstream.*'s, with what the pool sets itself over them. */
  readonly #settings = new Map<string, PoolSettings>();
  readonly #defaults: PoolSettings;
  readonly #routes: readonly TableEntry[];
  /** Calls routed, by pool and then by decision: counted per call without a key made for it. */
  readonly #routed = new Map<string, Record<RouteDecision, number>>();

  /** Calls routed, by pool and decision ("pool\u0000decision"), for the metrics: made when read. */
  get routed(): ReadonlyMap<string, number> {
    const out = new Map<string, number>();
    for (const [pool, counts] of this.#routed) for (const d of ROUTE_DECISIONS) if (counts[d] > 0) out.set(`${pool}\u0000${d}`, counts[d]);
    return out;
  }

  /** `defaults`: upstream.*, the default pool's settings; `pools`: upstream.pools; `models`: upstream.models. */
  constructor(defaults: PoolSettings, pools: readonly PoolSpec[], models: readonly ModelRoute[]) {
    this.#defaults = defaults;
    this.#settings.set(DEFAULT_POOL, defaults);
    for (const p of pools) this.#settings.set(p.name, { ...pickPoolKeys(defaults), ...p.settings });
    this.#routes = models.map((r) => ({
      pattern: modelPattern(r.model), header: r.header, split: r.split.map((s) => ({ ...s, current: 0 })),
      total: r.split.reduce((a, s) => a + s.weight, 0), mirror: r.mirror === undefined ? undefined : { ...r.mirror, credit: 0 },
    }));
  }

  /** The health and ejection settings of `pool`. */
  settings(pool: string): PoolSettings {
    return this.#settings.get(pool) ?? this.#defaults;
  }

  /** The pool that serves `model`'s calls: the first upstream.models entry that matches, else the default pool. */
  poolOf(model: ModelKey | undefined): string {
    if (model === undefined) return DEFAULT_POOL;
    if (model.pool !== undefined) return model.pool;
    let pool = DEFAULT_POOL;
    let decision: RouteDecision = 'default';
    let entry: TableEntry | undefined;
    for (let i = 0; i < this.#routes.length && entry === undefined; i++) if (this.#routes[i]!.pattern.test(model.name)) entry = this.#routes[i];
    if (entry !== undefined) {
      const pinned = entry.header === undefined ? undefined : model.header?.(entry.header);
      if (pinned !== undefined && entry.split.some((s) => s.pool === pinned)) {
        pool = pinned;
        decision = 'header';
      } else {
        pool = draw(entry);
        decision = entry.split.length === 1 ? 'table' : 'split';
      }
      // Mirrored: `percent` calls in every hundred, evenly spaced.
      const m = entry.mirror;
      if (m !== undefined && (m.credit += m.percent) >= 100) {
        m.credit -= 100;
        model.mirror = m.pool;
      }
    }
    model.pool = pool;
    let counts = this.#routed.get(pool);
    if (counts === undefined) this.#routed.set(pool, counts = { table: 0, split: 0, header: 0, default: 0 });
    counts[decision]++;
    model.routed?.(pool, decision, model.mirror);
    return pool;
  }
}
