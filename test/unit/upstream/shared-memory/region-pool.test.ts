import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InferRequest } from '../../../../gateway/infer/request';
import { SHM_FALLBACK_NAMES } from '../../../../gateway/telemetry/metrics';
import { frameInferHead, frameInferRequest } from '../../../../gateway/infer/frame-request';
import { type RegionRegistry, SHM_FALLBACK_REASONS, SharedMemoryPool } from '../../../../gateway/upstream/shared-memory/region-pool';
import { SharedMemoryUpload } from '../../../../gateway/upstream/shared-memory/upload';
import { splits } from '../../../support/chunks';
import { inference } from '../../../../proto/services';
import type { InferResponse } from '../../../../gateway/infer/response';

/** Triton's registrations, in memory; `failing` makes every call reject. */
class FakeRegistry implements RegionRegistry {
  readonly regions = new Map<string, { key: string; byteSize: number }>();
  readonly calls: string[] = [];
  failing = false;
  register(name: string, key: string, byteSize: number): Promise<void> {
    this.calls.push(`register ${name}`);
    if (this.failing) return Promise.reject(new Error('unavailable'));
    this.regions.set(name, { key, byteSize });
    return Promise.resolve();
  }
  unregister(name: string): Promise<void> {
    this.calls.push(`unregister ${name}`);
    if (this.failing) return Promise.reject(new Error('unavailable'));
    this.regions.delete(name);
    return Promise.resolve();
  }
  registered(): Promise<string[]> {
    if (this.failing) return Promise.reject(new Error('unavailable'));
    return Promise.resolve([...this.regions.keys()]);
  }
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-shm-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const pid = process.pid;

interface PoolOptions {
  regions?: number;
  regionBytes?: number;
  alive?: (pid: number) => boolean;
}

function pool(registry: RegionRegistry, o: PoolOptions = {}): SharedMemoryPool {
  return new SharedMemoryPool({ regions: 2, regionBytes: 4096, prefix: 'tg', registry, dir, alive: () => false, retryMs: 0, ...o });
}

test('the fallback reasons are the metric\'s', () => {
  expect([...SHM_FALLBACK_NAMES]).toEqual([...SHM_FALLBACK_REASONS]);
});

test('start creates the files and registers each as /<name> with its size', async () => {
  const r = new FakeRegistry();
  const p = pool(r);
  expect(await p.start(1000)).toBe(true);
  expect([...r.regions]).toEqual([[`tg-${pid}-0`, { key: `/tg-${pid}-0`, byteSize: 4096 }], [`tg-${pid}-1`, { key: `/tg-${pid}-1`, byteSize: 4096 }]]);
  expect(readdirSync(dir).sort()).toEqual([`tg-${pid}-0`, `tg-${pid}-1`]);
  expect(statSync(join(dir, `tg-${pid}-0`)).size).toBe(4096);
  expect(p.stats()).toMatchObject({ regions: 2, inUse: 0, leases: 0, reclaimed: 0 });
  await p.close(1000);
});

test('start reclaims the regions and files of a gone process of the prefix (and stale ones of its own pid), nothing else', async () => {
  const r = new FakeRegistry();
  for (const n of ['tg-111-0', 'tg-111-1', `tg-${pid}-5`, 'tg-222-0', 'other-111-0', 'tg-x']) r.regions.set(n, { key: `/${n}`, byteSize: 1 });
  for (const f of ['tg-111-0', 'tg-333-0', 'tg-222-0', 'other-111-0', 'unrelated']) writeFileSync(join(dir, f), 'x');
  const p = pool(r, { alive: (x) => x === 222 });
  expect(await p.start(1000)).toBe(true);
  expect([...r.regions.keys()].sort()).toEqual(['other-111-0', 'tg-222-0', `tg-${pid}-0`, `tg-${pid}-1`, 'tg-x'].sort());
  expect(readdirSync(dir).sort()).toEqual(['other-111-0', 'tg-222-0', `tg-${pid}-0`, `tg-${pid}-1`, 'unrelated'].sort());
  expect(p.stats().reclaimed).toBe(3);
  await p.close(1000);
});

test('leases: one region per request until none is free; too large and exhausted are fallbacks; release is once', async () => {
  const p = pool(new FakeRegistry());
  await p.start(1000);
  const a = p.lease(4096);
  const b = p.lease(1);
  expect(typeof a).toBe('object');
  expect(typeof b).toBe('object');
  expect(p.lease(1)).toBe('exhausted');
  expect(p.lease(4097)).toBe('too_large');
  if (typeof a === 'string' || typeof b === 'string') throw new Error('leased');
  expect(a.region.name).not.toBe(b.region.name);
  expect(p.stats()).toMatchObject({ inUse: 2, leases: 2, fallbacks: { exhausted: 1, too_large: 1, unregistered: 0, ineligible: 0 } });
  a.release();
  a.release();
  expect(p.stats().inUse).toBe(1);
  const c = p.lease(10);
  expect(typeof c === 'object' && c.region.name).toBe(a.region.name);
  expect(p.lease(10)).toBe('exhausted');
  await p.close(1000);
});

test('a lease writes at offsets of its file', async () => {
  const p = pool(new FakeRegistry());
  await p.start(1000);
  const l = p.lease(100);
  if (typeof l === 'string') throw new Error(l);
  l.write(Buffer.from('..abc..'), 2, 5, 64);
  expect(readFileSync(join(dir, l.region.name)).subarray(64, 67).toString()).toBe('abc');
  expect(p.stats().bytes).toBe(3);
  await p.close(1000);
});

test('Triton unreachable: the start fails, leases fall back as unregistered and start it again; ready once Triton answers', async () => {
  const r = new FakeRegistry();
  r.failing = true;
  const p = pool(r);
  const errors: unknown[] = [];
  p.onError = (e) => errors.push(e);
  expect(await p.start(1000)).toBe(false);
  expect(errors).toHaveLength(1);
  r.failing = false;
  expect(p.lease(1)).toBe('unregistered'); // and starts again
  expect(await p.start(1000)).toBe(true);
  expect(typeof p.lease(1)).toBe('object');
  expect(p.stats().fallbacks.unregistered).toBe(1);
  await p.close(1000);
});

test('lost (Triton restarted): the regions are made and registered again on a later lease', async () => {
  const r = new FakeRegistry();
  const p = pool(r);
  await p.start(1000);
  r.regions.clear();
  p.lost();
  expect(p.lease(1)).toBe('unregistered');
  expect(await p.start(1000)).toBe(true);
  expect(r.regions.size).toBe(2);
  await p.close(1000);
});

test('close unregisters every region and removes the files, leased ones included; later leases fall back', async () => {
  const r = new FakeRegistry();
  const p = pool(r);
  await p.start(1000);
  const l = p.lease(1);
  await p.close(1000);
  expect(r.regions.size).toBe(0);
  expect(readdirSync(dir)).toEqual([]);
  if (typeof l !== 'string') l.release();
  expect(p.lease(1)).toBe('unregistered');
  expect(p.stats()).toMatchObject({ regions: 0, inUse: 0 });
});

test('close while Triton is unreachable still removes the files, within its bound', async () => {
  const r = new FakeRegistry();
  const p = pool(r);
  await p.start(1000);
  r.failing = true;
  await p.close(1000);
  expect(readdirSync(dir)).toEqual([]);
});

describe('SharedMemoryUpload', () => {
  const request: InferRequest = {
    modelName: 'm', modelVersion: '', id: 'r1', parameters: new Map(), outputs: undefined, binaryDataOutput: true,
    inputs: [
      { name: 'J', datatype: 'INT32', shape: [2], parameters: new Map(), byteSize: 8 },
      { name: 'B', datatype: 'UINT8', shape: [5], parameters: new Map(), byteSize: 5 },
      { name: 'C', datatype: 'UINT8', shape: [3], parameters: new Map(), byteSize: 3 },
    ],
  };
  const external = [0, 5, 3];

  test.each(splits(Buffer.from('hello' + 'abc')))('the binary inputs go to the region (%s), the message names it; a JSON input stays in it', async (_name, chunks) => {
    const p = pool(new FakeRegistry());
    await p.start(1000);
    const framed = frameInferHead(request, external);
    framed.message.writeInt32LE(7, framed.slots[0]!.offset);
    framed.message.writeInt32LE(9, framed.slots[0]!.offset + 4);
    const u = SharedMemoryUpload.open(p, request, framed, external);
    if (typeof u === 'string') throw new Error(u);
    for (const c of chunks) u.write(c);
    const region = `tg-${pid}-1`;
    const shm = (offset: number, size: number) => new Map([
      ['shared_memory_region', { type: 'string', value: region }],
      ['shared_memory_offset', { type: 'int64', value: BigInt(offset) }],
      ['shared_memory_byte_size', { type: 'int64', value: BigInt(size) }],
    ] as const);
    const want = frameInferRequest({
      ...request, inputs: [request.inputs[0]!, { ...request.inputs[1]!, parameters: shm(0, 5), byteSize: undefined },
        { ...request.inputs[2]!, parameters: shm(64, 3), byteSize: undefined }],
    });
    want.message.writeInt32LE(7, want.slots[0]!.offset);
    want.message.writeInt32LE(9, want.slots[0]!.offset + 4);
    const sent = u.finish();
    expect('message' in sent && sent.message).toEqual(want.message);
    expect([u.copiedHead, u.sharedBytes]).toEqual([8, 8]);
    const file = readFileSync(join(dir, region));
    expect([file.subarray(0, 5).toString(), file.subarray(64, 67).toString()]).toEqual(['hello', 'abc']);
    u.release();
    expect(p.stats().inUse).toBe(0);
    await p.close(1000);
  });

  test('an input only partly out of the head (a raw BYTES body), or none out: ineligible, no region taken', async () => {
    const p = pool(new FakeRegistry());
    await p.start(1000);
    expect(SharedMemoryUpload.open(p, request, frameInferHead(request, [0, 4, 0]), [0, 4, 0])).toBe('ineligible');
    expect(SharedMemoryUpload.open(p, request, frameInferHead(request, []), [])).toBe('ineligible');
    expect(p.stats().inUse).toBe(0);
    await p.close(1000);
  });

  test('tensors larger than a region, or no free region: the pool says why', async () => {
    const p = pool(new FakeRegistry(), { regions: 1, regionBytes: 4096 });
    await p.start(1000);
    const big: InferRequest = { ...request, inputs: [{ ...request.inputs[1]!, shape: [5000], byteSize: 5000 }] };
    expect(SharedMemoryUpload.open(p, big, frameInferHead(big, [5000]), [5000])).toBe('too_large');
    const held = p.lease(1);
    expect(SharedMemoryUpload.open(p, request, frameInferHead(request, external), external)).toBe('exhausted');
    if (typeof held !== 'string') held.release();
    await p.close(1000);
  });
  describe('outputs of known size', () => {
    // B and C are binary inputs (8 bytes at 0 and 64); OUT is INT32 [4] per row, VAR has a variable dim.
    const cfg: inference.IModelConfig = {
      name: 'm', max_batch_size: 0,
      output: [{ name: 'OUT', data_type: inference.DataType.TYPE_INT32, dims: [4] }, { name: 'VAR', data_type: inference.DataType.TYPE_INT32, dims: [-1] }],
    };
    const answer = (outputs: { name: string; shape: number[]; bytes?: Buffer }[]): InferResponse => ({
      modelName: 'm', modelVersion: '1', id: 'r1', parameters: {},
      outputs: outputs.map((o) => ({ name: o.name, datatype: 'INT32', shape: o.shape, parameters: {}, data: o.bytes ? [o.bytes] : [], byteLength: o.bytes?.length ?? 0 })),
    });

    test('placed after the inputs, named in the message; the answer is filled from the region', async () => {
      const p = pool(new FakeRegistry());
      await p.start(1000);
      const u = SharedMemoryUpload.open(p, request, frameInferHead(request, external), external, { config: cfg, binary: () => true });
      if (typeof u === 'string') throw new Error(u);
      expect(u.hasOutputs).toBe(true);
      const region = `tg-${pid}-1`;
      const sent = u.finish();
      const msg = inference.ModelInferRequest.decode('message' in sent ? sent.message.subarray(5) : Buffer.alloc(0));
      expect(msg.outputs.map((o) => [o.name, Object.keys(o.parameters ?? {})])).toEqual([
        ['OUT', ['shared_memory_region', 'shared_memory_offset', 'shared_memory_byte_size']], ['VAR', []],
      ]);
      expect(String(msg.outputs[0]!.parameters!.shared_memory_offset!.int64_param)).toBe('128');
      // What Triton would write at 128.
      const triton = Buffer.from([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
      const file = readFileSync(join(dir, region));
      triton.copy(file, 128);
      writeFileSync(join(dir, region), file);
      const varBytes = Buffer.alloc(8, 9);
      const filled = u.withOutputs(answer([{ name: 'OUT', shape: [4] }, { name: 'VAR', shape: [2], bytes: varBytes }]), (n) => Buffer.alloc(n));
      expect(filled.outputs.map((o) => [o.name, Buffer.concat(o.data), o.byteLength])).toEqual([['OUT', triton, 16], ['VAR', varBytes, 8]]);
      expect(u.outputBytes).toBe(16);
      expect(p.stats().outputBytes).toBe(16);
      u.release();
      expect(p.stats().inUse).toBe(0);
      await p.close(1000);
    });

    test('an answer whose output does not fit its place, or carries bytes for it: GW_ERR_UPSTREAM_PROTOCOL', async () => {
      const p = pool(new FakeRegistry());
      await p.start(1000);
      const u = SharedMemoryUpload.open(p, request, frameInferHead(request, external), external, { config: cfg, binary: () => true });
      if (typeof u === 'string') throw new Error(u);
      const alloc = (n: number): Buffer => Buffer.alloc(n);
      expect(() => u.withOutputs(answer([{ name: 'OUT', shape: [5] }]), alloc)).toThrow(expect.objectContaining({
        code: 'GW_ERR_UPSTREAM_PROTOCOL', message: "upstream output 'OUT' (INT32 [5]) does not fit the 16 bytes its shared-memory place was given",
      }));
      expect(() => u.withOutputs(answer([{ name: 'OUT', shape: [4], bytes: Buffer.alloc(16) }]), alloc)).toThrow(expect.objectContaining({ code: 'GW_ERR_UPSTREAM_PROTOCOL' }));
      u.release();
      await p.close(1000);
    });

    test('outputs that would not fit the region with the inputs come back the normal way; the inputs still go in', async () => {
      const p = pool(new FakeRegistry(), { regionBytes: 4096 });
      await p.start(1000);
      const big: inference.IModelConfig = { ...cfg, output: [{ name: 'OUT', data_type: inference.DataType.TYPE_INT32, dims: [1024] }] };
      const u = SharedMemoryUpload.open(p, request, frameInferHead(request, external), external, { config: big, binary: () => true });
      if (typeof u === 'string') throw new Error(u);
      expect(u.hasOutputs).toBe(false);
      const sent = u.finish();
      const msg = inference.ModelInferRequest.decode('message' in sent ? sent.message.subarray(5) : Buffer.alloc(0));
      expect(msg.outputs).toEqual([]);
      u.release();
      await p.close(1000);
    });
  });
});
