// A probe, not a server: how much CPU a request costs when a connection's bytes are read and
// answered in C inside Node's own event loop (a Node-API module polling the socket with libuv's
// uv_poll), against a JavaScript net.Socket doing the same. Every request on a connection handed
// here gets one fixed answer; a request is a head ending in CRLF CRLF and, where it says
// Content-Length, that many bytes of body (found by a plain scan: no parser's rules). See floor.js.
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define BUF (256 * 1024)

typedef struct {
  uv_poll_t poll;
  int fd;
  size_t have;
  size_t body_left;
  char buf[BUF];
} Conn;

static const char *answer = NULL;
static size_t answer_len = 0;
static uint64_t requests = 0;

static void closed(uv_handle_t *h) { free(h->data); }

static void finish(Conn *c) {
  uv_poll_stop(&c->poll);
  close(c->fd);
  uv_close((uv_handle_t *)&c->poll, closed);
}

// Consumes what is whole in c->buf; answers each request; returns the answers owed.
static int consume(Conn *c) {
  int owed = 0;
  size_t at = 0;
  for (;;) {
    if (c->body_left > 0) {
      size_t take = c->have - at < c->body_left ? c->have - at : c->body_left;
      at += take;
      c->body_left -= take;
      if (c->body_left > 0) break;
      owed++;
      continue;
    }
    char *start = c->buf + at;
    char *end = memmem(start, c->have - at, "\r\n\r\n", 4);
    if (end == NULL) break;
    size_t length = 0;
    for (char *p = start; p < end; ) {
      char *eol = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);
      if (eol - p > 15 && strncasecmp(p, "content-length:", 15) == 0) length = strtoul(p + 15, NULL, 10);
      p = eol + 2;
    }
    at = (size_t)(end + 4 - c->buf);
    if (length > 0) c->body_left = length;
    else owed++;
  }
  memmove(c->buf, c->buf + at, c->have - at);
  c->have -= at;
  return owed;
}

static void on_poll(uv_poll_t *p, int status, int events) {
  Conn *c = p->data;
  if (status < 0 || !(events & UV_READABLE)) { finish(c); return; }
  for (;;) {
    const size_t room = BUF - c->have;
    if (room == 0) { finish(c); return; } // a head longer than the buffer: not this probe's business
    ssize_t n = read(c->fd, c->buf + c->have, room);
    if (n == 0 || (n < 0 && errno != EAGAIN)) { finish(c); return; }
    if (n < 0) return;
    c->have += (size_t)n;
    int owed = consume(c);
    if (owed > 0) {
      struct iovec iov[64];
      while (owed > 0) {
        const int k = owed < 64 ? owed : 64;
        for (int i = 0; i < k; i++) { iov[i].iov_base = (void *)answer; iov[i].iov_len = answer_len; }
        if (writev(c->fd, iov, k) < 0) { finish(c); return; } // small answers: the kernel takes them whole
        owed -= k;
        requests += (uint64_t)k;
      }
    }
    if ((size_t)n < room) return; // read all there was: the poll says when there is more
  }
}

// serve(fd: number): the connection (a dup of a paused net.Socket's descriptor) is ours from now on.
static napi_value serve(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  uv_loop_t *loop;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_uv_event_loop(env, &loop) != napi_ok) {
    napi_throw_error(env, NULL, "serve(fd)");
    return NULL;
  }
  Conn *c = calloc(1, sizeof(Conn));
  c->fd = fd;
  c->poll.data = c;
  if (uv_poll_init(loop, &c->poll, fd) != 0 || uv_poll_start(&c->poll, UV_READABLE, on_poll) != 0) {
    free(c);
    napi_throw_error(env, NULL, "uv_poll_init");
    return NULL;
  }
  return NULL;
}

// setAnswer(bytes: Buffer): the fixed answer (kept: the Buffer must stay referenced by the caller).
static napi_value set_answer(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *data;
  size_t len;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_buffer_info(env, argv[0], &data, &len);
  char *copy = malloc(len);
  memcpy(copy, data, len);
  answer = copy;
  answer_len = len;
  return NULL;
}

static napi_value count(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  napi_create_double(env, (double)requests, &v);
  return v;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value fn;
  napi_create_function(env, "serve", NAPI_AUTO_LENGTH, serve, NULL, &fn);
  napi_set_named_property(env, exports, "serve", fn);
  napi_create_function(env, "setAnswer", NAPI_AUTO_LENGTH, set_answer, NULL, &fn);
  napi_set_named_property(env, exports, "setAnswer", fn);
  napi_create_function(env, "count", NAPI_AUTO_LENGTH, count, NULL, &fn);
  napi_set_named_property(env, exports, "count", fn);
  return exports;
}
