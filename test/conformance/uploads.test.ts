// Uploads and TorchServe's inference API against real Triton, sent by clients we did not write:
// curl (`--data-binary` with an image type, `-F`, `-T`, TorchServe's documented lines) and Python
// requests. The tensor Triton's model (blob_echo) received must be the file, byte for byte; every
// malformed multipart body must be refused with a 400 before anything reaches Triton.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { tritonVenv } from '../support/triton';
import { CURL, needsFile } from '../support/tools';
import { curl, type CurlAnswer } from '../support/curl';
import { run } from '../support/run';

needsFile(CURL());

let gw: RunningGateway;
let dir: string;
let cat: string;
/**
 * A 200 KiB "JPEG": the JPEG magic, then every byte value — NULs, CRLFs, `--` runs and invalid
 * UTF-8 that a multipart parser or a text path would trip on — over several 64 KiB chunks.
 */
const FILE = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  Buffer.from(Array.from({ length: 200 * 1024 }, (_, i) => (i % 97 === 0 ? 0x2d : (i * 131 + (i >> 8)) & 0xff))),
  Buffer.from('\r\n--\r\n------WebKitFormBoundary\r\n'),
]);

/** The Python client's run: 60 s, 16 MiB of output. */
const UPLOADER = { timeoutMs: 60_000, maxBufferBytes: 16 << 20 };

beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--torchserve']);
  dir = mkdtempSync(join(tmpdir(), 'tg-uploads-'));
  cat = join(dir, 'cat.jpg');
  writeFileSync(cat, FILE);
});
afterAll(async () => {
  await gw?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** A binary answer's JSON header and the one BYTES element of its first output. */
function echoed(body: Buffer, headerLength: number): { header: { outputs: { name: string; shape: number[] }[] }; element: Buffer } {
  const header = JSON.parse(body.subarray(0, headerLength).toString()) as { outputs: { name: string; shape: number[] }[] };
  const data = body.subarray(headerLength);
  expect(data.readUInt32LE(0)).toBe(data.length - 4);
  return { header, element: data.subarray(4) };
}

/** Inference-Header-Content-Length of curl's answer. */
const headerLength = (r: CurlAnswer): number => Number(r.headers['inference-header-content-length']);

const v2 = (model: string): string => `${gw.url}/v2/models/${model}/infer`;

/** Triton's count of blob_echo executions (its statistics, read from Triton itself). */
async function echoCount(): Promise<number> {
  const r = await send(`http://${process.env.TRITON_HTTP!}/v2/models/blob_echo/stats`);
  const stats = JSON.parse(r.body.toString()) as { model_stats: { inference_count: number }[] };
  return stats.model_stats.reduce((n, s) => n + s.inference_count, 0);
}

describe('V2 uploads', () => {
  test("curl --data-binary @cat.jpg -H 'Content-Type: image/jpeg': the BYTES input holds the file, as Triton's own raw request has it", async () => {
    const r = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', v2('blob_echo'));
    expect([r.status, r.type]).toEqual([200, 'application/octet-stream']);
    const triton = await send(`http://${process.env.TRITON_HTTP!}/v2/models/blob_echo/infer`, { body: FILE, headers: { 'Inference-Header-Content-Length': 0 } });
    const ours = r.body;
    const a = echoed(ours, headerLength(r));
    const b = echoed(triton.body, Number(triton.headers['inference-header-content-length']));
    expect(a.header).toEqual(b.header);
    expect(a.header.outputs[0]!.shape).toEqual([1, 1]);
    expect(a.element.equals(FILE)).toBe(true);
  });

  test('curl -F file=@cat.jpg (a browser form\'s field name) reaches the only input; binary_data_output as a text field', async () => {
    const r = await curl('-F', `file=@${cat};type=image/jpeg`, '-F', 'binary_data_output=true', v2('blob_echo'));
    expect(r.status).toBe(200);
    expect(echoed(r.body, headerLength(r)).element.equals(FILE)).toBe(true);
    const json = await curl('-F', `file=@${cat}`, v2('blob_len'));
    expect(JSON.parse(json.body.toString())).toMatchObject({ model_name: 'blob_len', outputs: [{ name: 'LEN', datatype: 'INT64', shape: [1, 1], data: [FILE.length] }] });
  });

  test('a UINT8 input takes the file as [1, N] (image_stats: its length and byte sum)', async () => {
    const sum = FILE.reduce((n, b) => n + b, 0);
    for (const args of [['--data-binary', `@${cat}`, '-H', 'Content-Type: image/png'], ['-F', `IMAGE=@${cat}`]]) {
      const r = await curl(...args, v2('image_stats'));
      expect(r.status).toBe(200);
      if (r.type === 'application/json') {
        expect(JSON.parse(r.body.toString()).outputs).toEqual([
          { name: 'LEN', datatype: 'INT64', shape: [1, 1], data: [FILE.length] },
          { name: 'SUM', datatype: 'UINT64', shape: [1, 1], data: [sum] },
        ]);
      } else {
        // A raw request is answered binary (as Triton answers one): LEN then SUM, 8 bytes each.
        const tail = r.body.subarray(r.body.length - 16);
        expect([Number(tail.readBigInt64LE(0)), Number(tail.readBigUInt64LE(8))]).toEqual([FILE.length, sum]);
      }
    }
  });

  test('Python requests: a multipart upload (files=) and a raw one (data=, image/jpeg) reach blob_echo whole', async () => {
    const script = `
import json, sys, requests
url, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
out = {}
r = requests.post(url, files={'BLOB': ('cat.jpg', open(path, 'rb'), 'image/jpeg')}, data={'binary_data_output': 'true'})
h = int(r.headers['Inference-Header-Content-Length'])
out['multipart'] = [r.status_code, r.content[h + 4:] == data]
r = requests.post(url, data=open(path, 'rb'), headers={'Content-Type': 'image/jpeg'})
h = int(r.headers['Inference-Header-Content-Length'])
out['raw'] = [r.status_code, r.content[h + 4:] == data]
print(json.dumps(out))
`;
    const r = await run(join(tritonVenv(), 'bin', 'python'), ['-c', script, v2('blob_echo'), cat], UPLOADER);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ multipart: [200, true], raw: [200, true] });
  });

  test('application/json, curl -d (x-www-form-urlencoded) and no Content-Type keep Triton\'s reading: a V2 JSON body', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], data: ['abc'] }] });
    for (const h of [['-H', 'Content-Type: application/json'], [], ['-H', 'Content-Type:']]) {
      const r = await curl('-d', body, ...h, v2('blob_len'));
      expect([r.status, JSON.parse(r.body.toString()).outputs[0].data]).toEqual([200, [3]]);
    }
  });

  test('an image to a model without one BYTES or UINT8 input is a 400 naming the header for raw tensors', async () => {
    const r = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: image/jpeg', v2('simple'));
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body.toString())).toEqual({
      error: "a body of type image/jpeg is an upload: it goes to a model with exactly one BYTES or UINT8 input, and model 'simple' has 'INPUT0' INT32, 'INPUT1' INT32; send raw tensor data with 'Inference-Header-Content-Length: 0', or a V2 request",
    });
  });

  test('application/octet-stream is an upload to a model that takes bytes; to any other, Triton\'s reading (V2 JSON)', async () => {
    const r = await curl('--data-binary', `@${cat}`, '-H', 'Content-Type: application/octet-stream', v2('blob_echo'));
    expect([r.status, echoed(r.body, headerLength(r)).element.equals(FILE)]).toEqual([200, true]);
    const json = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(2) }] });
    const simple = await curl('-d', json, '-H', 'Content-Type: application/octet-stream', v2('simple'));
    expect([simple.status, JSON.parse(simple.body.toString()).outputs[0].data]).toEqual([200, Array(16).fill(3)]);
  });

  test('malformed multipart bodies: 400 naming the problem, nothing reaches Triton, the gateway keeps serving', async () => {
    const before = await echoCount();
    const B = 'XyZ';
    const mp = { 'Content-Type': `multipart/form-data; boundary=${B}` };
    const part = `--${B}\r\nContent-Disposition: form-data; name="BLOB"; filename="a"\r\n\r\nhello`;
    const cases: [string, Record<string, string>, string, string][] = [
      ['cut inside a part', mp, part, 'the multipart/form-data body is malformed: Unexpected end of multipart data'],
      ['no boundary', { 'Content-Type': 'multipart/form-data' }, `${part}\r\n--${B}--\r\n`, 'the multipart/form-data body cannot be read: Multipart: Boundary not found'],
      ['empty', mp, '', 'the multipart/form-data body is malformed: Unexpected end of multipart data'],
      ['no input named', mp, `--${B}\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--${B}--\r\n`,
        "no part of the multipart/form-data body names an input of model 'blob_echo' (its inputs: 'BLOB')"],
      ['an input twice', mp, `${part}\r\n${part}\r\n--${B}--\r\n`, "the multipart/form-data body gives input 'BLOB' twice (part 'BLOB')"],
    ];
    for (const [, headers, body, error] of cases) {
      const r = await send(v2('blob_echo'), { body, headers });
      expect([r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([400, 'GW_ERR_DECODE_MULTIPART_INVALID', { error }]);
    }
    expect(await echoCount()).toBe(before);
    const ok = await curl('-F', `BLOB=@${cat}`, v2('blob_len'));
    expect(ok.status).toBe(200);
  });
});

