// The shared-memory sidecar mode (upstream.sharedMemory) against real Triton on this machine,
// which shares /dev/shm with the gateway as a sidecar pod does: every differential case gives
// Triton's own HTTP answer with the mode on, binary and raw tensors reach Triton through the
// regions (not the gRPC message), and a gateway killed with SIGKILL mid-request leaks no region
// once the next one has started (Triton's SystemSharedMemoryStatus and /dev/shm both clean).
// Outputs of fixed size asked for as binary come back through the regions too (identity_uint8_2mib:
// rows of 2 MiB; simple and classifier_fp32 in the matrix), with the same answers, and a client
// that goes away mid-answer leaves no region leased.
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { Client, credentials, Metadata, type StatusObject } from '@grpc/grpc-js';
import { request } from 'node:http';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { type inference, inferenceService } from '../../proto/services';
import { prometheusSamples } from '../support/prometheus';
import { casesFor, expectSameAnswer } from './cases/differential';
import type { NamedCase } from './cases/index';
import { binaryRequest, infer, rawRequest } from './cases/types';

const TRITON = `http://${process.env.TRITON_HTTP}`;
const BIN = join(__dirname, '../../bin/tensorgate');

/** Names of the system shared-memory regions Triton has registered (its HTTP status endpoint). */
async function tritonRegions(): Promise<string[]> {
  const res = await fetch(`${TRITON}/v2/systemsharedmemory/status`, { signal: AbortSignal.timeout(10_000) });
  return ((await res.json()) as { name: string }[]).map((r) => r.name);
}

const shmFiles = (prefix: string): string[] => readdirSync('/dev/shm').filter((f) => f.startsWith(`${prefix}-`));

/** A raw 4 MiB body to image_stats, sent in pieces so the gateway is mid-request for a while. */
const RAW_BYTES = 4 * 1024 * 1024;

/** identity_uint8_2mib's row (test/triton/zoo.py): its output's size is fixed by the config. */
const ROW = 2 * 1024 * 1024;
const rows = (n: number): Buffer => {
  const b = Buffer.allocUnsafe(n * ROW);
  for (let i = 0; i < b.length; i++) b[i] = (i * 31 + 7) & 0xff;
  return b;
};
const binIn = (n: number) => ({ name: 'INPUT0', datatype: 'UINT8', shape: [n, ROW], parameters: { binary_data_size: n * ROW } });

/** Answers of 2–8 MiB whose output goes through the region (the last one: only the input fits an 8 MiB region). */
const OUTPUT_CASES: NamedCase[] = [
  infer('2 rows, binary_data_output', 'identity_uint8_2mib', binaryRequest({ inputs: [binIn(2)], parameters: { binary_data_output: true } }, [rows(2)])),
  infer('1 row, OUTPUT0 binary_data', 'identity_uint8_2mib', binaryRequest({ id: 'o1', inputs: [binIn(1)], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }, [rows(1)])),
  infer('raw, 1 row', 'identity_uint8_2mib', rawRequest(rows(1))),
  infer('raw, 1 row, gzip answer', 'identity_uint8_2mib', rawRequest(rows(1)), { headers: { 'Accept-Encoding': 'gzip' } }),
  infer('4 rows: the output does not fit the region with the input', 'identity_uint8_2mib', binaryRequest({ inputs: [binIn(4)], parameters: { binary_data_output: true } }, [rows(4)])),
].map((c) => ({ ...c, group: 'shm outputs', title: `shm outputs: ${c.name}`, timeoutMs: 60_000 }));

async function metrics(gw: RunningGateway): Promise<Map<string, number>> {
  return prometheusSamples(await (await fetch(gw.metricsUrl!, { signal: AbortSignal.timeout(10_000) })).text());
}

