// NVIDIA perf_analyzer (C++, the binary of the tritonclient 2.45 wheel), the tool Triton's users
// measure with, against four paths to the same Triton: Triton's HTTP and gRPC endpoints directly,
// tensorgate's REST (HTTP/1.1, KServe V2 with the binary tensor extension: perf_analyzer's `-i http`
// with `--input-tensor-format binary`) and tensorgate's gRPC pass-through (`-i grpc` to the
// gateway's port). For classifier_fp32 (600 KB FP32 input) and image_stats with 64 bytes (the fixed
// cost of a request), at each concurrency (default 1 and 8); every cell is perf_analyzer's closed
// loop (sync mode, one thread per concurrent request, random input), its CSV report (-f) read into
// infer/s and p50/p99 latency, and each tensorgate path is given as a ratio of Triton's own endpoint
// of the same protocol. Prints a markdown table.
//
//   npm run build && node bench/perf-analyzer.js [--concurrency 1,8] [--window-ms 3500] [--warmup-ms 3000]
//       [--models classifier_fp32,image_stats] [--triton HTTP_PORT,GRPC_PORT] [--json FILE] [--paired ROUNDS]
//
// --paired: then the REST target's rounds, paired (perfAnalyzerPaired): Triton HTTP and tensorgate
// REST back to back, ROUNDS times per concurrency, and the median of their ratios.
//
// Alone it starts Triton (the PyTriton zoo with those two models) and a tensorgate from dist/ in
// front of its gRPC port, all on 127.0.0.1, and stops them at the end; bench/run.js runs
// perfAnalyzerPhase() against its own Triton and gateway in a full run and writes the table into
// bench/RESULTS.md. A cell is three windows, each 1.2 × --window-ms long, ~13 s at the default
// 3500, and its report merges the three: infer/s is every request over their summed time, p50/p99
// are taken over every request's latency (triton-inference-server/client's perf_analyzer,
// inference_profiler.cc: InferenceProfiler::Measure and MergePerfStatusReports).
//
// The install (preparePerfAnalyzer): a venv of test/triton/perf-analyzer-requirements.txt, built by
// test/triton/venv.sh and cached; its bin/perf_analyzer is linked against libcudart.so.12 and
// libb64.so.0d and has no RPATH, so LD_LIBRARY_PATH gets the nvidia-cuda-runtime-cu12 wheel's
// nvidia/cuda_runtime/lib, and Debian's libb64-0d is installed with apt-get when missing (as root;
// otherwise the error says so). No GPU is needed: with `--shared-memory none` (the default, given
// here) perf_analyzer makes no CUDA call; `--shared-memory cuda` fails without a driver.
'use strict';
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procs = require('./procs');

const ROOT = path.join(__dirname, '..');
const REQUIREMENTS = path.join(ROOT, 'test/triton/perf-analyzer-requirements.txt');

/** The zoo models measured (test/triton/zoo.py): extra perf_analyzer flags, and what a request carries. */
const MODELS = {
  classifier_fp32: { label: 'classifier_fp32, 600 KB FP32', args: [] },
  image_stats: { label: 'image_stats, 64 B UINT8', args: ['--shape', 'IMAGE:64'] },
};

/** The four paths; a tensorgate path's base is Triton's own endpoint of the same protocol. */
const PATHS = [
  { id: 'triton-http', label: 'Triton HTTP (direct)', target: 'tritonHttp', protocol: 'http' },
  { id: 'tg-rest', label: 'tensorgate REST (V2 binary, HTTP/1.1)', target: 'gateway', protocol: 'http', base: 'triton-http' },
  { id: 'triton-grpc', label: 'Triton gRPC (direct)', target: 'tritonGrpc', protocol: 'grpc' },
  { id: 'tg-grpc', label: 'tensorgate gRPC pass-through (gRPC port)', target: 'gatewayGrpc', protocol: 'grpc', base: 'triton-grpc' },
];

