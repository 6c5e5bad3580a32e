// ModelStreamInfer on @grpc/grpc-js for the generate endpoints: one bidi stream per HTTP request,
// one pre-framed ModelInferRequest written and the request side half-closed, every
// ModelStreamInferResponse handed on as it arrives. Aborting `signal` cancels the stream, which
// Triton sees as a cancelled request (the model's response sender learns it).
import type { Client, ClientDuplexStream, Metadata, ServiceError } from '@grpc/grpc-js';
import { inference } from '../../../proto/services';
import { GatewayError } from '../../errors';
import type { CallOptions } from './data-plane';
import { callMetadata, grpcJsError, GrpcJsPlane } from '../connections/grpc-clients';
import type { InferResponse } from '../../infer/response';
import { readInferResponse } from '../../infer/answer-reader';
import { type InFlight, type Running, shutdownError } from '../connections/in-flight';
import { withRetries } from '../backends/retry';
import { clientCancelled } from '../status';
import { nowNs } from '../../infer/clock';

export const MODEL_STREAM_INFER_PATH = '/inference.GRPCInferenceService/ModelStreamInfer';

/** One message of the stream: a response, or a per-request error (the stream stays open). */
export type StreamMessage =
  | { readonly kind: 'response'; readonly response: InferResponse; readonly final: boolean; readonly byteLength: number }
  | { readonly kind: 'error'; readonly message: string };

/**
 * When a ModelStreamInfer exchange moved (nowNs()), as far as grpc-js shows it:
 * whole messages only, and no send time — its write callback fires once the retry layer has
 * buffered the message (grpc-js retrying-call.ts), not when it is on the socket.
 */
export interface StreamTiming {
  /** grpc-js took the request message (it frames and buffers it then): the nearest to a send time it shows. */
  readonly writtenNs: number;
  /** The first message (a response or a per-request error) arrived whole; endNs when none came. */
  readonly firstMessageNs: number;
  /** The exchange was complete: its final message arrived, or the stream ended. */
  readonly endNs: number;
}

export interface StreamHandlers {
  /** Called for each message in order; a returned promise delays reading the next one (backpressure). */
  onMessage(m: StreamMessage): void | Promise<void>;
}

export class StreamInferPlane extends GrpcJsPlane {
  /**
   * Sends one framed ModelInferRequest (gRPC prefix included) on a new ModelStreamInfer stream and
   * reads until the response marked `triton_final_response` (or the end of the stream). Resolves
   * when the exchange is complete and every message handled; rejects with a GatewayError when the
   * stream itself fails. On the next ready backend, and on another when the stream never reached
   * the first (upstream/backends/retry.ts: no message can have been handled then).
   */
  streamInfer(message: Buffer, options: CallOptions, handlers: StreamHandlers): Promise<StreamTiming> {
    return withRetries(this.clients.set, options, (b) => this.#streamOn(this.clients.client(b), message, options, handlers));
  }

  #streamOn(client: Client, message: Buffer, options: CallOptions, handlers: StreamHandlers): Promise<StreamTiming> {
    const call = new StreamCall(client, options, handlers, this.inFlight);
    call.start(message, callMetadata(this.restriction, options.metadata));
    return call.timing;
  }
}

/**
 * One ModelStreamInfer exchange on one backend: its state is fields, grpc-js's events are methods,
 * and it settles once, through #finish. Messages are handed on in order: each waits for the
 * handler of the one before (the chain), and the stream is paused meanwhile (backpressure).
 */
