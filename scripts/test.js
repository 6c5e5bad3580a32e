// `npm test`: every jest project, in two runs of jest — unit, fuzz, integration, interop,
// conformance and deploy (the container image) in one, the fault-injection suite (test/faults/) in
// its own process.
// Each run must end by itself: no --forceExit. Each jest process is started with
// test/support/open-at-exit.js, which lists on exit what the tests left open (a handle or request
// Node would still have to close or wait for in its teardown). Arguments go to both runs;
// `--outputFile=F` gets one JSON report summing both (what .ci/run reads). Exits non-zero when
// either run fails, or does not end by itself.
'use strict';
const { spawn } = require('node:child_process');
const { existsSync, readFileSync, writeFileSync, rmSync } = require('node:fs');
const path = require('node:path');

const jest = require.resolve('jest/bin/jest');
const openAtExit = path.join(__dirname, '..', 'test', 'support', 'open-at-exit.js');
const env = { ...process.env, NODE_OPTIONS: '--experimental-vm-modules --no-warnings=ExperimentalWarning' };
const args = process.argv.slice(2);
const out = args.find((a) => a.startsWith('--outputFile='))?.slice('--outputFile='.length);
const rest = args.filter((a) => !a.startsWith('--outputFile='));

const runs = [['unit', 'fuzz', 'integration', 'interop', 'conformance', 'deploy'], ['faults']];
/** After a run has written its report, how long it may take to exit before it is killed. */
const EXIT_GRACE_MS = 60_000;

/**
 * One jest run, in a Node process of its own (this script's Node). It must end by itself once its
 * report is written: a run still alive EXIT_GRACE_MS later is stuck in Node's teardown
 * (node::Environment::CleanupHandles waiting for a handle or request that never completes — what
 * open-at-exit printed just before names the suspects). It is killed then, so that CI ends, and the
 * run counts as failed: one failed test in the summed report, named after this script.
 */
function runJest(argv, report) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--require', openAtExit, jest, ...argv], { stdio: 'inherit', env });
    let watchdog;
    let stuck = false;
    const poll = setInterval(() => {
      if (watchdog !== undefined || report === undefined || !existsSync(report)) return;
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

(async () => {
  const reports = [];
  let status = 0;
  for (const [i, projects] of runs.entries()) {
    const report = out === undefined ? undefined : `${out}.${i}`;
    const started = Date.now();
    const { code, stuck } = await runJest(['--selectProjects', ...projects, '--passWithNoTests', ...rest, ...(report ? [`--outputFile=${report}`] : [])], report);
    process.stderr.write(`scripts/test.js: jest (${projects.join(', ')}) ended (status ${code}) after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
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
    if (code !== 0) status ||= code;
    if (stuck) {
      reports.push({
        numFailedTests: 1, numTotalTests: 1, numFailedTestSuites: 1, numTotalTestSuites: 1,
        testResults: [{ name: __filename, status: 'failed', message: `jest (${projects.join(', ')}) wrote its report but did not exit within ${EXIT_GRACE_MS / 1000} s` }],
      });
    }
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
