// The floor of the "compiled plan" design for the REST → gRPC hop (docs/architecture.md, "The HTTP/1.1
// fast path"), measured before the gateway is built around it: what a V2 binary-extension request
// costs when nothing is decided per request that start-up could decide, and neither hop makes
// node:http or node:http2 objects. Per connection one record, per request one upstream handler:
//   - the head read by the gateway's strict parser (ingress/http1/head.js) from reads into one
//     shared buffer (`onread`, the accepted handle adopted as bench/read-loop.js does);
//   - the V2 JSON header read by JSON.parse and checked against the model's plan (names, datatypes,
//     shapes against binary_data_size and the body's length, requested outputs known);
//   - the ModelInferRequest written from the plan's precomputed prefix (model_name) with only the
//     inputs' shapes, the requested outputs and raw_input_contents per request, into one buffer;
//   - the call on the gateway's own HTTP/2 connection (upstream/h2/connection.js): HEADERS from an
//     HPACK block written in place (grpc-timeout per request), HEADERS and the message in one write;
//   - the answer's ModelInferResponse read field by field and answered in the binary extension
//     (the JSON header from the plan's fragments, the outputs' bytes after it) in one socket write.
// No telemetry, no admission, no limits, no timeouts: what is left is the design's own cost, to
// set against nginx's hop and the gateway's in one run (bench/RESULTS.md). A request outside the
// subset is answered 400 and its connection closed; a failed call 502.
//
// Started by bench/cpu-per-request.js as a "dist" whose gateway/main.js requires this file:
//   mkdir -p /tmp/plan/gateway && echo "require('<this tree>/bench/plan-floor.js')" > /tmp/plan/gateway/main.js
//   node bench/cpu-per-request.js --dist /tmp/plan --form binary --payload 64B --requests 3000 --gc-bytes
// The models' plans are the reference backend's (gateway/reference-backend/zoo.ts) it serves.
'use strict';
const net = require('node:net');
const { HAND_OFF, HeadParser, PARTIAL } = require('#dist/gateway/ingress/http1/head.js');
const { H2Connection } = require('#dist/gateway/upstream/h2/connection.js');
const { BlockWriter } = require('#dist/gateway/upstream/h2/hpack.js');
const { formatGrpcTimeout } = require('#dist/gateway/grpc/timeout.js');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const backend = opt('--backend', '127.0.0.1:8001');
const DEADLINE_MS = 60_000;

// ---- plans, decided at start-up

const SIZE = { UINT8: 1, INT8: 1, BOOL: 1, INT16: 2, UINT16: 2, FP16: 2, BF16: 2, INT32: 4, UINT32: 4, FP32: 4, INT64: 8, UINT64: 8, FP64: 8 };
/** The models served, as their configs say (the reference backend's zoo). */
const MODELS = {
  image_stats: { version: '1', inputs: [{ name: 'IMAGE', datatype: 'UINT8', dims: [-1] }], outputs: [{ name: 'LEN', datatype: 'INT64' }, { name: 'SUM', datatype: 'UINT64' }], maxBatch: 8 },
  classifier_fp32: { version: '1', inputs: [{ name: 'INPUT', datatype: 'FP32', dims: [3, 224, 224] }], outputs: [{ name: 'PROBS', datatype: 'FP32' }], maxBatch: 8 },
};

/** A string field's bytes: tag, length, UTF-8. */
function stringField(tag, s) {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([Buffer.from([tag]), varintBytes(b.length), b]);
}
function varintBytes(n) { const o = []; while (n > 127) { o.push((n & 127) | 128); n = Math.floor(n / 128); } o.push(n); return Buffer.from(o); }
const varintSize = (n) => { let s = 1; while (n > 127) { n = Math.floor(n / 128); s++; } return s; };
function writeVarint(b, at, n) { while (n > 127) { b[at++] = (n & 127) | 128; n = Math.floor(n / 128); } b[at++] = n; return at; }

