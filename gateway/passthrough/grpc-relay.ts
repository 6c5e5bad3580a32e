// gRPC pass-through, the client's side: one client call becomes one upstream call, which
// upstream/call/relay.ts picks a backend for, sends, retries and mirrors; this side reads the
// client's request as it passes and answers the client. The frames go through by reference: each
// DATA chunk the client sent is written upstream as the same Buffer, and back; no message byte is
// copied but a request's model name and sequence parameter. The request's prefixes and fields are
// read as they pass (grpc/envelope.ts, grpc/fields.ts): a request message declaring more than the
// byte budget is refused before any of it is forwarded.
//
// Back-pressure both ways: a write() that returns false pauses the other side until 'drain'.
// The deadline (the client's grpc-timeout capped by upstream.timeoutMs) goes upstream as
// grpc-timeout; when it passes first here, the upstream stream is reset with CANCEL and the
// client gets DEADLINE_EXCEEDED. A client that resets its stream, or whose connection closes,
// gets its upstream stream reset with CANCEL (upstream/connections/h2-sessions.ts cancel(): no END_STREAM first).
//
// Sequences: a ModelInfer call whose first message names a model and a `sequence_id` parameter
// (grpc/fields.ts, read as protobuf reads it) goes to the backend that sequence's key picks, as a
// REST request of the sequence does (BackendSet.pick), and is never retried: Triton keeps a
// sequence's state on one server. The call is opened upstream once that message has been read
// whole, or once AFFINITY_HOLD_BYTES of it, or AFFINITY_HOLD_PIECES chunks, have come (the chunks
// are held by reference, not copied): a `sequence_id` or model name past that point does not
// steer the call.
//
// Every request message is read as it passes (ForwardOptions.fields): onRequestMessage is told
// what it says once its last byte is here, before the chunk holding that byte is forwarded, and
// may refuse the call (the credentials do not cover its model): Triton then never receives that
// message whole, and its upstream stream is reset.
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { type ErrorCode, GatewayError } from '../errors';
import type { BackendSet } from '../upstream/backends/backend-set';
import type { ModelKey, RouteDecision } from '../upstream/backends/pools';
import { EnvelopeScanner, type MessageSink } from '../grpc/envelope';
import type { MessageFacts, MessageFields } from '../grpc/fields';
import { encodeGrpcMessage, GrpcStatus, grpcStatusOf } from '../grpc/status';
import type { H2Connections } from '../upstream/connections/h2-sessions';
import { type RelayClient, RelayedCall } from '../upstream/call/relay';
import { clientCancelled } from '../upstream/status';
import type { AnswerBound, GrpcStream } from '../ingress/h2';

export interface ForwardOptions {
  /** The call's :path, e.g. /inference.GRPCInferenceService/ModelInfer. */
  readonly path: string;
  /**
   * What goes upstream besides the pseudo-headers: the client's metadata (relayHeaders) and the
   * gateway's. The call's own object: each attempt sets its pseudo-headers and grpc-timeout on it
   * (node:http2 copies what it sends), rather than spreading it into a new one.
   */
  readonly metadata: OutgoingHttpHeaders;
  /** Absolute deadline (Date.now() milliseconds). */
  readonly deadline: number;
  /** The gateway's own fields added to the answer's headers (a soft quota's x-quota-warning). */
  readonly answerMetadata?: OutgoingHttpHeaders;
  /** Largest request message let through (limits.maxInputSizeBytes). */
  readonly maxMessageBytes: number;
  /** What to read of each request message (the model's name field; a ModelInfer's sequence). */
  readonly fields?: MessageFields;
  /**
   * The call names a model (fields' name field): its backend is picked once its first message is
   * read, in the pool the model table gives and among the backends that have the model
   * (upstream/backends/backend-set.ts), as a REST request for the model is.
   */
  readonly byModel?: boolean;
  /** Told after each write to the client (the listener's bound on what a client leaves unread, ingress/h2.ts). */
  readonly bound?: AnswerBound;
}

/** Who forwards a call (passthrough/grpc-ingress.ts): told of its messages and of its end. */
export interface ForwardOwner {
  /**
   * What a request message says once its last byte is here (with ForwardOptions.fields); an error
   * refuses the call before that byte is forwarded (a model the credentials do not cover): the
   * client is answered with its gRPC status (errors.ts), its message and its code.
   */
  requestMessage(facts: MessageFacts): GatewayError | undefined;
  /** The client has its status (or has gone): told exactly once. */
  forwarded(out: ForwardOutcome): void;
}

