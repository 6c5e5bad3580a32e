// ModelStreamInfer on @grpc/grpc-js for the generate endpoints: one bidi stream per HTTP request,
// one pre-framed ModelInferRequest written and the request side half-closed, every
// ModelStreamInferResponse handed on as it arrives. Aborting `signal` cancels the stream, which
// Triton sees as a cancelled request (the model's response sender learns it).
import { type Client, type ClientDuplexStream, connectivityState, Metadata, type ServiceError } from '@grpc/grpc-js';
import { inference } from '../../proto/services';
import type { CallOptions } from './data-plane';
import { inferenceClient } from './grpc-js-call';
import { readInferResponse, type InferResponse } from './infer-response';
import { GrpcStatus, upstreamError } from './status';

export const MODEL_STREAM_INFER_PATH = '/inference.GRPCInferenceService/ModelStreamInfer';

/** One message of the stream: a response, or a per-request error (the stream stays open). */
export type StreamMessage =
  | { readonly kind: 'response'; readonly response: InferResponse; readonly final: boolean; readonly byteLength: number }
  | { readonly kind: 'error'; readonly message: string };

export interface StreamHandlers {
  /** Called for each message in order; a returned promise delays reading the next one (backpressure). */
  onMessage(m: StreamMessage): void | Promise<void>;
}

export class StreamInferPlane {
  readonly #clients: Client[];
  readonly #restriction: readonly [string, string] | undefined;
  #next = 0;

  /** `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted. */
  constructor(addresses: readonly string[], restriction?: readonly [string, string]) {
    this.#restriction = restriction;
    this.#clients = addresses.map(inferenceClient);
  }

  /**
   * Sends one framed ModelInferRequest (gRPC prefix included) on a new ModelStreamInfer stream and
   * reads until the response marked `triton_final_response` (or the end of the stream). Resolves
   * when the exchange is complete; rejects with a GatewayError when the stream itself fails.
   */
  streamInfer(message: Buffer, options: CallOptions, handlers: StreamHandlers): Promise<void> {
    const client = this.#clients[this.#next++ % this.#clients.length]!;
    const metadata = new Metadata();
    if (this.#restriction !== undefined) metadata.set(this.#restriction[0], this.#restriction[1]);
    for (const [k, v] of Object.entries(options.metadata)) metadata.set(k, v);
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let call: ClientDuplexStream<Buffer, Buffer> | undefined;
      const finish = (err?: unknown): void => {
        if (settled) return;
        settled = true;
        options.signal.removeEventListener('abort', onAbort);
        if (err === undefined) resolve();
        else reject(err); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- forwards what the handler threw
      };
      const onAbort = (): void => {
        call?.cancel();
        finish(upstreamError(GrpcStatus.CANCELLED, 'Cancelled on client', false));
      };
      call = client.makeBidiStreamRequest<Buffer, Buffer>(MODEL_STREAM_INFER_PATH, (m) => m, (b) => b, metadata, { deadline: options.deadline });
      let chain: Promise<void> = Promise.resolve();
      let done = false;
      call.on('data', (b: Buffer) => {
        if (done) return;
        const m = decodeStreamMessage(b);
        if (m.kind === 'error' || m.final) done = true;
        call.pause();
        chain = chain.then(() => handlers.onMessage(m)).then(() => {
          if (done) {
            // The exchange is complete: Triton has nothing more to say about this request.
            call.cancel();
            finish();
          } else {
            call.resume();
          }
        }, (err: unknown) => {
          call.cancel();
          finish(err);
        });
      });
      call.on('error', (err: ServiceError) => {
        if (done || settled) return;
        const transport = err.code === GrpcStatus.UNAVAILABLE
          && client.getChannel().getConnectivityState(false) !== connectivityState.READY;
        const e = upstreamError(err.code, err.details, transport, err);
        chain.then(() => finish(e), () => finish(e));
      });
      call.on('end', () => {
        if (!done) chain.then(() => finish(), () => undefined);
      });
      if (options.signal.aborted) {
        onAbort();
        return;
      }
      options.signal.addEventListener('abort', onAbort, { once: true });
      call.write(message.subarray(5)); // grpc-js frames it again
      call.end();
    });
  }

  close(): void {
    for (const c of this.#clients) c.close();
  }
}

function decodeStreamMessage(b: Buffer): StreamMessage {
  const m = inference.ModelStreamInferResponse.decode(b);
  if (m.error_message !== '') return { kind: 'error', message: m.error_message };
  const r = m.infer_response ?? inference.ModelInferResponse.create();
  const bytes = Buffer.from(inference.ModelInferResponse.encode(r).finish());
  const response = readInferResponse([bytes]);
  const f = r.parameters?.triton_final_response;
  const final = f?.parameter_choice === 'bool_param' && f.bool_param === true;
  return { kind: 'response', response, final, byteLength: b.length };
}
