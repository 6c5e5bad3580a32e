// Warm staging buffers: only large ones are kept, at most MAX_IDLE and MAX_IDLE_BYTES, each reused
// only for a size it fits closely, and all dropped once idle.
import { MAX_IDLE, MAX_IDLE_BYTES, MIN_BYTES, WarmBuffers } from '../../../gateway/buffers/warm';

describe('WarmBuffers', () => {
  test('a large buffer given back is taken again for a size it fits; a small one never is', () => {
    const w = new WarmBuffers();
    const a = w.take(MIN_BYTES * 4);
    expect(w.reused(a)).toBe(false);
    w.give(a.subarray(0, 10));
    expect(w.idleBytes).toBe(MIN_BYTES * 4);
    expect(w.take(MIN_BYTES).buffer).not.toBe(a.buffer); // would waste three quarters
    const b = w.take(MIN_BYTES * 4 - 100);
    expect([b.buffer, b.length, w.reused(b)]).toEqual([a.buffer, MIN_BYTES * 4 - 100, true]);
    expect(w.idleBytes).toBe(0);
    const small = w.take(1000);
    w.give(small);
    expect(w.idleBytes).toBe(0);
    w.drop();
  });

  test('keeps at most MAX_IDLE; the oldest is freed', () => {
    const w = new WarmBuffers();
    const bufs = Array.from({ length: MAX_IDLE + 1 }, () => w.take(MIN_BYTES));
    for (const b of bufs) w.give(b);
    expect(w.idleBytes).toBe(MAX_IDLE * MIN_BYTES);
    expect(bufs[0]!.length).toBe(0); // freed (detached)
    w.drop();
    expect(bufs.map((b) => b.length)).toEqual(bufs.map(() => 0));
  });

  test('keeps at most MAX_IDLE_BYTES: the oldest go first, and one larger than all of it is not kept', () => {
    // Eight 4 MiB tensors' staging are kept; buffers of 6 MiB meet the byte bound before the count.
    expect(Math.floor(MAX_IDLE_BYTES / (4 * 1024 * 1024 + 200_000))).toBe(MAX_IDLE);
    const w = new WarmBuffers();
    const size = 6 * 1024 * 1024;
    const bufs = Array.from({ length: MAX_IDLE }, () => w.take(size));
    for (const b of bufs) w.give(b);
    const kept = Math.floor(MAX_IDLE_BYTES / size);
    expect(kept).toBeLessThan(MAX_IDLE);
    expect(w.idleBytes).toBe(kept * size);
    expect(bufs.map((b) => b.length)).toEqual(bufs.map((_, i) => (i < MAX_IDLE - kept ? 0 : size)));
    const huge = w.take(MAX_IDLE_BYTES + 1);
    w.give(huge);
    expect([huge.length, w.idleBytes]).toEqual([0, kept * size]);
    w.drop();
    expect(w.idleBytes).toBe(0);
  });

  // The idle timer under Jest's fake clock (setTimeout and Date.now both): on a loaded machine a
  // real sleep can end later than the idle time it waits inside of.
  describe('the idle timer', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    test('idle buffers are dropped after the idle time', () => {
      const w = new WarmBuffers(2, 20);
      w.give(w.take(MIN_BYTES));
      expect(w.idleBytes).toBe(MIN_BYTES);
      jest.advanceTimersByTime(19);
      expect(w.idleBytes).toBe(MIN_BYTES);
      jest.advanceTimersByTime(1);
      expect(w.idleBytes).toBe(0);
      expect(jest.getTimerCount()).toBe(0);
    });

    test('a buffer kept later moves the drop to the idle time after it (one timer, set again for the rest)', () => {
      const w = new WarmBuffers(2, 200);
      w.give(w.take(MIN_BYTES));
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(120);
      w.give(w.take(MIN_BYTES * 2)); // a fresh one: the first stays kept too
      expect([w.idleBytes, jest.getTimerCount()]).toEqual([MIN_BYTES * 3, 1]); // no second timer
      jest.advanceTimersByTime(130); // 250 ms after the first keep, 130 after the last: set again
      expect([w.idleBytes, jest.getTimerCount()]).toEqual([MIN_BYTES * 3, 1]);
      jest.advanceTimersByTime(69);
      expect(w.idleBytes).toBe(MIN_BYTES * 3);
      jest.advanceTimersByTime(1); // 200 ms after the last keep
      expect([w.idleBytes, jest.getTimerCount()]).toEqual([0, 0]);
    });
  });
});
