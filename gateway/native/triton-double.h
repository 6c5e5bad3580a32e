// Doubles printed as Triton's HTTP frontend prints them: the C twin of gateway/json/number-print.ts,
// which explains the algorithm (rapidjson's Grisu2 as Triton pins it, with the final rounding step
// it had before 2021) and the layout (its Prettify). There the 64-bit quantities are two doubles
// each; here they are uint64_t, and the 128-bit products unsigned __int128, so each step is the
// arithmetic that file emulates. The cached powers are that file's table, handed over once by
// JavaScript (set_powers), so both sides choose the same power for every exponent.
// test/unit/json/number-print-native.test.ts compares the two on millions of values.
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

static const uint32_t TD_POW10[10] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000 };

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

/** Grisu2 of a finite positive double: ASCII digits into d, their count, and the exponent of the last. */
static int td_grisu2(double v, char *d, int *exp10) {
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
        uint64_t rest = ((uint64_t)(p1 - prefix * TD_POW10[kappa]) << s) + p2;
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
      uint32_t pow = TD_POW10[kappa - 1], digit = p1 / pow;
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

/**
 * The text of x as Triton prints a double, at out: its end. The digits are moved in fixed-size
 * blocks (no call to memcpy per value), so up to TD_SLACK bytes past the end may be written: the
 * caller's buffer has that room. The table must be set.
 */
#define TD_SLACK 64
static char *td_print(double x, char *out) {
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
  *out++ = 'e';
  int x10 = kk - 1;
  if (x10 < 0) { *out++ = '-'; x10 = -x10; }
  if (x10 >= 100) { *out++ = (char)('0' + x10 / 100); x10 %= 100; *out++ = (char)('0' + x10 / 10); *out++ = (char)('0' + x10 % 10); }
  else if (x10 >= 10) { *out++ = (char)('0' + x10 / 10); *out++ = (char)('0' + x10 % 10); }
  else *out++ = (char)('0' + x10);
  return out;
}

/** FP32 values (little-endian, n of them) as Triton prints them widened to double, comma-separated: the end (TD_SLACK past it may be written). */
static char *td_print_fp32(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    if (i > 0) *out++ = ',';
    out = td_print((double)f, out);
  }
  return out;
}

#endif
