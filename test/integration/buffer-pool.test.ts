// Pooled message buffers (docs/cut-through.md#buffers) through the gateway and the reference backend: on every
// way a request can end, the pool gets its buffer back (in use 0) and the next request of the size
// reuses it (a hit); answers are byte-identical with pooling on and off, also when the reused page
// was scribbled over in between (every message byte is written for each request).
import { request } from 'node:http';
import { type Http2Server, createServer as createH2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { BufferPool, type BufferPoolStats, HEADER_ROOM_BYTES, MIN_CLASS_BYTES } from '../../gateway/buffers/pool';
import { frameInferRequest } from '../../gateway/infer/frame-request';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import type { InferRequest } from '../../gateway/infer/request';
import { gatewayFor, HTTP2_CLIENT } from '../support/gateway';
import { binaryBody, type RawResponse, send } from '../support/http';
import { RecordTap } from '../support/records';
import { nextEvent, waitUntil } from '../support/wait';
import { fixedBackends } from '../support/upstream';

const KiB = 1024;

/** The pool's counts settle when the transport reports its write done: no event of ours says when. */
const until = (cond: () => boolean, what = 'the pool to settle'): Promise<void> => waitUntil(cond, what, 3000);

const bytes = (n: number, seed: number): Buffer => {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};

/** A V2 JSON body whose one numeric tensor is a base64 string. */
const base64Body = (model: string, input: string, datatype: string, shape: number[], data: Buffer, parameters?: Record<string, unknown>): string =>
  JSON.stringify({ ...(parameters ? { parameters } : {}), inputs: [{ name: input, datatype, shape, data: data.toString('base64') }] });

const slowBody = (delayMs: number, floats: number): string =>
  base64Body('slow', 'INPUT0', 'FP32', [floats], bytes(floats * 4, 3), { delay_ms: delayMs });

/**
 * Whether `bytes` is what idle pages of `pool` can add up to: n pages, each a class of a power of
 * two from MIN_CLASS_BYTES up to the largest class, plus HEADER_ROOM_BYTES.
 */
function wholePages(pool: BufferPool, bytes: number): boolean {
  const maxUnits = (pool.maxPooledBytes - HEADER_ROOM_BYTES) / MIN_CLASS_BYTES;
  for (let n = 0; n * (MIN_CLASS_BYTES + HEADER_ROOM_BYTES) <= bytes; n++) {
    const units = (bytes - n * HEADER_ROOM_BYTES) / MIN_CLASS_BYTES;
    // n powers of two, each at most maxUnits, sum to `units` when its set bits are at most n and n at most it.
    if (Number.isInteger(units) && units.toString(2).replace(/0/g, '').length <= n && n <= units && units <= n * maxUnits) return true;
  }
  return false;
}

const ROUTES = JSON.stringify([{ path: '/api/image-stats', model: 'image_stats', inputs: { IMAGE: { from: '/image', decode: 'base64' } }, response: 'v2' }]);

/**
 * The pool is the handler's: a planned request (server.plannedInfer, on h2) frames a small unpooled
 * head and sends its payload by reference, so these gateways serve every request by its handler.
 */
const HANDLED = '--planned-infer=false';

describe.each(['h2', 'grpc-js'])('pooled message buffers over %s', (transport) => {
  let gw: RunningGateway;
  let off: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--transport', transport, '--routes', ROUTES, HANDLED]);
    off = await gatewayFor(['--demo', '--transport', transport, '--routes', ROUTES, '--buffer-pool-bytes', '0', HANDLED]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
    await off.close();
  });

  const stats = (): BufferPoolStats => gw.bufferPool.stats();
  /** The pool once every buffer is back: what changed since `before`. */
  async function settled(before: BufferPoolStats): Promise<Omit<BufferPoolStats, 'retainedBytes'>> {
    await until(() => stats().inUse === 0);
    const s = stats();
    return {
      hits: s.hits - before.hits, misses: s.misses - before.misses, droppedBound: s.droppedBound - before.droppedBound,
      droppedInFlight: s.droppedInFlight - before.droppedInFlight, inUse: s.inUse,
    };
  }
  const recordOf = async (f: () => Promise<unknown>): Promise<RequestRecord> => {
    const n = tap.mark();
    await f();
    return tap.after(n);
  };

  test('success: the first request allocates, the second reuses the page and the ledger counts no allocation', async () => {
    const body = base64Body('image_stats', 'IMAGE', 'UINT8', [1, 300 * KiB], bytes(300 * KiB, 1));
    const s0 = stats();
    let first: RawResponse | undefined;
    const rec1 = await recordOf(async () => { first = await send(`${gw.url}/v2/models/image_stats/infer`, { body }); });
    expect(await settled(s0)).toEqual({ hits: 0, misses: 1, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
    const s1 = stats();
    let second: RawResponse | undefined;
    const rec2 = await recordOf(async () => { second = await send(`${gw.url}/v2/models/image_stats/infer`, { body }); });
    expect(await settled(s1)).toEqual({ hits: 1, misses: 0, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
    expect([first!.status, second!.status]).toEqual([200, 200]);
    expect(second!.body.equals(first!.body)).toBe(true);
    // The JSON text left once the payload is cut out is gathered fresh. The page the payload was
    // decoded into while the body arrived (decode/base64/base64-staging.ts) is kept warm between uploads
    // (buffers/warm.ts) and the message comes from the pool: the second request allocates only
    // the text. The first also allocated the message, and the page unless an earlier test of this
    // process left one warm.
    expect(rec2.ledger!.hops.decode.allocations).toBe(1);
    expect([2, 3]).toContain(rec1.ledger!.hops.decode.allocations);
  });

  test('a decode error after framing (too few values) gives the buffer back', async () => {
    const values = Array.from({ length: 20_000 }, (_, i) => i);
    const short = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 20_001], data: values }] });
    const s0 = stats();
    const r = await send(`${gw.url}/v2/models/identity_int32/infer`, { body: short });
    expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([400, "Unable to parse 'data': Shape does not match true shape of 'data' field"]);
    const after = await settled(s0);
    expect(after.inUse).toBe(0);
    expect(after.hits + after.misses).toBe(1); // it was framed
    const s1 = stats();
    const ok = await send(`${gw.url}/v2/models/identity_int32/infer`, { body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 20_001], data: [...values, 0] }] }) });
    expect(ok.status).toBe(200);
    expect(await settled(s1)).toEqual({ hits: 1, misses: 0, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
  });

  test('an upstream gRPC error gives the buffer back', async () => {
    const body = base64Body('failing', 'INPUT0', 'FP32', [1, 50 * KiB], bytes(200 * KiB, 2));
    const s0 = stats();
    const r = await send(`${gw.url}/v2/models/failing/infer`, { body });
    expect(r.status).toBe(500);
    const after = await settled(s0);
    expect([after.hits + after.misses, after.droppedInFlight, after.inUse]).toEqual([1, 0, 0]);
    const s1 = stats();
    expect((await send(`${gw.url}/v2/models/failing/infer`, { body })).status).toBe(500);
    expect(await settled(s1)).toEqual({ hits: 1, misses: 0, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
  });

  test('a client that goes away mid-call gives the buffer back once the call is cancelled', async () => {
    const { stats: backend, events } = gw.demoBackend!;
    const cancelled = backend.slowCancellations;
    const s0 = stats();
    const started = nextEvent(events, 'slow-started');
    const req = request(`${gw.url}/v2/models/slow/infer`, { method: 'POST' });
    req.on('error', () => { /* we close it ourselves */ });
    req.end(slowBody(5000, 50 * KiB));
    await started;
    const cancelledNow = nextEvent(events, 'slow-cancelled');
    req.destroy();
    await cancelledNow;
    expect(backend.slowCancellations).toBe(cancelled + 1);
    const after = await settled(s0);
    // The request had been written in full before the model started: nothing may still read it.
    expect([after.hits + after.misses, after.droppedInFlight, after.inUse]).toEqual([1, 0, 0]);
    const s1 = stats();
    expect((await send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(0, 50 * KiB) })).status).toBe(200);
    expect(await settled(s1)).toEqual({ hits: 1, misses: 0, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
  });

  test('the deadline (504) gives the buffer back', async () => {
    // The deadline is long enough that the call is framed and sent before it passes, also on a
    // loaded machine (300 ms once passed before a cold gateway had framed the body: no buffer taken).
    const short = await gatewayFor(['--demo', '--transport', transport, '--upstream-timeout-ms', '1500', HANDLED]);
    try {
      const pool = short.bufferPool;
      const started = nextEvent(short.demoBackend!.events, 'slow-started');
      const r = await send(`${short.url}/v2/models/slow/infer`, { body: slowBody(6000, 50 * KiB) });
      await started; // the call was sent: the 504 is the deadline's during the call
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([504, 'GW_ERR_UPSTREAM_DEADLINE']);
      await until(() => pool.stats().inUse === 0);
      expect(pool.stats()).toMatchObject({ misses: 1, hits: 0, droppedInFlight: 0, inUse: 0 });
      expect((await send(`${short.url}/v2/models/slow/infer`, { body: slowBody(0, 50 * KiB) })).status).toBe(200);
      await until(() => pool.stats().inUse === 0);
      expect(pool.stats()).toMatchObject({ misses: 1, hits: 1, droppedInFlight: 0, inUse: 0 });
    } finally {
      await short.close();
    }
  });

  describe('answers are byte-identical with pooling on and off, also from a page scribbled over', () => {
    const payload = bytes(300 * KiB, 5);
    const floats = Array.from({ length: 20_000 }, (_, i) => (i % 977) / 8);
    const cases: [string, string, () => { body: Buffer | string; headers?: Record<string, string | number> }][] = [
      ['V2 JSON numbers', '/v2/models/identity_fp32/infer',
        () => ({ body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, floats.length], data: floats }] }) })],
      ['V2 base64', '/v2/models/image_stats/infer', () => ({ body: base64Body('image_stats', 'IMAGE', 'UINT8', [1, payload.length], payload) })],
      ['gzip raw', '/v2/models/identity_uint8/infer',
        () => ({ body: gzipSync(payload), headers: { 'Content-Encoding': 'gzip', 'Inference-Header-Content-Length': 0 } })],
      ['gzip binary extension', '/v2/models/identity_uint8/infer', () => {
        const b = binaryBody({
          inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, payload.length], parameters: { binary_data_size: payload.length } }],
          outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
        }, payload);
        return { body: gzipSync(b.body), headers: { ...b.headers, 'Content-Encoding': 'gzip' } };
      }],
      ['V1 predict', '/v1/models/image_stats:predict', () => ({ body: JSON.stringify({ instances: [{ b64: payload.toString('base64') }] }) })],
      ['declarative route', '/api/image-stats', () => ({ body: JSON.stringify({ image: payload.toString('base64') }) })],
      ['generate', '/v2/models/identity_fp32/generate', () => ({ body: JSON.stringify({ INPUT0: floats }) })],
    ];
    test.each(cases)('%s', async (_name, path, make) => {
      const { body, headers } = make();
      const reference = await send(`${off.url}${path}`, { body, headers });
      expect(reference.status).toBe(200);
      expect(off.bufferPool.stats()).toEqual({ hits: 0, misses: 0, droppedBound: 0, droppedInFlight: 0, retainedBytes: 0, inUse: 0 });

      const s0 = stats();
      const first = await send(`${gw.url}${path}`, { body, headers });
      await until(() => stats().inUse === 0);
      expect(stats().hits + stats().misses).toBe(s0.hits + s0.misses + 1);
      // Scribble over the idle pages a message of this size can get (the warmest of each class).
      const scribbled = [payload.length, floats.length * 4].map((n) => gw.bufferPool.acquire(n + 64));
      for (const b of scribbled) b.fill(0xa5);
      for (const b of scribbled) gw.bufferPool.release(b);
      const s1 = stats();
      const second = await send(`${gw.url}${path}`, { body, headers });
      expect(await settled(s1)).toEqual({ hits: 1, misses: 0, droppedBound: 0, droppedInFlight: 0, inUse: 0 });
      for (const r of [first, second]) {
        expect(r.status).toBe(reference.status);
        expect(r.body.equals(reference.body)).toBe(true);
      }
    });
  });

  test('the pool\'s counts are on /metrics', async () => {
    const text = await (await fetch(gw.metricsUrl!)).text();
    const s = stats();
    expect(text).toContain(`tensorgate_buffer_pool_hits_total ${s.hits}\n`);
    expect(text).toContain(`tensorgate_buffer_pool_misses_total ${s.misses}\n`);
    expect(text).toContain(`tensorgate_buffer_pool_dropped_total{reason="in_flight"} ${s.droppedInFlight}\n`);
    expect(text).toContain(`tensorgate_buffer_pool_in_use ${s.inUse}\n`);
    // The idle bytes change without a request (an idle page dropped after its time, an upstream
    // write completing): what the pool guarantees is whole pages within buffers.poolBytes.
    const retained = Number(/^tensorgate_buffer_pool_retained (\d+)$/m.exec(text)?.[1]);
    expect([retained, retained <= gw.bufferPool.poolBytes, wholePages(gw.bufferPool, retained)]).toEqual([retained, true, true]);
  });
});

