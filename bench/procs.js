// Child processes and /proc readings shared by bench/run.js, bench/soak.js, bench/perf-analyzer.js and others:
// start a process and wait for its ready line, stop it by pid, start real Triton (the PyTriton zoo),
// the reference backend and a gateway from dist/, read a process's CPU time, RSS and open-file
// limit. Linux only (/proc).
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

// BENCH_DIST: another tree's dist/ (a build from before a change), for before/after runs of one harness.
const DIST = process.env.BENCH_DIST ? path.resolve(process.env.BENCH_DIST) : path.join(__dirname, '..', 'dist');
/**
 * The gateway's entry point under a dist/ directory, run as a process. Node gets the path; its type
 * names the same file, which typecheck resolves to the source (bench/tsconfig.json), so a move of
 * gateway/main.ts fails there. Keep the two names alike.
 * @type {typeof import('#dist/gateway/main.js') extends object ? string : never}
 */
const MAIN_JS = 'gateway/main.js';
/** bench/reference.js: the reference backend in a process of its own; prints `REF_READY <host:port>`. */
const REFERENCE_JS = path.join(__dirname, 'reference.js');
const NODE = process.execPath;
/** Node's flags as bin/tensorgate and the Dockerfile give them (young generation size: gateway/young-generation.ts). */
const GATEWAY_NODE_FLAGS = ['--initial-heap-size=64', '--no-memory-reducer'];

/**
 * The environment bin/tensorgate and the Dockerfile give the gateway: glibc malloc's arenas and
 * mmap threshold (see bin/tensorgate), unless the caller's environment sets them. A gateway
 * measured without them keeps more memory after bursts than the product does.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {NodeJS.ProcessEnv}
 */
function gatewayEnv(env = process.env) {
  return { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '131072', ...env };
}

/**
 * @typedef {import('node:stream').Readable} Readable
 * @typedef {import('node:child_process').ChildProcessByStdio<null, Readable, Readable>} Child
 * @typedef {{ name: string, child: import('node:child_process').ChildProcess, group?: boolean }} ChildEntry
 */

/** Every child started here, in start order (stop them in reverse). @type {ChildEntry[]} */
const children = [];

/** @returns {Promise<void>} */
function stopChild(entry, graceMs = 15_000) {
  const { child, group } = entry;
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => {
      try { if (group) process.kill(-child.pid, 'SIGKILL'); else child.kill('SIGKILL'); } catch { /* gone */ }
    }, graceMs);
    child.once('exit', () => { clearTimeout(kill); resolve(); });
    try { child.kill('SIGTERM'); } catch { resolve(); }
  });
}

/**
 * Spawns and waits for a line matching `ready` on stdout (bounded by timeoutMs).
 * @param {string} name
 * @param {string} cmd
 * @param {string[]} args
 * @param {{ ready: RegExp, timeoutMs: number, group?: boolean, env?: NodeJS.ProcessEnv }} options
 * @returns {Promise<{ child: Child, match: RegExpExecArray, tail: string[] }>}
 */
function startProcess(name, cmd, args, { ready, timeoutMs, group = false, env }) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: group, env: env ?? process.env });
    children.push({ name, child, group });
    const tail = [];
    child.stderr.setEncoding('utf8').on('data', (s) => { tail.push(s); if (tail.length > 200) tail.shift(); });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${name} not ready in ${timeoutMs} ms\n${tail.join('').slice(-3000)}`)), timeoutMs);
    const onData = (s) => {
      out += s;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve({ child, match: m, tail });
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? sig}) before it was ready\n${tail.join('').slice(-3000)}`));
    });
  }).then((r) => { r.child.removeAllListeners('exit'); return r; });
}

/**
 * tensorgate from dist/ on a free loopback port, production settings (log level warn, no
 * Server-Timing); `backend` undefined leaves the backend to `extra` (e.g. `--demo`); `env`
 * replaces the environment.
 * @param {string} name
 * @param {string | undefined} backend
 * @param {string[]} [extra]
 * @param {NodeJS.ProcessEnv} [env]
 * @param {string} [dist] the dist/ directory to run (bench/run.js --before-dist)
 */
async function startGateway(name, backend, extra = [], env = undefined, dist = DIST) {
  const { child, match, tail } = await startProcess(name, NODE, [...GATEWAY_NODE_FLAGS, path.join(dist, MAIN_JS),
    ...(backend === undefined ? [] : ['--backend', backend]),
    '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', '--server-timing=false', ...extra], {
    // The line is written whole: the gRPC port (server.grpc.enabled) is on it when open.
    ready: /listening on http:\/\/[^:]+:(\d+) \(backend [^\n]*?\)(?:; gRPC port (\d+))?$/m, timeoutMs: 30_000, env: gatewayEnv(env),
  });
  return { port: Number(match[1]), grpcPort: match[2] === undefined ? undefined : Number(match[2]), pid: child.pid, child, stderrTail: tail };
}

/**
 * Real Triton: the PyTriton zoo (test/triton/zoo.py in the cached venv of test/triton/venv.sh), in a
 * process group of its own (stopChild ends the group); `models` limits the zoo (zoo.py --models),
 * `args` are more of zoo.py's (--grpc-socket PATH: TRITON_READY's grpc_socket is the path it listens on).
 * @param {(msg: string) => void} log
 * @param {string[]} [models]
 * @param {string[]} [args]
 * @returns {Promise<{ http: number, grpc: number, version: string, grpc_socket?: string }>}
 */
