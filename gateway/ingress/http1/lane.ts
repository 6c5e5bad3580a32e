// The compiled lane (gateway/native/lane.c; docs/architecture.md, "What a planned request costs, and
// the layer below it"): planned requests that repeat, served in C from bytes this side kept.
//
// A planned request the fast path served with a kept framed head (decode/framed-heads.ts) and a
// kept answer head (infer/answer-heads.ts) is kept here as bytes: its HTTP head byte for byte, its
// binary header and the message's segments, its answer's skeleton and the HTTP answer's head. So
// is a JSON body of one base64 string (the text around the string; C decodes each new one) with
// a JSON answer of FP32 outputs (the text around their values; C prints each answer's).
// Every decision JavaScript took for that head — route, model, planned or not, keep-alive, body
// length — holds for the same bytes, so the lane compares rather than parses. After such a request
// its keep-alive connection is the lane's: C reads it, serves every request whose head, header and
// answer are kept, and gives the connection back (FastConnection.fromLane) with what it read for
// anything else, saying how the request at the start of those bytes stands: not sent (serve it as
// new), failed (answer that failure; it is not sent again), or answered with an answer that is not
// kept (answer that). Records come back in batches, as numbers, and are reported as the planned
// path reports its own.
//
// When it is used is decided at start-up (the gateway's configuration): server.compiledLane on, the
// fast path and planned requests on, one backend given as a literal IPv4 address and port, cleartext
// to it, no pools, no model table, no tracing, no Server-Timing, no CORS, no shared memory.
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

/** The compiled lane next to this file's directory in dist/, or the one `npm run build` wrote (tests from source). */
export const NATIVE_LANE_FILE = __filename.endsWith('.ts')
  ? resolve(__dirname, '../../../dist/gateway/native/lane.node')
  : join(__dirname, '../../native/lane.node');

/**
 * What the lane reads of a kept request: a framed head (decode/framed-heads.ts KnownHead), or a
 * JSON body of one base64 string (pipeline/infer-planned.ts keptBase64).
 */
export interface KeptRequest {
  /** The body's first bytes: the binary header the head was decoded from; a JSON body's text to its string's quote. */
  readonly bytes: Buffer;
  readonly bodyBytes: number;
  /** The framed message (gRPC prefix included) and where the body's payloads go in it. */
  readonly framed: { readonly message: Buffer; readonly cuts: readonly { readonly at: number; readonly length: number }[] };
  /** A JSON body's text from its string's closing quote, and the bytes the string decodes to (the one payload). */
  readonly base64?: { readonly suffix: Buffer; readonly decodedBytes: number } | undefined;
}

/**
 * What the lane reads of a kept answer head: binary outputs (infer/answer-heads.ts AnswerHead:
 * its JSON header, then the payloads as they came) or a JSON answer lane.c prints (JsonAnswerHead:
 * its texts, with the outputs' values between them, of the kinds it says).
 */
export type KeptAnswer = {
  /** The answer's message bytes, payloads zeroed; each payload's [start, end) in it. */
  readonly skeleton: Buffer;
  readonly bounds: Int32Array;
  readonly headers: Readonly<import('node:http').OutgoingHttpHeaders>;
} & ({ readonly jsonHeader: Buffer; readonly bodyBytes: number } | { readonly texts: readonly Buffer[]; readonly kinds: readonly number[] });

/**
 * What the lane has done and holds: requests served, connections handed back, answers it did not
 * keep; its large read buffers (lane.c BIG_BUF: a request over 64 KiB takes one while it is under
 * way), mapped and idle, and the idle ones' bytes written (their pages in memory: at most 32 MiB).
 */
export interface LaneCounts {
  readonly served: number;
  readonly handedBack: number;
  readonly failed: number;
  readonly largeBuffers: number;
  readonly idleLargeBuffers: number;
  readonly idleLargeBytes: number;
  /** Base64 characters of bodies under way decoded as they arrived, before the body was whole. */
  readonly decodedEarly: number;
  /** Calls begun before their body was whole (a binary or raw body in several reads), DATA following the reads. */
  readonly earlyCalls: number;
  /** Bytes a backend's socket did not take at once, copied to be written when it can. */
  readonly upstreamCopiedBytes: number;
  /** Heads kept now (lane.c MAX_HEADS at most). */
  readonly keptHeads: number;
  /** A Unix socket backend's send buffer as the kernel granted it (bytes; 0 over TCP, or not connected yet). */
  readonly upstreamSendBuffer: number;
}

