// The gRPC pass-through handler (passthrough/grpc-ingress.ts) on an h2c server of the test's own
// (the listener wires it into the real port), with grpc-js clients: calls forwarded per call over
// reference backends, one client connection spread over both; health answered by the gateway;
// deadlines, cancels, size limits, restricted groups and auth answered as gRPC statuses; the
// request's Buffers reach the upstream stream as they came; a wire-level peer for trailers.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, constants, createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, credentials, Metadata, type MethodDefinition, type StatusObject } from '@grpc/grpc-js';
import { accessTable, parseRestriction, type Restriction } from '../../gateway/api-access';
import { Authenticator } from '../../gateway/auth/authenticator';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { grpcPassthrough, type GrpcPassthroughOptions } from '../../gateway/passthrough/grpc-ingress';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { BackendSet } from '../../gateway/upstream/backends/backend-set';
import { GrpcHealthChecker } from '../../gateway/upstream/backends/health-check';
import { H2Connections } from '../../gateway/upstream/connections/h2-sessions';
import { H2Connection } from '../../gateway/upstream/h2/connection';
import { grpcHealth, inference, inferenceService } from '../../proto/services';
import { CANCEL, GrpcPeer, grpcMessage } from '../support/grpc-peer';
import { fixedBackends, SET_DEFAULTS } from '../support/upstream';
import { nextEvent, waitUntil } from '../support/wait';
import { int32, readInt32 } from '../support/int32';
import { HTTP2_CLIENT } from '../support/gateway';
import { serveGrpc } from '../support/grpc-server';

interface Ingress {
  readonly address: string;
  readonly records: RequestRecord[];
  readonly connections: H2Connections;
  close(): Promise<void>;
}

async function startIngress(set: BackendSet, o: Partial<GrpcPassthroughOptions> = {}): Promise<Ingress> {
  const records: RequestRecord[] = [];
  const connections = new H2Connections(set, undefined, HTTP2_CLIENT);
  const handler = grpcPassthrough({
    backends: set, connections, upstream: { timeoutMs: 30_000, restricted: [] },
    limits: { maxInputSizeBytes: 64 * 1024 * 1024, maxInFlightRequests: 100 },
    observer: { start: () => ({ upstreamHeaders: {}, end: (r) => records.push(r) }) },
    draining: () => false,
    ...o,
  });
  const served = await serveGrpc(handler);
  return {
    address: served.address,
    records,
    connections,
    async close() {
      connections.close();
      await served.close();
    },
  };
}

interface Outcome<Res> {
  readonly res?: Res;
  readonly code: number;
  readonly details: string;
  readonly trailers: Metadata;
}

/** One unary call; resolves with its status whatever it is. */
function unary<Req, Res>(client: Client, m: MethodDefinition<Req, Res>, req: Req, md = new Metadata(), deadlineMs?: number): Promise<Outcome<Res>> {
  return new Promise((resolve) => {
    let res: Res | undefined;
    const call = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, md,
      deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs }, (_err, r) => { res = r; });
    call.on('status', (s: StatusObject) => setImmediate(() => resolve({ res, code: s.code, details: s.details, trailers: s.metadata })));
  });
}

const SIMPLE_A = int32(Array.from({ length: 16 }, (_, i) => i));
const SIMPLE_B = int32(Array(16).fill(2));
const simpleRequest = (name = 'simple'): inference.IModelInferRequest => ({
  model_name: name,
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
  raw_input_contents: [SIMPLE_A, SIMPLE_B],
});
const slowRequest = (delayMs: number): inference.IModelInferRequest => ({
  model_name: 'slow',
  inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }],
  raw_input_contents: [Buffer.alloc(4)],
  parameters: { delay_ms: { int64_param: delayMs } },
});
const sum = (r: inference.IModelInferResponse): number[] => readInt32(r.raw_output_contents![0]!);

const ModelInfer = inferenceService.ModelInfer;
const Check: MethodDefinition<grpcHealth.health.v1.IHealthCheckRequest, grpcHealth.health.v1.HealthCheckResponse> = {
  path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false,
  requestSerialize: (m) => Buffer.from(grpcHealth.health.v1.HealthCheckRequest.encode(m).finish()),
  requestDeserialize: () => ({}), responseSerialize: () => Buffer.alloc(0),
  responseDeserialize: (x) => grpcHealth.health.v1.HealthCheckResponse.decode(x),
};

let a: ReferenceBackend;
let b: ReferenceBackend;
beforeAll(async () => {
  [a, b] = await Promise.all([startReferenceBackend({ host: '127.0.0.1' }), startReferenceBackend({ host: '127.0.0.1' })]);
});
afterAll(async () => {
  await Promise.all([a?.close(0), b?.close(0)]);
});

