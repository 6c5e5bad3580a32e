// Differential conformance: every case of ./cases is sent, byte-for-byte the same, to Triton's own
// HTTP frontend and to tensorgate (in front of the same Triton over gRPC). The answers must agree on
// status, Content-Type, Inference-Header-Content-Length, Content-Encoding and body bytes
// (decompressed bodies when compressed: compressor output may legitimately differ). A few cases
// with volatile text (PyTriton tracebacks) carry a documented `compare` override.
// Intended differences are listed in docs/differences.md; the cases they touch are skipped here by
// name (INTENDED), each pointing at its entry and at the test that checks the gateway's answer.
// The matrix runs a second time with the gateway asked over HTTP/2 (h2c), last in this file.
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { allCases } from './cases';
import { casesFor, expectSameAnswer, INTENDED } from './cases/differential';
import { sendH2 } from './cases/exchange';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const CASES = allCases();

describe.each(['h2', 'grpc-js'])('differential over %s: Triton HTTP vs tensorgate', (transport) => {
  let gw: RunningGateway;
  beforeAll(async () => {
    // Over h2, every JSON body (no Inference-Header-Content-Length) is decoded on a decode thread
    // (limits.decodeThreads): its answers, errors included, must be Triton's as on the main thread.
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--transport', transport, ...(transport === 'h2' ? ['--decode-thread-min-bytes', '0'] : [])]);
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

// The same matrix with the gateway asked over HTTP/2 (h2c with prior knowledge, on its one port)
// and Triton over HTTP/1.1, its only version: an HTTP/2 request gets the same answer as HTTP/1.1
// (status, compared headers, body bytes). Chunked cases send their pieces as DATA frames.
describe('differential over h2c ingress: Triton HTTP/1.1 vs tensorgate HTTP/2', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  test.each(casesFor('h2', CASES).map((c) => [c.title, c] as const))('h2c %s', async (_title, c) => {
    await expectSameAnswer(TRITON, gw.url, c, sendH2);
  }, 120_000);
});
