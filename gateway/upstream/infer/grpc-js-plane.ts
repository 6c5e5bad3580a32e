// ModelInfer on @grpc/grpc-js: the comparison and fallback data plane. grpc-js adds its own
// 5-byte prefix (copying the message once more) and hands back one concatenated buffer; that is
// the cost docs/architecture.md#two-data-planes describes, kept here so benchmarks can show it.
import type { Client, ServiceError } from '@grpc/grpc-js';
import { type CallOptions, type DataPlane, MODEL_INFER_PATH, type ResponseMessage } from './data-plane';
import { callMetadata, grpcJsError, GrpcJsPlane } from '../connections/grpc-clients';
import { shutdownError } from '../connections/in-flight';
import { withRetries } from '../backends/retry';
import { clientCancelled } from '../status';

export class GrpcJsDataPlane extends GrpcJsPlane implements DataPlane {
  /** On the next ready backend, and on another when it never reached the first (upstream/backends/retry.ts). */
  modelInfer(message: Buffer, options: CallOptions): Promise<ResponseMessage> {
    return withRetries(this.clients.set, options, (b) => this.#callOn(this.clients.client(b), message, options));
  }

  #callOn(client: Client, message: Buffer, options: CallOptions): Promise<ResponseMessage> {
    const metadata = callMetadata(this.restriction, options.metadata);
    return new Promise<ResponseMessage>((resolve, reject) => {
      if (this.inFlight.closed) {
        reject(shutdownError());
        return;
      }
      const onShutdown = (): void => {
        reject(shutdownError());
        call.cancel();
      };
      const running = this.inFlight.add(onShutdown);
      const call = client.makeUnaryRequest<Buffer, Buffer>(
        MODEL_INFER_PATH,
        (m) => m,
        (b) => b,
        message.subarray(5), // grpc-js frames it again
        metadata,
        { deadline: options.deadline },
        (err: ServiceError | null, value?: Buffer) => {
          options.signal.removeEventListener('abort', onAbort);
          this.inFlight.delete(running);
          if (err) {
            reject(grpcJsError(err, client));
          } else {
            resolve({ chunks: [value!], byteLength: value!.length, timing: undefined });
          }
        },
      );
      // Settled here, not from grpc-js's own CANCELLED status (its callback's reject then does nothing).
      const onAbort = (): void => {
        reject(clientCancelled());
        call.cancel();
      };
      if (options.signal.aborted) onAbort();
      else options.signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