/** nowNs() of infer/clock.ts: monotonic nanoseconds since the process started. */
const nowNs = (): number => performance.now() * 1e6;

/** The send buffer lane.c asks for on a Unix socket backend (UNIX_SNDBUF). */
export const UNIX_SEND_BUFFER = 4 << 20;

/**
 * Why a Unix socket backend's send buffer will be smaller than UNIX_SEND_BUFFER, or undefined when
 * it will not be: lane.c sets it with SO_SNDBUFFORCE, which takes CAP_NET_ADMIN (capability 12 of
 * /proc/self/status's CapEff), else with SO_SNDBUF, which the kernel caps at net.core.wmem_max.
 * Smaller, a 600 KB message takes several writes and wake-ups where it took one (docs/production.md).
 * `read` reads a file's text (undefined if it cannot): /proc on Linux; elsewhere nothing is said.
 */
export function unixSendBufferShortfall(read: (file: string) => string | undefined): { wmemMax: number } | undefined {
  const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(read('/proc/self/status') ?? '');
  if (capEff === null || (BigInt(`0x${capEff[1]!}`) >> 12n & 1n) === 1n) return undefined;
  const wmemMax = Number((read('/proc/sys/net/core/wmem_max') ?? '').trim());
  return Number.isInteger(wmemMax) && wmemMax > 0 && wmemMax < UNIX_SEND_BUFFER ? { wmemMax } : undefined;
}

/** How a connection comes back (lane.c hand_back). */
export const enum Back { CLOSED = 0, UNSERVED = 1, FAILED = 2, ANSWER = 3 }

/** A failed call's outcome, as lane.c gives it. */
export interface LaneFailure {
  readonly grpcStatus: number;
  readonly rst: number;
  readonly deadline: boolean;
  readonly lost: boolean;
  readonly message: string;
}

/** Kept bytes, or a range: of the body (of its base64 string decoded, when the 4th is true), or a run of the answer. */
type Segment = [Buffer | null, number, number] | [null, number, number, boolean];

/** A lane of lane.c (init()'s): the first argument of every other export. */
type Handle = object;

interface Native {
  init(onHandBack: (id: number, bytes: Buffer | null, what: Back, detail: unknown) => void, onRecords: (r: Float64Array) => void,
    callTimeoutMs: number, bounds: LaneOptions['bounds'] & InFlightLimits, inFlight: Float64Array): Handle;
  connect(lane: Handle, port: number, authority: string, host?: string, headers?: readonly string[], gate?: Float64Array): number;
  keep(lane: Handle, head: Buffer, bodyBytes: number, upstream: number, header: Buffer, message: Segment[], answer: Segment[], answerHead: Buffer,
    dateAt: number, timingAt: number, json: LaneJson | undefined, expect: boolean): number;
  serve(lane: Handle, fd: number, first?: Buffer, headAt?: number): number;
  drain(lane: Handle): Float64Array;
  stop(lane: Handle): void;
  clear(lane: Handle): void;
  close(lane: Handle): void;
  counts(lane: Handle): LaneCounts;
  inFlight(lane: Handle): Float64Array;
  powers(significands: BigUint64Array, k: Int32Array, shift: Int32Array): boolean;
  printFp32(values: Buffer): Buffer;
}

/**
 * keep()'s last argument (lane.c json_of): a base64 body's suffix and decoded length; a JSON
 * answer's texts, its runs' element types (json-answer-head.ts PRINTED_KINDS) and where its
 * Content-Length's digits go.
 */
interface LaneJson {
  suffix?: Buffer;
  decodedBytes?: number;
  texts?: readonly Buffer[];
  kinds?: readonly number[];
  lengthAt?: number;
}

/** json/number-print.ts's cached powers (cachedPowerArrays): lane.c's printer picks the same power per exponent. */
export interface PowerTable {
  readonly significands: BigUint64Array;
  readonly k: Int32Array;
  readonly shift: Int32Array;
}

/** Whether lane.c's printer has its table (given once a process: every lane shares it). */
let powersGiven: boolean | undefined;

