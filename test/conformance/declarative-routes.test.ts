// Declarative routes against real Triton (config/routes.example.yaml's routes plus a float32
// image): each answer must carry Triton's own answer (its HTTP frontend, binary-extension request)
// to the same tensors. Covers one base64 image field, an array of base64 images (a batch), numeric
// arrays, a text field, request parameters, the three response forms and the metadata check.
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { int32 } from '../support/int32';

const EXAMPLE = join(__dirname, '../../config/routes.example.yaml');
const EXTRA = JSON.stringify([
  { path: '/api/classify', model: 'classifier_fp32', inputs: { INPUT: { from: '/pixels', decode: 'base64' } }, response: { map: { PROBS: '/probabilities' } } },
  { path: '/api/broken', model: 'simple', inputs: { INPUT0: { from: '/a', decode: 'text' }, INPUTX: { from: '/x', decode: 'numbers' } }, response: { map: { NOPE: '/n' } } },
]);

let gw: RunningGateway;
beforeAll(async () => {
  // The example's routes come from the file; the flag's list replaces it (flags win), so both are given as one list.
  const { parse } = await import('yaml');
  const { readFileSync } = await import('node:fs');
  const example = (parse(readFileSync(EXAMPLE, 'utf8')) as { routes: unknown[] }).routes;
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--routes', JSON.stringify([...example, ...JSON.parse(EXTRA)])]);
});
afterAll(async () => {
  await gw?.close();
});

interface V2Output { name: string; datatype: string; shape: number[]; data: unknown[] }

async function triton(
  model: string, inputs: { name: string; datatype: string; shape: number[]; bytes: Buffer }[],
): Promise<{ raw: string; outputs: V2Output[] }> {
  const { body, headers } = binaryBody({
    inputs: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } })),
  }, ...inputs.map((t) => t.bytes));
  const r = await send(`http://${process.env.TRITON_HTTP!}/v2/models/${model}/infer`, { body, headers });
  expect(r.status).toBe(200);
  return { raw: r.body.toString(), outputs: (JSON.parse(r.body.toString()) as { outputs: V2Output[] }).outputs };
}

const post = async (path: string, body: unknown) => {
  const r = await send(`${gw.url}${path}`, { body: JSON.stringify(body) });
  return { status: r.status, json: JSON.parse(r.body.toString()) as Record<string, unknown>, text: r.body.toString() };
};

const image = (n: number, k: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * k + 7) & 0xff));

test('one base64 image field (UINT8 bytes), a request parameter, outputs mapped to pointers', async () => {
  const img = image(3000, 13);
  const ref = await triton('image_stats', [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 3000], bytes: img }]);
  const got = await post('/api/image-stats', { image: img.toString('base64'), request_id: 'abc-1' });
  expect(got.status).toBe(200);
  const by = (n: string) => ref.outputs.find((o) => o.name === n)!.data;
  expect(got.json).toEqual({ stats: { length: [by('LEN')], sum: [by('SUM')] } });
});

test('an array of base64 images (data: URIs) is a batch; v1 predictions, one per image', async () => {
  const a = image(2000, 3);
  const b = image(2000, 5);
  const ref = await triton('image_stats', [{ name: 'IMAGE', datatype: 'UINT8', shape: [2, 2000], bytes: Buffer.concat([a, b]) }]);
  const uri = (x: Buffer) => `data:application/octet-stream;base64,${x.toString('base64')}`;
  const got = await post('/api/image-stats/batch', { images: [uri(a), uri(b)] });
  expect(got.status).toBe(200);
  const out = (n: string, r: number) => [ref.outputs.find((o) => o.name === n)!.data[r]];
  expect(got.json).toEqual({ predictions: [0, 1].map((r) => ({ LEN: out('LEN', r), SUM: out('SUM', r) })) });
  const notUri = await post('/api/image-stats/batch', { images: [a.toString('base64')] });
  expect(notUri.status).toBe(400);
  expect(notUri.json.error).toBe('route /api/image-stats/batch: inputs.IMAGE: /images must be a data: URI with base64 content or a non-empty list of them (a batch)');
});

test('numeric arrays; response v2 is Triton\'s own JSON answer byte for byte', async () => {
  const a = Array.from({ length: 16 }, (_, i) => i * 3 - 20);
  const b = Array.from({ length: 16 }, (_, i) => 100 - i);
  const ref = await triton('simple', [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], bytes: int32(a) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], bytes: int32(b) },
  ]);
  const got = await post('/api/add-sub', { a, b });
  expect(got.status).toBe(200);
  expect(got.text).toBe(ref.raw);
  const missing = await post('/api/add-sub', { a });
  expect({ status: missing.status, json: missing.json }).toEqual({ status: 400, json: { error: 'route /api/add-sub: inputs.INPUT1.from: the body has no /b' } });
});

test('a text field (BYTES, UTF-8)', async () => {
  const text = 'héllo, wörld';
  const frame = Buffer.concat([Buffer.from(Uint32Array.of(Buffer.byteLength(text)).buffer), Buffer.from(text)]);
  const ref = await triton('blob_len', [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], bytes: frame }]);
  const got = await post('/api/text-length', { document: { text } });
  expect(got.status).toBe(200);
  expect(got.json).toEqual({ length: [ref.outputs[0]!.data] }); // nested by the output's shape [1, 1]
});

test('a base64 float32 image (raw little-endian bytes of one row)', async () => {
  const x = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < x.length; i++) x[i] = Math.fround(Math.sin(i) * 3);
  const bytes = Buffer.from(x.buffer);
  const ref = await triton('classifier_fp32', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], bytes }]);
  const got = await post('/api/classify', { pixels: bytes.toString('base64') });
  expect(got.status).toBe(200);
  expect(got.json).toEqual({ probabilities: [ref.outputs[0]!.data] });
});

test('a route that does not fit the model: 500 naming the route and every key', async () => {
  const got = await post('/api/broken', { a: 'x', x: [1] });
  expect(got.status).toBe(500);
  expect(got.json.error).toBe([
    "route /api/broken: inputs.INPUT0.decode: text fills BYTES inputs only; 'INPUT0' is INT32",
    "route /api/broken: inputs.INPUTX: model 'simple' has no input 'INPUTX' (inputs: INPUT0, INPUT1)",
    "route /api/broken: inputs: the model's input 'INPUT1' has no source",
    "route /api/broken: response.map.NOPE: model 'simple' has no output 'NOPE' (outputs: OUTPUT0, OUTPUT1)",
  ].join('; '));
});
