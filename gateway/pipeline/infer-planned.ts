// The V2 infer route's planned requests (docs/architecture.md, "Planned requests"): a raw,
// binary-extension or JSON body of at most PLANNED_BODY_BYTES, gathered by the HTTP/1.1 fast
// path as it is read (ingress/server.ts), is served here once whole, without node:http's objects,
// a RequestContext or an async chain of steps. What a request of the route needs that start-up or
// the model's first request can decide is decided then (the route's plan below, the model's
// cached configuration); per request this runs the same steps as the route's handler, with the
// same decoders, framing, call, hops and answer:
//   decode (the push decoders fed the body's pieces, the payload going upstream by reference as cut
//   through; or a JSON body decoded whole, its base64 staged) → ModelInfer (the data plane's call) → encode
//   (infer-answer.ts encodeAnswer) → the answer written in one go by the server (ingress/server.ts).
// A request whose form takes anything else (a short JSON body a decode thread would take, an
// upload, compression either way, an event stream, a model not cached yet, a decoupled
// model, a model whose answers may be large) is the handler's: takes() says so before anything
// happens, and the fast path then serves it as any other request.
import { Back, type KeptRequest, type LaneFailure } from '../ingress/http1/lane';
import type { LaneOutcome } from '../ingress/http1/fast';
import { GrpcStatus } from '../grpc/status';
import { upstreamError } from '../upstream/status';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { BinaryExtensionDecoder } from '../decode/binary-extension';
import { FramedHeads, type KnownHead } from '../decode/framed-heads';
import { STAGE_MIN_CHARS } from '../decode/base64/base64-staging';
import { type StreamOptions } from '../decode/binary-extension';
import { chooseFraming, type Framing, headerLength, mediaType, uploadKind } from '../decode/framing';
import { type DecodedBody, decodeWholeBody, type WholeBodyOptions } from '../decode/v2-body';
import type { StagedBody } from '../decode/base64/base64-staging';
import { RawDecoder, type RawOptions } from '../decode/raw-binary';
import { responseEncoding } from '../egress/compress';
import type { Cut, FramedHead, OpenSink } from '../infer/framed-message';
import { type JsonAnswerHead, printedByLane } from '../encode/json-answer-head';
import { datatypeOfConfigEnum, elementSize } from '../infer/datatype';
import { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import type { PlannedRequest, PlannedRoute } from '../ingress/router';
import { NOT_POOLED } from '../buffers/pool';
import { releaseWhole } from '../buffers/release';
import { serverTiming } from '../telemetry/server-timing';
import type { GatewayError } from '../errors';
import type { RouteDecision } from '../upstream/backends/pools';
import { callAnswered, callFailed } from '../upstream/infer/answer-hops';
import { Gathered, Pieces } from '../upstream/infer/cut-through';
import type { TimedResponseMessage, WholeCallee } from '../upstream/infer/data-plane';
import { batchSize, callError, encodeAnswer, encodeKnownAnswer } from './infer-answer';
import { type Decoded, type InferPlan, modelConfig, recorded } from './infer-decode';
import type { inference } from '../../proto/services';
import { framer, headerValue, releaseStaged, sequenceKey, staging, unstage } from './steps';
import { nowNs } from '../infer/clock';

/** Framing's buffers for a planned request: not the pool's (its call may read them after the request settled). */
export const UNPOOLED = { buffers: NOT_POOLED };

/**
 * The route's planned requests, when its plan allows them: V2's own route (no dialect), requests
 * cut through to a data plane that can (`cutThrough`) and sends whole messages (`callWhole`), no
 * shared-memory regions.
 */
export function plannedInfer(p: InferPlan): PlannedRoute | undefined {
  if (p.dialect !== undefined || !p.cutThrough || p.sharedMemory !== undefined || p.dataPlane.callWhole === undefined) return undefined;
  const heads = new FramedHeads();
  return {
    takes: (params, headers, bodyBytes) => takes(p, params, headers, bodyBytes),
    largeBodies: (params) => {
      const config = p.configs.peek(params[0]!, params[1] ?? '');
      return config !== undefined && printedOutputs(config);
    },
    serve: (x, body) => serve(p, x, body, heads),
  };
}

/**
 * What every planned request is (V1 predict's too, v1-planned.ts): uncompressed both ways, no
 * grpc-timeout (a planned request asks for no deadline of its own), within limits.maxBodyBytes (a
 * larger body is the handler's to refuse: ingress/body.ts declaredLength). The planned bodies'
 * own bound is ingress/server.ts's (plannedBodyBytes).
 */
export function plainRequest(maxBodyBytes: number, headers: IncomingHttpHeaders, bodyBytes: number): boolean {
  if (headers['content-encoding'] !== undefined || headers['grpc-timeout'] !== undefined) return false;
  if (bodyBytes > maxBodyBytes) return false;
  return headers['accept-encoding'] === undefined || responseEncoding({ headers }) === undefined;
}

/**
 * Whether the request is planned: a plain request (plainRequest), a cached model that is not
 * decoupled and answers small; raw, binary extension, or JSON (not an upload).
 */
function takes(p: InferPlan, params: readonly string[], headers: IncomingHttpHeaders, bodyBytes: number): boolean {
  const ihcl = headers['inference-header-content-length'];
  if (Array.isArray(ihcl) || !plainRequest(p.limits.maxBodyBytes, headers, bodyBytes)) return false;
  if (ihcl === undefined) {
    const type = mediaType(headers['content-type']);
    // A short JSON body is decoded whole on this thread, a longer one staged (decodeStaged): one
    // that a decode thread would take unstaged stays the handler's.
    if (bodyBytes < STAGE_MIN_CHARS && p.decodePool?.wants(bodyBytes, undefined) === true) return false;
    if (type === 'multipart/form-data' || uploadKind(type) !== undefined) return false;
  }
  const config = p.configs.peek(params[0]!, params[1] ?? '');
  return config !== undefined && config.model_transaction_policy?.decoupled !== true && smallAnswers(config);
}

/**
 * The output bytes a planned request's answer may have: it is kept whole until written. A model
 * whose answers may be larger keeps its handler, which streams binary answers from Triton's frames
 * (binary-streamer.ts) within the client's pace.
 */
const PLANNED_ANSWER_BYTES = 64 * 1024;
const SMALL_ANSWERS = new WeakMap<inference.ModelConfig, boolean>();

const PRINTED_OUTPUTS = new WeakMap<inference.ModelConfig, boolean>();

/** Whether every output of the model is of a type the compiled lane prints (largeBodies): once a configuration. */
function printedOutputs(config: inference.ModelConfig): boolean {
  let printed = PRINTED_OUTPUTS.get(config);
  if (printed === undefined) PRINTED_OUTPUTS.set(config, printed = (config.output ?? []).every((o) => printedByLane(datatypeOfConfigEnum(o.data_type ?? 0))));
  return printed;
}

/** Whether every answer of the model fits PLANNED_ANSWER_BYTES: fixed-size outputs, by its configuration. */
function smallAnswers(config: inference.ModelConfig): boolean {
  let small = SMALL_ANSWERS.get(config);
  if (small === undefined) SMALL_ANSWERS.set(config, small = outputBytes(config) <= PLANNED_ANSWER_BYTES);
  return small;
}

/** The most output bytes an answer of the model has; Infinity when its configuration does not bound them. */
function outputBytes(config: inference.ModelConfig): number {
  const outputs = config.output ?? [];
  if (outputs.length === 0) return Infinity;
  const batch = Math.max(1, config.max_batch_size ?? 0);
  let total = 0;
  for (const o of outputs) {
    const d = datatypeOfConfigEnum(o.data_type ?? 0);
    if (d === undefined || d === 'BYTES') return Infinity;
    let n = elementSize(d) * batch;
    for (const dim of o.dims ?? []) {
      const v = Number(dim);
      if (v < 0) return Infinity;
      n *= v;
    }
    total += n;
  }
  return total;
}

/** A planned request decoded: its message as pieces in wire order (the payload's by reference). */
interface Planned {
  readonly request: InferRequest;
  readonly encoding: Decoded['encoding'];
  readonly pieces: readonly Buffer[];
  readonly sent: { readonly messageBytes: number };
  /** Staging buffers among the pieces (decodeStaged): kept warm for another body once Triton has answered. */
  readonly staged?: readonly Buffer[];
  /** The kept head the request was taken from (decode/framed-heads.ts): its answer's head is kept too. */
  readonly known?: KnownHead | undefined;
  /** A JSON body of one base64 string, as the compiled lane may keep it (keptBase64). */
  readonly base64?: KeptRequest | undefined;
}

/** Never aborted: a configuration or metadata read again for a planned request (its control call has a deadline). */
export const NEVER = new AbortController().signal;

/** Serves a planned request, its body whole: decoded and sent at once, answered when Triton has. */
function serve(p: InferPlan, x: PlannedRequest, body: readonly Buffer[], heads: FramedHeads): void {
  const config = p.configs.peek(x.params[0]!, x.params[1] ?? '');
  if (config !== undefined) {
    serveWith(p, x, body, heads, config);
    return;
  }
  // Forgotten while the body arrived (a NOT_FOUND, a repository load or unload): read again, and
  // refused if decoupled now, as the handler reads it (infer-decode.ts lookupModel).
  modelConfig(p, x.params[0]!, x.params[1] ?? '', NEVER, false).then((c) => serveWith(p, x, body, heads, c), (err: unknown) => x.fail(err));
}

function serveWith(p: InferPlan, x: PlannedRequest, body: readonly Buffer[], heads: FramedHeads, config: inference.ModelConfig): void {
  const ledger = new Ledger();
  const { record, params } = x;
  record.ledger = ledger;
  record.version = params[1] ?? '';
  let d: Planned | Promise<Planned>;
  try {
    const ihcl = x.req.headers['inference-header-content-length'];
    const bodyBytes = x.record.declaredBytes;
    const modelName = params[0]!;
    const modelVersion = params[1] ?? '';
    const { maxInputSizeBytes } = p.limits;
    const known = ihcl === undefined ? undefined : knownHead(body[0]!, bodyBytes, headerLength(ihcl, bodyBytes)!, config, modelName, modelVersion,
      maxInputSizeBytes, heads);
    if (known !== undefined) {
      d = decodeKnown(body, bodyBytes, known, ledger);
    } else {
      const framing = chooseFraming(ihcl, bodyBytes, false, maxInputSizeBytes);
      // One options object for every decoder: headerBytes is the binary extension's alone.
      const options = {
        modelName, modelVersion, config, bodyBytes, maxInputSizeBytes, external: true, headerlessBinary: p.binary.headerless,
        headerBytes: framing.kind === 'binary' ? framing.headerBytes : 0, heads,
      };
      if (framing.kind !== 'whole') d = decodeStreamed(body, bodyBytes, framing, options, ledger);
      else if (ihcl === undefined && bodyBytes >= STAGE_MIN_CHARS) d = decodeStaged(p, x, body, bodyBytes, options, ledger);
      else d = decodeWhole(body, bodyBytes, ihcl, options, ledger);
    }
  } catch (err) {
    x.fail(err);
    return;
  }
  if (d instanceof Promise) callOnceDecoded(p, x, d, ledger, body);
  else call(p, x, d, ledger, body);
}

/**
 * call() once a decode thread has decoded the body. Its own function: closures in serve() would
 * make every planned request allocate the context they share.
 */
function callOnceDecoded(p: InferPlan, x: PlannedRequest, d: Promise<Planned>, ledger: Ledger, body: readonly Buffer[]): void {
  d.then((d) => call(p, x, d, ledger, body), (err: unknown) => x.fail(err));
}

/** Starts the call of a decoded request. */
function call(p: InferPlan, x: PlannedRequest, d: Planned, ledger: Ledger, body: readonly Buffer[]): void {
  const { record } = x;
  // A body of several reads was read from its head on.
  if (body.length > 1) ledger.startedAt('ingress_read', record.startNs);
  recorded(record, d, ledger);
  record.inferences = batchSize(d.request);
  const callee = new PlannedCall(p, x, d, ledger, body);
  if (x.outcome !== undefined) settled(x.outcome, callee);
  else x.call = p.dataPlane.callWhole!(d.pieces, callee);
}

/**
 * A request the compiled lane gave back with its call's outcome (ingress/http1/lane.ts): answered
 * or failed as that call was, not sent again. The failures are the ones the data plane's call
 * gives for the same events (whole-call.ts, upstream/status.ts).
 */
export function settled(outcome: LaneOutcome, callee: WholeCallee): void {
  if (outcome.what === Back.ANSWER) {
    const message = outcome.detail as Buffer;
    const now = nowNs();
    callee.answered({ chunks: [message.subarray(5)], byteLength: message.length - 5, timing: { firstSentNs: now, sentNs: now, firstByteNs: now, endNs: now } },
      false);
    return;
  }
  const f = outcome.detail as LaneFailure;
  callee.failed(f.deadline ? upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false)
    : f.lost ? upstreamError(GrpcStatus.UNAVAILABLE, 'the connection to the backend closed', true)
      : f.grpcStatus < 0 ? upstreamError(GrpcStatus.INTERNAL, `the stream was reset (HTTP/2 error ${f.rst})`, true)
        : upstreamError(f.grpcStatus, f.message, false));
}

