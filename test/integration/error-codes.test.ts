// One test per GW_ERR_* code the gateway can produce (docs/errors.md), each provoked through real
// HTTP against a gateway on 127.0.0.1 and checked as a client sees it: status, the code in
// x-tensorgate-error, Content-Type and the exact `{"error": …}` body. Conditions nobody is left to
// read (a client that went away) are checked in the request record and the error counter. The
// reference backend plays Triton where it can; a gRPC peer plays a Triton that misbehaves.
import { createServer, request, type Server } from 'node:http';
import { constants } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { loadConfig } from '../../gateway/config/load';
import { ERRORS, type ErrorCode, type ErrorSpec } from '../../gateway/errors';
import type { RunningGateway } from '../../gateway/gateway';
import { createHttpServer } from '../../gateway/ingress/server';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { inference } from '../../proto/services';
import { gatewayFor } from '../support/gateway';
import { GrpcPeer } from '../support/grpc-peer';
import { binaryBody, type RawResponse, send } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';

const loaded = loadConfig({ argv: ['--demo'], env: {} });
/** The default configuration (for a server of the test's own). */
const DEFAULTS = (loaded.help ? undefined : loaded.config)!;

const MAX_INPUT = 4096;
const MAX_BODY = 16384;

/**
 * The answer is the table's error: status, code header, Content-Type and exact message. `upstream`:
 * the status and Content-Type Triton's answer chose (GW_ERR_UPSTREAM_STATUS).
 */
function expectError(r: RawResponse, code: ErrorCode, message: string, upstream?: { status: number; plain: boolean }): void {
  const status = upstream?.status ?? ERRORS[code].status;
  const plain = upstream?.plain ?? (ERRORS[code] as ErrorSpec).plain === true;
  expect({ status: r.status, code: r.headers['x-tensorgate-error'], type: r.headers['content-type'], body: r.body.toString() })
    .toEqual({ status, code, type: plain ? 'text/plain' : 'application/json', body: JSON.stringify({ error: message }) });
}

/** Polls `cond` every 10 ms; fails with `what` after `ms`. */
async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Bounds a close that should be quick, so a stuck server fails afterAll instead of hanging it. */
function bounded(p: Promise<unknown>, what: string, ms = 5000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => undefined),
    new Promise<void>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not close within ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

const closeServer = (s: Server): Promise<void> => {
  s.closeAllConnections();
  return new Promise((resolve) => s.close(() => resolve()));
};

