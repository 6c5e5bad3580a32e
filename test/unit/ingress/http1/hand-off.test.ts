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
    /** Reads the heads in buf[0, n) (bodiless: GETs are all this front accepts); the bytes to hand off, if any. */
    const read = (socket: net.Socket, buf: Buffer, n: number): Buffer | undefined => {
      for (let at = 0; at < n;) {
        const v = head.feed(buf, at, n);
        if (v === HAND_OFF) return Buffer.concat([head.carried(), buf.subarray(at, n)]); // a copy: the read buffer is reused
        if (v !== ACCEPTED) return undefined;
        socket.write(`fast ${head.target()}\n`);
        at = head.bodyStart + head.contentLength;
      }
      return undefined;
    };
    if (mode === 'data') {
      const onData = (d: Buffer): void => {
        const bytes = read(accepted, d, d.length);
        if (bytes === undefined) return;
        accepted.removeListener('data', onData);
        accepted.pause();
        handOff(accepted, bytes);
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
        const bytes = read(socket, buf, n);
        if (bytes === undefined) return true;
        handed = true;
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
    close: () => {
      server.close();
      http.close();
      http.closeAllConnections();
    },
    readsAfterHandOff: () => after,
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

test.each<Mode>(['data', 'onread'])('%s: a head outside the subset goes to node:http with its bytes, and the connection stays node:http\'s', async (mode) => {
  const f = await front(mode);
  let c: net.Socket | undefined;
  try {
    const client = net.connect(f.port, '127.0.0.1');
    c = client;
    const closed = once(client, 'close'); // node:http may close it before the last write's turn ends
    let out = '';
    client.on('data', (d: Buffer) => { out += d.toString('latin1'); });
    client.write('GET /fast HTTP/1.1\r\nHost: a\r\n\r\n');
    await sleep(30);
    client.write('POST /slow HTTP/1.1\r\nHost: a\r\nContent-');
    await sleep(30);
    client.write('Length: 3\r\nConnection: keep-alive, te\r\n\r\nab'); // handed off in this read, the head's start carried
    await sleep(30);
    client.write('cGET /second HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    const timer = setTimeout(() => client.destroy(), 3000);
    await closed;
    clearTimeout(timer);
    const bodies = out.split(/HTTP\/1\.1 200 OK\r\n[^]*?\r\n\r\n/);
    expect(bodies).toEqual(['fast /fast\n', 'node POST /slow 3\n', 'node GET /second 0\n']);
    expect(f.readsAfterHandOff()).toBe(0);
  } finally {
    c?.destroy();
    f.close();
  }
}, 10_000);
