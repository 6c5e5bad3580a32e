// The fast path's request-head parser (gateway/ingress/http1/head.ts): what it reads from the
// heads real clients send, the same reading whatever the reads' split, and each documented
// hand-off to node:http — at the offending byte where one byte decides. It refuses nothing
// itself; test/fuzz/http1-head.test.ts checks every reading against llhttp's.
import { ACCEPTED, HAND_OFF, HAND_OFF_REASONS, type HandOffReason, KNOWN_NAMES, PARTIAL, HeadParser } from '../../../../gateway/ingress/http1/head';

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100, maxUrlBytes: 8192 };
const id = (name: (typeof KNOWN_NAMES)[number]): number => KNOWN_NAMES.indexOf(name);

const TRITONCLIENT = 'POST /v2/models/simple/infer HTTP/1.1\r\nHost: localhost:8000\r\nUser-Agent: python/gevent-http-client-2.0.11\r\n'
  + 'Inference-Header-Content-Length: 179\r\nContent-Length: 211\r\n\r\n';
const CURL = 'POST /v2/models/m/versions/3/infer?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n'
  + 'Content-Type: application/octet-stream\r\nExpect: 100-continue\r\nContent-Length: 4194304\r\n\r\n';
const HTTPX = 'GET /v2/health/ready HTTP/1.1\r\nHost: gw:8000\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: close\r\n'
  + 'User-Agent: python-httpx/0.27.0\r\n\r\n';

interface Reading {
  method: string; target: string; fields: [string, string][]; contentLength: number; keepAlive: boolean;
  expectContinue: boolean; headBytes: number;
}

function reading(h: HeadParser): Reading {
  const fields: [string, string][] = [];
  for (let i = 0; i < h.fieldCount; i++) fields.push([h.name(i), h.fieldValue(i)]);
  const { method, contentLength, keepAlive, expectContinue, headBytes } = h;
  return { method, target: h.target(), fields, contentLength, keepAlive, expectContinue, headBytes };
}

/** Feeds `text` in the given reads; the verdict of the last feed, and for ACCEPTED where its body starts. */
function feedAll(h: HeadParser, reads: readonly Buffer[]): { verdict: number; read: number; bodyStart: number } {
  let verdict = PARTIAL;
  for (let r = 0; r < reads.length; r++) {
    verdict = h.feed(reads[r]!, 0, reads[r]!.length);
    if (verdict !== PARTIAL) return { verdict, read: r, bodyStart: h.bodyStart };
  }
  return { verdict, read: reads.length - 1, bodyStart: -1 };
}

describe('heads of real clients', () => {
  test('tritonclient (geventhttpclient): read in one feed, from the read buffer itself', () => {
    const h = new HeadParser(LIMITS);
    const buf = Buffer.from(`xx${TRITONCLIENT}BODY`, 'latin1');
    expect(h.feed(buf, 2, buf.length)).toBe(ACCEPTED);
    expect(h.bytes).toBe(buf);
    expect(h.bodyStart).toBe(2 + TRITONCLIENT.length);
    expect(reading(h)).toEqual({
      method: 'POST', target: '/v2/models/simple/infer', contentLength: 211, keepAlive: true, expectContinue: false, headBytes: TRITONCLIENT.length,
      fields: [['host', 'localhost:8000'], ['user-agent', 'python/gevent-http-client-2.0.11'], ['inference-header-content-length', '179'], ['content-length', '211']],
    });
    expect(h.value(id('inference-header-content-length'))).toBe('179');
    expect(h.value(id('authorization'))).toBeUndefined();
  });

  test('curl with Expect: 100-continue and a query', () => {
    const h = new HeadParser(LIMITS);
    expect(h.feed(Buffer.from(CURL), 0, CURL.length)).toBe(ACCEPTED);
    expect(reading(h)).toMatchObject({ method: 'POST', target: '/v2/models/m/versions/3/infer?x=1', contentLength: 4194304, expectContinue: true, keepAlive: true });
  });

  test('httpx GET with Connection: close; an unknown name is lower-cased only when asked', () => {
    const h = new HeadParser(LIMITS);
    const head = 'GET / HTTP/1.1\r\nHOST: a\r\nX-Custom-Thing:  \t v a l \t \r\nconnection: Close\r\n\r\n';
    expect(h.feed(Buffer.from(HTTPX), 0, HTTPX.length)).toBe(ACCEPTED);
    expect(reading(h)).toMatchObject({ method: 'GET', target: '/v2/health/ready', contentLength: 0, keepAlive: false });
    expect(h.feed(Buffer.from(head), 0, head.length)).toBe(ACCEPTED);
    expect(reading(h).fields).toEqual([['host', 'a'], ['x-custom-thing', 'v a l'], ['connection', 'Close']]);
    expect(h.keepAlive).toBe(false);
  });

  test('pipelined: the second head read from where the first body ends', () => {
    const h = new HeadParser(LIMITS);
    const buf = Buffer.from('POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: a\r\n\r\n');
    expect(h.feed(buf, 0, buf.length)).toBe(ACCEPTED);
    expect([h.target(), h.contentLength]).toEqual(['/a', 3]);
    expect(h.feed(buf, h.bodyStart + 3, buf.length)).toBe(ACCEPTED);
    expect([h.target(), h.contentLength, h.bodyStart]).toEqual(['/b', 0, buf.length]);
  });
});

