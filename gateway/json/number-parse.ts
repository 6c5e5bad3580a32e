// Number tokens read exactly as Triton reads them. Triton parses request JSON with rapidjson in
// its default ("normal precision") mode, so to put the same bits in a tensor we follow the same
// steps rather than JavaScript's correctly rounded parse:
// - an integer token that fits 64 bits stays an integer (signed if negative, unsigned above 2^63-1);
//   "-0" is the integer 0;
// - otherwise the significand is accumulated (integer part, then up to 2^53 in the fraction, then
//   as a double with at most 17 significant digits) and scaled by one multiplication or division by
//   a power of ten: `significand * 10^p` or `significand / 10^-p`, each power the correctly rounded
//   double. That is exact for short inputs and can differ from strtod in the last bit otherwise —
//   which is what Triton stores.
// - NaN, Inf and Infinity (optionally negative) are accepted.

const POW10: number[] = Array.from({ length: 309 }, (_, i) => Number(`1e${i}`));

function fastPath(significand: number, exp: number): number {
  if (exp < -308) return 0;
  return exp >= 0 ? significand * POW10[exp]! : significand / POW10[-exp]!;
}

function scale(d: number, p: number): number {
  return p < -308 ? fastPath(fastPath(d, -308), p + 308) : fastPath(d, p);
}

const MAX_SAFE = 9007199254740991; // 2^53 - 1

/** What scanNumber found: the value (a typed array keeps the double unboxed) and its kind. */
export const scanned = new Float64Array(2);
/** scanned[1]: a double, as rapidjson's Double(); the value is in scanned[0]. */
export const SCAN_DOUBLE = 0;
/** scanned[1]: an integer of at most 15 digits, as rapidjson's Int()/Uint(); exact in scanned[0]. */
export const SCAN_INTEGER = 1;
/**
 * scanned[1]: a valid token outside the fast path (NaN, Inf, 16+ integer digits, 18+ significant
 * digits, a 4-digit exponent, |p| > 308, a result past DBL_MAX): the caller reads
 * [start, returned offset) with readNumber.
 */
export const SCAN_SLOW = 2;
/** scanned[1]: not a valid number token: the caller's checked reader reports rapidjson's error. */
export const SCAN_INVALID = 3;

/**
 * Scans the number token at `start` (not past `end`) and returns the offset just past it, with its
 * value in scanned[0] and kind in scanned[1] — the tensor `data` fast path: one pass over the
 * bytes, state in locals, nothing allocated. `view` is a DataView of the same bytes as `b`: the
 * fraction is read eight digits at a time where it can be (eightDigits).
 *
 * The value is rapidjson's (readNumber's) for every token it takes: an integer of at most 15
 * digits (exact), or a token with an integer part of at most 15 digits, at most 17 significant
 * digits (leading zeros of "0.000ddd" do not count) and an exponent of at most 3 digits, with
 * p = exponent - fraction digits in [-308, 308]. With V the integer of all its digits:
 * - V < 2^53 * 10: rapidjson's i64 accumulation takes every fraction digit (it stops only after
 *   the significand passed 2^53 - 1), then (double)i64 rounds V once. Here V is built from int32
 *   runs of up to 9 digits: exact below 2^53, rounded once above (see the comment there). Then one
 *   multiplication or division by the correctly rounded power of ten, as rapidjson's
 *   StrtodNormalPrecision does for |p| <= 308.
 * - V >= 2^53 * 10: rapidjson goes on in double arithmetic: SCAN_SLOW.
 * Measured on classifier_fp32's body (16-17 digits a number): see bench/RESULTS.md.
 */
