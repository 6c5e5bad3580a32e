// A probe of the compiled lane (docs/architecture.md, "What a planned request costs, and the layer
// below it"; measured by bench/native-floor/hop.js): a planned request served from bytes JavaScript has already
// decided on, with no parsing in C. Not part of the gateway: what such a lane costs in front of
// real Triton with a real HTTP/2 client under it, and that its answers are the gateway's.
//
// JavaScript serves the first request of each shape and keeps what it decided, as bytes:
//   - a kept head: an HTTP/1.1 request head, byte for byte (request line, every header, the final
//     CRLF CRLF), with the body length its Content-Length said. The same bytes parse the same way,
//     so what JavaScript concluded from them (route, model, credentials, planned or not,
//     keep-alive) holds for every request that repeats them; C compares, it does not parse.
//   - a kept body plan under a kept head: the body's first bytes (the binary extension's JSON
//     header) and the gRPC message to send, as segments: bytes kept, or a range of the body.
//   - a kept answer: the gRPC answer message as segments (bytes that must match, or a run of any
//     bytes: the raw output contents), and the HTTP answer to write: kept bytes with a Date line
//     filled in here each second, then the runs of the message.
//   - or, for a JSON body of one base64 string: the text before the string and after it, its
//     decoded length; the string is decoded here, where it lies (clean base64 alone), into the
//     message's payload, and written back as text before the request goes back to JavaScript.
//     And a JSON answer: the texts around its FP32 outputs' values, which are printed here as
//     Triton prints them (triton-double.h), with the Content-Length they come to.
// Anything else — a head, a body header or an answer not kept, a failed call — is given back to
// JavaScript (hand_back), which serves it as before.
//
// The upstream is an HTTP/2 connection per backend on libnghttp2 (the copy the node binary exports
// for addons: flow control, SETTINGS, PING, GOAWAY and HPACK are its), its DATA frames written by
// reference from the client's read buffer, gathered into one writev per turn.
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "base64-kernels.h"
#include "triton-double.h"

// ---- libnghttp2's API, as declared by nghttp2.h (its ABI is stable across 1.x; node exports it)
typedef ptrdiff_t nghttp2_ssize;
typedef struct nghttp2_session nghttp2_session;
typedef struct nghttp2_session_callbacks nghttp2_session_callbacks;
typedef struct { uint8_t *name; uint8_t *value; size_t namelen; size_t valuelen; uint8_t flags; } nghttp2_nv;
typedef struct { size_t length; int32_t stream_id; uint8_t type; uint8_t flags; uint8_t reserved; } nghttp2_frame_hd;
typedef union { nghttp2_frame_hd hd; } nghttp2_frame; // only the header common to every frame is read
typedef union { int fd; void *ptr; } nghttp2_data_source;
typedef nghttp2_ssize (*nghttp2_data_source_read_callback2)(nghttp2_session *, int32_t, uint8_t *, size_t, uint32_t *, nghttp2_data_source *, void *);
typedef struct { nghttp2_data_source source; nghttp2_data_source_read_callback2 read_callback; } nghttp2_data_provider2;
typedef struct { int32_t settings_id; uint32_t value; } nghttp2_settings_entry;
extern int nghttp2_session_callbacks_new(nghttp2_session_callbacks **);
extern void nghttp2_session_callbacks_del(nghttp2_session_callbacks *);
extern void nghttp2_session_callbacks_set_send_callback2(nghttp2_session_callbacks *, nghttp2_ssize (*)(nghttp2_session *, const uint8_t *, size_t, int, void *));
extern void nghttp2_session_callbacks_set_send_data_callback(nghttp2_session_callbacks *, int (*)(nghttp2_session *, nghttp2_frame *, const uint8_t *, size_t, nghttp2_data_source *, void *));
extern void nghttp2_session_callbacks_set_on_header_callback(nghttp2_session_callbacks *, int (*)(nghttp2_session *, const nghttp2_frame *, const uint8_t *, size_t, const uint8_t *, size_t, uint8_t, void *));
extern void nghttp2_session_callbacks_set_on_data_chunk_recv_callback(nghttp2_session_callbacks *, int (*)(nghttp2_session *, uint8_t, int32_t, const uint8_t *, size_t, void *));
extern void nghttp2_session_callbacks_set_on_stream_close_callback(nghttp2_session_callbacks *, int (*)(nghttp2_session *, int32_t, uint32_t, void *));
extern int nghttp2_session_client_new(nghttp2_session **, const nghttp2_session_callbacks *, void *);
extern void nghttp2_session_del(nghttp2_session *);
extern int nghttp2_submit_settings(nghttp2_session *, uint8_t, const nghttp2_settings_entry *, size_t);
extern int nghttp2_session_set_local_window_size(nghttp2_session *, uint8_t, int32_t, int32_t);
extern int32_t nghttp2_submit_request2(nghttp2_session *, const void *, const nghttp2_nv *, size_t, const nghttp2_data_provider2 *, void *);
extern nghttp2_ssize nghttp2_session_mem_recv2(nghttp2_session *, const uint8_t *, size_t);
extern int nghttp2_session_send(nghttp2_session *);
extern void *nghttp2_session_get_stream_user_data(nghttp2_session *, int32_t);
extern int nghttp2_submit_rst_stream(nghttp2_session *, uint8_t, int32_t, uint32_t);
extern int nghttp2_session_resume_data(nghttp2_session *, int32_t);
#define NGHTTP2_DATA_FLAG_EOF 0x01
#define NGHTTP2_DATA_FLAG_NO_COPY 0x04
#define NGHTTP2_ERR_CALLBACK_FAILURE (-902)
#define NGHTTP2_ERR_DEFERRED (-508)
#define NGHTTP2_HEADERS 0x01
#define NGHTTP2_SETTINGS_ENABLE_PUSH 0x02
#define NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE 0x04
#define NGHTTP2_CANCEL 0x08

// ---- bounds
#define MAX_HEAD 8192          // a kept head is at most this long (the fast path's header bound is larger: longer heads are JavaScript's)
#define MAX_BODY (8 << 20)     // the planned path's body bound with the lane (ingress/server.ts LANE_BODY_BYTES)
#define MAX_ANSWER (64 * 1024) // the planned path's answer bound
#define MAX_CONNS 4096
#define MAX_SEGS 16
#define MAX_IOV 1024
#define MAX_KEPT 4                         // body plans and answers kept under one head
// Heads kept at once: heads that differ per request (a request id, a trace header) are kept once
// each and never seen again, so the table is bounded, and starts again when full (lane.ts keep).
#define MAX_HEADS 256
#define FLUSH_BYTES (1 << 20)              // a turn's writes go out once this many are queued (up_queue)
#define UNIX_SNDBUF (4 << 20)              // a Unix socket upstream's send buffer (up_start)
// A body that arrives in several reads (libcurl writes 64 KiB at a time) has its call begun once
// its plan is known from its first bytes, when EARLY_MIN or more of it are still to come; its DATA
// frames follow its reads, EARLY_FRAME at least at a time (or what is left).
#define EARLY_MIN (64 * 1024)
#define EARLY_FRAME 16384
// A connection reads into SMALL_BUF bytes of its own; a request larger than that takes one of the
// lane's BIG_BUF buffers while it is under way (from its first read when the connection's last
// request took one too, so its bytes are not moved), given back once its answer is out and the
// connection holds no more than a small buffer's worth: an idle connection holds 64 KiB, not a
// body's size. A BIG_BUF buffer is mapped, not allocated: only the pages its requests wrote are
// memory, so a 600 KB request's holds ~0.7 MB of its 8 MiB. At most MAX_SPARE given-back buffers,
// SPARE_BYTES of written pages, wait for the next large request (a connection closed between
// requests gives its buffer back too); any other is unmapped, and so are they once no large
// request came for SPARE_IDLE_MS.
#define SMALL_BUF (64 * 1024)
#define BIG_BUF (MAX_HEAD + MAX_BODY + 65536)
#define MAX_SPARE 16
#define SPARE_BYTES (32u << 20)
#define SPARE_IDLE_MS 2000                 // spares unmapped once no large request came for this long (drain())

// bytes kept (bytes != NULL), or body[body_at, +len), or (decoded) the body's base64 string decoded[body_at, +len)
typedef struct { const uint8_t *bytes; size_t len; size_t body_at; bool decoded; } Seg;

typedef struct BodyPlan {
  uint8_t *header; size_t header_len;       // the body's first bytes, as kept
  Seg segs[MAX_SEGS]; int nsegs; size_t message_len;
  // A JSON body holding one base64 string: the header is the text up to its opening quote, the
  // suffix the text from its closing quote; the string between, of any characters of the base64
  // alphabets, decodes to decoded_len bytes.
  uint8_t *suffix; size_t suffix_len; size_t decoded_len; bool base64;
  struct BodyPlan *next;
} BodyPlan;

typedef struct Answer {
  Seg match[MAX_SEGS]; int nmatch;          // over the gRPC message: bytes to match, or a run (bytes NULL, len) of any bytes
  uint8_t *head; size_t head_len; size_t date_at; // the HTTP answer's head; 29 bytes at date_at are the date, kept current
  size_t timing_at;                         // where the Server-Timing line goes in the head (SIZE_MAX: none)
  // A JSON answer: its body is texts[0], the first run's values printed (of kinds[0]: FP32 or an
  // integer type), texts[1], … (a text after each run); its Content-Length's digits go at
  // length_at in the head. json_max bounds it.
  bool json; uint8_t *texts[MAX_SEGS + 1]; size_t text_len[MAX_SEGS + 1]; int ntexts; size_t length_at, json_max;
  uint8_t kinds[MAX_SEGS];
  const struct BodyPlan *plan;              // the answers of this plan's requests (a head may have plans of other answer forms)
  struct Answer *next;
} Answer;

typedef struct Head {
  uint8_t *bytes; size_t len; uint64_t hash; size_t body_len; int index;
  BodyPlan *plans; Answer *answers;
  int nplans, nanswers;                     // at most MAX_KEPT of each
  int upstream;                             // the backend's connection index
  int in_flight;                            // its requests admitted and not over (inFlight())
  bool expect;                              // Expect: 100-continue: HTTP/1.1 100 Continue written when it is read, before its body
  struct Head *next;
} Head;

typedef struct Up Up;
typedef struct Lane Lane;

enum { C_HEAD, C_BODY, C_CALL, C_WRITE, C_GONE };

typedef struct Conn {
  uv_poll_t poll;
  Lane *lane;
  int fd, id, state;
  uint8_t *buf; size_t cap, have;           // what was read: the request under way first (in small, or a BIG_BUF buffer)
  uint8_t *small; bool large_last;          // the connection's own SMALL_BUF buffer; its last request needed a large one
  size_t touched;                           // a BIG_BUF buffer's bytes written so far (its pages in memory)
  const Head *head; const BodyPlan *plan;
  Up *up; int32_t stream;
  size_t sent;                              // the message's bytes given to nghttp2
  bool deferred;                            // its DATA waits for the backend's socket to take what it holds (read_body)
  bool streaming;                           // the call began before its body was whole (early_call): its reads go on
  bool starved;                             // its DATA waits for the client's next read (read_body)
  bool body_late;                           // the body did not come within the request's bound: cancelled, JavaScript's to answer
  bool not_plan;                            // an early call's base64 body, whole, is not its plan's: cancelled, JavaScript's to serve
  uint8_t answer[MAX_ANSWER + 5]; size_t answer_len; bool answer_ok, status_ok, headers_seen;
  int32_t grpc_status;                      // -1 until the trailers say
  char grpc_message[256]; size_t grpc_message_len;
  uint32_t rst;                             // the stream's error code (RST_STREAM, GOAWAY), 0 if none
  bool hung_up, timed_out, lost;            // why a call ended without an answer of its own
  uv_timer_t timer;                         // the call's deadline
  int handles;                              // poll and timer, until both are closed
  uint8_t *out; size_t out_len, out_off;    // an answer the socket did not take at once
  // the head's first read, the body whole, its call (the body read as its plan: a base64 string decoded), the message sent, the
  // answer's first and last byte, the answer's body ready (a JSON answer printed), its bytes handed to the socket
  double started_ns, body_ns, call_ns, sent_ns, first_ns, end_ns, encoded_ns, written_ns;
  double decoded_ns;                        // an early call's base64 string decoded to its end, once the body was whole (0: none)
  char timing[256]; size_t timing_len;      // the answer's Server-Timing line
  double head_at;                           // when the current head's first byte came (ms, Date.now()'s clock); 0: none yet
  bool admitted; double held;               // the request under way holds a place in the in-flight counts (admit()), and its body's bytes
  size_t decoded_groups;                    // the request's base64 string is decoded in place: its groups of four (conn_restore)
  const BodyPlan *early;                    // the plan decode_early reads the body under way as (the head's first, when it began)
  size_t early_groups;                      // groups of its string decoded as they arrived
  bool early_off;                           // the text is not that plan's, or not clean: the body is decoded once whole
  char *json; size_t json_cap;              // a JSON answer's body, printed
} Conn;

