// readNumber's fast paths against a plain BigInt statement of rapidjson's normal-precision
// algorithm (the one Triton parses request numbers with), on many generated tokens.
import { type NumberValue, readNumber, SCAN_INTEGER, SCAN_INVALID, SCAN_SLOW, scanned, scanNumber } from '../../../gateway/json/number-parse';
import { float32Bits, float64Bits, seeded as random } from '../../support/random';

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

// ---- scanNumber: the tensor data fast path, against readNumber (itself checked above) ----------

const viewOf = (b: Buffer): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

describe('scanNumber agrees with readNumber bit for bit', () => {
  const out: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

  /** Scans `text` followed by a delimiter; returns [kind, value, end] and checks against readNumber. */
  function check(text: string, delimiter = ']'): number {
    const b = Buffer.from(text + delimiter);
    const end = scanNumber(b, viewOf(b), 0, b.length);
    const kind = scanned[1]!;
    if (kind === SCAN_INVALID) throw new Error(`${text}: scanned as invalid`);
    if (end !== text.length) throw new Error(`${text}: scanned up to ${end}`);
    if (kind === SCAN_SLOW) return kind;
    const r = readNumber(b, 0, text.length, out);
    const ref = reference(text); // and the BigInt statement of rapidjson's steps
    if (!Object.is(scanned[0], r.value) || (kind === SCAN_INTEGER) !== r.integer || !Object.is(scanned[0], ref.value) || ref.integer !== r.integer) {
      throw new Error(`${text}: scanNumber ${scanned[0]} (${kind === SCAN_INTEGER ? 'integer' : 'double'}), readNumber ${r.value} (${r.integer ? 'integer' : 'double'}), reference ${ref.value}`);
    }
    return kind;
  }

  // What may follow a number in a document: every byte here must end it, including inside the
  // eight-byte blocks the fraction is read in.
  const FOLLOWERS = [']', ',', ', 12', ',-0.5]', ' ', '\n]', '}', ',0.0000', '\t,', ']]]]]]]]]', ',"x"', '\r\n,9'];

  function tally(texts: Iterable<string>): { fast: number; slow: number } {
    let fast = 0;
    let slow = 0;
    let i = 0;
    for (const t of texts) {
      if (check(t, FOLLOWERS[i++ % FOLLOWERS.length]) === SCAN_SLOW) slow++;
      else fast++;
    }
    return { fast, slow };
  }

  test('200,000 random FP32 values as JavaScript and Python print them', () => {
    const rnd = random(7);
    function* texts(): Generator<string> {
      for (let i = 0; i < 100_000; i++) {
        const x = float32Bits(rnd);
        if (!Number.isFinite(x)) continue;
        yield JSON.stringify(x); // shortest round-trip of the widened double, like Python's repr
        const scaled = Math.fround((rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 8 - 4)); // typical tensor magnitudes
        yield JSON.stringify(scaled);
      }
    }
    const { fast, slow } = tally(texts());
    expect(fast + slow).toBeGreaterThan(195_000);
    expect(slow / (fast + slow)).toBeLessThan(0.35); // exponents beyond 3 digits, 19+ digits, ...
  });

  test('200,000 random doubles, in every notation', () => {
    const rnd = random(11);
    function* texts(): Generator<string> {
      for (let i = 0; i < 50_000; i++) {
        const x = float64Bits(rnd);
        if (!Number.isFinite(x)) continue;
        yield String(x).replace('e+', 'e');
        yield x.toExponential(Math.floor(rnd() * 20)).replace('e+', 'E');
        const y = (rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 30 - 15);
        yield y.toFixed(Math.floor(rnd() * 20)).replace(/^(-?)0+(?=\d)/, '$1');
        yield y.toPrecision(1 + Math.floor(rnd() * 21)).replace('e+', 'e');
      }
    }
    const { fast, slow } = tally(texts());
    expect(fast + slow).toBeGreaterThan(190_000);
    expect(fast).toBeGreaterThan(100_000);
  });

  test('200,000 random digit strings around every boundary of the fast path', () => {
    const rnd = random(13);
    const digits = (n: number): string => Array.from({ length: n }, () => String(Math.floor(rnd() * 10))).join('');
    function* texts(): Generator<string> {
      for (let i = 0; i < 200_000; i++) {
        const r = rnd();
        // integer part: "0", or up to 17 digits with a nonzero first digit
        const int = r < 0.3 ? '0' : String(1 + Math.floor(rnd() * 9)) + digits(Math.floor(rnd() * (r < 0.9 ? 4 : 17)));
        const lead = int === '0' && rnd() < 0.5 ? '0'.repeat(Math.floor(rnd() * 12)) : '';
        const hasFrac = rnd() < 0.85;
        const frac = hasFrac ? lead + digits(Math.floor(rnd() * 21) + (lead === '' ? 1 : 0)) : '';
        // 16-18 digit significands near 2^53 * 10 (90071992547409920) and 2^53
        const special = rnd() < 0.1 ? (rnd() < 0.5 ? '9007199254740' : '90071992547409') + digits(Math.floor(rnd() * 6)) : undefined;
        let text = special !== undefined ? `${special.slice(0, 1)}.${special.slice(1)}` : int + (hasFrac && frac !== '' ? `.${frac}` : '');
        if (rnd() < 0.25) text += `${rnd() < 0.5 ? 'e' : 'E'}${['', '+', '-'][Math.floor(rnd() * 3)]}${Math.floor(rnd() * (rnd() < 0.9 ? 40 : 400))}`;
        if (rnd() < 0.4) text = `-${text}`;
        yield text;
      }
    }
    const { fast, slow } = tally(texts());
    expect(fast + slow).toBe(200_000);
    expect(fast).toBeGreaterThan(120_000);
  });

  test('the edges, one by one', () => {
    const kind = (t: string): string => ['double', 'integer', 'slow'][check(t)]!;
    expect(kind('0')).toBe('integer');
    expect(kind('-0')).toBe('integer');
    expect(Object.is(scanned[0], 0)).toBe(true); // "-0" is the integer 0
    expect(kind('-0.0')).toBe('double');
    expect(Object.is(scanned[0], -0)).toBe(true);
    expect(kind('999999999999999')).toBe('integer'); // 15 digits
    expect(kind('1000000000000000')).toBe('slow'); // 16: rapidjson's 64-bit integers
    expect(kind('0.000000000000000000001234567890123456')).toBe('double'); // zeros skipped: 16 digits
    expect(kind('9007199254740991.5')).toBe('slow'); // a 16-digit integer part
    expect(kind('900719925474099.03')).toBe('double'); // V = 90071992547409903 < 2^53 * 10
    expect(kind('900719925474099.20')).toBe('slow'); // V = 2^53 * 10: rapidjson stops one digit early
    expect(kind('900719925474099.12')).toBe('slow'); // V rounds to 2^53 * 10: left to readNumber
    expect(kind('1.2345678901234567')).toBe('double'); // 17 digits
    expect(kind('1.23456789012345678')).toBe('slow'); // 18 digits are always past 2^53 * 10
    expect(kind('1e308')).toBe('double');
    expect(kind('1e309')).toBe('slow'); // rapidjson's "Number too big"
    expect(kind('9e308')).toBe('slow'); // DBL_MAX exceeded by the multiplication
    expect(kind('1e-308')).toBe('double');
    expect(kind('1e-309')).toBe('slow'); // two divisions in rapidjson
    expect(kind('1e0001')).toBe('slow'); // 4 exponent digits
    expect(kind('NaN')).toBe('slow');
    expect(kind('-Infinity')).toBe('slow');
  });

  test('invalid tokens are left to the checked reader, and it never reads past `end`', () => {
    for (const t of ['-', '-a', '1.', '1.e5', '1e', '1e+', '-.5', '.5']) {
      const b = Buffer.from(t);
      scanNumber(b, viewOf(b), 0, b.length);
      expect([t, scanned[1]]).toEqual([t, SCAN_INVALID]);
    }
    const b = Buffer.from('12345.678e9');
    expect(scanNumber(b, viewOf(b), 0, 3)).toBe(3); // "123": the digits after `end` are not its own
    expect([scanned[0], scanned[1]]).toEqual([123, SCAN_INTEGER]);
    expect(scanNumber(b, viewOf(b), 0, 6)).toBe(6); // "12345." is invalid within [0, 6)
    expect(scanned[1]).toBe(SCAN_INVALID);
  });
});
