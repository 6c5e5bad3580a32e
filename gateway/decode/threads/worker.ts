// The body of a decode thread (limits.decodeThreads, decode/threads/pool.ts): a V2 infer body read
// whole, decoded by the same pure functions the main thread runs (decodeWholeBody), so Triton's
// answers for bad bodies are the same bytes. The body arrives in a SharedArrayBuffer; the framed
// gRPC message goes back transferred (no copy), its ArrayBuffer the thread's own allocation.
import { parentPort, workerData } from 'node:worker_threads';
import { isGatewayError } from '../../errors';
import type { InferRequest } from '../../infer/request';
import { hopRecord, Ledger } from '../../infer/ledger';
import { type BodyEncoding, decodeWholeBody, type WholeBodyOptions } from '../v2-body';
import { frameInferHead } from '../../infer/frame-request';
import { Spares } from '../../buffers/warm';

/** One job: `body` is the whole body, gathered once into shared memory by the main thread. */
export interface DecodeJob {
  readonly id: number;
  readonly body: SharedArrayBuffer;
  readonly length: number;
  readonly ihcl: string | string[] | undefined;
  readonly options: WholeBodyOptions;
}

/** Its result: the decoded request and message, or the error decoding threw (rebuilt by the pool). */
export type DecodeResult =
  | {
    readonly id: number;
    readonly request: InferRequest;
    readonly message: ArrayBuffer;
    readonly messageBytes: number;
    readonly encoding: BodyEncoding;
    /** The decode hop's copied bytes, copies and allocations, as the thread's own ledger counted them. */
    readonly copied: number;
    readonly copies: number;
    readonly allocations: number;
  }
  | { readonly id: number; readonly error: SerializedError };

export interface SerializedError {
  readonly name: string;
  readonly message: string;
  /** A GatewayError's code, status and content type; absent for any other error. */
  readonly code?: string;
  readonly status?: number;
  readonly plain?: boolean;
}

/** A message's memory given back by the main thread once nothing reads it (DecodePool.recycle). */
export interface Recycled {
  readonly recycle: ArrayBuffer;
}

/**
 * Messages' memory given back, kept for the next frames (at most two). A fresh one is a fresh
 * mmap whose pages fault as the message is written (bench/RESULTS.md); the thread's isolate is
 * ended when idle (pool.ts), and these with it.
 */
const spareMessages = new Spares<ArrayBuffer>(2);

export function keepMessage(memory: ArrayBuffer): void {
  spareMessages.keep(memory);
}

/** Memory of at least `n` bytes for a message: a kept one if one fits (true), else fresh (false). */
function messageMemory(n: number): [ArrayBuffer, boolean] {
  const kept = spareMessages.take(n);
  // Its own ArrayBuffer (never a slice of Node's shared allocation pool), so it can be transferred.
  return kept === undefined ? [Buffer.allocUnsafeSlow(n).buffer, false] : [kept, true];
}

export function decodeJob(job: DecodeJob): { result: DecodeResult; transfer: ArrayBuffer[] } {
  const ledger = new Ledger();
  try {
    const frame = (request: InferRequest, external: readonly number[]) => frameInferHead(request, external, (n) => {
      const [memory, kept] = messageMemory(n);
      if (!kept) ledger.allocated('decode');
      return Buffer.from(memory, 0, n);
    });
    const d = decodeWholeBody([Buffer.from(job.body, 0, job.length)], job.length, job.ihcl, job.options, frame, ledger);
    const { bytesCopied: copied, copies, allocations } = ledger.read('decode', hopRecord());
    const message = d.message.buffer as ArrayBuffer;
    return {
      result: { id: job.id, request: d.request, message, messageBytes: d.message.length, encoding: d.encoding, copied, copies, allocations },
      transfer: [message],
    };
  } catch (err) {
    return { result: { id: job.id, error: serializeError(err) }, transfer: [] };
  }
}

function serializeError(err: unknown): SerializedError {
  if (isGatewayError(err)) return { name: err.name, message: err.message, code: err.code, status: err.status, plain: err.plain };
  const e = err as { name?: unknown; message?: unknown };
  return { name: typeof e.name === 'string' ? e.name : 'Error', message: typeof e.message === 'string' ? e.message : String(err) };
}

/** The pool's workerData: only its threads answer jobs (not a test runner's thread importing this file). */
export const DECODE_THREAD = 'tensorgate-decode';

if (workerData === DECODE_THREAD) {
  parentPort?.on('message', (job: DecodeJob | Recycled) => {
    if ('recycle' in job) {
      keepMessage(job.recycle);
      return;
    }
    const { result, transfer } = decodeJob(job);
    parentPort!.postMessage(result, transfer);
  });
}
