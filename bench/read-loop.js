// What our own HTTP/1.1 read loop would buy for inference POSTs, measured before the gateway is
// built around one: the same hop as the node:http + node:http2 floor proxy (a raw body, image_stats
// UINT8 [1, n], cut through into a framed ModelInferRequest on one upstream HTTP/2 session; the
// answer's bytes returned as they are), but on net sockets that read into buffers we own
// (`onread`), a strict request-head parser of our own, body bytes written to the Http2Stream
// straight from those buffers, and the answer written in one socket write.
//
// Started by bench/cpu-per-request.js as a "dist" whose gateway/main.js requires this file (it
// passes --backend HOST:PORT --port 0 and waits for the listening line). Flags:
//   --copy             body bytes are copied into pooled blocks and the read buffer is reused at
//                      once (default: the read buffer is written upstream by reference and goes
//                      back to the pool from the last write's callback)
//   --read-size N      bytes per read buffer (default 65536)
//   --max-frame-size N --window N --local-window N   the upstream session's SETTINGS_MAX_FRAME_SIZE,
//                      SETTINGS_INITIAL_WINDOW_SIZE (default 4 MiB, as the floor) and connection window
//   --stats FILE       at SIGTERM, writes answers, upstream 'data' events and writes per answer
//
// Node offers onread on sockets it connects, not on those a net.Server accepts, so each accepted
// connection's handle is adopted by a second net.Socket built with onread: the `handle` option and
// `socket._handle` are private Node API (lib/net.js marks the option "private").
//
// It is a measurement, not a server: no TLS, no timeouts, no auth, no limits beyond the head's size
// and the body's; anything outside the strict subset is answered 400 (a failed upstream call 502)
// and the connection closed.
'use strict';
const fs = require('node:fs');
const http2 = require('node:http2');
const net = require('node:net');
const { inference } = require('#dist/proto/services.js');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const backend = opt('--backend', '127.0.0.1:8001');
const COPY = argv.includes('--copy');
const READ_SIZE = Number(opt('--read-size', 65536));
const MAX_HEAD = 16 * 1024; // node:http's default maxHeaderSize
const MAX_BODY = 64 * 1024 * 1024;
/** A body this small that is whole in one read goes upstream as one message in one write. */
const SMALL = 64 * 1024;
const stats = { answers: 0, dataEvents: 0, answerBytes: 0, upstreamWrites: 0, readBuffers: 0, reads: 0 };

const settings = { initialWindowSize: Number(opt('--window', 4 << 20)) };
if (opt('--max-frame-size') !== undefined) settings.maxFrameSize = Number(opt('--max-frame-size'));
const session = http2.connect(`http://${backend}`, { settings, maxSessionMemory: 256 });
const localWindow = opt('--local-window');
if (localWindow !== undefined) session.on('connect', () => session.setLocalWindowSize(Number(localWindow)));
session.on('error', (e) => { console.error(`upstream: ${e.message}`); process.exit(1); });
const UPSTREAM_HEADERS = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' };

// ---- buffers we own

/** Free read buffers (no-copy mode) or body blocks (copy mode); a buffer is in one place at a time. */
const free = [];
const take = () => { const b = free.pop(); if (b !== undefined) return b; stats.readBuffers++; return Buffer.allocUnsafeSlow(READ_SIZE); };
/** Writes upstream that still point into a buffer, by buffer (no-copy mode). */
const pins = new Map();
const pin = (buf) => { pins.set(buf, (pins.get(buf) ?? 0) + 1); };
const unpin = (buf) => { const n = pins.get(buf) - 1; if (n === 0) { pins.delete(buf); free.push(buf); } else pins.set(buf, n); };
/** Copy mode: every connection reads into this one buffer; its bytes are copied out before the callback returns. */
const SHARED_READ = COPY ? Buffer.allocUnsafeSlow(READ_SIZE) : undefined;

// ---- the strict head parser

const CRLFCRLF = Buffer.from('\r\n\r\n');
const INFER_PATH = /^\/v2\/models\/([A-Za-z0-9_.-]{1,128})(?:\/versions\/[0-9]{1,19})?\/infer$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A byte llhttp refuses in a field value: a control character other than HTAB, or DEL. */
const hasCtl = (v) => {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if ((c < 0x20 && c !== 9) || c === 0x7f) return true;
  }
  return false;
};

/**
 * Parses a request head (request line and header lines, without the blank line) of the one form
 * this loop serves: `POST /v2/models/NAME/infer HTTP/1.1`, one Content-Length of digits, no
 * Transfer-Encoding, Expect or Content-Encoding, Connection absent, keep-alive or close, no
 * obs-fold, one Host (node:http's requireHostHeader), no control character in a value. Anything
 * else is an Error (node:http's to serve, in a gateway).
 * @param {string} head
 * @returns {{ model: string, length: number, keepAlive: boolean } | Error}
 */
