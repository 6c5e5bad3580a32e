// The floor of a REST → gRPC hop on node:http + node:http2 with no gateway logic, per byte: a raw
// body (image_stats UINT8 [1, n]) is cut through — a ModelInferRequest head framed from
// Content-Length, then each body chunk written to the upstream stream as it arrives — and the
// answer's bytes are returned as they are. bench/read-loop.js is the same hop on our own read
// loop; both are run by bench/cpu-per-request.js as a "dist" whose gateway/main.js requires them
// (bench/RESULTS.md has the numbers).
'use strict';
const http = require('node:http');
const http2 = require('node:http2');
const a = process.argv.slice(2);
const backend = a[a.indexOf('--backend') + 1];
const { inference } = require('#dist/proto/services.js');
const varint = (n) => { const o = []; while (n > 127) { o.push((n & 127) | 128); n = Math.floor(n / 128); } o.push(n); return Buffer.from(o); };
const session = http2.connect(`http://${backend}`, { settings: { initialWindowSize: 4 << 20 } });
const headers = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' };
const server = http.createServer((req, res) => {
  const n = Number(req.headers['content-length']);
  const head = Buffer.from(inference.ModelInferRequest.encode({ model_name: 'image_stats', inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, n] }] }).finish());
  const field = Buffer.concat([Buffer.from([0x3a]), varint(n)]);
  const total = head.length + field.length + n;
  const prefix = Buffer.alloc(5); prefix.writeUInt32BE(total, 1);
  const s = session.request(headers);
  s.write(Buffer.concat([prefix, head, field]));
  req.on('data', (c) => { if (!s.write(c)) { req.pause(); s.once('drain', () => req.resume()); } });
  req.on('end', () => s.end());
  const chunks = [];
  s.on('data', (c) => chunks.push(c));
  s.on('end', () => { const b = Buffer.concat(chunks); res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': b.length }); res.end(b); });
});
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`));
process.on('SIGTERM', () => process.exit(0));
