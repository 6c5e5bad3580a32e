// Memory after a burst of bad requests, with the fuzzer's own requests: a gateway process as
// shipped (bin/tensorgate --demo, its Node flags and malloc settings) is warmed up with valid
// requests of several forms, then sent a burst of hostile ones sampled from the HTTP fuzz
// properties' arbitraries (test/fuzz/hostile.ts: V2 JSON, binary extension, disagreeing shapes,
// gzip/deflate, gzip bombs, deep nesting, V1, declarative, generate, framing headers; weighted
// as the properties' run counts), then the valid requests again. VmRSS (/proc/PID/status) is read
// warm, right after the burst and after the clean requests, each after --idle-ms of quiet (past
// the 10 s after which the gateway's reclaim collects less than 64 MiB, gateway/buffers/reclaim.ts); with
// /proc/PID/smaps summed by kind (glibc's brk heap, other anonymous maps, files). The goal: RSS
// back within 64 MB of warm (bench/RESULTS.md "Memory after a burst of fuzz requests").
//
//   npm run -s build && npx tsc -p tsconfig.json --outDir dist-bench
//   node dist-bench/bench/fuzz-burst.js [--requests 24000] [--concurrency 16] [--warm 1000] [--clean 1000]
//     [--idle-ms 12000] [--seed 1313] [--gateway <launcher>] [-- <gateway flags>]
//
// --gateway: another tree's bin/tensorgate (built), for before/after runs of one harness.
// The client (undici) runs here; the gateway and its demo backend in the child. Only 127.0.0.1;
// every request and wait is bounded; the child is stopped at the end (SIGKILL after 10 s).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { Pool } from 'undici';
import { type Hostile, ROUTES, targets } from '../test/fuzz/hostile';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const REQUESTS = arg('requests', 24_000);
const CONCURRENCY = arg('concurrency', 16);
const WARM = arg('warm', 1000);
const CLEAN = arg('clean', 1000);
const IDLE_MS = arg('idle-ms', 12000);
const SEED = arg('seed', 1313);
const extra = process.argv.includes('--') ? process.argv.slice(process.argv.indexOf('--') + 1) : [];
const own = process.argv.slice(0, process.argv.includes('--') ? process.argv.indexOf('--') : undefined);
// dist-bench/bench/ → the checkout's root, whose bin/tensorgate runs its dist/.
const LAUNCHER = own.includes('--gateway') ? own[own.indexOf('--gateway') + 1]! : path.resolve(__dirname, '..', '..', 'bin', 'tensorgate');

const ints = (n: number, v?: number): number[] => Array.from({ length: n }, (_, i) => v ?? i);
const json = (p: string, body: unknown): Hostile => ({ path: p, body: Buffer.from(JSON.stringify(body)), headers: { 'content-type': 'application/json' } });
/** Valid requests of the forms the burst mutates (warm-up and clean phases), taken in turn. */
const VALID: Hostile[] = [
  json('/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: ints(16) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ints(16, 1) }] }),
  (() => {
    const tensors = Buffer.alloc(128, 1);
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }] }));
    return { path: '/v2/models/simple/infer', body: Buffer.concat([header, tensors]), headers: { 'inference-header-content-length': header.length } };
  })(),
  json('/v1/models/simple:predict', { inputs: { INPUT0: [ints(16)], INPUT1: [ints(16, 1)] } }),
  json('/api/r', { a: ints(16), b: ints(16, 1) }),
  json('/v2/models/simple/generate', { INPUT0: ints(16), INPUT1: ints(16, 1) }),
];

function rssParts(pid: number): Record<string, number> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  const parts: Record<string, number> = { rss: kb('VmRSS'), hwm: kb('VmHWM'), brkHeap: 0, anon: 0, file: 0 };
  let kind = 'file';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) kind = head[1] === '[heap]' ? 'brkHeap' : head[1] === '' || head[1]!.startsWith('[') ? 'anon' : 'file';
    else if (line.startsWith('Rss:')) parts[kind]! += Number(line.split(/\s+/)[1]);
  }
  return parts;
}

const mb = (kb: number): string => (kb / 1024).toFixed(1).padStart(6);
function show(what: string, p: Record<string, number>): Record<string, number> {
  console.log(`${what.padEnd(36)} VmRSS ${mb(p.rss!)} MB  (brk heap ${mb(p.brkHeap!)}, other anonymous ${mb(p.anon!)}, files ${mb(p.file!)}; VmHWM ${mb(p.hwm!)})`);
  return p;
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function run(pool: Pool, requests: readonly Hostile[]): Promise<Record<string, number>> {
  const statuses = new Map<string, number>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < requests.length) {
      const r = requests[next++]!;
      let key: string;
      try {
        const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));
        const res = await pool.request({ method: 'POST', path: r.path, headers, body: r.body, headersTimeout: 60_000, bodyTimeout: 60_000 });
        await res.body.dump();
        key = String(res.statusCode);
      } catch (err) {
        key = (err as { code?: string }).code ?? 'error';
      }
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return Object.fromEntries([...statuses].sort());
}

function startGatewayProcess(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(LAUNCHER, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'silent',
    '--routes', ROUTES, '--max-input-size', String(1 << 20), ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no listening line within 30 s')), 30_000);
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /tensorgate listening on (http:\/\/\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ child, url: m[1]! });
      }
    });
    child.once('exit', (code) => reject(new Error(`gateway exited (${code})`)));
  });
}

/** The burst: REQUESTS requests drawn from the fuzz arbitraries, each form weighted by its property's run count. */
function burst(): Hostile[] {
  const mix = fc.oneof(...targets.map(([, arbitrary, runs]) => ({ weight: runs, arbitrary })));
  return fc.sample(mix, { seed: SEED, numRuns: REQUESTS });
}

async function main(): Promise<void> {
  const hostile = burst();
  const valid = (n: number): Hostile[] => Array.from({ length: n }, (_, i) => VALID[i % VALID.length]!);
  const { child, url } = await startGatewayProcess();
  const pid = child.pid!;
  const pool = new Pool(url, { connections: CONCURRENCY, pipelining: 1 });
  try {
    show('start', rssParts(pid));
    console.log(`${WARM} valid:`, JSON.stringify(await run(pool, valid(WARM))));
    await sleep(IDLE_MS);
    const warm = show(`warm (${IDLE_MS} ms idle)`, rssParts(pid));
    const t0 = performance.now();
    const statuses = await run(pool, hostile);
    console.log(`${REQUESTS} fuzz requests (seed ${SEED}, c=${CONCURRENCY}) in ${((performance.now() - t0) / 1000).toFixed(1)} s:`, JSON.stringify(statuses));
    show('right after the burst', rssParts(pid));
    await sleep(IDLE_MS);
    show(`after the burst, ${IDLE_MS} ms idle`, rssParts(pid));
    console.log(`${CLEAN} valid:`, JSON.stringify(await run(pool, valid(CLEAN))));
    await sleep(IDLE_MS);
    const after = show(`after ${CLEAN} valid, ${IDLE_MS} ms idle`, rssParts(pid));
    console.log(`RSS after the burst and ${CLEAN} valid − warm: ${((after.rss! - warm.rss!) / 1024).toFixed(1)} MB (goal ≤ 64 MB)`);
  } finally {
    await pool.close();
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
