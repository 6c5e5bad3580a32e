// The floor of a gRPC pass-through hop on node:http2 with no gateway logic: each client stream
// becomes one upstream stream on one shared session, its headers (pseudo-headers and hop fields
// dropped) and DATA relayed as they come, the answer's headers, DATA and trailers relayed back.
// bench/cpu-per-request.js --form grpc runs it as a "dist" whose gateway/main.js requires it
// (bench/RESULTS.md has the numbers).
'use strict';
require('#dist/gateway/v8-tiering.js'); // the gateway's V8 tier-up: the floor is measured at the gateway's settings
const http2 = require('node:http2');
const a = process.argv.slice(2);
const backend = a[a.indexOf('--backend') + 1];
const session = http2.connect(`http://${backend}`);
const server = http2.createServer();
server.on('stream', (stream, h) => {
  const up = session.request({ ':method': 'POST', ':path': h[':path'], 'content-type': h['content-type'], te: 'trailers' });
  /** @type {import('node:http2').OutgoingHttpHeaders} */
  let trailers = {};
  stream.on('data', (c) => up.write(c));
  stream.on('end', () => up.end());
  up.on('response', (rh) => stream.respond({ ':status': 200, 'content-type': rh['content-type'] }, { waitForTrailers: true }));
  up.on('data', (c) => stream.write(c));
  up.on('trailers', (t) => { trailers = { 'grpc-status': t['grpc-status'], 'grpc-message': t['grpc-message'] ?? '' }; });
  up.on('end', () => stream.end());
  stream.on('wantTrailers', () => stream.sendTrailers(trailers));
  stream.on('error', () => undefined);
  up.on('error', () => undefined);
});
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`));
