// Memory handed back the moment its owner is done with it, instead of at the next full collection.
// A buffer that outlives two scavenges is freed only by a mark-compact, which V8 starts once
// external memory has grown ~64 MB: under 8 concurrent base64 uploads of 4 MiB, the 4.2 MB staging
// buffer each one is decoded into (decode/base64/base64-staging.ts) piled up as garbage between
// collections. Detaching an ArrayBuffer (`transfer(0)`) frees its memory at once; every view of it
// then reads as empty, so only an owner that knows nothing else reads it may do so.

/** ES2024's ArrayBuffer methods (Node 24 has them; the project's TypeScript lib predates them). */
type Detachable = ArrayBuffer & { transfer?: (length: number) => ArrayBuffer; readonly detached?: boolean };

/** Chunks whose memory goes back to their maker when freed, rather than to the allocator (buffers/reads.ts). */
const makers = new WeakMap<Uint8Array, (chunk: Uint8Array) => void>();

/** `chunk`, when released by releaseWhole or releaseOwned, is handed to `back` (once) instead of freed. */
export function recyclable(chunk: Uint8Array, back: (chunk: Uint8Array) => void): void {
  makers.set(chunk, back);
}

/** A recyclable chunk goes back to its maker: the bytes it held, or 0 when it is not one. */
function giveBack(buf: Uint8Array): number {
  const back = makers.get(buf);
  if (back === undefined) return 0;
  makers.delete(buf);
  const bytes = buf.byteLength;
  back(buf);
  return bytes;
}

/**
 * Frees the memory beneath `buf` now, when `buf` starts its own ArrayBuffer (never Node's shared
 * slab of small Buffers, nor a SharedArrayBuffer); the caller owns that memory and nothing reads it
 * any more. Returns the bytes freed.
 */
export function releaseOwned(buf: Uint8Array): number {
  const given = giveBack(buf);
  if (given > 0) return given;
  if (buf.byteOffset !== 0 || buf.buffer.byteLength <= Buffer.poolSize) return 0;
  return freeMemory(buf.buffer);
}

/**
 * Frees the memory beneath `buf` now when `buf` is the whole of its ArrayBuffer (a body chunk as
 * node:http hands it over: its own allocation, 64 KiB at most, which releaseOwned's size test
 * would take for Node's shared slab); the caller owns it and nothing reads it any more. A Buffer
 * on the slab is never the whole slab (Node puts only Buffers under half its size there), and an
 * HTTP/2 DATA chunk is a slice of a larger read: both are left to the collector. A recyclable chunk
 * (a fast-path read into a page, buffers/reads.ts) goes back to its maker. Returns the bytes freed.
 */
export function releaseWhole(buf: Uint8Array): number {
  const given = giveBack(buf);
  if (given > 0) return given;
  if (buf.byteOffset !== 0 || buf.byteLength !== buf.buffer.byteLength) return 0;
  return freeMemory(buf.buffer);
}

/**
 * Frees `memory` now, whole (an ArrayBuffer; a SharedArrayBuffer cannot be): its owner knows
 * nothing reads it any more. Returns the bytes freed.
 */
export function freeMemory(memory: ArrayBufferLike): number {
  const m = memory as Detachable;
  if (typeof m.transfer !== 'function' || m.detached === true) return 0;
  const bytes = m.byteLength;
  m.transfer(0);
  return bytes;
}
