// `npm test`: every jest project, in two runs of jest — unit, fuzz, integration, interop, conformance and
// deploy (the container image) in one, the fault-injection suite (test/faults/) in its own process
// (each run with --forceExit: see runJest). Arguments go to both runs; `--outputFile=F` gets one
// JSON report summing both (what .ci/run reads). Exits non-zero when either run fails.
'use strict';
const { spawn } = require('node:child_process');
const { existsSync, readFileSync, writeFileSync, rmSync } = require('node:fs');
const path = require('node:path');

const jest = path.join(__dirname, '..', 'node_modules', '.bin', 'jest');
const env = { ...process.env, NODE_OPTIONS: '--experimental-vm-modules --no-warnings=ExperimentalWarning' };
const args = process.argv.slice(2);
const out = args.find((a) => a.startsWith('--outputFile='))?.slice('--outputFile='.length);
const rest = args.filter((a) => !a.startsWith('--outputFile='));

const runs = [['unit', 'fuzz', 'integration', 'interop', 'conformance', 'deploy'], ['faults']];
/** After a run has written its report, how long it may take to exit before it is killed. */
const EXIT_GRACE_MS = 60_000;

/**
 * One jest run, with --forceExit: jest ends its process (process.exit) once the run is over. Node's
 * own teardown of a process that ends by itself (node::Environment::CleanupHandles) was caught
 * spinning at 100 % CPU forever after the last suite — seen with gdb in a fault-suite run, no
 * syscall, waiting for a libuv handle or request that never completed (issue 12's note); that was
 * the "runner never exits". process.exit skips that teardown. Should a run still outlive its report
 * by EXIT_GRACE_MS, it is killed and its report counts.
 */
function runJest(argv, report) {
  return new Promise((resolve) => {
    const child = spawn(jest, argv, { stdio: 'inherit', env });
    let watchdog;
    const poll = setInterval(() => {
      if (watchdog !== undefined || report === undefined || !existsSync(report)) return;
      watchdog = setTimeout(() => {
        process.stderr.write(`scripts/test.js: jest wrote its report but had not exited ${EXIT_GRACE_MS / 1000} s later; killed, its report counts\n`);
        child.kill('SIGKILL');
      }, EXIT_GRACE_MS);
    }, 1000);
    child.on('exit', (code) => {
      clearInterval(poll);
      clearTimeout(watchdog);
      resolve(code);
    });
  });
}

(async () => {
  const reports = [];
  let status = 0;
  for (const [i, projects] of runs.entries()) {
    const report = out === undefined ? undefined : `${out}.${i}`;
    const code = await runJest(['--selectProjects', ...projects, '--passWithNoTests', '--forceExit', ...rest, ...(report ? [`--outputFile=${report}`] : [])], report);
    let parsed;
    if (report !== undefined) {
      try {
        parsed = JSON.parse(readFileSync(report, 'utf8'));
        rmSync(report);
        reports.push(parsed);
      } catch {
        status ||= 1; // no report: that run failed before writing one
      }
    }
    // Killed after its report (code null): the report says how the run went.
    const failed = code === null ? parsed === undefined || parsed.success !== true : code !== 0;
    if (failed) status ||= code ?? 1;
  }
  if (out !== undefined) {
    const keys = ['numPassedTests', 'numFailedTests', 'numPendingTests', 'numTodoTests', 'numTotalTests', 'numPassedTestSuites', 'numFailedTestSuites', 'numTotalTestSuites'];
    const sum = { success: status === 0, testResults: [] };
    for (const k of keys) sum[k] = reports.reduce((n, r) => n + (r[k] ?? 0), 0);
    for (const r of reports) sum.testResults.push(...(r.testResults ?? []));
    writeFileSync(out, JSON.stringify(sum));
  }
  process.exit(status);
})();
