// The HTTP/1.1 server: match the route, run its handler, turn anything thrown into an error
// response, and report every request to telemetry when its response is over. Handlers own the
// response once they run. drain() is its shutdown with a deadline.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Config } from '../config/schema';
import { settlesWithin } from '../deadline';
import { OVERLOADED_RETRY_AFTER_S, writeError } from '../egress/write';
import { GatewayError, isGatewayError } from '../errors';
import { type DiscardBound, discardRest } from './body';
import type { RequestObserver, RequestRecord } from '../telemetry/record';
import { type BufferPool, NOT_POOLED } from '../buffers/pool';
import { createContext } from './context';
import { parseGrpcTimeout } from './grpc-timeout';
import { type AccessTable, type Match, matchRoute, type Route } from './router';

export interface ServerOptions {
  /** server.corsOrigin: '' = no CORS headers. */
  readonly corsOrigin: string;
  /** Restricted API groups (api.restricted, api.disabled). */
  readonly access?: AccessTable;
  /** Where requests frame their messages (buffers.poolBytes); without it, fresh allocations. */
  readonly bufferPool?: BufferPool;
  /** In-flight bounds (limits.maxInFlightRequests, limits.maxInFlightBodyBytes). */
  readonly limits: Pick<Config['limits'], 'maxInFlightRequests' | 'maxInFlightBodyBytes'>;
  /** Timeouts and the early-answer drain (server.*TimeoutMs, server.discardBody*). */
  readonly timeouts: Pick<Config['server'], 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'discardBodyBytes' | 'discardBodyMs'>;
}

/** Exposed to browsers when CORS is on: the hop timings and the binary-extension split point. */
const EXPOSED = 'Server-Timing, Inference-Header-Content-Length';

/** The code an error answer carries (egress/write.ts makes anything else GW_ERR_GATEWAY_INTERNAL). */
const codeOf = (err: unknown): string => (isGatewayError(err) ? err.code : 'GW_ERR_GATEWAY_INTERNAL');

function fail(req: IncomingMessage, res: ServerResponse, record: RequestRecord, err: unknown, discard: DiscardBound): void {
  if (res.writableFinished) return; // answered already (a request timeout)
  record.errorCode = codeOf(err);
  discardRest(req, res, discard); // an answer before the body was read: drain a bounded rest, or close
  writeError(res, err);
}

/**
 * Admission against the in-flight bounds: the answer to refuse with, or undefined. A body larger
 * than the whole byte bound still goes through when no other body is in flight, or it could never
 * be served (limits.maxBodyBytes caps it).
 */
function overloaded(limits: ServerOptions['limits'], requests: number, bodyBytes: number, declared: number): GatewayError | undefined {
  if (requests >= limits.maxInFlightRequests) {
    return new GatewayError('GW_ERR_REQUEST_OVERLOADED',
      `the gateway is overloaded: ${requests} requests in flight (limits.maxInFlightRequests); retry after ${OVERLOADED_RETRY_AFTER_S} s`);
  }
  if (declared > 0 && bodyBytes > 0 && bodyBytes + declared > limits.maxInFlightBodyBytes) {
    return new GatewayError('GW_ERR_REQUEST_OVERLOADED',
      `the gateway is overloaded: ${bodyBytes} body bytes in flight and ${declared} more declared exceed ${limits.maxInFlightBodyBytes} (limits.maxInFlightBodyBytes); retry after ${OVERLOADED_RETRY_AFTER_S} s`);
  }
  return undefined;
}

/** Node's canned answers to a request it could not parse (node:http's socketOnError), kept as they are. */
const PARSE_ANSWERS: Readonly<Record<string, string>> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
};
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/** A 408 written straight to the socket: no request exists yet to answer through. */
function rawTimeoutAnswer(message: string): string {
  const body = JSON.stringify({ error: message });
  return 'HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n'
    + `Content-Length: ${Buffer.byteLength(body)}\r\nx-tensorgate-error: GW_ERR_REQUEST_TIMEOUT\r\nConnection: close\r\n\r\n${body}`;
}

