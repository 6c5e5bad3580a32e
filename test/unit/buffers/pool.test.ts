import { BufferPool, HEADER_ROOM_BYTES, MIN_CLASS_BYTES, NOT_POOLED } from '../../../gateway/buffers/pool';

const KiB = 1024;
const MiB = 1024 * KiB;
const ROOM = HEADER_ROOM_BYTES;

/** The error code a call throws. */
function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return (err as { code: string }).code;
  }
  throw new Error('expected a throw');
}

describe('size classes', () => {
  test('the largest class is the largest power of two up to half the bound; too small a bound disables pooling', () => {
    expect(new BufferPool(64 * MiB).maxPooledBytes).toBe(32 * MiB + ROOM);
    expect(new BufferPool(100 * MiB).maxPooledBytes).toBe(32 * MiB + ROOM);
    expect(new BufferPool(2 * (64 * KiB + ROOM)).maxPooledBytes).toBe(64 * KiB + ROOM);
    expect(new BufferPool(2 * (64 * KiB + ROOM) - 1).enabled).toBe(false);
    expect(new BufferPool(0).enabled).toBe(false);
  });

  test('a message takes the smallest class holding it (a power of two + 4 KiB of header room), as a view from the page start', () => {
    const pool = new BufferPool(64 * MiB);
    const cases = [
      [64 * KiB, 64 * KiB], [64 * KiB + ROOM, 64 * KiB], [64 * KiB + ROOM + 1, 128 * KiB], [600 * 1000, 1 * MiB],
      [4 * MiB, 4 * MiB], [4 * MiB + 300, 4 * MiB], [4 * MiB + ROOM + 1, 8 * MiB], [32 * MiB + ROOM, 32 * MiB],
    ] as const;
    for (const [n, page] of cases) {
      const b = pool.acquire(n);
      expect([b.length, b.byteOffset, b.buffer.byteLength]).toEqual([n, 0, page + ROOM]);
    }
    expect(pool.stats()).toMatchObject({ hits: 0, misses: cases.length, inUse: cases.length, retainedBytes: 0 });
  });

  test('below the smallest class and above the largest: Buffer.allocUnsafe, not counted, nothing to release', () => {
    const pool = new BufferPool(64 * MiB);
    const small = pool.acquire(MIN_CLASS_BYTES - 1);
    const big = pool.acquire(32 * MiB + ROOM + 1);
    expect([small.length, big.length, big.buffer.byteLength]).toEqual([MIN_CLASS_BYTES - 1, 32 * MiB + ROOM + 1, 32 * MiB + ROOM + 1]);
    expect(pool.stats()).toEqual({ hits: 0, misses: 0, droppedBound: 0, droppedInFlight: 0, retainedBytes: 0, inUse: 0 });
    expect(codeOf(() => pool.release(big))).toBe('ERR_BUFFER_POOL_FOREIGN');
  });
});

describe('reuse', () => {
  test('a released page serves the next message of its class: a hit, reused(), no new memory', () => {
    const pool = new BufferPool(64 * MiB);
    const a = pool.acquire(600_000);
    expect(pool.reused(a)).toBe(false);
    pool.release(a);
    expect(pool.stats()).toMatchObject({ misses: 1, hits: 0, inUse: 0, retainedBytes: 1 * MiB + ROOM });
    const b = pool.acquire(700_000);
    expect(b.buffer).toBe(a.buffer);
    expect(b.length).toBe(700_000);
    expect(pool.reused(b)).toBe(true);
    expect(pool.stats()).toMatchObject({ misses: 1, hits: 1, inUse: 1, retainedBytes: 0 });
    // Another class does not share it.
    const c = pool.acquire(2 * MiB);
    expect(c.buffer).not.toBe(a.buffer);
    expect(pool.stats()).toMatchObject({ misses: 2, hits: 1 });
  });

  test('LIFO per class: the page released last goes out first', () => {
    const pool = new BufferPool(64 * MiB);
    const [a, b, c] = [pool.acquire(100 * KiB), pool.acquire(100 * KiB), pool.acquire(100 * KiB)];
    pool.release(a);
    pool.release(b);
    pool.release(c);
    expect([pool.acquire(100 * KiB).buffer, pool.acquire(100 * KiB).buffer, pool.acquire(100 * KiB).buffer]).toEqual([c.buffer, b.buffer, a.buffer]);
    expect(pool.stats()).toMatchObject({ hits: 3, misses: 3, inUse: 3, retainedBytes: 0 });
  });
});

