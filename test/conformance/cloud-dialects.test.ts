// The SageMaker and Vertex AI dialects (docs/dialects.md) against real Triton (the zoo, PyTriton's
// tritonserver 2.51), the gateway in front of it over gRPC.
// - SageMaker /ping and /invocations: differential. Triton serves its own SageMaker frontend
//   (tritonserver --allow-sagemaker, test/conformance/global-setup.ts), and every case is sent,
//   byte for byte the same, to it and to the gateway: status, Content-Type,
//   Inference-Header-Content-Length, Content-Encoding and body must agree.
// - Vertex AI and SageMaker's multi-model invoke: from the source. The Vertex AI frontend cannot
//   run under PyTriton (it wants its default model loaded when it starts; PyTriton loads models
//   after), and the multi-model invoke answers 404 to any model not loaded through SageMaker's own
//   load API. So each case pairs the dialect's request to the gateway with the request
//   src/vertex_ai_server.cc and src/sagemaker_server.cc make of it — a V2 request to Triton's
//   HTTP frontend (the header length from the media type in Inference-Header-Content-Length, no
//   compression) — and the answers must agree as those files say: V2's own for Vertex AI; for a
//   multi-model invoke, binary answers in the SageMaker media type and failures 400 in
//   application/json (SageMakerMMEHandleInfer).
// - Clients we did not write: curl and Python requests.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';
import { differences, report, send, sendH2, type Answer } from './cases/exchange';
import { binInput, binaryRequest, type Case, failingError, input, json, output, range, tensorBytes, text } from './cases/types';
import { CURL, needs } from '../support/tools';
import { curl, type CurlAnswer } from '../support/curl';

const TRITON_HTTP = `http://${process.env.TRITON_HTTP}`;
const TRITON_SAGEMAKER = `http://${process.env.TRITON_SAGEMAKER}`;
const SM = 'application/vnd.sagemaker-triton.binary+json;json-header-size=';
const VX = 'application/vnd.vertex-ai-triton.binary+json;json-header-size=';
const PREDICT = '/v1/endpoints/1234/deployedModels/5678:predict';
const HEALTH = '/v1/endpoints/1234/deployedModels/5678';

let gw: RunningGateway;
let dir = '';
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tg-cloud-'));
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--sagemaker', '--sagemaker-default-model', 'simple',
    '--vertex-ai', '--vertex-ai-predict-route', PREDICT, '--vertex-ai-health-route', HEALTH, '--vertex-ai-default-model', 'simple']);
});
afterAll(async () => {
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

// ------------------------------------------------------------------ bodies for `simple` (INT32 [1,16] x2)

const A = range(16);
const B = range(16, 100);
const jsonBody = (outputs?: Record<string, unknown>[]) => json({
  inputs: [input('INPUT0', 'INT32', [1, 16], A), input('INPUT1', 'INT32', [1, 16], B)],
  ...outputs === undefined ? {} : { outputs: outputs as never },
});
const BIN_OUT = [output('OUTPUT0', { binary_data: true }), output('OUTPUT1', { binary_data: true })];
/** The binary extension: its JSON header's length, and the body. */
function binaryBody(outputs?: Record<string, unknown>[]): { n: number; body: Buffer } {
  const header = { inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), binInput('INPUT1', 'INT32', [1, 16], 64)], ...outputs === undefined ? {} : { outputs: outputs as never } };
  const b = binaryRequest(header, [tensorBytes('INT32', A), tensorBytes('INT32', B)]);
  return { n: Number(b.headers['Inference-Header-Content-Length']), body: b.body };
}
const bin = binaryBody();
const binOut = binaryBody(BIN_OUT);

const post = (name: string, path: string, body: Buffer, headers: Record<string, string> = {}, more: Partial<Case> = {}): Case =>
  ({ name, method: 'POST', path, body, headers, ...more });

// ------------------------------------------------------------------ SageMaker: differential

