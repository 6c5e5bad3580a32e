// Pass-through routes against a local HTTP upstream: the path normalised (and refused when it
// cannot be) before it is matched, the query unchanged, hop-by-hop headers
// dropped both ways, X-Forwarded-*, bodies streamed both ways (the answer starts before the request
// has ended), timeouts (504), an unreachable upstream (502), and a client abort reaching the upstream.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type AddressInfo, connect as netConnect } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { makePki, pemText } from '../support/certs';
import { gatewayFor } from '../support/gateway';
import { CURL, needs, OPENSSL } from '../support/tools';
import { curl } from '../support/curl';

let upstream: Server;
let gw: RunningGateway;
let handler: (req: IncomingMessage, res: ServerResponse) => void = () => {};
let deadPort = 0;

beforeAll(async () => {
  upstream = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  deadPort = (dead.address() as AddressInfo).port;
  await new Promise((r) => dead.close(r));
  gw = await gatewayFor(['--demo', '--passthrough', JSON.stringify([
    { prefix: '/legacy', upstream: `http://127.0.0.1:${port}`, timeoutMs: 300 },
    // A stricter route below it, listed after it: model-repository, disabled by default (api.disabled).
    { prefix: '/legacy/admin', upstream: `http://127.0.0.1:${port}`, category: 'model-repository' },
    // One whose prefix holds ':' (a sub-delim or '@' alike), as Vertex-style /models/foo:predict paths do.
    { prefix: '/legacy/a:b', upstream: `http://127.0.0.1:${port}`, category: 'model-repository' },
    { prefix: '/gone/', upstream: `http://127.0.0.1:${deadPort}` },
  ])]);
});
afterAll(async () => {
  await gw?.close();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

interface Reply { status: number; headers: IncomingMessage['headers']; body: Buffer }

function send(path: string, opts: { method?: string; headers?: Record<string, string>; body?: Buffer } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    // host/port/path given apart: a URL string would resolve the dot segments before sending.
    const { hostname, port } = new URL(gw.url);
    const req = request({ hostname, port, path, method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

test('path normalised, query unchanged, hop-by-hop headers dropped both ways, X-Forwarded-*', async () => {
  let seen: { url: string; method: string; headers: IncomingMessage['headers'] } | undefined;
  handler = (req, res) => {
    seen = { url: req.url!, method: req.method!, headers: req.headers };
    res.writeHead(201, { 'Content-Type': 'text/plain', 'X-Legacy': 'yes', Connection: 'close, x-hop', 'X-Hop': 'secret', 'Keep-Alive': 'timeout=5' });
    res.end('created');
  };
  const r = await send('/legacy/a/../b%7ec//./d%3a%3f?x=1&y=%20/../', {
    method: 'PUT',
    headers: { Connection: 'x-private', 'X-Private': '1', 'X-Kept': 'k', 'Proxy-Authorization': 'Basic eA==', Cookie: 'session=s3cret', TE: 'trailers', 'X-Forwarded-For': '10.0.0.1' },
    body: Buffer.from('payload'),
  });
  expect(seen!.url).toBe('/legacy/b~c/d:%3F?x=1&y=%20/../');
  expect(seen!.method).toBe('PUT');
  expect(seen!.headers['x-kept']).toBe('k');
  for (const h of ['x-private', 'proxy-authorization', 'cookie', 'te']) expect(seen!.headers[h]).toBeUndefined();
  expect(seen!.headers['x-forwarded-for']).toBe('10.0.0.1, 127.0.0.1');
  expect(seen!.headers['x-forwarded-host']).toBe(new URL(gw.url).host);
  expect(seen!.headers['x-forwarded-proto']).toBe('http');
  expect(r.status).toBe(201);
  expect(r.body.toString()).toBe('created');
  expect(r.headers['x-legacy']).toBe('yes');
  expect(r.headers['x-hop']).toBeUndefined();
  expect(r.headers['keep-alive']).not.toBe('timeout=5');
  // the prefix itself, and not a longer name
  handler = (req, res) => res.end(req.url);
  expect((await send('/legacy')).body.toString()).toBe('/legacy');
  expect((await send('/legacyx')).status).toBe(404);
});

describe('paths are normalised before they are matched (RFC 3986 §6.2.2)', () => {
  const through: string[] = [];
  beforeEach(() => {
    through.length = 0;
    handler = (req, res) => {
      through.push(req.url!);
      res.end(req.url);
    };
  });

  test.each(['/legacy//admin/x', '/legacy/./admin/x', '/legacy/x/../admin/x', '/legacy/%61dmin/x', '/legacy/%2e/admin/x', '/legacy/admin', '/legacy/admin/x',
    '/legacy/a:b/x', '/legacy/a%3Ab/x', '/legacy/a%3ab'])(
    '%s is /legacy/admin/… or /legacy/a:b/…: the stricter route (disabled) answers, nothing goes upstream', async (path) => {
      const r = await send(path);
      expect([r.status, r.headers['x-tensorgate-error']]).toEqual([403, 'GW_ERR_ROUTE_DISABLED']);
      expect(through).toEqual([]);
    });

  test.each([
    ['/legacy/a%2Fb', 'an encoded slash (%2F)'], ['/legacy/a%2fb', 'an encoded slash (%2F)'], ['/legacy/a%5Cb', 'an encoded backslash (%5C)'],
    ['/legacy/a\\b', "a backslash in the path (RFC 3986 §3.3 allows only pchar and '/')"], ['/legacy/%zz', 'a malformed percent-encoding'],
    // Path parameters: Tomcat, Jetty and Spring read both as /legacy/admin/secret.
    ['/legacy/admin;x/secret', "a ';' in the path (a path parameter to Java servers)"], ['/legacy/..;/admin/secret', "a ';' in the path (a path parameter to Java servers)"],
    ['/legacy/admin%3Bx/secret', "an encoded ';' (%3B, a path parameter to Java servers once decoded)"],
    // nginx and uvicorn end the path at '#': /legacy/admin to them.
    ['/legacy/admin#/x', "a '#' in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    ['/legacy/%252e%252e/admin', "an encoded '%' (%25)"], ['/legacy/a%00', 'an encoded control character (%00)'],
    ['/legacy/../v2/models/simple/infer', 'its dot segments leave /legacy'], ['/legacy/x/../../admin', 'its dot segments leave /legacy'],
    ['/legacy/%2e%2e/admin', 'its dot segments leave /legacy'], ['/legacy/../../..', 'dot segments above the root'],
  ])('%s: 400, nothing upstream', async (path, problem) => {
    const r = await send(path);
    expect([r.status, r.headers['x-tensorgate-error'], r.body.toString()]).toEqual([400, 'GW_ERR_PASSTHROUGH_PATH_INVALID', JSON.stringify({ error: `the path is refused: ${problem}` })]);
    expect(through).toEqual([]);
  });

  test('a raw space or a byte outside ASCII in the path: 400 (or the HTTP parser\'s own 400), nothing upstream', async () => {
    for (const target of [Buffer.from('/legacy/admin x'), Buffer.from('/legacy/\u00e9', 'latin1'), Buffer.from('/legacy/\u00e9', 'utf8')]) {
      const { hostname, port } = new URL(gw.url);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = netConnect(Number(port), hostname, () => socket.end(Buffer.concat([Buffer.from('GET '), target, Buffer.from(' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')])));
        let text = '';
        socket.setEncoding('latin1').on('data', (d: string) => { text += d; }).on('close', () => resolve(text)).on('error', reject);
      });
      expect([target.toString('latin1'), answer.slice(0, 12)]).toEqual([target.toString('latin1'), 'HTTP/1.1 400']);
    }
    expect(through).toEqual([]);
  });

  test('what goes upstream is the normalised path', async () => {
    for (const [sent, got] of [['/legacy//x///y', '/legacy/x/y'], ['/legacy/x/./y/..', '/legacy/x/'], ['/legacy/%7Euser/%41%62c?q=%2F', '/legacy/~user/Abc?q=%2F'],
      ['/legacy/%c3%a9', '/legacy/%C3%A9'], ['/legacy/x%3a%40%2b', '/legacy/x:@+'], ['/elsewhere/../legacy/x', '/legacy/x'], ['/legacy/administrator', '/legacy/administrator']]) {
      const r = await send(sent!);
      expect([sent, r.status, r.body.toString()]).toEqual([sent, 200, got]);
    }
  });

  needs(CURL()).test('curl --path-as-is agrees: the dot segments and double slashes it sends reach the stricter route', async () => {
    const status = async (path: string): Promise<number> => (await curl('--path-as-is', `${gw.url}${path}`)).status;
    expect(await status('/legacy/./admin/x')).toBe(403);
    expect(await status('/legacy//admin/x')).toBe(403);
    expect(await status('/legacy/x/../admin/x')).toBe(403);
    expect(await status('/legacy/../etc/passwd')).toBe(400);
    expect(await status('/legacy/x/./y')).toBe(200);
    expect(through).toEqual(['/legacy/x/y']);
  });
});

test('grpc-timeout is the upstream\'s header on a pass-through route: relayed, never parsed (not a 400 when it is no gRPC timeout)', async () => {
  let seen: string | undefined;
  handler = (req, res) => {
    seen = req.headers['grpc-timeout'] as string | undefined;
    res.end('ok');
  };
  const r = await send('/legacy/x', { headers: { 'grpc-timeout': 'whenever' } });
  expect([r.status, r.body.toString(), seen]).toEqual([200, 'ok', 'whenever']);
});

needs(OPENSSL()).test('X-Forwarded-Proto is https when the client came over TLS (server.tls)', async () => {
  const pki = makePki();
  let seen: string | undefined;
  handler = (req, res) => {
    seen = req.headers['x-forwarded-proto'] as string | undefined;
    res.end('ok');
  };
  const secure = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--passthrough',
    JSON.stringify([{ prefix: '/legacy', upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` }])]);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest(`${secure.url}/legacy/y`, { ca: pemText(pki.ca.cert), servername: 'localhost', agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.end();
    });
    expect([status, seen]).toEqual([200, 'https']);
  } finally {
    await secure.close(2000);
    pki.remove();
  }
});

test('streaming both ways: the answer starts before the request body has ended', async () => {
  handler = (req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    req.on('data', (c: Buffer) => res.write(c)); // echo each piece as it arrives
    req.on('end', () => res.end());
  };
  const piece = Buffer.alloc(64 * 1024, 7);
  const got = await new Promise<Buffer>((resolve, reject) => {
    const req = request(`${gw.url}/legacy/echo`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' } }, (res) => {
      const chunks: Buffer[] = [];
      let first = true;
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        if (first) {
          first = false;
          // Only now the rest of the body: the echo of the first piece came back through the gateway.
          req.end(Buffer.alloc(64 * 1024, 9));
        }
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
    });
    req.on('error', reject);
    req.write(piece);
  });
  expect(got.length).toBe(128 * 1024);
  expect(got.subarray(0, 64 * 1024).every((b) => b === 7)).toBe(true);
  expect(got.subarray(64 * 1024).every((b) => b === 9)).toBe(true);
});

test('an upstream that does not answer in time: 504; one that is down: 502', async () => {
  handler = () => { /* never answers */ };
  const slow = await send('/legacy/slow');
  expect(slow.status).toBe(504);
  expect(slow.headers['x-tensorgate-error']).toBe('GW_ERR_PASSTHROUGH_TIMEOUT');
  const down = await send('/gone/x');
  expect(down.status).toBe(502);
  expect(down.headers['x-tensorgate-error']).toBe('GW_ERR_PASSTHROUGH_UNAVAILABLE');
  expect(JSON.parse(down.body.toString()).error).toContain(`upstream http://127.0.0.1:${deadPort} failed`);
});

test('a client that goes away aborts the upstream request', async () => {
  const upstreamClosed = new Promise<void>((resolve) => {
    handler = (req, res) => {
      res.writeHead(200);
      res.write('partial'); // keep the answer open
      res.on('close', () => resolve());
    };
  });
  await new Promise<void>((resolve) => {
    const req = request(`${gw.url}/legacy/long`, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => {});
    req.end();
  });
  await upstreamClosed; // would hang (and time out the test) if the abort did not propagate
});
