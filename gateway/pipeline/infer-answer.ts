// The V2 infer route's last steps: the ModelInfer call (unless the message already went out as the
// body arrived) and the whole answer, encoded as the request asked and written in one go. Each
// owns its hops (the upstream ones through answer-hops.ts, encode, egress_write).
import type { OutgoingHttpHeaders } from 'node:http';
import { rawInputMessage } from '../decode/raw-binary';
import { AnswerHead } from '../infer/answer-heads';
import { jsonAnswerHead, type JsonAnswerHead } from '../encode/json-answer-head';
import { encodeInferResponse } from '../encode/infer-response';
import type { KnownHead } from '../decode/framed-heads';
import type { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import type { InferResponse } from '../infer/response';
import type { RequestRecord } from '../telemetry/record';
import type { RequestContext } from '../ingress/context';
import type { ResponseMessage } from '../upstream/infer/data-plane';
import { awaitAnswer } from '../upstream/infer/answer-hops';
import { readInferResponse } from '../infer/answer-reader';
import { inferCallError } from '../upstream/status';
import type { SharedMemoryPool } from '../upstream/shared-memory/region-pool';
import type { SharedMemoryUpload } from '../upstream/shared-memory/upload';
import type { AnswerStreamer } from './answer-streamer';
import type { Decoded, InferPlan } from './infer-decode';
import { binaryAnswerHeaders, type InferDialect } from './infer-dialect';
import { callOptions, evictOnNotFound, sequenceKey, writeAnswer } from './steps';
import { nowNs } from '../infer/clock';

/**
 * Sends the message (unless it went out as the body arrived) and waits for Triton's answer; an
 * answer whose outputs are in a region is not streamed (its bytes are not in the DATA frames).
 */
export async function callTriton(ctx: RequestContext, p: InferPlan, d: Decoded, ledger: Ledger, streamer: AnswerStreamer,
  outputsInRegion: boolean): Promise<ResponseMessage> {
  const { sent } = d;
  ctx.record.inferences = batchSize(d.request);
  try {
    if ('response' in sent) return await awaitAnswer(sent.response, sent.startNs, sent.messageBytes, ledger, ctx.record);
    const startNs = nowNs();
    const options = callOptions(ctx, p.upstream.timeoutMs, outputsInRegion ? undefined : streamer.receiverFor(d.request), sequenceKey(d.request));
    return await awaitAnswer(p.dataPlane.modelInfer(sent.message, options), startNs, sent.messageBytes, ledger, ctx.record);
  } catch (err) {
    if (d.sharedMemory) sharedMemoryLost(p.sharedMemory!, err);
    throw callError(p, ctx.params[0]!, d, err);
  }
}

/**
 * What a failed ModelInfer call of model `name` answers: a NOT_FOUND forgets the cached model, a
 * raw request's refusal names its input as Triton's HTTP frontend does.
 */
export function callError(p: InferPlan, name: string, d: Pick<Decoded, 'request' | 'encoding'>, err: unknown): unknown {
  return inferCallError(evictOnNotFound(err, () => p.configs.evict(name)), d.encoding === 'raw' ? (m) => rawInputMessage(m, d.request.inputs[0]!.name) : undefined);
}

/**
 * Triton forgot the regions (it restarted since they were registered): the pool registers them
 * again on a later request. This one fails with Triton's error, as any request Triton refused.
 */
function sharedMemoryLost(pool: SharedMemoryPool, err: unknown): void {
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && /Unable to find (system )?shared memory region/i.test(message)) pool.lost();
}

/**
 * The whole answer, encoded as the request asked (JSON or binary outputs) and written in one go.
 * Outputs Triton wrote into the request's region are read from there into pooled buffers (one
 * copy, the encode hop's) — the region is held until then, and released by the caller after.
 */
