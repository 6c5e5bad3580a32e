// When V8 compiles the gateway's hot functions with TurboFan, its optimizing compiler. V8 tiers a
// function up once it has used a budget of executed bytecode: its size times
// --invocation-count-for-turbofan (3,000). The functions a request passes through are large and
// return early, so each call uses a small part of that budget. At the default, CPU per 64 B request
// kept falling for 16,000–30,000 requests after start. Until then much of the request path ran in
// Maglev's code, which calls V8's generic property handlers on private fields, and the CPU per
// request was 1.4–1.8× the steady state's.
//
// At 400, the budget of Maglev's own tier-up, the steady state comes after about 3,000 requests.
// Those first requests cost ~40 % more while TurboFan compiles. After them, the gateway spent less
// CPU per request than at the default after 10,000: 64 B c=8 0.09–0.12 ms against 0.13–0.18, and
// 600 KB 0.29–0.34 ms against 0.43–0.49 (bench/RESULTS.md, "TurboFan sooner"). 150 was no better
// than 400. An explicit --invocation-count-for-turbofan on node's command line is left as given.
// Imported by the CLI before the rest of the gateway loads, like young-generation.ts.

import { setFlagsFromString } from 'node:v8';

const TURBOFAN_INVOCATIONS = 400;

if (!process.execArgv.some((a) => a.startsWith('--invocation-count-for-turbofan') || a.startsWith('--invocation_count_for_turbofan'))) {
  setFlagsFromString(`--invocation-count-for-turbofan=${TURBOFAN_INVOCATIONS}`);
}
