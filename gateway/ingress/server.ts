// The server on the gateway's port, over TCP or TLS, for HTTP/1.1 and HTTP/2 (h2c by prior
// knowledge, h2 by ALPN; ingress/h2.ts): match the route, run its handler, turn anything thrown
// into an error response, and report every request to telemetry when its response is over.
// Handlers own the response once they run. Each request is a few named steps (handle, watch,
// run) over one Exchange; admission (ingress/admission.ts), the answers to what Node's parser
// refuses (ingress/client-errors.ts) and the drain (ingress/drain.ts) live in files of their own.
//
// Cleartext HTTP/1.1 requests of the hot inference routes (FAST_ROUTES) are read by the fast path
// (ingress/http1/fast.ts, server.fastPath) and reach `handle` as its own request and answer
// (ingress/http1/messages.ts), the subset of node:http's objects that everything after the head
// uses; everything else on such a connection is handed to node:http with the bytes read put back.
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
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type RequestListener, type Server, type ServerOptions as NodeServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { channel } from 'node:diagnostics_channel';
import type { TlsOptions } from 'node:tls';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Config } from '../config/schema';
import { writeError } from '../egress/write';
import { GatewayError, isGatewayError } from '../errors';
import { unhook } from '../unhook';
import { bodyCut, type DiscardBound, discardRest } from './body';
import type { ObservedRequest, RequestObserver, RequestRecord } from '../telemetry/record';
import { type BufferPool, NOT_POOLED } from '../buffers/pool';
import { Context } from './context';
import { type FirstHeadBound, firstHeadBound, headTimedOut } from './first-head';
import { type FastHost, type LaneOutcome, type PlannedAnswer, type PlannedConnection, serveFast } from './http1/fast';
import { cachedPowerArrays } from '../json/number-print';
import { CompiledLane, type KeptAnswer, type KeptReport, type KeptRequest, type LaneCounts, type LaneInFlight, type LaneTimes, type LaneOptions } from './http1/lane';
import { type Hop, Ledger } from '../infer/ledger';
import { FastResponse, plannedHead } from './http1/messages';
import { acceptsEventStream } from '../egress/sse';
import { parseGrpcTimeout } from '../grpc/timeout';
import { type AccessTable, type Match, matchRoute, type PlannedRequest, type PlannedRoute, type Route } from './router';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { createH2Side, endUnreadBody, type GrpcHandler, type H2Side, sniffProtocol } from './h2';
import { Admission } from './admission';
import { bodyBytesOf, CountedResponse } from './counted-response';
import { type Answering, ClientErrors, requestTimeout } from './client-errors';
import { type Answer, Drain, type DrainOutcome } from './drain';
import { nowNs } from '../infer/clock';

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
  /**
   * server.fastPath: cleartext HTTP/1.1 requests of the hot inference routes are read and answered
   * by our own loop (ingress/http1/fast.ts), everything else by node:http on the same connection.
   */
  readonly fastPath?: boolean;
  /** server.plannedInfer: on the fast path, the routes' planned requests (Route.planned). */
  readonly plannedInfer?: boolean;
  /** server.compiledLane, where the configuration allows it (gateway.ts): repeated planned requests served in C. */
  readonly lane?: LaneOptions;
}

/** node:http's diagnostics channels, published by the fast path as node:http does. */
const requestStart = channel('http.server.request.start');
const responseFinish = channel('http.server.response.finish');

/** The routes the fast path serves (ingress/http1/fast.ts): V2 infer, every body form, and V1 predict. */
const FAST_ROUTES: ReadonlySet<string> = new Set(['infer', 'v1_predict']);

/** Exposed to browsers when CORS is on: the hop timings and the binary-extension split point. */
const EXPOSED = 'Server-Timing, Inference-Header-Content-Length';

/** The code an error answer carries (egress/write.ts makes anything else GW_ERR_GATEWAY_INTERNAL). */
const codeOf = (err: unknown): string => (isGatewayError(err) ? err.code : 'GW_ERR_GATEWAY_INTERNAL');

