// The data plane: ModelInfer with a pre-framed request (whole, or written piece by piece as the
// client's body arrives), answered as the raw response message chunks. Two implementations pass
// the same tests: our own gRPC call on node:http2 (the default;
// no extra copies, DESIGN.md §3.2) and @grpc/grpc-js (comparison and fallback).
export interface CallOptions {
  /** Absolute deadline (Date.now() milliseconds); sent as grpc-timeout. */
  readonly deadline: number;
  /** Aborting cancels the call (RST_STREAM CANCEL on http2). */
  readonly signal: AbortSignal;
  /** Extra gRPC metadata (the W3C trace context). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Sees the response message as it arrives (h2 only; egress/stream-binary.ts). */
  readonly receiver?: Receiver;
}

/** Pauses and resumes the call's response (HTTP/2 flow control reaches the server), or ends it. */
export interface Flow {
  pause(): void;
  resume(): void;
  /** Resets the call (RST_STREAM CANCEL); the call rejects. */
  cancel(): void;
}

export interface Receiver {
  /**
   * Each piece of the response message after the gRPC prefix, as received (a view). True: the
   * receiver took it and the call does not keep it; false: the call keeps it for the answer.
   */
  data(piece: Buffer, flow: Flow): boolean;
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
 * A ModelInfer call whose request message is written piece by piece as it arrives (cut-through,
 * DESIGN.md §3.4). Pieces are written by reference: the caller must not reuse them.
 */
export interface StreamingCall {
  /** Writes a piece of the framed message; false: wait for onDrain before writing more. */
  write(piece: Buffer): boolean;
  /** Writes the last piece and ends the request; the call's send time is taken when it is flushed. */
  end(last: Buffer): void;
  /** `resume` runs once the call can take more, or at once when it has ended either way. */
  onDrain(resume: () => void): void;
  /** Resets the call (RST_STREAM CANCEL) if it has not ended. */
  cancel(): void;
  /** The answer; rejects (as soon as the call fails, even mid-upload) with a GatewayError. */
  readonly response: Promise<ResponseMessage>;
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
  /** Opens a call to be written piece by piece; absent where the transport cannot (grpc-js). */
  startModelInfer?(options: CallOptions): StreamingCall;
  close(): void;
}

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';
/** Triton's own gRPC limit, both directions (PROTOCOL.md §9). */
export const MAX_MESSAGE_BYTES = 2 ** 31 - 1;