/** Sent the same to Triton's SageMaker frontend and to the gateway. */
const SAGEMAKER: Case[] = [
  { name: 'GET /ping', method: 'GET', path: '/ping' },
  { name: 'POST /ping: 405', method: 'POST', path: '/ping' },
  { name: 'GET /invocations: 405', method: 'GET', path: '/invocations' },
  post('JSON in, JSON out', '/invocations', jsonBody()),
  post('JSON in, binary out: the answer in the SageMaker media type', '/invocations', jsonBody(BIN_OUT)),
  post('binary in (json-header-size), JSON out', '/invocations', bin.body, { 'Content-Type': `${SM}${bin.n}` }),
  post('binary in, binary out', '/invocations', binOut.body, { 'Content-Type': `${SM}${binOut.n}` }),
  post('binary in, sent chunked', '/invocations', binOut.body, { 'Content-Type': `${SM}${binOut.n}` }, { chunked: 37 }),
  post('json-header-size with trailing parameters', '/invocations', bin.body, { 'Content-Type': `${SM}${bin.n};charset=utf-8` }),
  post('json-header-size = the body: all JSON', '/invocations', jsonBody(), { 'Content-Type': `${SM}${jsonBody().length}` }),
  post('json-header-size 0: a raw request (simple has two inputs)', '/invocations', tensorBytes('INT32', A), { 'Content-Type': `${SM}0` }),
  post('json-header-size past the body', '/invocations', bin.body, { 'Content-Type': `${SM}99999` }),
  post('json-header-size negative', '/invocations', bin.body, { 'Content-Type': `${SM}-1` }),
  post('the media type not first in Content-Type', '/invocations', bin.body, { 'Content-Type': `text/plain, ${SM}${bin.n}` }),
  post('Inference-Header-Content-Length is not read: a JSON body', '/invocations', jsonBody(), { 'Inference-Header-Content-Length': '10' }),
  post('Content-Encoding is not read: a plain body labelled gzip', '/invocations', jsonBody(), { 'Content-Encoding': 'gzip' }),
  post('Accept-Encoding is not honoured: the answer is not compressed', '/invocations', jsonBody(BIN_OUT), { 'Accept-Encoding': 'gzip' }),
  post('an input the model lacks', '/invocations', json({ inputs: [input('NOPE', 'INT32', [1, 16], A), input('INPUT1', 'INT32', [1, 16], B)] })),
  post('malformed JSON', '/invocations', text('{"inputs": [')),
  post('a binary input shorter than declared', '/invocations', bin.body.subarray(0, bin.body.length - 4), { 'Content-Type': `${SM}${bin.n}` }),
];

describe('SageMaker: Triton\'s SageMaker frontend vs the gateway', () => {
  test.each(SAGEMAKER.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const ref = await send(TRITON_SAGEMAKER, c);
    const got = await send(gw.url, c);
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  });

  // The same cases with the gateway asked over HTTP/2 (h2c), Triton over HTTP/1.1, its only version.
  test.each(SAGEMAKER.map((c) => [c.name, c] as const))('over h2c: %s', async (_name, c) => {
    const ref = await send(TRITON_SAGEMAKER, c);
    const got = await sendH2(gw.url, c);
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  });

  // Intended differences (docs/differences.md "SageMaker and Vertex AI"), each answer checked here.
  test('json-header-size without digits: 400 (Triton 2.51 read it as 0 with atoi; its later releases refuse it, as here)', async () => {
    const c = post('no digits', '/invocations', bin.body, { 'Content-Type': `${SM}abc` });
    const ref = await send(TRITON_SAGEMAKER, c);
    expect(ref.body.toString()).toContain('Raw request must only have 1 input'); // 2.51: atoi("abc") = 0, a raw request
    const got = await send(gw.url, c);
    expect([got.status, got.headers['content-type'], got.body.toString()]).toEqual([400, 'text/plain', '{"error":"Unable to parse inference header size, got: abc"}']);
  });

  // A binary body whose header length is not given the dialect's way is all JSON to Triton (400
  // "unexpected size for input …"); the gateway reads a JSON object followed by its binary_data_size
  // bytes without the length (binary.headerless, docs/differences.md "Binary extension without its
  // header"), here as on V2 infer.
  test.each([
    ['SageMaker: the media type in upper case is not it', '/invocations', { 'Content-Type': `${SM.toUpperCase()}${bin.n}` }],
    ['SageMaker: Inference-Header-Content-Length is not read', '/invocations', { 'Inference-Header-Content-Length': String(bin.n) }],
    ['Vertex AI: the SageMaker media type is not Vertex AI\'s', PREDICT, { 'Content-Type': `${SM}${bin.n}` }],
    ['Vertex AI: Inference-Header-Content-Length is not read', PREDICT, { 'Inference-Header-Content-Length': String(bin.n) }],
  ])('%s: read as a headerless binary body (binary.headerless)', async (_name, path, headers) => {
    // Triton's reading, on its HTTP frontend: the body all JSON (no Inference-Header-Content-Length)
    const ref = await send(TRITON_HTTP, v2Infer('simple', bin.body));
    expect([ref.status, ref.body.toString()]).toEqual([400, '{"error":"unexpected size for input \'INPUT0\', expecting 64 additional bytes for model \'simple\'"}']);
    const got = await send(gw.url, post('h', path, bin.body, headers));
    expect([got.status, JSON.parse(got.body.toString()).outputs[0].data]).toEqual([200, A.map((a, i) => a + B[i]!)]);
  });

  test('a path the frontend does not serve: Triton\'s SageMaker port answers 400, the gateway\'s port (which serves more) 404', async () => {
    expect((await send(TRITON_SAGEMAKER, { name: 'x', method: 'GET', path: '/nothing' })).status).toBe(400);
    expect((await send(gw.url, { name: 'x', method: 'GET', path: '/nothing' })).status).toBe(404);
  });

  test('multi-model invoke: Triton answers 404 to a model its SageMaker load API did not load; the gateway infers the model (loaded in Triton)', async () => {
    const c = post('invoke', '/models/simple/invoke', jsonBody());
    expect((await send(TRITON_SAGEMAKER, c)).status).toBe(404);
    expect((await send(gw.url, c)).status).toBe(200);
  });
});

