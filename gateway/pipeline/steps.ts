// Steps every inference route shares (V2 infer, V1 predict, declarative, generate): a hop ledger
// for the request, framing with the request's pooled buffers, the ModelInfer call, and writing the
// answer — each recording its hop, so the routes read as their list of steps.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { Base64Staging, STAGE_MIN_CHARS } from '../decode/base64/base64-staging';
import { responseEncoding } from '../egress/compress';
import { writeParts } from '../egress/write';
import { isGatewayError } from '../errors';
import type { Cut, Frame } from '../infer/framed-message';
import { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import { type Body, type BodyLimits, declaredLength, readBody, type RequestEncoding, streamBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import { serverTiming as serverTimingOf } from '../telemetry/server-timing';
import { keeps } from '../buffers/reclaim';
import { releaseWhole } from '../buffers/release';
import { WarmBuffers } from '../buffers/warm';
import type { CallOptions, DataPlane, Receiver, ResponseMessage } from '../upstream/infer/data-plane';
import { frameInferHead } from '../infer/frame-request';
import { awaitAnswer } from '../upstream/infer/answer-hops';
import { Forwarder } from '../upstream/infer/cut-through';
import type { Sent } from '../upstream/infer/upload';
import { decodeStagedBody, type StagedDecodedBody, type WholeBodyOptions } from '../decode/v2-body';
import { nowNs } from '../infer/clock';

/** A new ledger for the request, handed to telemetry through its record. */
export function startLedger(ctx: RequestContext, version: string): Ledger {
  const ledger = new Ledger();
  ctx.record.ledger = ledger;
  ctx.record.version = version;
  return ledger;
}

/**
 * Reads the whole body (inflated as `encoding` says, within the limits); records ingress_read.
 * With `staging` (stagingFor), each chunk goes to it as it arrives and only it holds the body
 * (the text of the strings it decoded is dropped as they arrive): the body's chunks are then
 * what staging.original() restores, made only when read.
 */
export async function readWholeBody(ctx: RequestContext, ledger: Ledger, limits: BodyLimits, encoding: RequestEncoding,
  staging?: Base64Staging): Promise<Body> {
  ledger.start('ingress_read');
  let body: Body;
  if (staging === undefined) {
    body = await readBody(ctx.req, limits, encoding);
  } else {
    const length = await streamBody(ctx.req, staging.bodyBytes, (c) => staging.push(c));
    body = { length, get chunks() { return staging.original(); } };
  }
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', body.length, body.length);
  return body;
}

/**
 * Base64 decoded while the body arrives (decode/base64/base64-staging.ts): for an uncompressed body of
 * declared length, long enough to hold a staged string; undefined otherwise.
 */
export function stagingFor(ctx: RequestContext, limits: BodyLimits, encoding: RequestEncoding, dataUrls = false): Base64Staging | undefined {
  if (encoding !== undefined) return undefined;
  const bodyBytes = declaredLength(ctx.req, limits);
  if (bodyBytes === undefined || bodyBytes < STAGE_MIN_CHARS) return undefined;
  return staging(bodyBytes, limits.maxInputSizeBytes, dataUrls);
}

/** Staging for a body of `bodyBytes`, its buffers kept warm between uploads; chunks pushed are freed once staged. */
export function staging(bodyBytes: number, maxInputSizeBytes: number, dataUrls = false): Base64Staging {
  return new Base64Staging({ bodyBytes, maxInputSizeBytes, allocate: takeStaging, reused: reusedStaging, freeChunk: releaseWhole, unused: releaseStaged,
    dataUrls });
}

/** Large staging buffers kept warm between uploads (buffers/warm.ts). */
const stagingBuffers = new WarmBuffers();
keeps(() => stagingBuffers.idleBytes);
const takeStaging = (n: number): Buffer => stagingBuffers.take(n);
const reusedStaging = (b: Buffer): boolean => stagingBuffers.reused(b);

/** A staging buffer whose bytes are in the message (or unused) goes back for another upload; nothing reads it now. */
export function releaseStaged(buf: Buffer): void {
  stagingBuffers.give(buf);
}

/**
 * The body `staging` saw, decoded from what it staged (decode/v2-body.ts decodeStagedBody, the
 * payloads of `cutOutMinBytes` or more cut out); undefined when the body must be read whole as
 * sent, which `staging.original()` then gives. The staging buffers whose bytes are in the message
 * (or unused) go back now — once the body as sent was restored from them; those cut out go back
 * once the call no longer reads them.
 */
export function unstage(staging: Base64Staging, o: WholeBodyOptions, frame: Frame, ledger: Ledger, cutOutMinBytes: number): StagedDecodedBody | undefined {
  const staged = staging.end();
  if (staged === undefined) return undefined;
  ledger.allocated('decode', staged.allocated);
  const s = decodeStagedBody(staged, o, frame, ledger, cutOutMinBytes);
  if (s === undefined) staging.original();
  for (const b of staged.staged.values()) if (s?.payloads.includes(b) !== true) releaseStaged(b);
  return s;
}

/**
 * Sends a head whose staged payloads were cut out (decode/v2-body.ts decodeStagedBody), on a call
 * opened now: the head's pieces and the payloads, one per cut, are written by reference in wire
 * order (upstream/infer/cut-through.ts), so no message holds a second copy of them. Their staging
 * buffers go back for another upload once Triton has answered (it read every byte); after a
 * failure some may still be queued on the socket, so they are only dropped, never reused.
 */
export function sendCutOut(dataPlane: DataPlane, options: CallOptions, head: Buffer, cuts: readonly Cut[],
  payloads: readonly Buffer[]): Extract<Sent, { response: unknown }> {
  const call = dataPlane.startModelInfer!(options);
  const startNs = nowNs();
  const forwarder = new Forwarder(call, head, cuts);
  // Every byte is in memory already: the stream queues the views, it does not copy them.
  for (const b of payloads) forwarder.push(b);
  call.response.then(() => { for (const b of payloads) releaseStaged(b); }, () => undefined);
  return { response: call.response, startNs, messageBytes: head.length + cuts.reduce((n, c) => n + c.length, 0) };
}

/**
 * Frames requests into the request's pooled buffers (released when the handler settles), or
 * fresh ones; records the allocation unless the pool reused a page. `gathered`: buffers the
 * decoder allocated itself before framing (a body gathered into one).
 */
export function framer(ctx: Pick<RequestContext, 'buffers'>, ledger: Ledger, pooled: boolean, gathered = 0): Frame {
  return (request: InferRequest, external: readonly number[]) => {
    const framed = frameInferHead(request, external, pooled ? ctx.buffers.acquire : (n: number) => Buffer.allocUnsafe(n));
    ledger.allocated('decode', gathered + (pooled && ctx.buffers.reused(framed.message) ? 0 : 1));
    return framed;
  };
}

/** What a call's options are made from: a request's context, or a planned request's (infer-planned.ts). */
export type CallContext = Pick<RequestContext, 'askedDeadline' | 'signal' | 'upstreamHeaders' | 'record'> & {
  readonly req: { readonly headers: IncomingHttpHeaders };
};

/**
 * The call's options: its deadline is upstream.timeoutMs from now, or the deadline the client
 * asked for (grpc-timeout, counted from its request's arrival) when that comes first. Either
 * reaches Triton as the call's grpc-timeout; when it passes, the call is cancelled and the
 * client gets 504 GW_ERR_UPSTREAM_DEADLINE. `affinity`: the key of the request's sequence
 * (sequenceKey), which keeps every call of the sequence on one backend and is never retried:
 * Triton keeps the sequence's state on one server. Retries are counted in the request's record.
 * The request's model (its record's) goes along for model-aware routing.
 */
export function callOptions(ctx: CallContext, timeoutMs: number, receiver?: Receiver, affinity?: string): CallOptions {
  const own = Date.now() + timeoutMs;
  const deadline = ctx.askedDeadline !== undefined && ctx.askedDeadline < own ? ctx.askedDeadline : own;
  const record = ctx.record;
  return {
    deadline, signal: ctx.signal, metadata: ctx.upstreamHeaders, receiver, affinity,
    retried: () => { record.retries = (record.retries ?? 0) + 1; },
    // The model picks the pool and the backends that have it (upstream/backends/pools.ts, model-index.ts).
    model: record.model === undefined ? undefined : {
      name: record.model, version: record.version ?? '', header: (h) => headerValue(ctx.req.headers[h]),
      routed: (pool, decision, mirror) => {
        record.pool = pool;
        record.routeDecision = decision;
        if (mirror !== undefined) record.mirror = mirror;
      },
    },
  };
}

/** A request header's value (the first, when it came several times). */
export function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The key of the sequence an inference belongs to — its model and `sequence_id` — or undefined
 * when it has none (a `sequence_id` of 0 or "" is Triton's "no sequence").
 */
export function sequenceKey(request: InferRequest): string | undefined {
  const id = request.parameters.get('sequence_id');
  if (id === undefined || id.value === 0n || id.value === '' || id.value === 0) return undefined;
  return `${request.modelName}\u0000${id.type === 'string' ? 's' : 'n'}:${String(id.value)}`;
}

/** Sends a whole framed message; the answer's hops are recorded. Rejects with the data plane's GatewayError. */
export function callModelInfer(ctx: RequestContext, dataPlane: DataPlane, message: Buffer, timeoutMs: number, ledger: Ledger,
  receiver?: Receiver): Promise<ResponseMessage> {
  const startNs = nowNs();
  return awaitAnswer(dataPlane.modelInfer(message, callOptions(ctx, timeoutMs, receiver)), startNs, message.length, ledger, ctx.record);
}

/** Sends a head and the staged payloads cut out of it (sendCutOut); the answer's hops are recorded. */
export function callCutOut(ctx: RequestContext, dataPlane: DataPlane, framed: { message: Buffer; cuts: readonly Cut[]; payloads: readonly Buffer[] },
  timeoutMs: number, ledger: Ledger, receiver?: Receiver): Promise<ResponseMessage> {
  const sent = sendCutOut(dataPlane, callOptions(ctx, timeoutMs, receiver), framed.message, framed.cuts, framed.payloads);
  return awaitAnswer(sent.response, sent.startNs, sent.messageBytes, ledger, ctx.record);
}

/** A NOT_FOUND from Triton means the cached model is gone: forgets it; returns `err` to rethrow. */
export function evictOnNotFound(err: unknown, evict: () => void): unknown {
  if (isGatewayError(err) && err.status === 404) evict();
  return err;
}

/**
 * Writes a 200 answer of `parts` in one corked write, compressed as the client accepts unless
 * `compress` is false (Triton's generate answers are never compressed); records egress_write.
 * With `serverTiming` (telemetry.serverTiming) the head carries the hops so far.
 */
export async function writeAnswer(ctx: RequestContext, ledger: Ledger, headers: OutgoingHttpHeaders, parts: readonly Buffer[],
  serverTiming: boolean, compress = true): Promise<void> {
  if (serverTiming) headers['Server-Timing'] = serverTimingOf(ledger, ctx.record.startNs, nowNs());
  ledger.start('egress_write');
  const written = await writeParts(ctx.res, 200, headers, parts, compress ? responseEncoding(ctx.req) : undefined);
  ledger.end('egress_write');
  ledger.bytes('egress_write', parts.reduce((n, b) => n + b.length, 0), written);
}
