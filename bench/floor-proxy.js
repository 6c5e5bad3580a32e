// The floor of a REST → gRPC hop on node:http + node:http2 with no gateway logic, per byte: a raw
// body (`POST /v2/models/{m}/infer`, m's one input below) is cut through — a ModelInferRequest head
// framed from Content-Length, then each body chunk written to the upstream stream as it arrives —
// and the answer's gRPC message bytes are returned as they are, with no conversion. bench/run.js
// measures it beside tensorgate and nginx (path floor-raw); bench/read-loop.js is the same hop on
// our own read loop; both are also run by bench/cpu-per-request.js as a "dist" whose
// gateway/main.js requires them (bench/RESULTS.md has the numbers).
//   node bench/floor-proxy.js --backend HOST:PORT   (prints "listening on http://127.0.0.1:PORT")
'use strict';
require('#dist/gateway/v8-tiering.js'); // the gateway's V8 tier-up: the floor is measured at the gateway's settings
const http = require('node:http');
const http2 = require('node:http2');
const a = process.argv.slice(2);
const backend = a[a.indexOf('--backend') + 1];
const { inference } = require('#dist/proto/services.js');
const varint = (n) => { const o = []; while (n > 127) { o.push((n & 127) | 128); n = Math.floor(n / 128); } o.push(n); return Buffer.from(o); };
const session = http2.connect(`http://${backend}`, { settings: { initialWindowSize: 4 << 20 } });
const headers = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' };
/** The one input of each model the benches send raw bodies to (test/triton/zoo.py). */
const INPUTS = {
  image_stats: (n) => ({ name: 'IMAGE', datatype: 'UINT8', shape: [1, n] }),
  classifier_fp32: () => ({ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }),
};
const server = http.createServer((req, res) => {
  const n = Number(req.headers['content-length']);
  const model = /^\/v2\/models\/([^/]+)\/infer$/.exec(req.url ?? '')?.[1] ?? '';
  const input = INPUTS[model];
  if (input === undefined) {
    res.writeHead(404).end();
    return;
  }
  const head = Buffer.from(inference.ModelInferRequest.encode({ model_name: model, inputs: [input(n)] }).finish());
  const field = Buffer.concat([Buffer.from([0x3a]), varint(n)]);
  const total = head.length + field.length + n;
  const prefix = Buffer.alloc(5); prefix.writeUInt32BE(total, 1);
  const s = session.request(headers);
  s.write(Buffer.concat([prefix, head, field]));
  req.on('data', (c) => { if (!s.write(c)) { req.pause(); s.once('drain', () => req.resume()); } });
  req.on('end', () => s.end());
  const chunks = [];
  s.on('error', () => { if (!res.headersSent) res.writeHead(502).end(); });
  // The gRPC status: in the trailers, or in the headers of a trailers-only answer. Not OK is a 502
  // (the bench counts only 200s), so a refused call cannot pass for a fast one.
  let status;
  s.on('response', (h) => { status ??= h['grpc-status']; });
  s.on('trailers', (t) => { status = t['grpc-status']; });
  s.on('data', (c) => chunks.push(c));
  s.on('end', () => {
    const b = Buffer.concat(chunks);
    res.writeHead(status === '0' ? 200 : 502, { 'content-type': 'application/octet-stream', 'content-length': b.length });
    res.end(b);
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`));
process.on('SIGTERM', () => process.exit(0));
