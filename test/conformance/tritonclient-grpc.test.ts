// NVIDIA's Python gRPC client against both servers: tritonclient_grpc_check.py runs the same calls
// with tritonclient.grpc (sync, async_infer, streams) and tritonclient.grpc.aio against Triton's
// own gRPC endpoint and against the gateway's gRPC pass-through, and fails on any difference.
// The clients dial the gateway's one port (HTTP/1.1, h2c and gRPC alike), where the listener hands
// every application/grpc stream to the pass-through, and then the gRPC port (server.grpc.enabled:
// HTTP/2 on the gateway's own framing, ingress/grpc-port/).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';

const SCRIPT = join(__dirname, 'tritonclient_grpc_check.py');

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--api-disabled', 'none', '--grpc-port-enabled', '--grpc-port', '0']);
});
afterAll(async () => {
  await gw?.close(2000);
});

test.each([['server.port (node:http2)', false], ['the gRPC port (our own HTTP/2)', true]])('tritonclient (grpc and grpc.aio, unary, async and streaming) sees the same results through the pass-through on %s as from Triton', async (_where, onGrpcPort) => {
  const python = join(tritonVenv(), 'bin', 'python');
  const gateway = `127.0.0.1:${onGrpcPort ? gw.grpcPort! : gw.port}`;
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [SCRIPT, '--gateway', gateway, '--triton', process.env.TRITON_GRPC!], { timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
  if (run.code !== 0) {
    throw new Error(`tritonclient_grpc_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  }
  const summary = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; checks?: number };
  expect(summary.ok).toBe(true);
  expect(summary.checks).toBeGreaterThan(20);
}, 300_000);
