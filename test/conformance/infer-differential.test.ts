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
import { casesFor, expectSameAnswer, INTENDED } from './cases/differential';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const CASES = allCases();

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

  const cases = casesFor(transport, CASES);
  test('every intended difference names a case of the matrix', () => {
    for (const title of INTENDED.keys()) expect(CASES.map((c) => c.title)).toContain(title);
  });
  test.each(cases.map((c) => [c.title, c] as const))('differential %s', async (_title, c) => {
    await expectSameAnswer(TRITON, gw.url, c);
  }, 120_000);
});