// ------------------------------------------------------------------ from the source: a dialect request and its V2 twin

interface Twin {
  readonly name: string;
  /** To the gateway. */
  readonly dialect: Case;
  /** To Triton's HTTP frontend: the request the dialect's frontend makes of it. */
  readonly v2: Case;
}

/** The V2 infer the frontends run (HandleInfer) for `model`: the header length in Inference-Header-Content-Length. */
const v2Infer = (model: string, body: Buffer, headerLength?: number | string, more: Partial<Case> = {}): Case =>
  post('v2', `/v2/models/${model}/infer`, body, headerLength === undefined ? {} : { 'Inference-Header-Content-Length': String(headerLength) }, more);
const redirect = (to: string, body = text('')): Case => post(`redirect ${to}`, PREDICT, body, { 'X-Vertex-Ai-Triton-Redirect': to });

// Triton's src/vertex_ai_server.cc VertexAiAPIServer::Handle and GetInferenceHeaderLength
const VERTEX: Twin[] = [
  { name: 'health route: GET /v2/health/ready', dialect: { name: 'h', method: 'GET', path: HEALTH }, v2: { name: 'h', method: 'GET', path: '/v2/health/ready' } },
  { name: 'predict, JSON: the default model', dialect: post('p', PREDICT, jsonBody()), v2: v2Infer('simple', jsonBody()) },
  { name: 'predict, binary out: V2\'s answer headers', dialect: post('p', PREDICT, jsonBody(BIN_OUT)), v2: v2Infer('simple', jsonBody(BIN_OUT)) },
  { name: 'predict, binary in (json-header-size)', dialect: post('p', PREDICT, binOut.body, { 'Content-Type': `${VX}${binOut.n}` }), v2: v2Infer('simple', binOut.body, binOut.n) },
  { name: 'predict, binary in, chunked', dialect: post('p', PREDICT, binOut.body, { 'Content-Type': `${VX}${binOut.n}` }, { chunked: 50 }),
    v2: v2Infer('simple', binOut.body, binOut.n, { chunked: 50 }) },
  { name: 'predict, json-header-size past the body', dialect: post('p', PREDICT, bin.body, { 'Content-Type': `${VX}99999` }), v2: v2Infer('simple', bin.body, 99999) },
  { name: 'predict, Accept-Encoding is not honoured', dialect: post('p', PREDICT, jsonBody(), { 'Accept-Encoding': 'gzip' }), v2: v2Infer('simple', jsonBody()) },
  { name: 'predict, an input the model lacks', dialect: post('p', PREDICT, json({ inputs: [input('NOPE', 'INT32', [1, 16], A)] })),
    v2: v2Infer('simple', json({ inputs: [input('NOPE', 'INT32', [1, 16], A)] })) },
  { name: 'redirect to another model\'s infer, with the media type', dialect: { ...redirect('v2/models/identity_int32/versions/1/infer', json({ inputs: [input('INPUT0', 'INT32', [1, 3], [1, 2, 3])] })) },
    v2: { ...v2Infer('identity_int32', json({ inputs: [input('INPUT0', 'INT32', [1, 3], [1, 2, 3])] })), path: '/v2/models/identity_int32/versions/1/infer' } },
  { name: 'redirect to an unknown model\'s infer', dialect: redirect('v2/models/nope/infer', jsonBody()), v2: v2Infer('nope', jsonBody()) },
  { name: 'redirect: model metadata', dialect: redirect('v2/models/simple'), v2: { name: 'm', method: 'GET', path: '/v2/models/simple' } },
  { name: 'redirect: model config', dialect: redirect('v2/models/simple/config'), v2: { name: 'c', method: 'GET', path: '/v2/models/simple/config' } },
  { name: 'redirect: model ready', dialect: redirect('v2/models/simple/versions/1/ready'), v2: { name: 'r', method: 'GET', path: '/v2/models/simple/versions/1/ready' } },
  { name: 'redirect: an unknown model\'s metadata', dialect: redirect('v2/models/nope'), v2: { name: 'm', method: 'GET', path: '/v2/models/nope' } },
  { name: 'redirect: server metadata', dialect: redirect('v2'), v2: { name: 's', method: 'GET', path: '/v2' } },
  { name: 'redirect: server live', dialect: redirect('v2/health/live'), v2: { name: 'l', method: 'GET', path: '/v2/health/live' } },
];

