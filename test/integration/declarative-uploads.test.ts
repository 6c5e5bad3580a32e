// Declarative routes whose inputs come from multipart/form-data parts and from the raw body
// (docs/dialects.md "Declarative routes"), through the real gateway on the reference backend and
// sent by curl: one route takes a JSON field, a form's file part and an image body alike and
// answers them the same, the tensor holding the file's bytes exactly; parts fill several inputs
// and request parameters; every malformed body is a 400 (a form the route does not take 415)
// naming the problem with nothing sent upstream; a route whose keys are wrong stops the CLI at
// start-up with one line, exit 2. The answers against real Triton are in
// test/conformance/declarative-uploads.test.ts.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { RecordTap } from '../support/records';
import { CURL, needs } from '../support/tools';
import { int32 } from '../support/int32';
import { curl } from '../support/curl';

jest.setTimeout(30_000);

const BIN = join(__dirname, '../../bin/tensorgate');
/** A "JPEG" of every byte value: NULs, CRLFs, `--` runs, invalid UTF-8, over several 64 KiB chunks. */
const FILE = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i % 89 === 0 ? 0x2d : (i * 131 + (i >> 9)) & 0xff))),
  Buffer.from('\r\n--boundary--\r\n'),
]);
const ROUTES = [
  {
    path: '/api/echo', model: 'blob_echo',
    inputs: { BLOB: { from: '/image', decode: 'base64', part: 'file', body: ['image/*', 'application/octet-stream'] } },
    parameters: { client_tag: { from: '/tag', part: 'tag' } },
    response: { map: { ECHO: '/echo' } },
  },
  { path: '/api/add-sub', model: 'simple', inputs: { INPUT0: { part: 'a' }, INPUT1: { part: 'b' } }, response: 'v2' },
  { path: '/api/text-length', model: 'blob_len', inputs: { BLOB: { part: 'text' } }, parameters: { lang: { part: 'lang' } }, response: 'v1' },
  { path: '/api/stats', model: 'image_stats', inputs: { IMAGE: { body: '*/*' } }, response: { map: { LEN: '/length', SUM: '/sum' } } },
  { path: '/api/strings', model: 'simple_string', inputs: { INPUT0: { part: 'a' }, INPUT1: { part: 'b' } } },
];

