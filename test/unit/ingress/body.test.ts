// The body readers with their three limits — declared length, running count, inflated count —
// each fixture fed whole and in 1-, 2-, 3- and 7-byte chunks, through a Readable shaped like
// node:http's IncomingMessage (headers, complete, 'close' after 'end'), plus one real node:http
// request cut short. Every refusal is asserted with its exact code, status and message.
import * as http from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import * as net from 'node:net';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { declaredLength, INFLATE_CHUNK_BYTES, readBody, requestEncoding, streamBody, type BodyLimits } from '../../../gateway/ingress/body';
import { CHUNK_SIZES, splitEvery, splits } from '../../support/chunks';

/** What body.ts reads of an IncomingMessage: headers, `complete` (set before 'end', as node:http does), the stream. */
class FakeRequest extends Readable {
  complete = false;
  constructor(readonly headers: IncomingHttpHeaders) {
    super();
  }

  override _read(): void {}

  /** Sends the chunks, then ends the body (complete) unless `end` is false. */
  send(chunks: readonly Buffer[], end = true): void {
    for (const c of chunks) this.push(c);
    if (!end) return;
    this.complete = true;
    this.push(null);
  }

  get asIncoming(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

interface Refusal {
  readonly code: string;
  readonly status: number;
  readonly message: string;
}

/** How `run` fails (a throw or a rejection), as code, status and message. */
async function refusal(run: () => unknown): Promise<Refusal> {
  try {
    await run();
  } catch (err) {
    const e = err as Refusal;
    return { code: e.code, status: e.status, message: e.message };
  }
  throw new Error('accepted');
}

const limits = (maxBodyBytes: number, maxInputSizeBytes = Number.MAX_SAFE_INTEGER): BodyLimits => ({ maxBodyBytes, maxInputSizeBytes });
const payload = Buffer.from(Array.from({ length: 600 }, (_, i) => `line ${i % 97}: ${'x'.repeat(i % 13)}\n`).join(''));
const tooLarge = (n: number, max: number): Refusal => ({
  code: 'GW_ERR_REQUEST_TOO_LARGE', status: 413, message: `request body of ${n} bytes exceeds the limit of ${max} bytes (limits.maxBodyBytes)`,
});
const decompressedTooLarge = (max: number): Refusal => ({
  code: 'GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE', status: 400,
  message: `Decompressed data size exceeds the maximum allowed value of ${max} bytes. Use --http-max-input-size to increase the limit.`,
});
const CLOSED = { code: 'GW_ERR_REQUEST_ABORTED', status: 400, message: 'the client closed the connection before the body was complete' };
const UNREADABLE = { code: 'GW_ERR_REQUEST_ABORTED', status: 400, message: 'the request body could not be read' };

/** The running count when it first passes `max`, feeding `total` bytes in `n`-byte chunks. */
const countPassing = (max: number, total: number, n: number): number => Math.min(total, (Math.floor(max / n) + 1) * n);

describe('requestEncoding', () => {
  test.each([[undefined], [''], ['identity']])('%p: none', (v) => {
    expect(requestEncoding(new FakeRequest(v === undefined ? {} : { 'content-encoding': v }).asIncoming)).toBeUndefined();
  });

  test.each(['gzip', 'deflate'])('%s', (v) => {
    expect(requestEncoding(new FakeRequest({ 'content-encoding': v }).asIncoming)).toBe(v);
  });

  test.each(['GZIP', 'Deflate', 'br', 'gzip, deflate', 'x-gzip'])('%p is 415 (exact, case-sensitive match as Triton; Triton answers 501)', async (v) => {
    expect(await refusal(() => requestEncoding(new FakeRequest({ 'content-encoding': v }).asIncoming))).toEqual({
      code: 'GW_ERR_REQUEST_ENCODING_UNSUPPORTED', status: 415, message: 'Unsupported compression type',
    });
  });
});

describe('declaredLength', () => {
  const of = (v: string | undefined, max = 2 ** 31 - 1) => declaredLength(new FakeRequest(v === undefined ? {} : { 'content-length': v }).asIncoming, limits(max));

  test('absent, zero, at the limit', () => {
    expect(of(undefined)).toBeUndefined();
    expect(of('0')).toBe(0);
    expect(of('100', 100)).toBe(100);
    expect(of('2147483647')).toBe(2147483647);
  });

  test('past limits.maxBodyBytes: 413 before reading', async () => {
    expect(await refusal(() => of('101', 100))).toEqual(tooLarge(101, 100));
  });

  test('past int32: 400 with Triton\'s message', async () => {
    expect(await refusal(() => of('2147483648'))).toEqual({
      code: 'GW_ERR_REQUEST_HEADER_INVALID', status: 400,
      message: 'Unable to parse Content-Length, value is out of range [ -2147483648, 2147483647 ], got: 2147483648',
    });
  });
});

describe('readBody, uncompressed', () => {
  test.each(splits(payload))('declared length, %s: the chunks as handed over, not copied', async (_, chunks) => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const body = readBody(req.asIncoming, limits(payload.length), undefined);
    req.send(chunks);
    const { chunks: got, length } = await body;
    expect(length).toBe(payload.length);
    expect(got).toHaveLength(chunks.length);
    expect(got.filter((c, i) => c !== chunks[i])).toEqual([]); // the same Buffers, by identity
  });

  test.each(splits(payload))('no declared length (chunked), %s', async (_, chunks) => {
    const req = new FakeRequest({});
    const body = readBody(req.asIncoming, limits(payload.length), undefined);
    req.send(chunks);
    const got = await body;
    expect(got.length).toBe(payload.length);
    expect(Buffer.concat(got.chunks as Buffer[])).toEqual(payload);
  });

  test('an empty body', async () => {
    const req = new FakeRequest({ 'content-length': '0' });
    const body = readBody(req.asIncoming, limits(0), undefined);
    req.send([]);
    expect(await body).toEqual({ chunks: [], length: 0 });
  });

  test('declared past the limit: 413 before a byte is read', async () => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    expect(await refusal(() => readBody(req.asIncoming, limits(payload.length - 1), undefined))).toEqual(tooLarge(payload.length, payload.length - 1));
    expect(req.listenerCount('data')).toBe(0);
  });

  test.each(splits(payload))('the running count passes the limit (%s): 413 naming the count, the rest drained', async (_, chunks) => {
    const req = new FakeRequest({});
    const max = 100;
    const body = readBody(req.asIncoming, limits(max), undefined);
    req.send(chunks);
    const n = chunks.length === 1 ? payload.length : chunks[0]!.length;
    expect(await refusal(() => body)).toEqual(tooLarge(countPassing(max, payload.length, n), max));
    if (!req.readableEnded) await once(req, 'end');
  });

  test.each(CHUNK_SIZES)('the client goes away (%i-byte chunks so far): aborted', async (n) => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const body = readBody(req.asIncoming, limits(payload.length), undefined);
    req.send(splitEvery(payload.subarray(0, 50), n), false);
    req.destroy();
    expect(await refusal(() => body)).toEqual(CLOSED);
  });