describe('Vertex AI (from src/vertex_ai_server.cc): the gateway\'s answer is Triton\'s to the V2 twin', () => {
  test.each(VERTEX.flatMap((t) => [[t.name, t, send], [`over h2c: ${t.name}`, t, sendH2]] as const))('%s', async (_name, t, toGateway) => {
    const ref = await send(TRITON_HTTP, t.v2);
    const got = await toGateway(gw.url, t.dialect);
    const diffs = differences(t.dialect, ref, got);
    if (diffs.length > 0) throw new Error(report(t.dialect, ref, got, diffs));
  });

  test.each([
    // Triton: 405, empty (a redirect is POST only); the gateway: its 405
    ['GET predict', { name: 'g', method: 'GET', path: PREDICT, headers: { 'X-Vertex-Ai-Triton-Redirect': 'v2' } }, 405, 'GW_ERR_ROUTE_METHOD_NOT_ALLOWED'],
    // Triton: 403, empty
    ['redirect to a model load', redirect('v2/repository/models/simple/load'), 403, 'GW_ERR_ROUTE_REDIRECT_REFUSED'],
    ['redirect to a shared-memory register', redirect('v2/systemsharedmemory/region/r/register'), 403, 'GW_ERR_ROUTE_REDIRECT_REFUSED'],
    // Triton: 400, empty
    ['redirect to generate', redirect('v2/models/simple/generate'), 400, 'GW_ERR_ROUTE_REDIRECT_INVALID'],
    ['redirect to the log settings', redirect('v2/logging'), 400, 'GW_ERR_ROUTE_REDIRECT_INVALID'],
  ] as const)('%s: its status, nothing sent upstream', async (_name, c, status, code) => {
    const before = await inferenceCount('simple');
    const got = await send(gw.url, c);
    expect([got.status, got.headers['x-tensorgate-error']]).toEqual([status, code]);
    expect(await inferenceCount('simple')).toBe(before);
  });
});

async function inferenceCount(model: string): Promise<number> {
  const r = await send(TRITON_HTTP, { name: 's', method: 'GET', path: `/v2/models/${model}/stats` });
  return (JSON.parse(r.body.toString()) as { model_stats: { inference_count: number }[] }).model_stats[0]!.inference_count;
}

/** What SageMakerMMEHandleInfer answers where the V2 infer answered `v2`. */
function multiModelAnswer(v2: Answer): Answer {
  const headers = { ...v2.headers };
  let status = v2.status;
  if (v2.status !== 200) {
    status = 400; // every failure, OOM aside (507)
    headers['content-type'] = 'application/json';
  } else if (headers['inference-header-content-length'] !== undefined) {
    headers['content-type'] = `${SM}${headers['inference-header-content-length']}`; // SagemakeInferRequestClass::SetResponseHeader
    delete headers['inference-header-content-length'];
  }
  return { ...v2, status, headers };
}