let dir: string;
let cat: string;
let gw: RunningGateway;
const tap = new RecordTap();
/** The tests that run curl (a client we did not write). */
const withCurl = needs(CURL()).test;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tg-decl-uploads-'));
  cat = join(dir, 'cat.jpg');
  writeFileSync(cat, FILE);
  gw = await gatewayFor(['--demo', '--routes', JSON.stringify(ROUTES)]);
  tap.start();
});
afterAll(async () => {
  tap.stop();
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The echoed element of a `map` answer ({"echo": [[{"b64"}]]}, nested by ECHO's shape [1, 1]). */
const echoed = (body: Buffer): Buffer => Buffer.from((JSON.parse(body.toString()) as { echo: [[{ b64: string }]] }).echo[0][0].b64, 'base64');

/** Requests the reference backend has run for a model, good or failed (its statistics). */
async function executed(model: string): Promise<number> {
  const r = await send(`${gw.url}/v2/models/${model}/stats`);
  const s = (JSON.parse(r.body.toString()) as { model_stats: { inference_stats: { success: { count: number }; fail: { count: number } } }[] }).model_stats[0]!;
  return Number(s.inference_stats.success.count) + Number(s.inference_stats.fail.count);
}

const url = (path: string): string => `${gw.url}${path}`;

withCurl('one route, three clients: curl -F, curl --data-binary with an image type, and a JSON field all hold the file exactly', async () => {
  let mark = tap.mark();
  const form = await curl('-F', `file=@${cat};type=image/jpeg`, '-F', 'tag=t-1', url('/api/echo'));
  expect([form.status, echoed(form.body).equals(FILE)]).toEqual([200, true]);
  let rec = await tap.after(mark);
  expect([rec.route, rec.model, rec.encoding, rec.encodingOut]).toEqual(['declarative /api/echo', 'blob_echo', 'multipart', 'json']);
  expect(rec.ledger!.hops.decode.bytesCopied).toBe(FILE.length); // one copy, into the message

  mark = tap.mark();
  const raw = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', url('/api/echo'));
  expect([raw.status, echoed(raw.body).equals(FILE)]).toEqual([200, true]);
  rec = await tap.after(mark);
  expect([rec.route, rec.encoding]).toEqual(['declarative /api/echo', 'raw']);

  const octet = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: application/octet-stream', url('/api/echo'));
  expect([octet.status, echoed(octet.body).equals(FILE)]).toEqual([200, true]);

  writeFileSync(join(dir, 'body.json'), JSON.stringify({ image: FILE.toString('base64'), tag: 't-2' }));
  const json = await curl('-H', 'Content-Type: application/json', '--data-binary', `@${join(dir, 'body.json')}`, url('/api/echo'));
  expect(json.body.toString()).toBe(form.body.toString());
});

withCurl('over HTTP/2 as over HTTP/1.1', async () => {
  const form = await curl('--http2-prior-knowledge', '-F', `file=@${cat}`, url('/api/echo'));
  const raw = await curl('--http2-prior-knowledge', '--data-binary', `@${cat}`, '-H', 'Content-Type: image/png', url('/api/echo'));
  expect([form.status, echoed(form.body).equals(FILE), raw.status, echoed(raw.body).equals(FILE)]).toEqual([200, true, 200, true]);
});

withCurl('parts fill several inputs (raw INT32 rows); a text field fills a BYTES input, another is a parameter', async () => {
  const a = Array.from({ length: 16 }, (_, i) => i * 7 - 30);
  const b = Array.from({ length: 16 }, (_, i) => 1000 - i);
  writeFileSync(join(dir, 'a.bin'), int32(a));
  writeFileSync(join(dir, 'b.bin'), int32(b));
  const r = await curl('-F', `b=@${join(dir, 'b.bin')}`, '-F', `a=@${join(dir, 'a.bin')}`, url('/api/add-sub'));
  expect(r.status).toBe(200);
  const outputs = (JSON.parse(r.body.toString()) as { outputs: { name: string; shape: number[]; data: number[] }[] }).outputs;
  expect(outputs.map((o) => [o.name, o.shape, o.data])).toEqual([
    ['OUTPUT0', [1, 16], [...a].map((x, i) => x + b[i]!)],
    ['OUTPUT1', [1, 16], [...a].map((x, i) => x - b[i]!)],
  ]);

  const text = await curl('-F', 'text=héllo wörld', '-F', 'lang=fr', url('/api/text-length'));
  expect([text.status, JSON.parse(text.body.toString())]).toEqual([200, { predictions: [[Buffer.byteLength('héllo wörld')]] }]);
});

withCurl('a raw body of any non-JSON type to a */* route; its answer mapped', async () => {
  const sum = FILE.reduce((n, x) => n + x, 0);
  for (const type of ['image/webp', 'application/pdf', 'text/plain']) {
    const r = await curl('--data-binary', `@${cat}`, '-H', `Content-Type: ${type}`, url('/api/stats'));
    expect([r.status, JSON.parse(r.body.toString())]).toEqual([200, { length: [[FILE.length]], sum: [[sum]] }]);
  }
  // A chunked body (no Content-Length) is read whole, then framed.
  const chunked = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', '-H', 'Transfer-Encoding: chunked', url('/api/stats'));
  expect([chunked.status, JSON.parse(chunked.body.toString())]).toEqual([200, { length: [[FILE.length]], sum: [[sum]] }]);
});

withCurl('malformed bodies: 400 (415 for a form the route does not take) naming the problem, nothing sent upstream, the gateway keeps serving', async () => {
  const before = [await executed('blob_echo'), await executed('image_stats'), await executed('simple')];
  const B = 'XyZ';
  const mp = { 'Content-Type': `multipart/form-data; boundary=${B}` };
  const part = (name: string, data: string): string => `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="a"\r\n\r\n${data}\r\n`;
  const cases: [string, string, Record<string, string>, string, number, string, string][] = [
    ['cut inside a part', '/api/echo', mp, part('file', 'hello').slice(0, -2), 400, 'GW_ERR_DECODE_MULTIPART_INVALID',
      'the multipart/form-data body is malformed: Unexpected end of multipart data'],
    ['no boundary', '/api/echo', { 'Content-Type': 'multipart/form-data' }, `${part('file', 'x')}--${B}--\r\n`, 400, 'GW_ERR_DECODE_MULTIPART_INVALID',
      'the multipart/form-data body cannot be read: Multipart: Boundary not found'],
    ['a part the route does not name', '/api/echo', mp, `${part('image', 'x')}--${B}--\r\n`, 400, 'GW_ERR_DECODE_MULTIPART_INVALID',
      "route /api/echo takes no part 'image' (its parts: 'file', 'tag')"],
    ['an input without its part', '/api/add-sub', mp, `${part('a', 'x'.repeat(64))}--${B}--\r\n`, 400, 'GW_ERR_DECODE_MULTIPART_INVALID',
      "route /api/add-sub: inputs.INPUT1.part: the body has no part 'b'"],
    ['the same part twice', '/api/echo', mp, `${part('file', 'x')}${part('file', 'y')}--${B}--\r\n`, 400, 'GW_ERR_DECODE_MULTIPART_INVALID',
      "the multipart/form-data body gives input 'BLOB' twice (part 'file')"],
    ['a JSON body to a raw-only route', '/api/stats', { 'Content-Type': 'application/json' }, '{"image": "AAAA"}', 415, 'GW_ERR_DECODE_ROUTE_INVALID',
      'route /api/stats takes a body of type */*, not a body of type application/json'],
    ['an image to a multipart-only route', '/api/add-sub', { 'Content-Type': 'image/jpeg' }, 'x', 415, 'GW_ERR_DECODE_ROUTE_INVALID',
      'route /api/add-sub takes multipart/form-data (parts: a, b), not a body of type image/jpeg'],
    ['a JSON body without the field', '/api/echo', { 'Content-Type': 'application/json' }, '{"picture": "AAAA"}', 400, 'GW_ERR_DECODE_ROUTE_INVALID',
      'route /api/echo: inputs.BLOB.from: the body has no /image'],
  ];
  for (const [name, path, headers, body, status, code, error] of cases) {
    const r = await send(url(path), { body, headers });
    expect([name, r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([name, status, code, { error }]);
  }
  expect([await executed('blob_echo'), await executed('image_stats'), await executed('simple')]).toEqual(before);
  const ok = await curl('-F', `file=@${cat}`, url('/api/echo'));
  expect(ok.status).toBe(200);
});

withCurl('a route whose parts cannot become its model\'s tensors (BYTES of dims [16]): 500 naming the route and keys, before the body is read', async () => {
  const before = await executed('simple_string');
  const r = await curl('-F', 'a=x', '-F', 'b=y', url('/api/strings'));
  expect([r.status, JSON.parse(r.body.toString())]).toEqual([500, { error: [
    "route /api/strings: inputs.INPUT0.part: a part fills it as a raw request does, and for BYTE datatype raw input 'INPUT0', the model must have input shape [1]",
    "route /api/strings: inputs.INPUT1.part: a part fills it as a raw request does, and for BYTE datatype raw input 'INPUT1', the model must have input shape [1]",
  ].join('; ') }]);
  expect(await executed('simple_string')).toBe(before);
});

withCurl('limits: a part over limits.maxInputSizeBytes, a raw body over it, a body over limits.maxBodyBytes; refused before anything goes upstream', async () => {
  const small = await gatewayFor(['--demo', '--routes', JSON.stringify(ROUTES), '--max-input-size', '100000', '--discard-body-ms', '300']);
  try {
    const before = await send(`${small.url}/v2/models/blob_echo/stats`);
    const form = await curl('-F', `file=@${cat}`, `${small.url}/api/echo`);
    expect([form.status, JSON.parse(form.body.toString())]).toEqual([400, { error: "the part 'file' is larger than 100000 bytes (limits.maxInputSizeBytes)" }]);
    const raw = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', `${small.url}/api/echo`);
    expect(raw.status).toBe(400);
    expect(JSON.parse(raw.body.toString()).error).toMatch(/exceeds the maximum allowed (value|input size) of 100000 bytes/);
    const after = await send(`${small.url}/v2/models/blob_echo/stats`);
    expect(after.body.toString()).toBe(before.body.toString());
  } finally {
    await small.close();
  }
  const tight = await gatewayFor(['--demo', '--routes', JSON.stringify(ROUTES), '--max-body-size', '100000', '--discard-body-ms', '300']);
  try {
    const form = await curl('-F', `file=@${cat}`, `${tight.url}/api/echo`);
    expect(form.status).toBe(413);
    expect(JSON.parse(form.body.toString()).error).toMatch(/^request body of \d+ bytes exceeds the limit of 100000 bytes \(limits.maxBodyBytes\)$/);
  } finally {
    await tight.close();
  }
});

test('start-up: a route whose keys are wrong is one line naming the key, exit 2', () => {
  const routes = JSON.stringify([{ path: '/api/x', model: 'blob_echo', inputs: { BLOB: { part: 'file', body: 'application/json' } }, parameters: { tag: '/tag' } }]);
  const r = spawnSync(BIN, ['--backend', '127.0.0.1:1', '--port', '0', '--routes', routes], { encoding: 'utf8', timeout: 20_000 });
  expect({ status: r.status, stdout: r.stdout, stderr: r.stderr.split('\n').filter((l) => l !== '') }).toEqual({
    status: 2, stdout: '', stderr: [
      'tensorgate: routes[0].inputs.BLOB.body: a raw body is not JSON, form-urlencoded or multipart; got "application/json" (a JSON body is read with from, a multipart one with part) (--routes)',
      'tensorgate: routes[0].parameters.tag: is a JSON Pointer, and the route takes no JSON body (its inputs have no from) (--routes)',
    ],
  });
});
