// The one gRPC call on node:http2 (gateway/upstream/call/grpc-call.ts) against a tiny node:http2
// server that answers each :path its own way: the status from trailers, from a trailers-only
// answer, or missing; the reset (RST_STREAM CANCEL) before and after the answer's headers; and
// which failures are "never sent" (the only ones a call may be retried for).
import { constants, createServer, type Http2Server, type ServerHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { GatewayError } from '../../../../gateway/errors';
import { GrpcCall } from '../../../../gateway/upstream/call/grpc-call';
import { Connection } from '../../../../gateway/upstream/connections/h2-sessions';
import { wasNotSent } from '../../../../gateway/upstream/status';

/** A call that records what it is told. */
class Probe extends GrpcCall {
  readonly events: string[] = [];
  readonly pieces: Buffer[] = [];
  /** The answer's header and trailer fields, as the call was told them. */
  readonly blocks: Record<string, unknown>[] = [];
  error: GatewayError | undefined;
  readonly done: Promise<void>;
  #closed!: () => void;

  constructor(replays: boolean) {
    super(replays);
    this.done = new Promise((resolve) => { this.#closed = resolve; });
  }

  start(connection: Connection, path: string, deadline = Date.now() + 5000, corkFirst = false,
    headers: OutgoingHttpHeaders = { 'content-type': 'application/grpc', te: 'trailers' }): GatewayError | undefined {
    return this.open(connection, path, headers, deadline, corkFirst);
  }

  result(ended: boolean): GatewayError | undefined {
    return this.verdict(ended);
  }

  protected answerHeaders(h: IncomingHttpHeaders): void {
    this.events.push(this.status === undefined ? 'headers' : 'trailers-only');
    this.blocks.push(Object.fromEntries(Object.entries(h))); // its string-named fields (node:http2 adds a symbol)
  }

  protected chunk(c: Buffer): void { this.readMessage(c); }
  protected override message(view: Buffer): void { this.pieces.push(view); }
  protected trailers(t: IncomingHttpHeaders): void {
    this.events.push('trailers');
    this.blocks.push(Object.fromEntries(Object.entries(t)));
  }

  protected ended(): void { this.events.push('end'); }
  protected closed(): void {
    this.events.push('close');
    this.#closed();
  }

  protected failed(err: GatewayError): void {
    this.error = err;
    this.reset();
  }
}

const message = (body: Buffer): Buffer => {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
};

let server: Http2Server;
let address: string;
const seen: { path: string; headers: IncomingHttpHeaders; stream: ServerHttp2Stream; closed: Promise<number> }[] = [];

/**
 * Trailers to come, and no `date` field: node:http2's respond() adds one unless told not to (its
 * types omit the option).
 */
const NO_DATE = { waitForTrailers: true, sendDate: false };

function answer(stream: ServerHttp2Stream, path: string): void {
  switch (path) {
    case '/ok':
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' }));
      stream.end(message(Buffer.from('answer')));
      return;
    case '/triton': // Triton's own blocks, field for field
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity, deflate, gzip' }, NO_DATE);
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(message(Buffer.from('answer')));
      return;
    case '/odd-fields': // a name sent twice, a name Object.prototype has, metadata in the trailers
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-twice': ['a', 'b'], constructor: 'c' }, NO_DATE);
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-meta': 'm', 'grpc-message': '' }));
      stream.end(message(Buffer.from('answer')));
      return;
    case '/trailers-only':
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'no%20such%20model' }, { endStream: true });
      return;
    case '/no-status':
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.end(message(Buffer.from('answer')));
      return;
    case '/http-404':
      stream.respond({ ':status': 404 }, { endStream: true });
      return;
    case '/refuse':
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    case '/headers-then-hang':
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      return;
    default: // '/hang': nothing
  }
}

beforeAll(async () => {
  server = createServer();
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    stream.resume();
    const closed = new Promise<number>((resolve) => stream.on('close', () => resolve(stream.rstCode)));
    const path = String(headers[':path']);
    seen.push({ path, headers, stream, closed });
    answer(stream, path);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
});

const serverSide = async (path: string): Promise<(typeof seen)[number]> => {
  for (let i = 0; i < 200; i++) {
    const s = seen.find((x) => x.path === path);
    if (s !== undefined) return s;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`the server never saw ${path}`);
};

// Every call on both transports (upstream.http2Client): node:http2's, and our own HTTP/2 connection.
describe.each(['node', 'own'] as const)('on the %s HTTP/2 client', (client) => {
  let connection: Connection;
  beforeAll(() => {
    connection = new Connection(address, undefined, client);
  });
  afterAll(() => connection.close());

  test('the status from the trailers; the answer message as views; the headers every call sends', async () => {
    const call = new Probe(true);
    expect(call.start(connection, '/ok', Date.now() + 3000)).toBeUndefined();
    call.end(Buffer.alloc(0));
    await call.done;
    expect(call.events).toEqual(['headers', 'trailers', 'end', 'close']);
    expect(call.status).toBe(0);
    expect(call.result(true)).toBeUndefined();
    expect(Buffer.concat(call.pieces).toString()).toBe('answer');
    const { headers } = await serverSide('/ok');
    expect(headers[':method']).toBe('POST');
    expect(headers['content-type']).toBe('application/grpc');
    expect(headers['grpc-timeout']).toMatch(/^\d+m$/);
    expect(Number(/^(\d+)m$/.exec(String(headers['grpc-timeout']))![1])).toBeLessThanOrEqual(3000);
  });

  test('the answer\'s fields as node:http2 gives them: Triton\'s blocks, a name sent twice, a name Object.prototype has', async () => {
    const triton = new Probe(true);
    triton.start(connection, '/triton');
    triton.end(Buffer.alloc(0));
    await triton.done;
    expect(triton.blocks).toEqual<Record<string, unknown>[]>([
      { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity, deflate, gzip' },
      { 'grpc-status': '0' },
    ]);
    const odd = new Probe(true);
    odd.start(connection, '/odd-fields');
    odd.end(Buffer.alloc(0));
    await odd.done;
    expect(odd.status).toBe(0);
    expect(odd.blocks).toEqual<Record<string, unknown>[]>([
      { ':status': 200, 'content-type': 'application/grpc', 'x-twice': 'a, b', constructor: 'c' },
      { 'grpc-status': '0', 'x-meta': 'm', 'grpc-message': '' },
    ]);
  });

  test('a shared (frozen) header set: each call sends its own path, the set\'s fields and its own grpc-timeout', async () => {
    const shared = Object.freeze({ 'content-type': 'application/grpc', te: 'trailers', 'x-shared': 'one' });
    const calls: [string, OutgoingHttpHeaders, number][] = [
      ['/ok', shared, 3000], ['/ok', shared, 2000], ['/trailers-only', shared, 3000], ['/ok', shared, 1000],
      ['/ok', { ...shared, 'x-shared': 'own' }, 3000], ['/ok', Object.freeze({ ...shared, 'x-shared': 'two' }), 3000],
    ];
    for (const [path, headers, ms] of calls) {
      seen.length = 0;
      const call = new Probe(true);
      // node:http2's open() writes its fields into the object it is given: a whole call copies a shared set for it.
      expect(call.start(connection, path, Date.now() + ms, false, client === 'own' ? headers : { ...headers })).toBeUndefined();
      call.end(Buffer.alloc(0));
      await call.done;
      const side = await serverSide(path);
      expect([side.headers[':method'], side.headers[':path'], side.headers['x-shared'], side.headers.te]).toEqual(['POST', path, headers['x-shared'], 'trailers']);
      expect(side.headers[':authority']).toBe(address);
      expect(Number(/^(\d+)m$/.exec(String(side.headers['grpc-timeout']))![1])).toBeLessThanOrEqual(ms);
      expect(Number(/^(\d+)m$/.exec(String(side.headers['grpc-timeout']))![1])).toBeGreaterThan(ms - 1000);
    }
  });

  test('the status from a trailers-only answer', async () => {
    const call = new Probe(true);
    call.start(connection, '/trailers-only');
    call.end();
    await call.done;
    expect(call.events).toEqual(['trailers-only', 'end', 'close']);
    expect([call.status, call.statusMessage]).toEqual([5, 'no such model']);
    expect(call.result(true)).toMatchObject({ code: 'GW_ERR_UPSTREAM_STATUS', message: 'no such model', grpcCode: 5 });
  });

  test('an answer that ends without a status breaks the protocol, and is not "never sent"', async () => {
    const call = new Probe(true);
    call.start(connection, '/no-status');
    call.end();
    await call.done;
    expect(call.status).toBeUndefined();
    const err = call.result(true)!;
    expect(err.code).toBe('GW_ERR_UPSTREAM_PROTOCOL');
    expect(err.message).toMatch(/ended without a gRPC status$/);
    expect(wasNotSent(err)).toBe(false);
  });

  test('an answer that is not gRPC (HTTP 404) fails the call, with the HTTP status as a gRPC code', async () => {
    const call = new Probe(true);
    call.start(connection, '/http-404');
    call.end();
    await call.done;
    expect(call.error).toMatchObject({ code: 'GW_ERR_UPSTREAM_PROTOCOL', grpcCode: 12 });
    expect(call.error!.message).toMatch(/answered HTTP 404 instead of a gRPC response$/);
  });

  test('reset before the answer\'s headers: RST_STREAM CANCEL reaches the server; the failure is not "never sent"', async () => {
    const call = new Probe(true);
    call.start(connection, '/hang');
    const server = await serverSide('/hang');
    call.reset();
    expect(await server.closed).toBe(constants.NGHTTP2_CANCEL);
    await call.done;
    const err = call.failure(false);
    expect(err.message).toMatch(/no answer from 127\.0\.0\.1:\d+ \(stream reset 8\)$/);
    expect(wasNotSent(err)).toBe(false);
  });

  test('reset after the answer\'s headers: RST_STREAM CANCEL; reset before its gRPC status', async () => {
    const call = new Probe(true);
    call.start(connection, '/headers-then-hang');
    call.write(message(Buffer.from('request')));
    const server = await serverSide('/headers-then-hang');
    for (let i = 0; i < 200 && !call.headersSeen; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(call.events).toEqual(['headers']);
    call.reset();
    expect(await server.closed).toBe(constants.NGHTTP2_CANCEL);
    await call.done;
    const err = call.failure(false);
    expect(err.message).toMatch(/stream from 127\.0\.0\.1:\d+ reset \(8\) before its gRPC status$/);
    expect(wasNotSent(err)).toBe(false);
  });

  test('a call corked at open and reset before it wrote anything leaves the connection to the others', async () => {
    const corked = new Probe(true);
    corked.start(connection, '/hang', Date.now() + 5000, true);
    corked.reset();
    await corked.done;
    const next = new Probe(true);
    next.start(connection, '/ok');
    next.end(message(Buffer.from('request')));
    await next.done;
    expect(next.result(true)).toBeUndefined();
  });

  describe('never sent: the only failures a call may be retried for', () => {
    test('the connection failed: never sent', async () => {
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      const nowhere = new Connection(`127.0.0.1:${port}`, undefined, client);
      const call = new Probe(true);
      call.start(nowhere, '/ok');
      call.write(Buffer.from('kept by the caller'));
      await call.done;
      expect(call.openedNs).toBe(0);
      const err = call.failure(false);
      expect(err.message).toBe(`upstream unavailable: no answer from 127.0.0.1:${port} (connection failed)`);
      expect(wasNotSent(err)).toBe(true);
      nowhere.close();
    });

    test('REFUSED_STREAM: never sent when nothing written is lost (kept by the caller, or none written)', async () => {
      const calls = [new Probe(true), new Probe(false), new Probe(false)];
      calls[0]!.start(connection, '/refuse');
      calls[0]!.write(Buffer.from('kept by the caller'));
      calls[1]!.start(connection, '/refuse');
      calls[2]!.start(connection, '/refuse');
      calls[2]!.write(Buffer.from('kept by nobody'));
      await Promise.all(calls.map((c) => c.done));
      expect(calls.map((c) => c.openedNs !== 0)).toEqual([true, true, true]);
      expect(calls.map((c) => wasNotSent(c.failure(false)))).toEqual([true, true, false]);
      expect(calls[0]!.failure(false).message).toMatch(/\(stream reset 7\)$/);
    });
  });
});

describe('never sent', () => {
  test('a session that refuses new streams (closed, or GOAWAY received): open() returns the error, never sent', () => {
    const refusing = {
      address: '127.0.0.1:1', authority: {},
      session: () => ({ request: () => { throw new Error('The session has been destroyed'); } }),
    } as unknown as Connection;
    const call = new Probe(true);
    const err = call.start(refusing, '/ok');
    expect(err).toMatchObject({ code: 'GW_ERR_UPSTREAM_UNAVAILABLE', message: 'upstream unavailable: The session has been destroyed' });
    expect(wasNotSent(err)).toBe(true);
  });
});

// SETTINGS_MAX_CONCURRENT_STREAMS 1: node:http2 queues the second stream inside nghttp2 until the
// first is done; the own client opens a second connection to the backend (h2-sessions.ts).
describe.each(['node', 'own'] as const)('a server that takes one stream at a time, on the %s client', (client) => {
  let one: Http2Server;
  let sessions = 0;
  beforeAll(async () => {
    one = createServer({ settings: { maxConcurrentStreams: 1 } });
    one.on('session', () => sessions++);
    one.on('stream', (stream) => {
      stream.on('error', () => undefined);
      stream.resume();
      setTimeout(() => answer(stream, '/ok'), 30);
    });
    await new Promise<void>((resolve) => one.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise((resolve) => one.close(resolve)));

  test('calls at once all answer', async () => {
    const c = new Connection(`127.0.0.1:${(one.address() as AddressInfo).port}`, undefined, client);
    try {
      const first = new Probe(true); // the server's SETTINGS are known once it answered
      first.start(c, '/ok');
      first.end();
      await first.done;
      const calls = [new Probe(true), new Probe(true), new Probe(true)];
      for (const call of calls) {
        expect(call.start(c, '/ok')).toBeUndefined();
        call.end();
      }
      await Promise.all(calls.map((call) => call.done));
      expect(calls.map((call) => [call.status, call.result(true)])).toEqual([[0, undefined], [0, undefined], [0, undefined]]);
      expect(sessions).toBe(client === 'own' ? 3 : 1);
    } finally {
      c.close();
    }
  });
});
