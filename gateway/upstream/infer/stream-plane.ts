// ModelStreamInfer on @grpc/grpc-js for the generate endpoints: one bidi stream per HTTP request,
// one pre-framed ModelInferRequest written and the request side half-closed, every
// ModelStreamInferResponse handed on as it arrives. Aborting `signal` cancels the stream, which
// Triton sees as a cancelled request (the model's response sender learns it).
import type { Client, ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import type { BackendSet } from '../backends/backend-set';
import { inference } from '../../../proto/services';
import { GatewayError } from '../../errors';
import type { CallOptions } from './data-plane';
import { callMetadata, GrpcClients, grpcJsError } from '../connections/grpc-clients';
import type { InferResponse } from '../../infer/response';
import { readInferResponse } from '../../infer/answer-reader';
import { InFlight, shutdownError } from '../connections/in-flight';
import { withRetries } from '../backends/retry';
import type { UpstreamTls } from '../connections/tls';
import { clientCancelled } from '../status';

export const MODEL_STREAM_INFER_PATH = '/inference.GRPCInferenceService/ModelStreamInfer';

/** One message of the stream: a response, or a per-request error (the stream stays open). */
export type StreamMessage =
  | { readonly kind: 'response'; readonly response: InferResponse; readonly final: boolean; readonly byteLength: number }
  | { readonly kind: 'error'; readonly message: string };

/**
 * When a ModelStreamInfer exchange moved (process.hrtime.bigint()), as far as grpc-js shows it:
 * whole messages only, and no send time — its write callback fires once the retry layer has
 * buffered the message (grpc-js retrying-call.ts), not when it is on the socket.
 */
export interface StreamTiming {
  /** grpc-js took the request message (it frames and buffers it then): the nearest to a send time it shows. */
  readonly writtenNs: bigint;
  /** The first message (a response or a per-request error) arrived whole; endNs when none came. */
  readonly firstMessageNs: bigint;
  /** The exchange was complete: its final message arrived, or the stream ended. */
  readonly endNs: bigint;
}

export interface StreamHandlers {
  /** Called for each message in order; a returned promise delays reading the next one (backpressure). */
  onMessage(m: StreamMessage): void | Promise<void>;
}

export class StreamInferPlane {
  readonly #clients: GrpcClients;
  readonly #restriction: readonly [string, string] | undefined;
  readonly #inFlight = new InFlight();

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `tls`: upstream.tls, when the connections to Triton use TLS.
   */
  constructor(backends: BackendSet, restriction?: readonly [string, string], tls?: UpstreamTls) {
    this.#restriction = restriction;
    this.#clients = new GrpcClients(backends, undefined, tls);
  }

  /**
   * Sends one framed ModelInferRequest (gRPC prefix included) on a new ModelStreamInfer stream and
   * reads until the response marked `triton_final_response` (or the end of the stream). Resolves
   * when the exchange is complete and every message handled; rejects with a GatewayError when the
   * stream itself fails. On the next ready backend, and on another when the stream never reached
   * the first (upstream/backends/retry.ts: no message can have been handled then).
   */
  streamInfer(message: Buffer, options: CallOptions, handlers: StreamHandlers): Promise<StreamTiming> {
    return withRetries(this.#clients.set, options, (b) => this.#streamOn(this.#clients.client(b), message, options, handlers));
  }

  #streamOn(client: Client, message: Buffer, options: CallOptions, handlers: StreamHandlers): Promise<StreamTiming> {
    const metadata = callMetadata(this.#restriction, options.metadata);
    return new Promise<StreamTiming>((resolve, reject) => {
      if (this.#inFlight.closed) {
        reject(shutdownError());
        return;
      }
      let settled = false;
      let call: ClientDuplexStream<Buffer, Buffer> | undefined;
      let writtenNs = 0n;
      let firstMessageNs = 0n;
      let endNs = 0n;
      const finish = (err?: unknown): void => {
        if (settled) return;
        settled = true;
        options.signal.removeEventListener('abort', onAbort);
        this.#inFlight.delete(onShutdown);
        if (err !== undefined) {
          reject(err); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- forwards what the handler threw
          return;
        }
        if (endNs === 0n) endNs = process.hrtime.bigint();
        resolve({ writtenNs, firstMessageNs: firstMessageNs === 0n ? endNs : firstMessageNs, endNs });
      };
      const onAbort = (): void => {
        call?.cancel();
        finish(clientCancelled());
      };
      const onShutdown = (): void => {
        call?.cancel();
        finish(shutdownError());
      };
      this.#inFlight.add(onShutdown);
      call = client.makeBidiStreamRequest<Buffer, Buffer>(MODEL_STREAM_INFER_PATH, (m) => m, (b) => b, metadata, { deadline: options.deadline });
      let chain: Promise<void> = Promise.resolve();
      let done = false;
      let ended = false;
      call.on('data', (b: Buffer) => {
        if (done) return;
        const now = process.hrtime.bigint();
        if (firstMessageNs === 0n) firstMessageNs = now;
        let m: StreamMessage;
        try {
          m = decodeStreamMessage(b);
        } catch (err) {
          // Thrown here it would escape grpc-js's listener (an uncaught exception).
          done = true;
          call.cancel();
          chain.then(() => finish(err), () => finish(err));
          return;
        }
        if (m.kind === 'error' || m.final) {
          done = true;
          endNs = now;
        }
        call.pause();
        chain = chain.then(() => handlers.onMessage(m)).then(() => {
          if (done) {
            // The exchange is complete. Triton ends the stream itself (the request side is
            // half-closed): read on to its status, so a finished request is never reset — a reset
            // is what a cancelled one looks like to Triton. One that does not end soon is cancelled.
            finish();
            if (!ended) closeAfterFinal(call);
          }
          call.resume();
        }, (err: unknown) => {
          call.cancel();
          finish(err);
        });
      });
      call.on('error', (err: ServiceError) => {
        if (done || settled) return;
        const e = grpcJsError(err, client);
        chain.then(() => finish(e), () => finish(e));
      });
      call.on('status', () => {
        ended = true;
      });
      call.on('end', () => {
        if (done) return;
        endNs = process.hrtime.bigint();
        chain.then(() => finish(), () => undefined);
      });
      if (options.signal.aborted) {
        onAbort();
        return;
      }
      options.signal.addEventListener('abort', onAbort, { once: true });
      call.write(message.subarray(5)); // grpc-js frames it again
      writtenNs = process.hrtime.bigint();
      call.end();
    });
  }

  /** Cancels the streams still running (they reject with GW_ERR_UPSTREAM_UNAVAILABLE) and closes the channels. */
  close(): void {
    this.#inFlight.cancelAll();
    this.#clients.close();
  }
}

/** How long Triton has to end a stream after its final response before the gateway cancels it. */
const END_AFTER_FINAL_MS = 5000;

/** Cancels `call` unless it ends (its status in) within END_AFTER_FINAL_MS; the timer never holds the process. */
function closeAfterFinal(call: ClientDuplexStream<Buffer, Buffer>): void {
  const timer = setTimeout(() => call.cancel(), END_AFTER_FINAL_MS);
  timer.unref();
  call.once('status', () => clearTimeout(timer));
}

function decodeStreamMessage(b: Buffer): StreamMessage {
  let m: inference.ModelStreamInferResponse;
  try {
    m = inference.ModelStreamInferResponse.decode(b);
  } catch (err) {
    throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream sent a ModelStreamInferResponse that does not decode: ${(err as Error).message}`, { cause: err });
  }
  if (m.error_message !== '') return { kind: 'error', message: m.error_message };
  const r = m.infer_response ?? inference.ModelInferResponse.create();
  const bytes = Buffer.from(inference.ModelInferResponse.encode(r).finish());
  const response = readInferResponse([bytes]);
  const f = r.parameters?.triton_final_response;
  const final = f?.parameter_choice === 'bool_param' && f.bool_param === true;
  return { kind: 'response', response, final, byteLength: b.length };
}
