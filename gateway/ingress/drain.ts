// The drain: the server's shutdown with a deadline. It keeps what a drain must reach — the answers
// not finished, the connections still telling their protocol, every TCP connection — and runs the
// two phases: stop accepting and let what is in flight finish (HTTP/1.1 keep-alive connections
// closed as their answers end, GOAWAY on HTTP/2 sessions), then, at the deadline, destroy what is
// left, which aborts the requests' signals and so cancels their upstream calls.
import type { Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { settlesWithin } from '../deadline';
import type { H2Side } from './h2';

export interface DrainOutcome {
  /** Every connection had ended before the deadline. */
  readonly inTime: boolean;
  /** Answers not finished when the deadline passed (their connections were destroyed). */
  readonly requestsCut: number;
}

export class Drain {
  /** Set once a drain has begun: answers not yet begun say `Connection: close`. */
  draining = false;
  /** Answers not finished yet: told to close their connection when a drain begins. */
  readonly open = new Set<ServerResponse>();
  /** Connections still telling their protocol (cleartext): closed at once by a drain, as idle ones. */
  readonly sniffing = new Set<Socket>();
  /**
   * Every TCP connection, so that the deadline cuts them all: node:http tracks an HTTP/1.1 one
   * only once handed over (after the sniff, after a TLS handshake), and HTTP/2 ones not at all.
   */
  private readonly tcpSockets = new Set<Socket>();

  /** A new TCP connection, kept until it closes. */
  connected(socket: Socket): void {
    this.tcpSockets.add(socket);
    socket.once('close', () => this.tcpSockets.delete(socket));
  }

  /** An answer over: under a drain, its connection closes once Node has handled the finish. */
  answered(res: ServerResponse, server: Server | HttpsServer): void {
    this.open.delete(res);
    // Node's server.close() closes the connections idle at that moment only; one whose answer
    // ends later would wait for keepAliveTimeout. It is idle once Node has handled the finish.
    if (this.draining) setImmediate(() => server.closeIdleConnections());
  }

  /**
   * Stops accepting, closes idle keep-alive connections at once and each busy one as soon as its
   * answer is out, and lets the requests in flight finish for `deadlineMs`; then destroys the
   * connections still open.
   */
  async run(server: Server | HttpsServer, h2: H2Side, deadlineMs: number): Promise<DrainOutcome> {
    this.draining = true;
    for (const res of this.open) if (!res.headersSent) res.shouldKeepAlive = false;
    for (const socket of this.sniffing) socket.destroy();
    // HTTP/2: GOAWAY on every session; its streams in flight finish, new ones are refused, and the
    // session ends once they have (node:http2's close()).
    h2.goAway();
    // Stops listening and closes the idle connections; calls back once every connection is gone.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    if (await settlesWithin(closed, deadlineMs)) return { inTime: true, requestsCut: 0 };
    // REST answers not finished, and gRPC calls still open (their streams are cut with their sessions).
    const requestsCut = this.open.size + h2.grpcStreamsOpen();
    server.closeAllConnections();
    h2.destroyAll();
    for (const socket of this.tcpSockets) socket.destroy();
    await closed;
    return { inTime: false, requestsCut };
  }
}