/** How a call went, for its record. */
export interface ForwardOutcome {
  /** The gRPC status the client was given (or would have been: CANCELLED when it left). */
  readonly grpcStatus: number;
  readonly message: string;
  /** Set when the gateway made the answer (or the client left). */
  readonly code?: ErrorCode;
  /** The backend of the last attempt. */
  readonly backend?: string;
  /** The pool of a call that names a model, and how it was chosen (upstream.models). */
  readonly pool?: string;
  readonly routeDecision?: string;
  readonly retries: number;
  /** Request bytes written upstream (prefixes included). */
  readonly bytesIn: number;
  /** Answer bytes written to the client. */
  readonly bytesOut: number;
  /** When the upstream stream was asked for, and when its first answer byte (headers) came; 0: never. */
  readonly upstreamStartNs: number;
  readonly firstByteNs: number;
}

/** Headers a proxy never relays (RFC 9113 §8.2.2 connection-specific fields, and the ones we set). */
const DROPPED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host', 'http2-settings', 'content-length']);

/**
 * The client's request metadata as it goes upstream: pseudo-headers and connection-specific fields
 * dropped, and `drop` (grpc-timeout, the credential, restricted-API metadata the gateway sets) too;
 * te: trailers, grpc-encoding, grpc-accept-encoding, user-agent and user metadata (-bin too) kept.
 */
export function relayHeaders(h: IncomingHttpHeaders, drop: (name: string) => boolean): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  // for…in, not Object.entries: no [key, value] array per field on every call (node:http2's
  // header objects have no prototype, so nothing inherited is visited).
  for (const k in h) {
    const v = h[k];
    if (v === undefined || k.charCodeAt(0) === 0x3a /* : */ || DROPPED.has(k) || drop(k)) continue;
    out[k] = v;
  }
  return out;
}

/**
 * An answer's headers or trailers as they go to the client: pseudo-headers and connection fields
 * dropped; `status`: the :status the client gets (the answer's headers), none for trailers.
 */
function relayed(h: IncomingHttpHeaders, status?: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = status === undefined ? {} : { ':status': status };
  for (const k in h) {
    const v = h[k];
    if (v !== undefined && k.charCodeAt(0) !== 0x3a && !DROPPED.has(k)) out[k] = v;
  }
  return out;
}

/** The trailers (or trailers-only headers) of a gateway's own answer: its status from the error table. */
function statusFields(err: GatewayError): OutgoingHttpHeaders {
  return { 'grpc-status': String(grpcStatusOf(err)), 'grpc-message': encodeGrpcMessage(err.message), 'x-tensorgate-error': err.code };
}

/**
 * After a gateway's status went out, a client still uploading (`ended()` false: its END_STREAM not
 * seen) is not read any more: its stream is reset with NO_ERROR, one turn of the event loop later
 * (GrpcRelay #stopUpload says why). A client whose request is complete is never reset.
 */
export function stopUpload(stream: GrpcStream, ended: () => boolean): void {
  if (ended() || stream.closed || stream.destroyed) return;
  setImmediate(() => {
    if (!ended() && !stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_NO_ERROR);
  });
}

/** A gateway's own answer without a message: trailers-only (HEADERS with END_STREAM), with `extra` fields. */
export function answerStatus(stream: GrpcStream, err: GatewayError, extra?: OutgoingHttpHeaders): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...statusFields(err), ...extra }, { endStream: true });
}

/** How a call ends whose deadline passed here first. */
function deadlineError(): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_DEADLINE', 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the call asked for');
}
const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';
/**
 * How much of a ModelInfer call's first message is held (by reference) to find its sequence before
 * a backend is picked: encoders write model_name and parameters (fields 1 and 4) before the
 * tensors, so they are in the first bytes of a request however large.
 */
export const AFFINITY_HOLD_BYTES = 64 * 1024;
/**
 * How many chunks of it are held at most: a client that cuts its message into DATA frames of an
 * octet each would otherwise have tens of thousands of objects held per call.
 */
export const AFFINITY_HOLD_PIECES = 1024;