describe('differential with upstream.sharedMemory on: Triton HTTP vs tensorgate', () => {
  const prefix = `tgtest${process.pid}`;
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--shared-memory', '--shared-memory-prefix', prefix,
      '--shared-memory-regions', '2', '--shared-memory-region-bytes', String(8 * 1024 * 1024)]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  test('the regions are registered with Triton and exist under /dev/shm', async () => {
    const mine = (await tritonRegions()).filter((n) => n.startsWith(`${prefix}-`)).sort();
    expect(mine).toEqual([`${prefix}-${process.pid}-0`, `${prefix}-${process.pid}-1`]);
    expect(shmFiles(prefix).sort()).toEqual(mine);
  });

  test.each(casesFor('h2').map((c) => [c.title, c] as const))('differential %s', async (_title, c) => {
    await expectSameAnswer(TRITON, gw.url, c);
  }, 120_000);

  test.each(OUTPUT_CASES.map((c) => [c.title, c] as const))('differential %s', async (_title, c) => {
    const before = (await metrics(gw)).get('tensorgate_shared_memory_output_bytes_total') ?? 0;
    await expectSameAnswer(TRITON, gw.url, c);
    const after = await metrics(gw);
    const fits = !c.name.startsWith('4 rows');
    expect(after.get('tensorgate_shared_memory_output_bytes_total')! - before).toBe(fits ? Number(/^(\d) row|raw/.exec(c.name)![1] ?? 1) * ROW : 0);
    expect(after.get('tensorgate_shared_memory_in_use')).toBe(0);
  }, 120_000);

  test('a client gone mid-answer (output read from the region) leaves no region leased', async () => {
    const head = Buffer.from(JSON.stringify({ inputs: [binIn(2)], parameters: { binary_data_output: true } }));
    const url = new URL(`${gw.url}/v2/models/identity_uint8_2mib/infer`);
    const before = (await metrics(gw)).get('tensorgate_shared_memory_output_bytes_total') ?? 0;
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'Inference-Header-Content-Length': head.length } }, (res) => {
        expect(res.statusCode).toBe(200);
        // The first bytes of the 4 MiB answer, then the client goes away.
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.once('error', (err) => { if (!req.destroyed) reject(err); });
      req.end(Buffer.concat([head, rows(2)]));
    });
    const end = Date.now() + 20_000;
    let m = await metrics(gw);
    while (m.get('tensorgate_shared_memory_in_use') !== 0 && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50));
      m = await metrics(gw);
    }
    expect(m.get('tensorgate_shared_memory_in_use')).toBe(0);
    expect(m.get('tensorgate_shared_memory_output_bytes_total')! - before).toBe(2 * ROW);
  }, 60_000);

  test('binary and raw tensors went through the regions, not the gRPC message; every lease was returned', async () => {
    const body = Buffer.alloc(RAW_BYTES, 7);
    const res = await fetch(`${gw.url}/v2/models/image_stats/infer`, {
      method: 'POST', body, headers: { 'Inference-Header-Content-Length': '0' }, signal: AbortSignal.timeout(30_000),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const m = prometheusSamples(await (await fetch(gw.metricsUrl!, { signal: AbortSignal.timeout(10_000) })).text());
    expect(m.get('tensorgate_shared_memory_leases_total')).toBeGreaterThan(10);
    expect(m.get('tensorgate_shared_memory_bytes_total')).toBeGreaterThanOrEqual(RAW_BYTES);
    expect(m.get('tensorgate_shared_memory_in_use')).toBe(0);
    expect(m.get('tensorgate_shared_memory_regions')).toBe(2);
    // The raw request's gRPC message is the header only: the upstream_send hop moved no tensor.
    const sent = [...m].filter(([k]) => k.startsWith('tensorgate_hop_bytes_total{')
      && ['hop="upstream_send"', 'model="image_stats"', 'encoding="raw"', 'direction="out"'].every((l) => k.includes(l)));
    expect(sent).toHaveLength(1);
    expect(sent[0]![1]).toBeLessThan(RAW_BYTES / 100);
  }, 60_000);
});

interface Child {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<unknown>;
  output(): string;
}

