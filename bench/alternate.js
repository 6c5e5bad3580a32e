// Two gateway trees compared in one run, cells alternating: the way to tell whether a change made
// a path cheaper when single cells move by 15 % from one to the next (bench/RESULTS.md, "Performance
// IV, tenth pass"). Both gateways run side by side on one backend, each warmed up first; then each
// round measures A, then B (or B first with --b-first), each with bench/loadgen.js's load (its
// forms and clients, as `npm run bench` sends them), and prints the gateway's CPU per request.
//
//   node bench/alternate.js --a DIST --b DIST [--form binary|raw|b64|json|grpc] [--payload 64B|600KB|4MB]
//     [--concurrency 8] [--rounds 3] [--cell-ms 3000] [--backend HOST:PORT (a running Triton's gRPC;
//     default: the reference backend)] [--b-first]
//
// The reference backend serves image_stats only (64B and 4MB payloads); 600KB (classifier_fp32) needs Triton.
'use strict';
const path = require('node:path');
const { fork } = require('node:child_process');
const procs = require('./procs');

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const a = opt('--a', undefined);
const b = opt('--b', undefined);
if (a === undefined || b === undefined) {
  process.stderr.write('bench/alternate.js: --a DIST and --b DIST are required (two built dist/ directories)\n');
  process.exit(2);
}
const form = opt('--form', 'binary');
const payload = opt('--payload', '64B');
const concurrency = Number(opt('--concurrency', 8));
const rounds = Number(opt('--rounds', 3));
const cellMs = Number(opt('--cell-ms', 3000));
const backend = opt('--backend', undefined);
const bFirst = argv.includes('--b-first');

/** @type {import('node:child_process').ChildProcess | undefined} */
let loadgen;
let nextId = 0;
/** @type {Map<number, (r: any) => void>} */
const pending = new Map();

/** One cell of bench/loadgen.js against `port`: its result ({ ok, requests, p50, … }). */
function cell(port, durationMs) {
  return new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    loadgen?.send({
      type: 'cell', id,
      cell: { target: { port }, payload, form, concurrency, warmupMs: 0, durationMs, maxRequests: 1_000_000 },
    });
  });
}

async function main() {
  const ref = backend === undefined ? await procs.startReference() : { address: backend };
  const gateways = [
    { name: `A ${path.basename(path.dirname(path.resolve(a)))}`, ...await procs.startGateway('gateway-a', ref.address, [], undefined, path.resolve(a)) },
    { name: `B ${path.basename(path.dirname(path.resolve(b)))}`, ...await procs.startGateway('gateway-b', ref.address, [], undefined, path.resolve(b)) },
  ];
  loadgen = fork(path.join(__dirname, 'loadgen.js'), [], { execPath: procs.NODE, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  loadgen.on('message', (/** @type {any} */ m) => {
    if (m.type === 'result') {
      pending.get(m.id)?.(m.result);
      pending.delete(m.id);
    }
  });
  await new Promise((resolve) => loadgen?.on('message', (/** @type {any} */ m) => { if (m.type === 'ready') resolve(undefined); }));
  // Warm-up: the JIT's steady state (bench/run.js jitWarmup), unrecorded.
  for (const g of gateways) await cell(g.port, 3000);
  const order = bFirst ? [gateways[1], gateways[0]] : gateways;
  /** @type {Record<string, number[]>} */
  const cpu = {};
  for (let r = 1; r <= rounds; r++) {
    for (const g of order) {
      const c0 = procs.cpuSeconds(g.pid);
      const res = await cell(g.port, cellMs);
      const ms = ((procs.cpuSeconds(g.pid) - c0) * 1000) / res.requests;
      (cpu[g.name] ??= []).push(ms);
      process.stdout.write(`round ${r} ${g.name} ${form} ${payload} c=${concurrency}: ${ms.toFixed(3)} ms CPU/req, ${res.requests} requests`
        + `${res.ok ? `, p50 ${res.p50?.toFixed(2)} ms` : `, FAILED ${res.error}`}\n`);
    }
  }
  const median = (/** @type {number[]} */ xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  const [ma, mb] = gateways.map((g) => median(cpu[g.name] ?? [NaN]));
  process.stdout.write(`median CPU/req: ${gateways[0].name} ${ma.toFixed(3)} ms, ${gateways[1].name} ${mb.toFixed(3)} ms (B/A ${(mb / ma).toFixed(2)})\n`);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exitCode = 1;
}).finally(async () => {
  loadgen?.send({ type: 'exit' });
  for (const e of [...procs.children].reverse()) await procs.stopChild(e, 5000);
});
