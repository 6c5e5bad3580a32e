// HTTP hardening (docs/production.md#http-limits), over raw sockets so the bytes are exactly as sent: the head's
// bounds (server.maxHeaderBytes and server.maxHeaderCount → 431, server.maxUrlBytes → 414),
// framing that could smuggle a request (Content-Length with Transfer-Encoding, two
// Content-Lengths…) → 400 and the connection closed, every refusal a JSON {"error"} with its
// code; and no request data reaches a response header unchecked.
import { connect } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, HTTP1_WAYS } from '../support/gateway';
import { prometheusSamples } from '../support/prometheus';

jest.setTimeout(30_000);

interface Exchange {
  /** Everything the gateway sent, latin1. */
  readonly text: string;
  /** The first answer: status, headers (names lower-cased, in order), body. */
  readonly status: number;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: string;
  /** The gateway closed the connection (not our timeout). */
  readonly closed: boolean;
}

/**
 * Writes `head` (latin1) on a new connection, half-closes nothing, and collects what comes back
 * until the gateway closes or `settleMs` passes with a complete answer read.
 */
function exchange(port: number, head: string, settleMs = 300): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      clearTimeout(bound);
      socket.destroy();
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) {
        reject(new Error(`no complete answer: ${JSON.stringify(text.slice(0, 200))}`));
        return;
      }
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers = lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const);
      const length = Number(headers.find(([n]) => n === 'content-length')?.[1] ?? 0);
      resolve({ text, status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(end + 4, end + 4 + length), closed });
    };
    const bound = setTimeout(() => done(false), 10_000);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      // A kept-alive connection never closes: done once an answer is in and nothing more came.
      clearTimeout(timer);
      timer = setTimeout(() => done(false), settleMs);
    });
    socket.on('close', () => done(true));
    socket.on('error', () => undefined); // a reset after the answer: 'close' follows
    socket.write(Buffer.from(head, 'latin1'));
  });
}

const header = (x: Exchange, name: string): string | undefined => x.headers.find(([n]) => n === name)?.[1];

/** A refusal: status, code, a JSON {"error"} body with exactly `message`, and the connection closed. */
function expectRefusal(x: Exchange, status: number, code: string, message: string | RegExp, closed = true): void {
  expect(x.status).toBe(status);
  expect(header(x, 'x-tensorgate-error')).toBe(code);
  expect(header(x, 'content-type')).toBe('application/json');
  const body = JSON.parse(x.body) as { error: string };
  if (typeof message === 'string') expect(body).toEqual({ error: message });
  else expect(body.error).toMatch(message);
  if (closed) {
    expect(x.closed).toBe(true);
    expect(header(x, 'connection')).toBe('close');
  }
  // One answer only: nothing after it was taken for another request.
  expect(x.text.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1);
}

