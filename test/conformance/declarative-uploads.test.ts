// Declarative routes whose inputs come from multipart/form-data parts and from the raw body
// (docs/dialects.md "Declarative routes"), against real Triton, sent by clients we did not write:
// `curl -F`, `curl --data-binary` with a Content-Type, and Python requests (files= and data=).
// The tensor Triton's model received must be the file, byte for byte (blob_echo answers it back);
// answers must be Triton's own to the same tensors (its HTTP frontend, binary-extension request);
// a malformed body must reach Triton not at all.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { tritonVenv } from '../support/triton';
import { CURL, needsFile } from '../support/tools';
import { int32 } from '../support/int32';
import { curl } from '../support/curl';
import { run } from '../support/run';

needsFile(CURL()); // curl, and Python requests

/** A 200 KiB "JPEG": the JPEG magic, then every byte value (NULs, CRLFs, `--` runs, invalid UTF-8). */
const FILE = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  Buffer.from(Array.from({ length: 200 * 1024 }, (_, i) => (i % 97 === 0 ? 0x2d : (i * 131 + (i >> 8)) & 0xff))),
  Buffer.from('\r\n--\r\n------WebKitFormBoundary\r\n'),
]);
const ROUTES = [
  {
    path: '/api/echo', model: 'blob_echo',
    inputs: { BLOB: { from: '/image', decode: 'base64', part: 'file', body: ['image/*', 'application/octet-stream'] } },
    parameters: { client_tag: { from: '/tag', part: 'tag' } },
    response: { map: { ECHO: '/echo' } },
  },
  { path: '/api/stats', model: 'image_stats', inputs: { IMAGE: { part: 'image', body: '*/*' } }, response: 'v2' },
  { path: '/api/add-sub', model: 'simple', inputs: { INPUT0: { part: 'a' }, INPUT1: { part: 'b' } }, response: 'v2' },
  { path: '/api/text-length', model: 'blob_len', inputs: { BLOB: { part: 'text' } }, parameters: { lang: { part: 'lang' } }, response: { map: { LEN: '/length' } } },
];

/** config/routes.example.yaml's upload route, which docs/dialects.md's curl lines call. */
const EXAMPLE = join(__dirname, '../../config/routes.example.yaml');

let gw: RunningGateway;
let dir: string;
let cat: string;
/** The Python client's run: 60 s, 16 MiB of output. */
const UPLOADER = { timeoutMs: 60_000, maxBufferBytes: 16 << 20 };

beforeAll(async () => {
  const { parse } = await import('yaml');
  const example = (parse(readFileSync(EXAMPLE, 'utf8')) as { routes: { path: string }[] }).routes.filter((r) => r.path === '/api/upload');
  expect(example).toHaveLength(1);
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--routes', JSON.stringify([...ROUTES, ...example])]);
  dir = mkdtempSync(join(tmpdir(), 'tg-decl-uploads-'));
  cat = join(dir, 'cat.jpg');
  writeFileSync(cat, FILE);
});
afterAll(async () => {
  await gw?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const url = (path: string): string => `${gw.url}${path}`;

/** Triton's own answer to a binary-extension request of these tensors (its HTTP frontend). */
async function triton(model: string, inputs: { name: string; datatype: string; shape: number[]; bytes: Buffer }[], binaryOutputs = false): Promise<Buffer> {
  const { body, headers } = binaryBody({
    inputs: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } })),
    ...binaryOutputs ? { parameters: { binary_data_output: true } } : {},
  }, ...inputs.map((t) => t.bytes));
  const r = await send(`http://${process.env.TRITON_HTTP!}/v2/models/${model}/infer`, { body, headers });
  expect(r.status).toBe(200);
  return r.body;
}

/** BYTES element framing: its 4-byte little-endian length, then the bytes. */
const element = (b: Buffer): Buffer => Buffer.concat([Buffer.from(Uint32Array.of(b.length).buffer), b]);

