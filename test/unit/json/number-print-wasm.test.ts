import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { FLOATS_PER_CALL, printFloats, printOne, wasmFloats } from '../../../gateway/json/number-print-wasm';
import { formatTritonFp64 } from '../../../gateway/json/number-print';
import { floatElements } from '../../../gateway/encode/infer-response';
import { tritonDoubleReference } from '../../support/grisu2-reference';
import { float32Bits, float64Bits, seeded as random } from '../../support/random';

// The WebAssembly printer against Triton's own text (the fixtures of number-print.test.ts), the
// BigInt transcription of Triton's rapidjson, and number-print.ts on many more values.

/** Every line of a fixture as [bits as hex, Triton's text]. */
function fixture(name: string): [string, string][] {
  return zlib.gunzipSync(fs.readFileSync(path.join(__dirname, 'fixtures', name))).toString('latin1').split('\n')
    .filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.split(' ') as [string, string]);
}

const one = (x: number): string => printOne(x)!;

describe('FP32/FP64 printed by WebAssembly', () => {
  test('this Node runs it', () => {
    expect(wasmFloats).toBe(true);
  });

  test('every FP32 and FP64 fixture entry, one at a time and as one tensor', () => {
    for (const [name, width] of [['fp32.txt.gz', 4], ['fp64.txt.gz', 8]] as const) {
      const cases = fixture(name);
      const data = Buffer.alloc(cases.length * width);
      cases.forEach(([hex], i) => (width === 4 ? data.writeUInt32LE(parseInt(hex, 16), i * 4) : data.writeBigUInt64LE(BigInt(`0x${hex}`), i * 8)));
      const bad: string[] = [];
      cases.forEach(([hex, text], i) => {
        const got = one(width === 4 ? data.readFloatLE(i * 4) : data.readDoubleLE(i * 8));
        if (got !== text && bad.length < 10) bad.push(`${hex}: Triton ${text}, got ${got}`);
      });
      expect(bad).toEqual([]);
      // Several calls of FLOATS_PER_CALL values, joined by the commas between them.
      expect(cases.length).toBeGreaterThan(3 * FLOATS_PER_CALL);
      expect(printFloats(data, cases.length, width === 4)!.toString('latin1')).toBe(cases.map(([, text]) => text).join(','));
    }
  });

  test('against the BigInt transcription of Triton\'s rapidjson: every power of two and its neighbours, decimal round numbers', () => {
    const values: number[] = [];
    for (let e = -1074; e <= 1023; e++) {
      const p = 2 ** e;
      values.push(p, p * (1 + 2 ** -52), p * (1 - 2 ** -53), Math.fround(p) || p, -p);
    }
    for (let k = -323; k <= 308; k++) values.push(Number(`1e${k}`), Number(`5e${k}`), Number(`1.25e${k}`));
    values.push(0, -0, NaN, -NaN, Infinity, -Infinity, Number.MAX_VALUE, Number.MIN_VALUE, 2 ** 54, 1e21, 1e21 - 65536, 999999.9999999999);
    expect(values.map(one).filter((text, i) => text !== tritonDoubleReference(values[i]!))).toEqual([]);
  });

  test('1,000,000 values as number-print.ts prints them: random bits of FP32 and FP64, tensor magnitudes, decimals', () => {
    const rnd = random(301);
    const bad: string[] = [];
    for (let i = 0; i < 1_000_000; i++) {
      const k = i % 4;
      const x = k === 0 ? float64Bits(rnd) : k === 1 ? float32Bits(rnd)
        : k === 2 ? Math.fround((rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 20 - 10))
          : Math.floor(rnd() * 1e7) / 10 ** Math.floor(rnd() * 9);
      const got = one(x);
      if (got !== formatTritonFp64(x) && bad.length < 10) bad.push(`${x}: number-print.ts ${formatTritonFp64(x)}, got ${got}`);
    }
    expect(bad).toEqual([]);
  });

  test('floatElements prints through it: FP32 and FP64 at an unaligned offset, empty, and one value', () => {
    const rnd = random(302);
    const f32 = Buffer.alloc(1 + 4 * 1000);
    const f64 = Buffer.alloc(3 + 8 * 700);
    for (let i = 0; i < 1000; i++) f32.writeFloatLE(float32Bits(rnd), 1 + i * 4);
    for (let i = 0; i < 700; i++) f64.writeDoubleLE(float64Bits(rnd), 3 + i * 8);
    const want = (b: Buffer, n: number, w: number): string =>
      Array.from({ length: n }, (_, i) => formatTritonFp64(w === 4 ? b.readFloatLE(i * 4) : b.readDoubleLE(i * 8))).join(',');
    expect(floatElements(f32.subarray(1), 1000, true).toString('latin1')).toBe(want(f32.subarray(1), 1000, 4));
    expect(floatElements(f64.subarray(3), 700, false).toString('latin1')).toBe(want(f64.subarray(3), 700, 8));
    expect(floatElements(Buffer.alloc(0), 0, true).toString()).toBe('');
    expect(floatElements(Buffer.from(new Float32Array([0.1]).buffer), 1, true).toString()).toBe('0.10000000149011612');
  });
});
