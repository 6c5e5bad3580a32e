// A second bound on a connection's first request head. Node's own check (server.headersTimeout,
// swept every connectionsCheckingInterval: a quarter of the timeout, at most 1 s) is what cuts slow
// heads. In full fault-suite runs on a busy machine (Node 24) a slow-header connection was seen still
// open 15 s past a 500-ms timeout — far past the sweep's lateness — and once with this bound's first
// version in place as well, so the sweep was not (alone) the cause; the cause was not found. A timer
// per new connection, cleared by its first request, cuts such a connection at the same bound,
// through the same clientError path as Node's timeout (so it is answered once, 408
// GW_ERR_REQUEST_TIMEOUT), and destroys it one bound later if it is still open, whatever that path
// did: the first head's bound holds unless the timer itself never runs. Later requests on a
// keep-alive connection stay Node's to bound.
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/** The first head's bound: armed for each connection handed to HTTP/1.1, ended by its first request. */
export interface FirstHeadBound {
  /** Call with each connection handed to HTTP/1.1 (never an HTTP/2 one: its requests are not node:http's). */
  readonly bound: (socket: Socket) => void;
  /** A head arrived on `socket` without a node:http 'request' (the fast path, ingress/http1/fast.ts). */
  readonly arrived: (socket: Socket) => void;
}

/** `ms` 0 turns the bound off, as it does Node's. */
export function firstHeadBound(server: HttpServer | HttpsServer, ms: number): FirstHeadBound {
  if (ms <= 0) return { bound: () => undefined, arrived: () => undefined };
  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  const arrived = (socket: Socket): void => {
    const timer = waiting.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    waiting.delete(socket);
  };
  server.on('request', (req: { socket: Socket }) => arrived(req.socket));
  const bound = (socket: Socket): void => {
    let cut: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      waiting.delete(socket);
      if (socket.destroyed) return;
      headTimedOut(server, socket);
      if (!socket.destroyed) cut = setTimeout(() => socket.destroy(), ms).unref();
    }, ms);
    timer.unref();
    waiting.set(socket, timer);
    socket.once('close', () => {
      clearTimeout(timer);
      clearTimeout(cut);
    });
  };
  return { bound, arrived };
}

/**
 * A connection's head did not come in time: handed to the server's clientError listener as Node's
 * own headers timeout is, so every such cut is answered the one way (408 GW_ERR_REQUEST_TIMEOUT).
 */
export function headTimedOut(server: HttpServer | HttpsServer, socket: Socket): void {
  const err = Object.assign(new Error('the request headers were not complete in time'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
  server.emit('clientError', err, socket);
}
