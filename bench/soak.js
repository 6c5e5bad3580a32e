// `node bench/soak.js [options]` (after `npm run build`): the soak (README.md#benchmark). Many
// keep-alive connections send a steady mix of request forms to one gateway for a long time, and
// the run records, per window of time: errors by kind, p50/p99 latency, requests/s and the
// gateway's RSS. The goals: no error, and RSS flat within 10 % after the warm-up.
//
// Processes (each its own, so each has its own open-file table and event loop):
//   - the reference backend (dist/gateway/reference-backend, near-zero model cost), or the
//     gateway's own `--demo` backend in-process with --demo (its memory then counts as the gateway's);
//   - tensorgate from dist/ (production settings: log level warn, no Server-Timing) → the backend;
//   - the load generator: this file with --load-child, spawned with an IPC channel. It holds one
//     undici Client (one keep-alive connection) per simulated client and sends open loop: connection
//     i sends every `connections / rate` seconds, phase-shifted by i / rate, so the rate is steady
//     and every connection stays busy enough never to reach the gateway's idle timeout. A request
//     whose slot comes while the connection's previous answer is still being read starts as soon as
//     it is read (counted "late"); slots missed by a whole period are skipped (counted).
// Request bodies come from bench/loadgen.js (the same bodies as `npm run bench`).
//
// Open files: each process needs ~1 per connection plus a few dozen. Node raises its soft
// RLIMIT_NOFILE to the hard limit at start-up, so the check is on the hard limit (here) and on
// each child's soft limit once it runs (/proc/PID/limits); both are recorded in the results.
//
// Writes a section of bench/RESULTS.md between markers `<!-- soak:<section>:start/end -->`
// (section `full` for runs of 10 minutes or more, else `quick`), replaced by the next run of the
// same section, and bench/soak-<section>.json with every window.
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');

if (process.argv.includes('--load-child')) {
  loadChild();
} else {
  harness();
}

// ================================================================== the mix

/**
 * Request forms and their share (per mille): mostly 64-byte tensors in every form, a few larger
 * ones. image_stats answers LEN and SUM of its UINT8 input, classifier_fp32 1000 PROBS: both are
 * checked in every answer.
 */
const MIX = [
  { id: 'json-64B', label: 'V2 JSON', payload: '64B', form: 'json', perMille: 200 },
  { id: 'binary-64B', label: 'binary extension', payload: '64B', form: 'binary', perMille: 200 },
  { id: 'raw-64B', label: 'raw (header length 0)', payload: '64B', form: 'raw', perMille: 180 },
  { id: 'b64-64B', label: 'V2 base64', payload: '64B', form: 'b64', perMille: 180 },
  { id: 'v1-64B', label: 'V1 predict b64', payload: '64B', form: 'v1b64', perMille: 180 },
  { id: 'binary-600KB', label: 'binary extension', payload: '600KB', form: 'binary', perMille: 30 },
  { id: 'b64-600KB', label: 'V2 base64', payload: '600KB', form: 'b64', perMille: 10 },
  { id: 'json-600KB', label: 'V2 JSON', payload: '600KB', form: 'json', perMille: 10 },
  { id: 'raw-4MB', label: 'raw (header length 0)', payload: '4MB', form: 'raw', perMille: 10 },
];

/** 1000 slots filled by share and shuffled with a fixed seed: request k takes slot k % 1000. */
function mixSlots() {
  const slots = [];
  for (let m = 0; m < MIX.length; m++) for (let i = 0; i < MIX[m].perMille; i++) slots.push(m);
  let seed = 0x2f6b1d3;
  const rand = () => { // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = slots.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [slots[i], slots[j]] = [slots[j], slots[i]];
  }
  return slots;
}

// ================================================================== the load generator (child)

