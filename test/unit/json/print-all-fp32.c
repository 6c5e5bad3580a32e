// FP32 values printed by triton-double.h's two printers, the one this CPU runs (td_choose: eight
// values a step with AVX-512) and the scalar one, compared text for text: every bit pattern, or
// runs of a thousand consecutive ones STRIDE thousand apart. Run by print-all-fp32.test.ts:
// print-all-fp32 DIR (the table of cached powers as f.bin, k.bin, s.bin, from json/number-print.ts)
// PROCESSES STRIDE. Exit 0 and "equal N" (the values compared) when every text is the same, 1 and
// the first values that differ when not, 2 when the AVX-512 printer is not this CPU's.
// print-all-fp32 DIR time: what the printers cost instead (bench/fp32-print.js, which may compile
// it with another tree's header as TD_HEADER): a thousand values, the classifier_fp32 model's
// answer to the bench's 600 KB request (means of 150 inputs, 15.5-16.0), printed by this CPU's
// printer and by the scalar one, then the same values with every other one negated (an answer of
// mixed sign: logits, embeddings); microseconds per thousand values, the best of five runs of 2,000.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef TD_HEADER
#include TD_HEADER
#else
#include "../../../gateway/native/triton-double.h"
#endif

#define BLOCK 1000

static void *load(const char *dir, const char *name, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  void *b = malloc(n);
  if (f == NULL || fread(b, 1, n, f) != n) { fprintf(stderr, "print-all-fp32: cannot read %s\n", path); exit(3); }
  fclose(f);
  return b;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char timed_out[BLOCK * (TD_MAX_LENGTH + 1) + TD_SLACK];

/** The best of five runs of 2,000 prints of BLOCK values, in microseconds per print. */
static double best(char *(*print)(const uint8_t *, size_t, char *), const float *in) {
  double b = 1e18;
  for (int r = 0; r < 5; r++) {
    double t0 = now_us();
    for (int i = 0; i < 2000; i++) print((const uint8_t *)in, BLOCK, timed_out);
    double t = (now_us() - t0) / 2000;
    if (t < b) b = t;
  }
  return b;
}

static int time_printers(void) {
  static float in[BLOCK], mixed[BLOCK];
  for (int o = 0; o < BLOCK; o++) {
    float acc = 0;
    for (int j = 0; j < 150; j++) acc += (float)(((o * 150 + j) * 7) % 256) / 8.0f;
    in[o] = acc / 150;
    mixed[o] = (o & 1) ? -in[o] : in[o];
  }
  const char *which = td_print_fp32 == td_print_fp32_scalar ? "scalar" : "AVX-512";
  printf("this CPU's printer (%s): %.1f us per %d values, mixed sign %.1f\n", which, best(td_print_fp32, in), BLOCK, best(td_print_fp32, mixed));
  printf("scalar printer: %.1f us per %d values, mixed sign %.1f\n", best(td_print_fp32_scalar, in), BLOCK, best(td_print_fp32_scalar, mixed));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: print-all-fp32 DIR PROCESSES STRIDE, or DIR time\n"); return 3; }
  uint64_t *f = load(argv[1], "f.bin", TD_ROWS * 8);
  int32_t *k = load(argv[1], "k.bin", TD_ROWS * 4), *s = load(argv[1], "s.bin", TD_ROWS * 4);
  if (!td_set_powers(f, k, s)) return 3;
  __builtin_cpu_init();
  td_choose();
  if (strcmp(argv[2], "time") == 0) return time_printers();
  if (argc < 4) { fprintf(stderr, "usage: print-all-fp32 DIR PROCESSES STRIDE\n"); return 3; }
  if (td_print_fp32 == td_print_fp32_scalar) { puts("the scalar printer is this CPU's: nothing to compare"); return 2; }
  const int procs = atoi(argv[2]);
  const uint64_t total = 1ull << 32, stride = (uint64_t)atoll(argv[3]);
  if (procs < 1 || stride < 1) return 3;
  for (int p = 0; p < procs; p++) {
    if (fork() != 0) continue;
    static char a[BLOCK * (TD_MAX_LENGTH + 1) + TD_SLACK + 64], b[BLOCK * (TD_MAX_LENGTH + 1) + TD_SLACK + 64];
    static uint32_t in[BLOCK];
    uint64_t bad = 0;
    for (uint64_t base = (uint64_t)p * stride * BLOCK; base < total; base += (uint64_t)procs * stride * BLOCK) {
      size_t n = base + BLOCK <= total ? BLOCK : (size_t)(total - base);
      for (size_t i = 0; i < n; i++) in[i] = (uint32_t)(base + i);
      char *ea = td_print_fp32((const uint8_t *)in, n, a), *eb = td_print_fp32_scalar((const uint8_t *)in, n, b);
      if (ea - a == eb - b && memcmp(a, b, (size_t)(ea - a)) == 0) continue;
      if (bad < 5) { // the texts from a little before their first difference
        size_t at = 0;
        while (a + at < ea && b + at < eb && a[at] == b[at]) at++;
        size_t from = at > 30 ? at - 30 : 0;
        printf("values from %08llx: ...%.60s, scalar ...%.60s\n", (unsigned long long)base, a + from, b + from);
      }
      bad++;
    }
    exit(bad == 0 ? 0 : 1);
  }
  int status, failed = 0;
  for (int p = 0; p < procs; p++) {
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed) return 1;
  uint64_t runs = (total + BLOCK - 1) / BLOCK, compared = (runs + stride - 1) / stride * BLOCK;
  printf("equal %llu\n", (unsigned long long)(compared < total ? compared : total));
  return 0;
}
