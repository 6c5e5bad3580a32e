// The JavaScript side of the compiled lane's probe (docs/architecture.md, "What a planned request
// costs, and the layer below it"), lane.c: the request served from kept bytes — its head compared byte for byte with
//     a kept head, its binary header with a kept body plan, the gRPC call on libnghttp2 (the copy
//     the node binary exports), the answer matched against a kept answer and written with the
//     gateway's own head bytes, the Date line's value kept current in C.
// The lane parses nothing: what JavaScript decided for a head holds for the same bytes. Here this
// script plays JavaScript's part: the first request of the shape is given back to it, sent to the
// gateway for its answer, and kept (the message as the gateway frames it for this model, the
// answer's raw output contents as runs); the lane serves every request after it. Before measuring,
// one answer of the lane is compared with the gateway's, byte for byte but the Date line's value.
// Measured by hop.js beside nginx and the gateway (`node bench/native-floor/hop.js --payload 64B|600KB`),
// which runs serveLane() in a child of its own.
'use strict';
const net = require('node:net');
const { exchange } = require('./exchange');

/**
 * Serves the lane on a port of its own, in front of Triton's gRPC port, learning from the gateway's
 * port; tells the parent its port, and answers 'counts' and 'stop'.
 * @param {string} built the compiled lane.c
 * @param {string} grpcPort
 * @param {string} gwPort
 */
function serveLane(built, grpcPort, gwPort) {
  const lane = require(built);
  const { inference } = require('#dist/proto/services.js');
  const sockets = new Map();
  /** What was learnt of the one request shape the bench sends: the gateway's answer, the plan. */
  let learnt;
  const L = lane.init((id, bytes, what, detail) => {
    const socket = sockets.get(id);
    sockets.delete(id);
    if (bytes === null) { socket.destroy(); return; }
    if (what === 2) { // HB_FAILED: the probe has no error answers of its own
      process.stderr.write(`lane probe: a call failed: ${JSON.stringify(detail)}\n`);
      socket.destroy();
      return;
    }
    // The request whole (the lane gives back what it had read), then learnt and answered here.
    const whole = (b) => {
      const end = b.indexOf('\r\n\r\n');
      return end >= 0 && b.length >= end + 4 + Number(/\r\ncontent-length: *(\d+)/i.exec(b.subarray(0, end).toString('latin1'))?.[1] ?? 0);
    };
    const go = () => learn(bytes, what === 3 ? detail : null).then((answer) => {
      socket.write(answer);
      sockets.set(lane.serve(L, socket._handle.fd), socket);
    }, (err) => { process.stderr.write(`lane probe: ${err.stack}\n`); socket.destroy(); });
    if (whole(bytes)) { void go(); return; }
    const more = (d) => {
      bytes = Buffer.concat([bytes, d]);
      if (!whole(bytes)) return;
      socket.removeListener('data', more);
      socket.pause();
      void go();
    };
    socket.on('data', more);
    socket.resume();
  }, (records) => { recorded += records.length / 8; }, 60_000, { headersTimeoutMs: 60_000, requestTimeoutMs: 300_000, keepAliveTimeoutMs: 5_000 });
  let recorded = 0;
  const up = lane.connect(L, Number(grpcPort), `127.0.0.1:${grpcPort}`, '127.0.0.1', ['content-type', 'application/grpc', 'te', 'trailers']);
  /**
   * @param {Buffer} bytes
   * @param {Buffer | null} message
   */
  async function learn(bytes, message) {
    const end = bytes.indexOf('\r\n\r\n');
    const head = bytes.subarray(0, end + 4);
    const text = head.toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1]);
    const ihcl = Number(/\r\ninference-header-content-length: *(\d+)/i.exec(text)?.[1]);
    const body = bytes.subarray(end + 4, end + 4 + length);
    if (learnt === undefined) {
      const header = JSON.parse(body.subarray(0, ihcl).toString('utf8'));
      const tensor = body.subarray(ihcl);
      const msg = Buffer.from(inference.ModelInferRequest.encode({
        model_name: /\/v2\/models\/([^/]+)\//.exec(text)?.[1],
        inputs: header.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape })),
        outputs: header.outputs.map((o) => ({ name: o.name })),
      }).finish());
      const prefix = Buffer.concat([msg, Buffer.from([0x3a]), varint(tensor.length)]);
      const framed = Buffer.alloc(5);
      framed.writeUInt32BE(prefix.length + tensor.length, 1);
      learnt = { head, length, bodyHeader: Buffer.from(body.subarray(0, ihcl)), segs: [[Buffer.concat([framed, prefix]), 0, 0], [null, tensor.length, ihcl]],
        answer: await exchange(Number(gwPort), bytes.subarray(0, end + 4 + length)) };
      lane.keep(L, head, length, up, learnt.bodyHeader, learnt.segs, [[Buffer.alloc(0), 0, 0]], Buffer.alloc(0), -1);
      return learnt.answer;
    }
    if (message !== null) {
      // The answer's runs: each raw_output_contents' bytes (field 6), the rest matched as kept.
      /** @type {[Buffer | null, number, number][]} */
      const match = [];
      let lit = [];
      const m = message.subarray(5);
      let at = 0;
      while (at < m.length) {
        const start = at;
        const tag = m[at++];
        let len = 0, shift = 0, b;
        do { b = m[at++]; len += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
        if (tag === 0x32) {
          lit.push(m.subarray(start, at));
          match.push([Buffer.concat(lit), 0, 0], [null, len, 0]);
          lit = [];
        } else lit.push(m.subarray(start, at + len));
        at += len;
      }
      if (lit.length > 0) match.push([Buffer.concat(lit), 0, 0]);
      const runs = match.filter((s) => s[0] === null).reduce((n, s) => n + s[1], 0);
      const answerHead = learnt.answer.subarray(0, learnt.answer.length - runs);
      const dateAt = answerHead.toString('latin1').toLowerCase().indexOf('\r\ndate: ');
      lane.keep(L, learnt.head, learnt.length, up, learnt.bodyHeader, learnt.segs, match, answerHead, dateAt < 0 ? -1 : dateAt + 8);
    }
    return learnt.answer;
  }
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    sockets.set(lane.serve(L, /** @type {any} */ (socket)._handle.fd), socket); // paused: Node never reads it
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: /** @type {net.AddressInfo} */ (server.address()).port }));
  process.on('message', (m) => {
    if (m === 'counts') process.send?.({ ...lane.counts(L), recorded: recorded + lane.drain(L).length / 8 });
    if (m === 'stop') process.exit(0);
  });
}

/** A protobuf varint. */
function varint(n) {
  const out = [];
  while (n > 0x7f) { out.push((n & 0x7f) | 0x80); n = Math.floor(n / 128); }
  out.push(n);
  return Buffer.from(out);
}

module.exports = { serveLane };
