import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cachedPowerArrays } from '../../../gateway/json/number-print';

// The compiled lane's two FP32 printers (gateway/native/triton-double.h: eight values a step with
// AVX-512, and one at a time, itself compared with number-print.ts in number-print-native.test.ts),
// text for text, by print-all-fp32.c compiled here. On every FP32 bit pattern when
// TENSORGATE_PRINT_ALL_FP32=1 (scripts/test.js gives it a jest run of its own, so that it takes no
// CPU from the suites that time things); else on every 64th run of a thousand consecutive patterns.
// The whole run was 1.5 minutes on two cores of one machine kind and 7–12 on another (an Intel Xeon
// whose vCPUs ran the scalar fallback 5× slower, 12 beside a busy loop); 4.5 there once the
// negative values were the AVX-512 printer's too. Its bound stays 30 minutes.

const ALL = process.env.TENSORGATE_PRINT_ALL_FP32 === '1';

test(`the AVX-512 printer's text is the scalar printer's for ${ALL ? 'all 2^32' : '67 million'} FP32 bit patterns`, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'print-all-fp32-'));
  try {
    const { significands, k, shift } = cachedPowerArrays();
    fs.writeFileSync(path.join(dir, 'f.bin'), Buffer.from(significands.buffer));
    fs.writeFileSync(path.join(dir, 'k.bin'), Buffer.from(k.buffer));
    fs.writeFileSync(path.join(dir, 's.bin'), Buffer.from(shift.buffer));
    const bin = path.join(dir, 'print-all-fp32');
    try {
      execFileSync(process.env.CC || 'cc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', bin, path.join(__dirname, 'print-all-fp32.c')], { stdio: 'pipe' });
    } catch (err) {
      if (process.env.CI === 'true') throw err;
      process.stderr.write(`SKIPPED print-all-fp32: no C compiler here (${(err as Error).message.split('\n')[0]})\n`);
      return;
    }
    const run = spawnSync(bin, [dir, ALL ? '2' : '1', ALL ? '1' : '64'], { encoding: 'latin1', timeout: 1_800_000 });
    if (run.status === 2) {
      process.stderr.write(`SKIPPED print-all-fp32: ${run.stdout.trim()}\n`);
      return;
    }
    expect({ status: run.status, out: run.stdout.trim() }).toEqual({ status: 0, out: `equal ${ALL ? 2 ** 32 : 67_109_000}` });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 1_860_000);
