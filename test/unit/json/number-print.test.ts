import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import {
  formatTritonFp32, formatTritonFp64, writeTritonFp32, writeTritonFp64, MAX_TRITON_DOUBLE_LENGTH,
} from '../../../gateway/json/number-print';
import { tritonDoubleReference } from '../../support/grisu2-reference';
import { float32Bits, float64Bits, seeded as random } from '../../support/random';

// Fixtures: Triton 2.51's own JSON text for exact FP32/FP64 bit patterns (see each file's header).
interface Case { hex: string; value: number; text: string; category: string }

function loadFixture(name: string, width: 4 | 8): Case[] {
  const text = zlib.gunzipSync(fs.readFileSync(path.join(__dirname, 'fixtures', name))).toString('latin1');
  const cases: Case[] = [];
  const b = Buffer.alloc(8);
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [hex, out, category] = line.split(' ');
    if (hex === undefined || out === undefined || category === undefined) throw new Error(`bad fixture line: ${line}`);
    let value: number;
    if (width === 4) { b.writeUInt32BE(parseInt(hex, 16)); value = b.readFloatBE(0); } else { b.write(hex, 'hex'); value = b.readDoubleBE(0); }
    cases.push({ hex, value, text: out, category });
  }
  return cases;
}

const fp32 = loadFixture('fp32.txt.gz', 4);
const fp64 = loadFixture('fp64.txt.gz', 8);

/** Formats every case; returns the first few mismatches (an empty list when all match). */
function mismatches(cases: Case[], format: (x: number) => string): string[] {
  const bad: string[] = [];
  for (const c of cases) {
    const got = format(c.value);
    if (got !== c.text && bad.length < 10) bad.push(`${c.hex} (${c.category}): Triton ${c.text}, got ${got}`);
  }
  return bad;
}

describe('FP32/FP64 JSON numbers match Triton byte for byte', () => {
  test('fixtures are the expected size', () => {
    expect(fp32.length).toBeGreaterThan(29000);
    expect(fp64.length).toBeGreaterThan(34000);
    expect(fp32.filter((c) => c.category === 'random')).toHaveLength(20000);
    expect(fp64.filter((c) => c.category === 'random')).toHaveLength(20000);
  });

  test('every FP32 fixture entry', () => {
    expect(mismatches(fp32, formatTritonFp32)).toEqual([]);
  });

  test('every FP64 fixture entry', () => {
    expect(mismatches(fp64, formatTritonFp64)).toEqual([]);
  });

  test('the byte writers agree with the string forms, at an offset', () => {
    const buf = Buffer.alloc(3 + MAX_TRITON_DOUBLE_LENGTH);
    const viaWriter = (write: typeof writeTritonFp64) => (x: number): string => {
      const end = write(x, buf, 3);
      expect(end - 3).toBeLessThanOrEqual(MAX_TRITON_DOUBLE_LENGTH);
      return buf.toString('latin1', 3, end);
    };
    expect(mismatches(fp32, viaWriter(writeTritonFp32))).toEqual([]);
    expect(mismatches(fp64, viaWriter(writeTritonFp64))).toEqual([]);
  });
});

describe('rapidjson layout, readable cases (all confirmed in the fixtures)', () => {
  test.each([
    [0, '0.0'],
    [-0, '-0.0'], // rapidjson keeps the sign of zero
    [NaN, 'NaN'],
    [Infinity, 'Infinity'],
    [-Infinity, '-Infinity'],
    [2, '2.0'], // integral values get ".0"
    [-1, '-1.0'],
    [123.456, '123.456'],
    [1e20, '100000000000000000000.0'], // decimal notation up to 21 integral digits
    [1e21, '1e21'], // then exponent form, without '+'
    [1e22, '1e22'],
    [0.000001, '0.000001'],
    [1e-7, '1e-7'],
    [1.5e-7, '1.5e-7'],
    [5e-324, '5e-324'],
    [1.7976931348623157e308, '1.7976931348623157e308'],
    [2.2250738585072014e-308, '2.2250738585072014e-308'],
  ])('FP64 %p -> %s', (x, text) => {
    expect(formatTritonFp64(x)).toBe(text);
  });

  test('FP32 values print as the widened double', () => {
    expect(formatTritonFp32(Math.fround(0.1))).toBe('0.10000000149011612');
    expect(formatTritonFp32(Math.fround(1 / 3))).toBe('0.3333333432674408');
    expect(formatTritonFp32(16777216)).toBe('16777216.0');
    expect(formatTritonFp32(Math.fround(3.4028234663852886e38))).toBe('3.4028234663852887e38');
    expect(formatTritonFp32(Math.fround(1.401298464324817e-45))).toBe('1.401298464324817e-45');
  });

  test('Grisu2 as pinned in Triton differs from JavaScript shortest formatting', () => {
    // Not the shortest/closest digits: the last digit is often off, and sometimes one digit more.
    expect(String(Math.fround(0.2))).toBe('0.20000000298023224');
    expect(formatTritonFp32(Math.fround(0.2))).toBe('0.20000000298023225');
    expect(formatTritonFp64(0.1 + 0.2)).toBe('0.30000000000000007'); // JS: 0.30000000000000004
    expect(formatTritonFp64(2 ** 54)).toBe('18014398509481985.0'); // not even the integer itself
  });
});

describe('against a BigInt transcription of Triton\'s rapidjson (test/support/grisu2-reference.ts)', () => {
  test('the reference itself prints every fixture entry as Triton did', () => {
    expect(mismatches(fp32, tritonDoubleReference)).toEqual([]);
    expect(mismatches(fp64, tritonDoubleReference)).toEqual([]);
  });

  /** Compares writeTritonFp64 with the reference on `count` values from `next`; returns mismatches. */
  function differential(count: number, next: () => number): string[] {
    const buf = Buffer.alloc(MAX_TRITON_DOUBLE_LENGTH);
    const bad: string[] = [];
    for (let i = 0; i < count; i++) {
      const x = next();
      const got = buf.toString('latin1', 0, writeTritonFp64(x, buf, 0));
      const want = tritonDoubleReference(x);
      if (got !== want && bad.length < 10) bad.push(`${x}: reference ${want}, got ${got}`);
    }
    return bad;
  }

  test('100,000 random FP32 bit patterns (every exponent), widened', () => {
    const rnd = random(101);
    expect(differential(100_000, () => float32Bits(rnd))).toEqual([]);
  });

  test('100,000 FP32 values of tensor magnitudes (1e-4 .. 1e4) and small integers', () => {
    const rnd = random(102);
    expect(differential(100_000, () => {
      const r = rnd();
      if (r < 0.1) return Math.floor(rnd() * 2 ** 24) * (rnd() < 0.5 ? -1 : 1);
      return Math.fround((rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 9 - 4));
    })).toEqual([]);
  });

  test('100,000 random FP64 bit patterns', () => {
    const rnd = random(103);
    expect(differential(100_000, () => float64Bits(rnd))).toEqual([]);
  });

  test('powers of two, their neighbours, subnormals and decimal round numbers', () => {
    const values: number[] = [];
    for (let e = -1074; e <= 1023; e++) {
      const p = 2 ** e;
      values.push(p, p * (1 + 2 ** -52), p * (1 - 2 ** -53), Math.fround(p) || p);
    }
    for (let k = -323; k <= 308; k++) values.push(Number(`1e${k}`), Number(`5e${k}`), Number(`1.25e${k}`));
    let i = 0;
    expect(differential(values.length, () => values[i++]!)).toEqual([]);
  });
});
