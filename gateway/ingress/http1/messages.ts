// The fast path's request and answer (docs/architecture.md, "The HTTP/1.1 fast path"): what the hot
// inference route, the exchange (ingress/server.ts), the body readers (ingress/body.ts) and the
// answer writers (egress/) use of node:http's IncomingMessage and ServerResponse, and nothing more —
// no Readable, no OutgoingMessage queue. The body is pushed from the connection's reads
// (http1/fast.ts); the answer's head is serialized as Node's lib/_http_outgoing.js does it
// (header order, Date, Connection, Keep-Alive) and leaves corked with its first body bytes, so a
// whole answer is one writev.
import { EventEmitter } from 'node:events';
import { type IncomingHttpHeaders, type OutgoingHttpHeader, type OutgoingHttpHeaders, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

/** The bytes `chunk` puts on the wire (as ingress/counted-response.ts counts them). */
function chunkBytes(chunk: unknown, encoding?: unknown): number {
  if (typeof chunk === 'string') return Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding as BufferEncoding : 'utf8');
  return chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/** What the connection does for its current request (http1/fast.ts FastConnection). */
export interface BodyFlow {
  /** Stop reading the socket (a consumer paused, or the body queue is full). */
  pauseReading(): void;
  resumeReading(): void;
  /** The answer is wholly handed to the socket. */
  answered(): void;
}

/** Body bytes queued for a request nobody reads yet before the socket is paused. */
const QUEUE_BYTES = 64 * 1024;

/**
 * A request of the fast path: the IncomingMessage subset. 'data' flows once a 'data' listener is
 * added or resume() is called (as a Readable's), 'end' once the body is complete and consumed,
 * 'close' once after the end or when destroyed.
 */
export class FastRequest extends EventEmitter {
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  complete = false;
  destroyed = false;
  readableEnded = false;
  #queued: Buffer[] = [];
  #queuedBytes = 0;
  #flowing = false;
  #paused = false;
  #scheduled = false;
  #closed = false;

  constructor(readonly socket: Socket, readonly method: string, readonly url: string, readonly headers: IncomingHttpHeaders,
    private flow: BodyFlow, readonly rawHeaders: string[]) {
    super();
    this.on('newListener', onNewListener);
  }

  /** A body chunk from the connection. */
  push(chunk: Buffer): void {
    if (this.destroyed) return;
    if (this.#flowing && !this.#paused && this.#queued.length === 0) {
      this.emit('data', chunk);
      return;
    }
    this.#queued.push(chunk);
    this.#queuedBytes += chunk.length;
    if (this.#queuedBytes > QUEUE_BYTES) this.flow.pauseReading();
  }

  /** The body's last byte has come. */
  finish(): void {
    this.complete = true;
    this.#flush();
  }

  pause(): this {
    this.#paused = true;
    this.flow.pauseReading();
    return this;
  }

  resume(): this {
    this.#paused = false;
    this.#flowing = true;
    this.flow.resumeReading();
    this.#schedule();
    return this;
  }

  /** Destroyed before its end: node:http's IncomingMessage destroys its socket then (Node's lib/_http_incoming.js). */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    if (!this.readableEnded) this.socket.destroy();
    this.close();
    return this;
  }

  /** The connection has moved on to its next request: this one's pause and resume no longer reach it. */
  detach(): void {
    this.flow = DETACHED;
  }

  /** The connection closed before the body's end (node:http's request is destroyed then). */
  aborted(): void {
    if (!this.complete) this.destroyed = true;
    this.close();
  }

  /** 'close', once: after the end, or when the connection closed first. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    process.nextTick(emitClose, this);
  }

  /** A 'data' listener was added: flows from the next tick (a Readable's on('data')). */
  startFlowing(): void {
    if (this.#flowing) return;
    this.#flowing = true;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    process.nextTick(flushNT, this);
  }

  /** Hands the queued chunks on while flowing, then 'end' once the body is complete. */
  flushQueued(): void {
    this.#scheduled = false;
    this.#flush();
  }

  #flush(): void {
    while (this.#flowing && !this.#paused && !this.destroyed && this.#queued.length > 0) {
      const c = this.#queued.shift()!;
      this.#queuedBytes -= c.length;
      if (this.#queuedBytes <= QUEUE_BYTES) this.flow.resumeReading();
      this.emit('data', c);
    }
    if (!this.complete || this.readableEnded || !this.#flowing || this.#queued.length > 0 || this.destroyed) return;
    this.readableEnded = true;
    this.emit('end');
    this.close();
  }
}

const DETACHED: BodyFlow = { pauseReading: () => undefined, resumeReading: () => undefined, answered: () => undefined };

function onNewListener(this: FastRequest, event: string | symbol): void {
  if (event === 'data') this.startFlowing();
}
const flushNT = (req: FastRequest): void => req.flushQueued();
const emitClose = (e: EventEmitter): boolean => e.emit('close');

/** A header value node:http would refuse (Node's lib/_http_common.js checkInvalidHeaderChar). */
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * The Date line, as text and as bytes, kept until its second ends (an unreferenced timer drops
 * them), as Node's lib/internal/http.js utcDate keeps its string: no clock read per answer.
 */
let dateText: string | undefined;
let dateBytes: Buffer | undefined;
export function dateLine(): string {
  return dateText ?? currentDate().text;
}
function currentDate(): { text: string; bytes: Buffer } {
  const now = new Date();
  const text = dateText = `Date: ${now.toUTCString()}\r\n`;
  const bytes = dateBytes = Buffer.from(text, 'latin1');
  setTimeout(dropDate, 1000 - now.getMilliseconds()).unref();
  return { text, bytes };
}
const dropDate = (): void => {
  dateText = undefined;
  dateBytes = undefined;
};

const uncorkNT = (socket: Socket): void => socket.uncork();

/**
 * An answer of the fast path: the ServerResponse subset. 'prefinish' at end(), 'finish' once its
 * last byte was taken by the socket, 'close' after 'finish' or when the connection closed first.
 */
export class FastResponse extends EventEmitter {
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  destroyed = false;
  /** Body bytes handed to the connection (ingress/counted-response.ts bodyBytesOf). */
  bodyBytes = 0;
  #fields: Record<string, [string, OutgoingHttpHeader]> = {};
  #closed = false;
  /** Writes handed to the socket whose callback has not come, and what end() waits for once they have. */
  #writing = 0;
  #ended: ((err?: Error | null) => void) | undefined;
  /** end(chunk) before the head, without Content-Length: the length node:http adds after Connection. */
  #implicitLength: number | undefined;

  constructor(readonly req: FastRequest | undefined, readonly socket: Socket, private readonly flow: BodyFlow,
    public shouldKeepAlive: boolean, private readonly keepAliveS: number) {
    super();
  }

  setHeader(name: string, value: OutgoingHttpHeader): this {
    this.#fields[name.toLowerCase()] = [name, value];
    return this;
  }

  getHeader(name: string): OutgoingHttpHeader | undefined {
    return this.#fields[name.toLowerCase()]?.[1];
  }

  hasHeader(name: string): boolean {
    return this.#fields[name.toLowerCase()] !== undefined;
  }

  removeHeader(name: string): void {
    delete this.#fields[name.toLowerCase()];
  }

  writeHead(status: number, headers?: OutgoingHttpHeaders): this {
    this.statusCode = status;
    if (headers !== undefined) for (const k in headers) if (headers[k] !== undefined) this.setHeader(k, headers[k]);
    return this;
  }

  cork(): void {
    this.socket.cork();
  }

  uncork(): void {
    this.socket.uncork();
  }

  write(chunk: Buffer | string, encoding?: BufferEncoding | (() => void), cb?: () => void): boolean {
    if (this.writableEnded) return false;
    this.#start();
    if (this.socket.destroyed) return false;
    this.bodyBytes += chunkBytes(chunk, encoding);
    this.#writing++;
    return this.socket.write(chunk, encoding as BufferEncoding, cb === undefined ? this.#written : (err?: Error | null) => {
      this.#written(err);
      cb();
    });
  }

  /** A write's callback: end() without a chunk finishes once the last one has come. */
  readonly #written = (err?: Error | null): void => {
    this.#writing--;
    if (this.#writing === 0 && this.#ended !== undefined) this.#ended(err);
  };

  end(chunk?: Buffer | string | (() => void), encoding?: BufferEncoding | (() => void), cb?: () => void): this {
    if (typeof chunk === 'function') [cb, chunk] = [chunk, undefined];
    else if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    if (this.writableEnded) {
      if (cb !== undefined) process.nextTick(cb);
      return this;
    }
    if (!this.headersSent && this.#fields['content-length'] === undefined) {
      this.#implicitLength = chunk === undefined ? 0 : chunkBytes(chunk, encoding);
    }
    const corked = this.#start(true);
    this.writableEnded = true;
    this.emit('prefinish');
    const alive = !this.socket.destroyed;
    if (alive && chunk !== undefined) this.bodyBytes += chunkBytes(chunk, encoding);
    const done = (err?: Error | null): void => this.#finished(err, cb);
    if (chunk !== undefined) this.socket.write(chunk, encoding as BufferEncoding, done);
    else if (this.#writing > 0) this.#ended = done; // no empty write (a system call) to learn it
    else if (alive) process.nextTick(done);
    if (corked) this.socket.uncork();
    return this;
  }

  /** Destroys the connection (node:http's res.destroy): 'close' follows from it. */
  destroy(): this {
    this.socket.destroy();
    return this;
  }

  /** The connection closed: 'close' once, and the answer counts as destroyed if it was not finished. */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.writableFinished) this.destroyed = true;
    process.nextTick(emitClose, this);
  }

  #finished(err: Error | null | undefined, cb: (() => void) | undefined): void {
    if (err != null || this.writableFinished) return; // the connection failed: its 'close' tells
    this.writableFinished = true;
    this.emit('finish');
    cb?.();
    this.closed();
    this.flow.answered();
  }

  /**
   * The head goes out with the first body bytes: corked until the next tick, or, from end()
   * (`ending`), until end() has written its last bytes; returns whether end() must uncork. A
   * socket the writer corked already (egress/write.ts) goes out at the writer's uncork.
   */
  #start(ending = false): boolean {
    if (this.headersSent) return false;
    this.headersSent = true;
    const head = this.#head();
    const socket = this.socket;
    if (socket.destroyed) return false;
    const cork = socket.writableCorked === 0;
    if (cork) {
      socket.cork();
      if (!ending) process.nextTick(uncorkNT, socket);
    }
    this.#writing++;
    socket.write(head, this.#written);
    return cork && ending;
  }

  /**
   * The status line and fields as node:http writes them (Node's lib/_http_outgoing.js _storeHeader),
   * written straight into one buffer: no string per line.
   */
  #head(): Buffer {
    const fields = this.#fields;
    // Without a length the answer ends with the connection (the fast path never chunks).
    if (fields['content-length'] === undefined && this.#implicitLength === undefined) this.shouldKeepAlive = false;
    const connection = fields.connection?.[1];
    if (connection !== undefined && /close/i.test(String(connection))) this.shouldKeepAlive = false;
    const status = statusLine(this.statusCode);
    const date = fields.date === undefined ? dateLine() : '';
    const conn = connection !== undefined ? '' : this.shouldKeepAlive ? keepAliveLines(this.keepAliveS) : 'Connection: close\r\n';
    const implicit = this.#implicitLength === undefined ? '' : String(this.#implicitLength);
    let length = status.length + date.length + conn.length + (implicit === '' ? 0 : 18 + implicit.length) + 2;
    for (const key in fields) {
      const f = fields[key]!;
      const value = f[1];
      if (!Array.isArray(value)) length += lineLength(f[0], value);
      else for (let i = 0; i < value.length; i++) length += lineLength(f[0], value[i]!);
    }
    const b = Buffer.allocUnsafe(length);
    let at = b.write(status, 0, 'latin1');
    for (const key in fields) {
      const f = fields[key]!;
      const value = f[1];
      if (!Array.isArray(value)) at = writeLine(b, at, f[0], value);
      else for (let i = 0; i < value.length; i++) at = writeLine(b, at, f[0], value[i]!);
    }
    at += b.write(date, at, 'latin1');
    at += b.write(conn, at, 'latin1');
    if (implicit !== '') at = writeLine(b, at, 'Content-Length', implicit);
    b[at] = 0x0d;
    b[at + 1] = 0x0a;
    return b;
  }
}

