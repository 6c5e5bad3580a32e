// What a hop costs when a body's bytes never enter user space: a forwarder between two loopback TCP
// connections, moving N messages of SIZE bytes from a writer to a reader, either by read(2) and
// write(2) through a buffer (what every proxy of ours does with 1 MiB, nginx with 16 KiB) or by
// splice(2) through a pipe (socket to pipe, pipe to socket: the pages move, no copy). Its CPU (the
// forwarder thread's user + system time, getrusage RUSAGE_THREAD) per message is printed for each
// mode, modes alternating.
//
// With a working set (WS bytes > 0), the forwarder also does a request's worth of its own work per
// message: STEPS dependent loads at random over WS bytes (a pointer chase, its time by
// CLOCK_THREAD_CPUTIME_ID), and prints what that work cost beside the same work with no traffic:
// how much slower a proxy's per-request code runs once the message's bytes went through the caches
// (bench/RESULTS.md, "Performance IV, twenty-eighth pass"). PIN=1 puts the forwarder on CPU 0, the
// writer and reader on CPU 1. Not part of the build: a probe run by hand.
//
//   cc -O2 -pthread -o /tmp/splice-probe bench/splice-probe.c
//   /tmp/splice-probe [SIZE] [N] [ROUNDS] [WS] [STEPS]    e.g. 614400 2000 3 1048576 3000
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
  perror(what);
  exit(1);
}

static size_t size = 600 * 1024;
static long count = 2000;
/** The read/write forwarder's buffer. */
static size_t buffer_bytes = 1 << 20;
/** The working set: a cycle through its cache lines in random order, and where the chase stands. */
static size_t *ring;
static size_t ring_at;
static size_t steps;
/** Nanoseconds of the chase since the last reset. */
static double chase_ns;
static int pinned;

static void pin_to(int cpu) {
  if (!pinned) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static double thread_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/** A request's worth of the proxy's own work: `steps` dependent loads over the working set. */
static void work(void) {
  if (ring == NULL) return;
  double t0 = thread_ns();
  size_t p = ring_at;
  for (size_t i = 0; i < steps; i++) p = ring[p];
  ring_at = p;
  chase_ns += thread_ns() - t0;
}

/** `moved` bytes forwarded, `n` of them just now: the work of each message that ended in them. */
static void messages_done(long moved, long n) {
  if (moved / (long)size != (moved - n) / (long)size) work();
}

static void make_ring(size_t bytes) {
  size_t lines = bytes / 64, stride = 64 / sizeof(size_t);
  size_t *order = malloc(lines * sizeof *order);
  ring = malloc(lines * 64);
  if (order == NULL || ring == NULL) die("malloc");
  for (size_t i = 0; i < lines; i++) order[i] = i;
  srand(1);
  for (size_t i = lines - 1; i > 0; i--) {
    size_t j = (size_t)rand() % (i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < lines; i++) ring[order[i] * stride] = order[(i + 1) % lines] * stride;
  ring_at = order[0] * stride;
  free(order);
}

static int listener(int *port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t n = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4) || getsockname(s, (struct sockaddr *)&a, &n)) die("listen");
  *port = ntohs(a.sin_port);
  return s;
}

static int dial(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) die("connect");
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

/** The client: count messages of `size` bytes, each in one write. */
static void *writer(void *arg) {
  int fd = *(int *)arg;
  pin_to(1);
  char *buf = malloc(size);
  memset(buf, 'x', size);
  for (long i = 0; i < count; i++) {
    for (size_t off = 0; off < size;) {
      ssize_t w = write(fd, buf + off, size - off);
      if (w <= 0) die("writer");
      off += (size_t)w;
    }
  }
  shutdown(fd, SHUT_WR);
  free(buf);
  return NULL;
}

/** The upstream: reads everything, as Triton reads a request. */
static void *reader(void *arg) {
  int fd = *(int *)arg;
  pin_to(1);
  char *buf = malloc(1 << 20);
  while (read(fd, buf, 1 << 20) > 0) {}
  free(buf);
  return NULL;
}

static double thread_cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static double forward(int spliced) {
  int p1, p2;
  int l1 = listener(&p1), l2 = listener(&p2);
  int up_r = dial(p2), up = accept(l2, NULL, NULL);
  int cl_w = dial(p1), in = accept(l1, NULL, NULL);
  pthread_t tw, tr;
  pthread_create(&tr, NULL, reader, &up_r);
  pthread_create(&tw, NULL, writer, &cl_w);
  double t0 = thread_cpu();
  chase_ns = 0;
  long moved = 0;
  if (spliced) {
    int pipefd[2];
    if (pipe(pipefd)) die("pipe");
    fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
      ssize_t n = splice(in, NULL, pipefd[1], NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_MORE);
      if (n < 0) die("splice in");
      if (n == 0) break;
      moved += n;
      messages_done(moved, n);
      while (n > 0) {
        ssize_t w = splice(pipefd[0], NULL, up, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_MORE);
        if (w <= 0) die("splice out");
        n -= w;
      }
    }
    close(pipefd[0]);
    close(pipefd[1]);
  } else {
    char *buf = malloc(buffer_bytes);
    for (;;) {
      ssize_t n = read(in, buf, buffer_bytes);
      if (n < 0) die("read");
      if (n == 0) break;
      moved += n;
      messages_done(moved, n);
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(up, buf + off, (size_t)(n - off));
        if (w <= 0) die("write");
        off += w;
      }
    }
    free(buf);
  }
  double cpu = thread_cpu() - t0;
  shutdown(up, SHUT_WR);
  pthread_join(tw, NULL);
  pthread_join(tr, NULL);
  if (moved != (long)size * count) fprintf(stderr, "moved %ld of %ld\n", moved, (long)size * count);
  close(in); close(up); close(cl_w); close(up_r); close(l1); close(l2);
  return cpu * 1000 / count;
}

int main(int argc, char **argv) {
  if (argc > 1) size = strtoul(argv[1], NULL, 10);
  if (argc > 2) count = strtol(argv[2], NULL, 10);
  int rounds = argc > 3 ? atoi(argv[3]) : 3;
  size_t ws = argc > 4 ? strtoul(argv[4], NULL, 10) : 0;
  steps = argc > 5 ? strtoul(argv[5], NULL, 10) : 3000;
  if (ws >= 64) make_ring(ws);
  pinned = getenv("PIN") != NULL && strcmp(getenv("PIN"), "0") != 0;
  pin_to(0);
  for (int r = 0; r < rounds; r++) {
    buffer_bytes = 1 << 20;
    double copy = forward(0), copy_work = chase_ns / count;
    buffer_bytes = 16 * 1024;
    double small = forward(0), small_work = chase_ns / count;
    double spl = forward(1), spl_work = chase_ns / count;
    printf("%zu B x %ld: read/write 1 MiB %.3f ms, read/write 16 KiB %.3f ms, splice %.3f ms of the forwarder's CPU a message\n",
           size, count, copy, small, spl);
    if (ring == NULL) continue;
    chase_ns = 0;
    for (long i = 0; i < count; i++) work();
    printf("  its work a message (%zu loads over %zu KiB): %.1f, %.1f, %.1f us; with no traffic %.1f us\n",
           steps, ws / 1024, copy_work / 1000, small_work / 1000, spl_work / 1000, chase_ns / count / 1000);
  }
  return 0;
}
