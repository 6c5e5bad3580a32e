// `npm run bench [-- --quick]`: tensorgate side by side with Triton's own HTTP frontend, nginx in
// front of it and direct gRPC, in one run.
//
// Starts, on 127.0.0.1 with free ports:
//   - real Triton: the PyTriton zoo (test/triton/zoo.py in the cached venv of test/triton/venv.sh);
//   - nginx (Debian's package) as a plain reverse proxy in front of Triton's HTTP port (keepalive
//     upstream, request bodies streamed, daemon off, config/pid/logs in a temp dir);
//   - tensorgate (dist/, production settings: log level warn, no Server-Timing) → Triton's gRPC port;
//   - the reference backend (dist/gateway/reference-backend, near-zero model cost) in its own
//     process, and a second tensorgate in front of it: the gateway's own overhead apart from
//     PyTriton's Python backend cost;
//   - the load generator (bench/loadgen.js) in its own process, one cell at a time.
// Measures each (payload × path × concurrency) cell, the gateway's (or nginx's) CPU from
// /proc/<pid>/stat and its peak RSS from /proc/<pid>/status VmHWM (reset per cell through
// /proc/<pid>/clear_refs), and writes bench/RESULTS.md (a new section on top, older ones kept)
// and an SVG chart of p50 ratios. Every child is stopped by its pid (Triton by its process group,
// which this script created) on exit, error or Ctrl-C. Then, with --quick or --soak-s N, the soak
// (bench/soak.js) runs in its own process once the rest is stopped and writes its own section.
'use strict';
const { spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  DIST, MAIN_JS, NODE, GATEWAY_NODE_FLAGS, gatewayEnv, children, stopChild, startProcess, startGateway, startReference, startTriton: startZoo, cpuSeconds,
  statusKb, resetPeak, machine, childPids,
} = require('./procs');
const { startNginx: startNginxIn } = require('./nginx');
const { preparePerfAnalyzer, perfAnalyzerPhase, perfAnalyzerPaired, medianOf, pairedMedian, renderPaired, renderPerfAnalyzer, findCell } = require('./perf-analyzer');

// ------------------------------------------------------------------ options

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
if (flag('--help') || flag('-h')) {
  process.stdout.write(`npm run bench [-- options]
  --quick               64 B, 600 KB and 4 MB, concurrency 1 and 8, short cells, a memory phase, then a 30-s soak (< 5 min)
  --payloads LIST       comma-separated from 64B,600KB,4MB,16MB
  --concurrency LIST    e.g. 1,8,32
  --warmup-ms N         warm-up per cell        --duration-ms N   measurement per cell
  --jit-warmup-ms N     before the cells, each proxy serves every form it is measured on for N ms at 64 B,
                        then N ms at 600 KB and at 4 MB (when measured), c=8, unrecorded (default 3000, 500 with --quick; 0: none): a
                        JIT runtime's steady state, which a long-running proxy is in, not its first seconds
  --max-requests N      cap per cell            --budget-s N      whole run (cells past it are skipped)
  --json-16mb           also run JSON for 16 MB (slow: ~60 MB of JSON numbers per request)
  --no-ref              skip the reference-backend series
  --paths IDS           only these paths (comma-separated ids: triton-bin, nginx-bin, tg-bin, tg-b64, ref-tg-json, …;
                        see PATHS in bench/run.js); the base of each series runs anyway. Implies --no-write
  --soak-s N            after the cells, with Triton and nginx stopped: bench/soak.js for N s (1,000
                        keep-alive connections, mixed forms, reference backend); default 30 with --quick,
                        0 (none) otherwise; 600 and more replace the full soak's section of RESULTS.md
  --no-write            print the tables, leave bench/RESULTS.md and the SVG alone
  --cut-through-only    no cells: only the cut-through phase (16 × 16 MiB uploads, RSS); implies --no-write
  --memory-only         no cells: only the memory phase (a fresh gateway per path, 8 × 4 MiB in flight:
                        warm RSS, peak RSS, RSS after the burst); with --paths, only those paths; implies --no-write
  --no-memory           skip the memory phase
  --gateway-args 'A B'  extra flags for the tensorgate process (e.g. '--decode-threads 0', '--workers 2'); implies --no-write
  --perf-analyzer       after the cells: NVIDIA perf_analyzer (bench/perf-analyzer.js) against Triton HTTP and gRPC,
                        tensorgate REST and the gRPC pass-through, c=1 and c=8 (on by default in a full run that
                        writes RESULTS.md; --no-perf-analyzer leaves it out)
  --pa-window-ms N      perf_analyzer's measurement window (-p); a cell is three of 1.2 × N ms each (default 3500)
  --before-dist DIR     also measure a gateway built from another tree (DIR: its dist/, e.g. a worktree of an older
                        commit, built), binary, raw and the gRPC pass-through, beside this one in the same run:
                        the CPU and p50 targets then give that gateway's ratio too (before/after in one run)
  --triton HTTP,GRPC    use a Triton already listening on 127.0.0.1 (development)
  --from-json FILE      no measuring: re-render RESULTS.md and the chart from a recorded run
`);
  process.exit(0);
}
const QUICK = flag('--quick');
const list = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
const cfg = {
  mode: QUICK ? 'quick' : 'full',
  payloads: list(opt('--payloads', QUICK ? '64B,600KB,4MB' : '64B,600KB,4MB,16MB')),
  concurrency: list(opt('--concurrency', QUICK ? '1,8' : '1,8,32')).map(Number),
  warmupMs: Number(opt('--warmup-ms', QUICK ? 250 : 800)),
  jitWarmupMs: Number(opt('--jit-warmup-ms', QUICK ? 500 : 3000)),
  durationMs: Number(opt('--duration-ms', QUICK ? 1000 : 3000)),
  maxRequests: Number(opt('--max-requests', 200_000)),
  budgetS: Number(opt('--budget-s', QUICK ? 200 : 1140)),
  json16: flag('--json-16mb'),
  ref: !flag('--no-ref'),
  paths: opt('--paths', undefined)?.split(','),
  // Extra flags for the main gateway (e.g. '--decode-threads 0', '--workers 2'); results are not written with them.
  gatewayArgs: opt('--gateway-args', '').split(' ').filter(Boolean),
  write: !flag('--no-write') && opt('--paths', undefined) === undefined && opt('--gateway-args', undefined) === undefined && !flag('--cut-through-only')
    && !flag('--memory-only'),
  cutThroughOnly: flag('--cut-through-only'),
  memoryOnly: flag('--memory-only'),
  memory: !flag('--no-memory'),
  triton: opt('--triton', undefined),
  soakS: Number(opt('--soak-s', QUICK ? 30 : 0)),
  paWindowMs: Number(opt('--pa-window-ms', 3500)),
  beforeDist: opt('--before-dist', undefined),
};
cfg.perfAnalyzer = !cfg.cutThroughOnly && !cfg.memoryOnly && (flag('--perf-analyzer') || (!QUICK && cfg.write && !flag('--no-perf-analyzer')));
const STARTED = Date.now();
const DEADLINE = STARTED + cfg.budgetS * 1000;

const PAYLOADS = {
  '64B': { label: '64 B UINT8 (image_stats)', bytes: 64 },
  '600KB': { label: '600 KB FP32 (classifier_fp32 [1,3,224,224])', bytes: 602112 },
  '4MB': { label: '4 MiB UINT8 (image_stats)', bytes: 4 * 1024 * 1024 },
  '16MB': { label: '16 MiB UINT8 (image_stats)', bytes: 16 * 1024 * 1024 },
};
for (const p of cfg.payloads) if (!PAYLOADS[p]) fail(`unknown payload ${p} (use ${Object.keys(PAYLOADS).join(', ')})`);

// Paths: target (which server), form (request body), proxy (whose CPU/RSS is measured).
const PATHS = [
  { id: 'triton-bin', label: 'Triton HTTP binary (direct)', target: 'tritonHttp', form: 'binary', series: 'triton', base: true },
  { id: 'triton-json', label: 'Triton HTTP JSON (direct)', target: 'tritonHttp', form: 'json', series: 'triton' },
  { id: 'nginx-bin', label: 'nginx → Triton HTTP binary', target: 'nginx', form: 'binary', series: 'triton', proxy: 'nginx' },
  { id: 'grpc', label: 'direct gRPC (own h2 client)', target: 'tritonGrpc', form: 'grpc', series: 'triton' },
  // The fair peer of the gRPC pass-through: the same client through nginx's grpc_pass (one proxy hop, no logic).
  { id: 'nginx-grpc', label: 'nginx grpc_pass → Triton gRPC', target: 'nginxGrpc', form: 'grpc', series: 'triton', proxy: 'nginx' },
  { id: 'tg-bin', label: 'tensorgate binary', target: 'gateway', form: 'binary', series: 'triton', proxy: 'gateway' },
  // REST over HTTP/2 (h2c with prior knowledge): the same binary request, all workers' streams on one session.
  { id: 'tg-bin-h2', label: 'tensorgate binary, REST over h2 (h2c)', target: 'gateway', form: 'binary', series: 'triton', proxy: 'gateway', protocol: 'h2' },
  { id: 'tg-raw', label: 'tensorgate raw', target: 'gateway', form: 'raw', series: 'triton', proxy: 'gateway' },
  // The floor of the REST → gRPC hop on node:http + node:http2, no gateway logic (bench/floor-proxy.js):
  // what of tensorgate's cost is Node's own, in the CPU targets' rows.
  // Only at c=8, where those targets are.
  { id: 'floor-raw', label: 'Node floor (node:http + node:http2, no logic) raw', target: 'floor', form: 'raw', series: 'triton', proxy: 'floor', only: 8 },
  // upstream.sharedMemory: a second gateway, tensors to Triton through /dev/shm regions (sidecar mode).
  { id: 'tg-bin-shm', label: 'tensorgate binary, shared memory', target: 'shmGateway', form: 'binary', series: 'triton', proxy: 'shmGateway' },
  { id: 'tg-raw-shm', label: 'tensorgate raw, shared memory', target: 'shmGateway', form: 'raw', series: 'triton', proxy: 'shmGateway' },
  // A sidecar's Triton, its gRPC on a Unix domain socket (upstream.backends unix:/path): a second Triton, the same
  // models, whose gRPC listens on a socket; its HTTP is not measured (the base stays the first Triton's).
  { id: 'tg-bin-sock', label: 'tensorgate binary, Triton\'s gRPC on a Unix socket', target: 'socketGateway', form: 'binary', series: 'triton', proxy: 'socketGateway' },
  { id: 'tg-b64', label: 'tensorgate base64 (V2 data)', target: 'gateway', form: 'b64', series: 'triton', proxy: 'gateway' },
  { id: 'tg-v1', label: 'tensorgate V1 b64', target: 'gateway', form: 'v1b64', series: 'triton', proxy: 'gateway' },
  { id: 'tg-json', label: 'tensorgate JSON', target: 'gateway', form: 'json', series: 'triton', proxy: 'gateway' },
  // The same ModelInfer message as direct gRPC, through the gateway's gRPC pass-through (one client connection), on
  // the gRPC port (server.grpc.enabled: our own HTTP/2 server); and on server.port (node:http2's server, beside REST).
  { id: 'tg-grpc', label: 'tensorgate gRPC pass-through (gRPC port)', target: 'grpcGateway', form: 'grpc', series: 'triton', proxy: 'grpcGateway' },
  { id: 'tg-grpc-h2', label: 'tensorgate gRPC pass-through on server.port (node:http2)', target: 'gateway', form: 'grpc', series: 'triton', proxy: 'gateway', only: 8 },
  // The pass-through's floor: a node:http2 relay with no logic (bench/floor-grpc.js), at c=8 beside its CPU targets.
  { id: 'floor-grpc', label: 'Node floor gRPC relay (node:http2, no logic)', target: 'floorGrpc', form: 'grpc', series: 'triton', proxy: 'floorGrpc', only: 8 },
  // --before-dist: the same forms through a gateway built from another tree, in the same run.
  { id: 'tg-bin-before', label: 'tensorgate binary, before (--before-dist)', target: 'beforeGateway', form: 'binary', series: 'triton', proxy: 'beforeGateway', before: true },
  { id: 'tg-raw-before', label: 'tensorgate raw, before (--before-dist)', target: 'beforeGateway', form: 'raw', series: 'triton', proxy: 'beforeGateway', before: true },
  { id: 'tg-grpc-before', label: 'tensorgate gRPC pass-through, before (--before-dist)', target: 'beforeGateway', form: 'grpc', series: 'triton', proxy: 'beforeGateway', before: true },
  { id: 'ref-grpc', label: 'direct gRPC → reference backend', target: 'refGrpc', form: 'grpc', series: 'ref', base: true },
  { id: 'ref-tg-bin', label: 'tensorgate binary → reference', target: 'refGateway', form: 'binary', series: 'ref', proxy: 'refGateway' },
  { id: 'ref-tg-bin-h2', label: 'tensorgate binary, REST over h2 → reference', target: 'refGateway', form: 'binary', series: 'ref', proxy: 'refGateway', protocol: 'h2' },
  { id: 'ref-tg-raw', label: 'tensorgate raw → reference', target: 'refGateway', form: 'raw', series: 'ref', proxy: 'refGateway' },
  { id: 'ref-tg-b64', label: 'tensorgate base64 → reference', target: 'refGateway', form: 'b64', series: 'ref', proxy: 'refGateway' },
  { id: 'ref-tg-v1', label: 'tensorgate V1 b64 → reference', target: 'refGateway', form: 'v1b64', series: 'ref', proxy: 'refGateway' },
  { id: 'ref-tg-json', label: 'tensorgate JSON → reference', target: 'refGateway', form: 'json', series: 'ref', proxy: 'refGateway' },
  { id: 'ref-tg-grpc', label: 'tensorgate gRPC pass-through (gRPC port) → reference', target: 'refGrpcGateway', form: 'grpc', series: 'ref', proxy: 'refGrpcGateway' },
];