// Triton's src/sagemaker_server.cc SageMakerMMEHandleInfer: X-Amzn-SageMaker-Target-Model, else the path's model
const TARGET = 'X-Amzn-SageMaker-Target-Model';
const MULTI_MODEL: Twin[] = [
  { name: 'the path\'s model', dialect: post('i', '/models/simple/invoke', jsonBody()), v2: v2Infer('simple', jsonBody()) },
  { name: 'the header\'s model over the path\'s', dialect: post('i', '/models/anything/invoke', json({ inputs: [input('INPUT0', 'INT32', [1, 2], [7, 8])] }), { [TARGET]: 'identity_int32' }),
    v2: v2Infer('identity_int32', json({ inputs: [input('INPUT0', 'INT32', [1, 2], [7, 8])] })) },
  { name: 'binary in and out: the SageMaker media type', dialect: post('i', '/models/simple/invoke', binOut.body, { 'Content-Type': `${SM}${binOut.n}` }), v2: v2Infer('simple', binOut.body, binOut.n) },
  { name: 'an unknown model: 400 in application/json', dialect: post('i', '/models/nope/invoke', jsonBody()), v2: v2Infer('nope', jsonBody()) },
  { name: 'json-header-size past the body: 400 in application/json', dialect: post('i', '/models/simple/invoke', bin.body, { 'Content-Type': `${SM}99999` }), v2: v2Infer('simple', bin.body, 99999) },
  { name: 'a model that fails: 400 in application/json (Triton\'s V2 answer is 500)', dialect: { ...post('i', '/models/failing/invoke', json({ inputs: [input('INPUT0', 'FP32', [1, 2], [1, 2])] })), compare: failingError() },
    v2: v2Infer('failing', json({ inputs: [input('INPUT0', 'FP32', [1, 2], [1, 2])] })) },
  { name: 'a decoupled model: 400 in application/json (Triton\'s V2 answer is 501)', dialect: post('i', '/models/repeat_int32/invoke', json({ inputs: [input('INPUT0', 'INT32', [1], [3])] })),
    v2: v2Infer('repeat_int32', json({ inputs: [input('INPUT0', 'INT32', [1], [3])] })) },
  { name: 'an input the model lacks: 400 in application/json', dialect: post('i', '/models/simple/invoke', json({ inputs: [input('NOPE', 'INT32', [1, 16], A)] })),
    v2: v2Infer('simple', json({ inputs: [input('NOPE', 'INT32', [1, 16], A)] })) },
];

describe('SageMaker multi-model invoke (from src/sagemaker_server.cc)', () => {
  test.each(MULTI_MODEL.map((t) => [t.name, t] as const))('%s', async (_name, t) => {
    const ref = multiModelAnswer(await send(TRITON_HTTP, t.v2));
    const got = await send(gw.url, t.dialect);
    const diffs = differences(t.dialect, ref, got);
    if (diffs.length > 0) throw new Error(report(t.dialect, ref, got, diffs));
  });
});

// src/sagemaker_server.cc Handle: SAGEMAKER_TRITON_INFERENCE_TYPE generate / generate_stream (Triton
// 2.56 and later, so not in PyTriton's 2.51): /invocations is HandleGenerate on the default model
describe.each(['generate', 'generate_stream'])('SageMaker /invocations as %s (from the source)', (kind) => {
  let gen: RunningGateway;
  beforeAll(async () => {
    gen = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--sagemaker', '--sagemaker-default-model', 'repeat_int32', '--sagemaker-inference-type', kind,
      '--sagemaker-ping-mode', 'live']);
  });
  afterAll(async () => {
    await gen?.close();
  });

  test('GET /ping with sagemaker.pingMode live: Triton\'s liveness', async () => {
    const c: Case = { name: 'ping', method: 'GET', path: '/ping' };
    const ref = await send(TRITON_HTTP, { ...c, path: '/v2/health/live' });
    const got = await send(gen.url, c);
    expect(differences(c, ref, got)).toEqual([]);
  });

  test.each([
    ['responses', '{"INPUT0":3,"id":"abc"}'],
    ['an error from the model', '{"INPUT0":2,"fail_after":1}'],
    ['no responses', '{"INPUT0":0}'],
    ['a body that is not JSON', '{"INPUT0":'],
  ])('%s: Triton\'s answer to the same body on its own route', async (_name, body) => {
    const c = post('g', '/invocations', text(body));
    const ref = await send(TRITON_HTTP, { ...c, path: `/v2/models/repeat_int32/${kind}` });
    const got = await send(gen.url, c);
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  });
});

// ------------------------------------------------------------------ clients we did not write

