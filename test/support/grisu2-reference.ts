// rapidjson's Writer::Double as Triton 2.51 has it (internal/dtoa.h and diyfp.h before rapidjson
// commit bb06211), transcribed line for line with BigInt for every uint64_t, wrap-around included.
// Slow and plain on purpose: the reference the fast printer in gateway/json/number-print.ts is
// checked against on random inputs (its own fixtures come from a real Triton).

const U64 = (1n << 64n) - 1n;
const u64 = (x: bigint): bigint => x & U64;

interface DiyFp { f: bigint; e: number }

const kDpSignificandSize = 52;
const kDpExponentBias = 0x3ff + kDpSignificandSize;
const kDpMinExponent = -kDpExponentBias;
const kDpExponentMask = 0x7ff0000000000000n;
const kDpSignificandMask = 0x000fffffffffffffn;
const kDpHiddenBit = 0x0010000000000000n;

function diyFpOf(d: number): DiyFp {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, d);
  const u = view.getBigUint64(0);
  const biasedE = Number((u & kDpExponentMask) >> 52n);
  const significand = u & kDpSignificandMask;
  return biasedE !== 0
    ? { f: significand + kDpHiddenBit, e: biasedE - kDpExponentBias }
    : { f: significand, e: kDpMinExponent + 1 };
}

/** DiyFp::operator* with the __int128 rounding (x86-64 GCC). */
function mul(a: DiyFp, b: DiyFp): DiyFp {
  const p = a.f * b.f;
  let h = p >> 64n;
  const l = p & U64;
  if ((l & (1n << 63n)) !== 0n) h++;
  return { f: u64(h), e: a.e + b.e + 64 };
}

function normalize(x: DiyFp): DiyFp {
  let { f, e } = x;
  while ((f & (1n << 63n)) === 0n) { f = u64(f << 1n); e--; }
  return { f, e };
}

function normalizeBoundary(x: DiyFp): DiyFp {
  let { f, e } = x;
  while ((f & (kDpHiddenBit << 1n)) === 0n) { f = u64(f << 1n); e--; }
  return { f: u64(f << 10n), e: e - 10 };
}

function normalizedBoundaries(v: DiyFp): { minus: DiyFp; plus: DiyFp } {
  const pl = normalizeBoundary({ f: (v.f << 1n) + 1n, e: v.e - 1 });
  const mi = v.f === kDpHiddenBit ? { f: (v.f << 2n) - 1n, e: v.e - 2 } : { f: (v.f << 1n) - 1n, e: v.e - 1 };
  return { plus: pl, minus: { f: u64(mi.f << BigInt(mi.e - pl.e)), e: pl.e } };
}

/** kCachedPowers_F/_E: 10^k for k = -348, -340, …, 340, significand rounded to nearest 64 bits. */
const cachedPowers: DiyFp[] = Array.from({ length: 87 }, (_, i) => {
  const k = -348 + 8 * i;
  // value = 10^k; find f in [2^63, 2^64) and e with f * 2^e ≈ 10^k, rounded to nearest
  let num = k >= 0 ? 10n ** BigInt(k) : 1n;
  let den = k >= 0 ? 1n : 10n ** BigInt(-k);
  let e = 0;
  while (num < den << 63n) { num <<= 1n; e--; }
  while (num >= den << 64n) { den <<= 1n; e++; }
  let f = num / den;
  const rem = num - f * den;
  if (rem * 2n >= den) f++;
  if (f === 1n << 64n) { f >>= 1n; e++; }
  return { f, e };
});

function getCachedPower(e: number): { c: DiyFp; K: number } {
  const dk = (-61 - e) * 0.30102999566398114 + 347;
  let k = Math.trunc(dk);
  if (dk - k > 0.0) k++;
  const index = (k >> 3) + 1;
  return { c: cachedPowers[index]!, K: -(-348 + (index << 3)) };
}

const kPow10 = [1n, 10n, 100n, 1000n, 10000n, 100000n, 1000000n, 10000000n, 100000000n, 1000000000n];

