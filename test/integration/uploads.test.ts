// Uploads and TorchServe's routes through the real gateway on the reference backend: off by
// default, over HTTP/2 (curl --http2-prior-knowledge) as over HTTP/1.1, behind the same auth
// (the model actually called is the one authorised), limits and telemetry as V2 infer. The
// answers against real Triton are in test/conformance/uploads.test.ts.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, gatewayForSuite } from '../support/gateway';
import { send } from '../support/http';
import { RecordTap } from '../support/records';
import { CURL, needs } from '../support/tools';
import { curl, type CurlAnswer } from '../support/curl';

const FILE = Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 131 + (i >> 9)) & 0xff));
let dir: string;
let cat: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-uploads-it-'));
  cat = join(dir, 'cat.jpg');
  writeFileSync(cat, FILE);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The one BYTES element after a binary answer's JSON header. */
function element(r: CurlAnswer): Buffer {
  const length = Number(r.headers['inference-header-content-length']);
  return r.body.subarray(length + 4);
}

describe('TorchServe routes are off by default', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
  });
  afterAll(() => gw.close());

  test.each([['GET', '/ping'], ['POST', '/predictions/blob_echo'], ['GET', '/models']])('%s %s is 404', async (method, path) => {
    const r = await send(`${gw.url}${path}`, { method, body: method === 'POST' ? 'x' : undefined });
    expect([r.status, r.body.toString()]).toEqual([404, '{"error":"Not Found"}']);
  });
});

needs(CURL()).describe('uploads and TorchServe over HTTP/1.1 and HTTP/2', () => {
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo', '--torchserve'], tap);

  test.each([['HTTP/1.1', '--http1.1'], ['HTTP/2', '--http2-prior-knowledge']])('%s: raw, multipart and TorchServe uploads hold the file exactly', async (_name, version) => {
    const v2 = `${gw.url}/v2/models/blob_echo/infer`;
    let mark = tap.mark();
    const raw = await curl(version, '--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', v2);
    expect([raw.status, element(raw).equals(FILE)]).toEqual([200, true]);
    let rec = await tap.after(mark);
    expect([rec.route, rec.encoding, rec.model, rec.protocol]).toEqual(['infer', 'raw', 'blob_echo', version === '--http1.1' ? '1.1' : '2']);

    mark = tap.mark();
    const form = await curl(version, '-F', `file=@${cat}`, '-F', 'binary_data_output=true', v2);
    expect([form.status, element(form).equals(FILE)]).toEqual([200, true]);
    rec = await tap.after(mark);
    expect([rec.route, rec.encoding]).toEqual(['infer', 'multipart']);
    expect(rec.ledger!.hops.decode.bytesCopied).toBe(FILE.length); // one copy, into the message

    mark = tap.mark();
    const ts = await curl(version, `${gw.url}/predictions/blob_echo`, '-T', cat);
    expect([ts.status, ts.type, ts.body.equals(FILE)]).toEqual([200, 'application/octet-stream', true]);
    rec = await tap.after(mark);
    expect([rec.route, rec.encoding, rec.model]).toEqual(['torchserve_predictions', 'raw', 'blob_echo']);

    const data = await curl(version, '-X', 'POST', `${gw.url}/predictions/blob_len`, '-F', `data=@${cat}`);
    expect([data.status, data.type, data.body.toString()]).toEqual([200, 'application/json', `[${FILE.length}]`]);
  });

  test('limits: a multipart body over limits.maxBodyBytes is refused before it is read, in TorchServe\'s shape on its route', async () => {
    const small = await gatewayFor(['--demo', '--torchserve', '--max-body-size', '100000', '--discard-body-ms', '300']);
    try {
      const v2 = await curl('-F', `BLOB=@${cat}`, `${small.url}/v2/models/blob_echo/infer`);
      expect(v2.status).toBe(413);
      expect(JSON.parse(v2.body.toString()).error).toMatch(/^request body of \d+ bytes exceeds the limit of 100000 bytes \(limits.maxBodyBytes\)$/);
      const ts = await curl('-F', `data=@${cat}`, `${small.url}/predictions/blob_echo`);
      expect(ts.status).toBe(413);
      expect(JSON.parse(ts.body.toString())).toMatchObject({ code: 413, type: 'BadRequestException' });
    } finally {
      await small.close();
    }
  });
});

needs(CURL()).describe('auth: the model a TorchServe route calls is the one authorised', () => {
  const SIMPLE = 'simple_only_0123456789abcdef';
  const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
  let gw: RunningGateway;
  beforeAll(async () => {
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, `keys:\n  - { id: simple-only, token: "${sha(SIMPLE)}", groups: [inference, metadata, health], models: [simple] }\n`);
    gw = await gatewayFor(['--demo', '--torchserve', '--auth', '--auth-keys-file', keys, '--auth-open', 'none', '--discard-body-ms', '300']);
  });
  afterAll(() => gw.close());

  test('401 without credentials; 403 for another model, and for the listing of every model; through for its own', async () => {
    const h = { Authorization: `Bearer ${SIMPLE}` };
    expect((await send(`${gw.url}/predictions/blob_echo`, { body: 'x' })).status).toBe(401);
    const other = await send(`${gw.url}/predictions/blob_echo`, { body: 'x', headers: h });
    // In TorchServe's shape, as every error of its routes once matched (Route.errorShape).
    expect([other.status, JSON.parse(other.body.toString())]).toEqual([403, { code: 403, type: 'InvalidKeyException', message: "'simple-only' may not call model 'blob_echo'" }]);
    const multipart = await curl('-H', `Authorization: Bearer ${SIMPLE}`, '-F', `data=@${cat}`, `${gw.url}/predictions/blob_len/1`);
    expect(multipart.status).toBe(403);
    const list = await send(`${gw.url}/models`, { headers: h });
    expect([list.status, JSON.parse(list.body.toString())]).toEqual([403, { code: 403, type: 'InvalidKeyException', message: "'simple-only' may not make a call that applies to every model" }]);
    expect((await send(`${gw.url}/ping`, { headers: h })).status).toBe(200);
    // Its own model is called (and refused by the raw deduction: simple has two inputs).
    const own = await send(`${gw.url}/predictions/simple`, { body: 'x', headers: h });
    expect(JSON.parse(own.body.toString())).toMatchObject({ code: 400, type: 'BadRequestException' });
  });
});
