// TF-Serving / KServe-V1 predict against real Triton: each answer must be Triton's own V2 answer
// (its HTTP frontend, binary-extension request) reshaped as TF-Serving would — predictions split
// on dim 0 (bare rows for one output, objects by name for several), columnar `outputs` as is —
// and a TF-Serving-style Python client (requests, {"instances": [{"b64": …}]}) must run.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { tritonVenv } from '../support/triton';
import { int32 } from '../support/int32';

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

interface V2Output { name: string; shape: number[]; data: unknown[] }

/** Triton's own answer to the same tensors (binary extension in, JSON out). */
async function tritonAnswer(model: string, inputs: { name: string; datatype: string; shape: number[]; bytes: Buffer }[]): Promise<V2Output[]> {
  const { body, headers } = binaryBody({
    inputs: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } })),
  }, ...inputs.map((t) => t.bytes));
  const r = await send(`http://${process.env.TRITON_HTTP!}/v2/models/${model}/infer`, { body, headers });
  expect(r.status).toBe(200);
  return (JSON.parse(r.body.toString()) as { outputs: V2Output[] }).outputs;
}

function nest(flat: unknown[], shape: number[]): unknown {
  if (shape.length === 0) return flat[0];
  const [d, ...rest] = shape as [number, ...number[]];
  const step = rest.reduce((a, b) => a * b, 1);
  return Array.from({ length: d }, (_, i) => nest(flat.slice(i * step, (i + 1) * step), rest));
}

/** TF-Serving's row answer from V2 outputs. */
function predictions(outputs: V2Output[]): unknown[] {
  const rows = outputs[0]!.shape[0]!;
  const row = (o: V2Output, r: number): unknown => {
    const rest = o.shape.slice(1);
    const n = rest.reduce((a, b) => a * b, 1);
    return nest(o.data.slice(r * n, (r + 1) * n), rest);
  };
  return Array.from({ length: rows }, (_, r) => (outputs.length === 1 ? row(outputs[0]!, r) : Object.fromEntries(outputs.map((o) => [o.name, row(o, r)]))));
}

const predict = async (model: string, body: unknown): Promise<unknown> => {
  const r = await send(`${gw.url}/v1/models/${model}:predict`, { body: JSON.stringify(body) });
  expect(r.status).toBe(200);
  return JSON.parse(r.body.toString());
};

test('identity_uint8_2mib: two 2 MiB {"b64"} rows (sent from where they were decoded) come back whole', async () => {
  const rows = [0, 1].map((r) => Buffer.from(Array.from({ length: 2 << 20 }, (_, i) => (i * 7 + r * 101 + (i >> 10)) & 0xff)));
  const answer = await predict('identity_uint8_2mib', { instances: rows.map((b) => ({ b64: b.toString('base64') })) }) as { predictions: number[][] };
  expect(answer.predictions.map((p, r) => Buffer.from(p).equals(rows[r]!))).toEqual([true, true]);
  // 4 MiB each way, the answer as 4 Mi JSON numbers (about 15 MB) built, printed and parsed: past
  // jest's default 5 s on a busy 2-core machine (a fresh-clone CI run beside a busy loop took longer).
}, 60_000);

test('image_stats: rows of {"b64"} images', async () => {
  const a = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 13) & 0xff));
  const b = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 17 + 3) & 0xff));
  const expected = await tritonAnswer('image_stats', [{ name: 'IMAGE', datatype: 'UINT8', shape: [2, 5000], bytes: Buffer.concat([a, b]) }]);
  expect(await predict('image_stats', { instances: [{ b64: a.toString('base64') }, { b64: b.toString('base64') }] }))
    .toEqual({ predictions: predictions(expected) });
});

test('blob_len: a {"b64"} value is one BYTES element; text values too', async () => {
  const blob = Buffer.from([0, 0xff, 0x80, 0x41]);
  const frame = (x: Buffer) => Buffer.concat([Buffer.from(Uint32Array.of(x.length).buffer), x]);
  const expected = await tritonAnswer('blob_len', [{ name: 'BLOB', datatype: 'BYTES', shape: [2, 1], bytes: Buffer.concat([frame(blob), frame(Buffer.from('héllo'))]) }]);
  expect(await predict('blob_len', { instances: [{ b64: blob.toString('base64') }, 'héllo'] })).toEqual({ predictions: predictions(expected) });
});

test('classifier_fp32: nested rows and a {"b64"} row of float32 bytes', async () => {
  const x = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < x.length; i++) x[i] = Math.fround(Math.cos(i) * 2);
  const expected = await tritonAnswer('classifier_fp32', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], bytes: Buffer.from(x.buffer) }]);
  const want = { predictions: predictions(expected) };
  expect(await predict('classifier_fp32', { instances: [{ b64: Buffer.from(x.buffer).toString('base64') }] })).toEqual(want);
  expect(await predict('classifier_fp32', { instances: [nest(Array.from(x), [3, 224, 224])] })).toEqual(want);
});

test('simple: rows keyed by input name, and the columnar form', async () => {
  const a = Array.from({ length: 16 }, (_, i) => i * 3 - 20);
  const b = Array.from({ length: 16 }, (_, i) => 100 - i);
  const expected = await tritonAnswer('simple', [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], bytes: int32(a) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], bytes: int32(b) },
  ]);
  expect(await predict('simple', { instances: [{ INPUT0: a, INPUT1: b }] })).toEqual({ predictions: predictions(expected) });
  expect(await predict('simple', { inputs: { INPUT0: [a], INPUT1: [b] } }))
    .toEqual({ outputs: Object.fromEntries(expected.map((o) => [o.name, nest(o.data, o.shape)])) });
});

test('status and errors', async () => {
  const s = await send(`${gw.url}/v1/models/simple`);
  expect(JSON.parse(s.body.toString())).toEqual({ model_version_status: [{ version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } }] });
  const e = await send(`${gw.url}/v1/models/simple:predict`, { body: '{"instances":[{"INPUT0":[1]}]}' });
  expect(e.status).toBe(400);
  expect(JSON.parse(e.body.toString())).toEqual({ error: "instance without input 'INPUT1'" });
  const nf = await send(`${gw.url}/v1/models/nope:predict`, { body: '{"instances":[1]}' });
  expect(nf.status).toBe(404);
  expect(Object.keys(JSON.parse(nf.body.toString()))).toEqual(['error']);
});

test('a TF-Serving-style Python client (requests, {"instances": [{"b64": …}]}) runs against tensorgate', async () => {
  const python = join(tritonVenv(), 'bin', 'python');
  const run = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(python, [join(__dirname, 'v1_legacy_client.py'), '--gateway', new URL(gw.url).host], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? 1 : 0, out: `${stdout}\n${stderr}` });
    });
  });
  expect(run.out).toContain('"ok": true');
  expect(run.code).toBe(0);
}, 120_000);