struct Up {
  Lane *lane;
  int fd; uv_poll_t *poll; nghttp2_session *session; // poll: one per connection (its handle closes asynchronously)
  struct sockaddr_storage addr; socklen_t addrlen; uv_loop_t *loop; // a TCP (IPv4) or Unix domain socket's address
  bool connecting;                          // a non-blocking connect under way: the session begins once it is done
  uint64_t retry_at;                        // after a failed connection, the next attempt's earliest time (uv_now)
  struct iovec iov[MAX_IOV]; int niov;      // this turn's writes, by reference
  size_t queued;                            // their bytes
  uint8_t hd[MAX_IOV * 9]; int nhd;         // DATA frame headers (nghttp2 reuses its own)
  uint8_t arena[64 * 1024]; size_t arena_at; // small frames nghttp2 gave (its buffer is reused)
  uint8_t *pending; size_t pending_len, pending_off; // what the socket did not take
  bool writable_wait, failed;
  int sndbuf;                               // a Unix socket's send buffer as the kernel gave it (SO_SNDBUF reads twice what was set)
  bool dirty;                               // calls submitted this loop iteration, sent by on_check
  nghttp2_nv nva[16]; size_t nnv;
  char authority[256];
  double *gate; napi_ref gate_ref;          // gate[0] != 0: the backend set would call this backend now (connect()'s array, JavaScript's memory)
};

// The record ring: per request served, RECORD doubles (head index; the head's first read, its call
// (the body read as its plan), the message sent, the answer's first and last byte — nanoseconds of
// CLOCK_MONOTONIC —; a JSON answer's body bytes, -1 for any other answer (its length is the kept
// one's); upstream; the body whole, the answer's body ready, its bytes handed to the socket),
// drained by JavaScript (drain(), or onRecords when RING_FLUSH are waiting); then, for a base64
// body whose call began before it was whole, its string's last part decoded (0 for any other).
#define RECORD 12
#define RING_FLUSH 1024
#define MAX_UPS 8

/** One lane: a server's (init() makes it; every other export takes it first). */
typedef struct Lane {
  napi_env env;
  napi_ref on_hand_back, on_records;
  napi_async_context ctx;
  Conn *conns[MAX_CONNS];
  Head *heads; int live_heads;              // the heads kept (live_heads of them, at most MAX_HEADS)
  Head *retired;                            // heads cleared while a request may still read one: freed by a later clear
  int nheads;
  Up *ups[MAX_UPS];
  int nups;
  char date_line[30];
  time_t date_at_s;
  uint64_t served, handed_back, failed;
  uint64_t copied_up;                       // bytes a backend's socket did not take at once, copied to be written later (up_flush)
  uint64_t decoded_early;                   // base64 characters decoded as they arrived (decode_early)
  uint64_t early_calls;                     // calls begun before their body was whole (early_call)
  uint64_t call_timeout_ms;
  uint64_t headers_timeout_ms, request_timeout_ms, keep_alive_timeout_ms; // the fast path's bounds (0: none)
  bool draining;                            // connections go back to JavaScript, which closes them as it does its own
  double *in_flight;                        // ingress/admission.ts's counts: requests, declared body bytes (JavaScript's memory)
  napi_ref in_flight_ref;                   // holds that memory's array
  double max_requests, max_body_bytes;      // limits.maxInFlightRequests, limits.maxInFlightBodyBytes
  uv_check_t check;                         // after each iteration's polling: the backends' connections with calls to send
  bool closed, closing, released;           // closed: no export may use it; released: one of its two owners let go
  double ring[RING_FLUSH * RECORD];
  int ring_n;
  struct { uint8_t *buf; size_t touched; } spare[MAX_SPARE]; // BIG_BUF buffers given back (big_give), and their pages written
  int nspare, nbig;                         // spares; BIG_BUF buffers mapped and not unmapped (held by connections or spare)
  size_t spare_bytes;                       // the spares' pages written
  double big_at;                            // when a large buffer was last taken (epoch_ms)
} Lane;

/**
 * The lane the code running now is for: set by every entry point (an export, a libuv callback)
 * and put back as it returns, since JavaScript called from C may enter another server's lane.
 */
static Lane *L;
/** Inside nghttp2_session_mem_recv2: calls made from its callbacks are sent by on_up after it returns. */
static bool in_recv;

static double epoch_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec * 1e3 + (double)(t.tv_nsec / 1000000);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static napi_value take_records(napi_env env) {
  napi_value ab, arr;
  void *data;
  napi_create_arraybuffer(env, (size_t)L->ring_n * RECORD * sizeof(double), &data, &ab);
  memcpy(data, L->ring, (size_t)L->ring_n * RECORD * sizeof(double));
  napi_create_typedarray(env, napi_float64_array, (size_t)L->ring_n * RECORD, ab, 0, &arr);
  L->ring_n = 0;
  return arr;
}

static void record(const Conn *c, double answer_bytes) {
  double *r = L->ring + (size_t)L->ring_n * RECORD;
  r[0] = c->head->index; r[1] = c->started_ns; r[2] = c->call_ns; r[3] = c->sent_ns; r[4] = c->first_ns;
  r[5] = c->end_ns; r[6] = answer_bytes; r[7] = c->head->upstream; r[8] = c->body_ns; r[9] = c->encoded_ns; r[10] = c->written_ns;
  r[11] = c->decoded_ns;
  if (++L->ring_n < RING_FLUSH) return;
  napi_handle_scope scope;
  napi_value fn, recv, arg, result;
  napi_open_handle_scope(L->env, &scope);
  napi_get_reference_value(L->env, L->on_records, &fn);
  napi_get_global(L->env, &recv);
  arg = take_records(L->env);
  napi_make_callback(L->env, L->ctx, recv, fn, 1, &arg, &result);
  napi_close_handle_scope(L->env, scope);
}

