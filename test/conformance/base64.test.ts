// Base64 forms against real Triton: for the same tensors, a base64 request to tensorgate must get
// the answer Triton's own HTTP frontend gives to the binary extension (JSON outputs, byte for
// byte), and base64 outputs must hold the bytes Triton sends as binary outputs.
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { int32 } from '../support/int32';

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

const triton = (path: string): string => `http://${process.env.TRITON_HTTP!}${path}`;
const NO_GZIP = { 'Accept-Encoding': 'identity' };

interface TensorCase {
  name: string;
  datatype: string;
  shape: number[];
  bytes: Buffer;
  /** BYTES: the elements (framed into bytes for the binary form). */
  elements?: Buffer[];
}

function framed(elements: Buffer[]): Buffer {
  return Buffer.concat(elements.flatMap((e) => [Buffer.from(Uint32Array.of(e.length).buffer), e]));
}

/** The binary-extension request Triton gets and the base64 forms tensorgate gets, same tensors. */
async function compare(model: string, tensors: TensorCase[], b64Forms: ((t: TensorCase) => Record<string, unknown>)[]): Promise<void> {
  const reference = binaryBody({
    inputs: tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } })),
  }, ...tensors.map((t) => t.bytes));
  const expected = await send(triton(`/v2/models/${model}/infer`), { body: reference.body, headers: { ...reference.headers, ...NO_GZIP } });
  expect(expected.status).toBe(200);
  for (const form of b64Forms) {
    const body = JSON.stringify({ inputs: tensors.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, ...form(t) })) });
    const got = await send(`${gw.url}/v2/models/${model}/infer`, { body, headers: NO_GZIP });
    expect({ status: got.status, body: got.body.toString() }).toEqual({ status: 200, body: expected.body.toString() });
  }
}

const numericForms = [
  (t: TensorCase) => ({ data: t.bytes.toString('base64') }),
  (t: TensorCase) => ({ data: { b64: t.bytes.toString('base64url') } }),
  (t: TensorCase) => ({ data: `data:application/octet-stream;base64,${t.bytes.toString('base64').replace(/.{76}/g, '$&\n')}` }),
];
const bytesForms = [
  (t: TensorCase) => ({ data: t.elements!.map((e) => ({ b64: e.toString('base64') })) }),
  (t: TensorCase) => ({ parameters: { content_type: 'base64' }, data: t.elements!.map((e) => e.toString('base64url')) }),
];

test('simple (INT32): base64 numeric forms = binary extension', async () => {
  const a = int32(Array.from({ length: 16 }, (_, i) => i * 1000 - 7));
  const b = int32(Array.from({ length: 16 }, (_, i) => -i));
  await compare('simple', [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], bytes: a },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], bytes: b },
  ], numericForms);
});

test('image_stats (UINT8 image, 300 KB): base64 = binary extension', async () => {
  const img = Buffer.alloc(300_000);
  for (let i = 0; i < img.length; i++) img[i] = (i * 131 + 7) & 0xff;
  await compare('image_stats', [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, img.length], bytes: img }], numericForms);
});

test('classifier_fp32 (FP32 [1,3,224,224]): base64 = binary extension', async () => {
  const x = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i) * 3.5;
  await compare('classifier_fp32', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], bytes: Buffer.from(x.buffer) }], numericForms);
});

test('blob_len (BYTES): {"b64"} elements and content_type base64 = binary extension', async () => {
  const blob = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 0x22, 0x5c]);
  await compare('blob_len', [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], bytes: framed([blob]), elements: [blob] }], bytesForms);
});

test('base64 outputs hold the bytes Triton sends as binary outputs', async () => {
  const x = new Float32Array([0.1, -2.5, 3e38, Number.NaN]);
  const input = { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } };
  const ref = binaryBody({ inputs: [input], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }, Buffer.from(x.buffer));
  const expected = await send(triton('/v2/models/identity_fp32/infer'), { body: ref.body, headers: { ...ref.headers, ...NO_GZIP } });
  const h = Number(expected.headers['inference-header-content-length']);
  const got = await send(`${gw.url}/v2/models/identity_fp32/infer`, {
    body: JSON.stringify({ parameters: { output_content_type: 'base64' }, inputs: [{ ...input, parameters: undefined, data: Buffer.from(x.buffer).toString('base64') }] }),
    headers: NO_GZIP,
  });
  expect(got.status).toBe(200);
  const out = JSON.parse(got.body.toString()).outputs[0];
  expect(out.parameters).toEqual({ content_type: 'base64' });
  expect(Buffer.from(out.data, 'base64')).toEqual(expected.body.subarray(h));
});

test('FP16 in JSON through base64 (Triton refuses FP16 JSON data)', async () => {
  const h = Buffer.from(Uint16Array.of(0x3c00, 0xc000, 0x7bff).buffer); // 1, -2, 65504
  const r = await send(`${gw.url}/v2/models/identity_fp16/infer`, {
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 3], data: h.toString('base64') }], outputs: [{ name: 'OUTPUT0', parameters: { content_type: 'base64' } }] }),
    headers: NO_GZIP,
  });
  expect(r.status).toBe(200);
  expect(JSON.parse(r.body.toString()).outputs[0].data).toBe(h.toString('base64'));
});

test('identity_uint8, 3 MiB as one base64 string (sent from where it was decoded) = binary extension, byte for byte', async () => {
  const bytes = Buffer.from(Array.from({ length: 3 << 20 }, (_, i) => (i * 31 + (i >> 12)) & 0xff));
  const outputs = [{ name: 'OUTPUT0', parameters: { binary_data: true } }];
  const reference = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, bytes.length], parameters: { binary_data_size: bytes.length } }], outputs }, bytes);
  const expected = await send(triton('/v2/models/identity_uint8/infer'), { body: reference.body, headers: { ...reference.headers, ...NO_GZIP } });
  const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, bytes.length], data: bytes.toString('base64') }], outputs });
  const got = await send(`${gw.url}/v2/models/identity_uint8/infer`, { body, headers: NO_GZIP });
  expect([got.status, expected.status]).toEqual([200, 200]);
  const binaryOf = (r: typeof got): Buffer => r.body.subarray(Number(r.headers['inference-header-content-length']));
  expect(binaryOf(expected).equals(bytes)).toBe(true);
  expect(binaryOf(got).equals(bytes)).toBe(true);
  const headerOf = (r: typeof got): unknown => JSON.parse(r.body.subarray(0, Number(r.headers['inference-header-content-length'])).toString());
  expect(headerOf(got)).toEqual(headerOf(expected));
});
