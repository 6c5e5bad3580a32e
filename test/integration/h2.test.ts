// HTTP/2 ingress (docs/production.md#http2): HTTP/1.1 and h2c with prior knowledge on one
// cleartext port, h2 and http/1.1 by ALPN on the TLS port; every REST dialect answers over h2c
// and h2 exactly as over HTTP/1.1 (status, body bytes, every header HTTP/2 allows); the session
// limits (server.h2.*), the rapid-reset bound, in-flight bounds and timeouts per stream, GOAWAY
// on drain; and gRPC streams never reach the REST routes (UNIMPLEMENTED until a handler is wired).
import { constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import type { GrpcStream } from '../../gateway/ingress/h2';
import { connect as netConnect } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../gateway/config/load';
import type { RunningGateway } from '../../gateway/gateway';
import { createHttpServer } from '../../gateway/ingress/server';
import { makePki, type Pki, pemText } from '../support/certs';
import { gatewayFor } from '../support/gateway';
import { comparableHeaders, h2Connect, h2Open, h2Send } from '../support/h2';
import { binaryBody, type RawResponse, send } from '../support/http';
import { RecordTap } from '../support/records';
import { nextEvent, waitUntil } from '../support/wait';
import { request as httpsRequest } from 'node:https';
import { needs, OPENSSL } from '../support/tools';
import { int32 } from '../support/int32';

jest.setTimeout(60_000);

const X = Array.from({ length: 16 }, (_, i) => i);
const Y = Array.from({ length: 16 }, () => 1);

interface Case { readonly path: string; readonly headers?: Record<string, string | number>; readonly body?: Buffer | string }

/** One request of every dialect (and an error answer, and a control route) on the demo zoo. */
const DIALECTS: Record<string, Case> = {
  'V2 JSON': {
    path: '/v2/models/simple/infer',
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: X }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Y }] }),
  },
  'binary extension': (() => {
    const b = binaryBody({
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
      parameters: { binary_data_output: true },
    }, int32(X), int32(Y));
    return { path: '/v2/models/simple/infer', headers: b.headers, body: b.body };
  })(),
  raw: { path: '/v2/models/identity_fp32/infer', headers: { 'Inference-Header-Content-Length': 0 }, body: Buffer.from(new Float32Array([1, 2, 3, 4]).buffer) },
  base64: {
    path: '/v2/models/simple/infer',
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: { b64: int32(X).toString('base64') } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: { b64: int32(Y).toString('base64') } }] }),
  },
  'V1 predict': { path: '/v1/models/identity_fp32:predict', body: JSON.stringify({ instances: [[1, 2, 3]] }) },
  'generate SSE': { path: '/v2/models/repeat_int32/generate_stream', body: '{"INPUT0":3,"id":"abc"}' },
  'an error answer (unknown model)': { path: '/v2/models/nope/infer', body: '{"inputs":[]}' },
  'model metadata': { path: '/v2/models/simple' },
};

/** The answer as HTTP/1.1 and HTTP/2 must share it. */
const comparable = (r: RawResponse): unknown => ({ status: r.status, headers: comparableHeaders(r.headers), body: r.body.toString('latin1') });

