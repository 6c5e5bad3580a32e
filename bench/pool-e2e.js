// End to end, the message buffer pool on and off (docs/cut-through.md#buffers): one reference backend
// (dist/gateway/reference-backend, near-zero model cost, its own process), two tensorgate
// processes in front of it — default `buffers.poolBytes` and `--buffer-pool-bytes 0` — and the
// load generator of `npm run bench` (bench/loadgen.js, its own process: closed loop, bounded by
// time and count) sending the same request shapes. Each round measures every cell on both
// gateways, alternating which goes first; idle gateways cost nothing while the other is measured.
//
//   npm run -s build && node_modules/.bin/node bench/pool-e2e.js [rounds] [durationMs]
//
// Prints p50, req/s, the gateway's CPU time and minor page faults per request (utime + stime and
// minflt from /proc/<pid>/stat over the cell, divided by every request it served in it, warm-up
// included) per cell — median and min over the rounds — and each gateway's peak RSS. On a shared
// machine CPU time and faults per request are the steadier numbers: latency also carries other
// processes' load.
// Every child is stopped by its pid on exit, error or Ctrl-C.
'use strict';
const { spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { DIST, MAIN_JS, REFERENCE_JS } = require('./procs');

const NODE = process.execPath;
const ROUNDS = Math.max(5, Number(process.argv[2] ?? 5));
const DURATION_MS = Number(process.argv[3] ?? 1500);
const WARMUP_MS = 400;

// The pooled paths: bodies read whole, then decoded into the framed message (JSON numbers, JSON
// base64). Binary and raw bodies with a Content-Length stream into the message (not pooled yet).
const CELLS = [
  { payload: '600KB', form: 'b64', concurrency: 1 },
  { payload: '600KB', form: 'json', concurrency: 1 },
  { payload: '4MB', form: 'b64', concurrency: 1 },
  { payload: '4MB', form: 'b64', concurrency: 8 },
];

const children = [];
const log = (m) => process.stderr.write(`[pool-e2e] ${m}\n`);

function start(name, args, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${name} not ready\n${err.slice(-2000)}`)), 30_000);
    child.stderr.setEncoding('utf8').on('data', (s) => { err += s; });
    child.stdout.setEncoding('utf8').on('data', (s) => {
      out += s;
      const m = ready.exec(out);
      if (m) { clearTimeout(timer); resolve({ child, match: m }); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited (${code})\n${err.slice(-2000)}`)); });
  });
}

function stopAll() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopAll(); process.exit(130); });
process.on('exit', stopAll);

async function gateway(name, backend, extra) {
  const { child, match } = await start(name, [path.join(DIST, MAIN_JS), '--backend', backend, '--host', '127.0.0.1',
    '--port', '0', '--metrics-port', '0', '--log-level', 'warn', '--server-timing=false', ...extra], /listening on http:\/\/[^:]+:(\d+)/);
  return { name, port: Number(match[1]), pid: child.pid };
}

const CLK_TCK = 100; // Linux USER_HZ
/** CPU seconds (utime + stime) and minor page faults of a process so far. */
const usage = (pid) => {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
  return { cpu: (Number(f[11]) + Number(f[12])) / CLK_TCK, minflt: Number(f[7]) };
};
const statusKb = (pid, key) => {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
};

async function main() {
  const ref = await start('reference', [REFERENCE_JS], /REF_READY (\S+)/);
  const backend = ref.match[1];
  const gws = [await gateway('pool on', backend, []), await gateway('pool off', backend, ['--buffer-pool-bytes', '0'])];

  const loadgen = fork(path.join(__dirname, 'loadgen.js'), [], { execPath: NODE, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(loadgen);
  const pending = new Map();
  let nextId = 0;
  await new Promise((resolve) => loadgen.on('message', (/** @type {any} IPC from loadgen.js */ m) => {
    if (m.type === 'ready') resolve(undefined);
    if (m.type === 'result') { pending.get(m.id)(m.result); pending.delete(m.id); }
  }));
  const measure = (cell) => new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    loadgen.send({ type: 'cell', id, cell });
  });

  const results = new Map(); // `${cellIndex}/${gw}` → [{p50, reqPerSec}]
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, c] of CELLS.entries()) {
      const order = round % 2 === 0 ? gws : [...gws].reverse();
      for (const g of order) {
        const u0 = usage(g.pid);
        const r = await measure({ ...c, target: { port: g.port }, warmupMs: WARMUP_MS, durationMs: DURATION_MS, maxRequests: 100_000 });
        if (!r.ok) throw new Error(`${g.name} ${c.payload} ${c.form}: ${r.error}`);
        const u1 = usage(g.pid);
        const served = 1 + r.warmup + r.requests + r.errors;
        const cpuMs = ((u1.cpu - u0.cpu) * 1000) / served;
        const faults = (u1.minflt - u0.minflt) / served;
        const key = `${i}/${g.name}`;
        if (!results.has(key)) results.set(key, []);
        results.get(key).push({ p50: r.p50, reqPerSec: r.reqPerSec, cpuMs, faults });
        log(`round ${round + 1} ${c.payload} ${c.form} c=${c.concurrency} ${g.name}: p50 ${r.p50.toFixed(2)} ms, ${r.reqPerSec.toFixed(1)} req/s, ${cpuMs.toFixed(2)} CPU ms/req, ${faults.toFixed(0)} faults/req`);
      }
    }
  }
  const rss = gws.map((g) => `${g.name}: ${Math.round(statusKb(g.pid, 'VmHWM') / 1024)} MB peak, ${Math.round(statusKb(g.pid, 'VmRSS') / 1024)} MB now`);

  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const f = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
  console.log(`Node ${process.version}, ${ROUNDS} rounds of ${DURATION_MS} ms per cell (warm-up ${WARMUP_MS} ms), reference backend:\n`);
  console.log('| payload | form | conc. | p50 ms on | p50 ms off | req/s on | req/s off | gateway CPU ms/req on | gateway CPU ms/req off | page faults/req on | page faults/req off |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const [i, c] of CELLS.entries()) {
    const on = results.get(`${i}/pool on`);
    const off = results.get(`${i}/pool off`);
    const cellOf = (rs, k) => `${f(median(rs.map((r) => r[k])))} / ${f(Math.min(...rs.map((r) => r[k])))}`;
    const faultsOf = (rs) => Math.round(median(rs.map((r) => r.faults)));
    console.log(`| ${c.payload} | ${c.form} | ${c.concurrency} | ${cellOf(on, 'p50')} | ${cellOf(off, 'p50')} | ${cellOf(on, 'reqPerSec')} | ${cellOf(off, 'reqPerSec')} | ${cellOf(on, 'cpuMs')} | ${cellOf(off, 'cpuMs')} | ${faultsOf(on)} | ${faultsOf(off)} |`);
  }
  console.log('\n(each cell: median / min over the rounds; page faults: median)');
  console.log(`\nGateway memory after the run (/proc VmHWM, VmRSS): ${rss.join('; ')}.`);
  loadgen.send({ type: 'exit' });
}

main().then(() => { stopAll(); process.exit(0); }, (err) => { log(err.stack ?? String(err)); stopAll(); process.exit(1); });