static uint64_t hash_bytes(const uint8_t *p, size_t n) { // FNV-1a, 8 bytes a step
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { uint64_t w; memcpy(&w, p + i, 8); h = (h ^ w) * 0x100000001b3ull; }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/** The IMF-fixdate of now (RFC 9110 §5.6.7), 29 bytes, written into every kept answer once a second. */
static void refresh_date(void) {
  time_t now = time(NULL);
  if (now == L->date_at_s) return;
  L->date_at_s = now;
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(L->date_line, sizeof(L->date_line), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  for (Head *h = L->heads; h != NULL; h = h->next)
    for (Answer *a = h->answers; a != NULL; a = a->next)
      if (a->date_at != SIZE_MAX) memcpy(a->head + a->date_at, L->date_line, 29);
}

// ---- JSON answers' values
// A run's element type, as json-answer-head.ts numbers them (PRINTED_KINDS): FP32, then Triton's integer types.
enum { K_FP32, K_INT8, K_UINT8, K_INT16, K_UINT16, K_INT32, K_UINT32, K_INT64, K_UINT64, K_COUNT };
static const uint8_t KIND_SIZE[K_COUNT] = { 4, 1, 1, 2, 2, 4, 4, 8, 8 };
static const uint8_t KIND_MAX[K_COUNT] = { TD_MAX_LENGTH, 4, 3, 6, 5, 11, 10, 20, 20 }; // the longest value printed

/** n integers of `kind` (little-endian) in decimal, comma-separated, as infer-response.ts prints them: the end. */
static char *print_ints(const uint8_t *m, size_t n, int kind, char *o) {
  for (size_t i = 0; i < n; i++) {
    uint64_t u = 0;
    bool negative = false;
    const uint8_t *p = m + i * KIND_SIZE[kind];
    switch (kind) {
      case K_INT8: { int8_t v = (int8_t)p[0]; negative = v < 0; u = negative ? (uint64_t)(-(int64_t)v) : (uint64_t)v; break; }
      case K_UINT8: u = p[0]; break;
      case K_INT16: { int16_t v; memcpy(&v, p, 2); negative = v < 0; u = negative ? (uint64_t)(-(int64_t)v) : (uint64_t)v; break; }
      case K_UINT16: { uint16_t v; memcpy(&v, p, 2); u = v; break; }
      case K_INT32: { int32_t v; memcpy(&v, p, 4); negative = v < 0; u = negative ? (uint64_t)(-(int64_t)v) : (uint64_t)v; break; }
      case K_UINT32: { uint32_t v; memcpy(&v, p, 4); u = v; break; }
      case K_INT64: { int64_t v; memcpy(&v, p, 8); negative = v < 0; u = negative ? 0 - (uint64_t)v : (uint64_t)v; break; }
      default: memcpy(&u, p, 8); break;
    }
    if (i > 0) *o++ = ',';
    if (negative) *o++ = '-';
    char digits[20];
    int k = 0;
    do { digits[k++] = (char)('0' + u % 10); u /= 10; } while (u != 0);
    while (k > 0) *o++ = digits[--k];
  }
  return o;
}

static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";

// ---- read buffers
static void big_free(uint8_t *b) { munmap(b, BIG_BUF); }

/** A BIG_BUF buffer (NULL: none could be mapped), and its bytes written before. */
static uint8_t *big_take(size_t *touched) {
  L->big_at = epoch_ms();
  if (L->nspare > 0) {
    L->nspare--;
    L->spare_bytes -= *touched = L->spare[L->nspare].touched;
    return L->spare[L->nspare].buf;
  }
  void *b = mmap(NULL, BIG_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) return NULL;
  L->nbig++;
  *touched = 0;
  return b;
}

static void big_give(uint8_t *b, size_t touched) {
  if (L->nspare < MAX_SPARE && L->spare_bytes + touched <= SPARE_BYTES) {
    L->spare[L->nspare].buf = b;
    L->spare[L->nspare++].touched = touched;
    L->spare_bytes += touched;
    return;
  }
  L->nbig--;
  big_free(b);
}

/** A connection whose request is over: its large buffer back to the lane, what it holds of the next moved to its own. */
static void conn_shrink(Conn *c) {
  if (c->buf == c->small || c->have > SMALL_BUF - 16384) return;
  memcpy(c->small, c->buf, c->have);
  big_give(c->buf, c->touched);
  c->buf = c->small;
  c->cap = SMALL_BUF;
}

/** Reads go to a large buffer from here on, what was read moved there; false: none could be mapped. */
static bool conn_grow(Conn *c) {
  size_t touched;
  uint8_t *big = big_take(&touched);
  if (big == NULL) return false;
  memcpy(big, c->buf, c->have);
  c->buf = big;
  c->cap = BIG_BUF;
  c->touched = touched > c->have ? touched : c->have;
  return true;
}

// ---- giving a connection back to JavaScript
static void conn_free(uv_handle_t *h) {
  Conn *c = h->data;
  if (--c->handles > 0) return;
  if (c->buf != c->small) big_free(c->buf);
  free(c->small);
  free(c->out);
  free(c->json);
  free(c);
}

/**
 * The request under way takes a place in the gateway's in-flight bounds, as admission.ts's
 * refusal() and enter() do for JavaScript's: false when a bound is reached (JavaScript then refuses it).
 */
static bool admit(Conn *c) {
  double *n = L->in_flight, body = (double)c->head->body_len;
  if (c->admitted) return true;
  if (n != NULL) {
    if (n[0] >= L->max_requests || (body > 0 && n[1] > 0 && n[1] + body > L->max_body_bytes)) return false;
    n[0] += 1;
    n[1] += body;
  }
  ((Head *)c->head)->in_flight++;
  c->admitted = true;
  c->held = body;
  return true;
}

/** The request under way gives its place back (served, or the connection given back). */
static void leave(Conn *c) {
  if (!c->admitted) return;
  c->admitted = false;
  ((Head *)c->head)->in_flight--;
  if (L->in_flight == NULL) return;
  L->in_flight[0] -= 1;
  L->in_flight[1] -= c->held;
}

static void conn_release(Conn *c) {
  leave(c);
  if (c->buf != c->small) {
    // A call under way may still read its body until the connection is freed (conn_free): freed
    // then. Any other goes back to the lane now, its pages written: a client that makes a
    // connection per request would otherwise map and fault in a large request's pages each time.
    if (c->state == C_CALL) L->nbig--;
    else {
      big_give(c->buf, c->touched);
      c->buf = c->small;
    }
  }
  L->conns[c->id] = NULL;
  c->state = C_GONE;
  uv_poll_stop(&c->poll);
  uv_timer_stop(&c->timer);
  close(c->fd);
  uv_close((uv_handle_t *)&c->poll, conn_free);
  uv_close((uv_handle_t *)&c->timer, conn_free);
}

static void conn_restore(Conn *c);

/** What a connection is given back with (onHandBack's third argument). */
enum { HB_CLOSED, HB_UNSERVED, HB_FAILED, HB_ANSWER };

static void set_num(napi_env env, napi_value o, const char *name, double v) {
  napi_value x;
  napi_create_double(env, v, &x);
  napi_set_named_property(env, o, name, x);
}

/**
 * onHandBack(id, bytes | null, what, detail): the connection is JavaScript's again, with the bytes
 * read and not served (null: it closed). `what` says how the request at their start stands:
 * HB_UNSERVED, nothing of it went upstream (or the backend refused its stream unprocessed): serve
 * it as if it had just arrived; HB_FAILED, its call failed (detail: { grpcStatus, message, rst,
 * deadline, lost }): answer that failure, do not send it again; HB_ANSWER, its call was answered
 * with an answer that is not kept (detail: the gRPC message, prefix included): answer that.
 */
static void hand_back(Conn *c, int what) {
  napi_handle_scope scope;
  napi_value fn, recv, argv[4], result;
  napi_open_handle_scope(L->env, &scope);
  napi_get_reference_value(L->env, L->on_hand_back, &fn);
  napi_get_global(L->env, &recv);
  napi_create_int32(L->env, c->id, &argv[0]);
  void *data;
  if (what == HB_CLOSED) napi_get_null(L->env, &argv[1]);
  else {
    conn_restore(c);
    napi_create_buffer_copy(L->env, c->have, c->buf, &data, &argv[1]);
  }
  napi_create_int32(L->env, what, &argv[2]);
  napi_get_undefined(L->env, &argv[3]);
  if (what == HB_FAILED) {
    napi_create_object(L->env, &argv[3]);
    set_num(L->env, argv[3], "grpcStatus", c->grpc_status);
    set_num(L->env, argv[3], "rst", c->rst);
    napi_value b;
    napi_get_boolean(L->env, c->timed_out, &b);
    napi_set_named_property(L->env, argv[3], "deadline", b);
    napi_get_boolean(L->env, c->lost, &b);
    napi_set_named_property(L->env, argv[3], "lost", b);
    napi_value m;
    napi_create_string_latin1(L->env, c->grpc_message, c->grpc_message_len, &m);
    napi_set_named_property(L->env, argv[3], "message", m);
  } else if (what == HB_ANSWER) {
    napi_create_buffer_copy(L->env, c->answer_len, c->answer, &data, &argv[3]);
  } else if (what == HB_UNSERVED && c->head_at > 0) {
    napi_create_double(L->env, c->head_at, &argv[3]); // the head's start, for the bounds JavaScript goes on with
  }
  L->handed_back++;
  conn_release(c);
  napi_make_callback(L->env, L->ctx, recv, fn, 4, argv, &result);
  napi_close_handle_scope(L->env, scope);
}

// ---- the upstream connection
static void up_flush(Up *u);
static void on_up(uv_poll_t *p, int status, int events);
static void on_client(uv_poll_t *p, int status, int events);
static void on_deadline(uv_timer_t *t);

/**
 * Queues n bytes at p by reference. A full queue is flushed first, which reuses the arena and the
 * frame headers: a caller that queues bytes of either makes room beforehand (on_send, send_data),
 * so that no flush comes between writing them and queueing them.
 */
static void up_queue(Up *u, const void *p, size_t n) {
  if (n == 0) return;
  if (u->niov == MAX_IOV) up_flush(u);
  u->iov[u->niov].iov_base = (void *)p;
  u->iov[u->niov].iov_len = n;
  u->niov++;
  u->queued += n;
}

/** This turn's writes to the socket; what it does not take is copied and written when it can (the rare case). */
static void up_flush(Up *u) {
  if (u->niov <= 0 || u->niov > MAX_IOV) return;
  size_t want = 0;
  for (int i = 0; i < u->niov; i++) want += u->iov[i].iov_len;
  ssize_t n = u->pending_len > u->pending_off ? 0 : writev(u->fd, u->iov, u->niov);
  if (n < 0 && errno != EAGAIN) { u->failed = true; n = 0; }
  if (n < 0) n = 0;
  if ((size_t)n < want) {
    size_t rest = want - (size_t)n, at = 0;
    u->lane->copied_up += rest;
    uint8_t *p = malloc(u->pending_len - u->pending_off + rest);
    memcpy(p, u->pending + u->pending_off, u->pending_len - u->pending_off);
    at = u->pending_len - u->pending_off;
    size_t skip = (size_t)n;
    for (int i = 0; i < u->niov; i++) {
      size_t l = u->iov[i].iov_len;
      if (skip >= l) { skip -= l; continue; }
      memcpy(p + at, (uint8_t *)u->iov[i].iov_base + skip, l - skip);
      at += l - skip;
      skip = 0;
    }
    free(u->pending);
    u->pending = p;
    u->pending_len = at;
    u->pending_off = 0;
    if (!u->writable_wait) {
      u->writable_wait = true;
      uv_poll_start(u->poll, UV_READABLE | UV_WRITABLE, on_up);
    }
  }
  u->niov = 0;
  u->queued = 0;
  u->nhd = 0;
  u->arena_at = 0;
}

static nghttp2_ssize on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud) {
  (void)s; (void)flags;
  Up *u = ud;
  // nghttp2's buffer is reused after this returns: a frame is copied into the turn's arena, or
  // written at once with what is queued before it.
  if (len <= 16384) {
    if (u->arena_at + len > sizeof(u->arena) || u->niov == MAX_IOV) up_flush(u);
    memcpy(u->arena + u->arena_at, data, len);
    up_queue(u, u->arena + u->arena_at, len);
    u->arena_at += len;
    return (nghttp2_ssize)len;
  }
  up_queue(u, data, len);
  up_flush(u);
  return (nghttp2_ssize)len;
}

/**
 * How much of the message the bytes read so far make, from its start: every kept segment, and the
 * body's ranges up to the first that is not all read (a plan's ranges follow the body's order).
 */
static size_t message_ready(const Conn *c) {
  // A base64 string's bytes are those decode_early has decoded (never its last characters: the
  // message is not whole before the body is, and plan_takes has found it the plan's).
  size_t body = c->have - c->head->len, decoded = 3 * c->early_groups, at = 0;
  for (int i = 0; i < c->plan->nsegs; i++) {
    const Seg *g = &c->plan->segs[i];
    size_t got = g->decoded ? decoded : body;
    if (g->bytes == NULL && got < g->body_at + g->len) return at + (got > g->body_at ? got - g->body_at : 0);
    at += g->len;
  }
  return at;
}

static nghttp2_ssize read_body(nghttp2_session *s, int32_t stream, uint8_t *buf, size_t len, uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s; (void)stream; (void)buf; (void)ud;
  Conn *c = src->ptr;
  // The socket holds bytes it did not take (copied by up_flush): no more DATA until it has taken
  // them (on_up resumes), rather than copying every message behind them too.
  if (c->up->pending_len > c->up->pending_off) {
    c->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t left = c->plan->message_len - c->sent;
  // A body still arriving: the message's bytes read so far, a frame's worth at least.
  size_t ready = c->streaming ? message_ready(c) - c->sent : left;
  if (ready < left && ready < len && ready < EARLY_FRAME) {
    c->starved = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  if (ready < len) len = ready;
  size_t n = len < left ? len : left;
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  if (n == left) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (nghttp2_ssize)n;
}

static int send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t len, nghttp2_data_source *src, void *ud) {
  (void)s; (void)f;
  Up *u = ud;
  Conn *c = src->ptr;
  // Room for the header and every segment the frame may span.
  if (u->nhd == MAX_IOV || u->niov + 1 + MAX_SEGS > MAX_IOV) up_flush(u);
  uint8_t *hd = u->hd + 9 * u->nhd++;
  memcpy(hd, framehd, 9);
  up_queue(u, hd, 9);
  // The message's bytes [sent, sent + len), segment by segment.
  size_t at = c->sent, end = at + len, pos = 0;
  const uint8_t *body = c->buf + c->head->len;
  for (int i = 0; i < c->plan->nsegs && at < end; i++) {
    const Seg *g = &c->plan->segs[i];
    if (at < pos + g->len) {
      size_t from = at - pos, n = g->len - from < end - at ? g->len - from : end - at;
      up_queue(u, (g->bytes != NULL ? g->bytes : g->decoded ? body + c->plan->header_len + g->body_at : body + g->body_at) + from, n);
      at += n;
    }
    pos += g->len;
  }
  c->sent = end;
  if (end == c->plan->message_len) c->sent_ns = now_ns();
  // Written before the turn's end once a megabyte waits, so that a socket that takes less is seen
  // (read_body defers) before more is framed.
  if (u->queued >= FLUSH_BYTES) up_flush(u);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
  (void)flags; (void)ud;
  Conn *c = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (c == NULL) return 0;
  c->headers_seen = true;
  if (namelen == 7 && memcmp(name, ":status", 7) == 0) c->status_ok = valuelen == 3 && memcmp(value, "200", 3) == 0;
  else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    int32_t v = 0;
    for (size_t i = 0; i < valuelen && i < 9; i++) v = value[i] >= '0' && value[i] <= '9' ? v * 10 + (value[i] - '0') : 1 << 30;
    c->grpc_status = valuelen == 0 ? 1 << 30 : v;
  } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
    c->grpc_message_len = valuelen < sizeof(c->grpc_message) ? valuelen : sizeof(c->grpc_message);
    memcpy(c->grpc_message, value, c->grpc_message_len);
  }
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t stream, const uint8_t *data, size_t len, void *ud) {
  (void)flags; (void)ud;
  Conn *c = nghttp2_session_get_stream_user_data(s, stream);
  if (c == NULL) return 0;
  if (c->answer_len == 0) c->first_ns = now_ns();
  if (c->answer_len + len > sizeof(c->answer)) { c->answer_ok = false; return 0; }
  memcpy(c->answer + c->answer_len, data, len);
  c->answer_len += len;
  return 0;
}

static void conn_read(Conn *c);

/**
 * The Server-Timing line of the answer (telemetry/server-timing.ts's hops, in its order and
 * format): ingress_read to the body's end, decode to the call (the body read as its plan: a base64
 * string decoded), upstream_send to the last byte handed to the socket, triton to the answer's
 * first byte, upstream_receive to its last, encode to its body ready (a JSON answer printed), total
 * to now.
 */
static void server_timing(Conn *c) {
  double now = now_ns(), sent = c->sent_ns > 0 ? c->sent_ns : c->call_ns, first = c->first_ns > 0 ? c->first_ns : c->end_ns;
  // The decode: from the body whole to its call, or for an early call's base64 string to its last part decoded (as the records say).
  double decode = c->decoded_ns > 0 ? c->decoded_ns - c->body_ns : c->call_ns > c->body_ns ? c->call_ns - c->body_ns : 0;
  int n = snprintf(c->timing, sizeof(c->timing),
    "Server-Timing: ingress_read;dur=%.3f, decode;dur=%.3f, upstream_send;dur=%.3f, triton;dur=%.3f, upstream_receive;dur=%.3f, "
    "encode;dur=%.3f, total;dur=%.3f\r\n", (c->body_ns - c->started_ns) / 1e6, decode / 1e6, (sent - c->call_ns) / 1e6,
    (first - sent) / 1e6, (c->end_ns - first) / 1e6, (c->encoded_ns - c->end_ns) / 1e6, (now - c->started_ns) / 1e6);
  c->timing_len = n > 0 && (size_t)n < sizeof(c->timing) ? (size_t)n : 0;
}

