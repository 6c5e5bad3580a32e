// The gRPC port's HTTP/2 server (ingress/grpc-port/, our own framing) against h2spec, the HTTP/2
// conformance suite we did not write: every one of its cases (RFC 7540/9113 and HPACK, RFC 7541)
// must pass. h2spec sends plain requests (GET /); the port answers them as it answers anything
// that is not gRPC (415), which is all the suite needs of an answer.
import { execFile } from 'node:child_process';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { H2SPEC, needs } from '../support/tools';

jest.setTimeout(180_000);

const { describe: withH2spec } = needs(H2SPEC());

/** h2spec's run against `port`: its report and exit code. */
function h2spec(port: number): Promise<{ out: string; code: number }> {
  return new Promise((resolve) => {
    // -o: the seconds h2spec waits for each frame it expects.
    execFile(H2SPEC().path!, ['-h', '127.0.0.1', '-p', String(port), '-o', '3'], { timeout: 150_000, maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) => resolve({ out: `${stdout}${stderr}`, code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1 }));
  });
}

withH2spec('h2spec against the gRPC port', () => {
  let gw: RunningGateway | undefined;
  afterAll(async () => {
    await gw?.close();
  });

  test('every case passes', async () => {
    gw = await gatewayFor(['--demo', '--grpc-port-enabled', '--grpc-port', '0']);
    const { out, code } = await h2spec(gw.grpcPort!);
    // eslint-disable-next-line no-control-regex -- h2spec colours its report
    const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
    const summary = /(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed/.exec(plain);
    // A failed case's line is printed twice (progress, then the final report): each named once.
    const failures = [...new Set(plain.split(/[\r\n]/).filter((l) => l.includes('×')).map((l) => l.slice(l.lastIndexOf('×')).trim()))];
    expect({ failures, summary: summary?.[0] }).toEqual({ failures: [], summary: expect.stringMatching(/ 0 failed$/) as unknown });
    expect(Number(summary![1])).toBeGreaterThanOrEqual(145);
    expect(code).toBe(0);
  });
});
