// Differential conformance: every case of ./cases is sent, byte-for-byte the same, to Triton's own
// HTTP frontend and to tensorgate (in front of the same Triton over gRPC). The answers must agree on
// status, Content-Type, Inference-Header-Content-Length, Content-Encoding and body bytes
// (decompressed bodies when compressed: compressor output may legitimately differ). A few cases
// with volatile text (PyTriton tracebacks) carry a documented `compare` override.
// Intended differences are listed in docs/differences.md; the cases they touch are skipped here by
// name (INTENDED), each pointing at its entry and at the test that checks the gateway's answer.
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { allCases } from './cases';
import { type Answer, differences, report, send } from './cases/exchange';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const CASES = allCases();

/**
 * Cases the grpc-js data plane cannot pass, each an entry of docs/differences.md: grpc-js's HTTP/2
 * client refuses header values ending in a blank, so such Triton messages arrive empty.
 */
const GRPC_JS_DIFFERS = new Set(['identity_fp32_nobatch: rank 1 for dims [-1,-1] (message ends with a blank)']);

/**
 * Cases whose Triton answer the gateway does not give on purpose, by title, with the entry of
 * docs/differences.md that says so and the test of the gateway's own answer.
 */
const INTENDED = new Map([
  ['binary: binary inputs without the header',
    'docs/differences.md "Binary extension without its header"; checked by test/conformance/headerless-binary.test.ts'],
  ...['raw RFC1951 deflate body (not inflatable)', 'gzip label on an uncompressed body', 'truncated gzip stream'].map((n): [string, string] => [`compression: ${n}`,
    'docs/differences.md "Corrupt or truncated gzip/deflate request bodies"; checked by test/unit/ingress/body.test.ts and test/fuzz/corpus/']),
  ['errors: shape element count wraps to 0 (2^32 x 2^32)',
    'docs/differences.md "Shapes past 32 bits"; checked by test/fuzz/corpus/v2-header-shape-wraps-to-0.json'],
]);

describe.each(['h2', 'grpc-js'])('differential over %s: Triton HTTP vs tensorgate', (transport) => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--transport', transport]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  test('the matrix is big enough', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(150);
  });

  const cases = CASES.filter((c) => !INTENDED.has(c.title) && (transport === 'h2' || !GRPC_JS_DIFFERS.has(c.name)));
  test('every intended difference names a case of the matrix', () => {
    for (const title of INTENDED.keys()) expect(CASES.map((c) => c.title)).toContain(title);
  });
  test.each(cases.map((c) => [c.title, c] as const))('differential %s', async (_title, c) => {
    const timeout = c.timeoutMs ?? 30_000;
    // Sequential on purpose: Triton first, then the gateway (no cross-request batching effects).
    const ref: Answer = await send(TRITON, c, timeout);
    if (ref.decodeError) throw new Error(`Triton's own answer to "${c.title}" could not be decoded: ${ref.decodeError}`);
    let got: Answer;
    try {
      got = await send(gw.url, c, timeout);
    } catch (err) {
      throw new Error(`case "${c.title}": the gateway did not answer: ${(err as Error).message}\n  triton answered ${ref.status} with ${ref.body.length} bytes`);
    }
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  }, 120_000);
});
