// What printing FP32 answers as Triton's HTTP frontend prints them costs (gateway/native/
// triton-double.h, the compiled lane's printers): a thousand values, the classifier_fp32 model's
// answer to the bench's 600 KB request (means of 150 inputs, 15.5–16.0), printed by the printer
// this CPU runs (td_choose: eight values a step with AVX-512) and by the scalar one; then the same
// values with every other one negated (an answer of mixed sign: logits, embeddings). Microseconds
// per thousand values, the best of five runs of 2,000. bench/fp32-print.js builds and runs it
// (the header may be another tree's, for before and after); bench/RESULTS.md, "forty-fifth pass".
//
//   fp32-print DIR (the cached powers as f.bin, k.bin, s.bin, from json/number-print.ts)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include TD_HEADER

#define N 1000
#define RUNS 2000

static void *load(const char *dir, const char *name, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  void *b = malloc(n);
  if (f == NULL || fread(b, 1, n, f) != n) { fprintf(stderr, "fp32-print: cannot read %s\n", path); exit(3); }
  fclose(f);
  return b;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char out[N * (TD_MAX_LENGTH + 1) + TD_SLACK];

/** The best of five runs of RUNS prints, in microseconds per N values. */
static double best(char *(*print)(const uint8_t *, size_t, char *), const float *in) {
  double b = 1e18;
  for (int r = 0; r < 5; r++) {
    double t0 = now_us();
    for (int i = 0; i < RUNS; i++) print((const uint8_t *)in, N, out);
    double t = (now_us() - t0) / RUNS;
    if (t < b) b = t;
  }
  return b;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: fp32-print DIR\n"); return 3; }
  uint64_t *f = load(argv[1], "f.bin", TD_ROWS * 8);
  int32_t *k = load(argv[1], "k.bin", TD_ROWS * 4), *s = load(argv[1], "s.bin", TD_ROWS * 4);
  if (!td_set_powers(f, k, s)) return 3;
  __builtin_cpu_init();
  td_choose();
  static float in[N], mixed[N];
  for (int o = 0; o < N; o++) {
    float acc = 0;
    for (int j = 0; j < 150; j++) acc += (float)(((o * 150 + j) * 7) % 256) / 8.0f;
    in[o] = acc / 150;
    mixed[o] = (o & 1) ? -in[o] : in[o];
  }
  const char *which = td_print_fp32 == td_print_fp32_scalar ? "scalar" : "AVX-512";
  printf("this CPU's printer (%s): %.1f us per %d values, mixed sign %.1f\n", which, best(td_print_fp32, in), N, best(td_print_fp32, mixed));
  printf("scalar printer: %.1f us per %d values, mixed sign %.1f\n", best(td_print_fp32_scalar, in), N, best(td_print_fp32_scalar, mixed));
  return 0;
}
