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

export class HopRecord {
  startNs = 0;
  endNs = 0;
  bytesIn = 0;
  bytesOut = 0;
  bytesCopied = 0;
  /** Copy steps that moved bytesCopied (see above). */
  copies = 0;
  allocations = 0;
}

/** The hops of one request, each a field (one object of a fixed shape, no record built key by key). */
class Hops implements Record<Hop, HopRecord> {
  readonly ingress_read = new HopRecord();
  readonly decode = new HopRecord();
  readonly upstream_send = new HopRecord();
  readonly triton = new HopRecord();
  readonly upstream_receive = new HopRecord();
  readonly encode = new HopRecord();
  readonly egress_write = new HopRecord();
}

export class Ledger {
  readonly hops: Record<Hop, HopRecord> = new Hops();
  /**
   * Tensor bytes Triton read from a shared-memory region instead of the gRPC message
   * (upstream.sharedMemory): written there once (counted as copied by decode), absent from upstream_send.
   */
  sharedMemoryBytes = 0;

  start(hop: Hop): void {
    this.hops[hop].startNs = nowNs();
  }

  end(hop: Hop): void {
    this.hops[hop].endNs = nowNs();
  }

  bytes(hop: Hop, bytesIn: number, bytesOut: number): void {
    this.hops[hop].bytesIn += bytesIn;
    this.hops[hop].bytesOut += bytesOut;
  }

  /**
   * One copy step of `bytes` (none when it moved nothing), or `copies` steps counted elsewhere (a
   * decode thread's ledger).
   */
  copied(hop: Hop, bytes: number, copies = bytes > 0 ? 1 : 0): void {
    this.hops[hop].bytesCopied += bytes;
    this.hops[hop].copies += copies;
  }

  allocated(hop: Hop, count = 1): void {
    this.hops[hop].allocations += count;
  }
}
