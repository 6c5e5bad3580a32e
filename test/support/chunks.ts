// Feeding push parsers their input in pieces: every stateful parser is tested with its fixture
// whole and split so that boundaries fall inside every token it carries across calls.

/** The chunk sizes every push-parser fixture is split into, besides being fed whole. */
export const CHUNK_SIZES = [1, 2, 3, 7] as const;

/** `b` as consecutive views of `n` bytes (the last one shorter); one view when n ≥ b.length. */
export function splitEvery(b: Buffer, n: number): Buffer[] {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`chunk size must be a positive integer, got ${n}`);
  if (b.length <= n) return [b];
  const out: Buffer[] = [];
  for (let at = 0; at < b.length; at += n) out.push(b.subarray(at, Math.min(b.length, at + n)));
  return out;
}

/** Whole (as one chunk) and split into each of CHUNK_SIZES, labelled for test.each. */
export function splits(b: Buffer): [string, Buffer[]][] {
  return [['whole', [b]], ...CHUNK_SIZES.map((n): [string, Buffer[]] => [`${n}-byte chunks`, splitEvery(b, n)])];
}

/** Whether `view` shares memory with `of` (a view, not a copy). */
export function isViewOf(view: Buffer, of: Buffer): boolean {
  return view.buffer === of.buffer && view.byteOffset >= of.byteOffset && view.byteOffset + view.length <= of.byteOffset + of.length;
}

/**
 * Where two byte strings differ, or undefined when they are equal: `expect(firstDifference(a, b))
 * .toBeUndefined()` compares large buffers in a few milliseconds where jest's toEqual walks them
 * element by element, and still says where they part.
 */
export function firstDifference(actual: Uint8Array, expected: Uint8Array): string | undefined {
  if (Buffer.compare(actual, expected) === 0) return undefined;
  let i = 0;
  while (i < actual.length && i < expected.length && actual[i] === expected[i]) i++;
  const at = (b: Uint8Array): string => (i < b.length ? `0x${b[i]!.toString(16).padStart(2, '0')}` : 'the end');
  return `${actual.length} bytes where ${expected.length} were expected; first difference at byte ${i}: ${at(actual)} where ${at(expected)} was expected`;
}
