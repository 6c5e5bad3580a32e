// A list of chunks as one buffer: a request body as node:http handed it over, an output tensor as
// it came in the answer's frames, an encoder's pieces. The one place that decides when that costs
// a copy (docs/architecture.md#copies).

/** `chunks` as one buffer: the only chunk itself (no copy), several gathered into a new one. */
export function gather(chunks: readonly Buffer[], length?: number): Buffer {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
}
