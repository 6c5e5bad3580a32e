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