describe('forwarding', () => {
  let ingress: Ingress;
  let client: Client;
  beforeAll(async () => {
    ingress = await startIngress(fixedBackends([a.address, b.address]));
    client = new Client(ingress.address, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await ingress?.close();
  });

  test('one client connection\'s unary calls spread over both backends, every answer right', async () => {
    const before = [a.stats.inferCalls, b.stats.inferCalls];
    const outcomes = await Promise.all(Array.from({ length: 16 }, () => unary(client, ModelInfer, simpleRequest())));
    for (const o of outcomes) {
      expect(o.code).toBe(0);
      expect(sum(o.res!)).toEqual(Array.from({ length: 16 }, (_, i) => i + 2));
    }
    expect(a.stats.inferCalls - before[0]!).toBe(8);
    expect(b.stats.inferCalls - before[1]!).toBe(8);
    const r = ingress.records.at(-1)!;
    expect(r).toMatchObject({ rpc: 'grpc', protocol: '2', route: 'grpc ModelInfer', grpcStatus: 0, model: 'simple' });
    expect(r.bytesIn).toBeGreaterThan(128);
    expect(r.bytesOut).toBeGreaterThan(64);
    expect(r.firstByteNs).toBeGreaterThan(r.startNs);
  });

  test('Triton\'s errors come back as Triton sent them (trailers-only status and message)', async () => {
    const o = await unary(client, ModelInfer, simpleRequest('nope'));
    expect(o.code).toBe(5);
    expect(o.details).toBe("Request for unknown model: 'nope' is not found");
    expect(ingress.records.at(-1)).toMatchObject({ grpcStatus: 5, model: 'nope' });
  });

  test('a sequence\'s ModelInfer calls all go to one backend (its key), other calls spread', async () => {
    const before = [a.stats.inferCalls, b.stats.inferCalls];
    const seq = (id: number): inference.IModelInferRequest => ({ ...simpleRequest(), parameters: { sequence_id: { int64_param: id } } });
    const onA: number[] = [];
    for (let id = 1; id <= 16; id++) {
      const at = a.stats.inferCalls;
      for (let i = 0; i < 3; i++) {
        const r = await unary(client, ModelInfer, seq(id));
        expect(r.code).toBe(0);
        expect(sum(r.res!)).toEqual(Array.from({ length: 16 }, (_, k) => k + 2));
      }
      const here = a.stats.inferCalls - at;
      expect([0, 3]).toContain(here); // all three calls of the sequence met one backend
      if (here === 3) onA.push(id);
    }
    expect([onA.length > 0, onA.length < 16]).toEqual([true, true]); // both backends hold sequences (all on one: 2 in 65,536)
    expect(a.stats.inferCalls + b.stats.inferCalls - before[0]! - before[1]!).toBe(48);
  });

  test('ModelStreamInfer stays on one backend and relays every response', async () => {
    const m = inferenceService.ModelStreamInfer;
    const call = client.makeBidiStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, new Metadata());
    const got: number[] = [];
    call.on('data', (r: inference.IModelStreamInferResponse) => got.push(Buffer.from(r.infer_response!.raw_output_contents![0]!).readInt32LE(0)));
    const status = new Promise<StatusObject>((resolve) => call.on('status', resolve));
    const before = a.stats.streamCalls + b.stats.streamCalls;
    call.write({ model_name: 'repeat_int32', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [int32([5])] });
    call.end();
    expect((await status).code).toBe(0);
    expect(got).toEqual([0, 1, 2, 3, 4]);
    expect(a.stats.streamCalls + b.stats.streamCalls - before).toBe(1);
    expect(ingress.records.at(-1)).toMatchObject({ route: 'grpc ModelStreamInfer', model: 'repeat_int32', grpcStatus: 0 });
  });

  test('control calls go through too (ServerMetadata, ModelConfig)', async () => {
    const meta = await unary(client, inferenceService.ServerMetadata, {});
    expect(meta.code).toBe(0);
    expect(meta.res!.name).toBe('triton');
    const config = await unary(client, inferenceService.ModelConfig, { name: 'simple' });
    expect(config.res!.config!.name).toBe('simple');
    expect(ingress.records.at(-1)).toMatchObject({ route: 'grpc ModelConfig', model: 'simple' });
  });

  test('the request\'s Buffers are written upstream as they came: no copy, no decode', async () => {
    const received: Buffer[] = [];
    const written = new Set<unknown>();
    // The upstream side's writes (grpc-js' own writes are other Buffers): node:http2's client
    // streams, or our own connection's send(stream, chunk, …).
    let proto: { write: (...args: unknown[]) => boolean } | { send: (...args: unknown[]) => void };
    if (HTTP2_CLIENT === 'own') {
      proto = H2Connection.prototype as unknown as { send: (...args: unknown[]) => void };
    } else {
      const session = connect(`http://${a.address}`);
      session.on('error', () => undefined);
      const probe = session.request({ ':path': '/' }, { endStream: true });
      probe.on('error', () => undefined);
      proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => boolean };
      session.destroy();
    }
    const key = 'send' in proto ? 'send' : 'write';
    const original = (proto as Record<string, (...args: unknown[]) => unknown>)[key]!;
    (proto as Record<string, unknown>)[key] = function (this: unknown, ...args: unknown[]) {
      written.add(key === 'send' ? args[1] : args[0]);
      return original.apply(this, args);
    };
    const server = createServer();
    const handler = grpcPassthrough({
      backends: fixedBackends([a.address]), connections: ingress.connections, upstream: { timeoutMs: 30_000, restricted: [] },
      limits: { maxInputSizeBytes: 2 ** 31 - 1, maxInFlightRequests: 100 },
      observer: { start: () => ({ upstreamHeaders: {}, end: () => undefined }) }, draining: () => false,
    });
    server.on('stream', (stream, headers) => {
      // The chunks the handler is given, seen without a listener of our own (which would start the flow).
      const emit = stream.emit.bind(stream);
      stream.emit = ((event: string, ...args: unknown[]) => {
        if (event === 'data') received.push(args[0] as Buffer);
        return emit(event, ...args);
      }) as typeof stream.emit;
      handler(stream, headers);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const c = new Client(`127.0.0.1:${(server.address() as AddressInfo).port}`, credentials.createInsecure());
    try {
      const big = Buffer.alloc(600 * 1024, 7);
      const o = await unary(c, ModelInfer, {
        model_name: 'identity_uint8', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, big.length] }], raw_input_contents: [big],
      });
      expect(o.code).toBe(0);
      expect(Buffer.from(o.res!.raw_output_contents![0]!).equals(big)).toBe(true);
    } finally {
      (proto as Record<string, unknown>)[key] = original;
      c.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(received.length).toBeGreaterThan(1);
    expect(received.filter((x) => !written.has(x))).toEqual([]);
  });
});

describe('health', () => {
  test('Health/Check is SERVING with a ready backend, NOT_SERVING when draining or none is ready; another service NOT_FOUND; Watch UNIMPLEMENTED', async () => {
    const set = new BackendSet({ ...SET_DEFAULTS, healthyThreshold: 1, targets: [a.address], checker: new GrpcHealthChecker() });
    await waitUntil(() => set.anyReady(), 'the backend is ready');
    let draining = false;
    const ingress = await startIngress(set, { draining: () => draining });
    const client = new Client(ingress.address, credentials.createInsecure());
    const { ServingStatus } = grpcHealth.health.v1.HealthCheckResponse;
    try {
      const check = (service = ''): Promise<Outcome<grpcHealth.health.v1.HealthCheckResponse>> => unary(client, Check, { service });
      expect((await check()).res!.status).toBe(ServingStatus.SERVING);
      draining = true;
      expect((await check()).res!.status).toBe(ServingStatus.NOT_SERVING);
      draining = false;
      const unknown = await check('inference.GRPCInferenceService');
      expect([unknown.code, unknown.details]).toEqual([5, 'unknown service inference.GRPCInferenceService']);
      const watch = await unary(client, { ...ModelInfer, path: '/grpc.health.v1.Health/Watch' }, {});
      expect([watch.code, watch.details, watch.trailers.get('x-tensorgate-error')]).toEqual([12, 'Method not found: /grpc.health.v1.Health/Watch', ['GW_ERR_ROUTE_GRPC_UNIMPLEMENTED']]);
      set.close();
      const down = fixedBackends([a.address]); // never checked: nothing is ready
      const other = await startIngress(down);
      const c2 = new Client(other.address, credentials.createInsecure());
      try {
        const o = await unary(c2, Check, {});
        expect(o.res!.status).toBe(ServingStatus.NOT_SERVING);
      } finally {
        c2.close();
        await other.close();
      }
    } finally {
      set.close();
      client.close();
      await ingress.close();
    }
  });
});

