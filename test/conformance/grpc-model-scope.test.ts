// A key limited to one model attacks the gRPC pass-through with clients we did not write (grpcio
// with raw request bytes, tritonclient.grpc with gzip): grpc_model_scope_check.py sends each
// request to Triton first, showing the model Triton serves for it (the last model_name), then
// through the gateway, which refuses it with PERMISSION_DENIED.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';

const SCRIPT = join(__dirname, 'grpc_model_scope_check.py');
const KEY = 'simple_only_0123456789abcdef';
const ALL = 'all_models_0123456789abcdef';
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;

let gw: RunningGateway;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tg-scope-'));
  const keys = join(dir, 'keys.yaml');
  writeFileSync(keys, ['keys:', `  - { id: simple-only, token: "${sha(KEY)}", groups: "*", models: [simple] }`, `  - { id: all, token: "${sha(ALL)}", groups: "*" }`].join('\n'));
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--api-disabled', 'none', '--auth', '--auth-keys-file', keys]);
});
afterAll(async () => {
  await gw?.close(2000);
  rmSync(dir, { recursive: true, force: true });
});

test('field order, duplicates, stream position and compression: refused to a key for another model, served as Triton serves them otherwise', async () => {
  const python = join(tritonVenv(), 'bin', 'python');
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [SCRIPT, '--gateway', `127.0.0.1:${gw.port}`, '--triton', process.env.TRITON_GRPC!, '--key', KEY, '--all', ALL], { timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
  if (run.code !== 0) throw new Error(`grpc_model_scope_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  const summary = JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; checks?: number };
  expect(summary).toMatchObject({ ok: true, checks: 11 });
}, 180_000);

// grpcio (C-core) and the gateway's own refusals, made before anything goes upstream (routes/
// passthrough/grpc-ingress.ts refuse): the status arrives, never INTERNAL "Stream removed" (RST_STREAM
// before the trailers), unary and with the request still being sent. The demo backend: no Triton
// is reached.
test('refusals before forwarding reach grpcio as their status, unary and mid-upload', async () => {
  const demo = await gatewayFor(['--demo', '--api-disabled', 'statistics', '--auth', '--auth-keys-file', join(dir, 'keys.yaml')]);
  try {
    const python = join(tritonVenv(), 'bin', 'python');
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(python, [join(__dirname, 'grpc_refusal_check.py'), '--gateway', `127.0.0.1:${demo.port}`, '--key', KEY, '--rounds', '50'], { timeout: 120_000 }, (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
      });
    });
    if (run.code !== 0) throw new Error(`grpc_refusal_check.py exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
    expect(JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}')).toEqual({ ok: true, calls: 400, failures: 0 });
  } finally {
    await demo.close(2000);
  }
}, 180_000);