function fail(req: IncomingMessage, res: ServerResponse, record: RequestRecord, err: unknown, discard: DiscardBound, route?: Route): void {
  if (res.writableFinished) return; // answered already (a request timeout)
  record.errorCode = codeOf(err);
  discardRest(req, res, discard); // an answer before the body was read: drain a bounded rest, or close
  writeError(res, err, route?.errorShape);
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
 * The listener: node:http's server, or node:https' when server.tls is set (same HTTP behaviour);
 * HTTP/2 connections are handed from it to a node:http2 server (ingress/h2.ts).
 */
export type HttpServer = (Server | HttpsServer) & HttpServerExtras;

interface HttpServerExtras {
  /** What the compiled lane kept no longer holds (a model's configuration was evicted). */
  forgetKept(): void;
  /** The requests the compiled lane holds now, by route (none without it). */
  laneInFlight(): readonly LaneInFlight[];
  /** The compiled lane's counts (CompiledLane.counts), undefined where it is off. */
  laneCounts(): LaneCounts | undefined;
  /** Whether the backend set would call the compiled lane's backend now (CompiledLane.backendUsable). */
  laneBackendUsable(usable: boolean): void;
  /**
   * Stops accepting, closes idle keep-alive connections at once and each busy one as soon as its
   * answer is out (answers not yet begun say `Connection: close`), and lets the requests in flight
   * finish for `deadlineMs`; then destroys the connections still open, which aborts their
   * requests' signals and so cancels their upstream calls (ingress/drain.ts).
   */
  drain(deadlineMs: number): Promise<DrainOutcome>;
  /**
   * A place in the in-flight count for a call that is not an HTTP request (a gRPC pass-through
   * call), within limits.maxInFlightRequests: the function that gives it back, or undefined when
   * the bound is reached (ingress/admission.ts).
   */
  admit(): (() => void) | undefined;
}

/** Ingress.current's key on a socket. */
const UNDER_WAY = Symbol('tensorgate.answerUnderWay');
type UnderWay = Socket & { [UNDER_WAY]?: Exchange | undefined };

/**
 * What every request of one server shares: its routes and options, the in-flight bounds, the
 * drain's bookkeeping, and the answer under way on each connection.
 */
class Ingress {
  readonly admission: Admission;
  readonly drain = new Drain();
  /**
   * The answer under way on a connection (for a request timeout or a parse error to answer
   * through): kept on the socket itself, since a WeakMap's table, replaced as requests come and
   * go, would keep answers alive (../linked-list.ts).
   */
  readonly current = (socket: Socket): Exchange | undefined => (socket as UnderWay)[UNDER_WAY];
  readonly discard: DiscardBound;
  /** Set once the servers exist: they are created with this state's handler. */
  server!: Server | HttpsServer;
  h2!: H2Side;
  /** The compiled lane (ingress/http1/lane.ts), when it serves. */
  readonly lane: CompiledLane | undefined;
  /**
   * The largest body a planned request gathers before it is sent: a larger one is the handler's,
   * which sends it upstream as it arrives (cut-through) rather than holding it whole. Where the
   * lane serves, which reads a body whole in C (lane.c's MAX_BODY), up to LANE_BODY_BYTES are
   * planned, so that their repeats are the lane's.
   */
  readonly plannedBodyBytes: number;

  constructor(readonly routes: readonly Route[], readonly observer: RequestObserver, readonly options: ServerOptions) {
    this.admission = new Admission(options.limits);
    this.discard = { bytes: options.timeouts.discardBodyBytes, ms: options.timeouts.discardBodyMs };
    this.lane = options.lane === undefined || options.fastPath !== true || options.plannedInfer === false ? undefined
      : CompiledLane.load(options.lane, { lent: (socket) => this.drain.lent(socket), returned: (socket) => this.drain.returned(socket) }, this.admission,
        cachedPowerArrays());
    const lane = this.lane;
    if (lane !== undefined) this.drain.stopLane = () => lane.stop();
    this.plannedBodyBytes = lane === undefined ? PLANNED_BODY_BYTES : LANE_BODY_BYTES;
  }
}

/**
 * One request and its answer, from the arrival of its head until both its answer is out (or its
 * connection closed) and its handler has settled.
 */
class Exchange implements Answering, Answer {
  // The drain's list of answers under way (Answer).
  linkPrev: Answer | undefined;
  linkNext: Answer | undefined;
  linked = false;
  /** The handler has run and not settled yet. */
  handling = false;
  /** The response has closed. */
  closed = false;
  /** The whole answer was handed to the connection ('finish'). */
  finished = false;
  /**
   * An admitted request holds its place (and its declared body bytes) until both its answer is
   * out and its handler has settled (its buffers are released then): 2 holds, one for each.
   */
  holds = 0;
  heldBytes = 0;
  /** The route matched, once it runs: its errors are answered in its shape (Route.errorShape). */
  route: Route | undefined;
  /** Set when the handler runs. */
  ctx: Context | undefined;
  /** Run once when reported (RequestContext.whenDone). */
  private done: (() => void)[] | undefined;
  /** The connection, as when the request came (node:http may let go of req.socket before the end). */
  readonly socket: Socket;
  /** HTTP/1.1: bytes written on the connection before this answer; this answer's known to have left (cutting). */
  private readonly bytesBefore: number;
  private bytesLeft: number | undefined;

  constructor(
    readonly ingress: Ingress, readonly req: IncomingMessage, readonly res: ServerResponse,
    readonly record: RequestRecord, readonly observed: ObservedRequest,
  ) {
    this.socket = req.socket;
    this.bytesBefore = req.httpVersionMajor === 1 ? req.socket.bytesWritten : 0;
  }

  /**
   * Reported once: when the answer is out, or when the connection closes first — then once the
   * handler has settled, so that the reason it stopped (GW_ERR_REQUEST_ABORTED,
   * GW_ERR_UPSTREAM_CANCELLED) reaches the log line and the metrics although nobody reads it.
   * Out is 'finish': HTTP/1.1's is the socket's write callback of the answer's last chunk, so
   * every byte has been taken by the kernel (Node's lib/_http_outgoing.js end()); HTTP/2's is the
   * stream's close, its writable side finished only when END_STREAM went (Node's lib/internal/http2/compat.js).
   */
  report(): void {
    const { record, res, req, ingress } = this;
    if (record.endNs !== 0) return;
    if (record.status === 0) record.status = res.statusCode;
    record.endNs = nowNs();
    record.bytesOut = bodyBytesOf(res);
    // Reported without 'finish': the connection or stream closed before the answer's end.
    if (!this.finished) record.incomplete = true;
    const socket = req.httpVersionMajor === 1 ? req.socket as UnderWay | null : null;
    if (socket !== null && socket[UNDER_WAY] === this) socket[UNDER_WAY] = undefined;
    this.leave();
    if (this.done !== undefined) for (const fn of this.done.splice(0)) fn();
    const cut = !this.finished && res.headersSent;
    if (cut) this.cut();
    ingress.drain.answered(this, this.socket, cut);
    this.observed.end(record);
  }

  /**
   * An answer begun and not all out: marked; its bytes_out is what was handed to the connection,
   * and, when the drain's deadline cut it, no more than what cutting() saw leave.
   */
  private cut(): void {
    const { record } = this;
    record.errorCode ??= 'GW_ERR_REQUEST_ANSWER_CUT';
    if (this.bytesLeft !== undefined) record.bytesOut = Math.min(record.bytesOut ?? 0, this.bytesLeft);
  }

  /** The drain's deadline is about to destroy the connection: what has left of the answer (HTTP/1.1), head included. */
  cutting(): void {
    const { socket } = this;
    if (this.req.httpVersionMajor !== 1 || socket.destroyed) return;
    // writableLength counts the write still in progress: the bytes the kernel has taken, at least.
    this.bytesLeft = Math.max(0, socket.bytesWritten - socket.writableLength - this.bytesBefore);
  }

  /** RequestContext.whenDone: `fn` runs when the request is reported, or now if it was. */
  whenDone(fn: () => void): void {
    if (this.record.endNs !== 0) fn();
    else (this.done ??= []).push(fn);
  }

  /** One of the two holds given back; the place with the second. */
  leave(): void {
    if (this.holds === 0 || --this.holds > 0) return;
    this.ingress.admission.leave(this.heldBytes);
  }

  fail(err: unknown): void {
    fail(this.req, this.res, this.record, err, this.ingress.discard, this.route);
  }

  /** The response closed: reported now unless the handler is still running. */
  onClose(): void {
    this.closed = true;
    if (!this.handling) this.report();
    this.ctx?.closed();
  }

  /** The handler settled: its buffers released, its hold given back. */
  handled(): void {
    this.handling = false;
    this.ctx!.buffers.release();
    this.leave();
    if (this.closed) this.report();
  }

  /** The handler threw: answered with the error unless the client is gone. */
  threw(err: unknown): void {
    const { ctx, record, res } = this;
    this.handling = false;
    ctx!.buffers.release();
    this.leave();
    if (!ctx!.signal.aborted) {
      this.fail(err);
      return;
    }
    // The client is gone: no answer, but the record says why (with the condition's status when
    // none was sent).
    record.errorCode ??= codeOf(err);
    if (!res.headersSent && isGatewayError(err)) record.status = err.status;
    this.report();
  }
}

/**
 * Every request, HTTP/1.1 and HTTP/2 alike: matched, recorded, watched, then run or refused. `fast`:
 * the fast path's request, matched already (its parser kept the head's bounds, http1/head.ts).
 */
function handle(ingress: Ingress, req: IncomingMessage, res: ServerResponse, fast?: Match): void {
  const startNs = nowNs();
  let match: Match | undefined = fast;
  const headError = fast === undefined ? headProblem(req, ingress.options.head) : undefined;
  let routeError: unknown = headError;
  if (headError === undefined && fast === undefined) {
    try {
      match = matchRoute(ingress.routes, req.method, req.url, ingress.options.access, req.headers);
    } catch (err) {
      routeError = err;
    }
  }
  const record: RequestRecord = {
    route: match?.route.name ?? 'unmatched', method: req.method ?? '', status: 0, startNs, endNs: 0,
    declaredBytes: Number(req.headers['content-length'] ?? 0) || 0, protocol: protocolOf(req),
  };
  if (match?.params[0]) record.model = match.params[0];
  if (fast !== undefined) record.fastPath = true;
  const exchange = new Exchange(ingress, req, res, record, ingress.observer.start(req, startNs, record.route));
  watch(exchange);
  if (ingress.options.corsOrigin !== '' && answeredCors(ingress.options.corsOrigin, req, res, headError === undefined)) return;
  if (match === undefined) {
    exchange.fail(routeError);
    return;
  }
  run(exchange, match);
}

/** The answer's end, the connection's close, the drain, and on HTTP/2 the bounds node:http does not keep. */
function watch(exchange: Exchange): void {
  const { ingress, req, res, record } = exchange;
  const { timeouts } = ingress.options;
  // on, not once (which wraps each listener in two more objects): a response emits each of these once.
  res.on('finish', () => {
    exchange.finished = true;
    exchange.report();
  });
  // A handler that answered without reading the body (GET with a body, a probe): bounded too.
  res.on('prefinish', () => {
    if (req.listenerCount('data') === 0) discardRest(req, res, ingress.discard);
  });
  // HTTP/1.1 only: its parse errors and timeouts come through 'clientError' (an HTTP/2 request's
  // socket is a proxy of its session's, shared by its streams).
  if (req.httpVersionMajor === 1) (req.socket as UnderWay)[UNDER_WAY] = exchange;
  res.on('close', () => exchange.onClose());
  ingress.drain.began(exchange, exchange.socket);
  if (req.httpVersionMajor === 2) {
    res.on('close', unhookH2);
    endUnreadBody(req as unknown as Http2ServerRequest, ingress.discard);
    ingress.h2.watchAnswer(req as unknown as Http2ServerRequest, res as unknown as Http2ServerResponse, () => {
      record.errorCode = 'GW_ERR_REQUEST_ANSWER_UNREAD';
    });
    if (timeouts.requestTimeoutMs > 0 && !req.complete) streamRequestTimeout(req, res, record, timeouts.requestTimeoutMs);
  }
}

/**
 * Once an HTTP/2 answer has closed, its stream and the compatibility request and response let go
 * of the exchange (unhook.ts). Registered after the exchange's own 'close' listener: `this` is the response.
 */
function unhookH2(this: ServerResponse): void {
  const res = this as unknown as Http2ServerResponse;
  unhook(res.req);
  unhook(res);
  unhook(res.stream);
}

/** CORS headers on every answer (server.corsOrigin set); a preflight is answered here: true when it was. */
function answeredCors(origin: string, req: IncomingMessage, res: ServerResponse, headOk: boolean): boolean {
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader('Access-Control-Expose-Headers', EXPOSED);
  if (req.method !== 'OPTIONS' || !headOk) return false;
  res.writeHead(204, {
    'Access-Control-Allow-Methods': 'GET, POST',
    'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? '*',
    'Access-Control-Max-Age': 600,
  });
  res.end();
  return true;
}

/** A matched request: its asked deadline read, admitted against the in-flight bounds, and handed to its handler. */
function run(exchange: Exchange, match: Match): void {
  const { ingress, req, res, record } = exchange;
  exchange.route = match.route;
  let askedMs: number | undefined;
  try {
    // Inference routes to Triton only: every other route's upstream call is a short
    // control-plane one, and a relayed route's headers belong to its upstream.
    if (match.route.category === 'inference' && match.route.relayed !== true) askedMs = parseGrpcTimeout(req.headers['grpc-timeout']);
  } catch (err) {
    exchange.fail(err);
    return;
  }
  // Probes are cheap and bodiless; refusing them would have an orchestrator restart or unroute a
  // gateway that is only busy.
  if (match.route.probe !== true) {
    const refused = ingress.admission.refusal(record.declaredBytes);
    if (refused !== undefined) {
      exchange.fail(refused);
      return;
    }
    exchange.heldBytes = record.declaredBytes;
    ingress.admission.enter(exchange.heldBytes);
    exchange.holds = 2;
  }
  const askedDeadline = askedMs === undefined ? undefined : Date.now() + askedMs; // counted from the request's arrival
  const buffers = ingress.options.bufferPool?.forRequest() ?? NOT_POOLED;
  const ctx = new Context(req, res, match.params, record, exchange.observed.upstreamHeaders, buffers, exchange, askedDeadline);
  exchange.ctx = ctx;
  // The handler settles after its upstream call has ended (answer, gRPC error, deadline or the
  // client's abort) and its answer was handed to the response, which never points into the
  // request's message: nothing of ours reads the request's buffers any more. grpc-js has copied
  // the message by then; node:http2 may still be writing it and holds it (upstream/infer/h2-plane.ts).
  exchange.handling = true;
  match.handler(ctx).then(() => exchange.handled(), (err: unknown) => exchange.threw(err));
}

/** node:http's options: its timeouts, its sweep, and the head's byte bound. */
function httpOptionsOf(timeouts: ServerOptions['timeouts'], head: ServerOptions['head']): NodeServerOptions {
  return {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    // Node looks for expired requests every 30 s by default: its 60 s headersTimeout cut slow
    // headers only after up to 90 s. A quarter of the timeout (at most 1 s) keeps the cut close.
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.headersTimeoutMs / 4))),
    maxHeaderSize: head.maxHeaderBytes,
    // headProblem answers a missing Host with our {"error"}; Node's own 400 has no body.
    requireHostHeader: false,
    // Every answer's body bytes counted as they are written (the access line's bytes_out).
    ServerResponse: CountedResponse as typeof ServerResponse,
  };
}

