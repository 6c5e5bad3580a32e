// The data plane: ModelInfer with a pre-framed request, answered as the raw response message
// chunks. Two implementations pass the same tests: our own gRPC call on node:http2 (the default;
// no extra copies, DESIGN.md §3.2) and @grpc/grpc-js (comparison and fallback).
export interface CallOptions {
  /** Absolute deadline (Date.now() milliseconds); sent as grpc-timeout. */
  readonly deadline: number;
  /** Aborting cancels the call (RST_STREAM CANCEL on http2). */
  readonly signal: AbortSignal;
  /** Extra gRPC metadata (the W3C trace context). */
  readonly metadata: Readonly<Record<string, string>>;
}

/** When the call's bytes moved (process.hrtime.bigint()); the h2 data plane measures them. */
export interface CallTiming {
  /** Last request byte handed to the socket. */
  readonly sentNs: bigint;
  /** First byte of the answer (its HEADERS frame). */
  readonly firstByteNs: bigint;
  /** The answer is complete (trailers). */
  readonly endNs: bigint;
}

export interface ResponseMessage {
  /** The protobuf bytes of the one response message, as received (views where possible). */
  readonly chunks: readonly Buffer[];
  readonly byteLength: number;
  /** Undefined where the transport does not expose it (grpc-js). */
  readonly timing: CallTiming | undefined;
}

/**
 * Keeps a message's memory from reuse while a transport may still read it (a pooled buffer,
 * upstream/buffer-pool.ts). `hold` returns the function that lets go — once — told whether the
 * transport is certain nothing reads the bytes any more.
 */
export interface MessageHolds {
  hold(message: Buffer): (reusable: boolean) => void;
}

export interface DataPlane {
  /**
   * Sends one framed ModelInferRequest (gRPC prefix included, upstream/frame-request.ts).
   * Rejects with a GatewayError (upstream/status.ts decides which).
   */
  modelInfer(message: Buffer, options: CallOptions): Promise<ResponseMessage>;
  close(): void;
}

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';
/** Triton's own gRPC limit, both directions (PROTOCOL.md §9). */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1;
