// Planned requests (gateway/pipeline/infer-planned.ts, server.plannedInfer): a raw, binary-extension
// or JSON V2 infer, or a V1 predict (pipeline/v1-planned.ts), of at most 1 MiB (8 MiB where the
// compiled lane serves), gathered whole, is served without the handler's chain — and
// answers the same bytes, with the same record, as the handler does (server.plannedInfer off),
// Date and the hop timings aside: success in every output form, the decoder's refusals, Triton's
// refusals, and a backend that is gone. A guarded route is never planned. Raw sockets, so the
// bytes are exactly as sent and read; curl agrees on one.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayFor } from '../support/gateway';
import { RecordTap } from '../support/records';
import { CURL, needs, PYTHON } from '../support/tools';
import { curl, type CurlAnswer } from '../support/curl';

jest.setTimeout(30_000);

/** An answer's head and body as read. */
interface Answer {
  readonly head: string;
  readonly body: Buffer;
}

let exchanges = 0;

/**
 * One request on a fresh connection: its answer. With `split`, the bytes go in two writes
 * `gapMs` apart (and once `between` has settled), the second from `split` bytes before the end
 * (a body read in two reads — so long
 * as the gateway reads the first before the second arrives: a JSON body gathered from two reads
 * counts a copy that one read does not, so the gap outlasts an event loop held up by other suites).
 */
async function exchange(gw: RunningGateway, bytes: Buffer, split = 0, gapMs = 150, between?: () => Promise<unknown>): Promise<Answer> {
  // A head of its own each time: the compiled lane, which takes a new connection whose head it
  // keeps, never serves these (test/integration/compiled-lane.test.ts checks it against this path).
  const line = bytes.indexOf('\r\n') + 2;
  bytes = Buffer.concat([bytes.subarray(0, line), Buffer.from(`X-Exchange: ${++exchanges}\r\n`, 'latin1'), bytes.subarray(line)]);
  const s = connect(gw.port, '127.0.0.1');
  s.setNoDelay(true);
  s.on('error', () => undefined);
  try {
    let buf = Buffer.alloc(0);
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no answer within 10 s')), 10_000);
      s.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buf.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        clearTimeout(timer);
        resolve({ head, body: buf.subarray(end + 4, end + 4 + length) });
      });
      if (split === 0) s.write(bytes);
      else {
        s.write(bytes.subarray(0, bytes.length - split));
        setTimeout(() => void (between ?? (() => Promise.resolve()))().then(() => s.write(bytes.subarray(bytes.length - split))), gapMs);
      }
    });
  } finally {
    s.destroy();
  }
}

/** A head with what varies between two runs of the same request blanked: Date and the hop timings. */
const steady = (head: string): string => head.replace(/\r\nDate: [^\r]*/i, '\r\nDate: -').replace(/\r\nServer-Timing: [^\r]*/i, '\r\nServer-Timing: -');

