// Least-request against round robin with one slow replica (upstream.picking): three reference
// backends, the third behind a link that delays every chunk by --delay-ms both ways (a replica on a
// slow or busy host); one gateway from dist/ per policy, the same closed-loop load on each, policies
// alternating over --rounds. Prints p50 / p99 / mean latency and the share of the calls (HTTP/2
// streams, health checks included) that went to the slow replica.
//   node bench/picking.js [--delay-ms 40] [--concurrency 16] [--requests 3000] [--rounds 2] [--dist DIR]
'use strict';
const net = require('node:net');
const path = require('node:path');
const { Pool } = require('undici');
const procs = require('./procs');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const delayMs = Number(opt('--delay-ms', 40));
const concurrency = Number(opt('--concurrency', 16));
const requests = Number(opt('--requests', 3000));
const rounds = Number(opt('--rounds', 2));
if (opt('--dist', undefined) !== undefined) process.env.TENSORGATE_DIST = path.resolve(opt('--dist'));

/**
 * Counts the HTTP/2 streams a client opens on one connection (RFC 9113 §4.1: 9-byte frame headers
 * after the 24-byte preface; a HEADERS frame, type 1, on an odd stream id it has not used yet).
 */
function streamCounter(onStream) {
  let buf = Buffer.alloc(0);
  let skip = 24;
  const seen = new Set();
  return (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      if (skip > 0) {
        const n = Math.min(skip, buf.length);
        buf = buf.subarray(n);
        skip -= n;
        if (skip > 0) return;
      }
      if (buf.length < 9) return;
      const len = buf.readUIntBE(0, 3);
      const type = buf[3];
      const id = buf.readUInt32BE(5) & 0x7fffffff;
      if (type === 1 && !seen.has(id)) { seen.add(id); onStream(); }
      buf = buf.subarray(9);
      skip = len;
    }
  };
}

/** A TCP proxy to `target` that forwards every chunk `ms` late, order kept, both ways; counts the calls. */
function delayProxy(target, ms, counts) {
  const server = net.createServer((client) => {
    const up = net.connect(target.port, '127.0.0.1');
    const due = { up: 0, down: 0 };
    const count = streamCounter(() => { counts.calls++; });
    client.on('data', count);
    const later = (dir, to, chunk) => {
      const at = Math.max(performance.now() + ms, due[dir]);
      due[dir] = at;
      if (ms === 0) to.write(chunk);
      else setTimeout(() => { if (!to.destroyed) to.write(chunk); }, at - performance.now());
    };
    client.on('data', (c) => later('up', up, c));
    up.on('data', (c) => later('down', client, c));
    const end = () => { client.destroy(); up.destroy(); };
    client.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
    resolve({ server, address: `127.0.0.1:${port}` });
  }));
}

/** A proxy that only counts (no delay), for the fast replicas. */
function countingProxy(target, counts) {
  return delayProxy(target, 0, counts);
}

const BODY = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) }] });

async function load(port, n) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1 });
  const times = [];
  let next = 0;
  let errors = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const t0 = performance.now();
      try {
        const r = await pool.request({ path: '/v2/models/identity_uint8/infer', method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } });
        await r.body.arrayBuffer();
        if (r.statusCode !== 200) errors++;
        else times.push(performance.now() - t0);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await pool.close();
  return { times, errors };
}

const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

async function main() {
  const backends = await Promise.all([procs.startReference(), procs.startReference(), procs.startReference()]);
  const counts = [{ calls: 0 }, { calls: 0 }, { calls: 0 }];
  const proxies = [await countingProxy(backends[0], counts[0]), await countingProxy(backends[1], counts[1]), await delayProxy(backends[2], delayMs, counts[2])];
  const targets = proxies.map((p) => p.address);
  console.log(`3 reference backends, the third behind a ${delayMs} ms link; c=${concurrency}, ${requests} requests per cell (after 300 to warm up)`);
  console.log('| policy | round | p50 ms | p99 ms | mean ms | calls to the slow replica | errors |');
  console.log('|---|---|---|---|---|---|---|');
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const picking of ['round-robin', 'least-request']) {
        const gw = await procs.startGateway(`gateway ${picking}`, undefined,
          [...targets.flatMap((t) => ['--backend', t]), '--picking', picking, '--health-check-interval-ms', '1000']);
        await new Promise((r) => setTimeout(r, 1500)); // every backend checked and ready
        await load(gw.port, 300);
        for (const c of counts) c.calls = 0;
        const { times, errors } = await load(gw.port, requests);
        const calls = counts.reduce((a, c) => a + c.calls, 0);
        await procs.stopChild(procs.children.find((c) => c.child === gw.child));
        const s = [...times].sort((a, b) => a - b);
        const slowShare = counts[2].calls / calls;
        const mean = times.reduce((a, b) => a + b, 0) / times.length;
        console.log(`| ${picking} | ${round} | ${q(s, 0.5).toFixed(1)} | ${q(s, 0.99).toFixed(1)} | ${mean.toFixed(1)} | ${(100 * slowShare).toFixed(1)} % | ${errors} |`);
      }
    }
  } finally {
    for (const p of proxies) p.server.close();
    await Promise.all(procs.children.map((c) => procs.stopChild(c)));
  }
}

main().catch(async (err) => {
  console.error(err);
  await Promise.all(procs.children.map((c) => procs.stopChild(c)));
  process.exitCode = 1;
});
