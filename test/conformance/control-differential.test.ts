// Differential conformance of the administrative endpoints: each case of cases/control.ts goes
// to Triton's own HTTP frontend, then through tensorgate (every API group enabled) to the same
// Triton over gRPC; status, the compared headers and the body must agree (statistics on shape).
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { controlCases } from './cases/control';
import { type Answer, differences, report, send } from './cases/exchange';

const TRITON = `http://${process.env.TRITON_HTTP}`;

describe('administrative endpoints: Triton HTTP vs tensorgate', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--api-disabled', 'none']);
  });
  afterAll(async () => {
    await gw?.close();
  });

  // Sequential and in order: several cases change a setting and the next one puts it back.
  test.each(controlCases.cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const ref: Answer = await send(TRITON, c);
    const got: Answer = await send(gw.url, c);
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  });
});
