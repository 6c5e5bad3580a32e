// The server on the gateway's port, over TCP or TLS, for HTTP/1.1 and HTTP/2 (h2c by prior
// knowledge, h2 by ALPN; ingress/h2.ts): match the route, run its handler, turn anything thrown
// into an error response, and report every request to telemetry when its response is over.
// Handlers own the response once they run. drain() is its shutdown with a deadline.
//
// HTTP/2 requests reach the same handler as Node's compatibility objects (Http2ServerRequest,
// Http2ServerResponse) typed as node:http's: what the handlers and egress/ use behaves the same —
// writeHead, setHeader, write with 'drain', cork/uncork, end(cb), destroy, headersSent,
// writableFinished, 'finish' and 'close', req.complete, req.socket.remoteAddress and .encrypted
// (a proxy to the session's socket), Content-Length (checked against the DATA by Node). The
// differences are handled where they matter: no 'prefinish' and no connection to keep alive or
// discard into (a stream whose body is unread once its answer is out is reset with NO_ERROR
// instead, RFC 9113 §8.1: h2.ts endUnreadBody), pseudo-header fields in rawHeaders (not
// counted as header fields), Connection fields dropped by Node with a warning (none are
// written), Transfer-Encoding refused (none is written; Node frames the body).
import { createServer, type IncomingMessage, type Server, type ServerOptions as NodeServerOptions, type ServerResponse, STATUS_CODES } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { TlsOptions } from 'node:tls';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Config } from '../config/schema';
import { settlesWithin } from '../deadline';
import { OVERLOADED_RETRY_AFTER_S, writeError } from '../egress/write';
import { GatewayError, isGatewayError } from '../errors';
import { type DiscardBound, discardRest } from './body';
import type { RequestObserver, RequestRecord } from '../telemetry/record';
import { type BufferPool, NOT_POOLED } from '../buffers/pool';
import { createContext } from './context';
import { firstHeadBound, headTimedOut } from './first-head';
import { parseGrpcTimeout } from '../grpc/timeout';
import { type AccessTable, type Match, matchRoute, type Route } from './router';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { createH2Side, endUnreadBody, type GrpcHandler, sniffProtocol } from './h2';

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
  /** Request head bounds (server.maxHeaderBytes, server.maxHeaderCount, server.maxUrlBytes). */
  readonly head: Pick<Config['server'], 'maxHeaderBytes' | 'maxHeaderCount' | 'maxUrlBytes'>;
  /** HTTP/2 session limits (server.h2.*). */
  readonly h2: Config['server']['h2'];
  /**
   * gRPC on HTTP/2 (content-type application/grpc…): the pass-through's handler, called with
   * each such stream and its headers; they never reach the routes. Unset: every gRPC call is
   * answered UNIMPLEMENTED (grpc-status 12) in trailers-only form.
   */
  readonly grpc?: GrpcHandler;
  /** Told when an HTTP/2 connection was closed for too many resets (server.h2.maxResetsPerSecond). */
  readonly calmed?: (remote: string | undefined) => void;
  /** Set: HTTPS on the same port (ingress/tls.ts tlsServerOptions); the secure context can be replaced later. */
  readonly tls?: TlsOptions;
  /** Told the code of each answer written straight to the socket (no request exists for the observer). */
  readonly refused?: (code: string) => void;
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

/**
 * The bounds of a request's head that Node does not enforce the way we want: the header count,
 * the URL length, and HTTP/1.1's Host (RFC 9112 §3.2: a server MUST answer 400 without it; Node
 * would, with an empty body). Node is asked for one header field more than server.maxHeaderCount:
 * up to v22.23.1 and v24.18.0 it drops the fields past its maxHeadersCount silently, so only a
 * count above our bound tells; later releases (CVE-2026-58044) refuse more than its bound in the
 * parser as a header overflow (parseError), and the one field over ours still reaches this check.
 */
function headProblem(req: IncomingMessage, head: ServerOptions['head']): GatewayError | undefined {
  const count = req.rawHeaders.length / 2 - (req.httpVersionMajor === 2 ? pseudoFields(req.rawHeaders) : 0);
  if (count > head.maxHeaderCount) {
    return new GatewayError('GW_ERR_REQUEST_HEADERS_TOO_LARGE', `the request has more than ${head.maxHeaderCount} header fields (server.maxHeaderCount)`);
  }
  const urlBytes = req.url?.length ?? 0; // latin1: one char per byte as received
  if (urlBytes > head.maxUrlBytes) {
    return new GatewayError('GW_ERR_REQUEST_URL_TOO_LONG', `the request target is ${urlBytes} bytes, more than ${head.maxUrlBytes} (server.maxUrlBytes)`);
  }
  if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
    return new GatewayError('GW_ERR_REQUEST_MALFORMED', 'the HTTP/1.1 request has no Host header (RFC 9112 section 3.2)');
  }
  return undefined;
}

