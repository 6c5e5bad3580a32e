// NVIDIA's Python client against both servers: tritonclient_check.py runs the same calls with
// tritonclient.http and tritonclient.http.aio against Triton's own HTTP frontend and against
// tensorgate (in front of the same Triton over gRPC) and fails on any difference in results.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';

const SCRIPT = join(__dirname, 'tritonclient_check.py');

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--api-disabled', 'none']);
});
afterAll(async () => {
  await gw?.close();
});

test('tritonclient (http and http.aio) sees the same results from tensorgate as from Triton', async () => {
  const python = join(tritonVenv(), 'bin', 'python');
  const gateway = new URL(gw.url).host; // tritonclient wants host:port
  const triton = process.env.TRITON_HTTP!;
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [SCRIPT, '--gateway', gateway, '--triton', triton], { timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
  if (run.code !== 0) {
    throw new Error(`tritonclient_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  }
  const summary = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; checks?: number };
  expect(summary.ok).toBe(true);
  expect(summary.checks).toBeGreaterThan(0);
}, 300_000);
