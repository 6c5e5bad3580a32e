// Throughput of `workers` 1 vs 2 (docs/workers.md): a small JSON inference (identity_fp32, 16
// floats) at fixed concurrency through tensorgate in front of the reference backend, which runs
// in a process of its own so that both gateway shapes talk to the same backend. Closed loop: one
// undici Pool with `concurrency` keep-alive connections from this process, each loop sending its
// next request as soon as the previous answer is read; warm-up and measurement bounded by time.
// Access log off (--log-level warn) in every configuration. Configurations alternate for `rounds`.
// Run: npm run -s build && node_modules/.bin/node bench/workers.js [seconds=10] [concurrency=8] [rounds=2]
'use strict';
const { execFileSync, spawn } = require('node:child_process');
const { readFileSync } = require('node:fs');
const path = require('node:path');
const { Pool } = require('undici');
const { DIST, MAIN_JS, REFERENCE_JS } = require('./procs');

const SECONDS = Number(process.argv[2] ?? 10);
const CONCURRENCY = Number(process.argv[3] ?? 8);
const ROUNDS = Number(process.argv[4] ?? 2);
const WARMUP_MS = 2000;
const ROOT = path.join(__dirname, '..');
const MAIN = path.join(DIST, MAIN_JS);
const BODY = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i / 4) }] });
const CONFIGS = [
  { name: 'workers 1', args: ['--workers', '1'] },
  { name: 'workers 2 (SO_REUSEPORT)', args: ['--workers', '2'] },
  { name: 'workers 2 (shared handle)', args: ['--workers', '2', '--reuse-port=false'] },
];

/** Spawns a process and resolves with the first match of `ready` in its stdout (then keeps draining it). */
function startProcess(args, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT });
    let out = '';
    const onData = (s) => {
      out += s;
      const m = ready.exec(out);
      if (m) {
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve({ child, match: m });
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.once('exit', (c) => reject(new Error(`${args.join(' ')} exited ${c}`)));
  });
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/** CPU seconds (user + system) of a process and of its children (a cluster's workers): Linux /proc. */
function cpuSeconds(pid) {
  const one = (p) => {
    try {
      const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
      return (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime, stime (fields 14 and 15)
    } catch {
      return 0;
    }
  };
  let children = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    // no children file: count the process alone
  }
  return { own: one(pid), children: children.reduce((a, c) => a + one(c), 0) };
}

/** @returns {Promise<void>} */
function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

async function load(url, pid) {
  const pool = new Pool(url, { connections: CONCURRENCY, pipelining: 1 });
  const latencies = [];
  let errors = 0;
  const loop = async (untilMs, record) => {
    while (Date.now() < untilMs) {
      const t0 = process.hrtime.bigint();
      try {
        const r = await pool.request({ path: '/v2/models/identity_fp32/infer', method: 'POST', body: BODY, headersTimeout: 30_000, bodyTimeout: 30_000 });
        await r.body.text();
        if (r.statusCode !== 200) errors++;
        else if (record) latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } catch {
        errors++;
      }
    }
  };
  const warmEnd = Date.now() + WARMUP_MS;
  await Promise.all(Array.from({ length: CONCURRENCY }, () => loop(warmEnd, false)));
  const cpu0 = cpuSeconds(pid);
  const t0 = Date.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, () => loop(t0 + SECONDS * 1000, true)));
  const elapsed = (Date.now() - t0) / 1000;
  const cpu1 = cpuSeconds(pid);
  const own = cpu1.own - cpu0.own;
  const all = own + cpu1.children - cpu0.children;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  // Gateway CPU per request: the process and its workers; `primary` is the cluster primary's part.
  return { rps: latencies.length / elapsed, p50: pct(0.5), p99: pct(0.99), errors,
    cpuMsPerRequest: (all * 1000) / latencies.length, primaryShare: all > 0 && cpu1.children > 0 ? own / all : undefined };
}

async function main() {
  const backend = await startProcess([REFERENCE_JS], /REF_READY (\S+)/);
  const address = backend.match[1];
  /** @type {Map<string, Awaited<ReturnType<typeof load>>[]>} */
  const results = new Map(CONFIGS.map((c) => [c.name, []]));
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of CONFIGS) {
        const gw = await startProcess([MAIN, '--backend', address, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', ...c.args],
          /listening on (http:\/\/\S+)/);
        try {
          const r = await load(gw.match[1], gw.child.pid);
          results.get(c.name)?.push(r);
          console.log(`round ${round} ${c.name}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, `
            + `gateway CPU ${r.cpuMsPerRequest.toFixed(3)} ms/request${r.primaryShare === undefined ? '' : ` (primary ${(r.primaryShare * 100).toFixed(1)} %)`}, errors ${r.errors}`);
        } finally {
          await stop(gw.child);
        }
      }
    }
  } finally {
    await stop(backend.child);
  }
  console.log(`\n| configuration | ${Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}: req/s, p50, gateway CPU/request`).join(' | ')} |`);
  console.log(`|---|${Array.from({ length: ROUNDS }, () => '---').join('|')}|`);
  for (const [name, rs] of results) {
    console.log(`| ${name} | ${rs.map((r) => `${r.rps.toFixed(0)}, ${r.p50.toFixed(2)} ms, ${r.cpuMsPerRequest.toFixed(3)} ms`).join(' | ')} |`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