/** HTTP/2's pseudo-header fields (:method, :path, …) among raw headers: request control data, not header fields. */
function pseudoFields(raw: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.startsWith(':')) n++;
  return n;
}

/** network.protocol.version as OpenTelemetry spells it: "1.1", "2" (h2c and h2 alike). */
const protocolOf = (req: IncomingMessage): string => (req.httpVersionMajor === 2 ? '2' : req.httpVersion);

/**
 * What a request Node's parser refused (clientError) is answered with. llhttp refuses, before
 * any handler runs: a head past maxHeaderSize (HPE_HEADER_OVERFLOW), chunk extensions past 16 KiB,
 * and every malformed or ambiguous framing — Content-Length with Transfer-Encoding in either
 * order, two Content-Length fields (even equal ones), a Transfer-Encoding whose last coding is not
 * chunked, bare CR or LF, obs-fold, control characters in a field — the request-smuggling
 * vectors of RFC 9112 §6.3 and §11.2. Its reason is a fixed text of llhttp's, never client data.
 */
function parseError(err: NodeJS.ErrnoException & { reason?: string }, head: ServerOptions['head']): GatewayError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW': // the byte bound, or (Node ≥ 22.23.2, 24.18.1) the field count: llhttp says which not
      return new GatewayError('GW_ERR_REQUEST_HEADERS_TOO_LARGE',
        `the request line and headers exceed ${head.maxHeaderBytes} bytes (server.maxHeaderBytes) or ${head.maxHeaderCount} fields (server.maxHeaderCount)`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new GatewayError('GW_ERR_REQUEST_TOO_LARGE', 'the chunk extensions of the body exceed 16 KiB');
    default:
      return new GatewayError('GW_ERR_REQUEST_MALFORMED', `the request is not valid HTTP/1.1: ${err.reason ?? err.code ?? 'parse error'}`);
  }
}

/** An error answer written straight to the socket: no request exists yet to answer through. */
function rawErrorAnswer(e: GatewayError): string {
  const body = JSON.stringify({ error: e.message });
  return `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nx-tensorgate-error: ${e.code}\r\nConnection: close\r\n\r\n${body}`;
}

export interface DrainOutcome {
  /** Every connection had ended before the deadline. */
  readonly inTime: boolean;
  /** Answers not finished when the deadline passed (their connections were destroyed). */
  readonly requestsCut: number;
}

/**
 * The listener: node:http's server, or node:https' when server.tls is set (same HTTP behaviour);
 * HTTP/2 connections are handed from it to a node:http2 server (ingress/h2.ts).
 */
export type HttpServer = (Server | HttpsServer) & HttpServerExtras;