/**
 * The kept head (decode/framed-heads.ts) of a body of `bodyBytes` whose Inference-Header-Content-Length
 * reads `headerBytes`: a binary-extension header whole in the first read, or a raw body (0: its
 * head kept under an empty header). Undefined when it was not kept, or is not to be taken: past a
 * limit (the decoders refuse it, kept head or not), or not one of the two forms.
 */
function knownHead(first: Buffer, bodyBytes: number, headerBytes: number, config: object, modelName: string, modelVersion: string,
  maxInputSizeBytes: number, heads: FramedHeads): KnownHead | undefined {
  if (headerBytes >= bodyBytes || first.length < headerBytes || bodyBytes > maxInputSizeBytes) return undefined;
  return heads.find(config, modelName, modelVersion, first, headerBytes, bodyBytes);
}

/**
 * A body whose head was kept, taken as framed before and its payload gathered by reference with
 * no decoder at all: the hops and counts of decodeStreamed taking the same kept head.
 */
function decodeKnown(body: readonly Buffer[], bodyBytes: number, known: KnownHead, ledger: Ledger): Planned {
  ledger.start('ingress_read');
  ledger.start('decode');
  ledger.copied('decode', known.copied);
  ledger.end('decode');
  const first = body[0]!;
  const { wire, framed } = known;
  let pieces: Buffer[];
  if (body.length === 1 && wire !== undefined) {
    // Read in one piece: the kept pieces of the head, and a view of the payload at each cut.
    pieces = wire.pieces.slice();
    let at = known.bytes.length;
    for (let i = 0; i < wire.payloadAt.length; i++) {
      const n = framed.cuts[i]!.length;
      pieces[wire.payloadAt[i]!] = at === 0 && n === first.length ? first : first.subarray(at, at + n);
      at += n;
    }
  } else {
    const message = new Pieces();
    const gathered = new Gathered(message, framed.message, framed.cuts);
    gathered.write(first, known.bytes.length);
    for (let i = 1; i < body.length; i++) gathered.write(body[i]!);
    pieces = message.list;
  }
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', bodyBytes, bodyBytes);
  return { request: known.request, pieces, sent: known.sent, encoding: known.bytes.length === 0 ? 'raw' : 'binary', known };
}

