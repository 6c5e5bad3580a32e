// readNumber's fast paths against a plain BigInt statement of rapidjson's normal-precision
// algorithm (the one Triton parses request numbers with), on many generated tokens.
import { type NumberValue, readNumber } from '../../../gateway/decode/json-number';

const POW10 = Array.from({ length: 309 }, (_, i) => Number(`1e${i}`));
const scale = (d: number, p: number): number => {
  const fast = (s: number, e: number): number => (e < -308 ? 0 : e >= 0 ? s * POW10[e]! : s / POW10[-e]!);
  return p < -308 ? fast(fast(d, -308), p + 308) : fast(d, p);
};

/** rapidjson's steps, spelled out with BigInt for the 64-bit integer accumulator. */
function reference(text: string): { integer: boolean; value: number } {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text)!;
  const minus = m[1] === '-';
  const intPart = m[2]!;
  const frac = m[3];
  const exp = m[4];
  const limit = minus ? 2n ** 63n : 2n ** 64n - 1n;
  let i64 = 0n;
  let k = 0;
  let d = 0;
  let useDouble = false;
  for (; k < intPart.length; k++) {
    const next = i64 * 10n + BigInt(intPart.charCodeAt(k) - 48);
    if (next > limit) break;
    i64 = next;
  }
  if (k < intPart.length) {
    useDouble = true;
    d = Number(i64);
    for (; k < intPart.length; k++) d = d * 10 + (intPart.charCodeAt(k) - 48);
  }
  if (frac === undefined && exp === undefined && !useDouble) {
    const v = Number(minus ? -i64 : i64);
    return { integer: true, value: v === 0 ? 0 : v };
  }
  let expFrac = 0;
  let sd = intPart[0] === '0' ? 0 : intPart.length - 1;
  if (!useDouble) {
    let j = 0;
    if (frac !== undefined) {
      for (; j < frac.length; j++) {
        if (i64 > 2n ** 53n - 1n) break;
        i64 = i64 * 10n + BigInt(frac.charCodeAt(j) - 48);
        expFrac--;
        if (i64 !== 0n) sd++;
      }
    }
    d = Number(i64);
    if (frac !== undefined) {
      for (; j < frac.length; j++) {
        if (sd < 17) {
          d = d * 10 + (frac.charCodeAt(j) - 48);
          expFrac--;
          if (d > 0) sd++;
        }
      }
    }
  }
  const e = exp === undefined ? 0 : Number(exp);
  const v = scale(d, e + expFrac);
  return { integer: false, value: minus ? -v : v };
}

function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

test('readNumber agrees with the reference on 50,000 generated tokens', () => {
  const rnd = random(42);
  const digits = (n: number): string => Array.from({ length: n }, () => String(Math.floor(rnd() * 10))).join('');
  const out: NumberValue = { integer: false, value: 0, big: undefined, negative: false };
  let checked = 0;
  for (let i = 0; i < 50_000; i++) {
    const intLen = 1 + Math.floor(rnd() * (rnd() < 0.1 ? 25 : 8));
    let int = digits(intLen).replace(/^0+(?=\d)/, '');
    if (int.length > 1 && int[0] === '0') int = int.slice(1);
    const text = (rnd() < 0.3 ? '-' : '') + int
      + (rnd() < 0.7 ? `.${digits(1 + Math.floor(rnd() * 22))}` : '')
      + (rnd() < 0.2 ? `e${rnd() < 0.5 ? '-' : ''}${Math.floor(rnd() * 60)}` : '');
    const b = Buffer.from(text);
    const r = readNumber(b, 0, b.length, out);
    const ref = reference(text);
    if (!Number.isFinite(ref.value)) continue;
    expect([text, r.integer, Object.is(r.value, ref.value) || r.value === ref.value]).toEqual([text, ref.integer, true]);
    checked++;
  }
  expect(checked).toBeGreaterThan(45_000);
});

test('the classic cases', () => {
  const out: NumberValue = { integer: false, value: 0, big: undefined, negative: false };
  const read = (t: string): [boolean, number] => {
    const b = Buffer.from(t);
    const r = readNumber(b, 0, b.length, out);
    return [r.integer, r.value];
  };
  expect(read('-0')).toEqual([true, 0]);
  expect(Object.is(read('-0.0')[1], -0)).toBe(true);
  expect(read('0.1')).toEqual([false, 0.1]);
  expect(read('84.14709568023682')).toEqual([false, reference('84.14709568023682').value]);
  expect(read('1e2')).toEqual([false, 100]);
  const big = Buffer.from('18446744073709551615');
  expect(readNumber(big, 0, big.length, out).big).toBe(18446744073709551615n);
});
