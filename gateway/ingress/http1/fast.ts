// The HTTP/1.1 fast path (docs/architecture.md, "The HTTP/1.1 fast path"): a cleartext connection
// read by our own loop. Each head is read by the strict parser (http1/head.ts); a head it accepts
// whose route is a hot inference route is served without node:http — its body pushed from the
// socket's reads to the request (http1/messages.ts), its answer written corked as one writev —
// and the next head is read from the bytes that came after it. Anything else (a head the parser
// hands off, another route, an upgrade) gives the connection to node:http with every byte read so
// far put back (socket.unshift), and the connection stays node:http's. Requests are served one at a
// time and in order: bytes of a pipelined request wait until the answer before them is out.
//
// What node:http bounds, this loop bounds the same way: server.headersTimeoutMs from a head's first
// byte, server.requestTimeoutMs until its body is complete (both answered through the server's
// 'clientError' path, ingress/client-errors.ts), server.keepAliveTimeoutMs while idle.
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { readInto, readsToNode } from '../../buffers/reads';
import { HAND_OFF, type HeadLimits, HeadParser, PARTIAL } from './head';
import { headersOf, rawHeadersOf } from './headers';
import { Back, type LaneConnection } from './lane';
import { type BodyFlow, FastRequest, FastResponse } from './messages';

/** What the loop needs of the server it serves for (ingress/server.ts). */
export interface FastHost {
  readonly limits: HeadLimits;
  readonly timeouts: { readonly headersTimeoutMs: number; readonly requestTimeoutMs: number; readonly keepAliveTimeoutMs: number };
  /**
   * Whether a request with this head is the fast path's (a hot inference route): the route's
   * match to serve it with, or undefined to hand the connection to node:http.
   */
  hot(method: string, url: string, headers: IncomingHttpHeaders): unknown;
  /** Serves a request of the fast path, with what hot() gave for it. */
  serve(req: FastRequest, res: FastResponse, hot: unknown): void;
  /**
   * A request with a body of `bodyBytes`: served without a FastRequest and FastResponse when its
   * route plans it (ingress/server.ts) — its body handed over as it is read, the request served
   * once it is whole, answered through `conn`; undefined for serve() to have it, nothing done.
   */
  planned?(conn: PlannedConnection, hot: unknown, headers: IncomingHttpHeaders, bodyBytes: number, keepAlive: boolean,
    head: Buffer | undefined, outcome: LaneOutcome | undefined): PlannedAnswer | undefined;
  /** The compiled lane, when it serves (ingress/http1/lane.ts): takes a connection between requests. */
  readonly lane?: { adopt(c: LaneConnection, first?: Buffer, headAt?: number): boolean; readonly keeps: boolean };
  /** The connection goes to node:http: `bytes` were read and not consumed. */
  handOff(socket: Socket, bytes: Buffer): void;
  /** A head has arrived on the connection (the first head's bound is over, ingress/first-head.ts). */
  headArrived(socket: Socket): void;
  /** node:http's timeouts, through its 'clientError' path. */
  timedOut(socket: Socket): void;
  /** A drain is under way: no new answer keeps its connection alive. */
  draining(): boolean;
}

/** A request the lane gave back failed or answered: it is answered so, never sent again. */
export interface LaneOutcome {
  readonly what: Back.FAILED | Back.ANSWER;
  readonly detail: unknown;
}

/** What a planned request's server uses of its connection. */
export interface PlannedConnection {
  readonly socket: Socket;
  /** The answer is wholly handed to the socket: the next request, or the connection ends. */
  plannedOut(keepAlive: boolean): void;
  /** The callback of a planned answer's last write (one function per connection): PlannedAnswer.written. */
  readonly plannedWritten: (err?: Error | null) => void;
  /** The request just served was kept by the compiled lane: the connection may be the lane's once its answer is out. */
  lanes: boolean;
}