/**
 * The listener with its HTTP/2 side, its hand-over of each connection to the protocol it speaks,
 * its answers to what Node refuses, and its drain and admission for the gateway to call.
 */
export function createHttpServer(routes: readonly Route[], observer: RequestObserver, options: ServerOptions): HttpServer {
  const ingress = new Ingress(routes, observer, options);
  const { timeouts, head } = options;
  const httpOptions = httpOptionsOf(timeouts, head);
  const request: RequestListener = (req, res) => handle(ingress, req, res);
  const h2 = createH2Side({ h2: options.h2, head, timeouts, grpc: options.grpc, calmed: options.calmed },
    (req, res) => handle(ingress, req as unknown as IncomingMessage, res as unknown as ServerResponse));
  const server = options.tls === undefined
    ? cleartextServer(httpOptions, request, h2, ingress, options.fastPath === true)
    : tlsServer(httpOptions, options.tls, request, h2, ingress.drain, timeouts.headersTimeoutMs);
  ingress.server = server;
  ingress.h2 = h2;
  server.on('connection', (socket: Socket) => ingress.drain.connected(socket));
  server.once('close', () => ingress.lane?.close());
  // server.close() calls this: node:http's own would destroy connections still sending an answer.
  server.closeIdleConnections = () => ingress.drain.endIdle();
  // One more than the bound, so that headProblem sees a count past it (0 would be no bound at all).
  server.maxHeadersCount = head.maxHeaderCount + 1;
  const clientErrors = new ClientErrors(head, timeouts, ingress.current, options.refused);
  server.on('clientError', (err: NodeJS.ErrnoException, stream: Duplex) => clientErrors.answer(err, stream));
  return Object.assign(server, {
    drain: (deadlineMs: number) => ingress.drain.run(server, h2, deadlineMs),
    admit: () => ingress.admission.admit(),
    forgetKept: () => ingress.lane?.clear(),
    laneInFlight: () => ingress.lane?.inFlight() ?? [],
    laneCounts: () => ingress.lane?.counts,
    laneBackendUsable: (usable: boolean) => ingress.lane?.backendUsable(usable),
  });
}

