// A TCP fault proxy for the fault-injection suite (test/faults/): listens on 127.0.0.1:0 and
// forwards every connection to a target; what it does to the bytes is switched at run time.
//
//   pass        forward both ways
//   refuse      new connections are reset at once (RST): a dead process whose port is closed
//   black-hole  accept and read, never forward, never answer: a partitioned host
//   delay       forward each chunk `delayMs` late (order kept): a slow link
//   cut         forward `cutAfterBytes` bytes of the answer direction, then reset both sides
//
// reset() destroys the open connections with RST (a killed process); kill() is refuse + reset.
//
// When the client speaks HTTP/2 (prior knowledge, as gRPC does) the proxy also reads the frame
// headers going each way (9 bytes each, RFC 9113 §4.1; no HPACK needed) and reports them as
// 'frame' events, so a test sees on the wire when the gateway opens a call (HEADERS) and when it
// cancels one (RST_STREAM), whatever the mode.
import { EventEmitter } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

export type FaultMode = 'pass' | 'refuse' | 'black-hole' | 'delay' | 'cut';

/** Which way a byte or frame went: `up` client → target, `down` target → client. */
export type Direction = 'up' | 'down';

export interface Frame {
  /** Which client connection (1, 2, … in accept order): stream ids are per connection. */
  readonly conn: number;
  readonly direction: Direction;
  /** RFC 9113 §6: 0 DATA, 1 HEADERS, 3 RST_STREAM, 4 SETTINGS, 6 PING, 7 GOAWAY, 8 WINDOW_UPDATE. */
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly length: number;
  /** performance.now() when the proxy read the frame's header. */
  readonly at: number;
  /** RST_STREAM and GOAWAY: the error code (8 = CANCEL), once the payload was read. */
  readonly errorCode?: number;
}

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;
const END_STREAM = 0x1;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export interface FaultProxyOptions {
  readonly delayMs?: number;
  readonly cutAfterBytes?: number;
}

/**
 * Incremental HTTP/2 frame-header reader for one direction. `up` must start with the client
 * preface; anything else means the peer does not speak HTTP/2 and parsing stops.
 */
class FrameReader {
  #skip: number;
  #header = Buffer.alloc(0);
  #payloadLeft = 0;
  #pending: { frame: Omit<Frame, 'errorCode'>; code: Buffer } | undefined;
  #off = false;

  constructor(readonly conn: number, readonly direction: Direction, private readonly emit: (f: Frame) => void) {
    this.#skip = direction === 'up' ? PREFACE.length : 0;
  }

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.#off) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - at);
        const seen = PREFACE.length - this.#skip;
        if (!chunk.subarray(at, at + n).equals(PREFACE.subarray(seen, seen + n))) this.#off = true;
        this.#skip -= n;
        at += n;
        continue;
      }
      if (this.#payloadLeft > 0) {
        const n = Math.min(this.#payloadLeft, chunk.length - at);
        const p = this.#pending;
        if (p !== undefined && p.code.length < 4) {
          // the error code: RST_STREAM's whole payload, GOAWAY's bytes 4..8
          const start = p.frame.type === FRAME.GOAWAY ? 4 : 0;
          const consumed = p.frame.length - this.#payloadLeft;
          const piece = chunk.subarray(at, at + n);
          for (let i = 0; i < piece.length && p.code.length < 4; i++) {
            if (consumed + i >= start) p.code = Buffer.concat([p.code, piece.subarray(i, i + 1)]);
          }
          if (p.code.length === 4) {
            this.emit({ ...p.frame, errorCode: p.code.readUInt32BE(0) });
            this.#pending = undefined;
          }
        }
        this.#payloadLeft -= n;
        at += n;
        continue;
      }
      const need = 9 - this.#header.length;
      this.#header = Buffer.concat([this.#header, chunk.subarray(at, at + need)]);
      at += Math.min(need, chunk.length - at);
      if (this.#header.length < 9) break;
      const h = this.#header;
      this.#header = Buffer.alloc(0);
      const frame = {
        conn: this.conn,
        direction: this.direction,
        length: h.readUIntBE(0, 3),
        type: h[3]!,
        flags: h[4]!,
        streamId: h.readUInt32BE(5) & 0x7fffffff,
        at: performance.now(),
      };
      this.#payloadLeft = frame.length;
      if ((frame.type === FRAME.RST_STREAM || frame.type === FRAME.GOAWAY) && frame.length >= 4) {
        this.#pending = { frame, code: Buffer.alloc(0) };
      } else {
        this.emit(frame);
      }
    }
  }
}

