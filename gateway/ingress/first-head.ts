// A second bound on a connection's first request head. Node's own check (server.headersTimeout,
// swept every connectionsCheckingInterval) is what cuts slow heads. In the fault suite's full runs
// on a busy machine it once let a slow-header connection stay open 15 s past a 500-ms timeout
// (Node 24; 3 of 4 runs in one session, 2 of about 8 in the next; never when run alone, never on
// Node 20), cause not found (issue 12's note). A timer per new connection, cleared by its first
// request, cuts such a connection at the same bound, through the same clientError path as Node's
// timeout (so it is answered once, 408 GW_ERR_REQUEST_TIMEOUT). Later requests on a keep-alive
// connection stay Node's to bound. Whatever the clientError path then does, a connection still
// open one more bound later is destroyed here: the head's bound holds even if the answer's close
// never completes (the close path is one of the suspects of that miss).
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/**
 * Returns the function to call with each connection handed to HTTP/1.1 (never an HTTP/2 one: its
 * requests are not node:http's). `ms` 0 turns the bound off, as it does Node's.
 */
export function firstHeadBound(server: HttpServer | HttpsServer, ms: number): (socket: Socket) => void {
  if (ms <= 0) return () => undefined;
  const waiting = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('request', (req: { socket: Socket }) => {
    const timer = waiting.get(req.socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    waiting.delete(req.socket);
  });
  return (socket) => {
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
}

/**
 * A connection's head did not come in time: handed to the server's clientError listener as Node's
 * own headers timeout is, so every such cut is answered the one way (408 GW_ERR_REQUEST_TIMEOUT).
 */
export function headTimedOut(server: HttpServer | HttpsServer, socket: Socket): void {
  const err = Object.assign(new Error('the request headers were not complete in time'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
  server.emit('clientError', err, socket);
}