/** The answer, whole: matched against the kept answers of its head and written, or the connection given back. */
static void conn_answer(Conn *c) {
  const uint8_t *m = c->answer + 5;
  size_t mlen = c->answer_len >= 5 ? c->answer_len - 5 : 0;
  uv_timer_stop(&c->timer);
  bool whole = !c->streaming;
  c->streaming = c->starved = false;
  if (c->hung_up) { hand_back(c, HB_CLOSED); return; }
  // Its body past the request's bound: JavaScript reads on and answers as its own bound says.
  if (c->body_late) { hand_back(c, HB_UNSERVED); return; }
  // A base64 body that turned out not to be its plan's: its message was never whole; served anew.
  if (c->not_plan) { hand_back(c, HB_UNSERVED); return; }
  // A stream the backend refused (REFUSED_STREAM, a GOAWAY past it) was not processed: served anew.
  if (c->rst == 7 && !c->headers_seen && !c->timed_out) { hand_back(c, HB_UNSERVED); return; }
  // A failure (a body still arriving is read on by JavaScript, which answers it as failed).
  if (c->timed_out || c->lost || c->rst != 0 || !c->status_ok || c->grpc_status != 0) { hand_back(c, HB_FAILED); return; }
  // An answer before the whole message was sent is no backend's that keeps to gRPC: the connection closes.
  if (!whole) { hand_back(c, HB_CLOSED); return; }
  bool ok = c->answer_ok && c->answer_len >= 5 && c->answer[0] == 0
    && ((size_t)c->answer[1] << 24 | (size_t)c->answer[2] << 16 | (size_t)c->answer[3] << 8 | c->answer[4]) == mlen;
  const Answer *a = NULL;
  if (ok) {
    for (a = c->head->answers; a != NULL; a = a->next) {
      if (a->plan != c->plan) continue;
      size_t at = 0;
      int i = 0;
      for (; i < a->nmatch; i++) {
        const Seg *g = &a->match[i];
        if (at + g->len > mlen) break;
        if (g->bytes != NULL && memcmp(m + at, g->bytes, g->len) != 0) break;
        at += g->len;
      }
      if (i == a->nmatch && at == mlen) break;
    }
  }
  if (a == NULL || L->draining) {
    // JavaScript answers it (and may keep its answer; in a drain, with Connection: close).
    L->failed++;
    hand_back(c, HB_ANSWER);
    return;
  }
  refresh_date();
  // A JSON answer's body, printed: its texts, and each run's FP32 values between them.
  char length[24];
  size_t body_len = 0;
  if (a->json) {
    if (c->json_cap < a->json_max + TD_SLACK) {
      free(c->json);
      c->json = malloc(c->json_cap = a->json_max + TD_SLACK);
    }
    char *o = c->json;
    size_t at = 0;
    int t = 0;
    for (int i = 0; i < a->nmatch; i++) {
      const Seg *g = &a->match[i];
      if (g->bytes == NULL) {
        int kind = a->kinds[t];
        memcpy(o, a->texts[t], a->text_len[t]);
        o += a->text_len[t++];
        o = kind == K_FP32 ? td_print_fp32(m + at, g->len / 4, o) : print_ints(m + at, g->len / KIND_SIZE[kind], kind, o);
      }
      at += g->len;
    }
    memcpy(o, a->texts[t], a->text_len[t]);
    body_len = (size_t)(o + a->text_len[t] - c->json);
    c->encoded_ns = now_ns();
  } else c->encoded_ns = c->end_ns;
  // The head, with what goes into it at its places (the Server-Timing line, the Content-Length's digits), in order.
  struct { size_t at; const void *p; size_t len; } put[2];
  int nput = 0;
  if (a->timing_at != SIZE_MAX) {
    server_timing(c);
    put[nput++] = (typeof(put[0])){ a->timing_at, c->timing, c->timing_len };
  }
  if (a->json) {
    int digits = snprintf(length, sizeof(length), "%zu", body_len);
    put[nput++] = (typeof(put[0])){ a->length_at, length, (size_t)digits };
    if (nput == 2 && put[0].at > put[1].at) { typeof(put[0]) x = put[0]; put[0] = put[1]; put[1] = x; }
  }
  struct iovec iov[MAX_SEGS + 5];
  int n = 0;
  size_t want = a->head_len, from = 0;
  for (int i = 0; i < nput; i++) {
    iov[n++] = (struct iovec){ a->head + from, put[i].at - from };
    iov[n++] = (struct iovec){ (void *)put[i].p, put[i].len };
    want += put[i].len;
    from = put[i].at;
  }
  iov[n++] = (struct iovec){ a->head + from, a->head_len - from };
  if (a->json) {
    iov[n++] = (struct iovec){ c->json, body_len };
    want += body_len;
  } else {
    size_t at = 0;
    for (int i = 0; i < a->nmatch; i++) {
      const Seg *g = &a->match[i];
      if (g->bytes == NULL) { iov[n++] = (struct iovec){ (void *)(m + at), g->len }; want += g->len; }
      at += g->len;
    }
  }
  ssize_t w = writev(c->fd, iov, n);
  c->written_ns = now_ns();
  L->served++;
  record(c, a->json ? (double)body_len : -1);
  // The request's bytes leave the read buffer; what came after them is the next request's.
  size_t used = c->head->len + c->head->body_len;
  c->large_last = used > SMALL_BUF - 16384;
  c->decoded_groups = 0;
  memmove(c->buf, c->buf + used, c->have - used);
  c->have -= used;
  c->head_at = 0;
  c->started_ns = c->have > 0 ? now_ns() : 0; // a pipelined head is there already
  c->state = C_HEAD;
  if (w < 0 && errno != EAGAIN) { hand_back(c, HB_CLOSED); return; }
  if ((size_t)(w < 0 ? 0 : w) < want) {
    // Kept for POLLOUT (copied: the kept head may change its date meanwhile).
    size_t skip = w < 0 ? 0 : (size_t)w, o = 0;
    c->out = malloc(want - skip);
    for (int i = 0; i < n; i++) {
      size_t l = iov[i].iov_len;
      if (skip >= l) { skip -= l; continue; }
      memcpy(c->out + o, (uint8_t *)iov[i].iov_base + skip, l - skip);
      o += l - skip;
      skip = 0;
    }
    c->out_len = o;
    c->out_off = 0;
    c->state = C_WRITE; // its place held until the answer is out, as JavaScript holds a request's
    return;
  }
  leave(c);
  conn_shrink(c);
  conn_read(c);
}

static int on_close(nghttp2_session *s, int32_t stream, uint32_t error, void *ud) {
  (void)ud;
  Conn *c = nghttp2_session_get_stream_user_data(s, stream);
  if (c == NULL || c->state != C_CALL) return 0;
  c->stream = 0;
  c->rst = error;
  c->end_ns = now_ns();
  conn_answer(c);
  return 0;
}

static void poll_closed(uv_handle_t *h) {
  free(h);
}

/** The connection's descriptor and poll go (the poll's handle is freed once libuv has closed it). */
static void up_close(Up *u) {
  if (u->poll != NULL) {
    uv_poll_stop(u->poll);
    uv_close((uv_handle_t *)u->poll, poll_closed);
    u->poll = NULL;
  }
  if (u->fd >= 0) close(u->fd);
  u->fd = -1;
  if (u->session != NULL) nghttp2_session_del(u->session);
  u->session = NULL;
  free(u->pending);
  u->pending = NULL;
  u->pending_len = u->pending_off = 0;
  u->connecting = false;
}

/**
 * The backend's connection is lost (or could not be made): every call on it fails (JavaScript
 * answers as its own call would), and requests go to JavaScript until a new one is up — tried
 * again by the first request a second later.
 */
static void up_fail(Up *u) {
  if (u->failed && u->session == NULL && !u->connecting) return;
  u->failed = true;
  u->retry_at = uv_now(u->loop) + 1000;
  for (int i = 0; i < MAX_CONNS; i++) {
    Conn *c = L->conns[i];
    if (c == NULL || c->state != C_CALL || c->up != u) continue;
    c->lost = true;
    c->grpc_status = 14;
    conn_answer(c);
  }
  up_close(u);
}

/** Begins a connection to the backend (non-blocking): the session starts once it is made (on_up). */
static void up_start(Up *u) {
  up_close(u);
  u->failed = false;
  u->fd = socket(u->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (u->fd >= 0 && u->addr.ss_family == AF_INET) setsockopt(u->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A Unix socket's writer waits while what it sent and the reader has not read exceeds its send
  // buffer (unix(7); no autotuning as TCP's): at the default ~208 KiB a 600 KB message was several
  // waits and wake-ups, and the hop cost twice its CPU over TCP's (docs/architecture.md, "Unix
  // socket"). SO_SNDBUFFORCE passes net.core.wmem_max where the process may; else it caps.
  if (u->fd >= 0 && u->addr.ss_family == AF_UNIX) {
    int bytes = UNIX_SNDBUF;
    if (setsockopt(u->fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) != 0) setsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    socklen_t len = sizeof(bytes);
    if (getsockopt(u->fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len) == 0) u->sndbuf = bytes;
  }
  if (u->fd < 0 || (connect(u->fd, (struct sockaddr *)&u->addr, u->addrlen) != 0 && errno != EINPROGRESS && errno != EAGAIN)) {
    u->failed = true;
    u->retry_at = uv_now(u->loop) + 1000;
    if (u->fd >= 0) close(u->fd);
    u->fd = -1;
    return;
  }
  u->connecting = true;
  u->poll = malloc(sizeof(uv_poll_t));
  u->poll->data = u;
  uv_poll_init_socket(u->loop, u->poll, u->fd);
  uv_poll_start(u->poll, UV_WRITABLE, on_up);
  uv_unref((uv_handle_t *)u->poll); // the backend's connection alone keeps no process alive (close() ends it)
}

static void up_turn(Up *u);

/** After an iteration's polling: each backend connection's calls submitted in it go out together. */
static void on_check(uv_check_t *h) {
  // A lane whose external was collected without close() — its environment torn down at exit, the
  // server never closed — takes no part in the loop's last turns: nothing of it may call JavaScript.
  // Its memory stays (its check handle holds it), so its handles' callbacks can still read this.
  if (((Lane *)h->data)->closed) { uv_check_stop(h); return; }
  Lane *saved = L;
  L = h->data;
  for (int i = 0; i < L->nups; i++) {
    Up *u = L->ups[i];
    if (!u->dirty) continue;
    u->dirty = false;
    up_turn(u);
  }
  L = saved;
}

/** The connection is made: its HTTP/2 session begins (SETTINGS, the connection's window). */
static void up_session(Up *u) {
  u->connecting = false;
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_send_callback2(cb, on_send);
  nghttp2_session_callbacks_set_send_data_callback(cb, send_data);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_session_client_new(&u->session, cb, u);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[2] = { { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 }, { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4 << 20 } };
  nghttp2_submit_settings(u->session, 0, iv, 2);
  nghttp2_session_set_local_window_size(u->session, 0, 0, 16 << 20);
  uv_poll_start(u->poll, UV_READABLE, on_up);
}

static void up_turn(Up *u) {
  if (u->session == NULL || in_recv) return;
  if (nghttp2_session_send(u->session) != 0) u->failed = true;
  up_flush(u);
  if (u->failed) up_fail(u);
}

static void on_up_in(uv_poll_t *p, int status, int events);

static void on_up(uv_poll_t *p, int status, int events) {
  if (((Up *)p->data)->lane->closed) { uv_poll_stop(p); return; } // its environment is going (see on_check)
  Lane *saved = L;
  L = ((Up *)p->data)->lane;
  on_up_in(p, status, events);
  L = saved;
}

static void on_up_in(uv_poll_t *p, int status, int events) {
  Up *u = p->data;
  if (status < 0) { up_fail(u); return; }
  if (u->connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (!(events & UV_WRITABLE)) return;
    if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) { up_fail(u); return; }
    up_session(u);
    up_turn(u);
    return;
  }
  if (events & UV_WRITABLE) {
    while (u->pending_off < u->pending_len) {
      ssize_t n = write(u->fd, u->pending + u->pending_off, u->pending_len - u->pending_off);
      if (n <= 0) break;
      u->pending_off += (size_t)n;
    }
    if (u->pending_off == u->pending_len) {
      free(u->pending);
      u->pending = NULL;
      u->pending_len = u->pending_off = 0;
      u->writable_wait = false;
      uv_poll_start(u->poll, UV_READABLE, on_up);
      // The calls whose DATA waited go on (up_turn, below, frames it).
      for (int i = 0; i < MAX_CONNS; i++) {
        Conn *c = L->conns[i];
        if (c == NULL || c->up != u || !c->deferred) continue;
        c->deferred = false;
        if (c->state == C_CALL) nghttp2_session_resume_data(u->session, c->stream);
      }
    }
  }
  if (events & UV_READABLE) {
    uint8_t buf[64 * 1024];
    for (;;) {
      ssize_t n = read(u->fd, buf, sizeof(buf));
      if (n == 0 || (n < 0 && errno != EAGAIN)) { up_fail(u); return; }
      if (n < 0) break;
      in_recv = true;
      nghttp2_ssize r = nghttp2_session_mem_recv2(u->session, buf, (size_t)n);
      in_recv = false;
      if (r < 0) { up_fail(u); return; }
      if ((size_t)n < sizeof(buf)) break;
    }
  }
  for (int i = 0; i < L->nups; i++) up_turn(L->ups[i]);
}

// ---- the client's connection
/** The best base64 kernel of this CPU (base64-kernels.h), or NULL: the scalar loop below alone. */
static Kernel kernel;

/** A character's 6-bit value in either alphabet (RFC 4648 §4, §5), or 0xff. */
static uint8_t b64_value(uint8_t ch) {
  if (ch >= 'A' && ch <= 'Z') return (uint8_t)(ch - 'A');
  if (ch >= 'a' && ch <= 'z') return (uint8_t)(ch - 'a' + 26);
  if (ch >= '0' && ch <= '9') return (uint8_t)(ch - '0' + 52);
  if (ch == '+' || ch == '-') return 62;
  if (ch == '/' || ch == '_') return 63;
  return 0xff;
}

/**
 * The base64 text t[0, n) decoded where it lies (bytes t[0, …)): the bytes decoded, or SIZE_MAX
 * when the text is not clean base64 — a character of neither alphabet, padding ('=', at most two)
 * anywhere but at the end, or a final group of one character. What it accepts, the gateway's
 * staging decodes to the same bytes (decode/base64/base64-staging.ts: both alphabets, padding at
 * the very end); anything else goes back to JavaScript, which answers as it would. Decoding in
 * place writes only behind what was read (three bytes for four characters; the kernels load each
 * step's characters before they store its bytes), and spares the CPU a second buffer's cache
 * lines: 0.02–0.03 ms a 600 KB request (bench/RESULTS.md). `*groups`: the groups of four
 * characters whose bytes were written, which b64_restore turns back into text.
 */
static size_t b64_decode(uint8_t *t, size_t n, size_t *groups) {
  for (int pad = 0; pad < 2 && n > 0 && t[n - 1] == '='; pad++) n--;
  // *groups on entry: those decode_early did (their bytes at t[0, 3 * groups)).
  size_t i = 4 * *groups, o = 3 * *groups;
  int url = 0;
  if (kernel != NULL && n - i >= 64) { size_t d = kernel(t + i, (n - i) & ~(size_t)63, t + o, &url); i += d; o += d / 4 * 3; }
  *groups = i / 4;
  uint32_t acc = 0;
  int k = 0;
  for (; i < n; i++) {
    uint8_t v = b64_value(t[i]);
    if (v == 0xff) return SIZE_MAX;
    acc = acc << 6 | v;
    if (++k == 4) { t[o++] = (uint8_t)(acc >> 16); t[o++] = (uint8_t)(acc >> 8); t[o++] = (uint8_t)acc; acc = 0; k = 0; ++*groups; }
  }
  if (k == 1) return SIZE_MAX;
  if (k == 2) t[o++] = (uint8_t)(acc >> 4);
  if (k == 3) { t[o++] = (uint8_t)(acc >> 10); t[o++] = (uint8_t)(acc >> 2); }
  return o;
}

/**
 * The text of `groups` groups decoded in place by b64_decode, written back over their bytes (last
 * group first: each group's text lies at or after its bytes, over bytes of groups already done).
 * A final partial group's bytes lie inside that text, and its characters were never written over.
 * The text is the standard alphabet's: a '-' or '_' sent comes back as '+' or '/', which every
 * reader of the gateway's takes as the same value (both alphabets, mixed, as Node reads them).
 */
static void b64_restore(uint8_t *t, size_t groups) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t j = groups; j-- > 0;) {
    uint32_t v = (uint32_t)t[3 * j] << 16 | (uint32_t)t[3 * j + 1] << 8 | t[3 * j + 2];
    t[4 * j] = (uint8_t)A[v >> 18];
    t[4 * j + 1] = (uint8_t)A[v >> 12 & 63];
    t[4 * j + 2] = (uint8_t)A[v >> 6 & 63];
    t[4 * j + 3] = (uint8_t)A[v & 63];
  }
}