/** A planned request under way, as its connection sees it. */
export interface PlannedAnswer {
  /** The next piece of its body, as read (by reference: a view of the socket's read). */
  body(piece: Buffer): void;
  /** Its body is whole: the request is served. */
  complete(): void;
  /** Its body was not whole within server.requestTimeoutMs: answered 408, the connection closed after. */
  timedOut(): void;
  /** Its answer's last write completed (or failed: `err`). */
  written(err?: Error | null): void;
  /** The connection closed before its answer was out. */
  closed(): void;
}

const HEAD = 0, BODY = 1, WAIT = 2, GONE = 3, LANE = 4;
/** The interim answer to Expect: 100-continue, written once the head is read as node:http does (lane.c the same). */
const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
/** Bytes of pipelined requests held while an answer is under way before the socket is paused. */
const PENDING_BYTES = 64 * 1024;
const TIMER_NONE = 0, TIMER_HEAD = 1, TIMER_REQUEST = 2, TIMER_IDLE = 3;

/** Serves `socket` (its protocol sniffed as HTTP/1.1, paused, its first bytes put back) on the fast path. */
export function serveFast(host: FastHost, socket: Socket): void {
  const c = new FastConnection(host, socket);
  socket.on('end', c.onEnd);
  socket.on('close', c.onClose);
  socket.on('drain', c.onDrain);
  socket.on('error', c.onError);
  // Reads sized by what the socket has waiting (buffers/reads.ts), each to onData; 'data' where
  // this Node cannot. What the sniffer put back (and any read since) is read first, here.
  const first = readInto(socket, c.onData) ? socket.read() as Buffer | null : undefined;
  if (first === undefined) socket.on('data', c.onData);
  // While the lane keeps heads, a new connection is its from the first read: a head it does not
  // keep comes back at once (fromLane), so only its requests' first is not JavaScript's to read.
  if (first !== undefined && first !== null && host.lane?.keeps === true && !host.draining()
    && host.lane.adopt(c, first, Date.now())) {
    c.state = LANE;
    c.disarm();
    socket.pause(); // the handle's reads stop (an onread socket's pause does, Node's lib/net.js)
    host.headArrived(socket);
    return;
  }
  // Resumed first: reading the first chunk may pause it (a body's back-pressure, held bytes).
  socket.resume();
  if (first !== undefined && first !== null) c.onData(first);
}

class FastConnection implements BodyFlow, PlannedConnection, LaneConnection {
  readonly parser: HeadParser;
  state = HEAD;
  /** Body bytes still to come for the current request. */
  left = 0;
  req: FastRequest | undefined;
  res: FastResponse | undefined;
  /** The planned request under way (it has no req nor res). */
  planned: PlannedAnswer | undefined;
  /** Bytes that came after the current request's body, read once its answer is out. */
  pending: Buffer | undefined;
  timer: NodeJS.Timeout | undefined;
  /** When the timer fires, and when the bound that runs now is due (Date.now(); Infinity: none). */
  timerAt = 0;
  deadline = Infinity;
  timerKind = TIMER_NONE;
  /** When the current head's first byte came (Date.now()). */
  headStart = 0;
  pausedByBody = false;
  /** The answer said Connection: close: the body may still be read, no next head is. */
  closing = false;
  lanes = false;
  /** How the lane left the request at the start of the bytes it gave back (fromLane). */
  outcome: LaneOutcome | undefined;

  constructor(readonly host: FastHost, readonly socket: Socket) {
    this.parser = new HeadParser(host.limits);
  }

  readonly onData = (chunk: Buffer): void => {
    if (this.state === GONE || this.state === LANE) return;
    this.consume(chunk, 0);
  };

  /** Reads `chunk` from `at`: heads, bodies, and what waits for the answer under way. */
  consume(chunk: Buffer, at: number): void {
    while (at < chunk.length && this.state !== GONE) {
      if (this.state === BODY) {
        at = this.body(chunk, at);
      } else if (this.state === WAIT) {
        this.hold(chunk.subarray(at));
        return;
      } else {
        at = this.head(chunk, at);
        if (at < 0) return;
      }
    }
  }