export function scanNumber(b: Uint8Array, view: DataView, start: number, end: number): number {
  let p = start;
  let c = p < end ? b[p]! : -1;
  const neg = c === 0x2d;
  if (neg) c = ++p < end ? b[p]! : -1;
  if (c < 0x30 || c > 0x39) return scanNotDigit(b, p, end, c);
  // The integer part: exact while it has at most 15 digits.
  const intStart = p;
  let ip = c - 0x30;
  p++;
  if (ip !== 0) {
    while (p < end && (c = b[p]!) >= 0x30 && c <= 0x39) {
      ip = ip * 10 + (c - 0x30);
      p++;
    }
  }
  const intEnd = p;
  c = p < end ? b[p]! : -1;
  // The fraction: two int32 runs of up to 9 digits (f1 then f2); more digits are SCAN_SLOW. The
  // leading zeros of "0.000ddd" add nothing to V and are skipped.
  let f1 = 0, n1 = 0, f2 = 0, n2 = 0;
  let dot = -1;
  let fracStart = -1;
  let fracDigits = 0;
  let slow = intEnd - intStart > 15;
  if (c === 0x2e) {
    dot = p;
    p++;
    if (ip === 0) while (p < end && b[p] === 0x30) p++;
    fracStart = p;
    p = digitRun(b, view, p, end);
    f1 = run[0]!;
    n1 = p - fracStart;
    if (n1 === 9) {
      p = digitRun(b, view, p, end);
      f2 = run[0]!;
      n2 = p - fracStart - 9;
      if (n2 === 9) {
        while (p < end && (c = b[p]!) >= 0x30 && c <= 0x39) {
          slow = true;
          p++;
        }
      }
    }
    fracDigits = p - dot - 1;
    if (fracDigits === 0) {
      scanned[1] = SCAN_INVALID; // "Miss fraction part in number."
      return p;
    }
    c = p < end ? b[p]! : -1;
  }
  let p10 = -fracDigits;
  if (c === 0x65 || c === 0x45) {
    p = scanExponent(b, p + 1, end);
    if (exponent[1] === 0) { scanned[1] = SCAN_INVALID; return p; } // "Miss exponent in number."
    p10 += exponent[0]!;
    if (exponent[1]! > 3 || p10 < -308 || p10 > 308) slow = true;
  } else if (dot < 0) {
    return scannedInteger(p, neg, ip, slow);
  }
  if (slow) {
    scanned[1] = SCAN_SLOW;
    return p;
  }
  // V from its runs: exact below 2^53, where every partial value (a prefix of V) is exact too.
  let sig = n1 === 0 ? ip : ip * POW10[n1]! + f1;
  if (n2 > 0) sig = sig * POW10[n2]! + f2;
  if (sig > MAX_SAFE) {
    sig = largeSignificand(b, sig, n2, ip === 0 ? n1 + n2 : intEnd - intStart + n1 + n2, ip === 0 ? fracStart : intStart, dot);
    if (sig < 0) {
      scanned[1] = SCAN_SLOW;
      return p;
    }
  }
  return scannedDouble(p, neg, p10 >= 0 ? sig * POW10[p10]! : sig / POW10[-p10]!);
}

/**
 * scanNumber's significand V past 2^53 — 16 or more digits, and a fraction (an integer part alone
 * is below 2^53) — as rapidjson's i64 holds it, or -1 where rapidjson goes on in double arithmetic
 * (SCAN_SLOW). `sig` is V built from its runs, the last of `n2` digits; V's `count` digits start at
 * `first` (the dot at `dot` skipped). Above 2^53 the last step, prefix * 10^n2 + f2, rounds once as
 * (double)i64 does when its product is exact: with V < 2^53 * 10 (rapidjson's limit, checked
 * below) and n2 >= 4, prefix * 5^n2 <= V / 2^n2 < 2^53 * 10 / 16 < 2^53. That is the usual
 * 17-digit token (integer part of 0-3 digits, fraction of 14-17); the others are re-read by
 * significandOf.
 */
function largeSignificand(b: Uint8Array, sig: number, n2: number, count: number, first: number, dot: number): number {
  if (n2 < 4) {
    if (count > 17) return -1; // 18 digits are past 2^53 * 10: rapidjson goes on in double arithmetic
    sig = significandOf(b, first, dot, count);
  }
  return sig >= 90071992547409920 ? -1 : sig; // 2^53 * 10: rapidjson stops its i64 before the last digit
}

/**
 * scanNumber's double `v` (of a token ending at p), or SCAN_SLOW past DBL_MAX (rapidjson's "Number
 * too big to be stored in double.").
 */
