// Floating-point numbers exactly as Triton's HTTP frontend prints them (docs/architecture.md#answers).
//
// Triton writes response JSON with rapidjson's Writer (kWriteNanAndInfFlag). FP32 elements are
// widened to double, and every double goes through Writer::Double, i.e. rapidjson's Grisu2 digit
// generation (Loitsch 2010) followed by its own "prettify" layout. Grisu2 is not the shortest,
// closest round-trip algorithm behind JavaScript's Number#toString, and Triton's pinned rapidjson
// predates the 2021 fix of its final rounding step (see the fractional-digit loop below), so roughly
// 27% of random FP32 values and 32% of random FP64 values print differently from String(x) — nearly
// always a different last digit, sometimes one digit more (Math.fround(0.2) is 0.20000000298023225 in
// Triton, 0.20000000298023224 in JS; 0.1 + 0.2 is 0.30000000000000007). So this module runs that
// Grisu2 itself, with rapidjson's exact rounding at every step, on 64-bit quantities held as two
// 32-bit halves in plain numbers (BigInt would allocate on every operation). Only the cached powers
// of ten are built with BigInt, once.
//
// Layout rules reproduced (rapidjson internal/dtoa.h, Prettify, maxDecimalPlaces 324):
//   ±0 -> "0.0" / "-0.0"; NaN -> "NaN"; ±Inf -> "Infinity" / "-Infinity" (bare tokens);
//   with digits D (n of them) and value D × 10^k, kk = n + k:
//   k >= 0 and kk <= 21 -> D, k zeros, ".0"            (2 -> "2.0", 1e20 -> "100000000000000000000.0")
//   0 < kk <= 21        -> D with '.' after kk digits   (12.34)
//   -6 < kk <= 0        -> "0." then -kk zeros, then D  (0.001234)
//   otherwise           -> "d.ddde<exp>" or "de<exp>", exponent without '+' (1e21, 1.5e-7)
// Verified against real Triton 2.51 (test/unit/encode/fixtures) and against rapidjson as of just
// before commit bb06211 (compiled), which matches Triton on every fixture entry; current rapidjson does not.

const TWO32 = 4294967296;
const INV_2_32 = 1 / TWO32;
const INV_2_16 = 1 / 65536;

// ---------------------------------------------------------------- cached powers of ten
//
// rapidjson keeps 10^k for k = -348, -340, ..., 340 as a normalised 64-bit significand (rounded to
// nearest) and a binary exponent. It picks one from the binary exponent e of the upper boundary:
// dk = (-61 - e) * 0.30102999566398114 + 347, k = ceil(dk), index = (k >> 3) + 1. The choice depends
// only on e, so everything derived from it is tabulated per e here.

const MIN_E = -1137; // boundary exponent of the smallest subnormal (f = 1, shifted left by 62)
const MAX_E = 960; // boundary exponent of the largest finite double
const E_COUNT = MAX_E - MIN_E + 1;

/** 16-bit limbs of the cached power's significand, most significant first. */
const POW_L3 = new Float64Array(E_COUNT);
const POW_L2 = new Float64Array(E_COUNT);
const POW_L1 = new Float64Array(E_COUNT);
const POW_L0 = new Float64Array(E_COUNT);
/** Decimal exponent K such that the scaled value is v × 10^-K. */
const POW_K = new Int32Array(E_COUNT);
/** -(exponent of the scaled product): the bit position of the "decimal point" (34..60). */
const POW_SHIFT = new Int32Array(E_COUNT);
/** 2^(shift - 32): one unit of the integral part, in the high word. */
const POW_ONE_HI = new Float64Array(E_COUNT);

/** 2^i for i in 0..63 (Math.pow is slow in V8's optimised code). */
const POW2 = new Float64Array(64);
for (let i = 0; i < 64; i++) POW2[i] = 2 ** i;