// Every case on both ways of reading HTTP/1.1: the fast path and node:http.
describe.each(HTTP1_WAYS)('%s', (_, way) => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--demo', '--cors-origin', 'https://app.example', ...way]); });
  afterAll(async () => { await gw?.close(); });

  describe('bounds of the request head', () => {
    const OVERFLOW = 'the request line and headers exceed 16384 bytes (server.maxHeaderBytes) or 100 fields (server.maxHeaderCount)';

    test('server.maxHeaderBytes (16 KiB): larger headers are 431 GW_ERR_REQUEST_HEADERS_TOO_LARGE, the connection closed', async () => {
      const ok = await exchange(gw.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(15_000)}\r\n\r\n`);
      expect(ok.status).toBe(200);
      const x = await exchange(gw.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`);
      expectRefusal(x, 431, 'GW_ERR_REQUEST_HEADERS_TOO_LARGE', OVERFLOW);
      // The bound counts the request line too: a URL past it is refused by it as well.
      const url = await exchange(gw.port, `GET /${'u'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expectRefusal(url, 431, 'GW_ERR_REQUEST_HEADERS_TOO_LARGE', OVERFLOW);
      // No request existed for the access log, but the metrics count them.
      const m = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect(m.get('tensorgate_errors_total{error_code="GW_ERR_REQUEST_HEADERS_TOO_LARGE",http_route="unparsed"}')).toBe(2);
    });

    test('server.maxHeaderBytes is a setting', async () => {
      const small = await gatewayFor(['--demo', '--max-header-bytes', '2048', ...way]);
      try {
        const x = await exchange(small.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(2100)}\r\n\r\n`);
        expectRefusal(x, 431, 'GW_ERR_REQUEST_HEADERS_TOO_LARGE', 'the request line and headers exceed 2048 bytes (server.maxHeaderBytes) or 100 fields (server.maxHeaderCount)');
      } finally {
        await small.close();
      }
    });

    test('server.maxHeaderCount (100): 101 fields, or 2000, are 431 GW_ERR_REQUEST_HEADERS_TOO_LARGE; 100 are served', async () => {
      const fields = (n: number): string => 'a:v\r\n'.repeat(n - 1); // + Host; 2000 of them stay within 16 KiB
      expect((await exchange(gw.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\n${fields(100)}\r\n`)).status).toBe(200);
      // One over: the gateway's own check, after a complete head (the connection may stay).
      const one = await exchange(gw.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\n${fields(101)}\r\n`);
      expectRefusal(one, 431, 'GW_ERR_REQUEST_HEADERS_TOO_LARGE', 'the request has more than 100 header fields (server.maxHeaderCount)', false);
      // Far over: Node's parser refuses (v24.18.1 and later; older ones truncate and the gateway's check answers).
      const many = await exchange(gw.port, `GET /v2/health/live HTTP/1.1\r\nHost: x\r\n${fields(2000)}\r\n`);
      expect(many.status).toBe(431);
      expect(header(many, 'x-tensorgate-error')).toBe('GW_ERR_REQUEST_HEADERS_TOO_LARGE');
      expect(JSON.parse(many.body).error).toMatch(/\(server\.maxHeaderCount\)$/);
    });

    test('server.maxUrlBytes (8 KiB): a longer request target is 414 GW_ERR_REQUEST_URL_TOO_LONG', async () => {
      const at = await exchange(gw.port, `GET /v2/models/${'m'.repeat(8192 - '/v2/models/'.length)} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(header(at, 'x-tensorgate-error')).not.toBe('GW_ERR_REQUEST_URL_TOO_LONG');
      const target = `/v2/models/m?${'q'.repeat(8200)}`;
      const x = await exchange(gw.port, `GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expectRefusal(x, 414, 'GW_ERR_REQUEST_URL_TOO_LONG', `the request target is ${target.length} bytes, more than 8192 (server.maxUrlBytes)`, false);
    });

    test('an HTTP/1.1 request without Host is 400 GW_ERR_REQUEST_MALFORMED (RFC 9112 §3.2); HTTP/1.0 needs none', async () => {
      const x = await exchange(gw.port, 'GET /v2/health/live HTTP/1.1\r\n\r\n');
      expectRefusal(x, 400, 'GW_ERR_REQUEST_MALFORMED', 'the HTTP/1.1 request has no Host header (RFC 9112 section 3.2)', false);
      expect((await exchange(gw.port, 'GET /v2/health/live HTTP/1.0\r\n\r\n')).status).toBe(200);
    });
  });

  describe('request smuggling: ambiguous framing is 400 GW_ERR_REQUEST_MALFORMED and the connection is closed', () => {
    // Each carries a second request in what one reading takes for the body and another for the
    // next request: only one answer may come back.
    const SMUGGLED = 'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n';
    const chunkedSmuggle = `0\r\n\r\n${SMUGGLED}`;
    test.each([
      ['Content-Length, then Transfer-Encoding', `Content-Length: ${chunkedSmuggle.length}\r\nTransfer-Encoding: chunked\r\n`, chunkedSmuggle,
        "Transfer-Encoding can't be present with Content-Length"],
      ['Transfer-Encoding, then Content-Length', `Transfer-Encoding: chunked\r\nContent-Length: ${chunkedSmuggle.length}\r\n`, chunkedSmuggle,
        "Content-Length can't be present with Transfer-Encoding"],
      ['two different Content-Lengths', 'Content-Length: 0\r\nContent-Length: 44\r\n', SMUGGLED, 'Duplicate Content-Length'],
      ['two equal Content-Lengths', 'Content-Length: 44\r\nContent-Length: 44\r\n', SMUGGLED, 'Duplicate Content-Length'],
      ['a Content-Length list', 'Content-Length: 0, 44\r\n', SMUGGLED, 'Invalid character in Content-Length'],
      ['Transfer-Encoding not ending in chunked', 'Transfer-Encoding: chunked, identity\r\n', chunkedSmuggle, 'Invalid `Transfer-Encoding` header value'],
      ['Transfer-Encoding twice', 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', chunkedSmuggle, 'Invalid `Transfer-Encoding` header value'],
      ['obs-fold in Transfer-Encoding', 'Transfer-Encoding:\r\n chunked\r\n', chunkedSmuggle, 'Invalid header value char'],
      ['a space before the colon', 'Transfer-Encoding : chunked\r\n', chunkedSmuggle, 'Invalid header field char'],
    ])('%s', async (_, fields, body, reason) => {
      const x = await exchange(gw.port, `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n${fields}\r\n${body}`);
      expectRefusal(x, 400, 'GW_ERR_REQUEST_MALFORMED', `the request is not valid HTTP/1.1: ${reason}`);
    });

    test('a malformed chunk in a body being read: the request\'s own answer is that 400, then the close; its handler lets go of its place', async () => {
      // Regression: node:http never told the request that its body would not end, so the handler
      // reading it held its in-flight place forever; with one place, every later request was a 503.
      const one = await gatewayFor(['--demo', '--max-in-flight-requests', '1', ...way]);
      try {
        const json = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}';
        const head = 'POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n';
        for (let i = 0; i < 3; i++) {
          const x = await exchange(one.port, `${head}5\r\n${json.slice(0, 5)}\r\nzz\r\n`);
          expectRefusal(x, 400, 'GW_ERR_REQUEST_MALFORMED', 'the request is not valid HTTP/1.1: Invalid character in chunk size');
        }
        const ok = await exchange(one.port, `${head}${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`);
        expect([ok.status, header(ok, 'x-tensorgate-error')]).toEqual([200, undefined]);
      } finally {
        await one.close();
      }
    });
  });

  describe('nothing from the request is echoed into response headers unchecked', () => {
    // The one header built from request data is a CORS preflight's Access-Control-Allow-Headers
    // (Access-Control-Request-Headers). The others below are read (tracing, passthrough, grpc-timeout)
    // or may be in a client's habits (request ids): none may appear, altered or not, in the answer.
    const REFLECTABLE = ['access-control-request-headers', 'origin', 'traceparent', 'tracestate', 'x-request-id', 'grpc-timeout', 'accept-encoding', 'x-forwarded-for'];
    const ALLOWED = new Set(['content-type', 'content-length', 'x-tensorgate-error', 'connection', 'date', 'keep-alive', 'server-timing', 'retry-after',
      'access-control-allow-origin', 'access-control-expose-headers', 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-max-age',
      'accept-encoding', 'cache-control', 'content-encoding', 'transfer-encoding']);

    // (A CR LF pair is the end of the field: what follows is a field of its own, as in the
    // "header-looking text" case below.)
    test.each(REFLECTABLE)('a bare CR or LF, NUL and other controls in %s are refused by the parser before any handler', async (name) => {
      for (const bad of ['a\nX-Injected: 1', 'a\rX-Injected: 1', 'a\0b', 'a\x01b', 'a\x7fb']) {
        const x = await exchange(gw.port, `OPTIONS /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n${name}: ${bad}\r\n\r\n`);
        expect(x.status).toBe(400);
        expect(header(x, 'x-tensorgate-error')).toBe('GW_ERR_REQUEST_MALFORMED');
        expect(x.headers.map(([n]) => n)).not.toContain('x-injected');
      }
    });

    test.each([
      ['a tab and obs-text bytes', 'a\tb\xff\x80c'],
      ['a header-looking text', 'X-Injected: 1'],
      ['separators', ';,=()<>@"/[]?{}'],
      ['a 1 KiB value', 'v'.repeat(1024)],
    ])('odd but legal values (%s) in every header: only known response headers, none carrying the value but the CORS echo', async (_, value) => {
      const fields = REFLECTABLE.map((n) => `${n}: ${value}\r\n`).join('');
      for (const [method, path] of [['OPTIONS', '/v2/models/identity_fp32/infer'], ['GET', '/v2/health/live'], ['GET', '/v2/models/nope'], ['POST', '/v2/models/identity_fp32/infer']]) {
        const x = await exchange(gw.port, `${method} ${path} HTTP/1.1\r\nHost: x\r\n${fields}Content-Length: 0\r\nConnection: close\r\n\r\n`);
        expect(x.closed).toBe(true);
        expect([204, 200, 404, 400]).toContain(x.status);
        if (method === 'OPTIONS') expect(header(x, 'access-control-allow-headers')).toBe(value.trim());
        for (const [n, v] of x.headers) {
          expect(ALLOWED).toContain(n);
          if (n === 'access-control-allow-headers') expect(v).toBe(value.trim());
          else if (value.length > 3) expect(v).not.toContain(value);
        }
      }
    });
  });
});
