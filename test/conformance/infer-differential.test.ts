// Differential conformance: every case of ./cases is sent, byte-for-byte the same, to Triton's own
// HTTP frontend and to tensorgate (in front of the same Triton over gRPC). The answers must agree on
// status, Content-Type, Inference-Header-Content-Length, Content-Encoding and body bytes
// (decompressed bodies when compressed: compressor output may legitimately differ). A few cases
// with volatile text (PyTriton tracebacks) carry a documented `compare` override.
// Intended differences are listed in docs/differences.md; none is exempted here.
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { allCases } from './cases';
import { type Answer, differences, report, send } from './cases/exchange';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const CASES = allCases();

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

describe('differential: Triton HTTP vs tensorgate', () => {
  test('the matrix is big enough', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(150);
  });

  test.each(CASES.map((c) => [c.title, c] as const))('differential %s', async (_title, c) => {
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
