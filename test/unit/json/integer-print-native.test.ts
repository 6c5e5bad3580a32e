import * as fs from 'node:fs';
import { constants } from 'node:os';
import { otherElements } from '../../../gateway/encode/infer-response';
import { NATIVE_LANE_FILE } from '../../../gateway/ingress/http1/lane';
import { seeded as random } from '../../support/random';

// The compiled lane's integer printer (gateway/native/lane.c print_ints: the JSON answers it prints
// itself for outputs of Triton's integer types) against encode/infer-response.ts's, type by type:
// each type's bounds, zero, ±1, powers of ten either side, and random values.

const built = fs.existsSync(NATIVE_LANE_FILE);
if (!built) {
  if (process.env.CI === 'true') throw new Error(`integer-print-native: ${NATIVE_LANE_FILE} is not built (npm run build: scripts/build-native.js says why)`);
  process.stderr.write(`SKIPPED integer-print-native: ${NATIVE_LANE_FILE} is not built here (npm run build says why)\n`);
}
const maybe = built ? describe : describe.skip;

interface Printer {
  printInts(values: Buffer, kind: number): Buffer;
}

/** lane.c's K_* kinds (encode/json-answer-head.ts PRINTED_KINDS), their sizes and bounds. */
const KINDS: [string, number, number, bigint, bigint][] = [
  ['INT8', 1, 1, -128n, 127n], ['UINT8', 2, 1, 0n, 255n], ['INT16', 3, 2, -32768n, 32767n], ['UINT16', 4, 2, 0n, 65535n],
  ['INT32', 5, 4, -(2n ** 31n), 2n ** 31n - 1n], ['UINT32', 6, 4, 0n, 2n ** 32n - 1n],
  ['INT64', 7, 8, -(2n ** 63n), 2n ** 63n - 1n], ['UINT64', 8, 8, 0n, 2n ** 64n - 1n],
];

/** `values` as `size`-byte little-endian integers (two's complement for the negative ones). */
function bytesOf(values: readonly bigint[], size: number): Buffer {
  const out = Buffer.alloc(values.length * size);
  values.forEach((v, i) => {
    let u = BigInt.asUintN(size * 8, v);
    for (let b = 0; b < size; b++, u >>= 8n) out[i * size + b] = Number(u & 0xffn);
  });
  return out;
}

maybe('integers printed by the compiled lane', () => {
  let native: Printer;
  beforeAll(() => {
    const module = { exports: {} as Printer };
    process.dlopen(module, NATIVE_LANE_FILE, constants.dlopen.RTLD_NOW);
    native = module.exports;
  });

  test.each(KINDS)('%s: bounds, zero, powers of ten and random values print as infer-response.ts prints them', (dt, kind, size, min, max) => {
    const values: bigint[] = [min, max, 0n, 1n, min + 1n, max - 1n];
    if (min < 0n) values.push(-1n);
    for (let p = 1n; p <= max; p *= 10n) values.push(p - 1n, p, p + 1n, ...(min < 0n && -p >= min ? [-p, -p - 1n, 1n - p] : []));
    const rnd = random(kind);
    const span = max - min + 1n;
    for (let i = 0; i < 2000; i++) {
      const r = (BigInt(Math.floor(rnd() * 2 ** 32)) << 32n) | BigInt(Math.floor(rnd() * 2 ** 32));
      values.push(min + (r % span));
    }
    const kept = values.filter((v) => v >= min && v <= max);
    const data = bytesOf(kept, size);
    expect(native.printInts(data, kind).toString('latin1')).toBe(otherElements(data, kept.length, dt));
  });

  test('one value, and none', () => {
    expect(native.printInts(bytesOf([-(2n ** 63n)], 8), 7).toString('latin1')).toBe('-9223372036854775808');
    expect(native.printInts(Buffer.alloc(0), 8).toString('latin1')).toBe('');
  });

  test('a kind that is not an integer type, or a partial value: refused', () => {
    expect(() => native.printInts(Buffer.alloc(4), 0)).toThrow(/printInts/);
    expect(() => native.printInts(Buffer.alloc(4), 9)).toThrow(/printInts/);
    expect(() => native.printInts(Buffer.alloc(7), 7)).toThrow(/printInts/);
  });
});
