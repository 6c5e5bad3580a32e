// The base64 kernels (decode_avx2, decode_vbmi): base64.c exports them to JavaScript, lane.c decodes
// a kept JSON body's base64 string with them. Each takes n characters (a multiple of 64) and decodes
// runs of 64 up to the first run holding a character in neither alphabet; see base64.c for their contract.
#ifndef TENSORGATE_BASE64_KERNELS_H
#define TENSORGATE_BASE64_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

// A 16-byte table in both 128-bit lanes (the byte shuffle works within a lane).
AVX2 static inline __m256i table(const int8_t t[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

// HI: a bit per high nibble 2–7 (the rows that hold alphabet characters), 0x01 for the others.
static const int8_t HI_BITS[16] = {1, 1, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 1, 1, 1, 1, 1, 1, 1, 1};
// LO: the rows a low nibble is invalid in (0x01 always: the rows with no alphabet character).
#define LO_ROW(l) (0x01 | ((l) != 0xb && (l) != 0xf ? 0x02 : 0) | ((l) > 9 ? 0x04 : 0) | ((l) == 0 ? 0x08 | 0x20 : 0) \
  | ((l) > 0xa && (l) != 0xf ? 0x10 : 0) | ((l) > 0xa ? 0x40 : 0))
static const int8_t LO_BITS[16] = {LO_ROW(0), LO_ROW(1), LO_ROW(2), LO_ROW(3), LO_ROW(4), LO_ROW(5), LO_ROW(6), LO_ROW(7),
  LO_ROW(8), LO_ROW(9), LO_ROW(10), LO_ROW(11), LO_ROW(12), LO_ROW(13), LO_ROW(14), LO_ROW(15)};
// ROLL: the offset from a character to its value by high nibble; 8 + nibble for a low nibble of
// 0xF ('/' row 2, 'O' row 4, '_' row 5, 'o' row 6).
static const int8_t ROLL[16] = {0, 0, 19, 4, -65, -65, -71, -71, 0, 0, 16, 0, -65, -32, -71, 0};
// The standard alphabet's tables alone: LO refuses '-' and '_' (rows 2 and 5), and ROLL is indexed
// by the high nibble less one for '/' (which alone shares row 2 with '+').
#define LO_STD(l) (0x01 | ((l) != 0xb && (l) != 0xf ? 0x02 : 0) | ((l) > 9 ? 0x04 : 0) | ((l) == 0 ? 0x08 | 0x20 : 0) \
  | ((l) > 0xa ? 0x10 | 0x40 : 0))
static const int8_t LO_BITS_STD[16] = {LO_STD(0), LO_STD(1), LO_STD(2), LO_STD(3), LO_STD(4), LO_STD(5), LO_STD(6), LO_STD(7),
  LO_STD(8), LO_STD(9), LO_STD(10), LO_STD(11), LO_STD(12), LO_STD(13), LO_STD(14), LO_STD(15)};
static const int8_t ROLL_STD[16] = {0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0};
// Each 32-bit lane's 3 bytes, big-endian, to the front of its 128-bit lane.
static const int8_t PACK[16] = {2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1};

// Four 6-bit values a b c d per 32-bit lane → a<<18|b<<12|c<<6|d → its 3 bytes, big-endian, the
// 24 of the 32 lanes at the front.
AVX2 static inline __m256i pack24(__m256i v) {
  const __m256i words = _mm256_madd_epi16(_mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140)), _mm256_set1_epi32(0x00011000));
  return _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(words, table(PACK)), _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
}

// 24 bytes, not one more: the bytes after them may be another tensor's.
AVX2 static inline void store24(uint8_t *out, __m256i v) {
  _mm_storeu_si128((__m128i *)out, _mm256_castsi256_si128(v));
  _mm_storel_epi64((__m128i *)(out + 16), _mm256_extracti128_si256(v, 1));
}

