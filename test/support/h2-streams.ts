// The upstream calls of a gateway running in this process, as node:http2 reports them on its
// diagnostics channels (Node >= 24: http2.client.stream.start / .close): which ModelInfer streams
// are open now, and how each one closed (rstCode 8 = CANCEL sent or received). On the gateway's own
// HTTP/2 client (upstream.http2Client own), the same from its connections' request() and reset().
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { CANCEL, H2Connection, type H2Stream, type StreamHandler } from '../../gateway/upstream/h2/connection';
import { HTTP2_CLIENT } from './gateway';

const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export interface InferStreams {
  /** ModelInfer streams opened and not closed yet. */
  readonly open: number;
  readonly started: number;
  /** performance.now() and RST code of each closed ModelInfer stream, in order. */
  readonly closed: readonly { at: number; rstCode: number }[];
  dispose(): void;
}

/**
 * The streams of the gateway's own HTTP/2 client, told as they start and close (`rstCode`: 0 when
 * the server ended it, else the RST_STREAM code either side sent, or the connection's error code),
 * with the port of their connection's backend. Every stream counts: the planes that use this client
 * send ModelInfer (the h2 plane) or what a gRPC client sent (the pass-through). Returns the undo.
 */
export function watchOwnStreams(events: { start(port: number): void; close(port: number, rstCode: number): void }): () => void {
  type Request = (this: H2Connection, block: Buffer, handler: StreamHandler, ...rest: unknown[]) => H2Stream;
  type Reset = (this: H2Connection, s: H2Stream, code?: number) => void;
  const proto = H2Connection.prototype as unknown as { request: Request; reset: Reset };
  const { request, reset } = proto;
  const closers = new WeakMap<H2Stream, (code: number) => void>();
  proto.request = function (block, handler, ...rest) {
    const port = this.port;
    let open = true;
    const close = (code: number): void => {
      if (open) events.close(port, code);
      open = false;
    };
    const watched: StreamHandler = {
      field: (n, v) => handler.field(n, v), headers: (e) => handler.headers(e), data: (c, f, t) => handler.data(c, f, t),
      ready: () => handler.ready?.(), drain: () => handler.drain?.(),
      end: () => { close(0); handler.end(); },
      closed: (code, processed, reason) => { close(code); handler.closed(code, processed, reason); },
    };
    events.start(port);
    const s = request.call(this, block, watched, ...rest);
    closers.set(s, close);
    return s;
  };
  proto.reset = function (s, code = CANCEL) {
    closers.get(s)?.(code);
    reset.call(this, s, code);
  };
  return () => {
    proto.request = request;
    proto.reset = reset;
  };
}

export function watchInferStreams(): InferStreams {
  if (HTTP2_CLIENT === 'own') return watchOwnInferStreams();
  const mine = new WeakSet<ClientHttp2Stream>();
  let open = 0;
  let started = 0;
  const closed: { at: number; rstCode: number }[] = [];
  const onStart = (m: unknown): void => {
    const { stream, headers } = m as { stream: ClientHttp2Stream; headers: IncomingHttpHeaders };
    if (headers[':path'] !== MODEL_INFER_PATH) return;
    mine.add(stream);
    open++;
    started++;
  };
  const onClose = (m: unknown): void => {
    const { stream } = m as { stream: ClientHttp2Stream };
    if (!mine.has(stream)) return;
    mine.delete(stream);
    open--;
    closed.push({ at: performance.now(), rstCode: stream.rstCode ?? 0 });
  };
  subscribe('http2.client.stream.start', onStart);
  subscribe('http2.client.stream.close', onClose);
  return {
    get open() { return open; },
    get started() { return started; },
    closed,
    dispose: () => {
      unsubscribe('http2.client.stream.start', onStart);
      unsubscribe('http2.client.stream.close', onClose);
    },
  };
}

function watchOwnInferStreams(): InferStreams {
  let open = 0;
  let started = 0;
  const closed: { at: number; rstCode: number }[] = [];
  const dispose = watchOwnStreams({
    start: () => {
      open++;
      started++;
    },
    close: (_port, rstCode) => {
      open--;
      closed.push({ at: performance.now(), rstCode });
    },
  });
  return {
    get open() { return open; },
    get started() { return started; },
    closed,
    dispose,
  };
}
