// A fast-path head's req.headers (gateway/ingress/http1/headers.ts): the object made by a
// sequence's own function and the one built field by field are the same object — same names in
// the same order, same values — and both are what node:http itself makes of the same fields
// (IncomingMessage's own _addHeaderLines, Node's lib/_http_incoming.js), for the heads of real
// clients and random heads of known and unknown names, repeated or not.
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import fc from 'fast-check';
import { ACCEPTED, HeadParser, KNOWN_NAMES } from '../../../../gateway/ingress/http1/head';
import { fieldByField, headersOf, MAX_SHAPES, shapeCount } from '../../../../gateway/ingress/http1/headers';

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100, maxUrlBytes: 8192 };

/** What node:http makes of these raw name, value pairs. */
function nodeHeaders(raw: string[]): Record<string, unknown> {
  const m = new IncomingMessage(new Socket()) as IncomingMessage & { _addHeaderLines(raw: string[], n: number): void };
  m._addHeaderLines(raw, raw.length);
  return { ...m.headers };
}

/** The head parsed, and its fields as name, value pairs as sent. */
function parsed(head: string): { p: HeadParser; raw: string[] } {
  const p = new HeadParser(LIMITS);
  expect(p.feed(Buffer.from(head, 'latin1'), 0, head.length)).toBe(ACCEPTED);
  const raw: string[] = [];
  for (const line of head.split('\r\n').slice(1, -2)) {
    const colon = line.indexOf(':');
    raw.push(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return { p, raw };
}

/** The three readings agree, names in the same order. */
function agree(head: string): void {
  const { p, raw } = parsed(head);
  const shaped = headersOf(p)!;
  const built = fieldByField(p)!;
  const node = nodeHeaders(raw);
  expect(Object.entries(shaped)).toEqual(Object.entries(node));
  expect(Object.entries(built)).toEqual(Object.entries(node));
  expect(Object.getPrototypeOf(shaped)).toBe(Object.prototype);
}

/**
 * Known names a head the parser accepts may carry with any value (Host is there exactly once, added
 * by each test; the framing's and Connection's names are left out: their values are constrained).
 */
const FREE = KNOWN_NAMES.filter((n) => !['', 'host', 'content-length', 'transfer-encoding', 'connection', 'proxy-connection', 'upgrade', 'expect'].includes(n));

const CLIENTS = [
  'POST /v2/models/simple/infer HTTP/1.1\r\nUser-Agent: python/gevent-http-client-2.6.1\r\nInference-Header-Content-Length: 140\r\nHost: 127.0.0.1:18999\r\nContent-Length: 156\r\n\r\n',
  'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate, br\r\nAccept: */*\r\nConnection: keep-alive\r\nContent-Length: 76\r\nContent-Type: application/json\r\n\r\n',
  'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 6\r\nContent-Type: application/octet-stream\r\nAccept-Encoding: gzip\r\n\r\n',
  'POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:18999\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: 0\r\nContent-Length: 64\r\n\r\n',
  'POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\nCookie: a=1\r\nCookie: b=2\r\nX-Y: 1\r\nx-y: 2\r\nContent-Length: 1\r\n\r\n',
];

describe('req.headers of a fast-path head', () => {
  test.each(CLIENTS.map((h) => [h.split('\r\n')[2]!, h]))('a real client\'s head (%s) reads as node:http reads it', (_, head) => {
    agree(head);
    agree(head); // the second time from the sequence's function, made the first time
  });

  test('random heads of known and unknown names, repeated or not: as node:http reads them', () => {
    const other = ['x-api-key', 'cookie', 'set-cookie', 'referer', 'x-a', 'constructor', 'toString'];
    const field = fc.tuple(fc.constantFrom(...FREE, ...other), fc.boolean(), fc.stringMatching(/^[ -~]{0,12}$/));
    fc.assert(fc.property(fc.array(field, { maxLength: 14 }), fc.nat(14), (fields, hostAt) => {
      const seen = new Set<string>();
      const lines = fields.filter(([n]) => !(FREE as readonly string[]).includes(n) || (!seen.has(n) && seen.add(n)))
        .map(([n, upper, v]) => `${upper ? n.toUpperCase() : n}: ${v.trim()}`);
      lines.splice(Math.min(hostAt, lines.length), 0, 'Host: h');
      agree(`POST /v2/models/m/infer HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
    }), { seed: 42, numRuns: 400 });
  });

  test(`at most ${MAX_SHAPES} sequences get a function; the rest are built field by field, the same`, () => {
    for (let i = 0; i < MAX_SHAPES + 20; i++) {
      const names = FREE.filter((_, j) => ((i + 1) >> j) & 1); // a distinct subset each time
      agree(`POST /v2/models/m/infer HTTP/1.1\r\nHost: h\r\n${names.map((n) => `${n}: v${i}\r\n`).join('')}\r\n`);
    }
    expect(shapeCount()).toBe(MAX_SHAPES);
  });
});
