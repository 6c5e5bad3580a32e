// Overload and hostile clients (docs/production.md#in-flight-bounds): the in-flight bounds (limits.maxInFlightRequests,
// limits.maxInFlightBodyBytes) answer 503 GW_ERR_REQUEST_OVERLOADED with Retry-After before the
// body is read, and never refuse probes; slow headers and slow bodies are cut at
// server.headersTimeoutMs / server.requestTimeoutMs with 408 GW_ERR_REQUEST_TIMEOUT; an answer
// given before the body was read drains at most server.discardBodyBytes / server.discardBodyMs of
// the rest and then closes the connection. Regression: a 413 for a declared 1 GiB body read the
// whole gigabyte on the same connection (`req.resume()`), and slow headers were cut only after 87 s.
import { connect, type Socket } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, HTTP1_WAYS } from '../support/gateway';
import { send } from '../support/http';
import { RecordTap } from '../support/records';
import { requestStarted } from '../support/wait';

const INFER = '/v2/models/simple/infer';
const GIB = 1024 ** 3;

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Parses the first answer of a raw HTTP/1.1 byte stream (Content-Length bodies only). */
function parseAnswer(text: string): RawAnswer {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) throw new Error(`no complete answer in ${JSON.stringify(text)}`);
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  return { status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(end + 4, end + 4 + length) };
}

interface Conversation {
  readonly socket: Socket;
  /** Settles when the gateway closed the connection: everything it sent, and when. */
  readonly closed: Promise<{ text: string; at: number; sent: number; error?: string }>;
  /** The bytes written so far by `pump`. */
  sent(): number;
  /** Writes the body endlessly (as fast as the socket takes it) until the connection ends. */
  pump(chunked: boolean): void;
}

/** A raw connection that sends `head` at once; nothing is parsed or buffered by an HTTP client. */
function converse(port: number, head: string, halfOpen = false): Conversation {
  // halfOpen: a client that keeps its side open after the gateway's FIN (a hostile one).
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: halfOpen });
  socket.write(head);
  let sent = 0;
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => { text += d; });
  const closed = new Promise<{ text: string; at: number; sent: number; error?: string }>((resolve) => {
    let error: string | undefined;
    socket.on('error', (e: NodeJS.ErrnoException) => { error = e.code; });
    socket.on('close', () => resolve({ text, at: performance.now(), sent, error }));
  });
  return {
    socket,
    closed,
    sent: () => sent,
    pump(chunked) {
      const block = Buffer.alloc(64 * 1024, 0x31);
      const piece = chunked ? Buffer.concat([Buffer.from(`${block.length.toString(16)}\r\n`), block, Buffer.from('\r\n')]) : block;
      const next = (): void => {
        while (!socket.destroyed && socket.writable) {
          sent += block.length;
          if (!socket.write(piece)) {
            socket.once('drain', next);
            return;
          }
        }
      };
      next();
    },
  };
}