describe('one cleartext port: HTTP/1.1 and h2c with prior knowledge', () => {
  let gw: RunningGateway;
  let h2: ClientHttp2Session;
  const tap = new RecordTap();
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
    h2 = await h2Connect(gw.url);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    h2?.close();
    await gw?.close(2000);
  });

  test.each(Object.keys(DIALECTS))('%s: h2c answers byte for byte as HTTP/1.1', async (name) => {
    const c = DIALECTS[name]!;
    const h1 = await send(`${gw.url}${c.path}`, { headers: c.headers, body: c.body });
    const over2 = await h2Send(h2, c.path, { headers: c.headers, body: c.body });
    expect(h1.status).not.toBe(0);
    expect(comparable(over2)).toEqual(comparable(h1));
    expect(over2.headers.connection).toBeUndefined();
  });

  test('telemetry: each request says its protocol (network.protocol.version 1.1 or 2), on the duration metric too', async () => {
    const mark = tap.mark();
    await send(`${gw.url}/v2/health/live`);
    await h2Send(h2, '/v2/health/live');
    await tap.until(mark + 2);
    expect(tap.records.slice(mark).map((r) => r.protocol).sort()).toEqual(['1.1', '2']);
    const text = await (await fetch(gw.metricsUrl!)).text();
    expect(text).toMatch(/http_server_request_duration_count\{http_route="health_live",http_request_method="GET",http_response_status_code="200",network_protocol_version="2"\} 1/);
  });

  test('many streams of one session are served concurrently, and the session advertises the server.h2.* settings', async () => {
    const c = DIALECTS['V2 JSON']!;
    const answers = await Promise.all(Array.from({ length: 20 }, () => h2Send(h2, c.path, { body: c.body })));
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200]));
    expect(h2.remoteSettings).toMatchObject({ maxConcurrentStreams: 100, initialWindowSize: 1024 * 1024, maxHeaderListSize: 16 * 1024, enablePush: false });
  });

  test('gRPC on the REST port goes to the pass-through: Triton\'s answer relayed; an unknown service UNIMPLEMENTED in trailers-only form, never an HTTP error', async () => {
    const live = await h2Send(h2, '/inference.GRPCInferenceService/ServerLive', { headers: { 'content-type': 'application/grpc', te: 'trailers' }, body: Buffer.alloc(5) });
    expect(live.status).toBe(200);
    expect(live.headers['content-type']).toMatch(/^application\/grpc/);
    // ServerLiveResponse { live: true }: a 5-byte prefix and the 2-byte message (field 1, varint 1).
    expect(live.body).toEqual(Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]));
    const r = await h2Send(h2, '/some.Other/Method', { headers: { 'content-type': 'application/grpc', te: 'trailers' }, body: Buffer.alloc(5) });
    expect(r.status).toBe(200);
    expect(r.headers).toMatchObject({ 'content-type': 'application/grpc', 'grpc-status': '12' });
    expect(r.body.length).toBe(0);
  });

  test('header bounds: one field past server.maxHeaderCount is 431; a header list past server.maxHeaderBytes is refused on its stream and the session lives on', async () => {
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`x-h${i}`, '1']));
    const r = await h2Send(h2, '/v2/health/live', { headers: many });
    expect(r.status).toBe(431);
    expect(JSON.parse(r.body.toString())).toEqual({ error: 'the request has more than 100 header fields (server.maxHeaderCount)' });
    // An HPACK bomb is a header list that decodes far past the advertised SETTINGS_MAX_HEADER_LIST_SIZE.
    await expect(h2Send(h2, '/v2/health/live', { headers: { 'x-big': 'a'.repeat(20_000) } })).rejects.toMatchObject({ rstCode: constants.NGHTTP2_ENHANCE_YOUR_CALM });
    expect((await h2Send(h2, '/v2/health/live')).status).toBe(200);
    expect(h2.destroyed).toBe(false);
  });

  test('an early answer to an unread body resets only its stream (NO_ERROR); the session serves the next request', async () => {
    const { stream, answer } = h2Open(h2, '/v2/models/nope/infer', { method: 'POST', headers: { 'content-length': 10 * 1024 * 1024 } });
    stream.write(Buffer.alloc(64 * 1024));
    const r = await answer;
    expect(r.status).toBe(404);
    expect(r.rstCode).toBe(constants.NGHTTP2_NO_ERROR);
    expect((await h2Send(h2, '/v2/health/live')).status).toBe(200);
  });

  test('HTTP/1.1 on the same port still pipelines and keeps alive (the sniffed bytes are put back)', async () => {
    const socket = netConnect(gw.port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1').on('data', (d: string) => { text += d; });
    socket.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitUntil(() => (text.match(/HTTP\/1\.1 200 OK/g) ?? []).length === 2, 'two answers on one connection');
    socket.destroy();
  });
});