interface HttpServerExtras {
  /**
   * Stops accepting, closes idle keep-alive connections at once and each busy one as soon as its
   * answer is out (answers not yet begun say `Connection: close`), and lets the requests in flight
   * finish for `deadlineMs`; then destroys the connections still open, which aborts their
   * requests' signals and so cancels their upstream calls.
   */
  drain(deadlineMs: number): Promise<DrainOutcome>;
  /**
   * A place in the in-flight count for a call that is not an HTTP request (a gRPC pass-through
   * call), within limits.maxInFlightRequests: the function that gives it back, or undefined when
   * the bound is reached.
   */
  admit(): (() => void) | undefined;
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
  const { head } = options;
  const httpOptions: NodeServerOptions = {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    // Node looks for expired requests every 30 s by default: its 60 s headersTimeout cut slow
    // headers only after up to 90 s. A quarter of the timeout (at most 1 s) keeps the cut close.
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.headersTimeoutMs / 4))),
    maxHeaderSize: head.maxHeaderBytes,
    // headProblem answers a missing Host with our {"error"}; Node's own 400 has no body.
    requireHostHeader: false,
  };
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const startNs = process.hrtime.bigint();
    let match: Match | undefined;
    const headError = headProblem(req, head);
    let routeError: unknown = headError;
    if (headError === undefined) {
      try {
        match = matchRoute(routes, req.method, req.url, options.access, req.headers);
      } catch (err) {
        routeError = err;
      }
    }
    const record: RequestRecord = {
      route: match?.route.name ?? 'unmatched', method: req.method ?? '', status: 0, startNs, endNs: 0n,
      declaredBytes: Number(req.headers['content-length'] ?? 0) || 0, protocol: protocolOf(req),
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
    if (req.httpVersionMajor === 2) {
      endUnreadBody(req as unknown as Http2ServerRequest, timeouts.discardBodyMs);
      h2.watchAnswer(req as unknown as Http2ServerRequest, res as unknown as Http2ServerResponse, () => {
        record.errorCode = 'GW_ERR_REQUEST_ANSWER_UNREAD';
      });
      if (timeouts.requestTimeoutMs > 0 && !req.complete) streamRequestTimeout(req, res, record, timeouts.requestTimeoutMs);
    }

    if (options.corsOrigin !== '') {
      res.setHeader('Access-Control-Allow-Origin', options.corsOrigin);
      res.setHeader('Access-Control-Expose-Headers', EXPOSED);
      if (req.method === 'OPTIONS' && headError === undefined) {
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
      // Inference routes to Triton only: every other route's upstream call is a short
      // control-plane one, and a relayed route's headers belong to its upstream.
      if (match.route.category === 'inference' && match.route.relayed !== true) askedMs = parseGrpcTimeout(req.headers['grpc-timeout']);
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
    // the message by then; node:http2 may still be writing it and holds it (upstream/infer/h2-plane.ts).
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
  };
  // TLS: the handshake gets the headers' bound (Node's own is 120 s).
  const server = options.tls === undefined
    ? createServer(httpOptions, handle)
    : createHttpsServer({ ...httpOptions, handshakeTimeout: timeouts.headersTimeoutMs, ...options.tls }, handle);
  const h2 = createH2Side({ h2: options.h2, head, timeouts, grpc: options.grpc, calmed: options.calmed },
    (req, res) => handle(req as unknown as IncomingMessage, res as unknown as ServerResponse));
  // Connections still telling their protocol (cleartext): closed at once by a drain, as idle ones.
  const sniffing = new Set<Socket>();
  const boundHead = firstHeadBound(server, timeouts.headersTimeoutMs);
  // node:http's own connection listener (HTTP/1.1) is taken off the event that carries a new
  // connection and called by ours for the connections that are not HTTP/2. Called with the
  // listening server as `this`, it registers the connection for node:http's tracking as before
  // (headersTimeout / requestTimeout sweep, closeIdleConnections, close()): the connection simply
  // arrives a few bytes later.
  if (options.tls === undefined) {
    const http1 = takeListeners(server, 'connection');
    server.on('connection', (socket: Socket) => {
      sniffing.add(socket);
      sniffProtocol(socket, timeouts.headersTimeoutMs, (protocol) => {
        sniffing.delete(socket);
        if (protocol === 'h2') {
          h2.server.emit('connection', socket); // node:http2 reads the bytes put back first
          return;
        }
        for (const listener of http1) listener.call(server, socket);
        boundHead(socket);
        socket.resume();
      }, () => {
        sniffing.delete(socket);
        headTimedOut(server, socket);
      });
    });
  } else {
    const http1 = takeListeners(server, 'secureConnection');
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol === 'h2') h2.server.emit('connection', socket);
      else {
        for (const listener of http1) listener.call(server, socket);
        boundHead(socket);
      }
    });
  }
  // Every TCP connection, so that the drain's deadline cuts them all: node:http tracks an HTTP/1.1
  // one only once handed over (after the sniff, after a TLS handshake), and HTTP/2 ones not at all.
  const tcpSockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    tcpSockets.add(socket);
    socket.once('close', () => tcpSockets.delete(socket));
  });
  // One more than the bound, so that headProblem sees a count past it (0 would be no bound at all).
  server.maxHeadersCount = head.maxHeaderCount + 1;

  // Node calls this for a request its parser refused (parseError) and for headersTimeout /
  // requestTimeout; the connection is closed either way. The answer is our {"error"} with its
  // code: through the request's answer when its headers had arrived and nothing was written yet
  // (a slow or malformed body), else straight on the socket. A failed parser fails again on every
  // later chunk of the connection, and Node calls again: answered once.
  const refused = new WeakSet<Duplex>();
  server.on('clientError', (err: NodeJS.ErrnoException, stream: Duplex) => {
    if (refused.has(stream)) return;
    refused.add(stream);
    const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    // Answered: what the parser refused, and our timeouts. Anything else is the transport failing
    // — a reset, the client's end of the stream mid-request (HPE_INVALID_EOF_STATE), and on TLS a
    // failed or timed-out handshake (node:https passes tlsClientError on here; an HTTP answer
    // written into a socket without a session would wait for a handshake that never comes). Nobody
    // to answer: a handler reading the body learns it from the request's close (GW_ERR_REQUEST_ABORTED).
    if (!timeout && (err.code?.startsWith('HPE_') !== true || err.code === 'HPE_INVALID_EOF_STATE')) {
      stream.destroy();
      return;
    }
    const socket = stream as Socket;
    const under = current.get(socket);
    if (under !== undefined && !under.res.headersSent && !(timeout && under.res.req.complete)) {
      const e = timeout
        ? new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request was not complete within ${timeouts.requestTimeoutMs} ms (server.requestTimeoutMs)`)
        : parseError(err, head);
      under.record.errorCode = e.code;
      under.res.shouldKeepAlive = false;
      writeError(under.res, e);
      // The parser has stopped: the body never ends, and node:http tells the request nothing when
      // the connection closes after an answer. Once the answer is out, the request is destroyed,
      // so a handler still reading its body settles (GW_ERR_REQUEST_ABORTED) and gives back its
      // in-flight place and buffers.
      const req = under.res.req;
      under.res.once('close', () => {
        if (!req.complete) req.destroy();
      });
      return; // node:http closes the connection once the answer is out (Connection: close)
    }
    if (socket.writable && (under === undefined || !under.res.headersSent)) {
      const e = timeout
        ? new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request headers were not complete within ${timeouts.headersTimeoutMs} ms (server.headersTimeoutMs)`)
        : parseError(err, head);
      options.refused?.(e.code);
      socket.end(rawErrorAnswer(e));
      socket.destroySoon();
      return;
    }
    // An answer is under way (its headers are out): too late for a status. A parse error cuts the
    // connection at once, the only honest signal left; a timeout lets what is written go out first.
    if (timeout) socket.destroySoon();
    else socket.destroy();
  });

  const drain = async (deadlineMs: number): Promise<DrainOutcome> => {
    draining = true;
    for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false;
    for (const socket of sniffing) socket.destroy();
    // HTTP/2: GOAWAY on every session; its streams in flight finish, new ones are refused, and the
    // session ends once they have (node:http2's close()).
    h2.goAway();
    // Stops listening and closes the idle connections; calls back once every connection is gone.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    if (await settlesWithin(closed, deadlineMs)) return { inTime: true, requestsCut: 0 };
    // REST answers not finished, and gRPC calls still open (their streams are cut with their sessions).
    const requestsCut = open.size + h2.grpcStreamsOpen();
    server.closeAllConnections();
    h2.destroyAll();
    for (const socket of tcpSockets) socket.destroy();
    await closed;
    return { inTime: false, requestsCut };
  };
  const admit = (): (() => void) | undefined => {
    if (inFlight >= limits.maxInFlightRequests) return undefined;
    inFlight++;
    let held = true;
    return () => {
      if (held) inFlight--;
      held = false;
    };
  };
  return Object.assign(server, { drain, admit });
}

/** The listeners of `event`, taken off `server` (to be called by a listener of ours instead). */
function takeListeners(server: Server | HttpsServer, event: 'connection' | 'secureConnection'): ((...args: unknown[]) => void)[] {
  const listeners = server.listeners(event) as ((...args: unknown[]) => void)[];
  server.removeAllListeners(event);
  return listeners;
}

/**
 * HTTP/2 has no node:http sweep: a stream whose body is not complete within
 * server.requestTimeoutMs gets the same 408 when no answer has begun (the stream is then reset,
 * its body unread, and a handler still reading it settles with GW_ERR_REQUEST_ABORTED),
 * or is reset when one has. Its headers cannot be slow: a stream exists once its whole header
 * block has arrived.
 */
function streamRequestTimeout(req: IncomingMessage, res: ServerResponse, record: RequestRecord, ms: number): void {
  const timer = setTimeout(() => {
    if (req.complete || res.writableFinished) return;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const e = new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request was not complete within ${ms} ms (server.requestTimeoutMs)`);
    record.errorCode = e.code;
    writeError(res, e);
  }, ms);
  req.once('end', () => clearTimeout(timer));
  res.once('close', () => clearTimeout(timer));
}
