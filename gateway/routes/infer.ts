// POST /v2/models/{m}[/versions/{v}]/infer, in Triton's order (docs/architecture.md#json-bodies):
//   lookupModel → chooseFraming → decode (as the body arrives, or whole) → call Triton → answer
// Unknown models are 404 whatever the body; bodies of known length are push-decoded, and cut
// through to Triton where the data plane can (docs/cut-through.md); binary answers stream back from
// Triton's DATA frames when nothing needs the whole answer.
import type { OutgoingHttpHeaders } from 'node:http';
import type { Config } from '../config/schema';
import { BinaryExtensionDecoder } from '../decode/binary-extension';
import { chooseFraming, type Framing } from '../decode/framing';
import { RawDecoder, rawInputMessage } from '../decode/raw-binary';
import { refuseReservedRegions } from '../decode/control/shared-memory';
import { type BodyEncoding, decodeStagedBody, decodeWholeBody } from '../decode/v2-body';
import { responseEncoding } from '../egress/compress';
import { BinaryStreamer, mayStreamBinary, type StreamStart } from '../egress/stream-binary';
import { encodeInferResponse, outputKind } from '../encode/infer-response';
import { GatewayError } from '../errors';
import type { Frame, FramedHead, OpenSink, Slot } from '../infer/framed-message';
import { type Hop, HOPS, type Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import { declaredLength, type RequestEncoding, requestEncoding, streamBodyUntil } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { serverTiming } from '../telemetry/server-timing';
import type { DataPlane, Receiver, ResponseMessage } from '../upstream/infer/data-plane';
import { awaitAnswer, upstreamHops } from '../upstream/infer/answer-hops';
import { readInferResponse } from '../upstream/infer/answer-reader';
import type { ModelConfigs } from '../upstream/control/model-configs';
import { inferCallError } from '../upstream/infer/status';
import type { SharedMemoryPool } from '../upstream/shared-memory/region-pool';
import { SharedMemoryUpload } from '../upstream/shared-memory/upload';
import { type Sent, Upload } from '../upstream/infer/upload';
import type { inference } from '../../proto/services';
import { DecodePool } from '../decode/threads/pool';
import { callOptions, evictOnNotFound, framer, readWholeBody, sequenceKey, stagingFor, startLedger, writeAnswer } from '../pipeline/steps';

export interface InferDeps {
  readonly dataPlane: DataPlane;
  readonly configs: ModelConfigs;
  readonly upstream: Config['upstream'];
  readonly limits: Config['limits'];
  readonly telemetry: Config['telemetry'];
  readonly binary: Config['binary'];
  /** upstream.sharedMemory: the pool of regions binary and raw tensors go through. */
  readonly sharedMemory?: SharedMemoryPool | undefined;
  /** limits.decodeThreads: large bodies read whole are decoded there. */
  readonly decodePool?: DecodePool | undefined;
}

/** The deps plus what is decided once, when the route is built. */
interface InferPlan extends InferDeps {
  /** upstream.cutThrough on a data plane that can write a call piece by piece (h2). */
  readonly cutThrough: boolean;
}

/** The request's shared-memory sink, when it got a region: released however the request ends. */
interface SharedMemoryHold {
  upload: SharedMemoryUpload | undefined;
}

export function inferRoutes(deps: InferDeps): Route[] {
  const plan: InferPlan = { ...deps, cutThrough: deps.upstream.cutThrough && deps.dataPlane.startModelInfer !== undefined };
  return [{
    name: 'infer',
    category: 'inference',
    model: { param: 0 },
    pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?\/infer$/,
    methods: { POST: (ctx) => infer(ctx, plan) },
  }];
}

/** The request after decoding: its message went out as the body arrived, or waits whole in `sent`. */
interface Decoded {
  readonly request: InferRequest;
  readonly encoding: BodyEncoding;
  readonly sent: Sent;
  /** Its tensors went through a shared-memory region. */
  readonly sharedMemory?: boolean;
}

async function infer(ctx: RequestContext, p: InferPlan): Promise<void> {
  const ledger = startLedger(ctx, ctx.params[1] ?? '');
  const config = await lookupModel(ctx, p);
  const encoding = requestEncoding(ctx.req);
  const framing = chooseFraming(ctx.req.headers['inference-header-content-length'], declaredLength(ctx.req, p.limits), encoding !== undefined, p.limits.maxInputSizeBytes);
  const streamer = new AnswerStreamer(ctx, p, ledger);
  const shm: SharedMemoryHold = { upload: undefined };
  try {
    const decoded = framing.kind === 'whole'
      ? await decodeWhole(ctx, p, config, encoding, ledger)
      : await decodeStreamed(ctx, p, config, framing, ledger, streamer, shm);
    ctx.record.encoding = decoded.encoding;
    ledger.bytes('decode', ledger.hops.ingress_read.bytesOut, decoded.sent.messageBytes);
    const answer = await callTriton(ctx, p, decoded, ledger, streamer, shm.upload?.hasOutputs === true);
    // Triton has answered: it has read the inputs, the region may take the next request's —
    // unless it wrote outputs there, which the answer is written from first.
    if (shm.upload?.hasOutputs !== true) shm.upload?.release();
    if (streamer.streaming) await streamer.finish(answer);
    else await respond(ctx, p, decoded.request, answer, ledger, shm.upload);
  } finally {
    shm.upload?.release();
  }
}

/** The gateway's region prefix when upstream.sharedMemory is on (decode/control/shared-memory.ts). */
function reservedPrefix(p: InferPlan): string | undefined {
  return p.upstream.sharedMemory.enabled ? p.upstream.sharedMemory.prefix : undefined;
}

/**
 * pipeline/steps.ts framer, refusing a request that names one of the gateway's regions before its head is
 * framed (nothing taken from the pool) and its call opened (cut-through sends the head at once).
 */
function guardedFramer(ctx: RequestContext, p: InferPlan, ledger: Ledger, pooled: boolean): Frame {
  const frame = framer(ctx, ledger, pooled);
  const prefix = reservedPrefix(p);
  if (prefix === undefined) return frame;
  return (request, external) => {
    refuseReservedRegions(request, prefix);
    return frame(request, external);
  };
}

/** Triton looks the model up before it reads the body: an unknown model is 404, a decoupled one 501. */
async function lookupModel(ctx: RequestContext, p: InferPlan): Promise<inference.ModelConfig> {
  let config;
  try {
    config = await p.configs.get(ctx.params[0]!, ctx.params[1] ?? '', ctx.signal);
  } catch (err) {
    throw inferCallError(err);
  }
  if (config.model_transaction_policy?.decoupled === true) {
    throw new GatewayError('GW_ERR_MODEL_DECOUPLED', "HTTP end point doesn't support models with decoupled transaction policy");
  }
  return config;
}

/**
 * JSON, compressed and chunked bodies: read whole (inflated within the limits), then decoded. An
 * uncompressed JSON body of declared length has its long base64 strings decoded as it arrives.
 */
async function decodeWhole(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, encoding: RequestEncoding, ledger: Ledger): Promise<Decoded> {
  // A JSON body with a binary section (Inference-Header-Content-Length) is not staged.
  const staging = ctx.req.headers['inference-header-content-length'] === undefined ? stagingFor(ctx, p.limits, encoding) : undefined;
  const body = await readWholeBody(ctx, ledger, p.limits, encoding, staging === undefined ? undefined : (c) => staging.push(c));
  ledger.start('decode');
  const options = {
    modelName: ctx.params[0]!, modelVersion: ctx.params[1] ?? '', config, maxInputSizeBytes: p.limits.maxInputSizeBytes, headerlessBinary: p.binary.headerless,
  };
  const staged = staging?.end();
  if (staged !== undefined) ledger.allocated('decode', staged.allocated);
  const ihcl = ctx.req.headers['inference-header-content-length'];
  let d = staged === undefined ? undefined : decodeStagedBody(staged, options, guardedFramer(ctx, p, ledger, true), ledger);
  if (d === undefined && p.decodePool?.wants(body.length, ihcl) === true) {
    d = await p.decodePool.decode(body, ihcl, options, guardedFramer(ctx, p, ledger, true), ledger);
  }
  d ??= decodeWholeBody(body.chunks, body.length, ihcl, options, guardedFramer(ctx, p, ledger, true), ledger);
  ledger.end('decode');
  // A decode thread frames on its own (its message is not a pool buffer): checked here instead.
  refuseReservedRegions(d.request, reservedPrefix(p));
  return { request: d.request, encoding: d.encoding, sent: { message: d.message, messageBytes: d.message.length } };
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
  let failed!: () => void;
  const upstreamFailed = new Promise<void>((resolve) => { failed = resolve; });
  let frame = guardedFramer(ctx, p, ledger, false);
  let open: OpenSink = (request: InferRequest, framed: FramedHead, slots: readonly Slot[]) => (upload = new Upload(framed, slots, p.dataPlane,
    () => callOptions(ctx, p.upstream.timeoutMs, streamer.receiverFor(request), sequenceKey(request)), ctx.req, failed));
  if (p.sharedMemory !== undefined && external) [frame, open] = sharedMemorySink(p.sharedMemory, config, frame, open, shm, ledger);
  const options = {
    modelName: ctx.params[0]!, modelVersion: ctx.params[1] ?? '', config, bodyBytes: framing.bodyBytes, maxInputSizeBytes: p.limits.maxInputSizeBytes, external,
  };
  ledger.start('ingress_read');
  let decoder: RawDecoder | BinaryExtensionDecoder;
  if (framing.kind === 'raw') {
    ledger.start('decode');
    decoder = new RawDecoder(options, frame, open);
    if (external) ledger.end('decode');
  } else {
    decoder = new BinaryExtensionDecoder({ ...options, headerBytes: framing.headerBytes }, frame, open, ledger);
  }
  let length;
  try {
    length = await streamBodyUntil(ctx.req, framing.bodyBytes, (c) => decoder.push(c), upstreamFailed) ?? 0;
  } catch (err) {
    upload?.abort();
    throw err;
  }
  ledger.end('ingress_read');
  if (!external) ledger.end('decode');
  ledger.bytes('ingress_read', length, length);
  const request = decoder.end();
  if (shm.upload !== undefined) return { request, encoding: framing.kind, sent: shm.upload.finish(), sharedMemory: true };
  ledger.copied('decode', upload!.copied);
  return { request, encoding: framing.kind, sent: upload!.finish() };
}

/**
 * upstream.sharedMemory: the framer remembers which payload bytes it left out of the head, and
 * the sink writes them into a leased region when the request can use one (else the normal,
 * cut-through sink). The write into the region is the payload's one copy (docs/architecture.md#per-request-form); the
 * gRPC message then carries no tensor bytes (the ledger's sharedMemoryBytes).
 */
function sharedMemorySink(pool: SharedMemoryPool, config: inference.ModelConfig, frame: Frame, open: OpenSink, shm: SharedMemoryHold,
  ledger: Ledger): [Frame, OpenSink] {
  let external: readonly number[] = [];
  const remembering: Frame = (request, ext) => {
    external = ext;
    return frame(request, ext);
  };
  const opening: OpenSink = (request, framed, slots) => {
    const upload = SharedMemoryUpload.open(pool, request, framed, external, { config, binary: (name) => outputKind(request, name) === 'binary' });
    if (typeof upload === 'string') return open(request, framed, slots);
    shm.upload = upload;
    ledger.allocated('decode');
    ledger.copied('decode', upload.copiedHead);
    ledger.copied('decode', upload.sharedBytes);
    ledger.sharedMemoryBytes = upload.sharedBytes;
    return upload;
  };
  return [remembering, opening];
}

/**
 * Sends the message (unless it went out as the body arrived) and waits for Triton's answer; an
 * answer whose outputs are in a region is not streamed (its bytes are not in the DATA frames).
 */
async function callTriton(ctx: RequestContext, p: InferPlan, d: Decoded, ledger: Ledger, streamer: AnswerStreamer,
  outputsInRegion: boolean): Promise<ResponseMessage> {
  const { sent } = d;
  try {
    if ('response' in sent) return await awaitAnswer(sent.response, sent.startNs, sent.messageBytes, ledger, ctx.record);
    const startNs = process.hrtime.bigint();
    const options = callOptions(ctx, p.upstream.timeoutMs, outputsInRegion ? undefined : streamer.receiverFor(d.request), sequenceKey(d.request));
    return await awaitAnswer(p.dataPlane.modelInfer(sent.message, options), startNs, sent.messageBytes, ledger, ctx.record);
  } catch (err) {
    if (d.sharedMemory) sharedMemoryLost(p.sharedMemory!, err);
    throw inferCallError(evictOnNotFound(err, () => p.configs.evict(ctx.params[0]!)), d.encoding === 'raw' ? (m) => rawInputMessage(m, d.request.inputs[0]!.name) : undefined);
  }
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
async function respond(ctx: RequestContext, p: InferPlan, request: InferRequest, answer: ResponseMessage, ledger: Ledger,
  shm?: SharedMemoryUpload): Promise<void> {
  ledger.start('encode');
  let response = readInferResponse(answer.chunks);
  let fromRegion = 0;
  if (shm?.hasOutputs === true) {
    response = shm.withOutputs(response, ctx.buffers.acquire);
    fromRegion = shm.outputBytes;
  }
  const encoded = encodeInferResponse(response, request);
  ledger.end('encode');
  ledger.allocated('encode');
  ledger.copied('encode', fromRegion);
  ledger.copied('encode', encoded.copied);
  ledger.bytes('encode', answer.byteLength, encoded.header.length + encoded.binaryLength);
  const binary = encoded.binaryLength > 0;
  ctx.record.encodingOut = binary ? 'binary' : 'json';
  const headers: OutgoingHttpHeaders = binary
    ? { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': encoded.header.length }
    : { 'Content-Type': 'application/json' };
  await writeAnswer(ctx, ledger, headers, [encoded.header, ...encoded.binary], p.telemetry.serverTiming);
}

/**
 * Streams a binary answer from Triton's DATA frames (egress/stream-binary.ts) when the answer can
 * be all binary, the data plane hands frames over (cut-through on) and nothing needs the whole
 * answer (no response compression). Otherwise it makes no receiver and the answer is encoded whole.
 */
class AnswerStreamer {
  #streamer: BinaryStreamer | undefined;
  #start: StreamStart | undefined;
  /** Server-Timing on: the hops the head named. */
  #inHead: Set<Hop> | undefined;
  readonly #enabled: boolean;

  constructor(private readonly ctx: RequestContext, private readonly p: InferPlan, private readonly ledger: Ledger) {
    this.#enabled = p.cutThrough && responseEncoding(ctx.req) === undefined;
  }

  receiverFor(request: InferRequest): Receiver | undefined {
    if (!this.#enabled || !mayStreamBinary(request)) return undefined;
    return this.#streamer = new BinaryStreamer(this.ctx.res, request, (start) => this.#headers(start));
  }

  get streaming(): boolean {
    return this.#streamer?.streaming === true;
  }

  /**
   * After the call succeeded: records encode and egress_write, then ends the answer (telemetry
   * reads the ledger when the response finishes, so it is complete before). The hops that ended
   * after the head — receiving, writing — go in a Server-Timing trailer: HTTP/2 sends it (a
   * trailing HEADERS frame); Node drops it on an HTTP/1.1 answer of known length (no chunked
   * encoding to carry it), where the access log alone has them.
   */
  finish(answer: ResponseMessage): Promise<void> {
    const { ledger } = this;
    const sent = this.#start!.headerBytes + this.#start!.binaryBytes;
    ledger.bytes('encode', answer.byteLength, sent);
    ledger.bytes('egress_write', sent, sent);
    ledger.end('egress_write');
    if (this.#inHead !== undefined) {
      this.ctx.res.addTrailers({ 'Server-Timing': serverTiming(ledger, this.ctx.record.startNs, process.hrtime.bigint(), this.#inHead) });
    }
    return this.#streamer!.finish();
  }

  /** The answer's headers, when its JSON header is ready: encode is done, egress_write starts. */
  #headers(start: StreamStart): OutgoingHttpHeaders {
    this.#start = start;
    const { ledger, ctx } = this;
    const now = process.hrtime.bigint();
    upstreamHops(ledger, ledger.hops.upstream_send.startNs || now, now, start.timing);
    ledger.start('encode');
    ledger.end('encode');
    ledger.start('egress_write');
    ctx.record.encodingOut = 'binary';
    const headers: OutgoingHttpHeaders = { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': start.headerBytes };
    if (this.p.telemetry.serverTiming) {
      headers['Server-Timing'] = serverTiming(ledger, ctx.record.startNs, process.hrtime.bigint());
      this.#inHead = new Set(HOPS.filter((h) => ledger.hops[h].endNs !== 0n));
    }
    return headers;
  }
}
