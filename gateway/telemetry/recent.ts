// The recent requests behind the metrics port's /dashboard (telemetry/dashboard.ts): a fixed ring
// of slots overwritten in place, filled by at most `telemetry.recent.perSecond` requests a second.
// The request path pays one number comparison for the sampling decision (take); a sampled request
// copies its numbers into one Float64Array and its strings (references the record already holds:
// route, model, ids) into fixed arrays (put). No object, string or JSON is made for a request: the
// JSON is built when the page asks for it (toJSON). Nothing is retained of the record itself, so
// the ring keeps no ledger, buffer or request alive.
import { HOPS, hopRecord } from '../infer/ledger';
import type { RequestRecord } from './record';

/** The hop being read (Ledger.read): one record for every request's hops, read one at a time. */
const HOP = hopRecord();

/** Longest id kept (a body `id` or an `x-request-id` header); a longer one is cut to this. */
export const RECENT_ID_CHARS = 256;

/** Numbers of one slot: these, then HOP_FIELDS per hop. */
const F = { seq: 0, wallMs: 1, durationMs: 2, status: 3, declaredBytes: 4, upstreamStatus: 5, upstreamMs: 6, retries: 7, grpcStatus: 8,
  bytesIn: 9, bytesOut: 10, sharedMemoryBytes: 11 } as const;
const BASE_FIELDS = 12;
/** Per hop: start (ms after the request's start), duration, bytes in, out, copied, copies, allocations; NaN: none. */
const HOP_FIELDS = 7;
const SLOT = BASE_FIELDS + HOPS.length * HOP_FIELDS;
/** The strings of one slot: references taken from the record, never built. */
const S = { route: 0, method: 1, protocol: 2, model: 3, version: 4, encoding: 5, encodingOut: 6, errorCode: 7, id: 8, xRequestId: 9, rpc: 10,
  backend: 11 } as const;
const STRINGS = 12;

export interface RecentHop {
  readonly hop: (typeof HOPS)[number];
  /** When the hop began, in ms after the request's start (the access log's `hops_at_ms`). */
  readonly at_ms: number;
  /** The access log's `hops_ms`: end − start of the hop, as the log computes it. */
  readonly ms: number;
  readonly bytes_in: number;
  readonly bytes_out: number;
  readonly bytes_copied: number;
  readonly copies: number;
  readonly allocations: number;
}

/** One request as /dashboard/recent.json answers it: the access log's field names. */
export interface RecentRequest {
  /** Its place in its process's ring (increasing). */
  readonly seq: number;
  /** With workers > 1: the worker (1..N) that served it; `seq` counts within that worker. */
  readonly worker?: number;
  /** Wall-clock start, ms since the epoch. */
  readonly start_ms: number;
  readonly duration_ms: number;
  readonly route: string;
  readonly method: string;
  readonly protocol?: string;
  readonly status: number;
  readonly model?: string;
  readonly version?: string;
  readonly encoding_in?: string;
  readonly encoding_out?: string;
  readonly error_code?: string;
  readonly id?: string;
  readonly x_request_id?: string;
  readonly rpc?: string;
  readonly backend?: string;
  readonly grpc_status?: number;
  readonly upstream_status?: number;
  readonly upstream_ms?: number;
  readonly retries?: number;
  readonly declared_bytes: number;
  readonly bytes_in?: number;
  readonly bytes_out?: number;
  readonly bytes_copied?: number;
  readonly copies?: number;
  readonly bytes_shared_memory?: number;
  readonly hops: readonly RecentHop[];
}

export interface RecentQuery {
  /** Only the request(s) whose body `id` or `x-request-id` is this. */
  readonly id?: string;
  /** Only requests with a larger seq (what the page has not seen yet). */
  readonly since?: number;
  /** At most this many, newest first. */
  readonly limit?: number;
}

const cut = (s: string): string => (s.length > RECENT_ID_CHARS ? s.slice(0, RECENT_ID_CHARS) : s);

export class RecentRequests {
  readonly #numbers: Float64Array;
  readonly #strings: (string | undefined)[];
  readonly #intervalNs: number;
  /** The time (infer/clock.ts) before which no request is taken. */
  #next = 0;
  /** Requests put so far; slot = (seq - 1) % size. */
  #seq = 0;

  constructor(readonly size: number, readonly perSecond: number) {
    this.#numbers = new Float64Array(size * SLOT);
    this.#strings = new Array<string | undefined>(size * STRINGS).fill(undefined);
    this.#intervalNs = Math.max(1, Math.floor(1e9 / perSecond));
  }

