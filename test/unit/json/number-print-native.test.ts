import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { constants } from 'node:os';
import { cachedPowerArrays, writeTritonFp32 } from '../../../gateway/json/number-print';
import { NATIVE_LANE_FILE } from '../../../gateway/ingress/http1/lane';
import { float32Bits, seeded as random } from '../../support/random';

// The compiled lane's printer (gateway/native/triton-double.h: the JSON answers it writes itself)
// against Triton's own text (the fixtures of number-print.test.ts) and against number-print.ts on
// millions of FP32 values: random bits, probabilities, magnitudes either side of every layout's
// bounds, and the special values.

const built = fs.existsSync(NATIVE_LANE_FILE);
if (!built) {
  if (process.env.CI === 'true') throw new Error(`number-print-native: ${NATIVE_LANE_FILE} is not built (npm run build: scripts/build-native.js says why)`);
  process.stderr.write(`SKIPPED number-print-native: ${NATIVE_LANE_FILE} is not built here (npm run build says why)\n`);
}
const maybe = built ? describe : describe.skip;

interface Printer {
  powers(significands: BigUint64Array, k: Int32Array, shift: Int32Array): boolean;
  /** By the printer this CPU runs (eight values a step with AVX-512), or with `scalar` the one every CPU runs. */
  printFp32(values: Buffer, scalar?: boolean): Buffer;
}

/** lane.node's printer, given number-print.ts's table as the lane gives it (ingress/server.ts). */
function printer(): Printer {
  const module = { exports: {} as Printer };
  process.dlopen(module, NATIVE_LANE_FILE, constants.dlopen.RTLD_NOW);
  const { significands, k, shift } = cachedPowerArrays();
  expect(module.exports.powers(significands, k, shift)).toBe(true);
  return module.exports;
}

/** number-print.ts's text of the FP32 values in `data`, comma-separated. */
function expected(data: Buffer): string {
  const out = Buffer.allocUnsafe((data.length / 4) * 26 + 32);
  let at = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (i > 0) out[at++] = 0x2c;
    at = writeTritonFp32(data.readFloatLE(i), out, at);
  }
  return out.toString('latin1', 0, at);
}

/** The first value where the two texts differ, as "bits: expected, got" (undefined: none). */
function firstDifference(data: Buffer, want: string, got: string): string | undefined {
  if (want === got) return undefined;
  const w = want.split(','), g = got.split(',');
  const i = w.findIndex((x, j) => x !== g[j]);
  return `${data.readUInt32LE(4 * i).toString(16)}: ${w[i]}, got ${g[i]}`;
}

maybe.each([['the printer this CPU runs', false], ['the scalar printer', true]])('FP32 printed by the compiled lane: %s', (_, scalar) => {
  let native: Printer;
  beforeAll(() => {
    native = printer();
  });
  const p = { printFp32: (values: Buffer): Buffer => native.printFp32(values, scalar) };

  test('every FP32 fixture entry as Triton printed it', () => {
    const cases = zlib.gunzipSync(fs.readFileSync(path.join(__dirname, 'fixtures', 'fp32.txt.gz'))).toString('latin1').split('\n')
      .filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.split(' ') as [string, string]);
    const data = Buffer.alloc(cases.length * 4);
    cases.forEach(([hex], i) => data.writeUInt32LE(parseInt(hex, 16), i * 4));
    const want = cases.map(([, text]) => text).join(',');
    expect(firstDifference(data, want, p.printFp32(data).toString('latin1'))).toBeUndefined();
  });

  test('the special values and the layouts\' bounds', () => {
    const values = [0, -0, NaN, Infinity, -Infinity, 1, -1, 0.1, 0.2, 0.5, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, 2 ** 24, 2 ** 24 + 2,
      1e20, 1e21, 1e22, 123456789, 1e-5, 1e-6, 1e-7, 9.999999e-7, 0.000123, 100, 1e7, 16777216, 0.3, 1 / 3];
    const data = Buffer.alloc(values.length * 4);
    values.forEach((x, i) => data.writeFloatLE(x, i * 4));
    const got = p.printFp32(data).toString('latin1');
    expect(firstDifference(data, expected(data), got)).toBeUndefined();
    expect(got.split(',').slice(0, 5)).toEqual(['0.0', '-0.0', 'NaN', 'Infinity', '-Infinity']);
  });

  test('two million random bit patterns, probabilities and magnitudes: number-print.ts\'s text', () => {
    const rnd = random(39);
    const n = 2_000_000;
    const data = Buffer.alloc(n * 4);
    for (let i = 0; i < n; i++) {
      const kind = i % 4;
      if (kind === 0) data.writeFloatLE(float32Bits(rnd), i * 4); // random bits: every exponent, subnormals
      else if (kind === 1) data.writeFloatLE(rnd(), i * 4); // a probability
      else if (kind === 2) data.writeFloatLE((rnd() - 0.5) * 10 ** Math.floor(rnd() * 50 - 25), i * 4);
      else data.writeFloatLE(Math.round(rnd() * 1e6) / 10 ** Math.floor(rnd() * 8), i * 4); // decimal-looking
    }
    // In pieces of 100,000: each a call, as each answer's outputs are.
    for (let at = 0; at < data.length; at += 400_000) {
      const piece = data.subarray(at, at + 400_000);
      expect(firstDifference(piece, expected(piece), p.printFp32(piece).toString('latin1'))).toBeUndefined();
    }
  });

  test('values in runs of every length from 1 to 17 (each place in a step of eight, and the rest after the steps)', () => {
    const rnd = random(41);
    const data = Buffer.alloc(4 * 2000);
    for (let i = 0; i < 2000; i++) data.writeFloatLE(i % 3 === 0 ? float32Bits(rnd) : i % 3 === 1 ? rnd() * 32 : rnd() / 1000, i * 4);
    for (let at = 0, n = 1; at < data.length; at += 4 * n, n = (n % 17) + 1) {
      const piece = data.subarray(at, at + 4 * n);
      expect(firstDifference(piece, expected(piece), p.printFp32(piece).toString('latin1'))).toBeUndefined();
    }
  });

  test('nothing at all for no values', () => {
    expect(p.printFp32(Buffer.alloc(0)).length).toBe(0);
  });
});