describe('health: a request that never ends', () => {
  // Regression: Health/Check waited for the request's END_STREAM with no deadline at all.
  test('Health/Check whose request does not end by upstream.timeoutMs: DEADLINE_EXCEEDED, the stream closed, the call recorded', async () => {
    const ingress = await startIngress(fixedBackends([a.address]), { upstream: { timeoutMs: 300, restricted: [] } });
    const session = connect(`http://${ingress.address}`);
    session.on('error', () => undefined);
    try {
      const stream = session.request({ ':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => undefined);
      stream.write(Buffer.from([0, 0, 0, 0])); // part of a prefix, and no END_STREAM
      const status = new Promise<string | undefined>((resolve) => {
        stream.on('response', (h) => resolve(h['grpc-status'] as string | undefined));
        stream.on('close', () => resolve(undefined));
      });
      const closed = nextEvent(stream, 'close', 5000);
      expect(await Promise.race([status, new Promise((resolve) => setTimeout(() => resolve('none in 3 s'), 3000).unref())])).toBe('4');
      await closed;
      await waitUntil(() => ingress.records.length === 1, 'the record', 2000);
      expect(ingress.records[0]).toMatchObject({ grpcStatus: 4, errorCode: 'GW_ERR_REQUEST_TIMEOUT' });
    } finally {
      session.destroy();
      await ingress.close();
    }
  });
});

describe('health: a request that is not one HealthCheckRequest', () => {
  const service = (name: string): Buffer => Buffer.from(grpcHealth.health.v1.HealthCheckRequest.encode({ service: name }).finish());
  /** Sends `body` in `size`-byte DATA writes; the status, the error code and the answer's bytes. */
  async function check(address: string, body: Buffer, size: number): Promise<{ status: string; code?: string; body: Buffer }> {
    const session = connect(`http://${address}`);
    session.on('error', () => undefined);
    try {
      const stream = session.request({ ':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => undefined);
      const data: Buffer[] = [];
      let fields: Record<string, unknown> = {};
      stream.on('response', (h) => { fields = h; });
      stream.on('trailers', (t) => { fields = { ...fields, ...t }; });
      stream.on('data', (c: Buffer) => data.push(c));
      const closed = nextEvent(stream, 'close', 5000);
      for (let at = 0; at < body.length; at += size) {
        await new Promise<void>((resolve) => stream.write(body.subarray(at, at + size), () => resolve()));
      }
      stream.end();
      await closed;
      const code = fields['x-tensorgate-error'] as string | undefined;
      return { status: String(fields['grpc-status']), ...code === undefined ? {} : { code }, body: Buffer.concat(data) };
    } finally {
      session.destroy();
    }
  }

  test.each([1, 2, 3, 7])('a HealthCheckRequest in %i-byte pieces is answered (NOT_SERVING: no backend is ready)', async (size) => {
    const ingress = await startIngress(fixedBackends([a.address]));
    try {
      expect(await check(ingress.address, grpcMessage(service('')), size)).toEqual({ status: '0', body: Buffer.from([0, 0, 0, 0, 2, 0x08, 2]) });
      expect(await check(ingress.address, grpcMessage(service('x')), size)).toEqual({ status: '5', code: 'GW_ERR_ROUTE_NOT_FOUND', body: Buffer.alloc(0) });
    } finally {
      await ingress.close();
    }
  });

  test.each<[string, Buffer]>([
    ['no message', Buffer.alloc(0)],
    ['part of a prefix', Buffer.from([0, 0, 0])],
    ['a message cut short', grpcMessage(service('abc')).subarray(0, 6)],
    ['a compressed message', grpcMessage(service(''), true)],
    ['two messages', Buffer.concat([grpcMessage(service('')), grpcMessage(service(''))])],
    ['a message and part of a prefix', Buffer.concat([grpcMessage(service('')), Buffer.from([0])])],
    ['a message over 1 KiB', grpcMessage(service('s'.repeat(1100)))],
  ])('%s: INVALID_ARGUMENT GW_ERR_REQUEST_MALFORMED, recorded', async (_label, body) => {
    const ingress = await startIngress(fixedBackends([a.address]));
    try {
      for (const size of [1, 7, Math.max(1, body.length)]) {
        expect(await check(ingress.address, body, size)).toEqual({ status: '3', code: 'GW_ERR_REQUEST_MALFORMED', body: Buffer.alloc(0) });
      }
      await waitUntil(() => ingress.records.length === 3, 'the records', 2000);
      expect(ingress.records[0]).toMatchObject({ route: 'grpc Health/Check', grpcStatus: 3, errorCode: 'GW_ERR_REQUEST_MALFORMED' });
    } finally {
      await ingress.close();
    }
  });
});

describe('upstream.sharedMemory on: the gateway\'s own regions (<prefix>-<pid>-<n>) cannot be named over gRPC', () => {
  // Regression: with the mode on, a client could name the gateway's regions in a ModelInfer's
  // tensors and read or overwrite another request's tensors (REST refuses it: pipeline/infer-decode.ts).
  let ingress: Ingress;
  let client: Client;
  beforeAll(async () => {
    ingress = await startIngress(fixedBackends([a.address]), { reservedPrefix: 'tg' });
    client = new Client(ingress.address, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await ingress?.close();
  });
  const region = (name: string): Record<string, inference.IInferParameter> =>
    ({ shared_memory_region: { string_param: name }, shared_memory_byte_size: { int64_param: 64 } });
  const RESERVED = (what: string, name: string): unknown[] =>
    [7, `${what} '${name}' is reserved: names starting with 'tg-' are the gateway's own regions (upstream.sharedMemory.prefix)`, ['GW_ERR_DECODE_SHM_REGION_RESERVED']];
  const outcome = (o: Outcome<unknown>): unknown[] => [o.code, o.details, o.trailers.get('x-tensorgate-error')];

  test('a ModelInfer input or output naming one: PERMISSION_DENIED, as REST refuses it; another region goes through', async () => {
    const input = { ...simpleRequest(), raw_input_contents: [], inputs: simpleRequest().inputs!.map((t, i) => (i === 1 ? { ...t, parameters: region('tg-1-0') } : t)) };
    expect(outcome(await unary(client, ModelInfer, input))).toEqual(RESERVED('shared_memory_region', 'tg-1-0'));
    const output = { ...simpleRequest(), outputs: [{ name: 'OUTPUT0', parameters: region('/tg-1-7') }] };
    expect(outcome(await unary(client, ModelInfer, output))).toEqual(RESERVED('shared_memory_region', '/tg-1-7'));
    // The tensor's contents are skipped, not kept: a large `contents` before the parameters is read past.
    const big = { ...simpleRequest(), raw_input_contents: [], inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 65536], contents: { int_contents: Array.from({ length: 65536 }, (_, i) => i) }, parameters: region('tg-9-9') }] };
    expect(outcome(await unary(client, ModelInfer, big))).toEqual(RESERVED('shared_memory_region', 'tg-9-9'));
    const mine = await unary(client, ModelInfer, { ...simpleRequest(), outputs: [{ name: 'OUTPUT0', parameters: region('tgx-1-0') }] });
    expect(mine.trailers.get('x-tensorgate-error')).not.toEqual(['GW_ERR_DECODE_SHM_REGION_RESERVED']);
    expect((await unary(client, ModelInfer, simpleRequest())).code).toBe(0);
  });

  test('system shared memory: registering its name or key, unregistering it or every region: PERMISSION_DENIED', async () => {
    const m = (rpc: string): MethodDefinition<Record<string, unknown>, unknown> => ({
      path: `/inference.GRPCInferenceService/${rpc}`, requestStream: false, responseStream: false,
      requestSerialize: (r) => Buffer.from(rpc === 'SystemSharedMemoryRegister'
        ? inference.SystemSharedMemoryRegisterRequest.encode(r).finish() : inference.SystemSharedMemoryUnregisterRequest.encode(r).finish()),
      requestDeserialize: () => ({}), responseSerialize: () => Buffer.alloc(0), responseDeserialize: (x) => x,
    });
    expect(outcome(await unary(client, m('SystemSharedMemoryRegister'), { name: 'tg-1-0', key: '/x', byte_size: 64 }))).toEqual(RESERVED('system shared memory region', 'tg-1-0'));
    expect(outcome(await unary(client, m('SystemSharedMemoryRegister'), { name: 'mine', key: '/tg-1-0', byte_size: 64 }))).toEqual(RESERVED('system shared memory key', '/tg-1-0'));
    expect(outcome(await unary(client, m('SystemSharedMemoryUnregister'), { name: 'tg-1-0' }))).toEqual(RESERVED('system shared memory region', 'tg-1-0'));
    expect(outcome(await unary(client, m('SystemSharedMemoryUnregister'), {}))).toEqual(
      [7, 'unregistering every system shared memory region would take the gateway\'s own too (upstream.sharedMemory.prefix): name the region', ['GW_ERR_DECODE_SHM_REGION_RESERVED']]);
    expect((await unary(client, m('SystemSharedMemoryUnregister'), { name: 'mine' })).trailers.get('x-tensorgate-error')).not.toEqual(['GW_ERR_DECODE_SHM_REGION_RESERVED']);
  });
});

describe('deadlines, cancels and failures', () => {
  let ingress: Ingress;
  let client: Client;
  beforeAll(async () => {
    ingress = await startIngress(fixedBackends([a.address]), { upstream: { timeoutMs: 5000, restricted: [] } });
    client = new Client(ingress.address, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await ingress?.close();
  });

  test('a grpc-timeout shorter than the model: DEADLINE_EXCEEDED, and the upstream call is cancelled', async () => {
    const cancelled = nextEvent(a.events, 'slow-cancelled', 10_000);
    const o = await unary(client, ModelInfer, slowRequest(5000), new Metadata(), 300);
    expect(o.code).toBe(4);
    await cancelled;
  });

  test('upstream.timeoutMs caps a longer grpc-timeout', async () => {
    const capped = await startIngress(fixedBackends([a.address]), { upstream: { timeoutMs: 200, restricted: [] } });
    const c = new Client(capped.address, credentials.createInsecure());
    try {
      const cancelled = nextEvent(a.events, 'slow-cancelled', 10_000);
      const o = await unary(c, ModelInfer, slowRequest(5000), new Metadata(), 20_000);
      expect([o.code, o.trailers.get('x-tensorgate-error')]).toEqual([4, ['GW_ERR_UPSTREAM_DEADLINE']]);
      expect(o.details).toMatch(/^Deadline Exceeded: no answer from upstream within upstream.timeoutMs/);
      await cancelled;
      expect(capped.records.at(-1)).toMatchObject({ grpcStatus: 4, errorCode: 'GW_ERR_UPSTREAM_DEADLINE' });
    } finally {
      c.close();
      await capped.close();
    }
  });

  test('a client that cancels cancels the upstream call', async () => {
    const started = nextEvent(a.events, 'slow-started', 10_000);
    const cancelled = nextEvent(a.events, 'slow-cancelled', 10_000);
    const m = ModelInfer;
    const call = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, slowRequest(5000), () => undefined);
    await started;
    call.cancel();
    await cancelled;
    await waitUntil(() => ingress.records.at(-1)?.errorCode === 'GW_ERR_UPSTREAM_CANCELLED', 'the cancelled call is recorded');
  });

  test('a backend refusing connections: the call goes to the other one (never sent); with none left, UNAVAILABLE', async () => {
    const dead = await startReferenceBackend({ host: '127.0.0.1' });
    const deadAddress = dead.address;
    await dead.close(0);
    const mixed = await startIngress(fixedBackends([deadAddress, a.address]));
    const c = new Client(mixed.address, credentials.createInsecure());
    try {
      for (let i = 0; i < 4; i++) expect((await unary(c, ModelInfer, simpleRequest())).code).toBe(0);
      expect(mixed.records.some((r) => r.retries === 1)).toBe(true);
    } finally {
      c.close();
      await mixed.close();
    }
    const none = await startIngress(fixedBackends([deadAddress]));
    const c2 = new Client(none.address, credentials.createInsecure());
    try {
      const o = await unary(c2, ModelInfer, simpleRequest());
      expect([o.code, o.trailers.get('x-tensorgate-error')]).toEqual([14, ['GW_ERR_UPSTREAM_UNAVAILABLE']]);
      expect(o.details).toMatch(/^upstream unavailable: no answer from 127\.0\.0\.1:\d+ \(connection failed\)$/);
    } finally {
      c2.close();
      await none.close();
    }
  });

  test('a request message over limits.maxInputSizeBytes: RESOURCE_EXHAUSTED before any of it goes upstream', async () => {
    const small = await startIngress(fixedBackends([a.address]), { limits: { maxInputSizeBytes: 1024, maxInFlightRequests: 100 } });
    const c = new Client(small.address, credentials.createInsecure());
    try {
      const before = a.stats.inferCalls;
      const big = Buffer.alloc(4096);
      const o = await unary(c, ModelInfer, { model_name: 'identity_uint8', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 4096] }], raw_input_contents: [big] });
      expect([o.code, o.trailers.get('x-tensorgate-error')]).toEqual([8, ['GW_ERR_REQUEST_GRPC_MESSAGE_TOO_LARGE']]);
      expect(o.details).toMatch(/^Received message larger than max \(\d+ vs\. 1024\): limits.maxInputSizeBytes$/);
      expect(a.stats.inferCalls).toBe(before);
      expect((await unary(c, ModelInfer, simpleRequest())).code).toBe(0); // the connection still serves
    } finally {
      c.close();
      await small.close();
    }
  });

  test('over limits.maxInFlightRequests: UNAVAILABLE (GW_ERR_REQUEST_OVERLOADED)', async () => {
    const one = await startIngress(fixedBackends([a.address]), { limits: { maxInputSizeBytes: 1 << 20, maxInFlightRequests: 1 } });
    const c = new Client(one.address, credentials.createInsecure());
    try {
      const started = nextEvent(a.events, 'slow-started', 10_000);
      const slow = unary(c, ModelInfer, slowRequest(300));
      await started;
      const o = await unary(c, ModelInfer, simpleRequest());
      expect([o.code, o.trailers.get('x-tensorgate-error')]).toEqual([14, ['GW_ERR_REQUEST_OVERLOADED']]);
      expect((await slow).code).toBe(0);
      expect((await unary(c, ModelInfer, simpleRequest())).code).toBe(0);
    } finally {
      c.close();
      await one.close();
    }
  });

  test('an unknown method: UNIMPLEMENTED', async () => {
    const o = await unary(client, { ...ModelInfer, path: '/other.Service/Call' }, simpleRequest());
    expect([o.code, o.details]).toEqual([12, 'Method not found: /other.Service/Call']);
  });

  // Regression: the method indexed a plain object, so `constructor` found Object.prototype's and the
  // call went upstream past the restricted-API and auth checks, which look its group up.
  test.each(['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'])('a method named as Object.prototype\'s %s: UNIMPLEMENTED at the gateway', async (name) => {
    const path = `/inference.GRPCInferenceService/${name}`;
    const o = await unary(client, { ...ModelInfer, path }, simpleRequest());
    expect([o.code, o.details, o.trailers.get('x-tensorgate-error')]).toEqual([12, `Method not found: ${path}`, ['GW_ERR_ROUTE_GRPC_UNIMPLEMENTED']]);
  });
});

