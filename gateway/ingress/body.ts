// Reading a request body with its limits checked before allocating: the declared length first,
// then the running count, then (for gzip/deflate) the inflated count, which stops inflation as
// soon as it passes the budget (docs/architecture.md#limits). Chunks are kept as node:http hands them over
// (one copy we cannot avoid on node:http); nothing is concatenated here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createUnzip, type Unzip } from 'node:zlib';
import type { Config } from '../config/schema';
import { GatewayError } from '../errors';
import { gather } from '../infer/gather';

export interface Body {
  readonly chunks: readonly Buffer[];
  readonly length: number;
}

/**
 * The config's limits: `maxBodyBytes` caps an inference body as sent, `maxInputSizeBytes` its
 * inflated size when compressed — and the whole of a control (admin) body.
 */
export type BodyLimits = Pick<Config['limits'], 'maxBodyBytes' | 'maxInputSizeBytes'>;

/** A cap on the body as sent, and the key that sets it (named in the 413). */
interface Cap {
  readonly bytes: number;
  readonly key: 'limits.maxBodyBytes' | 'limits.maxInputSizeBytes';
}

const bodyCap = (limits: BodyLimits): Cap => ({ bytes: limits.maxBodyBytes, key: 'limits.maxBodyBytes' });

export type RequestEncoding = 'gzip' | 'deflate' | undefined;

/**
 * Content-Encoding as Triton reads it: an exact, case-sensitive match of gzip or deflate; identity
 * or empty means none; anything else is 501 (with Accept-Encoding in the answer).
 */
export function requestEncoding(req: IncomingMessage): RequestEncoding {
  const v = req.headers['content-encoding'];
  if (v === undefined || v === '' || v === 'identity') return undefined;
  if (v === 'gzip' || v === 'deflate') return v;
  throw new GatewayError('GW_ERR_REQUEST_ENCODING_UNSUPPORTED', 'Unsupported compression type');
}

const INT32_MAX = 2 ** 31 - 1;

/** The declared Content-Length, checked against Triton's int32 parse and our body cap. */
export function declaredLength(req: IncomingMessage, limits: BodyLimits): number | undefined {
  return declared(req, bodyCap(limits));
}

function declared(req: IncomingMessage, cap: Cap): number | undefined {
  const v = req.headers['content-length'];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (n > INT32_MAX) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID',
      `Unable to parse Content-Length, value is out of range [ -2147483648, 2147483647 ], got: ${v}`);
  }
  if (n > cap.bytes) throw tooLarge(n, cap);
  return n;
}

function tooLarge(n: number, cap: Cap): GatewayError {
  return new GatewayError('GW_ERR_REQUEST_TOO_LARGE', `request body of ${n} bytes exceeds the limit of ${cap.bytes} bytes (${cap.key})`);
}

/**
 * Streams an uncompressed body of declared length to `onChunk` as it arrives (nothing retained).
 * Resolves with the byte count once the body ended complete; rejects with what onChunk throws
 * (the rest of the body is drained), or when the client goes away or sends a short body.
 */
export function streamBody(req: IncomingMessage, declared: number, onChunk: (chunk: Buffer) => void): Promise<number> {
  return streamBodyUntil(req, declared, onChunk, undefined) as Promise<number>;
}

/**
 * Ends a streamBodyUntil's wait early: `stop` (a function, for the upload's failure callback) may
 * be called before or while the body is awaited.
 */
export class BodyStop {
  #stopped = false;
  #settle: (() => void) | undefined;

  readonly stop = (): void => {
    this.#stopped = true;
    this.#settle?.();
  };