  /** Whether the request that started at `startNs` goes into the ring: one per 1/perSecond s. */
  take(startNs: number): boolean {
    if (startNs < this.#next || this.size === 0) return false;
    this.#next = startNs + this.#intervalNs;
    return true;
  }

  /** Copies a taken request's record into the oldest slot. `xRequestId`: its header, if any. */
  put(r: RequestRecord, xRequestId: string | undefined): void {
    const seq = ++this.#seq;
    const slot = (seq - 1) % this.size;
    const n = this.#numbers;
    const o = slot * SLOT;
    const durationNs = r.endNs - r.startNs;
    n[o + F.seq] = seq;
    n[o + F.wallMs] = Date.now() - durationNs / 1e6;
    n[o + F.durationMs] = durationNs / 1e6;
    n[o + F.status] = r.status;
    n[o + F.declaredBytes] = r.declaredBytes;
    n[o + F.upstreamStatus] = r.upstreamStatus ?? NaN;
    n[o + F.upstreamMs] = r.upstreamDurationNs === undefined ? NaN : r.upstreamDurationNs / 1e6;
    n[o + F.retries] = r.retries ?? NaN;
    n[o + F.grpcStatus] = r.grpcStatus ?? NaN;
    n[o + F.bytesIn] = r.bytesIn ?? NaN;
    n[o + F.bytesOut] = r.bytesOut ?? NaN;
    n[o + F.sharedMemoryBytes] = r.ledger?.sharedMemoryBytes ?? NaN;
    this.#putHops(o + BASE_FIELDS, r);
    const s = this.#strings;
    const p = slot * STRINGS;
    s[p + S.route] = r.route;
    s[p + S.method] = r.method;
    s[p + S.protocol] = r.protocol;
    s[p + S.model] = r.model;
    s[p + S.version] = r.version;
    s[p + S.encoding] = r.encoding;
    s[p + S.encodingOut] = r.encodingOut;
    s[p + S.errorCode] = r.errorCode;
    s[p + S.id] = r.requestId === undefined ? undefined : cut(r.requestId);
    s[p + S.xRequestId] = xRequestId === undefined ? undefined : cut(xRequestId);
    s[p + S.rpc] = r.rpc;
    s[p + S.backend] = r.backend;
  }

  #putHops(o: number, r: RequestRecord): void {
    const n = this.#numbers;
    const ledger = r.ledger;
    for (let i = 0; i < HOPS.length; i++) {
      const at = o + i * HOP_FIELDS;
      const h = ledger?.read(HOPS[i]!, HOP);
      // The access log's arithmetic (telemetry/logger.ts), so the page shows the same numbers.
      const ran = h !== undefined && h.startNs !== 0 && h.endNs !== 0;
      n[at] = ran ? (h.startNs - r.startNs) / 1e6 : NaN;
      n[at + 1] = ran ? (h.endNs - h.startNs) / 1e6 : NaN;
      n[at + 2] = h?.bytesIn ?? NaN;
      n[at + 3] = h?.bytesOut ?? NaN;
      n[at + 4] = h?.bytesCopied ?? NaN;
      n[at + 5] = h?.copies ?? NaN;
      n[at + 6] = h?.allocations ?? NaN;
    }
  }

  /** The requests kept, newest first, as the page reads them. */
  list(q: RecentQuery = {}): RecentRequest[] {
    const out: RecentRequest[] = [];
    const oldest = Math.max(1, this.#seq - this.size + 1, (q.since ?? 0) + 1);
    const limit = q.limit ?? this.size;
    for (let seq = this.#seq; seq >= oldest && out.length < limit; seq--) {
      const slot = (seq - 1) % this.size;
      const p = slot * STRINGS;
      if (q.id !== undefined && this.#strings[p + S.id] !== q.id && this.#strings[p + S.xRequestId] !== q.id) continue;
      out.push(this.#read(slot));
    }
    return out;
  }

  #read(slot: number): RecentRequest {
    const n = this.#numbers;
    const o = slot * SLOT;
    const str = (i: number): string | undefined => this.#strings[slot * STRINGS + i];
    const num = (i: number): number | undefined => (Number.isNaN(n[o + i]!) ? undefined : n[o + i]!);
    const hops: RecentHop[] = [];
    let bytesCopied = 0;
    let copies = 0;
    for (let i = 0; i < HOPS.length; i++) {
      const at = o + BASE_FIELDS + i * HOP_FIELDS;
      bytesCopied += n[at + 4]! || 0;
      copies += n[at + 5]! || 0;
      if (Number.isNaN(n[at]!)) continue;
      hops.push({ hop: HOPS[i]!, at_ms: n[at]!, ms: n[at + 1]!, bytes_in: n[at + 2]!, bytes_out: n[at + 3]!, bytes_copied: n[at + 4]!,
        copies: n[at + 5]!, allocations: n[at + 6]! });
    }
    const ledger = !Number.isNaN(n[o + BASE_FIELDS + 2]!);
    const first = o + BASE_FIELDS;
    return {
      seq: n[o + F.seq]!, start_ms: n[o + F.wallMs]!, duration_ms: n[o + F.durationMs]!,
      route: str(S.route)!, method: str(S.method)!, protocol: str(S.protocol), status: n[o + F.status]!,
      model: str(S.model), version: str(S.version), encoding_in: str(S.encoding), encoding_out: str(S.encodingOut),
      error_code: str(S.errorCode), id: str(S.id), x_request_id: str(S.xRequestId), rpc: str(S.rpc), backend: str(S.backend),
      grpc_status: num(F.grpcStatus), upstream_status: num(F.upstreamStatus), upstream_ms: num(F.upstreamMs), retries: num(F.retries),
      declared_bytes: n[o + F.declaredBytes]!,
      // As the access log: an inference's bytes in are its ledger's, a gRPC call's its own; bytes out every answer's.
      bytes_in: ledger ? n[first + 2]! : num(F.bytesIn), bytes_out: num(F.bytesOut),
      bytes_copied: ledger ? bytesCopied : undefined, copies: ledger ? copies : undefined,
      bytes_shared_memory: num(F.sharedMemoryBytes) || undefined,
      hops,
    };
  }
}
