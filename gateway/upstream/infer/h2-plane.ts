// ModelInfer as our own unary gRPC call on node:http2 (docs/architecture.md#two-data-planes): the framed request is
// written by reference — whole, or piece by piece as the client's body arrives (cut-through) —
// response DATA chunks are kept as views, status comes from the trailers
// (or from trailers-only headers), the deadline travels as grpc-timeout, a cancelled request
// resets the stream (RST_STREAM CANCEL), which Triton honours.
//
// Written by reference means the message may be read after the call has settled: nghttp2 takes
// DATA from it without copying (NO_COPY) and Node hands those slices to the socket, whose write
// can complete later. Node reports the write done (the end() callback, without error) only once
// the socket write carrying its last byte has completed (Http2Session::ClearOutgoing); a reset
// stream cancels what nghttp2 had not taken yet, but slices already queued on the socket still
// point into the buffer. So a pooled message is held until that callback, and comes back for
// reuse only when it reported success — a stream that closes first gives it up for good.
//
// Backends come from the live set (upstream/backends/backend-set.ts): a call goes to the next ready one and,
// when its stream never opened (connection refused or closed first) or was refused
// (REFUSED_STREAM, or GOAWAY below its id), to another one (upstream/backends/retry.ts). A cut-through
// call keeps the pieces written while its stream was not open yet, to replay them there; once
// the stream is open its DATA may have reached Triton, and it is never sent again.
//
// With upstream.tls the sessions are TLS (upstream/connections/tls.ts): each new session takes the current
// material, so a reloaded client certificate is used from the next connection on. A call that
// fails because the handshake did says why (the OpenSSL error, or Triton closing right after the
// handshake: a refused client certificate).
import { type ClientHttp2Session, type ClientHttp2Stream, constants, type IncomingHttpHeaders } from 'node:http2';
import { GatewayError } from '../../errors';
import {
  type CallOptions, type CallTiming, type DataPlane, type Flow, MAX_MESSAGE_BYTES, MODEL_INFER_PATH,
  type StreamingCall, type TimedResponseMessage,
} from './data-plane';
import type { MessageHolds } from '../../buffers/pool';
import type { Backend, BackendSet } from '../backends/backend-set';
import { InFlight, shutdownError } from '../connections/in-flight';
import { countRetry, mayRetry, withRetries } from '../backends/retry';
import { EnvelopeDecoder } from '../../grpc/envelope';
import { decodeGrpcMessage, GrpcStatus } from '../../grpc/status';
import { formatGrpcTimeout } from '../../grpc/timeout';
import { clientCancelled, notSent, upstreamError } from './status';
import type { UpstreamTls } from '../connections/tls';
import { cancel, type Connection, H2Connections } from '../connections/h2-sessions';

const NO_HOLDS: MessageHolds = { hold: () => () => undefined };

export class H2DataPlane implements DataPlane {
  readonly #set: BackendSet;
  readonly #connections: H2Connections;
  readonly #headers: Record<string, string>;
  readonly #holds: MessageHolds;
  readonly #inFlight = new InFlight();

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `holds`: the buffer pool the messages may come from.
   * `tls`: upstream.tls, when the connections to Triton use TLS.
   */
  constructor(backends: BackendSet, restriction?: readonly [string, string], holds: MessageHolds = NO_HOLDS, tls?: UpstreamTls) {
    this.#set = backends;
    this.#headers = restriction === undefined ? {} : { [restriction[0]]: restriction[1] };
    this.#holds = holds;
    this.#connections = new H2Connections(backends, tls);
  }

  /**
   * The sessions to the backends, one per backend: the gRPC pass-through
   * (passthrough/grpc-upstream.ts) shares them.
   */
  get connections(): H2Connections {
    return this.#connections;
  }