const run = (cmd: string, args: string[]): Promise<string> => new Promise((resolve, reject) => {
  execFile(cmd, args, { timeout: 60_000, maxBuffer: 1 << 20, encoding: 'latin1' }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
});

describe('third-party clients', () => {
  needs(CURL()).test('curl: a binary /invocations to Triton\'s SageMaker frontend and to the gateway, same bytes back', async () => {
    const binFile = join(dir, 'body.bin');
    writeFileSync(binFile, binOut.body);
    const ask = (base: string): Promise<CurlAnswer> => curl('-X', 'POST', `${base}/invocations`, '-H', `Content-Type: ${SM}${binOut.n}`, '--data-binary', `@${binFile}`);
    const parts = (r: CurlAnswer) => ({
      status: r.head.split('\r\n')[0], type: r.headers['content-type'], ihcl: r.headers['inference-header-content-length'], body: r.body.toString('latin1'),
    });
    const [ref, got] = [parts(await ask(TRITON_SAGEMAKER)), parts(await ask(gw.url))];
    expect(got).toEqual(ref);
    expect([got.status, got.type?.startsWith(SM), got.ihcl]).toEqual(['HTTP/1.1 200 OK', true, undefined]);
    // the answer's binary part is OUTPUT0 = A + B, then OUTPUT1 = A - B, as int32
    const body = Buffer.from(got.body, 'latin1');
    const n = Number(got.type!.slice(SM.length));
    expect(body.subarray(n)).toEqual(Buffer.concat([tensorBytes('INT32', A.map((a, i) => a + B[i]!)), tensorBytes('INT32', A.map((a, i) => a - B[i]!))]));
  });

  needs(CURL()).test('curl: bad input is a 4xx with {"error"} and Triton infers nothing', async () => {
    const binFile = join(dir, 'body.bin');
    writeFileSync(binFile, binOut.body);
    const post = async (path: string, ...headers: string[]): Promise<[number, string]> => {
      const r = await curl('-X', 'POST', `${gw.url}${path}`, '--data-binary', `@${binFile}`, ...headers.flatMap((h) => ['-H', h]));
      return [r.status, r.body.toString('latin1')];
    };
    const before = await inferenceCount('simple');
    const len = binOut.body.length;
    expect(await post('/invocations', `Content-Type: ${SM}abc`)).toEqual([400, '{"error":"Unable to parse inference header size, got: abc"}']);
    expect(await post('/invocations', `Content-Type: ${SM}${len + 1}`)).toEqual([400, `{"error":"inference header size should be in range (0, ${len}), got: ${len + 1}"}`]);
    expect(await post('/invocations', `Content-Type: ${SM}99999999999`)).toEqual([400, '{"error":"Unable to parse inference header size, value is out of range, got: 99999999999"}']);
    expect(await post('/models/simple/invoke', `Content-Type: ${SM}${binOut.n}`, 'X-Amzn-SageMaker-Target-Model;')).toEqual([400,
      '{"error":"X-Amzn-SageMaker-Target-Model is empty: name the model to invoke, or leave the header out to invoke the model of the path"}']);
    expect(await post('/models/simple/invoke', `Content-Type: ${SM}${binOut.n}`, 'X-Amzn-SageMaker-Target-Model: nope')).toEqual([400,
      '{"error":"Request for unknown model: \'nope\' is not found"}']);
    expect(await post(PREDICT, `Content-Type: ${VX}-5`)).toEqual([400, `{"error":"inference header size should be in range (0, ${len}), got: -5"}`]);
    expect((await post(PREDICT, 'X-Vertex-Ai-Triton-Redirect: v2/repository/models/simple/unload'))[0]).toBe(403);
    expect((await post(PREDICT, 'X-Vertex-Ai-Triton-Redirect: v2/models/simple/infer?x=1'))[0]).toBe(400);
    expect(await inferenceCount('simple')).toBe(before);
  });

  needs(CURL()).test('curl: a Vertex AI redirect to a model\'s config is Triton\'s GET of it', async () => {
    const [ref, got] = [await curl(`${TRITON_HTTP}/v2/models/simple/config`),
      await curl('-X', 'POST', '-H', 'X-Vertex-Ai-Triton-Redirect: v2/models/simple/config', `${gw.url}${PREDICT}`)];
    expect(got.body.toString()).toBe(ref.body.toString());
  });

  test('Python requests: SageMaker and Vertex AI calls, binary tensors checked', async () => {
    const python = join(tritonVenv(), 'bin', 'python');
    const out = await run(python, [join(__dirname, 'cloud_dialects_client.py'), '--gateway', gw.url, '--sagemaker', TRITON_SAGEMAKER, '--predict', PREDICT, '--health', HEALTH]);
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ ok: true, checks: 9 });
  }, 60_000);
});
