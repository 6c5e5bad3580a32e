import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { BufferPool, HEADER_ROOM_BYTES } from '../../../gateway/buffers/pool';
import { keeps, keptBytes, LONG_QUIET_TICKS, RECLAIM_BYTES, RECLAIM_SOON_BYTES, ReclaimState, startReclaim } from '../../../gateway/buffers/reclaim';

const MiB = 1024 * 1024;

describe('pool: idle pages dropped (dropIdle)', () => {
  test('pages released idleMs or longer ago are dropped, coldest first, in every class; warmer ones stay', () => {
    const pool = new BufferPool(64 * MiB);
    const big = [pool.acquire(4 * MiB), pool.acquire(4 * MiB), pool.acquire(4 * MiB)];
    const small = pool.acquire(100 * 1024);
    const t0 = performance.now();
    pool.release(big[0]!);
    pool.release(small);
    const stats0 = pool.stats();
    expect(stats0.retainedBytes).toBe(4 * MiB + HEADER_ROOM_BYTES + 128 * 1024 + HEADER_ROOM_BYTES);
    // Released "now": nothing is idle for 2 s yet.
    expect(pool.dropIdle(2000, t0)).toBe(0);
    pool.release(big[1]!);
    pool.release(big[2]!);
    const released = performance.now();
    // 2 s after the last release: every idle page goes, the bound is untouched.
    expect(pool.dropIdle(2000, released + 2000)).toBe(3 * (4 * MiB + HEADER_ROOM_BYTES) + 128 * 1024 + HEADER_ROOM_BYTES);
    expect(pool.droppedIdle).toBe(4);
    // Freed at once (detached), not left for a full collection to find.
    expect([...big, small].map((b) => b.buffer.byteLength)).toEqual([0, 0, 0, 0]);
    expect(pool.stats()).toMatchObject({ retainedBytes: 0, inUse: 0, droppedBound: 0 });
    // A dropped page is not handed out again: the next acquisition allocates.
    const misses = pool.stats().misses;
    pool.acquire(4 * MiB);
    expect(pool.stats().misses).toBe(misses + 1);
  });

  test('only the pages idle long enough: a page reused meanwhile stays', () => {
    const pool = new BufferPool(64 * MiB);
    const a = pool.acquire(1 * MiB);
    const b = pool.acquire(1 * MiB);
    pool.release(a);
    const early = performance.now();
    pool.release(pool.acquire(1 * MiB)); // a again, warm: released now
    pool.release(b);
    // Both were released at about `early`; at early + 1000 neither is 2 s idle.
    expect(pool.dropIdle(2000, early + 1000)).toBe(0);
    expect(pool.stats().retainedBytes).toBe(2 * (1 * MiB + HEADER_ROOM_BYTES));
  });
});

