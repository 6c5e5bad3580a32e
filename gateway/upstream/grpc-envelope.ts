// The gRPC message envelope as it passes (gRPC over HTTP/2: Length-Prefixed-Message = a 1-byte
// compressed flag, a 4-byte big-endian length, then the message), read without keeping or copying
// the message: the pass-through only needs each declared length (to refuse one past the byte
// budget before any of it is forwarded) and where each message's bytes begin (to read a model
// name). Like connect-es' envelope decoder, the declared length is checked before anything else;
// unlike it, nothing is allocated for the message: the chunks go on as they came.

/** What a chunk held. */
export interface EnvelopeStep {
  /** A message declared more bytes than the bound: its length (the chunk should not be forwarded). */
  readonly tooLarge?: number;
}

/**
 * Push scanner over one direction of a call. `onMessage(chunk, at, length, compressed)` is told of
 * each message whose prefix has passed, with where its bytes begin: `chunk[at]` (`at` is
 * chunk.length when the prefix ended the chunk).
 */
export class EnvelopeScanner {
  /** Bytes of the current message still to pass; -1 while reading a prefix. */
  #left = -1;
  /** The prefix read so far (a prefix may be split across chunks: 5 bytes kept at most). */
  readonly #prefix = Buffer.alloc(5);
  #prefixBytes = 0;
  /** Messages whose prefix has passed. */
  messages = 0;

  constructor(private readonly maxBytes: number, private readonly onMessage?: (chunk: Buffer, at: number, length: number, compressed: boolean) => void) {}

  push(chunk: Buffer): EnvelopeStep {
    let at = 0;
    while (at < chunk.length) {
      if (this.#left > 0) {
        const take = Math.min(this.#left, chunk.length - at);
        this.#left -= take;
        at += take;
        if (this.#left === 0) this.#left = -1;
        continue;
      }
      const take = Math.min(5 - this.#prefixBytes, chunk.length - at);
      for (let i = 0; i < take; i++) this.#prefix[this.#prefixBytes + i] = chunk[at + i]!;
      this.#prefixBytes += take;
      at += take;
      if (this.#prefixBytes < 5) break;
      this.#prefixBytes = 0;
      const length = this.#prefix.readUInt32BE(1);
      if (length > this.maxBytes) return { tooLarge: length };
      this.messages++;
      this.onMessage?.(chunk, at, length, this.#prefix[0] !== 0);
      this.#left = length === 0 ? -1 : length;
    }
    return {};
  }
}

/**
 * The string in field 1 of a protobuf message whose bytes begin at `chunk[at]` (`length` bytes in
 * all), when it is the message's first field and lies whole in this chunk; '' when the message
 * does not start with field 1 (proto3 omits an empty string); undefined when it cannot be told
 * from this chunk. Field 1 is the model's name in every request of Triton's that names one
 * (ModelInferRequest.model_name, ModelMetadata/Ready/Config/StatisticsRequest.name).
 */
export function firstStringField(chunk: Buffer, at: number, length: number): string | undefined {
  if (length === 0) return '';
  if (at >= chunk.length) return undefined;
  if (chunk[at] !== 0x0a) return ''; // tag 1, wire type 2 (length-delimited)
  let n = 0;
  let shift = 0;
  let i = at + 1;
  for (;;) {
    if (i >= chunk.length || shift > 28) return undefined;
    const b = chunk[i++]!;
    n += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) break;
    shift += 7;
  }
  if (i + n > chunk.length || i + n > at + length) return undefined;
  return chunk.toString('utf8', i, i + n);
}
