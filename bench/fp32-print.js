// The compiled lane's FP32 printers timed (test/unit/json/print-all-fp32.c's time mode, built here):
// microseconds per thousand values, positive and of mixed sign, with this tree's
// gateway/native/triton-double.h or another's (--header FILE, e.g. an older tree's copy: before and
// after in one run). bench/RESULTS.md, "forty-fifth pass".
//   npm run -s build && node bench/fp32-print.js [--header FILE]
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { cachedPowerArrays } = require('#dist/gateway/json/number-print.js');

const argv = process.argv.slice(2);
const at = argv.indexOf('--header');
const header = path.resolve(at >= 0 ? argv[at + 1] : path.join(__dirname, '..', 'gateway', 'native', 'triton-double.h'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fp32-print-'));
try {
  const { significands, k, shift } = cachedPowerArrays();
  fs.writeFileSync(path.join(dir, 'f.bin'), Buffer.from(significands.buffer));
  fs.writeFileSync(path.join(dir, 'k.bin'), Buffer.from(k.buffer));
  fs.writeFileSync(path.join(dir, 's.bin'), Buffer.from(shift.buffer));
  const bin = path.join(dir, 'print-all-fp32');
  execFileSync(process.env.CC || 'cc', ['-O2', '-Wall', '-Wextra', '-Werror', `-DTD_HEADER="${header}"`, '-o', bin, path.join(__dirname, '..', 'test', 'unit', 'json', 'print-all-fp32.c')], { stdio: 'inherit' });
  process.stdout.write(`${header}\n${execFileSync(bin, [dir, 'time'], { encoding: 'utf8' })}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