/** Bounds a promise the test waits on, so a regression fails instead of hanging. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

const postHead = (path: string, headers: Record<string, string | number>): string =>
  `POST ${path} HTTP/1.1\r\nHost: gw\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;

const overloaded = (message: string): object => ({
  status: 503, code: 'GW_ERR_REQUEST_OVERLOADED', retryAfter: '1', body: JSON.stringify({ error: message }),
});

// Every case on both ways of reading HTTP/1.1: the fast path and node:http.
describe.each(HTTP1_WAYS)('%s', (_, way) => {
  describe('in-flight bounds', () => {
    let gw: RunningGateway;
    const tap = new RecordTap();
    const open: Socket[] = [];
    beforeAll(async () => {
      tap.start();
      gw = await gatewayFor(['--demo', '--max-in-flight-requests', '2', '--max-in-flight-body-bytes', '1000', ...way]);
    });
    afterEach(() => {
      for (const s of open.splice(0)) s.destroy();
    });
    afterAll(async () => {
      tap.stop();
      await gw.close(2000);
    });

    /** A request whose body never completes: in flight until its socket is destroyed. */
    async function holdOne(declared: number): Promise<Socket> {
      const started = requestStarted(INFER);
      const c = converse(gw.port, postHead(INFER, { 'Content-Type': 'application/json', 'Content-Length': declared }) + '{');
      open.push(c.socket);
      await started;
      return c.socket;
    }

    /** Ends a held request and waits for its record: its place is free once the record is out. */
    async function release(socket: Socket): Promise<void> {
      const mark = tap.mark();
      socket.destroy();
      await tap.after(mark);
    }

    const shape = (r: { status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }): object => ({
      status: r.status, code: r.headers['x-tensorgate-error'], retryAfter: r.headers['retry-after'], body: r.body.toString(),
    });

    test('past limits.maxInFlightRequests: 503 with Retry-After before the body is read; probes still answered; service resumes', async () => {
      const a = await holdOne(10);
      const b = await holdOne(10);
      const r = await send(`http://127.0.0.1:${gw.port}/v2/models/simple/config`);
      expect(shape(r)).toEqual(overloaded('the gateway is overloaded: 2 requests in flight (limits.maxInFlightRequests); retry after 1 s'));
      // Probes are neither refused nor counted.
      for (const path of ['/healthz', '/readyz', '/v2/health/live', '/v2/health/ready']) {
        expect([path, (await send(`http://127.0.0.1:${gw.port}${path}`)).status]).toEqual([path, 200]);
      }
      await release(a);
      expect((await send(`http://127.0.0.1:${gw.port}/v2/models/simple/config`)).status).toBe(200);
      await release(b);
    });

    test('a refused request with a body is refused before it is read (the body never arrives)', async () => {
      const a = await holdOne(10);
      const b = await holdOne(10);
      // Declares 100 bytes and sends none: the answer cannot have waited for them.
      const c = converse(gw.port, postHead(INFER, { 'Content-Type': 'application/json', 'Content-Length': 100 }));
      open.push(c.socket);
      await within(new Promise<void>((resolve) => c.socket.once('data', () => resolve())), 5000, 'the 503');
      c.socket.destroy();
      const got = parseAnswer((await c.closed).text);
      expect({ status: got.status, code: got.headers['x-tensorgate-error'], retryAfter: got.headers['retry-after'] })
        .toEqual({ status: 503, code: 'GW_ERR_REQUEST_OVERLOADED', retryAfter: '1' });
      await release(a);
      await release(b);
    });

    test('past limits.maxInFlightBodyBytes: 503 naming the bytes; a body that fits goes through; a lone large body is still served', async () => {
      const a = await holdOne(600);
      const r = await send(`http://127.0.0.1:${gw.port}${INFER}`, { body: 'x'.repeat(600), headers: { 'Content-Type': 'application/json' } });
      expect(shape(r)).toEqual(overloaded(
        'the gateway is overloaded: 600 body bytes in flight and 600 more declared exceed 1000 (limits.maxInFlightBodyBytes); retry after 1 s'));
      // 600 + 300 fits: admitted (and refused by the decoder for what it is, not shed).
      const fits = await send(`http://127.0.0.1:${gw.port}${INFER}`, { body: ' '.repeat(300), headers: { 'Content-Type': 'application/json' } });
      expect(fits.headers['x-tensorgate-error']).toBe('GW_ERR_DECODE_MALFORMED');
      await release(a);
      // Larger than the whole bound, alone: served (or it never could be).
      const lone = await send(`http://127.0.0.1:${gw.port}${INFER}`, { body: ' '.repeat(5000), headers: { 'Content-Type': 'application/json' } });
      expect(lone.headers['x-tensorgate-error']).toBe('GW_ERR_DECODE_MALFORMED');
    });
  });

  describe('timeouts', () => {
    const HEADERS_MS = 300;
    const REQUEST_MS = 800;
    /** How late a cut may come: Node checks every min(1 s, headersTimeoutMs / 4), plus a busy machine. */
    const LATE_MS = HEADERS_MS / 4 + 700;
    let gw: RunningGateway;
    beforeAll(async () => {
      gw = await gatewayFor(['--demo', '--headers-timeout-ms', String(HEADERS_MS), '--request-timeout-ms', String(REQUEST_MS), ...way]);
    });
    afterAll(async () => {
      await gw.close(2000);
    });

    test('slow headers: 408 GW_ERR_REQUEST_TIMEOUT with {"error"} at server.headersTimeoutMs, then close; other clients are served meanwhile', async () => {
      const t0 = performance.now();
      const c = converse(gw.port, 'GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\nX-Slow: ');
      expect((await send(`http://127.0.0.1:${gw.port}/v2/health/live`)).status).toBe(200);
      const { text, at } = await within(c.closed, 10_000, 'the close of a slow-header connection');
      const got = parseAnswer(text);
      expect(got).toEqual({
        status: 408,
        headers: expect.objectContaining({ 'x-tensorgate-error': 'GW_ERR_REQUEST_TIMEOUT', connection: 'close', 'content-type': 'application/json' }) as unknown,
        body: JSON.stringify({ error: `the request headers were not complete within ${HEADERS_MS} ms (server.headersTimeoutMs)` }),
      });
      expect(at - t0).toBeGreaterThanOrEqual(HEADERS_MS - 20);
      expect(at - t0).toBeLessThan(HEADERS_MS + LATE_MS);
    });

    test('a connection that sends nothing is cut at the headers timeout too', async () => {
      const t0 = performance.now();
      const c = converse(gw.port, '');
      const { text, at } = await within(c.closed, 10_000, 'the close of a silent connection');
      expect(parseAnswer(text).headers['x-tensorgate-error']).toBe('GW_ERR_REQUEST_TIMEOUT');
      expect(at - t0).toBeLessThan(HEADERS_MS + LATE_MS);
    });

    test('slow body: 408 GW_ERR_REQUEST_TIMEOUT at server.requestTimeoutMs through the request\'s answer, Connection: close', async () => {
      const tap = new RecordTap();
      tap.start();
      try {
        const mark = tap.mark();
        const t0 = performance.now();
        const c = converse(gw.port, postHead(INFER, { 'Content-Type': 'application/json', 'Content-Length': 100 }) + '{"inputs":');
        const { text, at } = await within(c.closed, 10_000, 'the close of a slow-body connection');
        const got = parseAnswer(text);
        expect({ status: got.status, code: got.headers['x-tensorgate-error'], connection: got.headers.connection, body: got.body }).toEqual({
          status: 408, code: 'GW_ERR_REQUEST_TIMEOUT', connection: 'close',
          body: JSON.stringify({ error: `the request was not complete within ${REQUEST_MS} ms (server.requestTimeoutMs)` }),
        });
        expect(at - t0).toBeGreaterThanOrEqual(REQUEST_MS - 20);
        expect(at - t0).toBeLessThan(REQUEST_MS + LATE_MS);
        const record = await tap.after(mark);
        expect({ status: record.status, code: record.errorCode }).toEqual({ status: 408, code: 'GW_ERR_REQUEST_TIMEOUT' });
      } finally {
        tap.stop();
      }
    });

    test('headersTimeoutMs above requestTimeoutMs is a configuration error', async () => {
      await expect(gatewayFor(['--demo', '--headers-timeout-ms', '5000', '--request-timeout-ms', '1000']))
        .rejects.toThrow('server.headersTimeoutMs: 5000 must not exceed server.requestTimeoutMs (1000)');
    });
  });

  describe('an answer before the body was read drains a bounded rest, then closes', () => {
    const DISCARD_BYTES = 256 * 1024;
    const DISCARD_MS = 1500;
    let gw: RunningGateway;
    beforeAll(async () => {
      gw = await gatewayFor(['--demo', ...way, '--max-body-size', String(1024 * 1024),
        '--discard-body-bytes', String(DISCARD_BYTES), '--discard-body-ms', String(DISCARD_MS), ...way]);
    });
    afterAll(async () => {
      await gw.close(2000);
    });

    // What the client can push before the close reaches it: the bound plus the socket buffers
    // (a few MiB on loopback); far from the gigabyte.
    const FAR_BELOW_GIB = 64 * 1024 * 1024;

    test.each([
      ['a declared 1 GiB binary body', { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': 0, 'Content-Length': GIB }, false,
        `request body of ${GIB} bytes exceeds the limit of ${1024 * 1024} bytes (limits.maxBodyBytes)`],
      ['a declared 1 GiB JSON body', { 'Content-Type': 'application/json', 'Content-Length': GIB }, false,
        `request body of ${GIB} bytes exceeds the limit of ${1024 * 1024} bytes (limits.maxBodyBytes)`],
      // Counted as it arrives: refused with the first count past the limit.
      ['an endless chunked JSON body', { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' }, true,
        /^request body of 1\d{6} bytes exceeds the limit of 1048576 bytes \(limits.maxBodyBytes\)$/],
    ])('%s: 413 with Connection: close, and the connection is closed after at most the bound', async (_what, headers, chunked, message) => {
      const t0 = performance.now();
      const c = converse(gw.port, postHead(INFER, headers));
      c.pump(chunked);
      const { text, at, sent } = await within(c.closed, 10_000, 'the close');
      const got = parseAnswer(text);
      expect({ status: got.status, code: got.headers['x-tensorgate-error'], connection: got.headers.connection, error: (JSON.parse(got.body) as { error: string }).error })
        .toEqual({ status: 413, code: 'GW_ERR_REQUEST_TOO_LARGE', connection: 'close', error: typeof message === 'string' ? message : expect.stringMatching(message) });
      expect(sent).toBeLessThan(FAR_BELOW_GIB);
      expect(at - t0).toBeLessThan(DISCARD_MS + 1000);
    });

    test('a client that declares 1 GiB, then trickles and keeps its side open, is closed at server.discardBodyMs', async () => {
      const t0 = performance.now();
      const c = converse(gw.port, postHead(INFER, { 'Content-Type': 'application/json', 'Content-Length': GIB }), true);
      // A byte every 50 ms: never near the byte bound, and the first write after the gateway's
      // close fails, which is how a half-open client learns of it.
      const trickle = setInterval(() => c.socket.write('1'), 50);
      const { text, at } = await within(c.closed, 10_000, 'the close').finally(() => clearInterval(trickle));
      expect(parseAnswer(text).status).toBe(413);
      expect(at - t0).toBeGreaterThanOrEqual(DISCARD_MS - 20);
      expect(at - t0).toBeLessThan(DISCARD_MS + 1000);
    });

    test('a small rest is drained and the connection kept alive (a 404 with its body)', async () => {
      const c = converse(gw.port, postHead('/nowhere', { 'Content-Length': 5 }) + 'hello' + 'GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
      const { text } = await within(c.closed, 5000, 'both answers');
      const first = parseAnswer(text);
      expect([first.status, first.headers.connection]).toEqual([404, 'keep-alive']);
      expect(text).toContain('HTTP/1.1 200 OK');
    });

    test('a probe sent a large body answers and does not read it all either', async () => {
      const t0 = performance.now();
      const c = converse(gw.port, `GET /healthz HTTP/1.1\r\nHost: gw\r\nContent-Length: ${GIB}\r\n\r\n`);
      c.pump(false);
      const { text, at, sent } = await within(c.closed, 10_000, 'the close');
      expect(parseAnswer(text).status).toBe(200);
      expect(sent).toBeLessThan(FAR_BELOW_GIB);
      expect(at - t0).toBeLessThan(DISCARD_MS + 1000);
    });
  });
});
