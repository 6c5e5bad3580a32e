// Shutdown with a deadline (server.drainTimeoutMs): close() makes /readyz 503, serves on for its
// grace (server.drainGraceMs on a signal), then stops accepting, closes idle keep-alive
// connections at once, lets requests in flight finish until the deadline, then cuts the
// connections still open and cancels their upstream calls; it says how many it cut. Regression: `npm test` hung on a
// fresh clone because close() waited without a bound for every connection to end.
import { Agent, type ClientRequest, createServer, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { ControlPlane } from '../../gateway/upstream/control/control-plane';
import type { CallOptions } from '../../gateway/upstream/infer/data-plane';
import { GrpcJsDataPlane } from '../../gateway/upstream/infer/grpc-js-plane';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import { StreamInferPlane } from '../../gateway/upstream/infer/stream-plane';
import { inference } from '../../proto/services';
import { gatewayFor, HTTP2_CLIENT } from '../support/gateway';
import { nextEvent, requestStarted } from '../support/wait';
import { fixedBackends } from '../support/upstream';

/** Short, so the suite stays fast; what matters is that close() ends near it, not later. */
const DEADLINE_MS = 1000;
/** What close() may take beyond the deadline on a busy 2-core machine (cancels, telemetry, timers firing late). */
const SLACK_MS = 1500;
const SHUTDOWN = {
  code: 'GW_ERR_UPSTREAM_UNAVAILABLE',
  message: 'upstream unavailable: the gateway is shutting down (server.drainTimeoutMs has passed)',
};

const slowJson = (delayMs: number): string => JSON.stringify({
  parameters: { delay_ms: delayMs },
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }],
});

interface Outcome {
  readonly status?: number;
  readonly connection?: string | undefined;
  readonly error?: string | undefined;
  /** performance.now() when it settled. */
  readonly at: number;
}

interface Held {
  readonly method?: string;
  readonly headers?: Record<string, string | number>;
  readonly body: Buffer | string;
  /** false: the request's body is never finished. */
  readonly end: boolean;
  readonly agent?: Agent;
}

/**
 * A request the test may leave open; `outcome` settles with the answer, or with the error that
 * ended the connection.
 */
function hold(url: string, h: Held): { req: ClientRequest; outcome: Promise<Outcome> } {
  const req = request(url, { method: h.method ?? 'POST', headers: h.headers, agent: h.agent });
  const outcome = new Promise<Outcome>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      const answered = (): void => resolve({ status: res.statusCode, connection: res.headers.connection, at: performance.now() });
      res.on('end', answered);
      res.on('close', () => {
        if (!res.complete) resolve({ status: res.statusCode, error: 'cut mid-answer', at: performance.now() });
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, at: performance.now() }));
  });
  if (h.end) req.end(h.body);
  else req.write(h.body);
  return { req, outcome };
}

/** close(DEADLINE_MS) with requests held open: it waits for them until the deadline, and not much longer. */
async function closesAtTheDeadline(gw: RunningGateway, requestsCut: number): Promise<void> {
  const t0 = performance.now();
  const outcome = await gw.close(DEADLINE_MS);
  const took = performance.now() - t0;
  expect(took).toBeGreaterThanOrEqual(DEADLINE_MS - 1);
  expect(took).toBeLessThan(DEADLINE_MS + SLACK_MS);
  expect(outcome).toEqual({ requestsCut });
}

