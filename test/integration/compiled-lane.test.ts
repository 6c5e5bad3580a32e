// The compiled lane (server.compiledLane; ingress/http1/lane.ts, gateway/native/lane.c): a planned
// request whose head, binary header and answer repeat ones served before is served in C, with the
// same answer bytes (Date and the hop timings aside) and the same record as the fast path gives it;
// anything else on the same connection is the fast path's, and repeated requests go back to C; a
// backend that goes away fails them as the fast path's calls fail, and they are served again once
// it is back, and a backend its health checks find down is not called; the in-flight bounds count
// C's requests with JavaScript's; a client's reset cancels its call; a drain ends lent
// connections cleanly. Raw sockets (the bytes exactly as sent and read), and keep-alive clients
// we did not write: Python's http.client and curl.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Socket } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { NATIVE_LANE_FILE } from '../../gateway/ingress/http1/lane';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayFor } from '../support/gateway';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';
import { CURL, needs, PYTHON } from '../support/tools';

jest.setTimeout(60_000);

const built = existsSync(NATIVE_LANE_FILE);
if (!built) {
  if (process.env.CI === 'true') throw new Error(`compiled-lane: ${NATIVE_LANE_FILE} is not built (npm run build: scripts/build-native.js says why)`);
  process.stderr.write(`SKIPPED compiled-lane: ${NATIVE_LANE_FILE} is not built here (npm run build says why)\n`);
}
const maybe = built ? describe : describe.skip;

const BYTES = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 31 + 7) & 0xff));
const IMAGE = { name: 'IMAGE', datatype: 'UINT8', shape: [1, 64], parameters: { binary_data_size: 64 } };
const OUTPUTS = [{ name: 'LEN', parameters: { binary_data: true } }, { name: 'SUM', parameters: { binary_data: true } }];