  /** `settle` runs at once if stopped already, else when stop() is called. */
  onStop(settle: () => void): void {
    if (this.#stopped) settle();
    else this.#settle = settle;
  }
}

/**
 * streamBody that stops waiting as soon as `until` is stopped (the upstream call failed
 * mid-upload): resolves undefined then; the rest of the body keeps flowing and is dropped.
 */
export function streamBodyUntil(req: IncomingMessage, declared: number, onChunk: (chunk: Buffer) => void,
  until: BodyStop | undefined): Promise<number | undefined> {
  return new Promise<number | undefined>((resolve, reject) => {
    let length = 0;
    let settled = false;
    const fail = (err: unknown): void => {
      if (settled) return;
      settled = true;
      req.removeAllListeners('data');
      req.resume(); // what is left is the server's to discard, within its bound (discardRest)
      reject(err);
    };
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      length += chunk.length;
      try {
        onChunk(chunk);
      } catch (err) {
        fail(err);
      }
    });
    req.on('end', () => {
      if (settled) return;
      if (length !== declared) {
        fail(new GatewayError('GW_ERR_REQUEST_ABORTED', `the body ended after ${length} of ${declared} bytes`));
        return;
      }
      settled = true;
      resolve(length);
    });
    onClientGone(req, fail);
    until?.onStop(() => {
      if (settled) return;
      settled = true;
      resolve(undefined);
    });
  });
}

/**
 * An inference body, whole: at most limits.maxBodyBytes as sent, limits.maxInputSizeBytes inflated.
 * `observe` sees each kept chunk as it arrives (a decoder working while the rest uploads).
 */
export function readBody(req: IncomingMessage, limits: BodyLimits, encoding: RequestEncoding, observe?: (chunk: Buffer) => void): Promise<Body> {
  return read(req, bodyCap(limits), limits.maxInputSizeBytes, encoding, observe);
}

/**
 * A control (admin) body as one buffer: at most limits.maxInputSizeBytes; Content-Encoding is
 * ignored, as Triton does on these endpoints.
 */
export async function readControlBody(req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  const body = await read(req, { bytes: limits.maxInputSizeBytes, key: 'limits.maxInputSizeBytes' }, limits.maxInputSizeBytes, undefined);
  return gather(body.chunks, body.length);
}

/** A decompressed body's output buffers: glibc's mmap threshold as the launchers set it (bin/tensorgate). */
export const INFLATE_CHUNK_BYTES = 128 * 1024;

function read(req: IncomingMessage, cap: Cap, maxDecompressedBytes: number, encoding: RequestEncoding, observe?: (chunk: Buffer) => void): Promise<Body> {
  declared(req, cap);
  return new Promise<Body>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let raw = 0;
    let settled = false;
    let unzip: Unzip | undefined;
    const fail = (err: GatewayError): void => {
      if (settled) return;
      settled = true;
      unzip?.destroy();
      req.resume(); // what is left is the server's to discard, within its bound (discardRest)
      reject(err);
    };
    const done = (): void => {
      if (settled) return;
      settled = true;
      resolve({ chunks, length });
    };
    const keep = (chunk: Buffer, limit: number, onOver: () => GatewayError): void => {
      length += chunk.length;
      if (length > limit) {
        fail(onOver());
        return;
      }
      chunks.push(chunk);
      observe?.(chunk);
    };

    if (encoding !== undefined) {
      // Unzip detects the gzip or zlib wrapper itself, for either header value, as Triton does.
      // Its output buffers are INFLATE_CHUNK_BYTES: at zlib's default 16 KiB they came from glibc's
      // main arena, and a burst of gzip bombs (each inflating to the limit) left it 60–75 MB
      // larger, in holes it never returns; at the mmap threshold each is a mapping of its own,
      // unmapped when freed (bench/RESULTS.md "Memory after a burst of fuzz requests").
      unzip = createUnzip({ chunkSize: INFLATE_CHUNK_BYTES });
      const max = maxDecompressedBytes;
      unzip.on('data', (c: Buffer) => keep(c, max, () => new GatewayError('GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE',
        `Decompressed data size exceeds the maximum allowed value of ${max} bytes. Use --http-max-input-size to increase the limit.`)));
      // Triton takes what inflated before a corrupt or truncated stream as the whole body and
      // forwards it (an empty body for bytes that were never compressed); the model then fails
      // on a body the client never sent. Refused here instead (docs/differences.md).
      const enc = encoding;
      unzip.on('error', (err: Error) => fail(new GatewayError('GW_ERR_REQUEST_COMPRESSED_INVALID',
        `the ${enc} request body could not be decompressed: ${err.message}`, { cause: err })));
      unzip.on('end', done);
    }
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      raw += chunk.length;
      if (raw > cap.bytes) {
        fail(tooLarge(raw, cap));
        return;
      }
      if (unzip) unzip.write(chunk);
      else keep(chunk, Infinity, () => tooLarge(raw, cap));
    });
    req.on('end', () => {
      // An empty body stays empty (zlib would call it a truncated stream).
      if (unzip && raw > 0) unzip.end();
      else done();
    });
    onClientGone(req, fail);
  });
}

