// The HTTP/1.1 fast path (gateway/ingress/http1/fast.ts) probed as an attacker would, over raw
// sockets: framing that must match node:http's, and pipelines long enough to pause the socket.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';

jest.setTimeout(30_000);

const open = async (gw: RunningGateway): Promise<Socket> => {
  const s = connect(gw.port, '127.0.0.1');
  s.on('error', () => undefined);
  await new Promise((resolve) => s.once('connect', resolve));
  return s;
};

/**
 * Everything the gateway writes until it closes the connection, `quiet` ms pass without a byte
 * (once one came), `ms` pass, or `answers` answers have come.
 */
const readAll = (s: Socket, ms = 8000, answers = Infinity, quiet = Infinity): Promise<string> => new Promise((resolve) => {
  const chunks: Buffer[] = [];
  let hush: NodeJS.Timeout | undefined;
  const done = (): void => {
    clearTimeout(timer);
    clearTimeout(hush);
    resolve(Buffer.concat(chunks).toString('latin1'));
  };
  const timer = setTimeout(done, ms);
  s.on('data', (d: Buffer) => {
    chunks.push(d);
    clearTimeout(hush);
    if (quiet !== Infinity) hush = setTimeout(done, quiet);
    if (statuses(Buffer.concat(chunks).toString('latin1')).length >= answers && d.toString('latin1').endsWith('}')) done();
  });
  s.once('close', done);
});

/** The status codes of the answers in `text`, in order. */
const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

/** A V2 infer request of `simple` whose answer carries `k` (OUTPUT0 = INPUT0 + 1). */
const infer = (k: number, pad = 0): Buffer => {
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => k) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => 1) },
    ],
  }) + ' '.repeat(pad);
  return Buffer.from('POST /v2/models/simple/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n'
    + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1');
};

describe('the fast path under attack', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
  });
  afterAll(async () => {
    await gw.close();
  });

  test('a pipeline past the 64 KiB of waiting bytes is answered whole and in order', async () => {
    const s = await open(gw);
    try {
      const n = 120; // ~3 KiB each: several pauses of the socket while an answer is under way
      const all = readAll(s, 15_000, n);
      s.write(Buffer.concat(Array.from({ length: n }, (_, k) => infer(k, 2500))));
      const text = await all;
      const sums = [...text.matchAll(/"OUTPUT0","datatype":"INT32","shape":\[1,16\],"data":\[(\d+),/g)].map((m) => Number(m[1]));
      expect(statuses(text)).toEqual(Array.from({ length: n }, () => 200));
      expect(sums).toEqual(Array.from({ length: n }, (_, k) => k + 1));
    } finally {
      s.destroy();
    }
  });

  test('a request node:http serves in the middle of such a pipeline: it and the rest answered in order, by node:http', async () => {
    const s = await open(gw);
    try {
      const ready = Buffer.from('GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n', 'latin1');
      const all = readAll(s, 15_000, 101);
      s.write(Buffer.concat([...Array.from({ length: 50 }, (_, k) => infer(k, 2500)), ready, ...Array.from({ length: 50 }, (_, k) => infer(50 + k, 2500))]));
      const text = await all;
      const sums = [...text.matchAll(/"OUTPUT0","datatype":"INT32","shape":\[1,16\],"data":\[(\d+),/g)].map((m) => Number(m[1]));
      expect(statuses(text)).toEqual(Array.from({ length: 101 }, () => 200));
      expect(sums).toEqual(Array.from({ length: 100 }, (_, k) => k + 1));
    } finally {
      s.destroy();
    }
  });
});

/** What a connection got for `bytes`: the statuses of its answers, and whether it was closed. */
async function outcome(gw: RunningGateway, bytes: Buffer, fin: boolean): Promise<{ statuses: number[]; closed: boolean }> {
  const s = await open(gw);
  try {
    let closed = false;
    s.once('close', () => (closed = true));
    const all = readAll(s, 3000, Infinity, 250);
    if (fin) s.end(bytes);
    else s.write(bytes);
    const text = await all;
    return { statuses: statuses(text), closed };
  } finally {
    s.destroy();
  }
}