/** A binary-extension request (to image_stats unless `model`): its JSON header, then `data`. */
function binary(header: unknown, data: Buffer, model = 'image_stats'): Buffer {
  const h = Buffer.from(JSON.stringify(header));
  const body = Buffer.concat([h, data]);
  return Buffer.concat([Buffer.from(`POST /v2/models/${model}/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/octet-stream\r\n`
    + `Inference-Header-Content-Length: ${h.length}\r\nContent-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
}

const SAME = binary({ inputs: [IMAGE], outputs: OUTPUTS }, BYTES);
/** Another header (the outputs asked the other way round): not what was kept. */
const OTHER = binary({ inputs: [IMAGE], outputs: [OUTPUTS[1], OUTPUTS[0]] }, BYTES);

/**
 * A V2 JSON request to classifier_fp32 with its input as one base64 string (values that differ
 * with `seed`, the same length), no outputs asked: answered as JSON, PROBS printed as numbers.
 * `v1`: V1 predict's `{"instances":[{"b64":"…"}]}` instead, answered as `predictions`.
 */
function base64Request(seed: number, v1 = false): Buffer {
  const f = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < f.length; i++) f[i] = (((i + seed * 13) * 7) % 256) / 8 + seed / 3;
  const data = Buffer.from(f.buffer).toString('base64');
  const body = Buffer.from(JSON.stringify(v1 ? { instances: [{ b64: data }] } : { inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], data }] }));
  const path = v1 ? '/v1/models/classifier_fp32:predict' : '/v2/models/classifier_fp32/infer';
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, 'latin1'),
    body]);
}

/** An answer as read: head and body. */
interface Answer {
  readonly head: string;
  readonly body: Buffer;
}

/** A keep-alive connection that sends one request at a time and reads its answer. */
class Client {
  readonly socket: Socket;
  #buf = Buffer.alloc(0);
  #wake: (() => void) | undefined;
  closed = false;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setNoDelay(true);
    this.socket.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#wake?.();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.#wake?.();
    });
    this.socket.on('error', () => undefined);
  }

  async send(bytes: Buffer): Promise<Answer | undefined> {
    this.socket.write(bytes);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const end = this.#buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.#buf.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (this.#buf.length >= end + 4 + length) {
          const body = this.#buf.subarray(end + 4, end + 4 + length);
          this.#buf = this.#buf.subarray(end + 4 + length);
          return { head, body };
        }
      }
      if (this.closed) return undefined;
      if (Date.now() > deadline) throw new Error('no answer within 10 s');
      await new Promise<void>((r) => {
        this.#wake = r;
        setTimeout(r, 200);
      });
      this.#wake = undefined;
    }
  }

  end(): void {
    this.socket.destroy();
  }
}

/** The lane's records come in batches (every 100 ms, ingress/http1/lane.ts): earlier ones are in once this resolves. */
const settled = (): Promise<void> => new Promise((r) => setTimeout(r, 300));

/**
 * What varies between two answers of the same request: Date, and Server-Timing (its hops and their
 * durations are each request's own: the fast path leaves out a hop its transport did not time).
 */
const steady = (a: Answer): string => `${a.head.replace(/\r\nDate: [^\r]*/i, '\r\nDate: -').replace(/\r\nServer-Timing: [^\r]*/i, '\r\nServer-Timing: -')}\n${a.body.toString('hex')}`;

/** A Server-Timing value as the gateway writes it (telemetry/server-timing.ts): known hops, then the total. */
const TIMING = /^(?:(?:ingress_read|decode|upstream_send|triton|upstream_receive|encode|egress_write);dur=\d+\.\d{3}, )+total;dur=\d+\.\d{3}$/;

/** What two records of the same request share but timings and copies (the lane copies nothing). */
function comparable(r: RequestRecord): unknown {
  const hops = r.ledger === undefined ? undefined : Object.fromEntries(Object.entries(r.ledger.hops).map(([k, h]) => [k, [h.bytesIn, h.bytesOut]]));
  return {
    route: r.route, method: r.method, status: r.status, model: r.model, version: r.version, encoding: r.encoding, encodingOut: r.encodingOut,
    errorCode: r.errorCode, declaredBytes: r.declaredBytes, bytesOut: r.bytesOut, upstreamStatus: r.upstreamStatus, inferences: r.inferences,
    pool: r.pool, planned: r.planned, fastPath: r.fastPath, hops,
  };
}

maybe('the compiled lane', () => {
  let backend: ReferenceBackend;
  let lane: RunningGateway;
  let plain: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    [lane, plain] = await Promise.all([
      gatewayFor(['--backend', backend.address, '--compiled-lane']),
      gatewayFor(['--backend', backend.address, '--compiled-lane=false']),
    ]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await Promise.all([lane?.close(), plain?.close()]);
    await backend?.close();
  });

  test('a repeated request: served in C, the same answer bytes and records as the fast path\'s', async () => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      const mark = tap.mark();
      const answers: Answer[] = [];
      for (let i = 0; i < 30; i++) answers.push((await c.send(SAME))!);
      const reference = (await p.send(SAME))!;
      for (const a of answers) {
        expect(steady(a)).toBe(steady(reference));
        expect(/\r\nServer-Timing: ([^\r]*)/i.exec(a.head)?.[1]).toMatch(TIMING);
      }
      await tap.until(mark + 31);
      const records = tap.records.slice(mark).filter((r) => r.declaredBytes === SAME.length - SAME.indexOf('\r\n\r\n') - 4);
      const inC = records.filter((r) => r.lane === true);
      // The first requests of the shape are the fast path's (the model's configuration read, its framed
      // head and its answer's head kept), every one after them the lane's.
      expect(inC.length).toBeGreaterThanOrEqual(26);
      // The fast path's planned request it was kept from (the model's first request is the handler's).
      const fast = records.filter((r) => r.lane !== true && r.planned === true).at(-1)!;
      for (const r of inC) {
        expect(comparable(r)).toEqual(comparable(fast));
        expect(r.ledger!.hops.triton.endNs).toBeGreaterThan(r.ledger!.hops.triton.startNs);
        expect(r.endNs).toBeGreaterThan(r.startNs);
      }
    } finally {
      c.end();
      p.end();
    }
  });

  test('a request not kept is the fast path\'s, on the same connection; the kept ones go back to C', async () => {
    const c = new Client(lane.port);
    try {
      // Kept once served from a kept framed head and a kept answer head: a request or two after the model's first.
      for (let i = 0; i < 3; i++) await c.send(SAME);
      await settled();
      const mark = tap.mark();
      const a = (await c.send(SAME))!, b = (await c.send(OTHER))!, d = (await c.send(SAME))!, e = (await c.send(SAME))!;
      for (const x of [a, b, d, e]) expect(x.head).toMatch(/^HTTP\/1\.1 200 OK/);
      expect(steady(d)).toBe(steady(a));
      expect(steady(e)).toBe(steady(a));
      expect(b.body.subarray(0, 40).toString()).toContain('"model_name":"image_stats"');
      await tap.until(mark + 4);
      // OTHER was not kept when it came: the fast path's, and the connection stays the fast path's until
      // a request it serves is kept (SAME after it); the one after that is C's again.
      expect(tap.records.slice(mark, mark + 4).map((r) => r.lane === true)).toEqual([true, false, false, true]);
    } finally {
      c.end();
    }
  });

  test('heads that differ per request (a request id): what the lane keeps stays bounded, the table starts again when full; a repeated head is C\'s after', async () => {
    const c = new Client(lane.port);
    try {
      const at = SAME.indexOf('\r\n\r\n') + 2;
      const withId = (i: number): Buffer => Buffer.concat([SAME.subarray(0, at), Buffer.from(`X-Request-Id: r-${i}\r\n`, 'latin1'), SAME.subarray(at)]);
      let most = 0;
      for (let i = 0; i < 600; i++) {
        expect((await c.send(withId(i)))!.head).toMatch(/^HTTP\/1\.1 200 OK/);
        most = Math.max(most, lane.laneCounts()!.keptHeads);
      }
      // Each of them kept once (their requests are the fast path's), 256 at most at once (lane.c MAX_HEADS).
      expect(most).toBe(256);
      expect(lane.laneCounts()!.keptHeads).toBeLessThanOrEqual(256);
      // Kept again after the table started again, served in C from then on.
      for (let i = 0; i < 3; i++) await c.send(SAME);
      await settled();
      const mark = tap.mark();
      for (let i = 0; i < 5; i++) expect((await c.send(SAME))!.head).toMatch(/^HTTP\/1\.1 200 OK/);
      await tap.until(mark + 5);
      expect(tap.records.slice(mark, mark + 5).every((r) => r.lane === true)).toBe(true);
    } finally {
      c.end();
    }
  });

  needs(PYTHON()).test('Python\'s http.client over one keep-alive connection: every answer the same, served in C', async () => {
    await settled();
    const mark = tap.mark();
    const script = `
import http.client, json, sys
conn = http.client.HTTPConnection('127.0.0.1', ${lane.port})
body = bytes.fromhex(sys.argv[1])
bodies = set()
for i in range(20):
    conn.request('POST', '/v2/models/image_stats/infer', body=body, headers={'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': sys.argv[2]})
    r = conn.getresponse()
    assert r.status == 200, r.status
    bodies.add(r.read())
print(len(bodies))
`;
    const body = SAME.subarray(SAME.indexOf('\r\n\r\n') + 4);
    const ihcl = /Inference-Header-Content-Length: (\d+)/.exec(SAME.toString('latin1'))![1]!;
    // Not execFileSync: the gateway runs in this process, on the loop that would wait.
    const { stdout } = await promisify(execFile)(PYTHON().path!, ['-c', script, body.toString('hex'), ihcl], { encoding: 'utf8' });
    expect(stdout.trim()).toBe('1');
    await tap.until(mark + 20);
    expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(16);
  });

  needs(CURL()).test('curl, many requests on one connection: every answer the fast path\'s byte for byte, served in C', async () => {
    await settled();
    const mark = tap.mark();
    const dir = mkdtempSync(join(tmpdir(), 'tg-lane-'));
    try {
      const body = join(dir, 'body');
      writeFileSync(body, SAME.subarray(SAME.indexOf('\r\n\r\n') + 4));
      const ihcl = /Inference-Header-Content-Length: (\d+)/.exec(SAME.toString('latin1'))![1]!;
      const url = `http://127.0.0.1:${lane.port}/v2/models/image_stats/infer`;
      // One curl: each URL after the first on the same keep-alive connection, its body written to a file of its own.
      const args = ['-s', '--fail-with-body', '-H', 'Content-Type: application/octet-stream', '-H', `Inference-Header-Content-Length: ${ihcl}`,
        '--data-binary', `@${body}`, '-w', '%{num_connects} ', ...Array.from({ length: 20 }, (_, i) => [url, '-o', join(dir, `out${i}`)]).flat()];
      const { stdout } = await promisify(execFile)(CURL().path!, args, { encoding: 'utf8' });
      // One connection made for all twenty.
      expect(stdout.trim().split(' ').map(Number).reduce((a, b) => a + b, 0)).toBe(1);
      const reference = (await new Client(plain.port).send(SAME))!.body;
      for (let i = 0; i < 20; i++) expect(readFileSync(join(dir, `out${i}`)).equals(reference)).toBe(true);
      await tap.until(mark + 21);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(16);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  needs(CURL()).test('curl, one request per connection: once a head is kept, each new connection\'s first request is C\'s from its first read; another head on a new connection is JavaScript\'s', async () => {
    await settled();
    const dir = mkdtempSync(join(tmpdir(), 'tg-lane-'));
    try {
      // The model's plan known first, over a connection of its own.
      const warm = new Client(lane.port);
      for (let i = 0; i < 3; i++) await warm.send(SAME);
      warm.end();
      const reference = (await new Client(plain.port).send(SAME))!.body;
      await settled();
      const mark = tap.mark();
      const body = join(dir, 'body');
      writeFileSync(body, SAME.subarray(SAME.indexOf('\r\n\r\n') + 4));
      const ihcl = /Inference-Header-Content-Length: (\d+)/.exec(SAME.toString('latin1'))![1]!;
      const url = `http://127.0.0.1:${lane.port}/v2/models/image_stats/infer`;
      for (let i = 0; i < 8; i++) {
        const out = join(dir, `out${i}`);
        const { stdout } = await promisify(execFile)(CURL().path!, ['-s', '--fail-with-body', '-H', 'Content-Type: application/octet-stream',
          '-H', `Inference-Header-Content-Length: ${ihcl}`, '--data-binary', `@${body}`, '-w', '%{num_connects}', url, '-o', out], { encoding: 'utf8' });
        expect(stdout).toBe('1');
        expect(readFileSync(out).equals(reference)).toBe(true);
      }
      // A head C does not keep, on new connections: given back at once, answered by JavaScript.
      for (let i = 0; i < 3; i++) {
        const { stdout } = await promisify(execFile)(CURL().path!, ['-s', '-o', '/dev/null', '-w', '%{http_code}',
          `http://127.0.0.1:${lane.port}/v2/models/image_stats/ready`], { encoding: 'utf8' });
        expect(stdout).toBe('200');
      }
      await tap.until(mark + 8);
      const records = tap.records.slice(mark).filter((r) => r.model === 'image_stats' && r.route.includes('infer'));
      expect(records.length).toBe(8);
      // curl's head is not the warm-up's: its first request may be the fast path's (and kept), every
      // later one is C's — each on a connection of its own, where the lane used to have none of it.
      expect(records.slice(1).map((r) => r.lane === true)).toEqual(Array(7).fill(true));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  needs(CURL()).test.each([['V2', false], ['V1', true]] as [string, boolean][])('curl, a %s JSON body of one base64 string on one connection: every answer the fast path\'s, decoded and printed in C', async (_, v1) => {
    await settled();
    const mark = tap.mark();
    const dir = mkdtempSync(join(tmpdir(), 'tg-lane-'));
    try {
      const request = base64Request(7, v1);
      const body = join(dir, 'body');
      writeFileSync(body, request.subarray(request.indexOf('\r\n\r\n') + 4));
      const url = `http://127.0.0.1:${lane.port}${v1 ? '/v1/models/classifier_fp32:predict' : '/v2/models/classifier_fp32/infer'}`;
      const args = ['-s', '--fail-with-body', '-H', 'Content-Type: application/json', '--data-binary', `@${body}`, '-w', '%{num_connects} ',
        ...Array.from({ length: 20 }, (_, i) => [url, '-o', join(dir, `out${i}`)]).flat()];
      const { stdout } = await promisify(execFile)(CURL().path!, args, { encoding: 'utf8' });
      expect(stdout.trim().split(' ').map(Number).reduce((a, b) => a + b, 0)).toBe(1);
      const reference = (await new Client(plain.port).send(request))!.body;
      expect(reference.length).toBeGreaterThan(1000);
      for (let i = 0; i < 20; i++) expect(readFileSync(join(dir, `out${i}`)).equals(reference)).toBe(true);
      await tap.until(mark + 21);
      // Served in C: its records, with C's decode and print in their hops.
      const inC = tap.records.slice(mark).filter((r) => r.lane === true && r.model === 'classifier_fp32');
      expect(inC.length).toBeGreaterThanOrEqual(16);
      for (const r of inC) {
        expect(r.bytesOut).toBe(reference.length);
        expect(r.ledger!.hops.decode.endNs).toBeGreaterThan(r.ledger!.hops.decode.startNs);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.each([['V2', false], ['V1', true]])('a %s JSON body of one base64 string, answered as JSON: served in C, every answer the fast path\'s byte for byte', async (_, v1) => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      const mark = tap.mark();
      // Another input each time (the lane decodes each string and prints each answer), the same length.
      const answers: Answer[] = [], references: Answer[] = [];
      for (let i = 0; i < 12; i++) {
        const req = base64Request(i, v1);
        answers.push((await c.send(req))!);
        references.push((await p.send(req))!);
      }
      for (let i = 0; i < answers.length; i++) {
        expect(answers[i]!.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
        expect(steady(answers[i]!)).toBe(steady(references[i]!));
      }
      // Not one answer repeated: each was printed from its own outputs.
      expect(new Set(answers.map((a) => a.body.toString('hex'))).size).toBe(answers.length);
      await tap.until(mark + 24);
      const records = tap.records.slice(mark).filter((r) => r.model === 'classifier_fp32');
      const inC = records.filter((r) => r.lane === true);
      expect(inC.length).toBeGreaterThanOrEqual(8);
      // Each record's answer bytes are its own answer's (C printed it: the lengths differ).
      const lengths = new Set(answers.map((a) => a.body.length));
      expect(lengths.size).toBeGreaterThan(1);
      for (const r of inC) {
        expect(lengths.has(r.bytesOut!)).toBe(true);
        // C's own work in its hops: the string decoded (decode), the values printed (encode, its
        // bytes out the body's), the body handed to the socket (egress_write).
        const { decode, encode, egress_write: egress } = r.ledger!.hops;
        expect(decode.endNs).toBeGreaterThan(decode.startNs);
        expect(encode.endNs).toBeGreaterThan(encode.startNs);
        expect([encode.bytesOut, egress.bytesIn, egress.bytesOut]).toEqual([r.bytesOut, r.bytesOut, r.bytesOut]);
        expect(r.endNs).toBe(egress.endNs);
      }
      expect(inC.every((r) => r.encodingOut === 'json' && r.status === 200)).toBe(true);
      // So does each answer's Server-Timing (C's answers among them).
      for (const a of answers) {
        const timing = /\r\nServer-Timing: ([^\r]*)/i.exec(a.head)![1]!;
        expect(Number(/decode;dur=([\d.]+)/.exec(timing)![1])).toBeGreaterThan(0);
        expect(Number(/encode;dur=([\d.]+)/.exec(timing)![1])).toBeGreaterThan(0);
      }
    } finally {
      c.end();
      p.end();
    }
  });

  test('an idle lent connection holds a small read buffer: a large request\'s goes back to the lane once its answer is out', async () => {
    const clients = Array.from({ length: 12 }, () => new Client(lane.port));
    try {
      await settled();
      const mark = tap.mark();
      // C reads the connections' requests (from the first read, the head kept already; else from the second)
      // — 600 KB bodies: over a connection's own 64 KiB — into the lane's large buffers.
      await Promise.all(clients.map(async (c, i) => {
        for (let n = 0; n < 3; n++) expect((await c.send(base64Request(20 + i)))!.head).toMatch(/^HTTP\/1\.1 200/);
      }));
      await tap.until(mark + 36);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(12);
      // Twelve connections idle and open: none holds a large buffer; what the lane keeps for the next is bounded.
      const counts = lane.laneCounts()!;
      expect(counts.largeBuffers).toBeGreaterThan(0);
      expect(counts.idleLargeBuffers).toBe(counts.largeBuffers);
      expect(counts.largeBuffers).toBeLessThanOrEqual(16);
      // No large request for 2 s (lane.c SPARE_IDLE_MS): the idle ones are unmapped too.
      for (let i = 0; i < 50 && lane.laneCounts()!.largeBuffers > 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(lane.laneCounts()).toMatchObject({ largeBuffers: 0, idleLargeBuffers: 0, idleLargeBytes: 0 });
    } finally {
      for (const c of clients) c.end();
    }
  });

  test.each([['binary', false], ['base64', true]])('%s bodies of 4 MiB: served in C, every answer the fast path\'s byte for byte; what idle buffers keep stays within 32 MiB', async (_, b64) => {
    const request = (seed: number): Buffer => {
      const data = Buffer.alloc(4 * 1024 * 1024, seed);
      data.writeUInt32LE(seed * 7919, 1000);
      const input = { name: 'IMAGE', datatype: 'UINT8', shape: [1, data.length] };
      if (!b64) return binary({ inputs: [{ ...input, parameters: { binary_data_size: data.length } }], outputs: OUTPUTS }, data);
      // Answered as JSON, its INT64 and UINT64 values printed in C.
      const body = Buffer.from(JSON.stringify({ inputs: [{ ...input, data: data.toString('base64') }] }));
      return Buffer.concat([Buffer.from('POST /v2/models/image_stats/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n'
        + `Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
    };
    const clients = Array.from({ length: 10 }, () => new Client(lane.port));
    const p = new Client(plain.port);
    try {
      // The model's configuration cached (the first), the framed and answer heads kept (the second),
      // the request kept by the lane (the third).
      const w = new Client(lane.port);
      for (let n = 0; n < 3; n++) expect((await w.send(request(0)))!.head).toMatch(/^HTTP\/1\.1 200/);
      w.end();
      await settled();
      const mark = tap.mark();
      await Promise.all(clients.map(async (c, i) => {
        for (let n = 0; n < 3; n++) {
          const bytes = request(i * 3 + n + 1);
          const got = (await c.send(bytes))!;
          expect(got.head).toMatch(/^HTTP\/1\.1 200/);
          if (i === 0) expect(steady(got)).toBe(steady((await p.send(bytes))!));
        }
      }));
      await tap.until(mark + 33);
      const counts = lane.laneCounts()!;
      // The head kept, each new connection is C's from its first read: every request C's.
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(27);
      expect(counts.idleLargeBuffers).toBe(counts.largeBuffers);
      expect(counts.idleLargeBytes).toBeGreaterThan(0);
      expect(counts.idleLargeBytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    } finally {
      for (const c of clients) c.end();
      p.end();
    }
  });

  test('Expect: 100-continue: the interim answer, then the answer, from C as from the fast path, byte for byte', async () => {
    const data = Buffer.alloc(2 * 1024 * 1024, 5);
    const request = binary({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, data.length], parameters: { binary_data_size: data.length } }],
      outputs: OUTPUTS }, data);
    const at = request.indexOf('\r\n\r\n') + 2;
    const withExpect = Buffer.concat([request.subarray(0, at), Buffer.from('Expect: 100-continue\r\n', 'latin1'), request.subarray(at)]);
    const head = withExpect.subarray(0, withExpect.indexOf('\r\n\r\n') + 4), body = withExpect.subarray(head.length);
    /** Head first, the body once the interim answer came, as curl sends it: the interim answer and the answer. */
    const exchange = async (c: Client): Promise<[Answer, Answer]> => {
      const interim = (await c.send(head))!;
      return [interim, (await c.send(body))!];
    };
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      const [pi, pa] = await exchange(p);
      expect(pi.head).toBe('HTTP/1.1 100 Continue');
      expect(pa.head).toMatch(/^HTTP\/1\.1 200/);
      const mark = tap.mark();
      for (let i = 0; i < 6; i++) {
        const [interim, answer] = await exchange(c);
        expect(interim.head).toBe('HTTP/1.1 100 Continue');
        expect(interim.body.length).toBe(0);
        expect(steady(answer)).toBe(steady(pa));
      }
      await tap.until(mark + 6);
      // The first one or two the fast path's (the head kept after them), the rest C's.
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(4);
    } finally {
      c.end();
      p.end();
    }
  });

  needs(CURL()).test('curl, 4 MiB uploads (it asks for 100 Continue past 1 MiB), one per connection: served in C, the fast path\'s answer byte for byte', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tg-lane-'));
    try {
      const data = Buffer.alloc(4 * 1024 * 1024, 9);
      const request = binary({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, data.length], parameters: { binary_data_size: data.length } }],
        outputs: OUTPUTS }, data);
      const file = join(dir, 'body');
      writeFileSync(file, request.subarray(request.indexOf('\r\n\r\n') + 4));
      const ihcl = /Inference-Header-Content-Length: (\d+)/.exec(request.toString('latin1'))![1]!;
      const post = async (port: number, out: string): Promise<string> => (await promisify(execFile)(CURL().path!, ['-s', '--fail-with-body', '-v',
        '-H', 'Content-Type: application/octet-stream', '-H', `Inference-Header-Content-Length: ${ihcl}`, '--data-binary', `@${file}`,
        `http://127.0.0.1:${port}/v2/models/image_stats/infer`, '-o', out], { encoding: 'utf8' })).stderr;
      await post(plain.port, join(dir, 'reference'));
      const reference = readFileSync(join(dir, 'reference'));
      const mark = tap.mark();
      for (let i = 0; i < 6; i++) {
        const log = await post(lane.port, join(dir, `out${i}`));
        expect(log).toMatch(/> Expect: 100-continue/i);
        expect(log).toMatch(/< HTTP\/1\.1 100 Continue/);
        expect(readFileSync(join(dir, `out${i}`)).equals(reference)).toBe(true);
      }
      await tap.until(mark + 6);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(4);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a 4 MiB base64 body whose first part C decoded as it came: the other alphabet decoded alike; refused, shorter or drained mid-body, read by JavaScript as sent', async () => {
    /** A 4 MiB image_stats V2 request, its tensor as one base64 string (`edit` changes its text). */
    const request = (seed: number, edit?: (text: Buffer, from: number, to: number) => void): Buffer => {
      const data = Buffer.alloc(4 * 1024 * 1024, seed);
      data.writeUInt32LE(seed * 7919, 64);
      const body = Buffer.from(JSON.stringify({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, data.length], data: data.toString('base64') }] }));
      const from = body.indexOf('"data":"') + 8, to = body.indexOf('"', from);
      edit?.(body, from, to);
      return Buffer.concat([Buffer.from('POST /v2/models/image_stats/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n'
        + `Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
    };
    /** `bytes` in two writes 150 ms apart, the second `tail` bytes long: C decodes the first part meanwhile. */
    const inParts = async (c: Client, bytes: Buffer, tail = 1024 * 1024): Promise<Answer> => {
      c.socket.write(bytes.subarray(0, bytes.length - tail));
      await new Promise((r) => setTimeout(r, 150));
      return (await c.send(bytes.subarray(bytes.length - tail)))!;
    };
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(request(i)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      // The other alphabet's characters early in the string (decoded as they came), then refusals:
      // a character of neither alphabet late (after the part decoded early) or early (where the
      // early decoding stops), and a string one group shorter, padded.
      const cases: [string, Buffer][] = [
        ['-_', request(5, (t, from) => t.write('-_-_', from + 4000, 'latin1'))],
        ['! late', request(6, (t, _, to) => { t[to - 5000] = 0x21; })],
        ['! early', request(7, (t, from) => { t[from + 70_000] = 0x21; })],
        ['short', request(8, (t, _, to) => t.write('A===', to - 4, 'latin1'))],
      ];
      for (const [n, [name, b]] of cases.entries()) {
        // The connection is C's again after a refusal once JavaScript has served a request it keeps.
        for (let i = 0; i < 2; i++) expect((await c.send(request(10 + n)))!.head).toMatch(/^HTTP\/1\.1 200/);
        const early = lane.laneCounts()!.decodedEarly;
        const x = await inParts(c, b), y = (await p.send(b))!;
        expect([name, lane.laneCounts()!.decodedEarly > early]).toEqual([name, true]);
        expect([name, steady(x)]).toEqual([name, steady(y)]);
        expect(x.head).toMatch(name === '-_' ? /^HTTP\/1\.1 200/ : /^HTTP\/1\.1 400/);
      }
      // Served in C again after.
      const mark = tap.mark();
      for (let i = 0; i < 3; i++) expect(steady(await inParts(c, request(20 + i)))).toBe(steady((await p.send(request(20 + i)))!));
      await tap.until(mark + 6);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(2);
    } finally {
      c.end();
      p.end();
    }
    // A drain while C holds part of a body it has partly decoded: JavaScript reads the rest and
    // answers the request as sent.
    const gw = await gatewayFor(['--backend', backend.address, '--compiled-lane']);
    const d = new Client(gw.port), q = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await d.send(request(30 + i)))!.head).toMatch(/^HTTP\/1\.1 200/);
      const b = request(40);
      d.socket.write(b.subarray(0, 3 * 1024 * 1024));
      await new Promise((r) => setTimeout(r, 150));
      const closed = gw.close();
      const [a, e] = [(await d.send(b.subarray(3 * 1024 * 1024)))!, (await q.send(b))!];
      expect(a.head).toMatch(/^HTTP\/1\.1 200[^]*\r\nConnection: close/i);
      expect(a.body.toString()).toBe(e.body.toString());
      await closed;
    } finally {
      d.end();
      q.end();
    }
  });

  test.each([['V2', false], ['V1', true]])('a kept %s base64 body whose string is not clean base64, or decodes to another length: the fast path\'s answer (400), and C again after', async (_, v1) => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(base64Request(i, v1)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const good = base64Request(3, v1);
      const text = good.indexOf(v1 ? '"b64":"' : '"data":"') + (v1 ? 7 : 8);
      const bad: Buffer[] = [];
      // A character in neither alphabet; a backslash escape; padding inside; a string one group shorter, padded.
      for (const [at, ch] of [[100, '!'], [200, '\\'], [300, '=']] as const) {
        const b = Buffer.from(good);
        b[text + at] = ch.charCodeAt(0);
        bad.push(b);
      }
      const end = good.indexOf('"', text);
      const short = Buffer.from(good);
      short.write('A===', end - 4, 'latin1');
      bad.push(short);
      for (const b of bad) {
        const mark = tap.mark();
        const [x, y] = [(await c.send(b))!, (await p.send(b))!];
        expect(x.head).toMatch(/^HTTP\/1\.1 400/);
        expect(steady(x)).toBe(steady(y));
        await tap.until(mark + 2);
        expect(tap.records.slice(mark).some((r) => r.lane === true)).toBe(false);
      }
      // Strings changed at random places (a seeded generator), each answered by both gateways alike:
      // the other alphabet's characters and padding C decodes or refuses as JavaScript does, and a
      // quote, a backslash, a blank or a NUL ends or breaks the string for both.
      let seed = 7;
      const next = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
      const length = end - text;
      for (let k = 0; k < 24; k++) {
        const b = Buffer.from(good);
        for (let m = 1 + next(3); m > 0; m--) {
          const at = next(4) === 0 ? length - 1 - next(4) : next(length);
          b[text + at] = '-_+/=!\\" \nAz09\u0000'.charCodeAt(next(15));
        }
        const [x, y] = [(await c.send(b))!, (await p.send(b))!];
        expect(steady(x)).toBe(steady(y));
      }
      const mark = tap.mark();
      for (let i = 0; i < 4; i++) expect(steady((await c.send(base64Request(4 + i, v1)))!)).toBe(steady((await p.send(base64Request(4 + i, v1)))!));
      await tap.until(mark + 8);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(2);
    } finally {
      c.end();
      p.end();
    }
  });

  test('the backend gone: the same error as the fast path\'s, and served in C again once it is back', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const port = Number(b2.address.split(':')[1]);
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--upstream-retries', '0']);
    const c = new Client(gw.port);
    let back: ReferenceBackend | undefined;
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(SAME))!.head).toMatch(/^HTTP\/1\.1 200/);
      await b2.close();
      const failed = await c.send(SAME);
      // What the fast path answers when its backend's connection is gone: 503, the gateway's own error.
      expect(failed?.head).toMatch(/^HTTP\/1\.1 503/);
      expect(JSON.parse(failed!.body.toString()).error).toMatch(/unavailable/i);
      back = await startReferenceBackend({ host: '127.0.0.1', port });
      let ok = 0;
      const mark = tap.mark();
      for (let i = 0; i < 40 && ok < 5; i++) {
        const a = await (c.closed ? new Client(gw.port) : c).send(SAME);
        if (a?.head.startsWith('HTTP/1.1 200') === true) ok++;
        else await new Promise((r) => setTimeout(r, 100));
      }
      expect(ok).toBe(5);
      await new Promise((r) => setTimeout(r, 1200)); // the lane's reconnection waits a second after a failure
      for (let i = 0; i < 5; i++) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      await tap.until(mark + 10);
      expect(tap.records.slice(mark).some((r) => r.lane === true)).toBe(true);
    } finally {
      c.end();
      await gw.close();
      await back?.close();
    }
  });

  test('a backend its health checks say is down: C calls it no more, the answer is the backend set\'s 503; served in C again once it is up', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--health-check-interval-ms', '100', '--unhealthy-threshold', '1',
      '--healthy-threshold', '1']);
    const c = new Client(gw.port);
    const ready = async (): Promise<number> => (await fetch(`http://127.0.0.1:${gw.port}/readyz`)).status;
    const until = async (status: number): Promise<void> => {
      for (let i = 0; i < 50 && await ready() !== status; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await ready()).toBe(status);
    };
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      b2.faults.notServing = true;
      await until(503);
      const calls = b2.stats.inferCalls;
      for (let i = 0; i < 3; i++) {
        const a = (await c.send(SAME))!;
        expect(a.head).toMatch(/^HTTP\/1\.1 503/);
        expect(a.head).toMatch(/\r\nX-Tensorgate-Error: GW_ERR_UPSTREAM_NO_BACKEND\r\n/i);
      }
      expect(b2.stats.inferCalls).toBe(calls);
      b2.faults.notServing = false;
      await until(200);
      await settled();
      const mark = tap.mark();
      for (let i = 0; i < 5; i++) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      await tap.until(mark + 5);
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBeGreaterThanOrEqual(3);
    } finally {
      c.end();
      await gw.close();
      await b2.close();
    }
  });

  test.each([['V2', false], ['V1', true]])('a %s base64 request C decoded in place and then gave back (its backend down, then gone): read by JavaScript as sent', async (_, v1) => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--health-check-interval-ms', '100', '--unhealthy-threshold', '1',
      '--healthy-threshold', '1', '--upstream-retries', '0']);
    const c = new Client(gw.port);
    const ready = async (): Promise<number> => (await fetch(`http://127.0.0.1:${gw.port}/readyz`)).status;
    // The URL-safe alphabet throughout: C decodes it, and gives back '+' and '/' for '-' and '_' (the same values).
    const request = (i: number): Buffer => {
      const r = base64Request(i, v1);
      const from = r.indexOf(v1 ? '"b64":"' : '"data":"');
      for (let k = from + 8; r[k] !== 0x22; k++) if (r[k] === 0x2b || r[k] === 0x2f) r[k] = r[k] === 0x2b ? 0x2d : 0x5f;
      return r;
    };
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(request(i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const mark = tap.mark();
      expect((await c.send(request(3)))?.head).toMatch(/^HTTP\/1\.1 200/);
      await tap.until(mark + 1);
      expect(tap.records[mark]!.lane).toBe(true);
      // Down: C decodes the string, finds the gate shut, and gives the request back; JavaScript
      // reads it (a 400 if the text were not the client's) and answers the backend set's 503.
      b2.faults.notServing = true;
      for (let i = 0; i < 50 && await ready() !== 503; i++) await new Promise((r) => setTimeout(r, 100));
      const calls = b2.stats.inferCalls;
      for (let i = 0; i < 3; i++) {
        const a = (await c.send(request(4 + i)))!;
        expect(a.head).toMatch(/^HTTP\/1\.1 503/);
        expect(a.head).toMatch(/\r\nX-Tensorgate-Error: GW_ERR_UPSTREAM_NO_BACKEND\r\n/i);
      }
      expect(b2.stats.inferCalls).toBe(calls);
      b2.faults.notServing = false;
      for (let i = 0; i < 50 && await ready() !== 200; i++) await new Promise((r) => setTimeout(r, 100));
      for (let i = 0; i < 3; i++) expect((await c.send(request(7 + i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      // Gone: the call C made fails, C has no connection to make it on, or the health check (every
      // 100 ms) found the backend gone first and the gate is shut; JavaScript answers 503 in each case.
      await b2.close();
      const gone = (await c.send(request(10)))!;
      expect(gone.head).toMatch(/^HTTP\/1\.1 503/);
      expect(JSON.parse(gone.body.toString()).error).toMatch(/unavailable|no backend|no ready backend/i);
    } finally {
      c.end();
      await gw.close();
      await b2.close();
    }
  });

  test('the in-flight bound holds for C\'s requests and JavaScript\'s together: past it, 503 and nothing sent', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--max-in-flight-requests', '2']);
    const clients = Array.from({ length: 5 }, () => new Client(gw.port));
    try {
      // Each connection the lane's: the request kept, then served in C.
      for (const c of clients) for (let i = 0; i < 3; i++) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const mark = tap.mark();
      const calls = b2.stats.inferCalls;
      b2.faults.inferDelayMs = 1500;
      // Five at once, 1.5 s each: two admitted (in C), three refused as the fast path refuses past the bound.
      const sent = Promise.all(clients.map((c) => c.send(SAME)));
      // Meanwhile the two in C are in the in-flight series (the lane reports a request once it is over).
      await new Promise((r) => setTimeout(r, 400));
      const metrics = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect(metrics.get('tensorgate_requests_in_flight{http_route="infer"}')).toBe(2);
      expect(metrics.get('tensorgate_request_bytes_in_flight{http_route="infer"}')).toBe(2 * (SAME.length - SAME.indexOf('\r\n\r\n') - 4));
      const answers = await sent;
      const statuses = answers.map((a) => Number(/^HTTP\/1\.1 (\d+)/.exec(a!.head)![1])).sort();
      expect(statuses).toEqual([200, 200, 503, 503, 503]);
      for (const a of answers.filter((x) => x!.head.startsWith('HTTP/1.1 503'))) {
        expect(JSON.parse(a!.body.toString())).toEqual({ error: expect.stringMatching(/overloaded: 2 requests in flight \(limits\.maxInFlightRequests\)/) });
      }
      expect(b2.stats.inferCalls - calls).toBe(2);
      await tap.until(mark + 5);
      expect(tap.records.slice(mark).filter((r) => r.status === 200 && r.lane === true).length).toBe(2);
      // Every place given back: one at a time, every connection served again.
      b2.faults.inferDelayMs = 0;
      for (const c of clients) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const after = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect(after.get('tensorgate_requests_in_flight{http_route="infer"}')).toBe(0);
      expect(after.get('tensorgate_request_bytes_in_flight{http_route="infer"}') ?? 0).toBe(0);
    } finally {
      for (const c of clients) c.end();
      await gw.close();
      await b2.close();
    }
  });

  test('a client that resets its connection during a call in C: the call cancelled, its place given back, the gateway serving', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--max-in-flight-requests', '1']);
    const gone = new Client(gw.port), next = new Client(gw.port);
    try {
      for (const c of [gone, next]) for (let i = 0; i < 3; i++) expect((await c.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      b2.faults.inferDelayMs = 500;
      void gone.send(SAME).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 150)); // the call is under way in C
      gone.socket.resetAndDestroy(); // TCP RST: libuv reports an error, not a hang-up
      await new Promise((r) => setTimeout(r, 800)); // Triton has answered the cancelled call by now
      b2.faults.inferDelayMs = 0;
      // The reset reached the backend as the call's cancellation (RST_STREAM), before its answer.
      expect(b2.stats.inferCancellations).toBe(1);
      // One place in all (--max-in-flight-requests 1): had the reset call kept it, this would be 503.
      for (let i = 0; i < 5; i++) expect((await next.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      gone.end();
      next.end();
      await gw.close();
      await b2.close();
    }
  });

  test('a drain: an idle lent connection is ended, a call under way in C answered with Connection: close', async () => {
    const gw = await gatewayFor(['--backend', backend.address, '--compiled-lane']);
    const idle = new Client(gw.port), busy = new Client(gw.port);
    try {
      for (let i = 0; i < 3; i++) expect((await idle.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      for (let i = 0; i < 3; i++) expect((await busy.send(SAME))?.head).toMatch(/^HTTP\/1\.1 200/);
      backend.faults.inferDelayMs = 1000;
      const slow = busy.send(SAME);
      await new Promise((r) => setTimeout(r, 100)); // the call is under way in C
      const closed = gw.close();
      const a = await slow;
      expect(a?.head).toMatch(/^HTTP\/1\.1 200/);
      expect(a?.head).toMatch(/\r\nConnection: close/i);
      await closed;
      await new Promise((r) => setTimeout(r, 100));
      expect(idle.closed).toBe(true);
      expect(busy.closed).toBe(true);
    } finally {
      backend.faults.inferDelayMs = 0;
      idle.end();
      busy.end();
    }
  });
  /** A 600 KB FP32 binary body to classifier_fp32, with `"id":""` as perf_analyzer sends (values vary by `seed`). */
  const classifier = (seed: number): Buffer => {
    const f = new Float32Array(3 * 224 * 224);
    for (let i = 0; i < f.length; i++) f[i] = ((i * 7 + seed * 13) % 251) / 16;
    const data = Buffer.from(f.buffer);
    return binary({ id: '', inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: data.length } }],
      outputs: [{ name: 'PROBS', parameters: { binary_data: true } }] }, data, 'classifier_fp32');
  };
  /** `bytes` as libcurl writes a request: the head alone, then the body 64 KiB at a time, `pauseMs` between writes. */
  const asCurlWrites = async (c: Client, bytes: Buffer, pauseMs = 2): Promise<Answer> => {
    const head = bytes.indexOf('\r\n\r\n') + 4;
    c.socket.write(bytes.subarray(0, head));
    let at = head;
    for (; bytes.length - at > 65536; at += 65536) {
      await new Promise((r) => setTimeout(r, pauseMs));
      c.socket.write(bytes.subarray(at, at + 65536));
    }
    await new Promise((r) => setTimeout(r, pauseMs));
    return (await c.send(bytes.subarray(at)))!;
  };
  /** Head and body up to `upto` bytes of it: a client that stops (or goes) there. */
  const partOf = (bytes: Buffer, upto: number): Buffer => bytes.subarray(0, bytes.indexOf('\r\n\r\n') + 4 + upto);

  test('a binary body that comes in 64 KiB writes (`"id":""` in its header): its call begins with the first, C sending as it reads; every answer the fast path\'s byte for byte', async () => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(classifier(i)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const mark = tap.mark();
      const early = lane.laneCounts()!.earlyCalls;
      for (let i = 0; i < 6; i++) {
        const bytes = classifier(10 + i);
        expect(steady(await asCurlWrites(c, bytes))).toBe(steady((await p.send(bytes))!));
      }
      await tap.until(mark + 12);
      const inC = tap.records.slice(mark).filter((r) => r.lane === true);
      expect(inC.length).toBe(6);
      expect(lane.laneCounts()!.earlyCalls - early).toBe(6);
      // Begun early, its sending starts before the body's last byte is read; decode is the plan's choice, at the call.
      for (const r of inC) {
        const { ingress_read: read, upstream_send: send, decode } = r.ledger!.hops;
        expect(send.startNs).toBeLessThan(read.endNs);
        expect(send.endNs).toBeGreaterThanOrEqual(read.endNs);
        expect(decode.endNs - decode.startNs).toBe(0);
      }
    } finally {
      c.end();
      p.end();
    }
  });

  test.each([['V2', false], ['V1', true]] as [string, boolean][])('a %s base64 body that comes in 64 KiB writes: its call begins once C has decoded a first part, its DATA following the decode; every answer the fast path\'s byte for byte', async (_, v1) => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(base64Request(i, v1)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const mark = tap.mark();
      const { earlyCalls, decodedEarly } = lane.laneCounts()!;
      for (let i = 0; i < 6; i++) {
        const bytes = base64Request(20 + i, v1);
        expect(steady(await asCurlWrites(c, bytes))).toBe(steady((await p.send(bytes))!));
      }
      await tap.until(mark + 12);
      const inC = tap.records.slice(mark).filter((r) => r.lane === true);
      expect(inC.length).toBe(6);
      expect(lane.laneCounts()!.earlyCalls - earlyCalls).toBe(6);
      expect(lane.laneCounts()!.decodedEarly - decodedEarly).toBeGreaterThan(6 * 700_000);
      // Sent while it is read; the decode hop is the string's last part, decoded once the body was whole.
      for (const r of inC) {
        const { ingress_read: read, upstream_send: send, decode } = r.ledger!.hops;
        expect(send.startNs).toBeLessThan(read.endNs);
        expect(decode.startNs).toBe(read.endNs);
        expect(decode.endNs).toBeGreaterThan(decode.startNs);
      }
    } finally {
      c.end();
      p.end();
    }
  });

  test.each([['V2', false], ['V1', true]] as [string, boolean][])('a %s base64 body whose early call began and whose string then is not clean, or decodes to another length: the call cancelled with nothing run upstream, the fast path\'s answer (400), and C again after', async (_, v1) => {
    const c = new Client(lane.port), p = new Client(plain.port);
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(base64Request(i, v1)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const good = base64Request(30, v1);
      const text = good.indexOf(v1 ? '"b64":"' : '"data":"') + (v1 ? 7 : 8), end = good.indexOf('"', text);
      const bad: Buffer[] = [];
      // A character in neither alphabet past the first parts C decodes (mid-way, among the last 128
      // characters, the last); a string one group shorter, padded.
      for (const at of [400_000, end - text - 60, end - text - 1]) {
        const b = Buffer.from(good);
        b[text + at] = '!'.charCodeAt(0);
        bad.push(b);
      }
      const short = Buffer.from(good);
      short.write('A===', end - 4, 'latin1');
      bad.push(short);
      for (const [k, b] of bad.entries()) {
        // A request the fast path serves, and its connection is the lane's again (a 400 is not kept).
        expect((await c.send(base64Request(31 + k, v1)))!.head).toMatch(/^HTTP\/1\.1 200/);
        await settled();
        const mark = tap.mark();
        const { earlyCalls } = lane.laneCounts()!, calls = backend.stats.inferCalls;
        const x = await asCurlWrites(c, b);
        // Its call began (C had decoded a clean first part), and no ModelInfer ran: its message was never whole.
        expect(lane.laneCounts()!.earlyCalls - earlyCalls).toBe(1);
        expect(backend.stats.inferCalls).toBe(calls);
        expect(x.head).toMatch(/^HTTP\/1\.1 400/);
        expect(steady(x)).toBe(steady((await p.send(b))!));
        await tap.until(mark + 2);
        expect(tap.records.slice(mark).some((r) => r.lane === true)).toBe(false);
      }
      const mark = tap.mark();
      for (let i = 0; i < 4; i++) {
        const bytes = base64Request(40 + i, v1);
        expect(steady(await asCurlWrites(c, bytes))).toBe(steady((await p.send(bytes))!));
      }
      await tap.until(mark + 8);
      // The first the fast path's (the connection came back to JavaScript with the 400), then C's.
      expect(tap.records.slice(mark).filter((r) => r.lane === true).length).toBe(3);
    } finally {
      c.end();
      p.end();
    }
  });

  test('a client that hangs up mid-body during an early call: the call cancelled with nothing run upstream, its place given back, the gateway serving', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--max-in-flight-requests', '1']);
    const gone = new Client(gw.port), next = new Client(gw.port);
    try {
      for (const c of [gone, next]) for (let i = 0; i < 3; i++) expect((await c.send(classifier(i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      let calls = b2.stats.inferCalls;
      for (const end of ['hang-up', 'reset'] as const) {
        const c = end === 'hang-up' ? gone : new Client(gw.port);
        if (end === 'reset') for (let i = 0; i < 2; i++) expect((await c.send(classifier(i)))?.head).toMatch(/^HTTP\/1\.1 200/);
        calls = b2.stats.inferCalls;
        const early = gw.laneCounts()!.earlyCalls;
        c.socket.write(partOf(classifier(5), 200_000));
        await new Promise((r) => setTimeout(r, 150)); // the call is under way in C, its message partly sent
        if (end === 'hang-up') c.socket.end(); else c.socket.resetAndDestroy();
        await new Promise((r) => setTimeout(r, 300));
        c.end();
        expect([end, gw.laneCounts()!.earlyCalls - early]).toEqual([end, 1]);
        // The backend never had a whole message: no ModelInfer ran.
        expect([end, b2.stats.inferCalls]).toEqual([end, calls]);
      }
      // One place in all (--max-in-flight-requests 1): had a cancelled call kept it, this would be 503.
      for (let i = 0; i < 5; i++) expect((await asCurlWrites(next, classifier(30 + i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      expect(b2.stats.inferCalls).toBe(calls + 5);
    } finally {
      gone.end();
      next.end();
      await gw.close();
      await b2.close();
    }
  });

  test('a body that stops mid-way during an early call: at the request\'s bound the fast path\'s answer (408), nothing run upstream', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const bounds = ['--headers-timeout-ms', '1000', '--request-timeout-ms', '1500'];
    const [gw, ref] = await Promise.all([gatewayFor(['--backend', b2.address, '--compiled-lane', ...bounds]),
      gatewayFor(['--backend', b2.address, '--compiled-lane=false', ...bounds])]);
    const c = new Client(gw.port), p = new Client(ref.port);
    try {
      for (const x of [c, p]) for (let i = 0; i < 3; i++) expect((await x.send(classifier(i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const early = gw.laneCounts()!.earlyCalls, calls = b2.stats.inferCalls;
      const stalled = partOf(classifier(7), 300_000);
      const [x, y] = await Promise.all([c.send(stalled), p.send(stalled)]);
      expect(gw.laneCounts()!.earlyCalls - early).toBe(1);
      expect(x?.head).toMatch(/^HTTP\/1\.1 408/);
      expect(steady(x!)).toBe(steady(y!));
      expect(b2.stats.inferCalls).toBe(calls);
      for (let i = 0; i < 20 && !(c.closed && p.closed); i++) await new Promise((r) => setTimeout(r, 50));
      expect([c.closed, p.closed]).toEqual([true, true]);
      // The gateway serves on, in C.
      const d = new Client(gw.port);
      for (let i = 0; i < 3; i++) expect((await asCurlWrites(d, classifier(40 + i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      d.end();
    } finally {
      c.end();
      p.end();
      await Promise.all([gw.close(), ref.close()]);
      await b2.close();
    }
  });

  test('the backend gone while an early call sends: the fast path\'s error once the body is read, and served in C again once it is back', async () => {
    const b2 = await startReferenceBackend({ host: '127.0.0.1' });
    const port = Number(b2.address.split(':')[1]);
    const gw = await gatewayFor(['--backend', b2.address, '--compiled-lane', '--upstream-retries', '0']);
    const c = new Client(gw.port);
    let back: ReferenceBackend | undefined;
    try {
      for (let i = 0; i < 3; i++) expect((await c.send(classifier(i)))!.head).toMatch(/^HTTP\/1\.1 200/);
      await settled();
      const early = gw.laneCounts()!.earlyCalls;
      const bytes = classifier(9), part = partOf(bytes, 200_000);
      c.socket.write(part);
      await new Promise((r) => setTimeout(r, 100));
      await b2.close();
      const failed = await c.send(bytes.subarray(part.length));
      expect(gw.laneCounts()!.earlyCalls - early).toBe(1);
      expect(failed?.head).toMatch(/^HTTP\/1\.1 503/);
      expect(JSON.parse(failed!.body.toString()).error).toMatch(/unavailable|closed/i);
      back = await startReferenceBackend({ host: '127.0.0.1', port });
      let ok = 0;
      for (let i = 0; i < 40 && ok < 3; i++) {
        const a = await (c.closed ? new Client(gw.port) : c).send(classifier(50 + i));
        if (a?.head.startsWith('HTTP/1.1 200') === true) ok++;
        else await new Promise((r) => setTimeout(r, 100));
      }
      expect(ok).toBe(3);
      await new Promise((r) => setTimeout(r, 1200)); // the lane's reconnection waits a second after a failure
      const before = gw.laneCounts()!.earlyCalls;
      for (let i = 0; i < 3; i++) expect((await asCurlWrites(c, classifier(60 + i)))?.head).toMatch(/^HTTP\/1\.1 200/);
      expect(gw.laneCounts()!.earlyCalls - before).toBeGreaterThan(0);
    } finally {
      c.end();
      await gw.close();
      await back?.close();
    }
  });
});
