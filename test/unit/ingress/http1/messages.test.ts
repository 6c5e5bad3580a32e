// The fast path's answer (gateway/ingress/http1/messages.ts FastResponse) writes what node:http's
// ServerResponse writes for the same calls, byte for byte but the Date: each handler below runs once
// on a node:http server and once on a FastResponse over a plain socket.
import { once } from 'node:events';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { FastRequest, FastResponse, plannedHead } from '../../../../gateway/ingress/http1/messages';

type Handler = (res: Pick<ServerResponse, 'setHeader' | 'writeHead' | 'write' | 'end' | 'cork' | 'uncork'>) => void;

const HANDLERS: [string, Handler][] = [
  ['setHeader, then writeHead with the same name in another case', (res) => {
    res.setHeader('A', '1');
    res.writeHead(404, { 'Content-Type': 'application/json', 'Content-Length': 2, a: '2' });
    res.end('{}');
  }],
  ['end(string) without a length', (res) => res.end('hello')],
  ['an array value and a number', (res) => {
    res.writeHead(200, { 'X-Many': ['a', 'b'], 'Content-Length': 3, 'Retry-After': 1 });
    res.end('abc');
  }],
  ['corked parts', (res) => {
    res.writeHead(503, { 'Content-Length': 6 });
    res.cork();
    res.write(Buffer.from('abc'));
    res.write('def');
    res.end();
    res.uncork();
  }],
  ['an empty body', (res) => {
    res.writeHead(204, { 'Content-Length': 0 });
    res.end();
  }],
];

const KEEP_ALIVE_MS = 5000;
const noFlow = { pauseReading: () => undefined, resumeReading: () => undefined, answered: () => undefined };

/** What a client reads from `start`'s server running `handler` (its Date masked). */
async function served(start: (handler: Handler) => Promise<{ port: number; close: () => void }>, handler: Handler): Promise<string> {
  const server = await start(handler);
  try {
    const c = connect(server.port, '127.0.0.1');
    let out = '';
    c.setEncoding('latin1');
    c.on('data', (d: string) => { out += d; });
    c.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    for (let i = 0; i < 100 && !/\r\n\r\n/.test(out); i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 30));
    c.destroy();
    return out.replace(/\r\nDate: [^\r]*/, '\r\nDate: -');
  } finally {
    server.close();
  }
}

async function nodeServer(handler: Handler): Promise<{ port: number; close: () => void }> {
  const s = createHttpServer({ keepAliveTimeout: KEEP_ALIVE_MS }, (_req, res) => handler(res));
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  return { port: (s.address() as AddressInfo).port, close: () => { s.close(); s.closeAllConnections(); } };
}

async function fastServer(handler: Handler): Promise<{ port: number; close: () => void }> {
  const sockets: Socket[] = [];
  const s = createServer((socket) => {
    sockets.push(socket);
    socket.once('data', () => {
      const req = new FastRequest(socket, 'GET', '/', { host: 'x' }, noFlow, ['Host', 'x']);
      handler(new FastResponse(req, socket, noFlow, true, KEEP_ALIVE_MS / 1000) as unknown as ServerResponse);
    });
  });
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  return { port: (s.address() as AddressInfo).port, close: () => { s.close(); for (const x of sockets) x.destroy(); } };
}

test.each(HANDLERS)('%s: the same bytes as node:http', async (_, handler) => {
  const viaNode = await served(nodeServer, handler);
  const viaFast = await served(fastServer, handler);
  expect(viaNode).toMatch(/^HTTP\/1\.1 /);
  expect(viaFast).toBe(viaNode);
});

// A planned answer's head and body in one buffer (plannedHead): what node:http writes for
// writeHead(200, headers) and end(body), whether the header set is shared (frozen) or not.
describe('plannedHead', () => {
  const bodies = [Buffer.alloc(0), Buffer.from('123456789'), Buffer.from('0123456789'), Buffer.alloc(1234, 7)];
  test.each(bodies.map((b) => [b.length, b] as const))('a %d-byte body: node:http\'s bytes, shared header set or not', async (_, body) => {
    const fields = { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': 2 };
    const viaNode = await served(nodeServer, (res) => {
      res.writeHead(200, { ...fields, 'Content-Length': body.length });
      res.end(body);
    });
    const frozen = Object.freeze({ ...fields });
    for (const headers of [fields, frozen, frozen]) {
      const head = plannedHead(headers, body.length, true, KEEP_ALIVE_MS / 1000, [body]).toString('latin1');
      expect(head.replace(/\r\nDate: [^\r]*/, '\r\nDate: -')).toBe(viaNode);
      expect(/\r\nDate: ([^\r]*)/.exec(head)![1]).toBe(new Date(Date.parse(/\r\nDate: ([^\r]*)/.exec(head)![1]!)).toUTCString());
    }
    const closing = plannedHead(frozen, body.length, false, KEEP_ALIVE_MS / 1000).toString('latin1');
    expect(closing).toMatch(new RegExp(`^HTTP/1\\.1 200 OK\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: 2\r\nContent-Length: ${body.length}\r\nDate: [^\r]+\r\nConnection: close\r\n\r\n$`));
  });

  test('a value node:http refuses throws its error, shared or not, each time', () => {
    for (const headers of [{ 'X-Bad': 'a\nb' }, Object.freeze({ 'X-Bad': 'a\nb' })]) {
      for (let i = 0; i < 2; i++) expect(() => plannedHead(headers, 0, true, 5)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_CHAR' }));
    }
  });
});
