// CPU per request of one gateway from dist/ (or a given dist dir) in front of the reference backend
// (README.md#benchmark): the gateway's user+system CPU from /proc/<pid>/stat over a fixed number of
// requests, divided by that number. Steadier than a time-boxed bench cell on a shared machine.
//   node bench/cpu-per-request.js [--dist DIR] [--form binary|raw|h2|b64|v1b64|json|grpc]
//     [--payload 64B|4KB|600KB|4MB|16MB] [--concurrency 8] [--requests 2000] [--rounds 1]
//     [--backend-addr HOST:PORT (a running Triton's gRPC)]
//     [--echo (UINT8 payloads through identity_uint8: answers as large as requests)]
//     [--prof DIR] [--gc-count] [--gc-bytes] [--faults] [--syscalls] [--heap-sample FILE]
//     [--node-flags '--trace-gc …'] [--no-product-flags] [--idle-ms N (the gateway idle before each round)]
//     [--before-form F (before each round, as many requests of form F, not measured: mixed traffic)]
//     [--nginx TRITON_HTTP_PORT (nginx too, bench/nginx.js, in front of that Triton's HTTP port:
//      each round measures nginx, then the gateway, both CPUs split into user and system)]
//     [-- extra gateway flags]
// --form grpc: ModelInfer calls through the gateway's gRPC pass-through, one h2 session with c streams
// (the message protobufjs encodes, the tensor in raw_input_contents; answers read whole, status checked).
// --form grpc-port: the same calls to the gRPC port (server.grpc.enabled: our own HTTP/2 server).
// Node runs the gateway with bench/procs.js's GATEWAY_NODE_FLAGS (as bin/tensorgate) unless --no-product-flags.
'use strict';
const path = require('node:path');
const http2 = require('node:http2');
const { Pool } = require('undici');
const procs = require('./procs');
const { startNginx } = require('./nginx');

const argv = process.argv.slice(2);
const dd = argv.indexOf('--');
const extra = dd >= 0 ? argv.slice(dd + 1) : [];
const own = dd >= 0 ? argv.slice(0, dd) : argv;
const opt = (n, d) => { const i = own.indexOf(n); return i >= 0 ? own[i + 1] : d; };
const dist = path.resolve(opt('--dist', procs.DIST));
const form = opt('--form', 'binary');
const payload = opt('--payload', '600KB');
const concurrency = Number(opt('--concurrency', 8));
const requests = Number(opt('--requests', 2000));
const rounds = Number(opt('--rounds', 1));
const prof = opt('--prof', undefined);
const echo = own.includes('--echo');
const gcCount = own.includes('--gc-count'); // --trace-gc in the gateway: scavenges and mark-compacts per round
// --trace-gc-nvp in the gateway: heap allocated and promoted per request, summed over the round's scavenges
const gcBytes = own.includes('--gc-bytes');
// The gateway's minor page faults and system CPU per request (/proc/PID/stat): fresh memory of
// 128 KiB or more is an mmap whose pages fault on first write (bin/tensorgate's mmap threshold).
const faults = own.includes('--faults');
// The gateway's read and write system calls per request (/proc/PID/io syscr, syscw: every thread's;
// writev counts as one write): what batching writes across requests saves.
const syscalls = own.includes('--syscalls');
function ioCalls(pid) {
  try {
    const s = require('node:fs').readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (name) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(s)?.[1] ?? 0);
    return { r: field('syscr'), w: field('syscw') };
  } catch { return { r: 0, w: 0 }; }
}
// The gateway's allocations sampled (collected ones too) by bench/heap-sample.js into FILE, then
// summarised by bench/heap-summary.js: where the bytes allocated per request come from.
const heapSample = opt('--heap-sample', undefined);
const idleMs = Number(opt('--idle-ms', 0));
// nginx beside the gateway (the same requests to Triton's HTTP port), its master and worker measured
// the same way: where the two hops' CPU differs, user space or the kernel (binary, raw, json forms).
const nginxTriton = opt('--nginx', undefined);

