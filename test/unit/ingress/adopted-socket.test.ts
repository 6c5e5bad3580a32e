// The private Node API a read loop of our own stands on (bench/read-loop.js measures one): a
// net.Server does not give the sockets it accepts `onread`, so an accepted connection (server option
// pauseOnConnect) is adopted by a second net.Socket built with `{ handle: accepted._handle, onread }`
// — the `handle` option is marked private in Node's lib/net.js. Pinned here so that a Node upgrade
// that changes either fails loudly: onread still ignored by net.createServer (when it stops being
// ignored, the public API can replace the adoption); an adopted socket's bytes arrive through the
// callback into the very buffers supplied, never as 'data'; reads can exceed 64 KiB; pause() and
// resume() stop and restart reads; and the server's count of connections still comes back to zero.
import { once } from 'node:events';
import * as net from 'node:net';

interface Adopted {
  readonly server: net.Server;
  readonly port: number;
  /** Resolves with each adopted socket. */
  readonly next: () => Promise<net.Socket>;
}

type OnRead = { buffer: Buffer | (() => Buffer); callback: (n: number, buf: Buffer) => boolean | void };

async function adoptingServer(onread: () => OnRead): Promise<Adopted> {
  const waiting: ((s: net.Socket) => void)[] = [];
  const ready: net.Socket[] = [];
  const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
    const a = accepted as unknown as { _handle: unknown };
    const handle = a._handle;
    a._handle = null;
    const socket = new net.Socket({ handle, onread: onread() } as unknown as net.SocketConstructorOpts);
    socket.on('close', () => accepted.destroy());
    const w = waiting.shift();
    if (w !== undefined) w(socket);
    else ready.push(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const next = (): Promise<net.Socket> => {
    const s = ready.shift();
    return s !== undefined ? Promise.resolve(s) : new Promise((resolve) => waiting.push(resolve));
  };
  return { server, port, next };
}

async function connect(port: number): Promise<net.Socket> {
  const c = net.connect(port, '127.0.0.1');
  await once(c, 'connect');
  return c;
}

const close = (server: net.Server): Promise<void> => new Promise((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));

test('net.createServer still ignores onread: accepted sockets emit data in buffers Node allocates', async () => {
  const mine = Buffer.alloc(1024);
  let calls = 0;
  const server = net.createServer({ onread: { buffer: mine, callback: () => { calls++; } } } as net.ServerOpts, (s) => {
    s.once('data', (d: Buffer) => {
      s.end(String(d.buffer === mine.buffer));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const c = await connect((server.address() as net.AddressInfo).port);
  c.write('hello');
  const [answer] = await once(c, 'data') as [Buffer];
  expect(answer.toString()).toBe('false');
  expect(calls).toBe(0);
  c.destroy();
  await close(server);
});

test('an adopted socket reads into the buffers supplied, never emits data, and the server closes after it', async () => {
  const supplied = new Set<Buffer>();
  const seen: Buffer[] = [];
  let foreign = 0;
  const { server, port, next } = await adoptingServer(() => ({
    buffer: () => { const b = Buffer.alloc(1 << 20); supplied.add(b); return b; },
    callback: (n, buf) => {
      if (!supplied.has(buf)) foreign++;
      seen.push(Buffer.from(buf.subarray(0, n)));
    },
  }));
  const client = await connect(port);
  const socket = await next();
  socket.on('data', () => { throw new Error("an adopted socket emitted 'data'"); });
  const payload = Buffer.alloc(4 << 20);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  for (let at = 0; at < payload.length; at += 1 << 19) client.write(payload.subarray(at, at + (1 << 19)));
  client.end();
  await once(socket, 'end');
  expect(foreign).toBe(0);
  expect(Buffer.concat(seen).equals(payload)).toBe(true);
  expect(Math.max(...seen.map((b) => b.length))).toBeGreaterThan(64 * 1024);
  socket.destroy();
  await close(server); // resolves only once the accepted socket's count came back to zero
});

test('pause() stops an adopted socket\'s reads and resume() restarts them', async () => {
  const buf = Buffer.alloc(64 * 1024);
  let bytes = 0;
  const { server, port, next } = await adoptingServer(() => ({ buffer: buf, callback: (n) => { bytes += n; } }));
  const client = await connect(port);
  const socket = await next();
  client.write('a');
  while (bytes < 1) await new Promise((r) => setTimeout(r, 5));
  socket.pause();
  client.write('bcd');
  await new Promise((r) => setTimeout(r, 100));
  expect(bytes).toBe(1);
  socket.resume();
  while (bytes < 4) await new Promise((r) => setTimeout(r, 5));
  expect(bytes).toBe(4);
  client.destroy();
  await once(socket, 'close');
  await close(server);
});