/** What each model's requests are framed and answered from. */
const PLANS = new Map();
for (const [name, m] of Object.entries(MODELS)) {
  const inputs = new Map(m.inputs.map((t, i) => [t.name, {
    index: i, datatype: t.datatype, size: SIZE[t.datatype], dims: t.dims,
    // InferInputTensor's name and datatype (fields 1, 2), ahead of the shape written per request.
    head: Buffer.concat([stringField(0x0a, t.name), stringField(0x12, t.datatype)]),
  }]));
  const outputs = new Map(m.outputs.map((t) => [t.name, {
    datatype: t.datatype,
    // InferRequestedOutputTensor (ModelInferRequest field 6) whole: it has only a name.
    requested: (() => { const f = stringField(0x0a, t.name); return Buffer.concat([Buffer.from([0x32]), varintBytes(f.length), f]); })(),
    // The answer's JSON for this output up to its shape.
    jsonHead: `{"name":${JSON.stringify(t.name)},"datatype":"${t.datatype}","shape":[`,
  }]));
  PLANS.set(name, {
    name, maxBatch: m.maxBatch, inputs, outputs,
    prefix: stringField(0x0a, name), // ModelInferRequest.model_name
    answerHead: `{"model_name":${JSON.stringify(name)},"model_version":"${m.version}","outputs":[`,
  });
}
const INFER = /^\/v2\/models\/([^/]+)(?:\/versions\/[0-9]+)?\/infer$/;

// ---- the upstream connection

const [bhost, bport] = [backend.slice(0, backend.lastIndexOf(':')), Number(backend.slice(backend.lastIndexOf(':') + 1))];
const h2 = new H2Connection({ host: bhost, port: bport, streamWindow: 4 << 20, connectionWindow: 32 << 20, maxFrameSize: 4 << 20 });
const block = new BlockWriter();
const AUTHORITY = backend;

/** One upstream call's answer: the DATA gathered (one message), the gRPC status. */
class Call {
  constructor(conn, plan) {
    this.conn = conn; this.plan = plan;
    this.buf = undefined; this.at = 0; this.status = -1; this.statusMessage = '';
  }
  field(name, value) {
    if (name === 'grpc-status') this.status = Number(value);
    else if (name === 'grpc-message') this.statusMessage = value;
  }
  headers() {}
  data(chunk, from, to) {
    const n = to - from;
    if (this.buf === undefined) {
      // The envelope's length is in the first 5 bytes (a first piece shorter than 5: gathered).
      const total = n >= 5 ? 5 + chunk.readUInt32BE(from + 1) : 64 * 1024;
      this.buf = Buffer.allocUnsafe(total);
    }
    if (this.at + n > this.buf.length) { const g = Buffer.allocUnsafe(this.at + n); this.buf.copy(g, 0, 0, this.at); this.buf = g; }
    chunk.copy(this.buf, this.at, from, to);
    this.at += n;
  }
  end() { this.conn.answered(this); }
  closed(code, processed, reason) { this.status = 14; this.statusMessage = reason; this.conn.answered(this); }
}

// ---- one client connection

class Conn {
  constructor(socket) {
    this.socket = socket;
    this.parser = new HeadParser({ maxHeaderBytes: 16384, maxHeaderCount: 100, maxUrlBytes: 8192 });
    this.state = 0; // 0 head, 1 body, 2 waiting for the answer
    this.body = undefined; this.bodyAt = 0; this.bodyLen = 0; this.headerLen = 0;
    this.plan = undefined; this.keepAlive = true;
    this.pending = undefined; // bytes after the body while an answer is owed
    this.done = false;
  }

  onRead(n, buf) {
    this.consume(buf, 0, n);
    return true;
  }

  consume(buf, at, n) {
    while (at < n && !this.done) {
      if (this.state === 2) {
        // Pipelined bytes: held (copied: the read buffer is shared) until the answer is out.
        const b = Buffer.from(buf.subarray(at, n));
        this.pending = this.pending === undefined ? b : Buffer.concat([this.pending, b]);
        return;
      }
      if (this.state === 1) {
        const k = Math.min(this.bodyLen - this.bodyAt, n - at);
        buf.copy(this.body, this.bodyAt, at, at + k);
        this.bodyAt += k; at += k;
        if (this.bodyAt === this.bodyLen) this.call(this.body, 0);
        continue;
      }
      const v = this.parser.feed(buf, at, n);
      if (v === PARTIAL) return;
      if (v === HAND_OFF) { this.reject('outside the strict subset'); return; }
      const p = this.parser;
      const route = p.method === 'POST' ? INFER.exec(p.target()) : null;
      const plan = route === null ? undefined : PLANS.get(route[1]);
      const ihcl = p.value(10); // inference-header-content-length
      if (plan === undefined || ihcl === undefined) { this.reject('not an inference request of a known model'); return; }
      this.plan = plan; this.keepAlive = p.keepAlive;
      this.headerLen = Number(ihcl);
      this.bodyLen = p.contentLength;
      at = p.bodyStart;
      if (n - at >= this.bodyLen) { this.call(buf, at); at += this.bodyLen; continue; } // whole in this read
      this.body = Buffer.allocUnsafe(this.bodyLen); this.bodyAt = 0; this.state = 1;
    }
  }

