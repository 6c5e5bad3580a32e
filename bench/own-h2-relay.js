// The floor of a gRPC pass-through hop on an HTTP/2 server of our own, measured before building
// one (bench/RESULTS.md, "Performance IV, tenth pass"): the client's connection is read by
// upstream/h2/frames.ts's FrameReader and upstream/h2/hpack.ts's decoder instead of node:http2's
// server, each unary call is relayed on the gateway's own HTTP/2 client (upstream/h2/connection.ts),
// and the answer goes back as HEADERS, DATA and trailers in one socket write. It is the twin of
// bench/floor-grpc.js (node:http2 on both sides, no logic): no limits, no errors answered, no flow
// control beyond giving back what was read — a measuring tool, not a server. bench/cpu-per-request.js
// --form grpc runs it as a "dist" whose gateway/main.js requires it (as floor-grpc.js).
'use strict';
const net = require('node:net');
const path = require('node:path');

const dist = process.env.OWN_H2_DIST ?? path.join(__dirname, '..', 'dist');
const f = require(path.join(dist, 'gateway/upstream/h2/frames.js'));
const { HpackDecoder, headerBlock } = require(path.join(dist, 'gateway/upstream/h2/hpack.js'));
const { H2Connection } = require(path.join(dist, 'gateway/upstream/h2/connection.js'));

const a = process.argv.slice(2);
const [host, port] = a[a.indexOf('--backend') + 1].split(':');
const upstream = new H2Connection({ host, port: Number(port) });

/** The answer's headers: the same literal fields every time (no dynamic table), so encoded once. */
const ANSWER_HEADERS = headerBlock([[':status', '200'], ['content-type', 'application/grpc']]);
const WINDOW = 16 * 1024 * 1024;

function settingsFrame() {
  const p = Buffer.alloc(12);
  p.writeUInt16BE(f.SETTINGS_MAX_CONCURRENT_STREAMS, 0);
  p.writeUInt32BE(1000, 2);
  p.writeUInt16BE(f.SETTINGS_INITIAL_WINDOW_SIZE, 6);
  p.writeUInt32BE(WINDOW, 8);
  const w = Buffer.alloc(4);
  w.writeUInt32BE(WINDOW - 65535, 0);
  return Buffer.concat([f.frame(f.SETTINGS, 0, 0, p), f.frame(f.WINDOW_UPDATE, 0, 0, w)]);
}

/** One call: the client's stream, and the upstream stream's handler. */
class Call {
  constructor(conn, id) {
    this.conn = conn;
    this.id = id;
    this.path = '';
    this.body = [];
    this.answer = [];
    this.answerBytes = 0;
    this.trailers = [];
  }

  // The client's request headers (FieldSink of the connection's decoder), then the answer's
  // headers and trailers (the upstream stream's): its status fields are kept for the trailers.
  field(name, value) {
    if (this.up === undefined) {
      if (name === ':path') this.path = value;
      return;
    }
    if (name === 'grpc-status' || name === 'grpc-message') this.trailers.push([name, value]);
  }

  send() {
    const block = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', this.path], [':authority', `${host}:${port}`],
      ['content-type', 'application/grpc'], ['te', 'trailers']]);
    this.up = upstream.request(block, this, this.body, true);
  }

  // StreamHandler of the upstream stream.
  headers() { /* the status fields came through field() */ }

  data(chunk, from, to) {
    const piece = Buffer.from(chunk.subarray(from, to)); // a view of the client's read buffer: copied
    this.answer.push(piece);
    this.answerBytes += piece.length;
  }

  end() {
    this.conn.answer(this);
  }

  closed() {
    this.conn.reset(this.id);
  }
}

class ServerConnection {
  constructor(socket) {
    this.socket = socket;
    this.reader = new f.FrameReader(this);
    this.hpack = new HpackDecoder(4096);
    this.calls = new Map();
    this.preface = 0;
    this.unacked = 0;
    this.block = undefined;
    /** @type {Call | undefined} the call whose header block is being read */
    this.call = undefined;
    this.socket.setNoDelay(true);
    this.socket.write(settingsFrame());
    socket.on('data', (chunk) => this.read(chunk));
    socket.on('error', () => socket.destroy());
    socket.on('close', () => { for (const c of this.calls.values()) if (c.up !== undefined) upstream.reset(c.up); });
  }

