// A probe, not a gateway: the compiled planned path's hop in its smallest form, to measure what it
// costs against real Triton (see hop.js). HTTP/1.1 requests are read on Node's loop (uv_poll, as
// floor.c); each becomes a gRPC ModelInfer call on one HTTP/2 connection to Triton, framed here
// from bytes JavaScript prepared once (the HPACK block and the whole gRPC message: the bench sends
// one request again and again); the call's trailers answer the client with bytes also prepared
// once (the gateway's own answer to that request). With calls (serve(fd, true)), each request and
// each answer is a call into JavaScript, which forwards and answers through this module: C's
// transport and framing under JavaScript's per-request decisions.
//
// No HTTP parsing by any standard (a head to CRLF CRLF and its Content-Length bytes), no HPACK
// decoding (a HEADERS frame with END_STREAM is the call's end), windows given back in bulk.
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BUF (256 * 1024)
#define CONNS 1024
#define STREAMS 4096

typedef struct {
  uv_poll_t poll;
  int fd;
  int id;
  size_t have;
  size_t body_left;
  bool calls;
  char buf[BUF];
} Conn;

static Conn *conns[CONNS];
static napi_env js_env;
static napi_ref on_request_ref, on_answer_ref;
static napi_async_context async_ctx;

static char *block, *message, *answer;
static size_t block_len, message_len, answer_len;

// The upstream connection.
static int up_fd = -1;
static uv_poll_t up_poll;
static uint8_t up_buf[1 << 20];
static size_t up_have;
static uint32_t next_stream = 1;
static int stream_conn[STREAMS]; // a call's client connection, by (stream id >> 1) % STREAMS
static bool stream_data[STREAMS]; // it had a message back (a call that failed has trailers only)
static uint64_t unacked, answered, failed;

static void put_frame_header(uint8_t *h, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream) {
  h[0] = (uint8_t)(len >> 16); h[1] = (uint8_t)(len >> 8); h[2] = (uint8_t)len;
  h[3] = type; h[4] = flags;
  h[5] = (uint8_t)(stream >> 24); h[6] = (uint8_t)(stream >> 16); h[7] = (uint8_t)(stream >> 8); h[8] = (uint8_t)stream;
}

static void up_write(struct iovec *iov, int n) {
  // The probe's writes are small and the loopback socket's buffer large: taken whole, or the
  // probe says so and stops counting.
  ssize_t want = 0;
  for (int i = 0; i < n; i++) want += (ssize_t)iov[i].iov_len;
  if (writev(up_fd, iov, n) != want) failed++;
}

static void forward(Conn *c) {
  uint32_t id = next_stream;
  next_stream += 2;
  stream_conn[(id >> 1) % STREAMS] = c->id;
  stream_data[(id >> 1) % STREAMS] = false;
  uint8_t hh[9], dh[9];
  put_frame_header(hh, (uint32_t)block_len, 1, 0x4, id);          // HEADERS, END_HEADERS
  put_frame_header(dh, (uint32_t)message_len, 0, 0x1, id);        // DATA, END_STREAM
  struct iovec iov[4] = { { hh, 9 }, { block, block_len }, { dh, 9 }, { message, message_len } };
  up_write(iov, 4);
}

static void finish(Conn *c) {
  conns[c->id] = NULL;
  uv_poll_stop(&c->poll);
  close(c->fd);
  uv_close((uv_handle_t *)&c->poll, (uv_close_cb)free);
}

static void call_js(napi_ref ref, int id) {
  napi_handle_scope scope;
  napi_value fn, recv, arg, result;
  napi_open_handle_scope(js_env, &scope);
  napi_get_reference_value(js_env, ref, &fn);
  napi_get_global(js_env, &recv);
  napi_create_int32(js_env, id, &arg);
  napi_make_callback(js_env, async_ctx, recv, fn, 1, &arg, &result);
  napi_close_handle_scope(js_env, scope);
}

static void request(Conn *c) {
  if (c->calls) call_js(on_request_ref, c->id);
  else forward(c);
}

