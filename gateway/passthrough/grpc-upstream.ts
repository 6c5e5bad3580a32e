// gRPC pass-through: one client call becomes one upstream call on a backend of the
// live set, picked per call (round robin over the ready ones: a client's calls spread over every
// replica although they share one connection). The frames go through by reference: each DATA
// chunk the client sent is written to the upstream stream as the same Buffer, and back; no
// message byte is copied but a request's model name and sequence parameter. The request's
// prefixes and fields are read as they pass (grpc/envelope.ts, grpc/fields.ts): a request message
// declaring more than the byte budget is refused before any of it is forwarded.
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
// whole, or once AFFINITY_HOLD_BYTES of it have come (the chunks are held by reference, not
// copied): a `sequence_id` or model name past that point does not steer the call.
//
// Every request message is read as it passes (ForwardOptions.fields): onRequestMessage is told
// what it says once its last byte is here, before the chunk holding that byte is forwarded, and
// may refuse the call (the credentials do not cover its model): Triton then never receives that
// message whole, and its upstream stream is reset.
//
// Retries (upstream/backends/retry.ts): only a call whose upstream stream never opened (connection failed)
// or was refused (REFUSED_STREAM, GOAWAY) before any client DATA was written to it goes to another
// backend: nothing is buffered for a replay, so DATA once written is never sent again.
import { type ClientHttp2Session, type ClientHttp2Stream, constants, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { type ErrorCode, GatewayError } from '../errors';
import type { Backend } from '../upstream/backends/backend';
import type { BackendSet } from '../upstream/backends/backend-set';
import type { ModelKey } from '../upstream/backends/pools';
import { EnvelopeScanner } from '../grpc/envelope';
import type { MessageFacts, MessageFields } from '../grpc/fields';
import { decodeGrpcMessage, encodeGrpcMessage, GrpcStatus, grpcStatusOf, grpcStatusOfHttp } from '../grpc/status';
import { formatGrpcTimeout } from '../grpc/timeout';
import { cancel, type H2Connections } from '../upstream/connections/h2-sessions';
import { unhook } from '../unhook';
import { countRetry, mayRetry } from '../upstream/backends/retry';
import { clientCancelled, lacksModel, notSent, upstreamError } from '../upstream/status';

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
  /**
   * Told what each request message says once its last byte is here; an error refuses the call
   * before that byte is forwarded (a model the credentials do not cover): the client is answered
   * with its gRPC status (errors.ts), its message and its code.
   */
  readonly onRequestMessage?: (facts: MessageFacts) => GatewayError | undefined;
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
  /** When the upstream stream was asked for, and when its first answer byte (headers) came; 0n: never. */
  readonly upstreamStartNs: bigint;
  readonly firstByteNs: bigint;
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
function answerHeaders(h: IncomingHttpHeaders, status?: number): OutgoingHttpHeaders {
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
export function stopUpload(stream: ServerHttp2Stream, ended: () => boolean): void {
  if (ended() || stream.closed || stream.destroyed) return;
  setImmediate(() => {
    if (!ended() && !stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_NO_ERROR);
  });
}

/** A gateway's own answer without a message: trailers-only (HEADERS with END_STREAM), with `extra` fields. */
export function answerStatus(stream: ServerHttp2Stream, err: GatewayError, extra?: OutgoingHttpHeaders): void {
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

/** Forwards one call; `done` is told once the client has its status (or has gone), exactly once. */
export function forwardGrpcCall(client: ServerHttp2Stream, set: BackendSet, pool: H2Connections, o: ForwardOptions,
  done: (r: ForwardOutcome) => void): void {
  new GrpcRelay(client, set, pool, o, done).start();
}

class GrpcRelay {
  #up: ClientHttp2Stream | undefined;
  #backend: Backend | undefined;
  #attempt = 0;
  #retries = 0;
  /** Client DATA was written upstream: the call can no longer go to another backend. */
  #forwarded = false;
  #piping = false;
  #clientEnded = false;
  /** The answer's headers went to the client (its status then goes in trailers). */
  #responded = false;
  #done = false;
  #trailers: OutgoingHttpHeaders = {};
  #status: { grpcStatus: number; message: string; code?: ErrorCode } = { grpcStatus: GrpcStatus.UNKNOWN, message: '' };
  #bytesIn = 0;
  #bytesOut = 0;
  #upstreamStartNs = 0n;
  #firstByteNs = 0n;
  #timer: NodeJS.Timeout | undefined;
  /** A ModelInfer call of a sequence: its key (never retried, always the backend the key picks). */
  #affinity: string | undefined;
  /** A ModelInfer call's first chunks, read before its backend was picked; #pipe forwards them first. */
  #held: Buffer[] = [];
  /** The first request message's facts (its sequence). */
  #first: MessageFacts | undefined;
  readonly #scanner: EnvelopeScanner;
  #refusal: GatewayError | undefined;

  constructor(private readonly client: ServerHttp2Stream, private readonly set: BackendSet, private readonly pool: H2Connections,
    private readonly o: ForwardOptions, private resolve: ((r: ForwardOutcome) => void) | undefined) {
    const check = o.onRequestMessage;
    this.#scanner = new EnvelopeScanner(o.maxMessageBytes, o.fields, (facts) => {
      this.#first ??= facts;
      if (check !== undefined) this.#refusal ??= check(facts);
    });
  }

  start(): void {
    const c = this.client; // its 'error' listener is the caller's (grpc-ingress.ts): 'close' follows
    c.on('end', () => {
      this.#clientEnded = true;
      if (this.#piping && !this.#done) this.#up?.end();
      if (this.#piping) this.#mirror?.end();
    });
    c.on('close', () => {
      if (!this.#done) this.#finish(clientCancelled(), true);
    });
    // The client's answer waits for the upstream's trailers (or ours): see #finish and 'end'.
    c.on('wantTrailers', () => {
      c.sendTrailers(this.#trailers);
      this.#stopUpload();
    });
    const remaining = this.o.deadline - Date.now();
    if (remaining <= 0) {
      this.#finish(deadlineError());
      return;
    }
    this.#timer = setTimeout(() => this.#finish(deadlineError()), remaining);
    if (this.o.path !== MODEL_INFER && this.o.byModel !== true) {
      this.#pickAndBegin();
      return;
    }
    // A ModelInfer call waits for its first message: when that names a sequence, the call goes to
    // the backend the sequence's key picks (the same as for a REST call of that sequence). A call
    // that names a model waits for it too: the model picks the pool and the backends.
    let heldBytes = 0;
    const onData = (chunk: Buffer): void => {
      if (this.#done || !this.#scan(chunk)) return;
      this.#held.push(chunk);
      heldBytes += chunk.length;
      if (this.#scanner.complete === 0 && heldBytes < AFFINITY_HOLD_BYTES) return;
      c.off('data', onData);
      c.off('end', onEnd);
      this.#affinity = this.#first?.sequenceKey;
      this.#pickAndBegin();
      // An upstream stream of a connected session opens at once (#pipe then listens to the client's
      // DATA); one still connecting waits, and the client is paused until it opens. (Pausing
      // always cost a pause and a resume per call: a nextTick and a flow() of its own.)
      if (!this.#piping) c.pause();
    };
    const onEnd = (): void => {
      c.off('data', onData);
      if (!this.#done) this.#pickAndBegin();
    };
    c.on('data', onData);
    c.once('end', onEnd);
  }

  /** The model the call names, once its first message was read (byModel calls only); made once per call. */
  #model(): ModelKey | undefined {
    if (this.#modelKey !== null) return this.#modelKey;
    const name = this.o.byModel === true ? this.#first?.name : undefined;
    if (name === undefined || name === '') return undefined; // not read yet, or none: asked again
    const headers = this.o.metadata;
    this.#modelKey = {
      name,
      header: (h) => { const v = headers[h]; return Array.isArray(v) ? v[0] : v === undefined ? undefined : String(v); },
      routed: (pool, decision) => { this.#route = { pool, routeDecision: decision }; },
    };
    return this.#modelKey;
  }

  #modelKey: ModelKey | undefined | null = null;
  #route: { pool: string; routeDecision: string } | undefined;

  #pickAndBegin(): void {
    let first: Backend;
    const model = this.#model();
    try {
      first = this.set.pickOrFail(undefined, this.#affinity, model);
    } catch (err) {
      this.#finish(err as GatewayError); // GW_ERR_UPSTREAM_NO_BACKEND: UNAVAILABLE
      return;
    }
    // The pick decided whether a copy goes to a mirror pool (upstream.models mirror).
    if (model?.mirror !== undefined) {
      const b = this.set.mirrorBackend(model, model.mirror);
      if (b !== undefined) this.#mirror = new MirrorStream(this.set, this.pool, b, model.mirror, { ...this.o.metadata, ':method': 'POST', ':path': this.o.path }, this.o.deadline);
    }
    this.#begin(first);
  }

  /** The copy of this call going to a mirror pool, if any. */
  #mirror: MirrorStream | undefined;

  /** The backend counting this call in flight (least-request picking), until it is settled or retried elsewhere. */
  #counted: Backend | undefined;

  #uncount(): void {
    if (this.#counted !== undefined) this.set.ended(this.#counted);
    this.#counted = undefined;
  }

  #begin(b: Backend): void {
    this.#backend = b;
    this.#uncount();
    this.set.started(b);
    this.#counted = b;
    const conn = this.pool.get(b);
    if (this.#upstreamStartNs === 0n) this.#upstreamStartNs = process.hrtime.bigint();
    let session: ClientHttp2Session;
    let s: ClientHttp2Stream;
    const headers = this.o.metadata;
    headers[':method'] = 'POST';
    headers[':path'] = this.o.path;
    headers['grpc-timeout'] = formatGrpcTimeout(this.o.deadline - Date.now());
    const authority = conn.authority[':authority'];
    if (authority !== undefined) headers[':authority'] = authority;
    else if (headers[':authority'] !== undefined) delete headers[':authority']; // a retry on another connection
    try {
      session = conn.session();
      s = session.request(headers);
    } catch (err) {
      // The session was closed or had received GOAWAY before the call started.
      this.#attemptFailed(b, notSent(upstreamError(GrpcStatus.UNAVAILABLE, (err as Error).message, true, err)));
      return;
    }
    this.#up = s;
    let opened = !s.pending;
    let headersSeen = false;
    let streamError: Error | undefined;
    const mine = (): boolean => this.#up === s && !this.#done;
    if (opened) this.#pipe();
    else s.once('ready', () => { opened = true; if (mine()) this.#pipe(); });
    s.on('error', (err: Error) => { streamError = err; });
    s.on('response', (h) => {
      if (!mine()) return;
      headersSeen = true;
      this.#answerHeaders(b, s, h);
    });
    s.on('data', (chunk: Buffer) => {
      if (!mine()) return;
      this.#bytesOut += chunk.length;
      if (!this.client.write(chunk)) {
        s.pause();
        this.client.once('drain', () => s.resume());
      }
    });
    s.on('trailers', (t: IncomingHttpHeaders) => {
      if (!mine()) return;
      this.#relayStatus(t);
      this.#trailers = answerHeaders(t);
    });
    s.on('end', () => {
      if (mine() && this.#responded) this.#answerEnded(b, s);
    });
    s.on('close', () => {
      unhook(s); // closed: it lets go of the call (this listener still runs to its end)
      if (!mine()) return;
      const code = s.rstCode;
      const tls = headersSeen ? undefined : conn.tlsFailure(session, streamError);
      const e = upstreamError(GrpcStatus.UNAVAILABLE, tls
        ?? (!headersSeen ? `no answer from ${b.address} (${!opened || code === undefined ? 'connection failed' : `stream reset ${code}`})`
          : `stream from ${b.address} reset (${code ?? 'connection closed'}) before its gRPC status`), true);
      // Nothing reached Triton when the stream never opened or was refused (RFC 9113 §8.7), and
      // nothing of the client's is lost when none of its DATA was written.
      const unsent = !headersSeen && !this.#forwarded && (!opened || code === constants.NGHTTP2_REFUSED_STREAM);
      this.#attemptFailed(b, unsent ? notSent(e) : e);
    });
  }

  /** The upstream's answer headers: relayed, or (trailers-only) the whole answer. */
  #answerHeaders(b: Backend, s: ClientHttp2Stream, h: IncomingHttpHeaders): void {
    if (this.#firstByteNs === 0n) this.#firstByteNs = process.hrtime.bigint();
    const status = Number(h[':status']);
    if (status !== 200) {
      this.set.failed(b);
      this.#finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream ${b.address} answered HTTP ${status} instead of a gRPC response`,
        { grpcCode: grpcStatusOfHttp(status) }));
      return;
    }
    if (h['grpc-status'] !== undefined) {
      // Trailers-only: the status is in the headers, and the stream ends with them.
      this.#relayStatus(h);
      this.set.succeeded(b);
      this.#done = true;
      this.client.respond(answerHeaders(h, 200), { endStream: true });
      this.#stopUpload();
      this.#endUpstream(s);
      this.#settle();
      return;
    }
    this.#responded = true;
    this.client.respond(answerHeaders(h, 200), { waitForTrailers: true });
  }

  /** The upstream's answer has ended (after its headers): the client gets its trailers. */
  #answerEnded(b: Backend, s: ClientHttp2Stream): void {
    if (this.#trailers['grpc-status'] === undefined) {
      this.#finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response from ${b.address} ended without a gRPC status`));
      return;
    }
    this.set.succeeded(b);
    this.#done = true;
    this.client.end(); // 'wantTrailers' sends the upstream's trailers
    this.#endUpstream(s);
    this.#settle();
  }

  #attemptFailed(b: Backend, err: GatewayError): void {
    if (this.#done) return;
    const model = this.#model();
    const retry = model === undefined ? { deadline: this.o.deadline, affinity: this.#affinity }
      : { deadline: this.o.deadline, affinity: this.#affinity, model };
    const next = mayRetry(this.set, b, err, this.#attempt, retry) ? this.set.pick(b, undefined, model) : undefined;
    if (next === undefined) {
      this.#finish(err); // GW_ERR_UPSTREAM_UNAVAILABLE: UNAVAILABLE
      return;
    }
    countRetry(this.set, b, err, retry);
    this.#attempt++;
    this.#retries++;
    this.#begin(next);
  }

  /** The client's DATA goes upstream from now on (the upstream stream is open). */
  #pipe(): void {
    if (!this.#piping) this.#startPiping();
    // The client ended before this attempt's stream opened (its 'end' handler saw no stream).
    const up = this.#up!;
    if (this.#clientEnded && !this.#done && !up.writableEnded) up.end();
    if (this.#clientEnded) this.#mirror?.end();
  }

  #startPiping(): void {
    this.#piping = true;
    const c = this.client;
    let paused = false;
    let corked = false;
    const uncorkTurn = (): void => {
      corked = false;
      this.#up!.uncork();
    };
    const onData = (chunk: Buffer, scanned = false): void => {
      if (this.#done || (!scanned && !this.#scan(chunk))) return;
      const target = this.#up!;
      if (!corked) {
        // What the client's DATA brings in one turn goes upstream as one writev: corked until the
        // turn's I/O is done (or the client's END_STREAM: end() uncorks). A unary call's message
        // then leaves with END_STREAM on its DATA frame, with its HEADERS, in one socket write
        // (uncorked, the end waited for the DATA's socket write and went as an empty DATA frame of
        // its own: 2 writes per call), and a large message as one write per read of the client's
        // socket instead of one per 16 KiB DATA frame (strace, 600 KB: 43 writes per call).
        corked = true;
        target.cork();
        setImmediate(uncorkTurn);
      }
      this.#forwarded = true;
      this.#mirror?.write(chunk);
      this.#bytesIn += chunk.length;
      if (!target.write(chunk) && !paused) {
        paused = true;
        c.pause();
        target.once('drain', () => {
          paused = false;
          c.resume();
        });
      }
    };
    // A ModelInfer call's first chunks were held back and read (start): they go first. (Readable.unshift
    // would copy them.) The client's 'end' may have come meanwhile: a paused stream still ends.
    const held = this.#held;
    this.#held = [];
    for (const chunk of held) onData(chunk, true);
    c.on('data', (chunk: Buffer) => onData(chunk));
    if (!paused) c.resume();
  }

  /**
   * Reads a request chunk before it goes anywhere: false when the call is finished instead (a
   * message over the byte budget, or one onRequestMessage refused).
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

  /**
   * Triton has given its status while the client was still sending (a bidi stream it ended
   * first, an early error): the rest is not forwarded, so our side of the upstream stream is
   * closed too, or the stream would stay open on the shared session.
   */
  #endUpstream(s: ClientHttp2Stream): void {
    if (!s.writableEnded && !s.closed && !s.destroyed) s.close(constants.NGHTTP2_NO_ERROR);
  }

  #relayStatus(h: IncomingHttpHeaders): void {
    const v = h['grpc-status'];
    if (v === undefined) return;
    this.#status = { grpcStatus: Number(v), message: decodeGrpcMessage(h['grpc-message']) };
    // Triton says the model is not there (or not ready): that backend gets no more of its calls.
    const model = this.#model();
    if (model !== undefined && this.#backend !== undefined && this.#status.grpcStatus !== GrpcStatus.OK
      && lacksModel(upstreamError(this.#status.grpcStatus, this.#status.message, false))) this.set.lacks(this.#backend, model);
  }

  /** The gateway's own status: the upstream stream (if any) is reset and the client told (unless it left). */
  #finish(err: GatewayError, clientGone = false): void {
    if (this.#done) return;
    this.#done = true;
    this.#mirror?.cancelUnlessEnded();
    this.#status = { grpcStatus: grpcStatusOf(err), message: err.message, code: err.code };
    const up = this.#up;
    if (up !== undefined) cancel(up);
    const c = this.client;
    if (!clientGone && !c.destroyed && !c.closed) {
      if (!this.#responded) {
        answerStatus(c, err);
        this.#stopUpload();
      } else {
        this.#trailers = statusFields(err);
        c.end(); // 'wantTrailers' sends them
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
    stopUpload(this.client, () => this.#clientEnded);
  }

  #settle(): void {
    clearTimeout(this.#timer);
    this.#uncount();
    this.#mirror?.cancelUnlessEnded();
    const done = this.resolve;
    this.resolve = undefined;
    done?.({
      ...this.#status,
      backend: this.#backend?.address,
      ...this.#route,
      retries: this.#retries,
      bytesIn: this.#bytesIn,
      bytesOut: this.#bytesOut,
      upstreamStartNs: this.#upstreamStartNs,
      firstByteNs: this.#firstByteNs,
    });
  }
}

/**
 * A copy of a pass-through call sent to a mirror pool (upstream.models mirror): the same headers
 * and the client's DATA chunks as they are forwarded (the client's own buffers, written as they
 * are to both streams), its answer read and dropped. It never holds the call: its flow control is
 * ignored (a copy costs at most its request's size; upstream.mirrorMaxInFlight bounds how many
 * run), it is bounded by the call's deadline, cancelled when the call ends before the client has
 * sent everything, and its outcome is counted (tensorgate_upstream_mirrored_total).
 */
class MirrorStream {
  readonly #s: ClientHttp2Stream | undefined;
  #ended = false;
  #answered = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(set: BackendSet, pool: H2Connections, b: Backend, name: string, headers: OutgoingHttpHeaders, deadline: number) {
    const conn = pool.get(b);
    const h: OutgoingHttpHeaders = { ...headers, 'grpc-timeout': formatGrpcTimeout(deadline - Date.now()) };
    const authority = conn.authority[':authority'];
    if (authority !== undefined) h[':authority'] = authority;
    else delete h[':authority'];
    try {
      this.#s = conn.session().request(h);
    } catch {
      set.mirrorEnded(name, false);
      return;
    }
    const s = this.#s;
    s.on('error', () => undefined);
    s.on('trailers', (t: IncomingHttpHeaders) => { if (t['grpc-status'] !== undefined) this.#answered = true; });
    s.on('response', (r: IncomingHttpHeaders) => { if (r['grpc-status'] !== undefined) this.#answered = true; });
    s.resume(); // the answer is dropped as it comes
    this.#timer = setTimeout(() => cancel(s), Math.max(0, deadline - Date.now()));
    s.on('close', () => {
      clearTimeout(this.#timer);
      set.mirrorEnded(name, this.#answered);
      unhook(s);
    });
  }

  write(chunk: Buffer): void {
    if (this.#s !== undefined && !this.#ended && !this.#s.destroyed) this.#s.write(chunk);
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#s !== undefined && !this.#s.destroyed) this.#s.end();
  }

  /** The call ended before the client sent all of it: the copy is incomplete, and reset. */
  cancelUnlessEnded(): void {
    if (!this.#ended && this.#s !== undefined) cancel(this.#s);
    this.#ended = true;
  }
}
