// What a hop costs when a body's bytes never enter user space: a forwarder between two loopback TCP
// connections, moving N messages of SIZE bytes from a writer to a reader, either by read(2) and
// write(2) through a buffer (what every proxy of ours and nginx does) or by splice(2) through a
// pipe (socket to pipe, pipe to socket: the pages move, no copy). Its CPU (the forwarder thread's
// user + system time, getrusage RUSAGE_THREAD) per message is printed for each mode, modes
// alternating. Not part of the build: a probe for the design bench/RESULTS.md names ("twenty-seventh
// pass"), run by hand.
//
//   cc -O2 -pthread -o /tmp/splice-probe bench/splice-probe.c && /tmp/splice-probe [SIZE] [N] [ROUNDS]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static size_t size = 600 * 1024;
static long count = 2000;

static void die(const char *what) {
  perror(what);
  exit(1);
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
      while (n > 0) {
        ssize_t w = splice(pipefd[0], NULL, up, NULL, (size_t)n, SPLICE_F_MOVE | SPLICE_F_MORE);
        if (w <= 0) die("splice out");
        n -= w;
      }
    }
    close(pipefd[0]);
    close(pipefd[1]);
  } else {
    char *buf = malloc(1 << 20);
    for (;;) {
      ssize_t n = read(in, buf, 1 << 20);
      if (n < 0) die("read");
      if (n == 0) break;
      moved += n;
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
  for (int r = 0; r < rounds; r++) {
    double copy = forward(0), spl = forward(1);
    printf("%zu B x %ld: read/write %.3f ms, splice %.3f ms of the forwarder's CPU a message\n", size, count, copy, spl);
  }
  return 0;
}