  /** Head bytes from `at`: where the body starts once the head is in, or -1 (more needed, or handed off). */
  head(chunk: Buffer, at: number): number {
    if (this.timerKind !== TIMER_HEAD) {
      this.headStart = Date.now();
      this.arm(TIMER_HEAD, this.host.timeouts.headersTimeoutMs);
    }
    const p = this.parser;
    const v = p.feed(chunk, at, chunk.length);
    if (v === PARTIAL) return -1;
    if (v === HAND_OFF) {
      this.handOff(Buffer.concat([p.carried(), chunk.subarray(at)]));
      return -1;
    }
    const method = p.method;
    const url = p.target();
    const headers = headersOf(p);
    const hot = headers === undefined || this.socket.writableEnded ? undefined : this.host.hot(method, url, headers);
    if (hot === undefined) {
      this.handOff(Buffer.concat([p.bytes.subarray(p.base, p.base + p.headBytes), chunk.subarray(p.bodyStart)]));
      return -1;
    }
    const n = p.contentLength;
    const bodyStart = p.bodyStart;
    if (n > 0 && this.host.planned !== undefined) {
      const outcome = this.outcome;
      this.outcome = undefined;
      // The head's bytes (a view of the read, copied if kept) only where the compiled lane may keep them.
      const head = this.host.lane === undefined ? undefined : p.bytes.subarray(p.base, p.base + p.headBytes);
      const planned = this.host.planned(this, hot, headers!, n, p.keepAlive && !this.host.draining(), head, outcome);
      if (planned !== undefined) {
        if (p.expectContinue) this.socket.write(CONTINUE);
        p.letGo();
        this.host.headArrived(this.socket);
        this.planned = planned;
        if (chunk.length - bodyStart >= n) {
          this.state = WAIT;
          this.arm(TIMER_NONE, 0);
          planned.body(chunk.subarray(bodyStart, bodyStart + n));
          planned.complete();
          return bodyStart + n;
        }
        this.bodyStarts(n);
        return bodyStart;
      }
    }
    this.begin(method, url, headers!, hot);
    p.letGo();
    return bodyStart;
  }

  /** A request of the fast path: its objects made and handed to the server. */
  begin(method: string, url: string, headers: IncomingHttpHeaders, hot: unknown): void {
    const { host, socket, parser } = this;
    host.headArrived(socket);
    const req = this.req = new FastRequest(socket, method, url, headers, this, rawHeadersOf(parser));
    const keepAlive = parser.keepAlive && !host.draining();
    this.res = new FastResponse(req, socket, this, keepAlive, Math.floor(host.timeouts.keepAliveTimeoutMs / 1000));
    if (parser.contentLength > 0) {
      this.bodyStarts(parser.contentLength);
    } else {
      this.state = WAIT;
      this.arm(TIMER_NONE, 0);
      req.finish();
    }
    if (parser.expectContinue) socket.write(CONTINUE);
    host.serve(req, this.res, hot);
  }

  /** A body of `n` bytes is read next, within what is left of server.requestTimeoutMs. */
  bodyStarts(n: number): void {
    const { requestTimeoutMs } = this.host.timeouts;
    this.left = n;
    this.state = BODY;
    this.arm(TIMER_REQUEST, requestTimeoutMs > 0 ? Math.max(1, requestTimeoutMs - (Date.now() - this.headStart)) : 0);
  }