describe('restricted groups and auth, by method', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'grpc-auth-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('api.restricted wants Triton\'s triton-grpc-protocol-<key> metadata (UNAVAILABLE as Triton); api.disabled is PERMISSION_DENIED', async () => {
    const r = parseRestriction('inference:infer-key=secret') as Restriction;
    const ingress = await startIngress(fixedBackends([a.address]), { access: accessTable([r], ['model-config']) });
    const c = new Client(ingress.address, credentials.createInsecure());
    try {
      const refused = await unary(c, ModelInfer, simpleRequest());
      expect([refused.code, refused.details]).toEqual([14, "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"]);
      const md = new Metadata();
      md.set('triton-grpc-protocol-infer-key', 'secret');
      expect((await unary(c, ModelInfer, simpleRequest(), md)).code).toBe(0);
      expect((await unary(c, inferenceService.ServerMetadata, {})).code).toBe(0); // metadata is open
      const disabled = await unary(c, inferenceService.ModelConfig, { name: 'simple' });
      expect([disabled.code, disabled.trailers.get('x-tensorgate-error')]).toEqual([7, ['GW_ERR_ROUTE_DISABLED']]);
    } finally {
      c.close();
      await ingress.close();
    }
  });

  test('auth: UNAUTHENTICATED without or with a bad credential, PERMISSION_DENIED for another group or model, let through otherwise', async () => {
    const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, [
      'keys:',
      `  - { id: all, token: "${sha('all_0123456789abcdef')}", groups: "*" }`,
      `  - { id: meta, token: "${sha('meta_0123456789abcdef')}", groups: [metadata] }`,
      `  - { id: simple-only, token: "${sha('simple_0123456789abcdef')}", groups: [inference], models: [simple] }`,
    ].join('\n'));
    const auth = new Authenticator({ enabled: true, keysFile: keys, keyHeader: 'x-api-key', open: ['health'], jwt: { jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: [], clockToleranceS: 0, modelsClaim: '', groupsClaim: '', cacheMaxAgeMs: 0, cooldownMs: 0 } as never });
    const ingress = await startIngress(fixedBackends([a.address]), { auth, keyHeader: 'x-api-key' });
    const c = new Client(ingress.address, credentials.createInsecure());
    const bearer = (t: string): Metadata => {
      const md = new Metadata();
      md.set('authorization', `Bearer ${t}`);
      return md;
    };
    try {
      const missing = await unary(c, ModelInfer, simpleRequest());
      expect([missing.code, missing.details]).toEqual([16, 'authentication required: send Authorization: Bearer <token> or x-api-key: <key>']);
      expect((await unary(c, ModelInfer, simpleRequest(), bearer('wrong'))).code).toBe(16);
      const group = await unary(c, ModelInfer, simpleRequest(), bearer('meta_0123456789abcdef'));
      expect([group.code, group.details]).toEqual([7, "'meta' may not use the 'inference' API group"]);
      const model = await unary(c, ModelInfer, simpleRequest('identity_int32'), bearer('simple_0123456789abcdef'));
      expect([model.code, model.details]).toEqual([7, "'simple-only' may not call model 'identity_int32'"]);
      expect((await unary(c, ModelInfer, simpleRequest(), bearer('simple_0123456789abcdef'))).code).toBe(0);
      const key = new Metadata();
      key.set('x-api-key', 'all_0123456789abcdef');
      expect((await unary(c, ModelInfer, simpleRequest(), key)).code).toBe(0);
      expect(ingress.records.map((r) => r.auth?.outcome)).toEqual(['missing', 'invalid', 'forbidden', 'forbidden', 'allowed', 'allowed']);
    } finally {
      auth.close();
      c.close();
      await ingress.close();
    }
  });
});