describe('the bound on retained bytes', () => {
  test('making room evicts the idle page released longest ago, whatever its class', () => {
    const SMALL = 64 * KiB + ROOM;
    const BIG = 128 * KiB + ROOM;
    const pool = new BufferPool(4 * SMALL); // classes 64 and 128 KiB
    const small = [1, 2, 3, 4].map(() => pool.acquire(64 * KiB));
    const big = pool.acquire(128 * KiB);
    for (const b of small) pool.release(b);
    expect(pool.stats()).toMatchObject({ retainedBytes: 4 * SMALL, droppedBound: 0 });
    pool.release(big); // needs a 132 KiB page's room: the two coldest 68 KiB pages go
    expect(pool.stats()).toMatchObject({ retainedBytes: 2 * SMALL + BIG, droppedBound: 2, inUse: 0 });
    expect(pool.acquire(128 * KiB).buffer).toBe(big.buffer);
    expect(pool.acquire(64 * KiB).buffer).toBe(small[3]!.buffer);
    expect(pool.acquire(64 * KiB).buffer).toBe(small[2]!.buffer);
    expect(pool.acquire(64 * KiB).buffer).not.toBe(small[1]!.buffer); // evicted: a new page
    expect(pool.stats()).toMatchObject({ hits: 3, misses: 6, retainedBytes: 0 });
  });

  test('a long mixed sequence never retains more than the bound and counts every page', () => {
    const pool = new BufferPool(3 * MiB);
    const held: Buffer[] = [];
    let seed = 7;
    const next = (): number => (seed = (seed * 48271) % 2147483647); // MINSTD: exact in doubles
    let acquired = 0;
    for (let i = 0; i < 2000; i++) {
      if (held.length > 0 && (held.length > 6 || next() % 2 === 0)) {
        pool.release(held.splice(next() % held.length, 1)[0]!);
      } else {
        held.push(pool.acquire(64 * KiB + (next() % (1 * MiB - 60 * KiB)))); // every class of a 3 MiB pool
        acquired++;
      }
      const s = pool.stats();
      expect(s.retainedBytes).toBeLessThanOrEqual(3 * MiB);
      expect(s.inUse).toBe(held.length);
    }
    const s = pool.stats();
    expect(s.hits + s.misses).toBe(acquired);
    expect(s.hits).toBeGreaterThan(0);
    expect(s.droppedBound).toBeGreaterThan(0);
  });
});

describe('release guards', () => {
  test('releasing twice is refused, also once the page is idle or evicted', () => {
    const pool = new BufferPool(2 * (64 * KiB + ROOM));
    const a = pool.acquire(64 * KiB);
    pool.release(a);
    expect(codeOf(() => pool.release(a))).toBe('ERR_BUFFER_POOL_DOUBLE_RELEASE');
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 64 * KiB + ROOM });
    const [b, c, d] = [pool.acquire(64 * KiB), pool.acquire(64 * KiB), pool.acquire(64 * KiB)];
    pool.release(b);
    pool.release(c);
    pool.release(d); // evicts b's page
    expect(codeOf(() => pool.release(b))).toBe('ERR_BUFFER_POOL_DOUBLE_RELEASE');
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 2 * (64 * KiB + ROOM), droppedBound: 1 });
  });

  test('a buffer the pool did not hand out is refused: plain, a view into a page, another pool\'s', () => {
    const pool = new BufferPool(64 * MiB);
    const other = new BufferPool(64 * MiB);
    const mine = pool.acquire(100 * KiB);
    expect(codeOf(() => pool.release(Buffer.alloc(100 * KiB)))).toBe('ERR_BUFFER_POOL_FOREIGN');
    expect(codeOf(() => pool.release(mine.subarray(5)))).toBe('ERR_BUFFER_POOL_FOREIGN');
    expect(codeOf(() => pool.release(other.acquire(100 * KiB)))).toBe('ERR_BUFFER_POOL_FOREIGN');
    expect(pool.stats()).toMatchObject({ inUse: 1 });
    pool.release(mine);
    expect(pool.stats()).toMatchObject({ inUse: 0 });
  });
});