function loadChild() {
  // `toParent`, not `send`: run() below has a send() of its own (one request), which shadowed it.
  if (process.send === undefined) throw new Error('--load-child is the child bench/soak.js spawns with an IPC channel');
  const toParent = /** @type {(message: unknown) => boolean} */ (process.send.bind(process));
  const { Client } = require('undici');
  const { requestOf, percentile } = require('./loadgen');
  const REQUEST_TIMEOUT_MS = 30_000;
  const LATE_MS = 50;

  /** The answer's output values by name (numbers; FP32 outputs only counted), from JSON or binary. */
  function outputsOf(headers, body) {
    const out = new Map();
    const ihcl = headers['inference-header-content-length'];
    if (ihcl !== undefined) {
      const h = Number(ihcl);
      const header = JSON.parse(body.subarray(0, h).toString('utf8'));
      let at = h;
      for (const o of header.outputs) {
        const size = o.parameters?.binary_data_size;
        if (size === undefined) { out.set(o.name, o.data); continue; }
        const bytes = body.subarray(at, at + size);
        at += size;
        if (o.datatype === 'INT64' || o.datatype === 'UINT64') {
          const vals = [];
          for (let i = 0; i + 8 <= bytes.length; i += 8) vals.push(Number(o.datatype === 'INT64' ? bytes.readBigInt64LE(i) : bytes.readBigUInt64LE(i)));
          out.set(o.name, vals);
        } else {
          out.set(o.name, { length: bytes.length / 4 });
        }
      }
      return out;
    }
    const j = JSON.parse(body.toString('utf8'));
    if (j.predictions) { // V1: one instance; several outputs come as an object of columns
      const p = j.predictions[0];
      if (Array.isArray(p)) out.set('PROBS', p);
      else for (const [k, v] of Object.entries(p)) out.set(k, v);
      return out;
    }
    for (const o of j.outputs) out.set(o.name, o.data);
    return out;
  }

  /** What the answer of each mix entry must hold. */
  function expectationOf(m) {
    if (m.payload === '600KB') return (outs) => outs.get('PROBS')?.length === 1000;
    const bytes = /** @type {Buffer} */ (requestOf(m.payload, 'raw').body); // image_stats' input: the raw form's body
    let total = 0;
    for (let i = 0; i < bytes.length; i++) total += bytes[i];
    return (outs) => Number(outs.get('LEN')?.[0]) === bytes.length && Number(outs.get('SUM')?.[0]) === total;
  }

  async function run(cfg) {
    const origin = `http://127.0.0.1:${cfg.port}`;
    const slots = mixSlots();
    const entries = MIX.map((m) => ({ ...m, req: requestOf(m.payload, m.form), check: expectationOf(m), lat: [], errors: 0 }));
    const nWindows = Math.ceil(cfg.durationMs / cfg.windowMs);
    const windows = [];
    const windowOf = (t) => Math.min(nWindows - 1, Math.max(0, Math.floor((t - cfg.startAt) / cfg.windowMs)));
    const win = (k) => (windows[k] ??= { k, lat: [], errors: {}, connects: 0, disconnects: {}, late: 0, skipped: 0 });
    const samples = {}; // first message of each error kind
    const bump = (obj, key) => { obj[key] = (obj[key] ?? 0) + 1; };
    let counting = true;
    let inFlight = 0;

    const clients = Array.from({ length: cfg.connections }, () => {
      const c = new Client(origin, {
        pipelining: 1, keepAliveTimeout: 120_000, keepAliveMaxTimeout: 600_000,
        headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS, connect: { timeout: 10_000 },
      });
      c.on('connect', () => { if (counting) win(windowOf(Date.now())).connects++; });
      c.on('disconnect', (_o, _t, err) => {
        if (!counting) return;
        const kind = err?.code ?? err?.name ?? 'closed';
        bump(win(windowOf(Date.now())).disconnects, kind);
        samples[`disconnect ${kind}`] ??= String(err?.message ?? err);
      });
      return c;
    });

    const record = (e, t0, kind, message) => {
      const now = Date.now();
      const w = win(windowOf(now));
      if (kind === undefined) {
        const ms = performance.now() - t0;
        w.lat.push(ms);
        e.lat.push(ms);
      } else {
        bump(w.errors, kind);
        e.errors++;
        samples[kind] ??= `${e.id}: ${message}`.slice(0, 300);
      }
    };

    async function send(client, e) {
      const t0 = performance.now();
      inFlight++;
      try {
        const res = await client.request({ path: e.req.path, method: 'POST', headers: e.req.headers, body: e.req.body });
        const chunks = [];
        for await (const c of res.body) chunks.push(c);
        const body = Buffer.concat(chunks);
        if (res.statusCode !== 200) {
          record(e, t0, `HTTP ${res.statusCode} ${res.headers['x-tensorgate-error'] ?? ''}`.trim(), body.toString('utf8', 0, 300));
          return;
        }
        let ok = false;
        try { ok = e.check(outputsOf(res.headers, body)); } catch { /* unparsable: wrong */ }
        if (ok) record(e, t0);
        else record(e, t0, 'wrong answer', body.toString('utf8', 0, 300));
      } catch (err) {
        record(e, t0, `client ${err.code ?? err.name}`, String(err.message ?? err));
      } finally {
        inFlight--;
      }
    }

    let seq = 0;
    const periodMs = (cfg.connections * 1000) / cfg.rate;
    const endAt = cfg.startAt + cfg.durationMs;
    async function worker(i) {
      let next = cfg.startAt + (i * 1000) / cfg.rate;
      while (next < endAt) {
        const wait = next - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        else if (-wait > LATE_MS) win(windowOf(Date.now())).late++;
        await send(clients[i], entries[slots[seq++ % slots.length]]);
        next += periodMs;
        const behind = Date.now() - next;
        if (behind > periodMs) {
          const missed = Math.floor(behind / periodMs);
          win(windowOf(Date.now())).skipped += missed;
          next += missed * periodMs;
        }
      }
    }

    // Each window goes to the harness once its end has passed (answers are binned by completion).
    let sent = 0;
    const flush = (upTo) => {
      for (; sent < upTo; sent++) {
        const w = win(sent);
        const sorted = Float64Array.from(w.lat).sort();
        void toParent({ type: 'window', window: {
          k: w.k, n: sorted.length, p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99),
          max: sorted[sorted.length - 1], errors: w.errors, connects: w.connects, disconnects: w.disconnects,
          late: w.late, skipped: w.skipped, inFlight,
        } });
        w.lat = [];
      }
    };
    const ticker = setInterval(() => flush(Math.min(nWindows - 1, Math.floor((Date.now() - cfg.startAt) / cfg.windowMs))), 250);
    await Promise.all(clients.map((_, i) => worker(i)));
    clearInterval(ticker);
    counting = false;
    flush(nWindows);
    const perForm = entries.map((e) => {
      const sorted = Float64Array.from(e.lat).sort();
      return { id: e.id, n: sorted.length, errors: e.errors, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] };
    });
    await Promise.all(clients.map((c) => c.destroy()));
    return { perForm, samples, requests: seq };
  }

  process.on('message', (/** @type {any} IPC from the harness: { type: 'start', config } */ m) => {
    if (m.type !== 'start') return;
    run(m.config).then(
      (totals) => toParent({ type: 'done', totals }),
      (err) => toParent({ type: 'failed', error: String(err?.stack ?? err) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
  toParent({ type: 'ready' });
}

// ================================================================== the harness

function harness() {
  const {
    NODE, DIST, MAIN_JS, children, stopChild, startGateway, startReference, cpuSeconds, statusKb, openFileLimit, machine,
  } = require('./procs');

  const argv = process.argv.slice(2);
  const { values: o } = parseArgs({ args: argv, options: {
    'duration-s': { type: 'string', default: '600' }, connections: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '500' }, 'window-s': { type: 'string', default: '10' }, 'warmup-s': { type: 'string' },
    demo: { type: 'boolean' }, 'gateway-arg': { type: 'string', multiple: true, default: [] },
    'no-write': { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
  } });
  if (o.help) {
    process.stdout.write(`node bench/soak.js [options]   (npm run build first)
  --duration-s N      length of the soak (default 600)
  --connections N     keep-alive connections (default 1000)
  --rate N            requests/s over all connections, open loop (default 500; each connection
                      sends every connections/rate s: keep that below the gateway's idle timeout)
  --window-s N        window of the table (default 10)
  --warmup-s N        windows before this are warm-up for the RSS goal (default 60, or 1/3 of a shorter run)
  --demo              gateway with --demo (backend in-process) instead of the reference backend's own process
  --gateway-arg ARG   one more flag for the gateway (repeat)
  --no-write          print the section, leave bench/RESULTS.md alone
`);
    process.exit(0);
  }
  const windowS = Number(o['window-s']);
  const durationS = Math.ceil(Number(o['duration-s']) / windowS) * windowS;
  const cfg = {
    durationS,
    windowS,
    connections: Number(o.connections),
    rate: Number(o.rate),
    warmupS: Math.ceil(Number(o['warmup-s'] ?? Math.min(60, durationS / 3)) / windowS) * windowS,
    demo: o.demo === true,
    gatewayArgs: o['gateway-arg'],
    write: o['no-write'] !== true,
    section: durationS >= 600 ? 'full' : 'quick',
  };
  for (const k of ['durationS', 'windowS', 'connections', 'rate']) {
    if (!(cfg[k] > 0)) { process.stderr.write(`soak: ${k} must be a positive number\n`); process.exit(2); }
  }
  const STARTED = Date.now();
  const log = (msg) => process.stderr.write(`[soak ${((Date.now() - STARTED) / 1000).toFixed(1)}s] ${msg}\n`);
  const fail = (msg) => { process.stderr.write(`soak: ${msg}\n`); process.exitCode = 2; };

  let stopping;
  const stopAll = () => (stopping ??= (async () => {
    for (const e of [...children].reverse()) await stopChild(e, 5_000);
  })());
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => { log(`${sig}: stopping children`); stopAll().then(() => process.exit(130)); });
  }

  /** The load generator: this file with --load-child, an IPC channel, output inherited. */
  function startLoadChild() {
    return new Promise((resolve, reject) => {
      const child = spawn(NODE, [__filename, '--load-child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push({ name: 'load', child, group: false });
      const timer = setTimeout(() => reject(new Error('load generator not ready in 30 s')), 30_000);
      child.once('message', (/** @type {any} IPC from the load child */ m) => { if (m.type === 'ready') { clearTimeout(timer); resolve(child); } });
      child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`load generator exited (${code})`)); });
    });
  }

  /** Busy and total jiffies of the whole machine (/proc/stat, first line). */
  function machineJiffies() {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  }

  async function main() {
    if (!fs.existsSync(path.join(DIST, MAIN_JS))) return fail('dist/ is missing: run `npm run build` first');
    const needFiles = cfg.connections + 256;
    const own = openFileLimit();
    if (own.hard < needFiles) {
      return fail(`the hard open-file limit is ${own.hard}; the gateway and the load generator need ~${needFiles} each for ${cfg.connections} connections. Raise it (as root: ulimit -Hn ${needFiles}, or LimitNOFILE / docker --ulimit nofile) or pass --connections ${Math.max(1, own.hard - 256)}`);
    }
    log(`${cfg.connections} connections, ${cfg.rate} req/s, ${cfg.durationS} s in ${cfg.windowS}-s windows (warm-up ${cfg.warmupS} s); open files: soft ${own.soft}, hard ${own.hard}`);

    // The gateway's heap and buffer memory, from bench/mem-probe.js preloaded into it.
    const memFile = path.join(os.tmpdir(), `tensorgate-soak-mem-${process.pid}.json`);
    const gwEnv = {
      ...process.env, BENCH_SOAK_MEM_FILE: memFile,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(path.join(__dirname, 'mem-probe.js'))}`.trim(),
    };
    const readMem = () => { try { return JSON.parse(fs.readFileSync(memFile, 'utf8')); } catch { return undefined; } };
    const memOf = (m) => (m === undefined ? {} : {
      heapUsedMB: m.heapUsed / 2 ** 20, heapTotalMB: m.heapTotal / 2 ** 20, externalMB: m.external / 2 ** 20, arrayBuffersMB: m.arrayBuffers / 2 ** 20,
    });
    let ref;
    let gw;
    if (cfg.demo) {
      gw = await startGateway('tensorgate', undefined, ['--demo', ...cfg.gatewayArgs], gwEnv);
    } else {
      ref = await startReference();
      gw = await startGateway('tensorgate', ref.address, cfg.gatewayArgs, gwEnv);
    }
    log(`gateway on ${gw.port} (pid ${gw.pid})${ref ? `, reference backend on ${ref.address} (pid ${ref.pid})` : ' (--demo backend in-process)'}`);
    // Warn/error lines of the gateway during the soak: counted by message.
    const gatewayLog = {};
    let logBuf = '';
    gw.child.stdout.on('data', (s) => {
      logBuf += s;
      let nl;
      while ((nl = logBuf.indexOf('\n')) >= 0) {
        const line = logBuf.slice(0, nl);
        logBuf = logBuf.slice(nl + 1);
        let msg = line.slice(0, 120);
        try { const j = JSON.parse(line); msg = `${j.level >= 50 ? 'error' : 'warn'}: ${j.code ?? ''} ${j.msg ?? ''}`.slice(0, 160); } catch { /* not JSON */ }
        gatewayLog[msg] = (gatewayLog[msg] ?? 0) + 1;
      }
    });
    let gatewayExit;
    gw.child.once('exit', (code, sig) => {
      if (stopping) return;
      gatewayExit = `gateway exited (${code ?? sig}) during the soak`;
      log(gatewayExit);
    });

    const load = await startLoadChild();
    const limits = { harness: own, gateway: openFileLimit(gw.pid), load: openFileLimit(load.pid) };
    for (const who of ['gateway', 'load']) {
      if (limits[who].soft < needFiles) return fail(`${who}'s soft open-file limit is ${limits[who].soft} < ${needFiles} (Node normally raises it to the hard limit ${limits[who].hard} at start)`);
    }

    const windowMs = cfg.windowS * 1000;
    const startAt = Date.now() + 1000;
    const pids = { gateway: gw.pid, reference: ref?.pid, load: load.pid };
    const windows = [];
    const stats = new Map(); // k → the load generator's numbers
    const sampleNow = () => ({
      at: Date.now(), jiffies: machineJiffies(),
      cpu: Object.fromEntries(Object.entries(pids).filter(([, p]) => p).map(([n, p]) => [n, cpuSeconds(p)])),
    });
    const rssIdleMB = statusKb(gw.pid, 'VmRSS') / 1024;
    const memIdle = memOf(readMem());
    let winStart = sampleNow();
    let rss = [];
    const sampler = setInterval(() => {
      const now = Date.now();
      if (now < startAt) return;
      rss.push(statusKb(gw.pid, 'VmRSS') / 1024);
      const k = windows.length;
      if (now < startAt + (k + 1) * windowMs) return;
      const end = sampleNow();
      const wallS = (end.at - winStart.at) / 1000;
      const cpuPct = (name) => (winStart.cpu[name] === undefined ? undefined : (100 * (end.cpu[name] - winStart.cpu[name])) / wallS);
      const ours = Object.keys(end.cpu).reduce((a, n) => a + end.cpu[n] - winStart.cpu[n], 0);
      const hz = (end.jiffies.total - winStart.jiffies.total) / wallS / os.cpus().length; // jiffies per core-second
      const machineBusyS = (end.jiffies.busy - winStart.jiffies.busy) / hz;
      windows.push({
        k, rssMeanMB: rss.reduce((a, b) => a + b, 0) / rss.length, rssMaxMB: Math.max(...rss), rssEndMB: rss[rss.length - 1],
        gatewayCpuPct: cpuPct('gateway'), referenceCpuPct: cpuPct('reference'), loadCpuPct: cpuPct('load'),
        otherCpuPct: Math.max(0, (100 * (machineBusyS - ours)) / wallS), loadavg1: os.loadavg()[0],
        ...memOf(readMem()),
      });
      rss = [];
      winStart = end;
    }, 1000);
    // Unref'd: a run that failed (the load generator gone) must end once its children are stopped,
    // not wait on this timer for ever. While the run goes on, the load child's IPC channel keeps it.
    sampler.unref();

    const totals = await new Promise((resolve, reject) => {
      load.on('message', (m) => {
        if (m.type === 'window') {
          const w = m.window;
          stats.set(w.k, w);
          if (w.k % 6 === 5 || w.k === 0) {
            log(`t=${(w.k + 1) * cfg.windowS} s: ${(w.n / cfg.windowS).toFixed(0)} req/s, p50 ${fmt(w.p50)} ms, p99 ${fmt(w.p99)} ms, errors ${sum(w.errors)}; gateway RSS ${fmt(statusKb(gw.pid, 'VmRSS') / 1024, 0)} MB`);
          }
        }
        if (m.type === 'done') resolve(m.totals);
        if (m.type === 'failed') reject(new Error(`load generator failed: ${m.error}`));
      });
      load.once('exit', (code) => reject(new Error(`load generator exited (${code}) before it was done`)));
      load.send({ type: 'start', config: { port: gw.port, connections: cfg.connections, rate: cfg.rate, durationMs: cfg.durationS * 1000, windowMs, startAt } });
    });
    // The sampler closes the last window a second after its end at most.
    await new Promise((resolve) => {
      const t = setInterval(() => { if (windows.length >= cfg.durationS / cfg.windowS) { clearInterval(t); resolve(undefined); } }, 200);
    });
    clearInterval(sampler);
    const run = {
      date: new Date().toISOString(), command: `node bench/soak.js${argv.length ? ` ${argv.join(' ')}` : ''}`, elapsedS: (Date.now() - STARTED) / 1000,
      machine: machine(), node: process.version, cfg, limits, gatewayExit, gatewayLog, rssIdleMB, memIdle,
      windows: windows.map((w) => ({ ...w, ...stats.get(w.k) })), totals,
    };
    await stopAll();
    fs.rmSync(memFile, { force: true });
    const md = renderMarkdown(run);
    process.stdout.write(`${md}\n`);
    if (cfg.write) writeOutputs(run, md);
    log(`done in ${((Date.now() - STARTED) / 1000).toFixed(0)} s`);
  }

  main().catch(async (err) => {
    process.stderr.write(`soak: ${err.stack ?? err}\n`);
    process.exitCode = 1;
  }).finally(() => stopAll());
}

