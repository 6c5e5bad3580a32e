// A list through its members themselves, for long-lived registries of short-lived objects (the
// drain's answers under way, a plane's running calls): adding and removing allocate nothing.
//
// Why not a Set: V8 replaces a Set's or Map's table as members come and go, and a table that had
// been promoted to the old generation keeps, once replaced and dead, the members it listed then:
// the scavenger takes its slots as roots until the next full collection, so those members, and
// all they reach, survive every scavenge and are promoted in turn. One such Set on the request
// path promoted a third of what a 64 B request allocates (bench/RESULTS.md, "Promotions through
// dead tables"). A removed member here has its links cleared: nothing dead points into the young
// generation.

/** A member's links: owned by the one list it is in (a member is in at most one list of this kind). */
export interface Linked<T> {
  linkPrev: T | undefined;
  linkNext: T | undefined;
  linked: boolean;
}

export class LinkedList<T extends Linked<T>> implements Iterable<T> {
  first: T | undefined;
  last: T | undefined;
  size = 0;

  /** Adds `m` at the end (it must not be in a list). */
  add(m: T): void {
    m.linkPrev = this.last;
    m.linkNext = undefined;
    if (this.last === undefined) this.first = m;
    else this.last.linkNext = m;
    this.last = m;
    m.linked = true;
    this.size++;
  }

  /** Removes `m` if it is listed; its links are cleared. */
  delete(m: T): void {
    if (!m.linked) return;
    m.linked = false;
    if (m.linkPrev === undefined) this.first = m.linkNext;
    else m.linkPrev.linkNext = m.linkNext;
    if (m.linkNext === undefined) this.last = m.linkPrev;
    else m.linkNext.linkPrev = m.linkPrev;
    m.linkPrev = m.linkNext = undefined;
    this.size--;
  }

  /** The members in the order they were added; one may be removed while it is visited. */
  *[Symbol.iterator](): Iterator<T> {
    for (let m = this.first; m !== undefined;) {
      const next = m.linkNext;
      yield m;
      m = next;
    }
  }
}
