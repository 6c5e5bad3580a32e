// A probe, not a server: how much CPU a request costs when a connection's bytes are read and
// answered in C inside Node's own event loop (a Node-API module polling the socket with libuv's
// uv_poll), against a JavaScript net.Socket doing the same. Every request on a connection handed
// here gets one fixed answer; a request is a head ending in CRLF CRLF and, where it says
// Content-Length, that many bytes of body (found by a plain scan: no parser's rules). See floor.js.
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include <errno.h>
#include <stdbool.h>
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
  int id;
  size_t have;
  size_t body_left;
  napi_async_context async; // calls: each request is handed to JavaScript (serve(fd, true))
  napi_ref buffer_ref;      // calls: the ArrayBuffer buf lies in, JavaScript's to read
  char *buf;
  char own[BUF];
} Conn;

#define CONNS 1024
static Conn *conns[CONNS];
static napi_env cb_env = NULL;
static napi_ref cb_ref = NULL; // onRequest(id, at, length): JavaScript's callback, when it answers

static const char *answer = NULL;
static size_t answer_len = 0;
static uint64_t requests = 0;

static void closed(uv_handle_t *h) { free(h->data); }

static void finish(Conn *c) {
  conns[c->id] = NULL;
  if (c->async != NULL) napi_async_destroy(cb_env, c->async);
  if (c->buffer_ref != NULL) napi_delete_reference(cb_env, c->buffer_ref);
  uv_poll_stop(&c->poll);
  close(c->fd);
  uv_close((uv_handle_t *)&c->poll, closed);
}

// Hands a whole request to JavaScript: onRequest(id, at, length), in a callback scope as Node's own
// I/O callbacks are (its microtasks and ticks run after it).
static void call_js(Conn *c, size_t at, size_t length) {
  napi_handle_scope scope;
  napi_value cb, recv, argv[3], result;
  napi_open_handle_scope(cb_env, &scope);
  napi_get_reference_value(cb_env, cb_ref, &cb);
  napi_get_global(cb_env, &recv); // napi_make_callback takes an object as its receiver
  napi_create_int32(cb_env, c->id, &argv[0]);
  napi_create_double(cb_env, (double)at, &argv[1]);
  napi_create_double(cb_env, (double)length, &argv[2]);
  napi_make_callback(cb_env, c->async, recv, cb, 3, argv, &result);
  napi_close_handle_scope(cb_env, scope);
}

// Consumes what is whole in c->buf; answers each request (or hands it to JavaScript); returns the
// answers owed.
static int consume(Conn *c) {
  int owed = 0;
  size_t at = 0;
  for (;;) {
    if (c->body_left > 0) {
      size_t take = c->have - at < c->body_left ? c->have - at : c->body_left;
      at += take;
      c->body_left -= take;
      if (c->body_left > 0) break;
      if (c->async != NULL) call_js(c, 0, at); else owed++;
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
    else if (c->async != NULL) call_js(c, (size_t)(start - c->buf), at);
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

// serve(fd: number, calls?: boolean): the connection (a paused net.Socket's descriptor) is ours from
// now on; with calls, each request goes to onRequest and JavaScript answers with write(). Returns
// the connection's id and, with calls, its buffer (the request's bytes at the offsets given).
static napi_value serve(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  bool calls = false;
  uv_loop_t *loop;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_uv_event_loop(env, &loop) != napi_ok) {
    napi_throw_error(env, NULL, "serve(fd)");
    return NULL;
  }
  if (argc > 1) napi_get_value_bool(env, argv[1], &calls);
  int id = 0;
  while (id < CONNS && conns[id] != NULL) id++;
  if (id == CONNS) {
    napi_throw_error(env, NULL, "too many connections");
    return NULL;
  }
  Conn *c = calloc(1, sizeof(Conn));
  c->fd = fd;
  c->id = id;
  c->poll.data = c;
  c->buf = c->own;
  conns[id] = c;
  napi_value out;
  napi_create_object(env, &out);
  if (calls) {
    napi_value name, resource, ab;
    napi_create_string_utf8(env, "conn", NAPI_AUTO_LENGTH, &name);
    napi_create_object(env, &resource);
    napi_async_init(env, resource, name, &c->async);
    void *data;
    napi_create_arraybuffer(env, BUF, &data, &ab);
    napi_create_reference(env, ab, 1, &c->buffer_ref);
    c->buf = data;
    napi_set_named_property(env, out, "buffer", ab);
  }
  napi_value idv;
  napi_create_int32(env, id, &idv);
  napi_set_named_property(env, out, "id", idv);
  if (uv_poll_init(loop, &c->poll, fd) != 0 || uv_poll_start(&c->poll, UV_READABLE, on_poll) != 0) {
    free(c);
    napi_throw_error(env, NULL, "uv_poll_init");
    return NULL;
  }
  return out;
}

// onRequest(fn): the callback serve(fd, true)'s connections hand their requests to.
static napi_value on_request(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  cb_env = env;
  napi_create_reference(env, argv[0], 1, &cb_ref);
  return NULL;
}

// write(id, bytes): written at once (small answers: the kernel takes them whole).
static napi_value write_js(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t id;
  void *data;
  size_t len;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &id);
  napi_get_buffer_info(env, argv[1], &data, &len);
  Conn *c = id >= 0 && id < CONNS ? conns[id] : NULL;
  if (c != NULL) {
    if (write(c->fd, data, len) < 0) finish(c);
    else requests++;
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
  napi_create_function(env, "onRequest", NAPI_AUTO_LENGTH, on_request, NULL, &fn);
  napi_set_named_property(env, exports, "onRequest", fn);
  napi_create_function(env, "write", NAPI_AUTO_LENGTH, write_js, NULL, &fn);
  napi_set_named_property(env, exports, "write", fn);
  napi_create_function(env, "count", NAPI_AUTO_LENGTH, count, NULL, &fn);
  napi_set_named_property(env, exports, "count", fn);
  return exports;
}