describe('per-key limits on the gRPC pass-through', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'grpc-limits-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('RESOURCE_EXHAUSTED over a key\'s rate and past its concurrency, with the wait as grpc-retry-pushback-ms, nothing forwarded; a cancelled call gives its place back', async () => {
    const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
    const keys = join(dir, 'limits-keys.yaml');
    writeFileSync(keys, [
      'keys:',
      `  - { id: rated, token: "${sha('rated_0123456789abcdef')}", groups: "*", limits: { rate: 0.1, burst: 1 } }`,
      `  - { id: capped, token: "${sha('capped_0123456789abcdef')}", groups: "*", limits: { concurrency: 1 } }`,
    ].join('\n'));
    const auth = new Authenticator({ enabled: true, keysFile: keys, keyHeader: '', open: ['health'], jwt: { jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: [], clockToleranceS: 0, modelsClaim: '', groupsClaim: '', cacheMaxAgeMs: 0, cooldownMs: 0 } as never });
    const ingress = await startIngress(fixedBackends([a.address]), { auth });
    const c = new Client(ingress.address, credentials.createInsecure());
    const bearer = (t: string): Metadata => {
      const md = new Metadata();
      md.set('authorization', `Bearer ${t}`);
      return md;
    };
    try {
      expect((await unary(c, ModelInfer, simpleRequest(), bearer('rated_0123456789abcdef'))).code).toBe(0);
      const rated = await unary(c, ModelInfer, simpleRequest(), bearer('rated_0123456789abcdef'));
      // One call per 10 s: the wait is 10 s less the time since the first call (a slow machine may take a second).
      expect(rated.code).toBe(8);
      const wait = /^'rated' is over its rate of 0\.1 requests per second \(burst 1, the key's limits in auth\.keysFile\); retry after (9|10) s$/.exec(rated.details)?.[1];
      expect([rated.trailers.get('x-tensorgate-error'), rated.trailers.get('grpc-retry-pushback-ms')]).toEqual([['GW_ERR_AUTH_RATE_LIMITED'], [`${wait}000`]]);

      const held = c.makeUnaryRequest(ModelInfer.path, ModelInfer.requestSerialize, ModelInfer.responseDeserialize, slowRequest(5000), bearer('capped_0123456789abcdef'), () => undefined);
      const heldStatus = new Promise<number>((resolve) => held.on('status', (st: StatusObject) => resolve(st.code)));
      await new Promise((r) => setTimeout(r, 300)); // the slow call is in flight (5 s)
      const capped = await unary(c, ModelInfer, simpleRequest(), bearer('capped_0123456789abcdef'));
      expect([capped.code, capped.details]).toEqual([8, "'capped' already has 1 request in flight, its concurrency limit (the key's limits in auth.keysFile); retry after 1 s"]);
      held.cancel();
      expect(await heldStatus).toBe(1);
      // The place comes back once the cancelled call's stream has closed: soon, not at once.
      let after: number;
      const end = Date.now() + 5000;
      do after = (await unary(c, ModelInfer, simpleRequest(), bearer('capped_0123456789abcdef'))).code;
      while (after === 8 && Date.now() < end);
      expect(after).toBe(0);
      // The refused calls went nowhere.
      const limited = ingress.records.filter((r) => r.limited !== undefined);
      expect(limited.map((r) => [r.limited, r.backend, r.errorCode])).toEqual([
        [{ limit: 'key:rated', reason: 'rate' }, undefined, 'GW_ERR_AUTH_RATE_LIMITED'],
        ...limited.slice(1).map(() => [{ limit: 'key:capped', reason: 'concurrency' }, undefined, 'GW_ERR_AUTH_CONCURRENCY_LIMITED']),
      ]);
      expect(limited.length).toBeGreaterThanOrEqual(2);
    } finally {
      auth.close();
      c.close();
      await ingress.close();
    }
  });

  test('a quota of 2 calls a day: RESOURCE_EXHAUSTED at the third, with the wait to the day\'s end; each call\'s usage in its record', async () => {
    const keys = join(dir, 'quota-keys.yaml');
    writeFileSync(keys, `keys:\n  - { id: metered, token: "sha256:${createHash('sha256').update('metered_0123456789abcdef').digest('hex')}", groups: "*", `
      + 'limits: { quotas: [{ unit: requests, per: day, max: 2 }] } }\n');
    const auth = new Authenticator({ enabled: true, keysFile: keys, keyHeader: '', open: ['health'], jwt: { jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: [], clockToleranceS: 0, modelsClaim: '', groupsClaim: '', cacheMaxAgeMs: 0, cooldownMs: 0 } as never });
    const ingress = await startIngress(fixedBackends([a.address]), { auth });
    const c = new Client(ingress.address, credentials.createInsecure());
    const md = new Metadata();
    md.set('authorization', 'Bearer metered_0123456789abcdef');
    try {
      const calls = [];
      for (let i = 0; i < 3; i++) calls.push(await unary(c, ModelInfer, simpleRequest(), md));
      expect(calls.map((x) => x.code)).toEqual([0, 0, 8]);
      const toDayEnd = Math.ceil((86_400_000 - (Date.now() % 86_400_000)) / 1000);
      expect(calls[2]!.details).toMatch(/^'metered' has spent its quota of 2 requests per day \(2 used, the key's limits in auth\.keysFile\); the window ends at \S+, retry after \d+ s$/);
      expect(calls[2]!.trailers.get('x-tensorgate-error')).toEqual(['GW_ERR_AUTH_QUOTA_EXHAUSTED']);
      expect(Math.abs(Number(calls[2]!.trailers.get('grpc-retry-pushback-ms')[0]) / 1000 - toDayEnd)).toBeLessThanOrEqual(1);
      const served = ingress.records.filter((r) => r.grpcStatus === 0);
      const expected = served.map((r) => ({ requests: 1, inferences: 1, inputBytes: r.bytesIn, outputBytes: r.bytesOut, tokens: 0 }));
      expect(served.map((r) => r.usage)).toEqual(expected);
      expect(served.length).toBe(2);
      expect(served[0]!.usage!.inputBytes).toBeGreaterThan(0);
    } finally {
      auth.close();
      c.close();
      await ingress.close();
    }
  });
  test('a soft quota of 1 call a day: every call served, the second and third with x-quota-warning in the answer\'s headers', async () => {
    const keys = join(dir, 'soft-keys.yaml');
    writeFileSync(keys, `keys:\n  - { id: warned, token: "sha256:${createHash('sha256').update('warned_0123456789abcdef').digest('hex')}", groups: "*", `
      + 'limits: { quotas: [{ unit: requests, per: day, max: 1, policy: soft }] } }\n');
    const auth = new Authenticator({ enabled: true, keysFile: keys, keyHeader: '', open: ['health'], jwt: { jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: [], clockToleranceS: 0, modelsClaim: '', groupsClaim: '', cacheMaxAgeMs: 0, cooldownMs: 0 } as never });
    const ingress = await startIngress(fixedBackends([a.address]), { auth });
    const c = new Client(ingress.address, credentials.createInsecure());
    const md = new Metadata();
    md.set('authorization', 'Bearer warned_0123456789abcdef');
    // The answer's headers (grpc-js's 'metadata' event), beside its status.
    const call = (): Promise<{ code: number; warning: unknown[] }> => new Promise((resolve) => {
      let warning: unknown[] = [];
      const x = c.makeUnaryRequest(ModelInfer.path, ModelInfer.requestSerialize, ModelInfer.responseDeserialize, simpleRequest(), md, () => undefined);
      x.on('metadata', (m: Metadata) => { warning = m.get('x-quota-warning'); });
      x.on('status', (st: StatusObject) => setImmediate(() => resolve({ code: st.code, warning })));
    });
    try {
      const calls = [await call(), await call(), await call()];
      expect(calls.map((x) => x.code)).toEqual([0, 0, 0]);
      expect(calls[0]!.warning).toEqual([]);
      for (const x of calls.slice(1)) expect(x.warning).toEqual([expect.stringMatching(/^requests quota of key:warned spent: [23] of 1 per day/)]);
    } finally {
      auth.close();
      c.close();
      await ingress.close();
    }
  });
});

describe('on the wire (a gRPC peer as Triton)', () => {
  let peer: GrpcPeer;
  let ingress: Ingress;
  let client: Client;
  beforeAll(async () => {
    peer = await new GrpcPeer({}).start();
    ingress = await startIngress(fixedBackends([peer.address]));
    client = new Client(ingress.address, credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await ingress?.close();
    await peer?.close();
  });

  test('response headers and trailers are relayed: custom metadata, grpc-status-details-bin', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-head': 'h1' }, { waitForTrailers: true });
      call.stream.on('wantTrailers', () => call.stream.sendTrailers({
        'grpc-status': '3', 'grpc-message': 'bad%20thing', 'grpc-status-details-bin': Buffer.from('details').toString('base64'), 'x-tail': 't1',
      }));
      call.stream.end();
    });
    const md = new Metadata();
    md.set('x-user', 'u1');
    md.set('x-user-bin', Buffer.from([1, 2, 3]));
    let head: Metadata | undefined;
    const o = await new Promise<Outcome<unknown>>((resolve) => {
      const m = ModelInfer;
      const call = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, simpleRequest(), md, () => undefined);
      call.on('metadata', (x: Metadata) => { head = x; });
      call.on('status', (s: StatusObject) => resolve({ code: s.code, details: s.details, trailers: s.metadata }));
    });
    expect([o.code, o.details, o.trailers.get('x-tail'), o.trailers.get('grpc-status-details-bin')]).toEqual([3, 'bad thing', ['t1'], [Buffer.from('details')]]);
    expect(head?.get('x-head')).toEqual(['h1']);
  });

  test('the client\'s metadata goes upstream (te, user metadata, -bin) with our grpc-timeout; the credential, restricted-API metadata and pseudo-headers stay', async () => {
    const upstream = createServer();
    const all: Record<string, unknown>[] = [];
    const seen = new Promise<Record<string, unknown>>((resolve) => upstream.on('stream', (stream, headers) => {
      all.push({ ...headers });
      resolve({ ...headers });
      GrpcPeer.fail(stream, 0, '');
    }));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const ing = await startIngress(fixedBackends([address]), { upstream: { timeoutMs: 1000, restricted: [parseRestriction('inference:k=v') as Restriction] } });
    const c = new Client(ing.address, credentials.createInsecure());
    try {
      const md = new Metadata();
      md.set('x-user', 'u1');
      md.set('x-user-bin', Buffer.from([1, 2, 3]));
      md.set('authorization', 'Bearer not-for-triton');
      md.set('triton-grpc-protocol-other', 'x');
      await unary(c, ModelInfer, simpleRequest(), md, 20_000);
      const h = await seen;
      expect(h).toMatchObject({
        ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', ':authority': address, ':scheme': 'http',
        'content-type': 'application/grpc', te: 'trailers', 'x-user': 'u1', 'x-user-bin': Buffer.from([1, 2, 3]).toString('base64'),
        'triton-grpc-protocol-k': 'v',
      });
      expect(h['grpc-timeout']).toMatch(/^(\d{3}|1000)m$/); // capped by upstream.timeoutMs
      expect(h.authorization).toBeUndefined();
      expect(h['triton-grpc-protocol-other']).toBeUndefined();
      expect(String(h['user-agent'])).toMatch(/^grpc-node-js/);
      // Three more calls with no deadline: the same header block each time once grpc-js has indexed
      // its fields (the gRPC port then decodes it once and relays one frozen copy, passthrough/grpc-ingress.ts).
      for (let i = 0; i < 3; i++) await unary(c, ModelInfer, simpleRequest(), md);
      expect(all).toHaveLength(4);
      const withoutTimeout = (x: Record<string, unknown>): Record<string, unknown> => ({ ...x, 'grpc-timeout': undefined });
      for (const x of all.slice(1)) {
        expect(withoutTimeout(x)).toEqual(withoutTimeout(all[0]!));
        expect(x['grpc-timeout']).toMatch(/^(\d{3}|1000)m$/); // upstream.timeoutMs alone
      }
    } finally {
      c.close();
      await ing.close();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });

  test('an answer while the client still uploads: relayed at once, the rest not forwarded, both streams closed', async () => {
    let seen: { rstCode: number | undefined; received: number } | undefined;
    peer.onInfer = (call) => {
      seen = call;
      call.stream.once('data', () => GrpcPeer.fail(call.stream, 3, 'refused early'));
    };
    const big = Buffer.alloc(8 * 1024 * 1024, 1);
    const o = await unary(client, ModelInfer, { model_name: 'x', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [big.length] }], raw_input_contents: [big] });
    expect([o.code, o.details]).toEqual([3, 'refused early']);
    await waitUntil(() => seen?.rstCode !== undefined, 'the upstream stream closed');
    expect(seen!.received).toBeLessThan(big.length);
    expect((await unary(client, inferenceService.ModelConfig, { name: 'nope' })).code).toBe(5); // the session still serves
  });

  test('a client cancel resets the upstream stream with CANCEL', async () => {
    let seen: { rstCode: number | undefined } | undefined;
    const arrived = new Promise<void>((resolve) => {
      peer.onInfer = (call) => {
        seen = call;
        resolve();
      };
    });
    const m = ModelInfer;
    const call = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, simpleRequest(), () => undefined);
    await arrived;
    call.cancel();
    await waitUntil(() => seen?.rstCode !== undefined, 'the upstream stream closed');
    expect(seen!.rstCode).toBe(CANCEL);
  });

  test('a deadline that passes resets the upstream stream with CANCEL', async () => {
    let seen: { rstCode: number | undefined } | undefined;
    peer.onInfer = (call) => { seen = call; };
    const o = await unary(client, ModelInfer, simpleRequest(), new Metadata(), 200);
    expect(o.code).toBe(4);
    await waitUntil(() => seen?.rstCode !== undefined, 'the upstream stream closed');
    expect(seen!.rstCode).toBe(constants.NGHTTP2_CANCEL);
  });
});

