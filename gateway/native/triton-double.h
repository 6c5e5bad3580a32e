// Doubles printed as Triton's HTTP frontend prints them: the C twin of gateway/json/number-print.ts,
// which explains the algorithm (rapidjson's Grisu2 as Triton pins it, with the final rounding step
// it had before 2021) and the layout (its Prettify). There the 64-bit quantities are two doubles
// each; here they are uint64_t, and the 128-bit products unsigned __int128, so each step is the
// arithmetic that file emulates. The cached powers are that file's table, handed over once by
// JavaScript (set_powers), so both sides choose the same power for every exponent.
// test/unit/json/number-print-native.test.ts compares the two on millions of values, and this
// file's two FP32 printers (eight values a step with AVX-512, td_print_fp32_avx512, and one at a
// time) on every FP32 value (print-all-fp32.c).
#ifndef TENSORGATE_TRITON_DOUBLE_H
#define TENSORGATE_TRITON_DOUBLE_H
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/** The boundary exponents number-print.ts tabulates: its MIN_E, and the row count. */
#define TD_MIN_E (-1137)
#define TD_ROWS 2098
/** Longest text of one value ("-1.2345678901234567e-308"), as number-print.ts's MAX_TRITON_DOUBLE_LENGTH. */
#define TD_MAX_LENGTH 25

/** Per boundary exponent (row e - TD_MIN_E): the cached power's significand, K, and the shift. */
static uint64_t *td_pow_f;
static int32_t *td_pow_k, *td_pow_shift;

/** 10^0 … 10^15 (the scalar printer reads the first ten, the AVX-512 one all sixteen). */
static const uint64_t TD_POW10[16] = { 1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
  1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull, 100000000000000ull, 1000000000000000ull };

/** The table, once: false when a row is out of the range the digit generation assumes. */
static bool td_set_powers(const uint64_t *f, const int32_t *k, const int32_t *shift) {
  for (int t = 0; t < TD_ROWS; t++) if (shift[t] < 32 || shift[t] > 60) return false;
  uint64_t *pf = malloc(TD_ROWS * sizeof(uint64_t));
  int32_t *pk = malloc(TD_ROWS * sizeof(int32_t)), *ps = malloc(TD_ROWS * sizeof(int32_t));
  memcpy(pf, f, TD_ROWS * sizeof(uint64_t));
  memcpy(pk, k, TD_ROWS * sizeof(int32_t));
  memcpy(ps, shift, TD_ROWS * sizeof(int32_t));
  free(td_pow_f); free(td_pow_k); free(td_pow_shift);
  td_pow_f = pf; td_pow_k = pk; td_pow_shift = ps;
  return true;
}

/** The high 64 bits of a × c, plus one when bit 63 of the low half is set. */
static inline uint64_t td_mul(uint64_t a, uint64_t c) {
  unsigned __int128 p = (unsigned __int128)a * c;
  return (uint64_t)(p >> 64) + (((uint64_t)p >> 63) & 1);
}

/** Walks the last digit down while that brings it closer to W inside the interval. */
static inline void td_round(char *d, int n, uint64_t delta, uint64_t rest, uint64_t ten_kappa, uint64_t wp_w) {
  while (rest < wp_w && delta - rest >= ten_kappa && (rest + ten_kappa < wp_w || wp_w - rest > rest + ten_kappa - wp_w)) {
    d[n - 1]--;
    rest += ten_kappa;
  }
}

/**
 * Grisu2 of a finite positive double: ASCII digits into d, their count, and the exponent of the last.
 * Always inlined, as td_print is: the AVX-512 printer's lanes that fall back to td_print then run
 * VEX-encoded code. A call into SSE-encoded code right after 512-bit work stalls on the registers'
 * upper halves (measured: a printer 3.5x slower than the scalar one on values of mixed sign).
 */
