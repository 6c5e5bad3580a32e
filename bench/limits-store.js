// The cost of per-key limits with and without a store (docs/production.md "Shared limits on
// Redis", "Workers without a store"): a small JSON inference (identity_fp32, 16 floats) with an
// API key, through tensorgate from dist/ in front of the reference backend (a process of its own),
// closed loop at fixed concurrency, a fixed number of requests per row. Rows: a key without a
// limit; a rate limit (never reached: what admission costs) counted per process, in Redis (a
// redis-server this script starts on a free port, no persistence) and in the cluster's primary
// (--workers 2); a concurrency limit (a store call per request) in Redis and in the primary.
// Per row: req/s, p50 and p99 client latency, the gateway's CPU per request (the process and its
// workers, /proc), and redis-server's. Rows alternate for `--rounds`.
//   npm run -s build && node bench/limits-store.js [--requests 4000] [--concurrency 8] [--rounds 2]
//     [--rate 5000] [--only SUBSTRING]
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const { mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { createHash } = require('node:crypto');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { Pool } = require('undici');
const procs = require('./procs');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const REQUESTS = Number(opt('--requests', 4000));
const CONCURRENCY = Number(opt('--concurrency', 8));
const ROUNDS = Number(opt('--rounds', 2));
const RATE = Number(opt('--rate', 5000));
const ONLY = opt('--only', '');
const WARMUP = Math.min(500, REQUESTS);
const BODY = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i / 4) }] });
const TOKENS = { free: 'bench-free-key-0123456789', rate: 'bench-rate-key-0123456789', conc: 'bench-conc-key-0123456789' };
const PASSWORD = 'bench-limits-pw';

const sha = (t) => `sha256:${createHash('sha256').update(t).digest('hex')}`;

/** [name, key, gateway flags ('store': auth.limits.store on the redis-server started here)] */
const ROWS = /** @type {[string, 'free' | 'rate' | 'conc', string[]][]} */ ([
  ['no limit', 'free', []],
  ['rate, per process', 'rate', []],
  ['rate, Redis', 'rate', ['store']],
  ['rate, --workers 2 (primary)', 'rate', ['--workers', '2']],
  ['concurrency, Redis', 'conc', ['store']],
  ['concurrency, --workers 2 (primary)', 'conc', ['--workers', '2']],
]).filter(([name]) => name.includes(ONLY));

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--requirepass', PASSWORD,
    '--loglevel', 'warning'], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    const r = spawnSync('redis-cli', ['-p', String(port), '-a', PASSWORD, '--no-auth-warning', 'PING'], { encoding: 'utf8', timeout: 2000 });
    if (r.stdout?.trim() === 'PONG') return { child, url: `redis://:${PASSWORD}@127.0.0.1:${port}` };
    await new Promise((r2) => setTimeout(r2, 50));
  }
  child.kill('SIGKILL');
  throw new Error('redis-server did not answer (apt-get install redis-server)');
}

/** CPU seconds of a process and its children (a cluster's workers). */
function treeCpu(pid) {
  let children = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    // no children file: the process alone
  }
  return procs.cpuSeconds(pid) + children.reduce((t, c) => t + procs.cpuSeconds(c), 0);
}

async function load(port, token, n, latencies) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  let next = 0;
  let errors = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < n) {
      const t0 = process.hrtime.bigint();
      const r = await pool.request({ path: '/v2/models/identity_fp32/infer', method: 'POST', headers, body: BODY, headersTimeout: 30_000, bodyTimeout: 30_000 });
      await r.body.dump();
      if (r.statusCode !== 200) errors++;
      else latencies?.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }));
  await pool.close();
  return errors;
}

async function row(backend, keys, redis, [name, key, flags]) {
  const store = flags[0] === 'store';
  const limits = store ? ['--auth-limits', JSON.stringify({ store: redis.url, storeTimeoutMs: 50 })] : [];
  const gw = await procs.startGateway(`gateway (${name})`, backend, ['--auth', '--auth-keys-file', keys, ...limits, ...(store ? [] : flags)]);
  try {
    await load(gw.port, TOKENS[key], WARMUP);
    const latencies = [];
    const c0 = treeCpu(gw.pid);
    const r0 = procs.cpuSeconds(redis.child.pid);
    const t0 = process.hrtime.bigint();
    const errors = await load(gw.port, TOKENS[key], REQUESTS, latencies);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = treeCpu(gw.pid) - c0;
    const redisCpu = procs.cpuSeconds(redis.child.pid) - r0;
    latencies.sort((a, b) => a - b);
    const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
    const redisMs = store ? (redisCpu * 1000) / REQUESTS : undefined;
    return { name, rps: REQUESTS / s, p50: pct(0.5), p99: pct(0.99), cpuMs: (cpu * 1000) / REQUESTS, redisMs, errors };
  } finally {
    await procs.stopChild({ name, child: gw.child });
  }
}

async function main() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tg-bench-limits-'));
  const keys = path.join(dir, 'keys.yaml');
  writeFileSync(keys, `keys:
  - { id: free, token: ${sha(TOKENS.free)}, groups: "*" }
  - { id: rate, token: ${sha(TOKENS.rate)}, groups: "*", limits: { rate: ${RATE} } }
  - { id: conc, token: ${sha(TOKENS.conc)}, groups: "*", limits: { concurrency: ${CONCURRENCY * 4} } }
`);
  const redis = await startRedis();
  const ref = await procs.startReference();
  /** @type {Map<string, Awaited<ReturnType<typeof row>>[]>} */
  const results = new Map(ROWS.map(([name]) => [name, []]));
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const r of ROWS) {
        const x = await row(ref.address, keys, redis, r);
        results.get(x.name)?.push(x);
        console.log(`round ${round} ${x.name}: ${x.rps.toFixed(0)} req/s, p50 ${x.p50.toFixed(2)} ms, p99 ${x.p99.toFixed(2)} ms, `
          + `gateway CPU ${x.cpuMs.toFixed(3)} ms/req${x.redisMs === undefined ? '' : `, redis-server ${x.redisMs.toFixed(3)} ms/req`}, errors ${x.errors}`);
      }
    }
  } finally {
    redis.child.kill('SIGKILL');
    for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\n${REQUESTS} requests a row, c=${CONCURRENCY}, rate limit ${RATE}/s\n| row | ${Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}: p50, gateway CPU/req (redis)`).join(' | ')} |`);
  console.log(`|---|${Array.from({ length: ROUNDS }, () => '---').join('|')}|`);
  for (const [name, rs] of results) {
    console.log(`| ${name} | ${rs.map((x) => `${x.p50.toFixed(2)} ms, ${x.cpuMs.toFixed(3)} ms${x.redisMs === undefined ? '' : ` (${x.redisMs.toFixed(3)})`}`).join(' | ')} |`);
  }
}

main().catch((e) => { console.error(e); for (const c of procs.children) void procs.stopChild(c, 1000); process.exitCode = 1; });
