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
import { request } from 'node:http';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
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
