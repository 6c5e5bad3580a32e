// ModelInfer as our own unary gRPC call on node:http2 (DESIGN.md §3.2): the framed request is
// written by reference, response DATA chunks are kept as views, status comes from the trailers
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
import {
  type ClientHttp2Session, type ClientHttp2Stream, connect, constants, type IncomingHttpHeaders,
} from 'node:http2';
import { GatewayError } from '../errors';
import { type CallOptions, type DataPlane, MAX_MESSAGE_BYTES, type MessageHolds, MODEL_INFER_PATH, type ResponseMessage } from './data-plane';
import { GrpcStatus, upstreamError } from './status';

const WINDOW_BYTES = 32 * 1024 * 1024;
const NO_HOLDS: MessageHolds = { hold: () => () => undefined };

/** One lazily connected HTTP/2 session per backend, replaced when it closes or fails. */
class Backend {
  #session: ClientHttp2Session | undefined;
  constructor(readonly address: string) {}

  session(): ClientHttp2Session {
    const s = this.#session;
    if (s !== undefined && !s.closed && !s.destroyed) return s;
    const session = connect(`http://${this.address}`, {
      maxSessionMemory: 256, // MB: several 16 MiB messages in flight must not trip nghttp2's cap
      settings: { initialWindowSize: WINDOW_BYTES, enablePush: false },
      // Triton's grpc-message can end in a blank ("... got [6]. "); strict RFC 9113 checking
      // would drop the header and with it Triton's message.
      strictFieldWhitespaceValidation: false,
    });
    session.on('connect', () => session.setLocalWindowSize(WINDOW_BYTES));
    session.on('error', () => { /* reported on the streams; the next call reconnects */ });
    session.on('close', () => {
      if (this.#session === session) this.#session = undefined;
    });
    session.unref();
    this.#session = session;
    return session;
  }

  close(): void {
    this.#session?.close();
    this.#session = undefined;
  }
}

export class H2DataPlane implements DataPlane {
  readonly #backends: Backend[];
  readonly #headers: Record<string, string>;
  readonly #holds: MessageHolds;
  #next = 0;

  /**
   * `restriction`: Triton's triton-grpc-protocol-<key> metadata when its inference group is restricted.
   * `holds`: the buffer pool the messages may come from.
   */
  constructor(addresses: readonly string[], restriction?: readonly [string, string], holds: MessageHolds = NO_HOLDS) {
    this.#backends = addresses.map((a) => new Backend(a));
    this.#headers = restriction === undefined ? {} : { [restriction[0]]: restriction[1] };
    this.#holds = holds;
  }

  modelInfer(message: Buffer, options: CallOptions): Promise<ResponseMessage> {
    const backend = this.#backends[this.#next++ % this.#backends.length]!;
    return unaryCall(backend, MODEL_INFER_PATH, message, options, this.#headers, this.#holds);
  }

  close(): void {
    for (const b of this.#backends) b.close();
  }
}

/** grpc-timeout: at most 8 digits, in the coarsest unit that keeps the value. */
function grpcTimeout(ms: number): string {
  const v = Math.max(1, Math.ceil(ms));
  return v < 1e8 ? `${v}m` : `${Math.ceil(v / 1000)}S`;
}

/** grpc-message is percent-encoded (gRPC over HTTP/2 spec). */
function decodeGrpcMessage(m: string | string[] | undefined): string {
  const s = Array.isArray(m) ? m.join(',') : m ?? '';
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function unaryCall(
  backend: Backend, path: string, message: Buffer, options: CallOptions, headers: Record<string, string>, holds: MessageHolds,
): Promise<ResponseMessage> {
  return new Promise<ResponseMessage>((resolve, reject) => {
    const remaining = options.deadline - Date.now();
    if (remaining <= 0) {
      reject(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false));
      return;
    }
    let stream: ClientHttp2Stream;
    let settled = false;
    const finish = (err: GatewayError | undefined, value?: ResponseMessage): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      if (err) {
        if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
        reject(err);
      } else {
        resolve(value!);
      }
    };
    const onAbort = (): void => finish(upstreamError(GrpcStatus.CANCELLED, 'Cancelled on client', false));
    // Our own deadline, in case the server never answers: a little after Triton's.
    const timer = setTimeout(() => finish(upstreamError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline Exceeded', false)), remaining + 50);

    let session: ClientHttp2Session;
    try {
      session = backend.session();
      stream = session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': grpcTimeout(remaining),
        'user-agent': 'tensorgate',
        ...headers,
        ...options.metadata,
      });
    } catch (err) {
      clearTimeout(timer);
      reject(upstreamError(GrpcStatus.UNAVAILABLE, (err as Error).message, true, err));
      return;
    }
    if (options.signal.aborted) {
      onAbort();
      return;
    }
    options.signal.addEventListener('abort', onAbort, { once: true });

    let status: number | undefined;
    let statusMessage = '';
    let headersSeen = false;
    let sentNs = 0n;
    let firstByteNs = 0n;
    const chunks: Buffer[] = [];
    let prefix: Buffer | undefined; // the 5-byte message prefix, possibly split across chunks
    let expected = -1;
    let received = 0;

    const statusFrom = (h: IncomingHttpHeaders): void => {
      const s = h['grpc-status'];
      if (s !== undefined) {
        status = Number(s);
        statusMessage = decodeGrpcMessage(h['grpc-message']);
      }
    };

    stream.on('response', (headers) => {
      headersSeen = true;
      firstByteNs = process.hrtime.bigint();
      const httpStatus = headers[':status'];
      if (httpStatus !== 200) {
        finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream answered HTTP ${httpStatus} instead of a gRPC response`));
        return;
      }
      statusFrom(headers); // trailers-only answer: the status is in the headers
    });
    stream.on('data', (chunk: Buffer) => {
      let c = chunk;
      if (expected < 0) {
        prefix = prefix === undefined ? c : Buffer.concat([prefix, c]);
        if (prefix.length < 5) return;
        if (prefix[0] !== 0) {
          finish(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression'));
          return;
        }
        expected = prefix.readUInt32BE(1);
        if (expected > MAX_MESSAGE_BYTES) {
          finish(upstreamError(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${expected} vs. ${MAX_MESSAGE_BYTES})`, false));
          return;
        }
        c = prefix.subarray(5);
      }
      if (c.length === 0) return;
      const take = Math.min(c.length, expected - received);
      if (take > 0) {
        chunks.push(take === c.length ? c : c.subarray(0, take));
        received += take;
      }
    });
    stream.on('trailers', (trailers) => statusFrom(trailers));
    const letGo = holds.hold(message);
    stream.on('close', () => {
      letGo(false); // nothing if the write already reported (see the top of this file)
      if (settled) return;
      if (status === undefined) {
        const code = stream.rstCode;
        const transport = !headersSeen;
        finish(upstreamError(GrpcStatus.UNAVAILABLE,
          transport ? `no answer from ${backend.address} (${code === undefined ? 'connection failed' : `stream reset ${code}`})`
            : `stream from ${backend.address} ended without a gRPC status`, transport));
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
      finish(undefined, { chunks, byteLength: received, timing: { sentNs, firstByteNs, endNs: process.hrtime.bigint() } });
    });
    stream.on('error', () => { /* 'close' follows and reports */ });
    stream.end(message, (err?: Error | null) => {
      sentNs = process.hrtime.bigint();
      letGo(err == null);
    });
  });
}