function cachedPower(k: number): { f: bigint; e: number } {
  // Round-to-nearest 64-bit significand of 10^k.
  if (k >= 0) {
    const n = 10n ** BigInt(k);
    const bits = n.toString(2).length;
    if (bits <= 64) return { f: n << BigInt(64 - bits), e: bits - 64 };
    const drop = BigInt(bits - 64);
    let f = (n + (1n << (drop - 1n))) >> drop;
    let e = bits - 64;
    if (f === 1n << 64n) { f >>= 1n; e += 1; }
    return { f, e };
  }
  const d = 10n ** BigInt(-k);
  const m = 63 + d.toString(2).length; // 2^m / d lies in [2^62, 2^64)
  let shift = m;
  let f = ((1n << BigInt(shift)) * 2n / d + 1n) / 2n;
  if (f < 1n << 63n) { shift += 1; f = ((1n << BigInt(shift)) * 2n / d + 1n) / 2n; }
  return { f, e: -shift };
}

(function buildPowerTable(): void {
  const powers: { f: bigint; e: number }[] = [];
  for (let i = 0; i < 87; i++) powers.push(cachedPower(-348 + 8 * i));
  for (let e = MIN_E; e <= MAX_E; e++) {
    // Same double arithmetic as rapidjson's GetCachedPower, so the same power is chosen.
    const dk = (-61 - e) * 0.30102999566398114 + 347;
    let k = Math.trunc(dk);
    if (dk - k > 0.0) k++;
    const index = (k >> 3) + 1;
    const p = powers[index];
    if (p === undefined) throw new Error(`json-number: no cached power for exponent ${e}`);
    const t = e - MIN_E;
    POW_K[t] = -(-348 + index * 8);
    POW_SHIFT[t] = -(e + p.e + 64);
    if (POW_SHIFT[t] < 32 || POW_SHIFT[t] > 60) throw new Error('json-number: shift out of range');
    POW_ONE_HI[t] = 2 ** (POW_SHIFT[t] - 32);
    POW_L3[t] = Number((p.f >> 48n) & 0xffffn);
    POW_L2[t] = Number((p.f >> 32n) & 0xffffn);
    POW_L1[t] = Number((p.f >> 16n) & 0xffffn);
    POW_L0[t] = Number(p.f & 0xffffn);
  }
})();

/**
 * The table above, a row per boundary exponent e (row e - MIN_E): the cached power's 64-bit
 * significand, K, and the shift. json/number-print-wasm.ts lays it out in its memory.
 */
export const cachedPowers = {
  minE: MIN_E,
  rows: E_COUNT,
  significand: (t: number): bigint => (BigInt(POW_L3[t]!) << 48n) | (BigInt(POW_L2[t]!) << 32n) | (BigInt(POW_L1[t]!) << 16n) | BigInt(POW_L0[t]!),
  k: (t: number): number => POW_K[t]!,
  shift: (t: number): number => POW_SHIFT[t]!,
};

/** The table as three arrays (significand, K, shift a row): the compiled lane's printer's (native/triton-double.h). */
export function cachedPowerArrays(): { readonly significands: BigUint64Array; readonly k: Int32Array; readonly shift: Int32Array } {
  const significands = new BigUint64Array(E_COUNT), k = new Int32Array(E_COUNT), shift = new Int32Array(E_COUNT);
  for (let t = 0; t < E_COUNT; t++) {
    significands[t] = cachedPowers.significand(t);
    k[t] = POW_K[t]!;
    shift[t] = POW_SHIFT[t]!;
  }
  return { significands, k, shift };
}

// ---------------------------------------------------------------- 64-bit helpers

// 64-bit operands of mulRounded, as (high word, low word) pairs. Passing them through a typed array
// keeps the doubles unboxed: V8 allocates a heap number for every double passed as an argument to a
// call it does not inline, or stored in a module-level \`let\`.
const reg = new Float64Array(6);
const R_V = 0; // normalised v
const R_P = 2; // upper boundary m+
const R_M = 4; // lower boundary m-

/**
 * Replaces the 64-bit value a in reg[slot], reg[slot + 1] with the high 64 bits of the 128-bit
 * product a × c, plus one when bit 63 of the low half is set: rapidjson's DiyFp::operator* rounding.
 * c is the cached power of table row t, as 16-bit limbs. Every partial product is < 2^48 and every
 * column sum < 2^51, so doubles hold them exactly.
 */
