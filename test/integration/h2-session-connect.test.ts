// A session to Triton destroyed between its socket's connect and Node's 'connect' event, which
// Node emits a tick later even for a destroyed session (observed on Node 24): the gateway's
// 'connect' handler must not touch it. Setting the window there threw ERR_HTTP2_INVALID_SESSION,
// an uncaught exception that would end the process (a plane closing at shutdown can do this).
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Connection } from '../../gateway/upstream/connections/h2-sessions';

describe('an upstream session destroyed as it connects', () => {
  let server: Http2Server;
  beforeAll(async () => {
    server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  test("no exception from Node's late 'connect' event", async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => { uncaught.push(err); };
    process.on('uncaughtException', onUncaught);
    try {
      const c = new Connection(`127.0.0.1:${(server.address() as AddressInfo).port}`, undefined, 'node');
      const session = c.session();
      const connected = new Promise<boolean>((r) => session.once('connect', () => r(session.destroyed)));
      session.socket.once('connect', () => session.destroy());
      expect(await connected).toBe(true);
      await new Promise((r) => setImmediate(r));
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});
