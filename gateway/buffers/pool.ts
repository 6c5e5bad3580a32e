// Size-class pools for the pre-framed ModelInferRequest messages (docs/architecture.md#pre-framing).
// A fresh multi-MB Buffer pays its first-touch page faults on every request; a page kept from an
// earlier request is already mapped (4 MiB copied into a reused buffer 0.29 ms, into
// a fresh one 0.94 ms; bench/pool.js measures framing + filling 600 KB–16 MB, bench/RESULTS.md).
//
// Classes are powers of two from 64 KiB up to half of `buffers.poolBytes`, each with 4 KiB more
// room for the protobuf header fields in front of the tensors — tensors are often a power of two
// (4 MiB, 16 MiB), and without the room their messages would take a page twice their size. A
// message takes the smallest class that holds it and is a view of that page. Smaller messages keep
// Buffer.allocUnsafe (a malloc below glibc's mmap threshold: no page faults to save), larger ones
// are allocated fresh. Idle pages wait in one LIFO stack per class (the warmest page goes out
// first); their total never exceeds `buffers.poolBytes`: making room evicts the idle page released
// longest ago, whatever its class, so a workload that changes sizes does not find the budget held
// by a class nobody asks for any more. 0 disables pooling. Pages left idle for a while are dropped
// too (`dropIdle`, called by buffers/reclaim.ts): after a burst of 8 concurrent 4 MiB requests, the
// pool would otherwise keep their 32 MB for good, while one warm page a class serves a steady
// stream, and a page made again costs its page faults once (0.65 ms for 4 MiB). A page dropped
// idle or evicted is freed at once (detached: nothing reads an idle page), not left for a full
// collection to find; buffers/reclaim.ts says why that matters.
//
// Lifetime: a request owns its buffers (`forRequest()`, released by ingress/server.ts once the
// route's handler has settled) and a transport that may still read a message after that holds it
// (`hold()`, upstream/infer/h2-plane.ts: node:http2 writes by reference). A page goes back when both let
// go, and never when a holder cannot vouch that nothing reads it any more: it is dropped, and the
// garbage collector frees it once the last reference is gone. A message framed elsewhere (a decode
// thread's, decode/threads/pool.ts) can be adopted into a request under the same rule; it goes
// back to its maker instead of an idle stack.
import type { Allocate } from '../infer/framed-message';
import { freeMemory } from './release';

/**
 * Keeps a message's memory from reuse while a transport may still read it (a pooled buffer,
 * below). `hold` returns the function that lets go — once — told whether the
 * transport is certain nothing reads the bytes any more.
 */
export interface MessageHolds {
  hold(message: Buffer): (reusable: boolean) => void;
}

/** Smallest class: below it Buffer.allocUnsafe costs no page faults worth saving. */
export const MIN_CLASS_BYTES = 64 * 1024;
/** Each page's room beyond its power of two: model name, id, parameters, input names and shapes. */
export const HEADER_ROOM_BYTES = 4 * 1024;

export interface BufferPoolStats {
  /** Acquisitions served by an idle page: no allocation. */
  readonly hits: number;
  /** Acquisitions of a pooled size that found no idle page and allocated one. */
  readonly misses: number;
  /** Idle pages evicted or not kept, to stay within the retained-bytes bound. */
  readonly droppedBound: number;
  /** Pages not taken back because a holder could not vouch that nothing still reads them. */
  readonly droppedInFlight: number;
  /** Bytes of the idle pages (class sizes). */
  readonly retainedBytes: number;
  /** Pages handed out and not yet back (or dropped). */
  readonly inUse: number;
}

/** Misuse of the pool: a programming error, never a client's. */
export class BufferPoolError extends Error {
  constructor(readonly code: 'ERR_BUFFER_POOL_DOUBLE_RELEASE' | 'ERR_BUFFER_POOL_FOREIGN' | 'ERR_BUFFER_POOL_IN_USE', message: string) {
    super(message);
    this.name = 'BufferPoolError';
  }
}

interface Page {
  readonly memory: ArrayBuffer;
  readonly classIndex: number;
  /** The owner plus every holder. */
  refs: number;
  /** False once a holder let go without vouching. */
  reusable: boolean;
  /** The current acquisition was served from the idle stack. */
  hit: boolean;
  /** Release order, for evicting the coldest idle page first. */
  idleSince: number;
  /** performance.now() at its release (`dropIdle`). */
  releasedAt: number;
}

/** A message RequestBuffers.adopt took in: held like a page, handed to `back` instead of an idle stack. */
interface Adopted {
  readonly memory: ArrayBufferLike;
  /** The owning request plus every holder. */
  refs: number;
  reusable: boolean;
  readonly back: () => void;
}