/** A port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await closeServer(s);
  return port;
}

async function errorCount(metricsUrl: string, code: ErrorCode, route: string): Promise<number | undefined> {
  const text = await (await fetch(metricsUrl)).text();
  return prometheusSamples(text).get(`tensorgate_errors_total{error_code="${code}",http_route="${route}"}`);
}

const fp32Json = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [1] }] });

describe('against the reference backend', () => {
  let gw: RunningGateway;
  let legacy: Server;
  let legacyPort = 0;
  let gonePort = 0;
  const tap = new RecordTap();
  beforeAll(async () => {
    legacy = createServer(() => { /* never answers: the pass-through timeout */ });
    await new Promise<void>((r) => legacy.listen(0, '127.0.0.1', r));
    legacyPort = (legacy.address() as AddressInfo).port;
    gonePort = await deadPort();
    gw = await gatewayFor([
      '--demo',
      '--max-input-size', String(MAX_INPUT),
      '--max-body-size', String(MAX_BODY),
      // logging and model-repository open; trace still off; statistics behind a header
      '--api-disabled', 'trace',
      '--api-restricted', 'statistics:x-admin=yes',
      // SageMaker without a default model; Vertex AI with one
      '--sagemaker', '--vertex-ai', '--vertex-ai-predict-route', '/vertex/predict', '--vertex-ai-health-route', '/vertex/health', '--vertex-ai-default-model', 'simple',
      '--routes', JSON.stringify([
        { path: '/api/text-length', model: 'blob_len', inputs: { BLOB: { from: '/document/text', decode: 'text' } }, response: { map: { LEN: '/length' } } },
        { path: '/api/half-simple', model: 'simple', inputs: { INPUT0: { from: '/a', decode: 'numbers' } }, response: 'v2' },
      ]),
      '--passthrough', JSON.stringify([
        { prefix: '/legacy', upstream: `http://127.0.0.1:${legacyPort}`, timeoutMs: 300 },
        { prefix: '/gone', upstream: `http://127.0.0.1:${gonePort}` },
      ]),
    ]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await bounded(gw.close(), 'the gateway');
    await bounded(closeServer(legacy), 'the pass-through upstream');
  });
  const url = (path: string): string => `${gw.url}${path}`;

  describe('ROUTE', () => {
    test('GW_ERR_ROUTE_NOT_FOUND: no route matches', async () => {
      expectError(await send(url('/v3/nothing')), 'GW_ERR_ROUTE_NOT_FOUND', 'Not Found');
    });

    test('GW_ERR_ROUTE_METHOD_NOT_ALLOWED: GET on infer', async () => {
      expectError(await send(url('/v2/models/simple/infer')), 'GW_ERR_ROUTE_METHOD_NOT_ALLOWED', 'Method Not Allowed');
    });

    test('GW_ERR_ROUTE_RESTRICTED: a restricted group without its header', async () => {
      expectError(await send(url('/v2/models/stats')), 'GW_ERR_ROUTE_RESTRICTED', "This API is restricted, expecting header 'x-admin'");
      expect((await send(url('/v2/models/stats'), { headers: { 'x-admin': 'yes' } })).headers['x-tensorgate-error']).not.toBe('GW_ERR_ROUTE_RESTRICTED');
    });

    test('GW_ERR_ROUTE_DISABLED: a group in api.disabled', async () => {
      expectError(await send(url('/v2/trace/setting')), 'GW_ERR_ROUTE_DISABLED',
        "This API is restricted, the 'trace' API group is disabled on this gateway (api.disabled)");
    });

    test('GW_ERR_ROUTE_NO_MODEL: SageMaker /invocations without sagemaker.defaultModel', async () => {
      expectError(await send(url('/invocations'), { body: '{}' }), 'GW_ERR_ROUTE_NO_MODEL',
        'POST /invocations calls the default model, and none is configured: set sagemaker.defaultModel (--sagemaker-default-model), or call POST /models/{model}/invoke');
    });

    test('GW_ERR_ROUTE_REDIRECT_INVALID: a Vertex AI redirect to an API Triton does not redirect to', async () => {
      expectError(await send(url('/vertex/predict'), { body: '{}', headers: { 'X-Vertex-Ai-Triton-Redirect': 'v2/logging' } }), 'GW_ERR_ROUTE_REDIRECT_INVALID',
        'X-Vertex-Ai-Triton-Redirect "v2/logging" names no API a Vertex AI redirect may reach');
    });

    test('GW_ERR_ROUTE_REDIRECT_REFUSED: a Vertex AI redirect to a model load', async () => {
      expectError(await send(url('/vertex/predict'), { body: '{}', headers: { 'X-Vertex-Ai-Triton-Redirect': 'v2/repository/models/simple/load' } }),
        'GW_ERR_ROUTE_REDIRECT_REFUSED', 'X-Vertex-Ai-Triton-Redirect: model load changes Triton, and only the repository index may be redirected');
    });

    test('GW_ERR_ROUTE_CONFIG_INVALID: a declarative route that leaves a model input without a source', async () => {
      expectError(await send(url('/api/half-simple'), { body: '{"a":[1]}' }), 'GW_ERR_ROUTE_CONFIG_INVALID',
        "route /api/half-simple: inputs: the model's input 'INPUT1' has no source");
    });
  });

  describe('REQUEST', () => {
    test('GW_ERR_REQUEST_ENCODING_UNSUPPORTED: Content-Encoding br, with Accept-Encoding in the answer', async () => {
      const r = await send(url('/v2/models/identity_fp32/infer'), { body: fp32Json, headers: { 'Content-Encoding': 'br' } });
      expectError(r, 'GW_ERR_REQUEST_ENCODING_UNSUPPORTED', 'Unsupported compression type');
      expect(r.headers['accept-encoding']).toBe('gzip, deflate');
    });

    test('GW_ERR_REQUEST_HEADER_INVALID: a negative Inference-Header-Content-Length', async () => {
      const body = Buffer.from(fp32Json);
      const r = await send(url('/v2/models/identity_fp32/infer'), { body, headers: { 'Inference-Header-Content-Length': -1 } });
      expectError(r, 'GW_ERR_REQUEST_HEADER_INVALID', `inference header size should be in range (0, ${body.length}), got: -1`);
    });

    test('GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE: a gzip body inflating past limits.maxInputSizeBytes', async () => {
      const inflated = Buffer.alloc(4 * MAX_INPUT, ' ');
      const body = gzipSync(inflated);
      expect(body.length).toBeLessThan(MAX_INPUT); // small on the wire: only inflating passes the limit
      const r = await send(url('/v2/models/identity_fp32/infer'), { body, headers: { 'Content-Encoding': 'gzip' } });
      expectError(r, 'GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE',
        `Decompressed data size exceeds the maximum allowed value of ${MAX_INPUT} bytes. Use --http-max-input-size to increase the limit.`);
    });

    test('GW_ERR_REQUEST_COMPRESSED_INVALID: a truncated gzip body, refused (Triton forwards what inflated)', async () => {
      const body = gzipSync(Buffer.from('{"inputs":[]}'));
      const r = await send(url('/v2/models/identity_fp32/infer'), { body: body.subarray(0, body.length - 8), headers: { 'Content-Encoding': 'gzip' } });
      expectError(r, 'GW_ERR_REQUEST_COMPRESSED_INVALID', 'the gzip request body could not be decompressed: unexpected end of file');
    });

    test('GW_ERR_REQUEST_TOO_LARGE: a declared Content-Length over limits.maxBodyBytes, refused before the body is read', async () => {
      const n = tap.mark();
      const r = await send(url('/v2/models/identity_fp32/infer'), { body: Buffer.alloc(MAX_BODY + 1000, ' ') });
      expectError(r, 'GW_ERR_REQUEST_TOO_LARGE', `request body of ${MAX_BODY + 1000} bytes exceeds the limit of ${MAX_BODY} bytes (limits.maxBodyBytes)`);
      const rec = await tap.after(n);
      expect(rec.ledger!.hops.ingress_read.bytesIn).toBe(0);
    });

    test('GW_ERR_REQUEST_TOO_LARGE: a chunked body, refused as soon as the count passes limits.maxBodyBytes', async () => {
      const r = await new Promise<RawResponse>((resolve, reject) => {
        // No Content-Length: Transfer-Encoding chunked. The first chunk fills the limit exactly and
        // the second adds one byte, so the count at refusal does not depend on how TCP splits them.
        const req = request(url('/v2/models/identity_fp32/infer'), { method: 'POST' }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.write(Buffer.alloc(MAX_BODY, ' '));
        req.end(Buffer.from(' '));
      });
      expectError(r, 'GW_ERR_REQUEST_TOO_LARGE', `request body of ${MAX_BODY + 1} bytes exceeds the limit of ${MAX_BODY} bytes (limits.maxBodyBytes)`);
    });

    test('GW_ERR_REQUEST_ABORTED: the client closes before Content-Length bytes arrived (record and counter)', async () => {
      // The model's config is cached first, so the body is being read when the client leaves.
      expect((await send(url('/v2/models/identity_fp32/infer'), { body: fp32Json })).status).toBe(200);
      const n = tap.mark();
      await new Promise<void>((resolve, reject) => {
        // 100-continue: the gateway's answer to it says the request reached the handler.
        const req = request(url('/v2/models/identity_fp32/infer'), { method: 'POST', headers: { 'Content-Length': 1000, Expect: '100-continue' } });
        req.on('error', () => { /* destroyed by us */ });
        req.on('response', (res) => reject(new Error(`unexpected answer ${res.statusCode}`)));
        req.on('continue', () => req.write('{"inputs":[', () => {
          req.destroy();
          resolve();
        }));
      });
      const rec: RequestRecord = await tap.after(n);
      expect({ route: rec.route, status: rec.status, errorCode: rec.errorCode }).toEqual({ route: 'infer', status: 400, errorCode: 'GW_ERR_REQUEST_ABORTED' });
      expect(await errorCount(gw.metricsUrl!, 'GW_ERR_REQUEST_ABORTED', 'infer')).toBe(1);
    });
  });

  describe('DECODE', () => {
    test('GW_ERR_DECODE_MALFORMED: JSON that does not parse', async () => {
      expectError(await send(url('/v2/models/identity_fp32/infer'), { body: '{"inputs":[' }), 'GW_ERR_DECODE_MALFORMED',
        'failed to parse the request JSON buffer: Invalid value. at 11');
    });

    test('GW_ERR_DECODE_INVALID: an FP16 input in JSON', async () => {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 1], data: [1] }] });
      expectError(await send(url('/v2/models/identity_fp16/infer'), { body }), 'GW_ERR_DECODE_INVALID',
        'receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0');
    });

    test('GW_ERR_DECODE_TOO_LARGE: a JSON body over limits.maxInputSizeBytes', async () => {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [1] }], pad: ' '.repeat(MAX_INPUT) });
      expectError(await send(url('/v2/models/identity_fp32/infer'), { body }), 'GW_ERR_DECODE_TOO_LARGE',
        `request JSON size of ${body.length} bytes exceeds the maximum allowed input size of ${MAX_INPUT} bytes. Use --http-max-input-size to increase the limit.`);
    });

    test('GW_ERR_DECODE_BASE64_INVALID: a character outside both alphabets', async () => {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 3], data: { b64: 'AB*D' } }] });
      expectError(await send(url('/v2/models/identity_uint8/infer'), { body }), 'GW_ERR_DECODE_BASE64_INVALID',
        'Unable to parse \'data\': invalid base64 for input \'INPUT0\': character "*" at offset 2');
    });

    test('GW_ERR_DECODE_BASE64_SIZE: base64 that decodes to other than shape × datatype size', async () => {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 4], data: { b64: 'AQID' } }] });
      expectError(await send(url('/v2/models/identity_uint8/infer'), { body }), 'GW_ERR_DECODE_BASE64_SIZE',
        "Unable to parse 'data': base64 for input 'INPUT0' decodes to 3 bytes, expected 4 bytes from shape and datatype");
    });

    test('GW_ERR_DECODE_ROUTE_INVALID: a declarative route\'s body without the field its pointer names', async () => {
      expectError(await send(url('/api/text-length'), { body: '{"document":{}}' }), 'GW_ERR_DECODE_ROUTE_INVALID',
        'route /api/text-length: inputs.BLOB.from: the body has no /document/text');
    });

    test('GW_ERR_DECODE_V1_INVALID: a predict body with neither instances nor inputs', async () => {
      expectError(await send(url('/v1/models/simple:predict'), { body: '{}' }), 'GW_ERR_DECODE_V1_INVALID',
        "the body must have 'instances' (row format) or 'inputs' (columnar format)");
    });

    test('GW_ERR_DECODE_RAW_UNDEDUCIBLE: a raw body for a model with two inputs', async () => {
      const r = await send(url('/v2/models/simple/infer'), { body: Buffer.alloc(64), headers: { 'Inference-Header-Content-Length': 0 } });
      expectError(r, 'GW_ERR_DECODE_RAW_UNDEDUCIBLE',
        "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration");
    });

    test('GW_ERR_DECODE_UPLOAD_UNFIT: an image/jpeg body for a model with two INT32 inputs', async () => {
      const r = await send(url('/v2/models/simple/infer'), { body: Buffer.alloc(64), headers: { 'Content-Type': 'image/jpeg' } });
      expectError(r, 'GW_ERR_DECODE_UPLOAD_UNFIT',
        "a body of type image/jpeg is an upload: it goes to a model with exactly one BYTES or UINT8 input, and model 'simple' has 'INPUT0' INT32, 'INPUT1' INT32; send raw tensor data with 'Inference-Header-Content-Length: 0', or a V2 request");
    });

    test('GW_ERR_DECODE_MULTIPART_INVALID: a multipart body that ends inside its part', async () => {
      const body = '--B\r\nContent-Disposition: form-data; name="BLOB"; filename="a"\r\n\r\nhello';
      const r = await send(url('/v2/models/blob_len/infer'), { body, headers: { 'Content-Type': 'multipart/form-data; boundary=B' } });
      expectError(r, 'GW_ERR_DECODE_MULTIPART_INVALID', 'the multipart/form-data body is malformed: Unexpected end of multipart data');
    });

    test('GW_ERR_DECODE_UNSUPPORTED: a log file location, a repository name on load', async () => {
      expectError(await send(url('/v2/logging'), { body: '{"log_file":"/tmp/triton.log"}' }), 'GW_ERR_DECODE_UNSUPPORTED',
        'log file location can not be updated through network protocol');
      expectError(await send(url('/v2/repository/other/models/simple/load'), { body: '{}' }), 'GW_ERR_DECODE_UNSUPPORTED',
        "'repository_name' specification is not supported");
    });

    test('GW_ERR_DECODE_LOG_FORMAT_INVALID: a log_format other than default or ISO8601', async () => {
      expectError(await send(url('/v2/logging'), { body: '{"log_format":"xml"}' }), 'GW_ERR_DECODE_LOG_FORMAT_INVALID',
        'invalid argument for --log_format, got: xml');
    });
  });

  describe('MODEL', () => {
    test('GW_ERR_MODEL_NOT_READY: readiness of a model version Triton does not have ready', async () => {
      expectError(await send(url('/v2/models/simple/versions/7/ready')), 'GW_ERR_MODEL_NOT_READY', 'Model version not ready');
      expectError(await send(url('/v2/models/nope/ready')), 'GW_ERR_MODEL_NOT_READY', 'Model version not ready');
    });

    test('GW_ERR_MODEL_DECOUPLED: HTTP infer on a decoupled model without Accept: text/event-stream', async () => {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }] });
      expectError(await send(url('/v2/models/repeat_int32/infer'), { body }), 'GW_ERR_MODEL_DECOUPLED',
        "HTTP end point doesn't support models with decoupled transaction policy unless the request accepts server-sent events: send 'Accept: text/event-stream' to get each response as an event");
    });
  });

  describe('ENCODE', () => {
    test('GW_ERR_ENCODE_UNSUPPORTED: an FP16 output asked for as JSON', async () => {
      const { body, headers } = binaryBody({
        inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 1], parameters: { binary_data_size: 2 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }],
      }, Buffer.from([0x00, 0x3c]));
      expectError(await send(url('/v2/models/identity_fp16/infer'), { body, headers }), 'GW_ERR_ENCODE_UNSUPPORTED',
        'sending FP16 data via JSON is not supported. Please use the binary data format for output');
    });
  });

  describe('UPSTREAM', () => {
    test('GW_ERR_UPSTREAM_STATUS: Triton\'s own error, its status and message', async () => {
      expectError(await send(url('/v2/models/nope/infer'), { body: fp32Json }), 'GW_ERR_UPSTREAM_STATUS',
        "Request for unknown model: 'nope' is not found", { status: 404, plain: true });
    });

    test('GW_ERR_UPSTREAM_STREAM_ERROR: generate, and Triton reports an error inside the stream', async () => {
      expectError(await send(url('/v2/models/repeat_int32/generate'), { body: '{"INPUT0":3,"fail_after":0}' }), 'GW_ERR_UPSTREAM_STREAM_ERROR',
        'RuntimeError: repeat_int32 failed after 0 responses');
    });

    test('GW_ERR_UPSTREAM_CANCELLED: the client goes away during a slow model call (record and counter)', async () => {
      const stats = gw.demoBackend!.stats;
      const calls = stats.inferCalls;
      const cancelled = stats.slowCancellations;
      const n = tap.mark();
      const req = request(url('/v2/models/slow/infer'), { method: 'POST' });
      req.on('error', () => { /* destroyed by us */ });
      req.end(JSON.stringify({ parameters: { delay_ms: 10_000 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }));
      await until(() => stats.inferCalls > calls, 'the model call to start');
      req.destroy();
      const rec = await tap.after(n);
      expect({ route: rec.route, status: rec.status, errorCode: rec.errorCode }).toEqual({ route: 'infer', status: 499, errorCode: 'GW_ERR_UPSTREAM_CANCELLED' });
      expect(await errorCount(gw.metricsUrl!, 'GW_ERR_UPSTREAM_CANCELLED', 'infer')).toBe(1);
      await until(() => stats.slowCancellations > cancelled, 'the backend to see the cancellation');
    });
  });

  describe('PASSTHROUGH', () => {
    test('GW_ERR_PASSTHROUGH_UNAVAILABLE: the upstream refuses the connection', async () => {
      expectError(await send(url('/gone/x')), 'GW_ERR_PASSTHROUGH_UNAVAILABLE', `upstream http://127.0.0.1:${gonePort} failed: ECONNREFUSED`);
    });

    test('GW_ERR_PASSTHROUGH_PATH_INVALID: an encoded slash under a pass-through prefix', async () => {
      expectError(await send(url('/legacy/a%2Fb')), 'GW_ERR_PASSTHROUGH_PATH_INVALID', 'the path is refused: an encoded slash (%2F)');
    });

    test('GW_ERR_PASSTHROUGH_TIMEOUT: no response headers within timeoutMs', async () => {
      expectError(await send(url('/legacy/slow')), 'GW_ERR_PASSTHROUGH_TIMEOUT', `upstream http://127.0.0.1:${legacyPort} did not answer in time`);
    });
  });
});

