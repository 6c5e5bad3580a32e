// `npm test`: every jest project, in two runs of jest — unit, fuzz, integration, interop,
// conformance and deploy (the container image) in one, the fault-injection suite (test/faults/) in
// its own process — a third run of the suites of the upstream gRPC call on the other HTTP/2
// client (upstream.http2Client: `node`, the default being `own`; docs/architecture.md#the-upstream-http2-client),
// a fourth of the base64 suites on the WebAssembly decoder (the native one being the default),
// a fifth of the fast path's suites with the compiled lane off (server.compiledLane), and a sixth,
// alone, of the compiled lane's two FP32 printers compared on every FP32 value (a minute of both
// cores, which would take CPU from suites that time things if it ran beside them).
// Each run must end by itself: no --forceExit. Each jest process is started with
// test/support/open-at-exit.js, which lists on exit what the tests left open (a handle or request
// Node would still have to close or wait for in its teardown). Arguments go to both runs;
// `--outputFile=F` also gets one JSON report summing both. Ends with one line counting both runs,
// `tests: N passed, N failed[, N skipped]` (a suite that failed to run counts as one failed test),
// after the files that failed. Exits non-zero when either run fails, or does not end by itself.
'use strict';
const { spawn } = require('node:child_process');
const { existsSync, mkdtempSync, readFileSync, writeFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');

const jest = require.resolve('jest/bin/jest');
const openAtExit = path.join(__dirname, '..', 'test', 'support', 'open-at-exit.js');
const env = { ...process.env, NODE_OPTIONS: '--experimental-vm-modules --no-warnings=ExperimentalWarning' };
const args = process.argv.slice(2);
const out = args.find((a) => a.startsWith('--outputFile='))?.slice('--outputFile='.length);
const rest = args.filter((a) => !a.startsWith('--outputFile=') && a !== '--json');

/** The suites of the upstream call, run again on the HTTP/2 client that is not the default. */
const UPSTREAM_SUITES = [
  'test/integration/upstream-calls', 'test/integration/cut-through', 'test/integration/backends', 'test/integration/grpc-passthrough',
  'test/integration/passthrough', 'test/integration/upstream-tls', 'test/integration/call-timing', 'test/integration/released-chunks',
  'test/integration/buffer-pool', 'test/integration/error-codes', 'test/faults/backend-faults',
].map((f) => `${f}\\.test\\.ts$`);
/**
 * The suites of base64 decoding, run again on the WebAssembly decoder where the native one is the
 * default (decode/base64/base64-simd.ts; scripts/build-native.js builds it where there is a compiler).
 */
const BASE64_SUITES = ['test/unit/decode/base64', 'test/unit/decode/base64-staging', 'test/unit/decode/json-data', 'test/fuzz/decoders']
  .map((f) => `${f}\\.test\\.ts$`);
/**
 * The fast path's suites, run again with the compiled lane off (server.compiledLane, on by default,
 * serves their repeated planned requests in C where the suites' gateways allow it): the fast path
 * alone serves every request, as where the lane is not built.
 */
const LANE_SUITES = [
  'test/integration/fast-path', 'test/integration/fast-path-attack', 'test/integration/planned-infer', 'test/integration/planned-calls',
  'test/integration/drain-flush', 'test/integration/shutdown', 'test/integration/buffer-pool',
].map((f) => `${f}\\.test\\.ts$`);
const runs = [
  { projects: ['unit', 'fuzz', 'integration', 'interop', 'conformance', 'deploy'], files: [], env: {} },
  { projects: ['faults'], files: [], env: {} },
  { projects: ['integration', 'faults'], files: UPSTREAM_SUITES, env: { TENSORGATE_UPSTREAM_HTTP2_CLIENT: 'node' } },
  { projects: ['unit', 'fuzz'], files: BASE64_SUITES, env: { TENSORGATE_BASE64_DECODER: 'wasm' } },
  { projects: ['integration'], files: LANE_SUITES, env: { TENSORGATE_SERVER_COMPILED_LANE: 'false' } },
  { projects: ['unit'], files: ['test/unit/json/print-all-fp32\\.test\\.ts$'], env: { TENSORGATE_PRINT_ALL_FP32: '1' } },
];
/** After a run has written its report, how long it may take to exit before it is killed. */
const EXIT_GRACE_MS = 60_000;

/**
 * One jest run, in a Node process of its own (this script's Node). It must end by itself once its
 * report is written: a run still alive EXIT_GRACE_MS later is stuck in Node's teardown
 * (node::Environment::CleanupHandles waiting for a handle or request that never completes — what
 * open-at-exit printed just before names the suspects). It is killed then, so that CI ends, and the
 * run counts as failed: one failed test in the summed report, named after this script.
 */
function runJest(argv, report, runEnv) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--require', openAtExit, jest, ...argv], { stdio: 'inherit', env: { ...env, ...runEnv } });
    let watchdog;
    let stuck = false;
    const poll = setInterval(() => {
      if (watchdog !== undefined || !existsSync(report)) return;
      watchdog = setTimeout(() => {
        stuck = true;
        process.stderr.write(`scripts/test.js: jest wrote its report but had not exited ${EXIT_GRACE_MS / 1000} s later: killed, the run fails\n`);
        child.kill('SIGUSR2'); // open-at-exit lists what holds it, if JavaScript still runs
        setTimeout(() => child.kill('SIGKILL'), 1000);
      }, EXIT_GRACE_MS);
    }, 1000);
    child.on('exit', (code) => {
      clearInterval(poll);
      clearTimeout(watchdog);
      resolve({ code: stuck ? 1 : code ?? 1, stuck });
    });
  });
}

