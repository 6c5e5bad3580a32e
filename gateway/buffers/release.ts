// Memory handed back the moment its owner is done with it, instead of at the next full collection.
// A buffer that outlives two scavenges is freed only by a mark-compact, which V8 starts once
// external memory has grown ~64 MB: under 8 concurrent base64 uploads of 4 MiB, the 4.2 MB staging
// buffer each one is decoded into (decode/base64-staging.ts) piled up as garbage between
// collections. Detaching an ArrayBuffer (`transfer(0)`) frees its memory at once; every view of it
// then reads as empty, so only an owner that knows nothing else reads it may do so.

/** ES2024's ArrayBuffer methods (Node 24 has them; the project's TypeScript lib predates them). */
type Detachable = ArrayBuffer & { transfer?: (length: number) => ArrayBuffer; readonly detached?: boolean };

/**
 * Frees the memory beneath `buf` now, when `buf` starts its own ArrayBuffer (never Node's shared
 * slab of small Buffers, nor a SharedArrayBuffer); the caller owns that memory and nothing reads it
 * any more. Returns the bytes freed.
 */
export function releaseOwned(buf: Uint8Array): number {
  const memory = buf.buffer as Detachable;
  if (memory.transfer === undefined || memory.detached === true || buf.byteOffset !== 0 || memory.byteLength <= Buffer.poolSize) return 0;
  const bytes = memory.byteLength;
  memory.transfer(0);
  return bytes;
}
