// The fast path's answer (gateway/ingress/http1/messages.ts FastResponse) writes what node:http's
// ServerResponse writes for the same calls, byte for byte but the Date: each handler below runs once
// on a node:http server and once on a FastResponse over a plain socket.
import { once } from 'node:events';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { FastRequest, FastResponse } from '../../../../gateway/ingress/http1/messages';

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
