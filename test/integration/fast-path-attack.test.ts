// The HTTP/1.1 fast path (gateway/ingress/http1/fast.ts) probed as an attacker would, over raw
// sockets: framing that must match node:http's, and pipelines long enough to pause the socket.
import { connect, type Socket } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';

jest.setTimeout(30_000);

const open = async (gw: RunningGateway): Promise<Socket> => {
  const s = connect(gw.port, '127.0.0.1');
  s.on('error', () => undefined);
  await new Promise((resolve) => s.once('connect', resolve));
  return s;
};

/** Everything the gateway writes until it closes the connection (or `ms` pass). */
const readAll = (s: Socket, ms = 8000, answers = Infinity): Promise<string> => new Promise((resolve) => {
  const chunks: Buffer[] = [];
  const done = (): void => {
    clearTimeout(timer);
    resolve(Buffer.concat(chunks).toString('latin1'));
  };
  const timer = setTimeout(done, ms);
  s.on('data', (d: Buffer) => {
    chunks.push(d);
    if (statuses(Buffer.concat(chunks).toString('latin1')).length >= answers && d.toString('latin1').endsWith('}')) done();
  });
  s.once('close', done);
});

/** The status codes of the answers in `text`, in order. */
const statuses = (text: string): number[] => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

/** A V2 infer request of `simple` whose answer carries `k` (OUTPUT0 = INPUT0 + 1). */
const infer = (k: number, pad = 0): Buffer => {
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => k) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => 1) },
    ],
  }) + ' '.repeat(pad);
  return Buffer.from('POST /v2/models/simple/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n'
    + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1');
};

describe('the fast path under attack', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo']);
  });
  afterAll(async () => {
    await gw.close();
  });

  test('a pipeline past the 64 KiB of waiting bytes is answered whole and in order', async () => {
    const s = await open(gw);
    try {
      const n = 120; // ~3 KiB each: several pauses of the socket while an answer is under way
      const all = readAll(s, 15_000, n);
      s.write(Buffer.concat(Array.from({ length: n }, (_, k) => infer(k, 2500))));
      const text = await all;
      const sums = [...text.matchAll(/"OUTPUT0","datatype":"INT32","shape":\[1,16\],"data":\[(\d+),/g)].map((m) => Number(m[1]));
      expect(statuses(text)).toEqual(Array.from({ length: n }, () => 200));
      expect(sums).toEqual(Array.from({ length: n }, (_, k) => k + 1));
    } finally {
      s.destroy();
    }
  });
});