__attribute__((always_inline)) static inline int td_grisu2(double v, char *d, int *exp10) {
  uint64_t bits;
  memcpy(&bits, &v, 8);
  int biased = (int)(bits >> 52 & 0x7ff), e;
  uint64_t f = bits & ((1ull << 52) - 1);
  if (biased != 0) { f |= 1ull << 52; e = biased - 1075; } else e = -1074;
  bool power_of_two = biased != 0 && f == 1ull << 52;
  int sh = __builtin_clzll(f);
  uint64_t w = f << sh, up = w + (1ull << (sh - 1)), low = w - (1ull << (power_of_two ? sh - 2 : sh - 1));
  int t = e - sh - TD_MIN_E;
  uint64_t c = td_pow_f[t];
  w = td_mul(w, c);
  up = td_mul(up, c) - 1;
  low = td_mul(low, c) + 1;
  uint64_t delta = up - low, wp_w = up - w;
  int s = td_pow_shift[t];
  uint64_t one = 1ull << s;
  uint32_t p1 = (uint32_t)(up >> s);
  uint64_t p2 = up & (one - 1);
  int kappa = p1 < 10 ? 1 : p1 < 100 ? 2 : p1 < 1000 ? 3 : p1 < 10000 ? 4 : p1 < 100000 ? 5 : p1 < 1000000 ? 6
    : p1 < 10000000 ? 7 : p1 < 100000000 ? 8 : 9;
  int n = 0;
  if (p1 < 1000000000) {
    // p1's digits at once, by constant divisions; rest >= p2 at each of them, so when p2 > delta
    // none can stop generation (the usual case), else the first whose rest <= delta does.
    uint32_t x = p1;
    for (int i = kappa - 1; i > 0; i--) { d[i] = (char)('0' + x % 10); x /= 10; }
    d[0] = (char)('0' + x);
    if (p2 > delta) { n = kappa; kappa = 0; }
    else {
      uint32_t prefix = 0;
      for (int i = 0;; i++) {
        prefix = prefix * 10 + (uint32_t)(d[i] - '0');
        kappa--;
        uint64_t rest = ((uint64_t)(p1 - prefix * (uint32_t)TD_POW10[kappa]) << s) + p2;
        if (rest <= delta) {
          *exp10 = td_pow_k[t] + kappa;
          td_round(d, i + 1, delta, rest, (uint64_t)TD_POW10[kappa] << s, wp_w);
          return i + 1;
        }
      }
    }
  } else {
    // rapidjson counts at most 9 digits: a p1 of 10^9 or more keeps its loop's first "digit".
    while (kappa > 0) {
      uint32_t pow = (uint32_t)TD_POW10[kappa - 1], digit = p1 / pow;
      p1 -= digit * pow;
      if (digit != 0 || n != 0) d[n++] = (char)('0' + digit);
      kappa--;
      uint64_t rest = ((uint64_t)p1 << s) + p2;
      if (rest <= delta) {
        *exp10 = td_pow_k[t] + kappa;
        td_round(d, n, delta, rest, (uint64_t)TD_POW10[kappa] << s, wp_w);
        return n;
      }
    }
  }
  // Fractional digits: the fraction and delta times ten for each, until the fraction is below delta
  // (neither passes 2^64: delta <= p2 < 2^s <= 2^60 before each step).
  const uint64_t mask = one - 1;
  for (;;) {
    p2 *= 10;
    delta *= 10;
    d[n++] = (char)('0' + (p2 >> s));
    p2 &= mask;
    kappa--;
    if (p2 < delta) break;
  }
  *exp10 = td_pow_k[t] + kappa;
  int index = -kappa;
  td_round(d, n, delta, p2, one, index < 9 ? wp_w * TD_POW10[index] : 0);
  return n;
}