/** @returns {never} */
function fail(msg) {
  process.stderr.write(`bench: ${msg}\n`);
  process.exit(2);
}
const log = (msg) => process.stderr.write(`[bench ${((Date.now() - STARTED) / 1000).toFixed(1)}s] ${msg}\n`);

// ------------------------------------------------------------------ processes

let tmpDir;

let stopping;
let soaking = false; // the soak phase stopped the children on purpose
function stopAll() {
  stopping ??= (async () => {
    for (const e of [...children].reverse()) await stopChild(e, e.name === 'triton' ? 30_000 : 5_000);
    if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
  })();
  return stopping;
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    log(`${sig}: stopping children`);
    stopAll().then(() => process.exit(130));
  });
}

async function startTriton() {
  if (cfg.triton) {
    const [http, grpc] = cfg.triton.split(',').map(Number);
    return { http, grpc, version: '(external)' };
  }
  return startZoo(log);
}

/** A Node floor (floor-proxy.js, floor-grpc.js) in front of Triton's gRPC, with the gateway's Node flags. */
async function startFloor(script, backend) {
  const { child, match } = await startProcess(script, NODE, [...GATEWAY_NODE_FLAGS, path.join(__dirname, script), '--backend', backend], {
    ready: /listening on http:\/\/[^:]+:(\d+)/, timeoutMs: 30_000, env: gatewayEnv(),
  });
  log(`Node floor ${script} on ${match[1]} (pid ${child.pid}) → Triton gRPC ${backend}`);
  return { port: Number(match[1]), pid: child.pid };
}

/** nginx in front of Triton (bench/nginx.js), in this run's temporary directory. */
async function startNginx(tritonHttp, tritonGrpc) {
  return startNginxIn(path.join(tmpDir, 'nginx'), tritonHttp, tritonGrpc, { log, fail, quiet: () => stopping !== undefined || soaking });
}

// ------------------------------------------------------------------ cut-through: memory and overlap

const UPLOADS = 16;
const UPLOAD_BYTES = 16 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 120_000;

