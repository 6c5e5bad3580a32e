// Mirror calls (docs/production.md, "Pools and the model table"): the model table chooses which calls
// are copied and to which pool (pools.ts); this bounds the copies running at once
// (upstream.mirrorMaxInFlight) and counts what became of each. A copy that would pass the bound, or
// finds no backend in its pool, is dropped, not queued: a slow or dead mirror never holds a call.
import type { Backend } from './backend';
import type { ModelKey } from './pools';

/** What became of a mirrored copy: its answer came (and was discarded), it failed, or it was not sent. */
export type MirrorOutcome = 'answered' | 'failed' | 'dropped';
export const MIRROR_OUTCOMES: readonly MirrorOutcome[] = ['answered', 'failed', 'dropped'];

export class Mirrors {
  readonly #max: number;
  /** Mirrored calls by pool and outcome ("pool\u0000outcome"), for the metrics. */
  readonly counts = new Map<string, number>();
  /** Mirror calls running now, against upstream.mirrorMaxInFlight. */
  inFlight = 0;

  constructor(max: number) {
    this.#max = max;
  }

  /**
   * A mirror call may start: a backend of `pool` that has the model (`pick`, as for any call), unless
   * `max` mirrors are running (then, or with no backend, the copy is dropped and counted). The
   * caller reports the mirror's end with ended().
   */
  backend(model: ModelKey, pool: string, pick: (model: ModelKey) => Backend | undefined): Backend | undefined {
    if (this.inFlight >= this.#max) {
      this.#count(pool, 'dropped');
      return undefined;
    }
    const b = pick({ name: model.name, version: model.version, pool });
    if (b === undefined) {
      this.#count(pool, 'dropped');
      return undefined;
    }
    this.inFlight++;
    return b;
  }

  /** A mirror call that started has ended: its answer came (ok) or it failed. */
  ended(pool: string, ok: boolean): void {
    if (this.inFlight > 0) this.inFlight--;
    this.#count(pool, ok ? 'answered' : 'failed');
  }

  #count(pool: string, outcome: MirrorOutcome): void {
    const key = `${pool}\u0000${outcome}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}