// ================================================================== reporting

function fmt(v, digits) {
  if (v === undefined || v === null || Number.isNaN(v)) return '–';
  if (digits !== undefined) return v.toFixed(digits);
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}
const sum = (obj) => Object.values(obj ?? {}).reduce((a, b) => a + b, 0);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const merge = (list) => {
  const out = {};
  for (const o of list) for (const [k, v] of Object.entries(o ?? {})) out[k] = (out[k] ?? 0) + v;
  return out;
};
const kinds = (obj) => Object.entries(obj).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${v} × ${k}`).join(', ');

const range = (xs) => { const v = xs.filter((x) => x !== undefined); return v.length ? `${fmt(Math.min(...v), 0)}–${fmt(Math.max(...v), 0)}` : '–'; };

/** Least-squares slope of y over x. */
function slope(xs, ys) {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) { num += (xs[i] - mx) * (ys[i] - my); den += (xs[i] - mx) ** 2; }
  return num / den;
}

/** The verdicts of a run: [{ goal, measured, verdict }]. */
function verdicts(run) {
  const { cfg, windows } = run;
  const verdict = (ok) => (ok ? '**met**' : '**not met**');
  const out = [];
  const requests = windows.reduce((a, w) => a + (w.n ?? 0), 0);
  const errors = merge(windows.map((w) => w.errors));
  const nErrors = sum(errors);
  out.push({
    goal: 'errors: 0 (any status but 200, wrong answer, client-side failure)',
    measured: nErrors === 0 ? `0 of ${requests + nErrors}` : `${nErrors} of ${requests + nErrors}: ${kinds(errors)}${run.gatewayExit ? `; ${run.gatewayExit}` : ''}`,
    verdict: verdict(nErrors === 0 && !run.gatewayExit),
  });
  const steady = windows.filter((w) => w.k * cfg.windowS >= cfg.warmupS);
  const maxes = steady.map((w) => w.rssMaxMB);
  const lo = Math.min(...maxes);
  const hi = Math.max(...maxes);
  const trend = slope(steady.map((w) => (w.k * cfg.windowS) / 60), steady.map((w) => w.rssMeanMB));
  out.push({
    goal: `gateway RSS flat within 10 % after the ${cfg.warmupS}-s warm-up (per-window peak of 1-s samples)`,
    measured: `${fmt(lo, 0)}–${fmt(hi, 0)} MB (spread ${fmt((100 * (hi - lo)) / lo, 1)} %); trend ${fmt(trend, 2)} MB/min; idle before the load ${fmt(run.rssIdleMB, 0)} MB, end of the first window ${fmt(windows[0]?.rssEndMB, 0)} MB; after the warm-up V8 heap used ${range(steady.map((w) => w.heapUsedMB))} MB, external ${range(steady.map((w) => w.externalMB))} MB`,
    verdict: steady.length ? verdict(hi <= 1.1 * lo) : 'not measured (no window after the warm-up)',
  });
  const connects = windows.reduce((a, w) => a + (w.connects ?? 0), 0);
  const closes = merge(windows.map((w) => w.disconnects));
  out.push({
    goal: `${cfg.connections.toLocaleString('en')} keep-alive connections opened once and held`,
    measured: `${connects} connects${sum(closes) ? `; closed during the run: ${kinds(closes)}` : ', none closed during the run'}`,
    verdict: verdict(connects === cfg.connections && sum(closes) === 0),
  });
  const rate = requests / cfg.durationS;
  const late = windows.reduce((a, w) => a + (w.late ?? 0), 0);
  const skipped = windows.reduce((a, w) => a + (w.skipped ?? 0), 0);
  out.push({
    goal: `(info) offered rate held: ${cfg.rate} req/s`,
    measured: `${fmt(rate, 0)} req/s answered 200; ${late} sent > 50 ms late, ${skipped} slots skipped`,
    verdict: rate >= 0.95 * cfg.rate ? 'held' : 'not held',
  });
  const third = Math.max(1, Math.floor(steady.length / 3));
  const p99a = median(steady.slice(0, third).map((w) => w.p99));
  const p99b = median(steady.slice(-third).map((w) => w.p99));
  out.push({
    goal: '(info) p99 drift: median window p99, last third vs first third after warm-up',
    measured: `${fmt(p99a)} → ${fmt(p99b)} ms`,
    verdict: `${fmt(p99b / p99a, 2)}×`,
  });
  return out;
}

function renderMarkdown(run) {
  const { cfg, windows, totals } = run;
  const L = [];
  const minutes = cfg.durationS >= 120 ? `${fmt(cfg.durationS / 60, 0)} min` : `${cfg.durationS} s`;
  L.push(`<!-- soak:${cfg.section}:start (written by bench/soak.js; replaced by the next ${cfg.section} soak) -->`);
  L.push(`## Soak: ${cfg.connections.toLocaleString('en')} keep-alive connections, mixed forms, ${minutes} — ${cfg.section} (${run.date.slice(0, 10)})`);
  L.push('');
  L.push(`Command: \`${run.command}\` (${fmt(run.elapsedS, 0)} s). Date: ${run.date}. Machine: ${run.machine}; Node ${run.node}.`);
  L.push(`Backend: ${cfg.demo ? 'the gateway\'s `--demo` reference backend, in-process (its memory counts as the gateway\'s)' : 'the reference backend (dist/gateway/reference-backend) in its own process'}. Gateway: dist/, \`--log-level warn --server-timing=false${cfg.gatewayArgs.length ? ` ${cfg.gatewayArgs.join(' ')}` : ''}\`, defaults otherwise. Load generator: its own process, one undici Client (one keep-alive connection) per simulated client, open loop at ${cfg.rate} req/s in all — each connection sends every ${fmt((cfg.connections / cfg.rate), 1)} s, phase-shifted; every answer is checked (image_stats' LEN and SUM, classifier_fp32's 1000 PROBS). Latency: from the request's start to the answer's last byte, binned by completion.`);
  L.push(`Open files (soft/hard): harness ${run.limits.harness.soft}/${run.limits.harness.hard}, gateway ${run.limits.gateway.soft}/${run.limits.gateway.hard}, load generator ${run.limits.load.soft}/${run.limits.load.hard} — each process holds one side of the ${cfg.connections} connections in its own table; Node raises its soft limit to the hard one at start.`);
  const other = windows.map((w) => w.otherCpuPct);
  L.push(`Shared machine: besides the gateway, backend and load generator, other processes used ${fmt(median(other), 0)} % of one core (median over windows; ${fmt(Math.min(...other), 0)}–${fmt(Math.max(...other), 0)} %); 1-min load average ${fmt(Math.min(...windows.map((w) => w.loadavg1)), 1)}–${fmt(Math.max(...windows.map((w) => w.loadavg1)), 1)} on ${os.cpus().length} cores.`);
  L.push('');
  L.push('Mix (per mille of requests): ' + MIX.map((m) => `${m.label} ${m.payload} ${m.perMille}`).join(', ') + '.');
  L.push('');
  L.push('### Verdicts');
  L.push('');
  L.push('| goal | measured | verdict |');
  L.push('|---|---|---|');
  for (const v of verdicts(run)) L.push(`| ${v.goal} | ${v.measured.replace(/\|/g, '/')} | ${v.verdict} |`);
  const samples = Object.entries(totals?.samples ?? {});
  if (samples.length) {
    L.push('');
    L.push('First message of each error or close kind:');
    L.push('');
    for (const [k, v] of samples) L.push(`- ${k}: \`${v.replace(/`/g, "'").replace(/\s+/g, ' ').slice(0, 200)}\``);
  }
  const logs = Object.entries(run.gatewayLog ?? {});
  L.push('');
  L.push(logs.length ? `Gateway warn/error log lines: ${logs.map(([k, v]) => `${v} × \`${k.trim()}\``).join(', ')}.` : 'Gateway warn/error log lines: none.');
  L.push('');
  L.push('### Per form (whole run)');
  L.push('');
  L.push('| form | payload | n | errors | p50 ms | p99 ms | max ms |');
  L.push('|---|---|---|---|---|---|---|');
  for (const f of totals?.perForm ?? []) {
    const m = /** @type {typeof MIX[number]} (every form is one of the mix) */ (MIX.find((x) => x.id === f.id));
    L.push(`| ${m.label} | ${m.payload} | ${f.n} | ${f.errors} | ${fmt(f.p50)} | ${fmt(f.p99)} | ${fmt(f.max)} |`);
  }
  L.push('');
  L.push(`### Over time (${cfg.windowS}-s windows)`);
  L.push('');
  L.push('RSS: gateway VmRSS sampled every second (mean / peak of the window). Heap and external: the gateway\'s `process.memoryUsage()` at the window\'s end (bench/mem-probe.js, preloaded; external includes Buffers). CPU: % of one core over the window; "other" is the machine\'s busy time minus the three processes of the soak.');
  L.push('');
  L.push('| t (s) | req/s | p50 ms | p99 ms | max ms | errors | conn. opened / closed | gateway RSS MB | heap used / total MB | external MB | gateway CPU | backend CPU | load gen. CPU | other CPU | load avg |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of windows) {
    const t = (w.k + 1) * cfg.windowS;
    L.push(`| ${t}${w.k * cfg.windowS < cfg.warmupS ? ' (warm-up)' : ''} | ${fmt((w.n ?? 0) / cfg.windowS, 0)} | ${fmt(w.p50)} | ${fmt(w.p99)} | ${fmt(w.max)} | ${sum(w.errors)} | ${w.connects ?? 0} / ${sum(w.disconnects)} | ${fmt(w.rssMeanMB, 0)} / ${fmt(w.rssMaxMB, 0)} | ${fmt(w.heapUsedMB, 0)} / ${fmt(w.heapTotalMB, 0)} | ${fmt(w.externalMB, 0)} | ${fmt(w.gatewayCpuPct, 0)} % | ${w.referenceCpuPct === undefined ? '(in gateway)' : `${fmt(w.referenceCpuPct, 0)} %`} | ${fmt(w.loadCpuPct, 0)} % | ${fmt(w.otherCpuPct, 0)} % | ${fmt(w.loadavg1, 1)} |`);
  }
  L.push(`<!-- soak:${cfg.section}:end -->`);
  return L.join('\n');
}

/** Replaces the section's previous text, or puts it after the bench sections (before the older notes). */
function writeOutputs(run, md) {
  const file = path.join(__dirname, 'RESULTS.md');
  let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n';
  const key = `soak:${run.cfg.section}`;
  const re = new RegExp(`<!-- ${key}:start[^]*?<!-- ${key}:end -->\\n*`);
  if (re.test(text)) {
    text = text.replace(re, `${md}\n\n`);
  } else {
    const anchors = ['<!-- soak:full:end -->', '<!-- bench:quick:end -->', '<!-- bench:full:end -->'];
    const anchor = anchors.map((a) => text.indexOf(a)).find((i) => i >= 0);
    const at = anchor === undefined ? text.length : text.indexOf('\n', anchor) + 1;
    text = `${text.slice(0, at).replace(/\n*$/, '\n\n')}${md}\n\n${text.slice(at).replace(/^\n+/, '')}`;
  }
  fs.writeFileSync(file, text);
  fs.writeFileSync(path.join(__dirname, `soak-${run.cfg.section}.json`), `${JSON.stringify(run, null, 1)}\n`);
  process.stderr.write(`soak: wrote bench/RESULTS.md (${key}) and bench/soak-${run.cfg.section}.json\n`);
}
