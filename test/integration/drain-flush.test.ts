// The drain flushes (the built CLI, as a user runs it): eight clients each upload a ~2.4 MB V2 JSON
// body over ~2.5 s to an identity model, whose answer is as large; SIGTERM comes 0.8 s into the
// uploads. Every client must get its whole 200 answer — framing checked (HTTP/1.1's
// Content-Length, HTTP/2's END_STREAM without a reset), body byte for byte — and the process exits
// 0 (nothing cut) well inside server.drainTimeoutMs. Clients we did not write the HTTP of:
//   - HTTP/1.1: test/interop/slow_client.py on a raw socket with a 64 KiB receive buffer, reading
//     at 1.5 MB/s, so the gateway still holds much of each answer when its handler is done; and
//     the same client reading as fast as answers come (recv of 1 MiB), with 5.7 MB answers: each
//     answer's end() is called with megabytes still queued while other answers finish, which is
//     when node:http's closeIdleConnections() used to destroy those connections (5–7 of 8 cut,
//     exit 0). The same client reading nothing is cut at the deadline: exit 3, its access line
//     marked GW_ERR_REQUEST_ANSWER_CUT;
//   - h2c: Go's net/http (test/interop/goclient `slow`: its own HTTP/2 with 64 KiB receive
//     windows, reading at 1.5 MB/s), which goes on sending a stream the GOAWAY let through
//     (RFC 9113 §6.8). Python's `h2` does not: it refuses to send DATA once a GOAWAY has arrived,
//     so a drain cuts its uploads on its side.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { send } from '../support/http';
import { goClient, interopPython } from '../support/interop';
import { spawnDemoGateway } from '../support/demo-gateway';
import { HTTP1_WAYS } from '../support/gateway';
import { nextEvent } from '../support/wait';
import { GO, needs, PYTHON } from '../support/tools';

const CLIENTS = 8;
/** FP32 values with 7 digits: 8 bytes each in JSON, so 300,000 of them are ~2.4 MB. */
const ELEMENTS = 300_000;
/** Each body takes this long to upload (seconds). */
const UPLOAD_S = '2.5';
/** HTTP/1.1: the answer is read at this rate (bytes/s), through a 64 KiB receive buffer. */
const READ_RATE = String(1.5 * 1024 * 1024);
const SIGTERM_AFTER_MS = 800;

jest.setTimeout(60_000);

interface ClientResult {
  readonly status?: number;
  readonly length?: number;
  readonly complete?: boolean;
  readonly sha256?: string;
  readonly error?: string;
  /** The Go client's protocol (HTTP/2.0). */
  readonly version?: string;
}

/**
 * A slow client (test/interop/slow_client.py, or the Go client's `slow` mode): `started` settles
 * once it has begun sending the body, `result` with its outcome.
 */
function slowClient(file: string, args: readonly string[]): { started: Promise<void>; result: Promise<ClientResult> } {
  const child = spawn(file, args);
  let out = '';
  let err = '';
  let started: () => void = () => undefined;
  const startedP = new Promise<void>((resolve) => { started = resolve; });
  child.stdout.setEncoding('utf8').on('data', (x: string) => {
    out += x;
    if (out.startsWith('started\n')) started();
  });
  child.stderr.setEncoding('utf8').on('data', (x: string) => { err += x; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const result = new Promise<ClientResult>((resolve) => child.once('close', (code) => {
    clearTimeout(timer);
    started();
    const last = out.trim().split('\n').at(-1) ?? '';
    resolve(code === 0 && last.startsWith('{') ? JSON.parse(last) as ClientResult : { error: `exit ${String(code)}: ${err}` });
  }));
  return { started: startedP, result };
}

describe.each([
  { name: 'HTTP/1.1', protocol: 'http1' as const, way: [] },
  { name: 'HTTP/1.1 on node:http', protocol: 'http1' as const, way: ['--fast-path=false'] },
  { name: 'h2c', protocol: 'h2' as const, way: [] },
])('SIGTERM in the middle of 8 large uploads over $name', ({ protocol, way }) => {
  let work: string;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'tg-drain-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  needs(protocol === 'h2' ? GO() : PYTHON()).test('every client gets its whole 200 answer, and the process exits 0 after the last byte is out', async () => {
    const data = Array.from({ length: ELEMENTS }, (_, i) => 1_000_000 + i);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, ELEMENTS], data }] });
    const bodyFile = join(work, 'body.json');
    writeFileSync(bodyFile, body);
    const { child, url } = await spawnDemoGateway(['--log-level', 'warn', ...way]);
    try {
      // The answer every client must get, unhurried and before any drain.
      const expected = await send(`${url}/v2/models/identity_fp32/infer`, { body, headers: { 'Content-Type': 'application/json' } });
      expect(expected.status).toBe(200);
      expect(expected.body.length).toBeGreaterThan(2_000_000);

      const path = '/v2/models/identity_fp32/infer';
      const [file, args] = protocol === 'http1'
        ? [await interopPython(), [join(__dirname, '../interop/slow_client.py'), 'http1', '127.0.0.1', new URL(url).port, path, bodyFile, UPLOAD_S, READ_RATE]]
        : [await goClient(), ['slow', `${url}${path}`, bodyFile, UPLOAD_S]];
      const exited = nextEvent(child, 'exit', 30_000);
      const clients = Array.from({ length: CLIENTS }, () => slowClient(file, args));
      await Promise.all(clients.map((c) => c.started));
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, SIGTERM_AFTER_MS));
      child.kill('SIGTERM');
      const results = await Promise.all(clients.map((c) => c.result));
      const [code] = await exited;
      const tookMs = performance.now() - t0;
      const sha = createHash('sha256').update(expected.body).digest('hex');
      const summary = results.map((r) => ({
        status: r.status, complete: r.complete, whole: r.sha256 === sha && r.length === expected.body.length, error: r.error,
      }));
      expect(summary).toEqual(Array.from({ length: CLIENTS }, () => ({ status: 200, complete: true, whole: true, error: undefined })));
      if (protocol === 'h2') expect(results.map((r) => r.version)).toEqual(Array.from({ length: CLIENTS }, () => 'HTTP/2.0'));
      expect(code).toBe(0);
      expect(tookMs).toBeGreaterThan(1500); // the uploads went on for ~1.7 s after the signal: the process waited for them
    } finally {
      child.kill('SIGKILL');
    }
  });
});

