// The differential check shared by the test files that run the case matrix against a gateway in
// front of a Triton (infer-differential.test.ts; upstream-tls.test.ts over mTLS): which cases
// each data plane runs, and the comparison of one case's answers.
import { allCases, type NamedCase } from './index';
import { type Answer, differences, report, send } from './exchange';

/** How a case reaches the gateway: HTTP/1.1 (exchange.ts send) or HTTP/2 (sendH2). */
export type Sender = (base: string, c: NamedCase, timeoutMs: number) => Promise<Answer>;

/**
 * Cases the grpc-js data plane cannot pass, each an entry of docs/differences.md: grpc-js's HTTP/2
 * client refuses header values ending in a blank, so such Triton messages arrive empty.
 */
export const GRPC_JS_DIFFERS = new Set(['identity_fp32_nobatch: rank 1 for dims [-1,-1] (message ends with a blank)']);

/**
 * Cases whose Triton answer the gateway does not give on purpose, by title, with the entry of
 * docs/differences.md that says so and the test of the gateway's own answer.
 */
export const INTENDED = new Map([
  ['binary: binary inputs without the header',
    'docs/differences.md "Binary extension without its header"; checked by test/conformance/headerless-binary.test.ts'],
  ...['raw RFC1951 deflate body (not inflatable)', 'gzip label on an uncompressed body', 'truncated gzip stream'].map((n): [string, string] => [`compression: ${n}`,
    'docs/differences.md "Corrupt or truncated gzip/deflate request bodies"; checked by test/unit/ingress/body.test.ts and test/fuzz/corpus/']),
  ['errors: shape element count wraps to 0 (2^32 x 2^32)',
    'docs/differences.md "Shapes past 32 bits"; checked by test/fuzz/corpus/v2-header-shape-wraps-to-0.json'],
]);

/** The cases of the matrix a gateway on `transport` must answer as Triton does. */
export function casesFor(transport: string, cases: readonly NamedCase[] = allCases()): NamedCase[] {
  return cases.filter((c) => !INTENDED.has(c.title) && (transport === 'h2' || !GRPC_JS_DIFFERS.has(c.name)));
}

/**
 * Sends `c` to Triton's HTTP (`triton`) and then to the gateway (`gateway`), sequentially on
 * purpose (no cross-request batching effects); throws a report when the answers differ.
 */
export async function expectSameAnswer(triton: string, gateway: string, c: NamedCase, toGateway: Sender = send): Promise<void> {
  const timeout = c.timeoutMs ?? 30_000;
  const ref: Answer = await send(triton, c, timeout);
  if (ref.decodeError) throw new Error(`Triton's own answer to "${c.title}" could not be decoded: ${ref.decodeError}`);
  let got: Answer;
  try {
    got = await toGateway(gateway, c, timeout);
  } catch (err) {
    throw new Error(`case "${c.title}": the gateway did not answer: ${(err as Error).message}\n  triton answered ${ref.status} with ${ref.body.length} bytes`);
  }
  const diffs = differences(c, ref, got);
  if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
}