/** The built gateway in its own process; resolves once it listens with its regions registered. */
async function startChild(prefix: string): Promise<Child> {
  const child = spawn(BIN, ['--backend', process.env.TRITON_GRPC!, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--shared-memory',
    '--shared-memory-prefix', prefix, '--shared-memory-regions', '3', '--shared-memory-region-bytes', String(RAW_BYTES)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
  child.stderr.setEncoding('utf8').on('data', (s: string) => { out += s; });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const end = Date.now() + 60_000;
  for (;;) {
    const m = /tensorgate listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m !== null && out.includes('shared-memory regions registered')) return { child, url: m[1]!, exited, output: () => out };
    if (child.exitCode !== null || Date.now() > end) {
      child.kill('SIGKILL');
      throw new Error(`the gateway did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a gateway killed mid-request leaks no region', () => {
  const prefix = `tgkill${process.pid}`;
  const children: Child[] = [];
  afterAll(async () => {
    for (const c of children) {
      if (c.child.exitCode === null && c.child.signalCode === null) {
        c.child.kill('SIGKILL');
        await c.exited;
      }
    }
  }, 30_000);

  test('SIGKILL while a raw upload is in the region; the next gateway reclaims by name, and its own close leaves nothing', async () => {
    const first = await startChild(prefix);
    children.push(first);
    const pid1 = first.child.pid!;
    const firstRegions = [0, 1, 2].map((n) => `${prefix}-${pid1}-${n}`);
    expect((await tritonRegions()).filter((n) => n.startsWith(`${prefix}-`)).sort()).toEqual(firstRegions);

    // Half the body, then the gateway is killed while it holds the request's region.
    const url = new URL(`${first.url}/v2/models/image_stats/infer`);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { 'Content-Length': RAW_BYTES, 'Inference-Header-Content-Length': 0 } });
    const failed = new Promise((resolve) => { req.once('error', resolve); req.once('response', resolve); });
    req.write(Buffer.alloc(RAW_BYTES / 2, 1));
    await new Promise((r) => setTimeout(r, 200)); // lets the gateway read what was sent; the kill comes either way
    first.child.kill('SIGKILL');
    await first.exited;
    await failed;
    // What a kill -9 leaves: the registrations at Triton and the files.
    expect((await tritonRegions()).filter((n) => n.startsWith(`${prefix}-`)).sort()).toEqual(firstRegions);
    expect(shmFiles(prefix).sort()).toEqual(firstRegions);

    const second = await startChild(prefix);
    children.push(second);
    const pid2 = second.child.pid!;
    const secondRegions = [0, 1, 2].map((n) => `${prefix}-${pid2}-${n}`);
    expect((await tritonRegions()).filter((n) => n.startsWith(`${prefix}-`)).sort()).toEqual(secondRegions);
    expect(shmFiles(prefix).sort()).toEqual(secondRegions);
    expect(second.output()).toMatch(/"reclaimed":3/);

    // The second one serves, then a SIGTERM closes it: unregistered and removed.
    const res = await fetch(`${second.url}/v2/models/image_stats/infer`, {
      method: 'POST', body: Buffer.alloc(1024, 2), headers: { 'Inference-Header-Content-Length': '0' }, signal: AbortSignal.timeout(30_000),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    second.child.kill('SIGTERM');
    await second.exited;
    expect((await tritonRegions()).filter((n) => n.startsWith(`${prefix}-`))).toEqual([]);
    expect(shmFiles(prefix)).toEqual([]);
  }, 180_000);
});

// The gateway's regions hold other requests' tensors, and Triton lets any client name any
// registered region. The attack: a client that registered nothing names `<prefix>-<pid>-0` as an
// input of identity_uint8 and gets back whatever the last request through that region left there;
// as an output it would overwrite one. Shown to work against Triton directly, refused by the
// gateway with 403 before anything goes upstream (decode/control/shared-memory.ts).
describe('a client may not name the gateway\'s regions', () => {
  const prefix = `tgown${process.pid}`;
  const region = `${prefix}-${process.pid}-0`;
  const SECRET = Buffer.from('the previous request\'s tensor: 0123456789abcdefghijklmnopqrstuvw');
  let gw: RunningGateway;
  beforeAll(async () => {
    // One region, so the victim's request is in it; every API group served, as the control calls below need.
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!, '--shared-memory', '--shared-memory-prefix', prefix,
      '--shared-memory-regions', '1', '--shared-memory-region-bytes', String(1024 * 1024), '--api-disabled', 'none']);
  });
  afterAll(async () => {
    await gw?.close();
  });

  const post = (base: string, path: string, body: unknown): Promise<Response> =>
    fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const steal = { inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, SECRET.length], parameters: { shared_memory_region: region, shared_memory_byte_size: SECRET.length } }] };

  test('an input naming <prefix>-<pid>-0: Triton hands out the victim\'s tensor; the gateway answers 403 and sends nothing', async () => {
    // The victim: a binary request, its tensor written into the gateway's one region.
    const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, SECRET.length], parameters: { binary_data_size: SECRET.length } }] }));
    const leasesBefore = (await metrics(gw)).get('tensorgate_shared_memory_leases_total') ?? 0;
    const victim = await fetch(`${gw.url}/v2/models/identity_uint8/infer`, {
      method: 'POST', body: Buffer.concat([head, SECRET]), headers: { 'Inference-Header-Content-Length': String(head.length) }, signal: AbortSignal.timeout(30_000),
    });
    expect(victim.status).toBe(200);
    await victim.arrayBuffer();
    expect((await metrics(gw)).get('tensorgate_shared_memory_leases_total')).toBe(leasesBefore + 1);

    // Straight to Triton, the attack works: the region still holds the victim's bytes.
    const direct = await post(TRITON, '/v2/models/identity_uint8/infer', steal);
    expect(direct.status).toBe(200);
    const stolen = ((await direct.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data;
    expect(Buffer.from(stolen).toString()).toBe(SECRET.toString());

    // Through the gateway: 403, in JSON, over every body form, and Triton saw no call.
    const before = await settledInferCount('identity_uint8');
    const r = await post(gw.url, '/v2/models/identity_uint8/infer', steal);
    expect([r.status, r.headers.get('x-tensorgate-error'), await r.json()]).toEqual([403, 'GW_ERR_DECODE_SHM_REGION_RESERVED', {
      error: `input 'INPUT0': shared_memory_region '${region}' is reserved: names starting with '${prefix}-' are the gateway's own regions (upstream.sharedMemory.prefix)`,
    }]);
    const binHead = Buffer.from(JSON.stringify({ inputs: [steal.inputs[0]!, { name: 'X', datatype: 'UINT8', shape: [1], parameters: { binary_data_size: 1 } }] }));
    const viaBinary = await fetch(`${gw.url}/v2/models/identity_uint8/infer`, {
      method: 'POST', body: Buffer.concat([binHead, Buffer.from([1])]), headers: { 'Inference-Header-Content-Length': String(binHead.length) }, signal: AbortSignal.timeout(30_000),
    });
    expect([viaBinary.status, viaBinary.headers.get('x-tensorgate-error')]).toEqual([403, 'GW_ERR_DECODE_SHM_REGION_RESERVED']);
    // An output there would overwrite the next request's tensor; `//name` is the same shm_open key.
    const overwrite = await post(gw.url, '/v2/models/identity_uint8/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [1] }],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: region, shared_memory_byte_size: 1 } }],
    });
    expect([overwrite.status, ((await overwrite.json()) as { error: string }).error]).toEqual([403, expect.stringMatching(/^output 'OUTPUT0': shared_memory_region/)]);
    expect(await settledInferCount('identity_uint8')).toBe(before);
  }, 60_000);

  test('over gRPC pass-through too: an input or output naming <prefix>-<pid>-0 is PERMISSION_DENIED and Triton sees no call', async () => {
    const client = new Client(`127.0.0.1:${gw.port}`, credentials.createInsecure());
    try {
      const call = (r: inference.IModelInferRequest): Promise<{ code: number; details: string; error: unknown }> => new Promise((resolve) => {
        const m = inferenceService.ModelInfer;
        const c = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, r, new Metadata(),
          { deadline: Date.now() + 30_000 }, () => undefined);
        c.on('status', (st: StatusObject) => resolve({ code: st.code, details: st.details, error: st.metadata.get('x-tensorgate-error')[0] }));
      });
      const before = await settledInferCount('identity_uint8');
      const shm = { shared_memory_region: { string_param: region }, shared_memory_byte_size: { int64_param: SECRET.length } };
      expect(await call({ model_name: 'identity_uint8', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, SECRET.length], parameters: shm }] })).toEqual({
        code: 7, error: 'GW_ERR_DECODE_SHM_REGION_RESERVED',
        details: `shared_memory_region '${region}' is reserved: names starting with '${prefix}-' are the gateway's own regions (upstream.sharedMemory.prefix)`,
      });
      const overwrite = await call({ model_name: 'identity_uint8', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1] }], raw_input_contents: [Buffer.from([1])],
        outputs: [{ name: 'OUTPUT0', parameters: shm }] });
      expect([overwrite.code, overwrite.error]).toEqual([7, 'GW_ERR_DECODE_SHM_REGION_RESERVED']);
      expect(await settledInferCount('identity_uint8')).toBe(before);
      // A call that names no region of the gateway's is Triton's to serve.
      expect((await call({ model_name: 'identity_uint8', inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1] }], raw_input_contents: [Buffer.from([1])] })).code).toBe(0);
    } finally {
      client.close();
    }
  }, 60_000);

  test('register, unregister and status: the gateway\'s names and keys are refused; the list and unregister-all leave its regions alone', async () => {
    const key = (await tritonRegionKeys())[region]!;
    expect(key).toBe(`/${region}`);
    // The same file under a name of the client's: refused by key.
    for (const k of [key, region, `//${region}`]) {
      const r = await post(gw.url, '/v2/systemsharedmemory/region/mine/register', { key: k, offset: 0, byte_size: SECRET.length });
      expect([k, r.status, r.headers.get('x-tensorgate-error')]).toEqual([k, 403, 'GW_ERR_DECODE_SHM_REGION_RESERVED']);
    }
    for (const path of [`/v2/systemsharedmemory/region/${region}/register`, `/v2/systemsharedmemory/region/${region}/unregister`, `/v2/cudasharedmemory/region/${region}/register`]) {
      const r = await post(gw.url, path, { key: '/x', offset: 0, byte_size: 1, raw_handle: { b64: Buffer.alloc(64).toString('base64') }, device_id: 0 });
      expect([path, r.status, r.headers.get('x-tensorgate-error')]).toEqual([path, 403, 'GW_ERR_DECODE_SHM_REGION_RESERVED']);
    }
    const named = await fetch(`${gw.url}/v2/systemsharedmemory/region/${region}/status`, { signal: AbortSignal.timeout(10_000) });
    expect(named.status).toBe(403);
    const list = (await (await fetch(`${gw.url}/v2/systemsharedmemory/status`, { signal: AbortSignal.timeout(10_000) })).json()) as { name: string }[];
    expect(list.map((x) => x.name)).not.toContain(region);
    // Unregister-all through the gateway (tritonclient's unregister_system_shared_memory()): the
    // gateway's region stays registered at Triton and keeps serving.
    expect((await post(gw.url, '/v2/systemsharedmemory/unregister', {})).status).toBe(200);
    expect(await tritonRegions()).toContain(region);
    expect((await metrics(gw)).get('tensorgate_shared_memory_regions')).toBe(1);
  }, 60_000);
});