describe('a head split across reads', () => {
  test.each([['tritonclient', TRITONCLIENT], ['curl', CURL], ['httpx', HTTPX]])('%s: the same reading split at every byte, and one byte per read', (_name, head) => {
    const whole = new HeadParser(LIMITS);
    const bytes = Buffer.from(`${head}tail`, 'latin1');
    expect(whole.feed(bytes, 0, bytes.length)).toBe(ACCEPTED);
    const expected = reading(whole);
    const h = new HeadParser(LIMITS); // one parser for every split: its state must not leak between heads
    for (let k = 1; k < bytes.length; k++) {
      const r = feedAll(h, [bytes.subarray(0, k), bytes.subarray(k)]);
      expect([k, r.verdict, reading(h)]).toEqual([k, ACCEPTED, expected]);
      const seen = r.read === 0 ? 0 : k;
      expect(seen + r.bodyStart).toBe(head.length);
    }
    const oneByOne = feedAll(h, [...bytes].map((c) => Buffer.from([c])));
    expect([oneByOne.verdict, oneByOne.read, oneByOne.bodyStart, reading(h)]).toEqual([ACCEPTED, head.length - 1, 1, expected]);
  });

  test('a hand-off after a split: carried() and the rest of the read are the bytes as sent', () => {
    const h = new HeadParser(LIMITS);
    const bytes = Buffer.from('POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
    expect(h.feed(bytes, 0, 20)).toBe(PARTIAL);
    expect(h.feed(bytes, 20, 30)).toBe(PARTIAL);
    expect(h.feed(bytes, 30, bytes.length)).toBe(HAND_OFF);
    expect(h.handOffReason).toBe('transfer-encoding');
    expect(Buffer.concat([h.carried(), bytes.subarray(30)])).toEqual(bytes);
  });
});

/**
 * Every hand-off: the head, and where one byte decides, the head's prefix that ends with that
 * byte (the hand-off comes there, without waiting for the head's end).
 */
const HAND_OFFS: [HandOffReason, string, string?][] = [
  ['method', 'PUT / HTTP/1.1\r\nHost: a\r\n\r\n', 'PU'],
  ['method', 'post / HTTP/1.1\r\nHost: a\r\n\r\n', 'p'],
  ['method', 'GETX / HTTP/1.1\r\nHost: a\r\n\r\n', 'GETX'],
  ['method', '\r\nPOST / HTTP/1.1\r\nHost: a\r\n\r\n', '\r'], // a blank line first (RFC 9112 §2.2: a server may skip it; llhttp does)
  ['target', 'POST http://a/ HTTP/1.1\r\nHost: a\r\n\r\n', 'POST h'],
  ['target', 'POST * HTTP/1.1\r\nHost: a\r\n\r\n', 'POST *'],
  ['target', 'POST  / HTTP/1.1\r\nHost: a\r\n\r\n', 'POST  '],
  ['target', 'POST /a#f HTTP/1.1\r\nHost: a\r\n\r\n', 'POST /a#'],
  ['target', 'POST /\xe9 HTTP/1.1\r\nHost: a\r\n\r\n', 'POST /\xe9'],
  ['target', 'POST /a\0 HTTP/1.1\r\nHost: a\r\n\r\n', 'POST /a\0'],
  ['target', 'POST /\tHTTP/1.1\r\nHost: a\r\n\r\n', 'POST /\t'],
  ['url-too-long', `GET /${'a'.repeat(8192)} HTTP/1.1\r\nHost: a\r\n\r\n`, `GET /${'a'.repeat(8192)}`],
  ['version', 'POST / HTTP/1.0\r\nHost: a\r\n\r\n', 'POST / HTTP/1.0'],
  ['version', 'POST / HTTP/2.0\r\nHost: a\r\n\r\n', 'POST / HTTP/2'],
  ['version', 'POST / HTTP/1.1 \r\nHost: a\r\n\r\n', 'POST / HTTP/1.1 '],
  ['version', 'POST / http/1.1\r\nHost: a\r\n\r\n', 'POST / h'],
  ['bare-lf', 'POST / HTTP/1.1\nHost: a\n\n', 'POST / HTTP/1.1\n'],
  ['bare-cr', 'POST / HTTP/1.1\rHost: a\r\n\r\n', 'POST / HTTP/1.1\rH'],
  ['bare-lf', 'POST / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n', 'POST / HTTP/1.1\r\nHost: a\n'],
  ['bare-cr', 'POST / HTTP/1.1\r\nHost: a\r\r\n\r\n', 'POST / HTTP/1.1\r\nHost: a\r\r'],
  ['bare-lf', 'POST / HTTP/1.1\r\nHost: a\r\n\n', 'POST / HTTP/1.1\r\nHost: a\r\n\n'],
  ['bare-cr', 'POST / HTTP/1.1\r\nHost: a\r\n\rX', 'POST / HTTP/1.1\r\nHost: a\r\n\rX'],
  ['obs-fold', 'POST / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n', 'POST / HTTP/1.1\r\nHost: a\r\nX: b\r\n '],
  ['obs-fold', 'POST / HTTP/1.1\r\n\tHost: a\r\n\r\n', 'POST / HTTP/1.1\r\n\t'],
  ['field-name', 'POST / HTTP/1.1\r\nHost : a\r\n\r\n', 'POST / HTTP/1.1\r\nHost '],
  ['field-name', 'POST / HTTP/1.1\r\nHost\t: a\r\n\r\n', 'POST / HTTP/1.1\r\nHost\t'],
  ['field-name', 'POST / HTTP/1.1\r\nHo(st: a\r\n\r\n', 'POST / HTTP/1.1\r\nHo('],
  ['field-name', 'POST / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n', 'POST / HTTP/1.1\r\n:'],
  ['field-name', 'POST / HTTP/1.1\r\nHost\r\n\r\n', 'POST / HTTP/1.1\r\nHost\r'],
  ['field-name', 'POST / HTTP/1.1\r\nX\xe9: a\r\nHost: a\r\n\r\n', 'POST / HTTP/1.1\r\nX\xe9'],
  ['field-value', 'POST / HTTP/1.1\r\nHost: a\0b\r\n\r\n', 'POST / HTTP/1.1\r\nHost: a\0'],
  ['field-value', 'POST / HTTP/1.1\r\nHost: a\x7f\r\n\r\n', 'POST / HTTP/1.1\r\nHost: a\x7f'],
  ['field-value', 'POST / HTTP/1.1\r\nHost: \x01\r\n\r\n', 'POST / HTTP/1.1\r\nHost: \x01'],
  ['head-too-large', `POST / HTTP/1.1\r\nHost: a\r\nX: ${'v'.repeat(16 * 1024)}\r\n\r\n`, `POST / HTTP/1.1\r\nHost: a\r\nX: ${'v'.repeat(16 * 1024 - 29)}`],
  ['too-many-fields', `POST / HTTP/1.1\r\nHost: a\r\n${'X: b\r\n'.repeat(100)}\r\n`, `POST / HTTP/1.1\r\nHost: a\r\n${'X: b\r\n'.repeat(99)}X:`],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n'],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n'],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 1\r\n\r\n'],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1,1\r\n\r\n'],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n'],
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1234567890123456\r\n\r\n'],
  ['transfer-encoding', 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n'],
  ['transfer-encoding', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\ntransfer-encoding: chunked\r\n\r\n'],
  ['connection', 'POST / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n'],
  ['connection', 'POST / HTTP/1.1\r\nHost: a\r\nConnection: close\t\r\n\r\n'], // llhttp: keep-alive
  ['content-length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\t\r\n\r\n'], // llhttp: refused
  ['expect', 'POST / HTTP/1.1\r\nHost: a\r\nExpect:\t100-continue\r\n\r\n'],
  ['connection', 'POST / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n\r\n'],
  ['connection', 'POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nConnection: close\r\n\r\n'],
  ['proxy-connection', 'POST / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n'],
  ['upgrade', 'GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n'],
  ['expect', 'POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n'],
  ['expect', 'POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nExpect: 100-continue\r\n\r\n'],
  ['host', 'POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n'],
  ['host', 'POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'],
  ['repeated-field', 'POST / HTTP/1.1\r\nHost: a\r\nGrpc-Timeout: 1S\r\ngrpc-timeout: 2S\r\n\r\n'],
  ['repeated-field', 'POST / HTTP/1.1\r\nContent-Type: a\r\nHost: a\r\nContent-Type: b\r\n\r\n'],
];

describe('hand-offs to node:http', () => {
  test('every reason has a case here', () => {
    expect(new Set(HAND_OFFS.map(([r]) => r))).toEqual(new Set(HAND_OFF_REASONS.slice(1)));
  });

  test.each(HAND_OFFS.map(([reason, head, prefix]) => [reason, JSON.stringify(head.slice(0, 60)), head, prefix] as const))('%s: %s', (reason, _shown, head, prefix) => {
    const bytes = Buffer.from(head, 'latin1');
    const h = new HeadParser(LIMITS);
    expect([h.feed(bytes, 0, bytes.length), h.handOffReason]).toEqual([HAND_OFF, reason]);
    if (prefix === undefined) return;
    expect(head.startsWith(prefix)).toBe(true);
    const decidedAt = prefix.length;
    // Told at the deciding byte, not before it.
    expect([h.feed(bytes, 0, decidedAt), h.handOffReason]).toEqual([HAND_OFF, reason]);
    expect(h.feed(bytes, 0, decidedAt - 1)).toBe(PARTIAL);
    // And as well when that byte comes in a read of its own.
    const h2 = new HeadParser(LIMITS);
    expect([h2.feed(bytes, 0, decidedAt - 1), h2.feed(bytes, decidedAt - 1, decidedAt), h2.handOffReason]).toEqual([PARTIAL, HAND_OFF, reason]);
  });

  test('the limits are the ones given: a head of exactly maxHeaderBytes and maxHeaderCount fields is read', () => {
    const base = 'POST / HTTP/1.1\r\nHost: a\r\n';
    const fill = 16 * 1024 - base.length - 'X: \r\n\r\n'.length;
    const big = `${base}X: ${'v'.repeat(fill)}\r\n\r\n`;
    expect(big.length).toBe(16 * 1024);
    const h = new HeadParser(LIMITS);
    expect(h.feed(Buffer.from(big), 0, big.length)).toBe(ACCEPTED);
    expect([h.feed(Buffer.from(big), 0, 1000), h.feed(Buffer.from(big), 1000, big.length)]).toEqual([PARTIAL, ACCEPTED]);
    const many = `${base}${'X: b\r\n'.repeat(99)}\r\n`;
    expect(h.feed(Buffer.from(many), 0, many.length)).toBe(ACCEPTED);
    expect(h.fieldCount).toBe(100);
    const url = `GET /${'a'.repeat(8191)} HTTP/1.1\r\nHost: a\r\n\r\n`;
    expect(h.feed(Buffer.from(url), 0, url.length)).toBe(ACCEPTED);
  });
});
