// Two gateway trees compared in one run, cells alternating: the way to tell whether a change made
// a path cheaper when single cells move by 15 % from one to the next (bench/RESULTS.md, "Performance
// IV, tenth pass"). Both gateways run side by side on one backend, each warmed up first; then each
// round measures both, each with bench/loadgen.js's load (its forms and clients, as `npm run bench`
// sends them), and prints the gateway's CPU per request and the load's p50. The rounds take turns
// in order, A then B, then B then A (A, B, B, A, …; B first with --b-first), so neither gateway is
// always the one measured second, and a steady drift of the machine's speed over two rounds
// cancels. The verdict is the median of the rounds' own B/A ratios, for CPU per request and for
// p50: a round's two cells ran seconds apart, under the same weather. Run it with the same tree as
// A and B first to see the resolution of the day: on a noisy day an A/A run's rounds spread
// 0.87–1.26 around a median of 1.03 (bench/RESULTS.md, "thirty-second pass").
//
//   node bench/alternate.js --a DIST --b DIST [--form binary|raw|b64|json|grpc] [--payload 64B|600KB|4MB]
//     [--concurrency 8] [--rounds 3] [--cell-ms 3000] [--backend HOST:PORT (a running Triton's gRPC;
//     default: the reference backend)] [--b-backend ADDRESS (B's own backend, e.g. unix:/path of a
//     second Triton's socket; default --backend's)] [--args "FLAGS" (more gateway flags, both)] [--b-first] [--fresh]
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
const bBackend = opt('--b-backend', undefined);
const extra = (opt('--args', '') ?? '').split(' ').filter(Boolean);
const bFirst = argv.includes('--b-first');
// --fresh: each request on a connection of its own (bench/loadgen.js freshSender), HTTP/1.1 forms only.
const fresh = argv.includes('--fresh');

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
      cell: { target: { port }, payload, form, concurrency, warmupMs: 0, durationMs, maxRequests: 1_000_000, fresh },
    });
  });
}

async function main() {
  const ref = backend === undefined ? await procs.startReference() : { address: backend };
  const gateways = [
    { name: `A ${path.relative(process.cwd(), path.resolve(a)) || a}`, ...await procs.startGateway('gateway-a', ref.address, extra, undefined, path.resolve(a)) },
    { name: `B ${path.relative(process.cwd(), path.resolve(b)) || b}${bBackend === undefined ? '' : ` → ${bBackend}`}`,
      ...await procs.startGateway('gateway-b', bBackend ?? ref.address, extra, undefined, path.resolve(b)) },
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
  /** @type {Record<string, number[]>} */
  const cpu = {};
  /** @type {number[]} */
  const cpuRatios = [];
  /** @type {number[]} */
  const p50Ratios = [];
  /** @type {number[]} */
  const rpsRatios = [];
  for (let r = 1; r <= rounds; r++) {
    // A, B / B, A / A, B …: each gateway is second in half the rounds.
    const order = (r % 2 === 1) !== bFirst ? gateways : [gateways[1], gateways[0]];
    /** @type {Map<object, { ms: number, p50: number, rps: number }>} */
    const got = new Map();
    for (const g of order) {
      const c0 = procs.cpuSeconds(g.pid);
      const res = await cell(g.port, cellMs);
      const ms = ((procs.cpuSeconds(g.pid) - c0) * 1000) / res.requests;
      (cpu[g.name] ??= []).push(ms);
      got.set(g, { ms, p50: res.ok ? res.p50 : NaN, rps: res.ok ? res.reqPerSec : NaN });
      process.stdout.write(`round ${r} ${g.name} ${form} ${payload} c=${concurrency}: ${ms.toFixed(3)} ms CPU/req, ${res.requests} requests`
        + `${res.ok ? `, ${res.reqPerSec.toFixed(0)} req/s` : ''}`
        + `${res.ok ? `, p50 ${res.p50?.toFixed(2)} ms` : `, FAILED ${res.error}`}\n`);
    }
    const ra = /** @type {{ ms: number, p50: number, rps: number }} */ (got.get(gateways[0]));
    const rb = /** @type {{ ms: number, p50: number, rps: number }} */ (got.get(gateways[1]));
    cpuRatios.push(rb.ms / ra.ms);
    p50Ratios.push(rb.p50 / ra.p50);
    rpsRatios.push(rb.rps / ra.rps);
    process.stdout.write(`round ${r} B/A: CPU/req ${(rb.ms / ra.ms).toFixed(3)}, p50 ${(rb.p50 / ra.p50).toFixed(3)}, req/s ${(rb.rps / ra.rps).toFixed(3)}\n`);
  }
  const median = (/** @type {number[]} */ xs) => {
    const v = [...xs].sort((x, y) => x - y);
    return v.length % 2 === 1 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  };
  const [ma, mb] = gateways.map((g) => median(cpu[g.name] ?? [NaN]));
  process.stdout.write(`median CPU/req: ${gateways[0].name} ${ma.toFixed(3)} ms, ${gateways[1].name} ${mb.toFixed(3)} ms\n`);
  process.stdout.write(`median of the rounds' B/A: CPU/req ${median(cpuRatios).toFixed(3)} (${Math.min(...cpuRatios).toFixed(2)}–${Math.max(...cpuRatios).toFixed(2)}),`
    + ` p50 ${median(p50Ratios).toFixed(3)} (${Math.min(...p50Ratios).toFixed(2)}–${Math.max(...p50Ratios).toFixed(2)}),`
    + ` req/s ${median(rpsRatios).toFixed(3)} (${Math.min(...rpsRatios).toFixed(2)}–${Math.max(...rpsRatios).toFixed(2)})\n`);
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exitCode = 1;
}).finally(async () => {
  loadgen?.send({ type: 'exit' });
  for (const e of [...procs.children].reverse()) await procs.stopChild(e, 5000);
});
