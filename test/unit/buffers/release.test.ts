import { releaseOwned, releaseWhole } from '../../../gateway/buffers/release';

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

describe('releaseWhole: only a buffer that is the whole of its memory', () => {
  test('a chunk that owns its ArrayBuffer is freed; a slice of a larger one (an HTTP/2 DATA chunk) is not', () => {
    const own = Buffer.from(new ArrayBuffer(64 * 1024));
    expect(releaseWhole(own)).toBe(64 * 1024);
    expect(own.length).toBe(0);
    const shared = Buffer.from(new ArrayBuffer(64 * 1024));
    expect(releaseWhole(shared.subarray(0, 16 * 1024))).toBe(0);
    expect(shared.length).toBe(64 * 1024);
    const slab = Buffer.allocUnsafe(100); // on Node's shared slab
    expect(releaseWhole(slab)).toBe(0);
    expect(slab.length).toBe(100);
  });
});