/** `name: value\r\n`'s length; a value node:http would refuse throws its error. */
function lineLength(name: string, value: string | number): number {
  const v = String(value);
  if (INVALID_VALUE.test(v)) throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), { code: 'ERR_INVALID_CHAR' });
  return name.length + v.length + 4;
}

function writeLine(b: Buffer, at: number, name: string, value: string | number): number {
  at += b.write(name, at, 'latin1');
  b[at++] = 0x3a; // :
  b[at++] = 0x20;
  at += b.write(String(value), at, 'latin1');
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  return at;
}

/**
 * A planned answer's head (ingress/server.ts PlannedExchange), straight into one buffer: 200, the
 * answer's `headers` in order, its Content-Length, then the lines FastResponse ends its head with.
 * With `body` (its parts, `contentLength` bytes in all), the body follows the head in the same buffer.
 */
export function plannedHead(headers: OutgoingHttpHeaders, contentLength: number, keepAlive: boolean, keepAliveS: number,
  body?: readonly Buffer[]): Buffer {
  const date = dateBytes ?? currentDate().bytes;
  const conn = keepAlive ? keepAliveBytes(keepAliveS) : CONNECTION_CLOSE;
  const lines = frozenLines(headers);
  const digits = decimalDigits(contentLength);
  let length = STATUS_200.length + CONTENT_LENGTH.length + digits + 2 + date.length + conn.length + 2;
  if (lines !== undefined) length += lines.length;
  else for (const name in headers) length += lineLength(name, fieldText(headers[name]));
  const b = Buffer.allocUnsafe(body === undefined ? length : length + contentLength);
  b.set(STATUS_200, 0);
  let at = STATUS_200.length;
  if (lines !== undefined) {
    b.set(lines, at);
    at += lines.length;
  } else for (const name in headers) at = writeLine(b, at, name, fieldText(headers[name]));
  b.set(CONTENT_LENGTH, at);
  at += CONTENT_LENGTH.length;
  for (let i = at + digits - 1, n = contentLength; i >= at; i--, n = Math.floor(n / 10)) b[i] = 0x30 + (n % 10);
  at += digits;
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  b.set(date, at);
  at += date.length;
  b.set(conn, at);
  at += conn.length;
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  if (body !== undefined) {
    for (let i = 0; i < body.length; i++) {
      b.set(body[i]!, at);
      at += body[i]!.length;
    }
  }
  return b;
}

