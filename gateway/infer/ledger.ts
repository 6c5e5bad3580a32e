// The hop ledger (docs/telemetry.md): for every hop of one request, its start and end time, bytes
// in and out, bytes our code copied and in how many copies, and buffers it allocated. Stages record into it; telemetry
// reads it (a type every stage shares, so it lives here). Start/end timestamps (not durations)
// because cut-through overlaps hops.
//
// An allocation is memory our code asks for anew; a message buffer reused from the pool
// (buffers/pool.ts, `ctx.buffers.reused`) is none — that is what the pool saves. A pool
// miss is one (the new page), as is every buffer of a size the pool does not keep.
//
// A copy is one step of our code that moves payload or body bytes from one buffer into another:
// gathering a body that came in chunks, decoding base64 into the message (or into staging
// buffers while the body arrives, then staged bytes into the message), writing a binary section
// into its slots, handing a body to a decode thread, rendering JSON outputs split across answer
// chunks. Each step that moved any byte counts once (docs/dialects.md "Copies" lists them per
// request form): with the bytes, it tells how many times each byte moved.

import { nowNs } from './clock';

export const HOPS = ['ingress_read', 'decode', 'upstream_send', 'triton', 'upstream_receive', 'encode', 'egress_write'] as const;
export type Hop = (typeof HOPS)[number];

/** One hop's numbers, as readers see them (Ledger.read, Ledger.hops). */
export interface HopRecord {
  startNs: number;
  endNs: number;
  bytesIn: number;
  bytesOut: number;
  bytesCopied: number;
  /** Copy steps that moved bytesCopied (see above). */
  copies: number;
  allocations: number;
}

/** A hop's numbers in the ledger's array: at its hop's offset (HOP_FIELDS each), in this order. */
const START = 0;
const END = 1;
const IN = 2;
const OUT = 3;
const COPIED = 4;
const COPIES = 5;
const ALLOCATIONS = 6;
const HOP_FIELDS = 7;

/** Each hop's offset in the ledger's array. */
const AT: Readonly<Record<Hop, number>> = {
  ingress_read: 0, decode: HOP_FIELDS, upstream_send: 2 * HOP_FIELDS, triton: 3 * HOP_FIELDS, upstream_receive: 4 * HOP_FIELDS,
  encode: 5 * HOP_FIELDS, egress_write: 6 * HOP_FIELDS,
};

/**
 * Every number of a new ledger, as an array of doubles (V8's PACKED_DOUBLE_ELEMENTS: made of
 * doubles, then zeroed, it stays one). A copy of it holds a request's numbers unboxed: a timestamp
 * stored in an object's field would be a heap number of its own (Node is built without pointer
 * compression, and nanoseconds are past a small integer's range), seven records and their boxes
 * about 900 bytes a request against this array's 440.
 */
const ZEROS: readonly number[] = Array.from({ length: HOPS.length * HOP_FIELDS }, () => 0.5).fill(0);

/** A new record of zeros, for Ledger.read to fill. */
export function hopRecord(): HopRecord {
  return { startNs: 0, endNs: 0, bytesIn: 0, bytesOut: 0, bytesCopied: 0, copies: 0, allocations: 0 };
}

/** The hops of one request: their numbers in one array (ZEROS), read and written through the methods below. */
export class Ledger {
  readonly #n: number[] = ZEROS.slice();
  /**
   * Tensor bytes Triton read from a shared-memory region instead of the gRPC message
   * (upstream.sharedMemory): written there once (counted as copied by decode), absent from upstream_send.
   */
  sharedMemoryBytes = 0;

  start(hop: Hop): void {
    this.#n[AT[hop] + START] = nowNs();
  }

  end(hop: Hop): void {
    this.#n[AT[hop] + END] = nowNs();
  }

  /** When `hop` started; 0 while it has not. */
  startNs(hop: Hop): number {
    return this.#n[AT[hop] + START]!;
  }

  /** When `hop` ended; 0 while it has not. */
  endNs(hop: Hop): number {
    return this.#n[AT[hop] + END]!;
  }

  /** `hop` began at `ns` (a transport's timestamp, or a start recorded before the ledger was). */
  startedAt(hop: Hop, ns: number): void {
    this.#n[AT[hop] + START] = ns;
  }

  /** `hop` ended at `ns`. */
  endedAt(hop: Hop, ns: number): void {
    this.#n[AT[hop] + END] = ns;
  }

  bytes(hop: Hop, bytesIn: number, bytesOut: number): void {
    const at = AT[hop];
    this.#n[at + IN]! += bytesIn;
    this.#n[at + OUT]! += bytesOut;
  }

  /** Bytes that came into `hop`. */
  bytesIn(hop: Hop): number {
    return this.#n[AT[hop] + IN]!;
  }

  /** Bytes that went out of `hop`. */
  bytesOut(hop: Hop): number {
    return this.#n[AT[hop] + OUT]!;
  }

  /**
   * One copy step of `bytes` (none when it moved nothing), or `copies` steps counted elsewhere (a
   * decode thread's ledger).
   */
  copied(hop: Hop, bytes: number, copies = bytes > 0 ? 1 : 0): void {
    const at = AT[hop];
    this.#n[at + COPIED]! += bytes;
    this.#n[at + COPIES]! += copies;
  }

  allocated(hop: Hop, count = 1): void {
    this.#n[AT[hop] + ALLOCATIONS]! += count;
  }

  /** `hop`'s numbers into `into` (a record the reader keeps: reading allocates nothing); returns it. */
  read(hop: Hop, into: HopRecord): HopRecord {
    const n = this.#n;
    const at = AT[hop];
    into.startNs = n[at + START]!;
    into.endNs = n[at + END]!;
    into.bytesIn = n[at + IN]!;
    into.bytesOut = n[at + OUT]!;
    into.bytesCopied = n[at + COPIED]!;
    into.copies = n[at + COPIES]!;
    into.allocations = n[at + ALLOCATIONS]!;
    return into;
  }

  /** `from`'s bytes hop by hop (its copies and allocations too when `copies`), not its times: a repeated request's. */
  countsOf(from: Ledger, copies: boolean): void {
    const n = this.#n, f = from.#n;
    for (let at = 0; at < n.length; at += HOP_FIELDS) {
      n[at + IN] = f[at + IN]!;
      n[at + OUT] = f[at + OUT]!;
      if (copies) for (const k of [COPIED, COPIES, ALLOCATIONS]) n[at + k] = f[at + k]!;
    }
  }

  /** Every hop's numbers, copied: for readers off the request's path (tests, a trace's spans). */
  get hops(): Readonly<Record<Hop, Readonly<HopRecord>>> {
    const hops = {} as Record<Hop, HopRecord>;
    for (const hop of HOPS) hops[hop] = this.read(hop, hopRecord());
    return hops;
  }
}
