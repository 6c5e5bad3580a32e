// The HTTP/1.1 server: match the route, run its handler, turn anything thrown into an error
// response, and report every request to telemetry when its response is over. Handlers own the
// response once they run. drain() is its shutdown with a deadline.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { settlesWithin } from '../deadline';
import { writeError } from '../egress/write';
import { isGatewayError } from '../errors';
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
}

/** Exposed to browsers when CORS is on: the hop timings and the binary-extension split point. */
const EXPOSED = 'Server-Timing, Inference-Header-Content-Length';

/** The code an error answer carries (egress/write.ts makes anything else GW_ERR_GATEWAY_INTERNAL). */
const codeOf = (err: unknown): string => (isGatewayError(err) ? err.code : 'GW_ERR_GATEWAY_INTERNAL');

function fail(req: IncomingMessage, res: ServerResponse, record: RequestRecord, err: unknown): void {
  record.errorCode = codeOf(err);
  req.resume(); // an answer before the body was read: let the rest drain
  writeError(res, err);
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
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
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
      // Node's server.close() closes the connections idle at that moment only; one whose answer
      // ends later would wait for keepAliveTimeout. It is idle once Node has handled the finish.
      if (draining) setImmediate(() => server.closeIdleConnections());
      observed.end(record);
    };
    res.once('finish', report);
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
      fail(req, res, record, routeError);
      return;
    }
    let askedMs: number | undefined;
    try {
      // Inference routes only: every other route's upstream call is a short control-plane one.
      if (match.route.category === 'inference') askedMs = parseGrpcTimeout(req.headers['grpc-timeout']);
    } catch (err) {
      fail(req, res, record, err);
      return;
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
      if (closed) report();
    }, (err: unknown) => {
      handling = false;
      ctx.buffers.release();
      if (!ctx.signal.aborted) {
        fail(req, res, record, err);
        return;
      }
      // The client is gone: no answer, but the record says why (with the condition's status when
      // none was sent).
      record.errorCode = codeOf(err);
      if (!res.headersSent && isGatewayError(err)) record.status = err.status;
      report();
    });
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