function parseHead(head) {
  const lines = head.split('\r\n');
  const m = /^POST (\S+) HTTP\/1\.1$/.exec(lines[0]);
  if (m === null) return new Error('not a POST HTTP/1.1 request line');
  const route = INFER_PATH.exec(m[1]);
  if (route === null) return new Error('not an inference route');
  let length = -1; let keepAlive = true; let hosts = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    const colon = line.indexOf(':');
    if (colon <= 0) return new Error('malformed header line');
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return new Error('malformed header name');
    const value = line.slice(colon + 1).trim();
    if (hasCtl(value)) return new Error('a control character in a header value');
    switch (name.toLowerCase()) {
      case 'content-length':
        if (length >= 0 || !/^[0-9]{1,10}$/.test(value)) return new Error('bad or repeated Content-Length');
        length = Number(value);
        break;
      case 'connection': {
        const v = value.toLowerCase();
        if (v === 'close') keepAlive = false;
        else if (v !== 'keep-alive') return new Error('Connection other than keep-alive or close');
        break;
      }
      case 'host':
        hosts++;
        break;
      case 'inference-header-content-length':
        if (value !== '0') return new Error('only raw bodies (Inference-Header-Content-Length: 0)');
        break;
      case 'transfer-encoding': case 'expect': case 'content-encoding': case 'upgrade':
        return new Error(`${name} is not served here`);
      default:
    }
  }
  if (hosts !== 1) return new Error('not exactly one Host (node:http requires it)');
  if (length < 0) return new Error('no Content-Length');
  if (length > MAX_BODY) return new Error('body too large');
  return { model: route[1], length, keepAlive };
}

// ---- framing (as the floor: protobufjs for the header fields, field 7 framed by hand)

/** @returns {Buffer} the gRPC prefix, header fields, tag and length of raw_input_contents, and `room` bytes more */
function frameHead(model, n, room) {
  const head = inference.ModelInferRequest.encode({ model_name: model, inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, n] }] }).finish();
  let v = 1; for (let x = n; x > 127; x = Math.floor(x / 128)) v++;
  const total = head.length + 1 + v + n;
  const out = Buffer.allocUnsafe(5 + head.length + 1 + v + room);
  out[0] = 0; out.writeUInt32BE(total, 1); out.set(head, 5);
  let at = 5 + head.length; out[at++] = 0x3a;
  let x = n; while (x > 127) { out[at++] = (x & 127) | 128; x = Math.floor(x / 128); } out[at] = x;
  return out;
}

// ---- one connection

class Exchange {
  /** @type {Buffer | undefined} the whole HTTP answer once the upstream call ended */
  answer = undefined;
  /** @type {Buffer[]} */
  chunks = [];
  size = 0;
  constructor(keepAlive) { this.keepAlive = keepAlive; }
}

class Conn {
  /** @param {net.Socket} socket */
  constructor(socket) {
    this.socket = socket;
    /** @type {Buffer | undefined} head bytes carried over from earlier reads */
    this.headBuf = undefined;
    this.headLen = 0;
    /** body bytes still to come for the current request; -1 while reading a head */
    this.left = -1;
    /** @type {import('node:http2').ClientHttp2Stream | undefined} */
    this.stream = undefined;
    /** copy mode: the block being filled */
    this.block = undefined;
    this.blockFill = 0;
    /** @type {Exchange[]} answers owed, in request order (pipelining) */
    this.owed = [];
    this.closing = false;
  }

  /** The onread callback: `n` new bytes at the start of `buf`. Returns false to stop reading. */
  onRead(n, buf) {
    stats.reads++;
    let at = 0;
    while (at < n && !this.closing) {
      if (this.left < 0) at = this.head(buf, at, n);
      else at = this.body(buf, at, n);
    }
    if (!COPY && !pins.has(buf)) free.push(buf);
    return true;
  }

  /** Consumes head bytes from buf[at..n]; returns where the body starts (or n). */
  head(buf, at, n) {
    let src = buf; let from = at; let end;
    if (this.headBuf === undefined) {
      const i = buf.indexOf(CRLFCRLF, at);
      if (i >= 0 && i < n) end = i;
    }
    if (end === undefined) {
      // The head spans reads: gather it (bounded) and look again across the seam.
      this.headBuf ??= Buffer.allocUnsafe(MAX_HEAD);
      const room = MAX_HEAD - this.headLen;
      const take1 = Math.min(room, n - at);
      buf.copy(this.headBuf, this.headLen, at, at + take1);
      const seam = Math.max(0, this.headLen - 3);
      this.headLen += take1;
      const i = this.headBuf.subarray(0, this.headLen).indexOf(CRLFCRLF, seam);
      if (i < 0) {
        if (this.headLen === MAX_HEAD) this.reject('request head too large');
        return at + take1;
      }
      src = this.headBuf; from = 0; end = i;
      at = at + take1 - (this.headLen - (i + 4)); // body starts this far into buf
      this.headBuf = undefined; this.headLen = 0;
    } else {
      at = end + 4;
    }
    const parsed = parseHead(src.latin1Slice(from, end));
    if (parsed instanceof Error) { this.reject(parsed.message); return at; }
    return this.start(parsed, buf, at, n);
  }

