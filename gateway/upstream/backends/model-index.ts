// The models each backend has ready (docs/production.md, "Pools and the model table"): its
// repository index, read as soon as it is up and then every upstream.modelRefreshMs, and an answer
// that a model is unknown there, which takes the model off it at once. A backend whose index is not
// known yet counts as having every model (picking.ts).
import { type Backend, isReady, mayBeUp, modelKey, type SetContext } from './backend';
import type { ModelKey } from './pools';

/** A backend's ready models changed: the names that came and went (all at its first read), how many it has now. */
export interface ModelsChanged {
  readonly address: string; readonly pool: string; readonly loaded: readonly string[]; readonly unloaded: readonly string[]; readonly count: number;
  /** The backend's first read: every model it has. */
  readonly first: boolean;
}

/** Reads an address's ready models (HealthChecker.models), every `refreshMs`. */
export interface IndexReads {
  read(address: string, timeoutMs: number): Promise<ReadonlySet<string> | undefined>;
  readonly refreshMs: number;
}

/** The model names (no version entries) of `from` that `without` lacks, sorted. */
function names(from: ReadonlySet<string>, without: ReadonlySet<string>): string[] {
  return [...from].filter((k) => !without.has(k) && !k.includes('\u0000')).sort();
}

export class ModelIndex {
  readonly #set: SetContext;
  readonly #changed: (e: ModelsChanged) => void;
  readonly #reads: IndexReads | undefined;

  /** Without `reads` (upstream.modelRefreshMs 0, or a checker that cannot read it), only answers take models off. */
  constructor(set: SetContext, changed: (e: ModelsChanged) => void, reads: IndexReads | undefined) {
    this.#set = set;
    this.#changed = changed;
    this.#reads = reads;
  }

  /** `b` is up: its index is read now, then on its interval (once started, the reads go on). */
  watch(b: Backend): void {
    if (this.#reads !== undefined && b.modelTimer === undefined) this.#schedule(b, 0);
  }

  /**
   * `b` answered that it does not have `model` ready (NOT_FOUND, or UNAVAILABLE for a model not
   * ready): it gets no more of the model's calls until its index says otherwise.
   */
  lacks(b: Backend, model: ModelKey): void {
    if (b.models === undefined) b.models = new Set(this.#everyModelBut(model));
    else {
      b.models.delete(modelKey(model.name, model.version));
      if (model.version === undefined || model.version === '') for (const k of [...b.models]) if (k.startsWith(`${model.name}\u0000`)) b.models.delete(k);
    }
  }

  /** Whether a backend of `pool` other than `but` is known to have the model ready. */
  anotherHas(model: ModelKey, pool: string, but: Backend): boolean {
    return this.#set.backends().some((b) => b !== but && b.pool === pool && b.has(model) && (isReady(b) || mayBeUp(b)));
  }

  /**
   * A backend whose index was never read, told it lacks a model: its set starts as what the other
   * backends are known to have, so it keeps getting their calls until its own index comes.
   */
  #everyModelBut(model: ModelKey): string[] {
    const all = new Set<string>();
    for (const b of this.#set.backends()) for (const k of b.models ?? []) all.add(k);
    all.delete(modelKey(model.name, model.version));
    return [...all];
  }

  #schedule(b: Backend, ms: number): void {
    this.#set.clock.clearTimeout(b.modelTimer);
    b.modelTimer = this.#set.clock.setTimeout(() => void this.#read(b), ms);
  }

  /**
   * Reads `b`'s index, then again on the interval. A backend known down is not asked; an index
   * that cannot be read leaves what was known.
   */
  async #read(b: Backend): Promise<void> {
    const reads = this.#reads!;
    if (this.#set.closed() || !b.member) return;
    if (isReady(b) || mayBeUp(b)) {
      let models: ReadonlySet<string> | undefined;
      try {
        models = await reads.read(b.address, Math.min(reads.refreshMs, 5000));
      } catch {
        models = undefined;
      }
      if (this.#set.closed() || !b.member) return;
      if (models !== undefined) this.#update(b, models);
    }
    this.#schedule(b, Math.round(reads.refreshMs * (0.9 + 0.2 * this.#set.random())));
  }

  #update(b: Backend, models: ReadonlySet<string>): void {
    const first = b.models === undefined;
    const before = b.models ?? new Set<string>();
    b.models = new Set(models);
    const loaded = names(b.models, before);
    const unloaded = names(before, b.models);
    if (loaded.length > 0 || unloaded.length > 0) {
      this.#changed({ address: b.address, pool: b.pool, loaded, unloaded, count: names(b.models, new Set()).length, first });
    }
  }
}