/** The push decoders of the handler's streamed path, fed the body's pieces: the payload gathered by reference. */
function decodeStreamed(body: readonly Buffer[], bodyBytes: number, framing: Exclude<Framing, { kind: 'whole' }>, options: StreamOptions & RawOptions,
  ledger: Ledger): Planned {
  let gathered: Gathered | undefined;
  const open: OpenSink = (_r: InferRequest, framed: FramedHead) => (gathered = new Gathered(new Pieces(), framed.message, framed.cuts));
  const frame = framer(UNPOOLED, ledger, false);
  ledger.start('ingress_read');
  let decoder: RawDecoder | BinaryExtensionDecoder;
  if (framing.kind === 'raw') {
    ledger.start('decode');
    decoder = new RawDecoder(options, frame, open);
    ledger.end('decode');
  } else {
    decoder = new BinaryExtensionDecoder(options, frame, open, ledger);
  }
  for (let i = 0; i < body.length; i++) decoder.push(body[i]!);
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', bodyBytes, bodyBytes);
  const request = decoder.end();
  ledger.copied('decode', 0);
  const message = gathered!.message;
  return { request, pieces: message.list, sent: message, encoding: framing.kind, known: decoder.known };
}

/** A JSON body, as the handler decodes one it read whole (infer-decode.ts decodeWhole, with nothing staged). */
function decodeWhole(body: readonly Buffer[], bodyBytes: number, ihcl: string | string[] | undefined, options: WholeBodyOptions,
  ledger: Ledger): Planned {
  ledger.start('ingress_read');
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', bodyBytes, bodyBytes);
  ledger.start('decode');
  const d = decodeWholeBody(body, bodyBytes, ihcl, options, framer(UNPOOLED, ledger, false), ledger);
  ledger.end('decode');
  return { request: d.request, pieces: [d.message], sent: { messageBytes: d.message.length }, encoding: d.encoding };
}

