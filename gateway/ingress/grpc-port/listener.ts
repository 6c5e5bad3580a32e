// The gRPC port (server.grpc.port, as Triton's own --grpc-port): HTTP/2 only, gRPC only, on the
// framing of ./connection.ts instead of node:http2's server — the gRPC pass-through at its lowest
// cost. h2c with prior knowledge, or h2 over TLS (ALPN h2) with server.tls. Its streams go to the
// same handler as gRPC streams on server.port (passthrough/grpc-ingress.ts), bounded the same way:
// the session limits of server.h2.*, server.maxHeaderBytes and server.maxHeaderCount, what an
// answer may hold for a client that does not read it (ingress/h2.ts UnreadAnswers), the in-flight
// bound shared with server.port. A stream that is not gRPC gets 415 with an {"error"} body, as
// Triton's gRPC port refuses what is not gRPC. server.port keeps serving gRPC too, on node:http2,
// next to REST on the same connections (docs/architecture.md, "The gRPC port").
import type { IncomingHttpHeaders } from 'node:http2';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket, type TlsOptions } from 'node:tls';
import { NO_ERROR } from '../../upstream/h2/frames';
import { settlesWithin } from '../../deadline';
import { type GrpcHandler, type H2Options, isGrpc, UnreadAnswers } from '../h2';
import { type ConnectionOwner, ServerConnection, type ServerConnectionOptions, type ServerStream } from './connection';

export interface GrpcPortOptions extends Pick<H2Options, 'h2' | 'head' | 'timeouts' | 'calmed'> {
  readonly grpc: GrpcHandler;
  /** server.tls: h2 by ALPN; unset, h2c with prior knowledge. */
  readonly tls?: TlsOptions;
}

/** How the drain went on the gRPC port. */
export interface GrpcPortDrain {
  readonly inTime: boolean;
  /** Calls still open at the deadline (cut with their connections). */
  readonly requestsCut: number;
}

export class GrpcPort implements ConnectionOwner {
  readonly server: Server;
  readonly #connections = new Set<ServerConnection>();
  readonly #sockets = new Set<Socket>();
  readonly #settings: ServerConnectionOptions;
  #grpcOpen = 0;
  #draining = false;

  constructor(private readonly options: GrpcPortOptions) {
    const { h2, head, timeouts } = options;
    this.#settings = {
      maxConcurrentStreams: h2.maxConcurrentStreams, streamWindow: h2.streamWindowBytes, connectionWindow: h2.connectionWindowBytes,
      maxHeaderListSize: head.maxHeaderBytes, maxHeaderCount: head.maxHeaderCount, maxResetsPerSecond: h2.maxResetsPerSecond,
      settingsTimeoutMs: timeouts.headersTimeoutMs, idleTimeoutMs: timeouts.keepAliveTimeoutMs,
    };
    if (options.tls === undefined) {
      this.server = createNetServer({ noDelay: true }, (socket) => this.#connected(socket));
    } else {
      const server = createTlsServer({ ...options.tls, ALPNProtocols: ['h2'], handshakeTimeout: timeouts.headersTimeoutMs });
      server.on('secureConnection', (socket: TLSSocket) => {
        // A client that did not agree on h2 speaks something this port does not.
        if (socket.alpnProtocol !== 'h2') socket.destroy();
        else this.#connected(socket);
      });
      // Failed handshakes are the client's; the listener goes on.
      server.on('tlsClientError', () => undefined);
      this.server = server;
    }
  }

