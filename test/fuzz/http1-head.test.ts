// The fast path's request-head parser (gateway/ingress/http1/head.ts) against llhttp, the parser
// node:http runs (test/support/llhttp.ts): whatever ours accepts, llhttp reads the same method,
// target, version, header fields (names and values), keep-alive and body length, and does not
// refuse; whatever ours hands to node:http goes as the bytes that came, and what llhttp refuses is
// never accepted. Inputs: heads captured from real clients, the request-smuggling classics, and
// both mutated (header lines from the classics inserted, bytes edited), fed to both parsers split
// at the same random points. The llhttp reading is itself checked against a real node:http server
// on 127.0.0.1 for the corpus and a sample of the mutations.
import fc from 'fast-check';
import { ACCEPTED, HAND_OFF, PARTIAL, HeadParser } from '../../gateway/ingress/http1/head';
import { type LlhttpReading, llhttpRead, serverRead } from '../support/llhttp';
import { cutAt, cuts, fuzz, mutated, SEED } from './harness';

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100, maxUrlBytes: 8192 };

/**
 * Heads as clients sent them to a capturing socket (2026-11-29; Host's port left as it was), with
 * a body of the length they declared. perf_analyzer's is libcurl's for tritonclient's C++ client
 * (its "Expect:" removes curl's Expect), written by hand: its binary needs libcudart.
 */
