// A closed upstream stream lets go of its call (unhook.ts). Node's native handle keeps the
// stream's JS object until a full collection, and V8's scavenges take that handle as a strong
// root: while the stream's listeners held the call, everything the call reached (its options,
// the receiver, and through them the request) survived every young collection and was promoted
// (12 of a 64 B request's 57 KiB, measured with --trace-gc-nvp). Here every stream the data plane
// opens is kept, and each must have no listener left but unhook's own once it has closed,
// whichever way its call ended. Whatever a kept stream still reaches stays reachable: a marker
// object held only by each call's receiver must be collectable. The gRPC pass-through's two
// streams of each call, the client's and the upstream one, and a REST request over h2 (its
// stream and Node's compatibility request and response) are held to the same.
import { connect, createServer, type ClientHttp2Session, type ClientHttp2Stream, Http2ServerResponse, type ServerHttp2Stream } from 'node:http2';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { h2Connect, h2Send } from '../support/h2';
import type { AddressInfo } from 'node:net';
import { grpcPassthrough } from '../../gateway/passthrough/grpc-ingress';
import { H2Connections } from '../../gateway/upstream/connections/h2-sessions';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { CallOptions, Receiver } from '../../gateway/upstream/infer/data-plane';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import { framedModelInfer } from '../support/model-infer';
import { fixedBackends } from '../support/upstream';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as (o?: { type: 'minor' | 'major' }) => void;

function framed(model: string, n: number): Buffer {
  return framedModelInfer(model, Buffer.alloc(n, 1)).message;
}

/**
 * Ten calls, each with a receiver that alone holds a marker (`markers` gets a weak reference to
 * each): 4 whole, 4 written in pieces, one Triton refuses (an unknown model: a trailers-only
 * answer) and one cancelled by its signal mid-upload. Returns what each settles to.
 */
function startCalls(plane: H2DataPlane, markers: WeakRef<object>[]): Promise<unknown>[] {
  const options = (signal = new AbortController().signal): CallOptions => {
    const marker = { bytes: new Array<number>(1024).fill(1) };
    markers.push(new WeakRef(marker));
    const receiver: Receiver = { data: () => marker.bytes.length < 0 };
    return { deadline: Date.now() + 30_000, signal, metadata: {}, receiver };
  };
  const ok = framed('identity_uint8', 64);
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < 4; i++) calls.push(plane.modelInfer(ok, options()));
  for (let i = 0; i < 4; i++) {
    const call = plane.startModelInfer(options());
    call.write(ok.subarray(0, 10));
    call.end(ok.subarray(10));
    calls.push(call.response);
  }
  calls.push(plane.modelInfer(framed('no_such_model', 8), options()).catch(() => undefined));
  const ac = new AbortController();
  const cancelled = plane.startModelInfer(options(ac.signal));
  cancelled.write(ok.subarray(0, 10));
  calls.push(cancelled.response.catch(() => undefined));
  ac.abort();
  return calls;
}

/**
 * Keeps every client stream this process opens from now on, strongly (as Node's handle keeps a
 * closed one), with the session it was opened on; restore() stops.
 */
function keepClientStreams(address: string): { readonly streams: { s: ClientHttp2Stream; on: ClientHttp2Session }[]; restore(): void } {
  const probe = connect(`http://${address}`);
  probe.on('error', () => undefined);
  const proto = Object.getPrototypeOf(probe) as { request: ClientHttp2Session['request'] };
  probe.destroy();
  const request = proto.request;
  const streams: { s: ClientHttp2Stream; on: ClientHttp2Session }[] = [];
  proto.request = function keep(this: ClientHttp2Session, ...args: Parameters<ClientHttp2Session['request']>) {
    const s = request.apply(this, args);
    streams.push({ s, on: this });
    return s;
  };
  return { streams, restore: () => { proto.request = request; } };
}