/**
 * @typedef {{ bin: string, env: NodeJS.ProcessEnv, version: string }} PerfAnalyzer
 * @typedef {{ tritonHttp: number, tritonGrpc: number, gateway: number, gatewayGrpc: number }} Ports
 * @typedef {{ models: string[], concurrency: number[], windowMs: number, warmupMs: number }} Options
 * @typedef {{ ok: boolean, error?: string, inferPerSec?: number, p50Ms?: number, p99Ms?: number }} Measured
 * @typedef {Measured & { model: string, concurrency: number, path: string }} Cell
 * @typedef {{ version: string, windowMs: number, results: Cell[] }} PhaseResult
 * @typedef {{ triton: number, gateway: number }} PairedRound
 * @typedef {{ concurrency: number, rounds: PairedRound[] }} PairedRounds
 * @typedef {{ windowMs: number, rounds: number, results: PairedRounds[] }} PairedResult
 */

/**
 * The perf_analyzer binary of the cached venv and the environment it runs in; installs Debian's
 * libb64-0d when the binary cannot load it and this process is root. Throws a one-line reason.
 * @param {(msg: string) => void} log
 * @returns {PerfAnalyzer}
 */
function preparePerfAnalyzer(log) {
  const venv = execFileSync('bash', [path.join(ROOT, 'test/triton/venv.sh'), REQUIREMENTS], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  }).trim().split('\n').pop() ?? '';
  const bin = path.join(venv, 'bin', 'perf_analyzer');
  const python = fs.readdirSync(path.join(venv, 'lib')).find((d) => d.startsWith('python')) ?? 'python3.11';
  const cudart = path.join(venv, 'lib', python, 'site-packages', 'nvidia', 'cuda_runtime', 'lib');
  const env = { ...process.env, LD_LIBRARY_PATH: [cudart, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':') };
  const probe = () => spawnSync(bin, ['--version'], { env, encoding: 'utf8', timeout: 30_000 });
  let r = probe();
  if (/libb64\.so/.test(r.stderr ?? '') && process.getuid?.() === 0) {
    log('libb64-0d is not installed: apt-get install -y libb64-0d (Debian package)');
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'libb64-0d'], {
      stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    r = probe();
  }
  const version = /Perf Analyzer Version (\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1]; // printed on stderr
  if (version === undefined) {
    const why = (r.stderr || r.stdout || r.error?.message || '').trim().split('\n').pop();
    const fix = /libb64/.test(why ?? '') ? ': install libb64-0d (apt-get install -y libb64-0d)' : '';
    throw new Error(`${bin} --version failed (${why})${fix}`);
  }
  return { bin, env, version };
}

/**
 * perf_analyzer's arguments for one cell. Three windows of windowMs (-p), averaged: -r 3 with the
 * stability check off (-s 1000), since on a machine whose cores the gateway, Triton and the client
 * share, the default check (three windows within 10 %) rejects cells ("Failed to obtain stable
 * measurement within 3 measurement windows") and a cell would then report nothing.
 */
function cellArgs(model, port, protocol, concurrency, windowMs, csv, extra = []) {
  return ['-m', model, '-u', `127.0.0.1:${port}`, '-i', protocol, '--concurrency-range', `${concurrency}:${concurrency}`,
    '-p', String(windowMs), '-r', '3', '-s', '1000', '--shared-memory', 'none', '-f', csv, ...MODELS[model].args, ...extra,
    ...(protocol === 'http' ? ['--input-tensor-format', 'binary', '--output-tensor-format', 'binary'] : [])];
}

/**
 * infer/s and p50/p99 (ms) from perf_analyzer's CSV report: a header line, then one line per
 * concurrency (latencies in µs).
 * @returns {Measured}
 */
function parseCsv(text) {
  const [header, row] = text.trim().split('\n').map((l) => l.split(','));
  const col = (name) => {
    const i = header.indexOf(name);
    if (i < 0 || row === undefined) throw new Error(`perf_analyzer's CSV has no "${name}" value: ${text.slice(0, 200)}`);
    return Number(row[i]);
  };
  return { ok: true, inferPerSec: col('Inferences/Second'), p50Ms: col('p50 latency') / 1000, p99Ms: col('p99 latency') / 1000 };
}

/**
 * Runs perf_analyzer once (killed if it outlives its three windows by 30 s).
 * @param {PerfAnalyzer} pa
 * @param {string[]} args
 * @param {string} csv
 * @returns {Promise<Measured>}
 */