/** A head framed with cuts and the staged payloads cut out of it: a whole call's pieces in wire order, by reference. */
export function gatherCuts(head: Buffer, cuts: readonly Cut[], payloads: readonly Buffer[]): Pieces {
  const message = new Pieces();
  const gathered = new Gathered(message, head, cuts);
  for (let i = 0; i < payloads.length; i++) gathered.write(payloads[i]!);
  return message;
}

/**
 * A JSON body long enough to hold a staged string: its base64 strings decoded by staging
 * (decode/base64/base64-staging.ts) as the handler's are (infer-decode.ts decodeWhole), each staged
 * payload then cut out of the message and sent from its staging buffer by reference — the call is
 * sent whole, so a payload of any size costs no copy into the message. A body staging cannot
 * place is read whole, as sent: on a decode thread where limits.decodeThreads takes it, else here.
 */
function decodeStaged(p: InferPlan, x: PlannedRequest, body: readonly Buffer[], bodyBytes: number, options: WholeBodyOptions,
  ledger: Ledger): Planned | Promise<Planned> {
  const s = staging(bodyBytes, p.limits.maxInputSizeBytes);
  ledger.start('ingress_read');
  for (let i = 0; i < body.length; i++) s.push(body[i]!);
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', bodyBytes, bodyBytes);
  ledger.start('decode');
  const frame = framer(UNPOOLED, ledger, false);
  // Every staged payload cut out: their buffers go back once Triton has answered (PlannedCall).
  const d = unstage(s, options, frame, ledger, 0);
  if (d !== undefined) {
    ledger.end('decode');
    const message = gatherCuts(d.message, d.cuts, d.payloads);
    return { request: d.request, encoding: d.encoding, pieces: message.list, sent: message, staged: d.payloads,
      base64: x.keeping ? keptBase64(d.text, d.message, d.cuts, d.payloads, bodyBytes) : undefined };
  }
  const whole = (d: DecodedBody): Planned => {
    ledger.end('decode');
    return { request: d.request, encoding: d.encoding, pieces: [d.message], sent: { messageBytes: d.message.length } };
  };
  const chunks = s.original();
  if (p.decodePool?.wants(bodyBytes, undefined) === true) {
    return p.decodePool.decode({ length: bodyBytes, chunks }, undefined, options, frame, ledger).then(whole);
  }
  return whole(decodeWholeBody(chunks, bodyBytes, undefined, options, frame, ledger));
}