describe('against a Triton that misbehaves (gRPC peer)', () => {
  const { TYPE_INT32 } = inference.DataType;
  const peer = new GrpcPeer({
    int32: { name: 'int32', input: [{ name: 'INPUT0', data_type: TYPE_INT32, dims: [-1] }], output: [{ name: 'OUTPUT0', data_type: TYPE_INT32, dims: [-1] }] },
  });
  let gw: RunningGateway;
  beforeAll(async () => {
    await peer.start();
    gw = await gatewayFor(['--backend', peer.address, '--upstream-timeout-ms', '300']);
  });
  afterAll(async () => {
    await bounded(gw.close(), 'the gateway');
    await bounded(peer.close(), 'the gRPC peer');
  });
  afterEach(() => {
    peer.onInfer = GrpcPeer.echoWhenRead;
    peer.onCall = {};
  });
  const infer = (): Promise<RawResponse> => send(`${gw.url}/v2/models/int32/infer`, {
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }] }),
  });
  /** The peer answers every ModelInfer with this message (gRPC-framed, status OK). */
  const answerWith = (message: Uint8Array): void => {
    peer.onInfer = (call) => call.stream.on('end', () => GrpcPeer.answer(call.stream, message));
  };

  test('GW_ERR_UPSTREAM_DEADLINE: no answer within upstream.timeoutMs', async () => {
    peer.onInfer = () => { /* never answers */ };
    expectError(await infer(), 'GW_ERR_UPSTREAM_DEADLINE', 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for');
  });

  test('GW_ERR_UPSTREAM_PROTOCOL: a message flagged compressed', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      call.stream.on('wantTrailers', () => call.stream.sendTrailers({ 'grpc-status': '0' }));
      call.stream.end(Buffer.from([1, 0, 0, 0, 0]));
    });
    expectError(await infer(), 'GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression');
  });

  test('GW_ERR_UPSTREAM_PROTOCOL: a ModelInferResponse that does not decode', async () => {
    // One output (field 5) whose name claims 5 bytes of a 2-byte entry.
    answerWith(Buffer.from([0x2a, 0x02, 0x0a, 0x05]));
    expectError(await infer(), 'GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a ModelInferResponse that does not decode: index out of range: 4 + 5 > 4');
  });

  test('GW_ERR_UPSTREAM_PROTOCOL: an answer that ends without grpc-status', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      call.stream.end(Buffer.from([0, 0, 0, 0, 0])); // an empty message, then END_STREAM without trailers
    });
    expectError(await infer(), 'GW_ERR_UPSTREAM_PROTOCOL', `upstream response from ${peer.address} ended without a gRPC status`);
  });

  test('GW_ERR_UPSTREAM_PROTOCOL: generate, and a ModelStreamInferResponse that does not decode', async () => {
    peer.onCall = {
      ModelMetadata: (stream) => GrpcPeer.answer(stream, inference.ModelMetadataResponse.encode({
        name: 'int32', versions: ['1'], platform: 'peer',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1] }], outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [-1] }],
      }).finish()),
      // error_message (field 2) claiming 5 bytes of a 2-byte message
      ModelStreamInfer: (stream) => GrpcPeer.answer(stream, Buffer.from([0x12, 0x05])),
    };
    expectError(await send(`${gw.url}/v2/models/int32/generate`, { body: '{"INPUT0":[1,2]}' }), 'GW_ERR_UPSTREAM_PROTOCOL',
      'upstream sent a ModelStreamInferResponse that does not decode: index out of range');
  });

  test('GW_ERR_UPSTREAM_UNAVAILABLE: the stream is reset after the response headers, before any status', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      call.stream.destroy(new Error('peer gone')); // RST_STREAM INTERNAL_ERROR; close() would send END_STREAM first
    });
    expectError(await infer(), 'GW_ERR_UPSTREAM_UNAVAILABLE',
      `upstream unavailable: stream from ${peer.address} reset (${constants.NGHTTP2_INTERNAL_ERROR}) before its gRPC status`);
  });

  test('GW_ERR_ENCODE_MALFORMED: an output whose bytes do not match its shape', async () => {
    answerWith(inference.ModelInferResponse.encode({
      model_name: 'int32', model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [2] }],
      raw_output_contents: [Buffer.alloc(6)],
    }).finish());
    expectError(await infer(), 'GW_ERR_ENCODE_MALFORMED', "Failed to write 'data' field: output tensor shape does not match size of output for 'OUTPUT0'");
  });
});

