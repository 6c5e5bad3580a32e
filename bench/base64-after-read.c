// What decoding a base64 body costs right after the kernel copied it in: a writer thread sends
// ROUNDS bodies of 800 KiB of base64 text over loopback TCP; the reader reads each SLICE bytes at a
// time and decodes what it has read (gateway/native/base64-kernels.h, decode_vbmi) after each read,
// as the compiled lane's decode_early does. It prints the read's and the decode's wall time per body.
// SPIN_US: a scalar busy loop between bodies (the AVX-512 units idle meanwhile). Against
// `node bench/base64-kernels.js` (the text already in the cache): whether the kernel's copy leaves
// the text where the decoder finds it fast. bench/RESULTS.md, "forty-fourth pass".
//
//   cc -O2 -pthread -o /tmp/base64-after-read bench/base64-after-read.c
//   /tmp/base64-after-read [SLICE (819200)] [SPIN_US (0)] [ROUNDS (400)]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../gateway/native/base64-kernels.h"

static const Kernel unused_avx2 __attribute__((unused)) = decode_avx2; // the header's other kernel

#define BODY (800 * 1024)

static uint8_t text[BODY];
static int writer_fd, rounds;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

// Each body whole, then one byte back from the reader before the next.
static void *writer(void *unused) {
  (void)unused;
  for (int k = 0; k < rounds; k++) {
    for (size_t at = 0; at < BODY;) {
      ssize_t n = write(writer_fd, text + at, BODY - at);
      if (n <= 0) return NULL;
      at += (size_t)n;
    }
    char ack;
    if (read(writer_fd, &ack, 1) != 1) return NULL;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (!__builtin_cpu_supports("avx512vbmi")) { fprintf(stderr, "base64-after-read: this CPU has no AVX-512 VBMI\n"); return 2; }
  size_t slice = argc > 1 ? (size_t)atol(argv[1]) : BODY;
  double spin_us = argc > 2 ? atof(argv[2]) : 0;
  rounds = argc > 3 ? atoi(argv[3]) : 400;
  static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  srand(1);
  for (size_t i = 0; i < BODY; i++) text[i] = (uint8_t)ALPHABET[rand() & 63];

  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in at = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t len = sizeof at;
  if (bind(listener, (struct sockaddr *)&at, sizeof at) != 0 || listen(listener, 1) != 0
      || getsockname(listener, (struct sockaddr *)&at, &len) != 0) { perror("listen"); return 1; }
  writer_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(writer_fd, (struct sockaddr *)&at, sizeof at) != 0) { perror("connect"); return 1; }
  int reader_fd = accept(listener, NULL, NULL);
  uint8_t *buf = aligned_alloc(64, BODY);
  pthread_t thread;
  pthread_create(&thread, NULL, writer, NULL);

  double read_ns = 0, decode_ns = 0;
  long reads = 0;
  int url = 0;
  for (int k = 0; k < rounds; k++) {
    size_t have = 0, decoded = 0;
    while (have < BODY) {
      double t0 = now_ns();
      ssize_t n = read(reader_fd, buf + have, BODY - have < slice ? BODY - have : slice);
      double t1 = now_ns();
      if (n <= 0) { perror("read"); return 1; }
      read_ns += t1 - t0;
      reads++;
      have += (size_t)n;
      size_t m = (have - decoded) & ~(size_t)63;
      if (m >= 4096 || have == BODY) {
        decoded += decode_vbmi(buf + decoded, m, buf + decoded / 4 * 3, &url);
        decode_ns += now_ns() - t1;
      }
    }
    if (write(reader_fd, "k", 1) != 1) { perror("write"); return 1; }
    if (spin_us > 0) {
      volatile long x = 0;
      for (double end = now_ns() + spin_us * 1e3; now_ns() < end;) x++;
    }
  }
  pthread_join(thread, NULL);
  printf("slice %zu B, spin %.0f us: read %.1f us, decode %.1f us a body of 800 KiB (%.1f reads)\n", slice, spin_us,
    read_ns / rounds / 1e3, decode_ns / rounds / 1e3, (double)reads / rounds);
  return 0;
}