  /** Body bytes from `at`, up to the body's end: where the rest of `chunk` starts. */
  body(chunk: Buffer, at: number): number {
    const n = Math.min(this.left, chunk.length - at);
    this.left -= n;
    const piece = at === 0 && n === chunk.length ? chunk : chunk.subarray(at, at + n);
    const { req, planned } = this;
    if (req === undefined) {
      // A planned request's body (it has no FastRequest): served once whole.
      planned!.body(piece);
      if (this.left === 0) {
        this.state = WAIT;
        this.arm(TIMER_NONE, 0);
        planned!.complete();
      }
      return at + n;
    }
    req.push(piece);
    if (this.left === 0) {
      this.state = this.closing ? GONE : WAIT;
      this.arm(TIMER_NONE, 0);
      req.finish();
      if (this.state === WAIT && this.res!.writableFinished) this.next();
    }
    return at + n;
  }

  /** Bytes after the body while its answer is under way: held, within a bound. */
  hold(bytes: Buffer): void {
    // A small part of a large read is copied rather than kept: it would keep the whole read.
    if (this.pending === undefined && bytes.length < bytes.buffer.byteLength / 8) bytes = Buffer.from(bytes);
    this.pending = this.pending === undefined ? bytes : Buffer.concat([this.pending, bytes]);
    if (this.pending.length > PENDING_BYTES) this.socket.pause();
  }

  /** The answer is out (BodyFlow): the next request, once the body is read; or the connection ends. */
  answered(): void {
    const res = this.res!;
    if (!res.shouldKeepAlive) {
      // The rest of a body still arriving is read to the request (the early answer's bounded
      // discard counts it and closes at its end, ingress/body.ts discardRest); no next head.
      this.closing = true;
      if (this.state === BODY) this.req!.resume();
      else this.state = GONE;
      this.arm(TIMER_NONE, 0);
      this.socket.destroySoon();
      return;
    }
    if (this.state === WAIT) this.next();
    else this.req!.resume(); // the rest of the body, unread: read and dropped, then the next head
  }

  readonly plannedWritten = (err?: Error | null): void => {
    this.planned?.written(err);
  };

  /** A planned answer is out (PlannedConnection): as answered(), its body read already. */
  plannedOut(keepAlive: boolean): void {
    this.planned = undefined;
    if (this.state === GONE) return;
    const lanes = this.lanes;
    this.lanes = false;
    if (keepAlive) {
      // Kept by the lane, and nothing of a next request read yet: the lane reads the connection now.
      if (lanes && this.pending === undefined && !this.pausedByBody && this.host.lane?.adopt(this) === true) {
        this.state = LANE;
        this.disarm();
        this.socket.pause();
        return;
      }
      this.next();
      return;
    }
    this.state = GONE;
    this.arm(TIMER_NONE, 0);
    this.socket.destroySoon();
  }

  /** Ready for the next head: from the bytes held, else from the next read (idle until then). */
  next(): void {
    this.state = HEAD;
    this.req?.detach();
    this.req = undefined;
    this.res = undefined;
    this.arm(TIMER_IDLE, this.host.timeouts.keepAliveTimeoutMs);
    const held = this.pending;
    this.pending = undefined;
    if (held === undefined) {
      if (!this.pausedByBody) this.socket.resume();
      return;
    }
    // The held bytes first: a socket resumed now would hand its newer reads over before them.
    process.nextTick(() => {
      this.consume(held, 0);
      if (this.state !== GONE && !this.pausedByBody && (this.pending?.length ?? 0) <= PENDING_BYTES) this.socket.resume();
    });
  }

  /**
   * The lane gives the connection back (ingress/http1/lane.ts): closed (`bytes` null), or with the
   * bytes it read and did not serve, the first request among them as `what` says.
   */
  fromLane(bytes: Buffer | null, what: Back, detail: unknown): void {
    if (this.state !== LANE) return;
    this.state = HEAD;
    if (bytes === null) {
      this.socket.destroy();
      return;
    }
    if (what === Back.FAILED || what === Back.ANSWER) this.outcome = { what, detail };
    else if (typeof detail === 'number' && bytes.length > 0) {
      // A head begun in the lane keeps its bound from its first byte.
      this.headStart = detail;
      const ms = this.host.timeouts.headersTimeoutMs;
      this.arm(TIMER_HEAD, ms > 0 ? Math.max(1, ms - (Date.now() - detail)) : 0);
    }
    if (bytes.length === 0) this.arm(TIMER_IDLE, this.host.timeouts.keepAliveTimeoutMs);
    else this.consume(bytes, 0);
    if (this.state !== GONE && !this.pausedByBody && (this.pending?.length ?? 0) <= PENDING_BYTES) this.socket.resume();
  }

