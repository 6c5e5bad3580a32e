// The binary extension without Inference-Header-Content-Length (docs/differences.md "Binary
// extension without its header"): Triton refuses a JSON object followed by the tensor bytes; the
// gateway (binary.headerless, on by default) reads the rest of the body as the binary section and
// answers exactly what Triton answers to the same request *with* the header. With the option off
// it answers as Triton does. The three published clients (docs/dialects.md#binary-extension-without-its-header)
// (Python requests, Go net/http, JavaScript fetch) run against it unchanged but for URL and model.
import { run } from '../support/run';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { expectedStatus } from './cases/exchange';
import { tritonVenv } from '../support/triton';
import { GO, needs } from '../support/tools';
import { int32 } from '../support/int32';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const DIR = join(__dirname, 'headerless');

let gw: RunningGateway;
let off: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
  off = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--binary-headerless=false']);
});
afterAll(async () => {
  await gw?.close();
  await off?.close();
});

const ints = (f: (i: number) => number): Buffer => int32(Array.from({ length: 16 }, (_, i) => f(i)));
const simpleHead = (extra = ''): string => JSON.stringify({
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })),
}) + extra;

/** Triton's answer to the same JSON and tensors with Inference-Header-Content-Length. */
async function withHeader(model: string, json: string, ...tensors: Buffer[]) {
  const head = Buffer.from(json);
  return send(`${TRITON}/v2/models/${model}/infer`, { body: Buffer.concat([head, ...tensors]), headers: { 'Inference-Header-Content-Length': head.length } });
}

describe.each([
  ['the case of the differential suite (first byte non-NUL)', ints((i) => i + 1), ints((i) => 5 - 2 * i)],
  ['tensor bytes starting with NUL (rapidjson reads it as the end of the JSON)', ints((i) => i * 256), ints((i) => i)],
  ['a blank line between JSON and tensors', ints((i) => i + 1), ints((i) => 5 - 2 * i), '\r\n'],
])('simple, %s', (_name, a, b, sep = '') => {
  const body = () => Buffer.concat([Buffer.from(simpleHead(sep)), a, b]);

  test('the gateway answers what Triton answers with the header', async () => {
    const ref = await withHeader('simple', simpleHead(sep), a, b);
    expect(ref.status).toBe(200);
    const got = await send(`${gw.url}/v2/models/simple/infer`, { body: body() });
    expect({ status: got.status, type: got.headers['content-type'], body: got.body.toString() })
      .toEqual({ status: 200, type: ref.headers['content-type'], body: ref.body.toString() });
  });

  test('Triton refuses it without the header; binary.headerless=false answers the same', async () => {
    const ref = await send(`${TRITON}/v2/models/simple/infer`, { body: body() });
    expect(ref.status).toBeGreaterThanOrEqual(400);
    const got = await send(`${off.url}/v2/models/simple/infer`, { body: body() });
    expect({ status: got.status, type: got.headers['content-type'], body: got.body.toString() })
      .toEqual({ status: expectedStatus(ref, { headers: { 'x-tensorgate-error': String(got.headers['x-tensorgate-error']) } }), type: ref.headers['content-type'], body: ref.body.toString() });
  });
});

test('seed client: Python requests (classifier_fp32)', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'tg-headerless-'));
  try {
    const imageFile = join(tmp, 'image.f32');
    const r = await run(join(tritonVenv(), 'bin', 'python'), [join(DIR, 'seed_client.py'), gw.url, imageFile], { timeoutMs: 180_000 });
    if (r.code !== 0) throw new Error(`seed_client.py failed:\n${r.stderr}`);
    const image = readFileSync(imageFile);
    const ref = await withHeader('classifier_fp32', JSON.stringify({ inputs: [{ name: 'INPUT', shape: [1, 3, 224, 224], datatype: 'FP32', parameters: { binary_data_size: image.length } }] }), image);
    expect(ref.status).toBe(200);
    expect(JSON.parse(r.stdout)).toEqual(JSON.parse(ref.body.toString()));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}, 120_000);

const IDENTITY_INPUT = Buffer.from(Float32Array.of(1.5, -2.25, 3e-8, 1024, 0, 7).buffer);
const identityRef = () => withHeader('identity_fp32', JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 6], datatype: 'FP32', parameters: { binary_data_size: 24 } }] }), IDENTITY_INPUT);

needs(GO()).test('seed client: Go net/http (identity_fp32), standard library only, offline', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'tg-headerless-go-'));
  try {
    const env = { ...process.env, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOTOOLCHAIN: 'local', GO111MODULE: 'on', GOPATH: join(tmp, 'gopath') };
    const r = await run(GO().path!, ['run', join(DIR, 'seed_client.go'), gw.url], { timeoutMs: 180_000, env });
    if (r.code !== 0) throw new Error(`go run seed_client.go failed:\n${r.stderr}`);
    const ref = await identityRef();
    expect(ref.status).toBe(200);
    expect(JSON.parse(r.stdout)).toEqual({ status: 200, body: JSON.parse(ref.body.toString()) });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}, 180_000);

test('seed client: JavaScript fetch on Node (identity_fp32)', async () => {
  const r = await run(process.execPath, [join(DIR, 'seed_client.mjs'), gw.url], { timeoutMs: 180_000 });
  if (r.code !== 0) throw new Error(`seed_client.mjs failed:\n${r.stderr}`);
  const ref = await identityRef();
  expect(ref.status).toBe(200);
  expect(JSON.parse(r.stdout)).toEqual(JSON.parse(ref.body.toString()));
}, 60_000);
