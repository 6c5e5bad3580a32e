#!/usr/bin/env node
// The lane probe's outcomes (lane.c), each against a backend that behaves so (node:http2 playing
// Triton's gRPC port): answered; grpc-status 3; RST_STREAM INTERNAL_ERROR; REFUSED_STREAM; no
// answer within the call's deadline; a client idle past keep-alive; a head slower than its bound; a
// head not kept; the backend's connection lost; a request after that. Each prints what the client saw
// and what the lane gave back to JavaScript (which answers 599 here), and the run fails when one is
// not what lane.c says it does.
//   node bench/native-floor/lane-faults.js
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http2 = require('node:http2');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-lane-faults-'));
const built = path.join(tmp, 'lane.node');
const source = path.join(__dirname, '..', '..', 'gateway', 'native', 'lane.c');
execFileSync(process.env.CC || 'cc', ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', '-I/usr/include/node', '-o', built, source]);
const lane = require(built);
fs.rmSync(tmp, { recursive: true, force: true });
/**
 * What each case must give: the client's status line, and what was given back ([what], or
 * [what, grpcStatus, rst] for a failed call).
 * @type {Record<string, [string, string]>}
 */
const EXPECT = {
  ok: ['HTTP/1.1 200 OK', '[0]'], error: ['HTTP/1.1 599 JS', '[2,3,0]'], rst: ['HTTP/1.1 599 JS', '[2,-1,2]'], refuse: ['HTTP/1.1 599 JS', '[1]'],
  slow: ['HTTP/1.1 599 JS', '[2,4,8]'], idle: ['(closed)', '[0]'], slowhd: ['HTTP/1.1 599 JS', '[1]'], miss: ['HTTP/1.1 599 JS', '[1]'],
  die: ['HTTP/1.1 599 JS', '[2,14,0]'], after: ['HTTP/1.1 599 JS', '[1]'],
};
let wrong = 0;
let mode = 'ok';
const message = Buffer.from([0, 0, 0, 0, 4, 0x0a, 0x02, 0x6d, 0x6d]); // a 4-byte message: field 1 "mm"
const h2 = http2.createServer();
h2.on('stream', (stream) => {
  stream.on('error', () => {});
  stream.on('data', () => {});
  stream.on('end', () => {
    if (mode === 'ok') {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(message);
    } else if (mode === 'error') stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '3', 'grpc-message': 'bad input' }, { endStream: true });
    else if (mode === 'rst') stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    else if (mode === 'refuse') stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    else if (mode === 'die') stream.session?.socket.destroy();
    // 'slow': never answers
  });
});
const events = [];
/** @param {string} name @param {string} line */
function check(name, line) {
  const got = JSON.stringify(events.map((e) => (e.what === 2 ? [e.what, e.detail.grpcStatus, e.detail.rst] : [e.what])).slice(0, 1)[0] ?? []);
  const [line0, back] = EXPECT[name];
  const ok = line === line0 && got === back;
  if (!ok) wrong++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name.padEnd(7)} | client saw: ${line.padEnd(18)} | given back: ${JSON.stringify(events)}`);
}
h2.listen(0, '127.0.0.1', () => {
  const hp = /** @type {net.AddressInfo} */ (h2.address()).port;
  const sockets = new Map();
  const L = lane.init((id, bytes, what, detail) => {
    events.push({ what, bytes: bytes === null ? null : bytes.length, detail: Buffer.isBuffer(detail) ? `message ${detail.length}` : detail });
    const s = sockets.get(id);
    if (bytes === null) s.destroy(); else { s.write('HTTP/1.1 599 JS\r\ncontent-length: 0\r\n\r\n'); s.end(); }
  }, () => {}, 300, { headersTimeoutMs: 500, requestTimeoutMs: 800, keepAliveTimeoutMs: 400 });
  const up = lane.connect(L, hp, `127.0.0.1:${hp}`);
  const head = Buffer.from('POST /v2/models/m/infer HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\n');
  lane.keep(L, head, 3, up, Buffer.from('ab'), [[Buffer.from([0, 0, 0, 0, 2, 0x0a, 0x00]), 0, 0]], [[Buffer.from([0x0a, 0x02, 0x6d, 0x6d]), 0, 0]], Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'), -1);
  const srv = net.createServer({ pauseOnConnect: true }, (s) => sockets.set(lane.serve(L, /** @type {any} */ (s)._handle.fd), s));
  srv.listen(0, '127.0.0.1', () => void run());
  async function run() {
    const port = /** @type {net.AddressInfo} */ (srv.address()).port;
    const one = (bytes, wait = 1500) => new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      let got = '';
      c.on('data', (d) => { got += d.toString('latin1'); });
      c.on('close', () => resolve(got.split('\r\n')[0] || '(closed)'));
      c.on('error', () => {});
      if (bytes) c.write(bytes);
      setTimeout(() => c.destroy(), wait);
    });
    const req = Buffer.concat([head, Buffer.from('abc')]);
    for (const m of ['ok', 'error', 'rst', 'refuse', 'slow']) {
      mode = m; events.length = 0;
      const line = await one(req, 1000);
      check(m, line);
    }
    mode = 'ok'; events.length = 0;
    check('idle', await one(null, 1000));
    events.length = 0;
    check('slowhd', await one(Buffer.from('POST /v2/mo'), 1000));
    events.length = 0;
    check('miss', await one(Buffer.from('GET / HTTP/1.1\r\n\r\n'), 600));
    mode = 'die'; events.length = 0;
    check('die', await one(req, 1000));
    events.length = 0;
    check('after', await one(req, 1000));
    console.log(JSON.stringify(lane.counts(L)));
    process.exit(wrong === 0 ? 0 : 1);
  }
});