interface Pair {
  readonly client: Socket;
  target: Socket | undefined;
  /** Answer bytes forwarded so far (the `cut` mode counts them). */
  down: number;
  /** Per direction: when the last delayed chunk is due, so delay keeps order. */
  dueUp: number;
  dueDown: number;
}

/**
 * Emits 'connection' (a client connected), 'frame' (Frame), 'closed' (a client connection ended).
 * Counters are cumulative.
 */
export class FaultProxy extends EventEmitter {
  readonly #server: Server;
  readonly #target: { host: string; port: number };
  readonly #pairs = new Set<Pair>();
  /**
   * Every socket the proxy made or accepted and that has not closed, pairs or not: close() destroys
   * them all (through resetSocket, which never leaves a handle Node cannot close).
   */
  readonly #sockets = new Set<Socket>();
  /** Per connection: whether it has closed (its streams are then over). */
  readonly #closedConns = new Map<number, boolean>();
  #mode: FaultMode = 'pass';
  #delayMs = 0;
  #cutAfterBytes = 0;
  /** Client connections accepted (refused ones included). */
  accepted = 0;
  /** Bytes read from clients / from the target. */
  bytesUp = 0;
  bytesDown = 0;
  /** Every frame seen, in order (HTTP/2 clients only). */
  readonly frames: Frame[] = [];

  private constructor(server: Server, target: { host: string; port: number }) {
    super();
    this.#server = server;
    this.#target = target;
  }