/** What a request is recorded with when its client closed the connection before its body was complete. */
export function bodyCut(): GatewayError {
  return new GatewayError('GW_ERR_REQUEST_ABORTED', 'the client closed the connection before the body was complete');
}

/** A body that will never complete: the connection closed early, or reading failed. */
function onClientGone(req: IncomingMessage, fail: (err: GatewayError) => void): void {
  // Gone before the handler began to read (it awaited the model's config first): no event will come.
  if (req.destroyed && !req.complete) {
    fail(new GatewayError('GW_ERR_REQUEST_ABORTED', 'the connection closed before the body was read'));
    return;
  }
  // 'close' before 'end' (req.complete false) is the current signal; 'aborted' is deprecated.
  req.on('close', () => {
    if (!req.complete) fail(bodyCut());
  });
  req.on('error', () => fail(new GatewayError('GW_ERR_REQUEST_ABORTED', 'the request body could not be read')));
}

/** How much of an unread body an early answer drains (server.discardBodyBytes, server.discardBodyMs). */
export interface DiscardBound {
  readonly bytes: number;
  readonly ms: number;
}

/** Requests whose rest is being discarded already. */
const discarding = new WeakSet<IncomingMessage>();

/** The request has a body that has not been read to its end. */
export function hasUnreadBody(req: IncomingMessage): boolean {
  if (req.complete || req.readableEnded) return false;
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/**
 * An answer given before the body was read (413, 503, 401, 404, …): reads and drops at most
 * `bound.bytes` of the rest for at most `bound.ms`, then closes the connection — where node:http
 * would read a declared gigabyte to its end to keep the connection alive. Closing at once is no
 * better: a close with unread data is a TCP reset, which may destroy the answer before the client
 * reads it (RFC 9112 §9.6; nginx's lingering close exists for this).
 *
 * Call it before the answer's head is written: a rest declared within `bound.bytes` keeps the
 * connection alive (drained within the bounds, else closed); a larger or chunked one makes the
 * answer say `Connection: close`, and the connection lingers, half-closed, until the client
 * closes it or a bound is hit. Called after the head was written, it only bounds the drain.
 */
export function discardRest(req: IncomingMessage, res: ServerResponse, bound: DiscardBound): void {
  // HTTP/2: a stream whose body is unread is reset with NO_ERROR once its answer is out (RFC 9113
  // §8.1, ingress/h2.ts endUnreadBody); the connection and its other streams are not touched.
  if (req.httpVersionMajor === 2) return;
  if (!hasUnreadBody(req) || discarding.has(req)) return;
  discarding.add(req);
  const socket = req.socket;
  const cut = (): void => {
    clearTimeout(timer);
    socket.destroy();
  };
  // Unref'd: it bounds a connection, it does not keep a gateway that is closing alive.
  const timer = setTimeout(cut, bound.ms).unref();
  let left = bound.bytes;
  // A 'data' listener also keeps node:http from dumping the body itself (it reads to the end).
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) cut();
  });
  const declared = req.headers['transfer-encoding'] === undefined ? Number(req.headers['content-length']) : NaN;
  if (declared <= bound.bytes || res.headersSent) {
    req.once('close', () => clearTimeout(timer)); // drained in time: the connection lives on
    return;
  }
  res.shouldKeepAlive = false;
  socket.once('close', () => clearTimeout(timer));
  // All read: nothing left to reset the connection with once the answer is out.
  req.once('end', () => {
    if (socket.writableFinished) socket.destroy();
    else socket.once('finish', () => socket.destroy());
  });
  // node:http destroys a `Connection: close` socket as soon as the answer is flushed (destroySoon);
  // this one only half-closes it and keeps reading until the client closes or a bound cuts it.
  socket.destroySoon = () => {
    socket.end();
  };
}
