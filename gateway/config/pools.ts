// upstream.pools and upstream.models (docs/production.md, "Pools and the model table"): named sets
// of Triton backends beside upstream.backends (the pool named "default"), each with its own targets
// and health settings, and the table that sends each model's calls to one of them. This module
// checks both values (syntax, every problem listed by key); upstream/backends/pools.ts uses them.
import { isObject, problemsAt } from './problems';
import { addressProblem } from './address';

/** The health and ejection keys a pool may set for itself (upstream.pools.<name>.*). */
export type PoolKeys = 'healthCheckIntervalMs' | 'healthyThreshold' | 'unhealthyThreshold' | 'ejectAfterFailures' | 'ejectionBaseMs' | 'maxEjectionPercent';
export const POOL_KEYS: readonly PoolKeys[] = ['healthCheckIntervalMs', 'healthyThreshold', 'unhealthyThreshold', 'ejectAfterFailures', 'ejectionBaseMs', 'maxEjectionPercent'];

/** A pool of backends: its targets and what it sets of the health keys (the rest are upstream.*'s). */
export interface PoolSpec {
  readonly name: string;
  readonly targets: readonly string[];
  readonly settings?: Partial<Readonly<Record<PoolKeys, number>>>;
}

/**
 * upstream.models: calls for a model matching `model` (a name, `*` for any run of characters) go to
 * `pool`, or are split over several pools by weight (a canary); `header`, when set, names a request
 * header whose value, naming one of the entry's pools, pins the request to it.
 */
export interface ModelRoute {
  readonly model: string;
  /** The pools and their weights: one entry of weight 1 for `pool: x`. */
  readonly split: readonly { readonly pool: string; readonly weight: number }[];
  /** Lower-case header name. */
  readonly header?: string;
  /** A copy of `percent` % of the calls also goes to `pool`; its answer is discarded. */
  readonly mirror?: { readonly pool: string; readonly percent: number };
}

export const DEFAULT_POOL = 'default';

/** The bounds of each setting a pool may give itself: the same as upstream.*'s (config/schema.ts). */
const BOUNDS: Record<PoolKeys, readonly [number, number]> = {
  healthCheckIntervalMs: [100, 2 ** 31 - 1],
  healthyThreshold: [1, 100],
  unhealthyThreshold: [1, 100],
  ejectAfterFailures: [1, 10_000],
  ejectionBaseMs: [1, 2 ** 31 - 1],
  maxEjectionPercent: [0, 100],
};

