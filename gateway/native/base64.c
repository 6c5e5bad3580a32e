// Base64 runs decoded from bytes to bytes where they lie: the socket's read buffers in, the tensor's
// staging buffer out, with no copy into or out of a decoder's own memory (decode/base64/base64-simd.ts,
// which loads this where it was built, says when). Built by scripts/build-native.js with the
// system's C compiler against Node-API, whose ABI does not change between Node versions; where
// there is no compiler, no x86-64 or no AVX2, the WebAssembly decoder does the same work. Two
// kernels: AVX-512 VBMI's where the CPU has it, else AVX2's.
//
// One function, decodeRuns(src, s, e, target, at), the contract of base64-simd.ts's: src[s, e) (a
// multiple of 64 characters) decoded into target at `at`, up to the first 64 characters that hold
// a character in neither alphabet (RFC 4648 §4 and §5, mixed, as Node accepts them); it returns the
// characters decoded times two, plus one when '-' or '_' were among them. Nothing is written past
// the bytes of the characters it decoded. A JSON string's closing quote and its backslashes are
// in neither alphabet: a caller that does not know where its text ends decodes ahead and stops there.
//
// The AVX2 kernels, per 32 characters (two such steps per 64), with nibble tables (16-byte shuffles), as the
// WebAssembly kernel does per 16:
// - '-' becomes '+' (both are 62), so that each high nibble names one range but for the '/'–'_' row;
// - a character is invalid when LO[its low nibble] & HI[its high nibble] is not zero;
// - its value is the character plus ROLL[high nibble, + 8 when the low nibble is 0xF];
// - four 6-bit values become three bytes by two multiply-adds and a byte shuffle.
#include <node_api.h>
#include <stdint.h>
#include "base64-kernels.h"

// decodeRuns(src: Uint8Array, s: number, e: number, target: Uint8Array, at: number): number
// (the function's data: its kernel)
static napi_value decode_runs(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_value result;
  const Kernel *kernel;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, (void **)&kernel) != napi_ok || argc < 5) goto bad;
  void *src, *dst;
  size_t srcLen, dstLen;
  napi_typedarray_type type;
  if (napi_get_typedarray_info(env, argv[0], &type, &srcLen, &src, NULL, NULL) != napi_ok || type != napi_uint8_array) goto bad;
  if (napi_get_typedarray_info(env, argv[3], &type, &dstLen, &dst, NULL, NULL) != napi_ok || type != napi_uint8_array) goto bad;
  int64_t s, e, at;
  if (napi_get_value_int64(env, argv[1], &s) != napi_ok || napi_get_value_int64(env, argv[2], &e) != napi_ok
      || napi_get_value_int64(env, argv[4], &at) != napi_ok) goto bad;
  // Every range inside its array, or nothing is read or written.
  if (s < 0 || e < s || (uint64_t)e > srcLen || at < 0 || (uint64_t)at > dstLen) goto bad;
  size_t n = (size_t)(e - s) & ~(size_t)63;
  if (n / 4 * 3 > dstLen - (size_t)at) goto bad;
  int url = 0;
  const size_t done = (*kernel)((const uint8_t *)src + s, n, (uint8_t *)dst + at, &url);
  napi_create_double(env, (double)done * 2 + url, &result);
  return result;
bad:
  napi_throw_range_error(env, NULL, "decodeRuns: an array or range out of bounds");
  return NULL;
}

#if defined(__x86_64__)
static const Kernel AVX2_KERNEL = decode_avx2, VBMI_KERNEL = decode_vbmi;

static void export_kernel(napi_env env, napi_value exports, const char *name, const Kernel *kernel) {
  napi_value fn;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, decode_runs, (void *)kernel, &fn) == napi_ok) napi_set_named_property(env, exports, name, fn);
}
#endif

// exports.decodeRuns: the CPU's best kernel; exports.kernel names it; exports.decodeRunsAvx2: the
// AVX2 kernel where it is not the best (the tests run both).
NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return exports;
  const int vbmi = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
  export_kernel(env, exports, "decodeRuns", vbmi ? &VBMI_KERNEL : &AVX2_KERNEL);
  if (vbmi) export_kernel(env, exports, "decodeRunsAvx2", &AVX2_KERNEL);
  napi_value name;
  if (napi_create_string_utf8(env, vbmi ? "avx512vbmi" : "avx2", NAPI_AUTO_LENGTH, &name) == napi_ok) napi_set_named_property(env, exports, "kernel", name);
#endif
  return exports;
}
