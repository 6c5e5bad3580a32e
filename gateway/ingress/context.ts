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
   * response's 'close' is the reliable signal (the request's fires once the body is read):
   * Context.closed, called from the exchange's 'close' listener.
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

/**
 * The same request under other route captures (a dialect's route that runs V2 infer for a model it
 * names). Not a spread of `ctx`: a Context keeps its signal and whenDone on its prototype, which a
 * spread leaves behind. Its grant stays the request's own.
 */
export function withParams(ctx: RequestContext, params: readonly string[]): RequestContext {
  return {
    req: ctx.req, res: ctx.res, params, signal: ctx.signal, record: ctx.record, upstreamHeaders: ctx.upstreamHeaders,
    buffers: ctx.buffers, askedDeadline: ctx.askedDeadline,
    get grant() {
      return ctx.grant;
    },
    set grant(g) {
      ctx.grant = g;
    },
    whenDone: (fn) => ctx.whenDone(fn),
  };
}

/** What ends a request, for RequestContext.whenDone (ingress/server.ts Exchange). */
export interface RequestOver { whenDone(fn: () => void): void }

/**
 * A request's context: one object, its methods on the prototype. The exchange that made it
 * (ingress/server.ts) calls abort() when the response closed before it was finished.
 */
export class Context implements RequestContext {
  readonly #controller = new AbortController();
  grant?: Grant;

  constructor(
    readonly req: IncomingMessage, readonly res: ServerResponse, readonly params: readonly string[], readonly record: RequestRecord,
    readonly upstreamHeaders: Readonly<Record<string, string>>, readonly buffers: RequestBuffers, private readonly over: RequestOver,
    readonly askedDeadline: number | undefined,
  ) {}

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  whenDone(fn: () => void): void {
    this.over.whenDone(fn);
  }

  /**
   * The response closed: aborts the signal unless the answer went out whole. An HTTP/2 stream the
   * client reset reports writableFinished (Node 24's compat response) but was never ended: either
   * says the answer did not go out whole.
   */
  closed(): void {
    if (!this.res.writableFinished || !this.res.writableEnded) this.#controller.abort();
  }
}
