// The HTTP/1.1 fast path (gateway/ingress/http1/fast.ts), over raw sockets so the bytes are exactly
// as sent and read: V2 infer is served by it (the request's record says so), anything else on the
// same keep-alive connection is handed to node:http, which keeps the connection; pipelined
// requests are answered in order; and every answer is the same bytes as node:http's (server.fastPath
// off), Date and the hop timings aside.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { RecordTap } from '../support/records';

jest.setTimeout(30_000);

interface Answer {
  readonly head: string;
  readonly status: number;
  readonly body: Buffer;
}

/** Reads answers of known length off `socket` as they come; `next(n)` resolves with the first n. */
function answers(socket: Socket): { next: (n: number) => Promise<Answer[]> } {
  let buf = Buffer.alloc(0);
  const got: Answer[] = [];
  let wake: (() => void) | undefined;
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) break;
      const head = buf.subarray(0, end).toString('latin1');
      if (head.startsWith('HTTP/1.1 100 ')) {
        got.push({ head, status: 100, body: Buffer.alloc(0) });
        buf = buf.subarray(end + 4);
        continue;
      }
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + length) break;
      got.push({ head, status: Number(head.split(' ')[1]), body: buf.subarray(end + 4, end + 4 + length) });
      buf = buf.subarray(end + 4 + length);
    }
    wake?.();
  });
  return {
    next: (n) => new Promise<Answer[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${got.length} answers within 10 s, expected ${n}`)), 10_000);
      const check = (): void => {
        if (got.length < n) return;
        clearTimeout(timer);
        wake = undefined;
        resolve(got.splice(0, n));
      };
      wake = check;
      check();
    }),
  };
}

const open = async (gw: RunningGateway): Promise<Socket> => {
  const s = connect(gw.port, '127.0.0.1');
  s.on('error', () => undefined);
  await new Promise((resolve) => s.once('connect', resolve));
  return s;
};

const JSON_BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => 1) },
  ],
});

/** A V2 infer request's bytes. */
const infer = (model: string, body: string | Buffer, extra = ''): Buffer => {
  const b = Buffer.from(body);
  return Buffer.concat([Buffer.from(`POST /v2/models/${model}/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${b.length}\r\n${extra}\r\n`, 'latin1'), b]);
};
/** A V1 predict request's bytes. */
const predict = (model: string, body: string): Buffer => Buffer.from(`POST /v1/models/${model}:predict HTTP/1.1\r\nHost: gw\r\n`
  + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1');
const READY = Buffer.from('GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n', 'latin1');

describe('the fast path', () => {
  const tap = new RecordTap();
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
  });

  test('serves infer; a keep-alive connection handed to node:http for another route stays there, in order', async () => {
    const s = await open(gw);
    try {
      const a = answers(s);
      const n = tap.mark();
      s.write(infer('simple', JSON_BODY));
      const [first] = await a.next(1);
      expect(first!.status).toBe(200);
      expect((await tap.after(n)).fastPath).toBe(true);
      s.write(READY);
      const [ready] = await a.next(1);
      expect(ready!.status).toBe(200);
      await tap.until(n + 2);
      expect(tap.records[n + 1]!.fastPath).toBeUndefined();
      s.write(infer('simple', JSON_BODY));
      const [third] = await a.next(1);
      expect(third!.status).toBe(200);
      expect(third!.body.equals(first!.body)).toBe(true);
      await tap.until(n + 3);
      expect(tap.records[n + 2]!).toMatchObject({ route: 'infer' });
      expect(tap.records[n + 2]!.fastPath).toBeUndefined(); // node:http's connection now
    } finally {
      s.destroy();
    }
  });

  test('pipelined requests are answered in order, the hand-off among them included', async () => {
    const s = await open(gw);
    try {
      const a = answers(s);
      const n = tap.mark();
      s.write(Buffer.concat([infer('simple', JSON_BODY), infer('nope', JSON_BODY), infer('simple', JSON_BODY), READY, infer('simple', '{')]));
      const got = await a.next(5);
      expect(got.map((x) => x.status)).toEqual([200, 404, 200, 200, 400]);
      await tap.until(n + 5);
      expect(tap.records.slice(n).filter((r) => r.fastPath === true)).toHaveLength(3);
    } finally {
      s.destroy();
    }
  });

  test('a large body read in pages, then a request handed to node:http, then a reset: the gateway keeps serving', async () => {
    // The body's reads after the first are pages (buffers/reads.ts); the connection then goes to
    // node:http, and its reset is a read error under node:http's parser (the process must live).
    const s = await open(gw);
    const big = JSON_BODY + ' '.repeat(2 * 1024 * 1024);
    const a = answers(s);
    s.write(Buffer.concat([infer('simple', big), READY]));
    const got = await a.next(2);
    expect(got.map((x) => x.status)).toEqual([200, 200]);
    s.write('GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    s.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const t = await open(gw);
    try {
      const b = answers(t);
      t.write(infer('simple', JSON_BODY));
      const [after] = await b.next(1);
      expect(after!.status).toBe(200);
      expect(after!.body.equals(got[0]!.body)).toBe(true);
    } finally {
      t.destroy();
    }
  });

  test('V1 predict is the fast path\'s too', async () => {
    const s = await open(gw);
    try {
      const a = answers(s);
      const n = tap.mark();
      s.write(predict('identity_fp32', JSON.stringify({ instances: [[1, 2, 3]] })));
      const [ok] = await a.next(1);
      expect([ok!.status, JSON.parse(ok!.body.toString())]).toEqual([200, { predictions: [[1, 2, 3]] }]);
      expect(await tap.after(n)).toMatchObject({ route: 'v1_predict', fastPath: true });
    } finally {
      s.destroy();
    }
  });

  test('Expect: 100-continue is answered before the body is sent', async () => {
    const s = await open(gw);
    try {
      const a = answers(s);
      const full = infer('simple', JSON_BODY, 'Expect: 100-continue\r\n');
      const headEnd = full.indexOf('\r\n\r\n') + 4;
      s.write(full.subarray(0, headEnd));
      const [cont] = await a.next(1);
      expect(cont!.status).toBe(100);
      s.write(full.subarray(headEnd));
      const [ok] = await a.next(1);
      expect(ok!.status).toBe(200);
    } finally {
      s.destroy();
    }
  });

  test('a body in many small reads is read whole; Connection: close ends the connection after the answer', async () => {
    const s = await open(gw);
    try {
      const a = answers(s);
      const closed = new Promise((resolve) => s.once('close', resolve));
      const bytes = infer('simple', JSON_BODY, 'Connection: close\r\n');
      for (let at = 0; at < bytes.length; at += 97) {
        s.write(bytes.subarray(at, at + 97));
        await new Promise((resolve) => setImmediate(resolve));
      }
      const [ok] = await a.next(1);
      expect(ok!.status).toBe(200);
      expect(ok!.head).toMatch(/\r\nConnection: close(\r\n|$)/);
      await closed;
    } finally {
      s.destroy();
    }
  });
});

describe('the fast path\'s own bounds of a keep-alive connection', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--keep-alive-timeout-ms', '400', '--headers-timeout-ms', '400', '--request-timeout-ms', '800']);
  });
  afterAll(async () => {
    await gw.close();
  });

  /** A connection that was served one infer: its answers, and when it closed. */
  async function servedOnce(): Promise<{ s: Socket; a: ReturnType<typeof answers>; closed: Promise<number> }> {
    const s = await open(gw);
    const a = answers(s);
    const closed = new Promise<number>((resolve) => s.once('close', () => resolve(performance.now())));
    s.write(infer('simple', JSON_BODY));
    expect((await a.next(1))[0]!.status).toBe(200);
    return { s, a, closed };
  }

  test('idle past server.keepAliveTimeoutMs: closed', async () => {
    const { s, closed } = await servedOnce();
    try {
      const t0 = performance.now();
      expect(await closed - t0).toBeGreaterThan(300);
    } finally {
      s.destroy();
    }
  });

  test('a second head slower than server.headersTimeoutMs: 408, then closed', async () => {
    const { s, a, closed } = await servedOnce();
    try {
      s.write('POST /v2/models/simple/infer HTTP/1.1\r\nHost: gw\r\n');
      const [late] = await a.next(1);
      expect([late!.status, /x-tensorgate-error: (\S+)/.exec(late!.head)?.[1]]).toEqual([408, 'GW_ERR_REQUEST_TIMEOUT']);
      await closed;
    } finally {
      s.destroy();
    }
  });

  test('a body slower than server.requestTimeoutMs: 408 through the request, Connection: close', async () => {
    const { s, a, closed } = await servedOnce();
    try {
      const bytes = infer('simple', JSON_BODY);
      s.write(bytes.subarray(0, bytes.length - 10));
      const [late] = await a.next(1);
      expect([late!.status, /x-tensorgate-error: (\S+)/.exec(late!.head)?.[1]]).toEqual([408, 'GW_ERR_REQUEST_TIMEOUT']);
      expect(late!.head).toMatch(/\r\nConnection: close(\r\n|$)/);
      await closed;
    } finally {
      s.destroy();
    }
  });
});

/** An answer's head with what differs from one answer to the next (Date, the hop timings) masked. */
const masked = (head: string): string => head.replace(/\r\nDate: [^\r]*/, '\r\nDate: -').replace(/;dur=[0-9.]+/g, ';dur=-');

describe('the same bytes as node:http', () => {
  let fast: RunningGateway;
  let node: RunningGateway;
  const args = ['--demo', '--max-body-size', '4096', '--cors-origin', 'https://app.example'];
  beforeAll(async () => {
    [fast, node] = await Promise.all([gatewayFor(args), gatewayFor([...args, '--fast-path=false'])]);
  });
  afterAll(async () => {
    await Promise.all([fast.close(), node.close()]);
  });

  const cases: [string, Buffer][] = [
    ['JSON infer', infer('simple', JSON_BODY)],
    ['unknown model (404)', infer('nope', JSON_BODY)],
    ['malformed JSON (400)', infer('simple', '{"inputs": [')],
    ['body over limits.maxBodyBytes (413)', infer('simple', Buffer.alloc(5000, 0x20))],
    ['unsupported Content-Encoding (415)', infer('simple', JSON_BODY, 'Content-Encoding: br\r\n')],
    ['bad grpc-timeout (400)', infer('simple', JSON_BODY, 'grpc-timeout: soon\r\n')],
    ['V1 predict', predict('identity_fp32', JSON.stringify({ instances: [[1, 2, 3]] }))],
    ['V1 predict, invalid (400)', predict('simple', '{}')],
    ['raw binary', Buffer.concat([Buffer.from('POST /v2/models/identity_uint8/infer HTTP/1.1\r\nHost: gw\r\nInference-Header-Content-Length: 0\r\n'
      + 'Content-Length: 5\r\n\r\n', 'latin1'), Buffer.from([1, 2, 3, 4, 5])])],
  ];
  test.each(cases)('%s', async (_, request) => {
    await expectSameAnswers(fast, node, request);
  });
});

/** `request` answered by `fast` (fast path) and `node` (node:http): the same status, fields and body. */
async function expectSameAnswers(fast: RunningGateway, node: RunningGateway, request: Buffer): Promise<number> {
  const got: Answer[] = [];
  for (const gw of [fast, node]) {
    const s = await open(gw);
    try {
      const a = answers(s);
      s.write(request);
      got.push((await a.next(1))[0]!);
    } finally {
      s.destroy();
    }
  }
  expect(masked(got[0]!.head)).toBe(masked(got[1]!.head));
  expect(got[0]!.body.equals(got[1]!.body)).toBe(true);
  return got[0]!.status;
}

describe('the same bytes as node:http, with credentials checked (auth/guard.ts)', () => {
  const ALL = 'all_groups_0123456789abcdef';
  const SIMPLE = 'simple_only_0123456789abcdef';
  let fast: RunningGateway;
  let node: RunningGateway;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-fast-auth-'));
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, ['keys:', `  - { id: all, token: ${ALL}, groups: "*" }`,
      `  - { id: simple-only, token: ${SIMPLE}, groups: [inference], models: [simple] }`].join('\n'));
    const args = ['--demo', '--auth', '--auth-keys-file', keys, '--auth-open', 'none'];
    [fast, node] = await Promise.all([gatewayFor(args), gatewayFor([...args, '--fast-path=false'])]);
  });
  afterAll(async () => {
    await Promise.all([fast.close(), node.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  test.each([
    ['no credentials', 401, ''],
    ['unknown credentials', 401, 'Authorization: Bearer nope_0123456789abcdef\r\n'],
    ['a model the key does not cover', 403, `Authorization: Bearer ${SIMPLE}\r\n`, 'identity_fp32'],
    ['let in', 200, `Authorization: Bearer ${ALL}\r\n`],
  ])('%s: %d', async (_, status, auth, model = 'simple') => {
    expect(await expectSameAnswers(fast, node, infer(model, JSON_BODY, auth))).toBe(status);
  });
});