  pauseReading(): void {
    this.pausedByBody = true;
    this.socket.pause();
  }

  resumeReading(): void {
    if (!this.pausedByBody) return;
    this.pausedByBody = false;
    if (this.pending === undefined || this.pending.length <= PENDING_BYTES) this.socket.resume();
  }

  /** The connection goes to node:http, with `bytes` put back; nothing of ours listens to it any more. */
  handOff(bytes: Buffer): void {
    this.state = GONE;
    this.disarm();
    const { socket } = this;
    socket.removeListener('data', this.onData);
    socket.removeListener('end', this.onEnd);
    socket.removeListener('close', this.onClose);
    socket.removeListener('drain', this.onDrain);
    socket.removeListener('error', this.onError);
    socket.pause();
    readsToNode(socket);
    this.host.handOff(socket, bytes);
  }

  /**
   * One timer per connection, for the one bound that runs now. A bound due no sooner than the
   * timer fires keeps it (onTimer sets it again for what is left), so a connection's requests do
   * not make a Timeout each: one per keep-alive bound at most, on a busy connection.
   */
  arm(kind: number, ms: number): void {
    this.timerKind = kind;
    if (kind === TIMER_NONE || ms <= 0) {
      this.deadline = Infinity;
      return;
    }
    const now = Date.now();
    this.deadline = now + ms;
    if (this.timer !== undefined && this.timerAt <= this.deadline) return;
    clearTimeout(this.timer);
    this.timerAt = this.deadline;
    this.timer = setTimeout(this.onTimer, ms).unref();
  }

  /** The connection is gone: its timer goes with it. */
  disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerKind = TIMER_NONE;
    this.deadline = Infinity;
  }

  readonly onTimer = (): void => {
    this.timer = undefined;
    if (this.deadline === Infinity) return;
    const rest = this.deadline - Date.now();
    if (rest > 0) {
      this.timerAt = this.deadline;
      this.timer = setTimeout(this.onTimer, rest).unref();
      return;
    }
    const kind = this.timerKind;
    this.timerKind = TIMER_NONE;
    this.deadline = Infinity;
    if (kind === TIMER_IDLE) {
      this.socket.destroy();
      return;
    }
    if (kind === TIMER_REQUEST && this.req === undefined && this.planned !== undefined) {
      // A planned request's body: it answers 408 itself and the connection closes once that is
      // out (what comes of the body meanwhile is held, within PENDING_BYTES, and never read).
      this.state = WAIT;
      this.planned.timedOut();
      return;
    }
    // A request timed out mid-body is answered through it; no more of the connection is read.
    if (kind === TIMER_REQUEST) this.state = GONE;
    this.host.timedOut(this.socket);
  };

  /**
   * The client ended its side: a body cut short is an aborted request; otherwise our side ends too
   * (node:http's socketOnEnd without httpAllowHalfOpen), and the connection's close aborts an
   * answer still under way, which cancels its upstream call.
   */
  readonly onEnd = (): void => {
    if (this.state === BODY) this.socket.destroy();
    else this.socket.end();
  };

  readonly onClose = (): void => {
    this.state = GONE;
    this.disarm();
    this.res?.closed();
    this.req?.aborted();
    this.planned?.closed();
  };

  readonly onDrain = (): void => {
    this.res?.emit('drain');
  };

  /** A reset: 'close' follows. */
  readonly onError = (): void => {
    this.socket.destroy();
  };
}
