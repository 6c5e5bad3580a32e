// Quick measurement of telemetry's cost: the same small JSON inference through the demo gateway
// with telemetry at its quietest (no Server-Timing, no access log), at its defaults (Server-Timing,
// info access log to /dev/null), and with tracing on (OTLP to a local sink). Metrics are always on.
// Run: npm run -s build && node_modules/.bin/node bench/telemetry-cost.js [requests]
'use strict';
const { spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const { DIST, MAIN_JS } = require('./procs');

const N = Number(process.argv[2] ?? 3000);
const BIN = path.join(DIST, MAIN_JS);
const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i / 3) }] });

function start(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, '--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    const onData = (s) => {
      out += s;
      const m = /listening on (http:\/\/[^ ]+)/.exec(out);
      if (m) { child.stdout.off('data', onData); child.stdout.resume(); resolve({ child, url: m[1] }); }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.once('exit', (c) => reject(new Error(`exited ${c}`)));
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function once(url) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(`${url}/v2/models/identity_fp32/infer`, { method: 'POST', agent, headers: { 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(Number(process.hrtime.bigint() - t0) / 1e6));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function measure(label, args) {
  const { child, url } = await start(args);
  for (let i = 0; i < 300; i++) await once(url); // warm-up
  const t = [];
  const t0 = Date.now();
  for (let i = 0; i < N; i++) t.push(await once(url));
  const secs = (Date.now() - t0) / 1000;
  t.sort((a, b) => a - b);
  child.kill('SIGTERM');
  console.log(`${label.padEnd(40)} p50 ${t[Math.floor(N / 2)].toFixed(3)} ms  p99 ${t[Math.floor(N * 0.99)].toFixed(3)} ms  ${(N / secs).toFixed(0)} req/s`);
}

void (async () => {
  const sink = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('{}')); });
  await new Promise((r) => sink.listen(0, '127.0.0.1', () => r(undefined)));
  const otlp = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (sink.address()).port}/v1/traces`;
  console.log(`${N} sequential requests (identity_fp32, 16 floats, JSON), node ${process.version}`);
  for (let round = 0; round < 2; round++) {
    await measure('quiet (no Server-Timing, log silent)', ['--server-timing=false', '--log-level', 'silent']);
    await measure('defaults (Server-Timing, info log)', ['--log-level', 'info']);
    await measure('defaults + tracing (OTLP/HTTP)', ['--log-level', 'info', '--tracing', '--otlp-endpoint', otlp]);
  }
  sink.close();
  agent.destroy();
})();