describe('closed upstream streams let go of their calls', () => {
  let backend: ReferenceBackend;
  let plane: H2DataPlane;
  let keeping: ReturnType<typeof keepClientStreams>;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, 'node'); // node:http2's streams
    keeping = keepClientStreams(backend.address);
  });
  afterAll(async () => {
    keeping.restore();
    plane.close();
    await backend.close();
  });

  test('answered, failed and cancelled calls: no listener left on their closed streams, their receivers collectable', async () => {
    const markers: WeakRef<object>[] = [];
    // The calls are started, and the last one cancelled, in a function of their own: a suspended
    // async function keeps its stale registers, which would hold the last call for the test.
    const started = startCalls(plane, markers);
    await Promise.all(started);
    await new Promise((r) => setTimeout(r, 50)); // every 'close' emitted
    const kept = keeping.streams.map((k) => k.s);
    expect(kept.length).toBe(10);
    for (const s of kept) {
      expect(s.closed).toBe(true);
      expect(s.eventNames()).toEqual(['error']);
      expect(s.listenerCount('error')).toBe(1);
    }
    // The kept streams reach no receiver: a full collection frees every marker (deref() runs in a
    // later turn). The failed calls' errors are not kept: a V8 error holds its frames' receivers
    // until its stack is read, and so the call that made it.
    gc({ type: 'major' });
    await new Promise((r) => setImmediate(r));
    expect(markers.map((w, i) => (w.deref() === undefined ? -1 : i)).filter((i) => i >= 0)).toEqual([]);
  });
});

describe("the gRPC pass-through's closed streams let go of their calls", () => {
  test('answered and refused calls: neither the client stream nor the upstream one keeps a listener', async () => {
    const backend = await startReferenceBackend({ host: '127.0.0.1' });
    const set = fixedBackends([backend.address]);
    const connections = new H2Connections(set, undefined, 'node');
    const handler = grpcPassthrough({
      backends: set, connections, upstream: { timeoutMs: 30_000, restricted: [] },
      limits: { maxInputSizeBytes: 64 * 1024 * 1024, maxInFlightRequests: 100 },
      observer: { start: () => ({ upstreamHeaders: {}, end: () => undefined }) },
      draining: () => false,
    });
    const serverStreams: ServerHttp2Stream[] = [];
    const server = createServer();
    server.on('stream', (stream, headers) => {
      serverStreams.push(stream);
      handler(stream, headers);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const keeping = keepClientStreams(backend.address);
    const client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const call = (message: Buffer): Promise<string | undefined> => new Promise((resolve) => {
        const s = client.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' });
        let status: string | undefined;
        s.on('response', (h) => { status ??= h['grpc-status'] as string | undefined; });
        s.on('trailers', (t) => { status = t['grpc-status'] as string | undefined; });
        s.resume();
        s.on('close', () => resolve(status));
        s.end(message);
      });
      const statuses = await Promise.all([
        ...Array.from({ length: 4 }, () => call(framed('identity_uint8', 64))),
        call(framed('no_such_model', 8)),
      ]);
      expect(statuses.sort()).toEqual(['0', '0', '0', '0', '5']);
      await new Promise((r) => setTimeout(r, 50));
      expect(serverStreams).toHaveLength(5);
      const all = [...serverStreams, ...keeping.streams.filter((k) => k.on !== client).map((k) => k.s)];
      expect(all).toHaveLength(10);
      for (const s of all) {
        expect(s.closed).toBe(true);
        expect(s.eventNames()).toEqual(['error']);
      }
    } finally {
      keeping.restore();
      client.destroy();
      connections.close();
      await new Promise((r) => server.close(r));
      await backend.close();
    }
  });
});

describe('REST over h2: a closed stream and its compatibility request and response let go of the exchange', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
  });
  afterAll(async () => {
    await gw.close(2000);
  });

  test('inference, an unknown model, a GET: nothing left listening on any of the three', async () => {
    // Every compatibility response of this process is kept as it ends, as the closed stream keeps it.
    const proto = Http2ServerResponse.prototype as unknown as { end: (...a: unknown[]) => unknown };
    const end = proto.end;
    const responses: Http2ServerResponse[] = [];
    proto.end = function keep(this: Http2ServerResponse, ...args: unknown[]) {
      responses.push(this);
      return end.apply(this, args);
    };
    const session = await h2Connect(gw.url);
    try {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
      const answers = await Promise.all([
        h2Send(session, '/v2/models/identity_fp32/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
        h2Send(session, '/v2/models/identity_fp32/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
        h2Send(session, '/v2/models/no_such_model/infer', { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
        h2Send(session, '/v2/health/ready'),
      ]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 404, 200]);
      await new Promise((r) => setTimeout(r, 50));
      expect(new Set(responses).size).toBe(4);
      for (const res of new Set(responses)) {
        expect(res.stream.closed).toBe(true);
        for (const e of [res, res.req, res.stream]) expect(e.eventNames()).toEqual(['error']);
      }
    } finally {
      proto.end = end;
      session.close();
    }
  });
});