function bodyOf(form) {
  let bytes; let model; let input; let datatype; let shape; let outputs;
  if (payload === '600KB') {
    const f = new Float32Array(3 * 224 * 224);
    for (let i = 0; i < f.length; i++) f[i] = ((i * 7) % 256) / 8;
    bytes = Buffer.from(f.buffer); model = 'classifier_fp32'; input = 'INPUT'; datatype = 'FP32'; shape = [1, 3, 224, 224]; outputs = ['PROBS'];
  } else {
    const n = { '64B': 64, '4KB': 4096, '4MB': 4 * 1024 * 1024, '16MB': 16 * 1024 * 1024 }[payload];
    if (n === undefined) throw new Error(`--payload ${payload}: one of 64B, 4KB, 600KB, 4MB, 16MB`);
    bytes = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) bytes[i] = (i * 31 + 7) & 0xff;
    model = 'image_stats'; input = 'IMAGE'; datatype = 'UINT8'; shape = [1, n]; outputs = ['LEN', 'SUM'];
    // --echo: identity_uint8 instead, whose answer is as large as the request (the answer path).
    if (echo) { model = 'identity_uint8'; input = 'INPUT0'; outputs = ['OUTPUT0']; }
  }
  const p = `/v2/models/${model}/infer`;
  if (form === 'grpc' || form === 'grpc-port') {
    const { inference } = require(path.join(dist, 'proto/services.js'));
    const msg = Buffer.from(inference.ModelInferRequest.encode({
      model_name: model, inputs: [{ name: input, datatype, shape }], outputs: outputs.map((name) => ({ name })),
      raw_input_contents: [bytes],
    }).finish());
    const framed = Buffer.alloc(5 + msg.length);
    framed.writeUInt32BE(msg.length, 1);
    msg.copy(framed, 5);
    return { path: '/inference.GRPCInferenceService/ModelInfer', headers: { 'content-type': 'application/grpc', te: 'trailers' }, body: framed };
  }
  // V2 JSON with the tensor as one base64 string (docs/dialects.md), answered as JSON.
  if (form === 'b64') {
    return { path: p, headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ inputs: [{ name: input, datatype, shape, data: bytes.toString('base64') }] })) };
  }
  // V1 predict (KServe V1 / TF-Serving) with the tensor as one {"b64"} instance, answered as predictions.
  if (form === 'v1b64') {
    return { path: `/v1/models/${model}:predict`, headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ instances: [{ b64: bytes.toString('base64') }] })) };
  }
  // V2 JSON with the tensor as numbers, answered as JSON.
  if (form === 'json') {
    const data = datatype === 'FP32' ? Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)) : Array.from(bytes);
    return { path: p, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ inputs: [{ name: input, datatype, shape, data }] })) };
  }
  if (form === 'raw') return { path: p, headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' }, body: bytes };
  const header = Buffer.from(JSON.stringify({
    inputs: [{ name: input, datatype, shape, parameters: { binary_data_size: bytes.length } }],
    outputs: outputs.map((name) => ({ name, parameters: { binary_data: true } })),
  }));
  return { path: p, headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
    body: Buffer.concat([header, bytes]) };
}

function httpSender(port, req) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1, keepAliveTimeout: 60_000 });
  return {
    async send() {
      const res = await pool.request({ path: req.path, method: 'POST', headers: req.headers, body: req.body });
      let n = 0;
      for await (const c of res.body) n += c.length;
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
      return n;
    },
    close: () => pool.destroy(),
  };
}

function grpcSender(port, req) {
  const session = http2.connect(`http://127.0.0.1:${port}`, { maxSessionMemory: 256 });
  session.on('error', () => undefined);
  const headers = { ':method': 'POST', ':path': req.path, ...req.headers };
  return {
    send: () => /** @type {Promise<void>} */ (new Promise((resolve, reject) => {
      const s = session.request(headers);
      let grpcStatus;
      let n = 0;
      s.on('response', (h) => { grpcStatus = h['grpc-status']; });
      s.on('trailers', (t) => { grpcStatus = t['grpc-status']; });
      s.on('data', (c) => { n += c.length; });
      s.on('error', reject);
      s.on('end', () => (grpcStatus === '0' && n > 5 ? resolve() : reject(new Error(`grpc-status ${grpcStatus}`))));
      s.end(req.body);
    })),
    close: () => session.destroy(),
  };
}