function mulRounded(slot: number, t: number): void {
  const ah = reg[slot]!, al = reg[slot + 1]!;
  // Math.floor(x × 2^-16) rather than % or /: the double remainder is a slow fmod call in V8, and
  // multiplying by an exact power of two is cheaper than dividing.
  const c0 = POW_L0[t]!, c1 = POW_L1[t]!, c2 = POW_L2[t]!, c3 = POW_L3[t]!;
  let col = al * c0; // bits 0..
  let q = Math.floor(col * INV_2_16);
  col = al * c1 + q; // bits 16..
  q = Math.floor(col * INV_2_16);
  col = al * c2 + ah * c0 + q; // bits 32..
  q = Math.floor(col * INV_2_16);
  col = al * c3 + ah * c1 + q; // bits 48..
  q = Math.floor(col * INV_2_16);
  const round = col - q * 65536 >= 32768 ? 1 : 0; // bit 63
  col = ah * c2 + q; // bits 64..
  q = Math.floor(col * INV_2_16);
  const b64 = col - q * 65536;
  col = ah * c3 + q; // bits 80..127, < 2^48
  let hi = Math.floor(col * INV_2_16);
  let lo = (col - hi * 65536) * 65536 + b64 + round;
  if (lo === TWO32) { lo = 0; hi += 1; }
  reg[slot] = hi;
  reg[slot + 1] = lo;
}

// ---------------------------------------------------------------- Grisu2

const POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000];

/** Generated digits (values 0..9), reused by every call. */
const digits = new Uint8Array(32);
let digitCount = 0;
/** Decimal exponent of the last generated digit. */
let decimalExponent = 0;