/** The JSON lines the gateway writes to stdout after its listening line (access lines, warnings). */
function jsonLines(out: string): Record<string, unknown>[] {
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

interface Drained {
  /** The answer each client should get, asked before the drain. */
  readonly expected: Buffer;
  readonly results: ClientResult[];
  readonly code: unknown;
  /** The gateway's stdout. */
  readonly out: string;
}

describe.each(HTTP1_WAYS)('SIGTERM in the middle of 8 uploads whose 5.7 MB answers are read as fast as they come (HTTP/1.1, %s)', (_, way) => {
  let work: string;
  let bodyFile: string;
  let body: string;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'tg-drain-'));
    // FP32 [1, 300000] of 6-digit floats: a 2.7 MB body, rendered back as a 5.7 MB answer.
    const data = Array.from({ length: ELEMENTS }, (_, i) => (100_000 + (i * 7919) % 900_000) / 1e6);
    body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, ELEMENTS], data }] });
    bodyFile = join(work, 'body.json');
    writeFileSync(bodyFile, body);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /**
   * The built gateway with `flags`; `clients` slow_client.py runs (each its extra arguments) start,
   * SIGTERM comes SIGTERM_AFTER_MS after they all have; what they got, the exit code and stdout.
   */
  async function drainWith(flags: readonly string[], clients: readonly (readonly string[])[]): Promise<Drained> {
    const { child, url } = await spawnDemoGateway([...flags, ...way]);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (x: string) => { out += x; });
    try {
      const path = '/v2/models/identity_fp32/infer';
      const expected = await send(`${url}${path}`, { body, headers: { 'Content-Type': 'application/json' } });
      expect(expected.status).toBe(200);
      expect(expected.body.length).toBeGreaterThan(5_000_000);
      const python = await interopPython();
      const exited = nextEvent(child, 'exit', 30_000);
      const running = clients.map((extra) => slowClient(python, [join(__dirname, '../interop/slow_client.py'), 'http1', '127.0.0.1', new URL(url).port, path, bodyFile, UPLOAD_S, ...extra]));
      await Promise.all(running.map((c) => c.started));
      await new Promise((r) => setTimeout(r, SIGTERM_AFTER_MS));
      child.kill('SIGTERM');
      const results = await Promise.all(running.map((c) => c.result));
      const [code] = await exited;
      return { expected: expected.body, results, code, out };
    } finally {
      child.kill('SIGKILL');
    }
  }

  test('every client gets every byte of its answer, and the process exits 0', async () => {
    const { expected, results, code } = await drainWith(['--log-level', 'warn'], Array.from({ length: CLIENTS }, () => ['0']));
    const sha = createHash('sha256').update(expected).digest('hex');
    const summary = results.map((r) => ({ status: r.status, received: r.length, whole: r.sha256 === sha, error: r.error }));
    expect(summary).toEqual(Array.from({ length: CLIENTS }, () => ({ status: 200, received: expected.length, whole: true, error: undefined })));
    expect(code).toBe(0);
  });

  test('a client that reads nothing is cut at the deadline: exit 3, and its access line says so with the bytes that left', async () => {
    // One reader as fast as it comes, one that reads nothing until well past the 4 s deadline.
    const { expected, results, code, out } = await drainWith(['--log-level', 'info', '--drain-timeout-ms', '4000'], [['0'], ['0', '8']]);
    const [reader, staller] = results;
    expect(reader).toMatchObject({ status: 200, length: expected.length, complete: true });
    expect(staller!.complete).not.toBe(true);
    expect(code).toBe(3);
    const lines = jsonLines(out);
    const infers = lines.filter((l) => l.route === 'infer');
    const cut = infers.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_CUT');
    expect(cut).toHaveLength(1);
    expect(cut[0]).toMatchObject({ status: 200 });
    expect(cut[0]!.bytes_out).toBeLessThan(expected.length);
    expect(infers.filter((l) => l.error_code === undefined).map((l) => l.bytes_out)).toEqual([expected.length, expected.length]);
    expect(lines.find((l) => l.msg === 'connections still open at the drain deadline were closed')).toMatchObject({ requests_cut: 1 });
  });
});