/** Requests of one route in flight in C, and their declared body bytes. */
export interface LaneInFlight {
  readonly route: string;
  requests: number;
  bytes: number;
}

/** limits.maxInFlightRequests and limits.maxInFlightBodyBytes. */
interface InFlightLimits {
  readonly maxInFlightRequests: number;
  readonly maxInFlightBodyBytes: number;
}

/**
 * The server's admission (ingress/admission.ts): its limits, and its counts of requests and of
 * declared body bytes in flight, a Float64Array [requests, body bytes] on memory that never moves.
 */
export interface SharedAdmission {
  readonly limits: InFlightLimits;
  readonly counts: Float64Array;
}

/** What the lane asks of a connection it takes (FastConnection). */
export interface LaneConnection {
  readonly socket: Socket;
  /** The connection is the fast path's again: `bytes` read and not served (null: closed), and how they stand. */
  fromLane(bytes: Buffer | null, what: Back, detail: unknown): void;
}

/** A kept head's report: what a record of one of its requests is made from (ingress/server.ts). */
export interface KeptReport {
  /** The kept request's route and declared body bytes (its requests' in-flight series). */
  readonly route: string;
  readonly declaredBytes: number;
  /**
   * One request served, its times (nowNs()): `t` as LaneTimes; its answer's body bytes when C
   * printed it (a JSON answer), else -1 (the kept one's).
   */
  report(t: LaneTimes, bodyBytes: number): void;
}

/** A timestamp of lane.c on nowNs()'s clock (0: not taken). */
const onClock = (ns: number, offset: number): number => (ns > 0 ? ns + offset : 0);

/**
 * A request's times in C, on nowNs()'s clock: its head's first read, its body whole, its call (the
 * body read as its plan, a base64 string decoded), its message sent, the answer's first and last
 * byte, the answer's body ready (a JSON answer printed), its bytes handed to the socket. Written
 * over for each record read (one object: a report reads it and keeps none of it).
 */
export interface LaneTimes {
  startNs: number; bodyNs: number; callNs: number; sentNs: number; firstNs: number; endNs: number; encodedNs: number; writtenNs: number;
  /** An early call's base64 body: its string's last part decoded, once the body was whole (0: none). */
  decodedNs: number;
}

/** keep()'s answer when lane.c's table of heads is full (MAX_HEADS). */
const TABLE_FULL = -2;
/** One request's record: the doubles lane.c writes per request served. */
const RECORD = 12;

export interface LaneOptions {
  /** `host`: an IPv4 address, or a Unix domain socket's path (it starts with `/`; `port` unused). */
  readonly backend: { readonly host: string; readonly port: number; readonly authority: string };
  /** The headers every upstream call sends (the data plane's, grpc-timeout included), name and value in turn. */
  readonly headers: readonly string[];
  readonly callTimeoutMs: number;
  readonly bounds: { readonly headersTimeoutMs: number; readonly requestTimeoutMs: number; readonly keepAliveTimeoutMs: number };
}

/** Told when a connection becomes the lane's and when it is given back (ingress/drain.ts counts it busy meanwhile). */
export interface LaneHooks {
  lent(socket: Socket): void;
  returned(socket: Socket): void;
}

export class CompiledLane {
  readonly #native: Native;
  readonly #lane: Handle;
  readonly #upstream: number;
  readonly #times: LaneTimes = { startNs: 0, bodyNs: 0, callNs: 0, sentNs: 0, firstNs: 0, endNs: 0, encodedNs: 0, writtenNs: 0, decodedNs: 0 };
  /** [0]: 1 while the backend set would call the backend, 0 while it would not (lane.c reads it before each call). */
  readonly #gate = new Float64Array(new ArrayBuffer(Float64Array.BYTES_PER_ELEMENT)).fill(1);
  readonly #connections = new Map<number, LaneConnection>();
  /** By lane.c's head index (never reused): the kept heads', and cleared ones' with a request under way. */
  readonly #reports = new Map<number, KeptReport>();
  /** nowNs() minus CLOCK_MONOTONIC's nanoseconds: lane.c's timestamps on the records' clock. */
  readonly #offset: number;
  readonly #timer: NodeJS.Timeout;
  /** lane.c prints JSON answers (its table of powers was given). */
  readonly #prints: boolean;
  #stopped = false;