const ok = infer(7);
const okBody = ok.subarray(ok.indexOf('\r\n\r\n') + 4);
/** `simple`'s infer with `fields` for the header lines (CRLF added) and `target` for the path. */
const raw = (fields: string[], body: Buffer | string = okBody, target = '/v2/models/simple/infer', line = 'POST %s HTTP/1.1'): Buffer =>
  Buffer.concat([Buffer.from(`${line.replace('%s', target)}\r\n${fields.map((f) => `${f}\r\n`).join('')}\r\n`, 'latin1'), Buffer.from(body)]);
const n = okBody.length;
const chunked = `${n.toString(16)}\r\n${okBody.toString('latin1')}\r\n0\r\n\r\n`;
const H = 'Host: gw';
const CT = 'Content-Type: application/json';

/** Bytes whose framing or meaning an attacker would try, each followed by a plain infer. */
const PROBES: [string, Buffer][] = [
  ['Content-Length with a plus sign', raw([H, CT, `Content-Length: +${n}`])],
  ['Content-Length as a list', raw([H, CT, `Content-Length: ${n}, ${n}`])],
  ['Content-Length twice, equal', raw([H, CT, `Content-Length: ${n}`, `Content-Length: ${n}`])],
  ['Content-Length with leading zeros', raw([H, CT, `Content-Length: 000${n}`])],
  ['Content-Length and chunked', raw([H, CT, `Content-Length: ${n}`, 'Transfer-Encoding: chunked'], chunked)],
  ['chunked alone', raw([H, CT, 'Transfer-Encoding: chunked'], chunked)],
  ['chunked in upper case', raw([H, CT, 'TRANSFER-ENCODING: CHUNKED'], chunked)],
  ['chunked after identity', raw([H, CT, 'Transfer-Encoding: identity, chunked'], chunked)],
  ['space before the colon', raw([H, CT, `Content-Length : ${n}`])],
  ['obs-fold', raw([H, CT, `Content-Length: ${n}`, 'X-A: a', ' b'])],
  ['bare LF line ends', Buffer.from(raw([H, CT, `Content-Length: ${n}`]).toString('latin1').replace('\r\n', '\n'), 'latin1')],
  ['bare CR in a value', raw([H, CT, `Content-Length: ${n}`, 'X-A: a\rb'])],
  ['NUL in a value', raw([H, CT, `Content-Length: ${n}`, 'X-A: a\0b'])],
  ['DEL in a name', raw([H, CT, `Content-Length: ${n}`, 'X-\x7fA: a'])],
  ['no Host', raw([CT, `Content-Length: ${n}`])],
  ['two Hosts', raw([H, H, CT, `Content-Length: ${n}`])],
  ['Connection: keep-alive, close', raw([H, CT, `Content-Length: ${n}`, 'Connection: keep-alive, close'])],
  ['HTTP/1.0', raw([H, CT, `Content-Length: ${n}`], okBody, undefined, 'POST %s HTTP/1.0')],
  ['two spaces after the method', raw([H, CT, `Content-Length: ${n}`], okBody, undefined, 'POST  %s HTTP/1.1')],
  ['a lower-case method', raw([H, CT, `Content-Length: ${n}`], okBody, undefined, 'post %s HTTP/1.1')],
  ['a trailing slash', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple/infer/')],
  ['a query string', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple/infer?x=/v2/health/ready')],
  ['a double slash', raw([H, CT, `Content-Length: ${n}`], okBody, '//v2/models/simple/infer')],
  ['a dot segment', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple/./infer')],
  ['a dot-dot segment', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/x/../simple/infer')],
  ['a percent-encoded model', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/%73imple/infer')],
  ['a percent-encoded slash', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple%2Finfer')],
  ['upper-case V2', raw([H, CT, `Content-Length: ${n}`], okBody, '/V2/models/simple/infer')],
  ['a version segment', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple/versions/1/infer')],
  ['a fragment', raw([H, CT, `Content-Length: ${n}`], okBody, '/v2/models/simple/infer#x')],
  ['a body over limits.maxBodyBytes, sent', raw([H, CT, `Content-Length: ${n + 5000}`], Buffer.concat([okBody, Buffer.alloc(5000, 0x20)]))],
  ['a bad body, sent', raw([H, CT, `Content-Length: ${n}`], Buffer.alloc(n, 0x7b))],
  ['a URL past server.maxUrlBytes', raw([H, CT, `Content-Length: ${n}`], okBody, `/v2/models/simple/infer?${'a'.repeat(9000)}`)],
  ['a head past server.maxHeaderBytes', raw([H, CT, `Content-Length: ${n}`, `X-A: ${'a'.repeat(20_000)}`])],
  ['fields past server.maxHeaderCount', raw([H, CT, `Content-Length: ${n}`, ...Array.from({ length: 120 }, (_, i) => `X-${i}: a`)])],
  ['a field named __proto__', raw([H, CT, `Content-Length: ${n}`, '__proto__: a'])],
  ['Expect: 100-continue with the body at once', raw([H, CT, `Content-Length: ${n}`, 'Expect: 100-continue'])],
  ['Expect: 100-continue over limits.maxBodyBytes, the body not sent', raw([H, CT, `Content-Length: ${n + 5000}`, 'Expect: 100-continue'], '')],
  ['an unknown Expect', raw([H, CT, `Content-Length: ${n}`, 'Expect: 200-ok'])],
  ['Upgrade', raw([H, CT, `Content-Length: ${n}`, 'Upgrade: websocket', 'Connection: upgrade'])],
];

const target = '/v2/models/simple/infer?';
/** A head of exactly `bytes` bytes, request line to blank line. */
const headOf = (bytes: number): Buffer => {
  const shell = raw([H, CT, `Content-Length: ${n}`, 'X-A: '], '').length;
  return raw([H, CT, `Content-Length: ${n}`, `X-A: ${'a'.repeat(bytes - shell)}`]);
};
/** On each side of server.maxUrlBytes (8192), server.maxHeaderCount (100) and server.maxHeaderBytes (16 KiB). */
const BOUNDS: [string, Buffer][] = [
  ['a URL of server.maxUrlBytes', raw([H, CT, `Content-Length: ${n}`], okBody, target + 'a'.repeat(8192 - target.length))],
  ['a URL of server.maxUrlBytes + 1', raw([H, CT, `Content-Length: ${n}`], okBody, target + 'a'.repeat(8193 - target.length))],
  ['server.maxHeaderCount fields', raw([H, CT, `Content-Length: ${n}`, ...Array.from({ length: 97 }, (_, i) => `X-${i}: a`)])],
  ['server.maxHeaderCount + 1 fields', raw([H, CT, `Content-Length: ${n}`, ...Array.from({ length: 98 }, (_, i) => `X-${i}: a`)])],
  ['a head of server.maxHeaderBytes', headOf(16 * 1024)],
  ['a head of server.maxHeaderBytes + 1', headOf(16 * 1024 + 1)],
];

describe('the same outcome as node:http for bytes an attacker would try', () => {
  let fast: RunningGateway;
  let node: RunningGateway;
  beforeAll(async () => {
    const args = ['--demo', '--max-body-size', '4000'];
    [fast, node] = await Promise.all([gatewayFor(args), gatewayFor([...args, '--fast-path=false'])]);
  });
  afterAll(async () => {
    await Promise.all([fast.close(), node.close()]);
  });

  test.each([...PROBES, ...BOUNDS])('%s, then an infer', async (_, bytes) => {
    const sent = Buffer.concat([bytes, ok]);
    const [f, o] = await Promise.all([outcome(fast, sent, false), outcome(node, sent, false)]);
    expect(f).toEqual(o);
  });

  // Where node:http differs, the fast path frames the bytes the same way and answers more of them.
  test('a body longer than declared: the extra byte starts the next head (400 for the cut JSON, then 400 for it)', async () => {
    const sent = Buffer.concat([raw([H, CT, `Content-Length: ${n - 1}`]), ok]);
    // node:http reads the bad head before the first answer is out, and answers only that one.
    expect(await outcome(fast, sent, false)).toEqual({ statuses: [400, 400], closed: true });
    expect(await outcome(node, sent, false)).toEqual({ statuses: [400], closed: true });
  });

  test('Connection: Close, then an infer: the first answered, the rest unread and the connection closed', async () => {
    const sent = Buffer.concat([raw([H, CT, `Content-Length: ${n}`, 'Connection: Close']), ok]);
    // llhttp takes bytes after a Connection: close message as an error and answers only that (400).
    expect(await outcome(fast, sent, false)).toEqual({ statuses: [200], closed: true });
    expect(await outcome(node, sent, false)).toEqual({ statuses: [400], closed: true });
  });
});

describe('odd bytes in every position', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
  });
  afterAll(async () => {
    await gw.close();
  });

  /** One connection: `bytes` in two writes split at `cut`, then FIN; resolves once it is closed or quiet. */
  async function send(bytes: Buffer, cut: number): Promise<void> {
    const s = await open(gw);
    try {
      const all = readAll(s, 2000, Infinity, 150);
      s.write(bytes.subarray(0, cut));
      await new Promise((resolve) => setImmediate(resolve));
      s.end(bytes.subarray(cut));
      await all;
    } finally {
      s.destroy();
    }
  }

  test('a request and a pipelined one with each byte replaced by a control, delimiter or high byte: the gateway lives on', async () => {
    const base = Buffer.concat([raw([H, CT, `Content-Length: ${n}`, 'Expect: 100-continue', 'Connection: keep-alive']), ok]);
    const odd = [0x00, 0x09, 0x0a, 0x0d, 0x20, 0x3a, 0x25, 0x2f, 0x7f, 0x80, 0xff];
    let k = 0;
    const jobs: (() => Promise<void>)[] = [];
    for (let at = 0; at < base.length; at++) {
      const v = odd[k++ % odd.length]!;
      const bytes = Buffer.from(base);
      bytes[at] = v;
      jobs.push(() => send(bytes, (at * 7) % bytes.length));
    }
    const queue = [...jobs];
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let job = queue.shift(); job !== undefined; job = queue.shift()) await job();
    }));
    const s = await open(gw);
    try {
      const all = readAll(s, 5000, 1);
      s.write(ok);
      expect(statuses(await all)).toEqual([200]);
    } finally {
      s.destroy();
    }
  });
});

