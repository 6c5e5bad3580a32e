// A connection's open streams by id: an open-addressing table of our own instead of a Map. A
// Map's table is replaced as streams open and close, and a replaced table that had reached the old
// generation keeps, dead, the streams it held — and their calls, and all those reach — alive
// through every scavenge until a full collection (../../linked-list.ts says how). This table is
// replaced only when it grows, and the old one is emptied then.
//
// Our stream ids are odd and rising (RFC 9113 §5.1.1), so id >>> 1 numbers them 0, 1, 2, …: the
// streams open at once sit in consecutive slots, and a lookup is most often one probe. Linear
// probing; a removal shifts the entries after it back (no tombstones).

const FIRST_SLOTS = 16;

export class StreamTable<T extends { readonly id: number }> {
  #slots: (T | undefined)[] = new Array<T | undefined>(FIRST_SLOTS).fill(undefined);
  #mask = FIRST_SLOTS - 1;
  size = 0;

  get(id: number): T | undefined {
    const slots = this.#slots;
    const mask = this.#mask;
    for (let i = (id >>> 1) & mask; ; i = (i + 1) & mask) {
      const s = slots[i];
      if (s === undefined || s.id === id) return s;
    }
  }

  /** Adds `s`, whose id is not in the table. */
  add(s: T): void {
    if (2 * (this.size + 1) > this.#slots.length) this.#grow();
    this.#place(s);
    this.size++;
  }

  /** Removes `s` when it is the table's entry for its id; returns whether it was. */
  delete(s: T): boolean {
    const slots = this.#slots;
    const mask = this.#mask;
    let i = (s.id >>> 1) & mask;
    for (; ; i = (i + 1) & mask) {
      const e = slots[i];
      if (e === undefined) return false;
      if (e === s) break;
    }
    slots[i] = undefined;
    this.size--;
    // Entries after the hole that could not take their own slot move back into it.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const e = slots[j];
      if (e === undefined) return true;
      const home = (e.id >>> 1) & mask;
      // e stays when its home lies cyclically in (i, j].
      if (i <= j ? home > i && home <= j : home > i || home <= j) continue;
      slots[i] = e;
      slots[j] = undefined;
      i = j;
    }
  }

  /** The entries, in a new array (the table may change while they are visited). */
  values(): T[] {
    const out: T[] = [];
    const slots = this.#slots;
    for (let i = 0; i < slots.length; i++) if (slots[i] !== undefined) out.push(slots[i]!);
    return out;
  }

  clear(): void {
    this.#slots.fill(undefined);
    this.size = 0;
  }

  #place(s: T): void {
    const slots = this.#slots;
    const mask = this.#mask;
    let i = (s.id >>> 1) & mask;
    while (slots[i] !== undefined) i = (i + 1) & mask;
    slots[i] = s;
  }

  #grow(): void {
    const old = this.#slots;
    this.#slots = new Array<T | undefined>(2 * old.length).fill(undefined);
    this.#mask = this.#slots.length - 1;
    for (let i = 0; i < old.length; i++) if (old[i] !== undefined) this.#place(old[i]!);
    old.fill(undefined); // dead from now on: it must not keep what it held
  }
}
