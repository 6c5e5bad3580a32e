// Triton's gRPC on a Unix domain socket (a sidecar's Triton: `--grpc-address unix:PATH`, which
// tritonserver listens on as `PATH:<grpc port>`), the gateway's backend given as `unix:/that/path`:
// every part of the gateway that calls Triton (health checks, model metadata and configs, the data
// plane's own HTTP/2, the compiled lane in C, the gRPC pass-through) goes over the socket. Clients we
// did not write: NVIDIA's tritonclient (http and grpc, compared with Triton's own answers) and curl.
// Then the socket's Triton is killed and started again on the same path: what a client sees.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { curl } from '../support/curl';
import { gatewayFor } from '../support/gateway';
import { killTritonServer, type RunningTriton, startTriton, tritonVenv } from '../support/triton';
import { CURL, needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON(), CURL()); // real Triton (test/support/triton.ts), curl

jest.setTimeout(300_000);

const dir = mkdtempSync(join(tmpdir(), 'tg-unix-'));
let triton: RunningTriton | undefined;
let gw: RunningGateway;
let socket: string;

beforeAll(async () => {
  triton = await startTriton({ grpcSocket: join(dir, 'grpc.sock') });
  socket = triton.grpcSocket!;
  gw = await gatewayFor(['--backend', `unix:${socket}`, '--api-disabled', 'none', '--grpc-port-enabled', '--grpc-port', '0']);
  await until(async () => (await curl('-s', `${gw.url}/v2/health/ready`)).status === 200, 30_000);
}, 360_000);

afterAll(async () => {
  await gw?.close(2000);
  await triton?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** Polls `ok` every 200 ms until it holds; throws past `ms`. */
async function until(ok: () => Promise<boolean>, ms: number): Promise<void> {
  for (const end = Date.now() + ms; !(await ok());) {
    if (Date.now() > end) throw new Error(`not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Runs one of test/conformance's tritonclient checks: its last stdout line's summary. */
async function check(script: string, gateway: string, tritonAt: string): Promise<{ ok?: boolean; checks?: number }> {
  const python = join(tritonVenv(), 'bin', 'python');
  const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(python, [join(__dirname, '../conformance', script), '--gateway', gateway, '--triton', tritonAt],
      { timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : null) : 0;
        resolve({ code, stdout, stderr });
      });
  });
  if (run.code !== 0) throw new Error(`${script} exited with ${run.code}\n--- stdout ---\n${run.stdout}\n--- stderr ---\n${run.stderr.slice(0, 20_000)}`);
  return JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; checks?: number };
}

test('tritonclient.http sees through the gateway what Triton\'s own HTTP frontend answers, Triton reached over the socket', async () => {
  const summary = await check('tritonclient_check.py', new URL(gw.url).host, `127.0.0.1:${triton!.http}`);
  expect(summary.ok).toBe(true);
  expect(summary.checks).toBeGreaterThan(0);
});

test('tritonclient.grpc sees through the gRPC pass-through what Triton answers on its socket', async () => {
  const summary = await check('tritonclient_grpc_check.py', `127.0.0.1:${gw.grpcPort!}`, `unix:${socket}`);
  expect(summary.ok).toBe(true);
  expect(summary.checks).toBeGreaterThan(20);
});

/** image_stats' binary-extension request over `n` bytes, as curl sends it (`--data-binary @file`). */
function binaryBody(n: number): { body: Buffer; headerLength: number } {
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, n], parameters: { binary_data_size: n } }],
    outputs: [{ name: 'LEN', parameters: { binary_data: true } }, { name: 'SUM', parameters: { binary_data: true } }] }));
  const data = Buffer.alloc(n);
  for (let i = 0; i < n; i++) data[i] = (i * 31 + 7) & 0xff;
  return { body: Buffer.concat([header, data]), headerLength: header.length };
}

test.each([[64], [4 * 1024 * 1024]])('curl: %d B binary requests on one connection, answered byte for byte as Triton\'s HTTP frontend answers them; the lane serves them in C over the socket', async (n) => {
  const { body, headerLength } = binaryBody(n);
  const file = join(dir, `body-${n}`);
  writeFileSync(file, body);
  // curl sends Expect: 100-continue past 1 MiB; both servers answer it. Each answer to a file of its own.
  const run = async (url: string, times: number): Promise<Buffer[]> => {
    const outs = Array.from({ length: times }, (_, i) => join(dir, `out-${n}-${i}`));
    const { stdout } = await promisify(execFile)(CURL().path!, ['-s', '--fail-with-body', '--max-time', '60', '-H', 'Content-Type: application/octet-stream',
      '-H', `Inference-Header-Content-Length: ${headerLength}`, '--data-binary', `@${file}`, '-w', '%{num_connects} ',
      ...outs.flatMap((o) => [url, '-o', o])], { encoding: 'utf8' });
    expect(stdout.trim().split(' ').map(Number).reduce((a, b) => a + b, 0)).toBe(1);
    return outs.map((o) => readFileSync(o));
  };
  const [direct] = await run(`http://127.0.0.1:${triton!.http}/v2/models/image_stats/infer`, 1);
  const before = gw.laneCounts()?.served ?? 0;
  const through = await run(`${gw.url}/v2/models/image_stats/infer`, 12);
  for (const answer of through) expect(answer.equals(direct!)).toBe(true);
  const lane = gw.laneCounts();
  if (lane !== undefined) {
    // The first ones are JavaScript's (they plan the head the lane keeps), the rest C's.
    expect(lane.served - before).toBeGreaterThanOrEqual(8);
    // The socket's send buffer raised (lane.c UNIX_SNDBUF; as root past net.core.wmem_max).
    expect(lane.upstreamSendBuffer).toBeGreaterThan(0);
  }
});

test('Triton killed: 503 with {"error"} at once, nothing hangs; started again on the same socket, served again with no gateway restart', async () => {
  const url = `${gw.url}/v2/models/simple/infer`;
  const data = Array.from({ length: 16 }, (_, i) => i);
  const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data }] });
  const post = (): ReturnType<typeof curl> => curl('-s', '--max-time', '20', '-H', 'Content-Type: application/json', '--data-binary', body, url);
  expect((await post()).status).toBe(200);
  await killTritonServer(triton!);
  triton = undefined;
  const down = await post();
  expect(down.status).toBe(503);
  expect(typeof (JSON.parse(down.body.toString()) as { error?: unknown }).error).toBe('string');
  // The same path: tritonserver removes the socket file its predecessor left and binds it again.
  triton = await startTriton({ grpcSocket: join(dir, 'grpc.sock'), grpc: Number(socket.slice(socket.lastIndexOf(':') + 1)), models: ['simple', 'image_stats'] });
  expect(triton.grpcSocket).toBe(socket);
  await until(async () => (await post()).status === 200, 60_000);
  expect(JSON.parse((await post()).body.toString())).toMatchObject({ model_name: 'simple', outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }] });
});