/**
 * A JSON body (V2's, or V1's: v1-planned.ts) whose one staged string was its one payload, as the
 * compiled lane keeps it: the text before the string (to its opening quote) as the body's header,
 * the text after it (from its closing quote; the placeholder staging put in its place left out)
 * as its suffix, and the message with the decoded bytes at its one cut. Every body of the same
 * length with the same text around a string of clean base64 that decodes to as many bytes reads
 * to the same request but for those bytes (the string's characters are all it holds).
 */
export function keptBase64(text: StagedBody | undefined, message: Buffer, cuts: readonly Cut[], payloads: readonly Buffer[],
  bodyBytes: number): KeptRequest | undefined {
  if (text === undefined || text.staged.size !== 1 || cuts.length !== 1 || payloads.length !== 1) return undefined;
  const [quote, bytes] = text.staged.entries().next().value!;
  const placeholder = Buffer.byteLength(text.placeholders[0]!, 'latin1');
  if (bytes !== payloads[0] || cuts[0]!.length !== bytes.length || text.header[quote] !== 0x22 || text.header.length - placeholder >= bodyBytes) {
    return undefined;
  }
  return {
    bytes: text.header.subarray(0, quote + 1), bodyBytes, framed: { message, cuts },
    base64: { suffix: text.header.subarray(quote + 1 + placeholder), decodedBytes: bytes.length },
  };
}

/**
 * A planned request's call, from its caller's side (whole-call.ts WholeCallee), V2's and V1's
 * (v1-planned.ts) alike: its deadline, metadata and routing from the request. Each kind answers
 * (`answered`, `failed`) in its own form; `release` gives the body's reads and the staging buffers
 * back after an answer.
 */
export abstract class PlannedCallee implements WholeCallee {
  readonly deadline: number;
  readonly affinity: string | undefined;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly startNs = nowNs();