const bits = new Float64Array(1);
const bitWords = new Uint32Array(bits.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const HI_WORD = LITTLE_ENDIAN ? 1 : 0;
const LO_WORD = LITTLE_ENDIAN ? 0 : 1;

/** Runs Grisu2 on a finite positive double; leaves digits, digitCount and decimalExponent. */
function grisu2(v: number): void {
  bits[0] = v;
  const hiWord = bitWords[HI_WORD]!;
  const biased = hiWord >>> 20;
  let fH = hiWord & 0xfffff;
  const fL = bitWords[LO_WORD]!;
  let e: number;
  if (biased !== 0) { fH += 0x100000; e = biased - 1075; } else { e = -1074; }
  const isPowerOfTwo = biased !== 0 && fH === 0x100000 && fL === 0;

  // Normalise f so bit 63 is set (a shift by 11 for every normal number); the boundaries share that
  // exponent. Upper boundary m+ = v + ulp/2; lower m- = v - ulp/2, or v - ulp/4 when v is a power
  // of two (rapidjson tests f == hidden bit, which also holds for the smallest normal).
  const sh = fH !== 0 ? Math.clz32(fH) : 32 + Math.clz32(fL);
  let vH: number, vL: number;
  if (sh >= 32) {
    vH = fL * POW2[sh - 32]!;
    vL = 0;
  } else {
    const loShifted = fL * POW2[sh]!; // < 2^(32+sh) <= 2^63, exact
    const carry = Math.floor(loShifted * INV_2_32);
    vL = loShifted - carry * TWO32;
    vH = fH * POW2[sh]! + carry;
  }
  const t = e - sh - MIN_E;
  let pH = vH, pL = vL;
  if (sh - 1 >= 32) pH += POW2[sh - 33]!;
  else { pL += POW2[sh - 1]!; if (pL >= TWO32) { pL -= TWO32; pH += 1; } }
  const lowGap = isPowerOfTwo ? sh - 2 : sh - 1;
  let mH = vH, mL = vL;
  if (lowGap >= 32) mH -= POW2[lowGap - 32]!;
  else { mL -= POW2[lowGap]!; if (mL < 0) { mL += TWO32; mH -= 1; } }

  reg[R_V] = vH; reg[R_V + 1] = vL;
  reg[R_P] = pH; reg[R_P + 1] = pL;
  reg[R_M] = mH; reg[R_M + 1] = mL;
  mulRounded(R_V, t);
  mulRounded(R_P, t);
  mulRounded(R_M, t);
  const wH = reg[R_V], wL = reg[R_V + 1]!;
  // Wp.f-- and Wm.f++ narrow the interval by the products' possible rounding error.
  let upH = reg[R_P], upL = reg[R_P + 1]! - 1;
  if (upL < 0) { upL += TWO32; upH -= 1; }
  let lowH = reg[R_M], lowL = reg[R_M + 1]! + 1;
  if (lowL === TWO32) { lowL = 0; lowH += 1; }

  let deltaH = upH - lowH, deltaL = upL - lowL;
  if (deltaL < 0) { deltaL += TWO32; deltaH -= 1; }
  let wpwH = upH - wH, wpwL = upL - wL; // wp_w = Mp - W
  if (wpwL < 0) { wpwL += TWO32; wpwH -= 1; }

  // Digit generation. The scaled upper boundary is split at bit s into an integral part p1 and a
  // fraction p2; s is in [34, 60] for every exponent, so p1 < 2^30 and the split falls inside the
  // high word.
  const oneH = POW_ONE_HI[t]!;
  const invOneH = 1 / oneH; // exact: a power of two
  const mask = oneH - 1;
  let p1 = Math.floor(upH * invOneH);
  let p2H = upH & mask;
  let p2L = upL;
  let kappa = p1 < 10 ? 1 : p1 < 100 ? 2 : p1 < 1000 ? 3 : p1 < 10000 ? 4 : p1 < 100000 ? 5
    : p1 < 1000000 ? 6 : p1 < 10000000 ? 7 : p1 < 100000000 ? 8 : 9;
  let n = 0;

  // Integral digits: p1's decimal digits, each followed by the test rest <= delta with
  // rest = (p1 mod 10^kappa) × 2^s + p2. They are written at once, by constant divisions, and the
  // remainders come from the prefix written so far (p1 - prefix × 10^kappa): no division by a
  // power of ten from a table for every digit. rest >= p2 at every digit, so when p2 > delta none
  // can stop generation (the usual case). p1 >= 2^(62 - s) >= 3: its first digit is not 0.
  // rapidjson counts at most 9 digits in p1: a p1 >= 10^9, should it occur, keeps the loop's quirky
  // first digit.
  if (p1 < 1e9) {
    let x = p1 | 0;
    for (let i = kappa - 1; i > 0; i--) {
      const q = (x / 10) | 0;
      digits[i] = x - q * 10;
      x = q;
    }
    digits[0] = x;
    if (p2H > deltaH || (p2H === deltaH && p2L > deltaL)) {
      n = kappa;
      kappa = 0;
    } else {
      // The last digit leaves rest = p2 <= delta: generation stops at one of them.
      let prefix = 0;
      for (let i = 0; ; i++) {
        prefix = prefix * 10 + digits[i]!;
        kappa--;
        const restH = (p1 - prefix * POW10[kappa]!) * oneH + p2H;
        if (restH < deltaH || (restH === deltaH && p2L <= deltaL)) {
          digitCount = i + 1;
          decimalExponent = POW_K[t]! + kappa;
          grisuRound(i + 1, deltaH, deltaL, restH, p2L, POW10[kappa]! * oneH, wpwH, wpwL);
          return;
        }
      }
    }
  } else {
    while (kappa > 0) {
      const pow = POW10[kappa - 1]!;
      const d = Math.floor(p1 / pow);
      p1 -= d * pow;
      if (d !== 0 || n !== 0) digits[n++] = d;
      kappa--;
      const restH = p1 * oneH + p2H;
      if (restH < deltaH || (restH === deltaH && p2L <= deltaL)) {
        digitCount = n;
        decimalExponent = POW_K[t]! + kappa;
        grisuRound(n, deltaH, deltaL, restH, p2L, POW10[kappa]! * oneH, wpwH, wpwL);
        return;
      }
    }
  }

  // Fractional digits: rapidjson multiplies the fraction p2 and delta by ten for each digit, and
  // stops once p2 < delta. Neither can exceed 2^64 there (delta <= p2 < 2^s before each multiply),
  // so no uint64_t wrap-around needs emulating. It then scales wp_w by kPow10[-kappa] only while
  // -kappa < 9 and by 0 beyond (its table then held uint32 powers up to 10^8; rapidjson fixed this
  // in 2021, commit bb06211, after Triton's pinned copy). A zero wp_w makes GrisuRound a no-op, so
  // from the ninth fractional digit on the last digit is never rounded: that is why Triton prints
  // 0.1 + 0.2 as 0.30000000000000007 and 2^54 as 18014398509481985.0.
  //
  // Here generation takes two digits a step: ten times the remainder after the first is the
  // remainder after both plus the second digit × one, which decides whether it stops after the
  // first (the same test, on values ten times as large). Measured on 150,528 FP32 values (CPU
  // time): 12 % less in all for magnitudes 1-100, 23 % for probabilities in (0, 1), than a digit a
  // step. p1's digits were written by now, so no leading zero is skipped here.
  if (oneH <= 131072) {
    // s <= 49: ten times any of them stays below 2^53, so each is one exact double, kept here as
    // a fraction of one unit (value / 2^s, exact too): a digit is then floor(10 x) and the
    // remainder 10 x - digit, the shortest dependency chain per digit.
    let x = (p2H * TWO32 + p2L) * invOneH * INV_2_32;
    let delta = (deltaH * TWO32 + deltaL) * invOneH * INV_2_32;
    let wpw = (wpwH * TWO32 + wpwL) * invOneH * INV_2_32;
    if (oneH <= 16384) {
      // s <= 46: a hundred times too.
      for (;;) {
        const y = x * 100;
        const pair = Math.floor(y);
        const d1 = (pair * 205) >> 11; // pair / 10 for pair < 1024
        const d2 = pair - d1 * 10;
        digits[n++] = d1;
        const rest = d2 + (y - pair); // ten times the remainder after d1
        if (rest < delta * 100) {
          x = rest / 10; // exact: the remainder after d1 is a multiple of 2^-s
          delta *= 10;
          wpw *= 10;
          kappa -= 1;
          break;
        }
        digits[n++] = d2;
        x = y - pair;
        delta *= 100;
        wpw *= 100;
        kappa -= 2;
        if (x < delta) break;
      }
    } else {
      for (;;) {
        x *= 10;
        delta *= 10;
        wpw *= 10;
        const d = Math.floor(x);
        digits[n++] = d;
        x -= d;
        kappa--;
        if (x < delta) break;
      }
    }
    digitCount = n;
    decimalExponent = POW_K[t]! + kappa;
    if (-kappa >= 9) return;
    // GrisuRound, as below, in the same exact units (ten_kappa is one).
    while (x < wpw && delta - x >= 1 && (x + 1 < wpw || wpw - x > x + 1 - wpw)) {
      digits[n - 1]! -= 1;
      x += 1;
    }
    return;
  }
  // s >= 50: two 32-bit words each (high words < 2^28, so a hundred times one stays exact; delta
  // × 100 may pass 2^64 only where it is compared, as a value). wp_w only matters once generation
  // stops: it is scaled then, by kPow10[-kappa] as rapidjson does, not by ten at every digit.
  for (;;) {
    let x = p2L * 100;
    let c = Math.floor(x * INV_2_32);
    const restL = x - c * TWO32;
    let restH = p2H * 100 + c;
    const pair = Math.floor(restH * invOneH);
    restH -= pair * oneH;
    const d1 = (pair * 205) >> 11;
    const d2 = pair - d1 * 10;
    digits[n++] = d1;
    x = deltaL * 100;
    c = Math.floor(x * INV_2_32);
    const delta100L = x - c * TWO32;
    const delta100H = deltaH * 100 + c;
    const tenRestH = restH + d2 * oneH; // ten times the remainder after d1 (low word: restL)
    if (tenRestH < delta100H || (tenRestH === delta100H && restL < delta100L)) {
      // Stops after d1: remainder p2 × 10 - d1 × 2^s, delta × 10.
      x = p2L * 10;
      c = Math.floor(x * INV_2_32);
      p2L = x - c * TWO32;
      p2H = p2H * 10 + c - d1 * oneH;
      x = deltaL * 10;
      c = Math.floor(x * INV_2_32);
      deltaL = x - c * TWO32;
      deltaH = deltaH * 10 + c;
      kappa -= 1;
      break;
    }
    digits[n++] = d2;
    p2H = restH;
    p2L = restL;
    deltaH = delta100H;
    deltaL = delta100L;
    kappa -= 2;
    if (p2H < deltaH || (p2H === deltaH && p2L < deltaL)) break;
  }
  digitCount = n;
  decimalExponent = POW_K[t]! + kappa;
  if (-kappa >= 9) return;
  // wp_w × 10^-kappa: below delta × 10^-kappa < 2^64, so no wrap-around; from 16-bit pieces of
  // wp_w, each product < 2^43.
  const scale = POW10[-kappa]!;
  const a0 = (wpwL & 0xffff) * scale;
  const a1 = Math.floor(wpwL * INV_2_16) * scale;
  const a2 = (wpwH & 0xffff) * scale;
  const a3 = Math.floor(wpwH * INV_2_16) * scale;
  const a1High = Math.floor(a1 * INV_2_16);
  const low = a0 + (a1 - a1High * 65536) * 65536;
  const carry = Math.floor(low * INV_2_32);
  grisuRound(n, deltaH, deltaL, p2H, p2L, oneH, a1High + a2 + a3 * 65536 + carry, low - carry * TWO32);
}

/**
 * rapidjson's GrisuRound on 64-bit operands as (high, low) words (ten_kappa's low word is always
 * 0): walks the last digit down while that brings the candidate closer to the exact value W and
 * keeps it inside the narrowed interval. All operands are < 2^64 and the conditions keep every
 * difference non-negative, as in the C++ with uint64_t.
 */
function grisuRound(n: number, deltaH: number, deltaL: number, restH: number, restL: number, tenKappaH: number, wpwH: number, wpwL: number): void {
  for (;;) {
    // rest < wp_w
    if (!(restH < wpwH || (restH === wpwH && restL < wpwL))) return;
    // delta - rest >= ten_kappa
    let dH = deltaH - restH, dL = deltaL - restL;
    if (dL < 0) { dL += TWO32; dH -= 1; }
    if (dH < tenKappaH) return;
    // rest + ten_kappa < wp_w  ||  wp_w - rest > rest + ten_kappa - wp_w
    const sH = restH + tenKappaH;
    if (!(sH < wpwH || (sH === wpwH && restL < wpwL))) {
      let aH = wpwH - restH, aL = wpwL - restL; // wp_w - rest
      if (aL < 0) { aL += TWO32; aH -= 1; }
      let bH = sH - wpwH, bL = restL - wpwL; // rest + ten_kappa - wp_w
      if (bL < 0) { bL += TWO32; bH -= 1; }
      if (!(aH > bH || (aH === bH && aL > bL))) return;
    }
    digits[n - 1]! -= 1;
    restH = sH;
  }
}

// ---------------------------------------------------------------- layout

const CH_0 = 0x30;
const CH_DOT = 0x2e;
const CH_MINUS = 0x2d;
const CH_E = 0x65;

/** Longest finite output: "-1.2345678901234567e-308" is 24 bytes. */
export const MAX_TRITON_DOUBLE_LENGTH = 25;

/**
 * Writes the ASCII text of the last grisu2 result (rapidjson's Prettify) at target[at..]; returns
 * the end offset. The caller has written any '-' already.
 */
function writeLayout(target: Uint8Array, at: number): number {
  const n = digitCount;
  const k = decimalExponent;
  const kk = n + k; // 10^(kk-1) <= v < 10^kk
  if (k >= 0 && kk <= 21) { // 1234e7 -> 12340000000.0
    for (let i = 0; i < n; i++) target[at++] = CH_0 + digits[i]!;
    for (let i = 0; i < k; i++) target[at++] = CH_0;
    target[at++] = CH_DOT;
    target[at++] = CH_0;
    return at;
  }
  if (kk > 0 && kk <= 21) { // 1234e-2 -> 12.34
    for (let i = 0; i < kk; i++) target[at++] = CH_0 + digits[i]!;
    target[at++] = CH_DOT;
    for (let i = kk; i < n; i++) target[at++] = CH_0 + digits[i]!;
    return at;
  }
  if (kk > -6 && kk <= 0) { // 1234e-6 -> 0.001234
    target[at++] = CH_0;
    target[at++] = CH_DOT;
    for (let i = kk; i < 0; i++) target[at++] = CH_0;
    for (let i = 0; i < n; i++) target[at++] = CH_0 + digits[i]!;
    return at;
  }
  // Exponent form: 1e30, 1.234e33, 1.5e-7. rapidjson's "0.0" truncation for kk < -324 cannot
  // trigger: the smallest subnormal has kk = -323.
  target[at++] = CH_0 + digits[0]!;
  if (n > 1) {
    target[at++] = CH_DOT;
    for (let i = 1; i < n; i++) target[at++] = CH_0 + digits[i]!;
  }
  target[at++] = CH_E;
  let x = kk - 1;
  if (x < 0) { target[at++] = CH_MINUS; x = -x; }
  if (x >= 100) {
    const h = Math.floor(x / 100);
    target[at++] = CH_0 + h;
    x -= h * 100;
    const t = Math.floor(x / 10);
    target[at++] = CH_0 + t;
    target[at++] = CH_0 + x - t * 10;
  } else if (x >= 10) {
    const t = Math.floor(x / 10);
    target[at++] = CH_0 + t;
    target[at++] = CH_0 + x - t * 10;
  } else {
    target[at++] = CH_0 + x;
  }
  return at;
}

const NAN = [0x4e, 0x61, 0x4e];
const INFINITY = [0x49, 0x6e, 0x66, 0x69, 0x6e, 0x69, 0x74, 0x79];
const ZERO = [0x30, 0x2e, 0x30];

function writeBytes(target: Uint8Array, at: number, bytes: readonly number[]): number {
  for (const b of bytes) target[at++] = b;
  return at;
}

/**
 * Writes what Triton prints for the double x into target at offset `at` (ASCII, at most
 * MAX_TRITON_DOUBLE_LENGTH bytes; the caller ensures room) and returns the end offset. The
 * allocation-free form of formatTritonFp64, for writers that build the response body directly.
 */
export function writeTritonFp64(x: number, target: Uint8Array, at: number): number {
  if (x !== x) return writeBytes(target, at, NAN);
  if (x < 0 || (x === 0 && 1 / x < 0)) { // rapidjson keeps the sign of zero: "-0.0"
    target[at++] = CH_MINUS;
    x = -x;
  }
  if (x === Infinity) return writeBytes(target, at, INFINITY);
  if (x === 0) return writeBytes(target, at, ZERO);
  grisu2(x);
  return writeLayout(target, at);
}

/** Same as writeTritonFp64; FP32 values are widened to double by Triton before printing. */
export function writeTritonFp32(x: number, target: Uint8Array, at: number): number {
  return writeTritonFp64(x, target, at);
}

const scratch = new Uint8Array(32);

/** What Triton's HTTP frontend prints for a double (an FP64 element, or any double it writes). */
export function formatTritonFp64(x: number): string {
  if (x !== x) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  const c = scratch;
  const n = writeTritonFp64(x, c, 0);
  // One fixed-arity fromCharCode builds a flat string in a single step; measured faster than
  // Number#toString of the digits, apply(), or concatenating pieces. Unused slots are sliced off.
  return String.fromCharCode(c[0]!, c[1]!, c[2]!, c[3]!, c[4]!, c[5]!, c[6]!, c[7]!, c[8]!, c[9]!,
    c[10]!, c[11]!, c[12]!, c[13]!, c[14]!, c[15]!, c[16]!, c[17]!, c[18]!, c[19]!,
    c[20]!, c[21]!, c[22]!, c[23]!, c[24]!).slice(0, n);
}

/**
 * What Triton prints for an FP32 element whose value is x (already a float32 value, e.g. from
 * readFloatLE). Triton widens the float to double before writing it, so this is the double
 * formatting of the same value: 0.1f -> "0.10000000149011612".
 */
export function formatTritonFp32(x: number): string {
  return formatTritonFp64(x);
}