/**
 * Forwards one call; `owner` is told of each request message and, once the client has its status
 * (or has gone), of how the call went. The client's stream is listened to by shared functions
 * (RELAY below), not by closures of the call.
 */
export function forwardGrpcCall(client: GrpcStream, set: BackendSet, pool: H2Connections, o: ForwardOptions,
  owner: ForwardOwner): ForwardedCall {
  const relay = new GrpcRelay(client, set, pool, o, owner);
  relay.start();
  return relay;
}

/** A call being forwarded, as its owner sees it. */
export interface ForwardedCall {
  /**
   * The client's stream emitted 'close' (the owner listens for it): a call still running is
   * cancelled, and its owner told (ForwardOwner.forwarded) before this returns.
   */
  clientClosed(): void;
}

/** The relay of a client's stream, for the shared listeners below (`this`: the stream). */
const RELAY = Symbol('tensorgate.grpcRelay');
type RelayedStream = GrpcStream & { [RELAY]?: GrpcRelay | undefined };

function clientData(this: RelayedStream, chunk: Buffer): void {
  this[RELAY]?.clientData(chunk);
}

function clientEnded(this: RelayedStream): void {
  this[RELAY]?.clientEnded();
}

function clientWantsTrailers(this: RelayedStream): void {
  this[RELAY]?.wantTrailers();
}

function clientDrained(this: RelayedStream): void {
  this[RELAY]?.clientDrained();
}

class GrpcRelay implements RelayClient, MessageSink, ForwardedCall {
  readonly #up: RelayedCall;
  #piping = false;
  #clientEnded = false;
  /** A ModelInfer call (or one naming a model) reads its first message before a backend is picked (start). */
  #holding = false;
  #heldBytes = 0;
  /** The client is paused until the upstream stream takes more (#resumeClient, made at the first wait). */
  #paused = false;
  #resumeClient: (() => void) | undefined;
  /** The answer's headers went to the client (its status then goes in trailers). */
  #responded = false;
  #done = false;
  #trailers: OutgoingHttpHeaders | undefined;
  /** The status the client was given: the upstream's, or the gateway's (#code set). */
  #grpcStatus: number = GrpcStatus.UNKNOWN;
  #message = '';
  #code: ErrorCode | undefined;
  #bytesOut = 0;
  #timer: NodeJS.Timeout | undefined;
  /** A ModelInfer call of a sequence: its key (never retried, always the backend the key picks). */
  #affinity: string | undefined;
  /** A ModelInfer call's first chunks, read before its backend was picked; #startPiping forwards them first. */
  #held: Buffer[] = NO_CHUNKS;
  /** The first request message's facts (its sequence). */
  #first: MessageFacts | undefined;
  readonly #scanner: EnvelopeScanner;
  #refusal: GatewayError | undefined;
  #owner: ForwardOwner | undefined;

  constructor(private readonly client: GrpcStream, set: BackendSet, pool: H2Connections,
    private readonly o: ForwardOptions, owner: ForwardOwner) {
    this.#owner = owner;
    this.#scanner = new EnvelopeScanner(o.maxMessageBytes, o.fields, this);
    this.#up = new RelayedCall(set, pool, this, o.path, o.metadata, o.deadline);
  }

  start(): void {
    const c = this.client as RelayedStream; // its 'error' listener is the caller's (grpc-ingress.ts): 'close' follows
    c[RELAY] = this;
    c.on('end', clientEnded);
    // The client's answer waits for the upstream's trailers (or ours): see #finish and answerEnded.
    c.on('wantTrailers', clientWantsTrailers);
    const remaining = this.o.deadline - Date.now();
    if (remaining <= 0) {
      this.#finish(deadlineError());
      return;
    }
    this.#timer = setTimeout(deadlinePassed, remaining, this);
    if (this.o.path !== MODEL_INFER && this.o.byModel !== true) {
      this.#pickAndBegin();
      return;
    }
    // A ModelInfer call waits for its first message: when that names a sequence, the call goes to
    // the backend the sequence's key picks (the same as for a REST call of that sequence). A call
    // that names a model waits for it too: the model picks the pool and the backends.
    this.#holding = true;
    this.#held = [];
    c.on('data', clientData);
  }