function h2Sender(port, req) {
  const session = http2.connect(`http://127.0.0.1:${port}`, { maxSessionMemory: 256 });
  session.on('error', () => undefined);
  const headers = { ':method': 'POST', ':path': req.path, 'content-length': req.body.length, ...req.headers };
  return {
    send: () => /** @type {Promise<void>} */ (new Promise((resolve, reject) => {
      const s = session.request(headers);
      let status = 0;
      s.on('response', (h) => { status = h[':status'] ?? 0; });
      s.on('data', () => undefined);
      s.on('error', reject);
      s.on('end', () => (status === 200 ? resolve() : reject(new Error(`HTTP ${status}`))));
      s.end(req.body);
    })),
    close: () => session.destroy(),
  };
}

async function run(sender, n) {
  let next = 0;
  const worker = async () => { while (next++ < n) await sender.send(); };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Waits (at most 15 s) for the gateway to write its heap sample (7 s after its start by default). */
async function sampled(file) {
  const fs = require('node:fs');
  const until = Date.now() + 15_000;
  while (!fs.existsSync(file) && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
  process.stdout.write(fs.existsSync(file) ? `heap sample: ${file} (node bench/heap-summary.js ${file})\n` : `heap sample: ${file} not written within 15 s\n`);
}

/** nginx (bench/nginx.js) in a temporary directory, in front of Triton's HTTP and gRPC ports. */
async function startNginxFor(tritonHttp, tritonGrpc) {
  const fs = require('node:fs');
  const os = require('node:os');
  if (!['binary', 'raw', 'json'].includes(form)) throw new Error(`--nginx: Triton's HTTP port reads --form binary, raw or json, not ${form}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-cpu-nginx-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const log = (msg) => process.stderr.write(`${msg}\n`);
  const fail = (msg) => { throw new Error(msg); };
  return startNginx(path.join(dir, 'nginx'), tritonHttp, tritonGrpc, { log, fail, quiet: () => true });
}

/** User and system CPU seconds of `pids` together. */
function splitCpu(pids) {
  const t = { user: 0, system: 0 };
  for (const pid of pids) {
    const f = procs.faultsAndSystem(pid);
    t.user += f.user;
    t.system += f.system;
  }
  return t;
}

async function main() {
  const backendAddr = opt('--backend-addr', undefined);
  const ref = backendAddr === undefined ? await procs.startReference() : { address: backendAddr };
  const grpcPort = form === 'grpc-port';
  const args = [path.join(dist, procs.MAIN_JS), '--backend', ref.address, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0',
    '--log-level', 'warn', '--server-timing=false', ...(grpcPort ? ['--grpc-port-enabled', '--grpc-port', '0'] : []), ...extra];
  const nodeArgs = [...(own.includes('--no-product-flags') ? [] : procs.GATEWAY_NODE_FLAGS), ...(prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : []), ...(opt('--node-flags', '') || '').split(' ').filter(Boolean), ...(gcCount ? ['--trace-gc'] : []), ...(gcBytes ? ['--trace-gc-nvp'] : []), ...(heapSample ? ['--require', path.join(__dirname, 'heap-sample.js')] : [])];
  const { child, match } = await procs.startProcess('gateway', procs.NODE, [...nodeArgs, ...args],
    { ready: grpcPort ? /listening on http:\/\/[^:]+:\d+.*gRPC port (\d+)/ : /listening on http:\/\/[^:]+:(\d+)/, timeoutMs: 30_000, env: { ...procs.gatewayEnv(), ...(heapSample ? { HEAP_SAMPLE_OUT: path.resolve(heapSample) } : {}) } });
  const port = Number(match[1]);
  const out = opt('--stdout', undefined); // the gateway's stdout after its ready line (e.g. --trace-gc)
  if (out !== undefined) child.stdout.pipe(require('node:fs').createWriteStream(out));
  const gc = { scavenge: 0, markCompact: 0, allocated: 0, promoted: 0 };
  if (gcBytes) {
    let rest = '';
    child.stdout.on('data', (s) => {
      const lines = (rest + s).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) {
        if (!l.includes('gc=s ')) continue;
        gc.allocated += Number(/ allocated=(\d+)/.exec(l)?.[1] ?? 0);
        gc.promoted += Number(/ promoted=(\d+)/.exec(l)?.[1] ?? 0);
      }
    });
  }
  if (gcCount) {
    child.stdout.on('data', (s) => {
      gc.scavenge += s.split('Scavenge').length - 1;
      gc.markCompact += s.split('Mark-Compact').length - 1;
    });
  }
  const senderOf = (f) => {
    const req = bodyOf(f);
    return f === 'h2' ? h2Sender(port, req) : f === 'grpc' || f === 'grpc-port' ? grpcSender(port, req) : httpSender(port, req);
  };
  const sender = senderOf(form);
  const beforeForm = opt('--before-form', undefined);
  const before = beforeForm === undefined ? undefined : senderOf(beforeForm);
  const nginx = nginxTriton === undefined ? undefined : await startNginxFor(Number(nginxTriton), Number(ref.address.split(':').pop()));
  const nginxSender = nginx === undefined ? undefined : httpSender(nginx.port, bodyOf(form));
  try {
    await run(sender, Math.min(400, requests));
    if (nginxSender !== undefined) await run(nginxSender, Math.min(400, requests));
    for (let r = 0; r < rounds; r++) {
      if (nginx !== undefined && nginxSender !== undefined) {
        const pids = [nginx.pid, ...procs.childPids(nginx.pid)];
        const a = splitCpu(pids); const t0 = process.hrtime.bigint();
        await run(nginxSender, requests);
        const b = splitCpu(pids); const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        process.stdout.write(`nginx ${form} ${payload} c=${concurrency}: ${((b.user + b.system - a.user - a.system) * 1000 / requests).toFixed(3)} ms CPU/req`
          + ` (user ${((b.user - a.user) * 1000 / requests).toFixed(3)}, system ${((b.system - a.system) * 1000 / requests).toFixed(3)}), ${(requests / ms * 1000).toFixed(0)} req/s\n`);
      }
      if (before !== undefined) await run(before, requests);
      if (idleMs > 0) await new Promise((resolve) => setTimeout(resolve, idleMs));
      const c0 = procs.cpuSeconds(child.pid); const t0 = process.hrtime.bigint(); const f0 = procs.faultsAndSystem(child.pid);
      const io0 = ioCalls(child.pid);
      gc.scavenge = 0; gc.markCompact = 0; gc.allocated = 0; gc.promoted = 0;
      procs.resetPeak(child.pid);
      await run(sender, requests);
      const c1 = procs.cpuSeconds(child.pid); const ms = Number(process.hrtime.bigint() - t0) / 1e6; const f1 = procs.faultsAndSystem(child.pid);
      const io1 = ioCalls(child.pid);
      process.stdout.write(`${path.basename(path.dirname(dist))} ${form} ${payload} c=${concurrency}: `
        + `${((c1 - c0) * 1000 / requests).toFixed(3)} ms CPU/req, ${(requests / ms * 1000).toFixed(0)} req/s`
        + `, peak RSS ${(procs.statusKb(child.pid, 'VmHWM') / 1024).toFixed(0)} MB`
        + `${gcCount ? `, GC per 100 req: ${(gc.scavenge * 100 / requests).toFixed(1)} scavenges, ${(gc.markCompact * 100 / requests).toFixed(1)} mark-compacts` : ''}`
        + `${gcBytes ? `, heap per req: ${(gc.allocated / requests / 1024).toFixed(1)} KiB allocated, ${(gc.promoted / requests / 1024).toFixed(2)} KiB promoted` : ''}`
        + `${faults ? `, per req: ${((f1.minflt - f0.minflt) / requests).toFixed(1)} minor faults, ${((f1.system - f0.system) * 1000 / requests).toFixed(3)} ms system CPU` : ''}`
        + `${syscalls ? `, per req: ${((io1.r - io0.r) / requests).toFixed(2)} reads, ${((io1.w - io0.w) / requests).toFixed(2)} writes` : ''}`
        + `${nginx !== undefined ? ` (user ${((f1.user - f0.user) * 1000 / requests).toFixed(3)}, system ${((f1.system - f0.system) * 1000 / requests).toFixed(3)})` : ''}\n`);
    }
    if (heapSample) await sampled(path.resolve(heapSample));
  } finally {
    await sender.close();
    await before?.close();
    await nginxSender?.close();
    for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
  }
}
main().catch((e) => { console.error(e); for (const c of procs.children) void procs.stopChild(c, 1000); process.exitCode = 1; });