/** The echoed element of the route's `map` answer ({"echo": [[{"b64"}]]}, nested by ECHO's shape [1, 1]). */
const echoed = (body: Buffer): Buffer => Buffer.from((JSON.parse(body.toString()) as { echo: [[{ b64: string }]] }).echo[0][0].b64, 'base64');

/** Requests Triton has run for a model, good or failed (its own statistics). */
async function executed(model: string): Promise<number> {
  const r = await send(`http://${process.env.TRITON_HTTP!}/v2/models/${model}/stats`);
  const s = (JSON.parse(r.body.toString()) as { model_stats: { inference_stats: { success: { count: number }; fail: { count: number } } }[] }).model_stats;
  return s.reduce((n, m) => n + m.inference_stats.success.count + m.inference_stats.fail.count, 0);
}

test('curl -F file=@cat.jpg and curl --data-binary @cat.jpg -H \'Content-Type: image/jpeg\': the BYTES tensor Triton received is the file exactly', async () => {
  // Triton's own reading of the file as one BYTES element, echoed back: the reference.
  const ref = await triton('blob_echo', [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], bytes: element(FILE) }], true);
  expect(ref.subarray(ref.length - FILE.length - 4).equals(element(FILE))).toBe(true);

  const form = await curl('-F', `file=@${cat};type=image/jpeg`, '-F', 'tag=cat-1', url('/api/echo'));
  expect(form.status).toBe(200);
  expect(echoed(form.body).equals(FILE)).toBe(true);

  const raw = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', url('/api/echo'));
  expect(raw.status).toBe(200);
  expect(echoed(raw.body).equals(FILE)).toBe(true);

  // The same route's JSON field gives the same answer.
  writeFileSync(join(dir, 'body.json'), JSON.stringify({ image: FILE.toString('base64'), tag: 'cat-2' }));
  const json = await curl('-H', 'Content-Type: application/json', '--data-binary', `@${join(dir, 'body.json')}`, url('/api/echo'));
  expect(json.body.toString()).toBe(form.body.toString());
});

test('Python requests: files= with a data= text field, and data= with an image type, reach blob_echo whole', async () => {
  const script = `
import base64, json, sys, requests
url, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
out = {}
def echoed(r):
    return base64.b64decode(r.json()['echo'][0][0]['b64'])
r = requests.post(url, files={'file': ('cat.jpg', open(path, 'rb'), 'image/jpeg')}, data={'tag': 'py-1'})
out['multipart'] = [r.status_code, echoed(r) == data]
r = requests.post(url, data=open(path, 'rb'), headers={'Content-Type': 'image/jpeg'})
out['raw'] = [r.status_code, echoed(r) == data]
r = requests.post(url, files={'picture': open(path, 'rb')})
out['unknown_part'] = [r.status_code, r.json()]
print(json.dumps(out))
`;
  const r = await run(join(tritonVenv(), 'bin', 'python'), ['-c', script, url('/api/echo'), cat], UPLOADER);
  expect(r.stderr).toBe('');
  expect(JSON.parse(r.stdout)).toEqual({
    multipart: [200, true], raw: [200, true],
    unknown_part: [400, { error: "route /api/echo takes no part 'picture' (its parts: 'file', 'tag')" }],
  });
});

test('a UINT8 input from a part or the raw body of any type: Triton\'s own JSON answer, byte for byte', async () => {
  const ref = (await triton('image_stats', [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, FILE.length], bytes: FILE }])).toString();
  expect(JSON.parse(ref).outputs[0].data).toEqual([FILE.length]);
  for (const args of [['-F', `image=@${cat}`], ['--data-binary', `@${cat}`, '-H', 'Content-Type: image/png'], ['--data-binary', `@${cat}`, '-H', 'Content-Type: application/pdf']]) {
    const r = await curl(...args, url('/api/stats'));
    expect([r.status, r.body.toString()]).toEqual([200, ref]);
  }
});