/** A request whose string was decoded in place has its text back (before its bytes go to JavaScript). */
static void conn_restore(Conn *c) {
  if (c->early_groups > 0) {
    b64_restore(c->buf + c->head->len + c->early->header_len, c->early_groups);
    c->early_groups = 0;
  }
  if (c->decoded_groups == 0) return;
  b64_restore(c->buf + c->head->len + c->plan->header_len, c->decoded_groups);
  c->decoded_groups = 0;
}

/**
 * Whether `body` (of the head's length) is the plan's: its header, and for a base64 plan its
 * suffix, with the string between decoded in place to the plan's length (if not, its text is back).
 */
static bool plan_takes(Conn *c, const BodyPlan *p, uint8_t *body, size_t len) {
  // What decode_early did is this plan's, or is undone for any other.
  size_t groups = p == c->early ? c->early_groups : 0;
  if (groups == 0) conn_restore(c);
  c->early_groups = 0;
  bool header = p->header_len <= len && memcmp(p->header, body, p->header_len) == 0;
  if (header && !p->base64) return true;
  if (header && p->header_len + p->suffix_len + 64 <= len && memcmp(body + len - p->suffix_len, p->suffix, p->suffix_len) == 0
    && b64_decode(body + p->header_len, len - p->header_len - p->suffix_len, &groups) == p->decoded_len) {
    c->decoded_groups = groups;
    return true;
  }
  b64_restore(body + p->header_len, groups);
  return false;
}

/**
 * A body under way whose head's first plan is a base64 one: the string's characters read so far
 * decoded where they lie, 64 at a time, while the read has left them in the cache (a 4 MiB
 * tensor's 5.6 MB of text comes in many reads, and decoding it whole afterwards reads it back from
 * memory). Only while the body's text is that plan's header, and clean base64; the string's last
 * 128 characters (padding, the end) are left to the decode once the body is whole, which goes on
 * from here (plan_takes).
 */
static void decode_early(Conn *c) {
  if (c->early == NULL) c->early = c->head->plans; // a plan kept meanwhile goes first in the list: this one stays
  const BodyPlan *p = c->early;
  if (p == NULL || !p->base64 || kernel == NULL || c->early_off) return;
  size_t start = c->head->len + p->header_len, end = c->head->len + c->head->body_len - p->suffix_len;
  if (c->have <= start || end < start + 4096) return;
  if (c->early_groups == 0 && memcmp(c->buf + c->head->len, p->header, p->header_len) != 0) { c->early_off = true; return; }
  size_t upto = (c->have < end - 128 ? c->have : end - 128) - start, at = 4 * c->early_groups;
  if (upto < at + 16384) return;
  size_t m = (upto - at) & ~(size_t)63;
  int url = 0;
  size_t d = kernel(c->buf + start + at, m, c->buf + start + at / 4 * 3, &url);
  c->early_groups += d / 4;
  L->decoded_early += d;
  if (d < m) c->early_off = true;
}

static const Head *find_head(const uint8_t *p, size_t n) {
  uint64_t h = hash_bytes(p, n);
  for (const Head *k = L->heads; k != NULL; k = k->next)
    if (k->hash == h && k->len == n && memcmp(k->bytes, p, n) == 0) return k;
  return NULL;
}

static bool early_call(Conn *c);
static bool call_begin(Conn *c, const BodyPlan *plan);
static void call_bound(Conn *c);

/** Serves what the read buffer holds: the next head, its body once whole (or once its plan is known, early_call), its call. */
static void conn_serve(Conn *c) {
  while (c->state == C_HEAD || c->state == C_BODY) {
    if (c->state == C_HEAD) {
      if (c->have == 0) return;
      size_t look = c->have < MAX_HEAD ? c->have : MAX_HEAD;
      const uint8_t *end = memmem(c->buf, look, "\r\n\r\n", 4);
      if (end == NULL) {
        if (c->have >= MAX_HEAD) hand_back(c, HB_UNSERVED);
        return;
      }
      c->head = find_head(c->buf, (size_t)(end + 4 - c->buf));
      if (c->head == NULL || !admit(c)) { hand_back(c, HB_UNSERVED); return; }
      if (c->started_ns == 0) c->started_ns = now_ns();
      c->early = NULL;
      c->early_groups = 0;
      c->early_off = false;
      c->state = C_BODY;
      // As the fast path does (fast.ts begin): the interim answer once the head is read, body or not.
      // Between requests the socket holds nothing unsent (the last answer was out), so it takes these bytes.
      if (c->head->expect && write(c->fd, CONTINUE, sizeof CONTINUE - 1) != (ssize_t)(sizeof CONTINUE - 1)) { hand_back(c, HB_CLOSED); return; }
    }
    const Head *h = c->head;
    if (c->have < h->len + h->body_len) {
      decode_early(c);
      early_call(c);
      return;
    }
    uint8_t *body = c->buf + h->len;
    c->body_ns = now_ns();
    const BodyPlan *plan = h->plans;
    for (; plan != NULL; plan = plan->next)
      if (plan_takes(c, plan, body, h->body_len)) break;
    if (plan == NULL) { hand_back(c, HB_UNSERVED); return; }
    call_begin(c, plan);
    return;
  }
}

/**
 * The request's call, on its plan: false (and the connection given back) when it cannot be made
 * now. Its DATA goes out as nghttp2 asks for it (read_body), the message's bytes by reference.
 */
static bool call_begin(Conn *c, const BodyPlan *plan) {
  const Head *h = c->head;
  c->plan = plan;
  c->up = L->ups[h->upstream];
  // A backend the set would not call (known down by its health checks, or ejected): JavaScript answers as its picking does.
  if (c->up->gate != NULL && c->up->gate[0] == 0) { hand_back(c, HB_UNSERVED); return false; }
  if (c->up->session == NULL) {
    // Not connected: JavaScript serves this one; a failed connection is tried again after its pause.
    if (c->up->failed && uv_now(c->up->loop) >= c->up->retry_at) up_start(c->up);
    hand_back(c, HB_UNSERVED);
    return false;
  }
  c->sent = 0;
  c->answer_len = 0;
  c->answer_ok = true;
  c->status_ok = c->headers_seen = c->hung_up = c->timed_out = c->lost = false;
  c->starved = c->body_late = c->not_plan = false;
  c->grpc_status = -1;
  c->grpc_message_len = 0;
  c->rst = 0;
  c->call_ns = now_ns();
  c->sent_ns = c->first_ns = c->end_ns = c->decoded_ns = 0;
  c->state = C_CALL;
  call_bound(c);
  // The read buffer holds the body until the call has sent it: it is read on while it arrives
  // (into room it already has), else only a hang-up is watched.
  uv_poll_start(&c->poll, c->streaming ? UV_READABLE | UV_DISCONNECT : UV_DISCONNECT, on_client);
  nghttp2_data_provider2 dp = { .source = { .ptr = c }, .read_callback = read_body };
  Up *u = c->up;
  int32_t id = nghttp2_submit_request2(u->session, NULL, u->nva, u->nnv, &dp, c);
  if (id < 0) { uv_timer_stop(&c->timer); c->state = C_HEAD; c->streaming = false; hand_back(c, HB_UNSERVED); return false; }
  c->stream = id;
  // Sent at the end of this loop iteration's polling (on_check), with every other call read in it:
  // one writev for a turn's calls, as the JavaScript client gathers them.
  u->dirty = true;
  return true;
}

/**
 * A body under way whose plan its first bytes already tell (a binary or raw body: its header, the
 * rest sent as it lies; a base64 one: its header, and a first part of its string decoded clean by
 * decode_early): the call begins now and its DATA follows the reads (the decode), so that the
 * backend has the message about when the client has sent it (as Triton's HTTP endpoint reads a
 * body as it comes), not one send of the whole later. The plans are tried in order, as for a whole
 * body; one whose header is not all read yet but so far agrees, or a base64 one with nothing
 * decoded yet, leaves the choice to later reads. A base64 body's message is never whole before
 * the body is and call_read has found it the plan's (message_ready). The read buffer takes the
 * whole request first, so that it does not move while DATA frames point into it. False: not begun
 * (the body is read on).
 */
static bool early_call(Conn *c) {
  const Head *h = c->head;
  size_t got = c->have - h->len;
  if (h->body_len - got < EARLY_MIN) return false;
  const uint8_t *body = c->buf + h->len;
  const BodyPlan *plan = h->plans;
  for (; plan != NULL; plan = plan->next) {
    size_t n = plan->header_len < got ? plan->header_len : got;
    bool agrees = memcmp(plan->header, body, n) == 0;
    if (agrees && n < plan->header_len) return false;
    // A base64 plan's call begins once decode_early has decoded a first part of its string, clean.
    if (agrees && plan->base64 && (plan != c->early || c->early_groups == 0 || c->early_off)) return false;
    if (agrees) break;
  }
  // A body decode_early took for a base64 plan is not another plan's (its text is changed).
  if (plan == NULL || (!plan->base64 && c->early_groups > 0)) return false;
  if (c->cap < h->len + h->body_len && (c->buf != c->small || !conn_grow(c))) return false;
  if (c->head_at == 0) c->head_at = epoch_ms();
  c->streaming = true;
  if (!call_begin(c, plan)) return true; // given back
  L->early_calls++;
  return true;
}

/**
 * The call's timer: its deadline (init's callTimeoutMs) from its start, and while its body is
 * still arriving, the request's bound from the head's first byte if that is sooner.
 */