describe('TorchServe inference API', () => {
  const ts = (path: string): string => `${gw.url}${path}`;

  test('curl http://host/predictions/m -T kitten.jpg: the answer is the output\'s bytes', async () => {
    const r = await curl(ts('/predictions/blob_echo'), '-T', cat);
    expect([r.status, r.type]).toEqual([200, 'application/octet-stream']);
    expect(r.body.equals(FILE)).toBe(true);
  });

  test("curl -X POST http://host/predictions/m -F 'data=@kitten.jpg' (and a version): a JSON answer for a numeric output", async () => {
    const raw = await curl('-X', 'POST', ts('/predictions/blob_echo'), '-F', `data=@${cat}`);
    expect(raw.body.equals(FILE)).toBe(true);
    const json = await curl('-X', 'POST', ts('/predictions/blob_len/1'), '-F', `data=@${cat}`);
    expect([json.status, json.type, JSON.parse(json.body.toString())]).toEqual([200, 'application/json', [FILE.length]]);
    const several = await curl('-X', 'POST', ts('/predictions/image_stats'), '-T', cat);
    expect(JSON.parse(several.body.toString())).toEqual({ LEN: [FILE.length], SUM: [FILE.reduce((n, b) => n + b, 0)] });
  });

  test('GET /ping and GET /models answer in TorchServe\'s shapes', async () => {
    expect(JSON.parse((await curl(ts('/ping'))).body.toString())).toEqual({ status: 'Healthy' });
    const page = JSON.parse((await curl(ts('/models?limit=2'))).body.toString()) as { nextPageToken: string; models: { modelName: string; modelUrl: string }[] };
    expect(page.nextPageToken).toBe('2');
    expect(page.models).toHaveLength(2);
    const all = JSON.parse((await curl(ts('/models'))).body.toString()) as { models: { modelName: string }[]; nextPageToken?: string };
    expect(all.nextPageToken).toBeUndefined();
    expect(all.models.map((m) => m.modelName)).toEqual(expect.arrayContaining(['blob_echo', 'blob_len', 'image_stats', 'simple']));
  });

  test('errors are TorchServe\'s {"code", "type", "message"}', async () => {
    const cases: [string, string[], unknown][] = [
      ['/predictions/no_such_model', ['-T', cat], { code: 404, type: 'ModelNotFoundException', message: 'Model not found: no_such_model' }],
      ['/predictions/blob_len/1.0', ['-T', cat], { code: 404, type: 'ModelVersionNotFoundException', message: 'Model version: 1.0 does not exist for model: blob_len' }],
      ['/predictions/blob_len', ['-F', `image=@${cat}`], { code: 400, type: 'BadRequestException', message: "the file part 'image' names no input of model 'blob_len' (its inputs: 'BLOB')" }],
    ];
    for (const [path, args, body] of cases) {
      const r = await curl(...args, ts(path));
      expect(JSON.parse(r.body.toString())).toEqual(body);
    }
  });

  test('Python requests as a TorchServe client sends them: data= and files={"data": …}', async () => {
    const script = `
import json, sys, requests
url, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
a = requests.post(url, data=data)
b = requests.post(url, files={'data': open(path, 'rb')})
print(json.dumps([a.status_code, a.content == data, b.status_code, b.content == data]))
`;
    const r = await run(join(tritonVenv(), 'bin', 'python'), ['-c', script, ts('/predictions/blob_echo'), cat], UPLOADER);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual([200, true, 200, true]);
  });
});
