// Memory after a burst of bad requests: the gateway's RSS at its warm level, after N mutated
// requests (V2 JSON, binary extension, base64; byte flips, insertions, truncations, wrong sizes,
// unknown model names, hostile shapes), and after --clean valid requests and some idle time.
// Goal: back within 64 MB of the warm level. Each point is read twice: as the process stands (what
// a dashboard sees) and after gc() (what is still referenced).
//
//   npm run -s build && node bench/mutate.js [--requests 25000] [--concurrency 16] [--idle-ms 5000] \
//     [--clean 1000] [-- <gateway flags>]
//
// Three processes: this one (client and reference backend), and the gateway alone in a child
// started with --expose-gc, which answers { rss } over IPC after `gc()` so that its figures are its
// own. Only 127.0.0.1 is used; every wait is bounded.
'use strict';
const { fork } = require('node:child_process');

// ------------------------------------------------------------------ the gateway child

/** `--gateway-host`: the gateway alone in this process, answering memory readings over IPC. */
function gatewayHost() {
  const { loadConfig } = require('#dist/gateway/config/load.js');
  const { startGateway } = require('#dist/gateway/gateway.js');
  const r = loadConfig({ argv: process.argv.slice(3), env: {} });
  const send = process.send?.bind(process);
  if (r.help || send === undefined) throw new Error('--gateway-host is the child bench/mutate.js forks: gateway flags only, no --help');
  void startGateway(r.config).then((gw) => {
    send({ type: 'ready', port: gw.port });
    const answer = async (m) => {
      if (m.type === 'memory' || m.type === 'memory-as-is') {
        if (m.type === 'memory') for (let i = 0; i < 3; i++) { /** @type {() => void} (--expose-gc) */ (globalThis.gc)(); await new Promise((res) => setImmediate(res)); }
        const u = process.memoryUsage();
        send({ type: m.type, rss: u.rss, heapUsed: u.heapUsed, heapTotal: u.heapTotal, external: u.external, arrayBuffers: u.arrayBuffers,
          pool: gw.bufferPool.stats() });
      }
      if (m.type === 'close') void gw.close(2000).then(() => process.exit(0));
    };
    process.on('message', (/** @type {any} IPC: { type } */ m) => { void answer(m); });
  });
}

// ------------------------------------------------------------------ the client

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const REQUESTS = arg('requests', 25_000);
const CONCURRENCY = arg('concurrency', 16);
const IDLE_MS = arg('idle-ms', 5000);
const WARM_REQUESTS = arg('warm', 2000);
const CLEAN_REQUESTS = arg('clean', 1000);
const extra = process.argv.includes('--') ? process.argv.slice(process.argv.indexOf('--') + 1) : [];

/** Deterministic xorshift, so every run sends the same requests. */
let seed = 20261124;
const rnd = () => {
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 2 ** 32;
};
const pick = (xs) => xs[Math.floor(rnd() * xs.length)];

function floatsJson(n) {
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(((i * 7) % 256) / 8);
  return `[${parts.join(',')}]`;
}
const IMAGE = 3 * 224 * 224;
const fp32 = Buffer.alloc(IMAGE * 4);
for (let i = 0; i < IMAGE; i++) fp32.writeFloatLE(((i * 7) % 256) / 8, i * 4);

/** Valid bodies of each form; the mutations start from these. */
const BASES = [
  { weight: 0.5, model: 'simple', headers: { 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => 1) }] })) },
  { weight: 0.15, model: 'classifier_fp32', headers: { 'content-type': 'application/json' },
    body: Buffer.from(`{"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,3,224,224],"data":${floatsJson(IMAGE)}}]}`) },
  { weight: 0.15, model: 'classifier_fp32', headers: { 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], content_type: 'base64', data: fp32.toString('base64') }] })) },
  ...(() => {
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: fp32.length } }] }));
    return [{ weight: 0.18, model: 'classifier_fp32', headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
      body: Buffer.concat([header, fp32]), headerLength: header.length }];
  })(),
  ...(() => {
    const bytes = Buffer.alloc(4 * 1024 * 1024, 7);
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, bytes.length], parameters: { binary_data_size: bytes.length } }] }));
    return [{ weight: 0.02, model: 'image_stats', headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
      body: Buffer.concat([header, bytes]), headerLength: header.length }];
  })(),
];
const NOISE = Buffer.from('0123456789.eE+-,[]{}":NaIfinty \n\t\u0000x=/');

function choose() {
  let r = rnd();
  for (const b of BASES) if ((r -= b.weight) < 0) return b;
  return BASES[0];
}

/** A valid request (warm-up). */
function valid() {
  const b = choose();
  return { path: `/v2/models/${b.model}/infer`, headers: b.headers, body: b.body };
}