/** The exponent form's tail: "e", the exponent x10. */
static inline char *td_exponent(char *out, int x10) {
  *out++ = 'e';
  if (x10 < 0) { *out++ = '-'; x10 = -x10; }
  if (x10 >= 100) { *out++ = (char)('0' + x10 / 100); x10 %= 100; *out++ = (char)('0' + x10 / 10); *out++ = (char)('0' + x10 % 10); }
  else if (x10 >= 10) { *out++ = (char)('0' + x10 / 10); *out++ = (char)('0' + x10 % 10); }
  else *out++ = (char)('0' + x10);
  return out;
}

/**
 * The text of x as Triton prints a double, at out: its end. The digits are moved in fixed-size
 * blocks (no call to memcpy per value), so up to TD_SLACK bytes past the end may be written: the
 * caller's buffer has that room. The table must be set.
 */
#define TD_SLACK 64
__attribute__((always_inline)) static inline char *td_print(double x, char *out) {
  if (x != x) { memcpy(out, "NaN", 3); return out + 3; }
  if (x < 0 || (x == 0 && __builtin_signbit(x))) { *out++ = '-'; x = -x; }
  if (x == __builtin_inf()) { memcpy(out, "Infinity", 8); return out + 8; }
  if (x == 0) { memcpy(out, "0.0", 3); return out + 3; }
  char d[64]; // at most 18 digits; the rest is what the fixed-size moves read past them
  int k, n = td_grisu2(x, d, &k), kk = n + k;
  if (k >= 0 && kk <= 21) { // 1234e7 -> 12340000000.0
    memcpy(out, d, 24); out += n;
    memset(out, '0', 24); out += k;
    *out++ = '.'; *out++ = '0';
    return out;
  }
  if (kk > 0 && kk <= 21) { // 1234e-2 -> 12.34
    memcpy(out, d, 24);
    out[kk] = '.';
    memcpy(out + kk + 1, d + kk, 24);
    return out + n + 1;
  }
  if (kk > -6 && kk <= 0) { // 1234e-6 -> 0.001234
    memcpy(out, "0.000000", 8); out += 2 - kk;
    memcpy(out, d, 24);
    return out + n;
  }
  // Exponent form: 1e30, 1.234e33, 1.5e-7.
  *out++ = d[0];
  if (n > 1) { *out++ = '.'; memcpy(out, d + 1, 24); out += n - 1; }
  return td_exponent(out, kk - 1);
}

/** FP32 values (little-endian, n of them) as Triton prints them widened to double, comma-separated: the end (TD_SLACK past it may be written). */
static char *td_print_fp32_scalar(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    if (i > 0) *out++ = ',';
    out = td_print((double)f, out);
  }
  return out;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TD_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl,avx512vbmi")))

/** Each lane's n < 10^8 as its eight ASCII digits, the first in the low byte (td_digits8, eight at once). */
TD_AVX512 static inline __m512i td_digits8_x8(__m512i n) {
  // n / 10000 as (n * 3518437209) >> 45, exact below 2^32 (n < 10^8 here).
  __m512i hi = _mm512_srli_epi64(_mm512_mul_epu32(n, _mm512_set1_epi64(3518437209ull)), 45);
  __m512i x = _mm512_or_si512(hi, _mm512_slli_epi64(_mm512_sub_epi64(n, _mm512_mullo_epi64(hi, _mm512_set1_epi64(10000))), 32));
  __m512i q = _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, _mm512_set1_epi64(10486)), 20), _mm512_set1_epi64(0x0000007f0000007full));
  x = _mm512_or_si512(q, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(q, _mm512_set1_epi64(100))), 16));
  q = _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, _mm512_set1_epi64(103)), 10), _mm512_set1_epi64(0x000f000f000f000full));
  x = _mm512_or_si512(q, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(q, _mm512_set1_epi64(10))), 8));
  return _mm512_or_si512(x, _mm512_set1_epi64(0x3030303030303030ull));
}

