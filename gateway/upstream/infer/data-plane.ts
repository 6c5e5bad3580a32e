// The data plane: ModelInfer with a pre-framed request (whole, or written piece by piece as the
// client's body arrives), answered as the raw response message chunks. Two implementations pass
// the same tests: our own gRPC call on node:http2 (the default;
// no extra copies, docs/architecture.md#two-data-planes) and @grpc/grpc-js (comparison and fallback).
import type { ModelKey, RouteDecision } from '../backends/pools';
import type { GatewayError } from '../../errors';

export interface CallOptions {
  /** Absolute deadline (Date.now() milliseconds); sent as grpc-timeout. */
  readonly deadline: number;
  /** Aborting cancels the call (RST_STREAM CANCEL on http2). */
  readonly signal: AbortSignal;
  /** Extra gRPC metadata (the W3C trace context). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Sees the response message as it arrives (h2 only; pipeline/binary-streamer.ts). */
  readonly receiver?: Receiver;
  /** A sequence request's key (model and sequence_id): its backend, and never retried (upstream/backends/retry.ts). */
  readonly affinity?: string;
  /** Told of each retry on another backend (the request's record counts them). */
  readonly retried?: () => void;
  /** The model the call is for: its pool, and the backends that have it ready (upstream/backends/backend-set.ts). */
  readonly model?: ModelKey;
}

/** Pauses and resumes the call's response (HTTP/2 flow control reaches the server), or ends it. */
export interface Flow {
  pause(): void;
  resume(): void;
  /** Resets the call (RST_STREAM CANCEL); the call rejects. */
  cancel(): void;
  /**
   * Bytes of the answer the call has received and not handed to the receiver yet: while paused,
   * what the upstream stream's window still let in (at most that window).
   */
  buffered(): number;
  /**
   * The call's timing so far, for what is sent before the answer is complete (Server-Timing on a
   * streamed answer): as CallTiming, except that `endNs` is 0 while the answer is still arriving.
   */
  timing(): CallTiming;
}

export interface Receiver {
  /**
   * Each piece of the response message after the gRPC prefix, as received (a view). True: the
   * receiver took it and the call does not keep it; false: the call keeps it for the answer.
   */
  data(piece: Buffer, flow: Flow): boolean;
}

/**
 * When the call's bytes moved, in the timings' clock (infer/clock.ts nowNs); the h2 data plane measures
 * them, for a whole message (modelInfer) and a cut-through one (startModelInfer) alike, whether
 * or not a Receiver takes the answer. On a resolved answer all four are set (non-zero) and
 * firstSentNs ≤ sentNs ≤ firstByteNs ≤ endNs. Hops from them: sending firstSentNs → sentNs,
 * Triton sentNs → firstByteNs, receiving firstByteNs → endNs.
 */
export interface CallTiming {
  /**
   * The call's first bytes were handed on: its stream is open on a connected session and the
   * HEADERS frame is queued for the session's next socket write (in the same event-loop turn).
   * A call made while its session is still connecting waits for the connection first.
   */
  readonly firstSentNs: number;
  /**
   * The request's last byte is on the socket: the socket write carrying it completed and the
   * request side is closed (END_STREAM). Never after firstByteNs: an answer that begins before
   * the write's completion is seen counts the message as sent when the answer began.
   */
  readonly sentNs: number;
  /** The answer's first DATA frame arrived: the first byte of the response message. */
  readonly firstByteNs: number;
  /** The answer's trailers arrived: it is complete (even when a receiver still holds it back). */
  readonly endNs: number;
}

export interface ResponseMessage {
  /** The protobuf bytes of the one response message, as received (views where possible). */
  readonly chunks: readonly Buffer[];
  readonly byteLength: number;
  /** Undefined where the transport does not expose it (grpc-js: no byte timestamps). */
  readonly timing: CallTiming | undefined;
}

/** The answer of a transport that measures its bytes (h2). */
export interface TimedResponseMessage extends ResponseMessage {
  readonly timing: CallTiming;
}

/**
 * A ModelInfer call whose request message is written piece by piece as it arrives (cut-through,
 * docs/cut-through.md). Pieces are written by reference: the caller must not reuse them.
 */
export interface StreamingCall {
  /** Writes a piece of the framed message; false: wait for onDrain before writing more. */
  write(piece: Buffer): boolean;
  /** Writes the last piece (may be empty) and ends the request; `sentNs` is taken once it is on the socket. */
  end(last: Buffer): void;
  /** `resume` runs once the call can take more, or at once when it has ended either way. */
  onDrain(resume: () => void): void;
  /** Resets the call (RST_STREAM CANCEL) if it has not ended. */
  cancel(): void;
  /**
   * `piece`, already written whole and read by nothing else (a body chunk node:http handed over),
   * is freed (buffers/release.ts releaseWhole) once no attempt can read it any more: its writes to
   * an open stream have left for the socket, or, kept for a replay, every attempt that had it put
   * its last byte on the socket. A failed write leaves it to the collector (a reset stream's
   * slices may still be queued on the socket).
   */
  release(piece: Buffer): void;
  /** The answer, always timed; rejects (as soon as the call fails, even mid-upload) with a GatewayError. */
  readonly response: Promise<TimedResponseMessage>;
}

/** What a whole call's caller gives it and hears from it, once: the answer or the error. */
export interface WholeCallee {
  /** Absolute deadline (Date.now() milliseconds), sent as grpc-timeout. */
  readonly deadline: number;
  readonly metadata: Readonly<Record<string, string>>;
  /** A sequence request's key: its backend, never retried (upstream/backends/retry.ts). */
  readonly affinity: string | undefined;
  readonly modelName: string;
  readonly modelVersion: string;
  /** The request's header, by lower-case name (ModelKey.header). */
  header(name: string): string | undefined;
  /** ModelKey.routed: the pool chosen. */
  routed(pool: string, decision: RouteDecision, mirror: string | undefined): void;
  /** A retry on another backend. */
  retried(): void;
  /**
   * The answer. `out`: every byte of the message the call was given left for a socket, all from
   * this one attempt (no earlier attempt may still have writes of it queued): its buffers may be
   * reused now. Otherwise they are the collector's.
   */
  answered(m: TimedResponseMessage, out: boolean): void;
  failed(err: GatewayError): void;
}

export interface DataPlane {
  /**
   * Sends one framed ModelInferRequest (gRPC prefix included, infer/frame-request.ts).
   * Rejects with a GatewayError (upstream/status.ts decides which).
   */
  modelInfer(message: Buffer, options: CallOptions): Promise<ResponseMessage>;
  /** Opens a call to be written piece by piece; absent where the transport cannot (grpc-js). */
  startModelInfer?(options: CallOptions): StreamingCall;
  /**
   * Sends a message that is all in hand, as `pieces` in order, with no promise, closure or signal
   * of its own (whole-call.ts); its outcome goes to `callee`. Absent where the transport cannot (grpc-js).
   */
  callWhole?(pieces: readonly Buffer[], callee: WholeCallee): { cancel(): void };
  close(): void;
}

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';
export { MAX_MESSAGE_BYTES } from '../call/grpc-call';