function runPerfAnalyzer(pa, args, csv, windowMs) {
  return new Promise((resolve) => {
    const child = spawn(pa.bin, args, { env: pa.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const entry = { name: 'perf_analyzer', child };
    procs.children.push(entry);
    let out = '';
    const keep = (s) => { out = (out + s).slice(-4000); };
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), 3.6 * windowMs + 30_000);
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      procs.children.splice(procs.children.indexOf(entry), 1);
      if (code !== 0) {
        resolve({ ok: false, error: `perf_analyzer exited (${code ?? sig}): ${out.trim().split('\n').slice(-2).join(' ')}` });
        return;
      }
      try { resolve(parseCsv(fs.readFileSync(csv, 'utf8'))); } catch (err) { resolve({ ok: false, error: err.message }); }
    });
  });
}

/**
 * One cell: perf_analyzer on `model` through `port` (`protocol` http or grpc) at `concurrency`, its
 * report written to `csv`; `extra`, more of perf_analyzer's flags (a later --shape overrides the model's).
 * @returns {Promise<Measured>}
 */
function runCell(pa, model, port, protocol, concurrency, windowMs, csv, extra = []) {
  return runPerfAnalyzer(pa, cellArgs(model, port, protocol, concurrency, windowMs, csv, extra), csv, windowMs);
}

/**
 * Every (model × concurrency × path) cell, the four paths of one model and concurrency one after
 * the other; before them, with warmupMs > 0, each path and model once at c=8 for about warmupMs,
 * unrecorded (a gateway's JIT warm-up).
 * @param {PerfAnalyzer} pa
 * @param {Ports} ports
 * @param {Options} opts
 * @param {(msg: string) => void} log
 * @returns {Promise<PhaseResult>}
 */