/*
 * node:http's own connection listener (HTTP/1.1) is taken off the event that carries a new
 * connection and called by ours for the connections that are not HTTP/2. Called with the
 * listening server as `this`, it registers the connection for node:http's tracking as before
 * (headersTimeout / requestTimeout sweep, closeIdleConnections, close()): the connection simply
 * arrives a few bytes later.
 */

/**
 * Cleartext: the first bytes tell HTTP/2 (the preface) from HTTP/1.1 (ingress/h2.ts sniffProtocol);
 * HTTP/1.1 goes to the fast path when it is on, which hands node:http what it does not serve.
 */
function cleartextServer(httpOptions: NodeServerOptions, request: RequestListener, h2: H2Side, ingress: Ingress, fastPath: boolean): Server {
  const { drain } = ingress;
  const { headersTimeoutMs } = ingress.options.timeouts;
  const server = createServer(httpOptions, request);
  const http1 = takeListeners(server, 'connection');
  const firstHead = firstHeadBound(server, headersTimeoutMs);
  const toNode = (socket: Socket): void => {
    for (const listener of http1) listener.call(server, socket);
    socket.resume();
  };
  const fast = fastPath ? fastHost(ingress, server, firstHead, toNode) : undefined;
  server.on('connection', (socket: Socket) => {
    drain.sniffing.add(socket);
    sniffProtocol(socket, headersTimeoutMs, (protocol) => {
      drain.sniffing.delete(socket);
      if (protocol === 'h2') {
        h2.server.emit('connection', socket); // node:http2 reads the bytes put back first
        return;
      }
      drain.http1(socket);
      firstHead.bound(socket);
      if (fast !== undefined) serveFast(fast, socket);
      else toNode(socket);
    }, () => {
      drain.sniffing.delete(socket);
      headTimedOut(server, socket);
    });
  });
  return server;
}

