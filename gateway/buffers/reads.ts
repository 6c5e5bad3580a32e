// Memory for the fast path's socket reads (docs/architecture.md, "Reads of the fast path").
//
// libuv asks for 64 KiB before each read and Node allocates that much afresh: a 4 MiB upload is
// ~65 reads, each a system call, an event-loop callback, an allocation and a pass through the
// request's code. A net.Socket whose `onread.buffer` is a function reads into the buffer that
// function gives, asked again after each read (Node's lib/internal/stream_base_commons.js
// onStreamRead, src/stream_base.cc CustomBufferJSListener): so the size of each read is ours to
// choose. Here a socket that filled its last buffer (more was waiting) next reads into a page of
// PAGE_BYTES; one that did not (it had read all there was) next reads into SMALL_BYTES, so a
// keep-alive connection idle after its last request waits on SMALL_BYTES, not a page.
//
// Pages are memory of 1 MiB: past glibc's mmap threshold (bin/tensorgate), so a fresh one faults
// on every 4 KiB written to it (4 MiB written: 0.94 ms fresh, 0.29 ms kept; buffers/pool.ts).
// They are kept for the next read instead: a read's chunk whose owner frees it whole
// (buffers/release.ts releaseWhole, once its bytes are on Triton's socket) gives its page back
// here — moved to a new ArrayBuffer (`transfer()`, no copy), so any view of it left behind reads
// as empty, never as the next read. A chunk shared with another request or never freed is the
// collector's, as every read was. A read that fills less than a quarter of its buffer is copied
// out and the buffer read into again, so no chunk keeps more than four times its size alive. At
// most MAX_IDLE_PAGES wait (freed after IDLE_MS without a taker: detached, not left to the
// collector, buffers/reclaim.ts), and at most MAX_LENT_PAGES are some socket's next buffer at once
// (beyond that, sockets read SMALL_BYTES): a thousand connections that each send a page's worth
// and stall hold no more than that.
import type { Socket } from 'node:net';
import { keeps } from './reclaim';
import { freeMemory, recyclable } from './release';
import { Spares } from './warm';

/** A read of a socket that had more waiting: the next one's buffer. */
export const PAGE_BYTES = 1024 * 1024;
/** A read of a socket that had no more waiting (or the first): its buffer, a malloc without page faults. */
export const SMALL_BYTES = 16 * 1024;
/** Idle pages kept for the next reads. */
export const MAX_IDLE_PAGES = 16;
/** Pages handed to sockets as their next buffer and not read into yet, at most. */
export const MAX_LENT_PAGES = 32;
/** Idle pages are dropped after this long without a taker. */
export const IDLE_MS = 2000;

/** Node's own names for a socket's onread state (lib/net.js): found once, on a socket made with onread. */
interface ReadSymbols {
  readonly buffer: symbol;
  readonly callback: symbol;
  readonly generator: symbol;
}

let symbols: ReadSymbols | null | undefined;

/** The symbols behind `onread`, or null on a Node that keeps them otherwise (reads stay Node's). */
function readSymbols(): ReadSymbols | null {
  if (symbols !== undefined) return symbols;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const net = require('node:net') as typeof import('node:net');
  const probe = new net.Socket({ onread: { buffer: () => Buffer.alloc(1), callback: () => true } });
  const named = (name: string): symbol | undefined => Object.getOwnPropertySymbols(probe).find((s) => s.description === name);
  const buffer = named('kBuffer'), callback = named('kBufferCb'), generator = named('kBufferGen');
  const probed = probe as unknown as Record<symbol, unknown>;
  symbols = buffer !== undefined && callback !== undefined && generator !== undefined && typeof probed[generator] === 'function'
    ? { buffer, callback, generator } : null;
  probe.destroy();
  return symbols;
}

export interface ReadStats {
  /** Reads into a page. */
  readonly pageReads: number;
  /** Reads into SMALL_BYTES. */
  readonly smallReads: number;
  /** Pages given back by their chunk's owner and kept. */
  readonly recycled: number;
  /** Pages allocated (no idle one). */
  readonly made: number;
  /** Reads copied out of their buffer (less than a quarter of it). */
  readonly copied: number;
  readonly idlePages: number;
  readonly lentPages: number;
}