async function perfAnalyzerPhase(pa, ports, opts, log) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-perf-analyzer-'));
  const csv = path.join(dir, 'report.csv');
  const results = [];
  try {
    const warmWindow = Math.max(100, Math.round(opts.warmupMs / 3));
    for (const model of opts.warmupMs > 0 ? opts.models : []) {
      for (const p of PATHS) {
        const r = await runCell(pa, model, ports[p.target], p.protocol, 8, warmWindow, csv);
        log(`perf_analyzer warm-up ${model} ${p.id}: ${r.ok ? `${fmt(r.inferPerSec)} infer/s` : `FAILED ${r.error}`}`);
      }
    }
    for (const model of opts.models) {
      for (const concurrency of opts.concurrency) {
        for (const p of PATHS) {
          fs.rmSync(csv, { force: true });
          const r = await runCell(pa, model, ports[p.target], p.protocol, concurrency, opts.windowMs, csv);
          results.push({ model, concurrency, path: p.id, ...r });
          log(`perf_analyzer ${model} c=${concurrency} ${p.id}: ${r.ok ? `${fmt(r.inferPerSec)} infer/s, p50 ${fmt(r.p50Ms)} ms, p99 ${fmt(r.p99Ms)} ms` : `FAILED ${r.error}`}`);
        }
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { version: pa.version, windowMs: opts.windowMs, results };
}

/**
 * The REST target's rounds, paired: classifier_fp32 through Triton HTTP directly and through
 * tensorgate REST back to back, `rounds` times per concurrency, Triton first in odd rounds and
 * second in even ones. The cells above measure the two paths a minute apart, and at c=1 this
 * machine drifts between them by more than the target's margin (Triton HTTP direct's own c=1 cell
 * gave 259 and 469 infer/s in two runs of one hour); a round gives one ratio, the target reads their
 * median. A round whose cell fails is left out.
 * @param {PerfAnalyzer} pa
 * @param {Ports} ports
 * @param {{ concurrency: number[], rounds: number, windowMs: number }} opts
 * @param {(msg: string) => void} log
 * @returns {Promise<PairedResult>}
 */
async function perfAnalyzerPaired(pa, ports, opts, log) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-perf-analyzer-'));
  const csv = path.join(dir, 'report.csv');
  const out = [];
  try {
    for (const concurrency of opts.concurrency) {
      const rounds = [];
      for (let i = 0; i < opts.rounds; i++) {
        const got = {};
        for (const id of i % 2 === 0 ? ['triton-http', 'tg-rest'] : ['tg-rest', 'triton-http']) {
          const p = /** @type {typeof PATHS[number]} */ (PATHS.find((x) => x.id === id));
          fs.rmSync(csv, { force: true });
          const r = await runCell(pa, 'classifier_fp32', ports[p.target], p.protocol, concurrency, opts.windowMs, csv);
          if (!r.ok) {
            log(`perf_analyzer paired c=${concurrency} round ${i + 1}: ${id} failed (${r.error}); the round is left out`);
            break;
          }
          got[id] = r.inferPerSec;
        }
        if (got['triton-http'] === undefined || got['tg-rest'] === undefined) continue;
        rounds.push({ triton: got['triton-http'], gateway: got['tg-rest'] });
        log(`perf_analyzer paired c=${concurrency} round ${i + 1}/${opts.rounds}: Triton HTTP ${fmt(got['triton-http'])}, tensorgate REST ${fmt(got['tg-rest'])} infer/s`);
      }
      if (rounds.length > 0) out.push({ concurrency, rounds });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { windowMs: opts.windowMs, rounds: opts.rounds, results: out };
}

/** The median of `values` (at least one), and their range. */
function medianOf(values) {
  const v = [...values].sort((a, b) => a - b);
  const n = v.length;
  const median = n % 2 === 1 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return { median, min: v[0], max: v[n - 1], n };
}

/** The median of paired rounds' ratios (gateway / triton), and their range. */
function pairedMedian(rounds) {
  return medianOf(rounds.map((r) => r.gateway / r.triton));
}

/**
 * The markdown of the paired rounds: one row per round, then each concurrency's median.
 * @param {PairedResult} paired
 */
function renderPaired(paired) {
  const rows = [`classifier_fp32 (600 KB FP32), Triton HTTP direct and tensorgate REST back to back, ${paired.rounds} rounds per concurrency `
    + `(Triton first in rounds 1, 3, …; second in 2, 4, …), each cell three windows of \`-p ${paired.windowMs}\`; the target reads the median of the rounds' ratios.`, '',
  '| conc. | round | Triton HTTP infer/s | tensorgate REST infer/s | ratio |', '|---|---|---|---|---|'];
  for (const { concurrency, rounds } of paired.results) {
    rounds.forEach((r, i) => rows.push(`| ${concurrency} | ${i + 1} | ${fmt(r.triton)} | ${fmt(r.gateway)} | ${fmt(r.gateway / r.triton, 2)}× |`));
    rows.push(`| ${concurrency} | median |  |  | ${fmt(pairedMedian(rounds).median, 2)}× |`);
  }
  return rows.join('\n');
}

function fmt(v, digits) {
  if (v === undefined || Number.isNaN(v)) return '–';
  if (digits !== undefined) return v.toFixed(digits);
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/**
 * The measured cell of a path, model and concurrency (undefined when it failed or did not run).
 * @param {PhaseResult} run
 * @returns {Required<Cell> | undefined}
 */
function findCell(run, id, model, concurrency) {
  return /** @type {Required<Cell> | undefined} */ (run.results.find((r) => r.path === id && r.model === model && r.concurrency === concurrency && r.ok));
}

/**
 * The markdown of a phase: how it was measured, then one row per cell.
 * @param {PhaseResult} run
 */
function renderPerfAnalyzer(run) {
  const rows = [
    `perf_analyzer ${run.version} (tritonclient 2.45 wheel): closed loop at each concurrency (sync mode, one thread per request in flight), random input, `
      + `three windows merged (\`-p ${run.windowMs} -r 3 -s 1000\`, each window 1.2 × ${run.windowMs} ms; the stability check off): infer/s over their time, `
      + 'p50/p99 over every request of the three. '
      + 'REST paths send and ask for binary tensors (the binary tensor extension); × Triton: the tensorgate path against Triton\'s own endpoint of the same protocol, same model and concurrency.',
    '',
    '| model | conc. | path | infer/s | p50 ms | p99 ms | infer/s × Triton | p50 × Triton |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of run.results) {
    const p = /** @type {typeof PATHS[number]} */ (PATHS.find((x) => x.id === r.path));
    const label = `${MODELS[r.model]?.label ?? r.model} | ${r.concurrency} | ${p.label}`;
    if (!r.ok) { rows.push(`| ${label} | failed: ${String(r.error).replace(/\|/g, '/').slice(0, 160)} |||||`); continue; }
    const b = p.base === undefined ? undefined : findCell(run, p.base, r.model, r.concurrency);
    const ratio = (a, base) => (b === undefined ? '' : `${fmt(a / base, 2)}×`);
    rows.push(`| ${label} | ${fmt(r.inferPerSec)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${ratio(r.inferPerSec, b?.inferPerSec)} | ${ratio(r.p50Ms, b?.p50Ms)} |`);
  }
  return rows.join('\n');
}

// ------------------------------------------------------------------ alone: Triton and a gateway of its own

async function main() {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = argv.indexOf(name);
    return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
  };
  const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
  const opts = {
    models: list(opt('--models', Object.keys(MODELS).join(','))),
    concurrency: list(opt('--concurrency', '1,8')).map(Number),
    windowMs: Number(opt('--window-ms', 3500)),
    warmupMs: Number(opt('--warmup-ms', 3000)),
  };
  const pairedRounds = Number(opt('--paired', 0));
  const started = Date.now();
  const log = (msg) => process.stderr.write(`[perf-analyzer ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
  for (const m of opts.models) if (!MODELS[m]) throw new Error(`unknown model ${m} (use ${Object.keys(MODELS).join(', ')})`);
  if (!fs.existsSync(path.join(procs.DIST, procs.MAIN_JS))) throw new Error('dist/ is missing: run `npm run build` first');
  const pa = preparePerfAnalyzer(log);
  log(`perf_analyzer ${pa.version}: ${pa.bin}`);
  const external = opt('--triton', undefined)?.split(',').map(Number);
  const triton = external ? { http: external[0], grpc: external[1], version: '(external)' } : await procs.startTriton(log, opts.models);
  const gateway = await procs.startGateway('tensorgate', `127.0.0.1:${triton.grpc}`, ['--grpc-port-enabled', '--grpc-port', '0']);
  log(`Triton ${triton.version}: HTTP ${triton.http}, gRPC ${triton.grpc}; tensorgate on ${gateway.port} (pid ${gateway.pid})`);
  const ports = { tritonHttp: triton.http, tritonGrpc: triton.grpc, gateway: gateway.port, gatewayGrpc: gateway.grpcPort ?? 0 };
  const run = await perfAnalyzerPhase(pa, ports, opts, log);
  process.stdout.write(`Command: \`node bench/perf-analyzer.js ${argv.join(' ')}\`. Machine: ${procs.machine()}; Triton ${triton.version}.\n\n${renderPerfAnalyzer(run)}\n`);
  const pairedOpts = { concurrency: opts.concurrency, rounds: pairedRounds, windowMs: opts.windowMs };
  const paired = pairedRounds > 0 ? await perfAnalyzerPaired(pa, ports, pairedOpts, log) : undefined;
  if (paired !== undefined) process.stdout.write(`\n${renderPaired(paired)}\n`);
  const json = opt('--json', undefined);
  if (json) fs.writeFileSync(json, `${JSON.stringify({ date: new Date().toISOString(), opts, triton, ...run }, null, 1)}\n`);
}

async function stopAll() {
  for (const e of [...procs.children].reverse()) await procs.stopChild(e, e.name === 'triton' ? 30_000 : 5_000);
}

if (require.main === module) {
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { void stopAll().then(() => process.exit(130)); });
  main().then(stopAll, async (err) => {
    process.stderr.write(`perf-analyzer: ${err.message}\n`);
    await stopAll();
    process.exitCode = 1;
  });
}

module.exports = {
  MODELS, preparePerfAnalyzer, runCell, perfAnalyzerPhase, perfAnalyzerPaired, medianOf, pairedMedian, renderPaired, renderPerfAnalyzer, findCell,
};