export interface DrainOutcome {
  /** Every connection had ended before the deadline. */
  readonly inTime: boolean;
  /** Answers not finished when the deadline passed (their connections were destroyed). */
  readonly requestsCut: number;
}

export interface HttpServer extends Server {
  /**
   * Stops accepting, closes idle keep-alive connections at once and each busy one as soon as its
   * answer is out (answers not yet begun say `Connection: close`), and lets the requests in flight
   * finish for `deadlineMs`; then destroys the connections still open, which aborts their
   * requests' signals and so cancels their upstream calls.
   */
  drain(deadlineMs: number): Promise<DrainOutcome>;
}

export function createHttpServer(routes: readonly Route[], observer: RequestObserver, options: ServerOptions): HttpServer {
  /** Answers not finished yet: told to close their connection when a drain begins. */
  const open = new Set<ServerResponse>();
  let draining = false;
  const { limits, timeouts } = options;
  const discard: DiscardBound = { bytes: timeouts.discardBodyBytes, ms: timeouts.discardBodyMs };
  /** Requests admitted and not over yet, and the sum of their declared bodies (probes apart). */
  let inFlight = 0;
  let inFlightBodyBytes = 0;
  /** The answer under way on each connection (for a request timeout to answer through). */
  const current = new WeakMap<Socket, { res: ServerResponse; record: RequestRecord }>();
  const server = createServer({
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    // Node looks for expired requests every 30 s by default: its 60 s headersTimeout cut slow
    // headers only after up to 90 s. A quarter of the timeout (at most 1 s) keeps the cut close.
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.headersTimeoutMs / 4))),
  }, (req, res) => {
    const startNs = process.hrtime.bigint();
    let match: Match | undefined;
    let routeError: unknown;
    try {
      match = matchRoute(routes, req.method, req.url, options.access, req.headers);
    } catch (err) {
      routeError = err;
    }
    const record: RequestRecord = {
      route: match?.route.name ?? 'unmatched', method: req.method ?? '', status: 0, startNs, endNs: 0n,
      declaredBytes: Number(req.headers['content-length'] ?? 0) || 0,
    };
    if (match?.params[0]) record.model = match.params[0];
    const observed = observer.start(req, startNs, record.route);
    // Reported once: when the answer is handed to the socket, or when the connection closes first
    // — then once the handler has settled, so that the reason it stopped (GW_ERR_REQUEST_ABORTED,
    // GW_ERR_UPSTREAM_CANCELLED) reaches the log line and the metrics although nobody reads it.
    let handling = false;
    let closed = false;
    const report = (): void => {
      if (record.endNs !== 0n) return;
      if (record.status === 0) record.status = res.statusCode;
      record.endNs = process.hrtime.bigint();
      open.delete(res);
      if (current.get(req.socket)?.res === res) current.delete(req.socket);
      leave();
      // Node's server.close() closes the connections idle at that moment only; one whose answer
      // ends later would wait for keepAliveTimeout. It is idle once Node has handled the finish.
      if (draining) setImmediate(() => server.closeIdleConnections());
      observed.end(record);
    };
    // Admitted requests hold their place until both their answer is out and their handler has
    // settled (its buffers are released then).
    let holds = 0;
    let heldBytes = 0;
    const leave = (): void => {
      if (holds === 0 || --holds > 0) return;
      inFlight--;
      inFlightBodyBytes -= heldBytes;
    };
    res.once('finish', report);
    // A handler that answered without reading the body (GET with a body, a probe): bounded too.
    res.once('prefinish', () => {
      if (req.listenerCount('data') === 0) discardRest(req, res, discard);
    });
    current.set(req.socket, { res, record });
    res.once('close', () => {
      closed = true;
      if (!handling) report();
    });
    open.add(res);
    if (draining) res.shouldKeepAlive = false;

    if (options.corsOrigin !== '') {
      res.setHeader('Access-Control-Allow-Origin', options.corsOrigin);
      res.setHeader('Access-Control-Expose-Headers', EXPOSED);
      if (req.method === 'OPTIONS') {
        res.writeHead(204, {
          'Access-Control-Allow-Methods': 'GET, POST',
          'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? '*',
          'Access-Control-Max-Age': 600,
        });
        res.end();
        return;
      }
    }
    if (match === undefined) {
      fail(req, res, record, routeError, discard);
      return;
    }
    let askedMs: number | undefined;
    try {
      // Inference routes only: every other route's upstream call is a short control-plane one.
      if (match.route.category === 'inference') askedMs = parseGrpcTimeout(req.headers['grpc-timeout']);
    } catch (err) {
      fail(req, res, record, err, discard);
      return;
    }
    // Probes are cheap and bodiless; refusing them would have an orchestrator restart or unroute a
    // gateway that is only busy.
    if (match.route.probe !== true) {
      const refused = overloaded(limits, inFlight, inFlightBodyBytes, record.declaredBytes);
      if (refused !== undefined) {
        fail(req, res, record, refused, discard);
        return;
      }
      inFlight++;
      heldBytes = record.declaredBytes;
      inFlightBodyBytes += heldBytes;
      holds = 2;
    }
    const askedDeadline = askedMs === undefined ? undefined : Date.now() + askedMs; // counted from the request's arrival
    const ctx = createContext(req, res, match.params, record, observed.upstreamHeaders, options.bufferPool?.forRequest() ?? NOT_POOLED, askedDeadline);
    // The handler settles after its upstream call has ended (answer, gRPC error, deadline or the
    // client's abort) and its answer was handed to the response, which never points into the
    // request's message: nothing of ours reads the request's buffers any more. grpc-js has copied
    // the message by then; node:http2 may still be writing it and holds it (upstream/h2-call.ts).
    handling = true;
    match.handler(ctx).then(() => {
      handling = false;
      ctx.buffers.release();
      leave();
      if (closed) report();
    }, (err: unknown) => {
      handling = false;
      ctx.buffers.release();
      leave();
      if (!ctx.signal.aborted) {
        fail(req, res, record, err, discard);
        return;
      }
      // The client is gone: no answer, but the record says why (with the condition's status when
      // none was sent).
      record.errorCode ??= codeOf(err);
      if (!res.headersSent && isGatewayError(err)) record.status = err.status;
      report();
    });
  });

  // Node calls this for a request that cannot be parsed and for headersTimeout/requestTimeout.
  // A timeout gets our 408 with {"error"}: through the request's answer when its headers had
  // arrived (the body was too slow) and nothing was written yet, else straight on the socket.
  // Everything else keeps Node's own answers. The connection is closed either way.
  server.on('clientError', (err: NodeJS.ErrnoException, stream: Duplex) => {
    const socket = stream as Socket;
    const under = current.get(socket);
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      if (under !== undefined && !under.res.headersSent && !under.res.req.complete) {
        const e = new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request was not complete within ${timeouts.requestTimeoutMs} ms (server.requestTimeoutMs)`);
        under.record.errorCode = e.code;
        under.res.shouldKeepAlive = false;
        writeError(under.res, e);
        return; // node:http closes the connection once the answer is out (Connection: close)
      }
      if (socket.writable && (under === undefined || !under.res.headersSent)) {
        socket.end(rawTimeoutAnswer(`the request headers were not complete within ${timeouts.headersTimeoutMs} ms (server.headersTimeoutMs)`));
      }
      socket.destroySoon();
      return;
    }
    if (socket.writable && (under === undefined || !under.res.headersSent)) socket.write(PARSE_ANSWERS[err.code ?? ''] ?? BAD_REQUEST);
    socket.destroy(err);
  });

  const drain = async (deadlineMs: number): Promise<DrainOutcome> => {
    draining = true;
    for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false;
    // Stops listening and closes the idle connections; calls back once every connection is gone.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    if (await settlesWithin(closed, deadlineMs)) return { inTime: true, requestsCut: 0 };
    const requestsCut = open.size;
    server.closeAllConnections();
    await closed;
    return { inTime: false, requestsCut };
  };
  return Object.assign(server, { drain });
}