// HTTP/1.1 requests on the fast path (the default), and on node:http once.
describe.each([['h2', []], ['grpc-js', []], ['h2', ['--fast-path=false']]])('close() over %s %j', (transport, way) => {
  let backend: ReferenceBackend;
  let gw: RunningGateway;
  beforeEach(async () => {
    backend = await startReferenceBackend();
    gw = await gatewayFor(['--backend', backend.address, '--transport', transport, ...way]);
  });
  afterEach(async () => {
    await gw?.close(0);
    await backend.close(0);
  });

  test('returns at the deadline while clients hold requests open; their connections are cut and the upstream call is cancelled', async () => {
    // An upload that never ends (on h2 cut-through has its upstream call open already) …
    const uploading = requestStarted('/v2/models/identity_uint8/infer');
    const upload = hold(`${gw.url}/v2/models/identity_uint8/infer`, {
      headers: { 'Content-Length': 1 << 20, 'Inference-Header-Content-Length': 0 }, body: Buffer.alloc(1000), end: false,
    });
    await uploading;
    // … and a request waiting on a model that would answer in a minute.
    const slowStarted = nextEvent(backend.events, 'slow-started');
    const slow = hold(`${gw.url}/v2/models/slow/infer`, { body: slowJson(60_000), end: true });
    await slowStarted;

    const cancelled = nextEvent(backend.events, 'slow-cancelled');
    await closesAtTheDeadline(gw, 2);

    expect(await upload.outcome).toMatchObject({ error: 'ECONNRESET' });
    expect(await slow.outcome).toMatchObject({ error: 'ECONNRESET' });
    await cancelled; // Triton saw the call cancelled (RST_STREAM CANCEL), not just the gateway give up
    expect(backend.stats.slowCancellations).toBe(1);
  });

  test('a gRPC pass-through call still open at the deadline is cut, counted in requestsCut, and cancelled upstream', async () => {
    const session = connect(gw.url);
    session.on('error', () => undefined);
    try {
      const message = Buffer.from(inference.ModelInferRequest.encode({
        model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
        parameters: { delay_ms: { int64_param: 60_000 } },
      }).finish());
      const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
      framed.writeUInt32BE(message.length, 1);
      const slowStarted = nextEvent(backend.events, 'slow-started');
      const call = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' });
      call.on('error', () => undefined);
      call.end(framed);
      const closed = nextEvent(call, 'close', 10_000);
      await slowStarted;
      const cancelled = nextEvent(backend.events, 'slow-cancelled');
      await closesAtTheDeadline(gw, 1);
      await closed;
      await cancelled;
    } finally {
      session.destroy();
    }
  });

  test('a request that finishes within the deadline gets its answer with Connection: close; idle connections close at once; close() returns when it is done', async () => {
    // An idle keep-alive connection: closed when close() begins, not at keepAliveTimeout.
    const agent = new Agent({ keepAlive: true });
    const idle = hold(`${gw.url}/v2/health/live`, { method: 'GET', body: '', end: true, agent });
    const idleSocket = await new Promise<Socket>((resolve) => idle.req.once('socket', resolve));
    expect(await idle.outcome).toMatchObject({ status: 200 });
    const idleClosed = nextEvent(idleSocket, 'close').then(() => performance.now());

    const slowStarted = nextEvent(backend.events, 'slow-started');
    const slow = hold(`${gw.url}/v2/models/slow/infer`, { body: slowJson(300), end: true });
    await slowStarted;
    const t0 = performance.now();
    expect(await gw.close(10_000)).toEqual({ requestsCut: 0 });
    const took = performance.now() - t0;
    expect(took).toBeLessThan(5000);

    const answer = await slow.outcome;
    expect(answer).toMatchObject({ status: 200, connection: 'close' });
    expect(await idleClosed).toBeLessThan(answer.at);
    expect(backend.stats.slowCancellations).toBe(0);
    agent.destroy();
  });

  test('during the grace /readyz is 503 at once while requests on open and new connections are served as before; a second close() ends the grace', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const fresh = new Agent({ keepAlive: true });
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [7] }] });
    const infer = (a: Agent): Promise<{ status?: number; connection?: string; socket: Socket }> => new Promise((resolve, reject) => {
      const req = request(`${gw.url}/v2/models/identity_uint8/infer`, { method: 'POST', agent: a });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, connection: res.headers.connection, socket: req.socket! }));
      });
      req.on('error', reject);
      req.end(body);
    });
    try {
      const before = await infer(agent);
      expect(before).toMatchObject({ status: 200, connection: 'keep-alive' });

      const t0 = performance.now();
      // A grace far longer than the test: it ends only because of the second close() below.
      const closing = gw.close(10_000, 60_000);
      const readyz = await fetch(`${gw.url}/readyz`);
      expect([readyz.status, await readyz.text()]).toEqual([503, 'draining\n']);
      const onOpen = await infer(agent);
      expect(onOpen).toMatchObject({ status: 200, connection: 'keep-alive' });
      expect(onOpen.socket).toBe(before.socket); // the connection open before the signal, still kept
      const onNew = await infer(fresh); // a connection opened after the signal: accepted and kept
      expect(onNew).toMatchObject({ status: 200, connection: 'keep-alive' });
      expect(onNew.socket).not.toBe(before.socket);

      expect(gw.close()).toBe(closing);
      expect(await closing).toEqual({ requestsCut: 0 });
      expect(performance.now() - t0).toBeLessThan(5000);
      await expect(fetch(`${gw.url}/readyz`)).rejects.toThrow(); // no longer listening
    } finally {
      agent.destroy();
      fresh.destroy();
    }
  });

  test('a second close() returns the first one\'s promise', async () => {
    const first = gw.close(DEADLINE_MS);
    expect(gw.close(0)).toBe(first);
    await first;
  });
});