/** The read memory of one process: shared by every socket it reads for. */
export class ReadMemory {
  readonly #idle: Spares<ArrayBuffer>;
  /** Pages handed out as a next buffer (the page's ArrayBuffer), not read into yet. */
  readonly #lent = new Set<ArrayBufferLike>();
  #pageReads = 0;
  #smallReads = 0;
  #recycled = 0;
  #made = 0;
  #copied = 0;
  /** A small buffer whose read was copied out: the next small read goes into it. */
  #spare: Buffer | undefined;
  readonly #giveBack = (chunk: Uint8Array): void => {
    const memory = chunk.buffer as ArrayBuffer & { transfer(): ArrayBuffer; readonly detached: boolean };
    if (memory.detached || memory.byteLength !== PAGE_BYTES) return;
    this.#recycled++;
    this.#idle.keep(memory.transfer());
  };

  constructor(idleMs = IDLE_MS) {
    this.#idle = new Spares<ArrayBuffer>(MAX_IDLE_PAGES, idleMs, freeMemory);
  }

  /** The buffer a socket reads into next, its last read having filled its buffer (`full`) or not. */
  next(full: boolean): Buffer {
    if (!full || this.#lent.size >= MAX_LENT_PAGES) {
      const spare = this.#spare;
      this.#spare = undefined;
      return spare ?? Buffer.allocUnsafeSlow(SMALL_BYTES);
    }
    let memory = this.#idle.take(PAGE_BYTES);
    if (memory === undefined) {
      this.#made++;
      memory = new ArrayBuffer(PAGE_BYTES);
    }
    this.#lent.add(memory);
    return Buffer.from(memory, 0, PAGE_BYTES);
  }

  /**
   * `n` bytes were read into `into` (from next()): the chunk that holds them. A chunk is a view of
   * its buffer unless it fills less than a quarter of it: then it is a copy (a chunk never keeps
   * more than four times its bytes alive, however it is kept), and the buffer is read into again.
   */
  read(into: Buffer, n: number): Buffer {
    const page = into.length === PAGE_BYTES && this.#lent.delete(into.buffer);
    if (page) this.#pageReads++;
    else this.#smallReads++;
    if (n < into.length / 4) {
      // Under 4 KiB a slice of Node's shared pool (Buffer.poolSize), as Node's small Buffers are.
      const chunk = Buffer.allocUnsafe(n);
      chunk.set(into.subarray(0, n)); // not copy(): a call into C++
      this.#copied++;
      if (page) this.#idle.keep(into.buffer as ArrayBuffer);
      else this.#spare = into;
      return chunk;
    }
    const chunk = into.subarray(0, n);
    if (page) recyclable(chunk, this.#giveBack);
    return chunk;
  }

  /** Bytes of the idle pages. */
  get idleBytes(): number {
    return this.#idle.bytes;
  }

  /** Bytes kept for reads to come: the idle pages and those some socket will read into next. */
  get keptBytes(): number {
    return this.#idle.bytes + this.#lent.size * PAGE_BYTES;
  }

  /** A buffer from next() that no read will fill (its socket closed): a page goes back. */
  unused(into: Buffer): void {
    if (this.#lent.delete(into.buffer)) this.#idle.keep(into.buffer as ArrayBuffer);
  }

  stats(): ReadStats {
    return {
      pageReads: this.#pageReads, smallReads: this.#smallReads, recycled: this.#recycled, made: this.#made, copied: this.#copied,
      idlePages: this.#idle.count, lentPages: this.#lent.size,
    };
  }
}

/** The process's read memory. */
export const readMemory = new ReadMemory();
keeps(() => readMemory.keptBytes);

/**
 * Reads of `socket` (a TCP socket, flowing or paused) go to `onChunk` from now on, each in a buffer
 * of `memory`, rather than to 'data' events. Returns false, changing nothing, when this Node keeps
 * onread's state where it was not found or the socket's handle has no user buffers (reads stay
 * Node's: 'data'). pause() and resume() keep working (lib/net.js stops and starts the handle's
 * reads itself for an onread socket); end and errors come as before.
 */
export function readInto(socket: Socket, onChunk: (chunk: Buffer) => void, memory: ReadMemory = readMemory): boolean {
  const s = readSymbols();
  const handle = (socket as unknown as { _handle?: { useUserBuffer?: (b: Uint8Array) => void } })._handle;
  if (s === null || typeof handle?.useUserBuffer !== 'function') return false;
  const state = socket as unknown as Record<symbol, unknown>;
  let full = false;
  state[s.generator] = () => memory.next(full);
  state[s.callback] = (n: number, into: Buffer): boolean => {
    full = n === into.length;
    onChunk(memory.read(into, n));
    return true;
  };
  const first = memory.next(false);
  state[s.buffer] = first;
  handle.useUserBuffer(first);
  socket.once('close', () => {
    const last = state[s.buffer];
    if (Buffer.isBuffer(last)) memory.unused(last);
  });
  return true;
}

/**
 * Reads of a socket readInto() took go back to being Node's: each pushed to the socket's readable
 * side as a copy (what node:http keeps of a read is its own), for 'data'. The handle is marked as
 * consumed, so node:http's parser reads it through 'data' as it does a TLS socket's, rather than
 * from the handle itself: stacked on the user-buffer listener, a read error the parser passes down
 * with no buffer fails a check in Node's CustomBufferJSListener (src/stream_base.cc) on some
 * versions, which aborts the process.
 */
export function readsToNode(socket: Socket, memory: ReadMemory = readMemory): void {
  const s = readSymbols();
  if (s === null) return;
  const state = socket as unknown as Record<symbol, unknown>;
  if (typeof state[s.callback] !== 'function') return;
  const handle = (socket as unknown as { _handle?: { _consumed?: boolean } })._handle;
  if (handle !== undefined && handle !== null) handle._consumed = true;
  state[s.generator] = () => memory.next(false);
  state[s.callback] = (n: number, into: Buffer): boolean => socket.push(Buffer.from(memory.read(into, n)));
}