/** The buffers of one request: acquired for framing, all released together. */
export interface RequestBuffers {
  /** A buffer of exactly `byteLength` bytes, contents undefined. */
  readonly acquire: Allocate;
  /** Whether `buf` is a pooled page reused for this request (the ledger counts no allocation). */
  reused(buf: Buffer): boolean;
  /**
   * Makes a message this pool did not make the request's, held as a page is: `back` runs once the
   * request is over and every holder let go vouching that nothing reads it (never otherwise).
   */
  adopt(buf: Buffer, back: () => void): void;
  /** The request is over: every pooled buffer goes back (once its holders, if any, let go too). */
  release(): void;
}

/** Fresh allocations, nothing to release: pooling disabled. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- Buffer.allocUnsafe is static, no `this`
export const NOT_POOLED: RequestBuffers = { acquire: Buffer.allocUnsafe, reused: () => false, adopt: () => undefined, release: () => undefined };
const NO_HOLD = (): void => undefined;

export class BufferPool implements MessageHolds {
  readonly poolBytes: number;
  /** Largest pooled message: the largest power of two up to half the bound, plus the header room (0: disabled). */
  readonly maxPooledBytes: number;
  /** Idle pages per class, warmest last. */
  readonly #idle: Page[][] = [];
  /** Pages handed out, by their memory. */
  readonly #inUse = new Map<ArrayBuffer, Page>();
  /** Adopted messages (RequestBuffers.adopt), by their memory. */
  readonly #adopted = new Map<ArrayBufferLike, Adopted>();
  /** Every page this pool ever made, to tell a double release from a foreign buffer. */
  readonly #made = new WeakSet<ArrayBuffer>();
  #retainedBytes = 0;
  #released = 0;
  #hits = 0;
  #misses = 0;
  #droppedBound = 0;
  #droppedIdle = 0;
  #droppedInFlight = 0;

  constructor(poolBytes: number) {
    this.poolBytes = poolBytes;
    let max = 0;
    if (poolBytes >= 2 * classBytes(0)) {
      max = MIN_CLASS_BYTES;
      while (max * 4 <= poolBytes) max *= 2;
      for (let size = MIN_CLASS_BYTES; size <= max; size *= 2) this.#idle.push([]);
    }
    // No page exceeds the bound, so making room for one always ends (#unref).
    this.maxPooledBytes = max === 0 ? 0 : max + HEADER_ROOM_BYTES;
  }

  get enabled(): boolean {
    return this.maxPooledBytes > 0;
  }

  /**
   * A buffer of exactly `byteLength` bytes, contents undefined: a view of a pooled page when the
   * size has a class (release it with `release`), else a fresh Buffer.allocUnsafe.
   */
  acquire(byteLength: number): Buffer {
    if (byteLength < MIN_CLASS_BYTES || byteLength > this.maxPooledBytes) return Buffer.allocUnsafe(byteLength);
    const classIndex = classOf(byteLength);
    let page = this.#idle[classIndex]!.pop();
    if (page !== undefined) {
      this.#hits++;
      this.#retainedBytes -= classBytes(classIndex);
      page.hit = true;
    } else {
      this.#misses++;
      // Uninitialised, its own ArrayBuffer of exactly the class size (never Node's shared slab).
      const memory = Buffer.allocUnsafeSlow(classBytes(classIndex)).buffer;
      this.#made.add(memory);
      page = { memory, classIndex, refs: 0, reusable: true, hit: false, idleSince: 0, releasedAt: 0 };
    }
    page.refs = 1;
    page.reusable = true;
    this.#inUse.set(page.memory, page);
    return Buffer.from(page.memory, 0, byteLength);
  }

  /** Gives back a buffer `acquire` handed out (the owner's reference). */
  release(buf: Buffer): void {
    this.#unref(this.#pageOf(buf), true);
  }

  /** Whether `buf` is a pooled page whose current acquisition was served from the idle stack. */
  reused(buf: Buffer): boolean {
    return this.#inUse.get(buf.buffer as ArrayBuffer)?.hit === true;
  }

  /**
   * Keeps `message`'s page from reuse until the returned function is called (once; later calls do
   * nothing) with whether the holder is certain it no longer reads the bytes. Any buffer may be
   * held: one that is not a pooled page in use needs nothing.
   */
  hold(message: Buffer): (reusable: boolean) => void {
    const page = this.#inUse.get(message.buffer as ArrayBuffer) ?? this.#adopted.get(message.buffer);
    if (page === undefined) return NO_HOLD;
    page.refs++;
    let held = true;
    return (reusable) => {
      if (!held) return;
      held = false;
      if ('back' in page) this.#unadopt(page, reusable);
      else this.#unref(page, reusable);
    };
  }

  /** Per-request ownership: everything acquired through it is released by one `release()`. */
  forRequest(): RequestBuffers {
    if (!this.enabled) return NOT_POOLED;
    const pool = this; // eslint-disable-line @typescript-eslint/no-this-alias -- the methods below run with the returned object as `this`
    let pooled: Buffer[] = [];
    let adopted: Adopted[] = [];
    return {
      acquire(byteLength) {
        const buf = pool.acquire(byteLength);
        if (pool.#inUse.has(buf.buffer as ArrayBuffer)) pooled.push(buf);
        return buf;
      },
      reused: (buf) => pool.reused(buf),
      adopt(buf, back) {
        if (pool.#inUse.has(buf.buffer as ArrayBuffer) || pool.#adopted.has(buf.buffer)) {
          throw new BufferPoolError('ERR_BUFFER_POOL_IN_USE', `buffer of ${buf.length} bytes adopted while in use`);
        }
        const a: Adopted = { memory: buf.buffer, refs: 1, reusable: true, back };
        pool.#adopted.set(a.memory, a);
        adopted.push(a);
      },
      release() {
        const bufs = pooled;
        pooled = [];
        for (const b of bufs) pool.release(b);
        const own = adopted;
        adopted = [];
        for (const a of own) pool.#unadopt(a, true);
      },
    };
  }

  #unadopt(a: Adopted, reusable: boolean): void {
    if (!reusable) a.reusable = false;
    if (--a.refs > 0) return;
    this.#adopted.delete(a.memory);
    if (a.reusable) a.back();
  }

  /** Idle pages dropped because nobody asked for them for a while (`dropIdle`). */
  get droppedIdle(): number {
    return this.#droppedIdle;
  }

  /**
   * Drops the idle pages released `idleMs` or longer before `now` (performance.now()) and frees
   * their memory at once (nothing reads an idle page). Returns the bytes dropped.
   */
  dropIdle(idleMs: number, now = performance.now()): number {
    let dropped = 0;
    for (const stack of this.#idle) {
      // A stack is in release order: its coldest pages at the bottom.
      while (stack.length > 0 && now - stack[0]!.releasedAt >= idleMs) {
        const page = stack.shift()!;
        const size = classBytes(page.classIndex);
        this.#retainedBytes -= size;
        this.#droppedIdle++;
        dropped += size;
        freeMemory(page.memory);
      }
    }
    return dropped;
  }

  stats(): BufferPoolStats {
    return {
      hits: this.#hits,
      misses: this.#misses,
      droppedBound: this.#droppedBound,
      droppedInFlight: this.#droppedInFlight,
      retainedBytes: this.#retainedBytes,
      inUse: this.#inUse.size,
    };
  }

  #pageOf(buf: Buffer): Page {
    const memory = buf.buffer as ArrayBuffer;
    const page = this.#inUse.get(memory);
    if (page !== undefined && buf.byteOffset === 0) return page;
    if (page === undefined && buf.byteOffset === 0 && this.#made.has(memory)) {
      throw new BufferPoolError('ERR_BUFFER_POOL_DOUBLE_RELEASE', `buffer of ${buf.length} bytes released twice`);
    }
    throw new BufferPoolError('ERR_BUFFER_POOL_FOREIGN', `buffer of ${buf.length} bytes is not one this pool handed out`);
  }

  #unref(page: Page, reusable: boolean): void {
    if (!reusable) page.reusable = false;
    if (--page.refs > 0) return;
    this.#inUse.delete(page.memory);
    if (!page.reusable) {
      this.#droppedInFlight++;
      return;
    }
    const size = classBytes(page.classIndex);
    while (this.#retainedBytes + size > this.poolBytes) this.#evictColdest();
    page.hit = false;
    page.idleSince = ++this.#released;
    page.releasedAt = performance.now();
    this.#idle[page.classIndex]!.push(page);
    this.#retainedBytes += size;
  }

  /** Drops the idle page released longest ago: the bottom of one class's stack. */
  #evictColdest(): void {
    let coldest: Page[] | undefined;
    for (const stack of this.#idle) {
      if (stack.length > 0 && (coldest === undefined || stack[0]!.idleSince < coldest[0]!.idleSince)) coldest = stack;
    }
    const page = coldest!.shift()!;
    this.#retainedBytes -= classBytes(page.classIndex);
    this.#droppedBound++;
    freeMemory(page.memory);
  }
}

/** Index of the smallest class holding `byteLength` (≥ MIN_CLASS_BYTES): up to 68 KiB → 0, 132 KiB → 1, … */
function classOf(byteLength: number): number {
  const tensors = byteLength - HEADER_ROOM_BYTES;
  return tensors <= MIN_CLASS_BYTES ? 0 : 32 - Math.clz32(tensors - 1) - 16;
}

function classBytes(classIndex: number): number {
  return MIN_CLASS_BYTES * 2 ** classIndex + HEADER_ROOM_BYTES;
}