// The standard alphabet alone, 64 characters a turn, up to the first 64 that hold any other
// character ('-' and '_' among them): the characters decoded.
AVX2 static size_t standard_avx2(const uint8_t *src, size_t n, uint8_t *dst) {
  const __m256i lo_bits = table(LO_BITS_STD), hi_bits = table(HI_BITS), roll = table(ROLL_STD);
  const __m256i nibble = _mm256_set1_epi8(0x0f), slash = _mm256_set1_epi8(0x2f);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256i val[2];
    __m256i err = _mm256_setzero_si256();
    for (int k = 0; k < 2; k++) {
      const __m256i x = _mm256_loadu_si256((const __m256i *)(src + i + 32 * k));
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
      const __m256i lo = _mm256_and_si256(x, nibble);
      err = _mm256_or_si256(err, _mm256_and_si256(_mm256_shuffle_epi8(lo_bits, lo), _mm256_shuffle_epi8(hi_bits, hi)));
      val[k] = pack24(_mm256_add_epi8(x, _mm256_shuffle_epi8(roll, _mm256_add_epi8(hi, _mm256_cmpeq_epi8(x, slash)))));
    }
    if (!_mm256_testz_si256(err, err)) break;
    store24(dst + i / 4 * 3, val[0]);
    store24(dst + i / 4 * 3 + 24, val[1]);
  }
  return i;
}

// Both alphabets, 64 characters a turn, up to the first 64 that hold a character of neither: the
// characters decoded; *url set when '-' or '_' were among them.
AVX2 static size_t both_avx2(const uint8_t *src, size_t n, uint8_t *dst, int *url) {
  const __m256i lo_bits = table(LO_BITS), hi_bits = table(HI_BITS), roll = table(ROLL);
  const __m256i nibble = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8), two = _mm256_set1_epi8(2);
  const __m256i dash = _mm256_set1_epi8(0x2d), underscore = _mm256_set1_epi8(0x5f);
  __m256i seen = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256i val[2];
    __m256i err = _mm256_setzero_si256(), url64 = _mm256_setzero_si256();
    for (int k = 0; k < 2; k++) {
      __m256i x = _mm256_loadu_si256((const __m256i *)(src + i + 32 * k));
      const __m256i isDash = _mm256_cmpeq_epi8(x, dash);
      x = _mm256_sub_epi8(x, _mm256_and_si256(isDash, two));
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
      const __m256i lo = _mm256_and_si256(x, nibble);
      err = _mm256_or_si256(err, _mm256_and_si256(_mm256_shuffle_epi8(lo_bits, lo), _mm256_shuffle_epi8(hi_bits, hi)));
      url64 = _mm256_or_si256(url64, _mm256_or_si256(isDash, _mm256_cmpeq_epi8(x, underscore)));
      const __m256i row = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(lo, nibble), eight));
      val[k] = pack24(_mm256_add_epi8(x, _mm256_shuffle_epi8(roll, row)));
    }
    if (!_mm256_testz_si256(err, err)) break; // a refused run's '-' and '_' are not the caller's
    seen = _mm256_or_si256(seen, url64);
    store24(dst + i / 4 * 3, val[0]);
    store24(dst + i / 4 * 3 + 24, val[1]);
  }
  if (!_mm256_testz_si256(seen, seen)) *url = 1;
  return i;
}

// n characters (a multiple of 64) from src to dst: the standard kernel, and from the first 64 it
// refuses on, the kernel of both alphabets. The characters decoded; *url as both_avx2 sets it.
AVX2 static size_t decode_avx2(const uint8_t *src, size_t n, uint8_t *dst, int *url) {
  const size_t i = standard_avx2(src, n, dst);
  return i + both_avx2(src + i, n - i, dst + i / 4 * 3, url);
}

// With AVX-512 VBMI, runs of 64 characters (four a step while they last), both alphabets in one
// table: a character's value is looked up by its low seven bits among 128 bytes (a two-table byte
// permute), 0x80 for one in neither alphabet, its value | 0x40 for '-' and '_' (the URL-safe
// alphabet's own); a character of 0x80 or above has its own top bit. About a third of the AVX2
// kernels' instructions per character.
#define VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define V(c) ((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 \
  : (c) == '+' ? 62 : (c) == '/' ? 63 : (c) == '-' ? (62 | 0x40) : (c) == '_' ? (63 | 0x40) : 0x80)
