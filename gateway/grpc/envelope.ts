// The gRPC message envelope (gRPC over HTTP/2: Length-Prefixed-Message = a 1-byte compressed
// flag, a 4-byte big-endian length, then the message), read in one place for every direction the
// gateway reads one: the pass-through's requests (EnvelopeScanner, which also reads what each
// message says: grpc/fields.ts), its own Health/Check, and Triton's ModelInfer answers on the h2
// data plane. The chunks are never copied: a prefix split across chunks is gathered in 5 bytes of
// its own, and a message's bytes are handed on as ranges of the chunks they came in. Like
// connect-es' envelope decoder, the declared length is seen before anything of the message.
import { type MessageFacts, type MessageFields, MessageReader } from './fields';

/** A Length-Prefixed-Message's prefix: the compressed flag and the length. */
export const PREFIX_BYTES = 5;

/** What an EnvelopeDecoder tells as it reads. */
export interface EnvelopeEvents {
  /**
   * A message's prefix has passed. false stops the decoder: nothing of this chunk or a later one
   * is read (the caller has answered, or reads no further).
   */
  prefix(compressed: boolean, length: number): boolean;
  /** Bytes of the current message, chunk[from, to): a range of the chunk pushed, never a copy. */
  data?(chunk: Buffer, from: number, to: number): void;
  /** The current message's last byte has passed (at once for an empty message). */
  end?(): void;
}

/** Push decoder of a stream of Length-Prefixed-Messages, fed chunks of any size. */
export class EnvelopeDecoder {
  /** Bytes of the current message still to pass; -1 while reading a prefix. */
  #left = -1;
  /** The prefix read so far (it may be split across chunks): its bytes, the flag and the length read of them. */
  #prefixBytes = 0;
  #compressed = false;
  #length = 0;
  #stopped = false;

  constructor(private readonly on: EnvelopeEvents) {}

  /** Reads a chunk; false once the decoder has stopped (EnvelopeEvents.prefix). */
  push(chunk: Buffer): boolean {
    if (this.#stopped) return false;
    let at = 0;
    while (at < chunk.length) {
      if (this.#left > 0) {
        const take = Math.min(this.#left, chunk.length - at);
        this.on.data?.(chunk, at, at + take);
        this.#left -= take;
        at += take;
        if (this.#left === 0) this.#ended();
        continue;
      }
      const take = Math.min(PREFIX_BYTES - this.#prefixBytes, chunk.length - at);
      for (let i = 0; i < take; i++) {
        const b = chunk[at + i]!;
        if (this.#prefixBytes + i === 0) {
          this.#compressed = b !== 0;
          this.#length = 0;
        } else {
          this.#length = this.#length * 256 + b; // big-endian uint32, exact in a double
        }
      }
      this.#prefixBytes += take;
      at += take;
      if (this.#prefixBytes < PREFIX_BYTES) break;
      this.#prefixBytes = 0;
      const length = this.#length;
      if (!this.on.prefix(this.#compressed, length)) {
        this.#stopped = true;
        return false;
      }
      this.#left = length;
      if (length === 0) this.#ended();
    }
    return true;
  }

  /** True between two messages: no part of a prefix or a message is pending. */
  get atBoundary(): boolean {
    return this.#left === -1 && this.#prefixBytes === 0;
  }

  #ended(): void {
    this.#left = -1;
    this.on.end?.();
  }
}

/** What a chunk held. */
export interface EnvelopeStep {
  /** A message declared more bytes than the bound: its length (the chunk should not be forwarded). */
  readonly tooLarge?: number;
}
const NOTHING: EnvelopeStep = Object.freeze({});

/** What an EnvelopeScanner tells of each message it reads (with `fields`). */
export interface MessageSink {
  /** What a message says, once its last byte has been pushed (within that push(), so before the chunk is forwarded). */
  message(facts: MessageFacts): void;
}

/**
 * Push scanner over one direction of a call. With `fields`, each message is read as it passes and
 * `sink` is told what it says once its last byte has been pushed. The scanner is its decoder's
 * EnvelopeEvents itself: nothing but the scanner, its decoder and its reader per call.
 */
export class EnvelopeScanner implements EnvelopeEvents {
  readonly #decoder: EnvelopeDecoder;
  readonly #reader: MessageReader | undefined;
  #compressed = false;
  /** The length a message declared over the bound (the decoder stopped there). */
  #tooLarge: EnvelopeStep = NOTHING;
  /** Messages whose prefix has passed. */
  messages = 0;
  /** Messages whose last byte has passed. */
  complete = 0;

  constructor(private readonly maxBytes: number, fields?: MessageFields, private readonly sink?: MessageSink) {
    this.#reader = fields === undefined ? undefined : new MessageReader(fields);
    this.#decoder = new EnvelopeDecoder(this);
  }

  push(chunk: Buffer): EnvelopeStep {
    return this.#decoder.push(chunk) ? NOTHING : this.#tooLarge;
  }

  /** EnvelopeEvents: the decoder's, not the caller's. */
  prefix(compressed: boolean, length: number): boolean {
    if (length > this.maxBytes) {
      this.#tooLarge = { tooLarge: length };
      return false;
    }
    this.messages++;
    this.#compressed = compressed;
    this.#reader?.begin(length);
    return true;
  }

  data(chunk: Buffer, from: number, to: number): void {
    if (!this.#compressed) this.#reader?.push(chunk, from, to);
  }

  end(): void {
    this.complete++;
    if (this.#reader === undefined) return;
    this.sink?.message(this.#compressed ? { name: undefined, unreadable: 'the message is compressed' } : this.#reader.end());
  }
}
