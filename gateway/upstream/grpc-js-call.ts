// ModelInfer on @grpc/grpc-js: the comparison and fallback data plane. grpc-js adds its own
// 5-byte prefix (copying the message once more) and hands back one concatenated buffer; that is
// the cost DESIGN.md §3 measured, kept here so benchmarks can show it.
import { Client, connectivityState, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { type CallOptions, type DataPlane, MAX_MESSAGE_BYTES, MODEL_INFER_PATH, type ResponseMessage } from './data-plane';
import { InFlight, shutdownError } from './in-flight';
import { GrpcStatus, upstreamError } from './status';

/** A grpc-js client for inference calls: Triton's own message limits, no transparent retries. */
export function inferenceClient(address: string): Client {
  return new Client(address, credentials.createInsecure(), {
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    'grpc.enable_retries': 0,
  });
}

export class GrpcJsDataPlane implements DataPlane {
  readonly #clients: Client[];
  readonly #restriction: readonly [string, string] | undefined;
  readonly #inFlight = new InFlight();
  #next = 0;

  /** `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted. */
  constructor(addresses: readonly string[], restriction?: readonly [string, string]) {
    this.#restriction = restriction;
    this.#clients = addresses.map(inferenceClient);
  }

  modelInfer(message: Buffer, options: CallOptions): Promise<ResponseMessage> {
    const client = this.#clients[this.#next++ % this.#clients.length]!;
    const metadata = new Metadata();
    if (this.#restriction !== undefined) metadata.set(this.#restriction[0], this.#restriction[1]);
    for (const [k, v] of Object.entries(options.metadata)) metadata.set(k, v);
    return new Promise<ResponseMessage>((resolve, reject) => {
      if (this.#inFlight.closed) {
        reject(shutdownError());
        return;
      }
      const onShutdown = (): void => {
        reject(shutdownError());
        call.cancel();
      };
      this.#inFlight.add(onShutdown);
      const call = client.makeUnaryRequest<Buffer, Buffer>(
        MODEL_INFER_PATH,
        (m) => m,
        (b) => b,
        message.subarray(5), // grpc-js frames it again
        metadata,
        { deadline: options.deadline },
        (err: ServiceError | null, value?: Buffer) => {
          options.signal.removeEventListener('abort', onAbort);
          this.#inFlight.delete(onShutdown);
          if (err) {
            const transport = err.code === GrpcStatus.UNAVAILABLE
              && client.getChannel().getConnectivityState(false) !== connectivityState.READY;
            reject(upstreamError(err.code, err.details, transport, err));
          } else {
            resolve({ chunks: [value!], byteLength: value!.length, timing: undefined });
          }
        },
      );
      const onAbort = (): void => call.cancel();
      if (options.signal.aborted) call.cancel();
      else options.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Cancels the calls still running (they reject with GW_ERR_UPSTREAM_UNAVAILABLE) and closes the channels. */
  close(): void {
    this.#inFlight.cancelAll();
    for (const c of this.#clients) c.close();
  }
}
