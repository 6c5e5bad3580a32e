// JSON FP32 600 KB (classifier_fp32, the bench's tg-json body) through tensorgate in front of the
// reference backend (its own process), with different gateway flags — decode threads
// (limits.decodeThreads) or worker processes (`workers`) — alternated for `rounds`. Closed loop from
// this process: one undici Pool, `concurrency` keep-alive connections, warm-up then measurement,
// each bounded by time. Per configuration and concurrency: req/s, p50, the gateway's CPU per
// request (all its threads and worker processes, /proc) and its main thread's CPU per request
// (/proc/PID/task/PID: what saturates first when one JS thread does everything).
// Run: npm run -s build && node bench/json-threads.js [seconds=3] [concurrencies=1,8,32] [rounds=2] [configs=t0,t1]
//   configs: t<N> = --decode-threads N, w<N> = --workers N --decode-threads 0, w<N>t<M> = both.
'use strict';
const fs = require('node:fs');
const { Pool } = require('undici');
const { children, stopChild, startGateway, startReference, cpuSeconds } = require('./procs');

const SECONDS = Number(process.argv[2] ?? 3);
const CONCURRENCIES = (process.argv[3] ?? '1,8,32').split(',').map(Number);
const ROUNDS = Number(process.argv[4] ?? 2);
const CONFIGS = (process.argv[5] ?? 't0,t1').split(',');
const WARMUP_MS = 1000;
const CLK_TCK = 100;

const n = 3 * 224 * 224;
const f = new Float32Array(n);
for (let i = 0; i < n; i++) f[i] = ((i * 7) % 256) / 8; // the values bench/loadgen.js sends
const BODY = Buffer.from(JSON.stringify({
  inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], data: Array.from(f) }],
  outputs: [{ name: 'PROBS' }],
}));

function argsOf(config) {
  const m = /^(?:w(\d+))?(?:t(\d+))?$/.exec(config);
  if (m === null) throw new Error(`unknown config ${config}`);
  return [...(m[1] ? ['--workers', m[1]] : []), '--decode-threads', m[2] ?? '0'];
}

function kids(pid) {
  try { return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number); } catch { return []; }
}

/** utime + stime of one thread (the main thread: tid = pid). */
function threadCpu(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const x = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(x[11]) + Number(x[12])) / CLK_TCK;
  } catch { return 0; }
}

async function cell(port, pids, concurrency) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1 });
  const send = async () => {
    const r = await pool.request({ path: '/v2/models/classifier_fp32/infer', method: 'POST', body: BODY, headers: { 'content-type': 'application/json' },
      headersTimeout: 60_000, bodyTimeout: 60_000 });
    await r.body.text();
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
  };
  const loop = async (until, lat) => {
    while (Date.now() < until) {
      const t0 = process.hrtime.bigint();
      await send();
      lat?.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, () => loop(Date.now() + WARMUP_MS)));
  const lat = [];
  const cpu0 = pids.reduce((s, p) => s + cpuSeconds(p), 0);
  const mains0 = pids.map(threadCpu);
  const t0 = Date.now();
  await Promise.all(Array.from({ length: concurrency }, () => loop(t0 + SECONDS * 1000, lat)));
  const wall = (Date.now() - t0) / 1000;
  const cpu = pids.reduce((s, p) => s + cpuSeconds(p), 0) - cpu0;
  // The busiest main thread (with workers: each worker process's main thread serves its share).
  const mainMax = Math.max(...pids.map((p, i) => threadCpu(p) - mains0[i]));
  await pool.close();
  lat.sort((a, b) => a - b);
  const reqs = lat.length;
  return { reqs, rps: reqs / wall, p50: lat[Math.floor((reqs - 1) / 2)], cpuPerReq: (cpu / reqs) * 1000, mainBusy: mainMax / wall };
}

async function main() {
  const ref = await startReference();
  const rows = [];
  try {
    for (let r = 1; r <= ROUNDS; r++) {
      for (const config of CONFIGS) {
        const g = await startGateway(`tensorgate-${config}`, ref.address, argsOf(config));
        const entry = children[children.length - 1];
        try {
          const pids = [g.pid, ...kids(g.pid)];
          for (const c of CONCURRENCIES) {
            const m = await cell(g.port, pids, c);
            rows.push({ round: r, config, c, ...m });
            console.log(`round ${r} ${config.padEnd(6)} c=${String(c).padEnd(2)} req/s ${m.rps.toFixed(1).padStart(6)}  p50 ${m.p50.toFixed(1).padStart(6)} ms`
              + `  CPU/req ${m.cpuPerReq.toFixed(2).padStart(6)} ms  main thread busy ${(m.mainBusy * 100).toFixed(0).padStart(3)} %  (n ${m.reqs}, load ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]})`);
          }
        } finally {
          await stopChild(entry);
        }
      }
    }
  } finally {
    for (const e of [...children].reverse()) await stopChild(e);
  }
}

main().catch((err) => {
  console.error(err);
  for (const e of children) try { e.child.kill('SIGKILL'); } catch { /* gone */ }
  process.exit(1);
});