/** A run that left no report, or was killed: a failed suite named after this script (one failed test in sum()). */
const failedRun = (projects, why) => ({
  numFailedTestSuites: 1, numTotalTestSuites: 1,
  testResults: [{ name: __filename, status: 'failed', assertionResults: [], message: `jest (${projects.join(', ')}) ${why}` }],
});

const KEYS = ['numPassedTests', 'numFailedTests', 'numPendingTests', 'numTodoTests', 'numTotalTests', 'numPassedTestSuites', 'numFailedTestSuites', 'numTotalTestSuites'];

/** The runs' reports summed; a suite that failed with no failed test (it did not load, a hook threw) counts as one. */
function sum(reports, status) {
  const total = { success: status === 0, testResults: [] };
  for (const k of KEYS) total[k] = reports.reduce((n, r) => n + (r[k] ?? 0), 0);
  for (const r of reports) total.testResults.push(...(r.testResults ?? []));
  total.failedSuites = total.testResults.filter((t) => t.status === 'failed').map((t) => path.relative(process.cwd(), t.name));
  const unrun = total.testResults.filter((t) => t.status === 'failed' && !(t.assertionResults ?? []).some((a) => a.status === 'failed')).length;
  total.numFailedTests += unrun;
  total.numTotalTests += unrun;
  return total;
}

(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tensorgate-test-'));
  const reports = [];
  let status = 0;
  for (const [i, { projects, files, env: runEnv }] of runs.entries()) {
    const report = path.join(dir, `report.${i}.json`);
    const started = Date.now();
    const argv = ['--selectProjects', ...projects, '--passWithNoTests', ...rest, ...files, '--json', `--outputFile=${report}`];
    const { code, stuck } = await runJest(argv, report, runEnv);
    const on = Object.entries(runEnv).map(([k, v]) => ` ${k}=${v}`).join('');
    process.stderr.write(`scripts/test.js: jest (${projects.join(', ')}${on}) ended (status ${code}) after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    if (code !== 0) status ||= code;
    if (stuck) {
      reports.push(failedRun(projects, `wrote its report but did not exit within ${EXIT_GRACE_MS / 1000} s`));
      continue;
    }
    try {
      reports.push(JSON.parse(readFileSync(report, 'utf8')));
    } catch {
      status ||= 1;
      reports.push(failedRun(projects, `ended (status ${code}) without a report`));
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const total = sum(reports, status);
  if (out !== undefined) writeFileSync(out, JSON.stringify(total));
  const skipped = total.numPendingTests + total.numTodoTests;
  for (const f of total.failedSuites) process.stderr.write(`failed: ${f}\n`);
  // Last, on stdout: both runs' counts (each run's own summary is far above, in jest's output).
  process.stdout.write(`tests: ${total.numPassedTests} passed, ${total.numFailedTests} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`);
  process.exit(status);
})();
