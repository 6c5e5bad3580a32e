// The drain: the server's shutdown with a deadline. It keeps what a drain must reach — the answers
// not out yet, the connections still telling their protocol, the HTTP/1.1 connections with the
// answers under way on each, every TCP connection — and runs the two phases: stop accepting and
// let what is in flight finish (HTTP/1.1 keep-alive connections ended as their last answer is
// out, GOAWAY on HTTP/2 sessions), then, at the deadline, destroy what is left, which aborts the
// requests' signals and so cancels their upstream calls. It never destroys a connection before
// the deadline: an answer is cut only there (or by the client), and every cut one is counted.
import { type Linked, LinkedList } from '../linked-list';
import type { Server, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { settlesWithin } from '../deadline';
import type { H2Side } from './h2';

export interface DrainOutcome {
  /** Every connection had ended before the deadline. */
  readonly inTime: boolean;
  /**
   * Requests whose answers did not all go out: cut by the client during the drain, or not
   * finished when the deadline passed (their connections were destroyed).
   */
  readonly requestsCut: number;
}

/** An answer under way as the drain sees it (ingress/server.ts); its links are the drain's list (../linked-list.ts). */
export interface Answer extends Linked<Answer> {
  readonly res: ServerResponse;
  /** Told just before the deadline destroys its connection, while what has left can still be told. */
  cutting(): void;
}

export class Drain {
  /** Set once a drain has begun: answers not yet begun say `Connection: close`. */
  draining = false;
  /** The compiled lane's stop (ingress/http1/lane.ts), when it serves. */
  stopLane: (() => void) | undefined;
  /**
   * Answers not out yet (their last byte not taken by the socket, their stream not closed): a list
   * through them, not a Set, whose replaced tables would keep answers alive (../linked-list.ts).
   */
  readonly open = new LinkedList<Answer>();
  /** Connections still telling their protocol (cleartext): closed at once by a drain, as idle ones. */
  readonly sniffing = new Set<Socket>();
  /** HTTP/1.1 connections handed to node:http, each with the number of its answers under way (0: idle). */
  readonly #http1 = new Map<Socket, number>();
  /**
   * Every TCP connection, so that the deadline cuts them all: node:http tracks an HTTP/1.1 one
   * only once handed over (after the sniff, after a TLS handshake), and HTTP/2 ones not at all.
   */
  readonly #tcpSockets = new Set<Socket>();
  /** Answers cut during the drain before its deadline (the deadline counts what it cuts itself). */
  #cut = 0;
  #pastDeadline = false;

  /** A new TCP connection, kept until it closes. */
  connected(socket: Socket): void {
    this.#tcpSockets.add(socket);
    socket.once('close', () => this.#tcpSockets.delete(socket));
  }

  /** An HTTP/1.1 connection handed to node:http (the TLS socket under TLS), kept until it closes. */
  http1(socket: Socket): void {
    this.#http1.set(socket, 0);
    socket.once('close', () => this.#http1.delete(socket));
  }

  /** An answer begun on `socket` (a request's head has arrived). */
  began(answer: Answer, socket: Socket): void {
    this.open.add(answer);
    const busy = this.#http1.get(socket);
    if (busy !== undefined) this.#http1.set(socket, busy + 1);
    if (this.draining) answer.res.shouldKeepAlive = false;
  }

  /** An HTTP/1.1 connection lent to the compiled lane (ingress/http1/lane.ts): busy until it is given back. */
  lent(socket: Socket): void {
    const busy = this.#http1.get(socket);
    if (busy !== undefined) this.#http1.set(socket, busy + 1);
  }

  /** Given back by the lane (after what it gave back began to be served): under a drain, ended once idle. */
  returned(socket: Socket): void {
    const busy = this.#http1.get(socket);
    if (busy === undefined) return;
    this.#http1.set(socket, busy - 1);
    if (this.draining && busy === 1) endConnection(socket);
  }

  /**
   * An answer over: out (`cut` false) or its connection gone first. Under a drain, an HTTP/1.1
   * connection left with no answer under way is ended.
   */
  answered(answer: Answer, socket: Socket, cut: boolean): void {
    this.open.delete(answer);
    if (cut && this.draining && !this.#pastDeadline) this.#cut++;
    const busy = this.#http1.get(socket);
    if (busy === undefined) return; // HTTP/2, or closed already
    this.#http1.set(socket, busy - 1);
    if (this.draining && busy === 1) endConnection(socket);
  }

  /**
   * Ends the HTTP/1.1 connections with no answer under way. It stands in for node:http's
   * closeIdleConnections(), which server.close() calls: that one destroys every connection whose
   * request has been read and whose answer's end() has been called (Node's lib/_http_server.js checks
   * `_httpMessage.finished`, which end() sets), megabytes of that answer still queued or not.
   */
  endIdle(): void {
    for (const [socket, busy] of this.#http1) if (busy === 0) endConnection(socket);
  }

  /**
   * Stops accepting, ends idle keep-alive connections at once and each busy one as soon as its
   * last answer is out, and lets the requests in flight finish for `deadlineMs`; then destroys the
   * connections still open.
   */
  async run(server: Server | HttpsServer, h2: H2Side, deadlineMs: number): Promise<DrainOutcome> {
    this.draining = true;
    // The compiled lane gives its connections back: now those between requests, the others with their answers.
    this.stopLane?.();
    for (const { res } of this.open) if (!res.headersSent) res.shouldKeepAlive = false;
    for (const socket of this.sniffing) socket.destroy();
    // HTTP/2: GOAWAY on every session; its streams in flight finish, new ones are refused, and the
    // session ends once they have (node:http2's close(), which ends its socket after its writes).
    h2.goAway();
    // Stops listening and ends the idle connections (endIdle); calls back once every connection is gone.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    if (await settlesWithin(closed, deadlineMs)) return { inTime: true, requestsCut: this.#cut };
    this.#pastDeadline = true;
    // REST answers not out, and gRPC calls still open (their streams are cut with their sessions).
    const requestsCut = this.#cut + this.open.size + h2.grpcStreamsOpen();
    for (const answer of this.open) answer.cutting();
    server.closeAllConnections();
    h2.destroyAll();
    for (const socket of this.#tcpSockets) socket.destroy();
    await closed;
    return { inTime: false, requestsCut };
  }
}

/**
 * Ends an HTTP/1.1 connection: its FIN goes after every byte queued on it (a Writable's end()),
 * so nothing already written is lost; it closes once the client closes its side, or at the deadline.
 */
function endConnection(socket: Socket): void {
  if (!socket.writableEnded && !socket.destroyed) socket.end();
}
