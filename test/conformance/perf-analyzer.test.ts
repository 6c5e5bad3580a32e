// NVIDIA's perf_analyzer (C++, the binary of the tritonclient 2.45 wheel), the tool Triton's users
// measure with, as a client of tensorgate: its HTTP client (libcurl, the V2 binary tensor
// extension both ways) against the REST port and its gRPC client (grpc++) against the gRPC
// pass-through, in front of the real Triton global-setup.ts starts. perf_analyzer stops at its
// first failed request, so a clean exit says every request of its windows was answered; the
// gateway's own records say each was a 200 (REST) or gRPC OK, and that the compiled lane served
// the REST requests once their head was kept. Counted, not timed: windows of a
// fixed number of requests (--measurement-mode count_windows). bench/perf-analyzer.js measures
// the same paths for throughput.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gatewayForSuite } from '../support/gateway';
import { RecordTap } from '../support/records';
import { needs, type Tool } from '../support/tools';

interface PerfAnalyzer { bin: string; env: NodeJS.ProcessEnv; version: string }
// eslint-disable-next-line @typescript-eslint/no-require-imports
const bench = require('../../bench/perf-analyzer') as { preparePerfAnalyzer(log: (m: string) => void): PerfAnalyzer };

/** perf_analyzer, or why not (the test then skips loudly, and fails under CI). */
function prepared(): PerfAnalyzer | string {
  try {
    return bench.preparePerfAnalyzer(() => undefined);
  } catch (err) {
    return (err as Error).message;
  }
}

const pa = prepared();
const PERF_ANALYZER: Tool = typeof pa === 'string'
  ? { name: 'perf_analyzer', path: undefined, install: `${pa}; bash test/triton/venv.sh test/triton/perf-analyzer-requirements.txt and apt-get install libb64-0d` }
  : { name: 'perf_analyzer', path: pa.bin, install: '' };
const { describe: withPerfAnalyzer } = needs(PERF_ANALYZER);

const tap = new RecordTap();
const gw = gatewayForSuite(['--backend', process.env.TRITON_GRPC!, '--api-disabled', 'none'], tap);
const dir = mkdtempSync(join(tmpdir(), 'tensorgate-pa-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs perf_analyzer to its end (killed after 120 s): exit code, its last lines, and the CSV's first row. */
function run(args: string[]): Promise<{ code: number | null; tail: string; row: Record<string, string> | undefined }> {
  const csv = join(dir, `${args.join('_').replace(/\W/g, '')}.csv`);
  const p = pa as PerfAnalyzer;
  return new Promise((resolve) => {
    const child = spawn(p.bin, [...args, '-f', csv], { env: p.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const keep = (s: string): void => { out = (out + s).slice(-4000); };
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      let row: Record<string, string> | undefined;
      try {
        const [header, values] = readFileSync(csv, 'utf8').trim().split('\n').map((l) => l.split(','));
        row = Object.fromEntries(header!.map((h, i) => [h, values![i]!]));
      } catch { /* no report: the exit code says why */ }
      resolve({ code, tail: out.trim().split('\n').slice(-4).join('\n'), row });
    });
  });
}

/**
 * Three windows of at least `count` requests each at concurrency `c` (its stability check needs
 * three), the check itself off (-s 1000, as the bench).
 */
function windows(count: number, c: number): string[] {
  return ['--measurement-mode', 'count_windows', '--measurement-request-count', String(count), '-r', '3', '-s', '1000',
    '--concurrency-range', `${c}:${c}`, '--shared-memory', 'none'];
}

for (const { model, extra, label } of [
  { model: 'image_stats', extra: ['--shape', 'IMAGE:64'], label: '64 B UINT8' },
  { model: 'classifier_fp32', extra: [], label: '600 KB FP32' },
]) {
  withPerfAnalyzer(`perf_analyzer, ${model} (${label})`, () => {
    test('over HTTP/1.1 with binary tensors both ways (REST): every request answered 200, nearly all in the compiled lane', async () => {
      const mark = tap.mark();
      const r = await run(['-m', model, '-u', new URL(gw.url).host, '-i', 'http', '--input-tensor-format', 'binary',
        '--output-tensor-format', 'binary', ...windows(40, 4), ...extra]);
      if (r.code !== 0) throw new Error(`perf_analyzer exited with ${r.code}:\n${r.tail}`);
      expect(Number(r.row?.['Inferences/Second'])).toBeGreaterThan(0);
      const seen = tap.records.slice(mark).filter((rec) => rec.model === model && rec.route.includes('infer'));
      expect(seen.length).toBeGreaterThanOrEqual(120);
      expect(seen.filter((rec) => rec.status !== 200)).toEqual([]);
      // Its requests repeat one head and one binary header (with `"id":""` in it): after the first
      // few, C serves them (ingress/http1/lane.ts).
      expect(seen.filter((rec) => rec.lane === true).length).toBeGreaterThanOrEqual(seen.length - 20);
    }, 180_000);

    if (model === 'classifier_fp32') {
      test('one request at a time over HTTP/1.1: its call begins while libcurl still writes the body (64 KiB at a time)', async () => {
        const mark = tap.mark();
        const early = gw.laneCounts()!.earlyCalls;
        const r = await run(['-m', model, '-u', new URL(gw.url).host, '-i', 'http', '--input-tensor-format', 'binary',
          '--output-tensor-format', 'binary', ...windows(40, 1), ...extra]);
        if (r.code !== 0) throw new Error(`perf_analyzer exited with ${r.code}:\n${r.tail}`);
        const seen = tap.records.slice(mark).filter((rec) => rec.model === model && rec.route.includes('infer'));
        expect(seen.filter((rec) => rec.status !== 200)).toEqual([]);
        const inC = seen.filter((rec) => rec.lane === true);
        // Begun early (lane.c early_call), the call's upstream_send starts before the body's last
        // byte is read. How many depends on when the gateway wakes to read (65 % of them on a quiet
        // machine, 17 % under the CI's load: the others' bodies were all but whole when first read),
        // so this says only that libcurl's writes lead to it; compiled-lane.test.ts proves it exactly.
        expect(gw.laneCounts()!.earlyCalls - early).toBeGreaterThan(0);
        expect(inC.some((rec) => rec.ledger!.hops.upstream_send.startNs < rec.ledger!.hops.ingress_read.endNs)).toBe(true);
      }, 180_000);
    }

    test('over gRPC (the pass-through): every call answered OK', async () => {
      const mark = tap.mark();
      const r = await run(['-m', model, '-u', new URL(gw.url).host, '-i', 'grpc', ...windows(40, 4), ...extra]);
      if (r.code !== 0) throw new Error(`perf_analyzer exited with ${r.code}:\n${r.tail}`);
      expect(Number(r.row?.['Inferences/Second'])).toBeGreaterThan(0);
      const seen = tap.records.slice(mark).filter((rec) => rec.rpc === 'grpc' && rec.route.endsWith('ModelInfer'));
      expect(seen.length).toBeGreaterThanOrEqual(120);
      expect(seen.filter((rec) => rec.grpcStatus !== 0)).toEqual([]);
    }, 180_000);
  });
}
