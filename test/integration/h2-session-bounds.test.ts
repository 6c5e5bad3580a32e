// The HTTP/2 side's per-session bounds (ingress/h2.ts SessionBounds) for streams the client resets
// in the same read as their HEADERS — the rapid-reset pattern (CVE-2023-44487), and what a gRPC
// client sends when it cancels a call at once. Each such stream must be counted, its reset counted
// towards server.h2.maxResetsPerSecond, and a gRPC one must leave the count of gRPC streams open
// (the drain's) when it closes. On Node 24 the server's 'stream' event still finds such a stream
// with its session; on Node 20 it was already destroyed and had none, which is why the bounds are
// set by the session's own 'stream' listener, run first. The frames are written by hand, so that
// HEADERS and RST_STREAM do come in one read.
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createH2Side, type H2Side } from '../../gateway/ingress/h2';
import type { ServerHttp2Stream } from 'node:http2';
import { CANCEL, frame, HEADERS, END_HEADERS, PREFACE, RST_STREAM, SETTINGS, GOAWAY, FrameReader, type FrameSink } from '../../gateway/upstream/h2/frames';
import { headerBlock } from '../../gateway/upstream/h2/hpack';
import { waitUntil } from '../support/wait';

interface Side {
  readonly side: H2Side;
  readonly port: number;
  readonly calmed: (string | undefined)[];
  readonly grpcCalls: number[];
  close(): Promise<void>;
}

async function startSide(maxResetsPerSecond: number): Promise<Side> {
  const calmed: (string | undefined)[] = [];
  const grpcCalls: number[] = [];
  const side = createH2Side({
    h2: {
      maxConcurrentStreams: 1000, maxSessionMemoryMb: 64, streamWindowBytes: 1 << 20, connectionWindowBytes: 1 << 24,
      maxResetsPerSecond, maxUnreadAnswerBytes: 1 << 26, unreadAnswerMs: 30_000,
    },
    head: { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100 },
    timeouts: { headersTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000 },
    // A handler that answers nothing: the streams close by the client's resets alone.
    grpc: (stream) => { grpcCalls.push((stream as ServerHttp2Stream).id ?? 0); },
    calmed: (remote) => calmed.push(remote),
  }, (_req, res) => res.end());
  const server: Server = createServer((socket) => side.server.emit('connection', socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    side, calmed, grpcCalls, port: (server.address() as AddressInfo).port,
    async close() {
      side.destroyAll();
      await new Promise((r) => server.close(r));
    },
  };
}

/** `n` streams, each HEADERS and RST_STREAM CANCEL at once, all in one write after the preface. */
function openAndReset(socket: Socket, n: number, grpc: boolean): void {
  const fields: [string, string][] = [[':method', 'POST'], [':scheme', 'http'], [':authority', 'localhost'],
    [':path', grpc ? '/inference.GRPCInferenceService/ModelInfer' : '/v2/health/live']];
  if (grpc) fields.push(['content-type', 'application/grpc'], ['te', 'trailers']);
  const block = headerBlock(fields);
  const code = Buffer.alloc(4);
  code.writeUInt32BE(CANCEL, 0);
  const frames: Buffer[] = [PREFACE, frame(SETTINGS, 0, 0)];
  for (let i = 0; i < n; i++) {
    const id = 1 + 2 * i;
    frames.push(frame(HEADERS, END_HEADERS, id, block), frame(RST_STREAM, 0, id, code));
  }
  socket.write(Buffer.concat(frames));
}

/** The GOAWAY error code the server sends, if any, before the connection closes. */
function goawayCode(socket: Socket): Promise<number | undefined> {
  return new Promise((resolve) => {
    let code: number | undefined;
    let type = 0;
    const sink: FrameSink = {
      frameStart: (_length, t) => { type = t; return true; },
      dataPiece: () => undefined,
      frameEnd: (payload) => {
        if (type === GOAWAY && payload !== undefined) code = payload.readUInt32BE(4);
        return true;
      },
    };
    const reader = new FrameReader(sink);
    socket.on('data', (c: Buffer) => reader.push(c));
    socket.on('close', () => resolve(code));
    socket.on('error', () => undefined);
  });
}

describe('HTTP/2 streams reset in the same read as their HEADERS', () => {
  test.each([['gRPC', true], ['REST', false]])('%s: each reset is counted, and past server.h2.maxResetsPerSecond the session gets GOAWAY ENHANCE_YOUR_CALM', async (_name, grpc) => {
    const s = await startSide(20);
    try {
      const socket = connect(s.port, '127.0.0.1');
      const code = goawayCode(socket);
      openAndReset(socket, 50, grpc);
      expect(await code).toBe(0xb); // ENHANCE_YOUR_CALM
      expect(s.calmed).toHaveLength(1);
      await waitUntil(() => s.side.grpcStreamsOpen() === 0, 'no gRPC stream counted open');
      expect(s.side.grpcStreamsOpen()).toBe(0);
    } finally {
      await s.close();
    }
  });

  test('under the bound: gRPC streams reset at once are all heard by the handler and none stays counted open', async () => {
    const s = await startSide(1000);
    const socket = connect(s.port, '127.0.0.1');
    socket.on('error', () => undefined);
    try {
      openAndReset(socket, 10, true);
      await waitUntil(() => s.grpcCalls.length === 10, 'the handler told of every stream');
      await waitUntil(() => s.side.grpcStreamsOpen() === 0, 'no gRPC stream counted open');
      expect(s.side.grpcStreamsOpen()).toBe(0);
      expect(s.calmed).toHaveLength(0);
    } finally {
      socket.destroy();
      await s.close();
    }
  });
});