describe('holds: a transport still reading the message', () => {
  test('the page comes back once both the owner and the holder let go, in either order', () => {
    const pool = new BufferPool(64 * MiB);
    const a = pool.acquire(1 * MiB);
    const letGo = pool.hold(a);
    pool.release(a);
    expect(pool.stats()).toMatchObject({ inUse: 1, retainedBytes: 0 });
    letGo(true);
    letGo(true); // once only
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 1 * MiB + ROOM });
    const b = pool.acquire(1 * MiB);
    expect(b.buffer).toBe(a.buffer);
    pool.hold(b)(true);
    expect(pool.stats()).toMatchObject({ inUse: 1 });
    pool.release(b);
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 1 * MiB + ROOM, hits: 1 });
  });

  test('a holder that cannot vouch for the bytes makes the pool give the page up for good', () => {
    const pool = new BufferPool(64 * MiB);
    const a = pool.acquire(1 * MiB);
    const letGo = pool.hold(a);
    letGo(false);
    letGo(true); // too late to change its mind
    pool.release(a);
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 0, droppedInFlight: 1 });
    expect(pool.acquire(1 * MiB).buffer).not.toBe(a.buffer);
    expect(pool.stats()).toMatchObject({ misses: 2, hits: 0 });
  });

  test('holding a buffer that is not a pooled page in use does nothing', () => {
    const pool = new BufferPool(64 * MiB);
    pool.hold(Buffer.alloc(10))(false);
    pool.hold(pool.acquire(10))(false);
    expect(pool.stats()).toEqual({ hits: 0, misses: 0, droppedBound: 0, droppedInFlight: 0, retainedBytes: 0, inUse: 0 });
  });
});

describe('per-request buffers', () => {
  test('everything pooled a request acquired goes back with one release; a second release has nothing left', () => {
    const pool = new BufferPool(64 * MiB);
    const r = pool.forRequest();
    const bufs = [r.acquire(100), r.acquire(200 * KiB), r.acquire(3 * MiB)];
    expect(bufs.map((b) => b.length)).toEqual([100, 200 * KiB, 3 * MiB]);
    expect(pool.stats()).toMatchObject({ inUse: 2 });
    r.release();
    r.release();
    expect(pool.stats()).toMatchObject({ inUse: 0, retainedBytes: 256 * KiB + 4 * MiB + 2 * ROOM });
    const again = pool.forRequest();
    const b = again.acquire(3 * MiB);
    expect([again.reused(b), again.reused(again.acquire(10))]).toEqual([true, false]);
    again.release();
    expect(pool.stats()).toMatchObject({ inUse: 0, hits: 1 });
  });

  test('an adopted message goes back to its maker once the request and every holder let go vouching, in either order', () => {
    const pool = new BufferPool(64 * MiB);
    const back: string[] = [];
    const r = pool.forRequest();
    const a = Buffer.allocUnsafeSlow(600 * KiB);
    r.adopt(a, () => back.push('a'));
    const letGo = pool.hold(a);
    r.release();
    expect(back).toEqual([]); // the transport still reads it
    letGo(true);
    letGo(true); // once only
    expect(back).toEqual(['a']);
    // The holder lets go first; it is not a page: the idle stacks never see it.
    const r2 = pool.forRequest();
    const b = Buffer.allocUnsafeSlow(600 * KiB);
    r2.adopt(b, () => back.push('b'));
    pool.hold(b)(true);
    expect(back).toEqual(['a']);
    r2.release();
    r2.release();
    expect(back).toEqual(['a', 'b']);
    expect(pool.stats()).toEqual({ hits: 0, misses: 0, droppedBound: 0, droppedInFlight: 0, retainedBytes: 0, inUse: 0 });
  });

  test('an adopted message a holder cannot vouch for never goes back; one adopted twice is refused', () => {
    const pool = new BufferPool(64 * MiB);
    let back = 0;
    const r = pool.forRequest();
    const a = Buffer.allocUnsafeSlow(600 * KiB);
    r.adopt(a, () => back++);
    expect(codeOf(() => r.adopt(a, () => back++))).toBe('ERR_BUFFER_POOL_IN_USE');
    pool.hold(a)(false);
    r.release();
    expect(back).toBe(0);
    // A pooled page is the pool's own: it cannot be adopted.
    const page = r.acquire(1 * MiB);
    expect(codeOf(() => r.adopt(page, () => back++))).toBe('ERR_BUFFER_POOL_IN_USE');
  });

  test('a disabled pool hands out fresh buffers and keeps nothing', () => {
    const pool = new BufferPool(0);
    const r = pool.forRequest();
    expect(r).toBe(NOT_POOLED);
    const b = r.acquire(4 * MiB);
    expect([b.length, r.reused(b)]).toEqual([4 * MiB, false]);
    r.release();
    expect(pool.acquire(4 * MiB).length).toBe(4 * MiB);
    expect(pool.stats()).toEqual({ hits: 0, misses: 0, droppedBound: 0, droppedInFlight: 0, retainedBytes: 0, inUse: 0 });
  });
});