const STATUS_200 = Buffer.from('HTTP/1.1 200 OK\r\n', 'latin1');
const CONTENT_LENGTH = Buffer.from('Content-Length: ', 'latin1');
const CONNECTION_CLOSE = Buffer.from('Connection: close\r\n', 'latin1');

/** Digits of a length (a non-negative integer). */
function decimalDigits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/**
 * The head lines of a frozen header set (a known answer's, shared by its requests: infer/answer-heads.ts),
 * checked and encoded the first time it is answered with; undefined for a set that is not frozen.
 */
const frozenLineCache = new WeakMap<object, Buffer>();
function frozenLines(headers: OutgoingHttpHeaders): Buffer | undefined {
  let lines = frozenLineCache.get(headers);
  if (lines === undefined) {
    if (!Object.isFrozen(headers)) return undefined;
    let length = 0;
    for (const name in headers) length += lineLength(name, fieldText(headers[name]));
    lines = Buffer.allocUnsafe(length);
    let at = 0;
    for (const name in headers) at = writeLine(lines, at, name, fieldText(headers[name]));
    frozenLineCache.set(headers, lines);
  }
  return lines;
}

/** A field's value as a head line has it (a number as is). */
function fieldText(v: OutgoingHttpHeaders[string]): string | number {
  return typeof v === 'number' ? v : String(v);
}

/** The status line of each code, made once. */
const statusLines: string[] = [];
function statusLine(code: number): string {
  return statusLines[code] ??= `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? 'unknown'}\r\n`;
}

/** The Connection and Keep-Alive lines of the last keep-alive timeout asked for. */
let keepAliveS = -1;
let keepAliveText = '';
let keepAliveBuffer = Buffer.alloc(0);
export function keepAliveLines(s: number): string {
  if (s !== keepAliveS) {
    keepAliveS = s;
    keepAliveText = `Connection: keep-alive\r\nKeep-Alive: timeout=${s}\r\n`;
    keepAliveBuffer = Buffer.from(keepAliveText, 'latin1');
  }
  return keepAliveText;
}

/** keepAliveLines' bytes. */
function keepAliveBytes(s: number): Buffer {
  keepAliveLines(s);
  return keepAliveBuffer;
}