static void call_bound(Conn *c) {
  double left = (double)L->call_timeout_ms - (now_ns() - c->call_ns) / 1e6;
  if (c->streaming && L->request_timeout_ms > 0) {
    double body = c->head_at + (double)L->request_timeout_ms - epoch_ms();
    if (body < left) left = body;
  }
  uv_timer_start(&c->timer, on_deadline, left < 1 ? 1 : (uint64_t)left, 0);
}

/** The call's deadline (init's callTimeoutMs): the stream is cancelled, and the request given back failed. */
static void on_deadline_in(uv_timer_t *t);

static void on_deadline(uv_timer_t *t) {
  if (((Conn *)t->data)->lane->closed) { uv_timer_stop(t); return; } // its environment is going (see on_check)
  Lane *saved = L;
  L = ((Conn *)t->data)->lane;
  on_deadline_in(t);
  L = saved;
}

static void on_deadline_in(uv_timer_t *t) {
  Conn *c = t->data;
  // Idle past keep-alive: closed, as the fast path closes it. A head or body past its bound:
  // JavaScript's, with when the head began (it answers as node:http's bounds do).
  if (c->state == C_HEAD && c->have == 0) { hand_back(c, HB_CLOSED); return; }
  if (c->state == C_HEAD || c->state == C_BODY) { hand_back(c, HB_UNSERVED); return; }
  if (c->state != C_CALL || c->timed_out || c->body_late || c->not_plan) return;
  if (c->streaming && L->request_timeout_ms > 0 && epoch_ms() >= c->head_at + (double)L->request_timeout_ms) c->body_late = true;
  else if (c->streaming && (now_ns() - c->call_ns) / 1e6 < (double)L->call_timeout_ms) { call_bound(c); return; }
  else {
    c->timed_out = true;
    c->grpc_status = 4;
  }
  nghttp2_submit_rst_stream(c->up->session, 0, c->stream, NGHTTP2_CANCEL);
  up_turn(c->up);
}

/** The bound that runs while the connection reads: idle between requests, a head's, a body's. */
static void conn_bound(Conn *c) {
  if (c->state == C_HEAD && c->have == 0) {
    if (L->keep_alive_timeout_ms > 0) uv_timer_start(&c->timer, on_deadline, L->keep_alive_timeout_ms, 0);
    else uv_timer_stop(&c->timer);
    return;
  }
  if (c->state != C_HEAD && c->state != C_BODY) return;
  if (c->head_at == 0) c->head_at = epoch_ms();
  uint64_t bound = c->state == C_HEAD ? L->headers_timeout_ms : L->request_timeout_ms;
  if (bound == 0) { uv_timer_stop(&c->timer); return; }
  double left = c->head_at + (double)bound - epoch_ms();
  uv_timer_start(&c->timer, on_deadline, left < 1 ? 1 : (uint64_t)left, 0);
}

static void conn_read(Conn *c) {
  if (L->draining) { hand_back(c, HB_UNSERVED); return; }
  uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, on_client);
  conn_serve(c);
  if (c->state == C_HEAD || c->state == C_BODY) conn_bound(c);
}

/** The call is cancelled (RST_STREAM) for the client's hang-up; it ends in on_close. */
static void call_cancel(Conn *c) {
  c->hung_up = true;
  nghttp2_submit_rst_stream(c->up->session, 0, c->stream, NGHTTP2_CANCEL);
  up_turn(c->up);
}

/**
 * A call begun before its body was whole (early_call) reads the rest of it, and no further (what
 * follows is read once its answer is out); its DATA goes on with what came.
 */
static void call_read(Conn *c) {
  size_t end = c->head->len + c->head->body_len;
  while (c->have < end) {
    ssize_t n = read(c->fd, c->buf + c->have, end - c->have);
    if (n == 0 || (n < 0 && errno != EAGAIN)) { call_cancel(c); return; }
    if (n < 0) break;
    c->have += (size_t)n;
    if (c->have > c->touched) c->touched = c->have;
  }
  if (c->plan->base64) decode_early(c);
  if (c->have == end) {
    // Whole: only a hang-up is watched from here on, and the deadline is the call's alone.
    c->streaming = false;
    c->body_ns = now_ns();
    uv_poll_start(&c->poll, UV_DISCONNECT, on_client);
    // A base64 body: the rest of its string decoded, and the whole checked as the plan's (its
    // suffix, clean base64, the decoded length); if not, its text is back, the call (its message
    // not whole) cancelled, and JavaScript serves the request as it came.
    if (c->plan->base64 && !plan_takes(c, c->plan, c->buf + c->head->len, c->head->body_len)) {
      uv_timer_stop(&c->timer);
      c->not_plan = true;
      nghttp2_submit_rst_stream(c->up->session, 0, c->stream, NGHTTP2_CANCEL);
      up_turn(c->up);
      return;
    }
    if (c->plan->base64) c->decoded_ns = now_ns();
    call_bound(c);
  }
  if (!c->starved) return;
  size_t ready = c->streaming ? message_ready(c) - c->sent : c->plan->message_len - c->sent;
  if (ready >= EARLY_FRAME || ready >= c->plan->message_len - c->sent) {
    c->starved = false;
    nghttp2_session_resume_data(c->up->session, c->stream);
    c->up->dirty = true; // framed and sent by on_check, with the turn's other calls
  }
}

static void on_client_in(uv_poll_t *p, int status, int events);

static void on_client(uv_poll_t *p, int status, int events) {
  if (((Conn *)p->data)->lane->closed) { uv_poll_stop(p); return; } // its environment is going (see on_check)
  Lane *saved = L;
  L = ((Conn *)p->data)->lane;
  on_client_in(p, status, events);
  L = saved;
}

static void on_client_in(uv_poll_t *p, int status, int events) {
  Conn *c = p->data;
  if (status < 0 && c->state == C_CALL) {
    // The client's connection failed (a reset: libuv stops the poll and says UV_EBADF) while its
    // call is under way: cancelled as a hang-up. The connection stays until the stream has closed
    // (on_close), since nghttp2 holds it as the stream's data and reads its body from it.
    if (!c->hung_up) call_cancel(c);
    return;
  }
  if (status < 0) { hand_back(c, HB_CLOSED); return; }
  if (c->state == C_WRITE && (events & UV_WRITABLE)) {
    ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    if (n < 0 && errno != EAGAIN) { hand_back(c, HB_CLOSED); return; }
    if (n > 0) c->out_off += (size_t)n;
    if (c->out_off < c->out_len) return;
    free(c->out);
    c->out = NULL;
    c->state = C_HEAD;
    leave(c);
    conn_shrink(c);
    conn_read(c); // in a drain: given back
    return;
  }
  if (c->state == C_CALL) {
    if (c->streaming && (events & UV_READABLE) && !c->hung_up) call_read(c);
    // A hang-up during a call cancels it.
    if ((events & UV_DISCONNECT) && !c->hung_up) call_cancel(c);
    return;
  }
  if (!(events & UV_READABLE)) return;
  if (c->state == C_HEAD && c->have == 0) {
    c->started_ns = now_ns();
    if (c->large_last && c->buf == c->small) conn_grow(c);
  }
  for (;;) {
    if (c->cap - c->have < 16384 && (c->buf != c->small || !conn_grow(c))) { hand_back(c, HB_UNSERVED); return; }
    ssize_t n = read(c->fd, c->buf + c->have, c->cap - c->have);
    if (n == 0 || (n < 0 && errno != EAGAIN)) { hand_back(c, HB_CLOSED); return; }
    if (n < 0) break;
    c->have += (size_t)n;
    if (c->have > c->touched) c->touched = c->have;
    if (c->have < c->cap) break;
  }
  conn_serve(c);
  if (c->state == C_HEAD || c->state == C_BODY) conn_bound(c);
}

// ---- JavaScript's side
static void free_segs(Seg *segs, int n) {
  for (int i = 0; i < n; i++) free((void *)segs[i].bytes);
}

static bool same_segs(const Seg *x, int nx, const Seg *y, int ny) {
  if (nx != ny) return false;
  for (int i = 0; i < nx; i++) {
    if (x[i].len != y[i].len || x[i].body_at != y[i].body_at || x[i].decoded != y[i].decoded || (x[i].bytes == NULL) != (y[i].bytes == NULL)) return false;
    if (x[i].bytes != NULL && memcmp(x[i].bytes, y[i].bytes, x[i].len) != 0) return false;
  }
  return true;
}

static void buffer_copy(napi_env env, napi_value v, uint8_t **out, size_t *len) {
  void *data;
  napi_get_buffer_info(env, v, &data, len);
  *out = malloc(*len ? *len : 1);
  memcpy(*out, data, *len);
}

static double get_double(napi_env env, napi_value o, const char *name) {
  napi_value v;
  double r = 0;
  napi_get_named_property(env, o, name, &v);
  napi_get_value_double(env, v, &r);
  return r;
}

static uint32_t get_u32(napi_env env, napi_value o, const char *name) {
  double r = get_double(env, o, name);
  return r > 0 && r < 4294967296.0 ? (uint32_t)r : 0;
}

/**
 * The memory of `v` when it is a Float64Array of at least `min` numbers (JavaScript's, shared with
 * C: never moved, held by `*ref` until deleted), else NULL.
 */
static double *shared_doubles(napi_env env, napi_value v, size_t min, napi_ref *ref) {
  bool typed = false;
  napi_is_typedarray(env, v, &typed);
  if (!typed) return NULL;
  napi_typedarray_type t;
  size_t n;
  void *data;
  napi_get_typedarray_info(env, v, &t, &n, &data, NULL, NULL);
  if (t != napi_float64_array || n < min) return NULL;
  napi_create_reference(env, v, 1, ref);
  return data;
}

/**
 * Segments from [[Buffer | null, length, bodyAt, decoded?], ...]: kept bytes, or a range (of the
 * body — of its base64 string decoded when `decoded` is true —, or a run of the answer).
 */
static int segs_of(napi_env env, napi_value arr, Seg *segs, size_t *total) {
  uint32_t n;
  napi_get_array_length(env, arr, &n);
  if (n > MAX_SEGS) n = MAX_SEGS;
  *total = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value e, b, l, at;
    napi_valuetype t;
    napi_get_element(env, arr, i, &e);
    napi_get_element(env, e, 0, &b);
    napi_get_element(env, e, 1, &l);
    napi_get_element(env, e, 2, &at);
    napi_value dv;
    bool decoded = false;
    uint32_t elements = 0;
    napi_get_array_length(env, e, &elements);
    if (elements > 3 && napi_get_element(env, e, 3, &dv) == napi_ok) napi_get_value_bool(env, dv, &decoded);
    napi_typeof(env, b, &t);
    uint32_t len = 0, bat = 0;
    napi_get_value_uint32(env, l, &len);
    napi_get_value_uint32(env, at, &bat);
    segs[i].bytes = NULL;
    if (t == napi_object) { uint8_t *p; size_t bl; buffer_copy(env, b, &p, &bl); segs[i].bytes = p; len = (uint32_t)bl; }
    segs[i].len = len;
    segs[i].body_at = bat;
    segs[i].decoded = decoded;
    *total += len;
  }
  return (int)n;
}