/** floor(x 10^15 / 2^s) per lane, x < 2^s (s in [32, 60]): x 5^15 as 128 bits from 32-bit products, shifted right by s - 15. */
TD_AVX512 static inline __m512i td_times_1e15(__m512i x, __m512i s) {
  const __m512i mh = _mm512_set1_epi64(7), ml = _mm512_set1_epi64(452807053); // 5^15 = 7 2^32 + 452807053
  __m512i xh = _mm512_srli_epi64(x, 32);
  __m512i ll = _mm512_mul_epu32(x, ml), mid = _mm512_add_epi64(_mm512_mul_epu32(xh, ml), _mm512_mul_epu32(x, mh));
  __m512i lo = _mm512_add_epi64(ll, _mm512_slli_epi64(mid, 32));
  __m512i hi = _mm512_add_epi64(_mm512_mul_epu32(xh, mh), _mm512_srli_epi64(mid, 32));
  hi = _mm512_mask_add_epi64(hi, _mm512_cmplt_epu64_mask(lo, ll), hi, _mm512_set1_epi64(1));
  __m512i r = _mm512_sub_epi64(s, _mm512_set1_epi64(15));
  return _mm512_or_si512(_mm512_srlv_epi64(lo, r), _mm512_sllv_epi64(hi, _mm512_sub_epi64(_mm512_set1_epi64(64), r)));
}

/**
 * td_print_fp32 eight values a step, in 64-bit lanes, for values widened from FP32: td_grisu2's
 * digits without its loop. Its fraction digits stop at the first j whose remainder is below delta
 * times 10^j, that is where floor(p2 10^j / 2^s) > floor((p2 - delta) 10^j / 2^s): the first digit
 * where the expansions of p2 and p2 - delta over 2^s differ. Their first fifteen digits are worked
 * out at once and compared as ASCII; the last digit walks down as td_walk says, and each value's
 * text is laid out by one byte permute. A widened FP32 value's significand has its low 29 bits
 * zero, so W = f 2^11 is a 32-bit number times 2^32 and its product with the cached power two
 * 32-bit products; M+ and M- are W plus and minus the power shifted (no further product).
 * A negative lane is its magnitude's lane after a '-'. A lane outside that case is printed by
 * td_print: zero, infinity, NaN; p1 of ten digits,
 * or one whose digits stop inside it (p2 <= delta); more than fifteen digits after p1; an integral
 * layout (1234e7 -> 12340000000.0).
 */