const POOL_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** `upstream.pools`: a mapping of pool name → `{backends: [...], <health keys>?}`. */
export function parsePools(raw: unknown): { value: PoolSpec[] } | { problem: string[] } {
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return { value: [] };
  if (!isObject(raw)) return { problem: ['must be a mapping of pool names to {backends: [host:port | unix:/path, …]}'] };
  const problems: string[] = [];
  const out: PoolSpec[] = [];
  const seen = new Map<string, string>();
  for (const [name, p] of Object.entries(raw)) {
    const bad = problemsAt(problems, `upstream.pools.${name}`);
    if (!POOL_NAME.test(name)) { bad('', 'a pool name is lower-case letters, digits, \'-\' and \'_\''); continue; }
    if (name === DEFAULT_POOL) { bad('', '"default" is upstream.backends\' pool; give those backends there'); continue; }
    if (!isObject(p)) { bad('', 'must be a mapping with backends'); continue; }
    for (const k of Object.keys(p)) if (k !== 'backends' && !(POOL_KEYS as readonly string[]).includes(k)) bad(k, `unknown key (known: backends, ${POOL_KEYS.join(', ')})`);
    const list = typeof p.backends === 'string' ? p.backends.split(',').map((x) => x.trim()) : p.backends;
    const targets: string[] = [];
    if (!Array.isArray(list) || list.length === 0) bad('backends', 'must list at least one host:port, dns:///name:port or unix:/path');
    else {
      for (const item of list as unknown[]) {
        const problem = addressProblem(item);
        if (problem !== undefined) { bad('backends', problem); continue; }
        const t = item as string;
        const other = seen.get(t);
        if (other !== undefined) bad('backends', `${t} is also in pool ${other}; a backend belongs to one pool`);
        seen.set(t, name);
        targets.push(t);
      }
    }
    const settings: Partial<Record<PoolKeys, number>> = {};
    for (const k of POOL_KEYS) {
      const v = p[k];
      if (v === undefined) continue;
      const [min, max] = BOUNDS[k];
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) bad(k, `must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
      else settings[k] = v;
    }
    out.push({ name, targets, settings });
  }
  return problems.length > 0 ? { problem: problems } : { value: out };
}

/**
 * `upstream.models`: a list of `{model: <name or pattern with *>, pool: <name>}` or
 * `{model, split: {<pool>: <weight>, …}}`, each optionally with `header: <name>` and
 * `mirror: {pool, percent}`; the first match wins.
 */
export function parseModelRoutes(raw: unknown): { value: ModelRoute[] } | { problem: string[] } {
  if (raw === undefined || raw === null) return { value: [] };
  if (!Array.isArray(raw)) return { problem: ['must be a list of {model, pool}'] };
  const problems: string[] = [];
  const out: ModelRoute[] = [];
  raw.forEach((r: unknown, i) => {
    const bad = problemsAt(problems, `upstream.models[${i}]`);
    if (!isObject(r)) { bad('', 'must be a mapping {model, pool}'); return; }
    for (const k of Object.keys(r)) if (!['model', 'pool', 'split', 'header', 'mirror'].includes(k)) bad(k, 'unknown key (known: model, pool, split, header, mirror)');
    const before = problems.length;
    if (typeof r.model !== 'string' || r.model === '') bad('model', 'must be a model name, or a pattern with *');
    const split: { pool: string; weight: number }[] = [];
    if ((r.pool === undefined) === (r.split === undefined)) bad('', 'give pool (one pool) or split (pools and weights), not both');
    else if (r.pool !== undefined) {
      if (typeof r.pool !== 'string' || r.pool === '') bad('pool', 'must name a pool of upstream.pools, or default');
      else split.push({ pool: r.pool, weight: 1 });
    } else if (!isObject(r.split) || Object.keys(r.split).length === 0) bad('split', 'must map pool names to weights, e.g. {stable: 90, canary: 10}');
    else {
      for (const [pool, w] of Object.entries(r.split)) {
        if (typeof w !== 'number' || !Number.isInteger(w) || w < 0 || w > 1_000_000) bad(`split.${pool}`, `a weight is an integer in [0, 1000000], got ${JSON.stringify(w)}`);
        else split.push({ pool, weight: w });
      }
      if (split.length > 0 && split.every((s) => s.weight === 0)) bad('split', 'at least one weight must be above 0');
    }
    if (r.header !== undefined && (typeof r.header !== 'string' || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(r.header))) bad('header', 'must be a header name');
    let mirror: { pool: string; percent: number } | undefined;
    if (r.mirror !== undefined) {
      const m = r.mirror;
      if (!isObject(m) || typeof m.pool !== 'string' || m.pool === '' || typeof m.percent !== 'number' || !(m.percent > 0 && m.percent <= 100)
        || Object.keys(m).some((k) => k !== 'pool' && k !== 'percent')) {
        bad('mirror', 'must be {pool: <name>, percent: <above 0, at most 100>}');
      } else mirror = { pool: m.pool, percent: m.percent };
    }
    if (problems.length === before) {
      out.push({ model: r.model as string, split, ...typeof r.header === 'string' ? { header: r.header.toLowerCase() } : {}, ...mirror === undefined ? {} : { mirror } });
    }
  });
  return problems.length > 0 ? { problem: problems } : { value: out };
}

/** Checks across the two: every pool the table names exists. */
export function modelRouteProblems(pools: readonly PoolSpec[], routes: readonly ModelRoute[]): string[] {
  const names = new Set([DEFAULT_POOL, ...pools.map((p) => p.name)]);
  const known = `(pools: ${[...names].join(', ')})`;
  return routes.flatMap((r, i) => [
    ...r.split.filter((s) => !names.has(s.pool)).map((s) =>
      `upstream.models[${i}].${r.split.length === 1 && s.weight === 1 ? 'pool' : `split.${s.pool}`}: no pool named ${JSON.stringify(s.pool)} ${known}`),
    ...r.mirror === undefined || names.has(r.mirror.pool) ? [] : [`upstream.models[${i}].mirror.pool: no pool named ${JSON.stringify(r.mirror.pool)} ${known}`],
    ...r.mirror !== undefined && r.split.some((s) => s.pool === r.mirror!.pool)
      ? [`upstream.models[${i}].mirror.pool: ${r.mirror.pool} already serves the model's calls; mirror to another pool`] : [],
  ]);
}
