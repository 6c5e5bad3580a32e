// The body bytes of every answer, counted where every answer is written: the response objects
// node:http and node:http2 make for each request are these subclasses (their `ServerResponse` and
// `Http2ServerResponse` options), whose write() and end() add up what is handed to a connection
// still open. JSON, binary, server-sent events, errors, compressed or not: one count, read into the
// request's record when it is reported (ingress/server.ts), the access line's `bytes_out`.
import { ServerResponse } from 'node:http';
import { Http2ServerResponse, type ServerHttp2Stream } from 'node:http2';

/** The bytes `chunk` puts on the wire, written with `encoding`. */
export const chunkBytes = (chunk: unknown, encoding?: unknown): number => {
  if (typeof chunk === 'string') return Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding as BufferEncoding : 'utf8');
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
};

/** An HTTP/1.1 answer (node:http and node:https). */
export class CountedResponse extends ServerResponse {
  /** Body bytes handed to the connection (not those written after it closed). */
  bodyBytes = 0;

  override write(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    if (this.socket !== null && !this.socket.destroyed) this.bodyBytes += chunkBytes(chunk, encoding);
    return (super.write as (...args: unknown[]) => boolean)(chunk, encoding, cb);
  }

  override end(chunk?: unknown, encoding?: unknown, cb?: unknown): this {
    if (typeof chunk !== 'function' && this.socket !== null && !this.socket.destroyed) this.bodyBytes += chunkBytes(chunk, encoding);
    return (super.end as (...args: unknown[]) => this)(chunk, encoding, cb);
  }
}

/** Told after each write and end of an HTTP/2 answer it watches (the slow-reader bound, ingress/h2.ts). */
export interface WriteWatcher {
  afterWrite(stream: ServerHttp2Stream): void;
}

/** An HTTP/2 answer (node:http2's compatibility API, h2c and h2). */
export class CountedH2Response extends Http2ServerResponse {
  bodyBytes = 0;
  watcher: WriteWatcher | undefined = undefined;

  /** Its stream is open (the response lets go of a closed one). */
  get #open(): boolean {
    const stream = this.stream as ServerHttp2Stream | null | undefined;
    return stream != null && !stream.destroyed;
  }

  override write(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    if (this.#open) this.bodyBytes += chunkBytes(chunk, encoding);
    const r = (super.write as (...args: unknown[]) => boolean)(chunk, encoding, cb);
    this.#tell();
    return r;
  }

  override end(chunk?: unknown, encoding?: unknown, cb?: unknown): this {
    if (typeof chunk !== 'function' && this.#open) this.bodyBytes += chunkBytes(chunk, encoding);
    (super.end as (...args: unknown[]) => this)(chunk, encoding, cb);
    this.#tell();
    return this;
  }

  #tell(): void {
    if (this.watcher !== undefined && this.#open) this.watcher.afterWrite(this.stream);
  }
}

/** The body bytes an answer has handed to its connection so far. */
export const bodyBytesOf = (res: object): number => (res as { bodyBytes?: number }).bodyBytes ?? 0;