describe('a key limited to some models: the model as Triton reads it, in every message (hand-built frames)', () => {
  /** What the upstream got: per stream, its :path, its metadata and the bytes of its DATA. */
  interface Seen { path: string; headers: Record<string, unknown>; bytes: number; rstCode?: number }
  const seen: Seen[] = [];
  let upstream: Http2Server;
  let ingress: Ingress;
  let auth: Authenticator;
  let dir: string;
  const KEY = 'simple_0123456789abcdef';
  const ALL = 'all_0123456789abcdef';
  beforeAll(async () => {
    // An upstream that records, and answers every call OK with one empty message once its request ends.
    upstream = createServer();
    upstream.on('stream', (stream, headers) => {
      const s: Seen = { path: String(headers[':path']), headers: { ...headers }, bytes: 0 };
      seen.push(s);
      stream.on('data', (c: Buffer) => { s.bytes += c.length; });
      stream.on('error', () => undefined);
      stream.on('close', () => { s.rstCode = stream.rstCode; });
      stream.on('end', () => {
        if (stream.closed) return;
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.alloc(5));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    dir = mkdtempSync(join(tmpdir(), 'grpc-models-'));
    const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, ['keys:', `  - { id: all, token: "${sha(ALL)}", groups: "*" }`, `  - { id: simple-only, token: "${sha(KEY)}", groups: "*", models: [simple] }`].join('\n'));
    auth = new Authenticator({ enabled: true, keysFile: keys, keyHeader: 'x-api-key', open: ['health'], jwt: { jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: [], clockToleranceS: 0, modelsClaim: '', groupsClaim: '', cacheMaxAgeMs: 0, cooldownMs: 0 } as never });
    ingress = await startIngress(fixedBackends([`127.0.0.1:${(upstream.address() as AddressInfo).port}`]), {
      auth, keyHeader: 'x-api-key', apiRestricted: [parseRestriction('inference:admin-key=s3cret') as Restriction],
    });
  });
  afterAll(async () => {
    auth?.close();
    await ingress?.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  const frame = grpcMessage;
  const field1 = (s: string): Buffer => Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(s)]), Buffer.from(s)]);
  const encodeInfer = (name: string): Buffer => Buffer.from(inference.ModelInferRequest.encode(simpleRequest(name)).finish());

  /**
   * One call over a raw HTTP/2 stream: `pieces` written one at a time (each after the upstream has
   * seen the previous ones, when `settle`), then the end. Resolves with the gRPC status and message.
   */
  interface Status { status: number; message: string; error?: string }
  async function call(path: string, pieces: Buffer[], o: { key?: string; headers?: Record<string, string>; settle?: boolean } = {}): Promise<Status> {
    const session = connect(`http://${ingress.address}`);
    try {
      const stream = session.request({
        ':method': 'POST', ':path': `/inference.GRPCInferenceService/${path}`, 'content-type': 'application/grpc', te: 'trailers',
        authorization: `Bearer ${o.key ?? KEY}`, ...o.headers,
      });
      const status = new Promise<Status>((resolve) => {
        let fields: Record<string, string | undefined> = {};
        const done = (): void => resolve({ status: Number(fields['grpc-status'] ?? -1), message: decodeURIComponent(fields['grpc-message'] ?? ''), error: fields['x-tensorgate-error'] });
        stream.on('response', (h) => { fields = h as Record<string, string>; if (h['grpc-status'] !== undefined) done(); });
        stream.on('trailers', (t) => { fields = t as Record<string, string>; done(); });
        stream.on('close', done);
        stream.resume();
      });
      stream.on('error', () => undefined);
      let sent = 0;
      for (const p of pieces) {
        if (stream.closed || stream.destroyed) break;
        stream.write(p);
        sent += p.length;
        if (o.settle === true) {
          const before = sent;
          await waitUntil(() => seen.at(-1) !== undefined && seen.at(-1)!.bytes >= before || stream.closed, 'the upstream to see the piece', 2000).catch(() => undefined);
        }
      }
      if (!stream.closed && !stream.destroyed) stream.end();
      return await status;
    } finally {
      session.close();
    }
  }
  const DENIED = (model: string): { status: number; message: string; error: string } => ({ status: 7, message: `'simple-only' may not call model '${model}'`, error: 'GW_ERR_AUTH_FORBIDDEN' });

  test('ModelInfer with model_name moved to the end: PERMISSION_DENIED, nothing upstream', async () => {
    const reversed = Buffer.concat([Buffer.from(inference.ModelInferRequest.encode({ ...simpleRequest(), model_name: '' }).finish()), field1('identity_fp32')]);
    const n = seen.length;
    expect(await call('ModelInfer', [frame(reversed)])).toEqual(DENIED('identity_fp32'));
    // A ModelInfer call opens its upstream stream once its first message is read: never, here.
    expect(seen.slice(n).filter((s) => s.path.endsWith('/ModelInfer'))).toEqual([]);
    expect(ingress.records.at(-1)).toMatchObject({ route: 'grpc ModelInfer', model: 'identity_fp32', grpcStatus: 7, auth: { outcome: 'forbidden' } });
  });

  test('`0a 06 "simple"` before a request for another model: PERMISSION_DENIED, on ModelInfer, ModelConfig and ModelMetadata (ModelReady is in the open health group); split in 3-byte pieces too', async () => {
    const n = seen.length;
    const attack = frame(Buffer.concat([field1('simple'), encodeInfer('identity_fp32')]));
    expect(await call('ModelInfer', [attack])).toEqual(DENIED('identity_fp32'));
    const pieces: Buffer[] = [];
    for (let i = 0; i < attack.length; i += 3) pieces.push(attack.subarray(i, i + 3));
    expect(await call('ModelInfer', pieces)).toEqual(DENIED('identity_fp32'));
    for (const rpc of ['ModelConfig', 'ModelMetadata'] as const) {
      const m = frame(Buffer.concat([field1('simple'), Buffer.from(inference.ModelConfigRequest.encode({ name: 'identity_fp32' }).finish())]));
      expect(await call(rpc, [m])).toEqual(DENIED('identity_fp32'));
    }
    // The calls that open their upstream stream at once got not one byte of the refused message.
    expect(seen.slice(n).map((s) => s.bytes)).toEqual(seen.slice(n).map(() => 0));
  });

  test('ModelStreamInfer: the second message, for another model, ends the call with PERMISSION_DENIED in trailers before it is forwarded', async () => {
    const n = seen.length;
    const first = frame(encodeInfer('simple'));
    const r = await call('ModelStreamInfer', [first, frame(encodeInfer('identity_fp32'))], { settle: true });
    expect(r).toEqual(DENIED('identity_fp32'));
    const streams = (): Seen[] => seen.slice(n).filter((s) => s.path.endsWith('/ModelStreamInfer'));
    await waitUntil(() => streams()[0]?.rstCode !== undefined, 'the upstream stream to close');
    // The first message, and not one byte of the second; the upstream stream reset (CANCEL), not ended.
    expect(streams().map((s) => [s.bytes, s.rstCode])).toEqual([[first.length, CANCEL]]);
    // A later message that moves its name to the end, in the same chunk as an allowed one.
    const m = seen.length;
    const both = Buffer.concat([first, frame(Buffer.concat([encodeInfer('simple'), field1('identity_fp32')]))]);
    expect(await call('ModelStreamInfer', [both])).toEqual(DENIED('identity_fp32'));
    // (Its upstream stream, opened at once and reset, may not even have reached the upstream.)
    expect(seen.slice(m).filter((s) => s.path.endsWith('/ModelStreamInfer') && s.bytes > 0)).toEqual([]);
  });

  test('a compressed message: its model cannot be read before forwarding, PERMISSION_DENIED', async () => {
    const n = seen.length;
    const r = await call('ModelInfer', [frame(encodeInfer('simple'), true)], { headers: { 'grpc-encoding': 'gzip' } });
    expect(r).toEqual({ status: 7, message: 'these credentials are limited to some models, and the message\'s model cannot be read before it is forwarded: the message is compressed', error: 'GW_ERR_AUTH_FORBIDDEN' });
    expect(seen.slice(n).filter((s) => s.path.endsWith('/ModelInfer'))).toEqual([]);
    // A key for every model is not held up by what it cannot read.
    expect((await call('ModelInfer', [frame(encodeInfer('simple'), true)], { key: ALL, headers: { 'grpc-encoding': 'gzip' } })).status).toBe(0);
  });

  test('allowed calls go through, and the record names the model Triton serves (the last copy)', async () => {
    expect((await call('ModelInfer', [frame(Buffer.concat([field1('identity_fp32'), encodeInfer('simple')]))])).status).toBe(0);
    expect(ingress.records.at(-1)).toMatchObject({ model: 'simple', grpcStatus: 0 });
    expect((await call('ModelInfer', [frame(Buffer.concat([encodeInfer('simple'), field1('identity_fp32')]))], { key: ALL })).status).toBe(0);
    expect(ingress.records.at(-1)).toMatchObject({ model: 'identity_fp32', grpcStatus: 0 });
    const two = Buffer.concat([frame(encodeInfer('simple')), frame(encodeInfer('simple'))]);
    expect((await call('ModelStreamInfer', [two])).status).toBe(0);
  });

  test('repository load/unload and trace settings apply the model list; the global trace settings and statistics of every model are refused', async () => {
    const load = (name: string): Buffer => frame(Buffer.from(inference.RepositoryModelLoadRequest.encode({ repository_name: '', model_name: name }).finish()));
    expect(await call('RepositoryModelLoad', [load('identity_fp32')])).toEqual(DENIED('identity_fp32'));
    expect(await call('RepositoryModelUnload', [load('identity_fp32')])).toEqual(DENIED('identity_fp32'));
    expect(await call('RepositoryModelLoad', [frame(Buffer.concat([field1('simple'), Buffer.from(inference.RepositoryModelLoadRequest.encode({ model_name: 'identity_fp32' }).finish())]))]))
      .toEqual(DENIED('identity_fp32')); // field 1 is the repository's name here: not the model
    expect((await call('RepositoryModelLoad', [load('simple')])).status).toBe(0);
    expect((await call('RepositoryModelUnload', [load('simple')])).status).toBe(0);
    const trace = (name: string): Buffer => frame(Buffer.from(inference.TraceSettingRequest.encode({ settings: { trace_level: { value: ['TIMESTAMPS'] } }, model_name: name }).finish()));
    expect(await call('TraceSetting', [trace('identity_fp32')])).toEqual(DENIED('identity_fp32'));
    expect(await call('TraceSetting', [trace('')])).toEqual({ status: 7, message: '\'simple-only\' may not make a call that applies to every model', error: 'GW_ERR_AUTH_FORBIDDEN' });
    expect((await call('TraceSetting', [trace('simple')])).status).toBe(0);
    expect((await call('TraceSetting', [trace('')], { key: ALL })).status).toBe(0);
    expect(await call('ModelStatistics', [frame(new Uint8Array(0))])).toEqual(EVERY);
    expect((await call('ModelStatistics', [frame(new Uint8Array(0))], { key: ALL })).status).toBe(0);
  });

  const EVERY = { status: 7, message: '\'simple-only\' may not make a call that applies to every model', error: 'GW_ERR_AUTH_FORBIDDEN' };
  const LIMITED = (what: string): typeof EVERY => ({ status: 7, message: `'simple-only' may not ${what}: they are limited to some models`, error: 'GW_ERR_AUTH_FORBIDDEN' });

  // Regression: a key limited to `simple` could upload model code (a load of `simple` with a
  // configuration or files: a Python backend runs model.py), unload other models with it, change
  // the whole server's logging, drop every shared-memory region, and list every model.
  test('calls that reach past the key\'s models are refused, nothing upstream: load with parameters, unload_dependents, LogSettings, RepositoryIndex, unregister every region', async () => {
    const n = seen.length;
    const loadWith = (parameters: Record<string, inference.IModelRepositoryParameter>): Buffer =>
      frame(Buffer.from(inference.RepositoryModelLoadRequest.encode({ model_name: 'simple', parameters }).finish()));
    expect(await call('RepositoryModelLoad', [loadWith({ config: { string_param: '{"backend":"python"}' } })])).toEqual(LIMITED('load a model with parameters (a configuration or files)'));
    expect(await call('RepositoryModelLoad', [loadWith({ 'file:1/model.py': { bytes_param: Buffer.from('import os') } })])).toEqual(LIMITED('load a model with parameters (a configuration or files)'));
    const unload = (dependents: boolean): Buffer => frame(Buffer.from(inference.RepositoryModelUnloadRequest.encode({ model_name: 'simple', parameters: { unload_dependents: { bool_param: dependents } } }).finish()));
    expect(await call('RepositoryModelUnload', [unload(true)])).toEqual(LIMITED('unload a model with unload_dependents'));
    // An entry saying true, then one saying false (Triton keeps the last): refused all the same.
    const both = frame(Buffer.concat([Buffer.from(inference.RepositoryModelUnloadRequest.encode({ model_name: 'simple', parameters: { unload_dependents: { bool_param: true } } }).finish()),
      Buffer.from(inference.RepositoryModelUnloadRequest.encode({ parameters: { unload_dependents: { bool_param: false } } }).finish())]));
    expect(await call('RepositoryModelUnload', [both])).toEqual(LIMITED('unload a model with unload_dependents'));
    expect(await call('LogSettings', [frame(Buffer.from(inference.LogSettingsRequest.encode({ settings: { log_verbose_level: { uint32_param: 1 } } }).finish()))])).toEqual(EVERY);
    expect(await call('RepositoryIndex', [frame(new Uint8Array(0))])).toEqual(EVERY);
    for (const rpc of ['SystemSharedMemoryUnregister', 'CudaSharedMemoryUnregister']) {
      expect(await call(rpc, [frame(new Uint8Array(0))])).toEqual(LIMITED('unregister every shared-memory region'));
    }
    // The calls that name a message were opened upstream (no ModelInfer: not held), but no byte went.
    expect(seen.slice(n).filter((x) => x.bytes > 0)).toEqual([]);
    // What stays allowed: the model's own unload (tritonclient always sends unload_dependents), a load
    // without parameters, one named region; and every one of these with a key not limited to models.
    expect((await call('RepositoryModelUnload', [unload(false)])).status).toBe(0);
    expect((await call('RepositoryModelLoad', [loadWith({})])).status).toBe(0);
    expect((await call('SystemSharedMemoryUnregister', [frame(Buffer.from(inference.SystemSharedMemoryUnregisterRequest.encode({ name: 'mine' }).finish()))])).status).toBe(0);
    expect((await call('RepositoryModelUnload', [unload(true)], { key: ALL })).status).toBe(0);
    expect((await call('LogSettings', [frame(new Uint8Array(0))], { key: ALL })).status).toBe(0);
    expect((await call('RepositoryIndex', [frame(new Uint8Array(0))], { key: ALL })).status).toBe(0);
    expect((await call('CudaSharedMemoryUnregister', [frame(new Uint8Array(0))], { key: ALL })).status).toBe(0);
  });

  test('no credential goes upstream as metadata: authorization, the key header, the restricted-API header, proxy-authorization, cookie', async () => {
    const n = seen.length;
    const r = await call('ModelInfer', [frame(encodeInfer('simple'))], {
      headers: { 'x-api-key': ALL, 'admin-key': 's3cret', 'triton-grpc-protocol-admin-key': 's3cret', 'proxy-authorization': 'Basic eA==', cookie: 'session=s3cret', 'x-user': 'kept' },
    });
    expect(r.status).toBe(0);
    // This call's upstream stream (a refused call of an earlier test may reach the upstream late).
    const h = seen.slice(n).find((x) => x.headers['x-user'] !== undefined)!.headers;
    expect([h.authorization, h['x-api-key'], h['admin-key'], h['triton-grpc-protocol-admin-key'], h['proxy-authorization'], h.cookie, h['x-user']])
      .toEqual([undefined, undefined, undefined, undefined, undefined, undefined, 'kept']);
  });
});