  test('the body fails to read: aborted', async () => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const body = readBody(req.asIncoming, limits(payload.length), undefined);
    req.send([payload.subarray(0, 10)], false);
    req.destroy(new Error('socket hang up'));
    expect(await refusal(() => body)).toEqual(UNREADABLE);
  });

  test.each([['readBody'], ['streamBody']])('%s of a request destroyed before it began to read: aborted at once', async (reader) => {
    // Regression: a handler that awaited the model's config first found its request already
    // destroyed (a parse error answered mid-body), listened for a 'close' that had passed, and
    // held its in-flight place forever.
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    req.send([payload.subarray(0, 10)], false);
    req.destroy();
    await once(req, 'close');
    const body = reader === 'readBody' ? readBody(req.asIncoming, limits(payload.length), undefined) : streamBody(req.asIncoming, payload.length, () => undefined);
    expect(await refusal(() => body)).toEqual({ code: 'GW_ERR_REQUEST_ABORTED', status: 400, message: 'the connection closed before the body was read' });
  });
});

describe('readBody, compressed', () => {
  const gzip = zlib.gzipSync(payload);
  const deflate = zlib.deflateSync(payload);

  test('the fixtures compress well (so the inflated limit is what bites)', () => {
    expect(gzip.length).toBeLessThan(payload.length / 4);
  });

  describe.each([['gzip', gzip], ['deflate', deflate]] as const)('%s', (encoding, compressed) => {
    test.each(splits(compressed))('inflates, %s', async (_, chunks) => {
      const req = new FakeRequest({ 'content-encoding': encoding, 'content-length': String(compressed.length) });
      const body = readBody(req.asIncoming, limits(compressed.length, payload.length), encoding);
      req.send(chunks);
      const got = await body;
      expect(got.length).toBe(payload.length);
      expect(Buffer.concat(got.chunks as Buffer[])).toEqual(payload);
    });

    test.each(splits(compressed))('inflating past limits.maxInputSizeBytes: refused, %s', async (_, chunks) => {
      const req = new FakeRequest({ 'content-encoding': encoding });
      const max = payload.length - 1;
      const body = readBody(req.asIncoming, limits(compressed.length, max), encoding);
      req.send(chunks);
      expect(await refusal(() => body)).toEqual(decompressedTooLarge(max));
      if (!req.readableEnded) await once(req, 'end');
    });

    test.each(splits(compressed))('the compressed count passes limits.maxBodyBytes: 413, %s', async (_, chunks) => {
      const req = new FakeRequest({ 'content-encoding': encoding });
      const max = compressed.length - 5;
      const body = readBody(req.asIncoming, limits(max, Number.MAX_SAFE_INTEGER), encoding);
      req.send(chunks);
      const n = chunks.length === 1 ? compressed.length : chunks[0]!.length;
      expect(await refusal(() => body)).toEqual(tooLarge(countPassing(max, compressed.length, n), max));
    });
  });

  test('the inflated chunks lie in buffers of malloc\'s mmap threshold (128 KiB), not zlib\'s 16 KiB, which fragment its arena', async () => {
    const req = new FakeRequest({ 'content-encoding': 'gzip' });
    const body = readBody(req.asIncoming, limits(gzip.length, payload.length), 'gzip');
    req.send([gzip]);
    const got = await body;
    expect([INFLATE_CHUNK_BYTES, new Set(got.chunks.map((c) => c.buffer.byteLength))]).toEqual([128 * 1024, new Set([128 * 1024])]);
  });

  test('the wrapper is detected whatever the header says (gzip bytes as deflate, zlib bytes as gzip)', async () => {
    for (const [encoding, compressed] of [['deflate', gzip], ['gzip', deflate]] as const) {
      const req = new FakeRequest({ 'content-encoding': encoding });
      const body = readBody(req.asIncoming, limits(compressed.length, payload.length), encoding);
      req.send(splitEvery(compressed, 3));
      expect(Buffer.concat((await body).chunks as Buffer[])).toEqual(payload);
    }
  });

  // A broken stream is refused (Triton forwards what inflated so far; docs/differences.md).
  const undecompressable = (encoding: string, problem: string): Refusal => ({
    code: 'GW_ERR_REQUEST_COMPRESSED_INVALID', status: 400, message: `the ${encoding} request body could not be decompressed: ${problem}`,
  });

  test.each(splits(gzip))('a truncated stream: 400, %s', async (_, chunks) => {
    const cut = gzip.subarray(0, gzip.length - 30);
    const req = new FakeRequest({ 'content-encoding': 'gzip' });
    const body = readBody(req.asIncoming, limits(gzip.length, payload.length), 'gzip');
    req.send(splitEvery(cut, chunks[0]!.length));
    expect(await refusal(() => body)).toEqual(undecompressable('gzip', 'unexpected end of file'));
  });

  test.each(splits(gzip))('corrupt data: 400, %s', async (_, chunks) => {
    const corrupt = Buffer.from(gzip);
    const mid = corrupt.length >> 1;
    corrupt[mid] = corrupt[mid]! ^ 0xff;
    const req = new FakeRequest({ 'content-encoding': 'gzip' });
    const body = readBody(req.asIncoming, limits(gzip.length, Number.MAX_SAFE_INTEGER), 'gzip');
    req.send(splitEvery(corrupt, chunks[0]!.length));
    expect(await refusal(() => body)).toMatchObject({ code: 'GW_ERR_REQUEST_COMPRESSED_INVALID', status: 400 });
  });

  test('not compressed at all: 400', async () => {
    const req = new FakeRequest({ 'content-encoding': 'deflate' });
    const body = readBody(req.asIncoming, limits(payload.length, payload.length), 'deflate');
    req.send(splitEvery(payload, 7));
    expect(await refusal(() => body)).toEqual(undecompressable('deflate', 'incorrect header check'));
  });

  test('an empty body stays empty', async () => {
    const req = new FakeRequest({ 'content-encoding': 'gzip' });
    const body = readBody(req.asIncoming, limits(10, 10), 'gzip');
    req.send([]);
    expect(await body).toEqual({ chunks: [], length: 0 });
  });

  test('the client goes away mid-stream: aborted', async () => {
    const req = new FakeRequest({ 'content-encoding': 'gzip' });
    const body = readBody(req.asIncoming, limits(gzip.length, payload.length), 'gzip');
    req.send(splitEvery(gzip.subarray(0, 40), 2), false);
    req.destroy();
    expect(await refusal(() => body)).toEqual(CLOSED);
  });
});