// connect(port, authority, host = "127.0.0.1", headers = [], gate?: Float64Array) -> the backend connection's index.
// `gate`: [0] is set by JavaScript to 0 while the backend set would not call this backend.
// `headers`: names and values in turn, sent with every call after the pseudo-headers (the data
// plane's own: content-type, te, user-agent, grpc-timeout, …).
static napi_value connect_js(napi_env env, size_t argc, napi_value *argv) {
  napi_value r;
  int32_t port;
  size_t alen, hlen = 0;
  char host[sizeof(((struct sockaddr_un *)0)->sun_path) + 1] = "127.0.0.1"; // one byte more: a path too long is seen
  if (L->nups == MAX_UPS) { napi_throw_error(env, NULL, "too many backends"); return NULL; }
  napi_get_value_int32(env, argv[0], &port);
  Up *u = calloc(1, sizeof(Up));
  u->lane = L;
  napi_get_value_string_latin1(env, argv[1], u->authority, sizeof(u->authority), &alen);
  if (argc > 2) {
    napi_valuetype t;
    napi_typeof(env, argv[2], &t);
    if (t == napi_string) napi_get_value_string_utf8(env, argv[2], host, sizeof(host), &hlen); // a path's bytes as the kernel takes them
  }
  u->fd = -1;
  if (host[0] == '/') { // a Unix domain socket's path (gateway.ts laneOf: at most sun_path's bytes)
    struct sockaddr_un *a = (struct sockaddr_un *)&u->addr;
    if (hlen >= sizeof(a->sun_path)) { free(u); napi_throw_error(env, NULL, "socket path too long"); return NULL; }
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, host, hlen + 1);
    u->addrlen = sizeof(*a);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&u->addr;
    *a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) { free(u); napi_throw_error(env, NULL, "not an IPv4 address"); return NULL; }
    u->addrlen = sizeof(*a);
  }
  L->ups[L->nups] = u;
  static const char *names[] = { ":method", ":scheme", ":path", ":authority" };
  const char *values[] = { "POST", "http", "/inference.GRPCInferenceService/ModelInfer", u->authority };
  for (int i = 0; i < 4; i++)
    u->nva[i] = (nghttp2_nv){ (uint8_t *)names[i], (uint8_t *)values[i], strlen(names[i]), strlen(values[i]), 0x02 | 0x04 };
  u->nnv = 4;
  if (argc > 3) {
    uint32_t n = 0;
    napi_get_array_length(env, argv[3], &n);
    for (uint32_t i = 0; i + 1 < n && u->nnv < sizeof(u->nva) / sizeof(u->nva[0]); i += 2) {
      napi_value nv, vv;
      size_t nl, vl;
      napi_get_element(env, argv[3], i, &nv);
      napi_get_element(env, argv[3], i + 1, &vv);
      napi_get_value_string_latin1(env, nv, NULL, 0, &nl);
      napi_get_value_string_latin1(env, vv, NULL, 0, &vl);
      char *name = malloc(nl + 1), *value = malloc(vl + 1);
      napi_get_value_string_latin1(env, nv, name, nl + 1, &nl);
      napi_get_value_string_latin1(env, vv, value, vl + 1, &vl);
      u->nva[u->nnv++] = (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, nl, vl, 0x02 | 0x04 };
    }
  }
  if (argc > 4) u->gate = shared_doubles(env, argv[4], 1, &u->gate_ref);
  napi_get_uv_event_loop(env, &u->loop);
  up_start(u);
  napi_create_int32(env, L->nups++, &r);
  return r;
}

static void free_plan(BodyPlan *p) {
  free(p->header);
  free(p->suffix);
  free_segs(p->segs, p->nsegs);
  free(p);
}

static void free_answer(Answer *a) {
  free_segs(a->match, a->nmatch);
  for (int i = 0; i < a->ntexts; i++) free(a->texts[i]);
  free(a->head);
  free(a);
}

static bool same_bytes(const uint8_t *x, size_t nx, const uint8_t *y, size_t ny) {
  return nx == ny && (nx == 0 || memcmp(x, y, nx) == 0);
}

static bool same_plan(const BodyPlan *q, const BodyPlan *p) {
  return same_bytes(q->header, q->header_len, p->header, p->header_len) && same_segs(q->segs, q->nsegs, p->segs, p->nsegs)
    && q->base64 == p->base64 && q->decoded_len == p->decoded_len && same_bytes(q->suffix, q->suffix_len, p->suffix, p->suffix_len);
}

static bool same_answer(const Answer *b, const Answer *a) {
  if (b->head_len != a->head_len || b->date_at != a->date_at || b->timing_at != a->timing_at || !same_segs(b->match, b->nmatch, a->match, a->nmatch)
    || memcmp(b->head, a->head, a->date_at == SIZE_MAX ? a->head_len : a->date_at) != 0) return false;
  if (b->json != a->json || b->ntexts != a->ntexts || b->length_at != a->length_at) return false;
  if (a->ntexts > 0 && memcmp(b->kinds, a->kinds, (size_t)a->ntexts - 1) != 0) return false;
  for (int i = 0; i < a->ntexts; i++) if (!same_bytes(b->texts[i], b->text_len[i], a->texts[i], a->text_len[i])) return false;
  return true;
}

/**
 * keep()'s last argument, { suffix?, decodedBytes?, texts?, kinds?, lengthAt? }: a JSON body holding one
 * base64 string (`suffix`: its text from the closing quote; the plan's header is the text up to
 * the opening one), a JSON answer (`texts`: one before each run of values and one after the last;
 * `kinds`: each run's element type, K_*; `lengthAt`: where the Content-Length's digits go in the
 * head). False when it cannot be kept.
 */
static bool json_of(napi_env env, napi_value o, BodyPlan *p, Answer *a) {
  napi_valuetype t;
  napi_typeof(env, o, &t);
  if (t != napi_object) return true;
  bool has;
  napi_value v;
  napi_has_named_property(env, o, "suffix", &has);
  if (has) {
    napi_get_named_property(env, o, "suffix", &v);
    buffer_copy(env, v, &p->suffix, &p->suffix_len);
    p->decoded_len = (size_t)get_double(env, o, "decodedBytes");
    p->base64 = true;
  }
  napi_has_named_property(env, o, "texts", &has);
  if (!has) return true;
  if (td_pow_f == NULL) return false; // the printer's table was not given (powers())
  napi_value kinds;
  uint32_t nkinds = 0;
  napi_get_named_property(env, o, "kinds", &kinds);
  if (napi_get_array_length(env, kinds, &nkinds) != napi_ok) return false;
  napi_get_named_property(env, o, "texts", &v);
  uint32_t n = 0;
  napi_get_array_length(env, v, &n);
  uint32_t runs = 0;
  a->json_max = 0;
  for (int i = 0; i < a->nmatch; i++) {
    if (a->match[i].bytes != NULL) continue;
    if (runs >= nkinds || runs >= MAX_SEGS) return false;
    napi_value e;
    uint32_t kind = K_COUNT;
    napi_get_element(env, kinds, runs, &e);
    napi_get_value_uint32(env, e, &kind);
    if (kind >= K_COUNT || a->match[i].len % KIND_SIZE[kind] != 0) return false;
    a->kinds[runs++] = (uint8_t)kind;
    a->json_max += a->match[i].len / KIND_SIZE[kind] * (KIND_MAX[kind] + 1u);
  }
  if (nkinds != runs || n != runs + 1 || n > MAX_SEGS + 1) return false;
  for (uint32_t i = 0; i < n; i++) {
    napi_value e;
    napi_get_element(env, v, i, &e);
    buffer_copy(env, e, &a->texts[i], &a->text_len[i]);
    a->json_max += a->text_len[i];
    a->ntexts = (int)i + 1;
  }
  double at = get_double(env, o, "lengthAt");
  if (at < 0 || at > (double)a->head_len) return false;
  a->length_at = (size_t)at;
  a->json = true;
  return true;
}

// keep(head: Buffer, bodyBytes, upstream, bodyHeader: Buffer, messageSegs, answerMatch, answerHead: Buffer, dateAt, timingAt = -1, json?,
//   expect?: the head has Expect: 100-continue)
static napi_value keep_js(napi_env env, size_t argc, napi_value *argv) {
  if (argc < 8) { napi_throw_error(env, NULL, "keep: 8 arguments"); return NULL; }
  uint8_t *hb;
  size_t hl;
  void *raw;
  napi_get_buffer_info(env, argv[0], &raw, &hl);
  uint32_t body_bytes;
  napi_get_value_uint32(env, argv[1], &body_bytes);
  napi_value r;
  // Larger than the lane reads: nothing kept (JavaScript's bound is the same, LANE_BODY_BYTES).
  if (body_bytes > MAX_BODY || hl > MAX_HEAD) { napi_create_int32(env, -1, &r); return r; }
  Head *h = (Head *)find_head(raw, hl);
  // A full table keeps no other head: JavaScript clears it and keeps this one (lane.ts keep).
  if (h == NULL && L->live_heads >= MAX_HEADS) { napi_create_int32(env, -2, &r); return r; }
  if (h == NULL) {
    L->live_heads++;
    h = calloc(1, sizeof(Head));
    buffer_copy(env, argv[0], &hb, &hl);
    h->bytes = hb;
    h->len = hl;
    h->hash = hash_bytes(hb, hl);
    if (argc > 10) napi_get_value_bool(env, argv[10], &h->expect);
    uint32_t v;
    h->body_len = body_bytes;
    napi_get_value_uint32(env, argv[2], &v);
    h->upstream = (int)v;
    h->index = L->nheads++;
    h->next = L->heads;
    L->heads = h;
  }
  BodyPlan *p = calloc(1, sizeof(BodyPlan));
  buffer_copy(env, argv[3], &p->header, &p->header_len);
  p->nsegs = segs_of(env, argv[4], p->segs, &p->message_len);
  Answer *a = calloc(1, sizeof(Answer));
  size_t total;
  a->nmatch = segs_of(env, argv[5], a->match, &total);
  buffer_copy(env, argv[6], &a->head, &a->head_len);
  int32_t d;
  napi_get_value_int32(env, argv[7], &d);
  a->date_at = d < 0 ? SIZE_MAX : (size_t)d;
  d = -1;
  if (argc > 8) napi_get_value_int32(env, argv[8], &d);
  a->timing_at = d < 0 || (size_t)d > a->head_len ? SIZE_MAX : (size_t)d;
  bool usable = argc <= 9 || json_of(env, argv[9], p, a);
  // Kept already (another connection's first request of the same shape): nothing is added.
  BodyPlan *owner = NULL;
  for (BodyPlan *q = h->plans; q != NULL && owner == NULL; q = q->next) if (same_plan(q, p)) owner = q;
  bool plan_kept = owner != NULL, answer_kept = false;
  for (Answer *b = h->answers; b != NULL && !answer_kept; b = b->next) answer_kept = b->plan == owner && same_answer(b, a);
  if (!usable || (!plan_kept && h->nplans >= MAX_KEPT) || (!answer_kept && h->nanswers >= MAX_KEPT)) plan_kept = answer_kept = true, h = NULL;
  if (plan_kept) free_plan(p);
  else { p->next = h->plans; h->plans = owner = p; h->nplans++; }
  if (answer_kept) free_answer(a);
  else { a->plan = owner; a->next = h->answers; h->answers = a; h->nanswers++; }
  if (h == NULL) { napi_create_int32(env, -1, &r); return r; }
  L->date_at_s = 0;
  refresh_date();
  napi_create_int32(env, h->index, &r);
  return r;
}

// serve(fd): the client's connection (a paused net.Socket's descriptor, duplicated) is the lane's until handed back.
static napi_value serve_js(napi_env env, size_t argc, napi_value *argv) {
  (void)argc;
  napi_value r;
  int32_t fd;
  napi_get_value_int32(env, argv[0], &fd);
  void *first = NULL;
  size_t first_len = 0;
  bool given = false;
  if (argc > 1) napi_is_buffer(env, argv[1], &given);
  if (given) napi_get_buffer_info(env, argv[1], &first, &first_len);
  int id = 0;
  while (id < MAX_CONNS && L->conns[id] != NULL) id++;
  napi_create_int32(env, -1, &r);
  if (id == MAX_CONNS || first_len > BIG_BUF - 16384) return r;
  Conn *c = calloc(1, sizeof(Conn));
  c->lane = L;
  c->fd = dup(fd);
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  c->id = id;
  c->cap = SMALL_BUF;
  c->buf = c->small = malloc(SMALL_BUF);
  if (first_len > 0) {
    // A new connection's first read (ingress/http1/fast.ts): its head began at argv[2].
    if (first_len > SMALL_BUF - 16384 && !conn_grow(c)) { close(c->fd); free(c->small); free(c); return r; }
    memcpy(c->buf, first, first_len);
    c->have = first_len;
    if (c->have > c->touched) c->touched = c->have;
    c->started_ns = now_ns();
    if (argc > 2) napi_get_value_double(env, argv[2], &c->head_at);
  }
  c->poll.data = c;
  L->conns[id] = c;
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  uv_poll_init_socket(loop, &c->poll, c->fd);
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  c->handles = 2;
  conn_read(c);
  napi_create_int32(env, id, &r);
  return r;
}

/** A drain began: every connection goes back to JavaScript, now if it is between requests, else once its answer is in. */
static napi_value stop_js(napi_env env, size_t argc, napi_value *argv) {
  (void)env; (void)argc; (void)argv;
  L->draining = true;
  for (int i = 0; i < MAX_CONNS; i++) {
    Conn *c = L->conns[i];
    if (c != NULL && (c->state == C_HEAD || c->state == C_BODY)) hand_back(c, HB_UNSERVED);
  }
  return NULL;
}

static void free_head(Head *h) {
  for (BodyPlan *p = h->plans, *next; p != NULL; p = next) {
    next = p->next;
    free_plan(p);
  }
  for (Answer *a = h->answers, *next; a != NULL; a = next) {
    next = a->next;
    free_answer(a);
  }
  free(h->bytes);
  free(h);
}

/**
 * What was kept is forgotten (a model's configuration was evicted): every head is JavaScript's
 * again until kept anew. A head a request under way still reads is freed at a later clear.
 */