  constructor(timeoutMs: number, private readonly serverTiming: boolean, protected readonly x: PlannedRequest, request: InferRequest,
    protected readonly ledger: Ledger, private readonly sent: { readonly messageBytes: number }, private readonly body: readonly Buffer[],
    private readonly staged: readonly Buffer[] | undefined) {
    // upstream.timeoutMs from now: a planned request asks for no deadline of its own (takes()).
    this.deadline = Date.now() + timeoutMs;
    this.affinity = sequenceKey(request);
    this.modelName = x.params[0]!;
    this.modelVersion = x.record.version ?? '';
    ledger.startedAt('upstream_send', this.startNs);
  }

  get metadata(): Readonly<Record<string, string>> {
    return this.x.upstreamHeaders;
  }

  header(name: string): string | undefined {
    return headerValue(this.x.req.headers[name]);
  }

  routed(pool: string, decision: RouteDecision, mirror: string | undefined): void {
    const { record } = this.x;
    record.pool = pool;
    record.routeDecision = decision;
    if (mirror !== undefined) record.mirror = mirror;
  }

  retried(): void {
    const { record } = this.x;
    record.retries = (record.retries ?? 0) + 1;
  }

  /** The answer in the request's form: its head's fields (shared ones are copied before any is added) and its body. */
  protected abstract encode(answer: TimedResponseMessage): { readonly headers: OutgoingHttpHeaders; readonly parts: readonly Buffer[] };

  /** A failed call's staging buffers are dropped, not kept: some of their bytes may still be queued on its socket. */
  abstract failed(err: GatewayError): void;

  answered(answer: TimedResponseMessage, out: boolean): void {
    const { x, ledger } = this;
    const { record } = x;
    callAnswered(answer, this.startNs, this.sent.messageBytes, ledger, record);
    try {
      const encoded = this.encode(answer);
      let { headers } = encoded;
      if (this.serverTiming) headers = { ...headers, 'Server-Timing': serverTiming(ledger, record.startNs, nowNs()) };
      ledger.start('egress_write');
      x.answer(headers, encoded.parts);
    } catch (err) {
      x.fail(err);
    }
    // The message left for the socket from its one attempt (`out`) and no attempt will send it
    // again: the body's reads are freed now rather than at the next full collection
    // (upstream/infer/upload.ts does the same for a handler's chunks), and the staging buffers go
    // back for another body. A read shared with the head or a next request is the collector's; so
    // is every buffer of a retried call, which an earlier attempt's queued writes may still hold
    // (a freed page is detached and read into again).
    if (!out) return;
    const { body, staged } = this;
    if (body.length > 1) for (let i = 0; i < body.length; i++) releaseWhole(body[i]!);
    if (staged !== undefined) for (let i = 0; i < staged.length; i++) releaseStaged(staged[i]!);
  }
}

/** V2's planned call: its answer encoded as the handler encodes it (infer-answer.ts). */
class PlannedCall extends PlannedCallee {
  constructor(private readonly p: InferPlan, x: PlannedRequest, private readonly d: Planned, ledger: Ledger, body: readonly Buffer[]) {
    super(p.upstream.timeoutMs, p.telemetry.serverTiming, x, d.request, ledger, d.sent, body, d.staged);
  }

  /** The headers of a known answer are shared (infer-answer.ts encodeKnownAnswer). */
  protected encode(answer: TimedResponseMessage): { readonly headers: OutgoingHttpHeaders; readonly parts: readonly Buffer[] } {
    const { known, base64 } = this.d;
    if (base64 !== undefined) {
      // A JSON body of one base64 string: the compiled lane may keep it with its JSON answer.
      const json: { head?: JsonAnswerHead } = {};
      const encoded = encodeAnswer(this.x.record, undefined, this.d.request, answer, this.ledger, undefined, undefined, json);
      if (json.head !== undefined) this.x.kept(base64, json.head);
      return encoded;
    }
    if (known === undefined) return encodeAnswer(this.x.record, undefined, this.d.request, answer, this.ledger);
    const encoded = encodeKnownAnswer(this.x.record, this.d.request, answer, this.ledger, known);
    // Its request and its answer from kept heads: the compiled lane may keep them.
    if (known.answer !== undefined && encoded.headers === known.answer.headers) this.x.kept(known, known.answer);
    return encoded;
  }

  failed(err: GatewayError): void {
    const { x } = this;
    callFailed(err, this.startNs, x.record);
    x.fail(callError(this.p, x.params[0]!, this.d, err));
  }
}