describe('a body unread when the early answer (401) is out', () => {
  let fast: RunningGateway;
  let node: RunningGateway;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-fast-attack-'));
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, ['keys:', '  - { id: all, token: all_groups_0123456789abcdef, groups: "*" }'].join('\n'));
    const args = ['--demo', '--auth', '--auth-keys-file', keys, '--auth-open', 'none', '--discard-body-bytes', '2000'];
    [fast, node] = await Promise.all([gatewayFor(args), gatewayFor([...args, '--fast-path=false'])]);
  });
  afterAll(async () => {
    await Promise.all([fast.close(), node.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** A head without credentials; once its 401 is out, a body holding a request of its own, then `after`. */
  async function smuggle(gw: RunningGateway, inner: Buffer, after: Buffer): Promise<{ statuses: number[]; closed: boolean }> {
    const s = await open(gw);
    try {
      let closed = false;
      s.once('close', () => (closed = true));
      const all = readAll(s, 3000, Infinity, 300);
      let first = '';
      const answered = new Promise<void>((resolve) => s.on('data', (d: Buffer) => {
        first += d.toString('latin1');
        if (first.includes('}')) resolve();
      }));
      s.write(raw([H, CT, `Content-Length: ${inner.length}`], ''));
      await answered;
      s.write(inner);
      s.write(after);
      const text = await all;
      return { statuses: statuses(text), closed };
    } finally {
      s.destroy();
    }
  }

  const token = 'Authorization: Bearer all_groups_0123456789abcdef';
  test.each([
    ['within server.discardBodyBytes: read and dropped, the next request read', raw([H, CT, token, `Content-Length: ${n}`]), [401, 401], false],
    ['past server.discardBodyBytes: the connection closed', Buffer.concat([raw([H, CT, token, `Content-Length: ${n}`]), Buffer.alloc(3000, 0x20)]), [401], true],
  ])('%s', async (_, inner, answered, closed) => {
    const [f, o] = await Promise.all([smuggle(fast, inner, ok), smuggle(node, inner, ok)]);
    expect(o).toEqual({ statuses: answered, closed }); // the body's own request (200) is never served
    expect(f).toEqual(o);
  });
});

test('a drain: an idle fast-path connection is ended at once; one mid-body is answered with Connection: close; a pipelined request after it is not read', async () => {
  const gw = await gatewayFor(['--demo']);
  let closing: Promise<unknown> | undefined;
  try {
    const [idle, mid, piped] = await Promise.all([open(gw), open(gw), open(gw)]);
    const idleAnswer = readAll(idle, 5000, 1);
    idle.write(ok);
    expect(statuses(await idleAnswer)).toEqual([200]);
    const idleClosed = new Promise((resolve) => idle.once('close', resolve));
    const midAll = readAll(mid, 5000);
    const pipedAll = readAll(piped, 5000);
    const cut = ok.length - 20;
    mid.write(ok.subarray(0, cut));
    piped.write(ok.subarray(0, cut));
    await new Promise((resolve) => setTimeout(resolve, 50));
    closing = gw.close(5000);
    await idleClosed;
    mid.write(ok.subarray(cut));
    piped.write(Buffer.concat([ok.subarray(cut), ok]));
    const [m, p] = await Promise.all([midAll, pipedAll]);
    expect([statuses(m), statuses(p)]).toEqual([[200], [200]]);
    expect(m).toMatch(/\r\nConnection: close\r\n/);
    expect(p).toMatch(/\r\nConnection: close\r\n/);
    expect(await closing).toEqual({ requestsCut: 0 });
  } finally {
    await (closing ?? gw.close());
  }
});

describe('FIN at each stage', () => {
  let fast: RunningGateway;
  let node: RunningGateway;
  beforeAll(async () => {
    [fast, node] = await Promise.all([gatewayFor(['--demo']), gatewayFor(['--demo', '--fast-path=false'])]);
  });
  afterAll(async () => {
    await Promise.all([fast.close(), node.close()]);
  });

  /** A served infer when `served`, then `bytes` and FIN: the answers, and whether the connection closed. */
  async function finAfter(gw: RunningGateway, served: boolean, bytes: Buffer): Promise<{ statuses: number[]; closed: boolean }> {
    const s = await open(gw);
    try {
      let closed = false;
      s.once('close', () => (closed = true));
      const all = readAll(s, 3000, Infinity, 300);
      if (served) {
        const first = readAll(s, 3000, 1);
        s.write(ok);
        await first;
      }
      s.end(bytes);
      return { statuses: statuses(await all), closed };
    } finally {
      s.destroy();
    }
  }

  const headEnd = ok.indexOf('\r\n\r\n') + 4;
  test.each([
    ['in the request line', 10],
    ['in a field', 40],
    ['before the blank line', headEnd - 2],
    ['after the head', headEnd],
    ['in the body', headEnd + 10],
  ])('%s, first and after an answer', async (_, at) => {
    for (const served of [false, true]) {
      const [f, o] = await Promise.all([finAfter(fast, served, ok.subarray(0, at)), finAfter(node, served, ok.subarray(0, at))]);
      expect(f).toEqual(o);
      expect(f).toEqual({ statuses: served ? [200] : [], closed: true });
    }
  });
});

test('slowloris: a first head trickled a byte every 50 ms is cut at server.headersTimeoutMs (408), a body likewise at server.requestTimeoutMs', async () => {
  const gw = await gatewayFor(['--demo', '--headers-timeout-ms', '400', '--request-timeout-ms', '800']);
  /** `whole` in one write, then `bytes` one at a time. */
  const trickle = async (whole: Buffer, bytes: Buffer): Promise<{ statuses: number[]; ms: number }> => {
    const s = await open(gw);
    try {
      const t0 = performance.now();
      const all = readAll(s, 5000);
      let closed = false;
      s.once('close', () => (closed = true));
      s.write(whole);
      for (let at = 0; at < bytes.length && !closed; at++) {
        s.write(bytes.subarray(at, at + 1));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const text = await all;
      return { statuses: statuses(text), ms: performance.now() - t0 };
    } finally {
      s.destroy();
    }
  };
  try {
    const headEnd = ok.indexOf('\r\n\r\n') + 4;
    const [head, body] = await Promise.all([trickle(Buffer.alloc(0), ok), trickle(ok.subarray(0, headEnd), okBody)]);
    expect(head.statuses).toEqual([408]);
    expect(head.ms).toBeGreaterThan(350);
    expect(head.ms).toBeLessThan(2000);
    expect(body.statuses).toEqual([408]);
    expect(body.ms).toBeGreaterThan(700);
    expect(body.ms).toBeLessThan(3000);
  } finally {
    await gw.close();
  }
});
