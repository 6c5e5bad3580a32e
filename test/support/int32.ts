// INT32 tensor bytes as Triton lays them out (little-endian, row-major): what tests send as raw
// tensor data, and read back from answers.

/**
 * INT32 elements as bytes: `values`, or a count of elements whose value does not matter (every
 * byte 0x01, so never all zeros).
 */
export function int32(values: readonly number[] | number): Buffer {
  if (typeof values === 'number') return Buffer.alloc(values * 4, 1);
  const b = Buffer.alloc(values.length * 4);
  values.forEach((x, i) => b.writeInt32LE(x, i * 4));
  return b;
}

/** The INT32 elements of tensor bytes. */
export function readInt32(bytes: Uint8Array): number[] {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Array.from({ length: b.length / 4 }, (_, i) => b.readInt32LE(i * 4));
}