  async modelInfer(message: Buffer, options: CallOptions): Promise<TimedResponseMessage> {
    const written = allWritten(this.#holds.hold(message));
    try {
      return await withRetries(this.#set, options, (b) => {
        const call = startCall(this.#connection(b), MODEL_INFER_PATH, options, this.#headers, this.#inFlight, written.one());
        call.end(message);
        return call.response;
      });
    } finally {
      written.seal();
    }
  }

  startModelInfer(options: CallOptions): StreamingCall {
    return new ReplayingCall(this.#set, options, (b) => startCall(this.#connection(b), MODEL_INFER_PATH, options, this.#headers, this.#inFlight));
  }

  #connection(b: Backend): Connection {
    return this.#connections.get(b);
  }

  /**
   * Resets the calls still running (RST_STREAM CANCEL; they reject with GW_ERR_UPSTREAM_UNAVAILABLE)
   * and closes the sessions.
   */
  close(): void {
    this.#inFlight.cancelAll();
    this.#connections.close();
  }
}

/**
 * The pool hold of a message sent by several attempts: let go once every attempt reported and
 * no more will start, reusable only when each write completed.
 */
function allWritten(letGo: (ok: boolean) => void): { one(): (ok: boolean) => void; seal(): void } {
  let open = 0;
  let ok = true;
  let sealed = false;
  const settle = (): void => {
    if (sealed && open === 0) letGo(ok);
  };
  return {
    one() {
      open++;
      let reported = false;
      return (w) => {
        if (reported) return;
        reported = true;
        ok &&= w;
        open--;
        settle();
      };
    },
    seal() {
      sealed = true;
      settle();
    },
  };
}

/**
 * A cut-through call over attempts: pieces written while the current attempt's stream is not open
 * yet are kept, and replayed on another backend when that attempt fails without having sent any
 * (upstream/backends/retry.ts). Once the stream is open they are dropped and the call is never sent again.
 */
class ReplayingCall implements StreamingCall {
  readonly response: Promise<TimedResponseMessage>;
  #attempt!: H2Call;
  #kept: Buffer[] | undefined = [];
  #last: Buffer | undefined;
  #cancelled = false;
  #resolve!: (m: TimedResponseMessage) => void;
  #reject!: (e: unknown) => void;

  constructor(private readonly set: BackendSet, private readonly options: CallOptions, private readonly start: (b: Backend) => H2Call) {
    this.response = new Promise<TimedResponseMessage>((res, rej) => {
      this.#resolve = res;
      this.#reject = rej;
    });
    let first: Backend;
    try {
      first = set.pickOrFail(undefined, options.affinity);
    } catch (err) {
      this.#attempt = failedCall(err);
      this.#reject(err);
      return;
    }
    this.#begin(first, 0);
  }

