// The fuzz harness: fast-check properties over every decoder and the HTTP path. In
// `npm test` each property runs a fixed number of inputs from a fixed seed (deterministic: the
// same inputs on every run, however busy the machine); `npm run fuzz -- --runs N` (scripts/fuzz.js)
// runs the same properties with FUZZ_RUNS inputs each from FUZZ_SEED (random unless given) and
// FUZZ_COUNTS, a file each property appends its count to.
import { appendFileSync } from 'node:fs';
import fc from 'fast-check';
import { isGatewayError } from '../../gateway/errors';

export const SEED = Number(process.env.FUZZ_SEED ?? 1313);
const RUNS = process.env.FUZZ_RUNS === undefined ? undefined : Number(process.env.FUZZ_RUNS);

/**
 * One property as a jest test: `runs` inputs in `npm test`, FUZZ_RUNS in a long run. A failure
 * reports fast-check's shrunk counterexample, seed and path (replay with FUZZ_SEED).
 */
export function fuzz<T>(name: string, runs: number, arb: fc.Arbitrary<T>, check: (v: T) => void | Promise<void>, timeoutMs = 60_000): void {
  test(`${name} (seed ${SEED})`, async () => {
    const numRuns = RUNS ?? runs;
    // The time limit only bounds a long run (FUZZ_RUNS); the default slice is a fixed count.
    const limit = RUNS === undefined ? {} : { interruptAfterTimeLimit: Number(process.env.FUZZ_TIME_LIMIT_MS ?? 3_600_000), markInterruptAsFailure: false };
    const details = await fc.check(fc.asyncProperty(arb, async (v) => {
      await check(v);
    }), { seed: SEED, numRuns, endOnFailure: RUNS !== undefined, includeErrorInReport: true, ...limit });
    if (process.env.FUZZ_COUNTS !== undefined) {
      appendFileSync(process.env.FUZZ_COUNTS, `${JSON.stringify({ name, runs: details.numRuns, failed: details.failed, seed: SEED })}\n`);
    }
    if (details.failed) throw new Error(fc.defaultReportMessage(details) ?? 'property failed');
  }, RUNS === undefined ? timeoutMs : 24 * 3_600_000);
}

/** Runs `f`; a throw must be a GatewayError (a decoder's only way to refuse). Returns the outcome. */
export function outcome<T>(f: () => T): { ok: T } | { code: string; message: string } {
  try {
    return { ok: f() };
  } catch (err) {
    if (!isGatewayError(err)) throw new Error(`not a GatewayError: ${(err as Error)?.stack ?? String(err)}`);
    return { code: err.code, message: err.message };
  }
}

const ALLOCATORS = ['alloc', 'allocUnsafe', 'allocUnsafeSlow'] as const;

/**
 * Runs `f` with Buffer.alloc/allocUnsafe/allocUnsafeSlow watched; throws when one asked for more
 * than `budget` bytes (a size taken from the request before it was checked). The pool's pages
 * come from allocUnsafeSlow, so they are seen too.
 */
export function withinBudget<T>(budget: number, f: () => T): T {
  const saved = ALLOCATORS.map((k) => Buffer[k]); // eslint-disable-line @typescript-eslint/unbound-method -- static, restored as they were
  let largest = 0;
  ALLOCATORS.forEach((k, i) => {
    const real = saved[i]! as (size: number, ...rest: unknown[]) => Buffer;
    (Buffer as unknown as Record<string, unknown>)[k] = (size: number, ...rest: unknown[]): Buffer => {
      if (size > largest) largest = size;
      if (size > budget) throw new Error(`Buffer.${k}(${size}) above the budget of ${budget} bytes`);
      return real.call(Buffer, size, ...rest);
    };
  });
  try {
    return f();
  } finally {
    ALLOCATORS.forEach((k, i) => { (Buffer as unknown as Record<string, unknown>)[k] = saved[i]; });
  }
}

/** `b` cut at the given points (sorted, deduplicated, inside the buffer). */
export function cutAt(b: Buffer, points: readonly number[]): Buffer[] {
  const at = [...new Set(points.map((p) => p % (b.length + 1)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of at) {
    out.push(b.subarray(from, p));
    from = p;
  }
  out.push(b.subarray(from));
  return out.filter((c) => c.length > 0);
}

/** Random split points for a body. */
export const cuts = fc.array(fc.nat(1 << 20), { maxLength: 12 });

/** A few byte edits (replace, insert, delete) of `b`. */
export function mutated(b: Buffer): fc.Arbitrary<Buffer> {
  const edit = fc.record({ at: fc.nat(), op: fc.constantFrom('set', 'insert', 'delete', 'flip'), byte: fc.integer({ min: 0, max: 255 }) });
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    let out = Buffer.from(b);
    for (const e of edits) {
      const at = out.length === 0 ? 0 : e.at % out.length;
      if (e.op === 'set' && out.length > 0) out[at] = e.byte;
      else if (e.op === 'flip' && out.length > 0) out[at] = out[at]! ^ (1 << (e.byte & 7));
      else if (e.op === 'insert') out = Buffer.concat([out.subarray(0, at), Buffer.from([e.byte]), out.subarray(at)]);
      else out = Buffer.concat([out.subarray(0, at), out.subarray(at + 1)]);
    }
    return out;
  });
}

/** JSON with bigint values written as integer literals (dims past 2^53). */
export function jsonText(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `__big${x}__` : x)).replace(/"__big(-?\d+)__"/g, '$1');
}

/** Dims a hostile client sends: small, zero, negative, and past 32, 53 and 63 bits. */
export const dim = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 6 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 32 + 1) },
  { weight: 1, arbitrary: fc.constantFrom(2n ** 62n, 2n ** 62n + 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, 3037000500n) },
);

/** Nested arrays `depth` deep around `leaf`, as text (JSON.stringify recurses). */
export function nestedText(depth: number, leaf: string): string {
  return `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;
}