function scannedDouble(p: number, neg: boolean, v: number): number {
  if (v === Infinity) {
    scanned[1] = SCAN_SLOW;
  } else {
    scanned[0] = neg ? -v : v;
    scanned[1] = SCAN_DOUBLE;
  }
  return p;
}

/** What digitRun read: the value of its digits. */
const run = new Float64Array(1);

/**
 * Up to nine digits from p (a run of the fraction): their end, and their value in run[0]. Eight
 * are read at once where they can be (eightDigits).
 */
function digitRun(b: Uint8Array, view: DataView, p: number, end: number): number {
  const limit = Math.min(end, p + 9);
  let v = p + 8 <= end ? eightDigits(view, p) : -1;
  if (v >= 0) p += 8;
  else v = 0;
  let c: number;
  while (p < limit && (c = b[p]!) >= 0x30 && c <= 0x39) {
    v = v * 10 + (c - 0x30);
    p++;
  }
  run[0] = v;
  return p;
}

/** scanNumber's token without fraction or exponent: an integer of at most 15 digits, else SCAN_SLOW. */
function scannedInteger(p: number, neg: boolean, ip: number, slow: boolean): number {
  if (slow) {
    scanned[1] = SCAN_SLOW;
  } else {
    scanned[0] = neg && ip !== 0 ? -ip : ip; // "-0" is the integer 0
    scanned[1] = SCAN_INTEGER;
  }
  return p;
}

/** What scanExponent found: the exponent's value (signed) and its number of digits (0: none). */
const exponent = new Float64Array(2);

/** The exponent after a number's 'e' or 'E' at p: its end, with what it holds in `exponent`. */
function scanExponent(b: Uint8Array, p: number, end: number): number {
  let c = p < end ? b[p]! : -1;
  let expNeg = false;
  if (c === 0x2b) p++;
  else if (c === 0x2d) { expNeg = true; p++; }
  const expStart = p;
  let exp = 0;
  while (p < end && (c = b[p]!) >= 0x30 && c <= 0x39) {
    exp = exp * 10 + (c - 0x30);
    p++;
  }
  exponent[0] = expNeg ? -exp : exp;
  exponent[1] = p - expStart;
  return p;
}

/** scanNumber's token that does not start with a digit: NaN, Inf, Infinity (off the fast path), or not a number. */
function scanNotDigit(b: Uint8Array, p: number, end: number, c: number): number {
  if (c === 0x4e || c === 0x49) { // NaN, Inf, Infinity
    while (p < end && ((c = b[p]! | 0x20) >= 0x61 && c <= 0x7a)) p++; // letters
    scanned[1] = SCAN_SLOW;
  } else {
    scanned[1] = SCAN_INVALID;
  }
  return p;
}

/**
 * The value of the eight ASCII digits at p, or -1 when they are not all digits: two little-endian
 * 32-bit loads, checked and combined in-register (SWAR) rather than a loop per byte. Measured on
 * classifier_fp32's body (bench/json-decode.ts): 5-8 % less parse time (CPU time, 40 rounds
 * alternating with the byte loop alone in one process).
 */
function eightDigits(view: DataView, p: number): number {
  let lo = view.getUint32(p, true);
  let hi = view.getUint32(p + 4, true);
  // Each byte in '0'..'9': its high nibble is 3, and still 3 once 6 is added; the second test's
  // nibbles are moved down so that every byte must read 0x33 (no byte can carry into the next
  // without failing the first test: only bytes >= 0xfa carry).
  if ((((lo & 0xf0f0f0f0) | (((lo + 0x06060606) & 0xf0f0f0f0) >>> 4)) ^ 0x33333333)
    | (((hi & 0xf0f0f0f0) | (((hi + 0x06060606) & 0xf0f0f0f0) >>> 4)) ^ 0x33333333)) return -1;
  lo -= 0x30303030; // bytes d0 d1 d2 d3, d0 (the first digit) lowest
  hi -= 0x30303030;
  lo = (lo * 10 + (lo >>> 8)) & 0x00ff00ff; // 10 d0 + d1 and 10 d2 + d3
  hi = (hi * 10 + (hi >>> 8)) & 0x00ff00ff;
  lo = (lo * 100 + (lo >>> 16)) & 0xffff;
  hi = (hi * 100 + (hi >>> 16)) & 0xffff;
  return lo * 10000 + hi;
}

