import { releaseOwned } from '../../../gateway/buffers/release';

describe('releaseOwned: memory freed at once (ArrayBuffer transfer)', () => {
  test('a Buffer starting its own ArrayBuffer is freed; its views then read as empty', () => {
    const b = Buffer.allocUnsafe(1024 * 1024);
    const view = b.subarray(0, 10);
    expect(releaseOwned(view)).toBe(1024 * 1024);
    expect([b.length, view.length]).toEqual([0, 0]);
    expect(releaseOwned(b)).toBe(0); // already gone
  });

  test('never a small Buffer from Node\'s shared slab, nor a view that does not start its memory', () => {
    const small = Buffer.allocUnsafe(100);
    expect(releaseOwned(small)).toBe(0);
    expect(small.length).toBe(100);
    const big = Buffer.allocUnsafe(64 * 1024);
    expect(releaseOwned(big.subarray(1))).toBe(0);
    expect(big.length).toBe(64 * 1024);
  });
});