class StreamCall {
  readonly timing: Promise<StreamTiming>;
  #resolve!: (t: StreamTiming) => void;
  #reject!: (err: unknown) => void;
  #settled = false;
  #call: ClientDuplexStream<Buffer, Buffer> | undefined;
  #writtenNs = 0;
  #firstMessageNs = 0;
  #endNs = 0;
  /** The handlers' work so far: each message's waits for the one before. */
  #chain: Promise<void> = Promise.resolve();
  /** The exchange is complete (its final message, or an error message, came): later data is not read. */
  #done = false;
  /** grpc-js reported the stream's status: it has ended. */
  #ended = false;
  readonly #onAbort = (): void => {
    this.#call?.cancel();
    this.#finish(clientCancelled());
  };
  /** What the plane's close() calls; #running is its entry in the plane's InFlight. */
  readonly #onShutdown = (): void => {
    this.#call?.cancel();
    this.#finish(shutdownError());
  };
  #running: Running | undefined;
  /** A message handled: the exchange may be complete, and the next message is read. */
  readonly #handled = (): void => {
    const call = this.#call!;
    if (this.#done) {
      // The exchange is complete. Triton ends the stream itself (the request side is
      // half-closed): read on to its status, so a finished request is never reset — a reset
      // is what a cancelled one looks like to Triton. One that does not end soon is cancelled.
      this.#finish();
      if (!this.#ended) closeAfterFinal(call);
    }
    call.resume();
  };
  readonly #handlerFailed = (err: unknown): void => {
    this.#call!.cancel();
    this.#finish(err);
  };

  constructor(private readonly client: Client, private readonly options: CallOptions, private readonly handlers: StreamHandlers,
    private readonly inFlight: InFlight) {
    this.timing = new Promise<StreamTiming>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /** Opens the stream, writes the message (grpc-js frames it again) and half-closes it. */
  start(message: Buffer, metadata: Metadata): void {
    if (this.inFlight.closed) {
      this.#finish(shutdownError());
      return;
    }
    const { options } = this;
    this.#running = this.inFlight.add(this.#onShutdown);
    const call = this.client.makeBidiStreamRequest<Buffer, Buffer>(MODEL_STREAM_INFER_PATH, (m) => m, (b) => b, metadata, { deadline: options.deadline });
    this.#call = call;
    call.on('data', (b: Buffer) => this.#onData(b));
    call.on('error', (err: ServiceError) => this.#onError(err));
    call.on('status', () => {
      this.#ended = true;
    });
    call.on('end', () => this.#onEnd());
    if (options.signal.aborted) {
      this.#onAbort();
      return;
    }
    options.signal.addEventListener('abort', this.#onAbort, { once: true });
    call.write(message.subarray(5)); // grpc-js frames it again
    this.#writtenNs = nowNs();
    call.end();
  }

  #onData(b: Buffer): void {
    if (this.#done) return;
    const call = this.#call!;
    const now = nowNs();
    if (this.#firstMessageNs === 0) this.#firstMessageNs = now;
    let m: StreamMessage;
    try {
      m = decodeStreamMessage(b);
    } catch (err) {
      // Thrown here it would escape grpc-js's listener (an uncaught exception).
      this.#done = true;
      call.cancel();
      this.#chain.then(() => this.#finish(err), () => this.#finish(err));
      return;
    }
    if (m.kind === 'error' || m.final) {
      this.#done = true;
      this.#endNs = now;
    }
    call.pause();
    this.#chain = this.#chain.then(() => this.handlers.onMessage(m)).then(this.#handled, this.#handlerFailed);
  }

  #onError(err: ServiceError): void {
    if (this.#done || this.#settled) return;
    const e = grpcJsError(err, this.client);
    this.#chain.then(() => this.#finish(e), () => this.#finish(e));
  }

  #onEnd(): void {
    if (this.#done) return;
    this.#endNs = nowNs();
    this.#chain.then(() => this.#finish(), () => undefined);
  }

  #finish(err?: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.options.signal.removeEventListener('abort', this.#onAbort);
    this.inFlight.delete(this.#running);
    if (err !== undefined) {
      this.#reject(err);
      return;
    }
    if (this.#endNs === 0) this.#endNs = nowNs();
    const endNs = this.#endNs;
    this.#resolve({ writtenNs: this.#writtenNs, firstMessageNs: this.#firstMessageNs === 0 ? endNs : this.#firstMessageNs, endNs });
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