/** Triton's key of each system region (its HTTP status endpoint). */
async function tritonRegionKeys(): Promise<Record<string, string>> {
  const res = await fetch(`${TRITON}/v2/systemsharedmemory/status`, { signal: AbortSignal.timeout(10_000) });
  return Object.fromEntries(((await res.json()) as { name: string; key: string }[]).map((r) => [r.name, r.key]));
}

/**
 * tritonInferCount once it has stopped moving (two reads 100 ms apart agree, within 5 s): Triton
 * counts a call when its backend reports it, which can be after the answer reached the client (a
 * count read right after the direct call above once missed that call, and the check after the
 * refused ones then saw it arrive).
 */
async function settledInferCount(model: string): Promise<number> {
  let last = await tritonInferCount(model);
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = await tritonInferCount(model);
    if (now === last) return now;
    last = now;
  }
  return last;
}

/** How many inferences Triton has run for `model` (its statistics endpoint): nothing the gateway refused reaches it. */
async function tritonInferCount(model: string): Promise<number> {
  const res = await fetch(`${TRITON}/v2/models/${model}/stats`, { signal: AbortSignal.timeout(10_000) });
  const stats = (await res.json()) as { model_stats: { inference_stats: { success: { count: number }; fail: { count: number } } }[] };
  const s = stats.model_stats[0]!.inference_stats;
  return s.success.count + s.fail.count;
}
