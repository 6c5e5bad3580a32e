// upstream/h2/connection.ts and frames.ts: calls against node:http2's server (nghttp2 answers with
// Huffman strings and its dynamic table, and keeps both windows small), the frame reader cut at every
// byte, and a scripted peer on a raw socket for what a well-behaved server never does: GOAWAY
// mid-call, RST_STREAM, a frame over our SETTINGS_MAX_FRAME_SIZE, header blocks and lists too large,
// DATA past our window, a window of 10 octets to send into, PING and SETTINGS to acknowledge.
import { constants, createServer as createH2Server, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { H2Connection, type StreamHandler } from '../../../../gateway/upstream/h2/connection';
import {
  ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, frame, FrameReader, type FrameSink, GOAWAY, HEADERS, PADDED, PING,
  PREFACE, RST_STREAM, SETTINGS, WINDOW_UPDATE,
} from '../../../../gateway/upstream/h2/frames';
import { headerBlock } from '../../../../gateway/upstream/h2/hpack';

/** A stream's events, and a promise of its end (end() or closed()). */
class Recorder implements StreamHandler {
  fields: [string, string][] = [];
  blocks: boolean[] = [];
  body: Buffer[] = [];
  outcome: { ended: true } | { code: number; processed: boolean; reason: string } | undefined;
  readonly done: Promise<void>;
  #resolve!: () => void;
  constructor() {
    this.done = new Promise((r) => { this.#resolve = r; });
  }
  field(name: string, value: string): void { this.fields.push([name, value]); }
  headers(endStream: boolean): void { this.blocks.push(endStream); }
  data(chunk: Buffer, from: number, to: number): void { this.body.push(Buffer.from(chunk.subarray(from, to))); }
  end(): void { this.outcome = { ended: true }; this.#resolve(); }
  closed(code: number, processed: boolean, reason: string): void { this.outcome = { code, processed, reason }; this.#resolve(); }
  /** sent() calls, and whether each came before the stream's end. */
  sentCalls: boolean[] = [];
  sent(): void { this.sentCalls.push(this.outcome === undefined); }
}

const REQUEST = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', '/inference.GRPCInferenceService/ModelInfer'],
  [':authority', 'localhost'], ['content-type', 'application/grpc'], ['te', 'trailers']]);

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

function client(port: number, options: Partial<ConstructorParameters<typeof H2Connection>[0]> = {}): H2Connection {
  const c = new H2Connection({ host: '127.0.0.1', port, ...options });
  open.push({ close: () => c.destroy() });
  return c;
}

describe('against node:http2', () => {
  let server: Http2Server;
  let port: number;
  beforeAll(async () => {
    server = createH2Server();
    server.on('stream', (stream) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const body = Buffer.concat(chunks);
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-length': String(body.length) }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'echo%20done' }));
        stream.end(body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  test('calls one after another and at once: headers (Huffman, dynamic table), DATA, trailers', async () => {
    const c = client(port);
    const body = (i: number): Buffer => Buffer.alloc(100 + i, i);
    for (let i = 0; i < 5; i++) {
      const r = new Recorder();
      c.request(REQUEST, r, body(i), true);
      await r.done;
      expect(r.outcome).toEqual({ ended: true });
      expect(r.blocks).toEqual([false, true]);
      expect(r.fields).toEqual(expect.arrayContaining([[':status', '200'], ['x-length', String(100 + i)], ['grpc-status', '0'], ['grpc-message', 'echo%20done']]));
      expect(Buffer.concat(r.body)).toEqual(body(i));
    }
    const many = Array.from({ length: 20 }, (_, i) => {
      const r = new Recorder();
      c.request(REQUEST, r, body(i), true);
      return r;
    });
    await Promise.all(many.map((r) => r.done));
    many.forEach((r, i) => expect(Buffer.concat(r.body)).toEqual(body(i)));
  });

  test('3 MiB each way: our DATA waits for the server\'s 64 KiB windows, its DATA for ours', async () => {
    const c = client(port, { streamWindow: 256 * 1024, connectionWindow: 512 * 1024 });
    const big = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
    const r = new Recorder();
    c.request(REQUEST, r, big, true);
    await r.done;
    expect(r.outcome).toEqual({ ended: true });
    expect(Buffer.concat(r.body).equals(big)).toBe(true);
  });

  test('a message as pieces: in order, small (one buffer with the HEADERS) or past 16 KiB (by reference), its write reported', async () => {
    const c = client(port);
    for (const sizes of [[5, 0, 64, 3], [5, 40 * 1024, 7, 30 * 1024, 1]]) {
      const pieces = sizes.map((n, i) => Buffer.alloc(n, i + 1));
      const r = new Recorder();
      c.request(REQUEST, r, pieces, true, true);
      await r.done;
      expect(r.outcome).toEqual({ ended: true });
      expect(r.sentCalls).toEqual([true]);
      expect(Buffer.concat(r.body).equals(Buffer.concat(pieces))).toBe(true);
    }
  });

  test('many streams at once, small and past the windows: each that asked hears sent() once, before its end; the others never', async () => {
    // node:http2's server keeps a 64 KiB window: the large messages wait for WINDOW_UPDATEs, so
    // their last writes come after later streams' (the reports follow the writes, not the streams).
    const c = client(port);
    const sizes = [8, 200 * 1024, 8, 40 * 1024, 16, 100 * 1024, 8, 8, 70 * 1024, 8];
    const rs = sizes.map((n, i) => {
      const r = new Recorder();
      c.request(REQUEST, r, [Buffer.alloc(5, i), Buffer.alloc(n, i)], true, i !== 2);
      return r;
    });
    await Promise.all(rs.map((r) => r.done));
    expect(rs.map((r) => r.outcome)).toEqual(rs.map(() => ({ ended: true })));
    expect(rs.map((r) => r.sentCalls)).toEqual(rs.map((_, i) => (i === 2 ? [] : [true])));
    rs.forEach((r, i) => expect(Buffer.concat(r.body).length).toBe(5 + sizes[i]!));
  });
});

// ---- the frame reader

interface Event { kind: string; type?: number; stream?: number; bytes?: string }

function recordingSink(events: Event[]): FrameSink {
  let data: Buffer[] = [];
  let type = -1;
  return {
    frameStart(_length, t, _flags, stream) { type = t; events.push({ kind: 'start', type: t, stream }); return true; },
    dataPiece(chunk, from, to) { data.push(Buffer.from(chunk.subarray(from, to))); },
    frameEnd(payload) {
      events.push({ kind: 'end', bytes: (type === DATA ? Buffer.concat(data) : payload ?? Buffer.alloc(0)).toString('hex') });
      data = [];
      return true;
    },
  };
}

test('the frame reader gives the same frames however the bytes are cut', () => {
  const script = Buffer.concat([
    frame(SETTINGS, 0, 0, Buffer.from('000400100000', 'hex')),
    frame(HEADERS, 0, 1, Buffer.from('8840', 'hex')),
    frame(CONTINUATION, END_HEADERS, 1, Buffer.from('016101', 'hex')),
    frame(DATA, PADDED, 1, Buffer.from('03abcdef000000', 'hex')),
    frame(DATA, 0, 1),
    frame(PING, 0, 0, Buffer.from('0102030405060708', 'hex')),
    frame(DATA, END_STREAM, 3, Buffer.alloc(300, 7)),
    frame(0xfa, 0, 0, Buffer.from('ff', 'hex')), // unknown type
  ]);
  const whole: Event[] = [];
  new FrameReader(recordingSink(whole)).push(script);
  expect(whole.filter((e) => e.kind === 'start')).toHaveLength(8);
  for (let k = 0; k <= script.length; k++) {
    const events: Event[] = [];
    const r = new FrameReader(recordingSink(events));
    r.push(script.subarray(0, k));
    r.push(Buffer.concat([script.subarray(k), Buffer.alloc(3)]), script.length - k); // a read buffer longer than the read
    expect(events).toEqual(whole);
  }
  const bytewise: Event[] = [];
  const r = new FrameReader(recordingSink(bytewise));
  for (let i = 0; i < script.length; i++) r.push(script.subarray(i, i + 1));
  expect(bytewise).toEqual(whole);
});

// ---- a scripted peer

interface Seen { type: number; flags: number; stream: number; payload: Buffer }

/** A raw TCP peer: reads the client's preface and frames, sends what a test tells it. */
class Peer {
  readonly frames: Seen[] = [];
  socket: Socket | undefined;
  readonly #server: Server;
  #waiters: (() => void)[] = [];
  port = 0;

  constructor() {
    this.#server = createServer((s) => {
      this.socket = s;
      let preface = Buffer.alloc(0);
      let current: Seen | undefined;
      let data: Buffer[] = [];
      const reader = new FrameReader({
        frameStart: (_len, type, flags, stream) => { current = { type, flags, stream, payload: Buffer.alloc(0) }; data = []; return true; },
        dataPiece: (chunk, from, to) => { data.push(Buffer.from(chunk.subarray(from, to))); },
        frameEnd: (payload) => {
          current!.payload = payload !== undefined ? Buffer.from(payload) : Buffer.concat(data);
          this.frames.push(current!);
          for (const w of this.#waiters.splice(0)) w();
          return true;
        },
      });
      s.on('data', (c: Buffer) => {
        if (preface.length < PREFACE.length) {
          preface = Buffer.concat([preface, c]);
          if (preface.length < PREFACE.length) return;
          c = preface.subarray(PREFACE.length);
        }
        reader.push(c);
      });
      s.on('error', () => undefined);
      this.send(SETTINGS, 0, 0);
    });
    open.push({ close: () => { this.socket?.destroy(); this.#server.close(); } });
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.port = (this.#server.address() as AddressInfo).port;
    return this.port;
  }

  send(type: number, flags: number, stream: number, payload?: Buffer): void {
    this.socket!.write(frame(type, flags, stream, payload));
  }

  /** Waits (bounded) until a frame the client sent matches. */
  async seen(match: (f: Seen) => boolean, what: string): Promise<Seen> {
    const until = Date.now() + 5000;
    for (;;) {
      const f = this.frames.find(match);
      if (f !== undefined) return f;
      if (Date.now() > until) throw new Error(`the client sent no ${what}`);
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }
}

const u32 = (...v: number[]): Buffer => {
  const b = Buffer.alloc(4 * v.length);
  v.forEach((x, i) => b.writeUInt32BE(x, 4 * i));
  return b;
};
const setting = (id: number, v: number): Buffer => Buffer.concat([Buffer.from([0, id]), u32(v)]);
const STATUS_200 = Buffer.from('88', 'hex');
const TRAILERS_OK = headerBlock([['grpc-status', '0']]);

async function connected(options: Partial<ConstructorParameters<typeof H2Connection>[0]> = {}): Promise<{ peer: Peer; c: H2Connection }> {
  const peer = new Peer();
  const c = client(await peer.listen(), options);
  await peer.seen((f) => f.type === SETTINGS && (f.flags & ACK) !== 0, 'SETTINGS ACK');
  return { peer, c };
}

describe('against a scripted peer', () => {
  test('SETTINGS and PING are acknowledged; our SETTINGS and connection window are sent first', async () => {
    const { peer } = await connected({ streamWindow: 1 << 20, maxFrameSize: 1 << 20, connectionWindow: 32 << 20 });
    const ours = peer.frames[0]!;
    expect(ours.type).toBe(SETTINGS);
    expect(ours.payload.toString('hex')).toContain(setting(4, 1 << 20).toString('hex'));
    expect(peer.frames[1]).toMatchObject({ type: WINDOW_UPDATE, stream: 0, payload: u32((32 << 20) - 65535) });
    peer.send(PING, 0, 0, Buffer.from('0102030405060708', 'hex'));
    const pong = await peer.seen((f) => f.type === PING, 'PING ACK');
    expect(pong).toMatchObject({ flags: ACK, payload: Buffer.from('0102030405060708', 'hex') });
  });

  test('DATA goes out only as far as the peer\'s windows let it', async () => {
    const { peer, c } = await connected();
    peer.send(SETTINGS, 0, 0, setting(4, 10));
    await peer.seen((f) => f.type === SETTINGS && f.flags === ACK && peer.frames.filter((g) => g.type === SETTINGS && g.flags === ACK).length === 2, 'second ACK');
    const body = Buffer.alloc(100, 1);
    c.request(REQUEST, new Recorder(), body, true);
    const sent = (): number => peer.frames.filter((f) => f.type === DATA).reduce((n, f) => n + f.payload.length, 0);
    await peer.seen((f) => f.type === DATA, 'DATA');
    await new Promise((r) => setTimeout(r, 50));
    expect(sent()).toBe(10);
    peer.send(WINDOW_UPDATE, 0, 1, u32(50));
    await peer.seen(() => sent() === 60, '50 more octets');
    peer.send(WINDOW_UPDATE, 0, 1, u32(40));
    const last = await peer.seen((f) => f.type === DATA && (f.flags & END_STREAM) !== 0, 'the last DATA');
    expect(sent()).toBe(100);
    expect(last.payload.length).toBe(40);
  });

  test('GOAWAY mid-call: streams above its last id are refused unprocessed, the one below finishes', async () => {
    const { peer, c } = await connected();
    const a = new Recorder();
    const b = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    c.request(REQUEST, b, Buffer.from('y'), true);
    await peer.seen((f) => f.type === DATA && f.stream === 3, 'stream 3');
    peer.send(GOAWAY, 0, 0, u32(1, 0));
    await b.done;
    expect(b.outcome).toMatchObject({ code: 7, processed: false });
    expect(() => c.request(REQUEST, new Recorder(), Buffer.from('z'), true)).toThrow(/GOAWAY/);
    peer.send(HEADERS, END_HEADERS, 1, STATUS_200);
    peer.send(DATA, 0, 1, Buffer.from('answer'));
    peer.send(HEADERS, END_HEADERS | END_STREAM, 1, TRAILERS_OK);
    await a.done;
    expect(a.outcome).toEqual({ ended: true });
    expect(a.fields).toEqual([[':status', '200'], ['grpc-status', '0']]);
    expect(Buffer.concat(a.body).toString()).toBe('answer');
  });

  test('RST_STREAM ends its stream alone', async () => {
    const { peer, c } = await connected();
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.send(RST_STREAM, 0, 1, u32(2));
    await a.done;
    expect(a.outcome).toMatchObject({ code: 2, processed: true });
    expect(c.unusable).toBeUndefined();
  });

  test('a frame over our SETTINGS_MAX_FRAME_SIZE is a connection error: GOAWAY FRAME_SIZE_ERROR', async () => {
    const { peer, c } = await connected({ maxFrameSize: 16384 });
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.send(HEADERS, END_HEADERS, 1, STATUS_200);
    peer.send(DATA, 0, 1, Buffer.alloc(16385));
    const g = await peer.seen((f) => f.type === GOAWAY, 'GOAWAY');
    expect(g.payload.readUInt32BE(4)).toBe(6);
    await a.done;
    expect(a.outcome).toMatchObject({ code: 6 });
    expect(c.unusable).toMatch(/16385-octet frame/);
  });

  test('a header block over the bound is a connection error: GOAWAY ENHANCE_YOUR_CALM', async () => {
    const { peer, c } = await connected({ maxHeaderListSize: 1024 });
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.send(HEADERS, 0, 1, Buffer.alloc(600, 0x88));
    peer.send(CONTINUATION, END_HEADERS, 1, Buffer.alloc(600, 0x88));
    const g = await peer.seen((f) => f.type === GOAWAY, 'GOAWAY');
    expect(g.payload.readUInt32BE(4)).toBe(0xb);
    await a.done;
    expect(a.outcome).toMatchObject({ code: 0xb });
  });

  test('a header list over the bound resets its stream; the connection goes on', async () => {
    const { peer, c } = await connected({ maxHeaderListSize: 1024 });
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.send(HEADERS, END_HEADERS, 1, Buffer.alloc(40, 0x88)); // 40 × (":status 200", 42 octets)
    const rst = await peer.seen((f) => f.type === RST_STREAM, 'RST_STREAM');
    expect(rst).toMatchObject({ stream: 1, payload: u32(0xb) });
    await a.done;
    expect(a.outcome).toMatchObject({ code: 0xb, reason: expect.stringMatching(/header list/) });
    const b = new Recorder();
    c.request(REQUEST, b, Buffer.from('y'), true);
    await peer.seen((f) => f.type === DATA && f.stream === 3, 'stream 3');
    peer.send(HEADERS, END_HEADERS | END_STREAM, 3, Buffer.concat([STATUS_200, TRAILERS_OK]));
    await b.done;
    expect(b.outcome).toEqual({ ended: true });
  });

  test('our windows: given back from half on, and DATA past them resets the stream with FLOW_CONTROL_ERROR', async () => {
    const { peer, c } = await connected({ streamWindow: 10000 });
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.send(HEADERS, END_HEADERS, 1, STATUS_200);
    peer.send(DATA, 0, 1, Buffer.alloc(6000));
    const wu = await peer.seen((f) => f.type === WINDOW_UPDATE && f.stream === 1, 'WINDOW_UPDATE');
    expect(wu.payload).toEqual(u32(6000));
    peer.send(DATA, 0, 1, Buffer.alloc(10001));
    const rst = await peer.seen((f) => f.type === RST_STREAM, 'RST_STREAM');
    expect(rst.payload).toEqual(u32(3));
    await a.done;
    expect(a.outcome).toMatchObject({ code: 3 });
  });

  test('a connection lost mid-call ends its streams', async () => {
    const { peer, c } = await connected();
    const a = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await peer.seen((f) => f.type === DATA, 'DATA');
    peer.socket!.destroy();
    await a.done;
    expect(a.outcome).toMatchObject({ processed: true, reason: expect.stringMatching(/closed|reset|error/) });
    expect(() => c.request(REQUEST, new Recorder(), Buffer.from('z'), true)).toThrow();
  });
});

test('a paused stream holds its window; resume() gives it back', async () => {
  const { peer, c } = await connected({ streamWindow: 10000 });
  const a = new Recorder();
  const s = c.request(REQUEST, a, Buffer.from('x'), true);
  await peer.seen((f) => f.type === DATA, 'DATA');
  c.pause(s);
  peer.send(HEADERS, END_HEADERS, 1, STATUS_200);
  peer.send(DATA, 0, 1, Buffer.alloc(8000));
  peer.send(PING, 0, 0, Buffer.alloc(8)); // its ACK comes after anything the DATA made the client write
  await peer.seen((f) => f.type === PING, 'PING ACK');
  expect(peer.frames.filter((f) => f.type === WINDOW_UPDATE && f.stream === 1)).toEqual([]);
  expect(peer.frames.filter((f) => f.type === WINDOW_UPDATE && f.stream === 0)).toHaveLength(1); // the preface's only
  c.resume(s);
  const wu = await peer.seen((f) => f.type === WINDOW_UPDATE && f.stream === 1, 'WINDOW_UPDATE');
  expect(wu.payload).toEqual(u32(8000));
});

// The edge cases of RFC 9113 that nghttp2 (node:http2's server) can be made to send: a server that
// is not ours, so what our connection reads is another implementation's framing.
describe('against node:http2, edge cases', () => {
  type OnStream = (s: ServerHttp2Stream, session: ServerHttp2Session) => void;
  async function h2Server(options: Parameters<typeof createH2Server>[0], onStream: OnStream): Promise<number> {
    const server = createH2Server(options);
    server.on('stream', (stream) => {
      stream.on('error', () => undefined);
      onStream(stream, stream.session as ServerHttp2Session);
    });
    server.on('session', (s) => s.on('error', () => undefined));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    open.push({ close: () => server.close() });
    return (server.address() as AddressInfo).port;
  }
  const answer = (stream: ServerHttp2Stream, extra: Record<string, string> = {}): void => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...extra }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(Buffer.from('answer'));
  };

  test('SETTINGS with ids we do not know are acknowledged and ignored', async () => {
    const port = await h2Server({ settings: { customSettings: { 0x99: 7, 0x4242: 1 } } }, (s) => answer(s));
    const r = new Recorder();
    client(port).request(REQUEST, r, Buffer.from('x'), true);
    await r.done;
    expect(r.outcome).toEqual({ ended: true });
    expect(Buffer.concat(r.body).toString()).toBe('answer');
  });

  test('a header block split over CONTINUATION (HEADERS at our 16 KiB SETTINGS_MAX_FRAME_SIZE)', async () => {
    const big = Array.from({ length: 3000 }, (_, i) => (i * 7919).toString(36)).join('').slice(0, 30_000);
    const port = await h2Server({}, (s) => answer(s, { 'x-big': big }));
    const r = new Recorder();
    client(port, { maxFrameSize: 16384 }).request(REQUEST, r, Buffer.from('x'), true);
    await r.done;
    expect(r.outcome).toEqual({ ended: true });
    expect(r.fields.find(([n]) => n === 'x-big')?.[1]).toBe(big);
  });

  test('padded DATA and HEADERS (PADDING_STRATEGY_MAX): the padding is not the answer', async () => {
    const body = Buffer.alloc(50_000, 3);
    const port = await h2Server({ paddingStrategy: constants.PADDING_STRATEGY_MAX }, (s) => {
      s.respond({ ':status': 200 }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      s.end(body);
    });
    const r = new Recorder();
    client(port).request(REQUEST, r, Buffer.from('x'), true);
    await r.done;
    expect(r.outcome).toEqual({ ended: true });
    expect(Buffer.concat(r.body).equals(body)).toBe(true);
    expect(r.fields).toEqual(expect.arrayContaining([[':status', '200'], ['grpc-status', '0']]));
  });

  test('a peer GOAWAY mid-call: the stream above its last id is refused unprocessed, the one below answered', async () => {
    let n = 0;
    let first: ServerHttp2Stream | undefined;
    const port = await h2Server({}, (s, session) => {
      if (++n === 1) {
        first = s;
        return;
      }
      session.goaway(constants.NGHTTP2_NO_ERROR, 1);
      answer(first!);
    });
    const c = client(port);
    const a = new Recorder();
    const b = new Recorder();
    c.request(REQUEST, a, Buffer.from('x'), true);
    await new Promise((r) => setTimeout(r, 20));
    c.request(REQUEST, b, Buffer.from('y'), true);
    await Promise.all([a.done, b.done]);
    expect(a.outcome).toEqual({ ended: true });
    expect(b.outcome).toMatchObject({ code: 7, processed: false });
    expect(c.unusable).toBe('the server sent GOAWAY');
  });

  test('RST_STREAM mid-body: the stream ends with its code, what came before it was read', async () => {
    const port = await h2Server({}, (s) => {
      s.respond({ ':status': 200 });
      // destroy(err), not close(code): close() ends the stream (END_STREAM) before its RST_STREAM.
      s.write(Buffer.alloc(1000, 1), () => setTimeout(() => s.destroy(new Error('mid-body')), 20));
    });
    const r = new Recorder();
    const c = client(port);
    c.request(REQUEST, r, Buffer.from('x'), true);
    await r.done;
    expect(r.outcome).toMatchObject({ code: constants.NGHTTP2_INTERNAL_ERROR, processed: true });
    expect(Buffer.concat(r.body).length).toBe(1000);
    // The connection goes on.
    const next = new Recorder();
    c.request(REQUEST, next, Buffer.from('y'), true);
    await next.done;
    expect(next.outcome).toMatchObject({ code: constants.NGHTTP2_INTERNAL_ERROR });
  });
});

describe('send windows past 2^31-1 (RFC 9113 §6.9.1)', () => {
  test('on the connection: GOAWAY FLOW_CONTROL_ERROR, its streams end', async () => {
    const { peer, c } = await connected();
    const a = new Recorder();
    c.request(REQUEST, a, undefined, false);
    await peer.seen((f) => f.type === HEADERS, 'HEADERS');
    peer.send(WINDOW_UPDATE, 0, 0, u32(0x7fffffff));
    const goaway = await peer.seen((f) => f.type === GOAWAY, 'GOAWAY');
    expect(goaway.payload.readUInt32BE(4)).toBe(3);
    await a.done;
    expect(a.outcome).toMatchObject({ code: 3 });
  });

  test('on a stream: RST_STREAM FLOW_CONTROL_ERROR, the connection goes on', async () => {
    const { peer, c } = await connected();
    const a = new Recorder();
    c.request(REQUEST, a, undefined, false);
    await peer.seen((f) => f.type === HEADERS, 'HEADERS');
    peer.send(WINDOW_UPDATE, 0, 1, u32(0x7fffffff));
    const rst = await peer.seen((f) => f.type === RST_STREAM, 'RST_STREAM');
    expect(rst.payload).toEqual(u32(3));
    await a.done;
    expect(a.outcome).toMatchObject({ code: 3 });
    expect(c.unusable).toBeUndefined();
  });
});