  private constructor(native: Native, options: LaneOptions, private readonly hooks: LaneHooks, admission: SharedAdmission, powers: PowerTable) {
    this.#native = native;
    // The lane admits its requests in admission's counts, within its limits: one in-flight bound for both sides.
    const lane = this.#lane = native.init((id, bytes, what, detail) => this.#back(id, bytes, what, detail), (r) => this.#records(r),
      options.callTimeoutMs, { ...options.bounds, ...admission.limits }, admission.counts);
    const { host, port, authority } = options.backend;
    this.#upstream = native.connect(lane, port, authority, host, options.headers, this.#gate);
    this.#offset = nowNs() - Number(process.hrtime.bigint());
    this.#prints = powersGiven ??= native.powers(powers.significands, powers.k, powers.shift);
    this.#timer = setInterval(() => this.#records(native.drain(lane)), 100).unref();
  }

  /** The lane, or undefined when lane.c was not built here (scripts/build-native.js said why). */
  static load(options: LaneOptions, hooks: LaneHooks, admission: SharedAdmission, powers: PowerTable): CompiledLane | undefined {
    const module = { exports: {} as Partial<Native> };
    try {
      // Every symbol bound now (node's libnghttp2 among them): a Node that lacks one fails here, and
      // the fast path serves, rather than at the backend's first connection.
      process.dlopen(module, NATIVE_LANE_FILE, constants.dlopen.RTLD_NOW);
    } catch {
      return undefined;
    }
    return new CompiledLane(module.exports as Native, options, hooks, admission, powers);
  }

  /**
   * Keeps a planned request that was served from kept heads: `head` its HTTP head's bytes, `known`
   * its request's plan, `answer` its answer's kept head and `answerHead` the HTTP answer's bytes
   * before the body (Date's value at `dateAt`; the Server-Timing line to go at `timingAt`, -1:
   * none; a JSON answer's Content-Length digits at `lengthAt`); `expect`: the head asks for `100
   * Continue` (C writes it once the head is read). Returns false when it cannot be kept.
   */
  keep(head: Buffer, known: KeptRequest, answer: KeptAnswer, answerHead: Buffer, dateAt: number, timingAt: number, lengthAt: number,
    expect: boolean, report: KeptReport): boolean {
    const { framed, base64 } = known;
    const message: Segment[] = [];
    let at = 0;
    let bodyAt = known.bytes.length;
    for (const cut of framed.cuts) {
      if (cut.at > at) message.push([framed.message.subarray(at, cut.at), 0, 0]);
      // A base64 body's one payload is its string, decoded; a binary body's, a range of it.
      if (base64 !== undefined) message.push([null, cut.length, 0, true]);
      else message.push([null, cut.length, bodyAt]);
      bodyAt += cut.length;
      at = cut.at;
    }
    if (at < framed.message.length) message.push([framed.message.subarray(at), 0, 0]);
    const match: Segment[] = [];
    const { skeleton, bounds } = answer;
    let from = 0;
    for (let i = 0; i < bounds.length; i += 2) {
      if (bounds[i]! > from) match.push([skeleton.subarray(from, bounds[i]), 0, 0]);
      match.push([null, bounds[i + 1]! - bounds[i]!, 0]);
      from = bounds[i + 1]!;
    }
    if (from < skeleton.length) match.push([skeleton.subarray(from), 0, 0]);
    if (message.length > 16 || match.length > 16 || (base64 !== undefined && framed.cuts.length !== 1)) return false;
    let json: LaneJson | undefined;
    if (base64 !== undefined) json = { suffix: base64.suffix, decodedBytes: base64.decodedBytes };
    if ('texts' in answer) {
      if (!this.#prints || lengthAt < 0) return false;
      json = { ...json, texts: answer.texts, kinds: answer.kinds, lengthAt };
    }
    const keep = (): number => this.#native.keep(this.#lane, head, known.bodyBytes, this.#upstream, known.bytes, message, match, answerHead,
      dateAt, timingAt, json, expect);
    let index = keep();
    if (index === TABLE_FULL) {
      // Heads that differ per request fill the table: it starts again (as decode/framed-heads.ts's does).
      this.clear();
      index = keep();
    }
    if (index < 0) return false;
    this.#keeps = true;
    if (!this.#reports.has(index)) this.#reports.set(index, report);
    return true;
  }

  /**
   * Takes `c` (between requests, nothing held; or new, `first` its first read, its head begun at
   * `headAt`, Date.now()): C reads it from now on. False: it stays JavaScript's.
   */
  adopt(c: LaneConnection, first?: Buffer, headAt?: number): boolean {
    if (this.#stopped) return false;
    const fd = (c.socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (fd === undefined || fd < 0) return false;
    // A first read C does not serve comes back during serve() (#back): then the connection was
    // never lent, and its bytes are JavaScript's to read as they were.
    this.#adopting = true;
    this.#refused = false;
    const id = this.#native.serve(this.#lane, fd, first, headAt);
    this.#adopting = false;
    if (id < 0 || this.#refused) return false;
    this.#connections.set(id, c);
    this.hooks.lent(c.socket);
    return true;
  }

  /** Whether a head is kept (since the last clear()): a new connection's first request may be C's. */
  get keeps(): boolean {
    return this.#keeps;
  }

  #keeps = false;
  #adopting = false;
  #refused = false;

  /** A drain: every connection comes back. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#native.stop(this.#lane);
    this.#records(this.#native.drain(this.#lane));
  }

  /** The server has closed: the backend's connection closes, what was kept is freed. */
  close(): void {
    if (this.#closed) return;
    this.stop();
    this.#closed = true;
    clearInterval(this.#timer);
    this.#native.close(this.#lane);
  }

  #closed = false;

  /**
   * Whether the backend set would call the backend now (upstream/backends/picking.ts: ready, or
   * not known down): while it would not, C gives its requests to JavaScript, which answers them so.
   */
  backendUsable(usable: boolean): void {
    this.#gate[0] = usable ? 1 : 0;
  }

  /** A configuration or model changed: nothing kept holds any more. */
  clear(): void {
    if (this.#closed) return;
    this.#native.clear(this.#lane);
    this.#keeps = false;
    // What was served is reported first; then only the heads with requests under way keep theirs.
    this.#records(this.#native.drain(this.#lane));
    const busy = new Set<number>();
    const r = this.#native.inFlight(this.#lane);
    for (let i = 0; i + 1 < r.length; i += 2) busy.add(r[i]!);
    for (const index of this.#reports.keys()) if (!busy.has(index)) this.#reports.delete(index);
  }

  /** The requests C holds now (admitted and not over), by route: what the in-flight series add to JavaScript's. */
  inFlight(): LaneInFlight[] {
    if (this.#closed) return [];
    const r = this.#native.inFlight(this.#lane);
    const out: LaneInFlight[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) {
      const report = this.#reports.get(r[i]!);
      if (report === undefined) continue;
      const n = r[i + 1]!;
      const same = out.find((x) => x.route === report.route);
      if (same === undefined) out.push({ route: report.route, requests: n, bytes: n * report.declaredBytes });
      else {
        same.requests += n;
        same.bytes += n * report.declaredBytes;
      }
    }
    return out;
  }

  get counts(): LaneCounts {
    return this.#native.counts(this.#lane);
  }

  #back(id: number, bytes: Buffer | null, what: Back, detail: unknown): void {
    const c = this.#connections.get(id);
    this.#connections.delete(id);
    // Records first: a request served before this one is reported before what follows it.
    if (!this.#closed) this.#records(this.#native.drain(this.#lane));
    if (c === undefined) {
      if (this.#adopting) this.#refused = true;
      return;
    }
    c.fromLane(bytes, what, detail);
    this.hooks.returned(c.socket);
  }

  #records(r: Float64Array): void {
    const off = this.#offset, t = this.#times;
    for (let i = 0; i + RECORD <= r.length; i += RECORD) {
      const report = this.#reports.get(r[i]!);
      if (report === undefined) continue;
      t.startNs = onClock(r[i + 1]!, off);
      t.callNs = onClock(r[i + 2]!, off);
      t.sentNs = onClock(r[i + 3]!, off);
      t.firstNs = onClock(r[i + 4]!, off);
      t.endNs = onClock(r[i + 5]!, off);
      t.bodyNs = onClock(r[i + 8]!, off);
      t.encodedNs = onClock(r[i + 9]!, off);
      t.writtenNs = onClock(r[i + 10]!, off);
      t.decodedNs = onClock(r[i + 11]!, off);
      report.report(t, r[i + 6]!);
    }
  }
}
