// The last few large staging buffers, kept warm for the next base64 upload. A Buffer of 128 KiB
// or more is a fresh mmap (the launcher's MALLOC_MMAP_THRESHOLD_, bin/tensorgate) whose every page
// faults on first write: the 4.2 MB that a 4 MiB base64
// tensor is decoded into (decode/base64/base64-staging.ts) cost 2–4 ms of CPU per request at c=8 in page
// faults alone (bench/RESULTS.md "base64 at binary's cost"). The message pool (buffers/pool.ts)
// cannot take them: their size is only bounded (3/4 of what is left of the body), they live for an
// upload rather than a request, and its counts describe the framed messages.
//
// So: at most MAX_IDLE buffers of MIN_BYTES or more, MAX_IDLE_BYTES in all, wait here (LIFO), each
// taken again only for a size it fits without wasting more than a quarter of it, and all dropped
// once none was asked for IDLE_MS (an unref'd timer). A buffer given back may be handed to another
// request at once: its giver must be certain nothing reads it any more (the same contract as the
// message pool's). Eight: one per request of a client at c=8 (with two, 600 KB base64 requests at
// c=8 still faulted 4–28 pages each on average, and their CPU swung with it).
import { freeMemory, releaseOwned } from './release';

/** Smaller buffers are ordinary mallocs, below malloc's mmap threshold: not kept. */
export const MIN_BYTES = 128 * 1024;
/** Idle buffers kept at most. */
export const MAX_IDLE = 8;
/**
 * Their bytes at most: eight 4 MiB tensors' staging (about 4.2 MB each). With three (13 MiB), 4 MB
 * base64 requests at c=8 faulted ~230 pages each and spent ~0.5 ms more system CPU on them
 * (bench/RESULTS.md, "seventeenth pass"). They are memory a burst held anyway, and go after IDLE_MS.
 */
export const MAX_IDLE_BYTES = 36 * 1024 * 1024;
/** Idle buffers are dropped after this long without a taker. */
export const IDLE_MS = 2000;

/**
 * The keeping itself, for any memory (an ArrayBuffer, a decode thread's SharedArrayBuffer): at
 * most `max` kept and `maxBytes` in all (the oldest go to `drop` for a new one), one taken again
 * only for a size it fits without wasting more than a quarter of it, the warmest first; with
 * `idleMs`, all of them dropped once none was kept for that long (an unref'd timer).
 */
export class Spares<M extends { readonly byteLength: number }> {
  readonly #idle: M[] = [];
  /** Each kept one's size when kept (a kept one freed in place by mistake would read 0 later). */
  readonly #sizes: number[] = [];
  #bytes = 0;
  #timer: NodeJS.Timeout | undefined;
  /** When the last one was kept (Date.now()): the timer, set once, fires idleMs after it. */
  #keptAt = 0;

  constructor(private readonly max: number, private readonly idleMs?: number, private readonly drop: (m: M) => void = () => undefined,
    private readonly maxBytes = Infinity) {}

  /** A kept one of `n` bytes or a little more, if one fits. */
  take(n: number): M | undefined {
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const m = this.#idle[i]!;
      if (m.byteLength >= n && m.byteLength <= n + n / 4) {
        if (i === this.#idle.length - 1) { // the warmest, most often: no array made for it
          this.#bytes -= this.#sizes.pop()!;
          return this.#idle.pop();
        }
        this.#bytes -= this.#sizes.splice(i, 1)[0]!;
        return this.#idle.splice(i, 1)[0];
      }
    }
    return undefined;
  }

  /** Keeps `m`, which nothing reads any more (and is not kept already: has()); drops it if over maxBytes alone. */
  keep(m: M): void {
    if (m.byteLength > this.maxBytes) {
      this.drop(m);
      return;
    }
    while (this.#idle.length > 0 && (this.#idle.length >= this.max || this.#bytes + m.byteLength > this.maxBytes)) {
      this.#bytes -= this.#sizes.shift()!;
      this.drop(this.#idle.shift()!);
    }
    this.#idle.push(m);
    this.#sizes.push(m.byteLength);
    this.#bytes += m.byteLength;
    if (this.idleMs === undefined) return;
    // One timer while any are kept, not one a keep (a 600 KB request gives a read page back each
    // time): when it fires early for a later keep, it is set again for what is left.
    this.#keptAt = Date.now();
    this.#timer ??= setTimeout(this.#onIdle, this.idleMs).unref();
  }

  readonly #onIdle = (): void => {
    this.#timer = undefined;
    const rest = this.#keptAt + this.idleMs! - Date.now();
    if (rest > 0 && this.#idle.length > 0) this.#timer = setTimeout(this.#onIdle, rest).unref();
    else this.clear();
  };

  has(m: M): boolean {
    return this.#idle.includes(m);
  }

  /** Drops every kept one now. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#bytes = 0;
    this.#sizes.length = 0;
    for (const m of this.#idle.splice(0)) this.drop(m);
  }

  get count(): number {
    return this.#idle.length;
  }

  get bytes(): number {
    return this.#bytes;
  }
}

export class WarmBuffers {
  readonly #idle: Spares<ArrayBuffer>;
  /** Buffers take() handed out from the idle ones. */
  readonly #reused = new WeakSet<Buffer>();

  constructor(maxIdle = MAX_IDLE, idleMs = IDLE_MS, maxIdleBytes = MAX_IDLE_BYTES) {
    this.#idle = new Spares<ArrayBuffer>(maxIdle, idleMs, freeMemory, maxIdleBytes);
  }

  /** A buffer of exactly `n` bytes, contents undefined: a kept one when one fits, else fresh. */
  take(n: number): Buffer {
    const memory = n >= MIN_BYTES ? this.#idle.take(n) : undefined;
    if (memory === undefined) return Buffer.allocUnsafe(n);
    const buf = Buffer.from(memory, 0, n);
    this.#reused.add(buf);
    return buf;
  }

  /** Whether `buf` came from take() as a kept buffer (not a fresh allocation). */
  reused(buf: Buffer): boolean {
    return this.#reused.has(buf);
  }

  /** Gives back a buffer take() handed out (any view of it); nothing reads it any more. */
  give(buf: Uint8Array): void {
    const memory = buf.buffer;
    if (!(memory instanceof ArrayBuffer) || memory.byteLength < MIN_BYTES || buf.byteOffset !== 0 || this.#idle.has(memory)) {
      releaseOwned(buf);
      return;
    }
    this.#idle.keep(memory);
  }

  /** Frees every idle buffer now. */
  drop(): void {
    this.#idle.clear();
  }

  get idleBytes(): number {
    return this.#idle.bytes;
  }
}
