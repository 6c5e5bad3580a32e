// perf_analyzer's REST rounds against several gateway builds in front of one Triton, in one run:
// each round runs Triton HTTP directly and then every build (rotated, so no build always follows
// Triton), and each build's infer/s is read as a ratio of that round's Triton cell; beside it, the
// gateway's CPU a request (its process's CPU time over the cell, over infer/s × the cell's time:
// perf_analyzer's start and its statistics calls are in both, alike for every build). For changes
// that only the C++ client's write pattern shows (libcurl writes a head alone, then the body 64 KiB
// at a time), where bench/alternate.js's own load generator cannot.
//
//   npm run build && node bench/perf-analyzer-ab.js --dist NAME=DIR[,NAME=DIR…] [--rounds 6] [--concurrency 1]
//       [--window-ms 3500] [--model classifier_fp32] [--pa-args "--shape IMAGE:4194304"]
//
// DIR is a tree's dist/ (e.g. a git worktree of the commit before, built); `this` is this tree's.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procs = require('./procs');
const pa = require('./perf-analyzer');

async function main() {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = argv.indexOf(name);
    return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
  };
  const builds = opt('--dist', 'this=dist').split(',').map((x) => {
    const [name, dir] = x.split('=');
    return { name, dir: path.resolve(dir === 'dist' ? procs.DIST : dir) };
  });
  const rounds = Number(opt('--rounds', 6));
  const concurrency = Number(opt('--concurrency', 1));
  const windowMs = Number(opt('--window-ms', 3500));
  const model = opt('--model', 'classifier_fp32');
  const extra = opt('--pa-args', '').split(' ').filter(Boolean);
  if (pa.MODELS[model] === undefined) throw new Error(`unknown model ${model}`);
  const started = Date.now();
  const log = (msg) => process.stderr.write(`[perf-analyzer-ab ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
  const analyzer = pa.preparePerfAnalyzer(log);
  const triton = await procs.startTriton(log, [model]);
  for (const b of builds) {
    b.gateway = await procs.startGateway(b.name, `127.0.0.1:${triton.grpc}`, [], undefined, b.dir);
    log(`${b.name} (${b.dir}) on ${b.gateway.port}`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-pa-ab-'));
  const csv = path.join(dir, 'report.csv');
  const cell = async (port) => {
    fs.rmSync(csv, { force: true });
    return pa.runCell(analyzer, model, port, 'http', concurrency, windowMs, csv, extra);
  };
  const ratios = Object.fromEntries(builds.map((b) => [b.name, []]));
  const cpu = Object.fromEntries(builds.map((b) => [b.name, []]));
  /** @type {Record<string, number>[]} */
  const rows = [];
  try {
    // Warm-up: each gateway's first requests (kept heads, the JIT) are not measured.
    for (const b of builds) await cell(b.gateway.port);
    for (let r = 0; r < rounds; r++) {
      const base = await cell(triton.http);
      if (!base.ok) { log(`round ${r + 1}: Triton failed (${base.error})`); continue; }
      const order = builds.map((_, i) => builds[(i + r) % builds.length]);
      const baseRate = base.inferPerSec ?? NaN;
      /** @type {Record<string, number>} */
      const got = { triton: baseRate };
      for (const b of order) {
        const cpu0 = procs.cpuSeconds(b.gateway.pid), t0 = Date.now();
        const x = await cell(b.gateway.port);
        if (!x.ok || x.inferPerSec === undefined) { log(`round ${r + 1}: ${b.name} failed (${x.error})`); continue; }
        const rate = x.inferPerSec;
        cpu[b.name].push((procs.cpuSeconds(b.gateway.pid) - cpu0) * 1e3 / (rate * (Date.now() - t0) / 1e3));
        got[b.name] = rate;
        ratios[b.name].push(rate / baseRate);
      }
      rows.push(got);
      log(`round ${r + 1}: ${Object.entries(got).map(([k, v]) => `${k} ${(v ?? NaN).toFixed(0)}`).join(', ')}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const lines = [`Command: \`node bench/perf-analyzer-ab.js ${argv.join(' ')}\`. Machine: ${procs.machine()}; Triton ${triton.version}; `
    + `perf_analyzer ${analyzer.version}, ${model}${extra.length > 0 ? ` (${extra.join(' ')})` : ''}, c=${concurrency}, REST with binary tensors, each cell three windows of \`-p ${windowMs}\`.`, '',
  `| round | Triton HTTP infer/s | ${builds.map((b) => `${b.name} infer/s (× Triton)`).join(' | ')} |`,
  `|---|---|${builds.map(() => '---').join('|')}|`];
  rows.forEach((g, i) => {
    const t = g.triton ?? NaN;
    lines.push(`| ${i + 1} | ${t.toFixed(0)} | ${builds.map((b) => {
      const v = g[b.name];
      return v === undefined ? '–' : `${v.toFixed(0)} (${(v / t).toFixed(2)}×)`;
    }).join(' | ')} |`);
  });
  lines.push(`| median |  | ${builds.map((b) => {
    if (ratios[b.name].length === 0) return '–';
    const m = pa.medianOf(ratios[b.name]);
    return `${m.median.toFixed(2)}× (${m.min.toFixed(2)}–${m.max.toFixed(2)})`;
  }).join(' | ')} |`);
  lines.push(`| gateway CPU ms a request, median |  | ${builds.map((b) => (cpu[b.name].length === 0 ? '–'
    : pa.medianOf(cpu[b.name]).median.toFixed(3))).join(' | ')} |`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function stopAll() {
  for (const e of [...procs.children].reverse()) await procs.stopChild(e, e.name === 'triton' ? 30_000 : 5_000);
}

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { void stopAll().then(() => process.exit(130)); });
main().then(stopAll, async (err) => {
  process.stderr.write(`perf-analyzer-ab: ${err.message}\n`);
  await stopAll();
  process.exitCode = 1;
});