  #begin(b: Backend, n: number): void {
    const a = this.start(b);
    this.#attempt = a;
    for (const piece of this.#kept ?? []) a.write(piece);
    if (this.#last !== undefined) a.end(this.#last);
    a.response.then((m) => {
      this.set.succeeded(b);
      this.#resolve(m);
    }, (err: unknown) => {
      const next = !this.#cancelled && this.#kept !== undefined && mayRetry(this.set, b, err, n, this.options) ? this.set.pick(b) : undefined;
      if (next === undefined) {
        this.#reject(err);
        return;
      }
      countRetry(this.set, b, err, this.options);
      this.#begin(next, n + 1);
    });
  }

  write(piece: Buffer): boolean {
    if (this.#keeping()) this.#kept!.push(piece);
    return this.#attempt.write(piece);
  }

  end(last: Buffer): void {
    this.#keeping();
    this.#last = last;
    this.#attempt.end(last);
  }

  onDrain(resume: () => void): void {
    this.#attempt.onDrain(resume);
  }

  cancel(): void {
    this.#cancelled = true;
    this.#attempt.cancel();
  }

  /** Whether pieces are still kept for a replay: not once the current stream has opened. */
  #keeping(): boolean {
    if (this.#kept !== undefined && this.#attempt.opened()) this.#kept = undefined;
    return this.#kept !== undefined;
  }
}

/** A call that failed before it started (no backend): it takes nothing and ends at once. */
function failedCall(err: unknown): H2Call {
  const response = Promise.reject(err);
  response.catch(() => undefined);
  return { write: () => true, end: () => undefined, onDrain: (resume) => resume(), cancel: () => undefined, response, opened: () => false };
}

/** A call of this file: also says whether its stream has opened (after that it is never sent again). */
interface H2Call extends StreamingCall {
  opened(): boolean;
}

/**
 * Opens the call's HTTP/2 stream; the request message is written by the caller. Response DATA
 * is kept as views; the status comes from trailers (or trailers-only headers). Any failure —
 * before, during or after the upload — rejects `response` once and resets the stream.
 * `written(ok)` is told once whether the request's last byte reached the socket (true) or the
 * call ended without it (false): then queued slices may still point into the message.
 * The call's CallTiming (data-plane.ts) is taken from the stream's own events: 'ready' (HEADERS
 * queued), the end() callback (last byte on the socket), the first DATA, the trailers.
 */
function startCall(backend: Connection, path: string, options: CallOptions, headers: Record<string, string>, inFlight: InFlight,
  written: (ok: boolean) => void = () => undefined): H2Call {
  let stream: ClientHttp2Stream | undefined;
  let settled = false;
  let firstSentNs = 0n;
  let sentNs = 0n;
  let firstByteNs = 0n;
  let endNs = 0n;
  // An event can be seen late — the end() callback a turn after its socket write, a paused
  // stream's first 'data' after the trailers — so each mark is bounded by the next: in order.
  const timing = (): CallTiming => {
    const firstByte = endNs !== 0n && (firstByteNs === 0n || firstByteNs > endNs) ? endNs : firstByteNs;
    const sent = firstByte !== 0n && (sentNs === 0n || sentNs > firstByte) ? firstByte : sentNs;
    const firstSent = firstSentNs === 0n || firstSentNs > sent ? sent : firstSentNs;
    return { firstSentNs: firstSent, sentNs: sent, firstByteNs: firstByte, endNs };
  };
  let resolveResponse!: (m: TimedResponseMessage) => void;
  let rejectResponse!: (e: GatewayError) => void;
  const response = new Promise<TimedResponseMessage>((res, rej) => {
    resolveResponse = res;
    rejectResponse = rej;
  });
  let waiting: (() => void)[] = [];
  const wake = (): void => {
    const w = waiting;
    waiting = [];
    for (const resume of w) resume();
  };
  let timer: NodeJS.Timeout | undefined;
  const finish = (err: GatewayError | undefined, value?: TimedResponseMessage): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
    inFlight.delete(onShutdown);
    if (err) {
      if (stream !== undefined && !stream.closed) cancel(stream);
      rejectResponse(err);
    } else {
      resolveResponse(value!);
    }
    wake();
  };
  const onAbort = (): void => finish(clientCancelled());
  const onShutdown = (): void => finish(shutdownError());
  const call: H2Call = {
    opened: () => firstSentNs !== 0n,
    write: (piece) => (settled || stream === undefined ? true : stream.write(piece)),
    end: (last) => {
      if (settled || stream === undefined) return;
      const flushed = (err?: Error | null): void => {
        if (err == null) sentNs = process.hrtime.bigint();
        written(err == null);
      };
      // Node 24 completes a zero-length write queued behind others only when the stream closes
      // (observed): ending with one reported the request sent after its answer (test/integration/call-timing.test.ts).
      if (last.length === 0) stream.end(flushed);
      else stream.end(last, flushed);
    },
    onDrain: (resume) => {
      if (settled || stream === undefined) resume();
      else waiting.push(resume);
    },
    cancel: onAbort,
    response,
  };

  if (inFlight.closed) {
    written(true); // nothing was written
    finish(shutdownError());
    return call;
  }
  const remaining = options.deadline - Date.now();
  if (remaining <= 0) {
    written(true); // nothing was written
    finish(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false));
    return call;
  }
  // Our own deadline, in case the server never answers: a little after Triton's.
  timer = setTimeout(() => finish(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false)), remaining + 50);
  let s: ClientHttp2Stream;
  let session: ClientHttp2Session;
  try {
    session = backend.session();
    s = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': formatGrpcTimeout(remaining),
      'user-agent': 'tensorgate',
      ...backend.authority,
      ...headers,
      ...options.metadata,
    });
  } catch (err) {
    // The session was closed or had received GOAWAY before the call started.
    written(true); // nothing was written
    finish(notSent(upstreamError(GrpcStatus.UNAVAILABLE, (err as Error).message, true, err)));
    return call;
  }
  stream = s;
  inFlight.add(onShutdown);
  s.on('close', () => written(false)); // nothing if the write already reported (see the top of this file)
  // On a connected session the stream opens within request(); on a new one, once it connects.
  if (!s.pending) firstSentNs = process.hrtime.bigint();
  else s.once('ready', () => { firstSentNs = process.hrtime.bigint(); });
  if (options.signal.aborted) {
    onAbort();
    return call;
  }
  options.signal.addEventListener('abort', onAbort, { once: true });

  let status: number | undefined;
  let statusMessage = '';
  let headersSeen = false;
  const chunks: Buffer[] = [];
  let expected = -1;
  let received = 0;
  const receiver = options.receiver;
  const flow: Flow = { pause: () => s.pause(), resume: () => s.resume(), cancel: onAbort, timing };
  // The answer is one message: bytes after it are not read. Its bytes are kept as views.
  const envelope = new EnvelopeDecoder({
    prefix: (compressed, length) => {
      if (expected >= 0) return false;
      if (compressed) {
        finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression'));
        return false;
      }
      expected = length;
      if (expected <= MAX_MESSAGE_BYTES) return true;
      finish(upstreamError(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${expected} vs. ${MAX_MESSAGE_BYTES})`, false));
      return false;
    },
    data: (c, from, to) => {
      const view = from === 0 && to === c.length ? c : c.subarray(from, to);
      received += to - from;
      if (receiver?.data(view, flow) !== true) chunks.push(view);
    },
  });

  const statusFrom = (h: IncomingHttpHeaders): void => {
    const v = h['grpc-status'];
    if (v !== undefined) {
      status = Number(v);
      statusMessage = decodeGrpcMessage(h['grpc-message']);
    }
  };

  s.on('drain', wake);
  s.on('response', (h) => {
    headersSeen = true;
    const httpStatus = h[':status'];
    if (httpStatus !== 200) {
      finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream answered HTTP ${httpStatus} instead of a gRPC response`));
      return;
    }
    statusFrom(h); // trailers-only answer: the status is in the headers
  });
  s.on('data', (chunk: Buffer) => {
    if (firstByteNs === 0n) firstByteNs = process.hrtime.bigint();
    envelope.push(chunk);
  });
  s.on('trailers', (t: IncomingHttpHeaders) => {
    endNs = process.hrtime.bigint(); // 'end' can come later: a receiver may hold the answer back
    statusFrom(t);
  });
  // The answer is complete when the server's side ends — possibly while our side is still
  // uploading (an error answered mid-upload, which resets the rest) — or the stream closes.
  // `ended`: the server ended its side itself (END_STREAM), rather than the stream being reset.
  const done = (ended: boolean): void => {
    if (settled) return;
    if (status === undefined) {
      // An answer that ends without grpc-status breaks the protocol; a connection or stream that
      // breaks off before the status is a transport failure, whether or not headers had come.
      if (ended && headersSeen) {
        finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response from ${backend.address} ended without a gRPC status`));
        return;
      }
      const code = s.rstCode;
      const tls = headersSeen ? undefined : backend.tlsFailure(session, streamError);
      const e = upstreamError(GrpcStatus.UNAVAILABLE, tls
        ?? (!headersSeen ? `no answer from ${backend.address} (${code === undefined ? 'connection failed' : `stream reset ${code}`})`
          : `stream from ${backend.address} reset (${code ?? 'connection closed'}) before its gRPC status`), true);
      // Nothing reached Triton when the stream never opened (the connection failed first) or
      // was refused: REFUSED_STREAM, which nghttp2 also reports for streams above a GOAWAY's
      // last stream id, means no application processing happened (RFC 9113 §8.7).
      const unsent = !headersSeen && (firstSentNs === 0n || code === constants.NGHTTP2_REFUSED_STREAM);
      finish(unsent ? notSent(e) : e);
      return;
    }
    if (status !== GrpcStatus.OK) {
      finish(upstreamError(status, statusMessage, false));
      return;
    }
    if (expected < 0 || received !== expected) {
      finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream response ended after ${received} of ${Math.max(expected, 0)} message bytes`));
      return;
    }
    if (endNs === 0n) endNs = process.hrtime.bigint(); // the status came without trailers
    finish(undefined, { chunks, byteLength: received, timing: timing() });
  };
  s.on('end', () => done(true));
  s.on('close', () => done(false));
  let streamError: Error | undefined;
  s.on('error', (err: Error) => { streamError = err; /* 'close' follows and reports */ });
  return call;
}