const CLIENTS: readonly (readonly [string, string])[] = [
  ['curl 7.88.1', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: 0\r\nContent-Length: 64\r\n\r\n'],
  ['curl 7.88.1, 2 MB', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: 0\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n'],
  ['curl GET', 'GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n'],
  ['requests 2.32.3', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate, br\r\nAccept: */*\r\nConnection: keep-alive\r\nContent-Length: 76\r\nContent-Type: application/json\r\n\r\n'],
  ['requests, a generator body', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate, br\r\nAccept: */*\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n1\r\nx\r\n0\r\n\r\n'],
  ['httpx 0.28.1', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\nUser-Agent: python-httpx/0.28.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\n\r\n'],
  ['KServe SDK 0.21 (httpx)', 'POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\nUser-Agent: python-httpx/0.28.1\r\ninference-header-content-length: 165\r\ncontent-type: application/octet-stream\r\nContent-Length: 181\r\n\r\n'],
  ['aiohttp 3.14.5', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate, br\r\nUser-Agent: Python/3.11 aiohttp/3.14.5\r\nContent-Length: 4\r\nContent-Type: application/octet-stream\r\n\r\n'],
  ['tritonclient 2.73 (geventhttpclient 2.6.1)', 'POST /v2/models/simple/infer HTTP/1.1\r\nUser-Agent: python/gevent-http-client-2.6.1\r\nInference-Header-Content-Length: 140\r\nHost: 127.0.0.1:18999\r\nContent-Length: 156\r\n\r\n'],
  ['Go 1.x net/http', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 6\r\nContent-Type: application/octet-stream\r\nAccept-Encoding: gzip\r\n\r\n'],
  ['Go net/http, a pipe body', 'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: Go-http-client/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\nAccept-Encoding: gzip\r\n\r\n3\r\nxyz\r\n0\r\n\r\n'],
  ['perf_analyzer (libcurl)', 'POST /v2/models/classifier_fp32/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: */*\r\nInference-Header-Content-Length: 142\r\nContent-Type: application/octet-stream\r\nContent-Length: 1342\r\n\r\n'],
];

/** A client's bytes: its head, and a body of its declared length (the chunked ones carry theirs). */
function withBody(head: string): Buffer {
  const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
  return Buffer.from(head + 'b'.repeat(cl === null ? 0 : Number(cl[1])), 'latin1');
}

const H = 'POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\n';
/** Heads at server.maxHeaderCount fields and server.maxHeaderBytes bytes: read by both. */
const AT_BOUNDS = [`${H}${'X: y\r\n'.repeat(99)}\r\n`, `${H}X: ${'v'.repeat(16 * 1024 - H.length - 7)}\r\n\r\n`];
/** Request smuggling and parser-differential classics (RFC 9112 §6.3, §11.2; PortSwigger's CL.TE, TE.CL, TE.TE). */
const CLASSICS: readonly string[] = [
  `${H}Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED`, // CL.TE
  `${H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n`, // TE.CL
  `${H}Transfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n0\r\n\r\n`,
  `${H}Transfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Transfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n`,
  `${H} Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: y\r\n Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: X\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Transfer-Encoding\r\n : chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`,
  `${H}Transfer_Encoding: chunked\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF1\r\nx\r\n0\r\n\r\n`, // chunk-size overflow
  `${H}Transfer-Encoding: chunked\r\n\r\n-1\r\nx\r\n0\r\n\r\n`,
  `${H}Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde`,
  `${H}Content-Length: 4, 4\r\n\r\nabcd`,
  `${H}Content-Length: +4\r\n\r\nabcd`,
  `${H}Content-Length: -4\r\n\r\nabcd`,
  `${H}Content-Length: 4 \r\n\r\nabcd`,
  `${H}Content-Length:  0004\r\n\r\nabcd`,
  `${H}Content-Length: 4 4\r\n\r\nabcd`,
  `${H}Content-Length: 0x4\r\n\r\nabcd`,
  `${H}Content-Length: 18446744073709551620\r\n\r\nabcd`,
  `${H}Content-Length: 999999999999999\r\n\r\nabcd`,
  `${H}Content-Length\r\n : 4\r\n\r\nabcd`,
  `${H}Content-Length: 4\r\nConnection: keep-alive\r\n\r\nabcdGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n`,
  'POST /v2/models/m/infer HTTP/1.1\nHost: a\nContent-Length: 4\n\nabcd',
  'POST /v2/models/m/infer HTTP/1.1\r\nHost: a\rContent-Length: 4\r\n\r\nabcd',
  `${H}Content-Length: 4\r\n\n\r\nabcd`,
  'POST /v2/models/m/infer\0 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  `${H}X-\0: a\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: a\0b\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: a\rContent-Length: 99\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: a\r\nContent-Length: 4\r\n\r\nabcd`.replace('X: a', 'X: a%0d%0aContent-Length: 9'),
  `${H}Connection: close\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Connection: keep-alive, close\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Proxy-Connection: close\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Connection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n`,
  `${H}Expect: 100-continue\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Expect: 100-Continue, foo\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}Host: b\r\nContent-Length: 4\r\n\r\nabcd`,
  'POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd',
  'POST http://evil/v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  'POST /v2/models/m/infer HTTP/1.0\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  'POST /v2/models/m/infer HTTP/1.1 \r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  'POST  /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  'post /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
  '\r\nPOST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd',
  `${H}X:\xff\xfe\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: \x7f\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X: \t a \t \r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}X:\r\nContent-Length: 4\r\n\r\nabcd`,
  `${H}${'X: y\r\n'.repeat(120)}\r\n`,
  ...AT_BOUNDS,
  `${H}X: ${'v'.repeat(17_000)}\r\n\r\n`,
  `GET /${'a'.repeat(9000)} HTTP/1.1\r\nHost: a\r\n\r\n`,
];

/** Header lines the mutations insert: the classics' and their neighbours. */
const LINES: readonly string[] = [
  'Transfer-Encoding: chunked', 'transfer-encoding: identity', 'Transfer-Encoding : chunked', ' Transfer-Encoding: chunked',
  'Content-Length: 5', 'Content-Length: 0', 'content-length: 005', 'Content-Length: +5', 'Content-Length: 5 5', 'Content-Length:',
  'Content-Length:\t7\t', 'Content-Length: 7\t', 'Content-Length:\t7', 'Connection:\tclose', 'Connection: close\t',
  'Connection: keep-alive \t', 'Expect:\t100-continue\t', 'Connection: close', 'Connection: Keep-Alive', 'connection: CLOSE', 'Connection: keep-alive, close',
  'Connection: upgrade', 'Upgrade: websocket', 'Proxy-Connection: keep-alive', 'Expect: 100-continue', 'Expect: 100-CONTINUE',
  'Expect: nothing', 'Host: b', 'X-Long: ' + 'x'.repeat(300), 'X: a\rb', 'X: a\nb', 'X: a\0b', 'X\t: a', 'X : a', ': a', 'X', '\tfolded',
  'Keep-Alive: timeout=5', 'Authorization: Bearer abc', 'Grpc-Timeout: 1S', 'Content-Type: application/json',
];

interface Ours {
  verdict: number;
  reason: string;
  /** ACCEPTED: where the body starts in the whole input. */
  bodyAt: number;
  head: HeadParser;
  /** HAND_OFF: the bytes node:http would be given. */
  handedOff?: Buffer;
}

/** Our parser fed the same reads as llhttp. */
function ours(reads: readonly Buffer[]): Ours {
  const head = new HeadParser(LIMITS);
  let at = 0;
  for (let r = 0; r < reads.length; r++) {
    const read = reads[r]!;
    const v = head.feed(read, 0, read.length);
    if (v === ACCEPTED) return { verdict: v, reason: '', bodyAt: at + head.bodyStart, head };
    if (v === HAND_OFF) {
      return { verdict: v, reason: head.handOffReason, bodyAt: -1, head, handedOff: Buffer.concat([head.carried(), ...reads.slice(r)]) };
    }
    at += read.length;
  }
  return { verdict: PARTIAL, reason: '', bodyAt: -1, head };
}

/** Our reading in llhttp's terms (names compared lower-cased). */
function ourMessage(o: Ours, total: number): unknown {
  const h = o.head;
  const headers: string[] = [];
  for (let i = 0; i < h.fieldCount; i++) headers.push(h.name(i), h.fieldValue(i));
  const available = total - o.bodyAt;
  return { method: h.method, url: h.target(), version: '1.1', headers, keepAlive: h.keepAlive, upgrade: false,
    body: Math.min(h.contentLength, available), complete: available >= h.contentLength };
}

function llhttpMessage(l: LlhttpReading): unknown {
  const m = l.messages[0];
  if (m === undefined) return { refused: l.error };
  return { ...m, headers: m.headers.map((v, i) => (i % 2 === 0 ? v.toLowerCase() : v)) };
}

/** Outcomes seen, for the mix checks below. */
const seen = { accepted: 0, handedOff: 0, handedOffRefused: 0, partial: 0 };

/** The property: our verdict on `bytes` split at `points` is one llhttp agrees with. */
function agree(bytes: Buffer, points: readonly number[]): void {
  const reads = cutAt(bytes, points);
  const o = ours(reads);
  const l = llhttpRead(reads, LIMITS);
  if (o.verdict === ACCEPTED) {
    seen.accepted++;
    expect(llhttpMessage(l)).toEqual(ourMessage(o, bytes.length));
  } else if (o.verdict === HAND_OFF) {
    seen.handedOff++;
    if (l.messages.length === 0 && l.error !== undefined) seen.handedOffRefused++;
    expect(o.handedOff!.equals(bytes)).toBe(true); // jest's toEqual walks a Buffer element by element
  } else {
    seen.partial++;
    // Waiting where llhttp has read a whole head would be reading differently.
    expect(l.messages).toEqual([]);
    if (l.error === undefined) return;
    // llhttp refused already: ours must hand off once the line ends, never accept.
    const more = Buffer.concat([bytes, Buffer.from('\r\n\r\n')]);
    expect(ours([more]).verdict).toBe(HAND_OFF);
  }
}

/** A field the framing or node:http gives meaning to, with any OWS around any of the values they read. */
const ows = fc.constantFrom('', ' ', '  ', '\t', ' \t', '\t ');
const meaningful = fc.tuple(
  fc.constantFrom('Content-Length', 'Connection', 'Expect', 'Host', 'Transfer-Encoding', 'Proxy-Connection', 'Upgrade', 'Content-Type', 'Grpc-Timeout'),
  fc.constantFrom('as is', 'lower', 'upper'), ows,
  fc.constantFrom('', '0', '5', '007', 'close', 'keep-alive', 'Keep-Alive', 'CLOSE', '100-continue', 'chunked', 'upgrade', 'close, keep-alive', 'keep-alive ,close', 'te'),
  ows,
).map(([name, c, before, value, after]) => `${c === 'lower' ? name.toLowerCase() : c === 'upper' ? name.toUpperCase() : name}:${before}${value}${after}`);
const line = fc.oneof(fc.constantFrom(...LINES), meaningful);

const client = fc.constantFrom(...CLIENTS.map(([, head]) => head));
/** A client's head with header lines inserted after the request line or any field. */
const withLines = fc.tuple(client, fc.array(fc.tuple(fc.nat(), line), { maxLength: 3 })).map(([head, inserts]) => {
  let out = head;
  for (const [at, line] of inserts) {
    const ends = [...out.matchAll(/\r\n/g)].map((m) => m.index).filter((i) => i < out.indexOf('\r\n\r\n') + 1);
    const i = ends[at % ends.length]! + 2;
    out = `${out.slice(0, i)}${line}\r\n${out.slice(i)}`;
  }
  return withBody(out);
});
/** Pipelined: a second request after the first's body. */
const tail = fc.constantFrom('', 'GET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n', 'XYZ', '\r\n');
const input = fc.tuple(fc.oneof(withLines, withLines.chain(mutated), fc.constantFrom(...CLASSICS).map((c) => Buffer.from(c, 'latin1')).chain(mutated)), tail)
  .map(([b, t]) => Buffer.concat([b, Buffer.from(t)]));

describe('the request-head parser against llhttp', () => {
  test.each(CLIENTS)('%s: accepted (or, chunked, handed off) and read as llhttp reads it, split at every byte', (_name, head) => {
    const bytes = withBody(head);
    const chunked = /transfer-encoding/i.test(head);
    expect([ours([bytes]).verdict, ours([bytes]).reason]).toEqual(chunked ? [HAND_OFF, 'transfer-encoding'] : [ACCEPTED, '']);
    for (let k = 0; k <= head.length; k++) agree(bytes, [k]);
  });

  test.each(CLASSICS.map((c) => [JSON.stringify(c.slice(H.length - 9, H.length + 50)), c]))('classic %s: handed off or read as llhttp reads it, split at every byte', (_shown, c) => {
    const bytes = Buffer.from(c, 'latin1');
    for (let k = 0; k <= Math.min(bytes.length, 400); k++) agree(bytes, [k]);
    const l = llhttpRead([bytes], LIMITS);
    // What llhttp refuses before a whole head is never ours to accept.
    if (l.messages.length === 0 && l.error !== undefined) expect(ours([bytes]).verdict).toBe(HAND_OFF);
  });

  test.each(AT_BOUNDS.map((h) => [h.length, h]))('a head of %d bytes at a bound: accepted by both', (_n, h) => {
    const bytes = Buffer.from(h, 'latin1');
    expect(ours([bytes]).verdict).toBe(ACCEPTED);
    expect(llhttpRead([bytes], LIMITS).messages).toHaveLength(1);
  });

  fuzz('mutated client heads and classics, split at random points: ours hands off or reads as llhttp does', 5000, fc.tuple(input, cuts), ([bytes, points]) => {
    agree(bytes, points);
  });

  test('the mix: most client heads accepted, and hand-offs include what llhttp refuses', () => {
    expect(seen.accepted).toBeGreaterThan(1000);
    expect(seen.handedOff).toBeGreaterThan(1000);
    expect(seen.handedOffRefused).toBeGreaterThan(300);
  });
});

describe('the llhttp reading is node:http server\'s', () => {
  // One connection each to a real node:http server; the parser's reading must be the server's.
  const sample = fc.sample(input, { seed: SEED, numRuns: 120 });
  const cases = [...CLIENTS.map(([, h]) => withBody(h)), ...CLASSICS.map((c) => Buffer.from(c, 'latin1')), ...sample];
  test(`${cases.length} inputs: the same first request, or both refused before it`, async () => {
    for (const bytes of cases) {
      const direct = llhttpRead([bytes], LIMITS);
      const server = await serverRead(bytes, LIMITS);
      // An upgrade's keep-alive is not the server's to tell (it hands the socket over).
      const first = (r: LlhttpReading): unknown => {
        const m = r.messages[0];
        return m === undefined ? { refused: r.error !== undefined } : { ...m, complete: undefined, keepAlive: m.upgrade ? undefined : m.keepAlive };
      };
      expect([bytes.toString('latin1').slice(0, 200), first(server)]).toEqual([bytes.toString('latin1').slice(0, 200), first(direct)]);
    }
  }, 60_000);
});
