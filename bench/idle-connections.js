// What idle keep-alive connections cost the gateway once they have sent large requests: N
// connections each send K binary 600 KB requests to classifier_fp32 (after the first, the compiled
// lane serves them), 20 connections at a time, then all stay open and idle; the gateway's RSS
// (VmRSS) before and 1.5 s after. A raw-socket client, one request at a time per connection.
//
//   node bench/idle-connections.js --backend-addr HOST:PORT (a running Triton's gRPC, with
//     classifier_fp32: test/triton/zoo.py) [--dist DIR] [--connections 200] [--requests 3]
//     [-- extra gateway flags, e.g. --compiled-lane=false]
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const procs = require('./procs');

const argv = process.argv.slice(2);
const dd = argv.indexOf('--');
const own = dd < 0 ? argv : argv.slice(0, dd);
const extra = dd < 0 ? [] : argv.slice(dd + 1);
const opt = (name, dflt) => (own.includes(name) ? own[own.indexOf(name) + 1] : dflt);
const dist = path.resolve(opt('--dist', procs.DIST));
const backend = opt('--backend-addr', undefined);
const connections = Number(opt('--connections', 200));
const requests = Number(opt('--requests', 3));
if (backend === undefined) {
  process.stderr.write('bench/idle-connections.js: --backend-addr HOST:PORT (a running Triton\'s gRPC with classifier_fp32)\n');
  process.exit(2);
}

const f = new Float32Array(3 * 224 * 224);
for (let i = 0; i < f.length; i++) f[i] = ((i * 7) % 256) / 8;
const bytes = Buffer.from(f.buffer);
const header = Buffer.from(JSON.stringify({
  inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: bytes.length } }],
  outputs: [{ name: 'PROBS', parameters: { binary_data: true } }],
}));
const body = Buffer.concat([header, bytes]);
const request = Buffer.concat([Buffer.from('POST /v2/models/classifier_fp32/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/octet-stream\r\n'
  + `Inference-Header-Content-Length: ${header.length}\r\nContent-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);

/** One connection: `requests` requests, one after the other; resolves with the open socket. */
function client(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let left = requests;
    let buf = Buffer.alloc(0);
    s.on('connect', () => s.write(request));
    s.on('error', reject);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      if (!head.startsWith('HTTP/1.1 200')) return reject(new Error(head.slice(0, 80)));
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
      if (!Number.isSafeInteger(length)) return reject(new Error('an answer without a Content-Length'));
      if (buf.length < end + 4 + length) return;
      buf = buf.subarray(end + 4 + length);
      if (--left > 0) s.write(request);
      else resolve(s);
    });
  });
}

/** @param {number | undefined} pid */
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

(async () => {
  const port = await procs.freePort();
  const gw = spawn(process.execPath, [path.join(dist, 'gateway', 'main.js'), '--backend', backend, '--host', '127.0.0.1', '--port', String(port),
    '--metrics-port', '0', '--log-level', 'warn', '--max-in-flight-requests', String(connections * 2), ...extra], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await procs.waitForPort(port, 15_000);
    const before = rssMb(gw.pid);
    const sockets = [];
    for (let i = 0; i < connections; i += 20) {
      sockets.push(...await Promise.all(Array.from({ length: Math.min(20, connections - i) }, () => client(port))));
    }
    await new Promise((r) => setTimeout(r, 1500));
    const after = rssMb(gw.pid);
    process.stdout.write(`${path.relative(process.cwd(), dist) || dist}${extra.length > 0 ? ` ${extra.join(' ')}` : ''}: ${connections} connections × ${requests} `
      + `requests of 600 KB, then idle: gateway RSS ${before.toFixed(0)} → ${after.toFixed(0)} MB (+${(after - before).toFixed(0)})\n`);
    for (const s of sockets) s.destroy();
  } finally {
    gw.kill();
  }
})().catch((err) => {
  process.stderr.write(`bench/idle-connections.js: ${err.message}\n`);
  process.exit(1);
});