  read(chunk) {
    let at = 0;
    if (this.preface < f.PREFACE.length) {
      at = Math.min(f.PREFACE.length - this.preface, chunk.length);
      this.preface += at;
      if (at === chunk.length) return;
      chunk = chunk.subarray(at);
    }
    this.socket.cork();
    this.reader.push(chunk);
    if (this.unacked > WINDOW / 2) {
      const w = Buffer.allocUnsafe(4);
      w.writeUInt32BE(this.unacked, 0);
      this.socket.write(f.frame(f.WINDOW_UPDATE, 0, 0, w));
      this.unacked = 0;
    }
    this.socket.uncork();
  }

  frameStart(length, type, flags, stream) {
    this.type = type;
    this.flags = flags;
    this.stream = stream;
    if (type === f.DATA) this.unacked += length;
    return true;
  }

  dataPiece(chunk, from, to) {
    // Padding is not stripped: the load generators send none.
    this.calls.get(this.stream)?.body.push(chunk.subarray(from, to));
  }

  frameEnd(payload) {
    const { type, flags, stream } = this;
    if (type === f.HEADERS || type === f.CONTINUATION) {
      let p = payload;
      if (type === f.HEADERS) {
        let at = 0;
        let end = p.length;
        if (flags & f.PADDED) { end -= p[0]; at = 1; }
        if (flags & f.PRIORITY_FLAG) at += 5;
        p = p.subarray(at, end);
        this.call = new Call(this, stream);
        this.calls.set(stream, this.call);
        this.endStream = (flags & f.END_STREAM) !== 0;
      }
      this.block = this.block === undefined ? p : Buffer.concat([this.block, p]);
      const call = this.call;
      if (flags & f.END_HEADERS && call !== undefined) {
        this.hpack.decode(this.block, call);
        this.block = undefined;
        if (this.endStream) call.send();
      }
    } else if (type === f.DATA) {
      if (flags & f.END_STREAM) this.calls.get(stream)?.send();
    } else if (type === f.SETTINGS) {
      if (!(flags & f.ACK)) this.socket.write(f.frame(f.SETTINGS, f.ACK, 0));
    } else if (type === f.PING) {
      if (!(flags & f.ACK)) this.socket.write(f.frame(f.PING, f.ACK, 0, payload));
    } else if (type === f.RST_STREAM) {
      const c = this.calls.get(stream);
      this.calls.delete(stream);
      if (c?.up !== undefined) upstream.reset(c.up);
    }
    return true;
  }

  /** The whole answer in one write: HEADERS, DATA, trailers with END_STREAM. */
  answer(call) {
    this.calls.delete(call.id);
    const trailers = headerBlock(call.trailers.length > 0 ? call.trailers : [['grpc-status', '0']]);
    const n = 3 * f.FRAME_HEADER_BYTES + ANSWER_HEADERS.length + call.answerBytes + trailers.length;
    const out = Buffer.allocUnsafe(n);
    let at = f.writeFrameHeader(out, 0, ANSWER_HEADERS.length, f.HEADERS, f.END_HEADERS, call.id);
    at += ANSWER_HEADERS.copy(out, at);
    at = f.writeFrameHeader(out, at, call.answerBytes, f.DATA, 0, call.id);
    for (const p of call.answer) at += p.copy(out, at);
    at = f.writeFrameHeader(out, at, trailers.length, f.HEADERS, f.END_HEADERS | f.END_STREAM, call.id);
    trailers.copy(out, at);
    this.socket.write(out);
  }

  reset(id) {
    if (!this.calls.delete(id)) return;
    const p = Buffer.alloc(4);
    p.writeUInt32BE(f.CANCEL, 0);
    this.socket.write(f.frame(f.RST_STREAM, 0, id, p));
  }
}

const server = net.createServer((socket) => new ServerConnection(socket));
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`));