  static async start(target: { host?: string; port: number }): Promise<FaultProxy> {
    const server = createServer({ noDelay: true });
    const proxy = new FaultProxy(server, { host: target.host ?? '127.0.0.1', port: target.port });
    server.on('connection', (s) => proxy.#accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** `127.0.0.1:<port>`, as a backend address. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get mode(): FaultMode {
    return this.#mode;
  }

  /** Client connections open now. */
  get open(): number {
    return this.#pairs.size;
  }

  /** Applies to new connections and to every chunk of the open ones from now on. */
  setMode(mode: FaultMode, options: FaultProxyOptions = {}): this {
    this.#mode = mode;
    this.#delayMs = options.delayMs ?? this.#delayMs;
    this.#cutAfterBytes = options.cutAfterBytes ?? this.#cutAfterBytes;
    return this;
  }

  /** Destroys every open connection, both sides, with RST. */
  reset(): void {
    for (const p of this.#pairs) this.#drop(p);
  }

  /** A killed backend: new connections refused, open ones reset. */
  kill(): void {
    this.setMode('refuse');
    this.reset();
  }

  /** Frames seen of one type, optionally one direction. */
  framesOf(type: number, direction: Direction = 'up'): Frame[] {
    return this.frames.filter((f) => f.type === type && f.direction === direction);
  }

  /**
   * Calls open now as seen on the wire (HTTP/2): streams the client opened with HEADERS that
   * neither side ended (END_STREAM from the target, RST_STREAM either way, or the connection closed).
   */
  openStreams(): number {
    const open = new Set<string>();
    for (const f of this.frames) {
      if (f.streamId === 0) continue;
      const id = `${f.conn}:${f.streamId}`;
      if (f.type === FRAME.HEADERS && f.direction === 'up' && !open.has(id)) open.add(id);
      else if (f.type === FRAME.RST_STREAM) open.delete(id);
      else if (f.direction === 'down' && (f.flags & END_STREAM) !== 0 && (f.type === FRAME.HEADERS || f.type === FRAME.DATA)) open.delete(id);
    }
    for (const [conn, closed] of this.#closedConns) if (closed) for (const id of [...open]) if (id.startsWith(`${conn}:`)) open.delete(id);
    return open.size;
  }

  /** Stops listening and resets whatever is open; bounded (sockets are destroyed, not drained). */
  async close(): Promise<void> {
    this.reset();
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    this.accepted++;
    if (this.#mode === 'refuse') {
      resetSocket(client);
      return;
    }
    this.#track(client);
    const pair: Pair = { client, target: undefined, down: 0, dueUp: 0, dueDown: 0 };
    this.#pairs.add(pair);
    this.emit('connection');
    const onFrame = (f: Frame): void => {
      this.frames.push(f);
      this.emit('frame', f);
    };
    const conn = this.accepted;
    this.#closedConns.set(conn, false);
    const upFrames = new FrameReader(conn, 'up', onFrame);
    const downFrames = new FrameReader(conn, 'down', onFrame);
    client.on('error', () => this.#drop(pair));
    client.on('close', () => {
      this.#closedConns.set(conn, true);
      this.#drop(pair);
      if (this.#pairs.delete(pair)) this.emit('closed');
    });
    client.on('end', () => pair.target?.end());

    // A black hole never dials the target; every other mode does, at once.
    if (this.#mode !== 'black-hole') this.#dial(pair, downFrames);
    client.on('data', (chunk: Buffer) => {
      this.bytesUp += chunk.length;
      upFrames.push(chunk);
      this.#forward(pair, 'up', chunk);
    });
  }

  #dial(pair: Pair, downFrames: FrameReader): void {
    const target = connect({ host: this.#target.host, port: this.#target.port, noDelay: true });
    this.#track(target);
    pair.target = target;
    // Target unreachable or gone: the client sees its connection reset, as with no proxy.
    target.on('error', () => this.#drop(pair));
    target.on('close', () => this.#drop(pair));
    target.on('end', () => pair.client.end());
    target.on('data', (chunk: Buffer) => {
      this.bytesDown += chunk.length;
      downFrames.push(chunk);
      this.#forward(pair, 'down', chunk);
    });
  }

  #forward(pair: Pair, direction: Direction, chunk: Buffer): void {
    const to = direction === 'up' ? pair.target : pair.client;
    switch (this.#mode) {
      case 'black-hole':
        return; // read and dropped
      case 'refuse': // open connections keep flowing until reset(): refuse is about new ones
      case 'pass':
        if (to !== undefined && !to.destroyed) to.write(chunk);
        return;
      case 'delay': {
        const key = direction === 'up' ? 'dueUp' : 'dueDown';
        const due = Math.max(performance.now() + this.#delayMs, pair[key]);
        pair[key] = due;
        setTimeout(() => {
          const dest = direction === 'up' ? pair.target : pair.client;
          if (dest !== undefined && !dest.destroyed) dest.write(chunk);
        }, due - performance.now());
        return;
      }
      case 'cut': {
        if (direction === 'up') {
          if (to !== undefined && !to.destroyed) to.write(chunk);
          return;
        }
        const room = this.#cutAfterBytes - pair.down;
        const piece = chunk.subarray(0, Math.max(0, room));
        pair.down += piece.length;
        if (piece.length > 0) pair.client.write(piece);
        if (pair.down >= this.#cutAfterBytes) {
          // RST once the piece is flushed: the client gets exactly cutAfterBytes, then a reset.
          pair.client.write(Buffer.alloc(0), () => this.#drop(pair));
        }
        return;
      }
    }
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  #drop(pair: Pair): void {
    resetSocket(pair.client);
    if (pair.target !== undefined) resetSocket(pair.target);
  }
}

/**
 * Closes a socket with RST where Node can, else as it can. Two cases need care:
 * - Still connecting: resetAndDestroy() only waits for 'connect' to reset, and a connect to a
 *   Triton that is starting (listening, its accept queue full) can wait in SYN retries for
 *   minutes. There is nothing to reset yet: destroy() closes the handle at once.
 * - Ended, its shutdown not yet done (end() called, 'finish' not yet emitted), as when the target
 *   has just sent FIN and the proxy passed it on: libuv refuses the reset of a stream that is
 *   shutting down (uv_tcp_close_reset returns UV_EINVAL), but Node's TCPWrap::Reset marks the
 *   handle closing all the same. The socket then emits 'error' (EINVAL, reset) and never 'close';
 *   its handle is never closed, so it stays in the environment's handle queue, and at exit
 *   node::Environment::CleanupHandles calls uv_run(UV_RUN_ONCE) in a loop, at full CPU, for ever,
 *   waiting for a close that was never asked for. That was the faults run that spun in its
 *   teardown. destroy() closes it (with FIN, the shutdown already on its way).
 */
export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.connecting || (socket.writableEnded && !socket.writableFinished)) socket.destroy();
  else socket.resetAndDestroy();
}