async function startTriton(log, models, args = []) {
  const root = path.join(__dirname, '..');
  const venv = execFileSync('bash', [path.join(root, 'test/triton/venv.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim().split('\n').pop() ?? '';
  log(`starting Triton (PyTriton zoo${models ? ` with ${models.join(', ')}` : ''}, venv ${venv})`);
  const { match } = await startProcess('triton', path.join(venv, 'bin', 'python'),
    [path.join(root, 'test/triton/zoo.py'), ...(models ? ['--models', models.join(',')] : []), ...args], {
      ready: /^TRITON_READY (\{.*\})$/m, timeoutMs: 300_000, group: true, env: { ...process.env, PYTHONUNBUFFERED: '1' },
    });
  return JSON.parse(match[1]);
}

/** The reference backend (dist/gateway/reference-backend) in its own process, on a free port. */
async function startReference() {
  const { child, match } = await startProcess('reference', NODE, [REFERENCE_JS], { ready: /REF_READY (\S+)/, timeoutMs: 30_000 });
  return { address: match[1], port: Number(match[1].split(':').pop()), pid: child.pid, child };
}

const CLK_TCK = (() => { try { return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100; } catch { return 100; } })();

/**
 * CPU seconds of a process: its threads' run time, summed (/proc/PID/task/TID/schedstat, the first
 * field, in nanoseconds), or user + system from /proc/PID/stat (fields 14 and 15, in clock ticks)
 * where those cannot be read; 0 once it is gone. The ticks are 10 ms each and each field is cut to
 * whole ticks: a 1.5-s slice of nginx at 64 B costs 60-80 ms of CPU, which ticks give to ±15-30 %.
 * A thread that exits takes its time from the sum: each thread's last reading is kept, so a thread
 * gone since the last call counts what it had run when last read, one born and gone between two
 * calls not at all (a full run's gRPC pass-through 4 MB c=32 cell read -133 ms a request before: a
 * thread of the gateway had exited in it).
 */
function cpuSeconds(pid) {
  let tasks;
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch { return 0; }
  const seen = threadTimes.get(pid) ?? { threads: new Map(), gone: 0 };
  const now = new Map();
  let ns = 0;
  for (const tid of tasks) {
    try {
      const s = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
      const t = Number(s.slice(0, s.indexOf(' ')));
      // Less than its last reading: another thread with the same id (the first one exited).
      const before = seen.threads.get(tid);
      if (before !== undefined && t < before) seen.gone += before;
      now.set(tid, t);
      ns += t;
    } catch { /* exited meanwhile: counted below as gone */ }
  }
  for (const [tid, t] of seen.threads) if (!now.has(tid)) seen.gone += t;
  seen.threads = now;
  threadTimes.set(pid, seen);
  if (ns > 0) return (ns + seen.gone) / 1e9;
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime, stime (fields 14, 15)
  } catch { return 0; }
}

/** Per process (cpuSeconds): each thread's run time when last read, and the time of threads gone since, in ns. */
const threadTimes = new Map();

/**
 * Minor page faults, user and system CPU seconds of a process (/proc/PID/stat fields 10, 14 and 15,
 * the CPU in whole 10 ms ticks); zeros once it is gone.
 */
function faultsAndSystem(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { minflt: Number(f[7]), user: Number(f[11]) / CLK_TCK, system: Number(f[12]) / CLK_TCK };
  } catch { return { minflt: 0, user: 0, system: 0 }; }
}

/** A `kB` field of /proc/PID/status (VmRSS, VmHWM, …); 0 once the process is gone. */
function statusKb(pid, key) {
  try {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch { return 0; }
}

/** Resets VmHWM to the current RSS (/proc/PID/clear_refs, 5). */
function resetPeak(pid) {
  try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); return true; } catch { return false; }
}

/** { soft, hard } open-file limit of a process (`self` for this one); Infinity for unlimited. */
/** @param {number | 'self'} [pid] */
function openFileLimit(pid = 'self') {
  const line = fs.readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').find((l) => l.startsWith('Max open files')) ?? '';
  const [soft, hard] = line.trim().split(/\s+/).slice(3, 5).map((v) => (v === 'unlimited' ? Infinity : Number(v)));
  return { soft, hard };
}

/**
 * A free TCP port on 127.0.0.1 (bound, then closed).
 * @returns {Promise<number>}
 */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = /** @type {import('node:net').AddressInfo} */ (s.address()); s.close(() => resolve(port)); });
  });
}

/**
 * Resolves once something accepts connections on 127.0.0.1:`port`; rejects after `timeoutMs`.
 * @param {number} port
 * @param {number} timeoutMs
 */
async function waitForPort(port, timeoutMs) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

/**
 * The children of a process (/proc/PID/task/PID/children): nginx's workers, the gateway's cluster workers.
 * @param {number} pid
 * @returns {number[]}
 */
function childPids(pid) {
  try { return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number); } catch { return []; }
}

function machine() {
  const cpus = os.cpus();
  return `${os.type()} ${os.release()}, ${cpus.length} × ${cpus[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`;
}

module.exports = {
  DIST, MAIN_JS, REFERENCE_JS, NODE, GATEWAY_NODE_FLAGS, gatewayEnv,
  children, stopChild, startProcess, startGateway, startReference, startTriton, cpuSeconds, faultsAndSystem, statusKb, resetPeak, openFileLimit,
  freePort, waitForPort, childPids, machine,
};