#define V8(c) V(c), V((c) + 1), V((c) + 2), V((c) + 3), V((c) + 4), V((c) + 5), V((c) + 6), V((c) + 7)
#define V32(c) V8(c), V8((c) + 8), V8((c) + 16), V8((c) + 24)
static const uint8_t VALUE[128] = {V32(0), V32(32), V32(64), V32(96)};
// Each 32-bit lane's 3 bytes, big-endian, the 48 at the front.
#define P(j) ((j) < 48 ? (j) / 3 * 4 + 2 - (j) % 3 : 0)
#define P8(j) P(j), P((j) + 1), P((j) + 2), P((j) + 3), P((j) + 4), P((j) + 5), P((j) + 6), P((j) + 7)
static const uint8_t PACK48[64] = {P8(0), P8(8), P8(16), P8(24), P8(32), P8(40), P8(48), P8(56)};

// VBMI_RUN: a run of 64 characters' values (0x80 set for one in neither alphabet, 0x40 for '-' and
// '_'); VBMI_BYTES: the run's 48 bytes, as the low 48 of 64.
#define VBMI_RUN(x, v) const __m512i v = _mm512_permutex2var_epi8(lo, x, hi)
#define VBMI_BYTES(v) _mm512_permutexvar_epi8(pack, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(v, six), \
  _mm512_set1_epi32(0x01400140)), _mm512_set1_epi32(0x00011000)))

VBMI static size_t decode_vbmi(const uint8_t *src, size_t n, uint8_t *dst, int *url) {
  const __m512i lo = _mm512_loadu_si512(VALUE), hi = _mm512_loadu_si512(VALUE + 64), pack = _mm512_loadu_si512(PACK48);
  const __m512i six = _mm512_set1_epi8(0x3f);
  __m512i seen = _mm512_setzero_si512();
  size_t i = 0;
  // Four runs a step, their characters checked at once: the first three stores are whole (each one's
  // last 16 bytes are the next one's first, written after it), the fourth 48 bytes only. A step
  // that holds a refused character is left to the loop below, run by run.
  for (; i + 256 <= n; i += 256) {
    const __m512i x0 = _mm512_loadu_si512(src + i), x1 = _mm512_loadu_si512(src + i + 64);
    const __m512i x2 = _mm512_loadu_si512(src + i + 128), x3 = _mm512_loadu_si512(src + i + 192);
    VBMI_RUN(x0, v0); VBMI_RUN(x1, v1); VBMI_RUN(x2, v2); VBMI_RUN(x3, v3);
    const __m512i all = _mm512_or_si512(_mm512_or_si512(v0, v1), _mm512_or_si512(v2, v3));
    if (_mm512_movepi8_mask(_mm512_or_si512(all, _mm512_or_si512(_mm512_or_si512(x0, x1), _mm512_or_si512(x2, x3)))) != 0) break;
    seen = _mm512_or_si512(seen, all);
    uint8_t *d = dst + i / 4 * 3;
    _mm512_storeu_si512(d, VBMI_BYTES(v0));
    _mm512_storeu_si512(d + 48, VBMI_BYTES(v1));
    _mm512_storeu_si512(d + 96, VBMI_BYTES(v2));
    _mm512_mask_storeu_epi8(d + 144, 0xffffffffffffULL, VBMI_BYTES(v3));
  }
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_loadu_si512(src + i);
    VBMI_RUN(x, v);
    if (_mm512_movepi8_mask(_mm512_or_si512(x, v)) != 0) break; // a refused run's '-' and '_' are not the caller's
    seen = _mm512_or_si512(seen, v);
    // 48 bytes, not one more: the bytes after them may be another tensor's.
    _mm512_mask_storeu_epi8(dst + i / 4 * 3, 0xffffffffffffULL, VBMI_BYTES(v));
  }
  if (_mm512_test_epi8_mask(seen, _mm512_set1_epi8(0x40)) != 0) *url = 1;
  return i;
}
#endif

typedef size_t (*Kernel)(const uint8_t *src, size_t n, uint8_t *dst, int *url);

#endif
