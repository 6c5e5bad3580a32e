// The gateway's gRPC pass-through on a port of its own, for bench/run.js: the gateway from dist/
// (the same configuration as bench/procs.js startGateway gives the REST rows) with its gRPC
// handler (RunningGateway.grpc) on an h2c server. Once the listener serves gRPC on the gateway's
// own port, run.js can point the row there instead. Prints `GRPC_FRONT_READY <port>`; SIGTERM stops it.
'use strict';
const http2 = require('node:http2');
const path = require('node:path');

const DIST = path.join(__dirname, '..', 'dist');
const { loadConfig } = require(path.join(DIST, 'gateway/config/load.js'));
const { startGateway } = require(path.join(DIST, 'gateway/gateway.js'));

(async () => {
  const loaded = loadConfig({ argv: ['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', '--server-timing=false', ...process.argv.slice(2)], env: {} });
  if (loaded.help) throw new Error('no configuration');
  const gw = await startGateway(loaded.config);
  const server = http2.createServer({ settings: { initialWindowSize: 32 * 1024 * 1024 } });
  server.on('session', (s) => s.on('connect', () => s.setLocalWindowSize(32 * 1024 * 1024)));
  server.on('stream', (stream, headers) => gw.grpc(stream, headers));
  server.listen(0, '127.0.0.1', () => process.stdout.write(`GRPC_FRONT_READY ${server.address().port}\n`));
  process.on('SIGTERM', () => {
    server.close();
    gw.close(1000).then(() => process.exit(0));
  });
})().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(1);
});