needs(OPENSSL()).describe('h2 over TLS: ALPN h2 and http/1.1 on the TLS port', () => {
  let pki: Pki;
  let gw: RunningGateway;
  let h2: ClientHttp2Session;
  beforeAll(async () => {
    pki = makePki();
    gw = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key]);
    h2 = await h2Connect(gw.url, { ca: pemText(pki.ca.cert), servername: 'localhost' });
  });
  afterAll(async () => {
    h2?.close();
    await gw?.close(2000);
    pki?.remove();
  });

  /** HTTP/1.1 over TLS with ALPN http/1.1. */
  const send1 = (c: Case): Promise<RawResponse> => new Promise((resolve, reject) => {
    const body = typeof c.body === 'string' ? Buffer.from(c.body) : c.body;
    const req = httpsRequest(`${gw.url}${c.path}`, {
      method: body ? 'POST' : 'GET', headers: { ...(body ? { 'Content-Length': body.length } : {}), ...c.headers },
      ca: pemText(pki.ca.cert), servername: 'localhost', ALPNProtocols: ['http/1.1'], agent: false,
    } as import('node:https').RequestOptions, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (x: Buffer) => chunks.push(x));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });

  test('ALPN chose h2', () => {
    expect(h2.alpnProtocol).toBe('h2');
    expect(h2.encrypted).toBe(true);
  });

  test.each(Object.keys(DIALECTS))('%s: h2 over TLS answers byte for byte as HTTP/1.1 over TLS', async (name) => {
    const c = DIALECTS[name]!;
    const h1 = await send1(c);
    const over2 = await h2Send(h2, c.path, { headers: c.headers, body: c.body });
    expect(comparable(over2)).toEqual(comparable(h1));
  });
});