describe('streamBody', () => {
  test.each(splits(payload))('hands over each chunk as it arrives (%s), resolves with the count', async (_, chunks) => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const seen: Buffer[] = [];
    const done = streamBody(req.asIncoming, payload.length, (c) => seen.push(c));
    req.send(chunks);
    expect(await done).toBe(payload.length);
    expect(seen).toHaveLength(chunks.length);
    expect(seen.filter((c, i) => c !== chunks[i])).toEqual([]); // the same Buffers, by identity
  });

  test.each(splits(payload))('a body that ends short of its declared length (%s): aborted with both counts', async (_, chunks) => {
    const req = new FakeRequest({ 'content-length': String(payload.length + 1) });
    const done = streamBody(req.asIncoming, payload.length + 1, () => undefined);
    req.send(chunks);
    expect(await refusal(() => done)).toEqual({
      code: 'GW_ERR_REQUEST_ABORTED', status: 400, message: `the body ended after ${payload.length} of ${payload.length + 1} bytes`,
    });
  });

  test.each(CHUNK_SIZES)('onChunk throws (%i-byte chunks): rejects with its error, sees no more chunks, drains the rest', async (n) => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const failure = new Error('slot overflow');
    let calls = 0;
    const done = streamBody(req.asIncoming, payload.length, () => {
      if (++calls === 3) throw failure;
    });
    req.send(splitEvery(payload, n));
    await expect(done).rejects.toBe(failure);
    if (!req.readableEnded) await once(req, 'end');
    expect(calls).toBe(3);
  });

  test.each(CHUNK_SIZES)('the client goes away (%i-byte chunks so far): aborted', async (n) => {
    const req = new FakeRequest({ 'content-length': String(payload.length) });
    const seen: Buffer[] = [];
    const done = streamBody(req.asIncoming, payload.length, (c) => seen.push(c));
    req.send(splitEvery(payload.subarray(0, 20), n), false);
    req.destroy();
    expect(await refusal(() => done)).toEqual(CLOSED);
    expect(Buffer.concat(seen)).toEqual(payload.subarray(0, 20));
  });
});

describe('a real node:http request cut short', () => {
  // The fake's signals checked against node:http's own: the client sends half the declared body
  // and goes away. Node 24 destroys the request with an 'aborted' error before 'close', so it is
  // the error listener that answers, not the `complete === false` check on 'close'.
  test.each([['readBody'], ['streamBody']])('%s: aborted', async (reader) => {
    let client: net.Socket | undefined;
    let settle!: (r: Refusal) => void;
    const outcome = new Promise<Refusal>((resolve) => {
      settle = resolve;
    });
    const server = http.createServer((req) => {
      const read = reader === 'readBody' ? readBody(req, limits(100), undefined) : streamBody(req, 100, () => undefined);
      refusal(() => read).then(settle, (err: Error) => settle({ code: 'none', status: 0, message: err.message }));
      req.once('data', () => client?.destroy());
    });
    try {
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      client.on('error', () => undefined);
      client.write(`POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n${'a'.repeat(50)}`);
      expect(await outcome).toEqual(UNREADABLE);
    } finally {
      client?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 10_000);
});
