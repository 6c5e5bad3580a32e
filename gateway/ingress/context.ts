// Per-request state handed to route handlers.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestRecord } from '../telemetry/record';
import type { RequestBuffers } from '../buffers/pool';
import type { Grant } from '../auth/key-file';

export interface RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** Captures of the matched route pattern (model name, version, ...). */
  readonly params: readonly string[];
  /**
   * Aborted when the client goes away before the response is finished. On HTTP/1.1 the
   * response's 'close' is the reliable signal (the request's fires once the body is read).
   */
  readonly signal: AbortSignal;
  /** What telemetry will learn of this request; stages fill in what they know. */
  readonly record: RequestRecord;
  /** Trace context to send to Triton as gRPC metadata. */
  readonly upstreamHeaders: Readonly<Record<string, string>>;
  /**
   * Where framed messages get their memory (`frameInferRequest(req, ctx.buffers.acquire)`): pooled
   * buffers owned by this request, released when the handler has settled (ingress/server.ts).
   */
  readonly buffers: RequestBuffers;
  /**
   * When the client wants its answer by (Date.now() milliseconds): its `grpc-timeout` header
   * counted from the request's arrival, on inference routes; undefined when it asked for none.
   * Upstream calls take the earlier of it and their own upstream.timeoutMs (pipeline/steps.ts).
   */
  readonly askedDeadline: number | undefined;
  /** The credentials' grant once auth let the request in (auth/guard.ts); undefined without auth or an open group. */
  grant?: Grant;
  /**
   * Runs `fn` once the request is over, however it ended — its answer handed to the socket, or its
   * connection closed and its handler settled (ingress/server.ts Exchange.report) — or at once when
   * it is over already. What a request holds beyond its handler (a key's place, auth/limits.ts) is given back
   * here.
   */
  readonly whenDone: (fn: () => void) => void;
}

export function createContext(
  req: IncomingMessage, res: ServerResponse, params: readonly string[], record: RequestRecord, upstreamHeaders: Readonly<Record<string, string>>,
  buffers: RequestBuffers, whenDone: (fn: () => void) => void, askedDeadline?: number,
): RequestContext {
  const controller = new AbortController();
  res.on('close', () => { // emitted once per response
    // An HTTP/2 stream the client reset reports writableFinished (Node 24's compat response) but
    // was never ended: either says the answer did not go out whole.
    if (!res.writableFinished || !res.writableEnded) controller.abort();
  });
  return { req, res, params, signal: controller.signal, record, upstreamHeaders, buffers, askedDeadline, whenDone };
}
