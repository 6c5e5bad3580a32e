// `npm run fuzz -- --runs N [--seed S] [--time-limit-ms T] [jest args]`: the properties of
// test/fuzz/ (the slice `npm test` runs) with N inputs each, from seed S (random unless given).
// Prints the seed, each property's count and the total. A failure prints fast-check's shrunk
// counterexample; replay it with the same --seed, and commit it to test/fuzz/corpus/.
'use strict';
const { spawnSync } = require('node:child_process');
const { readFileSync, rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const args = process.argv.slice(2);
const take = (flag) => {
  const i = args.indexOf(flag);
  if (i < 0) return undefined;
  const [, v] = args.splice(i, 2);
  return v;
};
const runs = Number(take('--runs') ?? 10_000);
const seed = Number(take('--seed') ?? Math.floor(Math.random() * 2 ** 31));
const timeLimit = take('--time-limit-ms');
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed)) {
  console.error('usage: npm run fuzz -- --runs N [--seed S] [--time-limit-ms T]');
  process.exit(2);
}
const counts = path.join(os.tmpdir(), `tensorgate-fuzz-${process.pid}.jsonl`);
console.log(`fuzz: seed ${seed}, ${runs} runs per property`);
const started = Date.now();
const env = {
  ...process.env, NODE_OPTIONS: '--experimental-vm-modules --no-warnings=ExperimentalWarning',
  FUZZ_RUNS: String(runs), FUZZ_SEED: String(seed), FUZZ_COUNTS: counts, ...(timeLimit ? { FUZZ_TIME_LIMIT_MS: timeLimit } : {}),
};
const jest = path.join(__dirname, '..', 'node_modules', '.bin', 'jest');
const r = spawnSync(jest, ['--selectProjects', 'fuzz', '--runInBand', ...args], { stdio: 'inherit', env });
let total = 0;
try {
  for (const line of readFileSync(counts, 'utf8').split('\n').filter(Boolean)) {
    const c = JSON.parse(line);
    total += c.runs;
    console.log(`fuzz: ${String(c.runs).padStart(9)} ${c.failed ? 'FAILED' : 'ok    '} ${c.name}`);
  }
  rmSync(counts);
} catch {
  console.log('fuzz: no counts (jest failed before any property ran)');
}
console.log(`fuzz: seed ${seed}: ${total} inputs in ${((Date.now() - started) / 1000).toFixed(0)} s, jest exit ${r.status}`);
process.exit(r.status ?? 1);