describe('reclaim: one full collection once a burst is over', () => {
  /** A level (heap in use + ArrayBuffers) the test moves, and a collector that brings it to `live`. */
  function fake(start: number): { level: number; live: number; collections: number; state: ReclaimState } {
    const f = { level: start, live: start, collections: 0, state: undefined as unknown as ReclaimState };
    f.state = new ReclaimState({ level: () => f.level, collect: () => { f.collections++; f.level = f.live; } });
    return f;
  }

  test('under traffic (the level moves every tick) nothing is collected, however high it stands', () => {
    const f = fake(10 * MiB);
    for (let i = 0; i < 20; i++) {
      f.level += (i % 2 === 0 ? 40 : -30) * MiB;
      expect(f.state.tick()).toBe(false);
    }
    expect(f.collections).toBe(0);
  });

  test('a quiet tick with the level RECLAIM_SOON_BYTES above the last collection collects once, then not again', () => {
    const f = fake(10 * MiB);
    f.level = 10 * MiB + RECLAIM_SOON_BYTES + 2 * MiB; // the burst
    expect(f.state.tick()).toBe(false); // it moved: still traffic
    expect(f.state.tick()).toBe(true); // quiet now
    expect(f.level).toBe(10 * MiB);
    for (let i = 0; i < 2 * LONG_QUIET_TICKS; i++) expect(f.state.tick()).toBe(false);
    expect(f.collections).toBe(1);
  });

  test('between RECLAIM_BYTES and RECLAIM_SOON_BYTES above: collected once LONG_QUIET_TICKS in a row were quiet; a busy tick starts the count again', () => {
    let cpuUs = 0;
    let level = 10 * MiB;
    let collections = 0;
    const state = new ReclaimState({ level: () => level, cpu: () => cpuUs, collect: () => { collections++; level = 10 * MiB; } });
    level += RECLAIM_SOON_BYTES - 2 * MiB; // a burst's garbage, the gateway between bursts
    expect(state.tick()).toBe(false); // it moved
    for (let i = 1; i < LONG_QUIET_TICKS; i++) expect(state.tick()).toBe(false);
    cpuUs += 200_000; // the next burst, its pages reused: the level holds
    expect(state.tick()).toBe(false);
    for (let i = 1; i < LONG_QUIET_TICKS; i++) expect(state.tick()).toBe(false);
    expect(collections).toBe(0);
    expect(state.tick()).toBe(true); // the LONG_QUIET_TICKS-th quiet tick in a row
    expect(collections).toBe(1);
    expect(state.tick()).toBe(false);
  });

  test('quiet but less than RECLAIM_BYTES above: left to V8; live memory a collection cannot free is not collected for again', () => {
    const f = fake(10 * MiB);
    f.level += RECLAIM_BYTES - MiB;
    f.state.tick();
    for (let i = 0; i < 2 * LONG_QUIET_TICKS; i++) expect(f.state.tick()).toBe(false);
    // Live: the collection frees nothing, and the next quiet ticks do not try again.
    f.level = f.live = 10 * MiB + RECLAIM_SOON_BYTES + 20 * MiB;
    f.state.tick();
    expect(f.state.tick()).toBe(true);
    expect(f.state.tick()).toBe(false);
    expect(f.collections).toBe(1);
  });

  test('under a steady stream (the level still, the CPU busy) nothing is collected', () => {
    let level = 10 * MiB;
    let cpuUs = 0;
    let collections = 0;
    const state = new ReclaimState({ level: () => level, cpu: () => cpuUs, collect: () => { collections++; } });
    level += RECLAIM_SOON_BYTES + 20 * MiB; // 4 MiB requests in flight, their pages reused: the level holds
    for (let i = 0; i < 10; i++) {
      cpuUs += 400_000; // 40 % of a core each second
      expect(state.tick()).toBe(false);
    }
    // The stream stops: the first tick without CPU collects.
    expect(state.tick()).toBe(true);
    expect(collections).toBe(1);
  });

  test('bytes let go (letGo) count as garbage: a collection follows although the level did not move', () => {
    const f = fake(80 * MiB); // the answers let go are part of the level
    f.live = 8 * MiB;
    expect(f.state.tick()).toBe(false);
    expect(f.state.tick(72 * MiB)).toBe(true);
    expect(f.level).toBe(8 * MiB);
  });

  test('garbage in the JS heap alone, ArrayBuffer memory flat (a burst of small bad requests): collected once quiet', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    /**
     * One burst: true when the reclaim collected it; false when V8 collected it first (its
     * incremental marking, started while the arrays were made, may finish during a wait below on
     * a busy machine — the level is then back at the floor and there is nothing left to do).
     */
    async function burst(): Promise<boolean> {
      // The worker's heap holds the garbage of the tests before this one: collected first, so
      // that no collection while the arrays are made lowers the level below the start's and takes
      // them into the floor (what the reclaim counts from).
      gc();
      const r = startReclaim(new BufferPool(0));
      r.stop(); // ticked here, not by the timer
      // ~40 MB of doubles in 80 KB arrays: V8 heap objects, no ArrayBuffer.
      let garbage: number[][] | undefined = Array.from({ length: 500 }, () => new Array<number>(10_000).fill(1.5));
      const held = process.memoryUsage();
      expect(r.state.tick()).toBe(false); // it moved since the start: still traffic
      expect(garbage.length).toBe(500);
      garbage = undefined;
      // RECLAIM_BYTES above, less than RECLAIM_SOON_BYTES: one full collection once LONG_QUIET_TICKS
      // ticks in a row were quiet. V8's concurrent sweeper may still lower heapUsed between two
      // ticks (later on a busy machine), which is movement, not quiet, and starts the count again.
      let collected = r.state.tick();
      for (let i = 0; i < 4 * LONG_QUIET_TICKS && !collected; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        collected = r.state.tick();
      }
      const freed = held.heapUsed - process.memoryUsage().heapUsed;
      // Either way the garbage is gone: by the reclaim's one collection, or by V8's own.
      if (freed <= 32 * MiB) throw new Error(`garbage still held: collected ${collected}, ${(freed / MiB).toFixed(1)} MiB freed`);
      expect(r.state.collections).toBe(collected ? 1 : 0);
      return collected;
    }
    // V8 may take the garbage first on one attempt; it does not on three in a row unless the
    // reclaim never collects at all.
    let collectedByReclaim = false;
    for (let attempt = 0; attempt < 3 && !collectedByReclaim; attempt++) collectedByReclaim = await burst();
    expect(collectedByReclaim).toBe(true);
  });

  test('memory kept for reuse (keeps) is left out of the level while kept, and counts again once let go', () => {
    const before = keptBytes(); // the process's read pages and staging buffers
    let spare = 32 * MiB;
    const unkeep = keeps(() => spare);
    expect(keptBytes()).toBe(before + 32 * MiB);
    spare = 0; // dropped: garbage now, no longer taken off the level
    expect(keptBytes()).toBe(before);
    spare = 8 * MiB;
    unkeep();
    expect(keptBytes()).toBe(before);
  });

  test('startReclaim runs on an unref\'d timer and stops', () => {
    const r = startReclaim(new BufferPool(0));
    expect(r.state.collections).toBe(0);
    r.stop();
  });
});
