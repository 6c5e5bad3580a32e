// The clock of request and hop timings (telemetry/record.ts, infer/ledger.ts): monotonic
// nanoseconds since the process started, as a number. A BigInt from process.hrtime.bigint() is a
// heap object per reading and per difference — some thirty per inference, a tenth of what a small
// request allocated — where a number stored in a field that holds one is written in place. A
// double holds whole nanoseconds exactly for 104 days of uptime and stays within a few after; the
// timings it measures are differences of microseconds and more.
import { performance } from 'node:perf_hooks';

/** Now, in nanoseconds since the process started (monotonic). */
export function nowNs(): number {
  return performance.now() * 1e6;
}