/**
 * The integer V of the `count` digits from q (16 or 17 of them, the '.' at `dot` skipped), rounded
 * once as (double)i64 rounds it: V = A * 10^9 + B with A < 10^8 and B < 10^9 read as int32 runs;
 * A * 10^9 is exact (A * 5^9 < 2^53), so the sum is the only rounding.
 */
function significandOf(b: Uint8Array, q: number, dot: number, count: number): number {
  let a = 0;
  for (let n = count - 9; n > 0; n--) {
    if (q === dot) q++;
    a = a * 10 + (b[q++]! - 0x30);
  }
  let low = 0;
  for (let n = 9; n > 0; n--) {
    if (q === dot) q++;
    low = low * 10 + (b[q++]! - 0x30);
  }
  return a * 1e9 + low;
}

/** Result of reading one number token: an integer (exact) or a double. */
export interface NumberValue {
  /** True when rapidjson holds the token as a 64-bit integer. */
  integer: boolean;
  /** The value; for integers beyond 2^53 see `big`. */
  value: number;
  /** Exact integer value when |value| > 2^53 - 1 (otherwise undefined). */
  big: bigint | undefined;
  /** The sign of a NaN token (-NaN keeps its sign bit in C). */
  negative: boolean;
}

const D0 = 0x30;
const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;

/**
 * Reads the number token [start, end) (already validated by the JSON reader). `out` is reused
 * by the caller to avoid an allocation per element.
 */