const infer = (model: string, body: Buffer, headers: string, type = 'application/octet-stream'): Buffer => Buffer.concat([Buffer.from(
  `POST /v2/models/${model}/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: ${type}\r\n${headers}Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
/** A V2 JSON request. */
const json = (model: string, body: unknown): Buffer => infer(model, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), '', 'application/json');

/** A binary-extension request: its JSON header, then `data`. */
function binary(model: string, header: unknown, data: Buffer): Buffer {
  const h = Buffer.from(JSON.stringify(header));
  return infer(model, Buffer.concat([h, data]), `Inference-Header-Content-Length: ${h.length}\r\n`);
}

/** Output `name` of a binary answer: its bytes, found by the JSON header's binary_data_size of each output. */
function binaryOutput(a: { head: string; body: Buffer }, name: string): Buffer {
  const h = Number(/\r\nInference-Header-Content-Length: (\d+)/i.exec(a.head)![1]);
  const outputs = (JSON.parse(a.body.subarray(0, h).toString()) as { outputs: { name: string; parameters?: { binary_data_size?: number } }[] }).outputs;
  let at = h;
  for (const o of outputs) {
    const n = o.parameters?.binary_data_size ?? 0;
    if (o.name === name) return a.body.subarray(at, at + n);
    at += n;
  }
  throw new Error(`no output ${name}`);
}

const BYTES = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 31 + 7) & 0xff));
const INT32 = Buffer.from(new Int32Array(Array.from({ length: 16 }, (_, i) => i)).buffer);
const IMAGE = { name: 'IMAGE', datatype: 'UINT8', shape: [1, 64], parameters: { binary_data_size: 64 } };

/** name → request: each planned on the planned gateway (after the model's first request). */
const CASES: [string, Buffer][] = [
  ['binary outputs', binary('image_stats', { inputs: [IMAGE], outputs: [{ name: 'LEN', parameters: { binary_data: true } }, { name: 'SUM', parameters: { binary_data: true } }] }, BYTES)],
  ['JSON outputs (none asked as binary)', binary('image_stats', { id: 'r-1', inputs: [IMAGE] }, BYTES)],
  ['binary_data_output, one output asked as JSON', binary('simple', {
    parameters: { binary_data_output: true },
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: true } }],
  }, Buffer.concat([INT32, INT32]))],
  ['raw', infer('image_stats', BYTES, 'Inference-Header-Content-Length: 0\r\n')],
  ['a binary_data_size past the body (the decoder refuses)', binary('image_stats', { inputs: [{ ...IMAGE, parameters: { binary_data_size: 65 } }] }, BYTES)],
  ['an input the model does not have (Triton refuses)', binary('image_stats', { inputs: [{ ...IMAGE, name: 'NOPE' }] }, BYTES)],
  ['JSON', json('simple', { inputs: [0, 1].map((i) => ({ name: `INPUT${i}`, datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, k) => k * i) })) })],
  ['JSON, base64 data, one output as binary', json('image_stats', {
    inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 64], data: BYTES.toString('base64') }], outputs: [{ name: 'LEN', parameters: { binary_data: true } }],
  })],
  ['JSON that does not parse', json('simple', '{"inputs": [')],
  ['JSON with a shape its data does not fill', json('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [1, 2] }] })],
  ['a header that is not JSON', infer('image_stats', Buffer.concat([Buffer.from('{"inputs":'), BYTES]), 'Inference-Header-Content-Length: 10\r\n')],
];

/**
 * What two records of the same request must share: everything but timings, the path taken and the
 * allocations counted (a whole answer's JSON header is one; the handler streams a binary answer's).
 */
function comparable(r: RequestRecord): unknown {
  const hops = r.ledger === undefined ? undefined
    : Object.fromEntries(Object.entries(r.ledger.hops).map(([k, h]) => [k, [h.bytesIn, h.bytesOut, h.bytesCopied, h.copies]]));
  return {
    route: r.route, method: r.method, status: r.status, model: r.model, version: r.version, encoding: r.encoding, encodingOut: r.encodingOut,
    errorCode: r.errorCode, declaredBytes: r.declaredBytes, bytesOut: r.bytesOut, upstreamStatus: r.upstreamStatus, requestId: r.requestId,
    inferences: r.inferences, incomplete: r.incomplete, hops,
  };
}

/**
 * The handled record `hr` as the planned one of the same request has it: a planned answer of at
 * most 2 KiB is copied into one buffer with its head (ingress/server.ts GATHER_BYTES), one copy
 * the handler's answer does not make.
 */
function asPlanned(hr: RequestRecord, pr: RequestRecord): unknown {
  const c = comparable(hr) as { hops?: Record<string, number[]> };
  const out = pr.ledger?.hops.egress_write;
  if (c.hops !== undefined && pr.planned === true && pr.errorCode === undefined && out !== undefined && out.bytesOut > 0 && out.bytesOut <= 2048) {
    const e = c.hops.egress_write!;
    c.hops.egress_write = [e[0]!, e[1]!, e[2]! + out.bytesOut, e[3]! + 1];
  }
  return c;
}

describe('planned requests answer as the handler does', () => {
  const tap = new RecordTap();
  let backend: ReferenceBackend;
  let planned: RunningGateway;
  let handled: RunningGateway;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    planned = await gatewayFor(['--backend', backend.address]);
    handled = await gatewayFor(['--backend', backend.address, '--planned-infer=false']);
    tap.start();
    // The first request of a model caches its configuration: it is the handler's on either.
    for (const gw of [planned, handled]) for (const [, bytes] of CASES.slice(0, 3)) await exchange(gw, bytes);
  });
  afterAll(async () => {
    tap.stop();
    await planned.close();
    await handled.close();
    await backend.close();
  });

  /** `bytes` sent to a planned gateway, then to a handling one: each answer and its record. */
  async function both(p: RunningGateway, h: RunningGateway, bytes: Buffer, split = 0): Promise<[Answer, RequestRecord, Answer, RequestRecord]> {
    const got: (Answer | RequestRecord)[] = [];
    for (const gw of [p, h]) {
      const n = tap.mark();
      got.push(await exchange(gw, bytes, split));
      await tap.until(n + 1);
      got.push(tap.records[n]!);
    }
    return got as [Answer, RequestRecord, Answer, RequestRecord];
  }

  test.each(CASES)('%s', async (_name, bytes) => {
    const [a, pr, b, hr] = await both(planned, handled, bytes);
    expect(pr.planned).toBe(true);
    expect(hr.planned).toBeUndefined();
    expect(steady(a.head)).toBe(steady(b.head));
    expect(a.body.equals(b.body)).toBe(true);
    expect(comparable(pr)).toEqual(asPlanned(hr, pr));
  });

  test.each(CASES)('%s, its body in two reads', async (_name, bytes) => {
    const [a, pr, b, hr] = await both(planned, handled, bytes, 7);
    expect(pr.planned).toBe(true);
    expect(steady(a.head)).toBe(steady(b.head));
    expect(a.body.equals(b.body)).toBe(true);
    expect(comparable(pr)).toEqual(asPlanned(hr, pr));
  });

  /** A 3×224×224 FP32 image (602,112 bytes) in the binary extension or raw: a body of many reads. */
  const IMAGE_BYTES = Buffer.alloc(3 * 224 * 224 * 4);
  for (let i = 0; i < IMAGE_BYTES.length / 4; i++) IMAGE_BYTES.writeFloatLE(((i * 7919) % 1000) / 8, i * 4);
  const IMAGE_INPUT = { name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] };
  /**
   * name, request, planned ('lane': where the compiled lane serves, whose bodies are planned up to
   * 8 MiB, not 1), bytes the planned request sends from staging rather than copying into its message.
   */
  const LARGE: [string, Buffer, boolean | 'lane', number?][] = [
    ['600 KB, binary extension', binary('classifier_fp32', {
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: IMAGE_BYTES.length } }],
      outputs: [{ name: 'PROBS', parameters: { binary_data: true } }],
    }, IMAGE_BYTES), true],
    ['600 KB, raw', infer('classifier_fp32', IMAGE_BYTES, 'Inference-Header-Content-Length: 0\r\n'), true],
    ['600 KB, a binary_data_size short of the body', binary('classifier_fp32', {
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], parameters: { binary_data_size: IMAGE_BYTES.length - 4 } }],
    }, IMAGE_BYTES), true],
    ['1 MiB + 1 byte: the handler\'s (sent as it arrives) unless the lane serves', over(1024 * 1024), 'lane'],
    ['8 MiB + 1 byte: the handler\'s', over(8 * 1024 * 1024), false],
    // Staged (decode/base64/base64-staging.ts), as the handler stages it; its payload is then sent
    // from the staging buffer (the call is whole), where the handler copies it into its pooled message.
    ['600 KB, JSON with the tensor as base64', json('classifier_fp32', { inputs: [{ ...IMAGE_INPUT, data: IMAGE_BYTES.toString('base64') }] }), true,
      IMAGE_BYTES.length],
    // Staging leaves a string with a character outside the alphabet: the body is read whole, as
    // sent, on the decode thread (limits.decodeThreadMinBytes), whose reader refuses it.
    ['600 KB, base64 with a character outside the alphabet', json('classifier_fp32', {
      inputs: [{ ...IMAGE_INPUT, data: `${IMAGE_BYTES.toString('base64').slice(0, 4000)}*${IMAGE_BYTES.toString('base64').slice(4001)}` }],
    }), true],
    // Nothing to stage (numbers): read whole on the decode thread.
    ['300 KB of JSON numbers', json('image_stats', {
      inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 100_000], data: Array.from({ length: 100_000 }, (_, i) => (i * 31) & 0xff) }],
    }), true],
  ];

  /** An image_stats request whose body is one byte past `bound` (ingress/server.ts's planned bodies' bounds). */
  function over(bound: number): Buffer {
    const header = (n: number): unknown => ({ inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, n], parameters: { binary_data_size: n } }] });
    let n = bound + 1;
    n -= JSON.stringify(header(n)).length; // the same digits: the header's length stays
    const bytes = binary('image_stats', header(n), Buffer.alloc(n, 3));
    expect(bytes.length - bytes.indexOf('\r\n\r\n') - 4).toBe(bound + 1);
    return bytes;
  }

  /**
   * `bytes` to both gateways (after a first request each: the model cached), body in `split`
   * pieces: planned or not as said, the same answer, the same record but for `cutOut` bytes the
   * planned request sent from staging where the handler copied them into its message (one copy).
   */
  async function sameAsHandled(bytes: Buffer, isPlanned: boolean | 'lane', cutOut: number, split = 0): Promise<void> {
    const [a, pr, b, hr] = await both(planned, handled, bytes, split);
    const lane = planned.laneCounts() !== undefined;
    expect(pr.planned).toBe(isPlanned === true || (isPlanned === 'lane' && lane) ? true : undefined);
    expect(steady(a.head)).toBe(steady(b.head));
    expect(a.body.equals(b.body)).toBe(true);
    const expected = asPlanned(hr, pr) as { hops?: Record<string, number[]> };
    if (cutOut > 0) {
      const d = expected.hops!.decode!;
      expected.hops!.decode = [d[0]!, d[1]!, d[2]! - cutOut, d[3]! - 1];
    }
    expect(comparable(pr)).toEqual(expected);
  }

  test.each(LARGE)('%s', async (_name, bytes, isPlanned, cutOut = 0) => {
    await exchange(planned, bytes); // the model's configuration cached
    await exchange(handled, bytes);
    await sameAsHandled(bytes, isPlanned, cutOut);
  });

  // decode/framed-heads.ts: the second and third requests' heads are byte for byte the first's (a
  // raw request's: the same model and body length).
  const SENT_AGAIN: [string, (data: Buffer) => Buffer][] = [
    ['binary extension', (data) => binary('image_stats', { inputs: [IMAGE], outputs: [{ name: 'SUM', parameters: { binary_data: true } }] }, data)],
    ['raw', (data) => infer('image_stats', data, 'Inference-Header-Content-Length: 0\r\n')],
  ];
  test.each(SENT_AGAIN)('a head sent again (%s) takes the head framed for it, with the payload of each request', async (_, request) => {
    const payloads = [BYTES, Buffer.alloc(64, 1), Buffer.alloc(64, 2)];
    for (const [i, data] of payloads.entries()) {
      const [a, pr, b, hr] = await both(planned, handled, request(data));
      expect(pr.planned).toBe(true);
      // The head kept by the first (or before): nothing framed for the others.
      if (i > 0) expect(pr.ledger?.hops.decode.allocations).toBe(0);
      expect(steady(a.head)).toBe(steady(b.head));
      expect(a.body.equals(b.body)).toBe(true);
      expect(comparable(pr)).toEqual(asPlanned(hr, pr));
    }
    // SUM (UINT64, binary): the payloads' own sums, not the first's.
    const sums = [];
    for (const data of payloads) sums.push(binaryOutput(await exchange(planned, request(data)), 'SUM').readBigUInt64LE(0));
    expect(sums).toEqual(payloads.map((d) => BigInt(d.reduce((n, v) => n + v, 0))));
  });

  // V1 predict (pipeline/v1-planned.ts), once the model's metadata is cached: its base64 rows
  // staged as the handler stages them, each staged tail then sent from its staging buffer where the
  // handler copies it into its message (under 1 MiB).
  const predict = (model: string, body: unknown): Buffer => {
    const b = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    return Buffer.concat([Buffer.from(`POST /v1/models/${model}:predict HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n`,
      'latin1'), b]);
  };
  const V1: [string, Buffer, boolean | 'lane', number?][] = [
    ['V1, 600 KB as one b64 instance', predict('classifier_fp32', { instances: [{ b64: IMAGE_BYTES.toString('base64') }] }), true, IMAGE_BYTES.length],
    ['V1, two b64 instances', predict('image_stats', { instances: [{ b64: BYTES.toString('base64') }, { b64: Buffer.alloc(64, 9).toString('base64') }] }), true],
    ['V1, 40 KB b64 instances (staged)', predict('image_stats', { instances: [0, 1].map((k) => ({ b64: Buffer.alloc(20_000, k + 3).toString('base64') })) }), true, 40_000],
    ['V1, numbers', predict('image_stats', { instances: [Array.from(BYTES)] }), true],
    ['V1, columns', predict('image_stats', { inputs: [Array.from(BYTES)] }), true],
    ['V1, a body that does not parse', predict('image_stats', '{"instances": ['), true],
    ['V1, rows of two lengths (the decoder refuses)', predict('image_stats', { instances: [[1, 2], [3]] }), true],
    ['V1, a b64 row of another length (Triton refuses)', predict('classifier_fp32', { instances: [{ b64: BYTES.toString('base64') }] }), true],
    // Over 1 MiB: planned where the lane serves (image_stats' outputs are integers it prints), else the handler's.
    ['V1, 1.5 MB as one b64 instance, two outputs', predict('image_stats', { instances: [{ b64: Buffer.alloc(1_100_000, 5).toString('base64') }] }), 'lane'],
  ];
  test.each(V1)('%s', async (_name, bytes, isPlanned, cutOut = 0) => {
    await exchange(planned, bytes); // the model's metadata cached
    await exchange(handled, bytes);
    for (const split of [0, 7]) await sameAsHandled(bytes, isPlanned, cutOut, split);
  });

  needs(CURL()).test('curl reads a planned answer as the handler\'s', async () => {
    const h = Buffer.from(JSON.stringify({ inputs: [IMAGE], outputs: [{ name: 'SUM', parameters: { binary_data: true } }] }));
    const dir = mkdtempSync(join(tmpdir(), 'tg-planned-'));
    try {
      writeFileSync(join(dir, 'body'), Buffer.concat([h, BYTES]));
      const get = (gw: RunningGateway): Promise<CurlAnswer> => curl('--http1.1', '-H', 'Content-Type: application/octet-stream',
        '-H', `Inference-Header-Content-Length: ${h.length}`, '--data-binary', `@${join(dir, 'body')}`, `http://127.0.0.1:${gw.port}/v2/models/image_stats/infer`);
      const n = tap.mark();
      const a = await get(planned);
      await tap.until(n + 1);
      expect(tap.records[n]?.planned).toBe(true);
      const b = await get(handled);
      const ihcl = b.headers['inference-header-content-length'];
      expect([a.status, a.headers['inference-header-content-length'], a.body.length]).toEqual([200, ihcl, b.body.length]);
      expect(a.body.equals(b.body)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // A client that sends thousands of requests and reads nothing until the gateway has stopped
  // answering: the gateway's socket is full and an answer waits on it (ingress/server.ts
  // PlannedExchange.answer: out once an empty write after it is), so it is not reported yet. Then
  // the client reads everything.
  needs(PYTHON()).test('a client that reads nothing until its answers fill the socket: each answer whole and in order once it reads, each recorded complete', async () => {
    const COUNT = 16_000; // ~6 MB of answers: more than loopback's socket buffers hold
    const request = CASES[0]![1];
    const n = tap.mark();
    const program = [
      'import socket, sys, threading',
      'req = open(sys.argv[2], "rb").read()',
      's = socket.socket()',
      's.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)',
      's.connect(("127.0.0.1", int(sys.argv[1])))',
      // Sent from a thread: the gateway stops reading a connection whose answers cannot go out.
      `threading.Thread(target=s.sendall, args=(req * ${COUNT},), daemon=True).start()`,
      'sys.stdin.readline()', // the test saw the gateway stop answering
      's.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)',
      'buf, heads = b"", []',
      `while len(heads) < ${COUNT}:`,
      '    d = s.recv(65536)',
      '    if not d: break',
      '    buf += d',
      '    while True:',
      '        end = buf.find(b"\\r\\n\\r\\n")',
      '        if end < 0: break',
      '        head = buf[:end].decode("latin1")',
      '        length = int(next(l.split(":")[1] for l in head.split("\\r\\n") if l.lower().startswith("content-length:")))',
      '        if len(buf) < end + 4 + length: break',
      '        heads.append((head.split("\\r\\n")[0], buf[end + 4:end + 4 + length].hex()))',
      '        buf = buf[end + 4 + length:]',
      'print(len(heads), len(set(heads)), heads[0][0], heads[-1][0])',
    ].join('\n');
    const dir = mkdtempSync(join(tmpdir(), 'tg-planned-full-'));
    try {
      writeFileSync(join(dir, 'request'), request);
      const python = spawn(PYTHON().path!, ['-c', program, String(planned.port), join(dir, 'request')], { stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      python.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
      python.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
      const exited = new Promise<number | null>((resolve) => python.on('exit', resolve));
      // The gateway has stopped answering: no record for 1.5 s, some answered, not all.
      let last = -1;
      let still = 0;
      for (let t = 0; t < 400 && still < 15; t++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const now = tap.records.length - n;
        still = now === last ? still + 1 : 0;
        last = now;
      }
      expect(last).toBeGreaterThan(0);
      expect(last).toBeLessThan(COUNT);
      python.stdin.end('go\n');
      expect(await exited).toBe(0);
      // Every answer, each the same 200 with the same body.
      expect([out.trim(), err]).toEqual([`${COUNT} 1 HTTP/1.1 200 OK HTTP/1.1 200 OK`, '']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    await tap.until(n + COUNT);
    const records = tap.records.slice(n, n + COUNT).map((r) => `${r.planned} ${r.status} ${r.incomplete} ${r.errorCode}`);
    expect(new Set(records)).toEqual(new Set(['true 200 undefined undefined']));
  }, 90_000);

  test('the model\'s configuration forgotten while the body arrives (a repository load through the gateway evicts it): read again, answered as the handler does', async () => {
    const bytes = CASES[0]![1];
    const gw = await gatewayFor(['--backend', backend.address, '--api-disabled', 'trace']); // the repository API enabled
    try {
      const first = tap.mark();
      await exchange(gw, bytes); // cached
      await tap.until(first + 1); // its record, published when the server finished, after the client read it
      const n = tap.mark();
      const evict = (): Promise<Response> => fetch(`${gw.url}/v2/repository/models/image_stats/load`, { method: 'POST', body: '' });
      const a = await exchange(gw, bytes, 7, 50, evict);
      const b = await exchange(handled, bytes);
      await tap.until(n + 3);
      // The load reached its route (its answer is the backend's: the reference backend loads
      // nothing, and the configuration is evicted whatever the outcome), then the planned request.
      expect(tap.records.slice(n, n + 3).map((r) => [r.route, r.planned])).toEqual([['repository_load', undefined], ['infer', true], ['infer', undefined]]);
      expect(steady(a.head)).toBe(steady(b.head));
      expect(a.body.equals(b.body)).toBe(true);
    } finally {
      await gw.close();
    }
  });

  test('a backend gone: the same error answer and record', async () => {
    const bytes = CASES[0]![1];
    const gone = await startReferenceBackend({ host: '127.0.0.1' });
    const p = await gatewayFor(['--backend', gone.address]);
    const h = await gatewayFor(['--backend', gone.address, '--planned-infer=false']);
    try {
      await exchange(p, bytes);
      await exchange(h, bytes);
      await gone.close();
      const [a, pr, b, hr] = await both(p, h, bytes);
      expect(pr.planned).toBe(true);
      expect(Number(a.head.split(' ')[1])).toBeGreaterThanOrEqual(500);
      expect(steady(a.head)).toBe(steady(b.head));
      expect(a.body.toString()).toBe(b.body.toString());
      expect(comparable(pr)).toEqual(asPlanned(hr, pr));
    } finally {
      await p.close();
      await h.close();
    }
  });
});

const TOKEN = 'planned_secret_0123456789abcdef';

describe('a guarded route is never planned', () => {
  const tap = new RecordTap();
  let dir: string;
  let gw: RunningGateway;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-planned-auth-'));
    writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: k, token: "${TOKEN}", groups: "*" }\n`);
    gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', join(dir, 'keys.yaml')]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('without credentials: 401 every time, the model cached or not', async () => {
    const withKey = CASES[0]![1].toString('latin1').replace('Host: gw\r\n', `Host: gw\r\nAuthorization: Bearer ${TOKEN}\r\n`);
    const n = tap.mark();
    expect((await exchange(gw, Buffer.from(withKey, 'latin1'))).head).toMatch(/^HTTP\/1.1 200 /);
    for (let i = 0; i < 3; i++) expect((await exchange(gw, CASES[0]![1])).head).toMatch(/^HTTP\/1.1 401 /);
    expect((await exchange(gw, Buffer.from(withKey, 'latin1'))).head).toMatch(/^HTTP\/1.1 200 /);
    await tap.until(n + 5);
    expect(tap.records.slice(n).map((r) => [r.status, r.planned])).toEqual([[200, undefined], ...Array(3).fill([401, undefined]), [200, undefined]]);
  });
});