  /** The body (whole, at buf[at, at + bodyLen)): checked against the plan, framed, sent. */
  call(buf, at) {
    this.state = 2;
    const { plan, headerLen, bodyLen } = this;
    let header;
    try {
      header = JSON.parse(buf.utf8Slice(at, at + headerLen));
    } catch { this.reject('the inference header is not JSON'); return; }
    const ins = header.inputs;
    if (!Array.isArray(ins) || ins.length !== plan.inputs.size) { this.reject('inputs'); return; }
    // Sizes first: every check before anything is allocated.
    let msgLen = plan.prefix.length;
    let dataLen = 0;
    const ordered = [];
    for (let i = 0; i < ins.length; i++) {
      const t = ins[i];
      const tp = plan.inputs.get(t.name);
      if (tp === undefined || t.datatype !== tp.datatype || !Array.isArray(t.shape)) { this.reject(`input ${t.name}`); return; }
      const shape = t.shape;
      if (shape.length !== tp.dims.length + (plan.maxBatch > 0 ? 1 : 0)) { this.reject('shape'); return; }
      let count = 1; let shapeBytes = 0;
      for (let k = 0; k < shape.length; k++) {
        const d = shape[k];
        if (!Number.isSafeInteger(d) || d < 0) { this.reject('shape'); return; }
        count *= d; shapeBytes += varintSize(d);
      }
      const size = t.parameters?.binary_data_size;
      if (size !== count * tp.size) { this.reject('binary_data_size'); return; }
      dataLen += size;
      const tensorLen = tp.head.length + 1 + varintSize(shapeBytes) + shapeBytes;
      msgLen += 1 + varintSize(tensorLen) + tensorLen + 1 + varintSize(size) + size;
      ordered.push(tp, shape, shapeBytes, tensorLen, size);
    }
    if (headerLen + dataLen !== bodyLen) { this.reject('body length'); return; }
    const outs = header.outputs;
    const wanted = [];
    if (outs !== undefined) {
      if (!Array.isArray(outs)) { this.reject('outputs'); return; }
      for (let i = 0; i < outs.length; i++) {
        const op = plan.outputs.get(outs[i].name);
        if (op === undefined) { this.reject(`output ${outs[i].name}`); return; }
        wanted.push(op); msgLen += op.requested.length;
      }
    }
    // The gRPC envelope and the message in one buffer.
    const msg = Buffer.allocUnsafe(5 + msgLen);
    msg[0] = 0; msg.writeUInt32BE(msgLen, 1);
    let w = 5 + plan.prefix.copy(msg, 5);
    for (let i = 0; i < ordered.length; i += 5) {
      const tp = ordered[i]; const shape = ordered[i + 1]; const shapeBytes = ordered[i + 2]; const tensorLen = ordered[i + 3];
      msg[w++] = 0x2a; w = writeVarint(msg, w, tensorLen); // inputs (5)
      w += tp.head.copy(msg, w);
      msg[w++] = 0x1a; w = writeVarint(msg, w, shapeBytes); // shape (3), packed
      for (let k = 0; k < shape.length; k++) w = writeVarint(msg, w, shape[k]);
    }
    for (let i = 0; i < wanted.length; i++) w += wanted[i].requested.copy(msg, w);
    let data = at + headerLen;
    for (let i = 0; i < ordered.length; i += 5) {
      const size = ordered[i + 4];
      msg[w++] = 0x3a; w = writeVarint(msg, w, size); // raw_input_contents (7)
      buf.copy(msg, w, data, data + size); w += size; data += size;
    }
    block.begin();
    block.field(':method', 'POST');
    block.field(':scheme', 'http');
    block.field(':path', '/inference.GRPCInferenceService/ModelInfer');
    block.field(':authority', AUTHORITY);
    block.field('content-type', 'application/grpc');
    block.field('te', 'trailers');
    block.field('grpc-timeout', formatGrpcTimeout(DEADLINE_MS));
    try {
      h2.request(block.end(), new Call(this, plan), msg, true);
    } catch (err) { this.reject(err.message, '502 Bad Gateway'); }
  }

