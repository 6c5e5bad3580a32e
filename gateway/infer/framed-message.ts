// The pre-framed ModelInferRequest as the stages see it (docs/architecture.md#pre-framing): one buffer whose
// regions (slots) the decoders fill in place, framed by infer/frame-request.ts, its memory from
// an allocator the request owns (buffers/pool.ts). Types only: every stage may import them.
import type { InferRequest } from './request';

export interface Slot {
  /** Offset of the payload in `message`. */
  readonly offset: number;
  readonly length: number;
}

export interface FramedRequest {
  /** gRPC length-prefixed message: 1 byte compressed flag (0), uint32 BE length, protobuf. */
  readonly message: Buffer;
  /** One per input, aligned with request.inputs; undefined for shared-memory inputs (no entry). */
  readonly slots: readonly (Slot | undefined)[];
}

/** Where a framed message's memory comes from: a request's pooled buffers (buffers/pool.ts). */
export type Allocate = (byteLength: number) => Buffer;

/** Where bytes that are not in the head go on the wire: before head[at], `length` of them. */
export interface Cut {
  readonly at: number;
  readonly length: number;
}

export interface FramedHead extends FramedRequest {
  /** In order; the wire is head[0, cut0.at) + cut0's bytes + head[cut0.at, cut1.at) + … + the rest of head. */
  readonly cuts: readonly Cut[];
}

/**
 * Frames a request (infer/frame-request.ts, its memory from the request's allocator), leaving
 * the last `external[i]` payload bytes of input i out of the head (cut-through; [] keeps all).
 * Decoders receive it, so they fill slots without knowing how a message is framed.
 */
export type Frame = (request: InferRequest, external: readonly number[]) => FramedHead;

/** Where a push decoder puts the payload bytes it does not decode itself (upstream/infer/upload.ts). */
export interface PayloadSink {
  /** chunk[from..], in body order. */
  write(chunk: Buffer, from?: number): void;
}

/** Opens the sink for a framed request: `slots` are where the streamed payload bytes go. */
export type OpenSink = (request: InferRequest, framed: FramedHead, slots: readonly Slot[]) => PayloadSink;