export async function respond(ctx: RequestContext, p: InferPlan, request: InferRequest, answer: ResponseMessage, ledger: Ledger,
  shm?: SharedMemoryUpload): Promise<void> {
  const { headers, parts } = encodeAnswer(ctx.record, p.dialect, request, answer, ledger, shm === undefined ? undefined : (r) => {
    const withOutputs = shm.withOutputs(r, ctx.buffers.acquire);
    ledger.copied('encode', shm.outputBytes);
    return withOutputs;
  });
  await writeAnswer(ctx, ledger, headers, parts, p.telemetry.serverTiming, p.dialect === undefined);
}

/** An answer's HTTP fields and body parts: the JSON header, then binary outputs by reference. */
export interface EncodedAnswer {
  readonly headers: OutgoingHttpHeaders;
  readonly parts: Buffer[];
}

/**
 * The answer's headers and body parts (the JSON header, then binary outputs by reference), with the
 * encode hop recorded: respond's, and a planned request's (infer-planned.ts). `regionOutputs`:
 * outputs Triton wrote into a shared-memory region, read into the response. `known`: the kept head
 * the request was taken from (decode/framed-heads.ts), given the answer's encoded head to keep.
 * `json`: given a JSON answer's head (encode/json-answer-head.ts jsonAnswerHead) when the answer is
 * JSON and one the compiled lane can print.
 */
export function encodeAnswer(record: RequestRecord, dialect: InferDialect | undefined, request: InferRequest, answer: ResponseMessage,
  ledger: Ledger, regionOutputs?: (r: InferResponse) => InferResponse, known?: KnownHead, json?: { head?: JsonAnswerHead }): EncodedAnswer {
  ledger.start('encode');
  let response = readInferResponse(answer.chunks);
  if (regionOutputs !== undefined) response = regionOutputs(response);
  const encoded = encodeInferResponse(response, request);
  ledger.end('encode');
  ledger.allocated('encode');
  ledger.copied('encode', encoded.copied);
  ledger.bytes('encode', answer.byteLength, encoded.header.length + encoded.binaryLength);
  const binary = encoded.binaryLength > 0;
  record.encodingOut = binary ? 'binary' : 'json';
  const headers: OutgoingHttpHeaders = binary ? binaryAnswerHeaders(dialect, encoded.header.length) : { 'Content-Type': 'application/json' };
  const { binary: outputs } = encoded;
  const parts = new Array<Buffer>(1 + outputs.length);
  parts[0] = encoded.header;
  for (let i = 0; i < outputs.length; i++) parts[i + 1] = outputs[i]!;
  if (known !== undefined && binary && regionOutputs === undefined) {
    known.answer = AnswerHead.of(answer.chunks, response, outputs, encoded.header, headers) ?? known.answer;
  }
  if (json !== undefined && !binary && regionOutputs === undefined) json.head = jsonAnswerHead(answer.chunks, response, encoded.header, headers);
  return { headers, parts };
}

/**
 * encodeAnswer for a planned request taken from a kept head: an answer whose bytes outside its
 * payloads are the last one's takes the head encoded then (infer/answer-heads.ts) — no read, no
 * encode, nothing allocated but the parts. Its headers are shared: a caller adding one copies them.
 */
export function encodeKnownAnswer(record: RequestRecord, request: InferRequest, answer: ResponseMessage, ledger: Ledger,
  known: KnownHead): EncodedAnswer {
  const k = known.answer;
  if (k !== undefined) {
    ledger.start('encode');
    const parts = k.parts(answer.chunks);
    if (parts !== undefined) {
      ledger.end('encode');
      ledger.bytes('encode', answer.byteLength, k.bodyBytes);
      record.encodingOut = 'binary';
      return { headers: k.headers, parts };
    }
  }
  return encodeAnswer(record, undefined, request, answer, ledger, undefined, known);
}

/** A request's batch size (quota unit `inferences`): its first input's first dimension if it has 2 or more, else 1. */
export const batchSize = (request: InferRequest): number => {
  const shape = request.inputs[0]?.shape;
  return shape !== undefined && shape.length > 1 ? Math.max(1, shape[0]!) : 1;
};
