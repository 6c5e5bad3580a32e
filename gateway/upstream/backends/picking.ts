// Which backend of a pool a call goes to (docs/production.md#backends-dns-health-retries). The
// candidates are the pool's backends that have the call's model ready when any is known to
// (model-index.ts); among them the ready ones or, when none is ready, those not known to be down
// (Envoy's panic routing, narrowed: a backend with no verdict yet, or whose failed checks only timed
// out). A sequence's key picks by rendezvous hashing, so its calls meet the Triton that keeps its
// state; other calls by round robin, or least-request: the round-robin choice against one other
// drawn at random, the lower load winning (the power of two choices, Envoy's LEAST_REQUEST).
import { type Backend, isReady, mayBeUp, modelKey } from './backend';
import type { ModelKey } from './pools';

const FNV_OFFSET = 0x811c9dc5;

/** 32-bit FNV-1a of `s`'s UTF-16 code units, from `seed`, then mixed (murmur3's finaliser) so close inputs spread. */
function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A backend's least-request load: our calls in flight there, plus its Triton's queue for the model when read. */
function load(b: Backend, model: ModelKey | undefined): number {
  if (b.pending === undefined || model === undefined) return b.inFlight;
  return b.inFlight + (b.pending.get(modelKey(model.name, model.version)) ?? b.pending.get(model.name) ?? 0);
}

/**
 * The usable backend `key` ranks highest (rendezvous hashing): the same one for every call of
 * a key while the set does not change, and when it does only the keys of the backends that left
 * or came move. A Triton sequence (model and sequence_id) keeps its state on one server.
 */
function rendezvous(backends: readonly Backend[], key: string, usable: (b: Backend) => boolean): Backend | undefined {
  let best: Backend | undefined;
  let bestScore = -1;
  const k = fnv1a(key, FNV_OFFSET);
  for (const b of backends) {
    if (!usable(b)) continue;
    const score = fnv1a(b.address, k);
    if (score > bestScore) {
      best = b;
      bestScore = score;
    }
  }
  return best;
}

export class Picking {
  readonly #leastRequest: boolean;
  readonly #random: () => number;
  /** Where round robin goes on from, in the set's list. */
  #next = 0;

  constructor(leastRequest: boolean, random: () => number) {
    this.#leastRequest = leastRequest;
    this.#random = random;
  }

  /**
   * The backend of `pool` for a call: among those that have `model` ready when any is known to;
   * among the ready ones or, when none is ready, those not known to be down; skipping `exclude`
   * (the one a retry leaves). A sequence's key (`affinity`) picks by rendezvous hashing, other
   * calls by least-request or round robin. Undefined when there is none.
   */
  pick(backends: readonly Backend[], pool: string, exclude?: Backend, affinity?: string, model?: ModelKey): Backend | undefined {
    let known = false;
    if (model !== undefined) for (let i = 0; i < backends.length && !known; i++) known = backends[i]!.pool === pool && backends[i]!.has(model);
    // The criteria of this pick, read by the one predicate (#usable): no closures per pick.
    const c = this.#criteria;
    c.pool = pool;
    c.exclude = exclude;
    c.model = known ? model : undefined;
    c.ready = true;
    const ready = affinity !== undefined ? rendezvous(backends, affinity, this.#usable) : this.#balanced(backends, this.#usable, model);
    if (ready !== undefined) return ready;
    c.ready = false;
    return affinity !== undefined ? rendezvous(backends, affinity, this.#usable) : this.#balanced(backends, this.#usable, model);
  }

  readonly #criteria: { pool: string; exclude: Backend | undefined; model: ModelKey | undefined; ready: boolean } = {
    pool: '', exclude: undefined, model: undefined, ready: true,
  };

  /**
   * Whether `b` may take the pick's call: in its pool, not the one excluded, having the model when
   * any backend is known to (a backend whose index is not known yet may have it; one whose index
   * lacks it does not), and ready — or, when none is, not known to be down.
   */
  readonly #usable = (b: Backend): boolean => {
    const c = this.#criteria;
    if (b.pool !== c.pool || b === c.exclude || (c.model !== undefined && b.models !== undefined && !b.has(c.model))) return false;
    return c.ready ? isReady(b) : mayBeUp(b);
  };

  /**
   * Round robin; with least-request, the round-robin choice is weighed against one other usable
   * backend drawn at random, and the one with the lower load wins (ties keep the round-robin
   * choice, so equal loads spread evenly). The load is the calls this process has in flight
   * there, plus, with upstream.queueMetrics, the requests waiting in that Triton's queue for the model.
   */
  #balanced(list: readonly Backend[], usable: (b: Backend) => boolean, model?: ModelKey): Backend | undefined {
    const n = list.length;
    let first: Backend | undefined;
    for (let i = 0; i < n; i++) {
      const at = (this.#next + i) % n;
      const b = list[at]!;
      if (!usable(b)) continue;
      this.#next = at + 1;
      first = b;
      break;
    }
    if (first === undefined || !this.#leastRequest) return first;
    let others = 0;
    for (const b of list) if (b !== first && usable(b)) others++;
    if (others === 0) return first;
    let draw = Math.floor(this.#random() * others);
    for (const b of list) {
      if (b === first || !usable(b)) continue;
      if (draw-- === 0) return load(b, model) < load(first, model) ? b : first;
    }
    return first;
  }
}