describe('HTTP/2 limits, timeouts and drain', () => {
  test('rapid reset (CVE-2023-44487): past server.h2.maxResetsPerSecond the session gets GOAWAY ENHANCE_YOUR_CALM and is closed; other sessions are served', async () => {
    const gw = await gatewayFor(['--demo', '--h2-max-resets-per-second', '50']);
    try {
      const attacker = await h2Connect(gw.url);
      const goaway = nextEvent(attacker, 'goaway', 10_000);
      attacker.on('error', () => undefined); // ERR_HTTP2_SESSION_ERROR: the GOAWAY's code
      const closed = new Promise((resolve) => attacker.once('close', resolve));
      // Open and reset at once, in a loop, as the attack does.
      for (let i = 0; i < 500 && !attacker.destroyed && !attacker.closed; i++) {
        const s = attacker.request({ ':path': '/v2/health/live' });
        s.on('error', () => undefined);
        s.close(constants.NGHTTP2_CANCEL);
        if (i % 20 === 19) await new Promise((r) => setImmediate(r));
      }
      const [code] = await goaway;
      expect(code).toBe(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      await closed;
      const other = await h2Connect(gw.url);
      expect((await h2Send(other, '/v2/health/live')).status).toBe(200);
      other.close();
    } finally {
      await gw.close(2000);
    }
  });

  test('in-flight bounds count streams: past limits.maxInFlightRequests a stream gets 503 with Retry-After', async () => {
    const gw = await gatewayFor(['--demo', '--max-in-flight-requests', '1']);
    const h2 = await h2Connect(gw.url);
    try {
      const started = nextEvent(gw.demoBackend!.events, 'slow-started');
      const slow = h2Send(h2, '/v2/models/slow/infer', { body: JSON.stringify({ parameters: { delay_ms: 500 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }) });
      await started;
      const refused = await h2Send(h2, '/v2/models/simple/infer', { body: DIALECTS['V2 JSON']!.body });
      expect(refused.status).toBe(503);
      expect(refused.headers).toMatchObject({ 'retry-after': '1', 'x-tensorgate-error': 'GW_ERR_REQUEST_OVERLOADED' });
      expect((await slow).status).toBe(200);
    } finally {
      h2.close();
      await gw.close(2000);
    }
  });

  test('an early answer the client opens no window for, its body still arriving: reset with CANCEL after server.h2.unreadAnswerMs, never NO_ERROR before END_STREAM', async () => {
    const gw = await gatewayFor(['--demo', '--h2-unread-answer-ms', '1000']);
    const h2 = await h2Connect(gw.url, { settings: { initialWindowSize: 0 } });
    h2.on('error', () => undefined);
    try {
      const { stream, answer } = h2Open(h2, '/nope', { method: 'POST', headers: { 'content-length': 1000 } });
      stream.write('{"inputs":'); // and no more: the body is still arriving when the 404 is given
      const t0 = performance.now();
      const cut = await answer.then(() => undefined, (err: { rstCode?: number }) => err.rstCode);
      // The 404's headers may or may not have been read; its body (21 bytes) never could be.
      expect([cut ?? stream.rstCode]).toEqual([constants.NGHTTP2_CANCEL]);
      expect(performance.now() - t0).toBeGreaterThan(900);
      expect(performance.now() - t0).toBeLessThan(10_000);
      // The session lives on.
      expect((await h2Send(h2, '/v2/health/live')).status).toBe(200);
    } finally {
      h2.destroy();
      await gw.close(2000);
    }
  });

  test('a stream whose body is not complete within server.requestTimeoutMs gets 408; an idle session closes after server.keepAliveTimeoutMs', async () => {
    const gw = await gatewayFor(['--demo', '--request-timeout-ms', '500', '--headers-timeout-ms', '500', '--keep-alive-timeout-ms', '800']);
    const h2 = await h2Connect(gw.url);
    try {
      const { stream, answer } = h2Open(h2, '/v2/models/simple/infer', { method: 'POST', headers: { 'content-length': 1000 } });
      stream.write('{"inputs":');
      const r = await answer;
      expect(r.status).toBe(408);
      expect(JSON.parse(r.body.toString())).toEqual({ error: 'the request was not complete within 500 ms (server.requestTimeoutMs)' });
      // Nothing more happens on the session: GOAWAY and close after the keep-alive timeout.
      const t0 = performance.now();
      await once(h2, 'close');
      expect(performance.now() - t0).toBeGreaterThan(300);
    } finally {
      h2.destroy();
      await gw.close(2000);
    }
  });

  test('drain: GOAWAY lets a stream in flight finish; a new stream after it is refused; the drain ends in time', async () => {
    const gw = await gatewayFor(['--demo']);
    const h2 = await h2Connect(gw.url);
    try {
      const started = nextEvent(gw.demoBackend!.events, 'slow-started');
      const slow = h2Send(h2, '/v2/models/slow/infer', { body: JSON.stringify({ parameters: { delay_ms: 300 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }) });
      await started;
      const goaway = nextEvent(h2, 'goaway');
      const closing = gw.close(5000);
      expect((await goaway)[0]).toBe(constants.NGHTTP2_NO_ERROR);
      // node:http2 refuses a stream after GOAWAY synchronously (ERR_HTTP2_GOAWAY_SESSION).
      await expect(Promise.resolve().then(() => h2Send(h2, '/v2/health/live'))).rejects.toThrow();
      expect((await slow).status).toBe(200);
      expect(await closing).toEqual({ requestsCut: 0 });
    } finally {
      h2.destroy();
      await gw.close(2000);
    }
  });

  test('drain deadline: a stream still uploading is cut with its session, and counted', async () => {
    const gw = await gatewayFor(['--demo']);
    const h2 = await h2Connect(gw.url);
    h2.on('error', () => undefined);
    try {
      const { stream, answer } = h2Open(h2, '/v2/models/simple/infer', { method: 'POST', headers: { 'content-length': 1000 } });
      stream.write('{"inputs":');
      // Streams are taken in order: once a later one is answered, the upload's stream is open.
      expect((await h2Send(h2, '/v2/health/live')).status).toBe(200);
      expect(await gw.close(300)).toEqual({ requestsCut: 1 });
      await expect(answer).rejects.toThrow();
    } finally {
      h2.destroy();
    }
  });
});

describe('the gRPC hook', () => {
  const loaded = loadConfig({ argv: ['--demo'], env: {} });
  const DEFAULTS = (loaded.help ? undefined : loaded.config)!;

  test('streams with content-type application/grpc go to options.grpc with their headers, never to the routes', async () => {
    const seen: IncomingHttpHeaders[] = [];
    let routed = 0;
    const grpc = (stream: GrpcStream, headers: IncomingHttpHeaders): void => {
      seen.push(headers);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    };
    const server = createHttpServer([{ name: 'any', pattern: /^\//, methods: { POST: async (ctx) => { routed++; ctx.res.end(); } } }],
      { start: () => ({ upstreamHeaders: {}, end: () => undefined }) },
      { corsOrigin: '', limits: DEFAULTS.limits, timeouts: DEFAULTS.server, head: DEFAULTS.server, h2: DEFAULTS.server.h2, grpc });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const h2 = await h2Connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const r = await h2Send(h2, '/inference.GRPCInferenceService/ModelInfer', { headers: { 'content-type': 'application/grpc+proto', te: 'trailers' }, body: Buffer.alloc(5) });
      expect(r.status).toBe(200);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc+proto' });
      expect((await h2Send(h2, '/rest', { body: '{}' })).status).toBe(200);
      expect(routed).toBe(1);
    } finally {
      h2.close();
      await server.drain(1000);
    }
  });
});