export function readNumber(b: Uint8Array, start: number, end: number, out: NumberValue): NumberValue {
  // Fast path, exact and identical to rapidjson's: at most 15 significant digits, no exponent.
  // The value is an integer, or significand / 10^k with both exact doubles (one rounding).
  {
    let q = start;
    const neg = b[q] === 0x2d;
    if (neg) q++;
    let sig = 0;
    let digits = 0;
    let c = b[q]!;
    while (q < end && c >= 0x30 && c <= 0x39 && digits < 16) {
      sig = sig * 10 + (c - 0x30);
      digits++;
      c = b[++q]!;
    }
    if (digits > 0 && digits <= 15) {
      if (q === end) {
        out.integer = true;
        out.big = undefined;
        out.negative = neg;
        out.value = neg && sig !== 0 ? -sig : sig; // "-0" is the integer 0
        return out;
      }
      if (c === 0x2e) {
        q++;
        let frac = 0;
        c = b[q]!;
        while (q < end && c >= 0x30 && c <= 0x39 && digits + frac < 15) {
          sig = sig * 10 + (c - 0x30);
          frac++;
          c = b[++q]!;
        }
        if (q === end && frac > 0) {
          const v = sig / POW10[frac]!;
          out.integer = false;
          out.big = undefined;
          out.negative = neg;
          out.value = neg ? -v : v;
          return out;
        }
      }
    }
  }
  let p = start;
  const minus = b[p] === 0x2d;
  if (minus) p++;
  out.negative = minus;
  out.big = undefined;
  const c0 = b[p];
  if (c0 === 0x4e) { // NaN
    out.integer = false;
    out.value = NaN;
    return out;
  }
  if (c0 === 0x49) { // Inf / Infinity
    out.integer = false;
    out.value = minus ? -Infinity : Infinity;
    return out;
  }

  // Integer part: exact up to 2^64 - 1 (or 2^63 when negative), else a double from there on.
  let useDouble = false;
  let d = 0;
  let intDigits = 0;
  let small = 0; // exact while < 2^53
  let big: bigint | undefined;
  const intStart = p;
  while (p < end && isDigit(b[p])) p++;
  intDigits = p - intStart;
  if (intDigits <= 15) {
    for (let i = intStart; i < p; i++) small = small * 10 + (b[i]! - D0);
  } else {
    big = BigInt(Buffer.from(b.buffer, b.byteOffset + intStart, intDigits).toString('latin1'));
    const limit = minus ? 2n ** 63n : 2n ** 64n - 1n;
    if (big > limit) {
      // rapidjson stops its 64-bit accumulation at the digit that would overflow and continues
      // in double arithmetic: d = (double)i64, then d = d * 10 + digit for each remaining digit.
      let i64 = 0n;
      let i = intStart;
      for (; i < p; i++) {
        const next = i64 * 10n + BigInt(b[i]! - D0);
        if (next > limit) break;
        i64 = next;
      }
      d = Number(i64);
      for (; i < p; i++) d = d * 10 + (b[i]! - D0);
      useDouble = true;
      big = undefined;
    } else if (big <= 9007199254740991n) {
      small = Number(big);
      big = undefined;
    }
  }

  const hasFrac = p < end && b[p] === 0x2e;
  const hasExp = !hasFrac && p < end && (b[p] === 0x65 || b[p] === 0x45);
  if (!hasFrac && !hasExp && !useDouble) {
    out.integer = true;
    if (big !== undefined) {
      const v = minus ? -big : big;
      out.big = v;
      out.value = Number(v);
    } else {
      out.value = minus ? (small === 0 ? 0 : -small) : small;
    }
    return out;
  }

  let expFrac = 0;
  let significandDigits: number;
  if (!useDouble) {
    // i64 accumulation in the fraction continues while the significand is <= 2^53 - 1 before a
    // digit is added. Plain numbers are exact below 2^53; the one step that may cross it (and a
    // significand already past it) goes through BigInt, then (double)i64 rounds once.
    let sig = big === undefined ? small : 0;
    let sigBig = big;
    let crossed = false; // sig already holds the rounded value of an i64 past 2^53
    // rapidjson counts every integer digit after the first (none for a lone "0").
    significandDigits = b[intStart] === D0 ? 0 : intDigits - 1;
    if (hasFrac) {
      p++;
      while (p < end && isDigit(b[p])) {
        const digit = b[p]! - D0;
        if (sigBig !== undefined) {
          if (sigBig > 9007199254740991n) break;
          sigBig = sigBig * 10n + BigInt(digit);
        } else if (crossed) {
          break;
        } else {
          const next = sig * 10 + digit;
          if (next > 9007199254740991) {
            // sig * 10 + digit needs up to 57 bits: (sig / 2^16) * 10 * 2^16 and (sig mod 2^16) * 10
            // + digit are exact doubles, so their sum is the once-rounded (double)i64.
            const hi = Math.floor(sig / 65536);
            sig = hi * 655360 + ((sig - hi * 65536) * 10 + digit);
            crossed = true;
          } else {
            sig = next;
          }
        }
        expFrac--;
        if (sig !== 0 || sigBig !== undefined) significandDigits++;
        p++;
      }
    }
    d = sigBig !== undefined ? Number(sigBig) : sig;
    useDouble = true;
    if (hasFrac) {
      while (p < end && isDigit(b[p])) {
        if (significandDigits < 17) {
          d = d * 10 + (b[p]! - D0);
          expFrac--;
          if (d > 0) significandDigits++;
        }
        p++;
      }
    }
  } else if (hasFrac) {
    // A huge integer part already switched to double; its fraction digits no longer count.
    p++;
    while (p < end && isDigit(b[p])) p++;
  }

  let exp = 0;
  if (p < end && (b[p] === 0x65 || b[p] === 0x45)) {
    p++;
    let expMinus = false;
    if (b[p] === 0x2b) p++;
    else if (b[p] === 0x2d) { expMinus = true; p++; }
    const maxExp = expMinus ? Math.trunc((expFrac + 2147483639) / 10) : 308 - expFrac;
    while (p < end && isDigit(b[p])) {
      if (exp <= maxExp) exp = exp * 10 + (b[p]! - D0);
      p++;
    }
    if (expMinus) exp = -exp;
  }
  const v = scale(d, exp + expFrac);
  out.integer = false;
  out.value = minus ? -v : v;
  return out;
}
