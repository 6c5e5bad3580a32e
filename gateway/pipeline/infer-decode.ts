// The V2 infer route's first steps, in Triton's order: the model is looked up
// before the body is read, then the body is decoded on the one path its framing chose — read whole
// (JSON, compressed, chunked) or push-decoded as it arrives (raw, binary extension), cut through to
// Triton where the data plane can. Each step owns the hops it spends time in (ingress_read, decode),
// so the route reads as its list of steps.
import type { Config } from '../config/schema';
import { BinaryExtensionDecoder } from '../decode/binary-extension';
import { refuseReservedRegions } from '../decode/control/shared-memory';
import { chooseFraming, type Framing, mediaType, uploadKind } from '../decode/framing';
import { fillMultipart, MultipartDecoder, type MultipartFields } from '../decode/multipart';
import { RawDecoder, refuseUnfitUpload, takesUploads } from '../decode/raw-binary';
import type { DecodePool } from '../decode/threads/pool';
import { type BodyEncoding, CUT_OUT_MIN_BYTES, type DecodedBody, decodeWholeBody } from '../decode/v2-body';
import { GatewayError } from '../errors';
import type { Frame, FramedHead, OpenSink, Slot } from '../infer/framed-message';
import type { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import { BodyStop, declaredLength, type RequestEncoding, requestEncoding, streamBody, streamBodyUntil } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { RequestRecord } from '../telemetry/record';
import type { ModelConfigs } from '../upstream/control/model-configs';
import type { DataPlane } from '../upstream/infer/data-plane';
import type { StreamInferPlane } from '../upstream/infer/stream-plane';
import { inferCallError } from '../upstream/status';
import type { SharedMemoryPool } from '../upstream/shared-memory/region-pool';
import { type Sent, Upload } from '../upstream/infer/upload';
import type { inference } from '../../proto/services';
import type { AnswerStreamer } from './answer-streamer';
import type { InferDialect } from './infer-dialect';
import { type SharedMemoryHold, sharedMemorySink } from './shared-memory-sink';
import { releaseWhole } from '../buffers/release';
import { callOptions, framer, readWholeBody, sendCutOut, sequenceKey, stagingFor, unstage } from './steps';

/** What the V2 infer route is built from, plus what is decided once, when it is built. */
export interface InferPlan {
  readonly dataPlane: DataPlane;
  /** ModelStreamInfer: requests answered as server-sent events (pipeline/infer-events.ts). */
  readonly streams: StreamInferPlane;
  readonly configs: ModelConfigs;
  readonly upstream: Config['upstream'];
  readonly limits: Config['limits'];
  readonly telemetry: Config['telemetry'];
  readonly binary: Config['binary'];
  /** upstream.sharedMemory: the pool of regions binary and raw tensors go through. */
  readonly sharedMemory?: SharedMemoryPool | undefined;
  /** limits.decodeThreads: large bodies read whole are decoded there. */
  readonly decodePool?: DecodePool | undefined;
  /** upstream.cutThrough on a data plane that can write a call piece by piece (h2). */
  readonly cutThrough: boolean;
  /** A cloud platform's shape of the same infer (routes/sagemaker.ts, routes/vertex-ai.ts); absent: V2's own. */
  readonly dialect?: InferDialect;
}

/** The request after decoding: its message went out as the body arrived, or waits whole in `sent`. */
export interface Decoded {
  readonly request: InferRequest;
  readonly encoding: BodyEncoding;
  readonly sent: Sent;
  /** Its tensors went through a shared-memory region. */
  readonly sharedMemory?: boolean;
}

/**
 * Triton looks the model up before it reads the body: an unknown model is 404. A decoupled one
 * (Triton: 501) is answered only as `events` (Accept: text/event-stream), else 400 naming the header
 * (on V2's own route; a cloud dialect, which has no events, keeps Triton's words).
 */
export async function lookupModel(ctx: RequestContext, p: InferPlan, events: boolean): Promise<inference.ModelConfig> {
  return modelConfig(p, ctx.params[0]!, ctx.params[1] ?? '', ctx.signal, events);
}

/** lookupModel for a model named outright (a planned request whose configuration was forgotten: infer-planned.ts). */
export async function modelConfig(p: Pick<InferPlan, 'configs' | 'dialect'>, name: string, version: string, signal: AbortSignal,
  events: boolean): Promise<inference.ModelConfig> {
  let config;
  try {
    config = await p.configs.get(name, version, signal);
  } catch (err) {
    throw inferCallError(err);
  }
  if (config.model_transaction_policy?.decoupled === true && !events) {
    // Triton's words; V2's own route adds how to reach the model (a cloud dialect has no events).
    const triton = "HTTP end point doesn't support models with decoupled transaction policy";
    throw new GatewayError('GW_ERR_MODEL_DECOUPLED', p.dialect === undefined
      ? `${triton} unless the request accepts server-sent events: send 'Accept: text/event-stream' to get each response as an event`
      : triton);
  }
  return config;
}

/**
 * Reads and decodes the body on the path its headers choose (decode/framing.ts): bodies of known
 * length that are not JSON are push-decoded as they arrive, the rest read whole; an upload media
 * type is a raw request, multipart/form-data its parts (docs/dialects.md "Uploads"). Records the
 * request form and the decode hop's bytes.
 */
export function decodeInferBody(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, ledger: Ledger,
  streamer: AnswerStreamer, shm: SharedMemoryHold): Promise<Decoded> {
  if (p.dialect !== undefined) {
    // A cloud platform's shape (routes/sagemaker.ts, routes/vertex-ai.ts): its media type says the
    // JSON header's length; Content-Encoding is not read there, and its bodies are never uploads.
    const ihcl = p.dialect.headerLength(ctx.req, declaredLength(ctx.req, p.limits));
    return decodeFramed(ctx, p, config, undefined, ihcl, ledger, streamer, shm);
  }
  const sent = ctx.req.headers['inference-header-content-length'];
  const type = mediaType(ctx.req.headers['content-type']);
  if (sent === undefined && type === 'multipart/form-data') return decodeMultipart(ctx, p, config, ledger, { binaryDataOutput: false });
  // A file's media type without the header is a raw request (docs/dialects.md "Uploads").
  const kind = sent === undefined ? uploadKind(type) : undefined;
  if (kind === 'file') refuseUnfitUpload(config, ctx.params[0]!, type!);
  const upload = kind === 'file' || (kind === 'bytes' && takesUploads(config));
  return decodeFramed(ctx, p, config, requestEncoding(ctx.req), upload ? '0' : sent, ledger, streamer, shm);
}

/**
 * A body that is the model's data whatever its media type (TorchServe's predictions, a declarative
 * route's parts or raw body): multipart parts as decodeMultipart (`aliases` standing for the only
 * input, or a route's `fields`), anything else the raw request
 * of the model's one input. Outputs are read whole (the route encodes them itself).
 */
export function decodeUploadBody(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, ledger: Ledger,
  streamer: AnswerStreamer, shm: SharedMemoryHold, aliases: readonly string[], fields?: MultipartFields): Promise<Decoded> {
  return mediaType(ctx.req.headers['content-type']) === 'multipart/form-data'
    ? decodeMultipart(ctx, p, config, ledger, { aliases, fields, binaryDataOutput: true })
    : decodeFramed(ctx, p, config, requestEncoding(ctx.req), '0', ledger, streamer, shm);
}

/** The body on the path its framing chose: read whole, or push-decoded as it arrives. */
function decodeFramed(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, encoding: RequestEncoding,
  ihcl: string | string[] | undefined, ledger: Ledger, streamer: AnswerStreamer, shm: SharedMemoryHold): Promise<Decoded> {
  const framing = chooseFraming(ihcl, declaredLength(ctx.req, p.limits), encoding !== undefined, p.limits.maxInputSizeBytes);
  return framing.kind === 'whole'
    ? decodeWhole(ctx, p, config, encoding, ihcl, ledger, streamer)
    : decodeStreamed(ctx, p, config, framing, ledger, streamer, shm);
}

/** Records the request form and the decode hop's bytes (a planned request's too, infer-planned.ts). */
export function recorded<D extends Pick<Decoded, 'request' | 'encoding'> & { readonly sent: { readonly messageBytes: number } }>(record: RequestRecord, decoded: D,
  ledger: Ledger): D {
  record.encoding = decoded.encoding;
  if (decoded.request.id !== undefined) record.requestId = decoded.request.id;
  ledger.bytes('decode', ledger.bytesOut('ingress_read'), decoded.sent.messageBytes);
  return decoded;
}

/** The gateway's region prefix when upstream.sharedMemory is on (decode/control/shared-memory.ts). */
function reservedPrefix(p: Pick<InferPlan, 'upstream'>): string | undefined {
  return p.upstream.sharedMemory.enabled ? p.upstream.sharedMemory.prefix : undefined;
}

/**
 * steps.ts framer, refusing a request that names one of the gateway's regions before its head is
 * framed (nothing taken from the pool) and its call opened (cut-through sends the head at once).
 */
function guardedFramer(ctx: RequestContext, p: Pick<InferPlan, 'upstream'>, ledger: Ledger, pooled: boolean): Frame {
  const frame = framer(ctx, ledger, pooled);
  const prefix = reservedPrefix(p);
  if (prefix === undefined) return frame;
  return (request, external) => {
    refuseReservedRegions(request, prefix);
    return frame(request, external);
  };
}

/**
 * guardedFramer for a staged body: a head with cuts is written by reference on a call that may
 * still read it after the request settled, so it is not a pool buffer (as in decodeStreamed).
 */
function stagedFramer(ctx: RequestContext, p: InferPlan, ledger: Ledger): Frame {
  return (request, external) => guardedFramer(ctx, p, ledger, !external.some((n) => n > 0))(request, external);
}

/**
 * JSON, compressed and chunked bodies: read whole (inflated within the limits), then decoded. An
 * uncompressed JSON body of declared length has its long base64 strings decoded as it arrives;
 * where the data plane can write a call piece by piece, the large ones go upstream from there,
 * cut out of the message (steps.ts sendCutOut).
 */
async function decodeWhole(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, encoding: RequestEncoding,
  ihcl: string | string[] | undefined, ledger: Ledger, streamer: AnswerStreamer): Promise<Decoded> {
  // A JSON body with a binary section (Inference-Header-Content-Length) is not staged.
  const staging = ihcl === undefined ? stagingFor(ctx, p.limits, encoding) : undefined;
  const body = await readWholeBody(ctx, ledger, p.limits, encoding, staging);
  ledger.start('decode');
  const options = {
    modelName: ctx.params[0]!, modelVersion: ctx.params[1] ?? '', config, maxInputSizeBytes: p.limits.maxInputSizeBytes, headerlessBinary: p.binary.headerless,
  };
  // Those cut out of the message go back once the call no longer reads them (sendCutOut).
  const s = staging === undefined ? undefined
    : unstage(staging, options, stagedFramer(ctx, p, ledger), ledger, p.cutThrough ? CUT_OUT_MIN_BYTES : Infinity);
  if (s !== undefined && s.cuts.length > 0) {
    ledger.end('decode');
    const options = callOptions(ctx, p.upstream.timeoutMs, streamer.receiverFor(s.request), sequenceKey(s.request));
    return recorded(ctx.record, { request: s.request, encoding: s.encoding, sent: sendCutOut(p.dataPlane, options, s.message, s.cuts, s.payloads) }, ledger);
  }
  let d: DecodedBody | undefined = s;
  if (d === undefined && p.decodePool?.wants(body.length, ihcl) === true) {
    d = await p.decodePool.decode(body, ihcl, options, guardedFramer(ctx, p, ledger, true), ledger, ctx.buffers);
  }
  d ??= decodeWholeBody(body.chunks, body.length, ihcl, options, guardedFramer(ctx, p, ledger, true), ledger);
  ledger.end('decode');
  // Everything of the body is in the message now (the request holds strings, not views of it):
  // its chunks are freed at once rather than when a collection finds them (buffers/release.ts).
  // A staged body's chunks were freed as they were staged.
  if (staging === undefined) for (const c of body.chunks) releaseWhole(c);
  // A decode thread frames on its own (its message is not a pool buffer): checked here instead.
  refuseReservedRegions(d.request, reservedPrefix(p));
  return recorded(ctx.record, { request: d.request, encoding: d.encoding, sent: { message: d.message, messageBytes: d.message.length } }, ledger);
}

/**
 * Raw and binary-extension bodies of declared length, push-decoded as they arrive: the payload
 * goes into its slots, or straight upstream (cut-through) on a call opened once the request is
 * framed. A call that fails mid-upload is reported at once; the rest of the body drains unread.
 */
async function decodeStreamed(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, framing: Exclude<Framing, { kind: 'whole' }>,
  ledger: Ledger, streamer: AnswerStreamer, shm: SharedMemoryHold): Promise<Decoded> {
  const external = p.cutThrough && framing.bodyBytes > 0;
  let upload: Upload | undefined;
  const failed = new BodyStop();
  let frame = guardedFramer(ctx, p, ledger, false);
  let open: OpenSink = (request: InferRequest, framed: FramedHead, slots: readonly Slot[]) => (upload = new Upload(framed, slots, p.dataPlane,
    () => callOptions(ctx, p.upstream.timeoutMs, streamer.receiverFor(request), sequenceKey(request)), ctx.req, failed.stop));
  if (p.sharedMemory !== undefined && external) [frame, open] = sharedMemorySink(p.sharedMemory, config, frame, open, shm, ledger);
  const options = {
    modelName: ctx.params[0]!, modelVersion: ctx.params[1] ?? '', config, bodyBytes: framing.bodyBytes, maxInputSizeBytes: p.limits.maxInputSizeBytes, external,
    headerBytes: framing.kind === 'raw' ? 0 : framing.headerBytes,
  };
  // decode starts when the request can be framed: at once for raw (its head is the URL's), once
  // the JSON header is in for the binary extension (its decoder records that). Cut through, it
  // ends at framing — the payload then goes upstream undecoded; else when the last byte is in.
  ledger.start('ingress_read');
  let decoder: RawDecoder | BinaryExtensionDecoder;
  if (framing.kind === 'raw') {
    ledger.start('decode');
    decoder = new RawDecoder(options, frame, open);
    if (external) ledger.end('decode');
  } else {
    decoder = new BinaryExtensionDecoder(options, frame, open, ledger);
  }
  let length;
  try {
    length = await streamBodyUntil(ctx.req, framing.bodyBytes, (c) => decoder.push(c), failed) ?? 0;
  } catch (err) {
    upload?.abort();
    throw err;
  }
  ledger.end('ingress_read');
  if (!external) ledger.end('decode');
  ledger.bytes('ingress_read', length, length);
  const request = decoder.end();
  if (shm.upload !== undefined) return recorded(ctx.record, { request, encoding: framing.kind, sent: shm.upload.finish(), sharedMemory: true }, ledger);
  ledger.copied('decode', upload!.copied);
  return recorded(ctx.record, { request, encoding: framing.kind, sent: upload!.finish() }, ledger);
}

/**
 * A multipart/form-data upload (decode/multipart.ts): read as it arrives, each part checked
 * against the limits before it is kept; once the body ended, the request is framed and the parts
 * copied into it. Nothing goes upstream before the whole body was found good.
 */
export async function decodeMultipart(ctx: RequestContext, p: Pick<InferPlan, 'limits' | 'upstream'>, config: inference.ModelConfig, ledger: Ledger,
  o: { readonly aliases?: readonly string[]; readonly fields?: MultipartFields; readonly binaryDataOutput: boolean }): Promise<Decoded> {
  if (requestEncoding(ctx.req) !== undefined) {
    throw new GatewayError('GW_ERR_DECODE_MULTIPART_INVALID', 'a multipart/form-data body cannot be compressed (Content-Encoding): send it as is');
  }
  const declared = declaredLength(ctx.req, p.limits);
  if (declared === undefined) {
    throw new GatewayError('GW_ERR_DECODE_MULTIPART_INVALID', 'a multipart/form-data body must declare its Content-Length (a chunked one is not read)');
  }
  const decoder = new MultipartDecoder(ctx.req.headers, {
    config, modelName: ctx.params[0]!, modelVersion: ctx.params[1] ?? '', maxInputSizeBytes: p.limits.maxInputSizeBytes,
    maxParts: p.limits.multipartMaxParts, aliases: o.aliases, fields: o.fields, binaryDataOutput: o.binaryDataOutput,
  });
  ledger.start('ingress_read');
  const length = await streamBody(ctx.req, declared, (c) => decoder.push(c));
  const m = await decoder.end();
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', length, length);
  ledger.start('decode');
  const framed = guardedFramer(ctx, p, ledger, true)(m.request, []);
  fillMultipart(framed, m);
  ledger.copied('decode', m.bytes);
  ledger.end('decode');
  return recorded(ctx.record, { request: m.request, encoding: 'multipart', sent: { message: framed.message, messageBytes: framed.message.length } }, ledger);
}