function postRaw(port, model, body) {
  return new Promise((resolve) => {
    const req = require('node:http').request({ host: '127.0.0.1', port, method: 'POST', path: `/v2/models/${model}/infer`,
      headers: { 'Content-Length': body.length, 'Inference-Header-Content-Length': 0, 'Content-Type': 'application/octet-stream' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy());
    req.end(body);
  });
}

/**
 * 16 concurrent 16 MiB raw uploads to image_stats through a fresh gateway (cut-through, then
 * buffered): the gateway's RSS sampled every 5 ms (growth = peak − RSS before), and from each
 * request's access line (log level info) whether Triton's call began before the upload ended.
 */
async function cutThroughPhase(backend) {
  const body = Buffer.allocUnsafe(UPLOAD_BYTES);
  for (let i = 0; i < body.length; i++) body[i] = (i * 31 + 7) & 0xff;
  const out = {};
  for (const [mode, extra] of /** @type {[string, string[]][]} */ ([['cut-through', []], ['buffered', ['--cut-through=false']]])) {
    const g = await startGateway(`tensorgate-${mode}`, backend, ['--log-level', 'info', ...extra]);
    const lines = [];
    let buf = '';
    g.child.stdout.on('data', (s) => {
      buf += s;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) { lines.push(buf.slice(0, nl)); buf = buf.slice(nl + 1); }
    });
    await postRaw(g.port, 'image_stats', body.subarray(0, 1024)); // warm: model config cached, sessions up
    await new Promise((r) => setTimeout(r, 300));
    const before = statusKb(g.pid, 'VmRSS') / 1024;
    let peak = before;
    const sampler = setInterval(() => { peak = Math.max(peak, statusKb(g.pid, 'VmRSS') / 1024); }, 5);
    const t0 = performance.now();
    const statuses = await Promise.all(Array.from({ length: UPLOADS }, () => postRaw(g.port, 'image_stats', body)));
    const wallMs = performance.now() - t0;
    clearInterval(sampler);
    peak = Math.max(peak, statusKb(g.pid, 'VmRSS') / 1024);
    await new Promise((r) => setTimeout(r, 300)); // the access lines are written asynchronously
    const leads = [];
    for (const l of lines) {
      let j;
      try { j = JSON.parse(l); } catch { continue; }
      if (j.route !== 'infer' || j.bytes_in !== UPLOAD_BYTES || !j.hops_at_ms) continue;
      const at = j.hops_at_ms;
      const d = j.hops_ms;
      // How long before the upload's last byte the upstream call began (negative: after).
      leads.push(at.ingress_read + d.ingress_read - at.upstream_send);
    }
    leads.sort((a, b) => a - b);
    out[mode] = {
      ok: statuses.filter((x) => x === 200).length, uploads: UPLOADS, rssBeforeMB: before, rssPeakMB: peak, growthMB: peak - before, wallMs,
      sentBeforeEnd: leads.filter((x) => x > 0).length, measured: leads.length, leadMsMedian: leads[Math.floor(leads.length / 2)],
    };
    log(`cut-through phase, ${mode}: ${out[mode].ok}/${UPLOADS} ok, RSS ${before.toFixed(0)} → ${peak.toFixed(0)} MB (+${(peak - before).toFixed(0)}), upstream began before the upload ended in ${out[mode].sentBeforeEnd}/${leads.length}`);
    await stopChild(children.find((c) => c.child === g.child));
  }
  return out;
}

// ------------------------------------------------------------------ memory: 8 × 4 MiB in flight per path

/** The shared-memory gateway's flags (upstream.sharedMemory, 8 regions of 32 MiB). */
const SHM_ARGS = ['--shared-memory', '--shared-memory-regions', '8'];
/** The paths of the memory target (every way a 4 MiB tensor can come in); --quick leaves out the two variants. */
/** The gRPC port (server.grpc.enabled), on a free port: the pass-through's rows (tg-grpc) are measured there. */
const GRPC_PORT_ARGS = ['--grpc-port-enabled', '--grpc-port', '0'];
const MEMORY_PATHS = QUICK ? ['tg-bin', 'tg-raw', 'tg-b64', 'tg-v1', 'tg-grpc', 'tg-bin-shm']
  : ['tg-bin', 'tg-bin-h2', 'tg-raw', 'tg-b64', 'tg-v1', 'tg-grpc', 'tg-bin-shm', 'tg-raw-shm'];
// afterMs: long enough for the gateway's reclaim (gateway/buffers/reclaim.ts: pool pages idle
// for 2 s are dropped, then one collection once quiet).
const MEMORY = { payload: '4MB', concurrency: 8, warmMs: QUICK ? 300 : 1000, settleMs: 1000, burstMs: QUICK ? 1500 : 3000, afterMs: 4000 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const MEMORY_TARGET_MB = 160;

/**
 * Peak RSS with 8 concurrent 4 MiB requests on each path, and RSS once the burst is over. The
 * cells share one long-lived gateway, whose VmHWM in a 4 MiB cell also holds what earlier cells
 * (JSON, base64, other sizes) left behind; here each path gets a fresh gateway, so the peak is what
 * this path needs: warm-up at c=1 (RSS a second later: "warm"), VmHWM reset, the burst at c=8
 * ("peak": VmHWM over the burst), then 4 s idle ("after": VmRSS; the harness forces no collection).
 */
async function memoryPhase(backend) {
  const out = [];
  for (const id of MEMORY_PATHS) {
    const p = /** @type {typeof PATHS[number]} */ (PATHS.find((x) => x.id === id));
    if (cfg.paths !== undefined && !cfg.paths.includes(id)) continue;
    const onGrpcPort = p.target === 'grpcGateway';
    const g = await startGateway(`tensorgate-mem-${id}`, backend, [...(p.target === 'shmGateway' ? SHM_ARGS : []), ...(onGrpcPort ? GRPC_PORT_ARGS : []), ...cfg.gatewayArgs]);
    try {
      const cell = (concurrency, durationMs) => runCellRemote({
        target: { port: onGrpcPort ? g.grpcPort : g.port }, payload: MEMORY.payload, form: p.form, protocol: p.protocol, concurrency,
        warmupMs: 0, durationMs, maxRequests: 100_000,
      });
      const idleMB = statusKb(g.pid, 'VmRSS') / 1024;
      await cell(1, MEMORY.warmMs);
      await sleep(MEMORY.settleMs);
      const warmMB = statusKb(g.pid, 'VmRSS') / 1024;
      resetPeak(g.pid);
      const burst = await cell(MEMORY.concurrency, MEMORY.burstMs);
      const peakMB = statusKb(g.pid, 'VmHWM') / 1024;
      await sleep(MEMORY.afterMs);
      const afterMB = statusKb(g.pid, 'VmRSS') / 1024;
      out.push({ path: id, ok: burst.ok, error: burst.error, requests: burst.requests, idleMB, warmMB, peakMB, afterMB });
      log(`memory ${id}: ${burst.ok ? `${burst.requests} × 4 MiB at c=8` : `FAILED ${burst.error}`}; RSS idle ${fmt(idleMB, 0)}, warm ${fmt(warmMB, 0)}, peak ${fmt(peakMB, 0)}, after ${fmt(afterMB, 0)} MB`);
    } finally {
      await stopChild(/** @type {import('./procs').ChildEntry} */ (children.find((c) => c.child === g.child)));
    }
  }
  return out;
}

// ------------------------------------------------------------------ /proc sampling

/** The processes whose cost a proxy path shows: the gateway, or nginx's master and workers. */
function proxyPids(proxy) {
  if (!proxy) return [];
  if (proxy !== 'nginx') return [servers[proxy].pid, ...childPids(servers[proxy].pid)];
  const master = servers.nginx.pid;
  return [master, ...childPids(master)];
}

/** CPU seconds used so far by the processes `pids` together. */
function cpuOf(pids) {
  return pids.reduce((a, pid) => a + cpuSeconds(pid), 0);
}

// ------------------------------------------------------------------ the run

const servers = {};
let loadgen;
let nextId = 0;
const pending = new Map();

function runCellRemote(cell) {
  return new Promise((resolve) => {
    const id = nextId++;
    pending.set(id, resolve);
    loadgen.send({ type: 'cell', id, cell });
  });
}

function startLoadgen() {
  return new Promise((resolve, reject) => {
    loadgen = fork(path.join(__dirname, 'loadgen.js'), [], { execPath: NODE, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push({ name: 'loadgen', child: loadgen, group: false });
    loadgen.on('message', (/** @type {any} IPC from loadgen.js */ m) => {
      if (m.type === 'ready') resolve(undefined);
      if (m.type === 'result') { pending.get(m.id)?.(m.result); pending.delete(m.id); }
    });
    loadgen.once('exit', (code) => {
      for (const r of pending.values()) r({ ok: false, error: `load generator exited (${code})` });
      pending.clear();
      reject(new Error(`load generator exited (${code})`));
    });
  });
}

/** Whether a path runs at all (--paths, --no-ref); the base of each series always does. */
const pathRuns = (p) => !(p.series === 'ref' && !cfg.ref) && !(p.before === true && cfg.beforeDist === undefined)
  && (cfg.paths === undefined || p.base || cfg.paths.includes(p.id));
const SHM_PATHS = PATHS.filter((p) => p.target === 'shmGateway');
// --quick without --payloads: the shared-memory paths (and their base) also run 16 MiB, the size they are for.
const QUICK_SHM_PAYLOADS = QUICK && opt('--payloads', undefined) === undefined ? ['16MB'] : [];

function cellsToRun() {
  const cells = [];
  for (const payload of [...cfg.payloads, ...QUICK_SHM_PAYLOADS.filter((x) => !cfg.payloads.includes(x))]) {
    const shmOnly = !cfg.payloads.includes(payload);
    for (const concurrency of cfg.concurrency) {
      for (const p of PATHS) {
        if (!pathRuns(p) || (p.only !== undefined && p.only !== concurrency)) continue;
        if (shmOnly && !p.base && p.target !== 'shmGateway') continue;
        let skip;
        if (p.form === 'json' && payload === '16MB' && !cfg.json16) {
          skip = 'skipped: JSON for 16 MiB (~60 MB of numbers per request) takes seconds per request; --json-16mb runs it';
        } else if (p.form === 'json' && payload === '4MB' && QUICK) {
          skip = 'skipped in --quick: JSON for 4 MiB takes 0.7–5 s per request (the full run measures it)';
        }
        cells.push({ payload, concurrency, path: p, skip });
      }
    }
  }
  return cells;
}

/** 64 B and 600 KB; 4 MB too when the run measures it. */
function jitWarmupPayloads() {
  return ['64B', '600KB', ...(cfg.payloads.includes('4MB') ? ['4MB'] : [])];
}

/**
 * Every proxy measured (the gateways and nginx) serves each request form it is measured on for
 * cfg.jitWarmupMs at 64 B, then as long at 600 KB (the paths of a body in many reads) and, when the
 * run measures 4 MB, at 4 MB (the paths of a body held back by the windows), at c=8, before the
 * first cell, unrecorded. A cell's own warm-up is too short for V8: the gateway's CPU per request
 * at 64 B kept falling for ~30,000 requests (bench/RESULTS.md), and once it tiered up sooner
 * (gateway/v8-tiering.ts) the first ~3,000 requests of a size still paid for TurboFan compiling the
 * path (1.7 s of CPU in the first 4,500 requests of 600 KB). Without this, the first cells measured
 * V8's compiler, which a long-running proxy has long finished with.
 */
async function jitWarmup(cells) {
  if (cfg.jitWarmupMs <= 0) return;
  const seen = new Set();
  for (const { path: p, skip } of cells) {
    const key = `${p.target} ${p.form} ${p.protocol ?? ''}`;
    if (skip || !p.proxy || seen.has(key)) continue;
    seen.add(key);
    for (const payload of jitWarmupPayloads()) {
      const r = await runCellRemote({
        target: { port: servers[p.target].port }, payload, form: p.form, protocol: p.protocol, concurrency: 8,
        warmupMs: 0, durationMs: cfg.jitWarmupMs, maxRequests: cfg.maxRequests,
      });
      log(`JIT warm-up ${p.target} ${p.form}${p.protocol ? ` ${p.protocol}` : ''} ${payload}: ${r.ok ? `${r.requests} requests` : `FAILED ${r.error}`}`);
    }
  }
}

/**
 * p50 at c=1 against nginx, paired. The cells measure nginx and the gateway minutes apart, one
 * 3-s cell each, and at c=1 the machine drifts between them by more than the target's margin
 * (Triton HTTP direct's own 64 B p50 was 1.73, 1.81, 2.38 and 3.53 ms in four runs of one day;
 * within one full run, the gateway's binary, raw and JSON forms, the same work at 64 B, gave 2.12 to
 * 2.73 ms). Here each round measures nginx and the gateway back to back, in short slices, each going
 * first in turn (none goes first more often); a round gives one ratio, and the target reads the
 * median of the rounds' ratios. At 600 KB Triton HTTP direct is a slice of the round too, for the
 * req/s target at c=1 (the gateway's req/s over Triton's, round by round). A slice that fails loses
 * its round only. Like perf_analyzer's phase, it runs even when the cells used the budget up.
 */
const PAIRED = { rounds: QUICK ? 4 : 8, warmupMs: QUICK ? 200 : 300, durationMs: QUICK ? 1000 : 1500, payloads: ['64B', '600KB'] };
/**
 * The slices of a c=1 round at each payload: Triton direct where a req/s target reads it; at 600 KB
 * the gateway's base64 forms too, whose p50 and CPU per request the base64 targets read against
 * the binary slice of the same round (the cells, minutes apart, drifted by more than those targets'
 * margins: base64 V2's p50 read 1.33× binary's in one full run, where rounds back to back on
 * another machine read 1.02–1.03×).
 */
const PAIRED_SLICES = {
  '64B': [{ key: 'nginx', target: 'nginx' }, { key: 'gateway', target: 'gateway' }],
  '600KB': [{ key: 'nginx', target: 'nginx' }, { key: 'gateway', target: 'gateway' }, { key: 'tritonHttp', target: 'tritonHttp' },
    { key: 'socketGateway', target: 'socketGateway' }, { key: 'b64', target: 'gateway', form: 'b64' }, { key: 'v1b64', target: 'gateway', form: 'v1b64' }],
};

async function pairedPhase() {
  const out = [];
  for (const payload of PAIRED.payloads.filter((x) => cfg.payloads.includes(x))) {
    const rounds = [];
    const slices = PAIRED_SLICES[payload].filter(({ target }) => servers[target] !== undefined);
    for (let i = 0; i < PAIRED.rounds; i++) {
      const p50 = {};
      const rps = {};
      const cpuMs = {};
      for (const { key, target, form = 'binary' } of slices.map((_, k) => slices[(k + i) % slices.length])) {
        const pids = target === 'gateway' ? proxyPids('gateway') : [];
        const cpu0 = cpuOf(pids);
        const r = await runCellRemote({
          target: { port: servers[target].port }, payload, form, concurrency: 1,
          warmupMs: PAIRED.warmupMs, durationMs: PAIRED.durationMs, maxRequests: cfg.maxRequests,
        });
        if (!r.ok) {
          log(`paired ${payload} c=1 round ${i + 1}: ${key} failed (${r.error}); the round is left out`);
          break;
        }
        p50[key] = r.p50;
        rps[key] = r.reqPerSec;
        // Warm-up, measured requests and the correctness probe, as a cell's CPU/req counts them.
        if (pids.length > 0) cpuMs[key] = (1000 * (cpuOf(pids) - cpu0)) / (r.requests + (r.warmup ?? 0) + 1);
      }
      if (slices.some(({ key }) => p50[key] === undefined)) continue;
      const base64 = p50.b64 === undefined ? undefined
        : { p50: { binary: p50.gateway, b64: p50.b64, v1b64: p50.v1b64 }, cpuMs: { binary: cpuMs.gateway, b64: cpuMs.b64, v1b64: cpuMs.v1b64 } };
      rounds.push({ nginx: p50.nginx, gateway: p50.gateway, rps, ...(base64 ? { base64 } : {}) });
      const triton = rps.tritonHttp === undefined ? '' : `; req/s tensorgate ${fmt(rps.gateway)}, Triton HTTP direct ${fmt(rps.tritonHttp)}`;
      const b64 = base64 === undefined ? '' : `; base64 V2 ${fmt(p50.b64)} ms (CPU ${fmt(cpuMs.b64)} ms/req against binary's ${fmt(cpuMs.gateway)}), V1 b64 ${fmt(p50.v1b64)} ms (${fmt(cpuMs.v1b64)})`;
      log(`paired ${payload} c=1 round ${i + 1}/${PAIRED.rounds}: p50 nginx ${fmt(p50.nginx)} ms, tensorgate ${fmt(p50.gateway)} ms${triton}${b64}`);
    }
    if (rounds.length > 0) out.push({ payload, rounds });
  }
  return out;
}

/**
 * CPU per request at c=8 against nginx, paired. A cell's CPU/req holds its own first seconds (the
 * connections opened, and, in a gateway that sat idle through the other paths' cells, the code V8
 * dropped when the quiet gateway's full collection ran, gateway/buffers/reclaim.ts: 4 MB c=8 cost
 * 4.5–5.3 ms per request over the first 150 requests after 12 s idle, 2.5–3 ms after), and at 4 MB
 * a 3-s cell is ~150 requests, so one such second moves its mean by a third. The machine also
 * drifts between cells minutes apart (binary 600 KB c=8 cost 0.36–0.61 ms per request from one run
 * of the same tree to the next; the gRPC port's 64 B c=8 cell read 0.39 ms in a full run where two
 * shorter runs of the same tree, minutes later, read 0.13 and 0.16). Here each round serves nginx,
 * the gateway's binary form and its raw form back to back, each going first in turn; at 64 B also
 * nginx's grpc_pass and the gRPC port (the pass-through's target), at 600 KB and 4 MB also the
 * base64 forms (their CPU against binary's), at 600 KB also Triton HTTP and Triton gRPC direct (the
 * req/s target at c=8, and what the gateway's own upstream serves). A
 * payload's rounds start after a lead-in (PAIRED_CPU.leadInMs). Each
 * slice is a short unrecorded warm-up, then a measured stretch whose requests divide the proxy's
 * CPU over that stretch alone. The targets read the median of the rounds' ratios, the cells' ratio
 * beside it. Like the c=1 pairs, it runs even when the cells used the budget up.
 */
const PAIRED_CPU = {
  rounds: QUICK ? 3 : 5, payloads: ['64B', '600KB', '4MB'],
  // Before a payload's first round, each proxy serves it this long, unrecorded. The 4 MB rounds
  // come after minutes of 64 B and 600 KB, which the gateway serves on its planned path: a 4 MB
  // body is the handler's (cut through), code the planned path does not run, and at ~45 requests
  // a second V8 was still compiling it there. One gateway warmed with 20 s of 4 MB, then 100 s of
  // 64 B and 600 KB: its next 6-s rounds of 4 MB compiled 29, 17 and 16 functions with TurboFan
  // and cost 3.01, 2.69, 2.53, then 2.45 ms a request (bench/RESULTS.md, "twenty-fourth pass").
  // The 64 B rounds come after the c=1 pairs, REST alone: the gRPC port's first two rounds read
  // 0.55 and 0.23 ms where the next three read 0.15–0.16 (the same section's full run).
  leadInMs: { '64B': QUICK ? 1000 : 4000, '600KB': 0, '4MB': QUICK ? 4000 : 15000 },
  warmupMs: { '64B': QUICK ? 300 : 500, '600KB': QUICK ? 300 : 500, '4MB': QUICK ? 800 : 1500 },
  durationMs: { '64B': QUICK ? 800 : 1500, '600KB': QUICK ? 800 : 1500, '4MB': QUICK ? 1500 : 3000 },
};
const PAIRED_CPU_REST = [{ key: 'nginx', target: 'nginx', form: 'binary' }, { key: 'binary', target: 'gateway', form: 'binary' }, { key: 'raw', target: 'gateway', form: 'raw' }];
/** The base64 forms (V2 data, V1 b64), against the binary form of the same round (base64Targets). */
const PAIRED_CPU_BASE64 = [{ key: 'b64', target: 'gateway', form: 'b64' }, { key: 'v1b64', target: 'gateway', form: 'v1b64' }];
/** The slices of a round at each payload; `proxy: false`: a backend direct, whose req/s alone is read. */
const PAIRED_CPU_SLICES = {
  '64B': [...PAIRED_CPU_REST, { key: 'nginxGrpc', target: 'nginxGrpc', form: 'grpc' }, { key: 'grpc', target: 'grpcGateway', form: 'grpc' }],
  '600KB': [...PAIRED_CPU_REST, ...PAIRED_CPU_BASE64, { key: 'tritonHttp', target: 'tritonHttp', form: 'binary', proxy: false },
    { key: 'tritonGrpc', target: 'tritonGrpc', form: 'grpc', proxy: false }, { key: 'socket', target: 'socketGateway', form: 'binary' }],
  '4MB': [...PAIRED_CPU_REST, ...PAIRED_CPU_BASE64],
};

async function pairedCpuPhase() {
  const out = [];
  for (const payload of PAIRED_CPU.payloads.filter((x) => cfg.payloads.includes(x))) {
    const rounds = [];
    const slices = PAIRED_CPU_SLICES[payload].filter(({ target }) => servers[target] !== undefined);
    if (PAIRED_CPU.leadInMs[payload] > 0) {
      for (const { target, form, proxy } of slices) {
        if (proxy === false) continue;
        await runCellRemote({
          target: { port: servers[target].port }, payload, form, concurrency: 8, warmupMs: 0,
          durationMs: PAIRED_CPU.leadInMs[payload], maxRequests: cfg.maxRequests,
        });
      }
    }
    for (let i = 0; i < PAIRED_CPU.rounds; i++) {
      const ms = {};
      const rps = {};
      for (const { key, target, form, proxy } of slices.map((_, k) => slices[(k + i) % slices.length])) {
        const slice = (durationMs) => runCellRemote({
          target: { port: servers[target].port }, payload, form, concurrency: 8, warmupMs: 0, durationMs, maxRequests: cfg.maxRequests,
        });
        const warm = await slice(PAIRED_CPU.warmupMs[payload]);
        const pids = proxy === false ? [] : proxyPids(target);
        const cpu0 = cpuOf(pids);
        const r = warm.ok ? await slice(PAIRED_CPU.durationMs[payload]) : warm;
        if (!r.ok) {
          log(`paired CPU ${payload} c=8 round ${i + 1}: ${key} failed (${r.error}); the round is left out`);
          break;
        }
        // The loadgen's correctness probe is among the requests, as in measure().
        if (proxy !== false) ms[key] = (1000 * (cpuOf(pids) - cpu0)) / (r.requests + 1);
        rps[key] = r.reqPerSec;
      }
      if (slices.some(({ key }) => rps[key] === undefined)) continue;
      rounds.push({ ...ms, rps });
      const grpc = ms.grpc === undefined ? '' : `; nginx grpc_pass ${fmt(ms.nginxGrpc)} ms, gRPC port ${fmt(ms.grpc)} ms`;
      const socket = rps.socket === undefined ? '' : `, over a Unix socket ${fmt(rps.socket)} (${fmt(ms.socket)} ms per request)`;
      const direct = rps.tritonHttp === undefined ? '' : `; req/s binary ${fmt(rps.binary)}, Triton HTTP ${fmt(rps.tritonHttp)}, Triton gRPC ${fmt(rps.tritonGrpc)}${socket}`;
      const base64 = ms.b64 === undefined ? '' : `, base64 V2 ${fmt(ms.b64)} ms, V1 b64 ${fmt(ms.v1b64)} ms`;
      log(`paired CPU ${payload} c=8 round ${i + 1}/${PAIRED_CPU.rounds}: nginx ${fmt(ms.nginx)} ms, binary ${fmt(ms.binary)} ms, raw ${fmt(ms.raw)} ms${base64} per request${grpc}${direct}`);
    }
    if (rounds.length > 0) out.push({ payload, rounds });
  }
  return out;
}

/** The median of the rounds' ratios (gateway / nginx), and their range. */
function pairedRatio(rounds) {
  return medianOf(rounds.map((r) => r.gateway / r.nginx));
}

async function measure(cell) {
  const target = servers[cell.path.target];
  const pids = proxyPids(cell.path.proxy);
  // What earlier cells left in the same long-lived process: the peak below starts from it.
  const rssStartMB = pids.reduce((a, pid) => a + statusKb(pid, 'VmRSS'), 0) / 1024;
  for (const pid of pids) resetPeak(pid);
  const cpu0 = cpuOf(pids);
  const t0 = performance.now();
  const result = await runCellRemote({
    target: { port: target.port }, payload: cell.payload, form: cell.path.form, protocol: cell.path.protocol, concurrency: cell.concurrency,
    warmupMs: cfg.warmupMs, durationMs: cfg.durationMs, maxRequests: cfg.maxRequests,
  });
  const wallS = (performance.now() - t0) / 1000;
  if (pids.length) {
    const cpu = cpuOf(pids) - cpu0;
    result.proxyCpuPct = (100 * cpu) / wallS;
    // Per request the loadgen sent in the cell (warm-up and the correctness probe included, as the CPU is).
    result.proxyCpuMsPerReq = (1000 * cpu) / (result.requests + (result.warmup ?? 0) + 1);
    result.proxyPeakRssMB = pids.reduce((a, pid) => a + statusKb(pid, 'VmHWM'), 0) / 1024;
    result.proxyStartRssMB = rssStartMB;
  }
  return result;
}

async function main() {
  const fromJson = opt('--from-json', undefined);
  if (fromJson) { // re-render the tables, targets and chart of a recorded run
    const run = JSON.parse(fs.readFileSync(fromJson, 'utf8'));
    const md = renderMarkdown(run);
    process.stdout.write(`${md}\n`);
    if (cfg.write) writeOutputs(run, md);
    return;
  }
  if (!fs.existsSync(path.join(DIST, MAIN_JS))) fail('dist/ is missing: run `npm run build` first (npm run bench does)');
  let pa;
  try {
    if (cfg.perfAnalyzer) pa = preparePerfAnalyzer(log);
  } catch (err) {
    fail(`perf_analyzer cannot run: ${err.message} (--no-perf-analyzer leaves it out)`);
  }
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-bench-'));
  log(`mode ${cfg.mode}: payloads ${cfg.payloads.join(', ')} × concurrency ${cfg.concurrency.join(', ')}; cells ${cfg.warmupMs} ms warm-up + ${cfg.durationMs} ms; budget ${cfg.budgetS} s`);
  const triton = await startTriton();
  log(`Triton ${triton.version} ready: HTTP ${triton.http}, gRPC ${triton.grpc}`);
  servers.tritonHttp = { port: triton.http };
  servers.tritonGrpc = { port: triton.grpc };
  const nginx = await startNginx(triton.http, triton.grpc);
  servers.nginx = nginx;
  servers.nginxGrpc = { port: nginx.grpcPort, pid: nginx.pid };
  log(`nginx on ${nginx.port} (pid ${nginx.pid}) → Triton HTTP ${triton.http}; grpc_pass on ${nginx.grpcPort} → Triton gRPC ${triton.grpc}`);
  servers.gateway = await startGateway('tensorgate', `127.0.0.1:${triton.grpc}`, [...GRPC_PORT_ARGS, ...cfg.gatewayArgs]);
  if (pathRuns(PATHS.find((p) => p.id === 'floor-raw'))) servers.floor = await startFloor('floor-proxy.js', `127.0.0.1:${triton.grpc}`);
  if (pathRuns(PATHS.find((p) => p.id === 'floor-grpc'))) servers.floorGrpc = await startFloor('floor-grpc.js', `127.0.0.1:${triton.grpc}`);
  // gRPC clients dial the same port as REST ones: the listener hands their streams to the pass-through.
  servers.grpcGateway = { ...servers.gateway, port: servers.gateway.grpcPort };
  log(`tensorgate on ${servers.gateway.port} (pid ${servers.gateway.pid}) → Triton gRPC ${triton.grpc}`);
  if (SHM_PATHS.some(pathRuns)) {
    servers.shmGateway = await startGateway('tensorgate-shm', `127.0.0.1:${triton.grpc}`, SHM_ARGS);
    log(`tensorgate with upstream.sharedMemory on ${servers.shmGateway.port} (pid ${servers.shmGateway.pid}) → Triton gRPC ${triton.grpc}`);
  }
  if (pathRuns(PATHS.find((p) => p.id === 'tg-bin-sock'))) {
    const b = await startZoo(log, ['classifier_fp32', 'image_stats'], ['--grpc-socket', path.join(tmpDir, 'grpc.sock')]);
    servers.socketGateway = await startGateway('tensorgate-socket', `unix:${b.grpc_socket}`, cfg.gatewayArgs);
    log(`tensorgate on ${servers.socketGateway.port} (pid ${servers.socketGateway.pid}) → a second Triton's gRPC on ${b.grpc_socket}`);
  }
  if (cfg.beforeDist !== undefined) {
    servers.beforeGateway = await startGateway('tensorgate-before', `127.0.0.1:${triton.grpc}`, cfg.gatewayArgs, undefined, path.resolve(cfg.beforeDist));
    log(`tensorgate from ${cfg.beforeDist} on ${servers.beforeGateway.port} (pid ${servers.beforeGateway.pid}) → Triton gRPC ${triton.grpc}`);
  }
  if (cfg.ref) {
    const ref = await startReference();
    servers.refGrpc = { port: ref.port, pid: ref.pid };
    servers.refGateway = await startGateway('tensorgate-ref', ref.address, GRPC_PORT_ARGS);
    servers.refGrpcGateway = { ...servers.refGateway, port: servers.refGateway.grpcPort };
    log(`reference backend on ${ref.address} (pid ${ref.pid}); tensorgate on ${servers.refGateway.port} (pid ${servers.refGateway.pid}) → it`);
  }
  await startLoadgen();

  const cells = cfg.cutThroughOnly || cfg.memoryOnly ? [] : cellsToRun();
  await jitWarmup(cells);
  const results = [];
  let i = 0;
  for (const cell of cells) {
    i++;
    const tag = `${cell.payload} c=${cell.concurrency} ${cell.path.id}`;
    if (cell.skip) { results.push({ ...cell, result: { ok: false, skipped: cell.skip } }); continue; }
    if (Date.now() > DEADLINE) {
      results.push({ ...cell, result: { ok: false, skipped: `skipped: time budget of ${cfg.budgetS} s used up` } });
      continue;
    }
    const r = await measure(cell);
    results.push({ ...cell, result: r });
    log(`[${i}/${cells.length}] ${tag}: ${r.ok ? `p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms ${fmt(r.reqPerSec)} req/s n=${r.requests}${r.errors ? ` errors=${r.errors}` : ''}` : `FAILED ${r.error}`}`);
  }
  let paired;
  try {
    const both = ['nginx-bin', 'tg-bin'].every((id) => pathRuns(PATHS.find((p) => p.id === id)));
    if (!cfg.memoryOnly && !cfg.cutThroughOnly && cfg.concurrency.includes(1) && both) paired = await pairedPhase();
  } catch (err) {
    log(`paired phase failed: ${err.message}`);
  }
  let pairedCpu;
  try {
    const all = ['nginx-bin', 'tg-bin', 'tg-raw'].every((id) => pathRuns(PATHS.find((p) => p.id === id)));
    if (!cfg.memoryOnly && !cfg.cutThroughOnly && cfg.concurrency.includes(8) && all) pairedCpu = await pairedCpuPhase();
  } catch (err) {
    log(`paired CPU phase failed: ${err.message}`);
  }
  let perfAnalyzer;
  let perfAnalyzerRounds;
  if (pa) {
    const ports = { tritonHttp: triton.http, tritonGrpc: triton.grpc, gateway: servers.gateway.port, gatewayGrpc: servers.gateway.grpcPort ?? 0 };
    // warmupMs 0: the JIT warm-up and the cells have warmed the gateway up.
    const opts = { models: ['classifier_fp32', 'image_stats'], concurrency: [1, 8], windowMs: cfg.paWindowMs, warmupMs: 0 };
    perfAnalyzer = await perfAnalyzerPhase(pa, ports, opts, log);
    perfAnalyzerRounds = await perfAnalyzerPaired(pa, ports, { concurrency: [1, 8], rounds: QUICK ? 4 : 6, windowMs: Math.round(cfg.paWindowMs / 2) }, log);
  }
  let cutThrough;
  try {
    if (cfg.paths === undefined && !cfg.memoryOnly) cutThrough = await cutThroughPhase(`127.0.0.1:${triton.grpc}`);
  } catch (err) {
    log(`cut-through phase failed: ${err.message}`);
  }
  let memory;
  try {
    if (cfg.memory && !cfg.cutThroughOnly) memory = await memoryPhase(`127.0.0.1:${triton.grpc}`);
  } catch (err) {
    log(`memory phase failed: ${err.message}`);
  }
  const run = {
    cutThrough, memory, memorySettings: memory === undefined ? undefined : MEMORY, perfAnalyzer, perfAnalyzerRounds,
    paired, pairedSettings: paired === undefined ? undefined : PAIRED,
    pairedCpu, pairedCpuSettings: pairedCpu === undefined ? undefined : PAIRED_CPU, jitWarmupPayloads: jitWarmupPayloads(),
    date: new Date().toISOString(), mode: cfg.mode, cfg, triton, nginx: nginx.version, node: process.version,
    machine: machine(), command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
    elapsedS: (Date.now() - STARTED) / 1000, results: results.map((r) => ({ payload: r.payload, concurrency: r.concurrency, path: r.path.id, ...r.result })),
  };
  const md = renderMarkdown(run);
  process.stdout.write(`${md}\n`);
  if (cfg.write) writeOutputs(run, md);
  if (cfg.soakS > 0 && cfg.paths === undefined && !cfg.memoryOnly && !cfg.cutThroughOnly) await soakPhase();
  await stopAll();
  log(`done in ${((Date.now() - STARTED) / 1000).toFixed(0)} s`);
}

/**
 * The soak (bench/soak.js) in its own process once the cells are done: everything this run
 * started is stopped first, so Triton's and nginx's idle cost and memory stay out of it.
 */
async function soakPhase() {
  soaking = true;
  for (const e of [...children].reverse()) await stopChild(e, e.name === 'triton' ? 30_000 : 5_000);
  log(`soak: ${cfg.soakS} s (bench/soak.js)`);
  const child = spawn(NODE, [path.join(__dirname, 'soak.js'), '--duration-s', String(cfg.soakS), ...(cfg.write ? [] : ['--no-write'])],
    { stdio: ['ignore', 'inherit', 'inherit'] });
  children.push({ name: 'soak', child, group: false });
  const code = await new Promise((resolve) => child.once('exit', (c, sig) => resolve(c ?? sig)));
  if (code !== 0) log(`soak exited (${code})`);
}

// ------------------------------------------------------------------ reporting

function fmt(v, digits) {
  if (v === undefined || Number.isNaN(v)) return '–';
  if (digits !== undefined) return v.toFixed(digits);
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** The PATHS entry a result was measured on (every result names one). */
const pathOf = (r) => /** @type {typeof PATHS[number]} */ (PATHS.find((x) => x.id === r.path));

function baseOf(run, r) {
  const p = pathOf(r);
  // The gRPC pass-through is measured against the same calls made directly.
  const baseId = p.series === 'ref' ? 'ref-grpc' : p.form === 'grpc' && p.proxy !== undefined ? 'grpc' : 'triton-bin';
  return run.results.find((x) => x.path === baseId && x.payload === r.payload && x.concurrency === r.concurrency && x.ok);
}
const find = (run, id, payload, c) => run.results.find((x) => x.path === id && x.payload === payload && x.concurrency === c && x.ok);

function renderTable(run, series) {
  const rows = [];
  rows.push('| payload | conc. | path | p50 ms | p99 ms | req/s | MB/s | p50 × base | req/s × base | proxy CPU | proxy CPU/req | proxy RSS at start → peak | n |');
  rows.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of run.results) {
    const p = pathOf(r);
    if (p.series !== series) continue;
    const label = `${p.label}${p.base ? ' **(base)**' : ''}`;
    if (!r.ok) {
      rows.push(`| ${r.payload} | ${r.concurrency} | ${label} | ${r.skipped ?? `failed: ${String(r.error).replace(/\|/g, '/').slice(0, 120)}`} ||||||||||`);
      continue;
    }
    const b = baseOf(run, r);
    rows.push(`| ${r.payload} | ${r.concurrency} | ${label} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.reqPerSec)} | ${fmt(r.payloadMBps)} | ${b ? `${fmt(r.p50 / b.p50, 2)}×` : '–'} | ${b ? `${fmt(r.reqPerSec / b.reqPerSec, 2)}×` : '–'} | ${r.proxyCpuPct !== undefined ? `${fmt(r.proxyCpuPct, 0)} %` : ''} | ${r.proxyCpuMsPerReq !== undefined ? `${fmt(r.proxyCpuMsPerReq)} ms` : ''} | ${r.proxyPeakRssMB !== undefined ? `${r.proxyStartRssMB !== undefined ? `${fmt(r.proxyStartRssMB, 0)} → ` : ''}${fmt(r.proxyPeakRssMB, 0)} MB` : ''} | ${r.requests}${r.errors ? ` (${r.errors} err)` : ''} |`);
  }
  return rows.join('\n');
}

const verdict = (ok) => (ok ? '**met**' : '**not met**');
/** "; Node floor X ms (Y× nginx's)" for a CPU target row, from a floor path's result (nothing when it did not run). */
const floorNote = (fl, ng) => (fl?.proxyCpuMsPerReq === undefined ? ''
  : `; Node floor ${fmt(fl.proxyCpuMsPerReq)} ms${ng?.proxyCpuMsPerReq === undefined ? '' : ` (${fmt(fl.proxyCpuMsPerReq / ng.proxyCpuMsPerReq, 2)}× nginx's)`}`);
const ratioCell = (a, b, unit = 'ms') => `${fmt(a)} ${unit} vs ${fmt(b)} ${unit}: ${fmt(a / b, 2)}×`;
/** The --before-dist gateway's value of the same cell and its ratio to the same base, when it ran. */
const beforeNote = (b, base, key, unit = 'ms') => (b?.[key] === undefined || base?.[key] === undefined ? ''
  : `; before ${fmt(b[key])} ${unit} (${fmt(b[key] / base[key], 2)}×)`);

/**
 * The targets of the run, each a ratio within it: CPU per request and p50 against nginx in front of
 * the same Triton (HTTP and grpc_pass), throughput against Triton HTTP direct, base64 against
 * tensorgate's own binary form, JSON against Triton's JSON, shared memory against Triton HTTP
 * direct, and peak RSS of the memory and cut-through phases. A row is "not measured" when its cells
 * are not in the run (--quick has no c=32; a cell may have failed).
 */
function targetTable(run) {
  const out = [];
  const missing = (what) => out.push(`| ${what} | (not in this run) | not measured |`);
  // CPU per request against nginx → Triton HTTP, binary and raw at c=8 (Performance IV's bounds;
  // Performance III asked ≤ 1× at 4 MB).
  for (const [payload, bound] of /** @type {[string, number][]} */ ([['64B', 3], ['600KB', 1.2], ['4MB', 1.1]])) {
    const ng = find(run, 'nginx-bin', payload, 8);
    // Node's own floor of the hop (floor-raw) beside each: how much of the gap is ours.
    const fl = find(run, 'floor-raw', payload, 8);
    for (const id of ['tg-bin', 'tg-raw']) {
      const what = `CPU/req ${id === 'tg-bin' ? 'binary' : 'raw'} ${payload} c=8 ≤ ${bound} × nginx's`;
      const tg = find(run, id, payload, 8);
      // The paired rounds, when measured, give the verdict (pairedCpuPhase says why); the cells' ratio is beside it.
      const key = id === 'tg-bin' ? 'binary' : 'raw';
      const rounds = run.pairedCpu?.find((x) => x.payload === payload)?.rounds;
      const cellsOk = ng && tg && ng.proxyCpuMsPerReq !== undefined && tg.proxyCpuMsPerReq !== undefined;
      if (!cellsOk && rounds === undefined) { missing(what); continue; }
      const cells = cellsOk
        ? `${ratioCell(tg.proxyCpuMsPerReq, ng.proxyCpuMsPerReq)}${beforeNote(find(run, `${id}-before`, payload, 8), ng, 'proxyCpuMsPerReq')}${floorNote(fl, ng)}`
        : 'not measured';
      if (rounds === undefined) {
        out.push(`| ${what} | ${cells} | ${verdict(tg.proxyCpuMsPerReq <= bound * ng.proxyCpuMsPerReq)} |`);
        continue;
      }
      const q = pairedRatio(rounds.map((r) => ({ nginx: r.nginx, gateway: r[key] })));
      out.push(`| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${cells} | ${verdict(q.median <= bound)} |`);
    }
  }
  const g64 = find(run, 'tg-grpc', '64B', 8);
  const ngGrpc = find(run, 'nginx-grpc', '64B', 8);
  // The paired rounds, when measured, give the verdicts (pairedCpuPhase says why); the cells beside them.
  const grpcRounds = pairedGrpcRounds(run);
  const grpcMs = grpcRounds === undefined ? undefined : medianOf(grpcRounds.map((r) => r.gateway));
  if (g64?.proxyCpuMsPerReq === undefined && grpcMs === undefined) missing('CPU/req gRPC pass-through 64B c=8 ≤ 0.15 ms');
  else {
    const cell = g64?.proxyCpuMsPerReq === undefined ? 'not measured' : `${fmt(g64.proxyCpuMsPerReq)} ms${floorNote(find(run, 'floor-grpc', '64B', 8))}`;
    const ms = grpcMs === undefined ? g64.proxyCpuMsPerReq : grpcMs.median;
    out.push(`| CPU/req gRPC pass-through 64B c=8 ≤ 0.15 ms | ${grpcMs === undefined ? cell : `paired: median ${fmt(ms)} ms over ${grpcMs.n} rounds (${fmt(grpcMs.min)}–${fmt(grpcMs.max)}); cell: ${cell}`} | ${verdict(ms <= 0.15)} |`);
  }
  // Performance IV's row: the pass-through (on the gRPC port) against nginx's grpc_pass, with server.port's beside it.
  const what = 'CPU/req gRPC pass-through 64B c=8 ≤ 3 × nginx grpc_pass\'s';
  const grpcCells = g64?.proxyCpuMsPerReq !== undefined && ngGrpc?.proxyCpuMsPerReq !== undefined;
  if (!grpcCells && grpcRounds === undefined) missing(what);
  else {
    const h2 = find(run, 'tg-grpc-h2', '64B', 8);
    const onPort = h2?.proxyCpuMsPerReq === undefined || ngGrpc?.proxyCpuMsPerReq === undefined ? '' : `; on server.port (node:http2) ${fmt(h2.proxyCpuMsPerReq)} ms (${(h2.proxyCpuMsPerReq / ngGrpc.proxyCpuMsPerReq).toFixed(2)}×)`;
    const cells = grpcCells ? `${ratioCell(g64.proxyCpuMsPerReq, ngGrpc.proxyCpuMsPerReq)}${onPort}` : 'not measured';
    if (grpcRounds === undefined) out.push(`| ${what} | ${cells} | ${verdict(g64.proxyCpuMsPerReq <= 3 * ngGrpc.proxyCpuMsPerReq)} |`);
    else {
      const q = pairedRatio(grpcRounds);
      out.push(`| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${cells} | ${verdict(q.median <= 3)} |`);
    }
  }
  // Throughput of the binary form; the paired rounds, when measured, give the verdicts (c=1:
  // pairedPhase, c=8: pairedCpuPhase).
  for (const c of [1, 8]) {
    const what = `req/s binary 600KB c=${c} ≥ 0.9 × Triton HTTP direct`;
    const base = find(run, 'triton-bin', '600KB', c);
    const tg = find(run, 'tg-bin', '600KB', c);
    const ng = find(run, 'nginx-bin', '600KB', c);
    const rounds = c === 1 ? pairedRpsC1(run)
      : run.pairedCpu?.find((x) => x.payload === '600KB' && x.rounds[0]?.rps?.tritonHttp !== undefined)?.rounds;
    if ((!base || !tg) && rounds === undefined) { missing(what); continue; }
    const nginx = ng && base ? `; nginx ${fmt(ng.reqPerSec / base.reqPerSec, 2)}×` : '';
    const bf = find(run, 'tg-bin-before', '600KB', c);
    const before = bf && base ? `; before ${fmt(bf.reqPerSec / base.reqPerSec, 2)}×` : '';
    const cells = base && tg ? `${fmt(tg.reqPerSec)} vs ${fmt(base.reqPerSec)}: ${fmt(tg.reqPerSec / base.reqPerSec, 2)}×${before}${nginx}` : 'not measured';
    if (rounds === undefined) {
      out.push(`| ${what} | ${cells} | ${verdict(tg.reqPerSec >= 0.9 * base.reqPerSec)} |`);
      continue;
    }
    const pairs = c === 1 ? rounds : rounds.map(({ rps }) => ({ nginx: rps.tritonHttp, gateway: rps.binary }));
    const q = pairedRatio(pairs);
    // At c=8, what Triton's own gRPC frontend serves beside its HTTP, in the same rounds: the gateway's ceiling.
    const upstream = c === 1 ? '' : `; Triton gRPC direct ${fmt(pairedRatio(rounds.map(({ rps }) => ({ nginx: rps.tritonHttp, gateway: rps.tritonGrpc }))).median, 2)}×`;
    out.push(`| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×)${upstream}; cells: ${cells} | ${verdict(q.median >= 0.9)} |`);
  }
  out.push(...socketTargets(run));
  for (const payload of ['64B', '600KB', '4MB']) {
    for (const c of [1, 8]) {
      const what = `p50 binary ${payload} c=${c} ≤ 1.1 × nginx's`;
      const ng = find(run, 'nginx-bin', payload, c);
      const tg = find(run, 'tg-bin', payload, c);
      // At c=1 the paired rounds, when measured, give the verdict (pairedPhase says why).
      const rounds = c === 1 ? run.paired?.find((x) => x.payload === payload)?.rounds : undefined;
      if ((!ng || !tg) && rounds === undefined) { missing(what); continue; }
      const cells = ng && tg ? `${ratioCell(tg.p50, ng.p50)}${beforeNote(find(run, 'tg-bin-before', payload, c), ng, 'p50')}` : 'not measured';
      if (rounds === undefined) {
        out.push(`| ${what} | ${cells} | ${verdict(tg.p50 <= 1.1 * ng.p50)} |`);
        continue;
      }
      const q = pairedRatio(rounds);
      out.push(`| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${cells} | ${verdict(q.median <= 1.1)} |`);
    }
  }
  out.push(...perfAnalyzerTargets(run));
  out.push(...base64Targets(run));
  for (const c of [1, 8, 32]) {
    const what = `p50 JSON FP32 600KB c=${c} ≤ 1.0 × Triton JSON`;
    const t = find(run, 'triton-json', '600KB', c);
    const g = find(run, 'tg-json', '600KB', c);
    if (!t || !g) { missing(what); continue; }
    out.push(`| ${what} | ${ratioCell(g.p50, t.p50)} | ${verdict(g.p50 <= t.p50)} |`);
  }
  out.push(...grpcPassTargets(run));
  for (const payload of ['4MB', '16MB']) {
    for (const c of run.cfg.concurrency) {
      const base = find(run, 'triton-bin', payload, c);
      for (const id of ['tg-bin-shm', 'tg-raw-shm']) {
        const s = find(run, id, payload, c);
        if (!base || !s) continue;
        out.push(`| p50 shared memory, ${id === 'tg-bin-shm' ? 'binary' : 'raw'} ${payload} c=${c} ≤ 0.9 × Triton HTTP direct | ${ratioCell(s.p50, base.p50)} | ${verdict(s.p50 <= 0.9 * base.p50)} |`);
      }
    }
  }
  if (!run.results.some((r) => r.path === 'tg-bin-shm' && r.ok)) missing('p50 shared memory 4 MB ≤ 0.9 × Triton HTTP direct');
  out.push(...memoryTargets(run));
  return ['| target | measured | verdict |', '|---|---|---|', ...out].join('\n');
}

/**
 * perf_analyzer's infer/s of classifier_fp32 (600 KB FP32), REST through tensorgate against Triton HTTP's: ≥ 0.9 ×.
 * The paired rounds, when measured, give the verdict (perfAnalyzerPaired says why); the cells' ratio is beside it.
 */
/**
 * The req/s rows again with the gateway as a sidecar's, Triton's gRPC on a Unix socket (tg-bin-sock):
 * the same rounds, the same Triton HTTP direct as the base. Only when the run measured that path.
 */
function socketTargets(run) {
  const out = [];
  for (const c of [1, 8]) {
    const base = find(run, 'triton-bin', '600KB', c);
    const sock = find(run, 'tg-bin-sock', '600KB', c);
    const rounds = c === 1 ? run.paired?.find((x) => x.payload === '600KB')?.rounds : run.pairedCpu?.find((x) => x.payload === '600KB')?.rounds;
    const pairs = rounds?.filter(({ rps }) => rps?.tritonHttp !== undefined && rps[c === 1 ? 'socketGateway' : 'socket'] !== undefined)
      .map(({ rps }) => ({ nginx: rps.tritonHttp, gateway: rps[c === 1 ? 'socketGateway' : 'socket'] }));
    if (sock === undefined && (pairs === undefined || pairs.length === 0)) continue;
    const what = `req/s binary 600KB c=${c} ≥ 0.9 × Triton HTTP direct, Triton's gRPC on a Unix socket (sidecar)`;
    const cells = base && sock ? `${fmt(sock.reqPerSec)} vs ${fmt(base.reqPerSec)}: ${fmt(sock.reqPerSec / base.reqPerSec, 2)}×` : 'not measured';
    if (pairs === undefined || pairs.length === 0) {
      out.push(`| ${what} | ${cells} | ${verdict(sock.reqPerSec >= 0.9 * base.reqPerSec)} |`);
      continue;
    }
    const q = pairedRatio(pairs);
    out.push(`| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${cells} | ${verdict(q.median >= 0.9)} |`);
  }
  return out;
}

function perfAnalyzerTargets(run) {
  return [1, 8].map((c) => {
    const what = `perf_analyzer infer/s, REST through tensorgate, classifier_fp32 c=${c} ≥ 0.9 × Triton HTTP direct`;
    const base = run.perfAnalyzer && findCell(run.perfAnalyzer, 'triton-http', 'classifier_fp32', c);
    const tg = run.perfAnalyzer && findCell(run.perfAnalyzer, 'tg-rest', 'classifier_fp32', c);
    const rounds = run.perfAnalyzerRounds?.results.find((x) => x.concurrency === c)?.rounds;
    if ((!base || !tg) && rounds === undefined) return `| ${what} | (not in this run) | not measured |`;
    const grpc = run.perfAnalyzer && findCell(run.perfAnalyzer, 'tg-grpc', 'classifier_fp32', c);
    const grpcBase = run.perfAnalyzer && findCell(run.perfAnalyzer, 'triton-grpc', 'classifier_fp32', c);
    const pass = grpc && grpcBase ? `; gRPC pass-through ${fmt(grpc.inferPerSec / grpcBase.inferPerSec, 2)}× Triton gRPC` : '';
    const cells = base && tg ? `cells: ${fmt(tg.inferPerSec)} vs ${fmt(base.inferPerSec)}: ${fmt(tg.inferPerSec / base.inferPerSec, 2)}×${pass}` : 'cells: (not measured)';
    if (rounds === undefined) {
      const ratio = tg.inferPerSec / base.inferPerSec;
      return `| ${what} | ${cells} | ${verdict(ratio >= 0.9)} |`;
    }
    const q = pairedMedian(rounds);
    return `| ${what} | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); ${cells} | ${verdict(q.median >= 0.9)} |`;
  });
}

/**
 * base64 (V2 data and V1 b64) against the binary form through the same gateway: CPU/req ≤ 1.3 ×,
 * p50 ≤ 1.2 ×. At c=8 the paired rounds, when measured, give the CPU verdict (pairedCpuPhase says why).
 */
function base64Targets(run) {
  const out = [];
  for (const payload of ['600KB', '4MB']) {
    for (const c of [1, 8]) {
      const bin = find(run, 'tg-bin', payload, c);
      // CPU per request: c=8 from pairedCpuPhase's rounds, c=1 from pairedPhase's (at 600 KB); else the cells.
      const c1 = c === 1 ? run.paired?.find((x) => x.payload === payload && x.rounds[0]?.base64 !== undefined)?.rounds : undefined;
      const rounds = c === 8 ? run.pairedCpu?.find((x) => x.payload === payload && x.rounds[0]?.b64 !== undefined)?.rounds
        : c1?.map((r) => r.base64.cpuMs);
      // p50: at c=1 pairedPhase's rounds, where it measured the base64 forms; else the cells (c=8: steadier).
      const latency = c1?.map((r) => r.base64.p50);
      for (const id of ['tg-b64', 'tg-v1']) {
        const name = `${id === 'tg-b64' ? 'base64 V2' : 'V1 b64'} ${payload} c=${c}`;
        const key = id === 'tg-b64' ? 'b64' : 'v1b64';
        const b = find(run, id, payload, c);
        if (!bin || !b) { out.push(`| ${name}: CPU/req ≤ 1.3 ×, p50 ≤ 1.2 × binary's | (not in this run) | not measured |`); continue; }
        if (rounds !== undefined) {
          const q = pairedRatio(rounds.map((r) => ({ nginx: r.binary, gateway: r[key] })));
          const cells = b.proxyCpuMsPerReq === undefined || bin.proxyCpuMsPerReq === undefined ? 'not measured' : ratioCell(b.proxyCpuMsPerReq, bin.proxyCpuMsPerReq);
          out.push(`| CPU/req ${name} ≤ 1.3 × binary's | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${cells} | ${verdict(q.median <= 1.3)} |`);
        } else if (b.proxyCpuMsPerReq !== undefined && bin.proxyCpuMsPerReq !== undefined) {
          out.push(`| CPU/req ${name} ≤ 1.3 × binary's | ${ratioCell(b.proxyCpuMsPerReq, bin.proxyCpuMsPerReq)} | ${verdict(b.proxyCpuMsPerReq <= 1.3 * bin.proxyCpuMsPerReq)} |`);
        }
        if (latency !== undefined) {
          const q = pairedRatio(latency.map((r) => ({ nginx: r.binary, gateway: r[key] })));
          out.push(`| p50 ${name} ≤ 1.2 × binary's | paired: median ${fmt(q.median, 2)}× over ${q.n} rounds (${fmt(q.min, 2)}–${fmt(q.max, 2)}×); cells: ${ratioCell(b.p50, bin.p50)} | ${verdict(q.median <= 1.2)} |`);
        } else {
          out.push(`| p50 ${name} ≤ 1.2 × binary's | ${ratioCell(b.p50, bin.p50)} | ${verdict(b.p50 <= 1.2 * bin.p50)} |`);
        }
      }
    }
  }
  return out;
}

/**
 * The gRPC pass-through against its fair peer, nginx's grpc_pass in front of the same Triton: p50
 * and CPU per request at most 1.1× nginx's; the ratio to direct gRPC is reported beside it.
 */
function grpcPassTargets(run) {
  const out = [];
  for (const payload of run.cfg.payloads) {
    for (const c of run.cfg.concurrency) {
      const ng = find(run, 'nginx-grpc', payload, c);
      const tg = find(run, 'tg-grpc', payload, c);
      const direct = find(run, 'grpc', payload, c);
      if (!ng || !tg) continue;
      const toDirect = direct ? `; ${fmt(tg.p50 / direct.p50, 2)}× direct gRPC` : '';
      out.push(`| p50 gRPC pass-through ${payload} c=${c} ≤ 1.1 × nginx grpc_pass | ${ratioCell(tg.p50, ng.p50)}${toDirect} | ${verdict(tg.p50 <= 1.1 * ng.p50)} |`);
      if (tg.proxyCpuMsPerReq !== undefined && ng.proxyCpuMsPerReq !== undefined) {
        const floor = floorNote(find(run, 'floor-grpc', payload, c), ng);
        const before = beforeNote(find(run, 'tg-grpc-before', payload, c), ng, 'proxyCpuMsPerReq');
        out.push(`| CPU/req gRPC pass-through ${payload} c=${c} ≤ 1.1 × nginx grpc_pass | ${ratioCell(tg.proxyCpuMsPerReq, ng.proxyCpuMsPerReq)}${before}${floor} | ${verdict(tg.proxyCpuMsPerReq <= 1.1 * ng.proxyCpuMsPerReq)} |`);
      }
    }
  }
  return out;
}

/** Peak RSS with 8 × 4 MiB in flight per path (the memory phase), and the cut-through phase's growth. */
function memoryTargets(run) {
  const out = [];
  for (const m of run.memory ?? []) {
    const label = pathOf(m).label;
    if (!m.ok) {
      out.push(`| peak RSS ≤ ${MEMORY_TARGET_MB} MB, 8 × 4 MiB in flight: ${label} | failed: ${String(m.error).replace(/\|/g, '/').slice(0, 100)} | not measured |`);
      continue;
    }
    out.push(`| peak RSS ≤ ${MEMORY_TARGET_MB} MB, 8 × 4 MiB in flight: ${label} | ${fmt(m.peakMB, 0)} MB; ${fmt(m.afterMB, 0)} MB 4 s after the burst (warm ${fmt(m.warmMB, 0)} MB) | ${verdict(m.peakMB <= MEMORY_TARGET_MB)} |`);
  }
  if (run.memory === undefined) out.push(`| peak RSS ≤ ${MEMORY_TARGET_MB} MB with 8 × 4 MiB in flight, every path | (no memory phase in this run) | not measured |`);
  const ct = run.cutThrough?.['cut-through'];
  const bf = run.cutThrough?.buffered;
  if (ct === undefined) {
    out.push('| cut-through: Triton receives 16 MB uploads before they end; RSS growth ≤ 64 MB at 16 × 16 MB | (not measured in this run) | not measured |');
  } else {
    out.push(`| cut-through: Triton's call begins before the 16 MB upload ends | ${ct.sentBeforeEnd}/${ct.measured} uploads (median ${fmt(ct.leadMsMedian, 1)} ms before the last byte); buffered: ${bf ? `${bf.sentBeforeEnd}/${bf.measured}` : '–'} | ${verdict(ct.measured > 0 && ct.sentBeforeEnd === ct.measured)} |`);
    out.push(`| cut-through: gateway RSS growth ≤ 64 MB with ${UPLOADS} concurrent 16 MB uploads | +${fmt(ct.growthMB, 0)} MB (${fmt(ct.rssBeforeMB, 0)} → ${fmt(ct.rssPeakMB, 0)} MB, ${ct.ok}/${ct.uploads} answered 200); buffered: +${bf ? fmt(bf.growthMB, 0) : '–'} MB | ${verdict(ct.growthMB <= 64 && ct.ok === ct.uploads)} |`);
  }
  return out;
}

/** Ratios without a target: REST over h2 against HTTP/1.1 through the gateway. */
function comparisons(run) {
  const out = [];
  for (const [h1, h2, series] of [['tg-bin', 'tg-bin-h2', ''], ['ref-tg-bin', 'ref-tg-bin-h2', ' → reference']]) {
    for (const payload of run.cfg.payloads) {
      for (const c of run.cfg.concurrency) {
        const a = find(run, h1, payload, c);
        const b = find(run, h2, payload, c);
        if (!a || !b) continue;
        out.push(`| REST over h2 vs HTTP/1.1${series}, binary ${payload} c=${c} | p50 ${fmt(b.p50 / a.p50, 2)}×; CPU/req ${fmt(b.proxyCpuMsPerReq)} ms vs ${fmt(a.proxyCpuMsPerReq)} ms |`);
      }
    }
  }
  return ['| comparison | measured |', '|---|---|', ...out].join('\n');
}

/** The memory phase: RSS of a fresh gateway per path, before, during and after a burst of 8 × 4 MiB. */
function memoryTable(run) {
  const rows = [
    `Each path in a gateway of its own (→ Triton): started, warmed up at c=1 for ${(run.memorySettings ?? MEMORY).warmMs} ms (**warm**: VmRSS a second later), then ${(run.memorySettings ?? MEMORY).burstMs} ms at c=8 (**peak**: VmHWM over the burst), then idle (**after**: VmRSS 4 s later).`,
    '',
    '| path | requests in the burst | idle | warm | peak | after | after − warm |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const m of run.memory) {
    if (!m.ok) { rows.push(`| ${pathOf(m).label} | failed: ${String(m.error).replace(/\|/g, '/').slice(0, 120)} ||||||`); continue; }
    rows.push(`| ${pathOf(m).label} | ${m.requests} | ${fmt(m.idleMB, 0)} MB | ${fmt(m.warmMB, 0)} MB | ${fmt(m.peakMB, 0)} MB | ${fmt(m.afterMB, 0)} MB | ${m.afterMB >= m.warmMB ? '+' : ''}${fmt(m.afterMB - m.warmMB, 0)} MB |`);
  }
  return rows.join('\n');
}

/** CPU per request of every path through a proxy, one row per path, one column per cell. */
function cpuTable(run) {
  const cols = [];
  for (const payload of run.cfg.payloads) for (const c of run.cfg.concurrency) cols.push([payload, c]);
  const rows = [`| path | ${cols.map(([p, c]) => `${p} c=${c}`).join(' | ')} |`, `|---|${cols.map(() => '---').join('|')}|`];
  for (const p of PATHS) {
    if (!p.proxy) continue;
    const cells = cols.map(([payload, c]) => find(run, p.id, payload, c)?.proxyCpuMsPerReq);
    if (cells.every((v) => v === undefined)) continue;
    rows.push(`| ${p.label} | ${cells.map((v) => (v === undefined ? '' : `${fmt(v)} ms`)).join(' | ')} |`);
  }
  return rows.join('\n');
}

/** The paired rounds of the c=8 CPU/req targets (pairedCpuPhase), one row per round. */
function pairedCpuTable(run) {
  const st = run.pairedCpuSettings ?? PAIRED_CPU;
  const lines = [`Binary and raw forms against nginx → Triton HTTP binary, c=8, after the cells: ${st.rounds} rounds per payload; in each, nginx, tensorgate binary and tensorgate raw back to back (each first in turn; at 64 B with nginx's grpc_pass and the gRPC port, at 600 KB with Triton HTTP and Triton gRPC direct), each slice ${Object.entries(st.durationMs).map(([p, d]) => `${st.warmupMs[p]} ms unrecorded then ${d} ms measured at ${p}`).join(', ')}: the proxy's CPU over the measured stretch, divided by its requests. The targets read the median of the rounds' ratios.`, ''];
  lines.push('| payload | round | nginx ms/req | binary ms/req | raw ms/req | binary × nginx | raw × nginx |', '|---|---|---|---|---|---|---|');
  for (const { payload, rounds } of run.pairedCpu) {
    rounds.forEach((r, i) => lines.push(`| ${payload} | ${i + 1} | ${fmt(r.nginx)} | ${fmt(r.binary)} | ${fmt(r.raw)} | ${fmt(r.binary / r.nginx, 2)}× | ${fmt(r.raw / r.nginx, 2)}× |`));
    const b = pairedRatio(rounds.map((r) => ({ nginx: r.nginx, gateway: r.binary })));
    const w = pairedRatio(rounds.map((r) => ({ nginx: r.nginx, gateway: r.raw })));
    lines.push(`| ${payload} | median |  |  |  | ${fmt(b.median, 2)}× | ${fmt(w.median, 2)}× |`);
  }
  const grpc = pairedGrpcRounds(run);
  if (grpc !== undefined) {
    lines.push('', 'The gRPC pass-through (the gRPC port) against nginx\'s grpc_pass, 64 B, in the same rounds:', '');
    lines.push('| round | nginx grpc_pass ms/req | gRPC port ms/req | × nginx grpc_pass |', '|---|---|---|---|');
    grpc.forEach((r, i) => lines.push(`| ${i + 1} | ${fmt(r.nginx)} | ${fmt(r.gateway)} | ${fmt(r.gateway / r.nginx, 2)}× |`));
    lines.push(`| median |  |  | ${fmt(pairedRatio(grpc).median, 2)}× |`);
  }
  const rps = run.pairedCpu.find((x) => x.payload === '600KB' && x.rounds[0]?.rps?.tritonHttp !== undefined)?.rounds;
  if (rps !== undefined) {
    lines.push('', 'req/s at 600 KB, in the same rounds: tensorgate binary and Triton gRPC direct (the gateway\'s upstream) against Triton HTTP direct:', '');
    // With tg-bin-sock: the gateway whose Triton's gRPC is on a Unix socket, in the same rounds.
    const sock = rps.every(({ rps: x }) => x.socket !== undefined);
    lines.push(`| round | Triton HTTP req/s | Triton gRPC req/s | tensorgate binary req/s | binary × Triton HTTP | Triton gRPC × Triton HTTP |${sock ? ' over a Unix socket req/s | × Triton HTTP |' : ''}`,
      `|---|---|---|---|---|---|${sock ? '---|---|' : ''}`);
    rps.forEach(({ rps: x }, i) => lines.push(`| ${i + 1} | ${fmt(x.tritonHttp)} | ${fmt(x.tritonGrpc)} | ${fmt(x.binary)} | ${fmt(x.binary / x.tritonHttp, 2)}× | ${fmt(x.tritonGrpc / x.tritonHttp, 2)}× |`
      + `${sock ? ` ${fmt(x.socket)} | ${fmt(x.socket / x.tritonHttp, 2)}× |` : ''}`));
    const b = pairedRatio(rps.map(({ rps: x }) => ({ nginx: x.tritonHttp, gateway: x.binary })));
    const g = pairedRatio(rps.map(({ rps: x }) => ({ nginx: x.tritonHttp, gateway: x.tritonGrpc })));
    const u = sock ? `  | ${fmt(pairedRatio(rps.map(({ rps: x }) => ({ nginx: x.tritonHttp, gateway: x.socket }))).median, 2)}× |` : '';
    lines.push(`| median |  |  |  | ${fmt(b.median, 2)}× | ${fmt(g.median, 2)}× |${u}`);
  }
  return lines.join('\n');
}

/** The 64 B rounds of pairedCpuPhase as { nginx: grpc_pass, gateway: the gRPC port } CPU/req, when it measured them. */
function pairedGrpcRounds(run) {
  const rounds = run.pairedCpu?.find((x) => x.payload === '64B')?.rounds;
  if (rounds === undefined || rounds[0]?.grpc === undefined) return undefined;
  return rounds.map((r) => ({ nginx: r.nginxGrpc, gateway: r.grpc }));
}

/** The 600 KB rounds of the c=1 pairs as { nginx: Triton HTTP, gateway: tensorgate } req/s, when it measured them. */
function pairedRpsC1(run) {
  const rounds = run.paired?.find((x) => x.payload === '600KB')?.rounds;
  if (rounds === undefined || rounds[0]?.rps?.tritonHttp === undefined) return undefined;
  return rounds.map(({ rps }) => ({ nginx: rps.tritonHttp, gateway: rps.gateway }));
}

/** The paired rounds of the c=1 p50 targets (pairedPhase), one row per round. */
function pairedTable(run) {
  const st = run.pairedSettings ?? PAIRED;
  const lines = [`Binary form, c=1, after the cells: ${st.rounds} rounds per payload, each ${st.warmupMs} ms of warm-up and ${st.durationMs} ms measured through nginx and through tensorgate back to back (at 600 KB Triton HTTP direct, Triton's gRPC on a Unix socket and tensorgate's base64 forms too), each first in turn; the targets read the median of the rounds' ratios.`, ''];
  lines.push('| payload | round | nginx p50 ms | tensorgate p50 ms | ratio | tensorgate req/s × Triton HTTP direct |', '|---|---|---|---|---|---|');
  for (const { payload, rounds } of run.paired) {
    rounds.forEach((r, i) => lines.push(`| ${payload} | ${i + 1} | ${fmt(r.nginx)} | ${fmt(r.gateway)} | ${fmt(r.gateway / r.nginx, 2)}× | ${r.rps?.tritonHttp === undefined ? '' : `${fmt(r.rps.gateway)} vs ${fmt(r.rps.tritonHttp)}: ${fmt(r.rps.gateway / r.rps.tritonHttp, 2)}×`} |`));
    const q = pairedRatio(rounds);
    const rps = rounds[0]?.rps?.tritonHttp === undefined ? '' : `${fmt(pairedRatio(rounds.map(({ rps: x }) => ({ nginx: x.tritonHttp, gateway: x.gateway }))).median, 2)}×`;
    lines.push(`| ${payload} | median |  |  | ${fmt(q.median, 2)}× | ${rps} |`);
  }
  const base64 = run.paired.filter(({ rounds }) => rounds[0]?.base64 !== undefined);
  if (base64.length > 0) {
    lines.push('', 'The base64 forms in the same rounds, against the binary form\'s slice (tensorgate\'s CPU per request over each slice, warm-up included):', '');
    lines.push('| payload | round | binary p50 ms | base64 V2 p50 ms | V1 b64 p50 ms | binary CPU/req ms | base64 V2 CPU/req ms | V1 b64 CPU/req ms |', '|---|---|---|---|---|---|---|---|');
    for (const { payload, rounds } of base64) {
      rounds.forEach(({ base64: { p50, cpuMs } }, i) => lines.push(`| ${payload} | ${i + 1} | ${fmt(p50.binary)} | ${fmt(p50.b64)} (${fmt(p50.b64 / p50.binary, 2)}×) | ${fmt(p50.v1b64)} (${fmt(p50.v1b64 / p50.binary, 2)}×) | ${fmt(cpuMs.binary)} | ${fmt(cpuMs.b64)} (${fmt(cpuMs.b64 / cpuMs.binary, 2)}×) | ${fmt(cpuMs.v1b64)} (${fmt(cpuMs.v1b64 / cpuMs.binary, 2)}×) |`));
    }
  }
  return lines.join('\n');
}

function renderMarkdown(run) {
  const d = run.date.slice(0, 10);
  const lines = [];
  lines.push(`<!-- bench:${run.mode}:start (written by bench/run.js; replaced by the next ${run.mode} run) -->`);
  lines.push(`## Side by side: tensorgate, Triton HTTP, nginx, direct gRPC — ${run.mode} run (${d})`);
  lines.push('');
  lines.push(`Command: \`${run.command}\` (${fmt(run.elapsedS, 0)} s). Date: ${run.date}.`);
  lines.push(`Machine: ${run.machine}; Node ${run.node}; Triton ${run.triton.version} (PyTriton zoo, Python backend); ${run.nginx.replace(/^nginx version: /, '')}.`);
  lines.push(`${run.cfg.jitWarmupMs ? `Before the first cell, each proxy served every form it is measured on for ${run.cfg.jitWarmupMs} ms at 64 B, then as long at ${(run.jitWarmupPayloads ?? ['64B', '600KB']).slice(1).map((x) => x.replace(/(\d)([KM]B)$/, '$1 $2')).join(' and at ')}, c=8, unrecorded (JIT warm-up: a long-running proxy's steady state). ` : ''}Cells: ${run.cfg.warmupMs} ms warm-up, then ${run.cfg.durationMs} ms closed loop at fixed concurrency (undici Pool, one connection per worker; gRPC and REST over h2: one h2 session, one stream per worker); percentiles by nearest rank over every recorded latency. Everything runs on the same cores, load generator included — absolute numbers are this machine's; the ratios within one run are the point.`);
  if (run.mode === 'quick') lines.push('**Quick run**: 1-second cells on a busy 2-core machine, so single ratios move by tens of per cent between runs (two quick runs minutes apart gave tensorgate binary 600 KB c=1 at 2.90× and 1.60× of Triton HTTP). Read trends here; the full run is the record.');
  lines.push('');
  lines.push('- **base** of the Triton series: Triton HTTP binary direct, same payload and concurrency, same run. Of the reference series: direct gRPC to the reference backend (it has no HTTP frontend).');
  lines.push('- **MB/s**: tensor payload bytes per second (not wire bytes: base64 and JSON carry more).');
  lines.push('- **proxy CPU**: CPU time of the gateway (or nginx master + worker) over the cell\'s wall time, warm-up included (100 % = one core); **CPU/req**: that CPU time over the requests of the cell, warm-up included. **RSS at start → peak**: VmRSS when the cell starts, then VmHWM, reset per cell through /proc/PID/clear_refs; one gateway process serves every cell of a series, so both include what earlier cells left. The memory section below measures each path in a gateway of its own.');
  lines.push('- **tensorgate gRPC pass-through**: the direct-gRPC client\'s ModelInfer calls (one HTTP/2 connection) through the gateway\'s gRPC pass-through (on the gateway\'s one port, beside REST); its base is direct gRPC.');
  lines.push('- tensorgate: `--log-level warn --server-timing=false`, h2 data plane, cut-through on (the default). Cut-through rows of the targets: a separate phase after the cells, 16 concurrent 16 MiB raw uploads to image_stats through a fresh gateway (`--log-level info`, its access lines give each hop\'s start), once cut through and once with `--cut-through=false`; RSS (VmRSS) sampled every 5 ms. nginx: `worker_processes 1`, keepalive upstream, `proxy_request_buffering off`, access log off.');
  lines.push('- Outputs: binary forms ask for binary outputs, JSON/base64/V1 forms get JSON outputs (all small: image_stats answers two INT64, classifier_fp32 1000 FP32).');
  lines.push('');
  lines.push(`![p50 ratios](${run.mode === 'quick' ? 'results-quick.svg' : 'results.svg'})`);
  lines.push('');
  lines.push('### Targets');
  lines.push('');
  lines.push(targetTable(run));
  lines.push('');
  if (run.memory !== undefined) {
    lines.push('### Memory: 8 × 4 MiB in flight, a fresh gateway per path');
    lines.push('');
    lines.push(memoryTable(run));
    lines.push('');
  }
  if (run.pairedCpu !== undefined && run.pairedCpu.length > 0) {
    lines.push('### CPU per request at c=8 against nginx, paired');
    lines.push('');
    lines.push(pairedCpuTable(run));
    lines.push('');
  }
  if (run.paired !== undefined && run.paired.length > 0) {
    lines.push('### p50 at c=1 against nginx, paired');
    lines.push('');
    lines.push(pairedTable(run));
    lines.push('');
  }
  if (run.perfAnalyzer !== undefined) {
    lines.push('### NVIDIA perf_analyzer: Triton direct, tensorgate REST and gRPC pass-through');
    lines.push('');
    lines.push(renderPerfAnalyzer(run.perfAnalyzer));
    lines.push('');
  }
  if (run.perfAnalyzerRounds !== undefined && run.perfAnalyzerRounds.results.length > 0) {
    lines.push('### NVIDIA perf_analyzer, paired: Triton HTTP and tensorgate REST back to back');
    lines.push('');
    lines.push(renderPaired(run.perfAnalyzerRounds));
    lines.push('');
  }
  lines.push('### CPU per request: the proxy\'s CPU time over its requests, warm-up included');
  lines.push('');
  lines.push(cpuTable(run));
  lines.push('');
  lines.push('### REST over h2 against HTTP/1.1 (no target)');
  lines.push('');
  lines.push(comparisons(run));
  lines.push('');
  lines.push('### Real Triton (PyTriton zoo)');
  lines.push('');
  lines.push(renderTable(run, 'triton'));
  if (run.cfg.ref) {
    lines.push('');
    lines.push('### Reference backend (near-zero model cost): the gateway\'s own overhead');
    lines.push('');
    lines.push(renderTable(run, 'ref'));
  }
  lines.push(`<!-- bench:${run.mode}:end -->`);
  return lines.join('\n');
}

function renderSvg(run) {
  const rows = [];
  for (const r of run.results) {
    if (!r.ok) continue;
    const p = pathOf(r);
    if (p.base) continue;
    const b = baseOf(run, r);
    if (!b) continue;
    rows.push({ group: `${p.series === 'ref' ? 'reference · ' : ''}${r.payload} · c=${r.concurrency}`, label: p.label, ratio: r.p50 / b.p50 });
  }
  const MAXR = 4;
  const W = 900; const LEFT = 300; const BAR = 13; const GAP = 3; const PLOT = W - LEFT - 80;
  const x = (v) => LEFT + (Math.min(v, MAXR) / MAXR) * PLOT;
  let y = 40;
  const parts = [];
  let group;
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  for (const r of rows) {
    if (r.group !== group) {
      group = r.group;
      y += 8;
      parts.push(`<text x="8" y="${y + 10}" font-weight="bold">${esc(group)}</text>`);
      y += BAR + GAP;
    }
    const color = r.ratio <= 1.05 ? '#2e7d32' : r.ratio <= 1.2 ? '#f9a825' : '#c62828';
    parts.push(`<text x="${LEFT - 6}" y="${y + 10}" text-anchor="end">${esc(r.label)}</text>`);
    parts.push(`<rect x="${LEFT}" y="${y}" width="${(x(r.ratio) - LEFT).toFixed(1)}" height="${BAR}" fill="${color}"/>`);
    parts.push(`<text x="${(x(r.ratio) + 4).toFixed(1)}" y="${y + 10}">${r.ratio.toFixed(2)}×${r.ratio > MAXR ? ' (cut)' : ''}</text>`);
    y += BAR + GAP;
  }
  const H = y + 30;
  const grid = [1, 2, 3, 4].map((v) => `<line x1="${x(v)}" y1="30" x2="${x(v)}" y2="${H - 20}" stroke="${v === 1 ? '#000' : '#ccc'}" stroke-dasharray="${v === 1 ? '' : '3,3'}"/><text x="${x(v)}" y="${H - 6}" text-anchor="middle">${v}×</text>`).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="18" font-size="13" font-weight="bold">p50 latency ÷ base (Triton HTTP binary direct; reference series: direct gRPC), ${esc(run.mode)} run ${esc(run.date.slice(0, 10))}</text>
${grid}
<line x1="${x(1.05)}" y1="30" x2="${x(1.05)}" y2="${H - 20}" stroke="#2e7d32" stroke-dasharray="2,2"/>
${parts.join('\n')}
</svg>
`;
}

function writeOutputs(run, md) {
  const file = path.join(__dirname, 'RESULTS.md');
  let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n';
  const re = new RegExp(`<!-- bench:${run.mode}:start[^]*?<!-- bench:${run.mode}:end -->\\n*`);
  if (re.test(text)) {
    text = text.replace(re, `${md}\n\n`);
  } else {
    // New section above the older ones: a full run goes first, a quick run after any full run.
    const fullEnd = text.indexOf('<!-- bench:full:end -->');
    let at;
    if (run.mode === 'quick' && fullEnd >= 0) at = text.indexOf('\n', fullEnd) + 1;
    else {
      const firstSection = text.search(/^(<!-- bench:|## )/m);
      at = firstSection >= 0 ? firstSection : text.length;
    }
    text = `${text.slice(0, at).replace(/\n*$/, '\n\n')}${md}\n\n${text.slice(at)}`;
  }
  fs.writeFileSync(file, text);
  fs.writeFileSync(path.join(__dirname, run.mode === 'quick' ? 'results-quick.svg' : 'results.svg'), renderSvg(run));
  fs.writeFileSync(path.join(__dirname, run.mode === 'quick' ? 'results-quick.json' : 'results.json'), `${JSON.stringify(run, null, 1)}\n`);
  log(`wrote bench/RESULTS.md, bench/${run.mode === 'quick' ? 'results-quick' : 'results'}.{svg,json}`);
}

main().catch(async (err) => {
  process.stderr.write(`bench: ${err.stack ?? err}\n`);
  await stopAll();
  process.exit(1);
});