test('parts fill several inputs (INT32 rows as files); Triton\'s own JSON answer, byte for byte', async () => {
  const a = int32(Array.from({ length: 16 }, (_, i) => i * 3 - 20));
  const b = int32(Array.from({ length: 16 }, (_, i) => 100 - i));
  writeFileSync(join(dir, 'a.bin'), a);
  writeFileSync(join(dir, 'b.bin'), b);
  const ref = await triton('simple', [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], bytes: a }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], bytes: b }]);
  const r = await curl('-F', `a=@${join(dir, 'a.bin')}`, '-F', `b=@${join(dir, 'b.bin')}`, url('/api/add-sub'));
  expect([r.status, r.body.toString()]).toEqual([200, ref.toString()]);
});

test('a text field fills a BYTES input (UTF-8), another is a request parameter Triton accepts', async () => {
  const text = 'héllo, wörld';
  const ref = JSON.parse((await triton('blob_len', [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], bytes: element(Buffer.from(text)) }])).toString()) as {
    outputs: { data: number[] }[];
  };
  const r = await curl('-F', `text=${text}`, '-F', 'lang=fr', url('/api/text-length'));
  expect([r.status, JSON.parse(r.body.toString())]).toEqual([200, { length: [ref.outputs[0]!.data] }]);
});

test('the example\'s /api/upload as docs/dialects.md calls it: curl -F with a text field, --data-binary, curl -d JSON', async () => {
  writeFileSync(join(dir, 'upload.json'), JSON.stringify({ image: FILE.toString('base64'), locale: 'fr' }));
  const answers = [
    await curl('-F', `image=@${cat}`, '-F', 'locale=fr', url('/api/upload')),
    await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', url('/api/upload')),
    await curl('-d', `@${join(dir, 'upload.json')}`, url('/api/upload')),
  ];
  expect(answers.map((r) => [r.status, JSON.parse(r.body.toString())])).toEqual(Array(3).fill([200, { bytes: [[FILE.length]] }]));
});

test('malformed bodies: 400 naming the problem, nothing reaches Triton, the gateway keeps serving', async () => {
  const before = await executed('blob_echo') + await executed('simple') + await executed('image_stats');
  const B = 'XyZ';
  const mp = { 'Content-Type': `multipart/form-data; boundary=${B}` };
  const part = (name: string, data: string): string => `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="a"\r\n\r\n${data}\r\n`;
  const cases: [string, Record<string, string>, string, number, string][] = [
    ['/api/echo', mp, part('file', 'hello').slice(0, -2), 400, 'the multipart/form-data body is malformed: Unexpected end of multipart data'],
    ['/api/echo', { 'Content-Type': 'multipart/form-data' }, `${part('file', 'x')}--${B}--\r\n`, 400, 'the multipart/form-data body cannot be read: Multipart: Boundary not found'],
    ['/api/add-sub', mp, `${part('a', 'x'.repeat(64))}--${B}--\r\n`, 400, "route /api/add-sub: inputs.INPUT1.part: the body has no part 'b'"],
    ['/api/echo', mp, `${part('tag', 'x')}--${B}--\r\n`, 400, "route /api/echo: the part 'tag' is the request parameter 'client_tag': send it as a text field, not a file"],
    ['/api/add-sub', { 'Content-Type': 'image/jpeg' }, 'x', 415, 'route /api/add-sub takes multipart/form-data (parts: a, b), not a body of type image/jpeg'],
  ];
  for (const [path, headers, body, status, error] of cases) {
    const r = await send(url(path), { body, headers });
    expect([r.status, JSON.parse(r.body.toString())]).toEqual([status, { error }]);
  }
  expect(await executed('blob_echo') + await executed('simple') + await executed('image_stats')).toBe(before);
  const ok = await curl('-F', `file=@${cat}`, url('/api/echo'));
  expect([ok.status, echoed(ok.body).equals(FILE)]).toEqual([200, true]);
});