/** What the fast path is told of this server: its bounds, its hot routes, and the way to node:http. */
function fastHost(ingress: Ingress, server: Server, firstHead: FirstHeadBound, toNode: (socket: Socket) => void): FastHost {
  const { options } = ingress;
  return {
    limits: { maxHeaderBytes: options.head.maxHeaderBytes, maxHeaderCount: options.head.maxHeaderCount, maxUrlBytes: options.head.maxUrlBytes },
    timeouts: options.timeouts,
    hot: (method, url, headers) => hotMatch(ingress, method, url, headers),
    planned: options.plannedInfer === false ? undefined
      : (conn, match, headers, bodyBytes, keepAlive, head, outcome) => planned(ingress, conn, match as Match, headers, bodyBytes, keepAlive, head, outcome),
    ...ingress.lane === undefined ? {} : { lane: ingress.lane },
    serve: (req, res, match) => {
      // What node:http publishes for each request (Node's lib/_http_server.js), for the tools that listen.
      if (requestStart.hasSubscribers) requestStart.publish({ request: req, response: res, socket: req.socket, server });
      if (responseFinish.hasSubscribers) res.once('finish', () => responseFinish.publish({ request: req, response: res, socket: req.socket, server }));
      handle(ingress, req as unknown as IncomingMessage, res as unknown as ServerResponse, match as Match);
    },
    handOff: (socket, bytes) => {
      socket.unshift(bytes);
      toNode(socket);
    },
    headArrived: (socket) => firstHead.arrived(socket),
    timedOut: (socket) => {
      const err = Object.assign(new Error('the request was not complete in time'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
      server.emit('clientError', err, socket);
    },
    draining: () => ingress.drain.draining,
  };
}

/**
 * The match of a request the fast path serves: a hot route (FAST_ROUTES) whose answer has a length
 * (no trailers asked for with TE, no server-sent events); undefined for node:http to serve it, and
 * to answer it when it matches nothing (the same answers as ever).
 */
function hotMatch(ingress: Ingress, method: string, url: string, headers: IncomingHttpHeaders): Match | undefined {
  if (method !== 'POST' || !(url.startsWith('/v2/models/') || url.startsWith('/v1/models/'))) return undefined;
  if (headers.te !== undefined || acceptsEventStream(headers.accept)) return undefined;
  try {
    const match = matchRoute(ingress.routes, method, url, ingress.options.access, headers);
    return FAST_ROUTES.has(match.route.name) ? match : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A planned request (Route.planned, pipeline/infer-planned.ts) whose head has arrived: recorded,
 * admitted, watched by the drain, its body gathered as it is read and served once whole, and
 * answered as handle() and run() would, without a FastRequest, FastResponse, Exchange or Context.
 * Undefined, with nothing done: the route's handler serves it (CORS, node:http's diagnostics
 * channels listened to, the in-flight bounds reached, or a request the route does not plan).
 */
function planned(ingress: Ingress, conn: PlannedConnection, match: Match, headers: IncomingHttpHeaders, bodyBytes: number,
  keepAlive: boolean, head: Buffer | undefined, outcome: LaneOutcome | undefined): PlannedAnswer | undefined {
  const plan = match.route.planned;
  if (plan === undefined || ingress.options.corsOrigin !== '' || requestStart.hasSubscribers || responseFinish.hasSubscribers) return undefined;
  if (bodyBytes > ingress.plannedBodyBytes || (bodyBytes > PLANNED_BODY_BYTES && !plan.largeBodies(match.params))) return undefined;
  if (ingress.admission.refusal(bodyBytes) !== undefined) return undefined;
  if (!plan.takes(match.params, headers, bodyBytes)) return undefined;
  return new PlannedExchange(ingress, conn, match, plan, headers, bodyBytes, keepAlive, head, outcome);
}

/** A planned request's body bound (Ingress.plannedBodyBytes), the lane's (lane.c MAX_BODY). */
const PLANNED_BODY_BYTES = 1024 * 1024;
const LANE_BODY_BYTES = 8 * 1024 * 1024;

/**
 * The largest planned answer written in one buffer with its head (copied there); a larger one is
 * written part by part, by reference. Head and body then fit Node's pooled 4 KiB buffers.
 */
const GATHER_BYTES = 2048;

/** The write whose callback tells that a planned answer's writes before it are out. */
const NOTHING = Buffer.alloc(0);

/**
 * One planned request, from its head until its answer is out or its connection closed and its
 * call settled. It is the drain's Answer itself (`res`: its headersSent and shouldKeepAlive).
 */
class PlannedExchange implements PlannedRequest, Answer, PlannedAnswer {
  readonly record: RequestRecord;
  readonly req: { readonly headers: IncomingHttpHeaders; readonly method: 'POST' };
  readonly askedDeadline = undefined;
  // The drain's list of answers under way (Answer).
  linkPrev: Answer | undefined;
  linkNext: Answer | undefined;
  linked = false;
  readonly #observed: ObservedRequest;
  /** The request's upstream call, once started: cancelled when the client goes first. */
  call: { cancel(): void } | undefined;
  headersSent = false;
  statusCode = 200;
  /** The call has not settled (answer() or fail() not called yet). */
  #handling = true;
  #finished = false;
  #gone = false;
  #reported = false;
  #bodyBytes = 0;
  readonly #bytesBefore: number;
  #bytesLeft: number | undefined;
  /** The request's body as read, until it is whole (by reference: views of the socket's reads). */
  #pieces: Buffer[] | undefined = [];

  /** server.keepAliveTimeoutMs in the Keep-Alive line's seconds. */
  get #keepAliveS(): number {
    return Math.floor(this.ingress.options.timeouts.keepAliveTimeoutMs / 1000);
  }

  /** The head's bytes (copied), while the compiled lane may keep the request. */
  #head: Buffer | undefined;
  /** Its request and answer came from kept heads (kept()). */
  #known: KeptRequest | undefined;
  #answerHead: KeptAnswer | undefined;
  /** Its answer had a Server-Timing field (telemetry.serverTiming). */
  #timed = false;

  constructor(private readonly ingress: Ingress, private readonly conn: PlannedConnection, private readonly match: Match,
    private readonly plan: PlannedRoute, headers: IncomingHttpHeaders, private readonly declaredBytes: number, public shouldKeepAlive: boolean,
    head: Buffer | undefined, readonly outcome: LaneOutcome | undefined) {
    // A request the lane gave back is not kept again from this answer (it failed, or its answer was
    // not kept); nor is one whose connection ends with it (no JSON answer head worked out for it).
    this.#head = head === undefined || outcome !== undefined || !shouldKeepAlive ? undefined : Buffer.from(head);
    const startNs = nowNs();
    // The fields a planned request's record gets on its way, there from the start: one shape for
    // every record, its fields in the object (none added later, to a backing store that grows).
    const record: RequestRecord = this.record = {
      route: match.route.name, method: 'POST', status: 0, startNs, endNs: 0, declaredBytes, protocol: '1.1', fastPath: true, planned: true,
      model: match.params[0] || undefined, version: undefined, ledger: undefined, encoding: undefined, encodingOut: undefined, inferences: undefined,
      pool: undefined, routeDecision: undefined, upstreamStatus: undefined, upstreamDurationNs: undefined, bytesOut: undefined, errorCode: undefined,
      requestId: undefined,
    };
    this.req = { headers, method: 'POST' };
    this.#observed = ingress.observer.start(this.req, startNs, record.route);
    this.#bytesBefore = conn.socket.bytesWritten;
    ingress.admission.enter(declaredBytes);
    ingress.drain.began(this, conn.socket);
  }

  get params(): readonly string[] {
    return this.match.params;
  }

  body(piece: Buffer): void {
    this.#pieces!.push(piece);
  }

  kept(known: KeptRequest, answer: KeptAnswer): void {
    this.#known = known;
    this.#answerHead = answer;
  }

  get keeping(): boolean {
    return this.#head !== undefined;
  }

  /** The body is whole: the route serves the request. */
  complete(): void {
    const pieces = this.#pieces!;
    this.#pieces = undefined;
    this.plan.serve(this, pieces);
  }

  timedOut(): void {
    this.#pieces = undefined;
    this.shouldKeepAlive = false;
    this.fail(requestTimeout(this.ingress.options.timeouts.requestTimeoutMs));
  }

  get upstreamHeaders(): Readonly<Record<string, string>> {
    return this.#observed.upstreamHeaders;
  }

  /** The drain's view of the answer (Answer.res): headersSent and shouldKeepAlive. */
  get res(): ServerResponse {
    return this as unknown as ServerResponse;
  }

  answer(headers: OutgoingHttpHeaders, parts: readonly Buffer[]): void {
    this.#handling = false;
    this.#timed = headers['Server-Timing'] !== undefined;
    if (this.#gone) {
      this.report();
      return;
    }
    let length = 0;
    for (const p of parts) length += p.length;
    const ledger = this.record.ledger!;
    this.headersSent = true;
    this.#bodyBytes = length;
    const { socket } = this.conn;
    if (length <= GATHER_BYTES) {
      // A small answer goes with its head in one buffer, one write: a copy of its bytes (counted)
      // costs less than a corked write per part.
      socket.write(plannedHead(headers, length, this.shouldKeepAlive, this.#keepAliveS, parts));
      ledger.copied('egress_write', length);
    } else {
      socket.cork();
      socket.write(plannedHead(headers, length, this.shouldKeepAlive, this.#keepAliveS));
      for (let i = 0; i < parts.length; i++) if (parts[i]!.length > 0) socket.write(parts[i]!);
      socket.uncork();
    }
    ledger.end('egress_write');
    ledger.bytes('egress_write', length, length);
    // Out now when the socket took every byte at once (the usual case); else once it has: an empty
    // write's callback comes after the writes before it. Writes without a callback cost Node's
    // Writable no tick of their own.
    if (!socket.destroyed && socket.writableLength === 0) this.written();
    else socket.write(NOTHING, this.conn.plannedWritten);
  }

  /**
   * The answer is out, as 'finish' would say: at the end of answer() when the socket took it at
   * once, else from the callback of an empty write after it.
   */
  written(err?: Error | null): void {
    if (err != null || this.#reported) return; // the connection failed: its close reports
    this.#finished = true;
    this.report();
    if (this.#answerHead !== undefined) this.keep();
    this.conn.plannedOut(this.shouldKeepAlive);
  }

  fail(err: unknown): void {
    this.#handling = false;
    const { record } = this;
    if (this.#gone) {
      // The client is gone: no answer, but the record says why (Exchange.threw).
      record.errorCode ??= codeOf(err);
      if (isGatewayError(err)) record.status = err.status;
      this.report();
      return;
    }
    record.errorCode = codeOf(err);
    const res = new FastResponse(undefined, this.conn.socket, {
      pauseReading: () => undefined, resumeReading: () => undefined, answered: () => {
        this.#finished = true;
        this.#bodyBytes = res.bodyBytes;
        this.statusCode = res.statusCode;
        this.report();
        this.conn.plannedOut(res.shouldKeepAlive);
      },
    }, this.shouldKeepAlive, this.#keepAliveS);
    this.headersSent = true;
    writeError(res as unknown as ServerResponse, err, this.match.route.errorShape);
  }

  /** The connection closed first: the call is cancelled, and the request reported once it settled. */
  closed(): void {
    if (this.#reported) return;
    this.#gone = true;
    if (this.#pieces !== undefined) {
      // Its body was not whole: nothing was sent upstream (as the handler's body read, ingress/body.ts).
      this.#pieces = undefined;
      this.fail(bodyCut());
      return;
    }
    if (!this.#handling) {
      this.report();
      return;
    }
    this.call?.cancel();
  }

  cutting(): void {
    const { socket } = this.conn;
    if (!socket.destroyed) this.#bytesLeft = Math.max(0, socket.bytesWritten - socket.writableLength - this.#bytesBefore);
  }

  /**
   * The request was served from kept heads, its answer out in one attempt: the compiled lane keeps
   * its head, its body's plan and its answer's, and the connection may be the lane's next.
   */
  keep(): void {
    const { ingress, record } = this;
    const lane = ingress.lane;
    const head = this.#head, known = this.#known!, answer = this.#answerHead!;
    if (lane === undefined || head === undefined || !this.shouldKeepAlive || record.status !== 200 || record.retries !== undefined
      || record.mirror !== undefined || Object.keys(this.upstreamHeaders).length > 0) return;
    // The answer's head as this one's, its Server-Timing line (if it had one) taken out: the lane
    // writes its own there. A binary answer's head ends with its JSON header; a JSON answer's
    // Content-Length digits are taken out too (the lane prints the body, then writes its length there).
    const json = 'texts' in answer;
    const headers = this.#timed ? { ...answer.headers, 'Server-Timing': TIMING_MARK } : answer.headers;
    let answerHead = json ? plannedHead(headers, 0, true, this.#keepAliveS) : Buffer.concat([plannedHead(headers, answer.bodyBytes, true, this.#keepAliveS),
      answer.jsonHeader]);
    let timingAt = -1;
    if (this.#timed) {
      timingAt = answerHead.indexOf(TIMING_LINE);
      if (timingAt < 0) return;
      answerHead = Buffer.concat([answerHead.subarray(0, timingAt), answerHead.subarray(timingAt + TIMING_LINE.length)]);
    }
    let lengthAt = -1;
    if (json) {
      lengthAt = answerHead.indexOf(NO_LENGTH);
      if (lengthAt < 0) return;
      lengthAt += NO_LENGTH.length - 3; // the '0' written for it
      answerHead = Buffer.concat([answerHead.subarray(0, lengthAt), answerHead.subarray(lengthAt + 1)]);
    }
    const dateAt = answerHead.indexOf(DATE_FIELD);
    if (dateAt < 0) return;
    if (lane.keep(head, known, answer, answerHead, dateAt + DATE_FIELD.length, timingAt, lengthAt, this.req.headers.expect !== undefined,
      new LaneReport(ingress, record, this.req))) {
      this.conn.lanes = true;
    }
  }

  /** Reported once, as Exchange.report. */
  report(): void {
    if (this.#reported) return;
    this.#reported = true;
    const { record, ingress } = this;
    if (record.status === 0) record.status = this.statusCode;
    record.endNs = nowNs();
    record.bytesOut = this.#bodyBytes;
    if (!this.#finished) record.incomplete = true;
    ingress.admission.leave(this.declaredBytes);
    const cut = !this.#finished && this.headersSent;
    if (cut) {
      record.errorCode ??= 'GW_ERR_REQUEST_ANSWER_CUT';
      if (this.#bytesLeft !== undefined) record.bytesOut = Math.min(record.bytesOut, this.#bytesLeft);
    }
    ingress.drain.answered(this, this.conn.socket, cut);
    this.#observed.end(record);
  }
}

/** The Date field of a planned answer's head (http1/messages.ts): the lane writes its 29-byte value each second. */
const DATE_FIELD = Buffer.from('\r\nDate: ', 'latin1');
/** Where a kept answer's Server-Timing line is found, to be taken out (a value no timing has). */
const TIMING_MARK = '-';
const TIMING_LINE = Buffer.from(`Server-Timing: ${TIMING_MARK}\r\n`, 'latin1');
/** A JSON answer head's Content-Length line as plannedHead writes it for a length of 0 (the lane writes the digits). */
const NO_LENGTH = Buffer.from('\r\nContent-Length: 0\r\n', 'latin1');

/**
 * The requests the compiled lane served for one kept head, reported as the planned request it was
 * kept from was: the same record but for its times, the same hops' bytes and copies.
 */
class LaneReport implements KeptReport {
  readonly #template: RequestRecord;
  readonly route: string;
  readonly declaredBytes: number;

  constructor(private readonly ingress: Ingress, record: RequestRecord, private readonly req: { readonly headers: IncomingHttpHeaders }) {
    this.#template = { ...record, ledger: undefined };
    this.route = record.route;
    this.declaredBytes = record.declaredBytes;
    this.#counts = record.ledger;
  }

  readonly #counts: Ledger | undefined;

  report(t: LaneTimes, bodyBytes: number): void {
    const ledger = new Ledger();
    // Its bytes as the kept request's; no copy (the lane sends and answers by reference, decodes a
    // base64 string where it lies) and no allocation.
    if (this.#counts !== undefined) ledger.countsOf(this.#counts, false);
    const { startNs, callNs, endNs } = t, body = t.bodyNs || callNs, sent = t.sentNs || callNs, first = t.firstNs || endNs;
    const encoded = t.encodedNs || endNs, written = t.writtenNs || encoded;
    hopAt(ledger, 'ingress_read', startNs, body);
    // A call begun before its body was whole (lane.c early_call): its decode is the plan's choice, at
    // the call; a base64 string's, decoded as it came, is its last part's once the body was whole.
    if (t.decodedNs > 0) hopAt(ledger, 'decode', body, t.decodedNs);
    else hopAt(ledger, 'decode', Math.min(body, callNs), callNs);
    hopAt(ledger, 'upstream_send', callNs, sent);
    hopAt(ledger, 'triton', sent, first);
    hopAt(ledger, 'upstream_receive', first, endNs);
    hopAt(ledger, 'encode', endNs, encoded);
    hopAt(ledger, 'egress_write', encoded, written);
    // bytesOut, the answer's body: the kept request's (the same head, the same outputs' lengths), or
    // what C printed, which the encode hop gave and the egress hop wrote.
    const record: RequestRecord = { ...this.#template, startNs, endNs: written, ledger, upstreamDurationNs: endNs - callNs, lane: true };
    if (bodyBytes >= 0) {
      record.bytesOut = bodyBytes;
      ledger.bytes('encode', 0, bodyBytes - ledger.bytesOut('encode'));
      ledger.bytes('egress_write', bodyBytes - ledger.bytesIn('egress_write'), bodyBytes - ledger.bytesOut('egress_write'));
    }
    this.ingress.observer.start(this.req, startNs, record.route).end(record);
  }
}

/** `hop` of `ledger` from `from` to `to`. */
function hopAt(ledger: Ledger, hop: Hop, from: number, to: number): void {
  ledger.startedAt(hop, from);
  ledger.endedAt(hop, to);
}

/** TLS: ALPN has told the protocol by the time the handshake is done. */
function tlsServer(httpOptions: NodeServerOptions, tls: TlsOptions, request: RequestListener, h2: H2Side, drain: Drain, headersTimeoutMs: number): HttpsServer {
  // The handshake gets the headers' bound (Node's own is 120 s).
  const server = createHttpsServer({ ...httpOptions, handshakeTimeout: headersTimeoutMs, ...tls }, request);
  const http1 = takeListeners(server, 'secureConnection');
  const firstHead = firstHeadBound(server, headersTimeoutMs);
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol === 'h2') h2.server.emit('connection', socket);
    else {
      for (const listener of http1) listener.call(server, socket);
      drain.http1(socket);
      firstHead.bound(socket);
    }
  });
  return server;
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
    const e = requestTimeout(ms);
    record.errorCode = e.code;
    writeError(res, e);
  }, ms);
  req.once('end', () => clearTimeout(timer));
  res.once('close', () => clearTimeout(timer));
}