static napi_value clear_js(napi_env env, size_t argc, napi_value *argv) {
  (void)env; (void)argc; (void)argv;
  L->live_heads = 0;
  while (L->heads != NULL) {
    Head *h = L->heads;
    L->heads = h->next;
    h->next = L->retired;
    L->retired = h;
  }
  for (Head **at = &L->retired; *at != NULL; ) {
    Head *h = *at;
    bool used = h->in_flight > 0;
    for (int i = 0; i < MAX_CONNS && !used; i++) used = L->conns[i] != NULL && L->conns[i]->head == h && (L->conns[i]->state == C_BODY || L->conns[i]->state == C_CALL);
    if (used) { at = &h->next; continue; }
    *at = h->next;
    free_head(h);
  }
  return NULL;
}

static napi_value drain_js(napi_env env, size_t argc, napi_value *argv) {
  (void)argc; (void)argv;
  // No large request for SPARE_IDLE_MS: the idle large buffers' pages go back to the system.
  if (L->nspare > 0 && epoch_ms() - L->big_at > SPARE_IDLE_MS) {
    L->nbig -= L->nspare;
    while (L->nspare > 0) big_free(L->spare[--L->nspare].buf);
    L->spare_bytes = 0;
  }
  return take_records(env);
}

/** inFlight() -> [head index, requests admitted and not over, …] of the heads that have any. */
static napi_value in_flight_js(napi_env env, size_t argc, napi_value *argv) {
  (void)argc; (void)argv;
  size_t n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (const Head *h = pass == 0 ? L->heads : L->retired; h != NULL; h = h->next) n += h->in_flight > 0 ? 2 : 0;
  napi_value ab, arr;
  double *data;
  napi_create_arraybuffer(env, n * sizeof(double), (void **)&data, &ab);
  size_t i = 0;
  for (int pass = 0; pass < 2; pass++)
    for (const Head *h = pass == 0 ? L->heads : L->retired; h != NULL; h = h->next)
      if (h->in_flight > 0) { data[i++] = h->index; data[i++] = h->in_flight; }
  napi_create_typedarray(env, napi_float64_array, n, ab, 0, &arr);
  return arr;
}

static napi_value counts_js(napi_env env, size_t argc, napi_value *argv) {
  (void)argc; (void)argv;
  napi_value out, v;
  napi_create_object(env, &out);
  napi_create_double(env, (double)L->served, &v);
  napi_set_named_property(env, out, "served", v);
  napi_create_double(env, (double)L->handed_back, &v);
  napi_set_named_property(env, out, "handedBack", v);
  napi_create_double(env, (double)L->failed, &v);
  napi_set_named_property(env, out, "failed", v);
  napi_create_double(env, (double)L->nbig, &v);
  napi_set_named_property(env, out, "largeBuffers", v);
  napi_create_double(env, (double)L->nspare, &v);
  napi_set_named_property(env, out, "idleLargeBuffers", v);
  napi_create_double(env, (double)L->decoded_early, &v);
  napi_set_named_property(env, out, "decodedEarly", v);
  napi_create_double(env, (double)L->early_calls, &v);
  napi_set_named_property(env, out, "earlyCalls", v);
  napi_create_double(env, (double)L->copied_up, &v);
  napi_set_named_property(env, out, "upstreamCopiedBytes", v);
  napi_create_double(env, (double)L->spare_bytes, &v);
  napi_set_named_property(env, out, "idleLargeBytes", v);
  napi_create_double(env, (double)L->live_heads, &v);
  napi_set_named_property(env, out, "keptHeads", v);
  int sndbuf = 0;
  for (int i = 0; i < L->nups; i++) if (L->ups[i]->sndbuf > sndbuf) sndbuf = L->ups[i]->sndbuf;
  napi_create_double(env, (double)sndbuf, &v);
  napi_set_named_property(env, out, "upstreamSendBuffer", v);
  return out;
}

/**
 * A lane's memory goes when both its external is collected and its check handle has closed
 * (close()); whichever comes second frees it.
 */
static void lane_release(Lane *lane) {
  if (!lane->released) {
    lane->released = true;
    return;
  }
  for (int i = 0; i < lane->nspare; i++) big_free(lane->spare[i].buf);
  free(lane);
}

static void lane_finalize(napi_env env, void *data, void *hint) {
  (void)env; (void)hint;
  Lane *lane = data;
  lane->closed = true;
  lane_release(lane);
}

static void lane_check_closed(uv_handle_t *h) {
  lane_release(h->data);
}

// init(onHandBack, onRecords, callTimeoutMs, { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs,
//   maxInFlightRequests, maxInFlightBodyBytes }, inFlight: Float64Array [requests, body bytes]) -> the lane
static napi_value init_js(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5], name, resource, r;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  Lane *lane = calloc(1, sizeof(Lane));
  lane->env = env;
  napi_create_reference(env, argv[0], 1, &lane->on_hand_back);
  napi_create_reference(env, argv[1], 1, &lane->on_records);
  int64_t ms = 60000;
  napi_get_value_int64(env, argv[2], &ms);
  lane->call_timeout_ms = ms > 0 ? (uint64_t)ms : 60000;
  if (argc > 3) {
    lane->headers_timeout_ms = get_u32(env, argv[3], "headersTimeoutMs");
    lane->request_timeout_ms = get_u32(env, argv[3], "requestTimeoutMs");
    lane->keep_alive_timeout_ms = get_u32(env, argv[3], "keepAliveTimeoutMs");
    lane->max_requests = get_double(env, argv[3], "maxInFlightRequests");
    lane->max_body_bytes = get_double(env, argv[3], "maxInFlightBodyBytes");
  }
  if (argc > 4) lane->in_flight = shared_doubles(env, argv[4], 2, &lane->in_flight_ref);
  napi_create_string_utf8(env, "tensorgate.lane", NAPI_AUTO_LENGTH, &name);
  napi_create_object(env, &resource);
  napi_async_init(env, resource, name, &lane->ctx);
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  uv_check_init(loop, &lane->check);
  lane->check.data = lane;
  uv_check_start(&lane->check, on_check);
  uv_unref((uv_handle_t *)&lane->check);
  napi_create_external(env, lane, lane_finalize, NULL, &r);
  return r;
}

/** The server closes: its connections are given back closed, its backend connections closed, what it kept freed. */
static napi_value close_js(napi_env env, size_t argc, napi_value *argv) {
  (void)argc; (void)argv;
  for (int i = 0; i < MAX_CONNS; i++) if (L->conns[i] != NULL) hand_back(L->conns[i], HB_CLOSED);
  for (int i = 0; i < L->nups; i++) {
    Up *u = L->ups[i];
    up_close(u);
    for (size_t k = 4; k < u->nnv; k++) { free(u->nva[k].name); free(u->nva[k].value); }
    if (u->gate_ref != NULL) napi_delete_reference(env, u->gate_ref);
    free(u);
  }
  L->nups = 0;
  napi_value none;
  clear_js(env, 0, &none);
  napi_delete_reference(env, L->on_hand_back);
  napi_delete_reference(env, L->on_records);
  if (L->in_flight_ref != NULL) napi_delete_reference(env, L->in_flight_ref);
  L->in_flight = NULL;
  napi_async_destroy(env, L->ctx);
  uv_check_stop(&L->check);
  L->closing = true;
  L->closed = true; // no export may use it from now on
  uv_close((uv_handle_t *)&L->check, lane_check_closed);
  return NULL;
}

typedef napi_value (*LaneFn)(napi_env env, size_t argc, napi_value *argv);
typedef struct { LaneFn fn; } LaneCall;

/** Every export but init: its first argument is the lane, made the current one while it runs. */
static napi_value lane_call(napi_env env, napi_callback_info info) {
  size_t argc = 12;
  napi_value argv[12];
  void *data;
  napi_get_cb_info(env, info, &argc, argv, NULL, &data);
  Lane *lane = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], (void **)&lane) != napi_ok || lane == NULL || lane->closed) {
    napi_throw_error(env, NULL, "lane: not an open lane");
    return NULL;
  }
  Lane *saved = L;
  L = lane;
  napi_value r = ((const LaneCall *)data)->fn(env, argc - 1, argv + 1);
  L = saved;
  return r;
}

static void *typed_data(napi_env env, napi_value v, napi_typedarray_type want, size_t *n) {
  bool typed = false;
  napi_typedarray_type t;
  void *data = NULL;
  napi_is_typedarray(env, v, &typed);
  if (!typed || napi_get_typedarray_info(env, v, &t, n, &data, NULL, NULL) != napi_ok || t != want) return NULL;
  return data;
}

// powers(significands: BigUint64Array, k: Int32Array, shift: Int32Array) -> boolean: the printer's
// table (json/number-print.ts cachedPowers, a row per boundary exponent), for every lane.
static napi_value powers_js(napi_env env, napi_callback_info info) {
  size_t argc = 3, nf = 0, nk = 0, ns = 0;
  napi_value argv[3], r;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  const uint64_t *f = argc == 3 ? typed_data(env, argv[0], napi_biguint64_array, &nf) : NULL;
  const int32_t *k = argc == 3 ? typed_data(env, argv[1], napi_int32_array, &nk) : NULL;
  const int32_t *shift = argc == 3 ? typed_data(env, argv[2], napi_int32_array, &ns) : NULL;
  bool ok = f != NULL && k != NULL && shift != NULL && nf == TD_ROWS && nk == TD_ROWS && ns == TD_ROWS && td_set_powers(f, k, shift);
  napi_get_boolean(env, ok, &r);
  return r;
}

// printFp32(values: Buffer, scalar?: boolean) -> Buffer: FP32 values (little-endian) printed as a
// JSON answer prints them, comma-separated, by the printer this CPU runs (td_choose) or, with
// scalar, the one every CPU runs (the tests compare both with json/number-print.ts).
static napi_value print_fp32_js(napi_env env, napi_callback_info info) {
  size_t argc = 2, len = 0;
  napi_value argv[2], r;
  void *data = NULL;
  bool scalar = false;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc > 1) napi_get_value_bool(env, argv[1], &scalar);
  if (argc < 1 || napi_get_buffer_info(env, argv[0], &data, &len) != napi_ok || td_pow_f == NULL) {
    napi_throw_error(env, NULL, "printFp32: a Buffer, once powers() was given");
    return NULL;
  }
  char *out = malloc(len / 4 * (TD_MAX_LENGTH + 1) + TD_SLACK);
  size_t n = (size_t)((scalar ? td_print_fp32_scalar : td_print_fp32)(data, len / 4, out) - out);
  void *copy;
  napi_create_buffer_copy(env, n, out, &copy, &r);
  free(out);
  return r;
}

// printInts(values: Buffer, kind) -> Buffer: integers of K_* `kind` (little-endian) printed as a
// JSON answer prints them, comma-separated (the tests compare them with infer-response.ts's).
static napi_value print_ints_js(napi_env env, napi_callback_info info) {
  size_t argc = 2, len = 0;
  napi_value argv[2], r;
  void *data = NULL;
  uint32_t kind = K_COUNT;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc > 1) napi_get_value_uint32(env, argv[1], &kind);
  if (argc < 2 || napi_get_buffer_info(env, argv[0], &data, &len) != napi_ok || kind == K_FP32 || kind >= K_COUNT || len % KIND_SIZE[kind] != 0) {
    napi_throw_error(env, NULL, "printInts: a Buffer of whole values, an integer kind");
    return NULL;
  }
  char *out = malloc(len / KIND_SIZE[kind] * (KIND_MAX[kind] + 1u) + 1);
  size_t n = (size_t)(print_ints(data, len / KIND_SIZE[kind], (int)kind, out) - out);
  void *copy;
  napi_create_buffer_copy(env, n, out, &copy, &r);
  free(out);
  return r;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  td_choose();
  if (__builtin_cpu_supports("avx2")) kernel = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") ? decode_vbmi : decode_avx2;
#endif
  static const struct { const char *name; LaneCall call; } fns[] = {
    { "connect", { connect_js } }, { "keep", { keep_js } }, { "serve", { serve_js } }, { "counts", { counts_js } }, { "inFlight", { in_flight_js } }, { "drain", { drain_js } },
    { "stop", { stop_js } }, { "clear", { clear_js } }, { "close", { close_js } },
  };
  napi_value f;
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, lane_call, (void *)&fns[i].call, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  napi_create_function(env, "init", NAPI_AUTO_LENGTH, init_js, NULL, &f);
  napi_set_named_property(env, exports, "init", f);
  napi_create_function(env, "powers", NAPI_AUTO_LENGTH, powers_js, NULL, &f);
  napi_set_named_property(env, exports, "powers", f);
  napi_create_function(env, "printFp32", NAPI_AUTO_LENGTH, print_fp32_js, NULL, &f);
  napi_set_named_property(env, exports, "printFp32", f);
  napi_create_function(env, "printInts", NAPI_AUTO_LENGTH, print_ints_js, NULL, &f);
  napi_set_named_property(env, exports, "printInts", f);
  return exports;
}
