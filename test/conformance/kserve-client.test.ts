// KServe's own Python SDK (kserve.InferenceRESTClient, from PyPI, in a venv of its own) drives
// tensorgate: V2 requests give Triton's own results, V1 predict (instances, {"b64"}) gives them
// reshaped the TF-Serving way. test/kserve/kserve_client_check.py holds the calls.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';

const SCRIPT = join(__dirname, '..', 'kserve', 'kserve_client_check.py');

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

test('KServe\'s REST client (V2 and V1) works through tensorgate', async () => {
  const python = join(tritonVenv('test/kserve/requirements.txt'), 'bin', 'python');
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [SCRIPT, '--gateway', gw.url, '--triton', `http://${process.env.TRITON_HTTP}`], { timeout: 240_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
  if (run.code !== 0) {
    throw new Error(`kserve_client_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  }
  const summary = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { checks?: number; failed?: number };
  expect(summary.failed).toBe(0);
  expect(summary.checks).toBe(5);
}, 600_000);