function grisuRound(buffer: number[], len: number, delta: bigint, rest: bigint, tenKappa: bigint, wpW: bigint): void {
  while (rest < wpW && u64(delta - rest) >= tenKappa
    && (u64(rest + tenKappa) < wpW || u64(wpW - rest) > u64(rest + tenKappa - wpW))) {
    buffer[len - 1]!--;
    rest = u64(rest + tenKappa);
  }
}

function countDecimalDigit32(n: bigint): number {
  if (n < 10n) return 1;
  if (n < 100n) return 2;
  if (n < 1000n) return 3;
  if (n < 10000n) return 4;
  if (n < 100000n) return 5;
  if (n < 1000000n) return 6;
  if (n < 10000000n) return 7;
  if (n < 100000000n) return 8;
  return 9;
}

function digitGen(W: DiyFp, Mp: DiyFp, delta: bigint, buffer: number[], K: { v: number }): void {
  const oneE = Mp.e;
  const oneF = 1n << BigInt(-oneE);
  const wpW = u64(Mp.f - W.f);
  let p1 = (Mp.f >> BigInt(-oneE)) & 0xffffffffn;
  let p2 = Mp.f & (oneF - 1n);
  let kappa = countDecimalDigit32(p1);
  while (kappa > 0) {
    let d: bigint;
    if (kappa === 1) { d = p1; p1 = 0n; } else { d = p1 / kPow10[kappa - 1]!; p1 %= kPow10[kappa - 1]!; }
    if (d !== 0n || buffer.length > 0) buffer.push(Number(d));
    kappa--;
    const tmp = u64((p1 << BigInt(-oneE)) + p2);
    if (tmp <= delta) {
      K.v += kappa;
      grisuRound(buffer, buffer.length, delta, tmp, u64(kPow10[kappa]! << BigInt(-oneE)), wpW);
      return;
    }
  }
  for (;;) {
    p2 = u64(p2 * 10n);
    delta = u64(delta * 10n);
    const d = Number(p2 >> BigInt(-oneE)) & 0xff; // static_cast<char>
    if (d !== 0 || buffer.length > 0) buffer.push(d);
    p2 &= oneF - 1n;
    kappa--;
    if (p2 < delta) {
      K.v += kappa;
      const index = -kappa;
      grisuRound(buffer, buffer.length, delta, p2, oneF, u64(wpW * (index < 9 ? kPow10[index]! : 0n)));
      return;
    }
  }
}

function writeExponent(K: number): string {
  return K < 0 ? `-${-K}` : String(K);
}

function prettify(digits: string, k: number): string {
  const length = digits.length;
  const kk = length + k;
  if (k >= 0 && kk <= 21) return `${digits}${'0'.repeat(k)}.0`;
  if (kk > 0 && kk <= 21) return `${digits.slice(0, kk)}.${digits.slice(kk)}`;
  if (kk > -6 && kk <= 0) return `0.${'0'.repeat(-kk)}${digits}`;
  if (kk < -324) return '0.0';
  if (length === 1) return `${digits}e${writeExponent(kk - 1)}`;
  return `${digits[0]}.${digits.slice(1)}e${writeExponent(kk - 1)}`;
}

/** What Triton's HTTP frontend prints for the double x (rapidjson Writer::Double, NaN/Inf allowed). */
export function tritonDoubleReference(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  let sign = '';
  if (x < 0) { sign = '-'; x = -x; }
  const v = diyFpOf(x);
  const { minus, plus } = normalizedBoundaries(v);
  const { c, K } = getCachedPower(plus.e);
  const W = mul(normalize(v), c);
  const Wp = mul(plus, c);
  const Wm = mul(minus, c);
  Wm.f = u64(Wm.f + 1n);
  Wp.f = u64(Wp.f - 1n);
  const buffer: number[] = [];
  const k = { v: K };
  digitGen(W, Wp, u64(Wp.f - Wm.f), buffer, k);
  return sign + prettify(buffer.map((d) => String.fromCharCode(0x30 + d)).join(''), k.v);
}