TD_AVX512 static char *td_print_fp32_avx512(const uint8_t *p, size_t n, char *out) {
  size_t i = 0;
  uint64_t lp1[8], lrest[8], lah[8], lal[8], lj[8], lkappa[8], lkk[8], lwalk[8];
  for (; i + 8 <= n; i += 8) {
    __m512i signed_bits = _mm512_castpd_si512(_mm512_cvtps_pd(_mm256_loadu_ps((const float *)(p + 4 * i))));
    // A negative value is '-' and its magnitude's text (as td_print prints it).
    __mmask8 minus = _mm512_movepi64_mask(signed_bits);
    __m512i bits = _mm512_and_si512(signed_bits, _mm512_set1_epi64(0x7fffffffffffffffll));
    // Not zero and finite (a widened FP32 value is never subnormal): the exponent not all ones.
    __mmask8 ok = _mm512_cmpgt_epi64_mask(bits, _mm512_setzero_si512()) & _mm512_cmplt_epi64_mask(bits, _mm512_set1_epi64(0x7ff0000000000000ll));
    __m512i frac = _mm512_and_si512(bits, _mm512_set1_epi64((1ll << 52) - 1));
    __m512i t = _mm512_sub_epi64(_mm512_srli_epi64(bits, 52), _mm512_set1_epi64(1075 + 11 + TD_MIN_E));
    t = _mm512_maskz_mov_epi64(ok, t);
    __m512i c = _mm512_i64gather_epi64(t, (const long long *)td_pow_f, 8);
    __m512i sh = _mm512_cvtepi32_epi64(_mm512_i64gather_epi32(t, td_pow_shift, 4));
    __m512i k = _mm512_cvtepi32_epi64(_mm512_i64gather_epi32(t, td_pow_k, 4));
    // W = (f 2^11) = a 2^32: W c = a c1 2^64 + a c0 2^32.
    __m512i a = _mm512_srli_epi64(_mm512_slli_epi64(_mm512_or_si512(frac, _mm512_set1_epi64(1ll << 52)), 11), 32);
    __m512i ac0 = _mm512_mul_epu32(a, c);
    __m512i whi = _mm512_add_epi64(_mm512_mul_epu32(a, _mm512_srli_epi64(c, 32)), _mm512_srli_epi64(ac0, 32));
    __m512i wlo = _mm512_slli_epi64(ac0, 32);
    const __m512i one1 = _mm512_set1_epi64(1);
    __m512i w = _mm512_add_epi64(whi, _mm512_srli_epi64(wlo, 63));
    // M+ = W + 2^10: + c 2^10.
    __m512i ulo = _mm512_add_epi64(wlo, _mm512_slli_epi64(c, 10));
    __m512i uhi = _mm512_add_epi64(whi, _mm512_srli_epi64(c, 54));
    uhi = _mm512_mask_add_epi64(uhi, _mm512_cmplt_epu64_mask(ulo, wlo), uhi, one1);
    __m512i up = _mm512_sub_epi64(_mm512_add_epi64(uhi, _mm512_srli_epi64(ulo, 63)), one1);
    // M- = W - 2^10, or - 2^9 for a power of two: - c 2^b.
    __mmask8 pow2 = _mm512_cmpeq_epi64_mask(frac, _mm512_setzero_si512());
    __m512i b = _mm512_mask_blend_epi64(pow2, _mm512_set1_epi64(10), _mm512_set1_epi64(9));
    __m512i llo = _mm512_sub_epi64(wlo, _mm512_sllv_epi64(c, b));
    __m512i lhi = _mm512_sub_epi64(whi, _mm512_srlv_epi64(c, _mm512_sub_epi64(_mm512_set1_epi64(64), b)));
    lhi = _mm512_mask_sub_epi64(lhi, _mm512_cmpgt_epu64_mask(llo, wlo), lhi, one1);
    __m512i low = _mm512_add_epi64(_mm512_add_epi64(lhi, _mm512_srli_epi64(llo, 63)), one1);
    __m512i delta = _mm512_sub_epi64(up, low), wp_w = _mm512_sub_epi64(up, w);
    __m512i one = _mm512_sllv_epi64(one1, sh), mask = _mm512_sub_epi64(one, one1);
    __m512i p1 = _mm512_srlv_epi64(up, sh), p2 = _mm512_and_si512(up, mask);
    // kappa: p1's digit count (p1 < 10^9 on the fast lanes).
    __m512i kappa = one1;
    for (int d = 1; d < 9; d++) kappa = _mm512_mask_add_epi64(kappa, _mm512_cmpge_epu64_mask(p1, _mm512_set1_epi64((long long)TD_POW10[d])), kappa, one1);
    __m512i kk = _mm512_add_epi64(kappa, k);
    ok &= _mm512_cmplt_epu64_mask(p1, _mm512_set1_epi64(1000000000)) & _mm512_cmpgt_epu64_mask(p2, delta);
    if (ok != 0) {
      // The first fifteen digits of p2 / 2^s and (p2 - delta) / 2^s, as seven and eight.
      __m512i A = td_times_1e15(p2, sh), B = td_times_1e15(_mm512_sub_epi64(p2, delta), sh);
      const __m512d e8 = _mm512_set1_pd(1e8);
      __m512i ah = _mm512_cvttpd_epu64(_mm512_roundscale_pd(_mm512_div_pd(_mm512_cvtepu64_pd(A), e8), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
      __m512i bh = _mm512_cvttpd_epu64(_mm512_roundscale_pd(_mm512_div_pd(_mm512_cvtepu64_pd(B), e8), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
      __m512i al = _mm512_sub_epi64(A, _mm512_mullo_epi64(ah, _mm512_set1_epi64(100000000)));
      __m512i bl = _mm512_sub_epi64(B, _mm512_mullo_epi64(bh, _mm512_set1_epi64(100000000)));
      __mmask8 first = _mm512_cmpneq_epi64_mask(ah, bh);
      ok &= first | _mm512_cmpneq_epi64_mask(al, bl);
      __m512i ahd = _mm512_srli_epi64(td_digits8_x8(ah), 8), ald = td_digits8_x8(al);
      __m512i x = _mm512_mask_blend_epi64(first, _mm512_xor_si512(ald, td_digits8_x8(bl)), _mm512_xor_si512(ahd, _mm512_srli_epi64(td_digits8_x8(bh), 8)));
      // The first differing byte: 63 - lzcnt(x & -x) bits up.
      __m512i tz = _mm512_sub_epi64(_mm512_set1_epi64(63), _mm512_lzcnt_epi64(_mm512_and_si512(x, _mm512_sub_epi64(_mm512_setzero_si512(), x))));
      __m512i j = _mm512_add_epi64(_mm512_srli_epi64(tz, 3), _mm512_mask_blend_epi64(first, _mm512_set1_epi64(8), one1));
      j = _mm512_maskz_mov_epi64(ok, j);
      // The final rounding (td_walk), lanes in step.
      __m512i pw = _mm512_permutex2var_epi64(_mm512_loadu_si512(TD_POW10), j, _mm512_loadu_si512(TD_POW10 + 8));
      __m512i dj = _mm512_mullo_epi64(delta, pw), rest = _mm512_and_si512(_mm512_mullo_epi64(p2, pw), mask);
      // W's distance times 10^j, or 0 from the ninth digit on (td_grisu2's index < 9).
      __m512i wq = _mm512_maskz_mullo_epi64(_mm512_cmplt_epu64_mask(j, _mm512_set1_epi64(9)), wp_w, pw), walk = _mm512_setzero_si512();
      for (__mmask8 go = ok; go != 0;) {
        __m512i r1 = _mm512_add_epi64(rest, one);
        go &= _mm512_cmplt_epu64_mask(rest, wq) & _mm512_cmpge_epu64_mask(_mm512_sub_epi64(dj, rest), one)
          & (_mm512_cmplt_epu64_mask(r1, wq) | _mm512_cmpgt_epu64_mask(_mm512_sub_epi64(wq, rest), _mm512_sub_epi64(r1, wq)));
        walk = _mm512_mask_add_epi64(walk, go, walk, one1);
        rest = _mm512_mask_mov_epi64(rest, go, r1);
      }
      // p1's digits: the first, then the others (at most eight) in a word, the first of them in its low byte.
      const __m512d p1f = _mm512_cvtepu64_pd(p1);
      __m512i lead = _mm512_cvttpd_epu64(_mm512_roundscale_pd(_mm512_div_pd(p1f, e8), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
      __m512i w8 = td_digits8_x8(_mm512_sub_epi64(p1, _mm512_mullo_epi64(lead, _mm512_set1_epi64(100000000))));
      __m512i sw = _mm512_srlv_epi64(w8, _mm512_slli_epi64(_mm512_sub_epi64(_mm512_set1_epi64(8), kappa), 3)); // kappa < 9
      __mmask8 nine = _mm512_cmpeq_epi64_mask(kappa, _mm512_set1_epi64(9));
      __m512i d0 = _mm512_mask_blend_epi64(nine, _mm512_and_si512(sw, _mm512_set1_epi64(0xff)), _mm512_add_epi64(lead, _mm512_set1_epi64('0')));
      __m512i rest8 = _mm512_mask_blend_epi64(nine, _mm512_srli_epi64(sw, 8), w8);
      _mm512_storeu_si512(lp1, d0); _mm512_storeu_si512(lrest, rest8); _mm512_storeu_si512(lah, ahd); _mm512_storeu_si512(lal, ald);
      _mm512_storeu_si512(lj, j); _mm512_storeu_si512(lkappa, kappa); _mm512_storeu_si512(lkk, kk); _mm512_storeu_si512(lwalk, walk);
    }
    for (int l = 0; l < 8; l++) {
      if (i + l > 0) *out++ = ',';
      int kap = 0, nd = 0, e10 = 0;
      if (ok >> l & 1) { kap = (int)lkappa[l]; nd = kap + (int)lj[l]; e10 = (int)(int64_t)lkk[l]; }
      // td_print's layouts: 0.001234 (a run of zeros first), 12.34 (a point inside), 1.5e-7 (a point after the first
      // digit); integral values (1234e7) are td_print's.
      bool zeros = e10 <= 0 && e10 > -6, inside = e10 > 0 && e10 <= 21;
      if (!(ok >> l & 1) || (inside && e10 >= nd)) {
        float f;
        memcpy(&f, p + 4 * (i + l), 4);
        out = td_print((double)f, out);
        continue;
      }
      if (minus >> l & 1) *out++ = '-';
      // The digits as laid out at fixed places (the first at 0, the others of p1 from 1, the fraction's fifteen from 9),
      // then moved to theirs by one byte permute.
      int others = kap - 1;
      __m256i src = _mm256_set_epi64x(0, (long long)lal[l], (long long)(lrest[l] >> 56 | lah[l] << 8), (long long)(lp1[l] | lrest[l] << 8));
      const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
        28, 29, 30, 31);
      int point = zeros ? 0 : inside ? e10 : 1, shift = zeros ? 2 - e10 : 1;
      // Digit index x of each output byte: i - shift from the zeros' end, or i (before the point) and i - 1 (after it).
      __m256i x = zeros ? _mm256_sub_epi8(iota, _mm256_set1_epi8((char)shift))
        : _mm256_mask_sub_epi8(iota, _mm256_cmpgt_epi8_mask(iota, _mm256_set1_epi8((char)point)), iota, _mm256_set1_epi8(1));
      // Its place among the fixed ones: past p1's digits, the fraction's start at 9.
      x = _mm256_mask_add_epi8(x, _mm256_cmpge_epi8_mask(x, _mm256_set1_epi8((char)(1 + others))), x, _mm256_set1_epi8((char)(8 - others)));
      __m256i text = _mm256_permutexvar_epi8(x, src);
      text = zeros ? _mm256_mask_blend_epi8(_mm256_cmplt_epi8_mask(iota, _mm256_set1_epi8((char)shift)), text, _mm256_set1_epi8('0'))
        : _mm256_mask_blend_epi8(_mm256_cmpeq_epi8_mask(iota, _mm256_set1_epi8((char)point)), text, _mm256_set1_epi8('.'));
      _mm256_storeu_si256((__m256i *)out, text);
      if (zeros) out[1] = '.';
      char *end = out + nd + shift;
      end[-1] = (char)(end[-1] - (int)lwalk[l]);
      out = zeros || inside ? end : td_exponent(end, e10 - 1);
    }
  }
  if (i < n) {
    if (i > 0) *out++ = ',';
    out = td_print_fp32_scalar(p + 4 * i, n - i, out);
  }
  return out;
}

/** The printer this CPU runs best, chosen once (td_choose). */
static char *(*td_print_fp32)(const uint8_t *, size_t, char *) = td_print_fp32_scalar;

static void td_choose(void) {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd")
    && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi")) td_print_fp32 = td_print_fp32_avx512;
}
#else
#define td_print_fp32 td_print_fp32_scalar
static void td_choose(void) {}
#endif

#endif
