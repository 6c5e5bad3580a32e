// The upstream calls of a gateway running in this process, as node:http2 reports them on its
// diagnostics channels (Node >= 24: http2.client.stream.start / .close): which ModelInfer streams
// are open now, and how each one closed (rstCode 8 = CANCEL sent or received).
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';

const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export interface InferStreams {
  /** ModelInfer streams opened and not closed yet. */
  readonly open: number;
  readonly started: number;
  /** performance.now() and RST code of each closed ModelInfer stream, in order. */
  readonly closed: readonly { at: number; rstCode: number }[];
  dispose(): void;
}

export function watchInferStreams(): InferStreams {
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