  #connected(socket: Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    if (this.#draining) {
      socket.destroy();
      return;
    }
    this.#connections.add(new ServerConnection(socket, this.#settings, this));
  }

  /** gRPC calls open now. */
  grpcStreamsOpen(): number {
    return this.#grpcOpen;
  }

  // ---- ConnectionOwner

  stream(stream: ServerStream, headers: IncomingHttpHeaders): void {
    // One 'close' listener per stream, shared (`this`: the stream), added before the handler's own.
    stream.on('close', portStreamClosed);
    // The connection's answers' bound, made at its first stream, kept on it: its streams' 'close'
    // comes a tick after the connection's, which must still find it.
    const conn = stream.connection as BoundConnection;
    const unread = conn[UNREAD] ??= new UnreadAnswers(this.options.h2.maxUnreadAnswerBytes, this.options.h2.unreadAnswerMs);
    if (!isGrpc(headers)) {
      notGrpc(stream, unread);
      return;
    }
    (stream as PortStream)[GRPC] = true;
    this.#grpcOpen++;
    this.options.grpc(stream, headers, unread.grpcBound(stream));
  }

  /** A stream of this port closed (portStreamClosed): counted, its answer's bound let go. */
  streamClosed(stream: ServerStream): void {
    if ((stream as PortStream)[GRPC] === true) this.#grpcOpen--;
    (stream.connection as BoundConnection)[UNREAD]?.closed(stream);
  }

  calmed(conn: ServerConnection): void {
    this.options.calmed?.(conn.socket.remoteAddress);
  }

  closed(conn: ServerConnection): void {
    this.#connections.delete(conn);
  }

  // ---- lifecycle

  /** Listens on `port` (0: a free one); resolves with the port bound. */
  listen(port: number, host: string, reusePort = false): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ port, host, reusePort }, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  /**
   * The drain: no new connection; GOAWAY on every one (its calls in flight finish, none is taken
   * past them, and it ends once they have); at `deadlineMs`, what is left is destroyed and its
   * calls counted as cut.
   */
  async drain(deadlineMs: number): Promise<GrpcPortDrain> {
    this.#draining = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const conn of this.#connections) conn.close();
    if (await settlesWithin(closed, deadlineMs)) return { inTime: true, requestsCut: 0 };
    const requestsCut = this.#grpcOpen;
    for (const conn of [...this.#connections]) conn.destroy();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
    return { inTime: false, requestsCut };
  }
}

/** A connection's answers' bound (UnreadAnswers), made at its first stream. */
const UNREAD = Symbol('tensorgate.unreadAnswers');
type BoundConnection = ServerConnection & { [UNREAD]?: UnreadAnswers };

/** Set on a gRPC stream of the port: its close is counted in grpcStreamsOpen. */
const GRPC = Symbol('tensorgate.grpcPortStream');
type PortStream = ServerStream & { [GRPC]?: boolean };

function portStreamClosed(this: ServerStream): void {
  (this.connection.owner as GrpcPort).streamClosed(this);
}

const NOT_GRPC = Buffer.from(JSON.stringify({ error: 'this port serves gRPC only (content-type application/grpc); REST is served on server.port' }));

/** A client still sending after a 415 is read this long (its bytes dropped), then reset: nginx's lingering_timeout. */
const LINGER_MS = 5000;

/**
 * A stream that is not gRPC: 415 with an {"error"} body (its answer bounded as any). The rest of
 * the request is read and dropped; a client still sending LINGER_MS later is told to stop with
 * RST_STREAM NO_ERROR (RFC 9113 §8.1). Not at once: curl, still uploading when the reset came,
 * failed the whole exchange (exit 92) instead of showing the answer.
 */
function notGrpc(stream: ServerStream, unread: UnreadAnswers): void {
  unread.watch(stream, stream, undefined, () => undefined);
  stream.respond({ ':status': 415, 'content-type': 'application/json', 'content-length': NOT_GRPC.length });
  stream.end(NOT_GRPC);
  stream.resume(); // what it sends is dropped
  if (stream.remoteEnded || stream.closed) return;
  const timer = setTimeout(lingered, LINGER_MS, stream);
  timer.unref();
  stream.once('close', () => clearTimeout(timer));
}

function lingered(stream: ServerStream): void {
  if (!stream.closed) stream.close(NO_ERROR);
}
