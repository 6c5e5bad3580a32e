// What one hop's upstream side costs the kernel over loopback TCP and over a Unix domain socket:
// a writer thread sends N messages of SIZE bytes to a reader thread, over a loopback TCP
// connection (TCP_NODELAY) and then over a Unix socket, and each side's CPU time (its thread's
// clock: user and system) is printed per message; three rounds, alternating. SNDBUF (bytes, an
// environment variable) sets the Unix socket writer's SO_SNDBUF (the kernel doubles it, capped at
// net.core.wmem_max): a Unix socket's send buffer is not autotuned as TCP's is. docs/architecture.md,
// "Unix socket"; bench/RESULTS.md, "forty-first pass".
//
//   cc -O2 -pthread -o /tmp/unix-socket-probe bench/unix-socket-probe.c
//   /tmp/unix-socket-probe 614400 3000                 # the Unix socket at its default send buffer
//   SNDBUF=4194304 /tmp/unix-socket-probe 614400 3000  # as the compiled lane sets it
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static size_t size;
static int count;

static double thread_cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct reader { int fd; double cpu; };

static void *read_all(void *arg) {
  struct reader *r = arg;
  size_t want = size * (size_t)count, got = 0;
  char *buf = malloc(1 << 20);
  double t0 = thread_cpu();
  while (got < want) {
    ssize_t n = read(r->fd, buf, 1 << 20);
    if (n <= 0) break;
    got += (size_t)n;
  }
  r->cpu = thread_cpu() - t0;
  free(buf);
  return NULL;
}

/** Sends `count` messages from `w` to `r`'s reader; prints both sides' CPU a message. */
static void run(const char *name, int w, int r) {
  struct reader rd = { r, 0 };
  pthread_t t;
  pthread_create(&t, NULL, read_all, &rd);
  char *msg = malloc(size);
  memset(msg, 7, size);
  double t0 = thread_cpu();
  for (int i = 0; i < count; i++) {
    for (size_t off = 0; off < size;) {
      ssize_t n = write(w, msg + off, size - off);
      if (n <= 0) { perror("write"); exit(1); }
      off += (size_t)n;
    }
  }
  double wc = thread_cpu() - t0;
  pthread_join(t, NULL);
  printf("%s: writer %.1f us, reader %.1f us, both %.1f us a message\n", name, wc / count * 1e6, rd.cpu / count * 1e6, (wc + rd.cpu) / count * 1e6);
  free(msg);
  close(w);
  close(r);
}

static void tcp(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t len = sizeof(a);
  if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 || getsockname(l, (struct sockaddr *)&a, &len) != 0) { perror("tcp"); exit(1); }
  int w = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(w, (struct sockaddr *)&a, sizeof(a)) != 0) { perror("connect"); exit(1); }
  setsockopt(w, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int r = accept(l, NULL, NULL);
  close(l);
  run("tcp ", w, r);
}

static void unix_socket(int sndbuf) {
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/unix-socket-probe-%d.sock", (int)getpid());
  unlink(a.sun_path);
  if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0) { perror("unix"); exit(1); }
  int w = socket(AF_UNIX, SOCK_STREAM, 0);
  if (sndbuf > 0) setsockopt(w, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  if (connect(w, (struct sockaddr *)&a, sizeof(a)) != 0) { perror("connect"); exit(1); }
  int r = accept(l, NULL, NULL);
  close(l);
  unlink(a.sun_path);
  run("unix", w, r);
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s SIZE COUNT (SNDBUF=bytes in the environment: the Unix socket's send buffer)\n", argv[0]); return 2; }
  size = (size_t)atol(argv[1]);
  count = atoi(argv[2]);
  int sndbuf = getenv("SNDBUF") ? atoi(getenv("SNDBUF")) : 0;
  for (int round = 0; round < 3; round++) {
    tcp();
    unix_socket(sndbuf);
  }
  return 0;
}