  /** The call's answer: its ModelInferResponse read and answered in the binary extension. */
  answered(call) {
    if (this.done) return;
    if (call.status !== 0 || call.buf === undefined) { this.reject(`upstream status ${call.status} ${call.statusMessage}`, '502 Bad Gateway'); return; }
    const b = call.buf; const end = call.at;
    /** A varint at b[i] (i advanced past it through `at`). */
    const at = { i: 0 };
    const varint = () => { let v = 0; let sh = 0; let c; do { c = b[at.i++]; v += (c & 127) * 2 ** sh; sh += 7; } while (c & 128); return v; };
    let i = 5;
    let json = call.plan.answerHead;
    const raws = [];
    let rawBytes = 0; let n = 0;
    /** @type {string[]} */
    const names = [];
    /** @type {number[][]} */
    const shapes = [];
    while (i < end) {
      const tag = b[i++];
      let len = 0; let s = 0; let c;
      do { c = b[i++]; len += (c & 127) * 2 ** s; s += 7; } while (c & 128);
      if (tag === 0x2a) { // outputs (5): InferOutputTensor
        const stop = i + len; let name = ''; const shape = [];
        while (i < stop) {
          const t = b[i++]; let l = 0; let s2 = 0; let c2;
          do { c2 = b[i++]; l += (c2 & 127) * 2 ** s2; s2 += 7; } while (c2 & 128);
          if (t === 0x0a) name = b.utf8Slice(i, i + l);
          else if (t === 0x1a) {
            at.i = i;
            while (at.i < i + l) shape.push(varint());
          }
          i += l;
        }
        names.push(name); shapes.push(shape);
      } else if (tag === 0x32) { // raw_output_contents (6)
        raws.push(i, len); rawBytes += len; i += len;
      } else {
        i += len; // model_name, model_version, id, parameters: the plan has them
      }
    }
    for (let k = 0; k < names.length; k++) {
      const op = call.plan.outputs.get(names[k]);
      json += `${n++ > 0 ? ',' : ''}${op.jsonHead}${shapes[k].join(',')}],"parameters":{"binary_data_size":${raws[2 * k + 1]}}}`;
    }
    json += ']}';
    const jsonLen = Buffer.byteLength(json);
    const headLine = `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: ${jsonLen}\r\n`
      + `Content-Length: ${jsonLen + rawBytes}\r\n${this.keepAlive ? '' : 'Connection: close\r\n'}\r\n`;
    const out = Buffer.allocUnsafe(headLine.length + jsonLen + rawBytes);
    let o = out.write(headLine, 0, 'latin1');
    o += out.write(json, o, 'utf8');
    for (let k = 0; k < raws.length; k += 2) o += b.copy(out, o, raws[k], raws[k] + raws[k + 1]);
    this.socket.write(out);
    if (!this.keepAlive) { this.done = true; this.socket.end(); return; }
    this.state = 0;
    const held = this.pending;
    if (held !== undefined) { this.pending = undefined; this.consume(held, 0, held.length); }
  }

  reject(reason, status = '400 Bad Request') {
    if (this.done) return;
    this.done = true;
    const body = JSON.stringify({ error: reason });
    this.socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  }
}

/** Every connection reads into this one buffer; what outlives a read is copied out of it. */
const SHARED_READ = Buffer.allocUnsafeSlow(64 * 1024);
const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (accepted) => {
  const anyAccepted = /** @type {any} */ (accepted);
  const handle = anyAccepted._handle;
  anyAccepted._handle = null;
  let conn;
  const onread = { buffer: SHARED_READ, callback: (n, b) => conn.onRead(n, b) };
  const socket = new net.Socket(/** @type {any} */ ({ handle, onread, readable: true, writable: true }));
  conn = new Conn(socket);
  socket.on('error', () => undefined);
  socket.on('close', () => { conn.done = true; accepted.destroy(); });
  socket.resume();
});
server.listen(Number(opt('--port', 0)), opt('--host', '127.0.0.1'), () => {
  console.log(`listening on http://127.0.0.1:${/** @type {net.AddressInfo} */ (server.address()).port}`);
});
process.on('SIGTERM', () => process.exit(0));
