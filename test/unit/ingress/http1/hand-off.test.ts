// How the fast path will give a connection to node:http when a head is outside HeadParser's subset
// (gateway/ingress/http1/head.ts), pinned on the Node this runs: the bytes read so far put back
// with socket.unshift, and the socket handed to node:http as a new connection (its server's
// 'connection' listener, as ingress/server.ts cleartextServer already does after the protocol
// sniff). Both ways of reading before the hand-off work: 'data' events on the accepted socket, and
// a socket that adopted the accepted handle with `onread` (private Node API, see
// test/unit/ingress/adopted-socket.test.ts) — node:http then consumes the handle itself (Node's
// lib/_http_server.js connectionListenerInternal, parser.consume), so the onread callback is not
// called again. node:http reads the handed-off request, its body split across later reads, and
// the request pipelined after it on the same connection.
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import * as net from 'node:net';
import { ACCEPTED, HAND_OFF, HeadParser } from '../../../../gateway/ingress/http1/head';

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100, maxUrlBytes: 8192 };

type Mode = 'data' | 'onread';

/** A front that answers accepted heads itself ("fast /path"), and gives the connection to node:http at any other. */
async function front(mode: Mode): Promise<{ port: number; close: () => void; readsAfterHandOff: () => number }> {
  const http = createHttpServer((req, res) => {
    let n = 0;
    req.on('data', (c: Buffer) => { n += c.length; });
    req.on('end', () => res.end(`node ${req.method} ${req.url} ${n}\n`));
  });
  let after = 0;
  const handOff = (socket: net.Socket, bytes: Buffer): void => {
    socket.unshift(bytes);
    http.emit('connection', socket);
    socket.resume();
  };
  const server = net.createServer({ pauseOnConnect: mode === 'onread' }, (accepted) => {
    const head = new HeadParser(LIMITS);
    if (mode === 'data') {
      const onData = (d: Buffer): void => {
        const v = head.feed(d, 0, d.length);
        if (v === ACCEPTED) accepted.write(`fast ${head.target()}\n`);
        if (v !== HAND_OFF) return;
        accepted.removeListener('data', onData);
        accepted.pause();
        handOff(accepted, Buffer.concat([head.carried(), d]));
      };
      accepted.on('data', onData);
      return;
    }
    const a = accepted as unknown as { _handle: unknown };
    const handle = a._handle;
    a._handle = null;
    let handed = false;
    const onread = {
      buffer: Buffer.allocUnsafe(64 * 1024),
      callback: (n: number, buf: Buffer): boolean => {
        if (handed) after++;
        const v = head.feed(buf, 0, n);
        if (v === ACCEPTED) socket.write(`fast ${head.target()}\n`);
        if (v !== HAND_OFF) return true;
        handed = true;
        const bytes = Buffer.concat([head.carried(), buf.subarray(0, n)]); // the read buffer is reused
        socket.pause();
        setImmediate(() => handOff(socket, bytes));
        return false;
      },
    };
    const socket = new net.Socket({ handle, onread, readable: true, writable: true } as unknown as net.SocketConstructorOpts);
    socket.on('close', () => accepted.destroy());
    socket.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => { server.close(); http.close(); },
    readsAfterHandOff: () => after,
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test.each<Mode>(['data', 'onread'])('%s: a head outside the subset goes to node:http with its bytes, and the connection stays node:http\'s', async (mode) => {
  const f = await front(mode);
  try {
    const c = net.connect(f.port, '127.0.0.1');
    let out = '';
    c.on('data', (d: Buffer) => { out += d.toString('latin1'); });
    c.write('GET /fast HTTP/1.1\r\nHost: a\r\n\r\n');
    await sleep(30);
    c.write('PUT /slow HTTP/1.1\r\nHost: a\r\nContent-'); // PUT: handed off at its second byte
    await sleep(30);
    c.write('Length: 3\r\n\r\nab');
    await sleep(30);
    c.write('cGET /second HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    const timer = setTimeout(() => c.destroy(), 3000);
    await once(c, 'close');
    clearTimeout(timer);
    const bodies = out.split(/HTTP\/1\.1 200 OK\r\n[^]*?\r\n\r\n/);
    expect(bodies).toEqual(['fast /fast\n', 'node PUT /slow 3\n', 'node GET /second 0\n']);
    expect(f.readsAfterHandOff()).toBe(0);
  } finally {
    f.close();
  }
});