describe('the h2 data plane holds a pooled message until its write has completed', () => {
  const message = (pool: BufferPool, n: number): Buffer => {
    const req: InferRequest = {
      modelName: 'identity_uint8', modelVersion: '', id: undefined, parameters: new Map(),
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, n], parameters: new Map(), byteSize: n }],
      outputs: undefined, binaryDataOutput: true,
    };
    const framed = frameInferRequest(req, (size) => pool.acquire(size));
    bytes(n, 9).copy(framed.message, framed.slots[0]!.offset);
    return framed.message;
  };

  test('answered: the page comes back for reuse', async () => {
    const backend: ReferenceBackend = await startReferenceBackend();
    const pool = new BufferPool(64 * 1024 * 1024);
    const plane = new H2DataPlane(fixedBackends([backend.address]), undefined, pool, undefined, HTTP2_CLIENT);
    try {
      const m = message(pool, 4 << 20);
      const answer = await plane.modelInfer(m, { deadline: Date.now() + 10_000, signal: new AbortController().signal, metadata: {} });
      expect(answer.byteLength).toBeGreaterThan(4 << 20);
      pool.release(m);
      await until(() => pool.stats().inUse === 0);
      expect(pool.stats()).toMatchObject({ misses: 1, inUse: 0, droppedInFlight: 0 });
      expect(pool.acquire(4 << 20).buffer).toBe(m.buffer);
    } finally {
      plane.close();
      await backend.close();
    }
  });

  test('cancelled while the upstream has not read it: the page is given up, never reused', async () => {
    // An upstream that takes the stream but never reads it: flow control keeps most of the
    // 4 MiB in the client's send queue when the call is cancelled.
    const server: Http2Server = createH2Server();
    let streams = 0;
    server.on('stream', (s) => {
      streams++;
      s.pause();
      s.on('error', () => { /* reset by the client */ });
    });
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const pool = new BufferPool(64 * 1024 * 1024);
    const plane = new H2DataPlane(fixedBackends([`127.0.0.1:${(server.address() as AddressInfo).port}`]), undefined, pool, undefined, HTTP2_CLIENT);
    try {
      const m = message(pool, 4 << 20);
      const abort = new AbortController();
      const call = plane.modelInfer(m, { deadline: Date.now() + 10_000, signal: abort.signal, metadata: {} });
      await until(() => streams > 0, 'the upstream to take the stream');
      abort.abort();
      await expect(call).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_CANCELLED' });
      pool.release(m); // the handler has settled
      await until(() => pool.stats().inUse === 0);
      expect(pool.stats()).toMatchObject({ misses: 1, hits: 0, inUse: 0, droppedInFlight: 1, retainedBytes: 0 });
      expect(pool.acquire(4 << 20).buffer).not.toBe(m.buffer);
    } finally {
      plane.close();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('idle pages (gateway/buffers/reclaim.ts)', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', HANDLED]);
  });
  afterAll(async () => {
    await gw.close();
  });

  test('a page nobody asked for since POOL_IDLE_MS is dropped by the running gateway; the next request allocates again', async () => {
    const body = base64Body('image_stats', 'IMAGE', 'UINT8', [1, 300 * KiB], bytes(300 * KiB, 5));
    const first = await send(`${gw.url}/v2/models/image_stats/infer`, { body });
    expect(first.status).toBe(200);
    await until(() => gw.bufferPool.stats().inUse === 0);
    expect(gw.bufferPool.stats().retainedBytes).toBeGreaterThan(0);
    const dropped = gw.bufferPool.droppedIdle;
    // Dropped at the first once-a-second tick after 2 s idle.
    await waitUntil(() => gw.bufferPool.stats().retainedBytes === 0, 'the idle page to be dropped', 6000);
    expect(gw.bufferPool.droppedIdle).toBeGreaterThan(dropped);
    const misses = gw.bufferPool.stats().misses;
    const second = await send(`${gw.url}/v2/models/image_stats/infer`, { body });
    expect(second.body.equals(first.body)).toBe(true);
    expect(gw.bufferPool.stats().misses).toBe(misses + 1);
  });
});
