// The second bound on a connection's first request head (gateway/ingress/first-head.ts), on a bare
// node:http server whose own headers timeout is off, so that only the bound under test can cut; and
// the hard cut one bound later when the clientError path does not close the connection.
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { firstHeadBound } from '../../gateway/ingress/first-head';
import { nextEvent } from '../support/wait';

let server: Server;
const timeouts: Socket[] = [];

beforeAll(async () => {
  server = createServer({ headersTimeout: 0, requestTimeout: 0 }, (_req, res) => res.end('ok'));
  server.on('connection', firstHeadBound(server, 300).bound);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') timeouts.push(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const port = (): number => (server.address() as AddressInfo).port;

test('a first head still incomplete at the bound goes to clientError as ERR_HTTP_REQUEST_TIMEOUT; the connection closes', async () => {
  const before = timeouts.length;
  const slow = connect(port(), '127.0.0.1');
  slow.on('error', () => undefined);
  slow.write('GET / HTTP/1.1\r\nHost: x\r\n'); // never the blank line
  await nextEvent(slow, 'close', 10_000);
  expect(timeouts.length).toBe(before + 1);
});

test('a connection whose first request arrived is not cut by it (later heads are Node\'s to bound)', async () => {
  const before = timeouts.length;
  const s = connect(port(), '127.0.0.1');
  s.on('error', () => undefined);
  s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  await nextEvent(s, 'data', 5000);
  // Idle well past the bound: still open, nothing reported.
  await new Promise((resolve) => setTimeout(resolve, 600));
  expect([s.destroyed, timeouts.length]).toEqual([false, before]);
  s.destroy();
});

test('a clientError path that never closes the connection: the bound destroys it one bound later', async () => {
  const deaf = createServer({ headersTimeout: 0, requestTimeout: 0 }, (_req, res) => res.end('ok'));
  deaf.on('connection', firstHeadBound(deaf, 300).bound);
  let told = 0;
  deaf.on('clientError', () => told++); // answers nothing, closes nothing
  await new Promise<void>((resolve) => deaf.listen(0, '127.0.0.1', resolve));
  try {
    const slow = connect((deaf.address() as AddressInfo).port, '127.0.0.1');
    slow.on('error', () => undefined);
    slow.write('GET / HTTP/1.1\r\nHost: x\r\n');
    const t0 = performance.now();
    await nextEvent(slow, 'close', 10_000);
    expect(told).toBe(1);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(550);
  } finally {
    deaf.closeAllConnections();
    await new Promise<void>((resolve) => deaf.close(() => resolve()));
  }
});