test('a pass-through request to an upstream that never answers is cut at the deadline, and the upstream sees it go', async () => {
  const upstream = createServer(); // takes the request and never answers
  const upstreamGot = nextEvent(upstream, 'request');
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const gw = await gatewayFor(['--demo', '--passthrough', JSON.stringify([{ prefix: '/legacy', upstream: origin }])]);
  try {
    const held = hold(`${gw.url}/legacy/predict`, { body: '{}', end: true });
    const [seen] = await upstreamGot as [IncomingMessage];
    const upstreamClosed = nextEvent(seen.socket, 'close');
    await closesAtTheDeadline(gw, 1);
    expect(await held.outcome).toMatchObject({ error: 'ECONNRESET' });
    await upstreamClosed;
  } finally {
    await gw.close(0);
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  }
});

describe('the upstream planes\' close() settles the calls still running, and refuses new ones', () => {
  let backend: ReferenceBackend;
  beforeAll(async () => {
    backend = await startReferenceBackend();
  });
  afterAll(async () => {
    await backend.close(0);
  });

  const slowRequest: inference.IModelInferRequest = {
    model_name: 'slow', parameters: { delay_ms: { int64_param: 60_000 } },
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
  };
  const framed = (): Buffer => {
    const body = inference.ModelInferRequest.encode(slowRequest).finish();
    const out = Buffer.alloc(5 + body.length);
    out.writeUInt32BE(body.length, 1);
    out.set(body, 5);
    return out;
  };
  const options = (): CallOptions => ({ deadline: Date.now() + 60_000, signal: new AbortController().signal, metadata: {} });

  test.each<[string, () => { call: () => Promise<unknown>; close: () => void }]>([
    ['h2 data plane', () => {
      const p = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
      return { call: () => p.modelInfer(framed(), options()), close: () => p.close() };
    }],
    ['grpc-js data plane', () => {
      const p = new GrpcJsDataPlane(fixedBackends([backend.address]));
      return { call: () => p.modelInfer(framed(), options()), close: () => p.close() };
    }],
    ['stream plane', () => {
      const p = new StreamInferPlane(fixedBackends([backend.address]));
      return { call: () => p.streamInfer(framed(), options(), { onMessage: () => undefined }), close: () => p.close() };
    }],
    ['control plane', () => {
      const p = new ControlPlane({ backends: fixedBackends([backend.address]), timeoutMs: 60_000, maxMessageBytes: 1 << 20 });
      return { call: () => p.call('ModelInfer', inference.ModelInferRequest.create(slowRequest)), close: () => p.close() };
    }],
  ])('%s', async (_name, make) => {
    const plane = make();
    const started = nextEvent(backend.events, 'slow-started');
    const call = plane.call();
    call.catch(() => undefined);
    await started;
    const cancelled = nextEvent(backend.events, 'slow-cancelled');
    plane.close();
    await expect(call).rejects.toMatchObject(SHUTDOWN);
    await cancelled;
    await expect(plane.call()).rejects.toMatchObject(SHUTDOWN);
  });
});

describe('close() with tracing on and the collector down', () => {
  test('the span export fails (connection refused) and close() still resolves within the deadline', async () => {
    // Port 9 (discard) has no listener here: the exporter's flush is refused at once.
    const gw = await gatewayFor(['--demo', '--tracing', '--otlp-endpoint', 'http://127.0.0.1:9/v1/traces']);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1, 2] }] });
    const r = await fetch(`${gw.url}/v2/models/identity_fp32/infer`, { method: 'POST', body });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    const started = Date.now();
    // A deadline long enough for the exporter to give up (its failure must not fail close()).
    await expect(gw.close(12_000)).resolves.toEqual({ requestsCut: 0 });
    expect(Date.now() - started).toBeLessThan(14_000);
  }, 30_000);
});