  /** MessageSink: each request message, once its last byte is here (the first is kept for its sequence). */
  message(facts: MessageFacts): void {
    this.#first ??= facts;
    if (this.#refusal === undefined && this.o.fields !== undefined) this.#refusal = this.#owner?.requestMessage(facts);
  }

  /** A DATA chunk of the client's: held while the first message is read (#holding), then forwarded. */
  clientData(chunk: Buffer): void {
    if (this.#done || !this.#scan(chunk)) return;
    if (!this.#holding) {
      this.#forward(chunk);
      return;
    }
    this.#held.push(chunk);
    this.#heldBytes += chunk.length;
    if (this.#scanner.complete === 0 && this.#heldBytes < AFFINITY_HOLD_BYTES && this.#held.length < AFFINITY_HOLD_PIECES) return;
    this.#holding = false;
    this.#affinity = this.#first?.sequenceKey;
    this.#pickAndBegin();
    // An upstream stream of a connected session opens at once (#startPiping then forwards the
    // client's DATA); one still connecting waits, and the client is paused until it opens.
    // (Pausing always cost a pause and a resume per call: a nextTick and a flow() of its own.)
    if (!this.#piping && !this.#done) this.client.pause();
  }

  /** The client's END_STREAM: so ends the upstream's, once it is open. */
  clientEnded(): void {
    this.#clientEnded = true;
    if (this.#holding) {
      this.#holding = false;
      if (!this.#done) this.#pickAndBegin(); // upstreamOpened ends the upstream stream
      return;
    }
    if (this.#piping) this.#up.end();
  }

  clientClosed(): void {
    (this.client as RelayedStream)[RELAY] = undefined;
    if (!this.#done) this.#finish(clientCancelled(), true);
  }

  wantTrailers(): void {
    this.client.sendTrailers(this.#trailers ?? {});
    this.#stopUpload();
  }

  clientDrained(): void {
    this.#up.resume();
  }

  deadlinePassed(): void {
    this.#finish(deadlineError());
  }

  /** The model the call names, once its first message was read (byModel calls only); made once per call. */
  #model(): ModelKey | undefined {
    if (this.#modelKey !== null) return this.#modelKey;
    const name = this.o.byModel === true ? this.#first?.name : undefined;
    if (name === undefined || name === '') return undefined; // not read yet, or none: asked again
    this.#modelKey = new RelayModel(name, this.o.metadata);
    return this.#modelKey;
  }

  #modelKey: RelayModel | undefined | null = null;

  #pickAndBegin(): void {
    this.#up.begin(this.#model(), this.#affinity);
  }

  /** The upstream stream is open: the client's DATA goes upstream from now on. */
  upstreamOpened(): void {
    if (!this.#piping) this.#startPiping();
    // The client ended before this attempt's stream opened (its 'end' handler saw no stream).
    if (this.#clientEnded) this.#up.end();
  }

  #startPiping(): void {
    this.#piping = true;
    const c = this.client;
    // A ModelInfer call's first chunks were held back and read (start): they go first. (Readable.unshift
    // would copy them.) The client's 'end' may have come meanwhile: a paused stream still ends.
    const held = this.#held;
    if (held !== NO_CHUNKS) {
      this.#held = NO_CHUNKS;
      for (const chunk of held) this.#forward(chunk);
    } else {
      c.on('data', clientData);
    }
    if (!this.#paused) c.resume();
  }

  /** A client's DATA chunk, read (#scan), goes upstream; the client waits while the upstream stream is full. */
  #forward(chunk: Buffer): void {
    if (this.#done || this.#up.send(chunk) || this.#paused) return;
    this.#paused = true;
    this.client.pause();
    this.#up.onDrain(this.#resumeClient ??= (): void => {
      this.#paused = false;
      this.client.resume();
    });
  }

  /**
   * Reads a request chunk before it goes anywhere: false when the call is finished instead (a
   * message over the byte budget, or one the owner refused).
   */
  #scan(chunk: Buffer): boolean {
    const step = this.#scanner.push(chunk);
    if (step.tooLarge !== undefined) {
      this.#finish(new GatewayError('GW_ERR_REQUEST_GRPC_MESSAGE_TOO_LARGE',
        `Received message larger than max (${step.tooLarge} vs. ${this.o.maxMessageBytes}): limits.maxInputSizeBytes`));
      return false;
    }
    if (this.#refusal !== undefined) {
      this.#finish(this.#refusal);
      return false;
    }
    return true;
  }

  /** The upstream's answer headers: relayed, or (trailers-only) the whole answer. */
  answerHeaders(h: IncomingHttpHeaders, trailersOnly: boolean): void {
    const out = relayed(h, 200);
    const ours = this.o.answerMetadata;
    if (ours !== undefined) for (const k in ours) out[k] = ours[k];
    if (!trailersOnly) {
      this.#responded = true;
      this.client.respond(out, WAIT_FOR_TRAILERS);
      return;
    }
    this.#statusRelayed();
    this.#done = true;
    this.client.respond(out, END_STREAM);
    this.#stopUpload();
    this.#up.stopSending();
    this.#settle();
  }

  answerData(chunk: Buffer): void {
    this.#bytesOut += chunk.length;
    const ok = this.client.write(chunk);
    this.o.bound?.afterWrite(this.client);
    if (!ok) {
      this.#up.pause();
      this.client.once('drain', clientDrained);
    }
  }

  answerTrailers(t: IncomingHttpHeaders): void {
    this.#statusRelayed();
    this.#trailers = relayed(t);
  }

  /** The upstream's answer has ended (after its headers and trailers): the client gets its trailers. */
  answerEnded(): void {
    this.#done = true;
    this.client.end(); // 'wantTrailers' sends the upstream's trailers
    this.o.bound?.afterWrite(this.client);
    this.#up.stopSending();
    this.#settle();
  }

  failed(err: GatewayError): void {
    this.#finish(err);
  }

  #statusRelayed(): void {
    const status = this.#up.status;
    if (status === undefined) return;
    this.#grpcStatus = status;
    this.#message = this.#up.statusMessage;
  }

  /** The gateway's own status: the upstream stream (if any) is reset and the client told (unless it left). */
  #finish(err: GatewayError, clientGone = false): void {
    if (this.#done) return;
    this.#done = true;
    this.#grpcStatus = grpcStatusOf(err);
    this.#message = err.message;
    this.#code = err.code;
    this.#up.cancel();
    const c = this.client;
    if (!clientGone && !c.destroyed && !c.closed) {
      if (!this.#responded) {
        answerStatus(c, err);
        this.#stopUpload();
      } else {
        this.#trailers = statusFields(err);
        c.end(); // 'wantTrailers' sends them
        this.o.bound?.afterWrite(c);
      }
    }
    this.#settle();
  }

  /**
   * A client still uploading once its status is out is not read any more: its stream is reset with
   * NO_ERROR after the answer (RFC 9113 §8.1, as grpc-go's server does). The reset waits one turn
   * of the event loop: node:http2 writes the frames it has queued (the trailers) from a native
   * immediate, and a reset submitted at once went out before them, so grpcio (C-core) reported
   * INTERNAL "Stream removed" instead of the status (seen with grpc_model_scope_check.py).
   */
  #stopUpload(): void {
    if (!this.#clientEnded) stopUpload(this.client, () => this.#clientEnded);
  }

  #settle(): void {
    clearTimeout(this.#timer);
    const up = this.#up;
    up.settle();
    const owner = this.#owner;
    this.#owner = undefined;
    const route = this.#modelKey?.route;
    owner?.forwarded({
      grpcStatus: this.#grpcStatus,
      message: this.#message,
      code: this.#code,
      backend: up.backend,
      pool: route?.pool,
      routeDecision: route?.routeDecision,
      retries: up.retries,
      bytesIn: up.bytesIn,
      bytesOut: this.#bytesOut,
      upstreamStartNs: up.upstreamStartNs,
      firstByteNs: up.firstByteNs,
    });
  }
}

/** The held chunks of a call that holds none (shared, never written to). */
const NO_CHUNKS: Buffer[] = [];
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });
const END_STREAM = Object.freeze({ endStream: true });

function deadlinePassed(relay: GrpcRelay): void {
  relay.deadlinePassed();
}

/** The model a call names (ModelKey): its name, the call's metadata for a header split, the pool it went to. */
class RelayModel implements ModelKey {
  route: { pool: string; routeDecision: RouteDecision } | undefined;

  constructor(readonly name: string, private readonly headers: OutgoingHttpHeaders) {}

  header(h: string): string | undefined {
    const v = this.headers[h];
    return Array.isArray(v) ? v[0] : v === undefined ? undefined : String(v);
  }

  routed(pool: string, decision: RouteDecision): void {
    this.route = { pool, routeDecision: decision };
  }
}