test('GW_ERR_UPSTREAM_UNAVAILABLE: the backend\'s port is closed', async () => {
  const port = await deadPort();
  const gw = await gatewayFor(['--backend', `127.0.0.1:${port}`]);
  try {
    const r = await send(`${gw.url}/v2/models/simple/infer`, { body: fp32Json });
    // grpc-js's words after the prefix.
    expectError(r, 'GW_ERR_UPSTREAM_UNAVAILABLE',
      `upstream unavailable: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:${port}. Resolution note: `);
  } finally {
    await bounded(gw.close(), 'the gateway');
  }
});

test('GW_ERR_GATEWAY_INTERNAL: an exception that escapes a handler (a bug) is a 500 that says what it was', async () => {
  // No request from outside reaches this (any that did would be a bug to fix); a route of the
  // test's own throws instead, to show what a client would see.
  const server = createHttpServer([{ name: 'bug', pattern: /^\/bug$/, methods: { GET: async () => { throw new TypeError('x is not a function'); } } }],
    { start: () => ({ upstreamHeaders: {}, end: () => undefined }) }, { corsOrigin: '', limits: DEFAULTS.limits, timeouts: DEFAULTS.server, head: DEFAULTS.server, h2: DEFAULTS.server.h2 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const r = await send(`http://127.0.0.1:${(server.address() as AddressInfo).port}/bug`);
    expectError(r, 'GW_ERR_GATEWAY_INTERNAL', 'internal error: x is not a function');
  } finally {
    await bounded(closeServer(server), 'the test server');
  }
});