  /**
   * Opens the upstream call and forwards the body bytes in buf[at..n]; returns where the next head
   * starts (or n). A small body already whole in this read goes as one message in one write.
   */
  start({ model, length, keepAlive }, buf, at, n) {
    const ex = new Exchange(keepAlive);
    this.owed.push(ex);
    const s = session.request(UPSTREAM_HEADERS);
    s.on('data', (c) => { stats.dataEvents++; ex.chunks.push(c); ex.size += c.length; });
    s.on('end', () => this.answered(ex));
    s.on('error', () => this.reject('upstream call failed', '502 Bad Gateway'));
    if (!keepAlive) this.socket.pause();
    if (length <= SMALL && n - at >= length) {
      const msg = frameHead(model, length, length);
      buf.copy(msg, msg.length - length, at, at + length);
      stats.upstreamWrites++;
      s.end(msg);
      return at + length;
    }
    stats.upstreamWrites++;
    s.write(frameHead(model, length, 0));
    this.stream = s;
    this.left = length;
    return this.body(buf, at, n);
  }

  /** Forwards body bytes from buf[at..n]; returns where the next head starts (or n). */
  body(buf, at, n) {
    const k = Math.min(this.left, n - at);
    const s = /** @type {import('node:http2').ClientHttp2Stream} */ (this.stream);
    this.left -= k;
    let ok = true;
    if (!COPY) {
      if (k > 0) {
        pin(buf);
        stats.upstreamWrites++;
        ok = s.write(buf.subarray(at, at + k), () => unpin(buf));
      }
    } else {
      let from = at;
      while (from < at + k) {
        this.block ??= take();
        const c = Math.min(READ_SIZE - this.blockFill, at + k - from);
        buf.copy(this.block, this.blockFill, from, from + c);
        this.blockFill += c; from += c;
        if (this.blockFill === READ_SIZE || this.left === 0) ok = this.flush(s) && ok;
      }
    }
    if (this.left === 0) {
      s.end();
      this.stream = undefined;
      this.left = -1;
    } else if (!ok) {
      this.socket.pause();
      s.once('drain', () => this.socket.resume());
    }
    return at + k;
  }

  flush(s) {
    const block = this.block;
    const fill = this.blockFill;
    this.block = undefined; this.blockFill = 0;
    stats.upstreamWrites++;
    return s.write(block.subarray(0, fill), () => free.push(block));
  }

  answered(ex) {
    stats.answers++; stats.answerBytes += ex.size;
    const head = `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${ex.size}\r\n${ex.keepAlive ? '' : 'connection: close\r\n'}\r\n`;
    if (ex.size <= SMALL) {
      const out = Buffer.allocUnsafe(head.length + ex.size);
      let at = out.write(head, 0, 'latin1');
      for (const c of ex.chunks) { out.set(c, at); at += c.length; }
      ex.answer = out;
    } else {
      ex.answer = Buffer.concat([Buffer.from(head, 'latin1'), ...ex.chunks]);
    }
    ex.chunks = [];
    this.flushAnswers();
  }

  /** Writes the answers that are ready, in request order. */
  flushAnswers() {
    const sock = this.socket;
    while (this.owed.length > 0 && this.owed[0].answer !== undefined) {
      const ex = /** @type {Exchange} */ (this.owed.shift());
      sock.write(/** @type {Buffer} */ (ex.answer));
      if (!ex.keepAlive) { this.closing = true; sock.end(); return; }
    }
  }

  reject(reason, status = '400 Bad Request') {
    if (this.closing) return;
    this.closing = true;
    const body = JSON.stringify({ error: reason });
    this.socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  }
}

const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (accepted) => {
  // Adopt the accepted handle into a socket that reads into our buffers (private API, see the top).
  const anyAccepted = /** @type {any} */ (accepted);
  const handle = anyAccepted._handle;
  anyAccepted._handle = null;
  /** @type {Conn | undefined} */
  let conn;
  const onread = COPY
    ? { buffer: /** @type {Buffer} */ (SHARED_READ), callback: (n, b) => conn?.onRead(n, b) ?? true }
    : { buffer: take, callback: (n, b) => conn?.onRead(n, b) ?? true };
  const socket = new net.Socket(/** @type {any} */ ({ handle, onread, readable: true, writable: true }));
  conn = new Conn(socket);
  socket.on('error', () => undefined);
  socket.on('close', () => { conn?.stream?.close(http2.constants.NGHTTP2_CANCEL); accepted.destroy(); });
  socket.resume();
});
server.listen(Number(opt('--port', 0)), opt('--host', '127.0.0.1'), () => {
  const a = /** @type {net.AddressInfo} */ (server.address());
  console.log(`listening on http://127.0.0.1:${a.port}`);
});
process.on('SIGTERM', () => {
  const file = opt('--stats');
  if (file !== undefined) {
    const per = (k) => (stats.answers === 0 ? 0 : stats[k] / stats.answers).toFixed(2);
    fs.writeFileSync(file, `${JSON.stringify({ ...stats, dataEventsPerAnswer: per('dataEvents'), writesPerAnswer: per('upstreamWrites'), bytesPerAnswer: per('answerBytes') })}\n`);
  }
  process.exit(0);
});