/** One mutated request: the body's bytes, its framing header or the model name. */
function mutated() {
  const b = choose();
  const headers = { ...b.headers };
  let body = b.body;
  let model = b.model;
  const kind = rnd();
  // Mutations land mostly in the JSON (the header of a binary body), where parsers decide.
  const jsonEnd = b.headerLength ?? body.length;
  const at = () => Math.floor((rnd() < 0.7 ? Math.min(jsonEnd, 400) : jsonEnd) * rnd());
  if (kind < 0.1) {
    model = `${model}_${Math.floor(rnd() * 1e9).toString(36)}`; // an unknown model
  } else if (kind < 0.25 && b.model === 'classifier_fp32') {
    // A shape that promises up to ~50 MB the body does not hold: tempts a decoder into allocating.
    const text = body.subarray(0, b.headerLength ?? Math.min(body.length, 400)).toString('latin1')
      .replace('[1,3,224,224]', `[1,3,224,${1 + Math.floor(rnd() * 20000)}]`);
    body = Buffer.concat([Buffer.from(text, 'latin1'), body.subarray(b.headerLength ?? Math.min(body.length, 400))]);
    if (b.headerLength !== undefined) headers['inference-header-content-length'] = String(text.length);
  } else if (kind < 0.2 && b.headerLength !== undefined) {
    headers['inference-header-content-length'] = String(pick([0, b.headerLength - 1, b.headerLength + 3, body.length + 10, -1, 'x']));
  } else if (kind < 0.35 && b.model === 'simple') {
    // Shapes and counts a hostile client writes: past 53, 63 and 64 bits, negative, exponents.
    const shape = pick(['[1e20]', '[18446744073709551616]', '[-4611686018427387904,-4]', '[4611686018427387904]', '[1,16000000]',
      '[2147483648,2]', '[1,15]', '[1,17]', '[-1,16]', '[1.5,16]']);
    body = Buffer.from(body.toString('latin1').replace('[1,16]', shape), 'latin1');
  } else if (kind < 0.45) {
    body = body.subarray(0, at()); // truncated
  } else {
    body = Buffer.from(body);
    const n = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < n; i++) {
      const p = at();
      const r = rnd();
      if (r < 0.6) body[p] = pick(NOISE);
      else if (r < 0.8) body = Buffer.concat([body.subarray(0, p), Buffer.from([pick(NOISE)]), body.subarray(p)]);
      else body = Buffer.concat([body.subarray(0, p), body.subarray(p + 1)]);
    }
  }
  return { path: `/v2/models/${encodeURIComponent(model)}/infer`, headers, body };
}

async function run(pool, count, make) {
  const statuses = new Map();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const r = make();
      try {
        const res = await pool.request({ method: 'POST', path: r.path, headers: r.headers, body: r.body, headersTimeout: 60_000, bodyTimeout: 60_000 });
        await res.body.dump();
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      } catch (err) {
        statuses.set(err.code ?? 'error', (statuses.get(err.code ?? 'error') ?? 0) + 1);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return Object.fromEntries([...statuses].sort());
}

function ask(child, type, ms = 30_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${type} answer within ${ms} ms`)), ms);
    const on = (m) => {
      if (m.type !== type) return;
      clearTimeout(timer);
      child.off('message', on);
      resolve(m);
    };
    child.on('message', on);
    child.send({ type });
  });
}

const mb = (n) => (n / 2 ** 20).toFixed(1);
const show = (what, m) => console.log(`${what.padEnd(34)} rss ${mb(m.rss).padStart(6)} MB  heapUsed ${mb(m.heapUsed).padStart(6)}  heapTotal ${mb(m.heapTotal).padStart(6)}  external ${mb(m.external).padStart(6)}  arrayBuffers ${mb(m.arrayBuffers).padStart(6)}  pool retained ${mb(m.pool.retainedBytes)}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function gatewayEnv() {
  return process.env.BENCH_MALLOC === 'default' ? process.env : require('./procs').gatewayEnv();
}

async function main() {
  // Here, not at the top: the gateway child loads neither.
  const { Pool } = require('undici');
  const { startReferenceBackend } = require('#dist/gateway/reference-backend/server.js');
  const backend = await startReferenceBackend({ host: '127.0.0.1', port: 0 });
  const child = fork(__filename, ['--gateway-host', '--backend', backend.address, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'silent', ...extra],
    // The malloc settings bin/tensorgate and the Dockerfile give the gateway (unless BENCH_MALLOC=default).
    { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: gatewayEnv() });
  const killer = setTimeout(() => { child.kill('SIGKILL'); process.exit(2); }, 30 * 60_000);
  try {
    const { port } = await new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`gateway exited (${code})`)));
    });
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
    show('start', await ask(child, 'memory'));
    console.log('warm-up (valid):', JSON.stringify(await run(pool, WARM_REQUESTS, valid)));
    await sleep(IDLE_MS);
    const warmAsIs = await ask(child, 'memory-as-is');
    show(`warm (${WARM_REQUESTS} valid, idle)`, warmAsIs);
    const warm = await ask(child, 'memory');
    show(`warm (${WARM_REQUESTS} valid, idle, GC)`, warm);
    const t0 = performance.now();
    const statuses = await run(pool, REQUESTS, mutated);
    console.log(`${REQUESTS} mutated in ${((performance.now() - t0) / 1000).toFixed(1)} s:`, JSON.stringify(statuses));
    show('right after the burst', await ask(child, 'memory-as-is'));
    show('right after the burst (GC)', await ask(child, 'memory'));
    console.log(`${CLEAN_REQUESTS} valid:`, JSON.stringify(await run(pool, CLEAN_REQUESTS, valid)));
    await sleep(IDLE_MS);
    const asIs = await ask(child, 'memory-as-is');
    show(`after ${CLEAN_REQUESTS} valid, ${IDLE_MS} ms idle`, asIs);
    const after = await ask(child, 'memory');
    show('the same, GC', after);
    console.log(`RSS after the burst and clean requests − warm: ${mb(asIs.rss - warmAsIs.rss)} MB as is, ${mb(after.rss - warm.rss)} MB after GC (goal ≤ 64 MB)`);
    await pool.close();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.send({ type: 'close' });
    await Promise.race([exited, sleep(5000)]);
  } finally {
    clearTimeout(killer);
    child.kill();
    await backend.close(2000);
  }
}

if (process.argv[2] === '--gateway-host') {
  gatewayHost();
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