static void consume(Conn *c) {
  size_t at = 0;
  for (;;) {
    if (c->body_left > 0) {
      size_t take = c->have - at < c->body_left ? c->have - at : c->body_left;
      at += take;
      c->body_left -= take;
      if (c->body_left > 0) break;
      request(c);
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
    else request(c);
  }
  memmove(c->buf, c->buf + at, c->have - at);
  c->have -= at;
}

static void on_client(uv_poll_t *p, int status, int events) {
  Conn *c = p->data;
  if (status < 0 || !(events & UV_READABLE)) { finish(c); return; }
  for (;;) {
    const size_t room = BUF - c->have;
    if (room == 0) { finish(c); return; }
    ssize_t n = read(c->fd, c->buf + c->have, room);
    if (n == 0 || (n < 0 && errno != EAGAIN)) { finish(c); return; }
    if (n < 0) return;
    c->have += (size_t)n;
    consume(c);
    if ((size_t)n < room) return;
  }
}

static void answer_conn(int id) {
  Conn *c = id >= 0 && id < CONNS ? conns[id] : NULL;
  if (c == NULL) return;
  if (write(c->fd, answer, answer_len) != (ssize_t)answer_len) failed++;
  answered++;
}

static void on_upstream(uv_poll_t *p, int status, int events) {
  (void)p;
  if (status < 0 || !(events & UV_READABLE)) { failed++; uv_poll_stop(&up_poll); return; }
  for (;;) {
    ssize_t n = read(up_fd, up_buf + up_have, sizeof(up_buf) - up_have);
    if (n <= 0) {
      if (n < 0 && errno == EAGAIN) return;
      failed++;
      uv_poll_stop(&up_poll);
      return;
    }
    up_have += (size_t)n;
    size_t at = 0;
    while (up_have - at >= 9) {
      const uint8_t *h = up_buf + at;
      uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
      if (up_have - at < 9 + len) break;
      uint8_t type = h[3], flags = h[4];
      uint32_t stream = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff;
      if (type == 4 && !(flags & 1)) { // SETTINGS: acknowledged
        uint8_t ack[9];
        put_frame_header(ack, 0, 4, 1, 0);
        struct iovec iov[1] = { { ack, 9 } };
        up_write(iov, 1);
      } else if (type == 6 && !(flags & 1) && len == 8) { // PING: acknowledged
        uint8_t pong[17];
        put_frame_header(pong, 8, 6, 1, 0);
        memcpy(pong + 9, h + 9, 8);
        struct iovec iov[1] = { { pong, 17 } };
        up_write(iov, 1);
      } else if (type == 0) { // DATA: the connection's window (65,535 by default) given back from half on
        if (len > 0) stream_data[(stream >> 1) % STREAMS] = true;
        unacked += len;
        if (unacked >= 32768) {
          uint8_t wu[13];
          put_frame_header(wu, 4, 8, 0, 0);
          wu[9] = (uint8_t)(unacked >> 24); wu[10] = (uint8_t)(unacked >> 16); wu[11] = (uint8_t)(unacked >> 8); wu[12] = (uint8_t)unacked;
          struct iovec iov[1] = { { wu, 13 } };
          up_write(iov, 1);
          unacked = 0;
        }
      } else if (type == 1 && (flags & 1)) { // trailers: the call is over
        int id = stream_conn[(stream >> 1) % STREAMS];
        if (!stream_data[(stream >> 1) % STREAMS]) failed++;
        Conn *c = id >= 0 && id < CONNS ? conns[id] : NULL;
        if (c != NULL && c->calls) call_js(on_answer_ref, id);
        else answer_conn(id);
      } else if (type == 3 || type == 7) { // RST_STREAM, GOAWAY
        failed++;
      }
      at += 9 + len;
    }
    memmove(up_buf, up_buf + at, up_have - at);
    up_have -= at;
  }
}

static void arg_buffer(napi_env env, napi_value v, char **out, size_t *len) {
  void *data;
  napi_get_buffer_info(env, v, &data, len);
  *out = malloc(*len);
  memcpy(*out, data, *len);
}

// connect(port, preface: Buffer, block: Buffer, message: Buffer, answer: Buffer, onRequest, onAnswer)
static napi_value connect_js(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  int32_t port;
  uv_loop_t *loop;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &port);
  char *preface;
  size_t preface_len;
  arg_buffer(env, argv[1], &preface, &preface_len);
  arg_buffer(env, argv[2], &block, &block_len);
  arg_buffer(env, argv[3], &message, &message_len);
  arg_buffer(env, argv[4], &answer, &answer_len);
  js_env = env;
  napi_create_reference(env, argv[5], 1, &on_request_ref);
  napi_create_reference(env, argv[6], 1, &on_answer_ref);
  napi_value name, resource;
  napi_create_string_utf8(env, "hop", NAPI_AUTO_LENGTH, &name);
  napi_create_object(env, &resource);
  napi_async_init(env, resource, name, &async_ctx);
  for (int i = 0; i < STREAMS; i++) stream_conn[i] = -1;
  up_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(up_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    napi_throw_error(env, NULL, "connect to Triton failed");
    return NULL;
  }
  int one = 1;
  setsockopt(up_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (write(up_fd, preface, preface_len) != (ssize_t)preface_len) failed++;
  free(preface);
  fcntl(up_fd, F_SETFL, fcntl(up_fd, F_GETFL) | O_NONBLOCK);
  napi_get_uv_event_loop(env, &loop);
  uv_poll_init_socket(loop, &up_poll, up_fd);
  uv_poll_start(&up_poll, UV_READABLE, on_upstream);
  return NULL;
}

// serve(fd, calls: boolean): the client connection is ours (a paused net.Socket's descriptor).
static napi_value serve_js(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  bool calls = false;
  uv_loop_t *loop;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &fd);
  if (argc > 1) napi_get_value_bool(env, argv[1], &calls);
  int id = 0;
  while (id < CONNS && conns[id] != NULL) id++;
  if (id == CONNS) { napi_throw_error(env, NULL, "too many connections"); return NULL; }
  Conn *c = calloc(1, sizeof(Conn));
  c->fd = fd;
  c->id = id;
  c->calls = calls;
  c->poll.data = c;
  conns[id] = c;
  napi_get_uv_event_loop(env, &loop);
  uv_poll_init_socket(loop, &c->poll, fd);
  uv_poll_start(&c->poll, UV_READABLE, on_client);
  return NULL;
}

static napi_value forward_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t id;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &id);
  Conn *c = id >= 0 && id < CONNS ? conns[id] : NULL;
  if (c != NULL) forward(c);
  return NULL;
}

static napi_value answer_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t id;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &id);
  answer_conn(id);
  return NULL;
}

static napi_value counts_js(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out, a, f;
  napi_create_object(env, &out);
  napi_create_double(env, (double)answered, &a);
  napi_create_double(env, (double)failed, &f);
  napi_set_named_property(env, out, "answered", a);
  napi_set_named_property(env, out, "failed", f);
  return out;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  static const struct { const char *name; napi_callback fn; } fns[] = {
    { "connect", connect_js }, { "serve", serve_js }, { "forward", forward_js }, { "answer", answer_js }, { "counts", counts_js },
  };
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}
